#!/usr/bin/env bash
# capture_tshark.sh — end to end: pcap capture of a switch port, decoded by
# tshark with the innet Wireshark dissector (tools/wireshark/innet.lua).
#
# Starts a switch running the counter program, captures port 0 through
# `innet ctl capture start`, sends counter requests (INC and READ) from a small
# UDP client, stops the capture, and checks with tshark that both directions
# decode field by field: innet.service, innet.dst_node/src_node,
# innet.counter.op/index/value/status, with the synthesized IPv4 addresses
# the right way round. Also checks the heuristic dissector (a second, unlisted
# UDP port) and that a capture with MAXPKTS stops by itself.
#
# The switch's addresses are a random 127.A.B.0/24 block per run (override
# with INNET_CAP_NET=127.0.0) so that concurrent test runs do not collide.
#
# Exit 0 on success, 1 on failure, 77 (skip, as tests/run counts it) when
# tshark or python3 is missing.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
INNET=${INNET:-./build/innet}
PYTHON=${PYTHON:-/usr/bin/python3}
LUA=tools/wireshark/innet.lua
NET=${INNET_CAP_NET:-127.$((100 + RANDOM % 100)).$((1 + RANDOM % 250))}
SW0=$NET.1          # switch port 0
SW1=$NET.2          # switch port 1 (peer $NET.3)
CLIENT=$NET.10      # the counter client
UDP=9100            # registered with the dissector
UDP_HEUR=9177       # not registered: only the heuristic finds it

for tool in tshark "$PYTHON" timeout; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		skip "$tool not installed"
	fi
done
if [[ ! -x $INNET ]]; then
	echo "FAIL: $INNET not built (run make)"
	exit 1
fi

TMP=$(mktemp -d /tmp/innet-capture.XXXXXX)
SOCK=$TMP/ctl.sock
PCAP=$TMP/port0.pcap
PCAP_MAX=$TMP/port0-max.pcap
pid=""

cleanup() {
	if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$TMP"
}

fail_details() {
	if [[ -f $TMP/switch.log ]]; then
		echo "--- switch log"
		cat "$TMP/switch.log"
	fi
}

ctl() {
	timeout 10 "$INNET" ctl -s "$SOCK" "$@"
}

# ---------------------------------------------------------------------------
# The switch
timeout -k 5 120 "$INNET" switch --name cap --workers 1 \
	--port "$SW0" --port "$SW1=$NET.3" \
	--program "counter@$UDP,$UDP_HEUR" --ctl "$SOCK" >"$TMP/switch.log" 2>&1 &
pid=$!
for _ in $(seq $(slow 100)); do
	if ctl ping >/dev/null 2>&1; then
		break
	fi
	kill -0 "$pid" 2>/dev/null || fail "the switch exited"
	sleep 0.1
done
ctl ping >/dev/null || fail "the switch's control socket does not answer"

# ---------------------------------------------------------------------------
# The client: send requests one at a time, wait for each reply, print
# "op index value status" per reply. Args: switch-ip client-ip then requests
# "udp:op:index:value".
counter_client() {
	timeout 20 "$PYTHON" - "$@" <<'EOF'
import socket, struct, sys
sw, client = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((client, 0))
s.settimeout(2.0)
for req in sys.argv[3:]:
    udp, op, index, value = (int(x, 0) for x in req.split(":"))
    # innet base header: magic, version, service=1 (counter), flags,
    # dst_node=1, src_node=7; counter header: op, status, reserved, index, value
    pkt = struct.pack("!BBBBHH", 0x1E, 1, 1, 0, 1, 7) + \
          struct.pack("!BBHIQ", op, 0, 0, index, value)
    s.sendto(pkt, (sw, udp))
    data, _ = s.recvfrom(2048)
    magic, ver, svc, flags, dst, src = struct.unpack("!BBBBHH", data[:8])
    rop, status, _, rindex, rvalue = struct.unpack("!BBHIQ", data[8:24])
    assert (magic, ver, svc, dst, src) == (0x1E, 1, 1, 7, 1), data
    print(f"{rop:#x} {rindex} {rvalue} {status}")
EOF
}

