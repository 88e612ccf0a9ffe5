# shellcheck shell=bash
# bench: all-reduce time per call with one worker delayed: no straggler / no mitigation / switch timer
# timeout: 300
#
# bench/stragglers.sh — sourced by bench/run (helpers: bench/lib.sh).
#
# 4 workers (threads of one `innet allreduce --all`) and an innet switch on
# loopback (127.0.78.0/24, any user). Worker 3 sleeps --delay-ms before every
# --every-th call (calls 0, N, 2N, ... of its own iterations). Four cases,
# same calls:
#   base   nobody delayed, no timer
#   none   worker 3 delayed, no straggler timer (timeout_us 0): everyone waits
#   timer  worker 3 delayed, the job's straggler timer at --timeout-us: the
#          switch closes the straggler's rounds without it, puts it out of the
#          run, and the later rounds close on the others at once; worker 3
#          does not rejoin (it ends with -ESTALE: out for good)
#   rejoin the same, and worker 3 rejoins (--rejoin): it is back in the sums
#          from its next call on, until its next sleep
# In every case the prompt workers run with --rejoin: on a loaded machine one
# of them can be held back past the timer too, and is then a straggler like
# any other (it joins again; `prompt_rejoins` counts it).
# Figures are the three prompt workers' time per call: mean (their time over
# the calls they completed), median and max, the worst of the three; how many
# of their calls had partial sums; how many rounds the switch's timer closed
# (`timer_fires`, from the switch's counters: each a wait of --timeout-us,
# a count the machine's load does not blur, out of slots_per_call x calls
# rounds); and what became of the straggler (calls it completed, chunks it
# was excluded from, its final status: 0 = still in the job, -116 = -ESTALE,
# out of the job for good).
# Targets (issue 23): speedup (none / timer, by the means) >= 1.8, and the
# prompt workers' median within 10% of base's, with the straggler rejoining or
# not: *_median_ratio = case median / base median <= 1.10.

bench_usage() {
	cat <<'EOF'
usage: bench/run stragglers [options]
  --delay-ms D      straggler's delay before a delayed call (default 50)
  --every N         delay every N-th call (default 5)
  --calls C         all-reduce calls (default 100)
  --count N         int32 elements per call (default 16384)
  --timeout-us T    straggler timer of the "timer" case (default 5000)
  --rounds R        runs per case, alternated, medians reported (default 5)
  --quick           --calls 20 --rounds 1
EOF
}

st_delay=50
st_every=5
st_calls=100
st_count=16384
st_timeout=5000
st_rounds=5

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

