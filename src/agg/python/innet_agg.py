"""innet_agg — Python binding of innet's in-network all-reduce (include/innet/agg.h).

A thin ctypes layer over build/libinnet-agg.so (`make build/libinnet-agg.so`):
numpy int32 and float32 arrays are summed across the workers of a job by a
switch running the `agg` program. Protocol, float quantization and its error
bound: docs/aggregation.md.

    import numpy as np, innet_agg
    with innet_agg.Worker(switch="127.0.9.1", bind="127.0.9.10:30000", job=1,
                          worker=0, n_workers=4, slots=64, k=256) as w:
        y = w.allreduce(np.ones(1000, np.float32))      # sum over the 4 workers

One Worker is one member of a job (a UDP socket bound to the address the
switch's member list names). Every worker of a job must make the same calls
with the same lengths, as with MPI_Allreduce. A Worker is used by one thread
at a time; the C calls release the GIL, so one thread per Worker runs in
parallel. LocalSwitch starts a `build/innet switch` process with the agg
program for tests and demos.

Errors: AggError (an OSError with the library's errno: ETIMEDOUT when a
worker died or the switch is gone, ESTALE when this worker fell behind the
job, ECONNRESET when a new run of the job began, EBUSY when the job's
previous run is still there, EDOM for non-finite floats), its message the
library's explanation (innet_agg_error: what failed and what to do).
"""

import ctypes
import errno
import json
import os
import signal
import socket
import struct
import subprocess
import tempfile
import time

import numpy as np

__all__ = ["AggError", "Worker", "LocalSwitch", "error_bound", "load_library", "DEFAULT_UDP"]

DEFAULT_UDP = 47800
_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(_HERE)))   # src/agg/python -> the repository


class AggError(OSError):
    """A failed all-reduce call; .errno is the library's error (positive)."""


class _Conf(ctypes.Structure):
    # struct innet_agg_conf, field for field
    _fields_ = [
        ("switch_ip", ctypes.c_uint32),
        ("switch_udp", ctypes.c_uint16),
        ("local_ip", ctypes.c_uint32),
        ("local_udp", ctypes.c_uint16),
        ("job", ctypes.c_uint16),
        ("worker", ctypes.c_uint8),
        ("n_workers", ctypes.c_uint8),
        ("slots", ctypes.c_uint32),
        ("k", ctypes.c_uint32),
        ("rto_us", ctypes.c_uint32),
        ("rto_max_us", ctypes.c_uint32),
        ("timeout_ms", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
    ]


class _Stats(ctypes.Structure):
    # struct innet_agg_stats
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "calls", "packets_sent", "retransmits", "results", "results_ignored",
        "partial", "excluded", "clipped", "joins")]


_lib = None


def load_library(path=None):
    """Load libinnet-agg.so: PATH, else $INNET_AGG_LIB, else build/libinnet-agg.so
    of this source tree. Called on first use; returns the ctypes library."""
    global _lib
    if _lib is not None and path is None:
        return _lib
    path = path or os.environ.get("INNET_AGG_LIB") or os.path.join(_ROOT, "build", "libinnet-agg.so")
    lib = ctypes.CDLL(path, use_errno=True)
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    lib.innet_agg_open.argtypes = [ctypes.POINTER(_Conf)]
    lib.innet_agg_open.restype = vp
    lib.innet_agg_close.argtypes = [vp]
    lib.innet_agg_close.restype = None
    for name in ("innet_agg_allreduce_i32", "innet_agg_allreduce_f32",
                 "innet_agg_start_i32", "innet_agg_start_f32"):
        f = getattr(lib, name)
        f.argtypes = [vp, vp, vp, sz]
        f.restype = ctypes.c_int
    lib.innet_agg_wait.argtypes = [vp]
    lib.innet_agg_wait.restype = ctypes.c_int
    lib.innet_agg_get_stats.argtypes = [vp, ctypes.POINTER(_Stats)]
    lib.innet_agg_get_stats.restype = None
    lib.innet_agg_f32_error_bound.argtypes = [ctypes.c_uint32, ctypes.c_double]
    lib.innet_agg_f32_error_bound.restype = ctypes.c_double
    lib.innet_agg_error.argtypes = [vp]
    lib.innet_agg_error.restype = ctypes.c_char_p
    _lib = lib
    return lib


