#!/usr/bin/env bash
# agg_mpi.sh — the PMPI interposition library (build/libinnet-mpi.so): an
# unmodified MPI program (examples/agg_mpi_allreduce.c, which checks its
# MPI_Allreduce results against MPI_Reduce + MPI_Bcast: ints exact, floats
# within float32 rounding) run with 4 ranks under mpirun on loopback:
#   1. plain MPI (the program's own baseline);
#   2. LD_PRELOAD=libinnet-mpi.so with a switch: the 12 sum all-reduces of
#      MPI_INT/MPI_FLOAT go through innet (counted per rank), the 3 others
#      (MPI_DOUBLE, MPI_MAX, a split communicator) go to MPI;
#   3. program after program on one switch (the docs' example: members
#      written "IP:UDP"): two more runs through innet after 2., then a run
#      killed mid-call (its ranks never finalize), then two more: each run
#      starts cleanly (a new generation of the job) and sums exactly;
#   4. a rank that cannot open its socket: every rank falls back to MPI;
#   5. the switch gone: the program fails (MPI_ERR_OTHER through the error
#      handler, fatal by default) within the timeout instead of hanging.
# Addresses 127.210.P.0/24 (P from the pid). Skips (77) without mpicc/mpirun.
# INNET_MPI_LIB: the interposition library to test (default build/libinnet-mpi.so).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ROOT=$PWD
for t in mpicc mpirun; do
	need_cmd "$t"
done
[ -n "${INNET_MPI_LIB:-}" ] || make -s build/innet build/libinnet-mpi.so
INNET=${INNET:-$ROOT/build/innet}
LIB=${INNET_MPI_LIB:-$ROOT/build/libinnet-mpi.so}
TMP=$(mktemp -d /tmp/innet-agg-mpi.XXXXXX)
sw_pid=""
cleanup() {
	if [ -n "$sw_pid" ]; then kill "$sw_pid" 2>/dev/null || true; wait "$sw_pid" 2>/dev/null || true; fi
	rm -rf "$TMP"
}

P=$(($$ % 250 + 1))
NET=127.210.$P
UDP=$((47000 + $$ % 500))
mpicc -O2 -o "$TMP/prog" examples/agg_mpi_allreduce.c -lm
MPIRUN=(timeout -k 5 60 mpirun --allow-run-as-root --oversubscribe -np 4 --mca btl "self,tcp"
	--mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)

start_switch() {
	local members="" w
	for w in 0 1 2 3; do members+="${members:+,}\"$NET.10:$((30000 + w))\""; done
	"$INNET" switch --name "agg-mpi-$$" --ctl "" --port "$NET.1" --program "agg@$UDP" --duration 120 \
		--args "{\"k\": 256, \"jobs\": [{\"id\": 3, \"workers\": 4, \"slots\": 32, \"members\": [$members]}]}" \
		2>"$TMP/switch.err" &
	sw_pid=$!
	for _ in $(seq $(slow 100)); do grep -q ready "$TMP/switch.err" && return 0; sleep 0.05; done
	cat "$TMP/switch.err"; fail "switch not ready"
}

echo "--- 1. plain MPI"
"${MPIRUN[@]}" "$TMP/prog" | tee "$TMP/plain.out"
grep -q "agg_mpi_allreduce: ok calls=12 ranks=4" "$TMP/plain.out" || fail "plain MPI run"

echo "--- 2. through innet (LD_PRELOAD)"
start_switch
ENVS=(-x LD_PRELOAD="$LIB" -x INNET_AGG_SWITCH="$NET.1:$UDP" -x INNET_AGG_JOB=3
	-x INNET_AGG_SLOTS=32 -x INNET_AGG_VERBOSE=1 -x INNET_AGG_TIMEOUT_MS=1000)
"${MPIRUN[@]}" "${ENVS[@]}" -x INNET_AGG_BIND="$NET.10:30000" "$TMP/prog" >"$TMP/innet.out" 2>"$TMP/innet.err" ||
	{ cat "$TMP/innet.out" "$TMP/innet.err"; fail "innet run"; }
