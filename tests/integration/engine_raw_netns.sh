#!/usr/bin/env bash
# engine_raw_netns.sh — raw (AF_PACKET) ports end to end: a switch that owns
# two interfaces of its own network namespace, with no addresses on them and
# IPv4 forwarding off, bridges two hosts with the l2fwd program. Every frame
# between the hosts — ARP, ICMP, UDP, TCP — is carried by the switch's packet
# sockets; the kernel of the switch's namespace never routes anything.
#
#   netns ie-a                 netns ie-sw (innet switch, l2fwd map [1, 0])          netns ie-b
#   ie-a0 10.99.0.1/24 ══veth══ ie-swa = raw port 0 ─┐        ┌─ raw port 1 = ie-swb ══veth══ ie-b0 10.99.0.2/24
#                                                    └ l2fwd ─┘
#   (no addresses on ie-swa/ie-swb, net.ipv4.ip_forward=0 in ie-sw, IPv6 off on all four)
#
# Checks: ping both ways, 200 UDP datagrams echoed (each one delivered, in
# order), a 2 MiB TCP transfer verified by SHA-256, and the switch's counters
# (port rx/tx, l2fwd's per-port registers, no drops, no send errors).
# TCP segmentation and checksum offloads are switched off on the hosts' veth
# ends (ethtool): a packet socket sees frames as the kernel hands them over,
# so an offloaded 64 KiB segment or a partial checksum would reach the switch
# as such (docs/runtime.md, "Raw ports").
#
# ENGINE_RAW_TARGET=xdp runs the same switch on the XDP target (l2fwd's eBPF
# object on ie-swa and ie-swb; the hosts' ends carry an XDP_PASS program, as a
# veth must to take frames an XDP program sends into it): the same checks,
# and the frames must have been carried by eBPF (xdp_rx_pkts).
# tests/integration/engine_raw_xdp.sh runs it so.
#
# Needs root (netns, AF_PACKET) and ethtool: exits 77 (a skip, saying why)
# without them.
# Bounded: every step has a timeout; the traps kill what this script started
# (by PID) and delete the namespaces.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=$(realpath "${INNET:-./build/innet}")
PY=/usr/bin/python3

need_root_netns
need_cmd ethtool

TARGET=${ENGINE_RAW_TARGET:-udp}
A=ie-a SW=ie-sw B=ie-b
[ "$TARGET" = xdp ] && { A=ix-a SW=ix-sw B=ix-b; }
TMP=$(mktemp -d /tmp/ie-raw.XXXXXX)
CTL=$TMP/sw.sock
sw_pid="" srv_pids=()
fail_details() {
	if [ -f "$TMP/switch.log" ]; then sed 's/^/  switch: /' "$TMP/switch.log" >&2; fi
}
cleanup() {
	for p in "${srv_pids[@]}" $sw_pid; do kill "$p" 2>/dev/null || true; done
	for p in "${srv_pids[@]}" $sw_pid; do wait "$p" 2>/dev/null || true; done
	for ns in $A $SW $B; do ip netns del "$ns" 2>/dev/null || true; done
	rm -rf "$TMP"
}
trap 'exit 1' INT TERM

# Leftovers of an interrupted run.
for ns in $A $SW $B; do ip netns del "$ns" 2>/dev/null || true; done

echo "--- namespaces and veth pairs"
for ns in $A $SW $B; do
	ip netns add "$ns"
	ip -n "$ns" link set lo up
done
ip link add ie-a0 netns $A type veth peer name ie-swa netns $SW
ip link add ie-b0 netns $B type veth peer name ie-swb netns $SW
ip netns exec $SW sysctl -qw net.ipv4.ip_forward=0
for pair in "$A ie-a0" "$SW ie-swa" "$SW ie-swb" "$B ie-b0"; do
	set -- $pair
	ip netns exec "$1" sysctl -qw "net.ipv6.conf.$2.disable_ipv6=1"
	ip netns exec "$1" ethtool -K "$2" tx off tso off gso off gro off >/dev/null 2>&1 ||
		fail "ethtool -K $2 (offloads off)"
	ip -n "$1" link set "$2" up
done
ip -n $A addr add 10.99.0.1/24 dev ie-a0
ip -n $B addr add 10.99.0.2/24 dev ie-b0
[ -z "$(ip -n $SW -4 addr show dev ie-swa)$(ip -n $SW -4 addr show dev ie-swb)" ] ||
	fail "the switch's interfaces own addresses"

