"""executors.py — run a P4 program (BMv2 JSON) on a run script, on BMv2's
simple_switch or on innet (`innet p4 run`), and report what came out.

The run script is the language `innet p4 run` reads (docs/p4.md):

  packet PORT HEX   a frame into PORT
  wait              let the switch finish what it has in flight
  # ...             a comment
  anything else     a simple_switch_CLI command (table_add, register_read, ...)

and a run's result is the frames sent, in order ((port, bytes)), and each
CLI command's output (a list of strings, one per command, in order).

BMv2 (simple_switch from the toolchain: SIMPLE_SWITCH or PATH; its CLI:
SIMPLE_SWITCH_CLI or PATH) runs with --packet-in on a nanomsg PAIR socket
(through libnanomsg with ctypes): frames go in and come out as messages
with their port, so any port number works and nothing needs root. BMv2 is
asynchronous — a frame is handed to its ingress thread and the call
returns — so the executor makes the script sequential the only way BMv2
allows: before each CLI command, at each `wait` and at the end it waits
until BMv2 has been quiet (no frame out) for a while (P4T_QUIET seconds,
0.2 by default) after the last frame in. Frames in a row are not separated:
BMv2 has one ingress thread, so they enter it in script order, and per port
they leave in order (what STF compares).

innet runs the script itself (`innet p4 run --target user|xdp --ports N
JSON SCRIPT`: run to completion, outputs in order): INNET or build/innet.
"""
import ctypes
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time


class Result:
    """What one run produced.

    status   "ok"; "refused" (innet refused the program: `error` names the
             construct); "error" (the executor failed: bad script line, the
             CLI said no, ...); "crash" (the process died of a signal or a
             sanitizer report); "hang" (killed at the time limit)
    frames   [(port, bytes)] in the order they were sent
    cli      [str]: each CLI command's output, in script order
    error    the reason, for anything but "ok"
    cli_errors  CLI commands the switch refused (the run goes on, as with
             p4c's runner, which pipes the commands and reads no answer)
    """

    def __init__(self, status="ok", frames=None, cli=None, error=""):
        self.status = status
        self.frames = frames or []
        self.cli = cli or []
        self.error = error
        self.cli_errors = []

    def __repr__(self):
        return "Result(%s, %d frames%s)" % (self.status, len(self.frames),
                                             ", " + self.error if self.error else "")


def find_tool(env, name, extra=()):
    """A tool's path from the environment variable, PATH, or extra places;
    None if absent."""
    p = os.environ.get(env)
    if p:
        return p if os.access(p, os.X_OK) else None
    p = shutil.which(name)
    if p:
        return p
    for e in extra:
        if os.access(e, os.X_OK):
            return e
    return None


# -- nanomsg (libnanomsg through ctypes) -------------------------------------

_AF_SP, _NN_PAIR, _NN_SOL_SOCKET, _NN_RCVTIMEO, _NN_SNDTIMEO = 1, 16, 0, 5, 4
_NN_MSG = ctypes.c_size_t(-1).value
_MSG_PACKET_IN, _MSG_PACKET_OUT = 3, 4
_NN_SUB, _NN_SUB_SUBSCRIBE, _NN_DONTWAIT = 33, 1, 1
_LEARN_HDR = 32   # "LEA|", switch id u64, context u32, list id i32, buffer id u64, samples u32


