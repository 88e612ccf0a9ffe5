#!/usr/bin/env bash
# kv_remove_replica.sh — a replica down for good no longer stops the log:
# `innet kv remove` takes it out of the trim group through the log, online,
# and `innet kv add` puts it back (examples/kv.json's shape at
# 127.70.20.x/21.x, with a ring of 512 slots per acceptor so that a replica
# that holds trim back stalls the store within a second or two of load):
#   1. 4 clients of random SET/GET on r0 and r1 (kvload.py records the
#      history) for 13 s;
#   2. at 1.5 s `kv stop r2 --kill`: the acceptors' trim stops at r2's last
#      watermark; the ring fills (hi reaches trim + ring) and writes stall —
#      checked, so the test shows the failure it is about;
#   3. `kv remove TOPO r2`: REPLICA REMOVE 2 goes through the log (the replica
#      that receives it reports for learner 2 at once, so the entry gets an
#      instance although the ring is full); trim moves on, writes go on;
#   4. `kv add TOPO r2`: r2 restarts, installs a snapshot, REPLICA ADD 2
#      through the log; trim follows r2 again;
#   5. the history is linearizable (no acknowledged write lost), enough
#      writes were acknowledged after the removal, and all three replicas end
#      with the same keys, store digest and membership (INFO).
# Also: removing the last replica is refused (REPLICA REMOVE through the log,
# by hand: kv remove stops the replica it removes first); bad names are
# usage errors.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=${INNET:-./build/innet}
STATE=/tmp/innet-kv-remove-replica
PORT=6397
RING=512
PY=/usr/bin/python3
need_cmd redis-cli

