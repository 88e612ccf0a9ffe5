#!/usr/bin/env bash
# kv_rejoin.sh — an acceptor switch killed and restarted inside a running KV
# fabric, from the command line, and its join rule end to end:
#   1. `innet kv up` (examples/kv.json's shape at 127.65.20.x/21.x: coordinator,
#      acceptors a0 a1 a2, replicas r0 r1 r2); 6 clients do random SET/GET on
#      4 keys for 10 s (tools/linearizability/kvload.py records the history);
#   2. at 2 s `innet fabric stop TOPO a1 --kill` (a crash): writes go on with
#      the majority a0 a2;
#   3. at 4 s `innet kv rejoin TOPO a1`: a1 restarts with empty state and
#      "join": true (silent), and is joined from a0, a2 and the coordinator
#      (it answers nothing below the instance it may have voted up to, and
#      refuses ballots below what the others promised);
#   4. at 5.5 s `innet fabric stop TOPO a2 --kill`: now every majority needs
#      a1, so writes acknowledged after this prove the restarted a1 votes;
#   5. the history (with a final read of every key at every replica) is
#      linearizable — no acknowledged write lost, no stale read — and every
#      replica ends with the same keys, values and store digest.
# Also: bad switch names are usage errors (exit 2), not crashes.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=${INNET:-./build/innet}
STATE=/tmp/innet-kv-rejoin
PORT=6391
PY=/usr/bin/python3
need_cmd redis-cli

tmp=$(mktemp -d /tmp/innet-kv-rejoin-test.XXXXXX)
TOPO=$tmp/topo.json
load=""
fail_details() {
	for f in "$STATE"/kv-*.log "$STATE"/a1.log; do [ -f "$f" ] && { echo "--- $f"; tail -5 "$f"; }; done >&2
}
cleanup() {
	[ -n "$load" ] && kill "$load" 2>/dev/null || true
	timeout 30 "$INNET" kv down "$TOPO" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
"$PY" tools/topology/relocate.py examples/kv.json "$TOPO" --name kv-rejoin --state-dir "$STATE" \
	--addr-base 127.65.20.0 --hosts 127.65.21
timeout 30 "$INNET" kv down "$TOPO" >/dev/null 2>&1 || true

R=(127.65.21.1 127.65.21.2 127.65.21.3)
timeout 60 "$INNET" kv up "$TOPO" --port $PORT >/dev/null
now() { "$PY" -c 'import time; print(time.monotonic())'; }

echo "--- usage errors"
rc=0; "$INNET" fabric stop "$TOPO" nosuch >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "fabric stop of an unknown switch: exit $rc, not 2"
rc=0; "$INNET" kv rejoin "$TOPO" r0 >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "kv rejoin of a non-acceptor: exit $rc, not 2"
rc=0; "$INNET" fabric start "$TOPO" coord >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "fabric start of a running switch: exit $rc, not 1"
rc=0; "$INNET" fabric restart "$TOPO" a0 --set 'acc.join' >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "fabric restart with a bad --set: exit $rc, not 2"
"$INNET" fabric status "$TOPO" >/dev/null || fail "a usage error disturbed the fabric"

echo "--- load, kill a1, rejoin a1, kill a2"
timeout 60 "$PY" tools/linearizability/kvload.py --out "$tmp/hist.jsonl" --seconds 10 --clients 6 \
	--keys 4 --timeout 8 "${R[0]}:$PORT" "${R[1]}:$PORT" "${R[2]}:$PORT" >"$tmp/load.out" &
load=$!
sleep 2
timeout 20 "$INNET" fabric stop "$TOPO" a1 --kill || fail "fabric stop a1"
t_kill1=$(now)
sleep 2
timeout 30 "$INNET" kv rejoin "$TOPO" a1 | tee "$tmp/rejoin.out" || fail "kv rejoin a1"
t_rejoin=$(now)
sleep 1.5
timeout 20 "$INNET" fabric stop "$TOPO" a2 --kill || fail "fabric stop a2"
t_kill2=$(now)
wait "$load" || fail "kvload failed"
load=""
cat "$tmp/load.out"
"$INNET" fabric status "$TOPO" | grep -E "^a[0-9]" || true
j=$("$INNET" ctl --fabric "$TOPO" --switch a1 reg read acc join_inst 0 | awk '{print $3}')
[ "${j:-0}" -gt 0 ] || fail "a1's join instance is ${j:-unset}: it was not joined past its old votes"
[ "$("$INNET" ctl --fabric "$TOPO" --switch a1 reg read acc joining 0 | awk '{print $3}')" = 0 ] ||
	fail "a1 is still joining"

echo "--- linearizability"
"$PY" tools/linearizability/lincheck.py "$tmp/hist.jsonl" || { cp "$tmp/hist.jsonl" /tmp/kv_rejoin.hist.jsonl; fail "history not linearizable (kept in /tmp/kv_rejoin.hist.jsonl)"; }
"$PY" - "$tmp/hist.jsonl" "$t_kill1" "$t_rejoin" "$t_kill2" <<'PYEOF' || fail "too few acknowledged writes in a phase"
import json, sys
h = [json.loads(l) for l in open(sys.argv[1])]
k1, rj, k2 = float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
def writes(a, b):
    return sum(1 for o in h if o["op"] == "set" and o["ret"] is not None and a < o["call"] < b)
w1, w2 = writes(k1, rj - 1), writes(k2 + 0.5, 1e18)
print("acknowledged writes: %d with a1 down, %d with a2 down after a1 rejoined" % (w1, w2))
sys.exit(0 if w1 >= 20 and w2 >= 20 else 1)
PYEOF

echo "--- replicas identical"
info() { timeout 10 redis-cli -h "$1" -p $PORT INFO | tr -d '\r' | grep -E "^(digest|keys):"; }
ref=$(info "${R[0]}")
for h in "${R[@]}"; do
	[ "$(info "$h")" = "$ref" ] || fail "$h: $(info "$h" | tr '\n' ' ') vs ${R[0]}: $(echo "$ref" | tr '\n' ' ')"
	for k in 0 1 2 3; do
		v=$(timeout 10 redis-cli -h "$h" -p $PORT GET "k$k")
		w=$(timeout 10 redis-cli -h "${R[0]}" -p $PORT GET "k$k")
		[ "$v" = "$w" ] || fail "k$k: $h has '$v', ${R[0]} has '$w'"
	done
done
echo "$ref" | tr '\n' ' '; echo
echo "PASS"
