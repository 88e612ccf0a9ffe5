# shellcheck shell=bash
# bench: redis-benchmark SET/GET (-P 1 and -P 16) against innet kv (3 acceptors, 3 replicas), a single redis-server and a replicated one (SET + WAIT 2 0); --mix: an application-like mix
# timeout: 900
#
# bench/kv.sh — sourced by bench/run (see bench/lib.sh).
#
#   redis-benchmark ──RESP──▶ innet kv replica r0 ──▶ coord switch ──▶ a0,a1,a2 ──▶ r0,r1,r2
#   redis-benchmark ──RESP──▶ redis-server (no persistence, unreplicated)
#
# Same client, same machine, same run: -t set,get -c 50 -P 1 and -P 16; the
# targets alternate (innet, redis, redis, innet, ...) and the medians are
# compared. RESULT: ops/s and p99 for each, ratio = innet / redis per test,
# and the CPU time each target's processes spent per operation (user +
# system, from /proc, around each redis-benchmark test: *_cpu_us; innet's
# replica r0 alone: *_r0_cpu_us) — a figure the shared machine's load moves
# much less than ops/s.
# An innet kv write goes through the log; a read is answered from a read
# index (no log entry; docs/consensus.md). Replica r0 batches: every
# connection's pipelined commands form a
# group, and the groups queued while `--window` of its entries are in
# flight go into the next log entry, up to one packet (INNET_PKT_MAX - 56
# bytes; in netns mode one frame of the links' MTU). The window is the
# replica's own default unless --window is given: 8 full-size entries' worth
# of bytes (8 on loopback, up to 32 smaller entries in netns mode; INFO's
# window is logged). After the innet runs, r0's INFO counters
# (commands per entry, time per stage of its event loop) are logged and
# kept as parameters: where the time goes.
#
# --target xdp (root): the same in network namespaces over veth (innet's netns
# mode), three targets in one run, redis-benchmark always in replica r0's
# namespace, talking to a server there:
#   xdp    innet kv with the coordinator and acceptors in eBPF (XDP switches)
#   innet  the same switches on the user-space engine
#   redis  one redis-server in that namespace (unreplicated)
# Keys xdp_{set,get}_p{1,16}_ops/_p99_ms and xdp_ratio_{set,get}_p{1,16} =
# innet on XDP / redis (targets at -P 16: GET >= 0.95, SET >= 0.8;
# xdp_target_met_p16 says), beside the usual innet_* / redis_* / ratio_* keys
# of the other two (in namespaces).
#
# The replicated peer, in the same run: one redis-server primary and two
# replicas (redis's own replication, all three beside the unreplicated one),
# each write followed by WAIT 2 0 — how Redis users get a write that two
# replicas hold before it is acknowledged. bench/src/kvbench drives it
# (redis-benchmark cannot send WAIT after each SET) and, for the same
# client's figures, innet kv's SET (acknowledged once a majority holds it):
# keys redis_wait_set_p{1,16}_ops, {xdp,innet}_kvbench_set_p{1,16}_ops and
# {xdp,innet}_vs_redis_wait_set_p{1,16}.
#
# --mix: kvbench's application-like mix (per 12 operations: a SET with EX, 10
# GETs, an HSET or HGET, over 100000 keys and 100 hashes of 100 fields,
# written first) at -P 1 and -P 16 against innet kv, the unreplicated
# redis-server and the replicated one (its writes followed by WAIT 2 0):
# keys {xdp,innet,redis,redis_wait}_mix_p{1,16}_ops and the ratios.
#
# The replicas in netns mode run the learner filter (innet kv's default
# there); --learner-filter none|IFACES (xdp) sets it for the XDP fabric's
# replicas (docs/consensus.md "The learner filter").

