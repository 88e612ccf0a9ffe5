#!/usr/bin/env bash
# install_deps.sh — scripts/install-deps waits for another apt instead of
# failing at once (a freshly booted Debian runs unattended upgrades), says
# who holds the lock, gives up after INSTALL_DEPS_LOCK_TIMEOUT, and prints
# progress. In a sandbox: APT_CONFIG points apt at a package list directory,
# cache and sources of this test's own (a local file: repository with one
# dummy package, innet-lockwait-test), so nothing is downloaded and the
# system's apt state is never touched; `--dry-run` simulates the install.
# Another apt is played by a process holding the sandbox's list lock with
# fcntl(F_SETLKW), the kind of lock apt takes.
#
#   1. lock held 4 s: install-deps prints "waiting ... held by process PID",
#      then goes on and would install the package (exit 0, >= 3 s).
#   2. lock held 30 s, INSTALL_DEPS_LOCK_TIMEOUT=3: it gives up with apt's
#      message in well under 30 s (exit != 0).
# Bounded (~15 s). Root only (apt-get update's lock directory), skipped otherwise.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ROOT=$PWD
PY=/usr/bin/python3
[ "$(id -u)" -eq 0 ] || skip "needs root (apt-get update)"
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || skip "not a Debian system"

T=$(mktemp -d /tmp/innet-install-deps-test.XXXXXX)
holder=""
cleanup() {
	if [ -n "$holder" ]; then
		kill "$holder" 2>/dev/null || true
		wait "$holder" 2>/dev/null || true
	fi
	rm -rf "$T"
}

echo "--- a sandboxed apt: one local repository with a dummy package"
mkdir -p "$T/pkg/DEBIAN" "$T/repo" "$T/lists/partial" "$T/cache/archives/partial" \
	"$T/etc/sources.list.d" "$T/etc/preferences.d"
printf 'Package: innet-lockwait-test\nVersion: 1.0\nArchitecture: all\nMaintainer: innet tests <tests@innet.invalid>\nDescription: dummy package of tests/integration/install_deps.sh\n' \
	>"$T/pkg/DEBIAN/control"
dpkg-deb -b "$T/pkg" "$T/repo/innet-lockwait-test_1.0_all.deb" >/dev/null
deb=$T/repo/innet-lockwait-test_1.0_all.deb
{
	cat "$T/pkg/DEBIAN/control"
	echo "Filename: ./$(basename "$deb")"
	echo "Size: $(stat -c %s "$deb")"
	echo "SHA256: $(sha256sum "$deb" | cut -d' ' -f1)"
	echo
} >"$T/repo/Packages"
echo "deb [trusted=yes] file:$T/repo ./" >"$T/etc/sources.list"
cat >"$T/apt.conf" <<EOF
Dir::State::Lists "$T/lists/";
Dir::Cache "$T/cache/";
Dir::Etc::sourcelist "$T/etc/sources.list";
Dir::Etc::sourceparts "$T/etc/sources.list.d/";
Dir::Etc::preferencesparts "$T/etc/preferences.d/";
APT::Sandbox::User "root";
EOF
export APT_CONFIG=$T/apt.conf
dpkg-query -W -f='${Status}' innet-lockwait-test 2>/dev/null | grep -q "install ok installed" &&
	fail "innet-lockwait-test is installed on this system (remove it)"

# hold SECS: hold the sandbox's list lock (fcntl, as apt does) in the background.
hold() {
	"$PY" -c '
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o640)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
' "$T/lists/lock" "$1" >"$T/holder.out" &
	holder=$!
	for _ in $(seq 50); do grep -q holding "$T/holder.out" && return 0; sleep 0.1; done
	fail "could not take the lock"
}

echo "--- 1. another apt holds the lock for 4 s: install-deps waits, then goes on"
hold 4
t0=$(date +%s.%N)
out=$(timeout 60 scripts/install-deps --dry-run innet-lockwait-test 2>&1) || fail "install-deps failed: $out"
t1=$(date +%s.%N)
echo "$out" | sed 's/^/    /'
wait "$holder" || true
holder=""
grep -q "waiting for another apt/dpkg to finish (held by process [0-9]*" <<<"$out" ||
	fail "no message naming the lock's holder"
grep -q "would install innet-lockwait-test" <<<"$out" || fail "it did not go on after the lock was released"
grep -q "missing 1 package(s): innet-lockwait-test" <<<"$out" || fail "no progress line naming what is missing"
"$PY" -c "import sys; sys.exit(0 if $t1 - $t0 >= 3 else 1)" || fail "it did not wait for the lock"

echo "--- 2. the lock stays held: it gives up after INSTALL_DEPS_LOCK_TIMEOUT (3 s)"
hold 30
t0=$(date +%s.%N)
rc=0
out=$(INSTALL_DEPS_LOCK_TIMEOUT=3 timeout 25 scripts/install-deps --dry-run innet-lockwait-test 2>&1) || rc=$?
t1=$(date +%s.%N)
echo "$out" | sed 's/^/    /'
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "exit $rc: expected a failure of its own, not success or the test's timeout"
grep -q "Could not get lock" <<<"$out" || fail "apt's lock message not shown"
"$PY" -c "import sys; sys.exit(0 if $t1 - $t0 < 15 else 1)" || fail "it did not give up in time"
echo "PASS install_deps"
