#!/usr/bin/env bash
# bench_smoke.sh — the benchmarks' reporting, on tiny runs (a smoke test,
# not a measurement: the figures are noise, only their presence and
# consistency are checked):
#   - no benchmark result is tracked by git, and the result files are ignored
#     (a tracked result made every later run record "dirty": true);
#   - BENCH_RESULTS_DIR sends the JSON files elsewhere;
#   - forwarding: ratio = innet / the best relay (raw with GSO or without),
#     checked against the runs' unrounded rates, and starved relays named;
#   - lb-policies: gain_static, gain_varying, and gain = their minimum;
#   - allreduce: several rounds, medians and the spread;
#   - stragglers: medians and the straggler's fate beside the means;
#   - lb-qps (root): the XDP/nftables/dnsdist part, its keys and ratio, and
#     that it removes its namespaces;
#   - xdp-forwarding (root): the user-space engine's sweep over paced offered
#     rates, its keys, a pace that never exceeds the rate asked for, the
#     overload ratio, no namespaces left; bad --rates/--contenders refused.
# Loopback only; addresses moved off the benchmarks' defaults where they
# can be (forwarding --udp-port, LBP_NET) so a real benchmark run elsewhere
# on the machine does not collide with this one.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ROOT=$PWD
OUT=$(mktemp -d /tmp/innet-bench-smoke.XXXXXX)
cleanup() { rm -rf "$OUT"; }
export BENCH_NO_DEPS=1 BENCH_RESULTS_DIR="$OUT/results"

echo "== git: no result file tracked, result files ignored"
if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
	tracked=$(git -C "$ROOT" ls-files bench/results | grep -v '^bench/results/.gitkeep$' || true)
	[ -z "$tracked" ] || fail "result files tracked by git: $tracked"
	for f in forwarding-latest.json forwarding-20260101T000000Z.json lb-policies-latest-curves.png x.log; do
		git -C "$ROOT" check-ignore -q "bench/results/$f" || fail "bench/results/$f is not ignored"
	done
	echo "ok"
else
	skip_part "the git checks (not a git checkout)"
fi

# result NAME: the RESULT line of $OUT/NAME.out; key VALUE from it
result() { grep "^RESULT $1 " "$OUT/$1.out" | tail -n 1 || fail "$1: no RESULT line"; }
key() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p" | head -n 1; }
need() { # LINE KEY...: each key present
	local line=$1 k
	shift
	for k in "$@"; do
		[ -n "$(key "$line" "$k")" ] || fail "no $k in: $line"
	done
}
# close SHOWN EXACT DECIMALS: SHOWN (a RESULT figure printed with DECIMALS
# decimals) is EXACT (recomputed from unrounded figures) up to its own
# rounding, relative to its size: whatever the figures are (a loaded machine
# gives tiny denominators), only the printing may differ.
close() {
	awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b
		exit !(d <= 0.5 * 10 ^ -n + 1e-4 * m) }'
}
run() { # NAME ARGS...
	local name=$1 rc=0
	shift
	echo "== bench/run $name $*" >&2
	timeout "$(slow 300)" bench/run "$name" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err" || rc=$?
	[ "$rc" -eq 0 ] || { tail -n 20 "$OUT/$name.err" >&2; fail "bench/run $name: exit $rc"; }
	[ -f "$OUT/results/$name-latest.json" ] || fail "$name: no JSON in BENCH_RESULTS_DIR"
	grep -q '"dirty": ' "$OUT/results/$name-latest.json" || fail "$name: no dirty flag in the JSON"
	result "$name"
}

# (a timer of 30 ms and a delay of 150 ms: on a machine busy enough to hold a
# prompt worker back for more than the default 5 ms, the timer would exclude it)
line=$(run stragglers --calls 10 --rounds 1 --timeout-us 30000 --delay-ms 150)
echo "$line"
need "$line" base_ms none_ms timer_ms base_median_ms none_median_ms timer_median_ms speedup \
	speedup_median timer_partial_calls straggler_timer straggler_timer_done straggler_timer_out
echo "ok: medians and the straggler's fate"

if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
	line=$(run allreduce --mode loopback --mib 1 --iters 1 --rounds 2)
	echo "$line"
	need "$line" lo_ratio lo_ratio_min lo_ratio_max lo_innet_s_min lo_innet_s_max lo_mpi_ring_s_min
	[ "$(key "$line" rounds)" = 2 ] || fail "allreduce: rounds=2 not in RESULT"
	awk -v lo="$(key "$line" lo_ratio_min)" -v hi="$(key "$line" lo_ratio_max)" \
		'BEGIN { exit !(lo <= hi) }' || fail "allreduce: ratio_min > ratio_max"
	echo "ok: medians over rounds with the spread"
