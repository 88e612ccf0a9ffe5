#!/usr/bin/python3
"""relocate.py — a copy of a topology file (docs/topology.md) that can run
beside the original: its own name, state directory and addresses, and
optionally other link-emulation rates. With --name and no --state-dir the copy's
state directory is the default for its name (/tmp/innet-NAME), never the
original's.

    relocate.py IN OUT [--name NAME] [--state-dir DIR] [--addr-base A.B.C.D]
                [--hosts A.B.C] [--rates LOSS,DUP,REORDER [--links A:B]]
                [--target udp|xdp] [--netns]

--target sets the file's "target" (every switch; xdp implies netns mode) and
drops any per-switch "target"; --netns puts a udp fabric in namespaces too.

--hosts A.B.C gives host i (in file order) the address A.B.C.(i+1).
--rates sets loss, dup and reorder on the links named by --links A:B (links
whose "a" starts with A and "b" with B), or, without --links, on every link
that already emulates something (has loss, dup or reorder). A rate outside
[0, 1], or --rates matching no link, is an error (exit 2): a test that meant
to add faults must not silently run without them.

Used by tests and benchmarks that bring up an example topology next to the
suite's own copy (kv_rejoin, kv_snapshot, kv_faults, dnn_*, bench/kv,
bench/inference).
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--name")
    ap.add_argument("--state-dir")
    ap.add_argument("--addr-base")
    ap.add_argument("--hosts", metavar="A.B.C")
    ap.add_argument("--rates", metavar="LOSS,DUP,REORDER")
    ap.add_argument("--links", metavar="A:B")
    ap.add_argument("--target", choices=("udp", "xdp"))
    ap.add_argument("--netns", action="store_true")
    o = ap.parse_args()

    t = json.load(open(o.src))
    t.pop("comment", None)
    if o.name:
        t["name"] = o.name
        # A copy with a name of its own gets the state directory of that name
        # (/tmp/innet-NAME) unless one is given: keeping the original's would
        # make the two fabrics share sockets and fabric.json.
        if not o.state_dir:
            t.pop("state_dir", None)
    if o.state_dir:
        t["state_dir"] = o.state_dir
    if o.addr_base:
        t["addr_base"] = o.addr_base
    if o.hosts:
        for i, h in enumerate(t.get("hosts", [])):
            h["addr"] = "%s.%d" % (o.hosts, i + 1)
    if o.target:
        t["target"] = o.target
        for sw in t.get("switches", []):
            sw.pop("target", None)
    if o.netns:
        t["netns"] = True
    if o.links and not o.rates:
        ap.error("--links needs --rates")
    if o.rates:
        try:
            loss, dup, reorder = (float(x) for x in o.rates.split(","))
        except ValueError:
            ap.error("--rates: expected LOSS,DUP,REORDER, got %r" % o.rates)
        if not all(0 <= x <= 1 for x in (loss, dup, reorder)):
            ap.error("--rates: each rate must be in [0, 1]")
        if o.links:
            a, _, b = o.links.partition(":")
            match = lambda l: l["a"].startswith(a) and l["b"].startswith(b)
        else:
            match = lambda l: any(k in l for k in ("loss", "dup", "reorder"))
        n = 0
        for l in t.get("links", []):
            if match(l):
                l.update(loss=loss, dup=dup, reorder=reorder)
                n += 1
        if n == 0:
            ap.error("--rates: no link matched")
    json.dump(t, open(o.dst, "w"), indent=1)


if __name__ == "__main__":
    sys.exit(main())
