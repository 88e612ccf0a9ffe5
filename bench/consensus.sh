# shellcheck shell=bash
# bench: in-network Paxos (coordinator + 3 acceptor switches) vs the same roles as host processes: commands/s, p50/p99
# timeout: 900
#
# bench/consensus.sh — sourced by bench/run (see bench/lib.sh).
#
#   innet:  innet paxos bench (proposer+learner l0) ─REQUEST─▶ coord switch ─2A─▶ a0,a1,a2 switches ─2B─▶ l0
#   host:   innet paxos bench (proposer+learner)    ─REQUEST─▶ innet paxos leader --active
#                                                     ─2A─▶ 3 x innet paxos acceptor ─2B─▶ learner
#
# Same load generator, same protocol, same packet sizes; the in-network side
# runs the switch runtime's programs (src/consensus/coordinator_dp.c,
# acceptor_dp.c), the baseline plain host processes (leader.c, hostacc.c) with
# the same I/O batching as the switch workers: recvmmsg bursts of 32, the
# sends of a burst in one sendmmsg (the leader logs its datagrams per call).
# W requests in flight (W client ids, one request each), 16-byte values.
# Rounds alternate the contenders (A B, B A, ...) and the medians are compared.
# The load generator at its best for each contender: at W > 1 every contender
# runs twice per round, once with one thread (the endpoint proposes and
# learns) and once with T proposer threads (--gen-threads, default the CPUs;
# `innet paxos bench --threads T`: each thread owns W/T clients and sends their
# REQUESTs from a socket of its own, the main thread learns), alternating
# which goes first; the mode with the contender's higher median over the
# rounds counts for it (key *_wW_gen_threads: 0 or T). On a veth the
# receivers' XDP runs inside the sender's system call, so with one sending
# thread the whole in-network path runs on one CPU; the host baseline's
# processes want the CPUs for themselves and may do better with one thread:
# each contender gets whichever is better for it.
#
# --target udp (default, any user): everything on loopback; the switches are
#   user-space engines. Keys innet_w*, host_w*, ratio_w* = innet / host.
# --target xdp (root): every node in a network namespace of its own, every
#   link a veth pair (innet's netns mode, docs/topology.md), three contenders
#   on the same kind of links:
#
#            ns coord ──────────── ns a0, a1, a2        xdp   the switches' programs in eBPF
#              │ p3      p0..p2 ─┘   │ p1                udp   the same switches, user-space engine
#              │                     │                   host  the switches stopped; in their
#            ns l0 (innet paxos bench: proposer + learner)       namespaces `innet paxos leader`
#                                                                 (coord) and `acceptor` (a0..a2)
#
#   Keys xdp_w* (eBPF), innet_w* (user-space engine in netns), host_w* (host
#   processes in netns), ratio_w* = innet / host and xdp_ratio_w* = xdp /
#   host, with xdp_target_met_w16 (target: xdp_ratio_w16 >= 3, P4xos's 4.3x
#   the anchor).
#
#   The xdp contender's learner also uses eBPF (as Electrode does; issue 12):
#   `innet paxos bench --learner-filter all` attaches the learner filter
#   (src/consensus/learnfilter.bpf.c) to l0's veths for the run; in mode
#   quorum (default) it passes one 2B per quorum, marked, and drops the other
#   two, so the load generator takes 2 datagrams per command instead of 4.
#   The udp and host contenders' learners count every 2B themselves, as
#   before: the host baseline is unchanged. Key learner_filter=MODE (none,
#   quorum or redundant: --learner-filter); the filter's counters are logged.
#   --compare-filter adds the xdp fabric without the filter as a contender in
#   the same alternation (xdp_nofilter_w*, filter_gain_w* = xdp / that).

bench_usage() {
	cat <<'EOF2'
usage: bench/run consensus [options]
  --rounds N        measured runs per implementation and load (default 3)
  --duration SEC    measurement window per run (default 3; after 0.5 s warm-up)
  --outstanding L   comma-separated requests in flight (default 1,16)
  --target T        udp (loopback, default) or xdp (root: netns; XDP, user-space
                    engine and host processes over veth)
  --learner-filter M  the xdp contender's learner filter: quorum (default),
                    redundant (drop only the 2Bs after a quorum) or none
  --compare-filter  (xdp) a fourth contender, xdpnf: the xdp fabric without the
                    filter; keys xdp_nofilter_w*, filter_gain_w* = xdp / xdpnf
  --perf            (xdp) perf record -a (cpu-clock) during the first xdp run at the
                    highest load (with T proposer threads if that load runs them);
                    the breakdown by process and object goes to the log
  --gen-threads T   proposer threads of the load generator tried at W > 1 besides
                    one (default: the CPUs, at most 8; 0: one thread only); each
                    contender runs both ways every round and the mode with its
                    higher median counts (key *_wW_gen_threads)
  --quick           1 round of 1 s
EOF2
}

