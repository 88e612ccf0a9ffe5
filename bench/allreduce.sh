# shellcheck shell=bash
# bench: all-reduce of float32: innet (sum in the switch) vs OpenMPI MPI_Allreduce (ring, default), 4 workers
# timeout: 1500
#
# bench/allreduce.sh — sourced by bench/run (helpers: bench/lib.sh).
#
# netns mode (root; the measurement the issue asks for):
#
#   ns w0 10.77.0.2 ─veth, tbf 500 Mbit/s each way─ 10.77.0.1 ┐   (namespaces iag-arPID-*)
#   ns w1 10.77.1.2 ─────────────── " ───────────── 10.77.1.1 ├ ns sw: ip_forward (MPI's TCP
#   ns w2 10.77.2.2 ─────────────── " ───────────── 10.77.2.1 │  between workers), innet switch
#   ns w3 10.77.3.2 ─────────────── " ───────────── 10.77.3.1 ┘  on 10.77.100.1 (agg program)
#
# Both sides run the same plain MPI program (examples/agg_mpi_allreduce.c
# --bench N ITERS: MPI_Barrier, then MPI_Allreduce of N floats, the time is
# the slowest rank's; median over the iterations), started by mpirun inside
# ns sw with an rsh agent that starts each rank in its own namespace
# (docs: /work/shared/notes/mpi-across-namespaces.md):
#   innet       LD_PRELOAD=build/libinnet-mpi.so: the all-reduce goes to the switch
#   mpi_ring    OpenMPI over TCP, ring algorithm forced (MPI's best here)
#   mpi_default OpenMPI over TCP, its default choice (Rabenseifner for this size)
# in alternation (innet, ring, default, default, ring, innet, ...).
# Ring moves 2(n-1)/n of the array over each link each way, innet once:
# bound 1.5x for 4 workers. Target: ratio = innet / mpi_ring >= 1.35.
# Every veth has the same MTU (--mtu, default 9000: jumbo frames) for all
# three: MPI's TCP uses the same links, the same MTU and the same tbf.
#
# loopback mode (any user; no target): the same three on 127.0.0.0/8, every
# rank and the switch sharing the machine's CPUs, MPI over TCP on lo.
#
# xdp mode (root; the switch on the XDP target, docs/aggregation.md "On the
# XDP target"): the same namespaces, the switch's agg program as eBPF on
# v0..v3 (`innet switch --target xdp --port 10.77.W.1=10.77.W.2@vW`; each
# rank sends to its own port's address: INNET_AGG_SWITCH is a list). A veth
# with an XDP program takes at most one page per frame, so every veth gets
# MTU 3500 (--xdp-mtu) and k fills it (858); the workers' eth0 get an XDP_PASS
# program (a veth takes XDP_TX'd frames only with one) and static neighbours.
#   shaped    the 500 Mbit/s links: XDP_TX'd and redirected frames skip vW's
#             tbf, so the switch -> worker direction is shaped where it arrives
#             (an ifb on eth0's ingress, the same tbf). xdp_link_fraction =
#             link bound / time (bound: every contribution frame, priming
#             included, once over a 500 Mbit/s link; the results come back at
#             the same rate in parallel). Target >= 0.95.
#   unshaped  the tbfs removed: the switch, not the link, is the limit.
#             innet on XDP against OpenMPI ring and default at each MTU of
#             --mpi-mtus (default 9000 and 3500: MPI at its best), and innet
#             on the user-space engine at MTU 9000 for reference.
#             xdp_veth_ratio = MPI's best time / innet on XDP. Target >= 2.
#
# Each mode runs --rounds rounds (default 3) of the three, in alternating
# order; the figures are the medians over the rounds, and the spread is
# reported beside them: each implementation's fastest and slowest round, and
# the lowest and highest of the per-round ratios (innet and MPI of the same
# round). On loopback one round's ratio has ranged from 0.4 to 1.1: the
# five processes share two CPUs with whatever else runs, so a single round
# says little.

