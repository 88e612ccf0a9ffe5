# shellcheck shell=bash
# bench: all-reduce of float32: innet (sum in the switch) vs OpenMPI MPI_Allreduce (ring, default), 4 workers
# timeout: 900
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
  --mode M         netns | loopback | both (default: both as root, else loopback)
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
		if [ "$(id -u)" -eq 0 ]; then ar_mode=both; else ar_mode=loopback; fi
	fi
	case $ar_mode in
	netns | both) [ "$(id -u)" -eq 0 ] || bench_usage_error "--mode $ar_mode needs root" ;;
	loopback) ;;
	*) bench_usage_error "--mode: netns, loopback or both" ;;
	esac
}

# Namespaces are ours only (prefix with our pid); removed on exit.
ar_cleanup_ns() {
	local ns
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
	local args="{\"k\": $ar_k, \"slots\": $((ar_slots > 1024 ? ar_slots : 1024)), \"jobs\": [{\"id\": 1, \"workers\": 4, \"slots\": $ar_slots, \"members\": [$members]}]}"
	# shellcheck disable=SC2086 # pfx is a command prefix (or empty)
	bench_spawn "$var" "switch-$ar_tag" "" 600 $pfx "$BENCH_INNET_BIN" switch --name "ar$$" --ctl "" \
		--port "$ip" --program "agg@47800" --workers "$ar_threads" --args "$args"
	bench_wait_ready "${!var}" "switch-$ar_tag" ready 10
}

# ar_run IMPL MODE: one mpirun of the bench program; median seconds in AR_LAST.
ar_run() {
	local impl=$1 mode=$2 ar_pid count=$((ar_mib * 262144)) tag sw_pid="" line med
	ar_tag="$mode-$impl-$ar_seq"
	ar_seq=$((ar_seq + 1))
	tag="mpi-$ar_tag"
	local mpi=(mpirun --allow-run-as-root --oversubscribe -np 4 --mca pml ob1 --mca btl "tcp,self")
	local pfx=""
	if [ "$mode" = netns ]; then
		pfx="ip netns exec $AR_PREFIX-sw"
		mpi+=(--host "$AR_PREFIX-w0,$AR_PREFIX-w1,$AR_PREFIX-w2,$AR_PREFIX-w3"
			--mca plm_rsh_agent "$BENCH_TMP/nsrsh.sh" --mca plm_rsh_no_tree_spawn 1
			--mca oob_tcp_if_include 10.77.0.0/16 --mca btl_tcp_if_include 10.77.0.0/16)
	else
		mpi+=(--mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
	fi
	case $impl in
	innet)
		if [ "$mode" = netns ]; then
			ar_switch sw_pid "$pfx" 10.77.100.1 10.77.0.2 10.77.1.2 10.77.2.2 10.77.3.2
			mpi+=(-x INNET_AGG_SWITCH=10.77.100.1)
		else
			ar_switch sw_pid "" 127.64.77.1 127.64.77.10 127.64.77.10 127.64.77.10 127.64.77.10
			mpi+=(-x INNET_AGG_SWITCH=127.64.77.1 -x INNET_AGG_BIND=127.64.77.10:30000)
		fi
		mpi+=(-x LD_PRELOAD="$BENCH_ROOT/build/libinnet-mpi.so" -x INNET_AGG_SLOTS="$ar_slots"
			-x INNET_AGG_K="$ar_k" -x INNET_AGG_VERBOSE=1 -x INNET_AGG_TIMEOUT_MS=10000 -x INNET_AGG_RTO_US="$ar_rto")
		;;
	mpi_ring) mpi+=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4) ;;
	mpi_default) ;;
	esac
	# shellcheck disable=SC2086
	bench_spawn ar_pid "$tag" "" 300 $pfx "${mpi[@]}" "$BENCH_TMP/arprog" --bench "$count" "$ar_iters"
	if ! bench_wait "$ar_pid"; then
		tail -n 20 "$BENCH_TMP/$tag.err" >&2
		bench_die "$impl ($mode) failed"
	fi
	[ -n "$sw_pid" ] && bench_stop "$sw_pid"
	line=$(grep '^RESULT impl=' "$BENCH_TMP/$tag.out" | tail -n 1)
	[ -n "$line" ] || bench_die "$impl ($mode): no RESULT line"
	med=$(tr ' ' '\n' <<<"$line" | sed -n 's/^median_s=//p')
	local retr
	retr=$(sed -n 's/.*retransmits=\([0-9]*\).*/\1/p' "$BENCH_TMP/$tag.err" | awk '{ s += $1 } END { print s + 0 }')
	bench_record mode="$mode" impl="$impl" count="$count" iters="$ar_iters" median_s="$med" \
		min_s="$(tr ' ' '\n' <<<"$line" | sed -n 's/^min_s=//p')" retransmits="$retr" \
		loadavg="$(cut -d' ' -f1 /proc/loadavg)"
	bench_log "$mode $impl: median $med s per all-reduce of $ar_mib MiB ($(bench_calc %.3f "$count * 32 / $med / 1e9") Gbit/s)$([ "$impl" = innet ] && echo ", innet retransmits $retr")"
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
	bench_param mpi "$(mpirun --version 2>/dev/null | head -n 1)"
	ar_seq=0
	bench_result "mib=$ar_mib" "rounds=$ar_rounds"
	if [ "$ar_mode" != loopback ]; then
		# namespaces first, then bench/lib.sh's cleanup with the original status
		# (set +e: errexit would otherwise end the trap at "exit")
		# shellcheck disable=SC2154 # ar_rc is assigned inside the trap
		trap 'ar_rc=$?; set +e; ar_cleanup_ns; (exit $ar_rc); bench_cleanup' EXIT
		ar_setup_netns
		bench_log "netns: 4 workers, $ar_rate per link and direction, MTU $ar_mtu"
		ar_mode_run netns
	fi
	if [ "$ar_mode" != netns ]; then
		bench_log "loopback (no rate limit, one machine's CPUs)"
		ar_mode_run loopback
	fi
	ar_cleanup_ns
}
