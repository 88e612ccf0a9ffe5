# shellcheck shell=bash
# bench: redis-benchmark SET/GET (-P 1 and -P 16) against innet kv (3 acceptors, 3 replicas) and a single redis-server
# timeout: 900
#
# bench/kv.sh — sourced by bench/run (see bench/lib.sh).
#
#   redis-benchmark ──RESP──▶ innet kv replica r0 ──▶ coord switch ──▶ a0,a1,a2 ──▶ r0,r1,r2
#   redis-benchmark ──RESP──▶ redis-server (no persistence, unreplicated)
#
# Same client, same machine, same run: -t set,get -c 50 -P 1 and -P 16; the
# targets alternate (innet, redis, redis, innet, ...) and the medians are
# compared. RESULT: ops/s and p99 for each, ratio = innet / redis per test
# (the issue's target: >= 0.5). Every innet kv command goes through the log:
# a GET costs a consensus instance like a SET (reads are linearizable through
# the log). Replica r0 batches: every connection's pipelined commands form a
# group, and the groups queued while `--window` (default 8) of its entries
# are in flight go into the next log entry, up to one packet
# (INNET_PKT_MAX - 56 bytes). After the innet runs, r0's INFO counters
# (commands per entry, time per stage of its event loop) are logged and
# kept as parameters: where the time goes.

bench_usage() {
	cat <<'EOF2'
usage: bench/run kv [options]
  --rounds N        runs per target and pipelining (default 3)
  --requests N      requests per redis-benchmark test at -P 1 (default 50000;
                    x4 at -P 16)
  --clients N       redis-benchmark -c (default 50)
  --quick           1 round, 10000 requests
  --window N        innet kv --window (entries of a replica in flight; default 8)
EOF2
}

kvb_rounds=3
kvb_n=50000
kvb_c=50
kvb_window=8
KVB_PORT=6392
KVB_REDIS=127.0.0.1

kvb_topology() { # file: examples/kv.json at its own addresses and state dir
	/usr/bin/python3 "$BENCH_ROOT/tools/topology/relocate.py" "$BENCH_ROOT/examples/kv.json" "$1" \
		--name bench-kv --state-dir "$BENCH_TMP/fabric" --addr-base 127.3.100.0 --hosts 127.3.101
}

kvb_down() {
	"$BENCH_INNET_BIN" kv down "$BENCH_TMP/topo.json" >/dev/null 2>&1 || true
}

kvb_die() {
	kvb_down
	bench_die "$@"
}

# kvb_run TARGET P ROUND: one redis-benchmark run against a running target;
# sets kvb_set kvb_get kvb_set_p99 kvb_get_p99
kvb_run() {
	local target=$1 p=$2 round=$3 host n tag="$1-P$2-r$3"
	host=$KVB_REDIS
	[ "$target" = innet ] && host=127.3.101.1
	n=$kvb_n
	[ "$p" -gt 1 ] && n=$((kvb_n * 4))
	bench_spawn kvb_lpid "$tag" "" 300 redis-benchmark -h "$host" -p "$KVB_PORT" -t set,get \
		-n "$n" -c "$kvb_c" -P "$p" --csv
	bench_wait "$kvb_lpid" || kvb_die "$tag: redis-benchmark failed: $(tail -n 3 "$BENCH_TMP/$tag.err")"
	# "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
	kvb_set=$(awk -F'"' '$2 == "SET" { print $4 }' "$BENCH_TMP/$tag.out")
	kvb_get=$(awk -F'"' '$2 == "GET" { print $4 }' "$BENCH_TMP/$tag.out")
	kvb_set_p99=$(awk -F'"' '$2 == "SET" { print $14 }' "$BENCH_TMP/$tag.out")
	kvb_get_p99=$(awk -F'"' '$2 == "GET" { print $14 }' "$BENCH_TMP/$tag.out")
	[ -n "$kvb_set" ] && [ -n "$kvb_get" ] || kvb_die "$tag: no figures in redis-benchmark output"
	bench_log "$target -P $p round $round: SET $kvb_set ops/s (p99 $kvb_set_p99 ms), GET $kvb_get ops/s (p99 $kvb_get_p99 ms)"
	bench_record target="$target" pipeline="$p" round="$round" requests="$n" set_ops_per_s="$kvb_set" \
		get_ops_per_s="$kvb_get" set_p99_ms="$kvb_set_p99" get_p99_ms="$kvb_get_p99"
}

