#!/usr/bin/env bash
# agg_mpi_xdp_netns.sh — docs/aggregation.md's MPI example on the XDP target,
# program after program against one switch: `innet switch --target xdp` in a
# namespace of its own, four MPI ranks in namespaces of theirs, an unmodified
# MPI program (examples/agg_mpi_allreduce.c, which checks every all-reduce
# against MPI_Reduce + MPI_Bcast) through the PMPI library (LD_PRELOAD), and
# the job's members written as the docs write them: plain "IP:UDP".
#
#   ns wN  eth0 10.94.N.2 ──veth── sN 10.94.N.1 ┐  ns sw: innet switch --target xdp,
#          (XDP_PASS program, static neighbours) ┘  agg @47800, job 1 of 4 ranks, k 256;
#                                                   ip_forward: the ranks' own TCP (MPI's
#                                                   wire-up, its other collectives) passes
#                                                   the XDP program to the kernel
# mpirun runs inside ns sw and starts one orted per worker namespace through an
# rsh agent (/work/shared/notes/mpi-across-namespaces.md: PMIx listens in
# mpirun's namespace). Rank r sends to its own port's address
# (INNET_AGG_SWITCH is the list of the four).
#
#   1. MPI programs in a row: two, then one killed mid-call (its ranks never
#      finalize), then another: each sums exactly, every rank's 12 sum
#      all-reduces through innet (a new run of the job each time);
#   2. the fast path: the switch's eBPF program handled every packet the agg
#      program received and handed nothing to user space — the plain members
#      were given the ports whose peers they are, so results are multicast by
#      devmap, not by the user-space engine; `innet ctl stats` says so (no
#      SLOW PATH), and the switch warned of nothing at load.
#
# Needs root (namespaces, XDP), mpicc/mpirun and clang (the XDP_PASS object);
# exits 77 (skip) without them. Bounded: every mpirun under timeout; the trap
# kills what is left and deletes the namespaces (their veths and XDP programs
# go with them).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=$(realpath "${INNET:-./build/innet}")
need_root_netns
need_cmd clang mpicc mpirun
[ -n "${INNET_MPI_LIB:-}" ] || make -s build/innet build/libinnet-mpi.so
LIB=$(realpath "${INNET_MPI_LIB:-build/libinnet-mpi.so}")
N=imx$$
DIR=$(mktemp -d /tmp/innet-agg-mpi-xdp.XXXXXX)
CTL=$DIR/ctl.sock
sw_pid=""
cleanup() {
	if [ -n "$sw_pid" ]; then kill "$sw_pid" 2>/dev/null || true; wait "$sw_pid" 2>/dev/null || true; fi
	for ns in sw w0 w1 w2 w3; do ip netns del "$N-$ns" 2>/dev/null || true; done
	rm -rf "$DIR"
}
fail_details() { for f in "$DIR"/*.err "$DIR"/switch.log; do [ -f "$f" ] && { echo "== $f"; tail -n 8 "$f"; }; done >&2; }

cat >"$DIR/pass.c" <<'EOF'
#include <linux/bpf.h>
__attribute__((section("xdp"), used)) int pass(struct xdp_md *ctx) { return XDP_PASS; }
char LICENSE[] __attribute__((section("license"), used)) = "GPL";
EOF
clang -O2 -target bpf -I/usr/include/x86_64-linux-gnu -c "$DIR/pass.c" -o "$DIR/pass.o" ||
	skip "clang cannot build eBPF objects here"
mpicc -O2 -o "$DIR/prog" examples/agg_mpi_allreduce.c -lm

echo "--- namespaces: sw and w0..w3"
ip netns add "$N-sw"
in_ns "$N-sw" ip link set lo up
in_ns "$N-sw" sysctl -qw net.ipv4.ip_forward=1
members="" ports=() switches=""
for w in 0 1 2 3; do
	ip netns add "$N-w$w"
	ip link add eth0 netns "$N-w$w" type veth peer name "s$w" netns "$N-sw"
	in_ns "$N-w$w" ip link set lo up
	in_ns "$N-w$w" ip link set eth0 address "02:94:00:00:0$w:02" up
	in_ns "$N-sw" ip link set "s$w" address "02:94:00:00:0$w:01" up
	in_ns "$N-w$w" ip addr add "10.94.$w.2/24" dev eth0
	in_ns "$N-sw" ip addr add "10.94.$w.1/24" dev "s$w"
	in_ns "$N-w$w" ip route add default via "10.94.$w.1"
	in_ns "$N-w$w" ip neigh replace "10.94.$w.1" lladdr "02:94:00:00:0$w:01" dev eth0 nud permanent
	in_ns "$N-sw" ip neigh replace "10.94.$w.2" lladdr "02:94:00:00:0$w:02" dev "s$w" nud permanent
	in_ns "$N-w$w" ip link set dev eth0 xdpdrv obj "$DIR/pass.o" sec xdp
	members+="${members:+, }\"10.94.$w.2:$((30000 + w))\""   # the docs' format: no port
	ports+=(--port "10.94.$w.1=10.94.$w.2@s$w")
	switches+="${switches:+,}10.94.$w.1:47800"
done
cat >"$DIR/nsrsh.sh" <<'EOF'
#!/bin/sh
H=$1; shift
exec ip netns exec "$H" unshare --uts /bin/sh -c "hostname $H; $*"
EOF
chmod +x "$DIR/nsrsh.sh"

ip netns exec "$N-sw" timeout 300 "$INNET" switch --name "$N" --ctl "$CTL" --target xdp "${ports[@]}" \
	--program agg@47800 --args "{\"k\": 256, \"jobs\": [{\"id\": 1, \"workers\": 4, \"slots\": 64,
		\"members\": [$members]}]}" 2>"$DIR/switch.log" &
sw_pid=$!
for _ in $(seq 200); do grep -qs ready "$DIR/switch.log" && break; sleep 0.05; done
grep -q ready "$DIR/switch.log" || fail "switch not ready: $(cat "$DIR/switch.log")"
! grep -i "slow path" "$DIR/switch.log" || fail "the switch warned of the slow path at load"

MPI=(ip netns exec "$N-sw" timeout -k 5 90 mpirun --allow-run-as-root --oversubscribe -np 4
	--host "$N-w0,$N-w1,$N-w2,$N-w3" --mca plm_rsh_agent "$DIR/nsrsh.sh" --mca plm_rsh_no_tree_spawn 1
	--mca oob_tcp_if_include 10.94.0.0/16 --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include 10.94.0.0/16
	-x LD_PRELOAD="$LIB" -x INNET_AGG_SWITCH="$switches" -x INNET_AGG_BIND=auto:30000 -x INNET_AGG_JOB=1
	-x INNET_AGG_SLOTS=64 -x INNET_AGG_K=256 -x INNET_AGG_TIMEOUT_MS=5000 -x INNET_AGG_VERBOSE=1)
# run_innet TAG: one program through innet; exact, every rank's 12 sums through innet
run_innet() {
	local t0=$SECONDS
	"${MPI[@]}" "$DIR/prog" >"$DIR/$1.out" 2>"$DIR/$1.err" || fail "$1: the program failed: $(tail -n 5 "$DIR/$1.err")"
	grep -q "agg_mpi_allreduce: ok calls=12 ranks=4" "$DIR/$1.out" || fail "$1: results: $(cat "$DIR/$1.out")"
	[ "$(grep -c "allreduce innet=12 mpi=3 " "$DIR/$1.err")" -eq 4 ] ||
		fail "$1: not every rank's 12 sums through innet: $(cat "$DIR/$1.err")"
	echo "$1: ok in $((SECONDS - t0)) s"
}

echo "--- 1. MPI programs in a row against the switch; one killed mid-call"
run_innet run1
run_innet run2
# ranks_gone: the killed program's ranks are gone (mpirun takes them down
# after its own TERM; the next program binds the same ports, and a rank still
# alive would hold them: "cannot open worker: Address already in use").
# Waits up to 15 s, then kills what is left by PID (the program's path is
# this run's own).
ranks_gone() {
	local i pids
	for i in $(seq 150); do
		pids=$(pgrep -f "^$DIR/prog" || true)
		[ -z "$pids" ] && return 0
		sleep 0.1
	done
	echo "ranks still alive 15 s after the kill: $pids (killed)"
	kill -KILL $pids 2>/dev/null || true
	sleep 0.5
}
rc=0
timeout -s TERM 4 "${MPI[@]}" "$DIR/prog" --bench 65536 100000 >"$DIR/killed.err" 2>&1 || rc=$?
[ "$rc" -eq 124 ] || fail "the long run was not killed mid-way (rc $rc): $(tail -n 5 "$DIR/killed.err")"
echo "killed a program mid-call"
ranks_gone
run_innet run3

echo "--- 2. the fast path: eBPF did it all"
st=$("$INNET" ctl -s "$CTL" --json stats)
read -r rx xrx ho tho mc < <($PY -c "import json,sys; d=json.load(sys.stdin); p=[x for x in d['programs'] if x['name']=='agg'][0]; h=p['handoffs']; print(p['rx_pkts'], p['xdp_rx_pkts'], sum(h.values()) - h['timer'], h['timer'], p['actions']['multicast'])" <<<"$st")
echo "    agg: received $rx, in eBPF $xrx, results multicast $mc; hand-offs to user space: $tho timer arms, $ho others"
[ "$rx" -gt 4000 ] || fail "the switch saw only $rx packets"
[ "$xrx" -eq "$rx" ] || fail "eBPF handled $xrx of $rx packets"
[ "$ho" -eq 0 ] || fail "$ho hand-offs to user space other than timers (results multicast by the slow path?): $st"
# no straggler timer in this job: the timer arms are the job's resets, one
# per program that began a new generation (run 2, the killed one, run 3)
[ "$tho" -eq 3 ] || fail "$tho timer arms handed over, want the 3 resets of the runs after the first"
human=$("$INNET" ctl -s "$CTL" stats)
grep -A1 "^prog agg" <<<"$human"
grep -q "^  xdp .* handled in eBPF" <<<"$human" || fail "no xdp line in the stats: $human"
! grep -q "SLOW PATH" <<<"$human" || fail "stats says slow path: $human"
echo "agg_mpi_xdp_netns: ok"
