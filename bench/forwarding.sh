# shellcheck shell=bash
# bench: innet's forward program vs a plain recvmmsg/sendmmsg relay (both with and without UDP GSO): delivered Mpps at 64 and 1024 B
# timeout: 600
#
# bench/forwarding.sh — sourced by bench/run (see bench/lib.sh for the helpers).
#
#   udpgen ──▶ 127.0.0.1:P ─[relay under test]─ 127.0.0.2:P ──▶ 127.0.0.3:P udpsink
#
# The relay under test is either the switch runtime (build/innet switch with
# the forward program, port 0 → port 1) or bench/src/rawrelay.c, each with UDP
# GSO on its sends (their default) and without (--no-gso): four relays,
#   innet  innet_nogso  raw  raw_nogso
# All get the same generator, sink, sizes, duration, CPU pinning and socket
# buffer sizes; they run alternately (raw innet innet_nogso raw_nogso, then
# the reverse, ...) so that the machine's drift hits all alike, and the
# medians of the rounds are compared. The baseline is the best relay: the
# higher of raw's and raw_nogso's medians (raw's, unless GSO did not help).
#
# A run in which a relay delivered less than 1% of what was offered is a
# starved relay (another process held its CPU), not a measurement: the run's
# record says starved=1, and the RESULT names, per size, every relay whose
# median run was starved (starved_SIZE=raw,... or starved_SIZE=none), so that
# a ratio against a relay that delivered nothing is never read as one.
#
# BENCH_INNET=raw runs rawrelay in innet's place (to check the harness before
# the engine exists, or to see the harness's own noise: ratio should be ~1).

bench_usage() {
	cat <<'EOF'
usage: bench/run forwarding [options]
  --rounds N        measured runs per implementation and size (default 5)
  --duration SEC    measurement window per run (default 3)
  --warmup SEC      traffic before the window opens (default 0.5)
  --sizes LIST      UDP payload sizes, comma-separated (default 64,1024)
  --rate PPS        pace the generator (default 0 = as fast as it can)
  --burst N         generator and raw relay burst (default 32)
  --gso-only        run innet and raw with GSO only (not the --no-gso pair)
  --gso N           generator datagrams per message, UDP_SEGMENT (default 8;
                    1 = one syscall per datagram, which cannot outrun the relay)
  --sink MODE       busy: the sink polls (default); block: it sleeps in recvmmsg
                    (then the relay pays for waking it on every burst)
  --udp-port P      UDP port for everything (default 9000)
  --pin MODE        split: generator+sink on CPU 0, relay on CPU 1 (default
                    with >= 2 CPUs); none: no pinning
  --quick           1 round of 1 s (a smoke test, not a measurement)
Environment: BENCH_INNET=raw runs the raw relay in innet's place.
EOF
}

fwd_rounds=5
fwd_duration=3
fwd_warmup=0.5
fwd_sizes=64,1024
fwd_rate=0
fwd_burst=32
fwd_gso=8
fwd_sink=busy
fwd_port=9000
fwd_pin="split"
fwd_cpu_load=""
fwd_cpu_relay=""
fwd_standin=""
fwd_gso_only=0
# The sink is not under test: a deep receive queue lets it ride out being
# descheduled (CPU 0 is shared with the generator and whatever else runs).
FWD_SINK_RCVBUF=$((32 << 20))
fwd_pps=0
fwd_loss=0
fwd_ppc=0
fwd_starved=0
fwd_shares=()

