#!/usr/bin/env bash
# demo.sh — the README's main job (scripts/demo) still works end to end:
# the spine/leaf fabric comes up, probes cross it with no loss, ECMP uses
# more than one spine, the counter service stays consistent, the services run
# (DNN logits bit-exact, the KV store replicates through Paxos, all-reduce
# sums correctly), and everything goes down again (no process left behind).
set -euo pipefail
cd "$(dirname "$0")/../.."
fail() { echo "FAIL: $*" >&2; exit 1; }
out=$(timeout 240 ./scripts/demo 2>&1) || fail "scripts/demo failed:
$out"
echo "$out" | tail -n 8
grep -q "^routing: *50 sent, 50 received, 0.0% loss" <<<"$out" || fail "routing summary"
grep -q "counter moved by 20000: consistent" <<<"$out" || fail "counter summary"
grep -q "^inference: .*359/359 bit-exact with the C reference" <<<"$out" || fail "inference summary"
grep -q '^kv: .*GET "chosen by consensus" from another replica, INCR x3 -> 3' <<<"$out" || fail "kv summary"
grep -q "^allreduce:  4/4 workers correct" <<<"$out" || fail "allreduce summary"
used=$(grep "^ECMP:" <<<"$out" | grep -o "=[1-9][0-9]*" | wc -l)
[ "$used" -ge 2 ] || fail "ECMP used $used spine(s)"
for f in examples/spine-leaf.json examples/kv.json; do
	if timeout 10 ./build/innet fabric status "$f" >/dev/null 2>&1; then
		fail "the demo left $f running"
	fi
done
echo PASS
