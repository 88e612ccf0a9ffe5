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
# process: CPU 1 is "the switch's core". The NAPI threads and the user-space
# engine run SCHED_FIFO 50 (as data-plane threads are deployed), so that
# other work on a shared machine delays none of the contenders. The generator offers what CPU 0 can
# make; a delivered rate near the offered one means the switch kept up (the
# figure is the generator's, not the contender's limit).
#
# Each contender runs --rounds times per size in alternating order; medians
# are reported, with the offered rate. Warm-up 1 s, measurement --seconds.

bench_usage() {
	cat <<'EOF'
usage: bench/run xdp-forwarding [options]
  --seconds S     measurement window per run (default 2)
  --rounds R      runs per contender and size, alternated; medians (default 3)
  --sizes LIST    frame sizes, comma separated (default 64,1024)
  --quick         --seconds 1 --rounds 1
EOF
}

xf_secs=2
xf_rounds=3
xf_sizes=64,1024

xf_parse() {
	while [ $# -gt 0 ]; do
		case $1 in
		--seconds) xf_secs=${2:?}; shift ;;
		--rounds) xf_rounds=${2:?}; shift ;;
		--sizes) xf_sizes=${2:?}; shift ;;
		--quick) xf_secs=1; xf_rounds=1 ;;
		-h | --help) bench_usage; exit 0 ;;
		*) bench_usage_error "unknown option '$1'" ;;
		esac
		shift
	done
	[[ $xf_secs =~ ^[0-9]+$ && $xf_rounds =~ ^[0-9]+$ && $xf_sizes =~ ^[0-9,]+$ ]] ||
		bench_usage_error "numbers only"
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
# One run: contender, frame size -> "delivered offered" (Mpps)
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
	echo "skip skip"
}

xf_run() {
	local who=$1 size=$2 total=$((xf_secs + 2)) pid_sw="" pid_pass="" pid_sink pid_gen dst
	local S="$XF_NS-sw"
	dst=10.91.1.2:9000
	case $who in
	xdp)
		bench_spawn pid_sw "sw-$who-$size" 1 $((total + 10)) ip netns exec "$S" "$BENCH_INNET_BIN" switch \
			--target xdp --port 10.91.1.2=10.91.1.1@$XF_S0 --port 10.91.2.2=10.91.2.1@$XF_S1 \
			--program forward@9000 --args '{"map": [1, 0]}' --ctl ""
		bench_wait_ready "$pid_sw" "sw-$who-$size" ready 20 || bench_die "innet switch (xdp) did not start"
		;;
	userspace)
		bench_spawn pid_sw "sw-$who-$size" 1 $((total + 10)) ip netns exec "$S" chrt -f 50 "$BENCH_INNET_BIN" switch \
			--port 10.91.1.2=10.91.1.1 --port 10.91.2.2=10.91.2.1 \
			--program forward@9000 --args '{"map": [1, 0]}' --ctl ""
		bench_wait_ready "$pid_sw" "sw-$who-$size" ready 20 || bench_die "innet switch did not start"
		;;
	handwritten)
		bench_spawn pid_sw "sw-$who-$size" "" $((total + 10)) ip netns exec "$S" "$XT" fwd "$XF_S0" "$XF_S1" \
			--my 10.91.1.2:9000 --from 10.91.2.2 --to 10.91.2.1:9000 --to-mac 02:91:00:00:00:04 \
			--seconds $((total + 5))
		bench_wait_ready "$pid_sw" "sw-$who-$size" ready 20 || bench_die "xdptool fwd did not start"
		;;
	kernel)
		ip netns exec "$S" sysctl -qw net.ipv4.ip_forward=1
		dst=10.91.2.1:9000
		;;
	esac
	if [ "$who" = userspace ] || [ "$who" = kernel ]; then
		bench_spawn pid_pass "pass-$who-$size" "" $((total + 10)) ip netns exec "$S" "$XT" pass "$XF_S0" \
			--seconds $((total + 5))
		bench_wait_ready "$pid_pass" "pass-$who-$size" ready 20 || bench_die "xdptool pass did not start"
	fi
	xf_pin_napi "$S" "$XF_S0" 1 || { xf_abort_run "$who" "$size" "$pid_sw" "$pid_pass"; return 0; }
	bench_spawn pid_sink "sink-$who-$size" 0 $((total + 10)) ip netns exec "$XF_NS-sink" "$XT" sink "$XF_K" \
		--warmup 1 --seconds "$xf_secs"
	bench_wait_ready "$pid_sink" "sink-$who-$size" ready 20 || bench_die "xdptool sink did not start"
	xf_pin_napi "$XF_NS-sink" "$XF_K" 0 || { xf_abort_run "$who" "$size" "$pid_sw" "$pid_pass" "$pid_sink"; return 0; }
	bench_spawn pid_gen "gen-$who-$size" 0 $((total + 10)) ip netns exec "$XF_NS-gen" "$XT" gen "$XF_G" \
		--src-mac 02:91:00:00:00:01 --dst-mac 02:91:00:00:00:02 --src 10.91.1.1:40000 --dst "$dst" \
		--size "$size" --warmup 1 --seconds "$xf_secs"
	bench_wait "$pid_gen" || bench_die "the generator failed ($(tail -n 2 "$BENCH_TMP/gen-$who-$size.err"))"
	bench_wait "$pid_sink" || bench_die "the sink failed"
	[ -n "$pid_sw" ] && bench_stop "$pid_sw"
	[ -n "$pid_pass" ] && bench_stop "$pid_pass"
	[ "$who" = kernel ] && ip netns exec "$S" sysctl -qw net.ipv4.ip_forward=0
	local got off
	got=$(bench_kv mpps "$BENCH_TMP/sink-$who-$size.out")
	off=$(bench_kv offered_mpps "$BENCH_TMP/gen-$who-$size.out")
	echo "$got $off"
}

