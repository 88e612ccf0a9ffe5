#!/usr/bin/python3
"""tools/lb/plot.py — plot bench/lb-policies.sh's curves: p99 latency against
offered load, one line per policy, the p99 bound and the units' capacities
marked. Uses Debian's python3-matplotlib (Agg backend, no display).

usage: tools/lb/plot.py CURVES.json OUT.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

STYLE = {"none": ("tab:gray", "o"), "ecmp": ("tab:blue", "s"), "wrr": ("tab:orange", "^"),
         "accel": ("tab:red", "D"), "maglev": ("tab:green", "v"), "p2c": ("tab:purple", "x")}


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        d = json.load(f)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for pol, rows in d["curves"].items():
        rows = sorted(rows, key=lambda r: r["offered_qps"])
        color, marker = STYLE.get(pol, (None, "."))
        ax.plot([r["offered_qps"] for r in rows], [max(r["p99_us"], 1) / 1000.0 for r in rows],
                marker=marker, color=color, label=pol)
    bound = d.get("p99_bound_ms")
    if bound:
        ax.axhline(bound, color="black", linestyle="--", linewidth=1, label="p99 bound %g ms" % bound)
    cpu, acc = d.get("cpu_capacity_qps"), d.get("accel_capacity_qps")
    if cpu and acc:
        ax.axvline(cpu, color="tab:gray", linestyle=":", linewidth=1, label="CPU unit capacity")
        ax.axvline(cpu + acc, color="tab:red", linestyle=":", linewidth=1, label="both units")
    ax.set_yscale("log")
    ax.set_xlabel("offered load (queries/s, open loop)")
    ax.set_ylabel("p99 latency (ms, from scheduled send)")
    ax.set_title("innet lb: fast CPU unit + slow accelerator unit")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