class _Nanomsg:
    lib = None

    def __init__(self, addr, sub=False):
        if _Nanomsg.lib is None:
            _Nanomsg.lib = ctypes.CDLL("libnanomsg.so.5", use_errno=True)
            lib = _Nanomsg.lib
            lib.nn_recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            lib.nn_send.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
            lib.nn_freemsg.argtypes = [ctypes.c_void_p]
            lib.nn_setsockopt.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                          ctypes.c_void_p, ctypes.c_size_t]
            lib.nn_connect.argtypes = [ctypes.c_int, ctypes.c_char_p]
        self.lib = _Nanomsg.lib
        self.s = self.lib.nn_socket(_AF_SP, _NN_SUB if sub else _NN_PAIR)
        if self.s < 0:
            raise OSError(ctypes.get_errno(), "nn_socket")
        if sub:   # every topic
            self.lib.nn_setsockopt(self.s, _NN_SUB, _NN_SUB_SUBSCRIBE, b"", 0)
        for opt in (_NN_RCVTIMEO, _NN_SNDTIMEO):
            ms = ctypes.c_int(50 if opt == _NN_RCVTIMEO else 5000)
            self.lib.nn_setsockopt(self.s, _NN_SOL_SOCKET, opt, ctypes.byref(ms), 4)
        if self.lib.nn_connect(self.s, addr.encode()) < 0:
            raise OSError(ctypes.get_errno(), "nn_connect " + addr)

    def send(self, data):
        if self.lib.nn_send(self.s, data, len(data), 0) < 0:
            raise OSError(ctypes.get_errno(), "nn_send")

    def recv(self, wait=True):
        """One message or None after the receive timeout (at once with
        wait=False)."""
        buf = ctypes.c_void_p()
        n = self.lib.nn_recv(self.s, ctypes.byref(buf), _NN_MSG, 0 if wait else _NN_DONTWAIT)
        if n < 0:
            return None
        data = ctypes.string_at(buf, n)
        self.lib.nn_freemsg(buf)
        return data

    def close(self):
        self.lib.nn_close(self.s)


def _free_tcp_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def _port_open(port):
    s = socket.socket()
    s.settimeout(0.2)
    try:
        return s.connect_ex(("127.0.0.1", port)) == 0
    finally:
        s.close()


class Bmv2Error(Exception):
    pass


