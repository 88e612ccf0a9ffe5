#!/usr/bin/env bash
# p4xos_programs.sh — P4xos's own P4_16 programs (leader, acceptor, learner
# of usi-systems/p4xos-public, compiled with p4c-bm2-ss at run time from
# P4XOS_SRC: a checkout or its git directory; nothing of it is in the
# project) driven with frames in P4xos's header on innet's user-space
# engine, on the XDP target (root) and on BMv2 (when simple_switch is
# there): the protocol's expectations on each (the leader numbers
# instances, an acceptor votes and answers a 1A with its vote, the learner
# delivers once two acceptors voted), the same frames out of every target,
# the same register reads. Skips (77) without p4c-bm2-ss or P4XOS_SRC.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ -x "$INNET" ] || fail "no $INNET (make)"
[ -n "${P4XOS_SRC:-}" ] || skip "P4XOS_SRC is not set (a p4xos-public checkout or git directory)"
targets=user
[ "$(id -u)" -eq 0 ] && targets=$targets,xdp
if command -v "${SIMPLE_SWITCH:-simple_switch}" >/dev/null && command -v "${SIMPLE_SWITCH_CLI:-simple_switch_CLI}" >/dev/null; then
	targets=bmv2,$targets
fi
rc=0
INNET=$INNET $PY tools/p4/p4test p4xos --targets "$targets" || rc=$?
[ $rc -eq 77 ] && skip "p4c-bm2-ss not found (P4C_BM2_SS)"
[ $rc -eq 0 ] || fail "P4xos's programs did not behave (targets $targets)"
echo "ok: P4xos's leader, acceptor and learner on $targets"