def error_bound(n_workers, max_abs):
    """The float error bound per element (docs/aggregation.md) for a block of k
    elements whose largest |input| over all workers is max_abs; add
    2**-24 * |result| for the final rounding to float32."""
    return load_library().innet_agg_f32_error_bound(n_workers, float(max_abs))


def _ip(s):
    return struct.unpack("!I", socket.inet_aton(s))[0]


def _addr(s, default_udp=None):
    """'IP[:UDP]' -> (ip as int, udp)."""
    host, sep, port = s.rpartition(":")
    if not sep:
        host, port = s, None
    udp = int(port) if port else default_udp
    if udp is None or not 0 < udp < 65536:
        raise ValueError("address %r needs a UDP port" % s)
    return _ip(host), udp


def _raise(rc, what, worker=None):
    e = -rc
    why = worker._lib.innet_agg_error(worker._h) if worker is not None and worker._h else None
    why = why.decode(errors="replace") if why else ""
    raise AggError(e, "%s: %s%s" % (what, os.strerror(e), " (%s)" % why if why else ""))


class _Pending:
    """An asynchronous call started by Worker.start: wait() returns the result."""

    def __init__(self, worker, keep, out):
        self._w, self._keep, self._out, self._done = worker, keep, out, False

    def wait(self):
        if not self._done:
            self._done = True
            rc = self._w._lib.innet_agg_wait(self._w._h)
            self._w._pending = None
            self._keep = None
            if rc != 0:
                _raise(rc, "allreduce", self._w)
        return self._out


class Worker:
    """One worker of an all-reduce job (innet_agg_open)."""

    def __init__(self, switch, bind, job, worker, n_workers, slots=64, k=256,
                 rto_us=0, rto_max_us=0, timeout_ms=0, lib=None):
        """switch: 'IP[:UDP]' of the switch port (UDP default 47800); bind:
        'IP:UDP' this worker is known by in the job's member list; slots, k:
        as configured for the job on the switch; the rest as in agg.h (0 =
        the library's default)."""
        self._lib = load_library(lib)
        sip, sudp = _addr(switch, DEFAULT_UDP)
        lip, ludp = _addr(bind)
        self.n_workers, self.worker, self.k = n_workers, worker, k
        conf = _Conf(switch_ip=sip, switch_udp=sudp, local_ip=lip, local_udp=ludp, job=job,
                     worker=worker, n_workers=n_workers, slots=slots, k=k, rto_us=rto_us,
                     rto_max_us=rto_max_us, timeout_ms=timeout_ms)
        if not (0 <= worker < n_workers <= 48):
            raise ValueError("worker must be in 0..n_workers-1, n_workers <= 48")
        self._h = self._lib.innet_agg_open(ctypes.byref(conf))
        if not self._h:
            e = ctypes.get_errno()
            raise AggError(e, "innet_agg_open %s: %s" % (bind, os.strerror(e)))
        self._pending = None

    def close(self):
        if self._h:
            if self._pending is not None:
                try:
                    self._pending.wait()
                except AggError:
                    pass
            self._lib.innet_agg_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _prep(self, x, out):
        if self._h is None:
            raise ValueError("worker is closed")
        x = np.asarray(x)
        if x.dtype == np.int32:
            fn = "i32"
        elif x.dtype == np.float32:
            fn = "f32"
        else:
            raise TypeError("allreduce sums int32 or float32 arrays, not %s" % x.dtype)
        x = np.ascontiguousarray(x)
        if out is None:
            out = np.empty_like(x)
        elif (not isinstance(out, np.ndarray) or out.dtype != x.dtype or out.size != x.size
              or not out.flags.c_contiguous or not out.flags.writeable):
            raise ValueError("out must be a writable C-contiguous %s array of %d elements"
                             % (x.dtype, x.size))
        return fn, x, out

    def allreduce(self, x, out=None):
        """Sum x (int32 or float32 ndarray, any shape) over the job's workers;
        returns out (a new array unless given; out may be x itself). int32 is
        exact (wrapping); float32 within error_bound per element."""
        fn, x, out = self._prep(x, out)
        rc = getattr(self._lib, "innet_agg_allreduce_" + fn)(
            self._h, x.ctypes.data, out.ctypes.data, x.size)
        if rc != 0:
            _raise(rc, "allreduce", self)
        return out

    def start(self, x, out=None):
        """Asynchronous allreduce: returns a handle whose wait() returns out.
        x and out are kept alive until then. One call in flight per Worker."""
        if self._pending is not None:
            raise AggError(errno.EBUSY, "a call is already in flight")
        fn, x, out = self._prep(x, out)
        rc = getattr(self._lib, "innet_agg_start_" + fn)(
            self._h, x.ctypes.data, out.ctypes.data, x.size)
        if rc != 0:
            _raise(rc, "start")
        self._pending = _Pending(self, (x, out), out)
        return self._pending

    def stats(self):
        """The library's counters (struct innet_agg_stats) as a dict."""
        st = _Stats()
        self._lib.innet_agg_get_stats(self._h, ctypes.byref(st))
        return {n: getattr(st, n) for n, _ in _Stats._fields_}