cs_rounds=3
cs_duration=3
cs_loads=1,16
cs_target=udp
cs_filter=quorum
cs_compare=0
cs_perf=0
cs_perf_pid=""
cs_threads=$(nproc 2>/dev/null || echo 2)  # proposer threads tried at W > 1 (--gen-threads)
[ "$cs_threads" -gt 8 ] && cs_threads=8
cs_lpid=""          # bench_spawn sets it
# netns-mode fabric names: this run's own (namespaces innet-NAME-NODE), so a
# bench runs beside the test suite or another fabric on the same machine
CS_XDP_NAME="bench-csx$$"
CS_UDP_NAME="bench-csu$$"

cs_topology() { # file [NAME TARGET]: loopback (no NAME), or netns mode with TARGET
	local name=${2:-bench-consensus} extra=""
	[ -n "${3:-}" ] && extra="\"target\": \"$3\", \"netns\": true, "
	cat >"$1" <<EOF2
{
  "name": "$name", "seed": 1, "addr_base": "127.3.96.0", $extra
  "state_dir": "$BENCH_TMP/fabric-$name",
  "switches": [
    {"name": "coord", "node": 1, "workers": 1, "programs": [{"name": "coord",
      "program": "paxos_coordinator", "udp": [34952], "args": {"acceptors": [0, 1, 2]}}]},
    {"name": "a0", "node": 2, "workers": 1, "programs": [{"name": "acc", "program": "paxos_acceptor",
      "udp": [34952], "args": {"id": 0, "ring": 4096, "learners": [1], "learner_udp": 34953}}]},
    {"name": "a1", "node": 3, "workers": 1, "programs": [{"name": "acc", "program": "paxos_acceptor",
      "udp": [34952], "args": {"id": 1, "ring": 4096, "learners": [1], "learner_udp": 34953}}]},
    {"name": "a2", "node": 4, "workers": 1, "programs": [{"name": "acc", "program": "paxos_acceptor",
      "udp": [34952], "args": {"id": 2, "ring": 4096, "learners": [1], "learner_udp": 34953}}]}
  ],
  "hosts": [{"name": "l0", "node": 101, "addr": "127.3.97.1"}],
  "links": [{"a": "coord", "b": "a0"}, {"a": "coord", "b": "a1"}, {"a": "coord", "b": "a2"},
            {"a": "l0", "b": "coord"}, {"a": "l0", "b": "a0"}, {"a": "l0", "b": "a1"},
            {"a": "l0", "b": "a2"}]
}
EOF2
}

CS_H=127.3.98
cs_host_up() {
	local k
	CS_HOST_PIDS=()
	for k in 0 1 2; do
		bench_spawn "cs_pid" "host-acc$k-$1" "" 120 "$BENCH_INNET_BIN" paxos acceptor \
			--bind "$CS_H.1$k:34952" --id "$k" --learner "$CS_H.1:34953" --ring 4096
		CS_HOST_PIDS+=("$cs_pid")
		bench_wait_ready "$cs_pid" "host-acc$k-$1" "listening" 10
	done
	bench_spawn cs_pid "host-leader-$1" "" 120 "$BENCH_INNET_BIN" paxos leader --bind "$CS_H.9:34952" \
		--acceptor "$CS_H.10:34952" --acceptor "$CS_H.11:34952" --acceptor "$CS_H.12:34952" --active
	CS_HOST_PIDS+=("$cs_pid")
	bench_wait_ready "$cs_pid" "host-leader-$1" "serving" 10
}

cs_host_down() {
	local p
	for p in "${CS_HOST_PIDS[@]}"; do bench_stop "$p" || true; done
}