bench_usage() {
	cat <<'EOF'
usage: bench/run allreduce [options]
  --mib M          array size per worker in MiB of float32 (default 64)
  --iters N        all-reduces per run, median reported (default 3)
  --rounds R       runs per implementation, alternated; medians and the
                   spread (min, max) over them are reported (default 3)
  --rate R         tc rate per link and direction (default 500mbit)
  --slots S        innet window (job slots) per worker (default 64: 64 x 8968 B in
                   flight fit the tbf's 1 MB queue)
  --k K            innet elements per packet (default: fill the MTU: 2232 for 9000,
                   358 for 1500; at most 2294)
  --mtu M          MTU of every veth (netns mode; default 9000), for innet and MPI alike
  --threads T      switch worker threads (default 1: measured faster on 2 CPUs)
  --rto-us U       innet first retransmission timeout floor (default 20000: on
                   a shared 2-CPU machine a descheduled worker, not loss, makes
                   the others' packets wait; shorter floors only add duplicates)
  --mode M         netns | xdp | loopback | both (netns and loopback) | all
                   (default: all as root, else loopback)
  --xdp-mtu M      MTU of every veth in the xdp runs (default 3500: one XDP buffer)
  --xdp-k K        innet elements per packet on XDP (default: fill --xdp-mtu)
  --xdp-slots S    innet window at --xdp-mtu (default 128: 128 x 3514 B in flight
                   fit the tbf's 1 MB queue and leave a descheduled worker room
                   on the shaped links — 64 gave xdp_link_fraction 0.86, 128 0.95;
                   165, the bytes in flight of 64 x 8968 B, overflowed the veths'
                   256-frame rings: 20x the retransmissions)
  --mpi-mtus L     MTUs MPI runs at in the unshaped xdp comparison, the best one
                   counts (default 9000,3500)
  --perf           xdp mode: perf record -a (cpu-clock) of one unshaped innet-on-XDP
                   run; the breakdown goes to the log (where the time goes)
  --quick          --mib 4 --iters 2 (a smoke test, not a measurement)
EOF
}

ar_mib=64
ar_iters=3
ar_rounds=3
ar_rate=500mbit
ar_slots=64
ar_k=""
ar_mtu=9000
ar_threads=1
ar_rto=20000
ar_mode=""
ar_xdp_mtu=3500
ar_xdp_k=""
ar_xdp_slots=""
ar_mpi_mtus="9000,3500"
ar_perf=0
AR_NS=()
AR_PREFIX="iag-ar$$"

ar_parse() {
	while [ $# -gt 0 ]; do
		case $1 in
		--mib) ar_mib=${2:?}; shift ;;
		--iters) ar_iters=${2:?}; shift ;;
		--rounds) ar_rounds=${2:?}; shift ;;
		--rate) ar_rate=${2:?}; shift ;;
		--slots) ar_slots=${2:?}; shift ;;
		--k) ar_k=${2:?}; shift ;;
		--mtu) ar_mtu=${2:?}; shift ;;
		--threads) ar_threads=${2:?}; shift ;;
		--rto-us) ar_rto=${2:?}; shift ;;
		--mode) ar_mode=${2:?}; shift ;;
		--xdp-mtu) ar_xdp_mtu=${2:?}; shift ;;
		--xdp-k) ar_xdp_k=${2:?}; shift ;;
		--xdp-slots) ar_xdp_slots=${2:?}; shift ;;
		--mpi-mtus) ar_mpi_mtus=${2:?}; shift ;;
		--perf) ar_perf=1 ;;
		--quick) ar_mib=4; ar_iters=2 ;;
		-h | --help) bench_usage; exit 0 ;;
		*) bench_usage_error "unknown option '$1'" ;;
		esac
		shift
	done
	if ! [[ $ar_mib =~ ^[1-9][0-9]*$ ]] || [ "$ar_mib" -gt 512 ]; then bench_usage_error "--mib: 1..512"; fi
	[[ $ar_iters =~ ^[1-9][0-9]?$ ]] || bench_usage_error "--iters: 1..99"
	[[ $ar_rounds =~ ^[1-9]$ ]] || bench_usage_error "--rounds: 1..9"
	[[ $ar_slots =~ ^[1-9][0-9]*$ ]] || bench_usage_error "--slots: a number"
	if ! [[ $ar_mtu =~ ^[1-9][0-9]*$ ]] || [ "$ar_mtu" -lt 1280 ] || [ "$ar_mtu" -gt 9000 ]; then
		bench_usage_error "--mtu: 1280..9000"
	fi
	# default k: the largest whose datagram (40 B header + 4k, + 28 B IP/UDP) fits the MTU
	[ -n "$ar_k" ] || ar_k=$(((ar_mtu - 28 - 40) / 4))
	if ! [[ $ar_k =~ ^[1-9][0-9]*$ ]] || [ "$ar_k" -gt 2294 ]; then bench_usage_error "--k: 1..2294"; fi
	[[ $ar_rate =~ ^[0-9]+[kmg]?bit$ ]] || bench_usage_error "--rate: like 500mbit"
	if [ -z "$ar_mode" ]; then
		if [ "$(id -u)" -eq 0 ]; then ar_mode=all; else ar_mode=loopback; fi
	fi
	case $ar_mode in
	netns | xdp | both | all) [ "$(id -u)" -eq 0 ] || bench_usage_error "--mode $ar_mode needs root" ;;
	loopback) ;;
	*) bench_usage_error "--mode: netns, xdp, loopback, both or all" ;;
	esac
	if ! [[ $ar_xdp_mtu =~ ^[1-9][0-9]*$ ]] || [ "$ar_xdp_mtu" -lt 1280 ] || [ "$ar_xdp_mtu" -gt 3500 ]; then
		bench_usage_error "--xdp-mtu: 1280..3500 (one XDP buffer)"
	fi
	[ -n "$ar_xdp_k" ] || ar_xdp_k=$(((ar_xdp_mtu - 28 - 40) / 4))
	if ! [[ $ar_xdp_k =~ ^[1-9][0-9]*$ ]] || [ "$ar_xdp_k" -gt 2294 ]; then bench_usage_error "--xdp-k: 1..2294"; fi
	[ -n "$ar_xdp_slots" ] || ar_xdp_slots=128
	[[ $ar_xdp_slots =~ ^[1-9][0-9]*$ ]] || bench_usage_error "--xdp-slots: a number"
	[[ $ar_mpi_mtus =~ ^[0-9]+(,[0-9]+)*$ ]] || bench_usage_error "--mpi-mtus: a comma list of MTUs"
}

