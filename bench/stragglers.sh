# shellcheck shell=bash
# bench: all-reduce time per call with one worker delayed: no straggler / no mitigation / switch timer
# timeout: 300
#
# bench/stragglers.sh — sourced by bench/run (helpers: bench/lib.sh).
#
# 4 workers (threads of one `innet allreduce --all`) and an innet switch on
# loopback (127.0.78.0/24, any user). Worker 3 sleeps --delay-ms before every
# --every-th call (calls 0, N, 2N, ...). Three cases, same calls:
#   base   nobody delayed, no timer
#   none   worker 3 delayed, no straggler timer (timeout_us 0): everyone waits
#   timer  worker 3 delayed, the job's straggler timer at --timeout-us: the
#          switch emits partial sums and the others go on (docs/aggregation.md)
# Figures are the three prompt workers' time per call: mean (sum/calls),
# median and max, the worst of the three; and what became of the straggler
# (calls it completed, results it was excluded from, its final status).

bench_usage() {
	cat <<'EOF'
usage: bench/run stragglers [options]
  --delay-ms D      straggler's delay before a delayed call (default 50)
  --every N         delay every N-th call (default 5)
  --calls C         all-reduce calls (default 40)
  --count N         int32 elements per call (default 16384)
  --timeout-us T    straggler timer of the "timer" case (default 5000)
  --rounds R        runs per case, alternated, medians reported (default 3)
  --quick           --calls 20 --rounds 1
EOF
}

st_delay=50
st_every=5
st_calls=40
st_count=16384
st_timeout=5000
st_rounds=3

st_parse() {
	while [ $# -gt 0 ]; do
		case $1 in
		--delay-ms) st_delay=${2:?}; shift ;;
		--every) st_every=${2:?}; shift ;;
		--calls) st_calls=${2:?}; shift ;;
		--count) st_count=${2:?}; shift ;;
		--timeout-us) st_timeout=${2:?}; shift ;;
		--rounds) st_rounds=${2:?}; shift ;;
		--quick) st_calls=20; st_rounds=1 ;;
		-h | --help) bench_usage; exit 0 ;;
		*) bench_usage_error "unknown option '$1'" ;;
		esac
		shift
	done
	local v
	for v in "$st_delay" "$st_every" "$st_calls" "$st_count" "$st_timeout" "$st_rounds"; do
		[[ $v =~ ^[0-9]+$ ]] || bench_usage_error "numbers only: '$v'"
	done
	if [ "$st_every" -lt 1 ] || [ "$st_calls" -lt 1 ] || [ "$st_rounds" -lt 1 ]; then
		bench_usage_error "--every, --calls, --rounds >= 1"
	fi
}

