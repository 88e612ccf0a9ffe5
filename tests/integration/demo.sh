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
# lb: both servers answer before the drain; after it, server 1 (192.0.2.11) gets no new flow
lb_line=$(grep '^lb: ' <<<"$out") || fail "lb summary missing"
# (the answers object's key order is not fixed: check key by key)
lb_before=${lb_line#*before drain }
lb_before=${lb_before%%;*}
lb_after=${lb_line#*after draining server 1 }
for ip in 192.0.2.11 192.0.2.12; do
	grep -Eq "\"$ip\": [1-9][0-9]*" <<<"$lb_before" ||
		fail "lb: both servers should answer before the drain (got $lb_before)"
done
for part in "$lb_before" "$lb_after"; do
	grep -Eq '"other": 0' <<<"$part" || fail "lb: answers from an unknown server ($part)"
done
! grep -Eq '"192.0.2.11": [1-9]' <<<"$lb_after" ||
	fail "lb: after draining server 1, its share should be 0 (got $lb_after)"
grep -Eq '"192.0.2.12": (19[0-9][0-9]|2000)\b' <<<"$lb_after" ||
	fail "lb: after the drain server 2 should answer (nearly) every query (got $lb_after)"

used=$(grep "^ECMP:" <<<"$out" | grep -o "=[1-9][0-9]*" | wc -l)
[ "$used" -ge 2 ] || fail "ECMP used $used spine(s)"
for f in examples/spine-leaf.json examples/kv.json; do
	if timeout 10 ./build/innet fabric status "$f" >/dev/null 2>&1; then
		fail "the demo left $f running"
	fi
done
echo PASS