bench_main() {
	xf_parse "$@"
	[ "$(id -u)" -eq 0 ] || bench_die "needs root (network namespaces, XDP)"
	bench_build innet xdptool
	XT="$BENCH_BIN/xdptool"
	bench_param seconds "$xf_secs"
	bench_param rounds "$xf_rounds"
	bench_param sizes "$xf_sizes"
	xf_setup
	local size who r order got off
	local contenders=(xdp handwritten userspace kernel)
	IFS=, read -r -a sizes <<<"$xf_sizes"
	for size in "${sizes[@]}"; do
		declare -A vals=() offs=()
		for r in $(seq 1 "$xf_rounds"); do
			if [ $((r % 2)) -eq 1 ]; then order=("${contenders[@]}"); else
				order=(kernel userspace handwritten xdp); fi
			for who in "${order[@]}"; do
				read -r got off < <(xf_run "$who" "$size")
				if [ "$got" = skip ]; then
					XF_SKIPPED=$((XF_SKIPPED + 1))
					bench_log "$size B round $r: $who skipped (its setup failed; see above)"
					continue
				fi
				bench_log "$size B round $r: $who delivered $got Mpps (offered $off)"
				bench_record contender="$who" size="$size" round="$r" delivered_mpps="$got" offered_mpps="$off"
				vals[$who]="${vals[$who]:-} $got"
				offs[$who]="${offs[$who]:-} $off"
			done
		done
		local x h u k o
		x=$(bench_median ${vals[xdp]}); h=$(bench_median ${vals[handwritten]})
		u=$(bench_median ${vals[userspace]}); k=$(bench_median ${vals[kernel]})
		o=$(bench_median ${offs[xdp]} ${offs[handwritten]} ${offs[userspace]} ${offs[kernel]})
		bench_result "xdp_mpps_$size=$x" "handwritten_mpps_$size=$h" "userspace_mpps_$size=$u" \
			"kernel_mpps_$size=$k" "offered_mpps_$size=$o" \
			"ratio_handwritten_$size=$(awk -v a="$x" -v b="$h" 'BEGIN{printf "%.3f", (b>0?a/b:0)}')" \
			"ratio_userspace_$size=$(awk -v a="$x" -v b="$u" 'BEGIN{printf "%.3f", (b>0?a/b:0)}')" \
			"ratio_kernel_$size=$(awk -v a="$x" -v b="$k" 'BEGIN{printf "%.3f", (b>0?a/b:0)}')"
		if [ "$size" = "${sizes[0]}" ]; then
			XF_HEAD_H=$(awk -v a="$x" -v b="$h" 'BEGIN{printf "%.3f", (b>0?a/b:0)}')
			XF_HEAD_U=$(awk -v a="$x" -v b="$u" 'BEGIN{printf "%.3f", (b>0?a/b:0)}')
		fi
		unset vals offs
	done
	# the headline ratios: the smallest frames, where packet rate is all
	bench_result "ratio_handwritten=$XF_HEAD_H" "ratio_userspace=$XF_HEAD_U" \
		"skipped_runs=$XF_SKIPPED" "loadavg=$(cut -d' ' -f1 /proc/loadavg)"
}
