#!/usr/bin/env bash
# fabric_xdp_netns.sh — the spine/leaf example on the XDP target: every switch
# and host in its own network namespace, links as veth pairs, each switch's
# forward and counter programs as eBPF on its port devices
# (examples/spine-leaf.json, copied with "target": "xdp").
#
#            spine0   spine1   spine2   spine3        (4 spines, ports 0-7 -> leaf0..7)
#              ║ ╲  ╱   ║ ╲ ╱    ║  ╲ ╱  ║
#            leaf0  leaf1  ...  leaf7                  (ports 0-3 -> spines, 4-5 -> hosts)
#            h0 h1  h2 h3       h14 h15                (10.0.30.1 .. 10.0.30.16)
#
# Checks: probes h0 -> h15 all come back; flows from many source ports spread
# over the four spines (ECMP in eBPF); the counter program answers on XDP;
# `innet ctl` shows what the eBPF programs handled; malformed datagrams are
# counted by name; a datagram larger than the MTU (IP fragments) is passed up
# to the user-space engine and still arrives; a switch killed with -9 leaves
# no XDP program on its devices, and `fabric down` leaves no namespace.
#
# Needs root (namespaces, XDP); exits 77 (skip) without it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=$(realpath "${INNET:-./build/innet}")
PY=/usr/bin/python3
need_root_netns
NAME=xsl$$
DIR=$(mktemp -d /tmp/innet-xsl.XXXXXX)
TOPO=$DIR/topo.json
cleanup() {
	fabric_teardown "$TOPO" "$NAME"
	rm -rf "$DIR"
}
in_ns() { local ns=$1; shift; ip netns exec "innet-$NAME-$ns" "$@"; }
ctl() { "$INNET" ctl --fabric "$TOPO" --switch "$1" --json stats; }
jq_py() { $PY -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

$PY tools/topology/relocate.py examples/spine-leaf.json "$TOPO" --name "$NAME" \
	--state-dir "$DIR/state" --target xdp

echo "--- fabric up: 12 switches, 16 hosts, namespaces and veths"
timeout 60 "$INNET" fabric up "$TOPO" || fail "fabric up"
for sw in spine0 leaf0 leaf7; do
	in_ns "$sw" ip link show p0 | grep -q "prog/xdp" || fail "$sw p0 has no XDP program"
done
shown=$("$INNET" fabric show "$TOPO")
grep -q "10.0.30.1 " <<<"$shown" || fail "netns addresses are not 10.x"

echo "--- h0 -> h15 across the fabric, 20 probes"
out=$("$INNET" ping --topology "$TOPO" --from h0 --to h15 -c 20 -i 5 --quiet) || fail "probes lost: $out"
echo "    $out"
leaf0_rx=$(ctl leaf0 | jq_py 'd["programs"][0]["xdp_rx_pkts"]')
[ "$leaf0_rx" -ge 20 ] || fail "leaf0's eBPF program handled $leaf0_rx packets, want >= 20"

echo "--- 400 flows from h0 to h15: ECMP over the four spines"
leaf0=$("$INNET" fabric show "$TOPO" --json | jq_py '[p["addr"] for s in d["switches"] if s["name"]=="leaf0" for p in s["ports"] if p["peer"]=="h0"][0]')
in_ns h0 $PY - "$leaf0" <<'EOF' || fail "flow sender"
import socket, struct, sys
leaf = sys.argv[1]
for sport in range(20000, 20400):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("10.0.30.1", sport))
    # innet base header: magic, version, service raw, flags, dst_node 116 (h15), src 101
    s.sendto(struct.pack("!BBBBHH", 0x1E, 1, 0, 0, 116, 101) + b"flow", (leaf, 9000))
    s.close()
EOF
sleep 0.5
total=0; spread=""
for sp in spine0 spine1 spine2 spine3; do
	n=$(ctl "$sp" | jq_py 'd["programs"][0]["actions"]["forward"]')
	spread="$spread $sp=$n"
	total=$((total + n))
	[ "$n" -ge 40 ] || fail "ECMP: $sp forwarded $n of ~400 flows (want >= 40):$spread"
done
echo "    spines:$spread (total $total)"

echo "--- the counter program on XDP: inc and read through leaf3"
leaf3=$("$INNET" fabric show "$TOPO" --json | \
	jq_py '[p["addr"] for s in d["switches"] if s["name"]=="leaf3" for p in s["ports"] if p["peer"]=="h6"][0]')
in_ns h6 "$INNET" counter --to "$leaf3:9100" --from 10.0.30.7 inc 3 5 >/dev/null || fail "counter inc"
v=$(in_ns h6 "$INNET" counter --to "$leaf3:9100" --from 10.0.30.7 read 3) || fail "counter read"
echo "$v" | grep -qw 5 || fail "counter read '$v', want 5"
cnt_xdp=$(ctl leaf3 | jq_py '[p for p in d["programs"] if p["name"]=="count"][0]["xdp_rx_pkts"]')
[ "$cnt_xdp" -ge 2 ] || fail "leaf3's counter ran $cnt_xdp packets in eBPF, want 2"

