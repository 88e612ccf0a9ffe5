# shellcheck shell=bash
# bench: packets per second through one switch on XDP vs a hand-written XDP forwarder, innet's user-space engine, kernel forwarding
# timeout: 600
#
# bench/xdp-forwarding.sh — sourced by bench/run (helpers: bench/lib.sh).
#
# Three network namespaces in a line, joined by veth pairs (root):
#
#   gen                     sw                           sink
#   g0 10.91.1.1 ══════ s0 10.91.1.2   s1 10.91.2.2 ══════ k0 10.91.2.1
#   (xdptool gen:           (the contender)              (xdptool sink: counts
#    live frames, XDP_TX)                                  and drops in XDP)
#
# The same generator (BPF_PROG_TEST_RUN live frames, batches of 64, one UDP
# flow) and the same sink (an XDP counter) for every contender, 64 B and
# 1024 B frames (Ethernet included):
#
#   xdp          innet switch --target xdp, the forward program with the port
#                map [1, 0]: frames to 10.91.1.2:9000 leave s1 from
#                10.91.2.2:9000 to 10.91.2.1:9000 (the UDP relay's rewrites)
#   handwritten  bench/src/xdptool.bpf.c xdp_fwd: the same rewrites, written
#                as an eBPF engineer would (match, rewrite, checksum, devmap)
#   userspace    innet switch (the user-space engine), the same program and
#                settings, sockets on the same addresses
#   kernel       the kernel's IP forwarding between s0 and s1 (frames to
#                10.91.2.1 routed through sw; no UDP rewrite)
#
# The user-space engine's and the kernel's s0 carry an XDP_PASS program (a
# veth takes its peer's XDP_TX frames only when it runs XDP itself).
#
# Cores: the generator and the sink's receive work run on CPU 0; s0's receive
# work (where an XDP contender runs, and the kernel's forwarding) runs in a
# threaded NAPI kthread pinned to CPU 1, and so does the user-space engine's
# process: CPU 1 is "the switch's core". The NAPI threads run SCHED_FIFO 50
# (as data-plane threads are deployed), so that other work on a shared
# machine delays none of the contenders. The user-space engine runs
# SCHED_FIFO 51 (--userspace-prio), above the NAPI thread that feeds its
# sockets: at equal priority neither preempts the other, and a NAPI thread
# that always finds more frames in its ring never yields, so under a load
# above the engine's capacity the engine starves while the kernel fills its
# socket and drops there (receive livelock: 0.01-0.02 Mpps delivered at 1.0-
# 1.7 Mpps offered, docs/benchmarks.md). One priority above, the engine
# drains its socket whenever it has datagrams and the NAPI thread runs in
# between: the excess is dropped at s0's ring, before any work is spent on
# it. The generator offers what CPU 0 can make, in bursts (xdptool.c: each
# BPF_PROG_TEST_RUN call ends in a pause); a delivered rate near the offered
# one means the switch kept up (the generator's limit, not the contender's).
#
# Each contender runs --rounds times per size in alternating order; medians
# are reported, with the offered rate. Warm-up 1 s, measurement --seconds.
#
# Then the user-space engine alone at the first size, with the generator
# paced at each rate of --rates (SCHED_FIFO 40 on CPU 0, below the sink's
# NAPI thread, so that it keeps its pace), rounds in alternating order: its
# goodput must rise with the offered rate up to its capacity and stay there.
# Per run it records where the excess went: s0's ring (rx_dropped) and the
# engine's socket (the drops column of /proc/net/udp).

bench_usage() {
	cat <<'EOF'
usage: bench/run xdp-forwarding [options]
  --seconds S     measurement window per run (default 2)
  --rounds R      runs per contender and size, alternated; medians (default 3)
  --sizes LIST    frame sizes, comma separated (default 64,1024)
  --contenders L  which of xdp,handwritten,userspace,kernel to run (default all)
  --rates LIST    offered rates in Mpps for the user-space engine's sweep at the
                  first size (default 0.1,0.2,0.4,0.8,1.6; "none": no sweep)
  --userspace-prio P
                  the user-space engine's SCHED_FIFO priority (default 51: above
                  the NAPI thread feeding it, at 50; 50 shows the livelock)
  --quick         --seconds 1 --rounds 1
