#!/usr/bin/python3
"""kvload.py — drive a RESP key-value store (innet kv, redis) with concurrent
clients doing random SET/GET on a few keys, and record the history for
lincheck.py: one JSON line per operation with invocation and response times
(time.monotonic(), shared by all threads).

  kvload.py --out HIST --seconds S --clients N --keys K HOST:PORT [HOST:PORT...]

Client i talks to server i % len(servers) over its own connection. A write
writes a value no one else writes ("c<client>.<n>"; with --client-base B the
clients are numbered from B, so that several kvload.py runs, one beside each
server, write distinct values and their histories can be merged). An operation without an
answer within --timeout (or with an error reply) is recorded with ret null,
and the client reconnects. At the end, every key is read once more from
every server, sequentially, so lost writes show up as stale reads (those
records carry "final": true; --no-final skips them). Prints "ops=N ok=N failed=N" on stdout.
"""
import argparse
import json
import random
import socket
import threading
import time


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Conn:
    def __init__(self, addr, timeout):
        self.addr, self.timeout, self.s, self.buf = addr, timeout, None, b""

    def connect(self):
        self.close()
        host, port = self.addr.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=self.timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        if self.s:
            self.s.close()
        self.s = None

    def line(self):
        while b"\r\n" not in self.buf:
            d = self.s.recv(65536)
            if not d:
                raise ConnectionError("closed")
            self.buf += d
        ln, self.buf = self.buf.split(b"\r\n", 1)
        return ln

    def call(self, *args):
        """The reply: str, None (nil), or raises (error reply: ValueError)."""
        if self.s is None:
            self.connect()
        self.s.sendall(resp(*args))
        ln = self.line()
        t = ln[:1]
        if t == b"+":
            return ln[1:].decode()
        if t == b"-":
            raise ValueError(ln[1:].decode())
        if t == b":":
            return ln[1:].decode()
        if t == b"$":
            n = int(ln[1:])
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                d = self.s.recv(65536)
                if not d:
                    raise ConnectionError("closed")
                self.buf += d
            v, self.buf = self.buf[:n], self.buf[n + 2:]
            return v.decode()
        raise ValueError("unexpected reply %r" % ln)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--keys", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--client-base", type=int, default=0)
    ap.add_argument("--no-final", action="store_true")
    ap.add_argument("servers", nargs="+")
    a = ap.parse_args()
    hist, lock = [], threading.Lock()
    stop = time.monotonic() + a.seconds
    counts = {"ops": 0, "ok": 0, "failed": 0}

    def record(key, op, val, call, ret, final=False):
        o = {"key": key, "op": op, "value": val, "call": call, "ret": ret}
        if final:
            o["final"] = True
        with lock:
            hist.append(o)
            counts["ops"] += 1
            counts["ok" if ret is not None else "failed"] += 1

    def client(j):
        i = a.client_base + j
        rnd = random.Random(a.seed * 1000 + i)
        c = Conn(a.servers[j % len(a.servers)], a.timeout)
        n = 0
        while time.monotonic() < stop:
            key = "k%d" % rnd.randrange(a.keys)
            write = rnd.random() < 0.5
            if write:
                n += 1
                val = "c%d.%d" % (i, n)
            t0 = time.monotonic()
            try:
                if write:
                    r = c.call("SET", key, val)
                    if r != "OK":
                        raise ValueError(r)
                    record(key, "set", val, t0, time.monotonic())
                else:
                    record(key, "get", c.call("GET", key), t0, time.monotonic())
            except (OSError, ValueError, ConnectionError):
                # no answer: a write may still take effect (ret null); a
                # read constrains nothing but is counted as failed
                record(key, "set" if write else "get", val if write else None, t0, None)
                c.close()
                time.sleep(0.05)
        c.close()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(a.seconds + 3 * a.timeout)
    if not a.no_final:
        for srv in a.servers:
            c = Conn(srv, a.timeout)
            for k in range(a.keys):
                key = "k%d" % k
                t0 = time.monotonic()
                try:
                    record(key, "get", c.call("GET", key), t0, time.monotonic(), True)
                except (OSError, ValueError, ConnectionError):
                    record(key, "get", None, t0, None, True)
            c.close()
    with open(a.out, "w") as f:
        for h in sorted(hist, key=lambda o: o["call"]):
            f.write(json.dumps(h) + "\n")
    print("ops=%d ok=%d failed=%d" % (counts["ops"], counts["ok"], counts["failed"]))


if __name__ == "__main__":
    main()
