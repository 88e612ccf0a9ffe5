# shellcheck shell=bash
# bench: queries/s through innet's balancer against dnsdist (loopback) and, as root, innet's lb on the XDP target against nftables DNAT and dnsdist in network namespaces; same nsd servers, dnsperf closed loop
# timeout: 900
#
# bench/lb-qps.sh — sourced by bench/run (see bench/lib.sh).
#
# Loopback (--target udp, and part of the default as root):
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
#
# Network namespaces (--target xdp, and part of the default as root): three
# L4 balancers take turns in the same position, in front of the same two nsd,
# for the same dnsperf, on the same veths (NS = innet-lbqPID):
#
#   NS-c (client)                 NS-lb (the balancer's namespace)               NS-s0, NS-s1
#   lbq-c0 10.97.1.2 ══veth══ lbq-lbc (10.97.1.1)   ┌ xdp: innet switch --target xdp, lb in packet
#   dnsperf -s 10.97.0.100      02:97:00:00:01:01   │      mode, its eBPF object on the 3 veths:
#   route VIP via 10.97.1.1 ─┐                      │      VIP lookup, connection table, Maglev,
#   (neigh permanent)        │  lbq-lb0 (10.97.2.1) ┤      DNAT/SNAT + MACs, XDP_TX/redirect
#                            │  ══veth══ lbq-s00 10.97.2.10  nsd :5300 (answers 192.0.2.21)
#                            │  lbq-lb1 (10.97.3.1) ┤ nft: ip_forward 1, one nat rule:
#                            │  ══veth══ lbq-s10 10.97.3.10  nsd :5300 (answers 192.0.2.22)
#                            │                      │      dnat to numgen inc mod 2 map {...}
#                            └ VIP 10.97.0.100:53   └ dnsdist: listens on the VIP (on lo), W'
#                                                          UDP listeners, roundrobin, no cache
#
#   Hosts: static neighbours and routes through the balancer (the switch
#   does no ARP, as Katran); their veth ends run an XDP_PASS program for
#   every contender (a veth takes frames an XDP program sends into it only
#   so). TSO/GSO/GRO off everywhere, tx checksum offload off on the
#   balancer's veths (as tests/integration/lb_packet_netns.sh).
#
#   Rounds alternate the contenders (xdp nft dnsdist, dnsdist nft xdp, ...);
#   the innet switch is started for each of its runs and stopped after it
#   (XDP detached), the nft table added and deleted around each of its runs;
#   dnsdist stays up (it sees nothing while XDP or the DNAT rule takes the
#   VIP's packets). Then the client's own limit: dnsperf straight at one nsd
#   through the balancer namespace's plain IP forwarding (no NAT rule).
#   Every run also records where the CPU went: dnsperf, the nsd, the
#   balancer's process, and the machine's user/system/softirq/idle split
#   (/proc/stat; XDP and nft run in softirq, charged to no process).
#   Keys: xdp_qps, nft_qps, dnsdist_netns_qps, xdp_nft_ratio (target >= 1.0),
#   xdp_dnsdist_ratio (target >= 2), xdp_nft_met, xdp_dnsdist_met,
#   targets_missed (none, or the ratios below their targets),
#   nsd_direct_netns_qps (the client's limit) and xdp_client_limit_fraction
#   (xdp_qps / it), xdp_ebpf_ns_per_frame, and per contender (xdp_, nft_,
#   dnsdist_netns_) avg_ms, lost, busy_us_per_q (CPU of the whole machine per
#   query), idle_pct and dnsperf_us_per_q (the client's CPU per query).

bench_usage() {
	cat <<'EOF2'
usage: bench/run lb-qps [options]
  --target T        udp: the loopback contenders only (innet proxy mode, dnsdist);
                    xdp: the network-namespace contenders only (root: innet's lb on
                    XDP, nftables DNAT, dnsdist); all: both (default as root; udp
                    otherwise)
  --rounds N        dnsperf runs per balancer (default 5; the median counts)
  --seconds S       dnsperf -l (default 5)
  --clients N       dnsperf -c (default 10)
  --workers W       switch workers = dnsdist UDP listener threads (default 1)
  --dnsdist-listeners N
                    dnsdist's UDP listener threads in the namespaces (default: W)
  --policy P        dnsdist policy: roundrobin or leastOutstanding (default roundrobin)
  --innet-policy P  innet's VIP policy: maglev, wrr, ecmp, p2c (default maglev; both modes)
  --paced QPS       rate of the open-loop p99 runs (loopback; default 20000)
  --quick           1 round of 3 s
EOF2
}