EOF
}

xf_secs=2
xf_rounds=3
xf_sizes=64,1024
xf_contenders=xdp,handwritten,userspace,kernel
xf_rates=0.1,0.2,0.4,0.8,1.6
xf_uprio=51

xf_parse() {
	while [ $# -gt 0 ]; do
		case $1 in
		--seconds) xf_secs=${2:?}; shift ;;
		--rounds) xf_rounds=${2:?}; shift ;;
		--sizes) xf_sizes=${2:?}; shift ;;
		--contenders) xf_contenders=${2:?}; shift ;;
		--rates) xf_rates=${2:?}; shift ;;
		--userspace-prio) xf_uprio=${2:?}; shift ;;
		--quick) xf_secs=1; xf_rounds=1 ;;
		-h | --help) bench_usage; exit 0 ;;
		*) bench_usage_error "unknown option '$1'" ;;
		esac
		shift
	done
	[[ $xf_secs =~ ^[0-9]+$ && $xf_rounds =~ ^[0-9]+$ && $xf_sizes =~ ^[0-9]+(,[0-9]+)*$ ]] ||
		bench_usage_error "--seconds, --rounds and --sizes take whole numbers"
	[[ $xf_rates == none || $xf_rates =~ ^[0-9]*\.?[0-9]+(,[0-9]*\.?[0-9]+)*$ ]] ||
		bench_usage_error "--rates takes Mpps, comma separated (e.g. 0.1,0.4), or none"
	[[ $xf_uprio =~ ^[0-9]+$ ]] && [ "$xf_uprio" -ge 1 ] && [ "$xf_uprio" -le 99 ] ||
		bench_usage_error "--userspace-prio takes a SCHED_FIFO priority, 1..99"
	local c
	IFS=, read -r -a XF_CONTENDERS <<<"$xf_contenders"
	for c in "${XF_CONTENDERS[@]}"; do
		case $c in
		xdp | handwritten | userspace | kernel) ;;
		*) bench_usage_error "unknown contender '$c' (xdp, handwritten, userspace, kernel)" ;;
		esac
	done
}

XF_NS=""
# Device names carry the run's tag (another run, or a test suite, may have
# its own g0/s0/k0 in other namespaces: the NAPI threads are found by device
# name, and those names are global).
XF_G=g0 XF_S0=s0 XF_S1=s1 XF_K=k0
XF_SKIPPED=0
xf_cleanup() {
	local n
	for n in gen sw sink; do
		ip netns del "$XF_NS-$n" 2>/dev/null || true
	done
}

