# shellcheck shell=bash
# bench: innet kv coordinator failover under load: how long acknowledgements stop when the coordinator switch is killed (pause p50/max over several kills)
# timeout: 900
#
# bench/failover.sh — sourced by bench/run (see bench/lib.sh).
#
#   kvload.py (C clients, SET/GET) ──RESP──▶ r0,r1,r2 ──▶ coord switch ──▶ a0,a1,a2
#                                                 └─ after the kill ──▶ b0 (backup coordinator)
#
# Each round brings up a fresh copy of examples/kv-faults.json (coordinator
# switch, 3 acceptor switches, 3 replicas, backup coordinator b0; 5% loss,
# duplication and reordering on every acceptor link unless --rates says
# otherwise), runs tools/linearizability/kvload.py for --seconds, and kills
# the coordinator switch (SIGKILL) at --kill-at seconds. The replicas' proposers
# notice that nothing of theirs is chosen any more and fail over to b0, which
# runs phase 1 and serves. From the recorded history (every operation's
# invocation and response time):
#
#   pause    the longest interval without any acknowledgement (any client)
#            that ends after the kill: how long the store stopped answering
#   write pause  the same for SET acknowledgements alone (reads do not need
#            the coordinator: they go on while writes wait for the failover)
#   slowest  the longest time any operation took in the round
#
# (tools/linearizability/pauses.py computes them.) Both pauses are taken over
# the load: its operations until the last one invoked, not kvload.py's
# sequential final reads of every key (a slow read there is one operation, not
# a store that stopped; slowest counts it).
#
# --target xdp runs the switches on the XDP target instead: each in a network
# namespace of its own, the links veth pairs, the faults netem on the veths
# (the kernel's, on each link's wire), each replica's clients in its own
# namespace (kvload.py clients split evenly, histories merged); the
# killed coordinator's eBPF program goes with its process. The round checks
# that the acceptors ran in eBPF (their xdp counters).
#
# The round also checks the history for linearizability (lincheck.py) and that
# b0 took over. RESULT: pause_p50_ms, pause_max_ms (target: max <= 500 at the
# default 5%, <= 1000 with --faults 0.2), write_pause_p50_ms, write_pause_max_ms,
# slowest_max_ms, and the pause before the kill for comparison (the longest
# gap between acknowledgements under the same load without a failure).

