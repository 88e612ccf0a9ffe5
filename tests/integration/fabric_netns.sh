#!/usr/bin/env bash
# fabric_netns.sh — one topology file run across two "machines": two network
# namespaces joined by a veth pair, each running `innet fabric up FILE
# --machine TAG` on the same file (examples/two-machines.json), with real
# (non-loopback) addresses. Probes cross the veth between the machines.
#
#   namespace innet-m1-PID                      namespace innet-m2-PID
#   h1 10.99.1.2 ── s1 port0 10.99.1.1          s2 port1 10.99.2.1 ── h2 10.99.2.2
#                   s1 port1 10.99.0.1 ══veth══ s2 port0 10.99.0.2
#
# Needs root (ip netns); exits 77 (skip) without it. Every address is inside
# the namespaces this script creates and deletes; nothing leaves them.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=$(realpath "${INNET:-./build/innet}")
TOPO=$(realpath examples/two-machines.json)
PY=/usr/bin/python3

need_root_netns
M1=innet-m1-$$ M2=innet-m2-$$
echo_pid=""
cleanup() {
	if [ -n "$echo_pid" ]; then kill "$echo_pid" 2>/dev/null || true; fi
	ip netns exec "$M1" timeout 20 "$INNET" fabric down "$TOPO" --machine m1 >/dev/null 2>&1 || true
	ip netns exec "$M2" timeout 20 "$INNET" fabric down "$TOPO" --machine m2 >/dev/null 2>&1 || true
	ip netns del "$M1" 2>/dev/null || true
	ip netns del "$M2" 2>/dev/null || true
}

ip netns add "$M1"
ip netns add "$M2"
ip link add v1 netns "$M1" type veth peer name v2 netns "$M2"
ip -n "$M1" link set lo up
ip -n "$M2" link set lo up
ip -n "$M1" addr add 10.99.0.1/24 dev v1
ip -n "$M2" addr add 10.99.0.2/24 dev v2
ip -n "$M1" link set v1 up
ip -n "$M2" link set v2 up
ip -n "$M1" addr add 10.99.1.1/32 dev lo   # s1's host-facing port
ip -n "$M1" addr add 10.99.1.2/32 dev lo   # host h1
ip -n "$M2" addr add 10.99.2.1/32 dev lo   # s2's host-facing port
ip -n "$M2" addr add 10.99.2.2/32 dev lo   # host h2

echo "--- each machine brings up its part of the same file"
ip netns exec "$M1" timeout 30 "$INNET" fabric up "$TOPO" --machine m1 || fail "up on m1"
ip netns exec "$M2" timeout 30 "$INNET" fabric up "$TOPO" --machine m2 || fail "up on m2"
ip netns exec "$M1" timeout 10 "$INNET" fabric status "$TOPO" --machine m1 >/dev/null || fail "status m1"

echo "--- h1 (m1) -> h2 (m2) and back, across the veth"
ip netns exec "$M2" timeout 40 "$INNET" ping --topology "$TOPO" --from h1 --to h2 --role echo --duration 30 --quiet \
	>/tmp/innet-netns-echo.$$ 2>&1 &
echo_pid=$!
sleep 0.3
out=$(ip netns exec "$M1" timeout 60 "$INNET" ping --topology "$TOPO" --from h1 --to h2 --role send -c 50 -i 1 --quiet) ||
	fail "probes lost: $out"
echo "$out"
grep -q "50 received" <<<"$out" || fail "expected 50 replies: $out"

# The probes really crossed between the machines: s1's port toward s2 sent
# and received 50 each (the control sockets are files, reachable from here).
stat() {
	timeout 10 "$INNET" ctl --fabric "$TOPO" --switch "$1" --json stats | "$PY" -c "import json,sys; d=json.load(sys.stdin); print($2)"
}
tx=$(stat s1 'd["ports"][1]["tx_pkts"]')
rx=$(stat s1 'd["ports"][1]["rx_pkts"]')
if [ "$tx" -ne 50 ] || [ "$rx" -ne 50 ]; then
	fail "s1 port 1 (to s2): tx $tx rx $rx, expected 50/50"
fi
rx2=$(stat s2 'd["ports"][0]["rx_pkts"]')
[ "$rx2" -eq 50 ] || fail "s2 port 0 (from s1): rx $rx2, expected 50"
echo "PASS"
