#!/usr/bin/env bash
# paxos_learner_filter.sh — the learner filter (src/consensus/learnfilter.bpf.c)
# under `innet paxos bench --learner-filter all` on the XDP target, with 5%
# loss and 5% duplication (tc eBPF in the links' wire namespaces) on the
# acceptors' links to the learner:
#
#                 ns coord (paxos_coordinator, eBPF)
#                ╱    │    ╲            │
#      ns a0, a1, a2 (paxos_acceptor, eBPF)
#           ╲     │     ╱  loss 5%, dup 5%
#            ns l0: innet paxos bench (proposer + learner, UDP 34953)
#                   l0's veths: netns mode's XDP_PASS, replaced by the
#                   filter for the run and put back after; its REQUESTs
#                   to coord cross a link with 2% loss and 2% duplication
#
# Checks: every command completes (no timeouts; lost 2Bs come back through
# the learner's RECOVER, whose answers the filter counts too), the filter
# passed one 2B per quorum and dropped the others (counters > 0), and the
# interfaces carry the same XDP programs before and after — also when the
# bench is stopped by SIGTERM (that run in mode redundant: nothing dropped
# before a quorum). Then, on a fresh fabric, the load generator with
# proposer threads (--threads 2): every command completes, lost REQUESTs
# are resent (the resent count is > 0), none counted twice.
# Needs root; exits 77 (skip) without it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=$(realpath "$INNET")
need_root_netns
NAME=lf$$
DIR=$(mktemp -d /tmp/innet-lf.XXXXXX)
TOPO=$DIR/topo.json
fail_logs "$DIR/*.err"
cleanup() {
	fabric_teardown "$TOPO" "$NAME"
	rm -rf "$DIR"
}

acc() { # K
	printf '{"name": "a%s", "node": %s, "workers": 1, "programs": [{"name": "acc",
	  "program": "paxos_acceptor", "udp": [34952], "args": {"id": %s, "ring": 4096,
	  "learners": [1], "learner_udp": 34953}}]}' "$1" $(($1 + 2)) "$1"
}
cat >"$TOPO" <<EOF
{"name": "$NAME", "seed": 7, "addr_base": "127.3.112.0", "target": "xdp", "netns": true,
 "state_dir": "$DIR/state",
 "switches": [
   {"name": "coord", "node": 1, "workers": 1, "programs": [{"name": "coord",
     "program": "paxos_coordinator", "udp": [34952], "args": {"acceptors": [0, 1, 2]}}]},
   $(acc 0), $(acc 1), $(acc 2)],
 "hosts": [{"name": "l0", "node": 101, "addr": "127.3.113.1"}],
 "links": [{"a": "coord", "b": "a0"}, {"a": "coord", "b": "a1"}, {"a": "coord", "b": "a2"},
           {"a": "l0", "b": "coord", "loss": 0.02, "dup": 0.02},
           {"a": "l0", "b": "a0", "loss": 0.05, "dup": 0.05},
           {"a": "l0", "b": "a1", "loss": 0.05, "dup": 0.05},
           {"a": "l0", "b": "a2", "loss": 0.05, "dup": 0.05}]}
EOF
timeout 60 "$INNET" fabric up "$TOPO" >"$DIR/up.err" 2>&1 || fail "fabric up"
# a faulty link's wire (its own namespace: veth, bridge, veth) is a cable:
# no IPv6 of its own, so no frame on the link that no node sent (it once
# sent router solicitations and MLD reports through its bridge)
wires=$(ip netns list | awk -v p="innet-$NAME-_wire" 'index($1, p) == 1 {print $1}')
[ -n "$wires" ] || fail "no wire namespaces (innet-$NAME-_wire*) for the faulty links"
for w in $wires; do
	a6=$(ip -n "$w" -6 -o addr show 2>/dev/null | grep -v ' lo ' || true)
	[ -z "$a6" ] || fail "wire $w has IPv6 addresses of its own: $a6"
done
L0=innet-$NAME-l0
progs() { ip -n "$L0" -d link show | grep -o 'prog/xdp id [0-9]*' | sort | tr '\n' ' '; }
before=$(progs)
[ -n "$before" ] || fail "no XDP program on l0's interfaces before the run (netns mode's XDP_PASS)"
echo "l0's XDP programs before: $before"