bench_usage() {
	cat <<'EOF2'
usage: bench/run failover [options]
  --kills N         rounds, one coordinator kill each (default 7)
  --seconds S       load per round (default 4)
  --kill-at S       kill the coordinator switch S seconds into the load (default 1.5)
  --clients N       kvload.py clients (default 12, spread over the 3 replicas)
  --rates L,D,R     loss, duplication, reordering on the acceptor links
                    (default: examples/kv-faults.json's 0.05,0.05,0.05)
  --faults RATE     RATE loss, duplication and reordering on every link: the
                    acceptor links and the replicas' links to the coordinator
  --target udp|xdp the switches on the user-space engine over loopback (udp,
                    the default) or on XDP in network namespaces (root)
  --quick           3 kills
EOF2
}

fo_kills=7
fo_seconds=4
fo_kill_at=1.5
fo_clients=12
fo_rates=""
fo_faults=""
fo_target=udp
FO_NS=""      # --target xdp: the namespaces' prefix (the replica rK's is ${FO_NS}rK)
FO_R=()        # the replicas' addresses
FO_PORT=6396
FO_H=127.70.31

fo_down() {
	timeout 60 "$BENCH_INNET_BIN" kv down "$BENCH_TMP/topo.json" >/dev/null 2>&1 || true
}

fo_die() {
	fo_down
	bench_die "$@"
}

fo_now() { /usr/bin/python3 -c 'import time; print(time.monotonic())'; }

# fo_round K: one kill under load; sets fo_pause fo_wpause fo_slowest fo_before
fo_round() {
	local k=$1 tag="kill$1" t_kill
	fo_down
	timeout 60 "$BENCH_INNET_BIN" kv up "$BENCH_TMP/topo.json" --port "$FO_PORT" >"$BENCH_TMP/$tag-up.out" 2>&1 ||
		fo_die "$tag: innet kv up failed: $(tail -n 3 "$BENCH_TMP/$tag-up.out")"
	if [ ${#FO_R[@]} -eq 0 ]; then
		read -r -a FO_R < <("$BENCH_INNET_BIN" fabric show "$BENCH_TMP/topo.json" --json | /usr/bin/python3 -c \
			'import json,sys; print(" ".join(h["addr"] for h in json.load(sys.stdin)["hosts"] if h["name"] in ("r0","r1","r2")))')
		[ ${#FO_R[@]} -eq 3 ] || fo_die "three replicas expected, got: ${FO_R[*]}"
	fi
	# The clients: on the user-space engine one kvload.py on loopback; on XDP
	# one beside each replica, in its namespace (kvload.py's TCP to a replica
	# across the faulty fabric would measure TCP's retransmission timeouts,
	# 1 s for a lost SYN, not the store; on loopback no client crosses a
	# faulty link either). Their histories are merged (one monotonic clock).
	local -a lpids=() load=(/usr/bin/python3 "$BENCH_ROOT/tools/linearizability/kvload.py"
		--seconds "$fo_seconds" --keys 8 --timeout 8 --seed "$k")
	if [ -z "$FO_NS" ]; then
		bench_spawn fo_lpid "$tag-load" "" $((fo_seconds + 60)) "${load[@]}" --out "$BENCH_TMP/$tag-r.jsonl" \
			--clients "$fo_clients" "${FO_R[0]}:$FO_PORT" "${FO_R[1]}:$FO_PORT" "${FO_R[2]}:$FO_PORT"
		lpids+=("$fo_lpid")
	else
		local i n base=0
		for i in 0 1 2; do
			n=$(( fo_clients / 3 + (i < fo_clients % 3 ? 1 : 0) ))
			[ "$n" -gt 0 ] || continue
			bench_spawn fo_lpid "$tag-load$i" "" $((fo_seconds + 60)) ip netns exec "${FO_NS}r$i" \
				"${load[@]}" --out "$BENCH_TMP/$tag-r$i.jsonl" --clients "$n" --client-base "$base" \
				"${FO_R[$i]}:$FO_PORT"
			lpids+=("$fo_lpid")
			base=$((base + n))
		done
	fi
	sleep "$fo_kill_at"
	t_kill=$(fo_now)
	"$BENCH_INNET_BIN" fabric stop "$BENCH_TMP/topo.json" coord --kill >/dev/null ||
		fo_die "$tag: could not kill the coordinator switch"
	local p
	for p in "${lpids[@]}"; do
		bench_wait "$p" || fo_die "$tag: kvload failed: $(tail -n 3 "$BENCH_TMP/$tag"-load*.err)"
	done
	cat "$BENCH_TMP/$tag"-r*.jsonl >"$BENCH_TMP/$tag.jsonl"   # (neither lincheck.py nor the figures below need an order)
	grep -q "took over" "$BENCH_TMP/fabric/kv-b0.log" || fo_die "$tag: b0 did not take over"
	if [ "$fo_target" = xdp ]; then
		# the acceptors ran in eBPF (a switch on the user-space engine, the
		# target ignored, would measure the other case)
		local a
		for a in a0 a1 a2; do
			"$BENCH_INNET_BIN" ctl --fabric "$BENCH_TMP/topo.json" --switch "$a" --json stats \
				>"$BENCH_TMP/$tag-$a.json" || fo_die "$tag: ctl stats $a failed"
			/usr/bin/python3 - "$BENCH_TMP/$tag-$a.json" "$a" <<'PYEOF' || fo_die "$tag: acceptor $a did not run on XDP"
import json, sys
p = json.load(open(sys.argv[1]))["programs"][0]
x = p.get("xdp_rx_pkts", 0)
sys.exit(0 if x > 0 and x * 2 > p["rx_pkts"] else 1)
PYEOF
		done
	fi
	/usr/bin/python3 "$BENCH_ROOT/tools/linearizability/lincheck.py" "$BENCH_TMP/$tag.jsonl" \
		>"$BENCH_TMP/$tag-lincheck.out" 2>&1 ||
		fo_die "$tag: history not linearizable: $(tail -n 3 "$BENCH_TMP/$tag-lincheck.out")"
	local m
	m=$(/usr/bin/python3 "$BENCH_ROOT/tools/linearizability/pauses.py" "$BENCH_TMP/$tag.jsonl" "$t_kill") ||
		fo_die "$tag: pauses.py failed on the history"
	fo_pause=$(echo "$m" | sed 's/^pause_ms=\([0-9]*\).*/\1/')
	fo_wpause=$(echo "$m" | sed 's/.*write_pause_ms=\([0-9]*\).*/\1/')
	fo_before=$(echo "$m" | sed 's/.*before_ms=\([0-9]*\).*/\1/')
	fo_slowest=$(echo "$m" | sed 's/.*slowest_ms=\([0-9]*\).*/\1/')
	local took
	took=$(grep -m1 "took over" "$BENCH_TMP/fabric/kv-b0.log" | sed 's/.*took over //')
	bench_log "$tag: $m; b0 took over $took; $(tail -n 1 "$BENCH_TMP/$tag-lincheck.out")"
	bench_record kill="$k" pause_ms="$fo_pause" write_pause_ms="$fo_wpause" before_ms="$fo_before" slowest_ms="$fo_slowest" \
		"$(echo "$m" | grep -o 'acks_after=[0-9]*')" "$(echo "$m" | grep -o 'failed=[0-9]*')"
	# the replicas' failover counters, for where the time went
	bench_log "$tag: $(for i in 0 1 2; do timeout 5 ${FO_NS:+ip netns exec "${FO_NS}r$i"} redis-cli -h "${FO_R[$i]}" -p "$FO_PORT" INFO 2>/dev/null |
		tr -d '\r' | grep -E '^(failovers|resent|recover_sent|phase1_started|nacks|noops):' | tr '\n' ' '; done)"
	local log # the round's replica and coordinator logs, kept with the scratch files
	for log in "$BENCH_TMP"/fabric/kv-*.log; do [ -e "$log" ] && cp "$log" "$BENCH_TMP/$tag-${log##*/}"; done
	fo_down
}

bench_main() {
	while [ $# -gt 0 ]; do
		case $1 in
		--kills) fo_kills=$2; shift 2 ;;
		--seconds) fo_seconds=$2; shift 2 ;;
		--kill-at) fo_kill_at=$2; shift 2 ;;
		--clients) fo_clients=$2; shift 2 ;;
		--rates) fo_rates=$2; shift 2 ;;
		--faults)
			[[ $2 =~ ^(0(\.[0-9]+)?|1(\.0*)?)$ ]] || bench_usage_error "--faults: expected a rate in [0, 1], got '$2'"
			fo_faults=$2; fo_rates="$2,$2,$2"; shift 2 ;;
		--quick) fo_kills=3; shift ;;
		--target)
			case ${2:-} in udp|xdp) fo_target=$2 ;; *) bench_usage_error "--target: udp or xdp, not '${2:-}'" ;; esac
			shift 2 ;;
		-h|--help) bench_usage; exit 0 ;;
		*) bench_usage_error "unknown option $1" ;;
		esac
	done
	command -v redis-cli >/dev/null || bench_die "redis-cli not installed (redis-tools)"
	if [ "$fo_target" = xdp ]; then
		[ "$(id -u)" -eq 0 ] || bench_die "--target xdp needs root (network namespaces, XDP)"
	fi
	bench_build innet
	local -a rates=() where=(--addr-base 127.70.30.0 --hosts "$FO_H")
	[ -n "$fo_rates" ] && rates=(--rates "$fo_rates")
	# (a name of its own per run: namespaces innet-bench-fo$$-*)
	[ "$fo_target" = xdp ] && { where=(--target xdp); FO_NS="innet-bench-fo$$-"; }
	/usr/bin/python3 "$BENCH_ROOT/tools/topology/relocate.py" "$BENCH_ROOT/examples/kv-faults.json" \
		"$BENCH_TMP/topo.json" --name "bench-fo$$" --state-dir "$BENCH_TMP/fabric" \
		"${where[@]}" "${rates[@]}" || bench_die "relocate.py failed"
	if [ -n "$fo_faults" ]; then
		# the replicas' links to the coordinator too (kv-faults.json leaves them clean)
		mv "$BENCH_TMP/topo.json" "$BENCH_TMP/topo-acc.json"
		/usr/bin/python3 "$BENCH_ROOT/tools/topology/relocate.py" "$BENCH_TMP/topo-acc.json" \
			"$BENCH_TMP/topo.json" --rates "$fo_rates" --links r:coord || bench_die "relocate.py failed"
	fi
	bench_param kills "$fo_kills"
	bench_param target "$fo_target"
	bench_param seconds "$fo_seconds"
	bench_param kill_at_s "$fo_kill_at"
	bench_param clients "$fo_clients"
	bench_param rates "${fo_rates:-0.05,0.05,0.05}"
	bench_param faulty_links "$(grep -c '"loss"' "$BENCH_TMP/topo.json")"
	local -a pauses=() wpauses=() slowest=() befores=()
	local k
	for ((k = 1; k <= fo_kills; k++)); do
		fo_round "$k"
		pauses+=("$fo_pause"); wpauses+=("$fo_wpause"); slowest+=("$fo_slowest"); befores+=("$fo_before")
	done
	local pmax wmax smax bmax
	pmax=$(printf '%s\n' "${pauses[@]}" | sort -n | tail -1)
	wmax=$(printf '%s\n' "${wpauses[@]}" | sort -n | tail -1)
	smax=$(printf '%s\n' "${slowest[@]}" | sort -n | tail -1)
	bmax=$(printf '%s\n' "${befores[@]}" | sort -n | tail -1)
	bench_log "pauses (ms): ${pauses[*]}; write pauses (ms): ${wpauses[*]}; slowest operations (ms): ${slowest[*]}"
	bench_result "target=$fo_target" "kills=$fo_kills" "pause_p50_ms=$(bench_median "${pauses[@]}")" "pause_max_ms=$pmax" \
		"write_pause_p50_ms=$(bench_median "${wpauses[@]}")" "write_pause_max_ms=$wmax" "slowest_max_ms=$smax" "gap_before_kill_max_ms=$bmax"
}