# ---------------------------------------------------------------------------
# 1. capture both directions of INC, INC, READ (and one via the heuristic port)
ctl capture start 0 "$PCAP" >/dev/null || fail "capture start"
ctl --json info | grep -q '"capturing":true' || fail "info does not show the capture"
replies=$(counter_client "$SW0" "$CLIENT" \
	"$UDP:1:3:5" "$UDP:1:3:0x10" "$UDP:2:3:0" "$UDP_HEUR:2:3:0") \
	|| fail "counter client"
expected_replies=$'0x81 3 5 0\n0x81 3 21 0\n0x82 3 21 0\n0x82 3 21 0'
[[ $replies == "$expected_replies" ]] || fail "unexpected replies:"$'\n'"$replies"
ctl capture stop 0 >/dev/null || fail "capture stop"
if ctl capture stop 0 >/dev/null 2>&1; then
	fail "a second capture stop succeeded"
fi

fields=(-e ip.src -e ip.dst -e udp.srcport -e udp.dstport -e innet.service
	-e innet.dst_node -e innet.src_node -e innet.counter.op -e innet.counter.index
	-e innet.counter.value -e innet.counter.status)
decoded=$(timeout 30 tshark -X "lua_script:$LUA" -r "$PCAP" -T fields -E separator=' ' \
	"${fields[@]}" 2>"$TMP/tshark.err") || { cat "$TMP/tshark.err"; fail "tshark"; }
# tshark prints the op field with its hex base, e.g. 0x01 / 0x81.
expected=$(cat <<EOF
$CLIENT $SW0 PORT $UDP 1 1 7 0x01 3 5 0
$SW0 $CLIENT $UDP PORT 1 7 1 0x81 3 5 0
$CLIENT $SW0 PORT $UDP 1 1 7 0x01 3 16 0
$SW0 $CLIENT $UDP PORT 1 7 1 0x81 3 21 0
$CLIENT $SW0 PORT $UDP 1 1 7 0x02 3 0 0
$SW0 $CLIENT $UDP PORT 1 7 1 0x82 3 21 0
$CLIENT $SW0 PORT $UDP_HEUR 1 1 7 0x02 3 0 0
$SW0 $CLIENT $UDP_HEUR PORT 1 7 1 0x82 3 21 0
EOF
)
# The client's port is ephemeral: take it from the first packet.
cport=$(awk 'NR == 1 { print $3 }' <<<"$decoded")
[[ $cport =~ ^[0-9]+$ ]] || fail "no packets decoded:"$'\n'"$decoded"
expected=${expected//PORT/$cport}
if [[ $decoded != "$expected" ]]; then
	echo "--- expected"
	echo "$expected"
	echo "--- decoded"
	echo "$decoded"
	fail "tshark fields differ"
fi

# The synthesized IPv4 and UDP checksums are right.
bad=$(timeout 30 tshark -r "$PCAP" -o ip.check_checksum:TRUE -o udp.check_checksum:TRUE \
	-Y 'ip.checksum.status == "Bad" || udp.checksum.status == "Bad"' 2>/dev/null | wc -l)
[[ $bad -eq 0 ]] || fail "$bad packets with a bad IPv4 or UDP checksum"

# The filterable names exist.
n=$(timeout 30 tshark -X "lua_script:$LUA" -r "$PCAP" \
	-Y 'innet.service == 1 && innet.counter.reply == 1 && innet.counter.opcode == 2' 2>/dev/null | wc -l)
[[ $n -eq 2 ]] || fail "display filter on innet.counter.reply/opcode matched $n packets, want 2"

# ---------------------------------------------------------------------------
# 2. MAXPKTS: the capture stops by itself after 3 packets
ctl capture start 0 "$PCAP_MAX" 3 >/dev/null || fail "capture start with MAXPKTS"
counter_client "$SW0" "$CLIENT" "$UDP:2:1:0" "$UDP:2:2:0" "$UDP:2:4:0" >/dev/null \
	|| fail "counter client (MAXPKTS)"
n=$(timeout 30 tshark -r "$PCAP_MAX" 2>/dev/null | wc -l)
[[ $n -eq 3 ]] || fail "MAXPKTS 3 capture holds $n packets"
if ctl capture stop 0 >/dev/null 2>&1; then
	fail "capture stop after MAXPKTS succeeded: the capture did not stop by itself"
fi
ctl --json info | grep -q '"capturing":true' && fail "info still shows a capture"

# The switch is still healthy.
ctl ping >/dev/null || fail "the switch stopped answering"
kill -0 "$pid" 2>/dev/null || fail "the switch died"
echo "PASS: capture_tshark"