else
	skip_part "allreduce (no OpenMPI: mpicc and mpirun, scripts/install-deps)"
fi

line=$(run forwarding --rounds 1 --duration 0.5 --warmup 0.2 --sizes 64 --udp-port 9611)
echo "$line"
need "$line" innet_64_mpps raw_64_mpps raw_nogso_64_mpps innet_nogso_64_mpps ratio_64 cpu_ratio_64 \
	best_relay_64 ratio_nogso_64 ratio cpu_ratio
need "$line" starved_64
# ratio_64 against innet / best relay recomputed from the runs' unrounded
# delivered rates (the JSON), not from the RESULT's 3-decimal Mpps: on a busy
# machine a relay may deliver 0.05 Mpps, and the rounding of such figures
# alone moves their ratio by more than any absolute tolerance. And a relay
# that delivered (nearly) nothing must be named as starved, not measured.
read -r want best starved < <(/usr/bin/python3 - "$OUT/results/forwarding-latest.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
runs = [r for r in d["runs"] if int(r["size"]) == 64]
def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
impls = ("raw", "innet", "innet_nogso", "raw_nogso")
pps, st = {}, {}
for impl in impls:
    rs = [r for r in runs if r["impl"] == impl]
    pps[impl] = median([float(r["delivered_pps"]) for r in rs])
    # starved: delivered under 1% of the offered rate in most of its runs
    st[impl] = 2 * sum(float(r["delivered_pps"]) < 0.01 * float(r["offered_pps"]) or
                       float(r["delivered_pps"]) == 0 for r in rs) > len(rs)
best = "raw_nogso" if pps["raw_nogso"] > pps["raw"] else "raw"
print("%.9f %s %s" % (pps["innet"] / pps[best] if pps[best] > 0 else 0, best,
                      ",".join(i for i in impls if st[i]) or "none"))
EOF
) || fail "forwarding: cannot read the runs of $OUT/results/forwarding-latest.json"
[ "$(key "$line" best_relay_64)" = "$best" ] || fail "forwarding: best_relay_64 is not $best"
close "$(key "$line" ratio_64)" "$want" 3 || fail "forwarding: ratio_64 is not innet / best relay ($want)"
[ "$(key "$line" starved_64)" = "$starved" ] || fail "forwarding: starved_64=$(key "$line" starved_64), the runs say $starved"
echo "ok: ratio = innet / best relay (exact: $want), starved relays named ($starved)"

line=$(LBP_NET=127.93 run lb-policies --rates 600 --step 0.6 --reps 1)
echo "$line"
need "$line" none_max_qps maglev_max_qps wrr_max_qps accel_max_qps none_varying_max_qps \
	wrr_varying_max_qps accel_varying_max_qps wrr_worst_varying_max_qps best_baseline_static \
	best_baseline_varying gain_static gain_varying gain weights
[ "$(key "$line" weights)" = 2:1 ] || fail "lb-policies: weights are not the capacities (2:1)"
min=$(awk -v a="$(key "$line" gain_static)" -v b="$(key "$line" gain_varying)" \
	'BEGIN { if (a == "nan" || b == "nan") print "nan"; else printf "%.2f", (a < b ? a : b) }')
[ "$(key "$line" gain)" = "$min" ] || fail "lb-policies: gain is not min(gain_static, gain_varying) = $min"
grep -q '"scenario": "varying"' "$OUT/results/lb-policies-latest.json" || fail "lb-policies: no varying runs"
grep -q '"accel_slowdowns": [1-9]' "$OUT/results/lb-policies-latest.json" ||
	fail "lb-policies: the accelerator never slowed down in the varying scenario"
echo "ok: gain_static, gain_varying, gain = their minimum"
lbq_missing=""
have_root_netns || lbq_missing="root and ip netns"
for c in nft dnsdist nsd dnsperf; do
	command -v $c >/dev/null || lbq_missing+="${lbq_missing:+, }$c"