# Stop the fabric (if up) and fail: the fabric's switches (and in netns
# mode its namespaces) are things bench_cleanup does not know about.
cs_die() {
	local t
	cs_nshost_down
	for t in topo topo-xdp topo-udp; do
		[ -e "$BENCH_TMP/$t.json" ] && "$BENCH_INNET_BIN" fabric down "$BENCH_TMP/$t.json" >/dev/null 2>&1
	done
	bench_die "$@"
}

# netns mode: the host baseline in the namespaces of a fabric whose switches
# are stopped (the same veths the user-space engine's fabric used). The
# leader binds coord's address on the link to l0 (where the client sends);
# the acceptors' replies reach it by a route through their link to coord.
CS_NS_PIDS=()
cs_ns_addr() { # TOPO NODE PEER: the address of NODE's port toward PEER
	"$BENCH_INNET_BIN" fabric show "$1" --json | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
for s in d["switches"]:
    if s["name"] == sys.argv[1]:
        print([p["addr"] for p in s["ports"] if p["peer"] == sys.argv[2]][0])' "$2" "$3"
}
cs_nshost_up() { # TOPO NAME TAG
	local topo=$1 name=$2 tag=$3 k lead acc gw
	for k in coord a0 a1 a2; do
		"$BENCH_INNET_BIN" fabric stop "$topo" "$k" >/dev/null || cs_die "fabric stop $k"
	done
	lead=$(cs_ns_addr "$topo" coord l0)
	CS_NS_ACC=()
	for k in 0 1 2; do
		acc=$(cs_ns_addr "$topo" "a$k" coord)
		gw=$(cs_ns_addr "$topo" coord "a$k")
		CS_NS_ACC+=(--acceptor "$acc:34952")
		ip -n "innet-$name-a$k" route replace "$lead/32" via "$gw" || cs_die "route in a$k"
		bench_spawn cs_pid "nshost-acc$k-$tag" "" 120 ip netns exec "innet-$name-a$k" \
			"$BENCH_INNET_BIN" paxos acceptor --bind "$acc:34952" --id "$k" \
			--learner "$CS_NS_L0:34953" --ring 4096
		CS_NS_PIDS+=("$cs_pid")
		bench_wait_ready "$cs_pid" "nshost-acc$k-$tag" "listening" 10
	done
	bench_spawn cs_pid "nshost-leader-$tag" "" 120 ip netns exec "innet-$name-coord" \
		"$BENCH_INNET_BIN" paxos leader --bind "$lead:34952" "${CS_NS_ACC[@]}" --active
	CS_NS_PIDS+=("$cs_pid")
	bench_wait_ready "$cs_pid" "nshost-leader-$tag" "serving" 10
	CS_NS_LEAD=$lead
}
cs_nshost_down() {
	local p
	for p in "${CS_NS_PIDS[@]}"; do bench_stop "$p" || true; done
	CS_NS_PIDS=()
}

