#!/usr/bin/env bash
# bench_smoke.sh — the benchmarks' reporting, on tiny runs (a smoke test,
# not a measurement: the figures are noise, only their presence and
# consistency are checked):
#   - no benchmark result is tracked by git, and the result files are ignored
#     (a tracked result made every later run record "dirty": true);
#   - BENCH_RESULTS_DIR sends the JSON files elsewhere;
#   - forwarding: ratio = innet / the best relay (raw with GSO or without);
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
	echo "not a git checkout: skipped"
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
close() { # A B: |A - B| <= 0.011 (rounding of 3-decimal figures)
	awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.011) }'
}
run() { # NAME ARGS...
	local name=$1 rc=0
	shift
	echo "== bench/run $name $*" >&2
	timeout 300 bench/run "$name" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err" || rc=$?
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
	echo "== allreduce: skipped (no OpenMPI)"
fi

line=$(run forwarding --rounds 1 --duration 0.5 --warmup 0.2 --sizes 64 --udp-port 9611)
echo "$line"
need "$line" innet_64_mpps raw_64_mpps raw_nogso_64_mpps innet_nogso_64_mpps ratio_64 cpu_ratio_64 \
	best_relay_64 ratio_nogso_64 ratio cpu_ratio
inn=$(key "$line" innet_64_mpps) raw=$(key "$line" raw_64_mpps) rawng=$(key "$line" raw_nogso_64_mpps)
best=$(awk -v a="$raw" -v b="$rawng" 'BEGIN { m = a; if (b + 0 > a + 0) m = b; print m }')
want=$(awk -v i="$inn" -v b="$best" 'BEGIN { printf "%.3f", (b > 0 ? i / b : 0) }')
close "$(key "$line" ratio_64)" "$want" || fail "forwarding: ratio_64 is not innet / best relay ($want)"
echo "ok: ratio = innet / best relay"

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
if [ "$(id -u)" -eq 0 ] && ip netns list >/dev/null 2>&1 && command -v nft >/dev/null &&
	command -v dnsdist >/dev/null && command -v nsd >/dev/null && command -v dnsperf >/dev/null; then
	line=$(run lb-qps --target xdp --quick)
	echo "$line"
	need "$line" xdp_qps nft_qps dnsdist_netns_qps xdp_nft_ratio xdp_dnsdist_ratio xdp_nft_met \
		xdp_dnsdist_met targets_missed nsd_direct_netns_qps xdp_client_limit_fraction xdp_ebpf_ns_per_frame
	for k in xdp_qps nft_qps dnsdist_netns_qps; do
		awk -v q="$(key "$line" $k)" 'BEGIN { exit !(q > 0) }' || fail "lb-qps: $k is not > 0"
	done
	want=$(awk -v a="$(key "$line" xdp_qps)" -v b="$(key "$line" nft_qps)" 'BEGIN { printf "%.2f", a / b }')
	close "$(key "$line" xdp_nft_ratio)" "$want" || fail "lb-qps: xdp_nft_ratio is not xdp_qps / nft_qps ($want)"
	# nothing left behind: namespaces, the nft table in them went with them
	left=$(ip netns list | grep -c '^innet-lbq' || true)
	[ "$left" -eq 0 ] || fail "lb-qps: $left namespaces left behind"
	echo "ok: lb-qps on XDP against nftables and dnsdist, ratio = xdp / nft, namespaces removed"
else
	echo "== lb-qps --target xdp: skipped (needs root, netns, nft, dnsdist, nsd, dnsperf)"
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
	want=$(awk -v a="$(key "$line" userspace_mpps_64_at_0.1)" -v b="$(key "$line" userspace_mpps_64_at_0.05)" \
		'BEGIN { m = (a > b ? a : b); printf "%.3f", (m > 0 ? a / m : 0) }')
	close "$(key "$line" userspace_overload_ratio_64)" "$want" ||
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
