#!/usr/bin/env bash
# lb_proxy.sh — the load balancer "lb" in proxy mode (unprivileged, loopback),
# end to end with real UDP sockets:
#   1. a switch with lb (policy maglev, 256 NAT ports) in front of two UDP
#      echo backends (/usr/bin/python3) at 127.60.200.2 and .3;
#   2. 200 client flows (each its own socket): every reply comes back from
#      the VIP address and port, both backends get flows, each flow's
#      replies always come from the same backend (per-connection consistency);
#   3. signed agent reports (innet/lb.h, HMAC via python's hmac) are accepted,
#      a replayed and a spoofed one are dropped and counted by name;
#   4. `innet ctl prog lb unit drain` and `unit del`: every existing flow
#      keeps its backend, new flows avoid the drained/removed one.
# Bounded (~15 s); everything started here is killed by PID on exit.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=${INNET:-./build/innet}
PY=/usr/bin/python3
T=$(mktemp -d /tmp/innet-lb-proxy.XXXXXX)
SOCK=$T/ctl.sock
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$T"
}
fail_details() { echo "--- switch log" >&2; cat "$T/sw.log" >&2 || true; }

SW=127.60.200.1 B0=127.60.200.2 B1=127.60.200.3
head -c32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$T/key"

cat > "$T/echo.py" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
tag = sys.argv[3].encode()
while True:
    d, a = s.recvfrom(4096)
    s.sendto(tag + b"|" + d, a)
EOF
$PY "$T/echo.py" $B0 7100 B0 & PIDS+=($!)
$PY "$T/echo.py" $B1 7101 B1 & PIDS+=($!)

ARGS=$(cat <<EOF
{"key_file": "$T/key", "maglev_size": 4099, "idle_timeout_ms": 60000,
 "vips": [{"name": "echo", "port": 5353, "pool": "web", "policy": "maglev"}],
 "pools": [{"name": "web", "servers": [
    {"id": 1, "units": [{"id": 0, "kind": "cpu", "address": "$B0:7100"}]},
    {"id": 2, "units": [{"id": 0, "kind": "accelerator", "address": "$B1:7101"}]}]}]}
EOF
)
timeout 30 "$INNET" switch --name lbproxy --port $SW --program "lb/lb@5353,47900,21000-21255" \
	--args "$ARGS" --ctl "$SOCK" --workers 2 >"$T/sw.log" 2>&1 & PIDS+=($!)
for _ in $(seq $(slow 50)); do grep -q ready "$T/sw.log" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$T/sw.log" || fail "switch did not start"
ctl() { timeout 5 "$INNET" ctl -s "$SOCK" "$@"; }

# The client: phase 1 opens N flows and records each flow's backend; phase 2
# (after a ctl change) re-sends on every old flow and opens M new ones.
cat > "$T/client.py" <<'EOF'
import json, socket, sys
SW, VIP = sys.argv[1], 5353
state = sys.argv[2]
def ask(s, msg):
    for attempt in range(3):
        s.sendto(msg, (SW, VIP))
        try:
            d, a = s.recvfrom(4096)
        except socket.timeout:
            continue
        if a != (SW, VIP):
            sys.exit("reply from %r, not the VIP" % (a,))
        tag, _, echo = d.partition(b"|")
        if echo != msg:
            sys.exit("wrong echo %r for %r" % (echo, msg))
        return tag.decode()
    sys.exit("no reply for %r" % msg)
socks = []
def new_flow(i):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.60.201.%d" % (1 + i % 200), 0))
    s.settimeout(1.0)
    return s
if sys.argv[3] == "open":
    flows = []
    for i in range(int(sys.argv[4])):
        s = new_flow(i)
        t1 = ask(s, b"a%d" % i); t2 = ask(s, b"b%d" % i)
        if t1 != t2:
            sys.exit("flow %d changed backend %s -> %s" % (i, t1, t2))
        flows.append([s.getsockname()[0], s.getsockname()[1], t1])
        s.close()
    json.dump(flows, open(state, "w"))
    c = {}
    for f in flows: c[f[2]] = c.get(f[2], 0) + 1
    print(json.dumps(c))
