# shellcheck shell=bash
# bench: queries/s through innet's balancer (proxy mode, maglev) against dnsdist, both in front of the same two nsd servers, dnsperf closed loop
# timeout: 600
#
# bench/lb-qps.sh — sourced by bench/run (see bench/lib.sh).
#
#   dnsperf ──▶ innet switch, lb program, proxy mode, maglev (W workers) 127.62.0.100:5300 ─┐
#   dnsperf ──▶ dnsdist (W UDP listeners, policy P, no cache)           127.62.0.101:5300 ─┤
#                                                 nsd 127.62.0.11:5311 ◀─┤ (each: 1 server process,
#                                                 nsd 127.62.0.12:5311 ◀─┘  100-record zone, rrl off)
#
# Same backends, same client, same run: a 1 s dnsperf warm-up against each
# balancer (not counted), then dnsperf -l SEC -c CLIENTS against each,
# alternating (innet, dnsdist, dnsdist, innet, ...); medians of the rounds. Then `innet lb load` at a paced rate (open loop) against
# each for p99 latency. RESULT: innet_qps, dnsdist_qps, ratio = innet /
# dnsdist (the issue's target: >= 1.0), average latency and lost queries
# from dnsperf, p99 at the paced rate, and a direct-to-nsd reference.
# Threads: the switch runs W workers; dnsdist W UDP listener threads, plus
# (its design) one responder thread per backend and its own housekeeping.

bench_usage() {
	cat <<'EOF2'
usage: bench/run lb-qps [options]
  --rounds N        dnsperf runs per balancer (default 5; the median counts)
  --seconds S       dnsperf -l (default 5)
  --clients N       dnsperf -c (default 10)
  --workers W       switch workers = dnsdist UDP listener threads (default 1)
  --policy P        dnsdist policy: roundrobin or leastOutstanding (default roundrobin)
  --innet-policy P  innet's VIP policy: maglev, wrr, ecmp, p2c (default maglev)
  --paced QPS       rate of the open-loop p99 runs (default 20000)
  --quick           1 round of 3 s
EOF2
}

lbq_rounds=5
lbq_secs=5
lbq_clients=10
lbq_workers=1
lbq_policy=roundrobin
lbq_ipolicy=maglev
lbq_paced=20000
LBQ_SW=127.62.0.100
LBQ_DD=127.62.0.101
LBQ_N1=127.62.0.11
LBQ_N2=127.62.0.12
LBQ_CLIENT=127.62.1.2

# lbq_dnsperf TARGET TAG [PORT]: one dnsperf run; sets lbq_q lbq_avg lbq_lost
lbq_dnsperf() {
	local ip=$1 tag=$2 port=${3:-5300} qpid f
	bench_spawn qpid "$tag" "" $((lbq_secs + 30)) dnsperf -s "$ip" -p "$port" -a $LBQ_CLIENT \
		-d "$BENCH_TMP/queries" -l "$lbq_secs" -c "$lbq_clients" -t 2
	bench_wait "$qpid" || bench_die "$tag: dnsperf failed: $(tail -n 3 "$BENCH_TMP/$tag.out")"
	f=$BENCH_TMP/$tag.out
	lbq_q=$(awk '/Queries per second:/ { printf "%.0f", $4 }' "$f")
	lbq_avg=$(awk '/Average Latency/ { printf "%.3f", $4 * 1000 }' "$f")
	lbq_lost=$(awk '/Queries lost:/ { print $3 }' "$f")
	[ -n "$lbq_q" ] && [ -n "$lbq_lost" ] || bench_die "$tag: no figures in dnsperf output"
}

