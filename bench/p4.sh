# shellcheck shell=bash
# bench: the project's P4 L3 router (thousands of LPM routes) on BMv2, innet user space and innet XDP, with innet's C forward program on XDP as the ceiling
# timeout: 1200
#
# bench/p4.sh — sourced by bench/run (helpers: bench/lib.sh).
#
# The line of bench/xdp-forwarding.sh — three network namespaces joined by
# veth pairs, the same generator and sink for every contender:
#
#   gen                     sw                           sink
#   g0 10.92.1.1 ══════ s0                 s1 ══════ k0 10.92.2.1
#   (xdptool gen: live      (the contender: the frames   (xdptool sink: counts
#    frames, XDP_TX)         go in on s0, out of s1)      and drops in XDP)
#
# Contenders (64 B and 1024 B frames, Ethernet included):
#
#   bmv2   BMv2's simple_switch (SIMPLE_SWITCH; the toolchain's fastest
#          build: -O3, logging macros and the event logger off, as its
#          docs/performance.md says) running p4/l3_router.json on s0 and s1
#          (libpcap: -i 0@s0 -i 1@s1), the routes through simple_switch_CLI
#   user   innet's user-space engine running p4/l3_router.json on raw ports
#          s0 and s1, the same routes
#   xdp    the same on innet's XDP target
#   c      innet's own C forward program on XDP (the UDP relay of
#          bench/run xdp-forwarding: frames to s0's 10.92.1.2:9000 leave s1
#          for the sink): the ceiling, what innet does per packet without P4
#
# The routes: the router's connected routes for both sides plus --routes
# random prefixes (/8 to /30, outside 10.92.0.0/16) pointing at either side
# through either neighbour: the frames' destination (10.92.2.1, a /24)
# meets an LPM table of a few thousand entries of many lengths. Every frame
# is routed (TTL − 1, the neighbour's MAC, the port's MAC, a fresh IPv4
# checksum); the sink counts what arrives.
#
# Cores as in xdp-forwarding: the generator and the sink's receive work on
# CPU 0; s0's receive work (NAPI, where an XDP contender runs) in a threaded
# NAPI kthread on CPU 1, and the user-space switches (BMv2's and innet's
# processes, every thread) on CPU 1, SCHED_FIFO 50 for the NAPI threads and
# 51 for the user-space switches (P4B_UPRIO, below). Each contender runs
# --rounds times per size in alternating order; medians are reported.
#
#   RESULT p4 bmv2_mpps_64=… innet_user_mpps_64=… innet_xdp_mpps_64=…
#          c_xdp_mpps_64=… (the same for 1024) xdp_vs_bmv2=… user_vs_bmv2=…
#          xdp_vs_c=… (the ratios at 64 B)

bench_usage() {
	cat <<'EOF'
usage: bench/run p4 [options]
  --seconds S     measurement window per run (default 2)
  --rounds R      runs per contender and size, alternated; medians (default 3)
  --sizes LIST    frame sizes, comma separated (default 64,1024)
  --routes N      random LPM routes besides the connected ones (default 4000)
  --contenders L  comma separated, of bmv2,user,xdp,c (default all)
  --rate MPPS     pace the generator (xdptool gen --rate; default 0: unpaced)
  --quick         --seconds 1 --rounds 1
Tools: simple_switch and simple_switch_CLI (SIMPLE_SWITCH, SIMPLE_SWITCH_CLI
or PATH; without them the bmv2 contender is left out and said so).
EOF
}

p4b_secs=2
p4b_rounds=3
p4b_sizes=64,1024
p4b_routes=4000
p4b_contenders=bmv2,user,xdp,c
p4b_rate=0

p4b_parse() {
	while [ $# -gt 0 ]; do
		case $1 in
		--seconds) p4b_secs=${2:?}; shift ;;
		--rounds) p4b_rounds=${2:?}; shift ;;
		--sizes) p4b_sizes=${2:?}; shift ;;
		--routes) p4b_routes=${2:?}; shift ;;
		--contenders) p4b_contenders=${2:?}; shift ;;
		--rate) p4b_rate=${2:?}; shift ;;
		--quick) p4b_secs=1; p4b_rounds=1 ;;
		-h | --help) bench_usage; exit 0 ;;
		*) bench_usage_error "unknown option '$1'" ;;
		esac
		shift
	done
	[[ $p4b_secs =~ ^[0-9]+$ && $p4b_rounds =~ ^[0-9]+$ && $p4b_sizes =~ ^[0-9,]+$ &&
		$p4b_routes =~ ^[0-9]+$ ]] || bench_usage_error "numbers only"
}