done
if [ -z "$lbq_missing" ]; then
	line=$(run lb-qps --target xdp --quick)
	echo "$line"
	need "$line" xdp_qps nft_qps dnsdist_netns_qps xdp_nft_ratio xdp_dnsdist_ratio xdp_nft_met \
		xdp_dnsdist_met targets_missed nsd_direct_netns_qps xdp_client_limit_fraction xdp_ebpf_ns_per_frame
	for k in xdp_qps nft_qps dnsdist_netns_qps; do
		awk -v q="$(key "$line" $k)" 'BEGIN { exit !(q > 0) }' || fail "lb-qps: $k is not > 0"
	done
	want=$(awk -v a="$(key "$line" xdp_qps)" -v b="$(key "$line" nft_qps)" 'BEGIN { printf "%.9f", a / b }')
	close "$(key "$line" xdp_nft_ratio)" "$want" 2 || fail "lb-qps: xdp_nft_ratio is not xdp_qps / nft_qps ($want)"
	# nothing left behind: namespaces, the nft table in them went with them
	left=$(ip netns list | grep -c '^innet-lbq' || true)
	[ "$left" -eq 0 ] || fail "lb-qps: $left namespaces left behind"
	echo "ok: lb-qps on XDP against nftables and dnsdist, ratio = xdp / nft, namespaces removed"
else
	skip_part "lb-qps --target xdp (needs $lbq_missing)"
fi
for bad in "--rates abc" "--rates 0.1,,0.2" "--contenders xdp,bogus" "--userspace-prio 0"; do
	rc=0
	# shellcheck disable=SC2086 # the option and its value
	bench/run xdp-forwarding $bad >/dev/null 2>"$OUT/bad.err" || rc=$?
	[ "$rc" -eq 2 ] || fail "xdp-forwarding $bad: exit $rc, not 2 (a usage error)"
done
echo "ok: xdp-forwarding refuses bad --rates, --contenders, --userspace-prio"
if [ "$(id -u)" -eq 0 ] && ip netns list >/dev/null 2>&1; then
	line=$(run xdp-forwarding --seconds 1 --rounds 1 --sizes 64 --contenders userspace --rates 0.05,0.1)
	echo "$line"
	need "$line" userspace_mpps_64 offered_mpps_64 userspace_mpps_64_at_0.05 offered_mpps_64_at_0.05 \
		userspace_mpps_64_at_0.1 offered_mpps_64_at_0.1 userspace_overload_ratio_64 \
		userspace_sockdrop_frac_64 userspace_ringdrop_frac_64 skipped_runs
	# paced: never more than asked (a batch of 64 early at most)
	for r in 0.05 0.1; do
		awk -v o="$(key "$line" offered_mpps_64_at_$r)" -v r="$r" 'BEGIN { exit !(o > 0 && o <= r * 1.05) }' ||
			fail "xdp-forwarding: offered $(key "$line" offered_mpps_64_at_$r) Mpps when paced at $r"
	done
	# (from the printed 3-decimal rates: the ratio lies between what their
	# rounding allows, plus its own printing)
	want=$(awk -v a="$(key "$line" userspace_mpps_64_at_0.1)" -v b="$(key "$line" userspace_mpps_64_at_0.05)" \
		'BEGIN { m = (a > b ? a : b); printf "%.3f", (m > 0 ? a / m : 0) }')
	awk -v s="$(key "$line" userspace_overload_ratio_64)" -v a="$(key "$line" userspace_mpps_64_at_0.1)" \
		-v b="$(key "$line" userspace_mpps_64_at_0.05)" 'BEGIN { m = (a > b ? a : b); e = 0.0005
		if (m <= e) exit !(s >= 0 && s <= 1.0005)
		lo = (a - e) / (m + e); hi = (a + e) / (m - e); if (hi > 1) hi = 1
		exit !(s >= lo - e && s <= hi + e) }' ||
		fail "xdp-forwarding: userspace_overload_ratio_64 is not the top rate's goodput over the best ($want)"
	ns=$(sed -n 's/.*"netns": "\([^"]*\)".*/\1/p' "$OUT/results/xdp-forwarding-latest.json" | head -n 1)
	[ -n "$ns" ] || fail "xdp-forwarding: no netns parameter in the JSON"
	left=$(ip netns list | grep -c "^$ns-" || true)
	[ "$left" -eq 0 ] || fail "xdp-forwarding: $left of its namespaces ($ns-*) left behind"
	echo "ok: xdp-forwarding's sweep of paced rates, its keys, the overload ratio, namespaces removed"
else
	echo "== xdp-forwarding: skipped (needs root and network namespaces)"
fi
echo "bench_smoke: all checks passed"