xf_setup() {
	XF_NS="innet-xf$$"
	local tag
	tag=$(printf '%x' $(($$ % 65536)))
	XF_G="xg$tag" XF_S0="xs0$tag" XF_S1="xs1$tag" XF_K="xk$tag"
	trap 'xf_cleanup' EXIT
	local G="$XF_NS-gen" S="$XF_NS-sw" K="$XF_NS-sink"
	ip netns add "$G" && ip netns add "$S" && ip netns add "$K" || bench_die "cannot make namespaces"
	ip link add "$XF_G" netns "$G" address 02:91:00:00:00:01 type veth peer name "$XF_S0" netns "$S" address 02:91:00:00:00:02
	ip link add "$XF_S1" netns "$S" address 02:91:00:00:00:03 type veth peer name "$XF_K" netns "$K" address 02:91:00:00:00:04
	ip -n "$G" link set lo up; ip -n "$S" link set lo up; ip -n "$K" link set lo up
	ip -n "$G" link set "$XF_G" up; ip -n "$S" link set "$XF_S0" up; ip -n "$S" link set "$XF_S1" up; ip -n "$K" link set "$XF_K" up
	ip -n "$G" addr add 10.91.1.1 peer 10.91.1.2 dev "$XF_G"
	ip -n "$S" addr add 10.91.1.2 peer 10.91.1.1 dev "$XF_S0"
	ip -n "$S" addr add 10.91.2.2 peer 10.91.2.1 dev "$XF_S1"
	ip -n "$K" addr add 10.91.2.1 peer 10.91.2.2 dev "$XF_K"
	ip -n "$G" neigh replace 10.91.1.2 lladdr 02:91:00:00:00:02 dev "$XF_G" nud permanent
	ip -n "$S" neigh replace 10.91.1.1 lladdr 02:91:00:00:00:01 dev "$XF_S0" nud permanent
	ip -n "$S" neigh replace 10.91.2.1 lladdr 02:91:00:00:00:04 dev "$XF_S1" nud permanent
	ip -n "$K" neigh replace 10.91.2.2 lladdr 02:91:00:00:00:03 dev "$XF_K" nud permanent
	ip -n "$G" route add 10.91.2.0/24 via 10.91.1.2
}

XT=""
# Run dev's receive work (NAPI) in a kthread pinned to cpu (XDP attached first).
# 0, or 1 with the reason logged: the kernel refuses now and then to thread a
# veth's NAPI that was re-created moments before (a new XDP program): retried
# for a while, then the run is given up, not the benchmark.
xf_pin_napi() {
	local ns=$1 dev=$2 cpu=$3 pid="" i
	for i in $(seq 1 20); do
		if ip netns exec "$ns" sh -c "echo 1 > /sys/class/net/$dev/threaded" 2>/dev/null; then
			pid=$(pgrep -n "^napi/$dev-") && break
		fi
		sleep 0.1
	done
	if [ -z "$pid" ]; then
		bench_log "cannot thread $dev's NAPI (tried for 2 s): this run is skipped"
		return 1
	fi
	taskset -p -c "$cpu" "$pid" >/dev/null || { bench_log "cannot pin $dev's NAPI thread"; return 1; }
	chrt -f -p 50 "$pid" || { bench_log "cannot make $dev's NAPI thread real-time"; return 1; }
}

# A run whose setup failed: stop what it started; it reports "skip".
xf_abort_run() {
	local who=$1 size=$2 p
	shift 2
	for p in "$@"; do
		[ -n "$p" ] && bench_stop "$p"
	done
	[ "$who" = kernel ] && ip netns exec "$XF_NS-sw" sysctl -qw net.ipv4.ip_forward=0
	echo "skip skip 0 0 0 0"
}