# cs_run IMPL W ROUND [THREADS]: one measured run; sets cs_rate cs_p50 cs_p99.
# IMPL: innet | host (loopback); xdp | udp | nshost (netns). THREADS: the
# load generator's proposer threads (0 or absent: the endpoint proposes).
cs_run() {
	local impl=$1 w=$2 round=$3 threads=${4:-0} tag="$1-w$2-r$3" topo
	local -a gen=()
	if [ "$threads" != 0 ]; then
		gen=(--threads "$threads")
		tag+="-t$threads"
	fi
	case $impl in
	innet | xdp | xdpnf | udp)
		topo=$BENCH_TMP/topo.json
		[ "$impl" = xdp ] && topo=$BENCH_TMP/topo-xdp.json
		[ "$impl" = xdpnf ] && topo=$BENCH_TMP/topo-xdp.json
		[ "$impl" = udp ] && topo=$BENCH_TMP/topo-udp.json
		CS_UP=$topo
		"$BENCH_INNET_BIN" fabric up "$topo" >"$BENCH_TMP/$tag-fabric.out" 2>&1 ||
			cs_die "fabric up failed: $(tail -n 3 "$BENCH_TMP/$tag-fabric.out")"
		local -a lf=()
		if [ "$impl" = xdp ] && [ "$cs_filter" != none ]; then
			lf=(--learner-filter all --filter-mode "$cs_filter")
		fi
		bench_spawn cs_lpid "$tag" "" $((cs_duration + 30)) "$BENCH_INNET_BIN" paxos bench \
			--topology "$topo" --name l0 --duration "$cs_duration" --outstanding "$w" "${lf[@]}" "${gen[@]}"
		if [ "$impl" = xdp ] && [ "$cs_perf" = 1 ] && [ -z "${CS_PERF_DONE:-}" ] &&
			[ "$w" = "${cs_loads##*,}" ] && [ "$threads" = "$(cs_modes "$w" 0 | awk '{ print $NF }')" ]; then
			# the measured window only (the bench warms up for 0.5 s)
			CS_PERF_DONE=1
			sleep 0.7
			bench_perf_record cs_perf_pid "$(bench_calc %.1f "$cs_duration * 0.8")"
		fi
		;;
	host)
		cs_host_up "$tag"
		bench_spawn cs_lpid "$tag" "" $((cs_duration + 30)) "$BENCH_INNET_BIN" paxos bench \
			--bind "$CS_H.1:34953" --coordinator "$CS_H.9:34952" --acceptor "$CS_H.10:34952" \
			--acceptor "$CS_H.11:34952" --acceptor "$CS_H.12:34952" --duration "$cs_duration" \
			--outstanding "$w" "${gen[@]}"
		;;
	nshost)
		topo=$BENCH_TMP/topo-udp.json
		CS_UP=$topo
		"$BENCH_INNET_BIN" fabric up "$topo" >"$BENCH_TMP/$tag-fabric.out" 2>&1 ||
			cs_die "fabric up failed: $(tail -n 3 "$BENCH_TMP/$tag-fabric.out")"
		cs_nshost_up "$topo" "$CS_UDP_NAME" "$tag"
		bench_spawn cs_lpid "$tag" "" $((cs_duration + 30)) ip netns exec "innet-$CS_UDP_NAME-l0" \
			"$BENCH_INNET_BIN" paxos bench --bind "$CS_NS_L0:34953" \
			--coordinator "$CS_NS_LEAD:34952" "${CS_NS_ACC[@]}" --duration "$cs_duration" \
			--outstanding "$w" "${gen[@]}"
		;;
	esac
	bench_wait "$cs_lpid" || cs_die "$tag: load generator failed: $(tail -n 3 "$BENCH_TMP/$tag.err")"
	if [ -n "${cs_perf_pid:-}" ]; then
		bench_perf_report "$cs_perf_pid" "$BENCH_TMP/perf-$tag.txt" comm,dso 25 \
			"the measured window of $tag"
		cs_perf_pid=""
	fi
	case $impl in
	host)
		cs_host_down
		# The baseline batches as the switch workers do: say how much.
		bench_log "$tag host leader: $(grep -o 'requests.*sendmmsg' "$BENCH_TMP/host-leader-$tag.err" || echo 'no I/O summary')"
		;;
	nshost)
		cs_nshost_down
		bench_log "$tag host leader: $(grep -o 'requests.*sendmmsg' "$BENCH_TMP/nshost-leader-$tag.err" || echo 'no I/O summary')"
		;;
	xdp | xdpnf)
		# every command's messages in eBPF? (hand-offs would show here)
		bench_log "$tag: $("$BENCH_INNET_BIN" ctl --fabric "$topo" --switch a0 stats | grep -E '^prog' | head -n 1)"
		if [ "$impl" = xdp ] && [ "$cs_filter" != none ]; then
			bench_log "$tag: $(grep -o 'learner_filter .*' "$BENCH_TMP/$tag.err" || echo 'learner_filter: no counters')"
		fi
		;;
	esac
	if [ -n "${CS_UP:-}" ]; then
		"$BENCH_INNET_BIN" fabric down "$CS_UP" >/dev/null 2>&1 || true
		CS_UP=
	fi
	cs_rate=$(bench_kv cmds_per_s "$BENCH_TMP/$tag.out")
	cs_p50=$(bench_kv p50_us "$BENCH_TMP/$tag.out")
	cs_p99=$(bench_kv p99_us "$BENCH_TMP/$tag.out")
	bench_log "$impl W=$w round $round: $cs_rate cmds/s, p50 ${cs_p50} us, p99 ${cs_p99} us"
	bench_record impl="$impl" outstanding="$w" round="$round" gen_threads="$threads" \
		cmds_per_s="$cs_rate" p50_us="$cs_p50" p99_us="$cs_p99" \
		timeouts="$(bench_kv timeouts "$BENCH_TMP/$tag.out")"
}

