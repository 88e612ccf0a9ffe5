#!/usr/bin/env bash
# agg_rejoin.sh — a worker of an all-reduce job that restarts, or falls out of
# step, comes back (JOIN; docs/aggregation.md "Rejoin"). One switch (agg
# program), one job of 4 workers with the straggler timer on; int32 data that
# every worker can check by itself (`innet allreduce --check`: a call with
# partial results must give, per block, exactly the sum of a subset of the
# workers; one without, the full sum).
#   1. a restarted worker without --join fails at once (-ESTALE), as before;
#   2. workers 0-2 and 3 as four processes; worker 3 is killed (kill -9)
#      mid-job and restarted with --join: it starts at the others' next call,
#      every process ends with every call exact, and the others' last calls
#      are complete again (worker 3 is back);
#   3. a straggler that sleeps longer than the timer, twice, falls a round
#      behind (-ESTALE), rejoins (--rejoin) and finishes the job in step.
# Bounded: every process under timeout; the trap kills what is left.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ROOT=$PWD
INNET=${INNET:-$ROOT/build/innet}
TMP=$(mktemp -d /tmp/innet-agg-rejoin.XXXXXX)
pids=()
sw_pid=""
cleanup() {
	for p in "${pids[@]}" $sw_pid; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}" $sw_pid; do wait "$p" 2>/dev/null || true; done
	rm -rf "$TMP"
}
fail_details() { for f in "$TMP"/*.out; do echo "== $f"; cat "$f"; done >&2; }

P=$(($$ % 250 + 1))
NET=127.211.$P
UDP=$((46000 + $$ % 500))

start_switch() { # timeout_us
	local members="" w
	for w in 0 1 2 3; do members+="${members:+,}\"$NET.10:$((31000 + w))\""; done
	"$INNET" switch --name "agg-rejoin-$$" --ctl "" --port "$NET.1" --program "agg@$UDP" --duration 120 \
		--args "{\"k\": 256, \"jobs\": [{\"id\": 5, \"workers\": 4, \"slots\": 16, \"timeout_us\": $1, \"members\": [$members]}]}" \
		2>"$TMP/switch.err" &
	sw_pid=$!
	for _ in $(seq $(slow 100)); do grep -q ready "$TMP/switch.err" && return 0; sleep 0.05; done
	cat "$TMP/switch.err"; fail "switch not ready"
}
stop_switch() { kill "$sw_pid"; wait "$sw_pid" 2>/dev/null || true; sw_pid=""; }
AR=(--switch "$NET.1:$UDP" --bind "$NET.10:31000" --job 5 --workers 4 --slots 16 --k 256 --type int32 --check)
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" "$2"; }

echo "--- 1. without --join, a restarted worker is stale at once"
start_switch 50000
timeout 60 "$INNET" allreduce "${AR[@]}" --all --count 5000 --iters 3 >"$TMP/warm.out" || fail "warm-up run"
set +e
timeout 30 "$INNET" allreduce "${AR[@]}" --worker 3 --count 5000 --iters 1 --timeout-ms 2000 \
	>"$TMP/nojoin.out" 2>"$TMP/nojoin.err"
rc=$?
set -e
[ $rc -eq 1 ] && grep -q "Stale file handle" "$TMP/nojoin.err" || fail "a restart without --join: rc $rc, $(cat "$TMP/nojoin.err")"
echo "rc $rc: $(cat "$TMP/nojoin.err")"
stop_switch

echo "--- 2. worker 3 killed (kill -9) mid-job and restarted with --join"
start_switch 50000
ITERS=1500
for w in 0 1 2 3; do
	timeout 120 "$INNET" allreduce "${AR[@]}" --worker $w --count 20000 --iters $ITERS --timeout-ms 15000 \
		>"$TMP/w$w.out" 2>&1 &
	pids+=($!)
done
sleep 0.7
# the worker itself, not its `timeout` wrapper (whose child it is)
w3=$(pgrep -P "${pids[3]}" || true)
[ -n "$w3" ] && kill -9 "$w3" || fail "worker 3 had already finished: not mid-job (machine too fast? raise ITERS)"
wait "${pids[3]}" 2>/dev/null && fail "the killed worker exited 0" || true
echo "killed worker 3 (pid $w3) with SIGKILL"
sleep 0.3
timeout 120 "$INNET" allreduce "${AR[@]}" --worker 3 --count 20000 --iters $ITERS --timeout-ms 15000 --join \
	>"$TMP/w3-restarted.out" 2>&1 || fail "the restarted worker failed"
for w in 0 1 2; do wait "${pids[$w]}" || fail "worker $w failed"; done
pids=()
cat "$TMP/w0.out" "$TMP/w1.out" "$TMP/w2.out" "$TMP/w3-restarted.out"
j=$(field joined_at "$TMP/w3-restarted.out")
[ "$j" -gt 0 ] && [ "$j" -lt $ITERS ] || fail "joined at $j: not mid-job"
[ "$(field done "$TMP/w3-restarted.out")" -eq $((ITERS - j)) ] || fail "restarted worker: not every call from $j done"
grep -q "check=ok rc=0" "$TMP/w3-restarted.out" || fail "restarted worker: check"
for w in 0 1 2; do
	f=$TMP/w$w.out
	grep -q "check=ok rc=0" "$f" || fail "worker $w: check"
	[ "$(field done "$f")" -eq $ITERS ] || fail "worker $w: not all $ITERS calls done"
	[ "$(field partial "$f")" -gt 0 ] || fail "worker $w: no partial results while worker 3 was dead?"
	lp=$(field last_partial "$f")
	[ "$lp" -lt $((ITERS - 1)) ] || fail "worker $w: the last call was still partial (worker 3 not back)"
done
echo "restarted worker joined at call $j of $ITERS; the others' last partial call: $(field last_partial "$TMP/w0.out")"
stop_switch

echo "--- 3. a straggler out of step (-ESTALE) rejoins"
start_switch 20000
timeout 120 "$INNET" allreduce "${AR[@]}" --all --count 20000 --iters 300 --timeout-ms 15000 --rejoin \
	--delay-worker 3 --delay-ms 400 --delay-every 100 >"$TMP/straggler.out" 2>&1 || fail "straggler run"
cat "$TMP/straggler.out"
s=$(grep "^RESULT worker=3 " "$TMP/straggler.out")
r=$(sed -n 's/.* rejoins=\([0-9]*\).*/\1/p' <<<"$s")
[ "$r" -ge 1 ] || fail "the straggler never fell out of step: rejoins=$r"
grep -q "check=ok rc=0" <<<"$s" || fail "straggler: check"
for w in 0 1 2; do
	l=$(grep "^RESULT worker=$w " "$TMP/straggler.out")
	grep -q "check=ok rc=0" <<<"$l" || fail "worker $w: check"
	lp=$(sed -n 's/.* last_partial=\([-0-9]*\).*/\1/p' <<<"$l")
	[ "$lp" -lt 299 ] || fail "worker $w: the last call was still partial (straggler not back)"
done
echo "straggler rejoined $r times; every worker exact"
stop_switch
echo "agg_rejoin: ok"
