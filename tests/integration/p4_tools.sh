#!/usr/bin/env bash
# p4_tools.sh — unit tests of tools/p4/p4t (tests/p4/test_p4t.py): the STF
# language and its errors, the translation of add/setdefault into
# simple_switch_CLI commands (names, key notations, priorities), frame
# matching, the differential tester's generator and comparison, and that
# tests/p4/mkstf.py writes the committed golden STF files. Needs nothing
# but Debian's python3; with P4C_SRC it also parses every STF of that p4c
# tree. About a second.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
$PY tests/p4/test_p4t.py || fail "tools/p4 unit tests"
if [ -f tests/p4/mkstf.py ]; then   # (with the project's P4 programs, branch p4test)
	$PY tests/p4/mkstf.py --check || fail "tests/p4/*.stf are not what tests/p4/mkstf.py writes"
fi
echo "ok: tools/p4 unit tests"
