#!/usr/bin/env bash
# kv_pipeline.sh — commands that fail the replica's local checks (wrong
# number of arguments, unknown command, larger than one consensus value)
# are answered locally with redis's error, in order, also when they come
# pipelined after commands that go through the log:
#   1. `innet kv up` (examples/kv.json's shape at 127.70.40.x/41.x);
#   2. one write of "SET a 1", "GET" (no key): "+OK", then "-ERR wrong number
#      of arguments for 'get' command"; INFO commands_proposed grows by 1 (the
#      SET), not 2: the bad command did not go through Paxos;
#   3. more pipelines (a bad command between and after good ones, MSET with a
#      key and no value, an unknown command, a command over one value): each
#      reply in order, as redis gives it, and only the good commands proposed.
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

def proposed():
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
        if line.startswith("commands_proposed:"):
            return int(line.split(":")[1])
    sys.exit("no commands_proposed in INFO")

ARITY = lambda c: b"-ERR wrong number of arguments for '%s' command\r\n" % c
big = "x" * 20000
cases = [
    # (name, commands, expected replies, commands that must go through the log)
    ("SET then GET without a key", [("SET", "a", "1"), ("GET",)],
     b"+OK\r\n" + ARITY(b"get"), 1),
    ("bad GET between good ones", [("GET", "a"), ("GET",), ("GET", "a")],
     b"$1\r\n1\r\n" + ARITY(b"get") + b"$1\r\n1\r\n", 2),
    ("INCR with two keys after SET", [("SET", "n", "5"), ("INCR", "n", "m"), ("INCR", "n")],
     b"+OK\r\n" + ARITY(b"incr") + b":6\r\n", 2),
    ("MSET with a key and no value", [("SET", "b", "2"), ("MSET", "a", "9", "b"), ("MGET", "a", "b")],
     b"+OK\r\n" + ARITY(b"mset") + b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n", 2),
    ("unknown command after SET", [("SET", "c", "3"), ("FLUBBER", "x"), ("GET", "c")],
     b"+OK\r\n-ERR unknown command 'FLUBBER', with args beginning with: 'x' \r\n$1\r\n3\r\n", 2),
    ("command over one value after SET", [("SET", "d", "4"), ("SET", "big", big), ("GET", "d")],
     None, 2),
    ("DEL without a key, alone", [("DEL",)], ARITY(b"del"), 0),
]
for name, cmds, want, n_logged in cases:
    before = proposed()
    data = b"".join(resp(*c) for c in cmds)
    if want is None:  # the too-large case: check the shape of the middle reply
        got = talk(data, b"+OK\r\n-ERR command too large for one consensus packet (at most 9148 bytes encoded)\r\n$1\r\n4\r\n")
        ok = got.startswith(b"+OK\r\n-ERR command too large for one consensus packet") and got.endswith(b"$1\r\n4\r\n")
    else:
        got = talk(data, want)
        ok = got == want
    after = proposed()
    print("%-36s replies %s, commands proposed %d" % (name, "ok" if ok else "WRONG", after - before))
    if not ok:
        sys.exit("%s: want %r, got %r" % (name, want, got))
    if after - before != n_logged:
        sys.exit("%s: %d commands went through the log, want %d (a bad command must be "
                 "answered locally)" % (name, after - before, n_logged))
PYEOF
echo "PASS"