# Namespaces are ours only (prefix with our pid); removed on exit.
ar_cleanup_ns() {
	local ns
	bench_bpf_stats_off
	for ns in "${AR_NS[@]}"; do
		ip netns del "$ns" 2>/dev/null || true
	done
	AR_NS=()
}

ar_setup_netns() {
	local sw="$AR_PREFIX-sw" w ns
	ip netns add "$sw"
	AR_NS+=("$sw")
	ip -n "$sw" link set lo up
	ip -n "$sw" addr add 10.77.100.1/32 dev lo
	ip netns exec "$sw" sysctl -qw net.ipv4.ip_forward=1
	for w in 0 1 2 3; do
		ns="$AR_PREFIX-w$w"
		ip netns add "$ns"
		AR_NS+=("$ns")
		ip link add eth0 netns "$ns" type veth peer name "v$w" netns "$sw"
		ip -n "$ns" link set lo up
		ip -n "$ns" addr add "10.77.$w.2/24" dev eth0
		ip -n "$ns" link set eth0 mtu "$ar_mtu" up
		ip -n "$ns" route add default via "10.77.$w.1"
		ip -n "$sw" addr add "10.77.$w.1/24" dev "v$w"
		ip -n "$sw" link set "v$w" mtu "$ar_mtu" up
		# one tbf per direction: worker -> switch on eth0, switch -> worker on vW
		ip netns exec "$ns" tc qdisc replace dev eth0 root tbf rate "$ar_rate" burst 256kb limit 1mb
		ip netns exec "$sw" tc qdisc replace dev "v$w" root tbf rate "$ar_rate" burst 256kb limit 1mb
	done
	# the rsh agent: "host" = a namespace, where it starts orted
	cat >"$BENCH_TMP/nsrsh.sh" <<'EOF'
#!/bin/sh
H=$1; shift
exec ip netns exec "$H" unshare --uts /bin/sh -c "hostname $H; $*"
EOF
	chmod +x "$BENCH_TMP/nsrsh.sh"
	# w0 reaches w3 through sw: a TCP connect to a closed port is refused at once
	local err
	err=$(ip netns exec "$AR_PREFIX-w0" timeout 3 bash -c 'exec 3<>/dev/tcp/10.77.3.2/9' 2>&1 || true)
	[[ $err == *refused* ]] || bench_die "w0 cannot reach w3 through sw: $err"
}

# ar_switch VAR NETNS_PREFIX_CMD PORT_IP MEMBER_IPS...: start the innet switch.
ar_switch() {
	local var=$1 pfx=$2 ip=$3 members="" w=0 m
	shift 3
	for m in "$@"; do
		members+="${members:+,}\"$m:$((30000 + w))\""
		w=$((w + 1))
	done
	local args="{\"k\": $AR_RUN_K, \"slots\": $((AR_RUN_SLOTS > 1024 ? AR_RUN_SLOTS : 1024)), \"jobs\": [{\"id\": 1, \"workers\": 4, \"slots\": $AR_RUN_SLOTS, \"members\": [$members]}]}"
	# shellcheck disable=SC2086 # pfx is a command prefix (or empty)
	bench_spawn "$var" "switch-$ar_tag" "" 600 $pfx "$BENCH_INNET_BIN" switch --name "ar$$" --ctl "" \
		--port "$ip" --program "agg@47800" --workers "$ar_threads" --args "$args"
	bench_wait_ready "${!var}" "switch-$ar_tag" ready 10
}

# ar_switch_xdp VAR: the innet switch on the XDP target in ns sw, port W on vW
# (10.77.W.1, peer 10.77.W.2 = rank W), the run's k and slots; control socket
# $BENCH_TMP/ctl.sock (for its counters).
ar_switch_xdp() {
	local var=$1 members="" ports=() w
	for w in 0 1 2 3; do
		members+="${members:+,}\"$w@10.77.$w.2:$((30000 + w))\""
		ports+=(--port "10.77.$w.1=10.77.$w.2@v$w")
	done
	local args="{\"k\": $AR_RUN_K, \"slots\": $((AR_RUN_SLOTS > 1024 ? AR_RUN_SLOTS : 1024)), \"jobs\": [{\"id\": 1, \"workers\": 4, \"slots\": $AR_RUN_SLOTS, \"members\": [$members]}]}"
	rm -f "$BENCH_TMP/ctl.sock"
	bench_spawn "$var" "switch-$ar_tag" "" 600 ip netns exec "$AR_PREFIX-sw" "$BENCH_INNET_BIN" switch \
		--name "ar$$" --ctl "$BENCH_TMP/ctl.sock" --target xdp "${ports[@]}" --program "agg@47800" \
		--workers "$ar_threads" --args "$args"
	bench_wait_ready "${!var}" "switch-$ar_tag" ready 20
}

# ---- the xdp mode's links ----

# ar_set_mtu M: every veth end.
ar_set_mtu() {
	local w
	for w in 0 1 2 3; do
		ip -n "$AR_PREFIX-w$w" link set eth0 mtu "$1"
		ip -n "$AR_PREFIX-sw" link set "v$w" mtu "$1"
	done
}