# The load generator at its best for each contender: at W > 1 each contender
# runs once with one thread (the endpoint proposes) and once with cs_threads
# proposer threads in every round (one first in even rounds, threads first
# in odd ones); after the rounds the mode with the higher median counts for
# it, all its figures from that mode's runs (cs_pick). On a veth the
# in-network path runs in the sender's system call, so the XDP fabric gains
# from senders on more CPUs; the host baseline's processes need those CPUs
# themselves and may not. At W=1 the hand-off between threads is pure
# latency: one thread only.
cs_modes() { # W ROUND: the generator modes of that run, in order
	if [ "$1" -le 1 ] || [ "$cs_threads" = 0 ]; then
		echo 0
	elif [ $(($2 % 2)) = 0 ]; then
		echo "0 $cs_threads"
	else
		echo "$cs_threads 0"
	fi
}

# cs_run_modes IMPL W ROUND: its runs of this round, recorded per mode in
# cs_{rate,p50,p99}_IMPL_gMODE.
cs_run_modes() {
	local impl=$1 w=$2 round=$3 g
	for g in $(cs_modes "$w" "$round"); do
		cs_run "$impl" "$w" "$round" "$g"
		local -n ra="cs_rate_${impl}_g$g" pa="cs_p50_${impl}_g$g" qa="cs_p99_${impl}_g$g"
		ra+=("$cs_rate"); pa+=("$cs_p50"); qa+=("$cs_p99")
		unset -n ra pa qa
	done
}

# cs_pick IMPL W: the mode with the higher median rate; its runs become
# cs_{rate,p50,p99}_IMPL (what cs_medians reads).
cs_pick() {
	local impl=$1 w=$2 g m best="" bm=-1 said=""
	for g in 0 $([ "$cs_threads" != 0 ] && echo "$cs_threads"); do
		local -n rates="cs_rate_${impl}_g$g"
		if [ "${#rates[@]}" -gt 0 ]; then
			m=$(bench_median "${rates[@]}")
			said+=" $([ "$g" = 0 ] && echo "one thread" || echo "$g threads") $(bench_calc %.0f "$m")"
			if awk -v a="$m" -v b="$bm" 'BEGIN { exit !(a + 0 > b + 0) }'; then
				best=$g bm=$m
			fi
		fi
		unset -n rates
	done
	local -n src_r="cs_rate_${impl}_g$best" src_p="cs_p50_${impl}_g$best" src_q="cs_p99_${impl}_g$best"
	local -n dst_r="cs_rate_$impl" dst_p="cs_p50_$impl" dst_q="cs_p99_$impl"
	# namerefs: these write cs_{rate,p50,p99}_IMPL
	# shellcheck disable=SC2034
	dst_r=("${src_r[@]}")
	# shellcheck disable=SC2034
	dst_p=("${src_p[@]}")
	# shellcheck disable=SC2034
	dst_q=("${src_q[@]}")
	unset -n src_r src_p src_q dst_r dst_p dst_q
	bench_log "$impl W=$w: medians by generator mode:$said cmds/s; counts: $([ "$best" = 0 ] && echo "one thread" || echo "$best threads")"
	cs_keys+=("${CS_PRE[$impl]}_w${w}_gen_threads=$best")
}

cs_keys=()
# the RESULT key prefix of each contender
declare -A CS_PRE=([innet]=innet [host]=host [xdp]=xdp [udp]=innet [nshost]=host [xdpnf]=xdp_nofilter)
cs_medians() {
	local pre=$1 w=$2 impl=$3
	local -n rate="cs_rate_$impl" p50="cs_p50_$impl" p99="cs_p99_$impl"
	cs_med=$(bench_median "${rate[@]}")
	cs_keys+=("${pre}_w${w}_cmds_per_s=$(bench_calc %.0f "$cs_med")"
		"${pre}_w${w}_p50_us=$(bench_median "${p50[@]}")"
		"${pre}_w${w}_p99_us=$(bench_median "${p99[@]}")")
}