cat "$TMP/innet.out" "$TMP/innet.err"
grep -q "agg_mpi_allreduce: ok calls=12 ranks=4" "$TMP/innet.out" || fail "results through innet"
for r in 0 1 2 3; do
	grep -q "innet-pmpi: rank $r: allreduce innet=12 mpi=3 " "$TMP/innet.err" ||
		fail "rank $r did not do its 12 sums through innet and 3 others through MPI"
done

echo "--- 3. program after program on one switch; one of them killed mid-call"
# run_innet TAG: one more run through innet; every rank's 12 sums through innet, exact
run_innet() {
	local t0=$SECONDS
	"${MPIRUN[@]}" "${ENVS[@]}" -x INNET_AGG_BIND="$NET.10:30000" "$TMP/prog" >"$TMP/$1.out" 2>"$TMP/$1.err" ||
		{ cat "$TMP/$1.out" "$TMP/$1.err"; fail "$1: the run failed"; }
	grep -q "agg_mpi_allreduce: ok calls=12 ranks=4" "$TMP/$1.out" || fail "$1: results"
	[ "$(grep -c "allreduce innet=12 mpi=3 " "$TMP/$1.err")" -eq 4 ] ||
		fail "$1: not every rank's 12 sums through innet: $(cat "$TMP/$1.err")"
	echo "$1: ok in $((SECONDS - t0)) s"
}
run_innet run2
run_innet run3
# a long run (the bench mode: float all-reduces through innet), killed: its
# ranks die inside MPI_Allreduce, with rounds claimed and never finished
# ranks_gone: the killed program's ranks are gone (mpirun takes them down
# after its own TERM; the next program binds the same ports, and a rank still
# alive would hold them: "cannot open worker: Address already in use").
# Waits up to 15 s, then kills what is left by PID (the program's path is
# this run's own).
ranks_gone() {
	local i pids
	for i in $(seq 150); do
		pids=$(pgrep -f "^$TMP/prog" || true)
		[ -z "$pids" ] && return 0
		sleep 0.1
	done
	echo "ranks still alive 15 s after the kill: $pids (killed)"
	kill -KILL $pids 2>/dev/null || true
	sleep 0.5
}
rc=0
timeout -s TERM 3 "${MPIRUN[@]}" "${ENVS[@]}" -x INNET_AGG_BIND="$NET.10:30000" "$TMP/prog" --bench 65536 100000 \
	>"$TMP/killed.out" 2>&1 || rc=$?
[ "$rc" -eq 124 ] || { cat "$TMP/killed.out"; fail "the long run was not killed mid-way (rc $rc)"; }
echo "killed a run mid-call"
ranks_gone
run_innet run4
run_innet run5

echo "--- 4. a rank cannot bind: everyone falls back to MPI"
"${MPIRUN[@]}" "${ENVS[@]}" -x INNET_AGG_BIND="10.255.255.1:30000" "$TMP/prog" >"$TMP/fb.out" 2>"$TMP/fb.err" ||
	{ cat "$TMP/fb.out" "$TMP/fb.err"; fail "fallback run"; }
grep -q "agg_mpi_allreduce: ok calls=12 ranks=4" "$TMP/fb.out" || fail "fallback results"
grep -q "could not join the innet job" "$TMP/fb.err" || fail "no fallback message"
[ "$(grep -c "allreduce innet=0 mpi=15 " "$TMP/fb.err")" -eq 4 ] || fail "fallback counts: $(cat "$TMP/fb.err")"

echo "--- 5. the switch is gone: a clear error, no hang"
kill "$sw_pid"; wait "$sw_pid" 2>/dev/null || true; sw_pid=""
t0=$SECONDS
rc=0
"${MPIRUN[@]}" "${ENVS[@]}" -x INNET_AGG_TIMEOUT_MS=500 -x INNET_AGG_BIND="$NET.10:30000" "$TMP/prog" \
	>"$TMP/dead.out" 2>"$TMP/dead.err" || rc=$?
[ "$rc" -ne 0 ] || fail "the program succeeded without a switch"
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then fail "mpirun hung (timeout)"; fi
grep -q "through innet failed: Connection timed out" "$TMP/dead.err" || { cat "$TMP/dead.err"; fail "no clear error"; }
echo "failed in $((SECONDS - t0)) s as expected"
echo PASS
