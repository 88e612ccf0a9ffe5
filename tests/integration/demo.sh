#!/usr/bin/env bash
# demo.sh — the README's main job (scripts/demo) still works end to end:
# the spine/leaf fabric comes up, probes cross it with no loss, ECMP uses
# more than one spine, the counter service stays consistent, the services run
# (DNN logits bit-exact, the KV store replicates through Paxos, all-reduce
# sums correctly), and everything goes down again (no process left behind).
#
# It also must not touch anyone else's fabric: as root (else this part is
# skipped), the test runs in a mount namespace of its own with a private
# /tmp, brings up two small "decoy" fabrics under the names and state
# directories of examples/spine-leaf.json and examples/kv.json (which the
# demo used to take down and reuse), and checks they still run after the
# demo. Everything the demo started is gone afterwards: its state directory
# and every process naming it.
set -euo pipefail
SELF=$(realpath "$0")   # (lib.sh moves to the repository root)
. "$(dirname "$0")/lib.sh"
INNET=./build/innet
if [ "$(id -u)" -eq 0 ] && [ -z "${DEMO_TEST_PRIVATE_TMP:-}" ] && command -v unshare >/dev/null; then
	exec unshare --mount --propagation private -- env DEMO_TEST_PRIVATE_TMP=1 bash "$SELF" "$@"
fi
decoys=()
if [ -n "${DEMO_TEST_PRIVATE_TMP:-}" ]; then
	# A private /tmp hides a clone that lives under /tmp (as CI's may): keep
	# the clone visible at its own path through a bind mount made first.
	repo=$(pwd -P)
	hold=$(mktemp -d /run/innet-demo-test.XXXXXX)
	mount --bind "$repo" "$hold"
	mount -t tmpfs -o size=256m,mode=1777 tmpfs /tmp
	if [ ! -d "$repo/scripts" ]; then
		mkdir -p "$repo"
		mount --bind "$hold" "$repo"
	fi
	umount "$hold" && rmdir "$hold"
	cd "$repo"
	kv_state=$(/usr/bin/python3 -c 'import json; print(json.load(open("examples/kv.json")).get("state_dir", "/tmp/innet-kv"))')
	n=$(($$ % 200 + 20))
	for d in "spine-leaf:/tmp/innet-spine-leaf:97" "kv:$kv_state:98"; do
		IFS=: read -r name dir net <<<"$d"
		/usr/bin/python3 tools/topology/relocate.py examples/single.json "/tmp/decoy-$name.json" \
			--name "$name" --state-dir "$dir" --addr-base "127.$net.$n.0" --hosts "127.$net.$((n + 1))"
		timeout 30 "$INNET" fabric up "/tmp/decoy-$name.json" >/dev/null || fail "decoy $name did not come up"
		decoys+=("/tmp/decoy-$name.json")
	done
	cleanup() { for f in "${decoys[@]}"; do timeout 30 "$INNET" fabric down "$f" >/dev/null 2>&1 || true; done; }
	echo "decoy fabrics up: spine-leaf in /tmp/innet-spine-leaf, kv in $kv_state"
else
	skip_part "the decoy-fabric check (needs root and unshare: a private /tmp)"
fi
t0=$SECONDS
out=$(timeout 300 ./scripts/demo 2>&1) || fail "scripts/demo failed:
$out"
echo "scripts/demo took $((SECONDS - t0)) s"
echo "$out" | tail -n 8
for f in "${decoys[@]}"; do
	timeout 10 "$INNET" fabric status "$f" >/dev/null || fail "the demo disturbed the decoy fabric $f"
done
[ ${#decoys[@]} -eq 0 ] || echo "decoys still running after the demo"
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
run=$(sed -n 's/^demo: fabrics .*, state in \(.*\)$/\1/p' <<<"$out")
[ -n "$run" ] || fail "the demo did not say where its state is"
[ ! -e "$run" ] || fail "the demo left $run behind"
left=$(grep -l -- "$run" /proc/[0-9]*/cmdline 2>/dev/null || true)
[ -z "$left" ] || fail "the demo left processes running: $left"
echo PASS