# ar_xdp_links on|off: the workers' side of an XDP switch — an XDP_PASS program
# on eth0 (a veth takes XDP_TX'd frames only with one; it also caps the peer's
# MTU, so it is there only for the innet-on-XDP runs) and static neighbours
# both ways (XDP does no ARP).
ar_xdp_links() {
	local w mac_w mac_s
	for w in 0 1 2 3; do
		if [ "$1" = on ]; then
			mac_w=$(ip netns exec "$AR_PREFIX-w$w" cat /sys/class/net/eth0/address)
			mac_s=$(ip netns exec "$AR_PREFIX-sw" cat "/sys/class/net/v$w/address")
			ip -n "$AR_PREFIX-sw" neigh replace "10.77.$w.2" lladdr "$mac_w" dev "v$w" nud permanent
			ip -n "$AR_PREFIX-w$w" neigh replace "10.77.$w.1" lladdr "$mac_s" dev eth0 nud permanent
			ip -n "$AR_PREFIX-w$w" link set dev eth0 xdpdrv obj "$BENCH_TMP/pass.o" sec xdp
		else
			ip -n "$AR_PREFIX-w$w" link set dev eth0 xdpdrv off
		fi
	done
}

# ar_ingress_shape on|off: the switch -> worker direction shaped at the
# worker (an ifb on eth0's ingress with the same tbf as the links): frames
# an XDP program transmits or redirects into vW skip vW's own qdisc.
ar_ingress_shape() {
	local w ns
	for w in 0 1 2 3; do
		ns=$AR_PREFIX-w$w
		if [ "$1" = on ]; then
			ip -n "$ns" link add ifb-in type ifb
			ip -n "$ns" link set ifb-in up
			ip netns exec "$ns" tc qdisc replace dev ifb-in root tbf rate "$ar_rate" burst 256kb limit 1mb
			ip netns exec "$ns" tc qdisc add dev eth0 handle ffff: ingress
			ip netns exec "$ns" tc filter add dev eth0 parent ffff: protocol all u32 match u32 0 0 \
				action mirred egress redirect dev ifb-in
		else
			ip netns exec "$ns" tc qdisc del dev eth0 ingress 2>/dev/null || true
			ip -n "$ns" link del ifb-in 2>/dev/null || true
		fi
	done
}

# ar_unshape: the links' tbfs off (both ends).
ar_unshape() {
	local w
	for w in 0 1 2 3; do
		ip netns exec "$AR_PREFIX-w$w" tc qdisc del dev eth0 root 2>/dev/null || true
		ip netns exec "$AR_PREFIX-sw" tc qdisc del dev "v$w" root 2>/dev/null || true
	done
}

# ar_xdp_prog_stats: "run_cnt run_time_ns" of the switch's XDP program on v0
# ("" without bpftool; the kernel counts only with kernel.bpf_stats_enabled).
ar_xdp_prog_stats() {
	command -v bpftool >/dev/null || return 0
	local id
	id=$(ip -n "$AR_PREFIX-sw" link show v0 | sed -n 's/.*prog\/xdp id \([0-9]*\).*/\1/p')
	[ -n "$id" ] || return 0
	local st
	st=$(bpftool prog show id "$id" | sed -n 's/.*run_time_ns \([0-9]*\) run_cnt \([0-9]*\).*/\2 \1/p')
	echo "${st:-0 0}"   # (no figures before the first run)
}

