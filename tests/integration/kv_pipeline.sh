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
#   5. barriers: SELECT, MULTI/EXEC (a block over one value goes in chunks; a
#      block of 20000 commands pipelined),
#      WATCH, SUBSCRIBE, HELLO 3/2 pipelined with reads and writes — the
#      commands after each see its effect (database, protocol, mode);
#   6. a key with PX 600 read at all three replicas: there before, gone
#      after (read indexes; log time moved by a tick); with active expiry off
#      a read after a key's time waits for log time to pass it;
#   7. r0 restarted with --reads log: a GET goes through the log.
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
    # SELECT is a barrier: the commands after it are parsed in database 1,
    # reads too (a unit carries its database)
    ("SELECT between writes and reads", [("SET", "s0", "zero"), ("SELECT", "1"), ("SET", "s1", "one"),
                                         ("GET", "s1"), ("GET", "s0"), ("SELECT", "0"), ("GET", "s1"),
                                         ("GET", "s0")],
     b"+OK\r\n+OK\r\n+OK\r\n$3\r\none\r\n$-1\r\n+OK\r\n$-1\r\n$4\r\nzero\r\n", 2, 4),
    # MULTI ... EXEC: one group (MULTI, the block, EXEC proposed as 4 commands);
    # a read inside runs in the block, the read after it at a read index
    ("MULTI with a read inside", [("MULTI",), ("INCR", "mc"), ("GET", "mc"), ("EXEC",), ("GET", "mc")],
     b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:1\r\n$1\r\n1\r\n$1\r\n1\r\n", 4, 1),
    # a block larger than one entry: one large entry, in chunks
    ("MULTI block over one value", [("MULTI",), ("SET", "mb1", "a"), ("SET", "mbig", big),
                                    ("STRLEN", "mbig"), ("EXEC",), ("GET", "mb1")],
     b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n+OK\r\n+OK\r\n:20000\r\n$1\r\na\r\n", 0, 1),
    ("WATCH, a read, MULTI", [("WATCH", "w"), ("GET", "w"), ("MULTI",), ("SET", "w", "1"), ("EXEC",)],
     b"+OK\r\n$-1\r\n+OK\r\n+QUEUED\r\n*1\r\n+OK\r\n", 3, 1),
    # a long block pipelined (20000 commands: ~400 KB, one large entry in chunks)
    ("MULTI of 20000 INCRs", [("MULTI",)] + [("INCR", "m20k")] * 20000 + [("EXEC",), ("GET", "m20k")],
     b"+OK\r\n" + b"+QUEUED\r\n" * 20000 + b"*20000\r\n" +
     b"".join(b":%d\r\n" % i for i in range(1, 20001)) + b"$5\r\n20000\r\n", 0, 1),
    # SUBSCRIBE is a barrier: the GET after it is parsed in subscribed mode
    ("GET after SUBSCRIBE", [("SUBSCRIBE", "ch"), ("GET", "a")],
     b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n-ERR Can't execute 'get': only "
     b"(P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n", 0, 0),
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

# HELLO 3 and back in one pipeline: each read at a read index answers in the
# protocol of its place (a unit carries it): RESP3's null and map, then RESP2's.
def parse(b, i=0):
    """One RESP2/3 reply at b[i:]: (value, next index)."""
    t, j = b[i:i + 1], b.index(b"\r\n", i)
    line = b[i + 1:j]
    if t in (b"+", b"-", b":", b"_", b",", b"#"):
        return (t, line), j + 2
    if t == b"$":
        n = int(line)
        return (b"$", None if n < 0 else b[j + 2:j + 2 + n]), (j + 2 if n < 0 else j + 4 + n)
    if t in (b"*", b"%", b"~", b">"):
        n = int(line) * (2 if t == b"%" else 1)
        k, items = j + 2, []
        for _ in range(max(n, 0)):
            v, k = parse(b, k)
            items.append(v)
        return (t, items), k
    sys.exit("unexpected reply type %r" % t)

cmds = [("HSET", "h3", "f", "v"), ("GET", "nokey3"), ("HELLO", "3"), ("GET", "nokey3"),
        ("HGETALL", "h3"), ("HELLO", "2"), ("GET", "nokey3"), ("HGETALL", "h3")]
s = socket.create_connection((host, port), timeout=5)
s.sendall(b"".join(resp(*c) for c in cmds))
got, replies = b"", []
while len(replies) < len(cmds):
    got += s.recv(65536)
    try:
        replies, k = [], 0
        while k < len(got):
            v, k = parse(got, k)
            replies.append(v)
    except (ValueError, IndexError):
        replies = []  # incomplete: read more
s.close()
want = [(b":", b"1"), (b"$", None), None, (b"_", b""), (b"%", [(b"$", b"f"), (b"$", b"v")]),
        None, (b"$", None), (b"*", [(b"$", b"f"), (b"$", b"v")])]
for i, (w, g) in enumerate(zip(want, replies)):
    if w is not None and w != g:
        sys.exit("HELLO pipeline reply %d (%s): want %r, got %r" % (i, cmds[i][0], w, g))
if replies[2][0] != b"%" or replies[5][0] != b"*":
    sys.exit("HELLO 3 / HELLO 2 replies: %r %r" % (replies[2][0], replies[5][0]))
print("HELLO 3 and 2 in one pipeline        replies ok (RESP3 null and map between RESP2 replies)")
PYEOF

echo "--- expiry seen alike through read indexes at every replica"
cli() { redis-cli -h "$1" -p $PORT "${@:2}"; }
[ "$(cli 127.70.41.1 SET ex v PX 600)" = OK ] || fail "SET ex v PX 600"
for h in 127.70.41.1 127.70.41.2 127.70.41.3; do
	[ "$(cli $h GET ex)" = v ] || fail "GET ex at $h right after the SET"
done
sleep 1.5 # past its time: a tick through the log expires it everywhere
for h in 127.70.41.1 127.70.41.2 127.70.41.3; do
	[ -z "$(cli $h GET ex)" ] || fail "GET ex at $h 1.5 s after a 600 ms expire"
	[ "$(cli $h EXISTS ex)" = 0 ] || fail "EXISTS ex at $h after its expire"
done
# active expiry off (through the log: no replica ticks for keys): a read that
# comes after a key's time waits for log time to pass it (a tick of its own),
# rather than answer with the key until the next write
[ "$(cli 127.70.41.1 DEBUG SET-ACTIVE-EXPIRE 0)" = OK ] || fail "DEBUG SET-ACTIVE-EXPIRE 0"
[ "$(cli 127.70.41.1 SET lz v PX 50)" = OK ] || fail "SET lz v PX 50"
sleep 0.2
for h in 127.70.41.1 127.70.41.2 127.70.41.3; do
	[ "$(cli $h EXISTS lz)" = 0 ] || fail "EXISTS lz at $h 200 ms after a 50 ms expire, active expiry off"
done
[ "$(cli 127.70.41.2 DEBUG SET-ACTIVE-EXPIRE 1)" = OK ] || fail "DEBUG SET-ACTIVE-EXPIRE 1"

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
