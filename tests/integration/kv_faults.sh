#!/usr/bin/env bash
# kv_faults.sh — `innet kv` under faults, checked for linearizability
# (examples/kv-faults.json: coordinator switch, 3 acceptor switches, 3
# replicas, a backup coordinator host b0; 5% loss, 5% duplication, 5%
# reordering on every acceptor link):
# KV_FAULTS_RATES=LOSS,DUP,REORDER runs the same test with those rates on
# every link that has emulation (kv_faults_20.sh: 20%, 10%, 10%).
# KV_FAULTS_FILTER=none runs the replicas without the learner filter, which
# netns mode gives them by default.
# KV_FAULTS_TARGET=xdp (root; kv_faults_xdp.sh) runs the switches on the XDP
# target: every node in its own network namespace, every link a veth pair
# whose faults are the kernel's own (netem), the coordinator and acceptors in
# eBPF; a kill -9 of a switch process takes its XDP program with it. The
# load and the checks then run from inside the fabric (replica r0's
# namespace, which reaches every replica through the switches' routes).
#   1. 6 clients (2 per replica) do random SET/GET on 4 keys for 9 s
#      (tools/linearizability/kvload.py records the history);
#   2. at 3 s acceptor a1 is killed (SIGKILL), at 5.5 s the coordinator switch:
#      the replicas fail over to b0, which takes over with a higher ballot;
#   3. the history (with a final read of every key at every replica) must be
#      linearizable (tools/linearizability/lincheck.py): no acknowledged write
#      lost, no stale read; the store kept answering after each kill; every
#      replica ends with the same state; and the same history with one final
#      read falsified must be rejected. The GETs are answered from a read index
#      at every replica, without a log entry (INFO reads_local > 0 at each).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=${INNET:-./build/innet}
TOPO=examples/kv-faults.json
STATE=/tmp/innet-kv-faults
PORT=6390
PY=/usr/bin/python3
need_cmd redis-cli

[ "${KV_FAULTS_TARGET:-udp}" = xdp ] && need_root_netns

tmp=$(mktemp -d /tmp/innet-kv-faults-test.XXXXXX)
IN=()   # how to run a client: on loopback as is, in netns mode from r0's namespace
if [ "${KV_FAULTS_TARGET:-udp}" = xdp ]; then
	STATE=$tmp/state
	"$PY" tools/topology/relocate.py "$TOPO" "$tmp/topology.json" --target xdp --name "kvx$$" \
		--state-dir "$STATE" ${KV_FAULTS_RATES:+--rates "$KV_FAULTS_RATES"}
	echo "switches on the XDP target (netns mode; link faults by the kernel, on each link's wire)"
	TOPO=$tmp/topology.json
	IN=(ip netns exec "innet-kvx$$-r0")
elif [ -n "${KV_FAULTS_RATES:-}" ]; then
	"$PY" tools/topology/relocate.py "$TOPO" "$tmp/topology.json" --rates "$KV_FAULTS_RATES"
	TOPO=$tmp/topology.json
