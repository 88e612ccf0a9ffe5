#!/usr/bin/env bash
# build_progress.sh — scripts/build (what scripts/demo and scripts/test build
# with) prints progress instead of building in silence, passes compiler
# errors through, and exits with make's status. It builds three object files
# into a private output directory (O=...), so it is quick and leaves the
# tree's build/ alone:
#
#   1. a fresh build: "3 steps", [1/3] [2/3] [3/3] (BUILD_EVERY=1), "done in"
#   2. nothing to do: silent, exit 0
#   3. a compiler that fails (an unknown -W option): its error is shown and
#      the exit status is not 0
#   4. steps that are not compiles (the contract check of a data path, a man
#      page): only progress lines, never make's raw command lines
set -euo pipefail
. "$(dirname "$0")/lib.sh"
O=$(mktemp -d /tmp/innet-build-progress.XXXXXX)
cleanup() { rm -rf "$O"; }
targets=("$O/src/lb/maglev.o" "$O/src/lb/frame.o" "$O/src/lb/report.o")

echo "--- 1. a fresh build of 3 objects"
out=$(BUILD_EVERY=1 nice scripts/build O="$O" "${targets[@]}" 2>&1) || fail "scripts/build failed: $out"
echo "$out"
grep -q "^build: 3 steps" <<<"$out" || fail "no line announcing the steps"
for i in 1 2 3; do grep -q "^build: \[$i/3\] $O/src/lb/" <<<"$out" || fail "no progress line $i/3"; done
grep -q "^build: done in [0-9]* s" <<<"$out" || fail "no closing line"
for t in "${targets[@]}"; do [ -f "$t" ] || fail "$t not built"; done

echo "--- 2. nothing to do"
out=$(scripts/build O="$O" "${targets[@]}" 2>&1) || fail "an up-to-date build failed: $out"
[ -z "$out" ] || fail "an up-to-date build printed: $out"

echo "--- 3. a failing compiler: error shown, exit status kept"
rm -f "${targets[@]}"
rc=0
out=$(scripts/build O="$O" CFLAGS=-Wthis-option-does-not-exist "${targets[0]}" 2>&1) || rc=$?
echo "$out"
[ $rc -ne 0 ] || fail "a failed build exited 0"
grep -q "this-option-does-not-exist" <<<"$out" || fail "the compiler's error was not shown"
grep -q "make failed" <<<"$out" || fail "no closing failure line"

echo "--- 4. the contract check and a man page: progress lines only"
out=$(BUILD_EVERY=1 scripts/build O="$O" "$O/src/programs/l2fwd_dp.o" "$O/man/innet-ping.1" 2>&1) ||
	fail "scripts/build failed: $out"
echo "$out"
[ -f "$O/man/innet-ping.1" ] || fail "the man page was not built"
raw=$(grep -v '^build: ' <<<"$out" || true)
[ -z "$raw" ] || fail "raw command lines among the progress: $raw"
echo PASS
