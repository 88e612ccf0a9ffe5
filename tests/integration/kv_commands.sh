#!/usr/bin/env bash
# kv_commands.sh — redis's commands on `innet kv` (examples/kv.json's shape at
# its own addresses: coordinator, 3 acceptors, 3 replicas) through the real
# redis-cli, where replication matters:
#   1. expiry agrees across replicas: keys set with PX through one replica are
#      read through the others — alive before their time, gone after it on
#      every replica (log time, not each replica's clock), and an idle store
#      expires them by itself (a tick through the log: DBSIZE 0 everywhere,
#      digests equal);
#   2. MULTI/EXEC is one log entry: blocks of INCRs on two keys from all
#      three replicas at once never interleave (both keys always equal on
#      every replica); WATCH makes EXEC fail when another replica wrote the
#      key, and succeed otherwise;
#   3. WRONGTYPE across types, the same on every replica; SELECT, HELLO 3,
#      CLIENT SETNAME/GETNAME, COMMAND COUNT/INFO, INFO keyspace;
#   4. publish/subscribe across replicas: subscribers on r1 (a channel) and
#      r2 (a pattern) get, in order, what is published through r0 and r2;
#   5. a real redis-server follows replica r1 with REPLICAOF (SYNC/PSYNC:
#      RDB, then the stream of changes): what is written through r0 — with
#      an expire, a hash, a transaction — shows up on the redis replica.
# Skips (77) without redis-cli / redis-server. About 5 s.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=${INNET:-./build/innet}
PY=/usr/bin/python3
PORT=6396
need_cmd redis-cli
need_cmd redis-server

tmp=$(mktemp -d /tmp/innet-kv-commands-test.XXXXXX)
TOPO=$tmp/topo.json
redis_pid=""
# an unused 127.X.0.0/16 (other tests and runs use their own)
NET=""
for x in $(seq 180 199); do
	if [ -z "$(ss -Hant "src 127.$x.0.0/16" 2>/dev/null)" ] &&
		[ -z "$(ss -Hanu "src 127.$x.0.0/16" 2>/dev/null)" ]; then
		NET=127.$x
		break
	fi
