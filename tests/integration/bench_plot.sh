#!/usr/bin/env bash
# bench_plot.sh — bench/plot draws a benchmark's results: from two result
# files of the format bench/run writes (made up here, with the key names of
# bench/run consensus --target xdp), one PNG with its throughput, latency and
# ratio panels; --all draws every benchmark in a directory; a benchmark
# without results, or a call without a name, is an error that says so.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d /tmp/innet-plot.XXXXXX)
cleanup() { rm -rf "$tmp"; }
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || skip "no python3-matplotlib"
for i in 1 2; do
	cat >"$tmp/consensus-2026112${i}T100000Z.json" <<EOF
{"benchmark": "consensus", "timestamp": "2026-11-2${i}T10:00:00Z", "git": {"commit": "abcdef0123", "dirty": false},
 "parameters": {"target": "xdp", "rounds": 3},
 "result": {"xdp_w1_cmds_per_s": 5000$i, "xdp_w1_p50_us": 17, "xdp_w1_p99_us": 80,
            "innet_w1_cmds_per_s": 9000, "innet_w1_p50_us": 100, "innet_w1_p99_us": 300,
            "host_w1_cmds_per_s": 8000, "host_w1_p50_us": 110, "host_w1_p99_us": 320,
            "xdp_w16_cmds_per_s": 70000, "innet_w16_cmds_per_s": 33000, "host_w16_cmds_per_s": 35000,
            "xdp_ratio_w1": 6.2, "xdp_ratio_w16": 2.$i, "ratio_w16": 0.94, "xdp_target_met_w16": 0},
 "runs": []}
EOF
done
cp "$tmp/consensus-20261122T100000Z.json" "$tmp/consensus-latest.json"
out=$(bench/plot consensus --dir "$tmp") || fail "bench/plot consensus: $out"
echo "$out"
grep -q "2 runs" <<<"$out" || fail "want both runs read (the -latest copy not counted twice)"
png=$tmp/consensus.png
[ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "not a PNG"
w=$(/usr/bin/python3 -c 'import struct,sys; d=open(sys.argv[1],"rb").read(24); print(struct.unpack(">I", d[16:20])[0])' "$png")
[ "$w" -gt 1200 ] || fail "want three panels side by side (width $w)"
bench/plot --all --dir "$tmp" --out-dir "$tmp/all" 2>/dev/null && fail "--all into a missing directory succeeded"
mkdir "$tmp/all"
bench/plot --all --dir "$tmp" --out-dir "$tmp/all" >/dev/null || fail "--all"
[ -s "$tmp/all/consensus.png" ] || fail "--all wrote no consensus.png"
rc=0; msg=$(bench/plot kv --dir "$tmp" 2>&1) || rc=$?
[ "$rc" -eq 1 ] && grep -q "no results for 'kv'" <<<"$msg" || fail "a benchmark without results: rc $rc, '$msg'"
rc=0; bench/plot >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "no name: want usage error 2, got $rc"
# How keys are read: inference names the case first, counts are not times.
/usr/bin/python3 - "$PWD/bench/plot" <<'PY' || fail "bench/plot reads keys wrongly"
import importlib.machinery, sys
plot = importlib.machinery.SourceFileLoader("plot", sys.argv[1]).load_module()
want = {
    "digits_fabric_p50_us": ("fabric", "digits", "p50_us"),
    "alexnet_ref_int_per_s": ("ref_int", "alexnet", "per_s"),
    "xdp_w16_cmds_per_s": ("xdp", "w16", "cmds_per_s"),
    "innet_epoch_s": ("innet", "epoch", "s"),
    "innet_epoch_s_min": ("innet", "epoch", "s_min"),
    "innet_calls": ("innet", "-", "calls"),
    "innet_retransmits": ("innet", "-", "retransmits"),
}
bad = {k: (plot.split_key(k), v) for k, v in want.items() if plot.split_key(k) != v}
for k in ("calls", "retransmits", "packets"):
    if plot.TIME_S.search(k) or plot.LATENCY.search(k) or plot.THROUGHPUT.search(k):
        bad[k] = "read as a figure"
if bad:
    print(bad)
    sys.exit(1)
PY
echo "ok"
