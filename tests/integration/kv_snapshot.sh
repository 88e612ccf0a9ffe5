#!/usr/bin/env bash
# kv_snapshot.sh — state transfer: a replica the acceptors trimmed past
# catches up from a peer's snapshot (src/consensus/kv_snapshot.c).
#   1. `innet kv up` (examples/kv.json's shape at 127.65.30.x/31.x); 300 SETs
#      and INCRs through r0 while every replica reports its watermark, so the
#      acceptors trim the log (their "trim" register moves past 0);
#   2. `innet kv stop TOPO r2 --kill` (a crash), 200 more writes through r1,
#      then `innet kv start TOPO r2`: the new process starts at instance 0,
#      below the trim — it cannot replay the log, so it asks r0/r1 for a
#      SNAPSHOT and installs it;
#   3. r2 then serves: reads through it see every write (before and after the
#      crash, and new ones made through r2 and through r0), INFO shows one
#      snapshot installed, and all three replicas end with the same keys,
#      values and store digest.
# Also: a malformed SNAPSHOT request is an error reply, not a crash; log
# entries that are not KV batches of version 2 (proposed straight to the
# coordinator by a foreign client: garbage, and a "version 3" batch) are
# skipped alike by every replica, counted as entries_bad, and the replicas
# stay identical.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=${INNET:-./build/innet}
STATE=/tmp/innet-kv-snapshot
PORT=6393
PY=/usr/bin/python3
need_cmd redis-cli

tmp=$(mktemp -d /tmp/innet-kv-snapshot-test.XXXXXX)
TOPO=$tmp/topo.json
fail_details() {
	for f in "$STATE"/kv-*.log; do [ -f "$f" ] && { echo "--- $f"; tail -5 "$f"; }; done >&2
}
cleanup() {
	timeout 30 "$INNET" kv down "$TOPO" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
"$PY" tools/topology/relocate.py examples/kv.json "$TOPO" --name kv-snapshot --state-dir "$STATE" \
	--addr-base 127.65.30.0 --hosts 127.65.31
timeout 30 "$INNET" kv down "$TOPO" >/dev/null 2>&1 || true
R=(127.65.31.1 127.65.31.2 127.65.31.3)
cli() { local h=$1; shift; timeout 10 redis-cli -h "$h" -p $PORT "$@"; }
info() { cli "$1" INFO | tr -d '\r' | grep -E "^$2:" | cut -d: -f2; }
timeout 60 "$INNET" kv up "$TOPO" --port $PORT >/dev/null

echo "--- writes, trim"
for i in $(seq 1 300); do echo "SET k$i v$i"; echo "INCR counter"; done | cli "${R[0]}" >/dev/null
sleep 0.3
trim=$("$INNET" ctl --fabric "$TOPO" --switch a0 reg read acc trim 0 | awk '{print $3}')
echo "acceptor a0 trimmed below instance $trim"
[ "${trim:-0}" -gt 0 ] || fail "the acceptors did not trim"

echo "--- crash r2, write on, restart r2"
timeout 20 "$INNET" kv stop "$TOPO" r2 --kill
for i in $(seq 301 500); do echo "SET k$i v$i"; echo "INCR counter"; done | cli "${R[1]}" >/dev/null
timeout 30 "$INNET" kv start "$TOPO" r2 --port $PORT
for _ in $(seq 1 100); do
	[ "$(info "${R[2]}" snapshots_installed)" = 1 ] && [ "$(info "${R[2]}" stale)" = 0 ] && break
	sleep 0.1
done
[ "$(info "${R[2]}" snapshots_installed)" = 1 ] || fail "r2 installed no snapshot"
grep -h "installed a snapshot" "$STATE/kv-r2.log"

echo "--- r2 serves"
[ "$(cli "${R[2]}" GET k1)" = v1 ] || fail "r2: k1 (written before the crash) = '$(cli "${R[2]}" GET k1)'"
[ "$(cli "${R[2]}" GET k500)" = v500 ] || fail "r2: k500 (written while it was down) = '$(cli "${R[2]}" GET k500)'"
[ "$(cli "${R[2]}" SET after r2)" = OK ] || fail "r2: SET"
[ "$(cli "${R[0]}" GET after)" = r2 ] || fail "r0 does not see r2's write"
[ "$(cli "${R[0]}" INCR counter)" = 501 ] || fail "counter is not 501 after 500 INCRs + 1"
[ "$(cli "${R[2]}" GET counter)" = 501 ] || fail "r2: counter = '$(cli "${R[2]}" GET counter)'"
cli "${R[0]}" SNAPSHOT x 2>&1 | grep -q "wrong number of arguments" || fail "SNAPSHOT x: no error reply"
cli "${R[0]}" PING | grep -q PONG || fail "r0 does not answer after a bad SNAPSHOT"

echo "--- foreign log entries"
coord_ip=$("$INNET" fabric show "$TOPO" | awk '/^switch coord/ { c = 1 } c && $5 == "127.65.31.1" { print $3; exit }')
[ -n "$coord_ip" ] || fail "no coordinator port facing r0 in the topology"
"$PY" - "$coord_ip" <<'PYEOF'
import socket, struct, sys
def request(req_id, value):
    h = struct.pack(">BBBBHH", 0x1E, 1, 2, 0, 0, 0)
    p = struct.pack(">BBHIIHHQQQQ", 1, 0, 0, 0, 0, len(value), 0, 0, req_id, 0, 0)
    return h + p + value
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(request(0x7777000000000001, b"\x01\x02garbage"), (sys.argv[1], 34952))
s.sendto(request(0x7777000000000002, b"KV\x03\x00\x00\x00" + bytes(8)), (sys.argv[1], 34952))
PYEOF
[ "$(cli "${R[0]}" SET fence 1)" = OK ] || fail "SET after foreign entries"
for h in "${R[@]}"; do
	for _ in $(seq 1 50); do [ "$(info "$h" entries_bad)" = 2 ] && break; sleep 0.1; done
	[ "$(info "$h" entries_bad)" = 2 ] || fail "$h: entries_bad = $(info "$h" entries_bad), want 2"
done
grep -h "not a KV batch" "$STATE/kv-r0.log" | head -1

echo "--- replicas identical"
sleep 0.2
ref="$(info "${R[0]}" keys) $(info "${R[0]}" digest)"
for h in "${R[@]}"; do
	got="$(info "$h" keys) $(info "$h" digest)"
	[ "$got" = "$ref" ] || fail "$h: keys/digest $got, ${R[0]}: $ref"
done
echo "keys/digest: $ref"
# kv down leaves nothing behind: the logs, pid files and the state directory go.
out=$(timeout 30 "$INNET" kv down "$TOPO" 2>&1) || fail "kv down: $out"
[[ $out == *"removed $STATE"* ]] || fail "kv down did not say it removed $STATE: $out"
[ ! -e "$STATE" ] || fail "kv down left $STATE: $(ls "$STATE")"
echo "PASS"
