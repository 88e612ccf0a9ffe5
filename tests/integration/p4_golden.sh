#!/usr/bin/env bash
# p4_golden.sh — golden packet tests of the project's P4 programs: each
# p4/NAME.json with p4/NAME.commands, then tests/p4/NAME.stf (frames in,
# the frames expected out, per port; written by tests/p4/mkstf.py from the
# programs' specification), on innet's user-space engine and on the XDP
# target (`innet p4 run`), and on BMv2 when simple_switch is there
# (SIMPLE_SWITCH, SIMPLE_SWITCH_CLI). The CLI reads in the tests (counters,
# registers) must agree between the targets that ran.
#
# The XDP target needs root; without it only the user-space engine runs
# (and the test says so). P4_GOLDEN_TARGETS=user,xdp,bmv2 forces a list.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ -x "$INNET" ] || fail "no $INNET (make)"
targets=${P4_GOLDEN_TARGETS:-}
if [ -z "$targets" ]; then
	targets=user
	if [ "$(id -u)" -eq 0 ]; then targets=$targets,xdp; else echo "note: not root: the XDP target is not run"; fi
	if command -v "${SIMPLE_SWITCH:-simple_switch}" >/dev/null && command -v "${SIMPLE_SWITCH_CLI:-simple_switch_CLI}" >/dev/null; then
		targets=$targets,bmv2
	else
		echo "note: BMv2 not found: innet only"
	fi
fi
bad=0
for stf in tests/p4/*.stf; do
	[ -e "$stf" ] || skip "no tests/p4/*.stf in this tree (the project's P4 programs' golden tests)"
	name=$(basename "$stf" .stf)
	[ -f "p4/$name.json" ] || fail "no p4/$name.json for $stf"
	cmds=()
	[ -f "p4/$name.commands" ] && cmds=(--commands "p4/$name.commands")
	if ! INNET=$INNET $PY tools/p4/p4test stf --targets "$targets" --cli-agree --json "p4/$name.json" "${cmds[@]}" "$stf"; then
		bad=$((bad + 1))
	fi
done
[ $bad -eq 0 ] || fail "$bad golden test(s) failed"
echo "ok: every tests/p4/*.stf passed on $targets"