# xf_run CONTENDER SIZE [RATE]: one run, the generator unpaced or at RATE
# Mpps. Prints "delivered offered ring_drops sock_drops sent duty": the
# sink's and the generator's rates (Mpps) in the window; over the whole run,
# the frames s0 dropped because its receive ring was full (dropped before
# any work: the cheap place), the datagrams the kernel dropped at the
# engine's socket (after the receive work: the dear place; user space
# only), and the frames the generator sent; the generator's duty (xdptool.c).
xf_run() {
	local who=$1 size=$2 rate=${3:-0} total=$((xf_secs + 2)) pid_sw="" pid_pass="" pid_sink pid_gen dst
	local S="$XF_NS-sw" tag="$1-$2" gen_rt=()
	[ "$rate" = 0 ] || { tag="$tag-at$rate"; gen_rt=(chrt -f 40); }
	dst=10.91.1.2:9000
	case $who in
	xdp)
		bench_spawn pid_sw "sw-$tag" 1 $((total + 10)) ip netns exec "$S" "$BENCH_INNET_BIN" switch \
			--target xdp --port 10.91.1.2=10.91.1.1@$XF_S0 --port 10.91.2.2=10.91.2.1@$XF_S1 \
			--program forward@9000 --args '{"map": [1, 0]}' --ctl ""
		bench_wait_ready "$pid_sw" "sw-$tag" ready 20 || bench_die "innet switch (xdp) did not start"
		;;
	userspace)
		bench_spawn pid_sw "sw-$tag" 1 $((total + 10)) ip netns exec "$S" chrt -f "$xf_uprio" \
			"$BENCH_INNET_BIN" switch --port 10.91.1.2=10.91.1.1 --port 10.91.2.2=10.91.2.1 \
			--program forward@9000 --args '{"map": [1, 0]}' --ctl ""
		bench_wait_ready "$pid_sw" "sw-$tag" ready 20 || bench_die "innet switch did not start"
		;;
	handwritten)
		bench_spawn pid_sw "sw-$tag" "" $((total + 10)) ip netns exec "$S" "$XT" fwd "$XF_S0" "$XF_S1" \
			--my 10.91.1.2:9000 --from 10.91.2.2 --to 10.91.2.1:9000 --to-mac 02:91:00:00:00:04 \
			--seconds $((total + 5))
		bench_wait_ready "$pid_sw" "sw-$tag" ready 20 || bench_die "xdptool fwd did not start"
		;;
	kernel)
		ip netns exec "$S" sysctl -qw net.ipv4.ip_forward=1
		dst=10.91.2.1:9000
		;;
	esac
	if [ "$who" = userspace ] || [ "$who" = kernel ]; then
		bench_spawn pid_pass "pass-$tag" "" $((total + 10)) ip netns exec "$S" "$XT" pass "$XF_S0" \
			--seconds $((total + 5))
		bench_wait_ready "$pid_pass" "pass-$tag" ready 20 || bench_die "xdptool pass did not start"
	fi
	xf_pin_napi "$S" "$XF_S0" 1 || { xf_abort_run "$who" "$size" "$pid_sw" "$pid_pass"; return 0; }
	bench_spawn pid_sink "sink-$tag" 0 $((total + 10)) ip netns exec "$XF_NS-sink" "$XT" sink "$XF_K" \
		--warmup 1 --seconds "$xf_secs"
	bench_wait_ready "$pid_sink" "sink-$tag" ready 20 || bench_die "xdptool sink did not start"
	xf_pin_napi "$XF_NS-sink" "$XF_K" 0 || { xf_abort_run "$who" "$size" "$pid_sw" "$pid_pass" "$pid_sink"; return 0; }
	local ring0 ring1 sock=0
	ring0=$(xf_ring_drops)
	# paced: SCHED_FIFO 40 (below the sink's NAPI thread on the same core),
	# or other work on that core would make the pace stutter
	bench_spawn pid_gen "gen-$tag" 0 $((total + 10)) ip netns exec "$XF_NS-gen" "${gen_rt[@]}" "$XT" gen "$XF_G" \
		--src-mac 02:91:00:00:00:01 --dst-mac 02:91:00:00:00:02 --src 10.91.1.1:40000 --dst "$dst" \
		--size "$size" --warmup 1 --seconds "$xf_secs" --rate "$rate"
	bench_wait "$pid_gen" || bench_die "the generator failed ($(tail -n 2 "$BENCH_TMP/gen-$tag.err"))"
	bench_wait "$pid_sink" || bench_die "the sink failed"
	ring1=$(xf_ring_drops)
	[ "$who" = userspace ] && sock=$(ip netns exec "$S" bash -c "$(declare -f bench_udp_drops); bench_udp_drops 10.91.1.2 9000")
	[ -n "$pid_sw" ] && bench_stop "$pid_sw"
	[ -n "$pid_pass" ] && bench_stop "$pid_pass"
	[ "$who" = kernel ] && ip netns exec "$S" sysctl -qw net.ipv4.ip_forward=0
	echo "$(bench_kv mpps "$BENCH_TMP/sink-$tag.out") $(bench_kv offered_mpps "$BENCH_TMP/gen-$tag.out")" \
		"$((ring1 - ring0)) $sock $(bench_kv sent "$BENCH_TMP/gen-$tag.out") $(bench_kv duty "$BENCH_TMP/gen-$tag.out")"
}