# st_run CASE: one run; figures in ST_MEAN ST_MED ST_MAX (ms), ST_PARTIAL
# (prompt worker 0's calls closed by the timer), ST_DONE, ST_EXCL, ST_RC (the
# straggler's completed calls, excluded chunks, final status) and ST_FATE.
st_run() {
	local c=$1 tmo=0 delay=() sw ar members="" w tag="$1-$st_seq"
	st_seq=$((st_seq + 1))
	local rejoin=(--rejoin --rejoin-except 3)
	if [ "$c" = timer ] || [ "$c" = rejoin ]; then tmo=$st_timeout; fi
	[ "$c" = rejoin ] && rejoin=(--rejoin)
	[ "$c" != base ] && delay=(--delay-worker 3 --delay-ms "$st_delay" --delay-every "$st_every")
	for w in 0 1 2 3; do members+="${members:+,}\"127.0.78.10:$((30000 + w))\""; done
	rm -f "$BENCH_TMP/ctl.sock"
	bench_spawn sw "switch-$tag" "" 120 "$BENCH_INNET_BIN" switch --name "st$$" --ctl "$BENCH_TMP/ctl.sock" --port 127.0.78.1 \
		--program agg@47800 --workers 1 \
		--args "{\"k\": 256, \"jobs\": [{\"id\": 1, \"workers\": 4, \"slots\": 64, \"timeout_us\": $tmo, \"members\": [$members]}]}"
	bench_wait_ready "$sw" "switch-$tag" ready 10
	bench_spawn ar "ar-$tag" "" 120 "$BENCH_INNET_BIN" allreduce --switch 127.0.78.1 --bind 127.0.78.10:30000 \
		--job 1 --workers 4 --all --slots 64 --k 256 --type int32 --count "$st_count" --iters "$st_calls" \
		--rto-us 1000 --timeout-ms 3000 "${delay[@]}" "${rejoin[@]}"
	bench_wait "$ar" || true # the straggler may end with -ESTALE: see its fate below
	# the rounds the straggler timer closed (each a wait of --timeout-us for
	# the workers in it): the load of the machine does not change this count
	ST_FIRES=$("$BENCH_INNET_BIN" ctl -s "$BENCH_TMP/ctl.sock" --json stats 2>/dev/null |
		/usr/bin/python3 -c "import json,sys; print([p for p in json.load(sys.stdin)['programs'] if p['name']=='agg'][0]['timer_fires'])" 2>/dev/null) ||
		ST_FIRES=nan
	bench_stop "$sw" || true
	local out="$BENCH_TMP/ar-$tag.out" line secs med mx ndone rj
	ST_MEAN=0 ST_MED=0 ST_MAX=0 ST_PROMPT_REJOINS=0
	for w in 0 1 2; do
		line=$(grep "^RESULT worker=$w " "$out") || bench_die "$c: no result for worker $w"
		[[ $line == *" rc=0 "* ]] || bench_die "$c: prompt worker $w failed: $line"
		secs=$(sed -n 's/.* seconds=\([0-9.]*\) .*/\1/p' <<<"$line")
		med=$(sed -n 's/.* median_s=\([0-9.]*\) .*/\1/p' <<<"$line")
		mx=$(sed -n 's/.* max_s=\([0-9.]*\) .*/\1/p' <<<"$line")
		ndone=$(sed -n 's/.* done=\([0-9]*\).*/\1/p' <<<"$line")
		rj=$(sed -n 's/.* rejoins=\([0-9]*\).*/\1/p' <<<"$line")
		ST_PROMPT_REJOINS=$((ST_PROMPT_REJOINS + rj))
		[ "$ndone" -gt 0 ] || bench_die "$c: prompt worker $w completed no call: $line"
		# time per completed call (a prompt worker that rejoined skipped some;
		# the time of a call that failed and led to the rejoin is counted)
		ST_MEAN=$(bench_calc %.3f "($secs * 1000 / $ndone > $ST_MEAN) ? $secs * 1000 / $ndone : $ST_MEAN")
		ST_MED=$(bench_calc %.3f "($med * 1000 > $ST_MED) ? $med * 1000 : $ST_MED")
		ST_MAX=$(bench_calc %.3f "($mx * 1000 > $ST_MAX) ? $mx * 1000 : $ST_MAX")
	done
	line=$(grep "^RESULT worker=3 " "$out") || bench_die "$c: no result for worker 3"
	ST_DONE=$(sed -n 's/.* done=\([0-9]*\).*/\1/p' <<<"$line")
	ST_EXCL=$(sed -n 's/.* excluded=\([0-9]*\) .*/\1/p' <<<"$line")
	ST_RC=$(sed -n 's/.* rc=\(-*[0-9]*\) .*/\1/p' <<<"$line")
	ST_REJOINS=$(sed -n 's/.* rejoins=\([0-9]*\).*/\1/p' <<<"$line")
	ST_FATE="done=$ST_DONE/$st_calls,excluded=$ST_EXCL,rc=$ST_RC"
	[ "$c" = rejoin ] && ST_FATE+=",rejoins=${ST_REJOINS:-0}"
	# Worker 0's partial results are counted per chunk of k elements:
	# calls closed by the timer = partial chunks / chunks per call.
	local partial chunks=$(((st_count + 255) / 256))
	partial=$(sed -n 's/.* partial=\([0-9]*\) .*/\1/p' <<<"$(grep '^RESULT worker=0 ' "$out")")
	ST_PARTIAL=$(((${partial:-0} + chunks - 1) / chunks))
	bench_record case="$c" mean_ms="$ST_MEAN" median_ms="$ST_MED" max_ms="$ST_MAX" straggler="$ST_FATE" \
		straggler_done="$ST_DONE" straggler_excluded_chunks="$ST_EXCL" straggler_rc="$ST_RC" \
		partial="$partial" partial_calls="$ST_PARTIAL" prompt_rejoins="$ST_PROMPT_REJOINS" timer_fires="$ST_FIRES"
	bench_log "$c: prompt workers mean $ST_MEAN ms, median $ST_MED ms, max $ST_MAX ms per call," \
		"$ST_PARTIAL of $st_calls calls with partial sums, $ST_FIRES rounds closed by the timer," \
		"$ST_PROMPT_REJOINS prompt rejoins;" \
		"straggler $ST_FATE$([ "$ST_RC" = 0 ] || echo ' (out of the job)')"
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
	local r c order
	local -A mean=() med=() mx=() part=() ndone=() excl=() out=() fate=() prj=() fires=()
	local -A rmean=() rmed=() # this round's, per case
	local sp_r="" spr_r="" mt_r="" mr_r=""
	for ((r = 0; r < st_rounds; r++)); do
		order=(base none timer rejoin)
		[ $((r % 2)) -eq 1 ] && order=(rejoin timer none base)
		for c in "${order[@]}"; do
			st_run "$c"
			mean[$c]+="$ST_MEAN " med[$c]+="$ST_MED " mx[$c]+="$ST_MAX "
			part[$c]+="$ST_PARTIAL " ndone[$c]+="$ST_DONE " excl[$c]+="$ST_EXCL " fires[$c]+="$ST_FIRES "
			prj[$c]=$((${prj[$c]:-0} + ST_PROMPT_REJOINS))
			rmean[$c]=$ST_MEAN rmed[$c]=$ST_MED
			[ "$ST_RC" = 0 ] || out[$c]=$((${out[$c]:-0} + 1))
			fate[$c]=$ST_FATE
		done
		# this round's ratios (the spread over the rounds)
		sp_r+="$(bench_calc %.3f "${rmean[none]} / ${rmean[timer]}") "
		spr_r+="$(bench_calc %.3f "${rmean[none]} / ${rmean[rejoin]}") "
		mt_r+="$(bench_calc %.3f "${rmed[timer]} / ${rmed[base]}") "
		mr_r+="$(bench_calc %.3f "${rmed[rejoin]} / ${rmed[base]}") "
	done
	# Medians over the rounds of each figure.
	local -A m=()
	local key v
	for c in base none timer rejoin; do
		for key in mean med mx part ndone excl fires; do
			declare -n arr=$key
			# shellcheck disable=SC2086 # a list of numbers
			v=$(bench_calc %.3f "$(bench_median ${arr[$c]})")
			unset -n arr
			m[$c.$key]=$v
		done
	done
	local speedup speedup_rejoin mratio mratio_rejoin
	speedup=$(bench_calc %.2f "${m[none.mean]} / ${m[timer.mean]}")
	speedup_rejoin=$(bench_calc %.2f "${m[none.mean]} / ${m[rejoin.mean]}")
	mratio=$(bench_calc %.3f "${m[timer.med]} / ${m[base.med]}")
	mratio_rejoin=$(bench_calc %.3f "${m[rejoin.med]} / ${m[base.med]}")
	# spread KEY LIST: KEY_min=... KEY_max=... of the per-round figures
	# shellcheck disable=SC2086 # LIST is a list of numbers
	spread() { printf '%s_min=%s %s_max=%s' "$1" "$(printf '%s\n' $2 | sort -g | head -n 1)" "$1" \
		"$(printf '%s\n' $2 | sort -g | tail -n 1)"; }
	met() { bench_calc %d "($1) ? 1 : 0"; }
	# shellcheck disable=SC2046 # spread prints KEY=VALUE words
	bench_result "base_ms=${m[base.mean]}" "none_ms=${m[none.mean]}" "timer_ms=${m[timer.mean]}" \
		"base_median_ms=${m[base.med]}" "none_median_ms=${m[none.med]}" "timer_median_ms=${m[timer.med]}" \
		"none_max_ms=${m[none.mx]}" "timer_max_ms=${m[timer.mx]}" \
		"speedup=$speedup" $(spread speedup "$sp_r") \
		"speedup_median=$(bench_calc %.2f "${m[none.med]} / ${m[timer.med]}")" \
		"timer_median_ratio=$mratio" $(spread timer_median_ratio "$mt_r") \
		"timer_partial_calls=$(bench_calc %.0f "${m[timer.part]}")/$st_calls" \
		"timer_fires=$(bench_calc %.0f "${m[timer.fires]}")" "rejoin_timer_fires=$(bench_calc %.0f "${m[rejoin.fires]}")" \
		"slots_per_call=$(((st_count + 255) / 256))" \
		"timer_prompt_rejoins=${prj[timer]:-0}" \
		"straggler_none=${fate[none]}" "straggler_timer=${fate[timer]}" \
		"straggler_timer_done=$(bench_calc %.0f "${m[timer.ndone]}")/$st_calls" \
		"straggler_timer_excluded_chunks=$(bench_calc %.0f "${m[timer.excl]}")" \
		"straggler_timer_out=${out[timer]:-0}/$st_rounds" "straggler_none_out=${out[none]:-0}/$st_rounds" \
		"rejoin_ms=${m[rejoin.mean]}" "rejoin_median_ms=${m[rejoin.med]}" "rejoin_max_ms=${m[rejoin.mx]}" \
		"speedup_rejoin=$speedup_rejoin" $(spread speedup_rejoin "$spr_r") \
		"rejoin_median_ratio=$mratio_rejoin" $(spread rejoin_median_ratio "$mr_r") \
		"rejoin_partial_calls=$(bench_calc %.0f "${m[rejoin.part]}")/$st_calls" \
		"rejoin_prompt_rejoins=${prj[rejoin]:-0}" \
		"straggler_rejoin=${fate[rejoin]}" \
		"straggler_rejoin_done=$(bench_calc %.0f "${m[rejoin.ndone]}")/$st_calls" \
		"straggler_rejoin_out=${out[rejoin]:-0}/$st_rounds" \
		"target_speedup=1.80" "target_median_ratio=1.10" \
		"speedup_met=$(met "$speedup >= 1.8")" "speedup_rejoin_met=$(met "$speedup_rejoin >= 1.8")" \
		"median_met=$(met "$mratio <= 1.10")" "median_rejoin_met=$(met "$mratio_rejoin <= 1.10")"
	bench_log "timer against none: mean ${speedup}x faster (rejoin ${speedup_rejoin}x), prompt median" \
		"${mratio}x base's (rejoin ${mratio_rejoin}x); the straggler ended out of the job in" \
		"${out[timer]:-0} of $st_rounds timer runs (medians of $st_rounds rounds)"
}