tmp=$(mktemp -d /tmp/innet-kv-remove-replica-test.XXXXXX)
TOPO=$tmp/topo.json
load=""
fail_details() {
	for f in "$STATE"/kv-*.log; do [ -f "$f" ] && { echo "--- $f"; tail -5 "$f"; }; done >&2
}
cleanup() {
	[ -n "$load" ] && kill "$load" 2>/dev/null || true
	timeout 30 "$INNET" kv down "$TOPO" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
"$PY" tools/topology/relocate.py examples/kv.json "$TOPO" --name kv-remove-replica \
	--state-dir "$STATE" --addr-base 127.70.20.0 --hosts 127.70.21
"$PY" - "$TOPO" $RING <<'PYEOF'
import json, sys
t = json.load(open(sys.argv[1]))
for s in t["switches"]:
    for p in s["programs"]:
        if p["program"] == "paxos_acceptor":
            p["args"]["ring"] = int(sys.argv[2])
json.dump(t, open(sys.argv[1], "w"), indent=1)
PYEOF
timeout 30 "$INNET" kv down "$TOPO" >/dev/null 2>&1 || true
R=(127.70.21.1 127.70.21.2 127.70.21.3)
timeout 60 "$INNET" kv up "$TOPO" --port $PORT >/dev/null
now() { "$PY" -c 'import time; print(time.monotonic())'; }
reg() { "$INNET" ctl --fabric "$TOPO" --switch a0 reg read acc "$1" 0 | awk '{print $3}'; }
info() { timeout 10 redis-cli -h "$1" -p $PORT INFO | tr -d '\r' | grep -E "^$2:" | cut -d: -f2; }

echo "--- usage errors"
rc=0; "$INNET" kv remove "$TOPO" nosuch --port $PORT >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "kv remove of an unknown host: exit $rc, not 2"
rc=0; "$INNET" kv add "$TOPO" a0 --port $PORT >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "kv add of a switch: exit $rc, not 2"
got=$(timeout 10 redis-cli -h "${R[0]}" -p $PORT REPLICA REMOVE 7)
[[ $got == "ERR usage: REPLICA REMOVE|ADD learner-id (0..2)" ]] || fail "REPLICA REMOVE 7: $got"

timeout 90 "$PY" tools/linearizability/kvload.py --out "$tmp/hist.jsonl" --seconds 13 --clients 4 \
	--keys 4 --timeout 8 "${R[0]}:$PORT" "${R[1]}:$PORT" >"$tmp/load.out" &
load=$!

echo "--- r2 down for good: trim stops, the ring fills, the store stalls"
sleep 1.5
timeout 20 "$INNET" kv stop "$TOPO" r2 --kill || fail "kv stop r2"
t_kill=$(now)
trim0=$(reg trim)
for i in $(seq 1 60); do
	[ $(($(reg hi) - $(reg trim))) -ge $RING ] && break
	sleep 0.1
done
sleep 0.5
trim1=$(reg trim) hi1=$(reg hi)
echo "trim $trim0 -> $trim1 since r2 died, hi $hi1 (hi - trim = $((hi1 - trim1)), ring $RING)"
[ $((hi1 - trim1)) -ge $RING ] || fail "the ring did not fill: the test did not set up its case"
ops1=$(info "${R[0]}" commands_applied)
sleep 1
ops2=$(info "${R[0]}" commands_applied)
echo "commands applied by r0 in the last second: $((ops2 - ops1))"
[ $((ops2 - ops1)) -eq 0 ] || fail "the store did not stall with the ring full"

echo "--- kv remove r2: trim goes on"
t_rm0=$(now)
timeout 60 "$INNET" kv remove "$TOPO" r2 --port $PORT || fail "kv remove r2"
t_rm=$(now)
for i in $(seq 1 50); do [ "$(reg trim)" -gt "$trim1" ] && break; sleep 0.1; done
trim2=$(reg trim)
echo "removed in $("$PY" -c "print('%.2f' % ($t_rm - $t_rm0))") s; trim $trim1 -> $trim2"
[ "$trim2" -gt $((trim1 + RING / 2)) ] || fail "trim did not move on after the removal"
[ "$(info "${R[0]}" replicas_removed)" = 2 ] || fail "r0 does not list r2 as removed"
[ "$(info "${R[1]}" replicas_removed)" = 2 ] || fail "r1 does not list r2 as removed"
echo "--- the last replica cannot be removed (REPLICA through the log, by hand)"
cli() { timeout 10 redis-cli -h "${R[0]}" -p $PORT "$@"; }
[ "$(cli REPLICA REMOVE 1)" = 1 ] || fail "REPLICA REMOVE 1 (r1) through r0"
[ "$(cli REPLICA REMOVE 2)" = 0 ] || fail "REPLICA REMOVE 2 again: not 0"
got=$(cli REPLICA REMOVE 0)
[ "$got" = "ERR cannot remove the last replica" ] || fail "REPLICA REMOVE 0 with r1, r2 removed: $got"
[ "$(info "${R[1]}" replicas_removed)" = 1,2 ] || fail "r1 does not list 1,2 as removed"
[ "$(cli REPLICA ADD 1)" = 1 ] || fail "REPLICA ADD 1"
echo "REPLICA REMOVE 1 / REMOVE 2 again / REMOVE 0 (refused) / ADD 1: ok"

echo "--- kv add r2: back from a snapshot, trim follows it again"
timeout 60 "$INNET" kv add "$TOPO" r2 --port $PORT || fail "kv add r2"
[ "$(info "${R[2]}" snapshots_installed)" -ge 1 ] || fail "r2 did not install a snapshot"
for h in "${R[@]}"; do [ -z "$(info "$h" replicas_removed)" ] || fail "$h still lists removed replicas"; done
wait "$load" || fail "kvload failed"
load=""
cat "$tmp/load.out"

echo "--- linearizable, writes after the removal, replicas identical"
"$PY" tools/linearizability/lincheck.py "$tmp/hist.jsonl" ||
	{ cp "$tmp/hist.jsonl" /tmp/kv_remove_replica.hist.jsonl; fail "history not linearizable (kept in /tmp/kv_remove_replica.hist.jsonl)"; }
"$PY" - "$tmp/hist.jsonl" "$t_rm" <<'PYEOF' || fail "too few acknowledged writes after the removal"
import json, sys
h = [json.loads(l) for l in open(sys.argv[1])]
t = float(sys.argv[2])
w = sum(1 for o in h if o["op"] == "set" and o["ret"] is not None and o["call"] > t)
print("acknowledged writes after the removal: %d" % w)
sys.exit(0 if w >= 50 else 1)
PYEOF
ref="$(info "${R[0]}" keys) $(info "${R[0]}" digest)"
for h in "${R[@]}"; do
	got="$(info "$h" keys) $(info "$h" digest)"
	[ "$got" = "$ref" ] || fail "$h: keys/digest $got, ${R[0]}: $ref"
done
echo "keys/digest on every replica: $ref"
echo "PASS"
