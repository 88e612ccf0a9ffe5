#!/usr/bin/env bash
# suite_accounting.sh — the suite's own honesty: a test that cannot run is
# counted as a skip (never as a pass) with its reason, a test that left a
# part out says which, and every integration script runs on its own.
#
#   1. every tests/integration/*.sh (lib.sh apart: it is sourced) is
#      executable, in the work tree and in git, starts with a bash shebang
#      and sources lib.sh from its own directory (so it runs from any cwd);
#      every file git tracks that starts with '#!' is executable in git;
#   2. fixture tests run from another directory through lib.sh: one passes,
#      one skips (need_cmd of a tool that does not exist: exit 77), one skips
#      a part (skip_part), one fails;
#   3. tests/runlib.sh (what tests/run counts with) on those and on two cmocka
#      binaries, one with a skipped case and one whose every case skips: the
#      counts, the one-line results and the summary's lists.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d /tmp/innet-suite-acct.XXXXXX)
cleanup() { rm -rf "$T"; }

echo "--- 1. every integration script runs on its own"
n=0
for f in tests/integration/*.sh; do
	[ "$(basename "$f")" = lib.sh ] && continue
	[ -x "$f" ] || fail "$f is not executable"
	[ "$(head -n 1 "$f")" = "#!/usr/bin/env bash" ] || fail "$f: first line is not #!/usr/bin/env bash"
	grep -q '^\. "$(dirname "$0")/lib.sh"$' "$f" ||
		grep -q '^exec env [A-Z_]*=[a-z]* bash "$(dirname "$0")/[a-z_]*\.sh"$' "$f" ||
		fail "$f neither sources lib.sh from its own directory nor execs a sibling"
	n=$((n + 1))
done
if git rev-parse --git-dir >/dev/null 2>&1; then
	bad=$(git ls-files -s tests/integration | awk '$4 != "tests/integration/lib.sh" && $1 != "100755" { print $4 }')
	[ -z "$bad" ] || fail "not executable in git (git update-index --chmod=+x): $bad"
	# every tracked file with a shebang, anywhere in the tree (scripts/,
	# bench/, tools/, tests/, src/): run directly, it must not be refused
	bad=$(git ls-files -s | awk '$1 == "100644" { print $4 }' | while IFS= read -r g; do
		[ "$(head -c 2 "$g" 2>/dev/null | tr -d '\000')" = '#!' ] && echo "$g"; done; true)
	[ -z "$bad" ] || fail "starts with #! but is not executable in git (git update-index --chmod=+x): $bad"
else
	skip_part "the git modes (not a git checkout)"
fi
echo "ok: $n scripts"

echo "--- 2. fixture tests through lib.sh, run from elsewhere"
mkdir -p "$T/tree/tests/integration"
cp tests/integration/lib.sh "$T/tree/tests/integration/"
fixture() { # NAME BODY
	printf '#!/usr/bin/env bash\nset -euo pipefail\n. "$(dirname "$0")/lib.sh"\n%s\n' "$2" \
		>"$T/tree/tests/integration/$1.sh"
	chmod +x "$T/tree/tests/integration/$1.sh"
}
fixture pass 'echo "in $PWD"; echo PASS'
fixture skips 'need_cmd innet-no-such-tool-$$; echo "not reached"'
fixture part 'skip_part "the far half (no peer here)"; echo PASS'
fixture fails 'fail "on purpose"'
rc=0; (cd / && "$T/tree/tests/integration/pass.sh") >"$T/pass.out" || rc=$?
[ $rc -eq 0 ] && grep -qx "in $T/tree" "$T/pass.out" || fail "pass.sh from /: exit $rc, $(cat "$T/pass.out")"
rc=0; (cd / && "$T/tree/tests/integration/skips.sh") >"$T/skips.out" || rc=$?
[ $rc -eq 77 ] && grep -q "^skip: innet-no-such-tool-.* is not installed" "$T/skips.out" ||
	fail "need_cmd of a missing tool: exit $rc, $(cat "$T/skips.out")"
echo "ok: lib.sh moves to the tree's root; a missing tool is a skip (77) that says why"

echo "--- 3. tests/runlib.sh counts them"
cat >"$T/cases.c" <<'CEOF'
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>
#include "unit/testutil.h"
static void runs(void **s) { (void)s; assert_int_equal(1 + 1, 2); }
static void cannot(void **s) { (void)s; test_skip("needs a thing this machine lacks"); }
int main(int argc, char **argv)
{
	const struct CMUnitTest all[] = { cmocka_unit_test(runs), cmocka_unit_test(cannot) };
	const struct CMUnitTest none[] = { cmocka_unit_test(cannot) };
	return argc > 1 ? cmocka_run_group_tests(none, NULL, NULL) : cmocka_run_group_tests(all, NULL, NULL);
}
CEOF
${CC:-cc} -Iinclude -Itests -o "$T/cases" "$T/cases.c" -lcmocka || fail "cannot build the cmocka fixture"
(
	set +e   # (as in tests/run: a failing test must not end the run)
	LOGDIR=$T/logs
	mkdir -p "$LOGDIR"
	. tests/runlib.sh
	for f in pass skips part fails; do run_one "integration/$f" bash "$T/tree/tests/integration/$f.sh"; done
	run_one unit/some_skip "$T/cases"
	run_one unit/all_skip "$T/cases" all
	summary
) >"$T/run.out" 2>&1
cat "$T/run.out"
want() { grep -qE -- "$1" "$T/run.out" || fail "tests/runlib.sh: no line matching '$1'"; }
want '^ok    integration/pass '
want '^skip  integration/skips +innet-no-such-tool-[0-9]+ is not installed'
want '^ok    integration/part .*\(skipped: the far half \(no peer here\)\)$'
want '^FAIL  integration/fails .*\(exit 1\)'
want '^ok    unit/some_skip .*\(skipped: 1 of 2 cases skipped \(cannot\): needs a thing this machine lacks\)$'
want '^skip  unit/all_skip +needs a thing this machine lacks$'
want '^skipped \(did not run; not counted as passed\):$'
want '^  integration/skips: innet-no-such-tool'
want '^  unit/all_skip: needs a thing this machine lacks$'
want '^passed with parts skipped:$'
want '^  integration/part: the far half'
want '^  unit/some_skip: 1 of 2 cases skipped'
want '^failed: integration/fails$'
want '^3 passed \(2 of them with parts skipped\), 1 failed, 2 skipped$'
echo "ok: skips counted apart from passes and listed with their reasons"
