#!/usr/bin/env bash
# p4_router_netns.sh — the project's P4 L3 router (p4/l3_router.json, which
# p4c compiled from p4/l3_router.p4) on a spine/leaf fabric in network
# namespaces (examples/p4-spine-leaf.json: the topology's "p4" key, one
# commands file of routes per switch), on both targets:
#
#        spine0   spine1            leaf0 → 10.10.1.0/24 via spine0
#         │  ╲   ╱  │               leaf1 → 10.10.0.0/24 via spine1
#         │   ╲ ╱   │
#        leaf0   leaf1
#        │   │   │   │
#       h0  h1  h2  h3              10.10.0.1 .2 | 10.10.1.1 .2
#
# Checks, per target (the user-space engine, then XDP):
#   - ping h0 -> h2, h2 -> h0 (through spine0 one way, spine1 the other)
#     and h1 -> h3;
#   - the routers' P4 counters read with `innet ctl` (simple_switch_CLI's
#     counter_read): packets in on each leaf's host port, out of each spine;
#   - a frame with a bad IPv4 header checksum from h0 is dropped by leaf0
#     and counted by name (counter drops_bad_checksum, +1), and h2 never
#     sees it.
# Needs root and ip netns (skips, 77, without). About 20 s per target.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_root_netns
need_cmd ping
[ -x "$INNET" ] || fail "no $INNET (make)"
[ -f p4/l3_router.json ] || skip "no p4/l3_router.json in this tree (the project's P4 programs: make p4)"

TMP=$(mktemp -d /tmp/p4-router.XXXXXX)
TOPO=""
NAME="p4r$$"
cleanup() {
	[ -n "$TOPO" ] && fabric_teardown "$TOPO" "$NAME"
	rm -rf "$TMP"
}
fail_logs "$TMP/*.log" '/tmp/innet-'"$NAME"'/*.log'

# A copy of the example with a name of its own (namespaces innet-NAME-*),
# its own state directory and the target; paths stay relative to examples/.
make_topo() { # target
	TOPO="$ROOT/examples/.p4-spine-leaf-$NAME-$1.json"
	$PY - "$ROOT/examples/p4-spine-leaf.json" "$TOPO" "$NAME" "$1" <<'EOF'
import json, sys
src, dst, name, target = sys.argv[1:]
t = json.load(open(src))
t["name"] = name
t["state_dir"] = "/tmp/innet-" + name
if target == "xdp":
    t["target"] = "xdp"
json.dump(t, open(dst, "w"), indent=1)
EOF
}

ctl() { # switch, command...
	local sw=$1
	shift
	timeout 20 "$INNET" ctl --fabric "$TOPO" --switch "$sw" "$@"
}

# The packets of a counter_read (simple_switch_CLI's "NAME[I]= (B bytes, N packets)")
packets() { sed -n 's/.*= ([0-9]* bytes, \([0-9]*\) packets).*/\1/p' | head -n 1; }

bad_checksum_frame() { # from h0's namespace, out of eth0, to leaf0's port 2
	in_ns "innet-$NAME-h0" $PY - <<'EOF'
import socket, struct
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
dst = bytes.fromhex("02696e000302")          # leaf0 port 2
src = open("/sys/class/net/eth0/address").read().strip()
src = bytes.fromhex(src.replace(":", ""))
udp = struct.pack("!HHHH", 4000, 5000, 12, 0) + b"bad!"
ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 7, 0, 64, 17, 0xdead,
                 bytes([10, 10, 0, 1]), bytes([10, 10, 1, 1]))
s.send(dst + src + b"\x08\x00" + ip + udp)
EOF
}

run_target() { # udp | xdp
	local tgt=$1 t0=$SECONDS before after n
	make_topo "$tgt"
	timeout 180 "$INNET" fabric up "$TOPO" >"$TMP/up-$tgt.log" 2>&1 || fail "$tgt: fabric up failed: $(tail -n 5 "$TMP/up-$tgt.log")"
	for pair in h0:10.10.1.1 h2:10.10.0.1 h1:10.10.1.2; do
		in_ns "innet-$NAME-${pair%%:*}" ping -c 3 -i 0.2 -W 2 "${pair#*:}" >"$TMP/ping-$tgt.log" 2>&1 ||
			fail "$tgt: ping ${pair%%:*} -> ${pair#*:} failed: $(tail -n 3 "$TMP/ping-$tgt.log")"
	done
	n=$(ctl leaf0 counter_read port_rx 2 | packets)
	[ "${n:-0}" -ge 3 ] || fail "$tgt: leaf0's port_rx[2] counted ${n:-nothing} (expected >= 3 pings from h0)"
	n=$(ctl spine0 counter_read port_tx 1 | packets)
	[ "${n:-0}" -ge 3 ] || fail "$tgt: spine0's port_tx[1] counted ${n:-nothing} (h0's pings to leaf1)"
	n=$(ctl spine1 counter_read port_tx 0 | packets)
	[ "${n:-0}" -ge 3 ] || fail "$tgt: spine1's port_tx[0] counted ${n:-nothing} (h2's pings to leaf0)"
	before=$(ctl leaf0 counter_read drops_bad_checksum 0 | packets)
	[ -n "$before" ] || fail "$tgt: no drops_bad_checksum counter on leaf0"
	bad_checksum_frame
	for _ in $(seq 1 20); do
		after=$(ctl leaf0 counter_read drops_bad_checksum 0 | packets)
		[ "${after:-0}" -gt "$before" ] && break
		sleep 0.1
	done
	[ "${after:-0}" -eq $((before + 1)) ] ||
		fail "$tgt: the bad checksum frame was counted $((${after:-0} - before)) times (drops_bad_checksum $before -> ${after:-?})"
	n=$(ctl leaf1 counter_read port_tx 2 | packets)
	ctl leaf0 stats >"$TMP/stats-$tgt.log" 2>&1 || true
	if [ "$tgt" = xdp ]; then   # the routers ran in eBPF, not handed to user space
		grep -Eq '^  xdp +[1-9][0-9]* of [0-9]+ received handled in eBPF' "$TMP/stats-$tgt.log" ||
			fail "xdp: leaf0's P4 program handled nothing in XDP: $(cat "$TMP/stats-$tgt.log")"
	fi
	timeout 60 "$INNET" fabric down "$TOPO" >"$TMP/down-$tgt.log" 2>&1 || fail "$tgt: fabric down failed"
	rm -f "$TOPO"
	TOPO=""
	echo "ok: $tgt: pings across spine0 and spine1, counters, a bad checksum counted by name ($((SECONDS - t0)) s)"
}

run_target udp
run_target xdp
