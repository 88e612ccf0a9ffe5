"""corpus.py — run STF tests (p4c's corpus, or the project's own) on BMv2 and
innet's two targets, side by side, and classify each outcome.

Per test: compile its program with p4c-bm2-ss (cached by source hash), read
the STF, translate it into a run script (stf.py) and run that on each target
(executors.py), then compare the frames with the expectations per port.

Outcomes per test and target:

  pass           every expected frame, nothing else, on the ports the test names
  fail           the first difference: which port, which frame, which byte
  refused        innet refused the program (the reason names the construct)
  compile_error  p4c-bm2-ss itself failed (same for every target)
  stf_error      the STF names a table, key or action the program lacks, or
                 uses a command the runner does not know
  error          the executor failed otherwise (a CLI command refused, ...)
  crash          the switch died (signal, sanitizer report)
  hang           it did not finish within the time limit
"""
import json
import os
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from . import executors, p4c, stf

TARGETS = ("bmv2", "user", "xdp")


def find_tests(tree, pattern="-bmv2.stf"):
    """The STF tests of a p4c source tree (testdata/p4_16_samples/*-bmv2.stf),
    or of a directory, sorted by name."""
    d = os.path.join(tree, "testdata", "p4_16_samples")
    if not os.path.isdir(d):
        d = tree
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(pattern))


def program_of(stf_path):
    base = stf_path[:-4]
    for ext in (".p4",):
        if os.path.exists(base + ext):
            return base + ext
    return None


def arch_of(p4_path):
    """'v1model', 'psa', 'pna' or '?' from the program's includes."""
    try:
        with open(p4_path, errors="replace") as f:
            src = f.read()
    except OSError:
        return "?"
    # <psa.p4>, "bmv2/psa.p4" (p4c's PSA tests for psa_switch), <v1model.p4>
    m = re.search(r'^\s*#\s*include\s*[<"](?:[\w./-]*/)?(psa|pna|v1model)\.p4[>"]', src, re.M)
    return m.group(1) if m else "?"


def max_port(t):
    return max(t.ports) if t.ports else 0


def run_one(stf_path, targets, cache_dir, timeout, json_path=None, commands=()):
    """One test on the targets -> a row (dict). commands: files of CLI
    commands run before the test's own script."""
    name = os.path.basename(stf_path)[:-4]
    row = {"test": name, "stf": stf_path}
    p4 = program_of(stf_path) if json_path is None else None
    if json_path is None:
        row["arch"] = arch_of(p4) if p4 else "?"
        if not p4:
            row["compile"] = "error"
            row["compile_error"] = "no program beside the STF"
            return _all(row, targets, "compile_error", row["compile_error"])
        cr = p4c.compile_cached(p4, cache_dir)
        row["compile_seconds"] = round(cr.seconds, 2)
        if not cr.ok:
            row["compile"] = "error"
            row["compile_error"] = cr.error
            return _all(row, targets, "compile_error", cr.error)
        json_path = cr.json_path
    row["compile"] = "ok"
    row["json"] = json_path
    try:
        with open(stf_path) as f:
            stmts = stf.parse(f.read())
        with open(json_path) as f:
            prog = stf.Program(json.load(f))
        test = stf.translate(stmts, prog)
    except (stf.StfError, ValueError, KeyError) as e:
        return _all(row, targets, "stf_error", str(e))
    pre = []
    for c in commands:
        with open(c) as f:
            pre += [l.strip() for l in f if l.strip() and not l.strip().startswith("#")]
    test.script = pre + test.script
    row["packets"] = sum(1 for l in test.script if l.startswith("packet "))
    for t in targets:
        t0 = time.monotonic()
        res = executors.run(t, json_path, test.script, ports=max_port(test) + 1, timeout=timeout)
        r = {"seconds": round(time.monotonic() - t0, 2)}
        if res.status == "ok":
            fails = stf.check(test, res.frames)
            r["outcome"] = "fail" if fails else "pass"
            if fails:
                r["reason"] = fails[0]
                r["failures"] = fails[:5]
        else:
            r["outcome"] = res.status
            r["reason"] = res.error
        if res.cli_errors:
            r["cli_errors"] = res.cli_errors[:5]
        cli_lines = [l.strip() for l in test.script
                     if l.strip() and not l.strip().startswith(("packet ", "#")) and l.strip() != "wait"]
        if res.status == "ok" and len(cli_lines) == len(res.cli):
            r["reads"] = [[l, read_values(o)] for l, o in zip(cli_lines, res.cli)
                          if l.split()[0] in READS]
        if res.cli:
            r["cli"] = [c[-200:] for c in res.cli if c][:20]
        row[t] = r
    return row


