"""p4c.py — compile a P4 program for BMv2's simple_switch with the
toolchain's p4c-bm2-ss (P4C_BM2_SS or PATH; its P4 include directory from
P4C_INCLUDE, or p4include/ beside the p4c source tree the binary was built
from), with a cache keyed by the source's hash.

The cache key is the SHA-256 of the program, of every file it includes with
#include "..." (recursively, relative to the including file), of the
compiler's identity (path, size, mtime) and of the options. A cached entry
is DIR/<key>.json (the program) or DIR/<key>.err (p4c's error output).
"""
import hashlib
import os
import re
import subprocess

from .executors import find_tool

_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def compiler():
    """The p4c-bm2-ss path or None."""
    return find_tool("P4C_BM2_SS", "p4c-bm2-ss")


def include_dir(p4c=None):
    d = os.environ.get("P4C_INCLUDE")
    if d:
        return d
    p4c = p4c or compiler()
    if not p4c:
        return None
    # a build tree: <build>/backends/bmv2/p4c-bm2-ss (or <build>/p4c-bm2-ss),
    # the source tree named by its CMakeCache.txt
    d = os.path.dirname(os.path.realpath(p4c))
    for _ in range(4):
        cache = os.path.join(d, "CMakeCache.txt")
        if os.path.exists(cache):
            with open(cache, errors="replace") as f:
                for line in f:
                    if line.startswith("P4C_SOURCE_DIR:") or line.startswith("CMAKE_HOME_DIRECTORY:"):
                        src = line.split("=", 1)[1].strip()
                        inc = os.path.join(src, "p4include")
                        if os.path.isdir(inc):
                            return inc
        inc = os.path.join(d, "p4include")
        if os.path.isdir(inc):
            return inc
        d = os.path.dirname(d)
    for inc in ("/usr/local/share/p4c/p4include", "/usr/share/p4c/p4include"):
        if os.path.isdir(inc):
            return inc
    return None


def _source_hash(path, h, seen):
    path = os.path.realpath(path)
    if path in seen:
        return
    seen.add(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        h.update(b"missing:" + path.encode())
        return
    h.update(path.encode() + b"\0" + data)
    for inc in _INCLUDE.findall(data.decode(errors="replace")):
        p = os.path.join(os.path.dirname(path), inc)
        if os.path.exists(p):
            _source_hash(p, h, seen)


def cache_key(p4_path, options=()):
    p4c = compiler() or ""
    h = hashlib.sha256()
    try:
        st = os.stat(p4c)
        h.update(("%s %d %d" % (p4c, st.st_size, int(st.st_mtime))).encode())
    except OSError:
        h.update(b"no-compiler")
    h.update(" ".join(options).encode())
    _source_hash(p4_path, h, set())
    return h.hexdigest()[:32]


class CompileResult:
    def __init__(self, ok, json_path=None, error="", seconds=0.0, cached=False):
        self.ok = ok
        self.json_path = json_path
        self.error = error
        self.seconds = seconds
        self.cached = cached


def compile_p4(p4_path, out_json, options=(), timeout=300):
    """Compile p4_path into out_json. -> CompileResult (error: p4c's last
    lines)."""
    import time
    p4c = compiler()
    if not p4c:
        return CompileResult(False, error="p4c-bm2-ss not found (P4C_BM2_SS or PATH)")
    inc = include_dir(p4c)
    cmd = [p4c]
    if inc:
        cmd += ["-I", inc]
    cmd += list(options) + ["-o", out_json, p4_path]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return CompileResult(False, error="p4c-bm2-ss timed out after %ds" % timeout,
                             seconds=time.monotonic() - t0)
    dt = time.monotonic() - t0
    out = p.stdout.decode(errors="replace")
    if p.returncode != 0 or not os.path.exists(out_json):
        lines = [l for l in out.strip().splitlines() if l.strip()]
        err = [l for l in lines if "error" in l.lower() or "bug" in l.lower()]
        return CompileResult(False, error=" | ".join((err or lines)[:3])[:500] or
                             "exit %d" % p.returncode, seconds=dt)
    return CompileResult(True, json_path=out_json, seconds=dt)


def compile_cached(p4_path, cache_dir, options=(), timeout=300):
    """compile_p4 through the cache."""
    os.makedirs(cache_dir, exist_ok=True)
    key = cache_key(p4_path, options)
    js = os.path.join(cache_dir, key + ".json")
    er = os.path.join(cache_dir, key + ".err")
    if os.path.exists(js):
        return CompileResult(True, json_path=js, cached=True)
    if os.path.exists(er):
        with open(er) as f:
            return CompileResult(False, error=f.read(), cached=True)
    tmp = js + ".tmp%d" % os.getpid()
    r = compile_p4(p4_path, tmp, options, timeout)
    if r.ok:
        os.replace(tmp, js)
        r.json_path = js
    else:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if "timed out" not in r.error and "not found" not in r.error:
            with open(er, "w") as f:
                f.write(r.error)
    return r