if [ "$TARGET" = xdp ]; then
	XT=$(realpath "${XDPTOOL:-./build/bench/xdptool}")
	[ -x "$XT" ] || fail "build/bench/xdptool is not built (make)"
	ip netns exec $A timeout "$(slow 120)" "$XT" pass ie-a0 --seconds "$(slow 110)" >"$TMP/pass-a.log" 2>&1 &
	srv_pids+=($!)
	ip netns exec $B timeout "$(slow 120)" "$XT" pass ie-b0 --seconds "$(slow 110)" >"$TMP/pass-b.log" 2>&1 &
	srv_pids+=($!)
	for f in pass-a pass-b; do
		for _ in $(seq $(slow 100)); do grep -q ready "$TMP/$f.log" 2>/dev/null && break; sleep 0.05; done
		grep -q ready "$TMP/$f.log" || fail "$f: $(cat "$TMP/$f.log")"
	done
fi
echo "--- the switch ($TARGET): raw ports ie-swa, ie-swb; l2fwd map [1, 0]; 2 workers (PACKET_FANOUT)"
ip netns exec $SW timeout "$(slow 120)" "$INNET" switch --name ie-l2 --workers 2 --ctl "$CTL" --target "$TARGET" \
	--port iface:ie-swa --port iface:ie-swb \
	--program l2fwd@raw --args '{"map": [1, 0]}' >"$TMP/switch.log" 2>&1 &
sw_pid=$!
for _ in $(seq $(slow 100)); do
	grep -q ready "$TMP/switch.log" 2>/dev/null && break
	kill -0 $sw_pid 2>/dev/null || fail "the switch exited"
	sleep 0.05
done
grep -q ready "$TMP/switch.log" || fail "the switch is not ready after $(slow 5) s"
ctl() { timeout 10 "$INNET" ctl -s "$CTL" "$@"; }
ctl --json info | $PY -c '
import json, sys
d = json.load(sys.stdin)
assert [p["iface"] for p in d["ports"]] == ["ie-swa", "ie-swb"], d["ports"]
assert [p["address"] for p in d["ports"]] == [None, None], d["ports"]
assert d["programs"][0]["raw"] is True and d["programs"][0]["udp"] == [], d["programs"]
' || fail "ctl info does not show two raw ports and a raw l2fwd"

echo "--- ping both ways"
ip netns exec $A timeout 20 ping -c 5 -i 0.2 -W 3 10.99.0.2 >"$TMP/ping1" || fail "ping a -> b: $(cat "$TMP/ping1")"
ip netns exec $B timeout 20 ping -c 5 -i 0.2 -W 3 10.99.0.1 >"$TMP/ping2" || fail "ping b -> a: $(cat "$TMP/ping2")"
grep -q " 0% packet loss" "$TMP/ping1" || fail "ping a -> b lost packets"
grep -q " 0% packet loss" "$TMP/ping2" || fail "ping b -> a lost packets"

echo "--- 200 UDP datagrams a -> b, each echoed back"
cat >"$TMP/udp_echo.py" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("10.99.0.2", 9999))
s.settimeout(20)
seen = 0
while seen < 200:
    data, peer = s.recvfrom(4096)
    seq = int.from_bytes(data[:4], "big")
    if seq != seen:
        print("out of order: got %d, expected %d" % (seq, seen), file=sys.stderr)
        sys.exit(1)
    s.sendto(data, peer)
    seen += 1
print("udp server: %d datagrams" % seen)
EOF
ip netns exec $B timeout 30 $PY "$TMP/udp_echo.py" >"$TMP/udp_srv.log" 2>&1 &
srv_pids+=($!)
sleep 0.3
ip netns exec $A timeout 30 $PY - <<'EOF' || fail "UDP exchange"
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("10.99.0.1", 0))
s.settimeout(3)
for seq in range(200):
    payload = seq.to_bytes(4, "big") + bytes([seq % 251]) * (64 + 7 * seq)
    for attempt in range(3):  # the first datagram may wait for ARP
        s.sendto(payload, ("10.99.0.2", 9999))
        try:
            data, _ = s.recvfrom(4096)
            break
        except socket.timeout:
            if seq > 0 or attempt == 2:
                print("no echo for datagram %d" % seq, file=sys.stderr)
                sys.exit(1)
    if data != payload:
        print("echo %d differs" % seq, file=sys.stderr)
        sys.exit(1)
