#!/usr/bin/python3
"""tools/lb/plot.py — plot bench/lb-policies.sh's curves: p99 latency against
offered load, one line per policy, the p99 bound and the units' capacities
marked; a step the policy does not sustain (p99 over the bound or loss over
1 %) has a hollow marker. With a "curves_varying" section (the scenario where
the accelerator slows down during each step) a second panel shows it beside
the static one. Uses Debian's python3-matplotlib (Agg backend, no display).

usage: tools/lb/plot.py CURVES.json OUT.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

STYLE = {"none": ("tab:gray", "o"), "ecmp": ("tab:blue", "s"), "wrr": ("tab:orange", "^"),
         "accel": ("tab:red", "D"), "maglev": ("tab:green", "v"), "p2c": ("tab:purple", "x"),
         "wrr_worst": ("tab:brown", "<")}


def panel(ax, curves, d, title):
    bound = d.get("p99_bound_ms")
    for pol, rows in curves.items():
        rows = sorted(rows, key=lambda r: r["offered_qps"])
        color, marker = STYLE.get(pol, (None, "."))
        xs = [r["offered_qps"] for r in rows]
        ys = [max(r["p99_us"], 1) / 1000.0 for r in rows]
        line, = ax.plot(xs, ys, color=color, label=pol,
                        linestyle="--" if pol == "wrr_worst" else "-")
        ok = [bool(bound) and y <= bound and r.get("loss_pct", 0) <= 1 for y, r in zip(ys, rows)]
        ax.scatter([x for x, o in zip(xs, ok) if o], [y for y, o in zip(ys, ok) if o],
                   marker=marker, s=40, color=line.get_color())
        ax.scatter([x for x, o in zip(xs, ok) if not o], [y for y, o in zip(ys, ok) if not o],
                   marker=marker, s=40, facecolors="none", edgecolors=line.get_color())
    if bound:
        ax.axhline(bound, color="black", linestyle="--", linewidth=1, label="p99 bound %g ms" % bound)
    cpu, acc = d.get("cpu_capacity_qps"), d.get("accel_capacity_qps")
    if cpu and acc:
        ax.axvline(cpu, color="tab:gray", linestyle=":", linewidth=1, label="CPU unit capacity")
        ax.axvline(cpu + acc, color="tab:red", linestyle=":", linewidth=1, label="both units")
    ax.set_yscale("log")
    ax.set_xlabel("offered load (queries/s, open loop)")
    ax.set_ylabel("p99 latency (ms, from scheduled send)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        d = json.load(f)
    cpu, acc = d.get("cpu_capacity_qps"), d.get("accel_capacity_qps")
    slowed = d.get("accel_slowed_capacity_qps")
    panels = []
    if d.get("curves"):
        t = "fixed capacities"
        if cpu and acc:
            t += ": accelerator %.1fx slower than the CPU" % (cpu / float(acc))
        panels.append((d["curves"], t))
    if d.get("curves_varying"):
        t = "accelerator slowed for a third of each step"
        if slowed:
            t += " (%d q/s)" % slowed
        panels.append((d["curves_varying"], t))
    if not panels:
        print("plot.py: no curves in %s" % argv[1], file=sys.stderr)
        return 1
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 4.5), squeeze=False)
    for ax, (curves, title) in zip(axes[0], panels):
        panel(ax, curves, d, title)
    fig.suptitle("innet lb: fast CPU unit + slow accelerator unit")
    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