P4B_NS=""
P4B_GEN_MAC=02:92:00:00:00:01
P4B_S0_MAC=02:92:00:00:00:02
P4B_S1_MAC=02:92:00:00:00:03
P4B_SINK_MAC=02:92:00:00:00:04

p4b_cleanup() {
	local n
	for n in gen sw sink; do
		ip netns del "$P4B_NS-$n" 2>/dev/null || true
	done
}

p4b_setup() {
	P4B_NS="innet-p4b$$"
	trap 'p4b_cleanup' EXIT
	local G="$P4B_NS-gen" S="$P4B_NS-sw" K="$P4B_NS-sink"
	ip netns add "$G" && ip netns add "$S" && ip netns add "$K" || bench_die "cannot make namespaces"
	ip link add g0 netns "$G" address $P4B_GEN_MAC type veth peer name s0 netns "$S" address $P4B_S0_MAC
	ip link add s1 netns "$S" address $P4B_S1_MAC type veth peer name k0 netns "$K" address $P4B_SINK_MAC
	ip -n "$G" link set lo up; ip -n "$S" link set lo up; ip -n "$K" link set lo up
	ip -n "$G" link set g0 up; ip -n "$S" link set s0 up; ip -n "$S" link set s1 up; ip -n "$K" link set k0 up
	ip -n "$G" addr add 10.92.1.1/24 dev g0
	ip -n "$K" addr add 10.92.2.1/24 dev k0
	# the switch's namespace owns no address on s0/s1 for the P4 contenders
	# (raw ports); the C contender adds its own for the time it runs
	ip netns exec "$S" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
}

# The router's commands: ports' MACs, both neighbours, the connected
# routes, then $p4b_routes random prefixes.
p4b_commands() {
	local out=$1
	{
		echo "table_add port_mac set_smac 0 => $P4B_S0_MAC"
		echo "table_add port_mac set_smac 1 => $P4B_S1_MAC"
		echo "table_add neighbour set_dmac 10.92.1.1 => $P4B_GEN_MAC"
		echo "table_add neighbour set_dmac 10.92.2.1 => $P4B_SINK_MAC"
		echo "table_add ipv4_lpm set_nhop 10.92.1.0/24 => 0 0"
		echo "table_add ipv4_lpm set_nhop 10.92.2.0/24 => 0 1"
		awk -v n="$p4b_routes" 'BEGIN {
			srand(92); k = 0;
			while (k < n) {
				len = 8 + int(rand() * 23); a = 1 + int(rand() * 222);
				if (a == 10 || a == 127) continue;
				ip = a * 16777216 + int(rand() * 16777216);
				m = 2^32 - 2^(32 - len); ip = ip - (ip % 2^(32 - len));
				key = ip "/" len; if (key in seen) continue; seen[key] = 1; k++;
				printf "table_add ipv4_lpm set_nhop %d.%d.%d.%d/%d => %s %d\n",
					int(ip / 16777216) % 256, int(ip / 65536) % 256, int(ip / 256) % 256, ip % 256,
					len, (k % 2 ? "10.92.1.1" : "10.92.2.1"), k % 2 ? 0 : 1;
			}
		}'
	} >"$out"
}

p4b_pin_napi() {
	local ns=$1 dev=$2 cpu=$3 pid
	ip netns exec "$ns" sh -c "echo 1 > /sys/class/net/$dev/threaded" 2>/dev/null ||
		bench_die "cannot thread $dev's NAPI"
	pid=$(pgrep -n "^napi/$dev-") || bench_die "no NAPI thread for $dev"
	taskset -p -c "$cpu" "$pid" >/dev/null || bench_die "cannot pin $dev's NAPI thread"
	chrt -f -p 50 "$pid" || bench_die "cannot make $dev's NAPI thread real-time"
}

# Every thread of a process on CPU cpu, SCHED_FIFO P4B_UPRIO (BMv2 starts threads
# after it starts: this runs once it is ready).
p4b_pin_all() {
	local pid=$1 cpu=$2 t
	for t in /proc/"$pid"/task/*; do
		t=${t##*/}
		taskset -p -c "$cpu" "$t" >/dev/null 2>&1 || true
		chrt -f -p "$P4B_UPRIO" "$t" 2>/dev/null || true
	done
}

