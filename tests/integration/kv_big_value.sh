#!/usr/bin/env bash
# kv_big_value.sh — values larger than one consensus value: a write that does
# not fit one log entry goes through the log in chunks and every replica puts
# it back together (src/consensus/kv_chunk.c; docs/consensus.md, "Large
# values"); proto-max-bulk-len bounds what a client may send.
#   1. `innet kv up --proto-max-bulk-len 96mb` (examples/kv.json's shape at
#      127.70.70.x/71.x): CONFIG GET proto-max-bulk-len says 100663296;
#   2. redis-cli -x SET of 64 MiB of random bytes through r0: OK; GET through
#      r2 gives the same bytes; INFO shows the chunks and one large entry
#      applied on every replica;
#   3. one pipeline on r1 mixing a 4 MiB SET with small writes and reads:
#      the replies come in order and each read sees the writes before it;
#   4. CONFIG SET proto-max-bulk-len 1mb on r0, then a 2 MiB SET: redis's
#      "Protocol error: invalid bulk length" (naming the limit) and the
#      connection closed, the replica serving on; a bad CONFIG SET and a bad
#      --proto-max-bulk-len are refused;
#   5. examples/kv-faults.json (5% loss, duplication and reordering on every
#      acceptor link): an 4 MiB SET through r0 is read back whole at r2.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=${INNET:-./build/innet}
STATE=/tmp/innet-kv-big-value
PORT=6398
need_cmd redis-cli

tmp=$(mktemp -d /tmp/innet-kv-big-value-test.XXXXXX)
TOPO=$tmp/topo.json
FTOPO=$tmp/faults.json
fail_logs '"$STATE"/kv-*.log' '"$STATE"-faults/kv-*.log'
cleanup() {
	timeout 30 "$INNET" kv down "$TOPO" >/dev/null 2>&1 || true
	timeout 30 "$INNET" kv down "$FTOPO" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
"$PY" tools/topology/relocate.py examples/kv.json "$TOPO" --name kv-big-value --state-dir "$STATE" \
	--addr-base 127.70.70.0 --hosts 127.70.71
timeout 30 "$INNET" kv down "$TOPO" >/dev/null 2>&1 || true
R=(127.70.71.1 127.70.71.2 127.70.71.3)

echo "--- a bad --proto-max-bulk-len"
rc=0; "$INNET" kv up "$TOPO" --proto-max-bulk-len 2gb >/dev/null 2>"$tmp/err" || rc=$?
[ $rc -eq 2 ] && grep -q "proto-max-bulk-len wants a memory value" "$tmp/err" ||
	fail "--proto-max-bulk-len 2gb: exit $rc, $(cat "$tmp/err")"

timeout 60 "$INNET" kv up "$TOPO" --port $PORT --proto-max-bulk-len 96mb >/dev/null
got=$(redis-cli -h "${R[0]}" -p $PORT CONFIG GET proto-max-bulk-len | tr '\n' ' ')
[ "$got" = "proto-max-bulk-len 100663296 " ] || fail "CONFIG GET proto-max-bulk-len: $got"

echo "--- 64 MiB through r0, read back at r2"
head -c $((64 << 20)) /dev/urandom >"$tmp/big"
t0=$(date +%s.%N)
[ "$(timeout 120 redis-cli -h "${R[0]}" -p $PORT -x SET big <"$tmp/big")" = OK ] || fail "SET of 64 MiB"
t1=$(date +%s.%N)
for h in "${R[2]}"; do
	timeout 60 redis-cli -h "$h" -p $PORT --raw GET big >"$tmp/got" # (--raw adds a newline)
	[ "$(stat -c %s "$tmp/got")" -eq $(((64 << 20) + 1)) ] && cmp -s -n $((64 << 20)) "$tmp/got" "$tmp/big" ||
		fail "GET big at $h: not the bytes written ($(stat -c %s "$tmp/got") bytes)"
done
echo "SET of 64 MiB: $(echo "$t1 - $t0" | bc) s; read back whole at r2"
for h in "${R[@]}"; do
	info=$(redis-cli -h "$h" -p $PORT INFO | tr -d '\r')
	n=$(echo "$info" | sed -n 's/^large_entries_applied://p')
	ch=$(echo "$info" | sed -n 's/^chunks_applied://p')
	[ "$n" = 1 ] && [ "$ch" -gt 7000 ] || fail "$h: large_entries_applied $n, chunks_applied $ch"
done

echo "--- a 4 MiB SET among small commands, one pipeline"
"$PY" - "${R[1]}" $PORT <<'PYEOF' || fail "pipeline with a large value"
import socket, sys
def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out
v = bytes(range(256)) * (4 * 4096)
cmds = [("SET", "a", "1"), ("SET", "v", v), ("GET", "a"), ("INCR", "a"), ("GET", "v"),
        ("SET", "v", "small"), ("GET", "v"), ("GET", "a")]
want = (b"+OK\r\n+OK\r\n$1\r\n1\r\n:2\r\n$%d\r\n%s\r\n+OK\r\n$5\r\nsmall\r\n$1\r\n2\r\n"
        % (len(v), v))
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=60)
s.sendall(b"".join(resp(*c) for c in cmds))
got = b""
while len(got) < len(want):
    d = s.recv(1 << 20)
    if not d:
        break
    got += d