# ar_run IMPL MODE [MTU]: one mpirun of the bench program; median seconds in
# AR_LAST. IMPL innet_xdp: the switch on the XDP target (netns only). MTU (xdp
# mode): set on every veth first, and recorded.
ar_run() {
	local impl=$1 mode=$2 mtu=${3:-} ar_pid count=$((ar_mib * 262144)) tag sw_pid="" line med
	local bpf0="" bpf1="" extra=()
	ar_tag="$mode-$impl${mtu:+-$mtu}-$ar_seq"
	ar_seq=$((ar_seq + 1))
	tag="mpi-$ar_tag"
	local mpi=(mpirun --allow-run-as-root --oversubscribe -np 4 --mca pml ob1 --mca btl "tcp,self")
	local pfx=""
	# innet's k and window for the run: --k/--slots at --mtu (and loopback),
	# --xdp-k/--xdp-slots at --xdp-mtu, else k fills the MTU, --slots
	AR_RUN_K=$ar_k
	AR_RUN_SLOTS=$ar_slots
	if [ -n "$mtu" ]; then
		ar_set_mtu "$mtu"
		if [ "$mtu" = "$ar_xdp_mtu" ]; then
			AR_RUN_K=$ar_xdp_k
			AR_RUN_SLOTS=$ar_xdp_slots
		elif [ "$mtu" != "$ar_mtu" ]; then
			AR_RUN_K=$(((mtu - 28 - 40) / 4))
		fi
		extra+=(mtu="$mtu")
	fi
	[[ $impl == innet* ]] && extra+=(k="$AR_RUN_K" slots="$AR_RUN_SLOTS")
	if [ "$mode" != loopback ]; then
		pfx="ip netns exec $AR_PREFIX-sw"
		mpi+=(--host "$AR_PREFIX-w0,$AR_PREFIX-w1,$AR_PREFIX-w2,$AR_PREFIX-w3"
			--mca plm_rsh_agent "$BENCH_TMP/nsrsh.sh" --mca plm_rsh_no_tree_spawn 1
			--mca oob_tcp_if_include 10.77.0.0/16 --mca btl_tcp_if_include 10.77.0.0/16)
	else
		mpi+=(--mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
	fi
	case $impl in
	innet_xdp)
		ar_xdp_links on
		ar_switch_xdp sw_pid
		bpf0=$(ar_xdp_prog_stats)
		mpi+=(-x "INNET_AGG_SWITCH=10.77.0.1,10.77.1.1,10.77.2.1,10.77.3.1"
			-x LD_PRELOAD="$BENCH_ROOT/build/libinnet-mpi.so" -x INNET_AGG_SLOTS="$AR_RUN_SLOTS"
			-x INNET_AGG_K="$AR_RUN_K" -x INNET_AGG_VERBOSE=1 -x INNET_AGG_TIMEOUT_MS=10000 -x INNET_AGG_RTO_US="$ar_rto")
		;;
	innet)
		if [ "$mode" != loopback ]; then
			ar_switch sw_pid "$pfx" 10.77.100.1 10.77.0.2 10.77.1.2 10.77.2.2 10.77.3.2
			mpi+=(-x INNET_AGG_SWITCH=10.77.100.1)
		else
			ar_switch sw_pid "" 127.64.77.1 127.64.77.10 127.64.77.10 127.64.77.10 127.64.77.10
			mpi+=(-x INNET_AGG_SWITCH=127.64.77.1 -x INNET_AGG_BIND=127.64.77.10:30000)
		fi
		mpi+=(-x LD_PRELOAD="$BENCH_ROOT/build/libinnet-mpi.so" -x INNET_AGG_SLOTS="$AR_RUN_SLOTS"
			-x INNET_AGG_K="$AR_RUN_K" -x INNET_AGG_VERBOSE=1 -x INNET_AGG_TIMEOUT_MS=10000 -x INNET_AGG_RTO_US="$ar_rto")
		;;
	mpi_ring) mpi+=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4) ;;
	mpi_default) ;;
	esac
	local perf_pid=""
	if [ "$impl" = innet_xdp ] && [ "$mode" = veth ] && [ "$ar_perf" = 1 ] && [ -z "${AR_PERF_DONE:-}" ]; then
		AR_PERF_DONE=1
		bench_perf_record perf_pid 8
	fi
	# shellcheck disable=SC2086
	bench_spawn ar_pid "$tag" "" 300 $pfx "${mpi[@]}" "$BENCH_TMP/arprog" --bench "$count" "$ar_iters"
	if ! bench_wait "$ar_pid"; then
		tail -n 20 "$BENCH_TMP/$tag.err" >&2
		bench_die "$impl ($mode) failed"
	fi
	if [ "$impl" = innet_xdp ]; then
		bpf1=$(ar_xdp_prog_stats)
		if [ -n "$bpf0" ] && [ -n "$bpf1" ]; then
			local runs ns
			read -r runs ns < <(awk -v a="$bpf0" -v b="$bpf1" 'BEGIN { split(a, x, " "); split(b, y, " ");
				print y[1] - x[1], y[2] - x[2] }')
			if [ "$runs" -gt 0 ] && [ "$ns" -gt 0 ] && [ "$(sysctl -n kernel.bpf_stats_enabled)" = 1 ]; then
				AR_BPF_NS_PER_PKT=$(bench_calc %.0f "$ns / $runs")
				AR_BPF_MS_PER_CALL=$(bench_calc %.1f "$ns / 1e6 / $ar_iters")
				extra+=(bpf_runs="$runs" bpf_ns_per_run="$AR_BPF_NS_PER_PKT")
			fi
		fi
		# what the eBPF program took, what went to user space
		"$BENCH_INNET_BIN" ctl -s "$BENCH_TMP/ctl.sock" --json stats >"$BENCH_TMP/$tag.stats" 2>/dev/null || true
		local xs
		xs=$(/usr/bin/python3 -c 'import json,sys
d = json.load(open(sys.argv[1])); p = d["programs"][0]
print(p["rx_pkts"], p["xdp_rx_pkts"], sum(p["handoffs"].values()))' "$BENCH_TMP/$tag.stats" 2>/dev/null || true)
		[ -n "$xs" ] && extra+=(switch_rx="${xs%% *}" xdp_rx="$(cut -d' ' -f2 <<<"$xs")" handoffs="${xs##* }")
		AR_XDP_SHARE=$(awk -v s="$xs" 'BEGIN { split(s, x, " "); if (x[1] > 0) printf "%.3f", x[2] / x[1]; else print "na" }')
	fi
	if [ -n "$perf_pid" ]; then
		bench_perf_report "$perf_pid" "$BENCH_TMP/perf-veth-xdp.txt" comm,dso 25 \
			"8 s of the unshaped innet-on-XDP run"
	fi
	[ -n "$sw_pid" ] && bench_stop "$sw_pid"
	[ "$impl" = innet_xdp ] && ar_xdp_links off
	line=$(grep '^RESULT impl=' "$BENCH_TMP/$tag.out" | tail -n 1)
	[ -n "$line" ] || bench_die "$impl ($mode): no RESULT line"
	med=$(tr ' ' '\n' <<<"$line" | sed -n 's/^median_s=//p')
	local retr
	retr=$(sed -n 's/.*retransmits=\([0-9]*\).*/\1/p' "$BENCH_TMP/$tag.err" | awk '{ s += $1 } END { print s + 0 }')
	bench_record mode="$mode" impl="$impl" count="$count" iters="$ar_iters" median_s="$med" \
		min_s="$(tr ' ' '\n' <<<"$line" | sed -n 's/^min_s=//p')" retransmits="$retr" \
		loadavg="$(cut -d' ' -f1 /proc/loadavg)" "${extra[@]}"
	bench_log "$mode $impl${mtu:+ (MTU $mtu)}: median $med s per all-reduce of $ar_mib MiB ($(bench_calc %.3f "$count * 32 / $med / 1e9") Gbit/s)$([[ $impl == innet* ]] && echo ", innet retransmits $retr")$([ "$impl" = innet_xdp ] && echo ", eBPF ${AR_BPF_NS_PER_PKT:-?} ns per packet, ${AR_BPF_MS_PER_CALL:-?} ms per all-reduce (all CPUs), share in eBPF ${AR_XDP_SHARE:-?}")"
	AR_LAST=$med
}