bench_usage() {
	cat <<'EOF2'
usage: bench/run kv [options]
  --rounds N        runs per target and pipelining (default 3)
  --requests N      requests per redis-benchmark test at -P 1 (default 50000;
                    x4 at -P 16)
  --clients N       redis-benchmark -c (default 50)
  --quick           1 round, 10000 requests
  --mtu M           (xdp) the links' MTU in both namespace topologies (default the
                    topology's, 1500; at most 3500, one XDP buffer). A replica's log
                    entries fit one frame of it (innet kv in netns mode)
  --perf            (xdp) perf record -a (cpu-clock) for 1 s of the first xdp run at
                    -P 16; the breakdown by process and object goes to the log
  --window N        innet kv --window (entries of a replica in flight; default:
                    innet kv's own, 8 full-size entries' worth of bytes)
  --target T        udp (loopback, default) or xdp (root: netns; XDP switches, user-space
                    switches and redis-server over veth)
  --seconds S       each kvbench run (the replicated peer, --mix): S seconds (default 3)
  --mix             also the application-like mix (kvbench --mode mix)
  --no-wait         skip the replicated redis peer
  --learner-filter IFACES|all|none  (xdp) innet kv --learner-filter for the XDP fabric's
                    replicas (default: innet kv's, all in netns mode)
  --reads index|log innet kv --reads (default index: reads without a log entry)
EOF2
}

kvb_rounds=3
kvb_n=50000
kvb_c=50
kvb_window=""       # empty: innet kv's default
kvb_target=udp
kvb_perf=0
kvb_mtu=""
kvb_secs=3
kvb_mix=0
kvb_wait=1
kvb_filter=""
kvb_reads=""
kvb_perf_pid=""
kvb_lpid=""         # bench_spawn sets these
kvb_redis=""
KVB_PORT=6392
KVB_REDIS=127.0.0.1
# The netns fabrics' names (their namespaces are innet-NAME-HOST): unique per
# run, so that two runs, or another helper's fabric, never share a namespace.
KVB_NSX=bench-kvx-$$
KVB_NSU=bench-kvu-$$

kvb_topology() { # file: examples/kv.json at its own addresses and state dir
	/usr/bin/python3 "$BENCH_ROOT/tools/topology/relocate.py" "$BENCH_ROOT/examples/kv.json" "$1" \
		--name bench-kv --state-dir "$BENCH_TMP/fabric" --addr-base 127.3.100.0 --hosts 127.3.101
}

kvb_down() {
	local t
	for t in topo topo-xdp topo-udp; do
		[ -e "$BENCH_TMP/$t.json" ] && "$BENCH_INNET_BIN" kv down "$BENCH_TMP/$t.json" >/dev/null 2>&1
	done
	return 0
}

# netns mode: replica r0's address in a topology, and its namespace
kvb_r0() { # topo
	"$BENCH_INNET_BIN" fabric show "$1" --json |
		/usr/bin/python3 -c 'import json,sys; print([h["addr"] for h in json.load(sys.stdin)["hosts"] if h["name"]=="r0"][0])'
}

kvb_die() {
	kvb_down
	bench_die "$@"
}

# CPU time (user + system, clock ticks) of every thread of the pids given.
kvb_cpu() {
	local p f t=0 line rest
	for p in "$@"; do
		for f in /proc/"$p"/task/*/stat; do
			[ -r "$f" ] || continue
			line=$(<"$f") || continue
			rest=${line##*) }
			set -- $rest
			t=$((t + ${12} + ${13}))
		done
	done
	echo "$t"
}

# The processes of a target: innet: its replicas and switches (netns: the
# fabric of that target); redis: the redis-server. Sets kvb_pids, kvb_r0pid.
kvb_target_pids() { # target
	local dir f
	kvb_pids=() kvb_r0pid=""
	case $1 in
	redis) kvb_pids=("$(bench_child_pid "$kvb_redis")"); return ;;
	xdp) dir=$BENCH_TMP/fabric-xdp ;;
	innet) if [ "$kvb_target" = xdp ]; then dir=$BENCH_TMP/fabric-udp; else dir=$BENCH_TMP/fabric; fi ;;
	esac
	for f in "$dir"/kv-r*.pid; do
		[ -r "$f" ] && kvb_pids+=("$(<"$f")")
	done
	kvb_r0pid=$(<"$dir/kv-r0.pid")
	kvb_pids+=($(/usr/bin/python3 -c 'import json,sys; print(" ".join(str(s["pid"]) for s in json.load(open(sys.argv[1]))["switches"]))' "$dir/fabric.json"))
}

# kvb_run TARGET P ROUND: redis-benchmark SET then GET against a running
# target, the target's CPU time measured around each; sets kvb_set kvb_get
# kvb_set_p99 kvb_get_p99 and kvb_{set,get}_us (CPU microseconds of the
# target's processes per operation; innet: kvb_{set,get}_r0_us for r0 alone).
kvb_run() {
	local target=$1 p=$2 round=$3 host n tag="$1-P$2-r$3" port=$KVB_PORT t c0 c1 r0 r1
	local -a in=()
	host=$KVB_REDIS
	[ "$target" = innet ] && host=127.3.101.1
	if [ "$kvb_target" = xdp ]; then
		case $target in
		xdp) host=$KVB_R0_XDP; in=(ip netns exec "innet-$KVB_NSX-r0") ;;
		innet) host=$KVB_R0_UDP; in=(ip netns exec "innet-$KVB_NSU-r0") ;;
		redis) host=$KVB_R0_UDP; port=$((KVB_PORT + 1)); in=(ip netns exec "innet-$KVB_NSU-r0") ;;
		esac
	fi
	n=$kvb_n
	[ "$p" -gt 1 ] && n=$((kvb_n * 4))
	kvb_target_pids "$target"
	local tick
	tick=$(getconf CLK_TCK)
	for t in set get; do
		c0=$(kvb_cpu "${kvb_pids[@]}") r0=0
		[ -n "$kvb_r0pid" ] && r0=$(kvb_cpu "$kvb_r0pid")
		bench_spawn kvb_lpid "$tag-$t" "" 300 "${in[@]}" redis-benchmark -h "$host" -p "$port" -t "$t" \
			-n "$n" -c "$kvb_c" -P "$p" --csv
		if [ "$target" = xdp ] && [ "$p" -gt 1 ] && [ "$kvb_perf" = 1 ] && [ -z "${KVB_PERF_DONE:-}" ]; then
			KVB_PERF_DONE=1
			sleep 0.2
			bench_perf_record kvb_perf_pid 1
		fi
		bench_wait "$kvb_lpid" || kvb_die "$tag-$t: redis-benchmark failed: $(tail -n 3 "$BENCH_TMP/$tag-$t.err")"
		c1=$(kvb_cpu "${kvb_pids[@]}") r1=0
		[ -n "$kvb_r0pid" ] && r1=$(kvb_cpu "$kvb_r0pid")
		if [ -n "$kvb_perf_pid" ]; then
			bench_perf_report "$kvb_perf_pid" "$BENCH_TMP/perf-$tag.txt" pid,dso 30 "1 s of $tag-$t"
			kvb_perf_pid=""
		fi
		printf -v "kvb_${t}_us" '%s' "$(bench_calc %.3f "($c1 - $c0) * 1000000 / $tick / $n")"
		printf -v "kvb_${t}_r0_us" '%s' "$(bench_calc %.3f "($r1 - $r0) * 1000000 / $tick / $n")"
	done
	# "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
	kvb_set=$(awk -F'"' '$2 == "SET" { print $4 }' "$BENCH_TMP/$tag-set.out")
	kvb_get=$(awk -F'"' '$2 == "GET" { print $4 }' "$BENCH_TMP/$tag-get.out")
	kvb_set_p99=$(awk -F'"' '$2 == "SET" { print $14 }' "$BENCH_TMP/$tag-set.out")
	kvb_get_p99=$(awk -F'"' '$2 == "GET" { print $14 }' "$BENCH_TMP/$tag-get.out")
	[ -n "$kvb_set" ] && [ -n "$kvb_get" ] || kvb_die "$tag: no figures in redis-benchmark output"
	bench_log "$target -P $p round $round: SET $kvb_set ops/s (p99 $kvb_set_p99 ms, $kvb_set_us us CPU/op)," \
		"GET $kvb_get ops/s (p99 $kvb_get_p99 ms, $kvb_get_us us CPU/op)"
	bench_record target="$target" pipeline="$p" round="$round" requests="$n" set_ops_per_s="$kvb_set" \
		get_ops_per_s="$kvb_get" set_p99_ms="$kvb_set_p99" get_p99_ms="$kvb_get_p99" \
		set_cpu_us_per_op="$kvb_set_us" get_cpu_us_per_op="$kvb_get_us" \
		set_r0_cpu_us_per_op="$kvb_set_r0_us" get_r0_cpu_us_per_op="$kvb_get_r0_us"
}

bench_main() {
	while [ $# -gt 0 ]; do
		case $1 in
		--rounds) kvb_rounds=$2; shift 2 ;;
		--requests) kvb_n=$2; shift 2 ;;
		--clients) kvb_c=$2; shift 2 ;;
		--quick) kvb_rounds=1; kvb_n=10000; shift ;;
		--mtu) kvb_mtu=$2; shift 2 ;;
		--perf)
			command -v perf >/dev/null || bench_usage_error "--perf needs perf (Debian: linux-perf)"
			kvb_perf=1; shift ;;
		--window) kvb_window=$2; shift 2 ;;
		--target) kvb_target=$2; shift 2 ;;
		--seconds) kvb_secs=$2; shift 2 ;;
		--mix) kvb_mix=1; shift ;;
		--no-wait) kvb_wait=0; shift ;;
		--learner-filter) kvb_filter=$2; shift 2 ;;
		--reads) kvb_reads=$2; shift 2 ;;
		-h|--help) bench_usage; exit 0 ;;
		*) bench_usage_error "unknown option $1" ;;
		esac
	done
	local -a targets
	case $kvb_target in
	udp) targets=(innet redis) ;;
	xdp)
		[ "$(id -u)" -eq 0 ] || bench_usage_error "--target xdp needs root (network namespaces, XDP)"
		targets=(xdp innet redis)
		;;
	*) bench_usage_error "--target is udp or xdp" ;;
	esac
	command -v redis-benchmark >/dev/null || bench_die "redis-benchmark not installed (redis-tools)"
	command -v redis-server >/dev/null || bench_die "redis-server not installed (scripts/install-deps)"
	bench_build innet kvbench
	bench_param target "$kvb_target"
	bench_param rounds "$kvb_rounds"
	bench_param requests_p1 "$kvb_n"
	bench_param requests_p16 "$((kvb_n * 4))"
	bench_param clients "$kvb_c"
	bench_param window "${kvb_window:-default}"
	local -a kvb_win=()
	if [ -n "$kvb_window" ]; then kvb_win=(--window "$kvb_window"); fi
	if [ -n "$kvb_reads" ]; then kvb_win+=(--reads "$kvb_reads"); fi
	bench_param reads "${kvb_reads:-index}"
	bench_param learner_filter "${kvb_filter:-none}"
	local -a kvb_lf=()
	if [ -n "$kvb_filter" ]; then
		[ "$kvb_target" = xdp ] || bench_usage_error "--learner-filter goes with --target xdp"
		kvb_lf=(--learner-filter "$kvb_filter")
	fi
	bench_param acceptors 3
	bench_param replicas 3
	bench_param redis "$(redis-server --version | cut -d' ' -f3)"
	local info_topo info_host info_in=() i
	# Every target stays up for the whole run (alternating costs nothing).
	if [ "$kvb_target" = udp ]; then
		kvb_topology "$BENCH_TMP/topo.json"
		bench_param redis_cmd "redis-server --port $KVB_PORT --bind $KVB_REDIS --save '' --appendonly no"
		bench_spawn kvb_redis redis "" 850 redis-server --port "$KVB_PORT" --bind "$KVB_REDIS" --save "" \
			--appendonly no --daemonize no --dir "$BENCH_TMP" --dbfilename "dump-$KVB_PORT.rdb"
		for ((i = 0; i < 100; i++)); do
			redis-cli -h "$KVB_REDIS" -p "$KVB_PORT" PING >/dev/null 2>&1 && break
			sleep 0.05
		done
		timeout 60 "$BENCH_INNET_BIN" kv up "$BENCH_TMP/topo.json" --port "$KVB_PORT" "${kvb_win[@]}" \
			>"$BENCH_TMP/kv-up.out" 2>&1 || kvb_die "innet kv up failed: $(tail -n 3 "$BENCH_TMP/kv-up.out")"
		info_topo=$BENCH_TMP/topo.json info_host=127.3.101.1
		KVB_INNET_HOST=127.3.101.1
		KVB_RHOST=$KVB_REDIS
		KVB_NS=()
	else
		local py=/usr/bin/python3 rel=$BENCH_ROOT/tools/topology/relocate.py
		$py "$rel" "$BENCH_ROOT/examples/kv.json" "$BENCH_TMP/topo-xdp.json" --name "$KVB_NSX" \
			--state-dir "$BENCH_TMP/fabric-xdp" --target xdp
		$py "$rel" "$BENCH_ROOT/examples/kv.json" "$BENCH_TMP/topo-udp.json" --name "$KVB_NSU" \
			--state-dir "$BENCH_TMP/fabric-udp" --netns
		if [ -n "$kvb_mtu" ]; then
			for t in xdp udp; do
				$py -c 'import json, sys
p = sys.argv[1]; d = json.load(open(p)); d["mtu"] = int(sys.argv[2])
json.dump(d, open(p, "w"), indent=1)' "$BENCH_TMP/topo-$t.json" "$kvb_mtu" || kvb_die "--mtu: cannot set it"
			done
		fi
		bench_param mtu "${kvb_mtu:-1500}"
		bench_param netns "innet-$KVB_NSX-*, innet-$KVB_NSU-*"
		for t in xdp udp; do
			local -a lf=()
			[ "$t" = xdp ] && lf=("${kvb_lf[@]}")
			timeout 60 "$BENCH_INNET_BIN" kv up "$BENCH_TMP/topo-$t.json" --port "$KVB_PORT" \
				"${kvb_win[@]}" "${lf[@]}" >"$BENCH_TMP/kv-up-$t.out" 2>&1 ||
				kvb_die "innet kv up ($t) failed: $(tail -n 3 "$BENCH_TMP/kv-up-$t.out")"
		done
		KVB_R0_XDP=$(kvb_r0 "$BENCH_TMP/topo-xdp.json")
		KVB_R0_UDP=$(kvb_r0 "$BENCH_TMP/topo-udp.json")
		bench_param redis_cmd "redis-server --port $((KVB_PORT + 1)) --bind $KVB_R0_UDP --protected-mode no --save '' --appendonly no (in r0's namespace)"
		bench_spawn kvb_redis redis "" 850 ip netns exec "innet-$KVB_NSU-r0" redis-server \
			--port "$((KVB_PORT + 1))" --bind "$KVB_R0_UDP" --protected-mode no --save "" --appendonly no \
			--daemonize no --dir "$BENCH_TMP" --dbfilename "dump-$((KVB_PORT + 1)).rdb"
		for ((i = 0; i < 100; i++)); do
			ip netns exec "innet-$KVB_NSU-r0" redis-cli -h "$KVB_R0_UDP" -p "$((KVB_PORT + 1))" PING \
				>/dev/null 2>&1 && break
			sleep 0.05
		done
		info_topo=$BENCH_TMP/topo-xdp.json info_host=$KVB_R0_XDP info_in=(ip netns exec "innet-$KVB_NSX-r0")
		KVB_RHOST=$KVB_R0_UDP
		KVB_NS=(ip netns exec "innet-$KVB_NSU-r0")
	fi
	if [ "$kvb_wait" = 1 ] || [ "$kvb_mix" = 1 ]; then
		kvb_replicated
	fi
	local p r t n=${#targets[@]} k
	for p in 1 16; do
		for t in "${targets[@]}"; do
			local -a "kvs_$t=()" "kvg_$t=()" "kvsp_$t=()" "kvgp_$t=()" "kvsu_$t=()" "kvgu_$t=()" \
				"kvsr_$t=()" "kvgr_$t=()"
		done
		for ((r = 0; r < kvb_rounds; r++)); do
			local -a order=()
			for ((k = 0; k < n; k++)); do
				if [ $((r % 2)) = 0 ]; then order+=("${targets[$k]}"); else order+=("${targets[$((n - 1 - k))]}"); fi
			done
			for t in "${order[@]}"; do
				kvb_run "$t" "$p" "$r"
				local -n a1="kvs_$t" a2="kvg_$t" a3="kvsp_$t" a4="kvgp_$t" a5="kvsu_$t" a6="kvgu_$t" \
					a7="kvsr_$t" a8="kvgr_$t"
				a1+=("$kvb_set"); a2+=("$kvb_get"); a3+=("$kvb_set_p99"); a4+=("$kvb_get_p99")
				a5+=("$kvb_set_us"); a6+=("$kvb_get_us"); a7+=("$kvb_set_r0_us"); a8+=("$kvb_get_r0_us")
				unset -n a1 a2 a3 a4 a5 a6 a7 a8
			done
		done
		local -A ms mg msu mgu
		for t in "${targets[@]}"; do
			local -n a1="kvs_$t" a2="kvg_$t" a3="kvsp_$t" a4="kvgp_$t" a5="kvsu_$t" a6="kvgu_$t" \
				a7="kvsr_$t" a8="kvgr_$t"
			ms[$t]=$(bench_median "${a1[@]}"); mg[$t]=$(bench_median "${a2[@]}")
			msu[$t]=$(bench_median "${a5[@]}"); mgu[$t]=$(bench_median "${a6[@]}")
			bench_result "${t}_set_p${p}_ops=$(bench_calc %.0f "${ms[$t]}")" \
				"${t}_set_p${p}_p99_ms=$(bench_median "${a3[@]}")" \
				"${t}_get_p${p}_ops=$(bench_calc %.0f "${mg[$t]}")" \
				"${t}_get_p${p}_p99_ms=$(bench_median "${a4[@]}")" \
				"${t}_set_p${p}_cpu_us=${msu[$t]}" "${t}_get_p${p}_cpu_us=${mgu[$t]}"
			[ "$t" = redis ] || bench_result "${t}_set_p${p}_r0_cpu_us=$(bench_median "${a7[@]}")" \
				"${t}_get_p${p}_r0_cpu_us=$(bench_median "${a8[@]}")"
			unset -n a1 a2 a3 a4 a5 a6 a7 a8
		done
		bench_result "ratio_set_p${p}=$(bench_calc %.2f "${ms[innet]} / ${ms[redis]}")" \
			"ratio_get_p${p}=$(bench_calc %.2f "${mg[innet]} / ${mg[redis]}")"
		if [ "$kvb_target" = xdp ]; then
			bench_result "xdp_ratio_set_p${p}=$(bench_calc %.2f "${ms[xdp]} / ${ms[redis]}")" \
				"xdp_ratio_get_p${p}=$(bench_calc %.2f "${mg[xdp]} / ${mg[redis]}")"
			[ "$p" = 16 ] && bench_result "xdp_target_met_p16=$(bench_calc %d \
				"${ms[xdp]} / ${ms[redis]} >= 0.9 && ${mg[xdp]} / ${mg[redis]} >= 0.9")"
		fi
	done
	if [ "$kvb_wait" = 1 ]; then kvb_phase wait "${targets[@]}"; fi
	if [ "$kvb_mix" = 1 ]; then kvb_phase mix "${targets[@]}"; fi
	# Where the time goes, from r0's counters over the whole run (the XDP
	# fabric's r0 with --target xdp).
	local info v
	info=$(timeout 10 "${info_in[@]}" redis-cli -h "$info_host" -p "$KVB_PORT" INFO 2>/dev/null | tr -d '\r') || true
	for k in window entry_max entries_proposed groups_proposed commands_proposed bytes_proposed window_full \
		us_wait us_clients us_propose us_learn us_apply us_reply votes resent reads_local read_rounds; do
		v=$(echo "$info" | awk -F: -v k="$k" '$1 == k { print $2 }')
		[ -n "$v" ] && bench_param "r0_$k" "$v"
	done
	v=$(echo "$info" | awk -F: '$1 == "entries_proposed" { e = $2 } $1 == "commands_proposed" { c = $2 }
		END { if (e > 0) printf "%.1f", c / e }')
	bench_log "r0: $(echo "$info" | grep -E '^(entries_proposed|commands_proposed|window_full|us_[a-z]+):' |
		tr '\n' ' ')commands per entry $v"
	[ -n "$v" ] && bench_param r0_commands_per_entry "$v"
	: "$info_topo"
	kvb_down
	bench_stop "$kvb_redis" || true
	local rp
	for rp in "${kvb_rpids[@]}"; do bench_stop "$rp" || true; done
}

# The replicated peer: a primary and two replicas (redis's replication) at
# ports KVB_PORT + 10, 11, 12 beside the unreplicated one, up and in sync.
# Every redis-server runs in the run's scratch directory (--dir): a replica
# writes the RDB of its full sync to disk even with --save "", and it must
# not land in the caller's working directory (the repository).
kvb_rpids=()
kvb_replicated() {
	local i port kvb_rpid
	bench_param redis_wait_cmd "redis-server --port $((KVB_PORT + 10)) --save '' --appendonly no, and two with --replicaof it (ports $((KVB_PORT + 11)), $((KVB_PORT + 12))); WAIT 2 0 after each write"
	for i in 0 1 2; do
		port=$((KVB_PORT + 10 + i))
		local -a rof=()
		[ $i -gt 0 ] && rof=(--replicaof "$KVB_RHOST" "$((KVB_PORT + 10))")
		bench_spawn kvb_rpid "redis-wait-$i" "" 850 "${KVB_NS[@]}" redis-server --port "$port" \
			--bind "$KVB_RHOST" --protected-mode no --save "" --appendonly no --daemonize no \
			--dir "$BENCH_TMP" --dbfilename "dump-$port.rdb" "${rof[@]}"
		kvb_rpids+=("$kvb_rpid")
	done
	for ((i = 0; i < 200; i++)); do
		[ "$(timeout 5 "${KVB_NS[@]}" redis-cli -h "$KVB_RHOST" -p "$((KVB_PORT + 10))" INFO replication 2>/dev/null |
			grep -c 'state=online')" = 2 ] && return 0
		sleep 0.05
	done
	kvb_die "the replicated redis peer: its two replicas did not come online"
}

# kvbench against a target; sets kvb_ops kvb_p99.
kvb_bench() { # target mode P round
	local target=$1 mode=$2 p=$3 round=$4 host port=$KVB_PORT tag="kvbench-$1-$2-P$3-r$4"
	local -a in=() extra=()
	case $target in
	xdp) host=$KVB_R0_XDP; in=(ip netns exec "innet-$KVB_NSX-r0") ;;
	innet)
		if [ "$kvb_target" = xdp ]; then host=$KVB_R0_UDP; in=(ip netns exec "innet-$KVB_NSU-r0")
		else host=$KVB_INNET_HOST; fi ;;
	redis) host=$KVB_RHOST; in=("${KVB_NS[@]}"); [ "$kvb_target" = xdp ] && port=$((KVB_PORT + 1)) ;;
	redis_wait) host=$KVB_RHOST; in=("${KVB_NS[@]}"); port=$((KVB_PORT + 10)); extra=(--replicas 2) ;;
	esac
	[ "$mode" = mix ] && extra+=(--keys 100000 --hashes 100 --fields 100 --load)
	local m=$mode
	if [ "$target" = redis_wait ]; then
		m=${mode}wait   # setwait, mixwait: WAIT 2 0 after each write
	fi
	bench_spawn kvb_lpid "$tag" "" 300 "${in[@]}" "$BENCH_BIN/kvbench" -h "$host" -p "$port" -c "$kvb_c" \
		-P "$p" -d "$kvb_secs" --mode "$m" --alarm 280 "${extra[@]}"
	bench_wait "$kvb_lpid" || kvb_die "$tag: kvbench failed: $(tail -n 3 "$BENCH_TMP/$tag.err")"
	kvb_ops=$(bench_kv ops_per_s "$BENCH_TMP/$tag.out")
	kvb_p99=$(bench_kv p99_ms "$BENCH_TMP/$tag.out")
	bench_log "kvbench $target $m -P $p round $round: $kvb_ops ops/s (p99 $kvb_p99 ms)"
	bench_record tool=kvbench target="$target" mode="$m" pipeline="$p" round="$round" \
		ops_per_s="$kvb_ops" p99_ms="$kvb_p99"
}

# The replicated peer's phase (wait: innet's SET against SET + WAIT 2 0) or
# the mix (every peer), -P 1 and 16, rounds alternating the order.
kvb_phase() { # wait|mix targets...
	local phase=$1 mode p r t k
	shift
	local -a peers=("$@")
	if [ "$phase" = wait ]; then
		mode=set
		peers=()
		for t in "$@"; do [ "$t" = redis ] || peers+=("$t"); done
	else
		mode=mix
	fi
	peers+=(redis_wait)
	local n=${#peers[@]}
	for p in 1 16; do
		local -A med=()
		for t in "${peers[@]}"; do local -a "kvo_$t=()"; done
		for ((r = 0; r < kvb_rounds; r++)); do
			for ((k = 0; k < n; k++)); do
				if [ $((r % 2)) = 0 ]; then t=${peers[$k]}; else t=${peers[$((n - 1 - k))]}; fi
				kvb_bench "$t" "$mode" "$p" "$r"
				local -n a="kvo_$t"
				a+=("$kvb_ops")
				unset -n a
			done
		done
		for t in "${peers[@]}"; do
			local -n a="kvo_$t"
			med[$t]=$(bench_median "${a[@]}")
			unset -n a
		done
		if [ "$phase" = wait ]; then
			bench_result "redis_wait_set_p${p}_ops=$(bench_calc %.0f "${med[redis_wait]}")"
			for t in "${peers[@]}"; do
				[ "$t" = redis_wait ] && continue
				bench_result "${t}_kvbench_set_p${p}_ops=$(bench_calc %.0f "${med[$t]}")" \
					"${t}_vs_redis_wait_set_p${p}=$(bench_calc %.2f "${med[$t]} / ${med[redis_wait]}")"
			done
		else
			for t in "${peers[@]}"; do
				bench_result "${t}_mix_p${p}_ops=$(bench_calc %.0f "${med[$t]}")"
			done
			for t in "${peers[@]}"; do
				case $t in redis|redis_wait) continue ;; esac
				bench_result "${t}_ratio_mix_p${p}=$(bench_calc %.2f "${med[$t]} / ${med[redis]}")" \
					"${t}_vs_redis_wait_mix_p${p}=$(bench_calc %.2f "${med[$t]} / ${med[redis_wait]}")"
			done
		fi
	done
}
