# shellcheck shell=bash
# bench: in-network Paxos (coordinator + 3 acceptor switches) vs the same roles as host processes: commands/s, p50/p99
# timeout: 600
#
# bench/consensus.sh — sourced by bench/run (see bench/lib.sh).
#
#   innet:  innet paxos bench (proposer+learner l0) ─REQUEST─▶ coord switch ─2A─▶ a0,a1,a2 switches ─2B─▶ l0
#   host:   innet paxos bench (proposer+learner)    ─REQUEST─▶ innet paxos leader --active
#                                                     ─2A─▶ 3 x innet paxos acceptor ─2B─▶ learner
#
# Same load generator, same protocol, same packet sizes; the in-network side
# runs the switch runtime's programs (src/consensus/coordinator.c,
# acceptor.c), the baseline plain host processes (leader.c, hostacc.c) with
# the same I/O batching as the switch workers: recvmmsg bursts of 32, the
# sends of a burst in one sendmmsg (the leader logs its datagrams per call).
# W requests in flight (W client ids, one request each), 16-byte values.
# Rounds alternate innet, host, host, innet, ... and the medians are compared.

bench_usage() {
	cat <<'EOF2'
usage: bench/run consensus [options]
  --rounds N        measured runs per implementation and load (default 3)
  --duration SEC    measurement window per run (default 3; after 0.5 s warm-up)
  --outstanding L   comma-separated requests in flight (default 1,16)
  --quick           1 round of 1 s
EOF2
}

cs_rounds=3
cs_duration=3
cs_loads=1,16

cs_topology() { # file
	cat >"$1" <<EOF2
{
  "name": "bench-consensus", "seed": 1, "addr_base": "127.3.96.0",
  "state_dir": "$BENCH_TMP/fabric",
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

# Stop the fabric (if up) and fail: the fabric's switches are daemons that
# bench_cleanup does not know about.
cs_die() {
	"$BENCH_INNET_BIN" fabric down "$BENCH_TMP/topo.json" >/dev/null 2>&1 || true
	bench_die "$@"
}

# cs_run IMPL W ROUND: one measured run; sets cs_rate cs_p50 cs_p99
cs_run() {
	local impl=$1 w=$2 round=$3 tag="$1-w$2-r$3"
	if [ "$impl" = innet ]; then
		"$BENCH_INNET_BIN" fabric up "$BENCH_TMP/topo.json" >"$BENCH_TMP/$tag-fabric.out" 2>&1 ||
			cs_die "fabric up failed: $(tail -n 3 "$BENCH_TMP/$tag-fabric.out")"
		bench_spawn cs_lpid "$tag" "" $((cs_duration + 30)) "$BENCH_INNET_BIN" paxos bench \
			--topology "$BENCH_TMP/topo.json" --name l0 --duration "$cs_duration" --outstanding "$w"
	else
		cs_host_up "$tag"
		bench_spawn cs_lpid "$tag" "" $((cs_duration + 30)) "$BENCH_INNET_BIN" paxos bench \
			--bind "$CS_H.1:34953" --coordinator "$CS_H.9:34952" --acceptor "$CS_H.10:34952" \
			--acceptor "$CS_H.11:34952" --acceptor "$CS_H.12:34952" --duration "$cs_duration" \
			--outstanding "$w"
	fi
	bench_wait "$cs_lpid" || cs_die "$tag: load generator failed: $(tail -n 3 "$BENCH_TMP/$tag.err")"
	if [ "$impl" = innet ]; then
		"$BENCH_INNET_BIN" fabric down "$BENCH_TMP/topo.json" >/dev/null 2>&1 || true
	else
		cs_host_down
		# The baseline batches as the switch workers do: say how much.
		bench_log "$tag host leader: $(grep -o 'requests.*sendmmsg' "$BENCH_TMP/host-leader-$tag.err" || echo 'no I/O summary')"
	fi
	cs_rate=$(bench_kv cmds_per_s "$BENCH_TMP/$tag.out")
	cs_p50=$(bench_kv p50_us "$BENCH_TMP/$tag.out")
	cs_p99=$(bench_kv p99_us "$BENCH_TMP/$tag.out")
	bench_log "$impl W=$w round $round: $cs_rate cmds/s, p50 ${cs_p50} us, p99 ${cs_p99} us"
	bench_record impl="$impl" outstanding="$w" round="$round" cmds_per_s="$cs_rate" p50_us="$cs_p50" \
		p99_us="$cs_p99" timeouts="$(bench_kv timeouts "$BENCH_TMP/$tag.out")"
}

bench_main() {
	while [ $# -gt 0 ]; do
		case $1 in
		--rounds) cs_rounds=$2; shift 2 ;;
		--duration) cs_duration=$2; shift 2 ;;
		--outstanding) cs_loads=$2; shift 2 ;;
		--quick) cs_rounds=1; cs_duration=1; shift ;;
		-h|--help) bench_usage; exit 0 ;;
		*) bench_usage_error "unknown option $1" ;;
		esac
	done
	bench_build innet
	cs_topology "$BENCH_TMP/topo.json"
	bench_param rounds "$cs_rounds"
	bench_param duration_s "$cs_duration"
	bench_param outstanding "$cs_loads"
	bench_param value_bytes 16
	bench_param acceptors 3
	local w r impl order ratio
	local -a loads
	IFS=, read -r -a loads <<<"$cs_loads"
	for w in "${loads[@]}"; do
		local -a inn_rate=() inn_p50=() inn_p99=() host_rate=() host_p50=() host_p99=()
		for ((r = 0; r < cs_rounds; r++)); do
			order="innet host"
			[ $((r % 2)) = 1 ] && order="host innet"
			for impl in $order; do
				cs_run "$impl" "$w" "$r"
				if [ "$impl" = innet ]; then
					inn_rate+=("$cs_rate"); inn_p50+=("$cs_p50"); inn_p99+=("$cs_p99")
				else
					host_rate+=("$cs_rate"); host_p50+=("$cs_p50"); host_p99+=("$cs_p99")
				fi
			done
		done
		local ir hr
		ir=$(bench_median "${inn_rate[@]}")
		hr=$(bench_median "${host_rate[@]}")
		ratio=$(bench_calc %.2f "$ir / $hr")
		bench_result "innet_w${w}_cmds_per_s=$(bench_calc %.0f "$ir")" \
			"innet_w${w}_p50_us=$(bench_median "${inn_p50[@]}")" \
			"innet_w${w}_p99_us=$(bench_median "${inn_p99[@]}")" \
			"host_w${w}_cmds_per_s=$(bench_calc %.0f "$hr")" \
			"host_w${w}_p50_us=$(bench_median "${host_p50[@]}")" \
			"host_w${w}_p99_us=$(bench_median "${host_p99[@]}")" \
			"ratio_w${w}=$ratio"
	done
}