# ar_spread V...: "min max" of numbers.
ar_spread() {
	printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo, hi }'
}

# ar_mode_run MODE: the three implementations, alternated; RESULT figures
# (medians over the rounds, and their spread).
ar_mode_run() {
	local mode=$1 r impl order=(innet mpi_ring mpi_default) t_innet=() t_ring=() t_def=() t
	local q_ring=() q_def=() ri rr rd
	for ((r = 0; r < ar_rounds; r++)); do
		local seq=("${order[@]}")
		if [ $((r % 2)) -eq 1 ]; then seq=(mpi_default mpi_ring innet); fi
		for impl in "${seq[@]}"; do
			ar_run "$impl" "$mode"
			t=$AR_LAST
			case $impl in
			innet) t_innet+=("$t") ri=$t ;;
			mpi_ring) t_ring+=("$t") rr=$t ;;
			mpi_default) t_def+=("$t") rd=$t ;;
			esac
		done
		# this round's ratios (the three ran back to back)
		q_ring+=("$(bench_calc %.3f "$rr / $ri")")
		q_def+=("$(bench_calc %.3f "$rd / $ri")")
		bench_log "$mode round $((r + 1)) of $ar_rounds: ratio $(bench_calc %.3f "$rr / $ri"), vs default $(bench_calc %.3f "$rd / $ri")"
	done
	local count=$((ar_mib * 262144)) ti tr td p="" lo hi
	ti=$(bench_median "${t_innet[@]}")
	tr=$(bench_median "${t_ring[@]}")
	td=$(bench_median "${t_def[@]}")
	[ "$mode" = loopback ] && p="lo_"
	bench_result "${p}innet_s=$ti" "${p}mpi_ring_s=$tr" "${p}mpi_default_s=$td" \
		"${p}innet_elem_per_s=$(bench_calc %.0f "$count / $ti")" \
		"${p}mpi_ring_elem_per_s=$(bench_calc %.0f "$count / $tr")" \
		"${p}mpi_default_elem_per_s=$(bench_calc %.0f "$count / $td")" \
		"${p}innet_gbit_s=$(bench_calc %.3f "$count * 32 / $ti / 1e9")" \
		"${p}mpi_ring_gbit_s=$(bench_calc %.3f "$count * 32 / $tr / 1e9")" \
		"${p}mpi_default_gbit_s=$(bench_calc %.3f "$count * 32 / $td / 1e9")" \
		"${p}ratio=$(bench_calc %.3f "$tr / $ti")" \
		"${p}ratio_vs_default=$(bench_calc %.3f "$td / $ti")"
	read -r lo hi < <(ar_spread "${t_innet[@]}")
	bench_result "${p}innet_s_min=$lo" "${p}innet_s_max=$hi"
	read -r lo hi < <(ar_spread "${t_ring[@]}")
	bench_result "${p}mpi_ring_s_min=$lo" "${p}mpi_ring_s_max=$hi"
	read -r lo hi < <(ar_spread "${t_def[@]}")
	bench_result "${p}mpi_default_s_min=$lo" "${p}mpi_default_s_max=$hi"
	read -r lo hi < <(ar_spread "${q_ring[@]}")
	bench_result "${p}ratio_min=$lo" "${p}ratio_max=$hi"
	bench_log "$mode: ratio $(bench_calc %.3f "$tr / $ti") (median times), per-round ratios $lo .. $hi over $ar_rounds rounds"
	read -r lo hi < <(ar_spread "${q_def[@]}")
	bench_result "${p}ratio_vs_default_min=$lo" "${p}ratio_vs_default_max=$hi"
}

# ar_rate_bps: --rate in bits per second.
ar_rate_bps() {
	local n=${ar_rate%bit} m=1
	case $n in
	*k) m=1000 n=${n%k} ;;
	*m) m=1000000 n=${n%m} ;;
	*g) m=1000000000 n=${n%g} ;;
	esac
	echo $((n * m))
}