lbq_rounds=5
lbq_secs=5
lbq_clients=10
lbq_workers=1
lbq_listeners=""
lbq_policy=roundrobin
lbq_ipolicy=maglev
lbq_paced=20000
lbq_target=""
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

# The loopback contenders (innet proxy mode, dnsdist): the keys innet_qps,
# dnsdist_qps, ratio, ... as before the namespaces came.
lbq_loopback() {
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

	bench_param innet "lb program, proxy mode, $lbq_ipolicy, $lbq_workers worker(s), NAT ports 24000-24999"
	bench_param warmup "1 s of dnsperf against each balancer before the rounds (not counted)"
	bench_param dnsdist "$(dnsdist --version 2>/dev/null | head -n 1 | cut -d' ' -f2), $lbq_workers UDP listener(s) (reusePort), policy $lbq_policy, no packet cache"
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
		"nsd_direct_qps=$direct"
	bench_stop "$dd" || true
	bench_stop "$sw" || true
	bench_stop "$n1" || true
	bench_stop "$n2" || true
}

# ---------------------------------------------------------------------------
# The network namespaces (drawn at the top)

LBQ_P=innet-lbq$$          # namespace prefix: ours only
LBQ_NSES=()
LBQ_VIP=10.97.0.100
LBQ_C=10.97.1.2
LBQ_B0=10.97.2.10
LBQ_B1=10.97.3.10
LBQ_XSW=""                 # the XDP switch's pid while it runs
LBQ_DDNS=""                # dnsdist's pid (in NS-lb)
LBQ_NSD=()                 # the two nsd's pids

# Namespaces are deleted on exit (with whatever runs in them stopped first).
lbq_ns_cleanup() {
	local ns
	bench_bpf_stats_off
	for ns in "${LBQ_NSES[@]}"; do
		ip netns del "$ns" 2>/dev/null || true
	done
	LBQ_NSES=()
}

lbq_in() { # NS-SUFFIX CMD...: run CMD in namespace NS-SUFFIX
	local ns=$LBQ_P-$1
	shift
	ip netns exec "$ns" "$@"
}

lbq_ns_setup() {
	local p=$LBQ_P ns pair
	for ns in c lb s0 s1; do
		ip netns add "$p-$ns" || bench_die "ip netns add $p-$ns"
		LBQ_NSES+=("$p-$ns")
		ip -n "$p-$ns" link set lo up
	done
	ip link add lbq-c0 netns "$p-c" address 02:97:00:00:01:02 type veth \
		peer name lbq-lbc netns "$p-lb" address 02:97:00:00:01:01 || bench_die "veth client"
	ip link add lbq-s00 netns "$p-s0" address 02:97:00:00:02:0a type veth \
		peer name lbq-lb0 netns "$p-lb" address 02:97:00:00:02:01 || bench_die "veth s0"
	ip link add lbq-s10 netns "$p-s1" address 02:97:00:00:03:0a type veth \
		peer name lbq-lb1 netns "$p-lb" address 02:97:00:00:03:01 || bench_die "veth s1"
	for pair in "c lbq-c0 host" "lb lbq-lbc lb" "lb lbq-lb0 lb" "lb lbq-lb1 lb" "s0 lbq-s00 host" "s1 lbq-s10 host"; do
		# shellcheck disable=SC2086 # three words
		set -- $pair
		lbq_in "$1" sysctl -qw "net.ipv6.conf.$2.disable_ipv6=1"
		# no segmentation offload (the XDP switch forwards frames, not 64 KiB
		# super-frames); the balancer's own ends send complete checksums
		lbq_in "$1" ethtool -K "$2" tso off gso off gro off >/dev/null 2>&1 || bench_die "ethtool -K $2"
		if [ "$3" = lb ]; then
			lbq_in "$1" ethtool -K "$2" tx off >/dev/null 2>&1 || bench_die "ethtool -K $2 tx off"
		fi
		ip -n "$p-$1" link set "$2" up
	done
	# the client: the VIP (and, for the client-limit run, the servers) via the balancer
	ip -n "$p-c" addr add $LBQ_C/24 dev lbq-c0
	ip -n "$p-c" neigh add 10.97.1.1 lladdr 02:97:00:00:01:01 dev lbq-c0 nud permanent
	ip -n "$p-c" route add $LBQ_VIP/32 via 10.97.1.1 dev lbq-c0
	ip -n "$p-c" route add 10.97.2.0/23 via 10.97.1.1 dev lbq-c0
	# the servers answer through the balancer
	ip -n "$p-s0" addr add $LBQ_B0/24 dev lbq-s00
	ip -n "$p-s0" neigh add 10.97.2.1 lladdr 02:97:00:00:02:01 dev lbq-s00 nud permanent
	ip -n "$p-s0" route add 10.97.1.0/24 via 10.97.2.1 dev lbq-s00
	ip -n "$p-s1" addr add $LBQ_B1/24 dev lbq-s10
	ip -n "$p-s1" neigh add 10.97.3.1 lladdr 02:97:00:00:03:01 dev lbq-s10 nud permanent
	ip -n "$p-s1" route add 10.97.1.0/24 via 10.97.3.1 dev lbq-s10
	# the balancer's namespace: addresses for nft's forwarding and dnsdist's
	# sockets (the XDP switch ignores them: its program takes every frame
	# first), the VIP on lo for dnsdist, static neighbours, forwarding off
	# except for nft's runs
	ip -n "$p-lb" addr add 10.97.1.1/24 dev lbq-lbc
	ip -n "$p-lb" addr add 10.97.2.1/24 dev lbq-lb0
	ip -n "$p-lb" addr add 10.97.3.1/24 dev lbq-lb1
	ip -n "$p-lb" addr add $LBQ_VIP/32 dev lo
	ip -n "$p-lb" neigh add $LBQ_C lladdr 02:97:00:00:01:02 dev lbq-lbc nud permanent
	ip -n "$p-lb" neigh add $LBQ_B0 lladdr 02:97:00:00:02:0a dev lbq-lb0 nud permanent
	ip -n "$p-lb" neigh add $LBQ_B1 lladdr 02:97:00:00:03:0a dev lbq-lb1 nud permanent
	lbq_in lb sysctl -qw net.ipv4.ip_forward=0
}

