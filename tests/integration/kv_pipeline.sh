#!/usr/bin/env bash
# kv_pipeline.sh — commands that fail the replica's local checks (wrong
# number of arguments, unknown command, larger than one consensus value)
# are answered locally with redis's error, in order, also when they come
# pipelined after commands that go through the log; read-only commands are
# answered from a read index, in order with the writes around them:
#   1. `innet kv up` (examples/kv.json's shape at 127.70.40.x/41.x);
#   2. one write of "SET a 1", "GET" (no key): "+OK", then "-ERR wrong number
#      of arguments for 'get' command"; INFO commands_proposed grows by 1 (the
#      SET), not 2: the bad command did not go through Paxos;
#   3. more pipelines (a bad command between and after good ones, MSET with a
#      key and no value, an unknown command, a command over one value — its
#      own entry, in chunks, in order with the rest): each
#      reply in order, as redis gives it, only the good writes proposed and
#      the good reads answered without the log (INFO reads_local);
#   4. reads and writes of one key interleaved in one pipeline: each read
#      sees exactly the writes before it;
#   5. r0 restarted with --reads log: a GET goes through the log.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=${INNET:-./build/innet}
STATE=/tmp/innet-kv-pipeline
PORT=6394
PY=/usr/bin/python3
need_cmd redis-cli

tmp=$(mktemp -d /tmp/innet-kv-pipeline-test.XXXXXX)
TOPO=$tmp/topo.json
fail_details() {
	for f in "$STATE"/kv-*.log; do [ -f "$f" ] && { echo "--- $f"; tail -5 "$f"; }; done >&2
}
cleanup() {
	timeout 30 "$INNET" kv down "$TOPO" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
"$PY" tools/topology/relocate.py examples/kv.json "$TOPO" --name kv-pipeline --state-dir "$STATE" \
	--addr-base 127.70.40.0 --hosts 127.70.41
timeout 30 "$INNET" kv down "$TOPO" >/dev/null 2>&1 || true
timeout 60 "$INNET" kv up "$TOPO" --port $PORT >/dev/null

echo "--- pipelined commands with local errors"
"$PY" - 127.70.41.1 $PORT <<'PYEOF' || fail "pipelined local errors"
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])

def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out

def talk(data, want):
    """Send data in one write; read until `want` bytes came (or 5 s)."""
    s = socket.create_connection((host, port), timeout=2)
    s.sendall(data)
    got = b""
    try:
        while len(got) < len(want):
            b = s.recv(65536)
            if not b:
                break
            got += b
    except socket.timeout:
        pass  # a shorter answer than wanted: compared below
    s.close()
    return got

def info(field):
    s = socket.create_connection((host, port), timeout=5)
    s.sendall(resp("INFO"))
    got = b""
    while b"\r\nfailovers:" not in got or not got.endswith(b"\r\n\r\n"):
        b = s.recv(65536)
        if not b:
            break
        got += b
    s.close()
    for line in got.decode().split("\r\n"):
        if line.startswith(field + ":"):
            return int(line.split(":")[1])
    sys.exit("no %s in INFO" % field)

def proposed():
    return info("commands_proposed"), info("reads_local")

ARITY = lambda c: b"-ERR wrong number of arguments for '%s' command\r\n" % c
big = "x" * 20000
cases = [
    # (name, commands, expected replies, commands that must go through the log,
    #  read-only commands answered from a read index)
    ("SET then GET without a key", [("SET", "a", "1"), ("GET",)],
     b"+OK\r\n" + ARITY(b"get"), 1, 0),
    ("bad GET between good ones", [("GET", "a"), ("GET",), ("GET", "a")],
     b"$1\r\n1\r\n" + ARITY(b"get") + b"$1\r\n1\r\n", 0, 2),
    ("INCR with two keys after SET", [("SET", "n", "5"), ("INCR", "n", "m"), ("INCR", "n")],
     b"+OK\r\n" + ARITY(b"incr") + b":6\r\n", 2, 0),
    ("MSET with a key and no value", [("SET", "b", "2"), ("MSET", "a", "9", "b"), ("MGET", "a", "b")],
     b"+OK\r\n" + ARITY(b"mset") + b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n", 1, 1),
    ("unknown command after SET", [("SET", "c", "3"), ("FLUBBER", "x"), ("GET", "c")],
     b"+OK\r\n-ERR unknown command 'FLUBBER', with args beginning with: 'x' \r\n$1\r\n3\r\n", 1, 1),
    ("command over one value after SET", [("SET", "d", "4"), ("SET", "big", big), ("GET", "d")],
     b"+OK\r\n+OK\r\n$1\r\n4\r\n", 1, 1),
    ("DEL without a key, alone", [("DEL",)], ARITY(b"del"), 0, 0),
    ("reads and writes of one key", [("GET", "e"), ("SET", "e", "1"), ("GET", "e"), ("EXISTS", "e"),
                                     ("INCR", "e"), ("SET", "f", "x"), ("MGET", "e", "f"),
                                     ("PING",), ("DEL", "e"), ("GET", "e"), ("DBSIZE",)],
     b"$-1\r\n+OK\r\n$1\r\n1\r\n:1\r\n:2\r\n+OK\r\n*2\r\n$1\r\n2\r\n$1\r\nx\r\n+PONG\r\n:1\r\n"
     b"$-1\r\n:7\r\n", 4, 6),
]
for name, cmds, want, n_logged, n_read in cases:
    before, rbefore = proposed()
    data = b"".join(resp(*c) for c in cmds)
    got = talk(data, want)
    ok = got == want
    after, rafter = proposed()
    print("%-36s replies %s, commands proposed %d, reads without the log %d"
          % (name, "ok" if ok else "WRONG", after - before, rafter - rbefore))
    if not ok:
        sys.exit("%s: want %r, got %r" % (name, want, got))
    if after - before != n_logged:
        sys.exit("%s: %d commands went through the log, want %d (a bad command must be "
                 "answered locally)" % (name, after - before, n_logged))
    if rafter - rbefore != n_read:
        sys.exit("%s: %d reads answered from a read index, want %d" % (name, rafter - rbefore, n_read))
PYEOF

echo "--- --reads log: read-only commands through the log"
"$INNET" kv stop "$TOPO" r0 >/dev/null
timeout 30 "$INNET" kv start "$TOPO" r0 --port $PORT --reads log >/dev/null
before=$(redis-cli -h 127.70.41.1 -p $PORT INFO | tr -d '\r' | sed -n 's/^commands_proposed://p')
[ "$(redis-cli -h 127.70.41.1 -p $PORT GET a)" = 1 ] || fail "GET a through the log"
info=$(redis-cli -h 127.70.41.1 -p $PORT INFO | tr -d '\r')
echo "$info" | grep -q '^reads:log$' || fail "INFO does not say reads:log"
after=$(echo "$info" | sed -n 's/^commands_proposed://p')
[ $((after - before)) -eq 1 ] || fail "GET with --reads log: $((after - before)) commands proposed, want 1"
echo "PASS"