key() { grep -o "$1=[0-9]*" "$2" | tail -n 1 | cut -d= -f2; }

# 1. A measured run under faults.
timeout 40 "$INNET" paxos bench --topology "$TOPO" --name l0 --duration 3 --outstanding 16 \
	--learner-filter all >"$DIR/run.out" 2>"$DIR/run.err" || fail "bench failed"
cat "$DIR/run.out"
grep 'learner_filter ' "$DIR/run.err" || fail "no learner_filter counters"
[ "$(progs)" = "$before" ] || fail "l0's XDP programs after: $(progs), before: $before"
cmds=$(key cmds "$DIR/run.out")
[ "${cmds:-0}" -gt 1000 ] || fail "only ${cmds:-0} commands"
[ "$(key timeouts "$DIR/run.out")" = 0 ] || fail "commands timed out"
q=$(key passed_quorum "$DIR/run.err")
[ "$(key dropped_redundant "$DIR/run.err")" -gt 0 ] || fail "no redundant 2B dropped"
[ "$(key dropped_before "$DIR/run.err")" -gt 0 ] || fail "no 2B dropped before its quorum"
# One quorum per command at least (the warm-up's too, and resent requests
# take an instance each).
[ "$q" -ge "$cmds" ] || fail "$q quorums passed for $cmds commands"
grep -q 'detached=yes' "$DIR/run.err" || fail "not detached cleanly"
"$INNET" fabric status "$TOPO" 2>/dev/null | grep -E 'lost' | head -n 3 || true

# 2. Stopped by SIGTERM mid-run: still detached, counters still printed.
"$INNET" paxos bench --topology "$TOPO" --name l0 --duration 30 --outstanding 4 \
	--learner-filter all --filter-mode redundant >"$DIR/term.out" 2>"$DIR/term.err" &
pid=$!
sleep 1.5
kill -TERM "$pid"
wait "$pid" || true
grep 'learner_filter ' "$DIR/term.err" || fail "no counters after SIGTERM"
grep -q 'detached=yes' "$DIR/term.err" || fail "not detached after SIGTERM"
[ "$(key dropped_before "$DIR/term.err")" = 0 ] || fail "mode redundant dropped 2Bs before a quorum"
[ "$(key dropped_redundant "$DIR/term.err")" -gt 0 ] || fail "mode redundant dropped nothing"
[ "$(progs)" = "$before" ] || fail "l0's XDP programs after SIGTERM: $(progs), before: $before"

# 3. Proposer threads (a fresh fabric: the acceptors trimmed what the runs
#    above delivered, and a new learner starts at instance 0).
timeout 30 "$INNET" fabric down "$TOPO" >/dev/null 2>&1 || fail "fabric down"
timeout 60 "$INNET" fabric up "$TOPO" >"$DIR/up2.err" 2>&1 || fail "fabric up (again)"
before=$(progs)
timeout 40 "$INNET" paxos bench --topology "$TOPO" --name l0 --duration 3 --outstanding 16 \
	--learner-filter all --threads 2 >"$DIR/thr.out" 2>"$DIR/thr.err" || fail "bench --threads failed"
cat "$DIR/thr.out"
grep 'proposer threads' "$DIR/thr.err" || fail "no proposer thread summary"
tcmds=$(key cmds "$DIR/thr.out")
[ "${tcmds:-0}" -gt 1000 ] || fail "--threads 2: only ${tcmds:-0} commands"
[ "$(key timeouts "$DIR/thr.out")" = 0 ] || fail "--threads 2: commands lost"
resent=$(grep -o '[0-9]* resent' "$DIR/thr.err" | cut -d' ' -f1)
[ "${resent:-0}" -gt 0 ] || fail "--threads 2: no REQUEST resent across a lossy link"
[ "$(progs)" = "$before" ] || fail "l0's XDP programs after --threads: $(progs), before: $before"
echo "ok: learner filter: $cmds commands, $q quorums, nothing left attached;" \
	"proposer threads: $tcmds commands, $resent REQUESTs resent"
