# shellcheck shell=bash
# bench: a consensus fabric of P4xos's own P4 programs on innet's XDP target vs the same fabric on BMv2: commands/s and p50 with 1 and 16 in flight
# timeout: 1800
#
# bench/p4-paxos.sh — sourced by bench/run (helpers: bench/lib.sh).
#
# P4xos's leader, acceptor and learner (usi-systems/p4xos-public,
# p4-16/p4src; P4XOS_SRC: a checkout or its git directory, compiled at run
# time by tools/p4/p4test p4xos --compile-only) in the fabric that
# tools/p4/p4xos-fabric draws — proposer, leader, a flooding switch, three
# acceptors, the learner switch, the learner application — once as innet
# switches on the XDP target (a topology file with "p4" keys, innet fabric
# up) and once as BMv2 simple_switch processes (SIMPLE_SWITCH,
# SIMPLE_SWITCH_CLI) in the same namespaces and veth pairs. The client,
# build/bench/p4xos, proposes with 1 and then 16 requests in flight and
# learns the values the learner switch delivers: commands/s and the median
# latency (first send to delivery), after a warm-up.
#
#   RESULT p4-paxos bmv2_w1_cmds_per_s=… bmv2_w1_p50_us=… xdp_w1_cmds_per_s=…
#          xdp_w1_p50_us=… (the same for w16) xdp_vs_bmv2_w1=… xdp_vs_bmv2_w16=…
#
# xdp_vs_bmv2_W = innet XDP's commands/s / BMv2's, W in flight.

bench_usage() {
	cat <<'EOF2'
usage: bench/run p4-paxos [options]
  --p4xos DIR     p4xos-public checkout or git directory (default: $P4XOS_SRC)
  --seconds S     measurement window per run (default 5)
  --warmup S      before it (default 1)
  --rounds R      runs per fabric and window, alternated; medians (default 2)
  --windows LIST  requests in flight (default 1,16)
  --quick         --seconds 2 --rounds 1
EOF2
}

bench_main() {
	local src=${P4XOS_SRC:-} secs=5 warm=1 rounds=2 windows=1,16
	while [ $# -gt 0 ]; do
		case $1 in
		--p4xos) src=${2:?}; shift ;;
		--seconds) secs=${2:?}; shift ;;
		--warmup) warm=${2:?}; shift ;;
		--rounds) rounds=${2:?}; shift ;;
		--windows) windows=${2:?}; shift ;;
		--quick) secs=2; rounds=1 ;;
		-h | --help) bench_usage; exit 0 ;;
		*) bench_usage_error "unknown option '$1'" ;;
		esac
		shift
	done
	[ "$(id -u)" -eq 0 ] || bench_die "needs root (network namespaces, XDP)"
	[ -n "$src" ] || bench_usage_error "no p4xos-public source (--p4xos DIR or P4XOS_SRC)"
	bench_build innet p4xos
	local px=/usr/bin/python3 jd="$BENCH_TMP/p4xos-json"
	P4XOS_SRC=$src $px "$BENCH_ROOT/tools/p4/p4test" p4xos --compile-only --out "$jd" \
		>"$BENCH_TMP/compile.log" 2>&1 || bench_die "P4xos's programs did not compile: $(tail -n 3 "$BENCH_TMP/compile.log")"
	bench_param p4xos "$src"
	bench_param seconds "$secs"
	bench_param rounds "$rounds"
	IFS=, read -r -a ws <<<"$windows"
	declare -A tput=() lat=()
	local px_run=0 # each client run on a fabric: a higher round (bench/src/p4xos.c)
	local r kind w st info out
	for r in $(seq 1 "$rounds"); do
		local order=(bmv2 xdp)
		[ $((r % 2)) -eq 0 ] && order=(xdp bmv2)
		for kind in "${order[@]}"; do
			st="$BENCH_TMP/fabric-$kind.json"
			# (a fabric left up by a failure is taken down on exit)
			BENCH_EXIT_HOOKS+=("[ ! -e '$st' ] || $px '$BENCH_ROOT/tools/p4/p4xos-fabric' down --state '$st'")
			local args=(up --state "$st" --json-dir "$jd" --name "pxb$$")
			if [ "$kind" = bmv2 ]; then args+=(--kind bmv2); else args+=(--kind innet --target xdp); fi
			info=$(INNET="$BENCH_INNET_BIN" $px "$BENCH_ROOT/tools/p4/p4xos-fabric" "${args[@]}" 2>"$BENCH_TMP/up-$kind.err") ||
				{ $px "$BENCH_ROOT/tools/p4/p4xos-fabric" down --state "$st" 2>/dev/null || true
				  bench_die "the $kind fabric did not come up: $(tail -n 3 "$BENCH_TMP/up-$kind.err")"; }
			local pns lns dst lis bind
			read -r pns lns dst lis bind < <($px -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["prop_ns"], d["learn_ns"], d["dst"], d["listen"], d["bind"])' "$info")
			for w in "${ws[@]}"; do
				local px_pid
				bench_spawn px_pid "px-$kind-w$w-$r" "" $((secs + warm + 30)) "$BENCH_BIN/p4xos" \
					--send-ns "$pns" --recv-ns "$lns" --dst "$dst" --listen "$lis" --bind "$bind" \
					--window "$w" --seconds "$secs" --warmup "$warm" --timeout-ms 200 --client $((r * 10 + w)) \
					--rnd $((++px_run * 64 + 1))
				bench_wait "$px_pid" || true
				out="$BENCH_TMP/px-$kind-w$w-$r.out"
				local c p
				c=$(bench_kv cmds_per_s "$out"); p=$(bench_kv p50_us "$out")
				bench_log "round $r: $kind, $w in flight: ${c:-?} commands/s, p50 ${p:-?} us ($(tail -n 1 "$out"))"
				bench_record fabric="$kind" window="$w" round="$r" cmds_per_s="${c:-0}" p50_us="${p:-0}"
				tput[$kind-$w]="${tput[$kind-$w]:-} ${c:-0}"
				lat[$kind-$w]="${lat[$kind-$w]:-} ${p:-0}"
			done
			$px "$BENCH_ROOT/tools/p4/p4xos-fabric" down --state "$st" >/dev/null 2>&1 || true
		done
	done
	local b x
	for w in "${ws[@]}"; do
		b=$(bench_median ${tput[bmv2-$w]}); x=$(bench_median ${tput[xdp-$w]})
		bench_result "bmv2_w${w}_cmds_per_s=$b" "bmv2_w${w}_p50_us=$(bench_median ${lat[bmv2-$w]})" \
			"xdp_w${w}_cmds_per_s=$x" "xdp_w${w}_p50_us=$(bench_median ${lat[xdp-$w]})" \
			"xdp_vs_bmv2_w$w=$(awk -v a="$x" -v b="$b" 'BEGIN{printf "%.2f", (b>0?a/b:0)}')"
	done
	bench_result "loadavg=$(cut -d' ' -f1 /proc/loadavg)"
}
