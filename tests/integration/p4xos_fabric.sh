#!/usr/bin/env bash
# p4xos_fabric.sh — a consensus fabric made of P4xos's own P4 programs
# (leader, three acceptors, learner: usi-systems/p4xos-public, compiled at run
# time from P4XOS_SRC) on innet's XDP target, serving the proposer and
# learner of build/bench/p4xos (tools/p4/p4xos-fabric draws it), under
# faults:
#
#   1. 5% loss and 5% duplication on every link between the flooding switch,
#      the acceptors and the learner switch (innet's link faults): 300
#      requests, 8 in flight, resent after 30 ms — every one delivered (the
#      learner side drops the second delivery of a resent request: dups);
#   2. then acceptor a2's switch stopped (a dead acceptor): 200 more, all
#      delivered by the two left (a majority of three).
#
# Checks every request delivered in each phase, and that the faulty links
# carried a bounded number of frames (no frame circling the fabric).
# Needs root, P4XOS_SRC and p4c-bm2-ss (skips, 77, without). About 15 s.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root_netns
[ -x "$INNET" ] || fail "no $INNET (make)"
[ -n "${P4XOS_SRC:-}" ] || skip "P4XOS_SRC is not set (a p4xos-public checkout or git directory)"
[ -x build/bench/p4xos ] || fail "no build/bench/p4xos (make)"
TMP=$(mktemp -d /tmp/p4xos-fabric.XXXXXX)
ST=$TMP/fabric.json
cleanup() {
	$PY tools/p4/p4xos-fabric down --state "$ST" >/dev/null 2>&1 || true
	rm -rf "$TMP"
}
fail_logs "$TMP/*.log"

rc=0
$PY tools/p4/p4test p4xos --compile-only --out "$TMP/json" >"$TMP/compile.log" 2>&1 || rc=$?
[ $rc -eq 77 ] && skip "$(tail -n 1 "$TMP/compile.log")"
[ $rc -eq 0 ] || fail "P4xos's programs did not compile"
info=$(INNET=$INNET $PY tools/p4/p4xos-fabric up --kind innet --target xdp --json-dir "$TMP/json" \
	--name "pxf$$" --loss 0.05 --dup 0.05 --state "$ST" 2>"$TMP/up.log") || fail "the fabric did not come up"
read -r pns lns dst lis bind < <($PY -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["prop_ns"], d["learn_ns"], d["dst"], d["listen"], d["bind"])' "$info")

client() { # count client-id -> the summary line
	timeout 60 build/bench/p4xos --send-ns "$pns" --recv-ns "$lns" --dst "$dst" --listen "$lis" \
		--bind "$bind" --window 8 --count "$1" --timeout-ms 30 --client "$2" --rnd $(($2 * 8)) \
		--deadline 40 2>>"$TMP/client.log"
}
kv() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }

out=$(client 300 1) || fail "loss and duplication: not every request was delivered: $out"
[ "$(echo "$out" | kv missing)" = 0 ] || fail "loss and duplication: missing requests: $out"
# no frame circles the fabric: P4xos's acceptor sends what it does not
# parse back out of its port, and the fan floods it, so one stray frame (a
# wire's own IPv6 once) became ~20,000 frames a second on each link
sleep 1
frames=$("$INNET" fabric status "$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["dir"])' "$ST")/topology.json" |
	awk '/^link / {n += $5} END {print n + 0}')
[ "$frames" -le 30000 ] || fail "the faulty links carried $frames frames for 300 requests (a loop?)"
echo "ok: 5% loss and 5% duplication: $out; $frames frames on the faulty links"
$PY tools/p4/p4xos-fabric kill --state "$ST" a2 || fail "could not stop acceptor a2"
sleep 0.5
out=$(client 200 2) || fail "a dead acceptor: not every request was delivered: $out"
[ "$(echo "$out" | kv missing)" = 0 ] || fail "a dead acceptor: missing requests: $out"
echo "ok: acceptor a2 dead: $out"