fwd_parse() {
	while [ $# -gt 0 ]; do
		case $1 in
		--rounds) fwd_rounds=${2:?}; shift ;;
		--duration) fwd_duration=${2:?}; shift ;;
		--warmup) fwd_warmup=${2:?}; shift ;;
		--sizes) fwd_sizes=${2:?}; shift ;;
		--rate) fwd_rate=${2:?}; shift ;;
		--burst) fwd_burst=${2:?}; shift ;;
		--gso) fwd_gso=${2:?}; shift ;;
		--gso-only) fwd_gso_only=1 ;;
		--sink) fwd_sink=${2:?}; shift ;;
		--udp-port) fwd_port=${2:?}; shift ;;
		--pin) fwd_pin=${2:?}; shift ;;
		--quick) fwd_rounds=1; fwd_duration=1; fwd_warmup=0.2 ;;
		-h | --help) bench_usage; exit 0 ;;
		*) bench_usage_error "unknown option '$1'" ;;
		esac
		shift
	done
	[[ $fwd_rounds =~ ^[1-9][0-9]?$ ]] || bench_usage_error "--rounds: 1..99"
	if ! [[ $fwd_duration =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
		[ "$(bench_calc %d "$fwd_duration > 0 && $fwd_duration <= 60")" != 1 ]; then
		bench_usage_error "--duration: seconds, > 0 and <= 60"
	fi
	if ! [[ $fwd_warmup =~ ^[0-9]+(\.[0-9]+)?$ ]] || [ "$(bench_calc %d "$fwd_warmup <= 10")" != 1 ]; then
		bench_usage_error "--warmup: seconds, <= 10"
	fi
	[[ $fwd_sizes =~ ^[0-9]+(,[0-9]+)*$ ]] || bench_usage_error "--sizes: e.g. 64,1024"
	[[ $fwd_rate =~ ^[0-9]+$ ]] || bench_usage_error "--rate: packets/s"
	[[ $fwd_burst =~ ^[0-9]+$ ]] || bench_usage_error "--burst: a number"
	[[ $fwd_gso =~ ^[0-9]+$ ]] || bench_usage_error "--gso: a number"
	case $fwd_sink in
	busy | block) ;;
	*) bench_usage_error "--sink: busy or block" ;;
	esac
	if ! [[ $fwd_port =~ ^[0-9]+$ ]] || [ "$fwd_port" -eq 0 ] || [ "$fwd_port" -gt 65535 ]; then
		bench_usage_error "--udp-port: 1..65535"
	fi
	case $fwd_pin in
	split)
		if [ "$(nproc)" -ge 2 ]; then
			fwd_cpu_load=0
			fwd_cpu_relay=1
		else
			bench_log "one CPU: not pinning"
			fwd_pin=none
		fi
		;;
	none) ;;
	*) bench_usage_error "--pin: split or none" ;;
	esac
	case ${BENCH_INNET:-} in
	"") ;;
	raw) fwd_standin=rawrelay ;;
	*) bench_usage_error "BENCH_INNET: empty or 'raw'" ;;
	esac
	local s
	for s in ${fwd_sizes//,/ }; do
		if [ "$s" -lt 8 ] || [ "$s" -gt 1472 ]; then
			bench_usage_error "--sizes: each 8..1472"
		fi
		if [ $((s * fwd_gso)) -gt 65000 ]; then
			bench_usage_error "--gso: size x gso must stay under 65000 bytes"
		fi
	done
}

# fwd_relay_cmd IMPL SECS: the command line of the relay under test
# (IMPL: innet, innet_nogso, raw, raw_nogso).
fwd_relay_cmd() {
	local impl=$1 secs=$2
	if [[ $impl == raw* ]] || [ -n "$fwd_standin" ]; then
		printf '%s\n' "$BENCH_BIN/rawrelay" --in "127.0.0.1:$fwd_port" --out "127.0.0.2:$fwd_port" \
			--to "127.0.0.3:$fwd_port" --burst "$fwd_burst" --duration "$secs"
	else
		printf '%s\n' "$BENCH_INNET_BIN" switch --name bench --workers 1 \
			--port 127.0.0.1 --port 127.0.0.2=127.0.0.3 \
			--program "forward@$fwd_port" --args '{"map":[1,0]}' --duration "$secs"
	fi
	# *_nogso: the same relay sending every datagram on its own
	if [[ $impl == *_nogso ]]; then echo --no-gso; fi
}

