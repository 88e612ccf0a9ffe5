#!/usr/bin/env bash
# lb_agents.sh — agents steer the switch: the lb program in proxy mode, policy
# "accel" (P4Mite), one server with a fast CPU unit and a slower accelerator
# unit (`innet lb backend`), an `innet lb agent` beside each, open-loop load
# with steadily renewed flows (`innet lb load --flow-ms`):
#
#   innet lb load ──▶ VIP 127.61.0.100:5300 ──▶ unit 1/0 cpu   127.61.0.21:5321 (20 us, answers .21)
#   (16 flows/thread,        lb, accel        ──▶ unit 1/1 accel 127.61.0.22:5321 (100 us, answers .22)
#    each 250 ms)              ▲ reports :47900   agents probe each unit, report (sealed) to the switch
#
#   1. baseline: the policy prefers one unit P (most replies name it).
#   2. P is made busy (its backend's busy file: 10 ms per request, a 16-deep
#      queue, 500x slower): its agent reports BUSY and a load level near 255
#      (latency >= 10 ms against an idle latency of ~50 us), and within
#      BOUND_S (1.5 s) new flows go to the other unit: the policy splits them
#      by remaining capacity, 256 - level, 2-3 for P against 30-220 for the
#      other unit (1-8 %), so P answers <= 10 % of the replies from
#      t_busy + BOUND_S until it recovers (3 s after t_busy), counted over
#      that whole period (a flow carries ~31 queries, 6 % of a 250 ms
#      window, so single windows are too coarse for a share this small),
#      `innet ctl prog lb show` marks P busy and its new-connection counter
#      grows less than the other unit's.
#   3. P recovers (busy file removed): the agent clears the bit.
#   4. a spoofed report (wrong key) claiming the other unit is down, a
#      replayed one (right key, an old sequence number) and a malformed one
#      are dropped and counted (report_bad_mac, report_replayed,
#      report_bad_length), and the unit stays up.
#   5. the agent of the unit then preferred is killed (SIGKILL): after
#      down_after_ms (1000) the switch treats it as down; from kill + 2.5 s its
#      share is <= 5 % and `prog lb show` says DOWN.
# The load runs until the script has seen what it needs (2.5 s of windows
# past kill + 2.5 s) and then stops it: on a busy machine the script's own
# steps take longer, and a load of fixed length could end before them.
# Bounded (~25 s idle; every process has its own --duration and is killed by
# PID on exit). Loopback 127.61.0.0/16 only.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ROOT=$PWD
INNET=${INNET:-$ROOT/build/innet}
PY=/usr/bin/python3

