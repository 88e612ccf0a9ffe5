#!/usr/bin/env bash
# lb_dnsperf.sh — two real DNS servers (Debian's nsd, a generated 100-record
# zone) behind a VIP of the switch's lb program in proxy mode, driven by the
# real dnsperf:
#
#   dnsperf ──▶ 127.61.0.100:5300 (VIP) ─┬─ NAT port ──▶ nsd 127.61.0.11:5311 (answers 192.0.2.11)
#        ◀── reply from the VIP port ────┴─ NAT port ──▶ nsd 127.61.0.12:5311 (answers 192.0.2.12)
#
#   1. dnsperf -l 3 (20 clients) through the VIP: every query answered
#      (zero lost), NOERROR, and both servers got a share (nsd's own
#      answers are counted by `innet lb load` per A record).
#   2. the replies come from the VIP address and port (full NAT), checked
#      by `innet lb load` which only accepts replies from its connected
#      peer, the VIP: 0 lost, both units seen.
#   3. the switch counts no drops for the program.
# Bounded (~20 s); every process started here is killed by PID on exit.
# Skips (77) without nsd or dnsperf (scripts/install-deps installs them).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ROOT=$PWD
INNET=${INNET:-$ROOT/build/innet}
PY=/usr/bin/python3
need_cmd nsd
need_cmd dnsperf
# shellcheck source=tools/lb/lbenv.sh
source "$ROOT/tools/lb/lbenv.sh"

TMP=$(mktemp -d /tmp/innet-lb-dnsperf.XXXXXX)
PIDS=()
fail_details() {
	for f in "$TMP"/*.err "$TMP"/*/nsd.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 8 "$f"; }; done >&2
}
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	sleep 0.2
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	rm -rf "$TMP"
}
spawn() { # tag secs cmd...: run bounded in the background, pid appended to PIDS
	local tag=$1 secs=$2
	shift 2
	timeout -k 2 "$secs" "$@" >"$TMP/$tag.out" 2>"$TMP/$tag.err" &
	PIDS+=("$!")
}

VIP=127.61.0.100 VPORT=5300 N1=127.61.0.11 N2=127.61.0.12 NPORT=5311 CLIENT=127.61.1.1
SOCK=$TMP/sw.sock

lbenv_nsd_conf "$TMP/nsd1" $N1 $NPORT 192.0.2.11
lbenv_nsd_conf "$TMP/nsd2" $N2 $NPORT 192.0.2.12
# shellcheck disable=SC2046 # the command line is words
spawn nsd1 40 $(lbenv_nsd_cmd "$TMP/nsd1")
# shellcheck disable=SC2046
spawn nsd2 40 $(lbenv_nsd_cmd "$TMP/nsd2")
lbenv_wait_udp $N1 $NPORT 10 || fail "nsd 1 did not answer"
lbenv_wait_udp $N2 $NPORT 10 || fail "nsd 2 did not answer"

"$INNET" lb keygen "$TMP/key" >/dev/null
ARGS=$(cat <<EOF2
{"mode": "proxy", "report_port": 47900, "key_file": "$TMP/key", "idle_timeout_ms": 5000,
 "vips": [{"name": "dns", "port": $VPORT, "pool": "ns", "policy": "maglev"}],
 "pools": [{"name": "ns", "servers": [
   {"id": 1, "units": [{"id": 0, "kind": "cpu", "address": "$N1:$NPORT"}]},
   {"id": 2, "units": [{"id": 0, "kind": "cpu", "address": "$N2:$NPORT"}]}]}]}
EOF2
)
spawn switch 40 "$INNET" switch --name ilh-dnsperf --workers 1 --port $VIP \
	--program "lb@$VPORT,47900,21000-21511" --args "$ARGS" --ctl "$SOCK"
for ((i = 0; i < 100; i++)); do
	grep -q ready "$TMP/switch.err" 2>/dev/null && break
	kill -0 "${PIDS[-1]}" 2>/dev/null || fail "switch exited: $(tail -n 3 "$TMP/switch.err")"
	sleep 0.1
done
grep -q ready "$TMP/switch.err" || fail "switch not ready"
lbenv_wait_udp $VIP $VPORT 10 || fail "no answer through the VIP"

echo "--- dnsperf through the VIP"
lbenv_queries "$TMP/queries"
timeout 20 dnsperf -s $VIP -p $VPORT -a $CLIENT -d "$TMP/queries" -l 3 -c 20 -t 2 \
	>"$TMP/dnsperf.out" 2>&1 || fail "dnsperf failed: $(tail -n 5 "$TMP/dnsperf.out")"
sent=$(awk '/Queries sent:/ { print $3 }' "$TMP/dnsperf.out")
done_=$(awk '/Queries completed:/ { print $3 }' "$TMP/dnsperf.out")
lost=$(awk '/Queries lost:/ { print $3 }' "$TMP/dnsperf.out")
qps=$(awk '/Queries per second:/ { print $4 }' "$TMP/dnsperf.out")
noerr=$(awk '/Response codes:/ { for (i = 1; i < NF; i++) if ($i == "NOERROR") print $(i + 1) }' "$TMP/dnsperf.out")
echo "dnsperf: sent=$sent completed=$done_ lost=$lost qps=$qps noerror=$noerr"
[ -n "$sent" ] && [ "$sent" -gt 1000 ] || fail "dnsperf sent too few queries ($sent)"
[ "$lost" = 0 ] || fail "dnsperf lost $lost queries through the VIP"
[ "$done_" = "$sent" ] || fail "completed $done_ of $sent"
[ "$noerr" = "$sent" ] || fail "not every answer NOERROR ($noerr of $sent)"

echo "--- replies come back from the VIP (innet lb load, connected sockets), both servers used"
timeout 20 "$INNET" lb load --target $VIP:$VPORT --bind $CLIENT --rate 3000 --duration 2 \
	--flows 32 --qname r7.lb.test --json >"$TMP/load.out" 2>"$TMP/load.err" || fail "innet lb load failed"
"$PY" - "$TMP/load.out" <<'PYEOF' || fail "load through the VIP: $(cat "$TMP/load.out")"
import json, sys
r = json.load(open(sys.argv[1]))
print("load: sent=%d received=%d lost=%d answers=%s p99=%.0fus" %
      (r["sent"], r["received"], r["lost"], r["answers"], r["p99_us"]))
assert r["sent"] >= 5000 and r["lost"] == 0 and r["received"] == r["sent"], "losses"
a = r["answers"]
assert a.get("192.0.2.11", 0) > 0 and a.get("192.0.2.12", 0) > 0, "both servers must answer"
assert a.get("192.0.2.11", 0) + a.get("192.0.2.12", 0) == r["received"], "foreign answers"
PYEOF

echo "--- no program drops"
"$INNET" ctl -s "$SOCK" --json stats >"$TMP/stats.json" || fail "ctl stats failed"
"$PY" - "$TMP/stats.json" <<'PYEOF' || fail "unexpected drops: $(cat "$TMP/stats.json")"
import json, sys
s = json.load(open(sys.argv[1]))
lb = [p for p in s["programs"] if "lb" in json.dumps(p.get("name", p.get("program", "")))]
drops = {}
for p in lb:
    drops.update(p.get("drops", {}))
print("lb program drops:", drops)
assert not drops, drops
PYEOF
echo "ok"
