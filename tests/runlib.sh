# shellcheck shell=bash
# tests/runlib.sh — how tests/run runs one test and counts it: sourced by
# tests/run, and by tests/integration/suite_accounting.sh, which checks this
# accounting on tests made to pass, fail, skip and skip a part.
#
#   run_one NAME CMD...   run CMD (bounded in time: test_limit), its output in
#                         $LOGDIR/NAME.log; one line: ok, skip (exit 77, with
#                         the test's "skip: why"), or FAIL and the log's tail
#   summary               the closing lines: what skipped and why, what passed
#                         with parts skipped, what failed, and
#                         "N passed (M of them with parts skipped), N failed, N skipped"
#
# A skip is never a pass: a test that cannot run here exits 77 and says why
# ("skip: why", tests/integration/lib.sh's skip); a passing test that left a
# part out says which ("skip part: what", lib.sh's skip_part; a cmocka case
# that skipped: "[  SKIPPED ]" and its "skip: why", tests/unit/testutil.h's
# test_skip); a cmocka binary whose every case skipped ran nothing and counts
# as a skip.
LOGDIR=${LOGDIR:-$(mktemp -d /tmp/innet-tests.XXXXXX)}

# How much slower than idle the machine is now: the 1-minute load average
# per CPU, rounded up, between 1 and 4. A test's time limits guard against
# hangs, not against a busy machine: the suite's limit per test (300 s) and
# the limits tests set themselves (tests/integration/lib.sh's slow N) are
# multiplied by it. INNET_TEST_SLOW=N fixes it.
slow_factor() {
	if [ -n "${INNET_TEST_SLOW:-}" ]; then
		echo "$INNET_TEST_SLOW"
		return
	fi
	awk -v n="$(nproc 2>/dev/null || echo 1)" '{ f = int(($1 + n - 1) / n)
		print (f < 1 ? 1 : (f > 4 ? 4 : f)) }' /proc/loadavg 2>/dev/null || echo 1
}

# The time limit of a test starting now: TEST_TIMEOUT if set, else 300 s
# times slow_factor.
test_limit() { echo "${TEST_TIMEOUT:-$((300 * $1))}"; }

pass=0 fail=0 skip=0
failed=()
skipped=()    # "name: why" of each test that skipped (exit 77)
partial=()    # "name: what" of each passing test that left a part out

# parts_skipped LOG: what a passing test did not run, one line, empty if it
# ran everything: the cases cmocka skipped (with the "skip: why" lines the
# cases printed, tests/unit/testutil.h's test_skip) and the "skip part: what"
# lines of an integration test (lib.sh's skip_part).
parts_skipped() {
	local log=$1 n cases why parts
	n=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test(s), listed below:$/\1/p' "$log" | tail -n 1)
	if [ -n "$n" ]; then
		cases=$(sed -n '/listed below:$/,$ s/^\[  SKIPPED \] \([A-Za-z0-9_]*\)$/\1/p' "$log" | paste -sd ' ')
		why=$(sed -n 's/^skip: //p' "$log" | sort -u | paste -sd ';' | sed 's/;/; /g')
		printf '%s of %s cases skipped (%s)%s\n' "$n" \
			"$(sed -n 's/^\[==========\] \([0-9]*\) test(s) run\.$/\1/p' "$log" | tail -n 1)" \
			"$cases" "${why:+: $why}"
	fi
	parts=$(sed -n 's/^skip part: //p' "$log" | paste -sd ';' | sed 's/;/; /g')
	[ -z "$parts" ] || echo "$parts"
}

run_one() { # name, command...
	local name=$1; shift
	local log
	log="$LOGDIR/$(echo "$name" | tr '/ ' '__').log"
	local t0=$SECONDS rc why parts slow limit
	slow=$(slow_factor)
	limit=$(test_limit "$slow")
	INNET_TEST_SLOW=$slow timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
	rc=$?
	[ $rc -ne 124 ] || echo "(the time limit, ${limit} s, ran out: slow factor $slow)" >>"$log"
	# a cmocka binary whose every case skipped ran nothing: a skip
	if [ $rc -eq 0 ] && grep -q '^\[  PASSED  \] 0 test(s)\.$' "$log" && grep -q '^\[  SKIPPED \]' "$log"; then
		rc=77
	fi
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1))
		parts=$(parts_skipped "$log" | paste -sd ';' | sed 's/;/; /g')
		if [ -n "$parts" ]; then
			partial+=("$name: $parts")
			printf 'ok    %-48s %3ds  (skipped: %s)\n' "$name" $((SECONDS - t0)) "$parts"
		else
			printf 'ok    %-48s %3ds\n' "$name" $((SECONDS - t0))
		fi
	elif [ $rc -eq 77 ]; then
		skip=$((skip + 1))
		why=$(sed -n 's/^skip: //p' "$log" | tail -n 1)
		[ -n "$why" ] || why=$(parts_skipped "$log")
		[ -n "$why" ] || why="(gave no reason: $(tail -n 1 "$log"))"
		skipped+=("$name: $why")
		printf 'skip  %-48s %s\n' "$name" "$why"
	else
		fail=$((fail + 1))
		failed+=("$name")
		printf 'FAIL  %-48s %3ds (exit %d)\n' "$name" $((SECONDS - t0)) $rc
		sed 's/^/      | /' "$log" | tail -n 40
	fi
}

summary() {
	echo
	if [ ${#skipped[@]} -gt 0 ]; then
		echo "skipped (did not run; not counted as passed):"
		printf '  %s\n' "${skipped[@]}"
	fi
	if [ ${#partial[@]} -gt 0 ]; then
		echo "passed with parts skipped:"
		printf '  %s\n' "${partial[@]}"
	fi
	[ ${#failed[@]} -eq 0 ] || printf 'failed: %s\n' "${failed[@]}"
	echo "logs: $LOGDIR"
	echo "$pass passed (${#partial[@]} of them with parts skipped), $fail failed, $skip skipped"
}