# Frames s0 dropped so far because its receive ring was full (a veth counts
# its peer's XDP_TX frames it had no room for in rx_dropped).
xf_ring_drops() {
	ip netns exec "$XF_NS-sw" cat "/sys/class/net/$XF_S0/statistics/rx_dropped"
}

# xf_ratio A B: A / B to 3 decimals, 0 when B is 0, "" when either is missing
xf_ratio() {
	[ -n "$1" ] && [ -n "$2" ] && [ "$1" != nan ] && [ "$2" != nan ] || return 0
	awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", (b>0?a/b:0)}'
}

# The contenders, unpaced, at every size.
xf_compare() {
	local size who r i order got off ring sock sent duty sizes
	IFS=, read -r -a sizes <<<"$xf_sizes"
	for size in "${sizes[@]}"; do
		declare -A vals=() offs=()
		for r in $(seq 1 "$xf_rounds"); do
			order=("${XF_CONTENDERS[@]}")
			if [ $((r % 2)) -eq 0 ]; then # alternate the order
				order=()
				for ((i = ${#XF_CONTENDERS[@]} - 1; i >= 0; i--)); do order+=("${XF_CONTENDERS[i]}"); done
			fi
			for who in "${order[@]}"; do
				read -r got off ring sock sent duty < <(xf_run "$who" "$size")
				if [ "$got" = skip ]; then
					XF_SKIPPED=$((XF_SKIPPED + 1))
					bench_log "$size B round $r: $who skipped (its setup failed; see above)"
					continue
				fi
				bench_log "$size B round $r: $who delivered $got Mpps (offered $off)"
				bench_record contender="$who" size="$size" round="$r" delivered_mpps="$got" offered_mpps="$off" \
					ring_drops="$ring" sock_drops="$sock" sent="$sent" gen_duty="$duty"
				vals[$who]="${vals[$who]:-} $got"
				offs[$who]="${offs[$who]:-} $off"
			done
		done
		local x="" h="" u="" k="" o kv=()
		for who in "${XF_CONTENDERS[@]}"; do
			[ -n "${vals[$who]:-}" ] || continue
			kv+=("${who}_mpps_$size=$(bench_median ${vals[$who]})")
			case $who in
			xdp) x=$(bench_median ${vals[$who]}) ;;
			handwritten) h=$(bench_median ${vals[$who]}) ;;
			userspace) u=$(bench_median ${vals[$who]}) ;;
			kernel) k=$(bench_median ${vals[$who]}) ;;
			esac
		done
		# shellcheck disable=SC2046 # word splitting wanted: the offered rates of every run
		o=$(bench_median $(printf '%s\n' "${offs[@]}"))
		kv+=("offered_mpps_$size=$o")
		[ -n "$(xf_ratio "$x" "$h")" ] && kv+=("ratio_handwritten_$size=$(xf_ratio "$x" "$h")")
		[ -n "$(xf_ratio "$x" "$u")" ] && kv+=("ratio_userspace_$size=$(xf_ratio "$x" "$u")")
		[ -n "$(xf_ratio "$x" "$k")" ] && kv+=("ratio_kernel_$size=$(xf_ratio "$x" "$k")")
		bench_result "${kv[@]}"
		if [ "$size" = "${sizes[0]}" ]; then
			XF_HEAD_H=$(xf_ratio "$x" "$h")
			XF_HEAD_U=$(xf_ratio "$x" "$u")
		fi
		unset vals offs
	done
}