else:
    flows = json.load(open(state))
    moved = 0
    for i, (ip, port, tag) in enumerate(flows):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((ip, port)); s.settimeout(1.0)
        if ask(s, b"c%d" % i) != tag: moved += 1
        s.close()
    c = {}
    for i in range(int(sys.argv[4])):
        s = new_flow(i + 1000)
        t = ask(s, b"n%d" % i); c[t] = c.get(t, 0) + 1
        s.close()
    print(json.dumps({"moved": moved, "new": c}))
EOF

echo "--- 200 flows through the VIP"
out=$(timeout 30 $PY "$T/client.py" $SW "$T/flows.json" open 200) || fail "clients: $out"
echo "$out"
b0=$(echo "$out" | $PY -c 'import json,sys; print(json.load(sys.stdin).get("B0",0))')
b1=$(echo "$out" | $PY -c 'import json,sys; print(json.load(sys.stdin).get("B1",0))')
[ "$b0" -gt 40 ] && [ "$b1" -gt 40 ] || fail "flows not spread: B0=$b0 B1=$b1"

echo "--- agent reports: accepted, replayed, spoofed"
cat > "$T/report.py" <<'EOF'
import hmac, hashlib, socket, struct, sys
key = bytes.fromhex(open(sys.argv[1]).read().strip())
def report(key, server, unit, kind, state, load, seq):
    body = struct.pack(">BBBBHHBBBBHHQIHH", 0x1e, 1, 5, 0, 0, 0,
                       1, kind, state, load, server, unit, seq, 1234, 1, 0)
    return body + hmac.new(key, body, hashlib.sha256).digest()[:16]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
dst = (sys.argv[2], 47900)
s.sendto(report(key, 1, 0, 0, 1, 40, 100), dst)            # accepted
s.sendto(report(key, 1, 0, 0, 1, 40, 100), dst)            # replayed
s.sendto(report(b"x" * 32, 1, 0, 0, 1, 40, 101), dst)      # spoofed
s.sendto(report(key, 2, 0, 1, 3, 230, 7), dst)             # accepted (accelerator busy)
EOF
$PY "$T/report.py" "$T/key" $SW
sleep 0.5
stats=$(ctl --json stats)
for r in report_replayed report_bad_mac; do
	echo "$stats" | grep -q "\"$r\"" || fail "drop reason $r not counted: $stats"
done
show=$(ctl prog lb show) || fail "prog lb show"
echo "$show"
echo "$show" | grep -q "reports_ok=2" || fail "reports_ok is not 2"
ctl --json prog lb show | $PY -c '
import json, sys
u = [u for p in json.load(sys.stdin)["pools"] for u in p["units"] if u["server"] == 2][0]
assert u["load"] == 230 and u["state"] == "up", u' || fail "the accelerator's load was not applied"

echo "--- drain backend B0: no flow moves, new flows avoid it"
ctl prog lb unit drain 1 0 >/dev/null || fail "unit drain"
out=$(timeout 60 $PY "$T/client.py" $SW "$T/flows.json" check 50) || fail "clients: $out"
echo "$out"
echo "$out" | grep -q '"moved": 0' || fail "flows moved after drain: $out"
echo "$out" | grep -q '"B0"' && fail "new flows reached the drained backend: $out"

echo "--- undrain B0, remove B1: no flow moves, new flows avoid B1"
ctl prog lb unit undrain 1 0 >/dev/null || fail "unit undrain"
ctl prog lb unit del 2 0 >/dev/null || fail "unit del"
out=$(timeout 60 $PY "$T/client.py" $SW "$T/flows.json" check 50) || fail "clients: $out"
echo "$out"
echo "$out" | grep -q '"moved": 0' || fail "flows moved after del: $out"
echo "$out" | grep -q '"B1"' && fail "new flows reached the removed backend: $out"
ctl prog lb show | grep -q removed || fail "show does not list the removed unit"
ctl prog lb conn count | grep -q "connections" || fail "conn count"
! grep -qE "runtime error|AddressSanitizer" "$T/sw.log" || fail "sanitizer report in the switch log"
echo "PASS lb_proxy"
