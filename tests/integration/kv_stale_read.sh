#!/usr/bin/env bash
# kv_stale_read.sh — a replica that is behind never answers a read with old
# data: reads wait for a read index from a majority of acceptors and for the
# replica to apply every instance below it (docs/consensus.md, "Reads
# without a log entry").
#   1. `innet kv up` (examples/kv.json's shape at 127.70.60.x/61.x);
#   2. every acceptor's 2B group loses r2 (`innet ctl ... group set acc 0
#      1@R0:34953 2@R1:34953`: ports 1, 2 face r0, r1): r2 hears no 2B any more
#      and learns the log only by asking (RECOVER), so it falls behind every
#      write;
#   3. 40 times: SET k i through r0 (acknowledged: applied there), then at
#      once r2's INFO log_next (r2 is behind when it is below r0's) and GET k
#      through r2: every GET must answer i, never an older value, although r2
#      was behind for most of them; INFO shows r2's reads answered without
#      the log (reads_local) and its catching up (recover_sent);
#   4. MGET and EXISTS the same way; then the 2B groups back: r2 is current.
# (A partitioned replica — no acceptor answers it at all — gets no read
# index and fails its reads: tests/unit/test_paxos.c test_read_index_partitioned.)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=${INNET:-./build/innet}
STATE=/tmp/innet-kv-stale-read
PORT=6396
need_cmd redis-cli

tmp=$(mktemp -d /tmp/innet-kv-stale-read-test.XXXXXX)
TOPO=$tmp/topo.json
fail_logs '"$STATE"/kv-*.log'
cleanup() {
	timeout 30 "$INNET" kv down "$TOPO" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
"$PY" tools/topology/relocate.py examples/kv.json "$TOPO" --name kv-stale-read --state-dir "$STATE" \
	--addr-base 127.70.60.0 --hosts 127.70.61
timeout 30 "$INNET" kv down "$TOPO" >/dev/null 2>&1 || true
timeout 60 "$INNET" kv up "$TOPO" --port $PORT >/dev/null
R0=127.70.61.1
R1=127.70.61.2
R2=127.70.61.3
LUDP=34953   # the learners' UDP port (the acceptors' "learner_udp")
[ "$(redis-cli -h $R0 -p $PORT SET k start)" = OK ] || fail "SET through r0"
[ "$(redis-cli -h $R2 -p $PORT GET k)" = start ] || fail "GET through r2"

echo "--- r2 hears no 2B"
for a in a0 a1 a2; do
	"$INNET" ctl --fabric "$TOPO" --switch $a group set acc 0 1@$R0:$LUDP 2@$R1:$LUDP >/dev/null ||
		fail "group set on $a"
done

"$PY" - $R0 $R2 $PORT <<'PYEOF' || fail "a read at r2 answered old data"
import socket, sys
r0, r2, port = sys.argv[1], sys.argv[2], int(sys.argv[3])

class Conn:
    def __init__(self, host):
        self.s = socket.create_connection((host, port), timeout=10)
        self.buf = b""
    def call(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return self.reply()
    def line(self):
        while b"\r\n" not in self.buf:
            d = self.s.recv(65536)
            if not d:
                raise ConnectionError("closed")
            self.buf += d
        ln, self.buf = self.buf.split(b"\r\n", 1)
        return ln
    def reply(self):
        ln = self.line()
        if ln[:1] == b"$":
            n = int(ln[1:])
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.s.recv(65536)
            v, self.buf = self.buf[:n], self.buf[n + 2:]
            return v.decode()
        if ln[:1] == b"*":
            return [self.reply() for _ in range(int(ln[1:]))]
        return ln[1:].decode()
    def info(self, field):
        for l in self.call("INFO").split("\r\n"):
            if l.startswith(field + ":"):
                return int(l.split(":")[1])

c0, c2 = Conn(r0), Conn(r2)
reads0, rec0 = c2.info("reads_local"), c2.info("recover_sent")
behind = 0
for i in range(40):
    assert c0.call("SET", "k", str(i)) == "OK"
    if c2.info("log_next") < c0.info("log_next"):
        behind += 1
    got = c2.call("GET", "k")
    if got != str(i):
        sys.exit("GET k at r2 after SET k %d acknowledged at r0: %r" % (i, got))
for i in range(10):
    assert c0.call("SET", "m%d" % i, "v%d" % i) == "OK"
    got = c2.call("MGET", "k", "m%d" % i)
    if got != ["39", "v%d" % i]:
        sys.exit("MGET at r2 after SET m%d: %r" % (i, got))
    if c2.call("EXISTS", "m%d" % i) != "1":
        sys.exit("EXISTS m%d at r2 after its SET" % i)
reads, rec = c2.info("reads_local") - reads0, c2.info("recover_sent") - rec0
print("r2 was behind r0 for %d of 40 reads; every read answered the latest write; "
      "reads without the log %d, RECOVERs sent %d" % (behind, reads, rec))
if behind < 20:
    sys.exit("r2 was behind for only %d reads: the test did not test a stale replica" % behind)
if reads != 60 or rec == 0:
    sys.exit("reads_local %d (want 60), recover_sent %d (want > 0)" % (reads, rec))
PYEOF

echo "--- 2Bs to r2 again"
for a in a0 a1 a2; do
	"$INNET" ctl --fabric "$TOPO" --switch $a group set acc 0 1@$R0:$LUDP 2@$R1:$LUDP 3@$R2:$LUDP \
		>/dev/null || fail "group set on $a"
done
[ "$(redis-cli -h $R0 -p $PORT SET k end)" = OK ] || fail "SET through r0"
[ "$(redis-cli -h $R2 -p $PORT GET k)" = end ] || fail "GET through r2 once it hears 2Bs"
echo "PASS"