READS = ("counter_read", "register_read", "meter_get_rates", "mirroring_get",
         "table_num_entries", "digests")


def read_values(out):
    """The numbers a read command printed (after '=' signs, or alone on a
    line): what two switches must agree on, whatever else they print."""
    if out.startswith("digest ") or "\ndigest " in out:   # a set: BMv2 reports a sample once
        return sorted({tuple(l.split()[2:4]) for l in out.splitlines() if l.startswith("digest ")})
    vals = re.findall(r"=\s*(-?[0-9][0-9.e+-]*)", out)
    if not vals:
        vals = re.findall(r"^\s*(-?[0-9]+)\s*$", out, re.M)
    return vals


def reads_disagree(row, targets):
    """The first read (counter, register, ...) whose values differ between
    the targets that ran, as text, or None."""
    have = [t for t in targets if "reads" in row.get(t, {})]
    for i in range(len(row[have[0]]["reads"]) if have else 0):
        vals = {t: row[t]["reads"][i][1] for t in have if i < len(row[t]["reads"])}
        if len({tuple(v) for v in vals.values()}) > 1:
            return "%s: %s" % (row[have[0]]["reads"][i][0],
                               ", ".join("%s %s" % (t, v) for t, v in vals.items()))
    return None


def _all(row, targets, outcome, reason):
    for t in targets:
        row[t] = {"outcome": outcome, "reason": reason}
    return row


def summarize(rows, targets):
    """The RESULT figures from the rows."""
    s = {"total": len(rows), "compiled": sum(1 for r in rows if r.get("compile") == "ok")}
    s["psa_or_pna"] = sum(1 for r in rows if r.get("arch") in ("psa", "pna"))

    def oc(r, t):
        return r.get(t, {}).get("outcome")

    for t in targets:
        s["%s_pass" % t] = sum(1 for r in rows if oc(r, t) == "pass")
    innet = [t for t in targets if t != "bmv2"]
    s["refused"] = sum(1 for r in rows if any(oc(r, t) == "refused" for t in innet))
    for t in innet:
        s["%s_refused" % t] = sum(1 for r in rows if oc(r, t) == "refused")
    s["crashed"] = sum(1 for r in rows if any(oc(r, t) in ("crash", "hang") for t in targets))
    if "bmv2" in targets:
        bp = [r for r in rows if oc(r, "bmv2") == "pass"]
        s["mismatched"] = sum(1 for r in bp
                              if any(oc(r, t) in ("fail", "error") for t in innet))
        for t in innet:
            if bp:
                s["%s_of_bmv2" % t] = round(sum(1 for r in bp if oc(r, t) == "pass") / len(bp), 3)
                unref = [r for r in bp if oc(r, t) != "refused"]
                if unref:
                    s["%s_of_bmv2_unrefused" % t] = round(
                        sum(1 for r in unref if oc(r, t) == "pass") / len(unref), 3)
    else:
        s["mismatched"] = sum(1 for r in rows if any(oc(r, t) in ("fail", "error") for t in innet))
    return s


def run_corpus(stfs, targets, cache_dir, out_json=None, timeout=60, time_limit=None, jobs=1,
               progress=sys.stderr, json_of=None):
    """Run the tests; write the rows to out_json as they finish (a JSON
    array, one test per line); return (rows, summary). json_of maps an STF
    path to a ready JSON (the project's own tests) instead of compiling."""
    rows = [None] * len(stfs)
    lock = threading.Lock()
    t_start = time.monotonic()
    done = [0]
    skipped = []

    def work(i):
        if time_limit and time.monotonic() - t_start > time_limit:
            skipped.append(i)
            return
        row = run_one(stfs[i], targets, cache_dir, timeout,
                      json_path=(json_of or {}).get(stfs[i]))
        with lock:
            rows[i] = row
            done[0] += 1
            if progress:
                oc = " ".join("%s %s" % (t, row[t]["outcome"]) for t in targets)
                progress.write("test %d of %d: %s: %s\n" % (done[0], len(stfs), row["test"], oc))
                progress.flush()
            if out_json:
                _write(out_json, [r for r in rows if r])

    if jobs <= 1:
        for i in range(len(stfs)):
            work(i)
    else:
        with ThreadPoolExecutor(max_workers=jobs) as ex:
            list(ex.map(work, range(len(stfs))))
    got = [r for r in rows if r]
    if out_json:
        _write(out_json, got)
    s = summarize(got, targets)
    if skipped:
        s["not_run"] = len(skipped)
    s["seconds"] = round(time.monotonic() - t_start, 1)
    return got, s


def _write(path, rows):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(r, sort_keys=True) for r in rows) + "\n]\n")
    os.replace(tmp, path)