fi
[ -n "${KV_FAULTS_RATES:-}" ] && echo "every emulated link at loss,dup,reorder = $KV_FAULTS_RATES"
load=""
fail_details() { for f in "$STATE"/kv-*.log; do echo "--- $f"; tail -5 "$f"; done >&2; }
cleanup() {
	[ -n "$load" ] && kill "$load" 2>/dev/null || true
	timeout 30 "$INNET" kv down "$TOPO" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
timeout 30 "$INNET" kv down "$TOPO" >/dev/null 2>&1 || true

UP=()
# netns mode: the replicas run the learner filter by default;
# KV_FAULTS_FILTER=none runs them without (innet kv --learner-filter none)
[ -n "${KV_FAULTS_FILTER:-}" ] && UP=(--learner-filter "$KV_FAULTS_FILTER")
timeout 60 "$INNET" kv up "$TOPO" --port $PORT "${UP[@]}" >/dev/null
# the replicas' addresses (127.3.81.x; 10.3.81.x in netns mode)
read -r -a R < <("$INNET" fabric show "$TOPO" --json |
	"$PY" -c 'import json,sys; print(" ".join(h["addr"] for h in json.load(sys.stdin)["hosts"] if h["name"] in ("r0","r1","r2")))')
[ ${#R[@]} -eq 3 ] || fail "three replicas expected, got: ${R[*]}"
pid_of() { "$PY" -c "import json,sys;d=json.load(open('$STATE/fabric.json'));print([s['pid'] for s in d['switches'] if s['name']==sys.argv[1]][0])" "$1"; }
a1=$(pid_of a1)
coord=$(pid_of coord)

t0=$("$PY" -c 'import time; print(time.monotonic())')
timeout 60 "${IN[@]}" "$PY" tools/linearizability/kvload.py --out "$tmp/hist.jsonl" --seconds 9 --clients 6 \
	--keys 4 --timeout 8 "${R[0]}:$PORT" "${R[1]}:$PORT" "${R[2]}:$PORT" >"$tmp/load.out" &
load=$!
sleep 3
kill -9 "$a1"
t_a1=$("$PY" -c 'import time; print(time.monotonic())')
echo "killed acceptor a1 (pid $a1)"
sleep 2.5
kill -9 "$coord"
t_coord=$("$PY" -c 'import time; print(time.monotonic())')
echo "killed the coordinator switch (pid $coord)"
wait "$load" || fail "kvload failed"
load=""
cat "$tmp/load.out"
if [ "${KV_FAULTS_TARGET:-udp}" = xdp ]; then
	# the kernel's faults really happened (the wires' counters, by direction)
	"$INNET" fabric status "$TOPO" | grep '^link' >"$tmp/wires.txt" || true
	head -n 4 "$tmp/wires.txt"
	"$PY" - "$tmp/wires.txt" <<'PYEOF' || fail "the links' faults did not happen: $(cat "$tmp/wires.txt")"
import re, sys
tot = [0, 0, 0, 0]
for l in open(sys.argv[1]):
    m = re.search(r"(\d+) frames, (\d+) lost, (\d+) duplicated, (\d+) reordered", l)
    if m:
        tot = [a + int(b) for a, b in zip(tot, m.groups())]
print("all links: %d frames, %d lost, %d duplicated, %d reordered" % tuple(tot))
f = tot[0]
sys.exit(0 if f > 1000 and all(0.01 * f < x < 0.2 * f for x in tot[1:]) else 1)
PYEOF
	# the acceptors that lived ran in eBPF: asserted from their counters, so
	# that switches which ran on the user-space engine (the target ignored)
	# fail here instead of passing as kv_faults.sh
	for a in a0 a2; do
		"$INNET" ctl --fabric "$TOPO" --switch "$a" --json stats >"$tmp/$a.json" || fail "ctl stats $a"
		"$PY" - "$tmp/$a.json" "$a" <<'PYEOF' || fail "acceptor $a did not run on XDP"
import json, sys
p = json.load(open(sys.argv[1]))["programs"][0]
if "xdp_rx_pkts" not in p:
    sys.exit("%s: no XDP counters in its stats: not on the XDP target" % sys.argv[2])
print("%s: %d of %d packets in eBPF" % (sys.argv[2], p["xdp_rx_pkts"], p["rx_pkts"]))
sys.exit(0 if p["xdp_rx_pkts"] > 0 and p["xdp_rx_pkts"] * 2 > p["rx_pkts"] else 1)
PYEOF
	done
fi
grep -q "took over" "$STATE/kv-b0.log" || fail "the backup coordinator did not take over"
grep "took over" "$STATE/kv-b0.log"

echo "--- linearizability"
"$PY" tools/linearizability/lincheck.py "$tmp/hist.jsonl" || fail "history not linearizable (kept in $tmp)"
# The store kept working: acknowledged operations after each kill.
"$PY" - "$tmp/hist.jsonl" "$t_a1" "$t_coord" <<'PYEOF' || fail "too few operations after the kills"
import json, sys
h = [json.loads(l) for l in open(sys.argv[1])]
ta1, tco = float(sys.argv[2]), float(sys.argv[3])
mid = sum(1 for o in h if o["ret"] is not None and ta1 < o["call"] < tco)
after = sum(1 for o in h if o["ret"] is not None and o["call"] > tco + 1)
writes_after = sum(1 for o in h if o["op"] == "set" and o["ret"] is not None and o["call"] > tco + 1)
print("acknowledged: %d between the kills, %d after the failover (%d writes)" % (mid, after, writes_after))
# reads need no coordinator: during the failover pause they go on
pause = [o for o in h if o["ret"] is not None and tco < o["ret"] < tco + 0.4]
print("acknowledged in the 0.4 s after the coordinator's kill: %d reads, %d writes"
      % (sum(o["op"] == "get" for o in pause), sum(o["op"] == "set" for o in pause)))
sys.exit(0 if mid >= 20 and writes_after >= 20 else 1)
PYEOF
for h in "${R[@]}"; do
	n=$(timeout 10 "${IN[@]}" redis-cli -h "$h" -p $PORT INFO | tr -d '\r' | sed -n 's/^reads_local://p')
	[ "${n:-0}" -gt 0 ] || fail "replica $h answered no read from a read index (reads_local ${n:-none})"
	echo "replica $h: $n reads answered without a log entry"
done

echo "--- replicas identical"
sz=$(timeout 10 "${IN[@]}" redis-cli -h "${R[0]}" -p $PORT DBSIZE)
for h in "${R[@]}"; do
	[ "$(timeout 10 "${IN[@]}" redis-cli -h "$h" -p $PORT DBSIZE)" = "$sz" ] || fail "DBSIZE differs on $h"
	for k in 0 1 2 3; do
		v=$(timeout 10 "${IN[@]}" redis-cli -h "$h" -p $PORT GET "k$k")
		w=$(timeout 10 "${IN[@]}" redis-cli -h "${R[0]}" -p $PORT GET "k$k")
		[ "$v" = "$w" ] || fail "k$k: $h has '$v', ${R[0]} has '$w'"
	done
done

echo "--- the checker rejects this history with a lost write"
"$PY" - "$tmp/hist.jsonl" "$tmp/bad.jsonl" <<'PYEOF' || fail "could not falsify the history"
import json, sys
h = [json.loads(l) for l in open(sys.argv[1])]
# the last read of a key: make it return an acknowledged write that another
# acknowledged write followed, both before the read began
for r in reversed(h):
    if r["op"] != "get" or r["ret"] is None:
        continue
    sets = [o for o in h if o["key"] == r["key"] and o["op"] == "set" and o["ret"] is not None
            and o["ret"] < r["call"]]
    old = [s1 for s1 in sets if any(s2["call"] > s1["ret"] for s2 in sets)]
    if old:
        r["value"] = old[0]["value"]
        break
else:
    sys.exit(1)
with open(sys.argv[2], "w") as f:
    for o in h:
        f.write(json.dumps(o) + "\n")
PYEOF
rc=0; "$PY" tools/linearizability/lincheck.py "$tmp/bad.jsonl" >/dev/null || rc=$?
[ "$rc" -eq 1 ] || fail "falsified history accepted (exit $rc)"
echo "PASS"
