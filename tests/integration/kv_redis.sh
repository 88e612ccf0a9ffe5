#!/usr/bin/env bash
# kv_redis.sh — `innet kv` on examples/kv.json (coordinator switch, 3 acceptor
# switches, 3 replicas) driven by the real redis-cli:
#   1. the commands (PING GET SET DEL INCR EXISTS MGET MSET) answer as redis does;
#   2. a write on one replica is read on every other one (reads go through the log);
#   3. unknown commands, wrong arity and malformed RESP get RESP errors, the
#      connection closes on a protocol error, the server keeps serving;
#   4. concurrent INCRs from all replicas: no increment lost or doubled;
#   5. an acceptor switch is killed: the store keeps working with 2 of 3 and
#      all replicas still agree.
# Skips (77) without redis-cli (scripts/install-deps installs redis-tools).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=${INNET:-./build/innet}
TOPO=examples/kv.json
PY=/usr/bin/python3
need_cmd redis-cli

fail_details() { for f in /tmp/innet-kv/kv-*.log; do echo "--- $f"; tail -5 "$f"; done >&2; }
cleanup() { timeout 30 "$INNET" kv down "$TOPO" >/dev/null 2>&1 || true; }
cleanup

R0=127.3.71.1 R1=127.3.71.2 R2=127.3.71.3
cli() { local h=$1; shift; timeout 10 redis-cli -h "$h" -p 6379 "$@"; }
expect() { # host expected command...
	local h=$1 want=$2 got; shift 2
	got=$(cli "$h" "$@" 2>&1) || fail "redis-cli $* failed: $got"
	[ "$got" = "$want" ] || fail "$* on $h: want '$want', got '$got'"
}

timeout 60 "$INNET" kv up "$TOPO" >/dev/null

echo "--- commands"
expect $R0 PONG PING
expect $R0 hello PING hello
expect $R0 OK SET k1 v1
expect $R0 v1 GET k1
expect $R0 "" GET nokey
expect $R0 1 INCR n
expect $R0 11 INCRBY n 10
expect $R0 "ERR value is not an integer or out of range" INCR k1
expect $R0 OK MSET a 1 b 2 c 3
expect $R0 $'1\n2\n\n3' MGET a b nokey c
expect $R0 2 EXISTS a b nokey
expect $R0 2 DEL a b nokey
expect $R0 0 EXISTS a b
expect $R0 "ERR wrong number of arguments for 'mset' command" MSET a
expect $R0 "ERR wrong number of arguments for 'get' command" GET
expect $R0 "ERR unknown command 'FLUBBER', with args beginning with: 'x' " FLUBBER x
# A command up to one consensus value (INNET_PKT_MAX less headers) is one log
# entry; a larger one goes through the log in chunks (kv_chunk.c): both
# replicate intact, and only the larger one costs chunk entries.
info() { cli "$1" INFO | tr -d '\r' | sed -n "s/^$2://p"; }
vmax=$(info $R0 value_max)
fits=$(head -c $((vmax - 14 - 8 - 2 - 5 - 5 - 2)) /dev/zero | tr "\\0" y) # headers; argc; len+SET; len+big; len
c0=$(info $R0 chunks_proposed)
expect $R0 OK SET big "$fits"
[ "$(cli $R1 GET big)" = "$fits" ] || fail "a ${#fits}-byte value did not replicate intact"
[ "$(info $R0 chunks_proposed)" = "$c0" ] || fail "a ${#fits}-byte value went in chunks"
over="${fits}y"
expect $R0 OK SET big "$over"
[ "$(cli $R2 GET big)" = "$over" ] || fail "a ${#over}-byte value (one entry and a byte) did not replicate intact"
[ "$(info $R0 chunks_proposed)" -eq $((c0 + 2)) ] || fail "a ${#over}-byte value: not two chunks"

echo "--- every replica sees the log"
expect $R1 v1 GET k1
expect $R2 11 GET n
expect $R2 OK SET k2 from-r2
expect $R0 from-r2 GET k2

echo "--- malformed RESP"
"$PY" - "$R0" <<'PYEOF' || fail "malformed RESP handling"
import socket, sys
def talk(data):
    s = socket.create_connection((sys.argv[1], 6379), timeout=5)
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    out = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        out += b
    s.close()
    return out
cases = [
    (b"*x\r\n", b"-ERR Protocol error: invalid multibulk length"),
    (b"*1\r\n+PING\r\n", b"-ERR Protocol error: expected '$'"),
    (b"*1\r\n$-5\r\n", b"-ERR Protocol error: invalid bulk length"),
    (b"*1\r\n$4\r\nPINGxx", b"-ERR Protocol error: bulk string not terminated"),
    (b"*2000000\r\n", b"-ERR Protocol error: invalid multibulk length"),
    (b"PING\r\nECHO hi\r\n", b"+PONG\r\n$2\r\nhi\r\n"),
    (b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n*1\r\n$4\r\nPING\r\n", b"+PONG\r\n$2\r\nv1\r\n+PONG\r\n"),
]
for data, want in cases:
    got = talk(data)
    if not got.startswith(want):
        sys.exit("%r: want %r, got %r" % (data, want, got))
print("malformed RESP: %d cases ok" % len(cases))
PYEOF
expect $R0 PONG PING

echo "--- concurrent INCR through all replicas"
expect $R0 OK SET ctr 0
pids=()
for h in $R0 $R1 $R2; do
	timeout 60 redis-cli -h $h -p 6379 -r 200 INCR ctr >/dev/null & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "concurrent INCR client failed"; done
for h in $R0 $R1 $R2; do expect $h 600 GET ctr; done

echo "--- kill acceptor a1"
a1=$("$PY" -c "import json;d=json.load(open('/tmp/innet-kv/fabric.json'));print([s['pid'] for s in d['switches'] if s['name']=='a1'][0])")
kill -9 "$a1"
hosts=($R0 $R1 $R2)
for i in $(seq 1 50); do expect "${hosts[$((i % 3))]}" OK SET after$i $i; done
expect $R2 50 GET after50
expect $R1 OK SET ctr 0
for h in $R0 $R1 $R2; do timeout 60 redis-cli -h $h -p 6379 -r 50 INCR ctr >/dev/null || fail "INCR after kill"; done
for h in $R0 $R1 $R2; do expect $h 150 GET ctr; done
sz=$(cli $R0 DBSIZE)
for h in $R1 $R2; do expect $h "$sz" DBSIZE; done
echo "PASS"