bench_main() {
	while [ $# -gt 0 ]; do
		case $1 in
		--rounds) cs_rounds=$2; shift 2 ;;
		--duration) cs_duration=$2; shift 2 ;;
		--outstanding) cs_loads=$2; shift 2 ;;
		--target) cs_target=$2; shift 2 ;;
		--learner-filter) cs_filter=$2; shift 2 ;;
		--compare-filter) cs_compare=1; shift ;;
		--gen-threads) cs_threads=$2; shift 2 ;;
		--perf)
			command -v perf >/dev/null || bench_usage_error "--perf needs perf (Debian: linux-perf)"
			cs_perf=1; shift ;;
		--quick) cs_rounds=1; cs_duration=1; shift ;;
		-h|--help) bench_usage; exit 0 ;;
		*) bench_usage_error "unknown option $1" ;;
		esac
	done
	local -a impls
	case $cs_target in
	udp) impls=(innet host) ;;
	xdp)
		[ "$(id -u)" -eq 0 ] || bench_usage_error "--target xdp needs root (network namespaces, XDP)"
		impls=(xdp udp nshost)
		if [ "$cs_compare" = 1 ]; then impls=(xdp xdpnf udp nshost); fi
		;;
	*) bench_usage_error "--target is udp or xdp" ;;
	esac
	case $cs_threads in
	[0-8]) ;;
	*) bench_usage_error "--gen-threads is 0 to 8" ;;
	esac
	case $cs_filter in
	quorum | redundant | none) ;;
	*) bench_usage_error "--learner-filter is quorum, redundant or none" ;;
	esac
	bench_build innet
	cs_topology "$BENCH_TMP/topo.json"
	if [ "$cs_target" = xdp ]; then
		cs_topology "$BENCH_TMP/topo-xdp.json" "$CS_XDP_NAME" xdp
		cs_topology "$BENCH_TMP/topo-udp.json" "$CS_UDP_NAME" udp
		CS_NS_L0=$("$BENCH_INNET_BIN" fabric show "$BENCH_TMP/topo-udp.json" --json |
			/usr/bin/python3 -c 'import json,sys; print([h["addr"] for h in json.load(sys.stdin)["hosts"] if h["name"]=="l0"][0])')
	fi
	bench_param target "$cs_target"
	bench_param rounds "$cs_rounds"
	bench_param duration_s "$cs_duration"
	bench_param outstanding "$cs_loads"
	bench_param value_bytes 16
	bench_param acceptors 3
	if [ "$cs_target" = xdp ]; then bench_param learner_filter "$cs_filter"; fi
	bench_param gen_threads "$cs_threads"
	local w r g impl order i n=${#impls[@]}
	local -a loads
	IFS=, read -r -a loads <<<"$cs_loads"
	for w in "${loads[@]}"; do
		for impl in "${impls[@]}"; do
			local -a "cs_rate_$impl=()" "cs_p50_$impl=()" "cs_p99_$impl=()"
			for g in 0 "$cs_threads"; do
				local -a "cs_rate_${impl}_g$g=()" "cs_p50_${impl}_g$g=()" "cs_p99_${impl}_g$g=()"
			done
		done
		for ((r = 0; r < cs_rounds; r++)); do
			# A B C, then C B A, ...: no contender always runs first
			order=()
			for ((i = 0; i < n; i++)); do
				if [ $((r % 2)) = 0 ]; then order+=("${impls[$i]}"); else order+=("${impls[$((n - 1 - i))]}"); fi
			done
			for impl in "${order[@]}"; do
				cs_run_modes "$impl" "$w" "$r"
			done
		done
		for impl in "${impls[@]}"; do cs_pick "$impl" "$w"; done
		local ir hr xr
		if [ "$cs_target" = udp ]; then
			cs_medians innet "$w" innet; ir=$cs_med
			cs_medians host "$w" host; hr=$cs_med
		else
			cs_medians xdp "$w" xdp; xr=$cs_med
			cs_medians innet "$w" udp; ir=$cs_med
			cs_medians host "$w" nshost; hr=$cs_med
			cs_keys+=("xdp_ratio_w${w}=$(bench_calc %.2f "$xr / $hr")")
			if [ "$cs_compare" = 1 ]; then
				cs_medians xdp_nofilter "$w" xdpnf
				cs_keys+=("filter_gain_w${w}=$(bench_calc %.2f "$xr / $cs_med")")
			fi
			[ "$w" = 16 ] && cs_keys+=("xdp_target_met_w16=$(bench_calc %d "($xr / $hr) >= 3")")
		fi
		cs_keys+=("ratio_w${w}=$(bench_calc %.2f "$ir / $hr")")
	done
	if [ "$cs_target" = xdp ]; then cs_keys+=("learner_filter=$cs_filter"); fi
	bench_result "${cs_keys[@]}"
}