# fwd_run IMPL SIZE ROUND: one measured run; records it and leaves the
# delivered packets/s and the loss in fwd_pps and fwd_loss. (Not run in a
# $(...) subshell: the spawned pids and records must reach the main shell.)
fwd_run() {
	local impl=$1 size=$2 round=$3 tag="$1-$2-$3"
	local gen_secs relay_secs sink_pid relay_pid relay_proc gen_pid rc relay_drops relay_rc=0 load1
	local -a relay_cmd sink_opt=()
	gen_secs=$(bench_calc %.2f "$fwd_warmup + $fwd_duration + 0.5")
	relay_secs=$(bench_calc %d "$gen_secs + 10")
	load1=$(cut -d' ' -f1 /proc/loadavg)
	if [ "$fwd_sink" = busy ]; then
		sink_opt=(--busy)
	fi

	mapfile -t relay_cmd < <(fwd_relay_cmd "$impl" "$relay_secs")
	bench_spawn relay_pid "$tag-relay" "$fwd_cpu_relay" "$((relay_secs + 5))" "${relay_cmd[@]}"
	bench_wait_ready "$relay_pid" "$tag-relay" ready 10

	# The sink also measures the relay's CPU time during its window.
	relay_proc=$(bench_child_pid "$relay_pid")
	bench_spawn sink_pid "$tag-sink" "$fwd_cpu_load" "$((relay_secs + 5))" \
		"$BENCH_BIN/udpsink" --bind "127.0.0.3:$fwd_port" --duration "$fwd_duration" \
		--warmup "$fwd_warmup" --wait 5 --expect-size "$size" --rcvbuf "$FWD_SINK_RCVBUF" \
		--cpu-pid "$relay_proc" "${sink_opt[@]}"
	bench_wait_ready "$sink_pid" "$tag-sink" ready 5

	bench_spawn gen_pid "$tag-gen" "$fwd_cpu_load" "$((relay_secs + 5))" \
		"$BENCH_BIN/udpgen" --dst "127.0.0.1:$fwd_port" --size "$size" --duration "$gen_secs" \
		--rate "$fwd_rate" --burst "$fwd_burst" --gso "$fwd_gso" --quiet

	rc=0
	bench_wait "$sink_pid" || rc=$?
	# Read the relay's receive drops while its socket still exists.
	relay_drops=$(bench_udp_drops 127.0.0.1 "$fwd_port")
	# The window is over: stop the generator (it would run 0.5 s more), then the relay.
	bench_stop "$gen_pid" || bench_die "$tag: udpgen failed: $(tail -n 3 "$BENCH_TMP/$tag-gen.err")"
	bench_stop "$relay_pid" || relay_rc=$?
	[ "$rc" -eq 0 ] || bench_die "$tag: udpsink failed (status $rc): $(tail -n 3 "$BENCH_TMP/$tag-sink.err")"
	if [ "$relay_rc" -ne 0 ]; then
		bench_log "warning: $tag: relay exited with status $relay_rc: $(tail -n 2 "$BENCH_TMP/$tag-relay.err" | tr '\n' ' ')"
	fi

	local sink="$BENCH_TMP/$tag-sink.out" gen="$BENCH_TMP/$tag-gen.out"
	local pps loss sink_drops cpu_s window ppc share
	pps=$(bench_kv pps "$sink")
	cpu_s=$(bench_kv cpu_s "$sink")
	window=$(bench_kv elapsed_s "$sink")
	loss=$(bench_kv loss_pct "$sink")
	sink_drops=$(bench_kv sink_drops "$sink")
	[ -n "$pps" ] || bench_die "$tag: no summary from udpsink"
	# Packets per CPU-second of the relay: its per-packet cost, whatever
	# share of the CPU it was given (see docs/benchmarks.md).
	ppc=$(bench_calc %.0f "$cpu_s > 0 ? $(bench_kv pkts "$sink") / $cpu_s : 0")
	share=$(bench_calc %.3f "$cpu_s / $window")
	# starved: delivered under 1% of the offered rate (nothing, really)
	local starved offered
	offered=$(bench_kv pps "$gen")
	starved=$(bench_calc %d "$pps < 0.01 * ${offered:-0} || $pps == 0")
	if [ "$starved" = 1 ]; then
		bench_log "warning: $tag: the relay delivered $(bench_calc %.0f "$pps") packets/s of" \
			"$(bench_calc %.0f "${offered:-0}") offered: starved (no CPU for it), not a measurement"
	fi
	if [ "${sink_drops:-0}" != 0 ]; then
		bench_log "warning: $tag: the sink dropped $sink_drops packets (sink-bound, not relay-bound)"
	fi
	bench_record impl="$impl" size="$size" round="$round" \
		delivered_pps="$pps" loss_pct="$loss" \
		lost="$(bench_kv lost "$sink")" late="$(bench_kv late "$sink")" dup="$(bench_kv dup "$sink")" \
		bad="$(bench_kv bad "$sink")" sink_drops="$sink_drops" \
		window_s="$window" relay_cpu_s="$cpu_s" relay_cpu_share="$share" pps_per_relay_cpu="$ppc" \
		offered_pps="$(bench_kv pps "$gen")" send_errors="$(bench_kv send_errors "$gen")" \
		relay_rx_drops="$relay_drops" relay_exit="$relay_rc" loadavg1_before="$load1" starved="$starved"
	bench_log "$(printf '%-11s %4s B round %d: %.3f Mpps delivered (loss %.1f%% of %.3f offered); relay on CPU %.0f%% -> %.3f Mpps per CPU' \
		"$impl" "$size" "$round" "$(bench_calc %.6f "$pps / 1e6")" "$loss" \
		"$(bench_calc %.6f "$(bench_kv pps "$gen") / 1e6")" "$(bench_calc %.1f "$share * 100")" \
		"$(bench_calc %.6f "$ppc / 1e6")")"
	fwd_pps=$pps
	fwd_loss=$loss
	fwd_ppc=$ppc
	fwd_starved=$starved
	fwd_shares+=("$share")
}