# lbq_ns_wait_udp NS-SUFFIX IP PORT SECS: lbenv_wait_udp inside a namespace
lbq_ns_wait_udp() {
	local ns=$1
	shift
	lbq_in "$ns" bash -c '. "$1"; shift; lbenv_wait_udp "$@"' _ "$BENCH_ROOT/tools/lb/lbenv.sh" "$@"
}

# CPU ticks (USER_HZ) of processes and all their descendants
lbq_tree() { # PID: PID and its descendants
	local pid=$1 kid
	echo "$pid"
	for kid in $(cat /proc/"$pid"/task/*/children 2>/dev/null); do
		lbq_tree "$kid"
	done
}
lbq_ticks() { # PID...: utime + stime summed over the trees
	local pid
	for pid in "$@"; do
		[ -n "$pid" ] && lbq_tree "$pid"
	done | sort -u | while read -r pid; do
		# fields after the command name (which may hold spaces): utime stime are 14 and 15
		sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{ print $12 + $13 }'
	done | awk '{ s += $1 } END { print s + 0 }'
}
lbq_stat() { # the machine's cpu line: user+nice system irq+softirq idle+iowait steal
	awk '$1 == "cpu" { print $2 + $3, $4, $7 + $8, $5 + $6, $9 }' /proc/stat
}
lbq_rx() { # NS-SUFFIX DEV: frames received
	lbq_in "$1" cat "/sys/class/net/$2/statistics/rx_packets"
}

# lbq_ns_dnsperf IP PORT TAG T: dnsperf from the client's namespace (contender
# T: xdp, nft, dnsdist or direct); sets lbq_q
# lbq_avg lbq_lost, and where the CPU went over the run: lbq_cpu (a log
# text), lbq_kv (record fields), lbq_busy_us (CPU per query, all processes
# and softirq), lbq_idle (idle % of the machine), lbq_client_us (dnsperf's
# CPU per query)
lbq_ns_dnsperf() {
	local ip=$1 port=$2 tag=$3 t=$4 qpid f bal=() s0 s1 r0 r1 t0 t1 st0 st1 p1 b0 b1
	local n0 n1 sec
	[ "$t" = xdp ] && bal+=("$LBQ_XSW")
	[ "$t" = dnsdist ] && bal+=("$LBQ_DDNS")
	r0=$(lbq_rx s0 lbq-s00) r1=$(lbq_rx s1 lbq-s10)
	read -r -a st0 < <(lbq_stat)
	n0=$(lbq_ticks "${LBQ_NSD[@]}")
	b0=$(lbq_ticks "${bal[@]}")
	t0=$(date +%s.%N)
	# bash's `times`: dnsperf's own user and system time, on stderr
	bench_spawn qpid "$tag" "" $((lbq_secs + 30)) ip netns exec "$LBQ_P-c" bash -c \
		'dnsperf "$@"; rc=$?; times >&2; exit $rc' _ -s "$ip" -p "$port" -a $LBQ_C \
		-d "$BENCH_TMP/queries" -l "$lbq_secs" -c "$lbq_clients" -t 2
	bench_wait "$qpid" || bench_die "$tag: dnsperf failed: $(tail -n 3 "$BENCH_TMP/$tag.out")"
	t1=$(date +%s.%N)
	read -r -a st1 < <(lbq_stat)
	n1=$(lbq_ticks "${LBQ_NSD[@]}")
	b1=$(lbq_ticks "${bal[@]}")
	s0=$(($(lbq_rx s0 lbq-s00) - r0)) s1=$(($(lbq_rx s1 lbq-s10) - r1))
	f=$BENCH_TMP/$tag.out
	lbq_q=$(awk '/Queries per second:/ { printf "%.0f", $4 }' "$f")
	lbq_avg=$(awk '/Average Latency/ { printf "%.3f", $4 * 1000 }' "$f")
	lbq_lost=$(awk '/Queries lost:/ { print $3 }' "$f")
	[ -n "$lbq_q" ] && [ -n "$lbq_lost" ] || bench_die "$tag: no figures in dnsperf output"
	# dnsperf's CPU seconds: the children's line of `times` (XmY.YYYs XmY.YYYs)
	p1=$(tail -n 1 "$BENCH_TMP/$tag.err" | awk '{ n = 0
		for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); n += a[1] * 60 + a[2] }
		printf "%.2f", n }')
	sec=$(bench_calc %.3f "$t1 - $t0")
	# % of one CPU over the run, and the machine's split (100 % x nproc in all)
	local hz=100 q
	q=$(bench_calc %.0f "$lbq_q * $sec")
	[ "$q" -gt 0 ] || q=1
	local c_pct n_pct b_pct u_pct y_pct i_pct s_pct t_pct idle busy
	c_pct=$(bench_calc %.0f "$p1 * 100 / $sec")
	n_pct=$(bench_calc %.0f "($n1 - $n0) * 100 / $hz / $sec")
	b_pct=$(bench_calc %.0f "($b1 - $b0) * 100 / $hz / $sec")
	u_pct=$(bench_calc %.0f "(${st1[0]} - ${st0[0]}) * 100 / $hz / $sec")
	y_pct=$(bench_calc %.0f "(${st1[1]} - ${st0[1]}) * 100 / $hz / $sec")
	s_pct=$(bench_calc %.0f "(${st1[2]} - ${st0[2]}) * 100 / $hz / $sec")
	i_pct=$(bench_calc %.0f "(${st1[3]} - ${st0[3]}) * 100 / $hz / $sec")
	idle=$(bench_calc %.1f "(${st1[3]} - ${st0[3]}) * 100 / ($hz * $sec * $(nproc))")
	busy=$(bench_calc %.0f "(${st1[0]} - ${st0[0]} + ${st1[1]} - ${st0[1]} + ${st1[2]} - ${st0[2]})")
	t_pct=$(bench_calc %.0f "(${st1[4]} - ${st0[4]}) * 100 / $hz / $sec")
	lbq_busy_us=$(bench_calc %.1f "$busy * 1e6 / $hz / $q")
	lbq_client_us=$(bench_calc %.1f "$p1 * 1e6 / $q")
	lbq_idle=$idle
	lbq_split=$(bench_calc %.2f "($s0 + $s1) > 0 ? $s0 / ($s0 + $s1) : 0")
	lbq_cpu="CPU (% of one core): dnsperf $c_pct, nsd $n_pct, balancer process $b_pct; machine: user $u_pct, system $y_pct, irq+softirq $s_pct, idle $i_pct, steal $t_pct (of $(($(nproc) * 100))); ${lbq_busy_us} us busy per query; s0 got $lbq_split of the queries"
	lbq_kv=(cpu_dnsperf_pct="$c_pct" cpu_nsd_pct="$n_pct" cpu_balancer_proc_pct="$b_pct"
		cpu_user_pct="$u_pct" cpu_system_pct="$y_pct" cpu_softirq_pct="$s_pct" cpu_idle_pct="$i_pct" cpu_steal_pct="$t_pct"
		busy_us_per_q="$lbq_busy_us" dnsperf_us_per_q="$lbq_client_us" s0_share="$lbq_split"
		seconds="$sec")
}

# lbq_ns_begin T TAG / lbq_ns_end T TAG: put contender T in the balancer's place, take it out
lbq_ns_begin() {
	local t=$1 tag=$2
	case $t in
	xdp)
		lbq_in lb sysctl -qw net.ipv4.ip_forward=0
		bench_spawn LBQ_XSW "switch-$tag" "" 600 ip netns exec "$LBQ_P-lb" "$BENCH_INNET_BIN" switch \
			--name "lbq$$" --target xdp --workers 1 --port iface:lbq-lbc --port iface:lbq-lb0 \
			--port iface:lbq-lb1 --program lb/lb@raw --args "$LBQ_XARGS" --ctl "$BENCH_TMP/xdp.sock"
		bench_wait_ready "$LBQ_XSW" "switch-$tag" ready 30
		# the warm-up measures lb's own time in eBPF (bpftool prog show:
		# run_time_ns; the kernel counts only while bpf_stats_enabled is on,
		# two clock reads per run, so not during the measured runs)
		if [ "$tag" = warmup-ns-xdp ]; then
			bench_bpf_stats_on || true
		fi
		;;
	nft)
		lbq_in lb sysctl -qw net.ipv4.ip_forward=1
		lbq_in lb nft -f "$BENCH_TMP/nft.conf" || bench_die "nft -f (the DNAT rule) failed"
		;;
	dnsdist)
		lbq_in lb sysctl -qw net.ipv4.ip_forward=0
		;;
	direct)
		lbq_in lb sysctl -qw net.ipv4.ip_forward=1
		;;
	esac
	[ "$t" = direct ] && return 0
	lbq_ns_wait_udp c $LBQ_VIP 53 10 || bench_die "$tag: no answer through the VIP"
}

lbq_ns_end() {
	local t=$1 tag=$2
	case $t in
	xdp)
		# every frame in eBPF? (hand-offs and passes would show here)
		if timeout 10 "$BENCH_INNET_BIN" ctl -s "$BENCH_TMP/xdp.sock" --json stats \
			>"$BENCH_TMP/$tag-stats.json" 2>&1; then
			bench_log "$tag: $(/usr/bin/python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))["programs"][0]
d = {k: v for k, v in p["drops"].items() if v}
h = {k: v for k, v in p.get("handoffs", {}).items() if v}
print("lb in eBPF: %d of %d frames; drops %s; hand-offs %s" % (p.get("xdp_rx_pkts", 0), p["rx_pkts"], d or "none", h or "none"))' \
				"$BENCH_TMP/$tag-stats.json" 2>&1)"
		else
			bench_log "warning: $tag: ctl stats failed: $(tail -n 1 "$BENCH_TMP/$tag-stats.json")"
		fi
		if bench_bpf_stats_is_on; then
			lbq_ebpf_stats "$tag"
			bench_bpf_stats_off
		fi
		bench_stop "$LBQ_XSW" || true
		LBQ_XSW=""
		;;
	nft)
		bench_log "$tag: $(lbq_in lb nft list chain ip lbq pre | grep -o 'counter packets [0-9]*' || true) (new flows DNATed)"
		lbq_in lb nft delete table ip lbq || bench_die "nft delete table"
		lbq_in lb sysctl -qw net.ipv4.ip_forward=0
		;;
	direct)
		lbq_in lb sysctl -qw net.ipv4.ip_forward=0
		;;
	esac
}

# lbq_ebpf_stats TAG: lb's time per frame in eBPF (the XDP program on the
# balancer's veths, tail calls included) -> LBQ_EBPF_NS
LBQ_EBPF_NS=""
lbq_ebpf_stats() {
	local tag=$1 id st
	id=$(ip -n "$LBQ_P-lb" link show lbq-lbc | sed -n 's/.*prog\/xdp id \([0-9]*\).*/\1/p')
	[ -n "$id" ] || return 0
	st=$(bpftool prog show id "$id" | sed -n 's/.*run_time_ns \([0-9]*\) run_cnt \([0-9]*\).*/\2 \1/p')
	[ -n "$st" ] || return 0
	# shellcheck disable=SC2086 # two numbers
	set -- $st
	[ "$1" -gt 0 ] || return 0
	LBQ_EBPF_NS=$(bench_calc %.0f "$2 / $1")
	bench_log "$tag: lb's XDP program ran $1 times, $LBQ_EBPF_NS ns per frame (2 frames per query: the query on the client's port, the answer on the server's)"
}

lbq_netns() {
	local x
	for x in ip ethtool nft; do
		command -v $x >/dev/null || bench_die "$x not installed (scripts/install-deps)"
	done
	lbq_ns_setup
	local pass=()
	for x in c:lbq-c0 s0:lbq-s00 s1:lbq-s10; do
		bench_spawn LBQ_PPID "pass-${x%%:*}" "" 850 ip netns exec "$LBQ_P-${x%%:*}" "$BENCH_BIN/xdptool" \
			pass "${x#*:}" --seconds 840
		bench_wait_ready "$LBQ_PPID" "pass-${x%%:*}" ready 10
		pass+=("$LBQ_PPID")
	done
	lbenv_nsd_conf "$BENCH_TMP/nsd-s0" $LBQ_B0 5300 192.0.2.21
	lbenv_nsd_conf "$BENCH_TMP/nsd-s1" $LBQ_B1 5300 192.0.2.22
	LBQ_NSD=()
	for x in s0 s1; do
		# shellcheck disable=SC2046 # the command line is words
		bench_spawn LBQ_PPID "nsd-$x" "" 850 ip netns exec "$LBQ_P-$x" $(lbenv_nsd_cmd "$BENCH_TMP/nsd-$x")
		LBQ_NSD+=("$LBQ_PPID")
	done
	lbq_ns_wait_udp s0 $LBQ_B0 5300 10 || bench_die "nsd s0 does not answer ($(tail -n 2 "$BENCH_TMP/nsd-s0/nsd.log"))"
	lbq_ns_wait_udp s1 $LBQ_B1 5300 10 || bench_die "nsd s1 does not answer"
	LBQ_XARGS=$(cat <<EOF2
{"mode": "packet", "idle_timeout_ms": 30000,
 "vips": [{"name": "dns", "address": "$LBQ_VIP", "port": 53, "proto": "udp", "pool": "ns", "policy": "$lbq_ipolicy"}],
 "pools": [{"name": "ns", "servers": [
   {"id": 1, "units": [{"id": 0, "kind": "cpu", "address": "$LBQ_B0:5300", "mac": "02:97:00:00:02:0a", "port": 1}]},
   {"id": 2, "units": [{"id": 0, "kind": "cpu", "address": "$LBQ_B1:5300", "mac": "02:97:00:00:03:0a", "port": 2}]}]}]}
EOF2
)
	cat >"$BENCH_TMP/nft.conf" <<EOF2
table ip lbq {
	chain pre {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr $LBQ_VIP udp dport 53 counter dnat to numgen inc mod 2 map { 0 : $LBQ_B0 . 5300, 1 : $LBQ_B1 . 5300 }
	}
}
EOF2
	lbenv_dnsdist_conf "$BENCH_TMP/dnsdist-ns.conf" $LBQ_VIP 53 "$lbq_listeners" "$lbq_policy" \
		"$LBQ_B0:5300" "$LBQ_B1:5300"
	bench_spawn LBQ_DDNS dnsdist-ns "" 850 ip netns exec "$LBQ_P-lb" dnsdist --supervised --disable-syslog \
		-C "$BENCH_TMP/dnsdist-ns.conf"
	sleep 0.5
	lbq_ns_wait_udp c $LBQ_VIP 53 10 || bench_die "no answer through dnsdist in the namespace ($(tail -n 3 "$BENCH_TMP/dnsdist-ns.err"))"
	bench_param netns_innet "lb program, packet mode, $lbq_ipolicy, innet switch --target xdp (eBPF on the balancer namespace's 3 veths), started for each run"
	bench_param netns_nft "nftables $(nft --version 2>/dev/null | awk '{ print $2 }'): ip_forward 1, prerouting: ip daddr $LBQ_VIP udp dport 53 dnat to numgen inc mod 2 map (conntrack)"
	bench_param netns_dnsdist "$lbq_listeners UDP listener(s) on $LBQ_VIP:53 in the balancer's namespace, policy $lbq_policy, no packet cache"
	bench_param netns_client_limit "dnsperf straight at one nsd ($LBQ_B0:5300) through the balancer namespace's IP forwarding, no NAT rule"

	local t r i order=() keep=$lbq_secs n
	local ts=(xdp nft dnsdist)
	n=${#ts[@]}
	# Warm-up: 1 s of each (not counted)
	lbq_secs=1
	for t in "${ts[@]}"; do
		lbq_ns_begin "$t" "warmup-ns-$t"
		lbq_ns_dnsperf $LBQ_VIP 53 "warmup-ns-$t" "$t"
		lbq_ns_end "$t" "warmup-ns-$t"
	done
	lbq_secs=$keep
	for t in "${ts[@]}"; do
		local -a "lbq_q_$t=()" "lbq_a_$t=()" "lbq_b_$t=()" "lbq_i_$t=()" "lbq_c_$t=()"
		local "lbq_l_$t=0"
	done
	for ((r = 0; r < lbq_rounds; r++)); do
		order=()
		for ((i = 0; i < n; i++)); do
			if [ $((r % 2)) = 0 ]; then order+=("${ts[$i]}"); else order+=("${ts[$((n - 1 - i))]}"); fi
		done
		for t in "${order[@]}"; do
			lbq_ns_begin "$t" "$t-ns-r$r"
			lbq_ns_dnsperf $LBQ_VIP 53 "$t-ns-r$r" "$t"
			lbq_ns_end "$t" "$t-ns-r$r"
			bench_log "$t (netns) round $r: $lbq_q q/s, avg $lbq_avg ms, lost $lbq_lost; $lbq_cpu"
			bench_record target="netns_$t" round="$r" qps="$lbq_q" avg_ms="$lbq_avg" lost="$lbq_lost" "${lbq_kv[@]}"
			local -n aq="lbq_q_$t" aa="lbq_a_$t" ab="lbq_b_$t" ai="lbq_i_$t" ac="lbq_c_$t" al="lbq_l_$t"
			aq+=("$lbq_q"); aa+=("$lbq_avg"); ab+=("$lbq_busy_us"); ai+=("$lbq_idle"); ac+=("$lbq_client_us")
			al=$((al + lbq_lost))
			unset -n aq aa ab ai ac al
		done
	done
	# The client's own limit: one nsd, no balancer (plain forwarding)
	lbq_ns_begin direct direct-ns
	lbq_ns_dnsperf $LBQ_B0 5300 direct-ns direct
	lbq_ns_end direct direct-ns
	local limit=$lbq_q
	bench_log "client limit (dnsperf straight at one nsd through the balancer namespace's forwarding): $limit q/s, avg $lbq_avg ms; $lbq_cpu"
	bench_record target=netns_client_limit qps="$limit" avg_ms="$lbq_avg" lost="$lbq_lost" "${lbq_kv[@]}"

	local -A mq
	local keys=() pre
	for t in "${ts[@]}"; do
		local -n mqs="lbq_q_$t" mas="lbq_a_$t" mbs="lbq_b_$t" mis="lbq_i_$t" mcs="lbq_c_$t" mls="lbq_l_$t"
		mq[$t]=$(bench_median "${mqs[@]}")
		pre=$t
		[ "$t" = dnsdist ] && pre=dnsdist_netns
		keys+=("${pre}_qps=$(bench_calc %.0f "${mq[$t]}")" "${pre}_avg_ms=$(bench_median "${mas[@]}")"
			"${pre}_lost=$mls" "${pre}_busy_us_per_q=$(bench_median "${mbs[@]}")"
			"${pre}_idle_pct=$(bench_median "${mis[@]}")" "${pre}_dnsperf_us_per_q=$(bench_median "${mcs[@]}")")
		unset -n mqs mas mbs mis mcs mls
	done
	local rn rd mn md missed=()
	rn=$(bench_calc %.2f "${mq[xdp]} / ${mq[nft]}")
	rd=$(bench_calc %.2f "${mq[xdp]} / ${mq[dnsdist]}")
	mn=$(bench_calc %d "${mq[xdp]} / ${mq[nft]} >= 1.0")
	md=$(bench_calc %d "${mq[xdp]} / ${mq[dnsdist]} >= 2.0")
	[ "$mn" = 1 ] || missed+=("xdp_nft_ratio<1")
	[ "$md" = 1 ] || missed+=("xdp_dnsdist_ratio<2")
	local m
	m=$(IFS=,; echo "${missed[*]}")
	bench_result "${keys[@]}" "xdp_nft_ratio=$rn" "xdp_dnsdist_ratio=$rd" "xdp_nft_met=$mn" \
		"xdp_dnsdist_met=$md" "targets_missed=${m:-none}" "nsd_direct_netns_qps=$limit" \
		"xdp_client_limit_fraction=$(bench_calc %.2f "${mq[xdp]} / $limit")" "dnsdist_netns_listeners=$lbq_listeners" \
		"xdp_ebpf_ns_per_frame=${LBQ_EBPF_NS:-nan}"
	bench_stop "$LBQ_DDNS" || true
	for x in "${LBQ_NSD[@]}" "${pass[@]}"; do bench_stop "$x" || true; done
	lbq_ns_cleanup
}

bench_main() {
	while [ $# -gt 0 ]; do
		case $1 in
		--target) lbq_target=$2; shift 2 ;;
		--rounds) lbq_rounds=$2; shift 2 ;;
		--seconds) lbq_secs=$2; shift 2 ;;
		--clients) lbq_clients=$2; shift 2 ;;
		--workers) lbq_workers=$2; shift 2 ;;
		--dnsdist-listeners) lbq_listeners=$2; shift 2 ;;
		--policy) lbq_policy=$2; shift 2 ;;
		--innet-policy) lbq_ipolicy=$2; shift 2 ;;
		--paced) lbq_paced=$2; shift 2 ;;
		--quick) lbq_rounds=1; lbq_secs=3; shift ;;
		-h|--help) bench_usage; exit 0 ;;
		*) bench_usage_error "unknown option $1" ;;
		esac
	done
	if [ -z "$lbq_target" ]; then
		lbq_target=udp
		[ "$(id -u)" -eq 0 ] && lbq_target=all
	fi
	lbq_listeners=${lbq_listeners:-$lbq_workers}
	local v
	for v in "$lbq_rounds" "$lbq_secs" "$lbq_clients" "$lbq_workers" "$lbq_paced" "$lbq_listeners"; do
		[[ $v =~ ^[1-9][0-9]*$ ]] || bench_usage_error "'$v' is not a positive integer"
	done
	case $lbq_target in
	udp) ;;
	xdp | all) [ "$(id -u)" -eq 0 ] || bench_usage_error "--target $lbq_target needs root (network namespaces, XDP)" ;;
	*) bench_usage_error "--target: udp, xdp or all" ;;
	esac
	case $lbq_policy in roundrobin|leastOutstanding) ;; *) bench_usage_error "--policy: roundrobin or leastOutstanding" ;; esac
	case $lbq_ipolicy in maglev|wrr|ecmp|p2c) ;; *) bench_usage_error "--innet-policy: maglev, wrr, ecmp or p2c" ;; esac
	for v in nsd dnsperf dnsdist; do
		command -v $v >/dev/null || bench_die "$v not installed (scripts/install-deps)"
	done
	if [ "$lbq_target" = udp ]; then
		bench_build innet
	else
		bench_build innet xdptool
	fi
	# shellcheck source=tools/lb/lbenv.sh
	source "$BENCH_ROOT/tools/lb/lbenv.sh"
	lbenv_queries "$BENCH_TMP/queries"
	bench_param target "$lbq_target"
	bench_param rounds "$lbq_rounds"
	bench_param dnsperf "dnsperf -l $lbq_secs -c $lbq_clients -t 2, 101 names (r0..r99, www), UDP"
	bench_param workers "$lbq_workers"
	bench_param nsd "$(nsd -v 2>&1 | head -n 1 | awk '{ print $3 }'), server-count 1, rrl-ratelimit 0, 2 servers"
	if [ "$lbq_target" != udp ]; then
		# namespaces first, then bench/lib.sh's cleanup with the original status
		# (set +e: errexit would otherwise end the trap at "exit")
		# shellcheck disable=SC2154 # lbq_rc is assigned inside the trap
		trap 'lbq_rc=$?; set +e; lbq_ns_cleanup; (exit $lbq_rc); bench_cleanup' EXIT
	fi
	[ "$lbq_target" = xdp ] || lbq_loopback
	[ "$lbq_target" = udp ] || lbq_netns
	bench_result "workers=$lbq_workers" "innet_policy=$lbq_ipolicy" "target=$lbq_target" \
		"loadavg=$(cut -d' ' -f1 /proc/loadavg)"
}