# ar_xdp_mode_run: innet on XDP over the shaped links, --rounds runs; its
# time against the link bound.
ar_xdp_mode_run() {
	local r t ts=() count=$((ar_mib * 262144)) lo hi
	ar_set_mtu "$ar_xdp_mtu"
	ar_ingress_shape on
	for ((r = 0; r < ar_rounds; r++)); do
		ar_run innet_xdp xdp "$ar_xdp_mtu"
		ts+=("$AR_LAST")
	done
	ar_ingress_shape off
	# the bound: every contribution frame (a float call primes each of its W
	# slots first: chunks + W packets of k elements) once over one link
	local chunks=$(((count + ar_xdp_k - 1) / ar_xdp_k)) w pkts frame bound ti frac
	w=$((chunks < ar_xdp_slots ? chunks : ar_xdp_slots))
	pkts=$((chunks + w))
	frame=$((14 + 20 + 8 + 40 + 4 * ar_xdp_k))
	bound=$(bench_calc %.6f "$pkts * $frame * 8 / $(ar_rate_bps)")
	ti=$(bench_median "${ts[@]}")
	frac=$(bench_calc %.3f "$bound / $ti")
	read -r lo hi < <(ar_spread "${ts[@]}")
	bench_result "xdp_mtu=$ar_xdp_mtu" "xdp_k=$ar_xdp_k" "xdp_slots=$ar_xdp_slots" "xdp_innet_s=$ti" "xdp_innet_s_min=$lo" \
		"xdp_innet_s_max=$hi" "xdp_link_bound_s=$bound" "xdp_link_fraction=$frac" \
		"xdp_link_fraction_min=$(bench_calc %.3f "$bound / $hi")" \
		"xdp_link_target_met=$(awk -v f="$frac" 'BEGIN { print (f >= 0.95) ? 1 : 0 }')" \
		"xdp_bpf_ns_per_pkt=${AR_BPF_NS_PER_PKT:-na}" "xdp_share_in_ebpf=${AR_XDP_SHARE:-na}"
	bench_log "xdp (shaped, MTU $ar_xdp_mtu, k $ar_xdp_k): median $ti s, link bound $bound s ($pkts frames of $frame bytes at $ar_rate): fraction $frac (target 0.95)"
}

# ar_veth_mode_run: the links unshaped; innet on XDP, innet on the user-space
# engine (--mtu) and OpenMPI ring and default at each of --mpi-mtus, in
# alternating order per round; MPI's best (implementation, MTU) against
# innet on XDP.
ar_veth_mode_run() {
	local r i runs=() seq=() m key t
	local -A times=()
	local -a q=()
	ar_unshape
	runs=("innet_xdp:$ar_xdp_mtu" "innet:$ar_mtu" "innet:$ar_xdp_mtu")
	for m in ${ar_mpi_mtus//,/ }; do
		runs+=("mpi_ring:$m" "mpi_default:$m")
	done
	for ((r = 0; r < ar_rounds; r++)); do
		seq=("${runs[@]}")
		if [ $((r % 2)) -eq 1 ]; then
			seq=()
			for ((i = ${#runs[@]} - 1; i >= 0; i--)); do seq+=("${runs[$i]}"); done
		fi
		local round_best="" round_xdp=""
		for key in "${seq[@]}"; do
			ar_run "${key%%:*}" veth "${key##*:}"
			t=$AR_LAST
			times[$key]+="$t "
			case $key in
			innet_xdp:*) round_xdp=$t ;;
			mpi_*)
				if [ -z "$round_best" ] || awk -v a="$t" -v b="$round_best" 'BEGIN { exit !(a < b) }'; then
					round_best=$t
				fi
				;;
			esac
		done
		q+=("$(bench_calc %.3f "$round_best / $round_xdp")")
		bench_log "veth round $((r + 1)) of $ar_rounds: MPI's best $round_best s, innet on XDP $round_xdp s: ratio ${q[-1]}"
	done
	local med best="" best_key="" tx lo hi
	for key in "${runs[@]}"; do
		# shellcheck disable=SC2086 # a list of numbers
		med=$(bench_median ${times[$key]})
		case $key in
		innet_xdp:*) tx=$med ;;
		"innet:$ar_mtu") bench_result "veth_innet_udp_s=$med" "veth_innet_udp_mtu=${key##*:}" ;;
		innet:*) bench_result "veth_innet_udp_s_mtu${key##*:}=$med" ;;
		mpi_*)
			bench_result "veth_${key%%:*}_s_mtu${key##*:}=$med"
			if [ -z "$best" ] || awk -v a="$med" -v b="$best" 'BEGIN { exit !(a < b) }'; then
				best=$med
				best_key=$key
			fi
			;;
		esac
	done
	# shellcheck disable=SC2086
	read -r lo hi < <(ar_spread ${times[innet_xdp:$ar_xdp_mtu]})
	local ratio
	ratio=$(bench_calc %.3f "$best / $tx")
	bench_result "veth_innet_xdp_s=$tx" "veth_innet_xdp_s_min=$lo" "veth_innet_xdp_s_max=$hi" \
		"veth_mpi_best=${best_key%%:*}@${best_key##*:}" "veth_mpi_best_s=$best" "xdp_veth_ratio=$ratio"
	read -r lo hi < <(ar_spread "${q[@]}")
	bench_result "xdp_veth_ratio_min=$lo" "xdp_veth_ratio_max=$hi" \
		"xdp_veth_target_met=$(awk -v f="$ratio" 'BEGIN { print (f >= 2) ? 1 : 0 }')" \
		"veth_bpf_ns_per_pkt=${AR_BPF_NS_PER_PKT:-na}" "veth_bpf_ms_per_call=${AR_BPF_MS_PER_CALL:-na}" \
		"veth_share_in_ebpf=${AR_XDP_SHARE:-na}"
	bench_log "veth (unshaped): innet on XDP $tx s, MPI's best ${best_key%%:*} at MTU ${best_key##*:} $best s: ratio $ratio (target 2), per round $lo .. $hi"
}