class LocalSwitch:
    """A `build/innet switch` process running the agg program with one job,
    for tests and demos. Workers w = 0..n-1 bind worker_ip:(worker_udp + w).

        with LocalSwitch(n_workers=4) as sw:
            w0 = Worker(**sw.worker_args(0)) ...
    """

    def __init__(self, n_workers, switch_ip="127.0.9.1", worker_ip="127.0.9.10",
                 worker_udp=30000, udp=DEFAULT_UDP, job=1, slots=64, k=256,
                 timeout_us=0, threads=1, innet=None, link=None, ready_s=10.0):
        self.n_workers, self.switch_ip, self.worker_ip = n_workers, switch_ip, worker_ip
        self.worker_udp, self.udp, self.job, self.slots, self.k = worker_udp, udp, job, slots, k
        innet = innet or os.environ.get("INNET") or os.path.join(_ROOT, "build", "innet")
        args = {"k": k, "slots": max(1024, slots),
                "jobs": [{"id": job, "workers": n_workers, "slots": slots, "timeout_us": timeout_us,
                          "members": ["%s:%d" % (worker_ip, worker_udp + w)
                                      for w in range(n_workers)]}]}
        cmd = [innet, "switch", "--name", "agg-py-%d" % os.getpid(), "--ctl", "",
               "--port", switch_ip]
        if link:
            cmd += ["--link", link]
        cmd += ["--program", "agg@%d" % udp, "--args", json.dumps(args),
                "--workers", str(threads)]
        self.proc = None
        # stderr to a file, not a pipe: nobody reads it after "ready"
        self._err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self._err)
        deadline = time.monotonic() + ready_s
        while b"ready" not in self.stderr():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                err = self.stderr().decode(errors="replace")
                self.close()
                raise RuntimeError("innet switch did not start: %s" % err)
            time.sleep(0.02)

    def stderr(self):
        """What the switch printed on stderr so far."""
        self._err.seek(0)
        return self._err.read()

    def worker_args(self, w, **kw):
        """Keyword arguments of Worker for worker w of the job."""
        d = dict(switch="%s:%d" % (self.switch_ip, self.udp),
                 bind="%s:%d" % (self.worker_ip, self.worker_udp + w), job=self.job,
                 worker=w, n_workers=self.n_workers, slots=self.slots, k=self.k)
        d.update(kw)
        return d

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self._err is not None:
            self._err.close()
            self._err = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