if got != want:
    sys.exit("replies out of order or wrong: %d bytes, want %d; start %r" % (len(got), len(want), got[:60]))
print("8 replies in order, 4 MiB among them")
PYEOF

echo "--- over the limit"
[ "$(redis-cli -h "${R[0]}" -p $PORT CONFIG SET proto-max-bulk-len 1mb)" = OK ] || fail "CONFIG SET 1mb"
got=$(redis-cli -h "${R[0]}" -p $PORT CONFIG SET proto-max-bulk-len 10)
case $got in *"must be a memory value between"*) ;; *) fail "CONFIG SET 10: $got" ;; esac
got=$(redis-cli -h "${R[0]}" -p $PORT CONFIG SET no-such-thing 1)
case $got in *"Unknown option"*"no-such-thing"*) ;; *) fail "CONFIG SET no-such-thing: $got" ;; esac
head -c $((2 << 20)) "$tmp/big" >"$tmp/2m"
got=$(redis-cli -h "${R[0]}" -p $PORT -x SET two <"$tmp/2m" 2>&1 || true)
case $got in
*"Protocol error: invalid bulk length (2097152 bytes, proto-max-bulk-len is 1048576)"*) ;;
*) fail "a 2 MiB SET over a 1 MiB limit: $got" ;;
esac
[ "$(redis-cli -h "${R[0]}" -p $PORT PING)" = PONG ] || fail "r0 after the refused SET"
[ "$(redis-cli -h "${R[0]}" -p $PORT EXISTS two)" = 0 ] || fail "the refused SET was applied"
timeout 30 "$INNET" kv down "$TOPO" >/dev/null

echo "--- 4 MiB over lossy links"
"$PY" tools/topology/relocate.py examples/kv-faults.json "$FTOPO" --name kv-big-value-faults \
	--state-dir "$STATE-faults" --addr-base 127.70.72.0 --hosts 127.70.73
timeout 30 "$INNET" kv down "$FTOPO" >/dev/null 2>&1 || true
timeout 60 "$INNET" kv up "$FTOPO" --port $PORT >/dev/null
head -c $((4 << 20)) "$tmp/big" >"$tmp/4m"
t0=$(date +%s.%N)
[ "$(timeout 120 redis-cli -h 127.70.73.1 -p $PORT -x SET big <"$tmp/4m")" = OK ] || fail "SET of 4 MiB with loss"
t1=$(date +%s.%N)
timeout 60 redis-cli -h 127.70.73.3 -p $PORT --raw GET big >"$tmp/got"
[ "$(stat -c %s "$tmp/got")" -eq $(((4 << 20) + 1)) ] && cmp -s -n $((4 << 20)) "$tmp/got" "$tmp/4m" ||
	fail "GET big at r2 with loss: not the bytes written"
resent=$(redis-cli -h 127.70.73.1 -p $PORT INFO | tr -d '\r' | sed -n 's/^resent://p')
echo "SET of 4 MiB under 5% loss: $(echo "$t1 - $t0" | bc) s ($resent resends); read back whole at r2"
echo "PASS"
