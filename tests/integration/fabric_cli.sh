#!/usr/bin/env bash
# fabric_cli.sh — what a user sees around a fabric's life, on a private copy
# of examples/single.json (h0 -- s0 -- h1; its own name, state directory and
# addresses, so it never meets another fabric on this machine):
#
#   1. `innet ping` before `fabric up`: says at once (< 2 s, not after a
#      timeout per probe) that the fabric is not running and how to start it.
#   2. up, ping: every probe comes back.
#   3. `fabric down`: removes the sockets, the state file, the logs and the
#      (then empty) state directory, and says so.
#   4. up again, `fabric down --keep-logs`: the switch's log stays, and the
#      message says where; ping afterwards says the fabric is not running.
# Bounded (~10 s); the trap takes the fabric down whatever happens.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=${INNET:-./build/innet}
step() { echo "--- $*"; }

TMP=$(mktemp -d /tmp/innet-fabric-cli.XXXXXX)
STATE=$TMP/state
TOPO=$TMP/single.json
cleanup() {
	timeout 30 "$INNET" fabric down "$TOPO" >/dev/null 2>&1 || true
	rm -rf "$TMP"
}
n=$(($$ % 200 + 20))
/usr/bin/python3 tools/topology/relocate.py examples/single.json "$TOPO" --name "fabric-cli-$$" \
	--state-dir "$STATE" --addr-base "127.93.$n.0" --hosts "127.94.$n"
# A copy renamed without --state-dir gets its own name's state directory,
# never the original's (which two fabrics would then share).
/usr/bin/python3 tools/topology/relocate.py examples/spine-leaf.json "$TMP/sl.json" --name "sl-$$" --target xdp
sd=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("state_dir", "-"))' "$TMP/sl.json")
[ "$sd" = "-" ] || fail "relocate.py --name kept the original state_dir '$sd'"
out=$("$INNET" fabric show --json "$TMP/sl.json" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["state_dir"])')
[ "$out" = "/tmp/innet-sl-$$" ] || fail "the renamed copy's state directory is '$out', not /tmp/innet-sl-$$"

step "1. ping before up"
t0=$SECONDS
rc=0
out=$(timeout 20 "$INNET" ping --topology "$TOPO" --from h0 --to h1 -c 5 2>&1) || rc=$?
echo "$out"
[ $rc -eq 1 ] || fail "ping against a fabric that is not up: exit $rc, expected 1"
grep -q "fabric 'fabric-cli-$$' is not running: switch s0 (next to h0) does not answer on $STATE/s0.sock" \
	<<<"$out" || fail "ping does not say the fabric is not running"
grep -q "innet fabric up $TOPO" <<<"$out" || fail "ping does not say how to start it"
[ $((SECONDS - t0)) -lt 2 ] || fail "ping took $((SECONDS - t0)) s to say so"

step "2. up, ping"
timeout 30 "$INNET" fabric up "$TOPO" >/dev/null || fail "fabric up"
timeout 20 "$INNET" ping --topology "$TOPO" --from h0 --to h1 -c 5 --quiet ||
	fail "ping through the running fabric"
[ -f "$STATE/s0.log" ] || fail "no switch log in $STATE"

step "3. down: everything it made is gone"
out=$(timeout 30 "$INNET" fabric down "$TOPO") || fail "fabric down: $out"
echo "$out"
grep -q "^stopped 1 switch (1 recorded); removed the sockets, fabric.json, the logs and $STATE$" \
	<<<"$out" || fail "down's message"
[ ! -e "$STATE" ] || fail "down left $STATE behind: $(ls -A "$STATE")"

step "4. up, down --keep-logs: the log stays"
timeout 30 "$INNET" fabric up "$TOPO" >/dev/null || fail "second fabric up"
out=$(timeout 30 "$INNET" fabric down "$TOPO" --keep-logs) || fail "fabric down --keep-logs: $out"
echo "$out"
grep -q "removed the sockets and fabric.json; logs kept in $STATE" <<<"$out" || fail "--keep-logs message"
grep -q ready "$STATE/s0.log" || fail "--keep-logs did not keep s0.log"
[ ! -e "$STATE/fabric.json" ] && [ ! -e "$STATE/s0.sock" ] || fail "state left behind: $(ls -A "$STATE")"
rc=0
out=$(timeout 20 "$INNET" ping --topology "$TOPO" --from h0 --to h1 -c 2 2>&1) || rc=$?
[ $rc -eq 1 ] && grep -q "is not running" <<<"$out" || fail "ping after down: exit $rc: $out"
echo "PASS"
