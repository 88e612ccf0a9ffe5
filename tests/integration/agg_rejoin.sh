#!/usr/bin/env bash
# agg_rejoin.sh — a worker of an all-reduce job that restarts, or falls out of
# step, comes back (JOIN; docs/aggregation.md "Rejoin"). One switch (agg
# program), one job of 4 workers with the straggler timer on; int32 data that
# every worker can check by itself (`innet allreduce --check`: a call with
# partial results must give, per block, exactly the sum of a subset of the
# workers; one without, the full sum).
#   1. a worker killed and restarted without --join while the others run
#      fails at once with a message that says to join (-EBUSY: its START
#      sees another run in progress), and the others finish exact;
#   2. workers 0-2 and 3 as four processes; worker 3 is killed (kill -9)
#      mid-job and restarted with --join: it starts at the others' next call,
#      every process ends with every call exact, and the others' last calls
#      are complete again (worker 3 is back); with the straggler timer, and
#      (2b) without one;
#   3. a straggler that sleeps longer than the timer falls out of step
#      (-ESTALE: the others do not wait for it once the timer closed it out:
#      their rounds close on the members in, with about one timer fire per
#      slot it missed), rejoins (--rejoin) and is in the sums again; every
#      call exact.
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
	"$INNET" switch --name "agg-rejoin-$$" --ctl "$TMP/ctl.sock" --port "$NET.1" --program "agg@$UDP" --duration 120 \
		--args "{\"k\": 256, \"jobs\": [{\"id\": 5, \"workers\": 4, \"slots\": 16, \"timeout_us\": $1, \"members\": [$members]}]}" \
		2>"$TMP/switch.err" &
	sw_pid=$!
	for _ in $(seq $(slow 100)); do grep -q ready "$TMP/switch.err" && return 0; sleep 0.05; done
	cat "$TMP/switch.err"; fail "switch not ready"
}
stop_switch() { kill "$sw_pid"; wait "$sw_pid" 2>/dev/null || true; sw_pid=""; }
AR=(--switch "$NET.1:$UDP" --bind "$NET.10:31000" --job 5 --workers 4 --slots 16 --k 256 --type int32 --check)
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" "$2"; }

echo "--- 1. a worker restarted without --join while the others run: a clear error, at once"
start_switch 50000
# (--rejoin: a worker that starts later than the 50 ms timer — four processes
# on a loaded machine — or is descheduled that long, is out of the run, and
# the others do not wait for it: it falls out of step, and joins again)
for w in 0 1 2 3; do
	timeout 120 "$INNET" allreduce "${AR[@]}" --worker $w --count 5000 --iters 1500 --timeout-ms 15000 \
		--rejoin >"$TMP/r$w.out" 2>&1 &
	pids+=($!)
done
sleep 0.7
w3=$(pgrep -P "${pids[3]}" || true)
[ -n "$w3" ] && kill -9 "$w3" || fail "worker 3 had already finished: not mid-job"
wait "${pids[3]}" 2>/dev/null && fail "the killed worker exited 0" || true
set +e
t0=$(date +%s%N)
timeout 30 "$INNET" allreduce "${AR[@]}" --worker 3 --count 5000 --iters 1500 --timeout-ms 10000 \
	>"$TMP/nojoin.out" 2>"$TMP/nojoin.err"
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
set -e
echo "rc $rc in $ms ms: $(cat "$TMP/nojoin.err")"
[ $rc -eq 1 ] && grep -q "Device or resource busy (.*in progress.*--join" "$TMP/nojoin.err" ||
	fail "a restart without --join: rc $rc, $(cat "$TMP/nojoin.err")"
[ "$ms" -lt 5000 ] || fail "the restarted worker took $ms ms to fail (its timeout is 10 s)"
for w in 0 1 2; do wait "${pids[$w]}" || fail "worker $w failed: $(cat "$TMP/r$w.out")"; done
pids=()
for w in 0 1 2; do grep -q "check=ok rc=0" "$TMP/r$w.out" || fail "worker $w: check"; done
stop_switch