bench_main() {
	while [ $# -gt 0 ]; do
		case $1 in
		--rounds) kvb_rounds=$2; shift 2 ;;
		--requests) kvb_n=$2; shift 2 ;;
		--clients) kvb_c=$2; shift 2 ;;
		--quick) kvb_rounds=1; kvb_n=10000; shift ;;
		--window) kvb_window=$2; shift 2 ;;
		-h|--help) bench_usage; exit 0 ;;
		*) bench_usage_error "unknown option $1" ;;
		esac
	done
	command -v redis-benchmark >/dev/null || bench_die "redis-benchmark not installed (redis-tools)"
	command -v redis-server >/dev/null || bench_die "redis-server not installed (scripts/install-deps)"
	bench_build innet
	kvb_topology "$BENCH_TMP/topo.json"
	bench_param rounds "$kvb_rounds"
	bench_param requests_p1 "$kvb_n"
	bench_param requests_p16 "$((kvb_n * 4))"
	bench_param clients "$kvb_c"
	bench_param window "$kvb_window"
	bench_param acceptors 3
	bench_param replicas 3
	bench_param redis "$(redis-server --version | cut -d' ' -f3)"
	bench_param redis_cmd "redis-server --port $KVB_PORT --bind $KVB_REDIS --save '' --appendonly no"
	# Both targets stay up for the whole run (alternating costs nothing).
	bench_spawn kvb_redis redis "" 850 redis-server --port "$KVB_PORT" --bind "$KVB_REDIS" --save "" \
		--appendonly no --daemonize no
	for ((i = 0; i < 100; i++)); do
		redis-cli -h "$KVB_REDIS" -p "$KVB_PORT" PING >/dev/null 2>&1 && break
		sleep 0.05
	done
	timeout 60 "$BENCH_INNET_BIN" kv up "$BENCH_TMP/topo.json" --port "$KVB_PORT" --window "$kvb_window" \
		>"$BENCH_TMP/kv-up.out" 2>&1 || kvb_die "innet kv up failed: $(tail -n 3 "$BENCH_TMP/kv-up.out")"
	local p r t order
	for p in 1 16; do
		local -a is=() ig=() isp=() igp=() rs=() rg=() rsp=() rgp=()
		for ((r = 0; r < kvb_rounds; r++)); do
			order="innet redis"
			[ $((r % 2)) = 1 ] && order="redis innet"
			for t in $order; do
				kvb_run "$t" "$p" "$r"
				if [ "$t" = innet ]; then
					is+=("$kvb_set"); ig+=("$kvb_get"); isp+=("$kvb_set_p99"); igp+=("$kvb_get_p99")
				else
					rs+=("$kvb_set"); rg+=("$kvb_get"); rsp+=("$kvb_set_p99"); rgp+=("$kvb_get_p99")
				fi
			done
		done
		local mis mig mrs mrg
		mis=$(bench_median "${is[@]}"); mig=$(bench_median "${ig[@]}")
		mrs=$(bench_median "${rs[@]}"); mrg=$(bench_median "${rg[@]}")
		bench_result "innet_set_p${p}_ops=$(bench_calc %.0f "$mis")" \
			"innet_set_p${p}_p99_ms=$(bench_median "${isp[@]}")" \
			"innet_get_p${p}_ops=$(bench_calc %.0f "$mig")" \
			"innet_get_p${p}_p99_ms=$(bench_median "${igp[@]}")" \
			"redis_set_p${p}_ops=$(bench_calc %.0f "$mrs")" \
			"redis_set_p${p}_p99_ms=$(bench_median "${rsp[@]}")" \
			"redis_get_p${p}_ops=$(bench_calc %.0f "$mrg")" \
			"redis_get_p${p}_p99_ms=$(bench_median "${rgp[@]}")" \
			"ratio_set_p${p}=$(bench_calc %.2f "$mis / $mrs")" \
			"ratio_get_p${p}=$(bench_calc %.2f "$mig / $mrg")"
	done
	# Where the time goes, from r0's counters over the whole run.
	local info k v
	info=$(timeout 10 redis-cli -h 127.3.101.1 -p "$KVB_PORT" INFO 2>/dev/null | tr -d '\r') || true
	for k in entries_proposed groups_proposed commands_proposed bytes_proposed window_full \
		us_wait us_clients us_propose us_learn us_apply us_reply votes resent; do
		v=$(echo "$info" | awk -F: -v k="$k" '$1 == k { print $2 }')
		[ -n "$v" ] && bench_param "r0_$k" "$v"
	done
	v=$(echo "$info" | awk -F: '$1 == "entries_proposed" { e = $2 } $1 == "commands_proposed" { c = $2 }
		END { if (e > 0) printf "%.1f", c / e }')
	bench_log "r0: $(echo "$info" | grep -E '^(entries_proposed|commands_proposed|window_full|us_[a-z]+):' |
		tr '\n' ' ')commands per entry $v"
	[ -n "$v" ] && bench_param r0_commands_per_entry "$v"
	kvb_down
	bench_stop "$kvb_redis" || true
}