class Bmv2:
    """One simple_switch process with a program loaded, its CLI and its
    packet socket; a context manager. Use run_script(), or send()/sync()/
    cli() directly."""

    name = "bmv2"

    def __init__(self, json_path, workdir=None, quiet=None, timeout=60.0, log=None):
        self.ss = find_tool("SIMPLE_SWITCH", "simple_switch")
        self.cli_path = find_tool("SIMPLE_SWITCH_CLI", "simple_switch_CLI")
        if not self.ss or not self.cli_path:
            raise Bmv2Error("BMv2 not found (set SIMPLE_SWITCH and SIMPLE_SWITCH_CLI, or put "
                            "simple_switch and simple_switch_CLI on PATH)")
        self.json_path = json_path
        self.quiet = float(os.environ.get("P4T_QUIET", "0.2")) if quiet is None else quiet
        self.timeout = timeout
        self.own_dir = workdir is None
        self.dir = workdir or tempfile.mkdtemp(prefix="p4t-bmv2-")
        self.log = log
        self.proc = self.cli_proc = self.nn = None
        self.frames = []
        self.lock = threading.Lock()
        self.last_in = self.last_out = time.monotonic()
        self.stop = False
        self.rx = None
        self.sub = None
        self.digests = []          # (list id, sample bytes), as BMv2 sent them
        self.digest_read = 0

    # -- lifecycle
    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *a):
        self.close()

    def start(self):
        self.thrift = _free_tcp_port()
        pkt_addr = "ipc://%s/pkt.ipc" % self.dir
        notif = "ipc://%s/notif.ipc" % self.dir
        out = open(os.path.join(self.dir, "switch.log"), "w")
        self.proc = subprocess.Popen(
            [self.ss, "--packet-in", pkt_addr, "--thrift-port", str(self.thrift),
             "--device-id", str(random.randint(1, 1 << 30)), "--notifications-addr", notif,
             self.json_path], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        out.close()
        t0 = time.monotonic()
        while not _port_open(self.thrift):
            if self.proc.poll() is not None:
                raise Bmv2Error("simple_switch exited (%d): %s" % (self.proc.returncode,
                                                                  self._switch_log()))
            if time.monotonic() - t0 > self.timeout:
                raise Bmv2Error("simple_switch did not open its thrift port")
            time.sleep(0.05)
        self.nn = _Nanomsg(pkt_addr)
        self.sub = _Nanomsg(notif, sub=True)
        self.rx = threading.Thread(target=self._receive, daemon=True)
        self.rx.start()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.cli_proc = subprocess.Popen(
            [self.cli_path, "--thrift-port", str(self.thrift)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self._cli_read()   # the intro and the first prompt
        # Egress queues deep enough that BMv2 drops nothing of its own (64
        # frames by default, and a full queue drops).
        self.cli("set_queue_depth 1000000")

    def _switch_log(self):
        try:
            with open(os.path.join(self.dir, "switch.log")) as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def close(self):
        self.stop = True
        if self.cli_proc:
            try:
                self.cli_proc.stdin.close()
            except OSError:
                pass
            try:
                self.cli_proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.cli_proc.kill()
                self.cli_proc.wait()
            self.cli_proc.stdout.close()
        if self.rx:
            self.rx.join()
        if self.nn:
            self.nn.close()
        if self.sub:
            self.sub.close()
        if self.proc:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        if self.own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    # -- packets
    def _receive(self):
        while not self.stop:
            while True:    # learning notifications (digests)
                n = self.sub.recv(wait=False)
                if n is None:
                    break
                if n[:4] == b"LEA|" and len(n) >= _LEARN_HDR:
                    list_id, = struct.unpack("<i", n[16:20])
                    count, = struct.unpack("<I", n[28:32])
                    body = n[_LEARN_HDR:]
                    if count:
                        size = len(body) // count
                        with self.lock:
                            self.digests += [(list_id, body[i * size:(i + 1) * size])
                                             for i in range(count)]
            m = self.nn.recv()
            if m is None or len(m) < 12:
                continue
            typ, port, length = struct.unpack("<iii", m[:12])
            if typ != _MSG_PACKET_OUT:
                continue
            with self.lock:
                self.frames.append((port, m[12:12 + length]))
                self.last_out = time.monotonic()

    def send(self, port, data):
        self.nn.send(struct.pack("<iii", _MSG_PACKET_IN, port, len(data)) + data)
        with self.lock:
            self.last_in = time.monotonic()

    def sync(self, limit=None):
        """Wait until no frame has come out for `quiet` seconds since the
        last frame in (or until `limit` seconds have passed)."""
        t0 = time.monotonic()
        limit = self.timeout if limit is None else limit
        while True:
            with self.lock:
                last = max(self.last_in, self.last_out)
            now = time.monotonic()
            if now - last >= self.quiet:
                return
            if now - t0 > limit or not self.alive():
                return
            time.sleep(min(0.02, self.quiet / 4))

    def take_frames(self):
        with self.lock:
            f, self.frames = self.frames, []
        return f

    def read_digests(self):
        """The digests BMv2 sent since the last read, as `innet ctl
        digests` prints them: `digest NAME ID HEX` (BMv2 batches a learn
        list's samples up to 16 or 1 s, and sends a sample again only after
        the control plane acknowledged it: the same sample twice is
        reported once)."""
        self.sync()
        if self.learn_lists():
            time.sleep(1.2)   # BMv2's learn timeout: 1 s
        with self.lock:
            new = self.digests[self.digest_read:]
            self.digest_read = len(self.digests)
        names = self.learn_lists()
        return "\n".join("digest %s %d %s" % (names.get(i, "?"), i, d.hex()) for i, d in new)

    def learn_lists(self):
        if not hasattr(self, "_ll"):
            try:
                import json
                with open(self.json_path) as f:
                    self._ll = {l["id"]: l["name"] for l in json.load(f).get("learn_lists", [])}
            except (OSError, ValueError, KeyError):
                self._ll = {}
        return self._ll

    # -- the CLI
    def _cli_read(self):
        buf = b""
        fd = self.cli_proc.stdout
        while not buf.endswith(b"RuntimeCmd: "):
            ch = fd.read1(4096) if hasattr(fd, "read1") else fd.read(1)
            if not ch:
                raise Bmv2Error("simple_switch_CLI exited: " + buf.decode(errors="replace")[-500:])
            buf += ch
        return buf[:-len(b"RuntimeCmd: ")].decode(errors="replace")

    def cli(self, line):
        """Run one CLI command; its output (without the prompt)."""
        self.cli_proc.stdin.write(line.encode() + b"\n")
        self.cli_proc.stdin.flush()
        return self._cli_read().strip("\n")

    def run_script(self, lines):
        """Run a script (lines) -> Result."""
        res = Result()
        for n, raw in enumerate(lines, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if not self.alive():
                break
            w = line.split()
            if w[0] == "packet":
                if len(w) != 3 or not w[1].isdigit():
                    return Result("error", error="script line %d: packet PORT HEX" % n)
                try:
                    self.send(int(w[1]), bytes.fromhex(w[2]))
                except ValueError:
                    return Result("error", error="script line %d: bad hex" % n)
                except OSError as e:
                    # simple_switch stopped taking frames (its packet-in
                    # socket full for the send timeout): a hang, or a crash
                    if self.alive():
                        return Result("hang", error="script line %d: simple_switch takes no "
                                      "frame (nn_send: %s)" % (n, e.strerror or e))
                    break
            elif w[0] == "wait":
                self.sync()
            elif w[0] == "digests":
                res.cli.append(self.read_digests())
            else:
                self.sync()
                out = self.cli(line)
                res.cli.append(out)
                if _cli_failed(out):
                    res.cli_errors.append("%s: %s" % (line[:80], out.strip().splitlines()[-1]))
        self.sync()
        res.frames = self.take_frames()
        if not self.alive():
            rc = self.proc.returncode
            res.status = "crash"
            res.error = "simple_switch exited (%s): %s" % (rc, self._switch_log()[-300:])
        return res


_CLI_ERR = re.compile(r"^(Error|Invalid|Unknown|Bad|Exception|\*\*\*)", re.M)


def _cli_failed(out):
    return bool(_CLI_ERR.search(out))


def run_bmv2(json_path, lines, timeout=120.0):
    """Run a script on a fresh simple_switch -> Result (never raises for the
    program's behaviour; a missing BMv2 raises Bmv2Error)."""
    try:
        with Bmv2(json_path, timeout=timeout) as sw:
            return sw.run_script(lines)
    except Bmv2Error as e:
        if "not found" in str(e):
            raise
        return Result("error", error=str(e))


# -- innet ------------------------------------------------------------------

_REFUSED = re.compile(r"unsupported|not supported|refus", re.I)


def innet_binary():
    p = os.environ.get("INNET")
    if p:
        return p
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "..", "build", "innet"))


def run_innet(json_path, lines, target="user", ports=None, timeout=60.0, workdir=None):
    """Run a script with `innet p4 run` -> Result."""
    innet = innet_binary()
    if not os.access(innet, os.X_OK):
        return Result("error", error="no innet binary at %s (make, or set INNET)" % innet)
    ports = ports or 1
    d = workdir or tempfile.mkdtemp(prefix="p4t-innet-")
    try:
        sp = os.path.join(d, "script.txt")
        with open(sp, "w") as f:
            f.write("\n".join(lines) + "\n")
        cmd = [innet, "p4", "run", "--target", target, "--ports", str(ports), json_path, sp]
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return Result("hang", error="innet p4 run did not finish in %gs" % timeout)
        out = p.stdout.decode(errors="replace")
        err = p.stderr.decode(errors="replace")
        res = Result()
        cur = None
        for line in out.splitlines():
            if line.startswith("out "):
                w = line.split()
                try:
                    res.frames.append((int(w[1]), bytes.fromhex(w[2] if len(w) > 2 else "")))
                except (ValueError, IndexError):
                    return Result("error", error="innet printed a bad line: %r" % line)
                cur = None
            elif line.startswith(">"):
                text = line[2:] if line.startswith("> ") else line[1:]
                if cur is None:
                    res.cli.append(text)
                    cur = len(res.cli) - 1
                else:
                    res.cli[cur] += "\n" + text
            else:
                cur = None
        if p.returncode < 0 or "AddressSanitizer" in err or "runtime error:" in err:
            sig = -p.returncode if p.returncode < 0 else 0
            res.status = "crash"
            res.error = ("signal %d" % sig if sig else "sanitizer") + ": " + err.strip()[-300:]
        elif p.returncode != 0:
            last = err.strip().splitlines()[-1] if err.strip() else "exit %d" % p.returncode
            res.status = "refused" if _REFUSED.search(err) else "error"
            res.error = last
        return res
    finally:
        if workdir is None:
            shutil.rmtree(d, ignore_errors=True)


def run(target, json_path, lines, ports=None, timeout=60.0):
    """Run a script on "bmv2", "user" or "xdp" -> Result."""
    if target == "bmv2":
        return run_bmv2(json_path, lines, timeout=max(timeout, 60.0))
    return run_innet(json_path, lines, target=target, ports=ports, timeout=timeout)