# lbq_paced TARGET TAG: sets lbq_p99 lbq_ploss
lbq_paced() {
	local ip=$1 tag=$2 qpid
	bench_spawn qpid "$tag" "" 60 "$BENCH_INNET_BIN" lb load --target "$ip:5300" --bind $LBQ_CLIENT \
		--rate "$lbq_paced" --duration 3 --warmup 0.5 --flows 64 --qname r1.lb.test --json
	bench_wait "$qpid" || bench_die "$tag: innet lb load failed"
	read -r lbq_p99 lbq_ploss < <(/usr/bin/python3 -c 'import json,sys
r = json.load(open(sys.argv[1])); print(r["p99_us"], r["loss_pct"])' "$BENCH_TMP/$tag.out")
}

bench_main() {
	while [ $# -gt 0 ]; do
		case $1 in
		--rounds) lbq_rounds=$2; shift 2 ;;
		--seconds) lbq_secs=$2; shift 2 ;;
		--clients) lbq_clients=$2; shift 2 ;;
		--workers) lbq_workers=$2; shift 2 ;;
		--policy) lbq_policy=$2; shift 2 ;;
		--innet-policy) lbq_ipolicy=$2; shift 2 ;;
		--paced) lbq_paced=$2; shift 2 ;;
		--quick) lbq_rounds=1; lbq_secs=3; shift ;;
		-h|--help) bench_usage; exit 0 ;;
		*) bench_usage_error "unknown option $1" ;;
		esac
	done
	local v
	for v in "$lbq_rounds" "$lbq_secs" "$lbq_clients" "$lbq_workers" "$lbq_paced"; do
		[[ $v =~ ^[1-9][0-9]*$ ]] || bench_usage_error "'$v' is not a positive integer"
	done
	case $lbq_policy in roundrobin|leastOutstanding) ;; *) bench_usage_error "--policy: roundrobin or leastOutstanding" ;; esac
	case $lbq_ipolicy in maglev|wrr|ecmp|p2c) ;; *) bench_usage_error "--innet-policy: maglev, wrr, ecmp or p2c" ;; esac
	for v in nsd dnsperf dnsdist; do
		command -v $v >/dev/null || bench_die "$v not installed (scripts/install-deps)"
	done
	bench_build innet
	# shellcheck source=tools/lb/lbenv.sh
	source "$BENCH_ROOT/tools/lb/lbenv.sh"
	lbenv_queries "$BENCH_TMP/queries"
	lbenv_nsd_conf "$BENCH_TMP/nsd1" $LBQ_N1 5311 192.0.2.11
	lbenv_nsd_conf "$BENCH_TMP/nsd2" $LBQ_N2 5311 192.0.2.12
	local n1 n2 sw dd
	# shellcheck disable=SC2046 # the command line is words
	bench_spawn n1 nsd1 "" 550 $(lbenv_nsd_cmd "$BENCH_TMP/nsd1")
	# shellcheck disable=SC2046
	bench_spawn n2 nsd2 "" 550 $(lbenv_nsd_cmd "$BENCH_TMP/nsd2")
	lbenv_wait_udp $LBQ_N1 5311 10 || bench_die "nsd 1 does not answer ($(tail -n 2 "$BENCH_TMP/nsd1/nsd.log"))"
	lbenv_wait_udp $LBQ_N2 5311 10 || bench_die "nsd 2 does not answer"

	local args
	args=$(cat <<EOF2
{"mode": "proxy", "idle_timeout_ms": 5000,
 "vips": [{"name": "dns", "port": 5300, "pool": "ns", "policy": "$lbq_ipolicy"}],
 "pools": [{"name": "ns", "servers": [
   {"id": 1, "units": [{"id": 0, "kind": "cpu", "address": "$LBQ_N1:5311"}]},
   {"id": 2, "units": [{"id": 0, "kind": "cpu", "address": "$LBQ_N2:5311"}]}]}]}
EOF2
)
	bench_spawn sw switch "" 550 "$BENCH_INNET_BIN" switch --name ilh-qps --workers "$lbq_workers" \
		--port $LBQ_SW --program "lb@5300,47900,24000-24999" --args "$args" --ctl "$BENCH_TMP/sw.sock"
	bench_wait_ready "$sw" switch ready 10
	lbenv_dnsdist_conf "$BENCH_TMP/dnsdist.conf" $LBQ_DD 5300 "$lbq_workers" "$lbq_policy" \
		"$LBQ_N1:5311" "$LBQ_N2:5311"
	bench_spawn dd dnsdist "" 550 dnsdist --supervised --disable-syslog -C "$BENCH_TMP/dnsdist.conf"
	lbenv_wait_udp $LBQ_SW 5300 10 || bench_die "no answer through innet"
	lbenv_wait_udp $LBQ_DD 5300 10 || bench_die "no answer through dnsdist ($(tail -n 3 "$BENCH_TMP/dnsdist.err"))"

	bench_param rounds "$lbq_rounds"
	bench_param dnsperf "dnsperf -l $lbq_secs -c $lbq_clients -t 2, 101 names (r0..r99, www), UDP"
	bench_param workers "$lbq_workers"
	bench_param innet "lb program, proxy mode, $lbq_ipolicy, $lbq_workers worker(s), NAT ports 24000-24999"
	bench_param warmup "1 s of dnsperf against each balancer before the rounds (not counted)"
	bench_param dnsdist "$(dnsdist --version 2>/dev/null | head -n 1 | cut -d' ' -f2), $lbq_workers UDP listener(s) (reusePort), policy $lbq_policy, no packet cache"
	bench_param nsd "$(nsd -v 2>&1 | head -n 1 | awk '{ print $3 }'), server-count 1, rrl-ratelimit 0, 2 servers"
	bench_param paced_qps "$lbq_paced"

	local r t order iq=() dq=() ia=() da=() il=0 dl=0 keep=$lbq_secs
	# Warm-up: connection entries, socket buffers and caches on both sides.
	lbq_secs=1
	lbq_dnsperf $LBQ_SW warmup-innet
	lbq_dnsperf $LBQ_DD warmup-dnsdist
	lbq_secs=$keep
	for ((r = 0; r < lbq_rounds; r++)); do
		order="innet dnsdist"
		[ $((r % 2)) = 1 ] && order="dnsdist innet"
		for t in $order; do
			if [ "$t" = innet ]; then lbq_dnsperf $LBQ_SW "innet-r$r"; else lbq_dnsperf $LBQ_DD "dnsdist-r$r"; fi
			bench_log "$t round $r: $lbq_q q/s, avg $lbq_avg ms, lost $lbq_lost"
			bench_record target="$t" round="$r" qps="$lbq_q" avg_ms="$lbq_avg" lost="$lbq_lost"
			if [ "$t" = innet ]; then
				iq+=("$lbq_q"); ia+=("$lbq_avg"); il=$((il + lbq_lost))
			else
				dq+=("$lbq_q"); da+=("$lbq_avg"); dl=$((dl + lbq_lost))
			fi
		done
	done
	lbq_dnsperf $LBQ_N1 direct 5311
	local direct=$lbq_q
	bench_log "nsd direct (one server): $direct q/s"
	bench_record target=nsd_direct qps="$direct" avg_ms="$lbq_avg" lost="$lbq_lost"
	local ip99 iploss dp99 dploss
	lbq_paced $LBQ_SW paced-innet
	ip99=$lbq_p99 iploss=$lbq_ploss
	lbq_paced $LBQ_DD paced-dnsdist
	dp99=$lbq_p99 dploss=$lbq_ploss
	bench_log "paced $lbq_paced q/s: innet p99 $ip99 us (loss $iploss %), dnsdist p99 $dp99 us (loss $dploss %)"
	bench_record target=innet paced_qps="$lbq_paced" p99_us="$ip99" loss_pct="$iploss"
	bench_record target=dnsdist paced_qps="$lbq_paced" p99_us="$dp99" loss_pct="$dploss"
	local mi md
	mi=$(bench_median "${iq[@]}")
	md=$(bench_median "${dq[@]}")
	bench_result "innet_qps=$(bench_calc %.0f "$mi")" "dnsdist_qps=$(bench_calc %.0f "$md")" \
		"ratio=$(bench_calc %.2f "$mi / $md")" \
		"innet_avg_ms=$(bench_median "${ia[@]}")" "dnsdist_avg_ms=$(bench_median "${da[@]}")" \
		"innet_lost=$il" "dnsdist_lost=$dl" \
		"innet_p99_us_at_${lbq_paced}=$ip99" "dnsdist_p99_us_at_${lbq_paced}=$dp99" \
		"innet_paced_loss_pct=$iploss" "dnsdist_paced_loss_pct=$dploss" \
		"nsd_direct_qps=$direct" "workers=$lbq_workers" "innet_policy=$lbq_ipolicy" "loadavg=$(cut -d' ' -f1 /proc/loadavg)"
	bench_stop "$dd" || true
	bench_stop "$sw" || true
	bench_stop "$n1" || true
	bench_stop "$n2" || true
}
