# shellcheck shell=bash
# lib.sh — what the integration tests share. Each test sources it first,
#
#     set -euo pipefail
#     . "$(dirname "$0")/lib.sh"
#
# and draws its own topology in its header. lib.sh moves to the repository
# root and sets ROOT, INNET (build/innet unless the environment says) and PY
# (Debian's /usr/bin/python3, which sees Debian's python3-* packages). It
# owns the EXIT trap: at exit it runs the test's cleanup() if the test
# defines one, then stops what spawn started (by pid, SIGTERM then SIGKILL).
#
#   fail MSG...          "FAIL: MSG" on stderr, then the last lines of the
#                        logs fail_logs named and the test's fail_details()
#                        if it defines one; exit 1
#   fail_logs GLOB...    logs worth seeing when the test fails; quote the
#                        globs ('"$STATE"/kv-*.log'): they are expanded then
#   skip MSG...          "skip: MSG", exit 77 (tests/run counts a skip): for
#                        a test that cannot run at all
#   skip_part MSG...     "skip part: MSG" and go on: for one part of a test
#                        that cannot run here (tests/run lists these parts
#                        beside the passes; a test never drops a part
#                        silently)
#   need_root_netns      skip unless root with a working `ip netns` (netns,
#                        XDP tests)
#   need_root WHY        skip unless root (WHY: what needs it)
#   need_cmd CMD...      skip unless every CMD is on PATH
#   have_root_netns      true if root with a working `ip netns` (for a part)
#   spawn VAR CMD...     CMD in the background, its pid in VAR, stopped at exit
#   fabric_teardown TOPO NAME  `innet fabric down TOPO`, then any namespace
#                        innet-NAME-* left (for cleanup() of netns tests)
#   in_ns NS CMD...      CMD inside network namespace NS
#   slow N               N times the machine's slowness factor (SLOW: 1 idle
#                        .. 4, from tests/run's INNET_TEST_SLOW or the load
#                        average): for a time limit that guards against a
#                        hang and must not fail a busy machine's slow run
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
INNET=${INNET:-./build/innet}
PY=/usr/bin/python3
FAIL_TAIL=${FAIL_TAIL:-10}
SLOW=${INNET_TEST_SLOW:-$(awk -v n="$(nproc 2>/dev/null || echo 1)" '{ f = int(($1 + n - 1) / n)
	print (f < 1 ? 1 : (f > 4 ? 4 : f)) }' /proc/loadavg 2>/dev/null || echo 1)}
_lib_logs=()
_lib_pids=()

fail() {
	echo "FAIL: $*" >&2
	local g f
	for g in "${_lib_logs[@]}"; do
		for f in $(eval "echo $g"); do
			[ -f "$f" ] && { echo "--- $f"; tail -n "$FAIL_TAIL" "$f"; }
		done
	done >&2
	if declare -F fail_details >/dev/null; then
		fail_details >&2 || true
	fi
	exit 1
}

fail_logs() { _lib_logs+=("$@"); }

skip() { echo "skip: $*"; exit 77; }

skip_part() { echo "skip part: $*"; }

have_root_netns() { [ "$(id -u)" -eq 0 ] && ip netns list >/dev/null 2>&1; }

need_root_netns() {
	have_root_netns || skip "needs root and ip netns"
}

need_root() {
	[ "$(id -u)" -eq 0 ] || skip "needs root ($*)"
}

need_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null || skip "$c is not installed (scripts/install-deps)"
	done
}

spawn() {
	local var=$1
	shift
	"$@" &
	_lib_pids+=($!)
	printf -v "$var" '%s' "$!"
}

in_ns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

slow() { echo $(($1 * SLOW)); }

# fabric_teardown TOPO NAME: `innet fabric down` of a netns-mode fabric, then
# any namespace innet-NAME-* it left (a test that failed half-way up).
fabric_teardown() {
	local ns
	timeout 30 "$INNET" fabric down "$1" >/dev/null 2>&1 || true
	for ns in $(ip netns list | awk '{print $1}' | grep "^innet-$2-" || true); do
		ip netns del "$ns" 2>/dev/null || true
	done
}

_lib_exit() {
	local rc=$? p
	set +eu   # a test may exit (skip, fail) before cleanup's variables are set
	if declare -F cleanup >/dev/null; then
		cleanup
	fi
	for p in "${_lib_pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${_lib_pids[@]}"; do
		for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null
	done
	exit "$rc"
}
trap _lib_exit EXIT