# kill_and_join TIMEOUT_US ITERS TAG: workers 0-3 as four processes; worker 3
# is killed (kill -9) mid-job and restarted with --join: it starts at the
# others' next call, every process ends with every call exact, and the
# others' last calls are complete again (worker 3 is back)
kill_and_join() {
	local tmo=$1 iters=$2 tag=$3 w f j lp
	start_switch "$tmo"
	for w in 0 1 2 3; do
		timeout 120 "$INNET" allreduce "${AR[@]}" --worker $w --count 20000 --iters "$iters" --timeout-ms 15000 \
			--rejoin >"$TMP/$tag-w$w.out" 2>&1 &
		pids+=($!)
	done
	sleep 0.7
	# the worker itself, not its `timeout` wrapper (whose child it is)
	w3=$(pgrep -P "${pids[3]}" || true)
	[ -n "$w3" ] && kill -9 "$w3" || fail "worker 3 had already finished: not mid-job (machine too fast? raise ITERS)"
	wait "${pids[3]}" 2>/dev/null && fail "the killed worker exited 0" || true
	echo "killed worker 3 (pid $w3) with SIGKILL"
	sleep 0.3
	timeout 120 "$INNET" allreduce "${AR[@]}" --worker 3 --count 20000 --iters "$iters" --timeout-ms 15000 --join \
		--rejoin >"$TMP/$tag-w3-restarted.out" 2>&1 || fail "the restarted worker failed"
	for w in 0 1 2; do wait "${pids[$w]}" || fail "worker $w failed"; done
	pids=()
	cat "$TMP/$tag-w0.out" "$TMP/$tag-w1.out" "$TMP/$tag-w2.out" "$TMP/$tag-w3-restarted.out"
	f=$TMP/$tag-w3-restarted.out
	j=$(field joined_at "$f")
	[ "$j" -gt 0 ] && [ "$j" -lt "$iters" ] || fail "joined at $j: not mid-job"
	[ "$(field done "$f")" -eq $((iters - j)) ] || [ "$(field rejoins "$f")" -gt 0 ] ||
		fail "restarted worker: not every call from $j done"
	grep -q "check=ok rc=0" "$f" || fail "restarted worker: check"
	for w in 0 1 2; do
		f=$TMP/$tag-w$w.out
		grep -q "check=ok rc=0" "$f" || fail "worker $w: check"
		# every call, or (a prompt worker that fell out of step once and
		# rejoined) every call but those it skipped
		[ "$(field done "$f")" -eq "$iters" ] || [ "$(field rejoins "$f")" -gt 0 ] ||
			fail "worker $w: not all $iters calls done"
		# (with the timer, the dead worker's rounds closed without it; without
		# one, the others waited in their call, which the restarted worker
		# may have joined in time: then no call was partial at all)
		[ "$tmo" -eq 0 ] || [ "$(field partial "$f")" -gt 0 ] ||
			fail "worker $w: no partial results while worker 3 was dead?"
		lp=$(field last_partial "$f")
		[ "$lp" -lt $((iters - 1)) ] || fail "worker $w: the last call was still partial (worker 3 not back)"
	done
	echo "restarted worker joined at call $j of $iters; the others' last partial call: $(field last_partial "$TMP/$tag-w0.out")"
	stop_switch
}

echo "--- 2. worker 3 killed (kill -9) mid-job and restarted with --join (timer 50 ms)"
kill_and_join 50000 1500 t50
echo "--- 2b. the same without a straggler timer: the others wait in their call for worker 3; its"
echo "    JOIN puts it out of the run, and their retransmissions close that call without it"
kill_and_join 0 800 t0

echo "--- 3. a straggler out of step (-ESTALE) rejoins"
# (100 ms, 5 timer periods, before calls 0, 100 and 200 of 300: the others
# close their rounds without it and move on tens of calls meanwhile. Their
# 300 calls must take far longer than its first sleep: if they were done
# before its first call, it would start a run of the job of its own.)
start_switch 20000
timeout 120 "$INNET" allreduce "${AR[@]}" --all --count 20000 --iters 300 --timeout-ms 15000 --rejoin \
	--delay-worker 3 --delay-ms 100 --delay-every 100 >"$TMP/straggler.out" 2>&1 || fail "straggler run"
cat "$TMP/straggler.out"
fires=$("$INNET" ctl -s "$TMP/ctl.sock" --json stats |
	/usr/bin/python3 -c "import json,sys; print([p for p in json.load(sys.stdin)['programs'] if p['name']=='agg'][0]['timer_fires'])")
s=$(grep "^RESULT worker=3 " "$TMP/straggler.out")
r=$(sed -n 's/.* rejoins=\([0-9]*\).*/\1/p' <<<"$s")
[ "$r" -ge 1 ] || fail "the straggler never fell out of step: rejoins=$r"
grep -q "check=ok rc=0" <<<"$s" || fail "straggler: check"
# the straggler is out from its first call (it sleeps before call 0), and
# the others do not wait for it while it is out: calls of theirs with the
# full sum (at least 10 calls' blocks not partial) mean it came back into
# the sums after a rejoin. (Whether it is back for the very last call
# depends on where its last sleep fell: the others may finish meanwhile.)
# The rounds it missed closed without a timer wait, but for about one per
# slot each time it fell behind: many more partial blocks than timer fires
# (were every round without it waiting for the timer, as the job did until
# 2026-11-28, each would be one).
blocks=$((300 * ((20000 + 255) / 256)))
for w in 0 1 2; do
	l=$(grep "^RESULT worker=$w " "$TMP/straggler.out")
	grep -q "check=ok rc=0" <<<"$l" || fail "worker $w: check"
	pb=$(sed -n 's/.* partial_blocks=\([0-9]*\).*/\1/p' <<<"$l")
	[ "$pb" -le $((blocks - 10 * 79)) ] || fail "worker $w: $pb of $blocks blocks partial: the straggler never back"
	[ "$pb" -ge $((4 * fires)) ] ||
		fail "worker $w: $pb partial blocks for $fires timer fires: the rounds waited for the timer"
done
echo "timer fires $fires; partial blocks of worker 0: $(sed -n 's/^RESULT worker=0 .* partial_blocks=\([0-9]*\).*/\1/p' "$TMP/straggler.out")"
echo "straggler rejoined $r times; every worker exact"
stop_switch
echo "agg_rejoin: ok"