# st_run CASE: one run; figures in ST_MEAN ST_MED ST_MAX (ms) and ST_FATE.
st_run() {
	local c=$1 tmo=0 delay=() sw ar members="" w tag="$1-$st_seq"
	st_seq=$((st_seq + 1))
	[ "$c" = timer ] && tmo=$st_timeout
	[ "$c" != base ] && delay=(--delay-worker 3 --delay-ms "$st_delay" --delay-every "$st_every")
	for w in 0 1 2 3; do members+="${members:+,}\"127.0.78.10:$((30000 + w))\""; done
	bench_spawn sw "switch-$tag" "" 120 "$BENCH_INNET_BIN" switch --name "st$$" --ctl "" --port 127.0.78.1 \
		--program agg@47800 --workers 1 \
		--args "{\"k\": 256, \"jobs\": [{\"id\": 1, \"workers\": 4, \"slots\": 64, \"timeout_us\": $tmo, \"members\": [$members]}]}"
	bench_wait_ready "$sw" "switch-$tag" ready 10
	bench_spawn ar "ar-$tag" "" 120 "$BENCH_INNET_BIN" allreduce --switch 127.0.78.1 --bind 127.0.78.10:30000 \
		--job 1 --workers 4 --all --slots 64 --k 256 --type int32 --count "$st_count" --iters "$st_calls" \
		--rto-us 1000 --timeout-ms 3000 "${delay[@]}"
	bench_wait "$ar" || true # the straggler may end with -ESTALE: see its fate below
	bench_stop "$sw" || true
	local out="$BENCH_TMP/ar-$tag.out" line secs med mx
	ST_MEAN=0 ST_MED=0 ST_MAX=0
	for w in 0 1 2; do
		line=$(grep "^RESULT worker=$w " "$out") || bench_die "$c: no result for worker $w"
		[[ $line == *" rc=0 "* ]] || bench_die "$c: prompt worker $w failed: $line"
		secs=$(sed -n 's/.* seconds=\([0-9.]*\) .*/\1/p' <<<"$line")
		med=$(sed -n 's/.* median_s=\([0-9.]*\) .*/\1/p' <<<"$line")
		mx=$(sed -n 's/.* max_s=\([0-9.]*\) .*/\1/p' <<<"$line")
		ST_MEAN=$(bench_calc %.3f "($secs * 1000 / $st_calls > $ST_MEAN) ? $secs * 1000 / $st_calls : $ST_MEAN")
		ST_MED=$(bench_calc %.3f "($med * 1000 > $ST_MED) ? $med * 1000 : $ST_MED")
		ST_MAX=$(bench_calc %.3f "($mx * 1000 > $ST_MAX) ? $mx * 1000 : $ST_MAX")
	done
	line=$(grep "^RESULT worker=3 " "$out") || bench_die "$c: no result for worker 3"
	ST_FATE="done=$(sed -n 's/.* done=\([0-9]*\).*/\1/p' <<<"$line")/$st_calls,excluded=$(sed -n 's/.* excluded=\([0-9]*\) .*/\1/p' <<<"$line"),rc=$(sed -n 's/.* rc=\(-*[0-9]*\) .*/\1/p' <<<"$line")"
	bench_record case="$c" mean_ms="$ST_MEAN" median_ms="$ST_MED" max_ms="$ST_MAX" straggler="$ST_FATE" \
		partial="$(sed -n 's/.* partial=\([0-9]*\) .*/\1/p' <<<"$(grep '^RESULT worker=0 ' "$out")")"
	bench_log "$c: prompt workers mean $ST_MEAN ms, median $ST_MED ms, max $ST_MAX ms per call; straggler $ST_FATE"
}

bench_main() {
	st_parse "$@"
	bench_build innet
	for p in delay_ms:"$st_delay" every:"$st_every" calls:"$st_calls" count:"$st_count" \
		timeout_us:"$st_timeout" rounds:"$st_rounds"; do
		bench_param "${p%%:*}" "${p#*:}"
	done
	bench_param workers 4
	st_seq=0
	local r c order m_base=() m_none=() m_timer=() x_none=() x_timer=() fate_none="" fate_timer=""
	for ((r = 0; r < st_rounds; r++)); do
		order=(base none timer)
		[ $((r % 2)) -eq 1 ] && order=(timer none base)
		for c in "${order[@]}"; do
			st_run "$c"
			case $c in
			base) m_base+=("$ST_MEAN") ;;
			none) m_none+=("$ST_MEAN"); x_none+=("$ST_MAX"); fate_none=$ST_FATE ;;
			timer) m_timer+=("$ST_MEAN"); x_timer+=("$ST_MAX"); fate_timer=$ST_FATE ;;
			esac
		done
	done
	local b n t
	b=$(bench_median "${m_base[@]}")
	n=$(bench_median "${m_none[@]}")
	t=$(bench_median "${m_timer[@]}")
	bench_result "base_ms=$b" "none_ms=$n" "timer_ms=$t" "none_max_ms=$(bench_median "${x_none[@]}")" \
		"timer_max_ms=$(bench_median "${x_timer[@]}")" "speedup=$(bench_calc %.2f "$n / $t")" \
		"straggler_none=$fate_none" "straggler_timer=$fate_timer"
}