bench_main() {
	fwd_parse "$@"
	if [ -n "$fwd_standin" ]; then
		bench_log "BENCH_INNET=raw: the raw relay stands in for innet (harness check only)"
		bench_build udpgen udpsink rawrelay
	else
		bench_build udpgen udpsink rawrelay innet
	fi
	local load1
	load1=$(cut -d' ' -f1 /proc/loadavg)
	if [ "$(bench_calc %d "$load1 > 0.5")" = 1 ]; then
		bench_log "warning: load average $load1 before the start: other work shares the CPUs, expect noise"
	fi
	bench_param loadavg1_at_start "$load1"
	bench_param rounds "$fwd_rounds"
	bench_param duration_s "$fwd_duration"
	bench_param warmup_s "$fwd_warmup"
	bench_param sizes "$fwd_sizes"
	bench_param rate_pps "$fwd_rate"
	bench_param burst "$fwd_burst"
	bench_param gen_gso "$fwd_gso"
	bench_param sink_mode "$fwd_sink"
	bench_param udp_port "$fwd_port"
	bench_param pin "$fwd_pin"
	bench_param cpu_generator_sink "${fwd_cpu_load:-any}"
	bench_param cpu_relay "${fwd_cpu_relay:-any}"
	bench_param socket_buffers 4194304
	bench_param sink_rcvbuf "$FWD_SINK_RCVBUF"
	bench_param innet_impl "${fwd_standin:-innet}"
	bench_param innet_cmd "$(fwd_relay_cmd innet 0 | tr '\n' ' ')"
	bench_param raw_cmd "$(fwd_relay_cmd raw 0 | tr '\n' ' ')"
	bench_param nogso_pair "$([ "$fwd_gso_only" = 1 ] && echo "not run (--gso-only)" || echo "innet_nogso and raw_nogso: the same relays with --no-gso")"

	local size round impl order ratios=() ratio cpu_ratios=() cpu_ratio
	local -A med_pps med_loss med_ppc med_starved
	local -a pps_l loss_l ppc_l starved_l
	local starved_list
	local impls="raw innet innet_nogso raw_nogso"
	[ "$fwd_gso_only" = 1 ] && impls="raw innet"
	for size in ${fwd_sizes//,/ }; do
		local -A runs_pps=() runs_loss=() runs_ppc=() runs_starved=()
		for ((round = 1; round <= fwd_rounds; round++)); do
			# ABBA: alternate which goes first, so none always runs
			# on a warmer (or busier) machine.
			order=$impls
			if ((round % 2 == 0)); then order=$(tr ' ' '\n' <<<"$impls" | tac | tr '\n' ' '); fi
			for impl in $order; do
				fwd_run "$impl" "$size" "$round"
				runs_pps[$impl]+="$fwd_pps "
				runs_loss[$impl]+="$fwd_loss "
				runs_ppc[$impl]+="$fwd_ppc "
				runs_starved[$impl]+="$fwd_starved "
			done
		done
		for impl in $impls; do
			read -r -a pps_l <<<"${runs_pps[$impl]}"
			read -r -a loss_l <<<"${runs_loss[$impl]}"
			read -r -a ppc_l <<<"${runs_ppc[$impl]}"
			med_pps[$impl]=$(bench_median "${pps_l[@]}")
			med_loss[$impl]=$(bench_median "${loss_l[@]}")
			med_ppc[$impl]=$(bench_median "${ppc_l[@]}")
			# starved in the median: more than half of its runs were
			read -r -a starved_l <<<"${runs_starved[$impl]}"
			med_starved[$impl]=$(printf '%s\n' "${starved_l[@]}" |
				awk '{ n++; s += $1 } END { print (2 * s > n) ? 1 : 0 }')
		done
		starved_list=""
		for impl in $impls; do
			if [ "${med_starved[$impl]}" = 1 ]; then starved_list+="${starved_list:+,}$impl"; fi
		done
		if [ -n "$starved_list" ]; then
			bench_log "warning: $size B: starved (delivered under 1% of the offered rate in most runs):" \
				"$starved_list — the ratios against them are not measurements"
		fi
		# The baseline: the best relay, by delivered rate and by per-CPU
		# rate separately (raw with GSO, unless GSO did not pay).
		local best=raw best_cpu=raw m_best mc_best
		if [ "$fwd_gso_only" = 0 ]; then
			[ "$(bench_calc %d "${med_pps[raw_nogso]} > ${med_pps[raw]}")" = 1 ] && best=raw_nogso
			[ "$(bench_calc %d "${med_ppc[raw_nogso]} > ${med_ppc[raw]}")" = 1 ] && best_cpu=raw_nogso
		fi
		m_best=${med_pps[$best]}
		mc_best=${med_ppc[$best_cpu]}
		ratio=$(bench_calc %.3f "$m_best > 0 ? ${med_pps[innet]} / $m_best : 0")
		cpu_ratio=$(bench_calc %.3f "$mc_best > 0 ? ${med_ppc[innet]} / $mc_best : 0")
		ratios+=("$ratio")
		cpu_ratios+=("$cpu_ratio")
		bench_result "innet_${size}_mpps=$(bench_calc %.3f "${med_pps[innet]} / 1e6")" \
			"raw_${size}_mpps=$(bench_calc %.3f "${med_pps[raw]} / 1e6")" "ratio_${size}=$ratio" \
			"innet_${size}_loss_pct=$(bench_calc %.2f "${med_loss[innet]}")" \
			"raw_${size}_loss_pct=$(bench_calc %.2f "${med_loss[raw]}")" \
			"innet_${size}_mpps_per_cpu=$(bench_calc %.3f "${med_ppc[innet]} / 1e6")" \
			"raw_${size}_mpps_per_cpu=$(bench_calc %.3f "${med_ppc[raw]} / 1e6")" "cpu_ratio_${size}=$cpu_ratio" \
			"best_relay_${size}=$best" "starved_${size}=${starved_list:-none}"
		bench_log "$size B: innet $(bench_calc %.3f "${med_pps[innet]} / 1e6") Mpps, raw $(bench_calc %.3f "${med_pps[raw]} / 1e6") Mpps;" \
			"innet / best relay ($best) $ratio; per relay CPU-second: innet / best ($best_cpu) $cpu_ratio (medians of $fwd_rounds)"
		if [ "$fwd_gso_only" = 0 ]; then
			local m_pl=${med_pps[innet_nogso]} m_rp=${med_pps[raw_nogso]}
			local mc_pl=${med_ppc[innet_nogso]} mc_rp=${med_ppc[raw_nogso]}
			bench_result "innet_nogso_${size}_mpps=$(bench_calc %.3f "$m_pl / 1e6")" \
				"raw_nogso_${size}_mpps=$(bench_calc %.3f "$m_rp / 1e6")" \
				"ratio_nogso_${size}=$(bench_calc %.3f "$m_rp > 0 ? $m_pl / $m_rp : 0")" \
				"innet_nogso_${size}_loss_pct=$(bench_calc %.2f "${med_loss[innet_nogso]}")" \
				"raw_nogso_${size}_loss_pct=$(bench_calc %.2f "${med_loss[raw_nogso]}")" \
				"innet_nogso_${size}_mpps_per_cpu=$(bench_calc %.3f "$mc_pl / 1e6")" \
				"raw_nogso_${size}_mpps_per_cpu=$(bench_calc %.3f "$mc_rp / 1e6")" \
				"cpu_ratio_nogso_${size}=$(bench_calc %.3f "$mc_rp > 0 ? $mc_pl / $mc_rp : 0")"
			bench_log "$size B without GSO: innet $(bench_calc %.3f "$m_pl / 1e6") Mpps, raw $(bench_calc %.3f "$m_rp / 1e6") Mpps," \
				"ratio $(bench_calc %.3f "$m_rp > 0 ? $m_pl / $m_rp : 0"), per CPU $(bench_calc %.3f "$mc_rp > 0 ? $mc_pl / $mc_rp : 0")"
		fi
	done
	local share
	share=$(bench_calc %.3f "$(bench_median "${fwd_shares[@]}")")
	bench_result "ratio=$(printf '%s\n' "${ratios[@]}" | sort -g | head -n 1)" \
		"cpu_ratio=$(printf '%s\n' "${cpu_ratios[@]}" | sort -g | head -n 1)" \
		"relay_cpu_share=$share"
	if [ "$(bench_calc %d "$share < 0.8")" = 1 ]; then
		bench_log "warning: the relays got a median $(bench_calc %.0f "$share * 100")% of their CPU (other load):" \
			"delivered rates and 'ratio' reflect that share; 'cpu_ratio' is the figure to trust"
	fi
	if [ -n "$fwd_standin" ]; then
		bench_result "innet_impl=$fwd_standin"
	fi
}