# The user-space engine at each offered rate of --rates, at the first size:
# its goodput must level off at its capacity, not fall, as the load rises.
xf_sweep() {
	local size=${xf_sizes%%,*} rate r i order got off ring sock sent duty sockfrac ringfrac
	local -a rates
	IFS=, read -r -a rates <<<"$xf_rates"
	declare -A vals=() offs=() socks=() rings=()
	for r in $(seq 1 "$xf_rounds"); do
		order=("${rates[@]}")
		if [ $((r % 2)) -eq 0 ]; then
			order=()
			for ((i = ${#rates[@]} - 1; i >= 0; i--)); do order+=("${rates[i]}"); done
		fi
		for rate in "${order[@]}"; do
			read -r got off ring sock sent duty < <(xf_run userspace "$size" "$rate")
			if [ "$got" = skip ]; then
				XF_SKIPPED=$((XF_SKIPPED + 1))
				bench_log "$size B at $rate Mpps round $r: skipped (its setup failed; see above)"
				continue
			fi
			ringfrac=$(bench_calc "%.3f" "${sent:-0} > 0 ? $ring / $sent : 0")
			sockfrac=$(bench_calc "%.3f" "${sent:-0} > 0 ? $sock / $sent : 0")
			bench_log "$size B at $rate Mpps round $r: userspace delivered $got Mpps (offered $off;" \
				"of the frames sent, dropped at s0's ring $ringfrac, at the engine's socket $sockfrac)"
			bench_record contender=userspace size="$size" rate="$rate" round="$r" delivered_mpps="$got" \
				offered_mpps="$off" ring_drops="$ring" sock_drops="$sock" sent="$sent" gen_duty="$duty" \
				userspace_prio="$xf_uprio"
			vals[$rate]="${vals[$rate]:-} $got"
			offs[$rate]="${offs[$rate]:-} $off"
			socks[$rate]="${socks[$rate]:-} $sockfrac"
			rings[$rate]="${rings[$rate]:-} $ringfrac"
		done
	done
	local kv=() best=0 top="" m
	for rate in "${rates[@]}"; do
		[ -n "${vals[$rate]:-}" ] || continue
		m=$(bench_median ${vals[$rate]})
		kv+=("userspace_mpps_${size}_at_$rate=$m" "offered_mpps_${size}_at_$rate=$(bench_median ${offs[$rate]})")
		best=$(awk -v a="$best" -v b="$m" 'BEGIN{print (b>a?b:a)}')
		top=$rate
	done
	[ -n "$top" ] || return 0
	# at the highest rate: goodput against the best of the sweep (1: no
	# collapse under overload), and where the excess went
	kv+=("userspace_overload_ratio_$size=$(xf_ratio "$(bench_median ${vals[$top]})" "$best")"
		"userspace_sockdrop_frac_$size=$(bench_median ${socks[$top]})"
		"userspace_ringdrop_frac_$size=$(bench_median ${rings[$top]})")
	bench_result "${kv[@]}"
}

bench_main() {
	xf_parse "$@"
	[ "$(id -u)" -eq 0 ] || bench_die "needs root (network namespaces, XDP)"
	bench_build innet xdptool
	XT="$BENCH_BIN/xdptool"
	bench_param seconds "$xf_secs"
	bench_param rounds "$xf_rounds"
	bench_param sizes "$xf_sizes"
	bench_param contenders "$xf_contenders"
	bench_param rates "$xf_rates"
	bench_param userspace_prio "$xf_uprio"
	xf_setup
	bench_param netns "$XF_NS"
	XF_HEAD_H="" XF_HEAD_U=""
	xf_compare
	local c sweep=0
	for c in "${XF_CONTENDERS[@]}"; do [ "$c" = userspace ] && sweep=1; done
	[ "$xf_rates" = none ] && sweep=0
	[ "$sweep" = 0 ] || xf_sweep
	# the headline ratios: the smallest frames, where packet rate is all
	[ -n "$XF_HEAD_H" ] && bench_result "ratio_handwritten=$XF_HEAD_H"
	[ -n "$XF_HEAD_U" ] && bench_result "ratio_userspace=$XF_HEAD_U"
	bench_result "skipped_runs=$XF_SKIPPED" "loadavg=$(cut -d' ' -f1 /proc/loadavg)"
}