P4B_THRIFT=0
# The user-space contenders (BMv2's threads, innet's engine) run at
# SCHED_FIFO P4B_UPRIO (51), one above s0's NAPI thread (50) on the same
# CPU, as bench/run xdp-forwarding runs its user-space engine: at equal
# priority the NAPI thread, fed faster than they drain, never yields and
# starves them (BMv2: 3 kpps measured so; receive livelock made by the
# bench, docs/benchmarks.md).
P4B_UPRIO=${P4B_UPRIO:-51}
p4b_bmv2_load() { # pid: the routes into a running simple_switch
	local t0=$SECONDS
	ip netns exec "$P4B_NS-sw" "$P4B_CLI" --thrift-port "$P4B_THRIFT" <"$BENCH_TMP/router.commands" \
		>"$BENCH_TMP/bmv2-cli.out" 2>&1 || bench_die "simple_switch_CLI failed"
	local added
	added=$(grep -c "Entry has been added" "$BENCH_TMP/bmv2-cli.out" || true)
	[ "$added" -ge "$P4B_N_CMDS" ] || bench_die "BMv2 took $added of $P4B_N_CMDS entries (see $BENCH_TMP/bmv2-cli.out)"
	bench_log "BMv2: $added entries in $((SECONDS - t0)) s"
}

p4b_run() {
	local who=$1 size=$2 total=$((p4b_secs + 2)) pid_sw="" pid_pass="" pid_sink pid_gen dst
	local S="$P4B_NS-sw"
	dst=10.92.2.1:9000
	case $who in
	bmv2)
		P4B_THRIFT=$((20000 + RANDOM % 20000))
		bench_spawn pid_sw "sw-$who-$size" "" $((total + 120)) ip netns exec "$S" "$P4B_SS" \
			-i 0@s0 -i 1@s1 --thrift-port "$P4B_THRIFT" --device-id 92 "$ROOT_P4/l3_router.json"
		local i
		for i in $(seq 1 100); do
			ip netns exec "$S" bash -c "echo > /dev/tcp/127.0.0.1/$P4B_THRIFT" 2>/dev/null && break
			sleep 0.2
		done
		p4b_bmv2_load
		p4b_pin_all "$(bench_child_pid "$pid_sw")" 1
		;;
	user | xdp)
		local tgt=udp
		[ "$who" = xdp ] && tgt=xdp
		bench_spawn pid_sw "sw-$who-$size" 1 $((total + 60)) ip netns exec "$S" chrt -f "$P4B_UPRIO" \
			"$BENCH_INNET_BIN" switch --target "$tgt" --port iface:s0 --port iface:s1 --program p4@raw \
			--args "{\"json\": \"$ROOT_P4/l3_router.json\", \"commands\": \"$BENCH_TMP/router.commands\"}" --ctl ""
		bench_wait_ready "$pid_sw" "sw-$who-$size" ready 120 || bench_die "innet switch ($who) did not start"
		;;
	c)
		ip -n "$S" addr add 10.92.1.2/24 dev s0
		ip -n "$S" addr add 10.92.2.2/24 dev s1
		ip -n "$S" neigh replace 10.92.1.1 lladdr $P4B_GEN_MAC dev s0 nud permanent
		ip -n "$S" neigh replace 10.92.2.1 lladdr $P4B_SINK_MAC dev s1 nud permanent
		dst=10.92.1.2:9000
		bench_spawn pid_sw "sw-$who-$size" 1 $((total + 10)) ip netns exec "$S" "$BENCH_INNET_BIN" switch \
			--target xdp --port 10.92.1.2=10.92.1.1@s0 --port 10.92.2.2=10.92.2.1@s1 \
			--program forward@9000 --args '{"map": [1, 0]}' --ctl ""
		bench_wait_ready "$pid_sw" "sw-$who-$size" ready 20 || bench_die "innet switch (c) did not start"
		;;
	esac
	if [ "$who" = bmv2 ] || [ "$who" = user ]; then
		bench_spawn pid_pass "pass-$who-$size" "" $((total + 10)) ip netns exec "$S" "$XT" pass s0 \
			--seconds $((total + 5))
		bench_wait_ready "$pid_pass" "pass-$who-$size" ready 20 || bench_die "xdptool pass did not start"
	fi
	p4b_pin_napi "$S" s0 1
	bench_spawn pid_sink "sink-$who-$size" 0 $((total + 10)) ip netns exec "$P4B_NS-sink" "$XT" sink k0 \
		--warmup 1 --seconds "$p4b_secs"
	bench_wait_ready "$pid_sink" "sink-$who-$size" ready 20 || bench_die "xdptool sink did not start"
	p4b_pin_napi "$P4B_NS-sink" k0 0
	bench_spawn pid_gen "gen-$who-$size" 0 $((total + 10)) ip netns exec "$P4B_NS-gen" "$XT" gen g0 \
		--src-mac $P4B_GEN_MAC --dst-mac $P4B_S0_MAC --src 10.92.1.1:40000 --dst "$dst" \
		--size "$size" --warmup 1 --seconds "$p4b_secs" --rate "$p4b_rate"
	bench_wait "$pid_gen" || bench_die "the generator failed ($(tail -n 2 "$BENCH_TMP/gen-$who-$size.err"))"
	bench_wait "$pid_sink" || bench_die "the sink failed"
	[ -z "$pid_sw" ] || bench_stop "$pid_sw" || true   # (its status: the TERM it was stopped with)
	[ -z "$pid_pass" ] || bench_stop "$pid_pass" || true
	if [ "$who" = c ]; then
		ip -n "$S" addr flush dev s0
		ip -n "$S" addr flush dev s1
	fi
	local got off
	got=$(bench_kv mpps "$BENCH_TMP/sink-$who-$size.out")
	off=$(bench_kv offered_mpps "$BENCH_TMP/gen-$who-$size.out")
	echo "$got $off"
}