done
[ -n "$NET" ] || skip "no free 127.X.0.0/16 in 127.180-199"
fail_details() { for f in "$tmp"/fabric/kv-*.log; do echo "--- $f"; tail -5 "$f"; done >&2; }
cleanup() {
	[ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null
	timeout 30 "$INNET" kv down "$TOPO" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT
"$PY" tools/topology/relocate.py examples/kv.json "$TOPO" --name "kvcmd-${NET#127.}" \
	--state-dir "$tmp/fabric" --addr-base "$NET.70.0" --hosts "$NET.71"
R=("$NET.71.1" "$NET.71.2" "$NET.71.3")
cli() { local h=$1; shift; timeout 10 redis-cli -h "$h" -p "$PORT" "$@"; }
expect() { # host expected command...
	local h=$1 want=$2 got; shift 2
	got=$(cli "$h" "$@" 2>&1) || fail "redis-cli $* failed: $got"
	[ "$got" = "$want" ] || fail "$* on $h: want '$want', got '$got'"
}
info() { cli "$1" INFO | tr -d '\r' | awk -F: -v k="$2" '$1 == k { print $2 }'; }
timeout 60 "$INNET" kv up "$TOPO" --port "$PORT" >/dev/null

echo "--- expiry agrees across replicas"
expect "${R[0]}" OK SET short v PX 700
expect "${R[0]}" OK SET long v EX 100
for h in "${R[@]}"; do expect "$h" v GET short; done
ttl=$(cli "${R[2]}" PTTL short)
[ "$ttl" -gt 0 ] && [ "$ttl" -le 700 ] || fail "PTTL through r2: $ttl"
sleep 1
for h in "${R[@]}"; do expect "$h" "" GET short; expect "$h" 1 EXISTS long; done
# idle: nothing is written, a tick through the log expires the key anyway
expect "${R[1]}" OK SET idle v PX 300
sleep 1.2
for h in "${R[@]}"; do
	for _ in $(seq 1 20); do [ "$(info "$h" db0 | sed 's/keys=\([0-9]*\).*/\1/')" = 1 ] && break; sleep 0.1; done
	[ "$(info "$h" db0 | sed 's/keys=\([0-9]*\).*/\1/')" = 1 ] || fail "$h: idle key not expired ($(info "$h" db0))"
done
[ "$(info "${R[0]}" ticks_proposed)" -ge 1 ] || [ "$(info "${R[1]}" ticks_proposed)" -ge 1 ] ||
	fail "no tick proposed"
d0=$(info "${R[0]}" digest)
for h in "${R[1]}" "${R[2]}"; do
	for _ in $(seq 1 20); do [ "$(info "$h" digest)" = "$d0" ] && break; sleep 0.1; d0=$(info "${R[0]}" digest); done
	[ "$(info "$h" digest)" = "$d0" ] || fail "$h: digest differs from r0's after expiry"
done

echo "--- MULTI/EXEC is one log entry on every replica"
expect "${R[0]}" OK MSET a 0 b 0
"$PY" - "$PORT" "${R[@]}" <<'PYEOF' || fail "transactions"
import socket, sys, threading
port = int(sys.argv[1])
def resp(*a):
    return ("*%d\r\n" % len(a) + "".join("$%d\r\n%s\r\n" % (len(x), x) for x in a)).encode()
def run(host, n, errs):
    try:
        s = socket.create_connection((host, port), timeout=10)
        f = s.makefile("rb")
        for _ in range(n):
            s.sendall(resp("MULTI") + resp("INCR", "a") + resp("INCR", "b") + resp("EXEC"))
            got = [f.readline() for _ in range(3)]  # +OK +QUEUED +QUEUED
            head = f.readline()
            if head != b"*2\r\n":
                errs.append("EXEC answered %r after %r" % (head, got)); return
            f.readline(); f.readline()
        s.close()
    except Exception as e:
        errs.append(repr(e))
errs = []
ts = [threading.Thread(target=run, args=(h, 100, errs)) for h in sys.argv[2:]]
for t in ts: t.start()
# meanwhile: both keys are always equal, read in one block
s = socket.create_connection((sys.argv[2], port), timeout=10)
f = s.makefile("rb")
for _ in range(50):
    s.sendall(resp("MULTI") + resp("GET", "a") + resp("GET", "b") + resp("EXEC"))
    for _ in range(4): f.readline()
    f.readline(); a = f.readline(); f.readline(); b = f.readline()
    if a != b:
        errs.append("a and b differ inside a block: %r %r" % (a, b)); break
for t in ts: t.join()
if errs: sys.exit("; ".join(errs))
print("300 blocks from 3 replicas: never interleaved")
PYEOF
for h in "${R[@]}"; do expect "$h" $'300\n300' MGET a b; done
# WATCH: a write through another replica between WATCH and EXEC fails it
"$PY" - "$PORT" "${R[0]}" "${R[2]}" <<'PYEOF' || fail "WATCH"
import socket, sys
port = int(sys.argv[1])
def conn(h):
    s = socket.create_connection((h, port), timeout=10); return s, s.makefile("rb")
def resp(*a):
    return ("*%d\r\n" % len(a) + "".join("$%d\r\n%s\r\n" % (len(x), x) for x in a)).encode()
def call(c, *a):
    c[0].sendall(resp(*a)); return c[1].readline()
w, other = conn(sys.argv[2]), conn(sys.argv[3])
assert call(w, "WATCH", "a") == b"+OK\r\n"
assert call(other, "SET", "a", "x") == b"+OK\r\n"
call(w, "MULTI"); call(w, "SET", "a", "mine")
got = call(w, "EXEC")
assert got == b"*-1\r\n", "EXEC after another replica's write: %r" % got
assert call(w, "WATCH", "a") == b"+OK\r\n"
call(w, "MULTI"); call(w, "SET", "a", "mine")
got = call(w, "EXEC")
assert got == b"*1\r\n" and w[1].readline() == b"+OK\r\n", "EXEC unwritten: %r" % got
print("WATCH: fails after a write through another replica, runs otherwise")
PYEOF
for h in "${R[@]}"; do expect "$h" mine GET a; done

echo "--- types, databases, connection commands"
expect "${R[0]}" 2 HSET h f 1 g 2
for h in "${R[@]}"; do
	expect "$h" "WRONGTYPE Operation against a key holding the wrong kind of value" GET h
	expect "$h" "WRONGTYPE Operation against a key holding the wrong kind of value" LPUSH h x
	expect "$h" hash TYPE h
done
expect "${R[1]}" OK SELECT 3
got=$(printf 'SELECT 3\nSET in3 three\nSELECT 0\nGET in3\nSELECT 3\nGET in3\n' | cli "${R[1]}")
[ "$got" = $'OK\nOK\nOK\n\nOK\nthree' ] || fail "SELECT: $got"
expect "${R[2]}" three -n 3 GET in3
expect "${R[0]}" "ERR DB index is out of range" SELECT 16
got=$(printf 'CLIENT SETNAME probe\nCLIENT GETNAME\n' | cli "${R[0]}")
[ "$got" = $'OK\nprobe' ] || fail "CLIENT SETNAME/GETNAME: $got"
got=$(cli "${R[0]}" -3 HELLO 3 | tr '\n' ' ')
[[ $got == *"proto 3"* ]] || fail "HELLO 3: $got"
[ "$(cli "${R[0]}" COMMAND COUNT)" -gt 100 ] || fail "COMMAND COUNT"
cli "${R[0]}" COMMAND INFO get | grep -qx get || fail "COMMAND INFO get"
cli "${R[0]}" INFO keyspace | grep -q '^db3:keys=1,' || fail "INFO keyspace"

echo "--- publish/subscribe across replicas"
timeout 10 redis-cli -h "${R[1]}" -p "$PORT" SUBSCRIBE news >"$tmp/sub.out" 2>&1 &
sub=$!
timeout 10 redis-cli -h "${R[2]}" -p "$PORT" PSUBSCRIBE 'n*' >"$tmp/psub.out" 2>&1 &
psub=$!
for _ in $(seq 1 50); do
	[ "$(cli "${R[1]}" PUBSUB NUMSUB news | tail -1)" = 1 ] && [ "$(cli "${R[2]}" PUBSUB NUMPAT)" = 1 ] && break
	sleep 0.1
done
for i in 1 2 3; do cli "${R[0]}" PUBLISH news "m$i" >/dev/null; done
expect "${R[2]}" 1 PUBLISH news m4 # the pattern subscriber on r2 itself
sleep 0.3
kill "$sub" "$psub" 2>/dev/null || true
wait "$sub" "$psub" 2>/dev/null || true
got=$(grep -x 'm[0-9]' "$tmp/sub.out" | tr '\n' ' ')
[ "$got" = "m1 m2 m3 m4 " ] || fail "subscriber on r1 got '$got'"
got=$(grep -x 'm[0-9]' "$tmp/psub.out" | tr '\n' ' ')
[ "$got" = "m1 m2 m3 m4 " ] || fail "pattern subscriber on r2 got '$got'"

echo "--- a redis-server follows replica r1 (REPLICAOF: SYNC/PSYNC)"
rport=$((PORT + 100))
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$tmp" \
	--replicaof "${R[1]}" "$PORT" >"$tmp/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 1 50); do
	[ "$(redis-cli -p "$rport" INFO replication 2>/dev/null | tr -d '\r' | sed -n 's/^master_link_status://p')" = up ] && break
	sleep 0.1
done
redis-cli -p "$rport" INFO replication | tr -d '\r' | grep -qx master_link_status:up ||
	fail "the redis replica did not sync: $(tail -3 "$tmp/redis.log")"
[ "$(redis-cli -p "$rport" HGET h g)" = 2 ] || fail "the redis replica lacks the RDB's hash"
expect "${R[0]}" OK SET streamed v EX 100
expect "${R[0]}" OK MSET s1 1 s2 2
printf 'MULTI\nINCR s1\nINCR s2\nEXEC\n' | cli "${R[2]}" >/dev/null
for _ in $(seq 1 50); do [ "$(redis-cli -p "$rport" GET s2)" = 3 ] && break; sleep 0.1; done
[ "$(redis-cli -p "$rport" MGET streamed s1 s2 | tr '\n' ' ')" = "v 2 3 " ] ||
	fail "the redis replica: $(redis-cli -p "$rport" MGET streamed s1 s2 | tr '\n' ' ')"
ttl=$(redis-cli -p "$rport" TTL streamed)
[ "$ttl" -gt 90 ] && [ "$ttl" -le 100 ] || fail "the redis replica's TTL: $ttl"
[ "$(info "${R[1]}" connected_slaves)" = 1 ] || fail "r1's connected_slaves"
echo "PASS"