bench_main() {
	ar_parse "$@"
	command -v mpicc >/dev/null || bench_die "needs mpicc (libopenmpi-dev: scripts/install-deps)"
	command -v mpirun >/dev/null ||
		bench_die "needs OpenMPI (openmpi-bin, libopenmpi-dev: scripts/install-deps)"
	bench_build innet
	make -s -C "$BENCH_ROOT" build/libinnet-mpi.so >"$BENCH_TMP/build-mpi.log" 2>&1 ||
		{ tail -n 20 "$BENCH_TMP/build-mpi.log" >&2; bench_die "cannot build build/libinnet-mpi.so"; }
	mpicc -O2 -o "$BENCH_TMP/arprog" "$BENCH_ROOT/examples/agg_mpi_allreduce.c" -lm ||
		bench_die "cannot build examples/agg_mpi_allreduce.c"
	bench_param mib "$ar_mib"
	bench_param elements "$((ar_mib * 262144))"
	bench_param iters "$ar_iters"
	bench_param rounds "$ar_rounds"
	bench_param workers 4
	bench_param rate "$ar_rate"
	bench_param slots "$ar_slots"
	bench_param k "$ar_k"
	bench_param mtu "$ar_mtu"
	bench_param switch_threads "$ar_threads"
	bench_param rto_us "$ar_rto"
	bench_param mode "$ar_mode"
	bench_param xdp_mtu "$ar_xdp_mtu"
	bench_param xdp_k "$ar_xdp_k"
	bench_param xdp_slots "$ar_xdp_slots"
	bench_param mpi_mtus "$ar_mpi_mtus"
	bench_param mpi "$(mpirun --version 2>/dev/null | head -n 1)"
	local xdp=0
	if [ "$ar_mode" = xdp ] || [ "$ar_mode" = all ]; then
		xdp=1
		command -v clang >/dev/null || bench_die "the xdp mode needs clang (an XDP_PASS program for the workers' veths)"
		printf '%s\n' '#include <linux/bpf.h>' \
			'__attribute__((section("xdp"), used)) int pass(struct xdp_md *c) { return XDP_PASS; }' \
			'char LICENSE[] __attribute__((section("license"), used)) = "GPL";' >"$BENCH_TMP/pass.c"
		clang -O2 -target bpf -I/usr/include/x86_64-linux-gnu -c "$BENCH_TMP/pass.c" -o "$BENCH_TMP/pass.o" ||
			bench_die "cannot build the XDP_PASS program"
	fi
	ar_seq=0
	bench_result "mib=$ar_mib" "rounds=$ar_rounds"
	if [ "$ar_mode" != loopback ]; then
		# namespaces first, then bench/lib.sh's cleanup with the original status
		# (set +e: errexit would otherwise end the trap at "exit")
		# shellcheck disable=SC2154 # ar_rc is assigned inside the trap
		trap 'ar_rc=$?; set +e; ar_cleanup_ns; (exit $ar_rc); bench_cleanup' EXIT
		ar_setup_netns
	fi
	if [ "$ar_mode" = netns ] || [ "$ar_mode" = both ] || [ "$ar_mode" = all ]; then
		bench_log "netns: 4 workers, $ar_rate per link and direction, MTU $ar_mtu"
		ar_mode_run netns
	fi
	if [ "$xdp" = 1 ]; then
		# the eBPF program's own time per run (bpftool prog show: run_time_ns),
		# counted by the kernel only while this is on; put back at the end
		bench_bpf_stats_on || true
		bench_log "xdp: the switch on the XDP target, $ar_rate per link and direction (switch -> worker shaped at the worker's ingress), MTU $ar_xdp_mtu, k $ar_xdp_k"
		ar_xdp_mode_run
		bench_log "xdp: unshaped veths; innet on XDP (MTU $ar_xdp_mtu), innet on the user-space engine (MTU $ar_mtu), MPI at MTU $ar_mpi_mtus"
		ar_veth_mode_run
		bench_bpf_stats_off
	fi
	if [ "$ar_mode" = loopback ] || [ "$ar_mode" = both ] || [ "$ar_mode" = all ]; then
		bench_log "loopback (no rate limit, one machine's CPUs)"
		ar_mode_run loopback
	fi
	ar_cleanup_ns
}