TMP=$(mktemp -d /tmp/innet-lb-agents.XXXXXX)
PIDS=()
fail_details() {
	for f in "$TMP"/*.err; do [ -f "$f" ] && { echo "--- $f"; tail -n 12 "$f"; }; done >&2
}
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	sleep 0.2
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	rm -rf "$TMP"
}
spawn() { # VAR tag cmd...: background (the command bounds itself), pid into VAR and PIDS
	local var=$1 tag=$2
	shift 2
	"$@" >"$TMP/$tag.out" 2>"$TMP/$tag.err" &
	PIDS+=("$!")
	printf -v "$var" '%s' "$!"
}
wait_for() { # pid tag regex secs
	local i
	for ((i = 0; i < $(slow $4) * 20; i++)); do
		grep -Eq "$3" "$TMP/$2.err" 2>/dev/null && return 0
		kill -0 "$1" 2>/dev/null || fail "$2 exited: $(tail -n 3 "$TMP/$2.err")"
		sleep 0.05
	done
	fail "$2 not ready after $(slow $4) s"
}
now() { date +%s.%N; }
ctl() { "$INNET" ctl -s "$SOCK" "$@"; }

VIP=127.61.0.100 VPORT=5300 RPORT=47900 U0=127.61.0.21 U1=127.61.0.22 UPORT=5321 CLIENT=127.61.1.2
SOCK=$TMP/sw.sock KEY=$TMP/key
BOUND_S=1.5
DUR=25
sw="" b0="" b1="" a0="" a1="" lp=""   # pids, set by spawn

"$INNET" lb keygen "$KEY"
ARGS=$(cat <<EOF2
{"mode": "proxy", "report_port": $RPORT, "key_file": "$KEY", "idle_timeout_ms": 1000,
 "down_after_ms": 1000,
 "vips": [{"name": "dns", "port": $VPORT, "pool": "p", "policy": "accel"}],
 "pools": [{"name": "p", "servers": [{"id": 1, "units": [
    {"id": 0, "kind": "cpu", "address": "$U0:$UPORT"},
    {"id": 1, "kind": "accelerator", "address": "$U1:$UPORT"}]}]}]}
EOF2
)
spawn sw switch "$INNET" switch --name ilh-agents --workers 1 --port $VIP \
	--program "lb@$VPORT,$RPORT,21000-21999" --args "$ARGS" --ctl "$SOCK" --duration $DUR
wait_for "$sw" switch ready 10
spawn b0 be0 "$INNET" lb backend --bind $U0:$UPORT --answer 192.0.2.21 --service-us 20 \
	--busy-file "$TMP/busy0" --busy-service-us 10000 --queue 16 --duration $DUR
spawn b1 be1 "$INNET" lb backend --bind $U1:$UPORT --answer 192.0.2.22 --service-us 100 \
	--busy-file "$TMP/busy1" --busy-service-us 10000 --queue 16 --duration $DUR
wait_for "$b0" be0 ready 5
wait_for "$b1" be1 ready 5
AGENT_OPTS=(--switch "$VIP:$RPORT" --key-file "$KEY" --interval-ms 10 --heartbeat-ms 200
	--busy-us 5000 --idle-us 2000 --duration "$DUR")
spawn a0 agent0 "$INNET" lb agent --server 1 --unit 0 --kind cpu --probe $U0:$UPORT "${AGENT_OPTS[@]}"
spawn a1 agent1 "$INNET" lb agent --server 1 --unit 1 --kind accel --probe $U1:$UPORT "${AGENT_OPTS[@]}"
wait_for "$a0" agent0 ready 5
wait_for "$a1" agent1 ready 5
sleep 0.5

show() { ctl --json prog lb show >"$TMP/show-$1.json" || fail "ctl prog lb show failed"; }
# unit_field TAG UNIT FIELD: a unit's field in a saved `prog lb show`
unit_field() {
	"$PY" -c 'import json,sys
d = json.load(open(sys.argv[1]))
for p in d["pools"]:
    for u in p["units"]:
        if u["server"] == 1 and u["unit"] == int(sys.argv[2]):
            print(str(u[sys.argv[3]]).lower())' "$TMP/show-$1.json" "$2" "$3"
}
drops() { # TAG: the lb program's drop counters as k=v lines
	ctl --json stats >"$TMP/stats-$1.json" || fail "ctl stats failed"
	"$PY" -c 'import json,sys
s = json.load(open(sys.argv[1]))
for p in s["programs"]:
    if p["name"] == "lb":
        for k, v in p.get("drops", {}).items(): print("%s=%d" % (k, v))' "$TMP/stats-$1.json"
}
drop_of() { sed -n "s/^$2=//p" "$TMP/drops-$1" | head -n 1 | grep . || echo 0; }

echo "--- open-loop load through the VIP (2000 q/s, flows renewed every 250 ms)"
T0=$(now)
spawn lp load "$INNET" lb load --target $VIP:$VPORT --bind $CLIENT --rate 2000 --duration "$(slow 60)" \
	--flows 16 --flow-ms 250 --timeout-ms 500 --report-ms 250 --json
t_rel() { "$PY" -c "import sys; print('%.2f' % (float(sys.argv[1]) - float(sys.argv[2]) - 0.02))" "$(now)" "$T0"; }
majority() { # FROM TO: the unit (0/1) with most replies in progress windows ending in (FROM, TO]
	"$PY" - "$TMP/load.err" "$1" "$2" <<'PYEOF'
import re, sys
c = {"192.0.2.21": 0, "192.0.2.22": 0}
for line in open(sys.argv[1]):
    m = re.match(r"progress t=([\d.]+) .* units=(.*)", line)
    if not m or not (float(sys.argv[2]) < float(m.group(1)) <= float(sys.argv[3])):
        continue
    for kv in filter(None, m.group(2).split(",")):
        a, n = kv.rsplit(":", 1)
        c[a] = c.get(a, 0) + int(n)
print(0 if c["192.0.2.21"] >= c["192.0.2.22"] else 1)
PYEOF
}
sleep 2.5
P=$(majority 0.75 2.5)
echo "preferred unit before: 1/$P"
show busy-before
new_p0=$(unit_field busy-before "$P" new_conns)
new_q0=$(unit_field busy-before $((1 - P)) new_conns)
touch "$TMP/busy$P"
T_BUSY=$(t_rel)
echo "unit 1/$P made busy at t=$T_BUSY"
sleep 3
show busy-after
[ "$(unit_field busy-after "$P" busy)" = true ] || fail "prog lb show does not mark unit 1/$P busy"
new_p1=$(unit_field busy-after "$P" new_conns)
new_q1=$(unit_field busy-after $((1 - P)) new_conns)
echo "new connections while 1/$P busy: unit $P +$((new_p1 - new_p0)), unit $((1 - P)) +$((new_q1 - new_q0))"
rm -f "$TMP/busy$P"
T_IDLE=$(t_rel)
echo "unit 1/$P idle again at t=$T_IDLE"

echo "--- spoofed, replayed and malformed reports"
drops before >"$TMP/drops-before"
"$PY" - "$KEY" $VIP $RPORT $((1 - P)) <<'PYEOF'
import hashlib, hmac, os, socket, struct, sys
key = bytes.fromhex(open(sys.argv[1]).read().split()[0])
dst = (sys.argv[2], int(sys.argv[3]))
unit = int(sys.argv[4])
def report(k, seq, state, load):
    # innet_hdr: magic 0x1E, version 1, service 5 (LB), flags 0, dst_node 0, src_node 0
    body = struct.pack(">BBBBHH", 0x1E, 1, 5, 0, 0, 0)
    # type 1, kind, state, load, server, unit, seq, latency_us, rflags, reserved
    body += struct.pack(">BBBBHHQIHH", 1, unit, state, load, 1, unit, seq, 100, 2, 0)
    return body + hmac.new(k, body, hashlib.sha256).digest()[:16]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.61.1.9", 0))
# 1. spoofed: "unit not available", sealed with a key that is not the switch's
s.sendto(report(os.urandom(32), 2**62, 0, 255), dst)
# 2. replayed: the right key, a sequence number below what the agent has used
s.sendto(report(key, 1, 0, 255), dst)
# 3. malformed: too short
s.sendto(b"\x1e\x01\x05\x00" + b"\x00" * 16, dst)
PYEOF
sleep 0.3
drops after >"$TMP/drops-after"
cat "$TMP/drops-after"
for r in report_bad_mac report_replayed report_bad_length; do
	d=$(($(drop_of after $r) - $(drop_of before $r)))
	[ "$d" = 1 ] || fail "$r went up by $d, not 1"
done
show spoof
[ "$(unit_field spoof $((1 - P)) state)" = up ] || fail "a rejected report changed unit 1/$((1 - P))"

echo "--- an agent stops: its unit is treated as down"
sleep 1
Q=$(majority "$("$PY" -c "import sys; print(float(sys.argv[1]) - 1)" "$(t_rel)")" 99)
echo "preferred unit now: 1/$Q; killing its agent"
if [ "$Q" = 0 ]; then victim=$a0; else victim=$a1; fi
kill -KILL "$victim"
wait "$victim" 2>/dev/null || true
T_KILL=$(t_rel)
echo "agent of 1/$Q killed at t=$T_KILL"
sleep 2.5
show down
[ "$(unit_field down "$Q" state)" = down ] || fail "unit 1/$Q not down 2.5 s after its agent died: $(unit_field down "$Q" state)"
# 2.5 s of windows past kill + 2.5 s, then the load ends (it reports at SIGTERM)
while "$PY" -c "import sys; sys.exit(float(sys.argv[1]) >= float(sys.argv[2]) + 5.25)" "$(t_rel)" "$T_KILL"; do
	sleep 0.25
done
kill -TERM "$lp"
wait "$lp" || fail "load failed"
echo "--- traffic per 250 ms window"
"$PY" - "$TMP/load.err" "$TMP/load.out" "$P" "$T_BUSY" "$Q" "$T_KILL" "$BOUND_S" "$T_IDLE" <<'PYEOF' || fail "traffic did not shift in time"
import json, re, sys
err, out, P, t_busy, Q, t_kill, bound, t_idle = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7]), float(sys.argv[8])
addr = {0: "192.0.2.21", 1: "192.0.2.22"}
wins = []
for line in open(err):
    m = re.match(r"progress t=([\d.]+) sent=(\d+) recv=(\d+) lost=(\d+) units=(.*)", line)
    if m:
        u = {}
        for kv in filter(None, m.group(5).split(",")):
            a, n = kv.rsplit(":", 1)
            u[a] = int(n)
        wins.append((float(m.group(1)), int(m.group(3)), u))
for t, n, u in wins:
    print("t=%5.2f recv=%4d  1/0=%4d  1/1=%4d" % (t, n, u.get(addr[0], 0), u.get(addr[1], 0)))
def share(unit, lo, hi):
    sel = [(n, u.get(addr[unit], 0)) for t, n, u in wins if lo < t - 0.25 and t <= hi]
    tot = sum(n for n, _ in sel)
    return (max((x / n if n else 0.0) for n, x in sel) if sel else None), tot
def total_share(unit, lo, hi):
    sel = [(n, u.get(addr[unit], 0)) for t, n, u in wins if lo < t - 0.25 and t <= hi]
    tot = sum(n for n, _ in sel)
    return (sum(x for _, x in sel) / tot if tot else None), tot
r = json.load(open(out))
print("load: sent=%d received=%d lost=%d p99=%.0f us answers=%s" % (r["sent"], r["received"], r["lost"], r["p99_us"], r["answers"]))
ok = True
s, tot = total_share(P, t_busy + bound, t_idle)
print("busy unit 1/%d: share %.3f from t=%.2f + %.1f s until it is idle again at t=%.2f (%d replies)" % (P, s if s is not None else -1, t_busy, bound, t_idle, tot))
if s is None or tot < 500 or s > 0.10:
    ok = False
s, tot = share(Q, t_kill + 2.5, 1e9)
print("agentless unit 1/%d: worst window share %.3f from t=%.2f + 2.5 s (%d replies)" % (Q, s if s is not None else -1, t_kill, tot))
if s is None or tot < 500 or s > 0.05:
    ok = False
if r["received"] < 0.85 * r["sent"]:
    print("too many losses")
    ok = False
sys.exit(0 if ok else 1)
PYEOF
[ "$((new_p1 - new_p0))" -lt "$((new_q1 - new_q0))" ] || fail "the busy unit kept getting most new connections"
echo "ok"