p4b_ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", (b>0?a/b:0)}'; }

bench_main() {
	p4b_parse "$@"
	[ "$(id -u)" -eq 0 ] || bench_die "needs root (network namespaces, XDP)"
	ROOT_P4="$BENCH_ROOT/p4"
	[ -f "$ROOT_P4/l3_router.json" ] || bench_die "no p4/l3_router.json"
	P4B_SS=${SIMPLE_SWITCH:-$(command -v simple_switch || true)}
	P4B_CLI=${SIMPLE_SWITCH_CLI:-$(command -v simple_switch_CLI || true)}
	IFS=, read -r -a contenders <<<"$p4b_contenders"
	if [[ ,$p4b_contenders, == *,bmv2,* ]] && { [ -z "$P4B_SS" ] || [ -z "$P4B_CLI" ]; }; then
		bench_log "BMv2 not found (SIMPLE_SWITCH, SIMPLE_SWITCH_CLI): the bmv2 contender is left out"
		contenders=("${contenders[@]/bmv2/}")
	fi
	bench_build innet xdptool
	XT="$BENCH_BIN/xdptool"
	bench_param seconds "$p4b_secs"
	bench_param rounds "$p4b_rounds"
	bench_param sizes "$p4b_sizes"
	bench_param routes "$p4b_routes"
	bench_param rate "$p4b_rate"
	[ -n "$P4B_SS" ] && bench_param bmv2 "$("$P4B_SS" --version 2>/dev/null | head -n 1)"
	p4b_setup
	p4b_commands "$BENCH_TMP/router.commands"
	P4B_N_CMDS=$(wc -l <"$BENCH_TMP/router.commands")
	bench_log "router: $P4B_N_CMDS commands ($p4b_routes random routes)"
	local size who r got off order
	IFS=, read -r -a sizes <<<"$p4b_sizes"
	local -a live=()
	for who in "${contenders[@]}"; do [ -n "$who" ] && live+=("$who"); done
	for size in "${sizes[@]}"; do
		declare -A vals=() offs=()
		for r in $(seq 1 "$p4b_rounds"); do
			order=("${live[@]}")
			if [ $((r % 2)) -eq 0 ]; then
				local -a rev=()
				for ((i = ${#live[@]} - 1; i >= 0; i--)); do rev+=("${live[$i]}"); done
				order=("${rev[@]}")
			fi
			for who in "${order[@]}"; do
				read -r got off < <(p4b_run "$who" "$size")
				bench_log "$size B round $r: $who delivered $got Mpps (offered $off)"
				bench_record contender="$who" size="$size" round="$r" delivered_mpps="$got" offered_mpps="$off"
				vals[$who]="${vals[$who]:-} $got"
				offs[$who]="${offs[$who]:-} $off"
			done
		done
		local b u x c
		b=$(bench_median ${vals[bmv2]:-0}); u=$(bench_median ${vals[user]:-0})
		x=$(bench_median ${vals[xdp]:-0}); c=$(bench_median ${vals[c]:-0})
		bench_result "bmv2_mpps_$size=$b" "innet_user_mpps_$size=$u" "innet_xdp_mpps_$size=$x" \
			"c_xdp_mpps_$size=$c" "offered_mpps_$size=$(bench_median ${offs[xdp]:-0} ${offs[user]:-0})"
		if [ "$size" = "${sizes[0]}" ]; then
			P4B_HEAD="xdp_vs_bmv2=$(p4b_ratio "$x" "$b") user_vs_bmv2=$(p4b_ratio "$u" "$b") xdp_vs_c=$(p4b_ratio "$x" "$c")"
		fi
		unset vals offs
	done
	# shellcheck disable=SC2086
	bench_result $P4B_HEAD "loadavg=$(cut -d' ' -f1 /proc/loadavg)"
}