echo "--- innet ctl on the XDP target: registers, tables, resources (one state)"
val=$("$INNET" ctl --fabric "$TOPO" --switch leaf3 --json reg read count value 3 | jq_py 'd.get("value", d.get("values"))')
[ "$val" = 5 ] || [ "$val" = "[5]" ] || fail "ctl reg read: $val, want 5 (the eBPF program's increment)"
"$INNET" ctl --fabric "$TOPO" --switch leaf3 reg write count value 3 42 >/dev/null || fail "ctl reg write"
v=$(in_ns h6 "$INNET" counter --to "$leaf3:9100" --from 10.0.30.7 read 3) || fail "counter read"
echo "$v" | grep -qw 42 || fail "the eBPF program reads '$v' after ctl wrote 42"
routes=$("$INNET" ctl --fabric "$TOPO" --switch leaf0 --json table list fwd routes | jq_py 'len(d["entries"])')
[ "$routes" -ge 27 ] || fail "leaf0's routes table lists $routes entries, want 27"
"$INNET" ctl --fabric "$TOPO" --switch leaf0 resources fwd | grep -q "^ebpf  *verifier .* ok" ||
	fail "ctl resources has no measured eBPF column"
echo "    reg read/write both ways, $routes routes listed, eBPF column measured"

echo "--- malformed datagrams are counted by name"
in_ns h0 $PY - "$leaf0" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("10.0.30.1", 30000))
s.sendto(b"garbage, not innet", (sys.argv[1], 9000))   # bad_magic (leaf0 has no port map)
s.sendto(b"\x1e\x01\x00", (sys.argv[1], 9000))          # too_short
s.sendto(b"\x1e\x02\x00\x00\x00\x74\x00\x65", (sys.argv[1], 9000))   # bad_version
s.sendto(b"\x1e\x01\x00\x00\x00\x09\x00\x65", (sys.argv[1], 9000))   # no_route (node 9)
EOF
sleep 0.3
drops=$(ctl leaf0 | jq_py 'd["programs"][0]["drops"]')
for r in bad_magic too_short bad_version no_route; do
	echo "$drops" | grep -q "'$r': 1" || fail "drop $r not counted once: $drops"
done
echo "    leaf0 drops: $drops"

echo "--- a datagram larger than the MTU: fragments go to the user-space engine"
out=$("$INNET" ping --topology "$TOPO" --from h0 --to h15 -c 3 --size 3000 --quiet) || fail "big probes lost: $out"
frag=$(ctl leaf0 | jq_py 'sum(p["xdp_pass"]["fragment"] for p in d["ports"])')
[ "$frag" -ge 2 ] || fail "leaf0 passed $frag fragments up, want >= 2"
echo "    $out; leaf0 passed $frag fragments to the kernel"

echo "--- frames dropped outside any verdict: counted by name (none here), in stats and metrics"
xd=$(ctl leaf0 | jq_py 'sorted((k, v) for p in d["ports"] for k, v in p["xdp_drop"].items() if v)')
[ "$xd" = "[]" ] || fail "leaf0 dropped frames outside any verdict: $xd"
names=$(ctl leaf0 | jq_py '" ".join(sorted(d["ports"][0]["xdp_drop"]))')
[ "$names" = "adjust egress_meta egress_short no_conf no_raw_program" ] || fail "xdp_drop names: $names"
m=$("$INNET" ctl --fabric "$TOPO" --switch leaf0 metrics)
grep -q '^innet_port_xdp_dropped_packets_total{.*reason="egress_short"} 0$' <<<"$m" ||
	fail "no innet_port_xdp_dropped_packets_total in leaf0's metrics"

echo "--- kill -9 of spine0: no XDP program left on its devices"
pid=$($PY -c "import json; print([s['pid'] for s in json.load(open('$DIR/state/fabric.json'))['switches'] if s['name']=='spine0'][0])")
kill -9 "$pid"
for i in $(seq 1 50); do
	in_ns spine0 ip link show p0 | grep -q "prog/xdp" || break
	sleep 0.1
done
in_ns spine0 ip -d link show | grep -q "prog/xdp" && fail "spine0's XDP program survived kill -9"
echo "--- fabric down: no namespace left"
timeout 30 "$INNET" fabric down "$TOPO" >/dev/null || true
left=$(ip netns list | grep -c "^innet-$NAME-" || true)
[ "$left" -eq 0 ] || fail "$left namespaces left after fabric down"
echo "ok"