print("udp client: 200 echoes")
EOF
wait "${srv_pids[-1]}" || fail "UDP server: $(cat "$TMP/udp_srv.log")"
grep -q "200 datagrams" "$TMP/udp_srv.log" || fail "UDP server: $(cat "$TMP/udp_srv.log")"

echo "--- 2 MiB over TCP b <- a, checked by SHA-256"
cat >"$TMP/tcp_srv.py" <<'EOF'
import hashlib, socket
l = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("10.99.0.2", 9998))
l.listen(1)
l.settimeout(20)
c, _ = l.accept()
c.settimeout(20)
h, n = hashlib.sha256(), 0
while n < 2 << 20:
    b = c.recv(65536)
    if not b:
        break
    h.update(b)
    n += len(b)
c.sendall(h.hexdigest().encode())
c.close()
print("tcp server: %d bytes" % n)
EOF
ip netns exec $B timeout 40 $PY "$TMP/tcp_srv.py" >"$TMP/tcp_srv.log" 2>&1 &
srv_pids+=($!)
sleep 0.3
ip netns exec $A timeout 40 $PY - <<'EOF' || fail "TCP transfer"
import hashlib, os, socket, sys
data = os.urandom(2 << 20)
s = socket.create_connection(("10.99.0.2", 9998), timeout=20)
s.sendall(data)
got = s.recv(64).decode()
if got != hashlib.sha256(data).hexdigest():
    print("digest mismatch: %r" % got, file=sys.stderr)
    sys.exit(1)
print("tcp client: 2 MiB, digest ok")
EOF
wait "${srv_pids[-1]}" || fail "TCP server: $(cat "$TMP/tcp_srv.log")"

echo "--- the switch's counters"
sleep 0.2
ctl --json stats >"$TMP/stats.json" || fail "ctl stats"
ctl --json reg read l2fwd rx_frames 0 2 >"$TMP/rx.json" || fail "ctl reg read rx_frames"
ctl --json reg read l2fwd tx_frames 0 2 >"$TMP/tx.json" || fail "ctl reg read tx_frames"
$PY - "$TMP" "$TARGET" <<'EOF' || fail "counters (see above)"
import json, sys
d, target = sys.argv[1], sys.argv[2]
st = json.load(open(d + "/stats.json"))
rx = json.load(open(d + "/rx.json"))
tx = json.load(open(d + "/tx.json"))
def vals(r):
    v = r.get("values", r.get("value"))
    return v if isinstance(v, list) else [v]
rxf, txf = vals(rx), vals(tx)
p0, p1 = st["ports"]
prog = st["programs"][0]
print("port 0 rx %d tx %d, port 1 rx %d tx %d; l2fwd rx_frames %s tx_frames %s"
      % (p0["rx_pkts"], p0["tx_pkts"], p1["rx_pkts"], p1["tx_pkts"], rxf, txf))
# a -> b: 5+5 pings, 200 datagrams, >1400 TCP segments; b -> a: the replies and ACKs
ok = p0["rx_pkts"] >= 210 + 1400 and p1["rx_pkts"] >= 210
ok &= p1["tx_pkts"] == p0["rx_pkts"] and p0["tx_pkts"] == p1["rx_pkts"]
ok &= p0["tx_errors"] == 0 and p1["tx_errors"] == 0
ok &= rxf == [p0["rx_pkts"], p1["rx_pkts"]] and txf == [p0["tx_pkts"], p1["tx_pkts"]]
ok &= sum(prog["drops"].values()) == 0 and prog["rx_pkts"] == p0["rx_pkts"] + p1["rx_pkts"]
# On the XDP target eBPF carried (nearly) everything: asserted whatever the
# stats show, so that a switch that ran in user space (--target ignored, no
# eBPF object) fails here rather than passing as the user-space engine.
if target == "xdp":
    if "xdp_rx_pkts" not in prog:
        print("--target xdp, but the stats have no XDP counters: the switch did not run on XDP",
              file=sys.stderr)
        ok = False
    else:
        print("l2fwd in eBPF: %d of %d frames" % (prog["xdp_rx_pkts"], prog["rx_pkts"]))
        ok &= prog["xdp_rx_pkts"] > 0 and prog["xdp_rx_pkts"] >= prog["rx_pkts"] - 10
elif "xdp_rx_pkts" in prog:
    print("--target udp, but the stats show XDP counters", file=sys.stderr)
    ok = False
if not ok:
    print(json.dumps(st, indent=1), file=sys.stderr)
sys.exit(0 if ok else 1)
EOF
echo "PASS"
