#!/usr/bin/env bash
# paxos_dissector.sh — the Wireshark dissector (tools/wireshark/innet.lua)
# decodes Paxos packets (service 2): a 2A and a NACK written to a pcap by
# python, read back by tshark field by field. Skips (77) without tshark.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_cmd tshark
tmp=$(mktemp -d /tmp/innet-paxos-dis.XXXXXX)
cleanup() { rm -rf "$tmp"; }
/usr/bin/python3 - "$tmp/px.pcap" <<'PYEOF'
import struct, sys
def ip_udp(payload, sport, dport):
    udp = struct.pack('!HHHH', sport, dport, 8 + len(payload), 0) + payload
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
                     bytes([127, 0, 0, 1]), bytes([127, 0, 0, 2]))
    return ip + udp
base = bytes([0x1E, 1, 2, 0, 0, 1, 0, 100])
a2 = struct.pack('!BBHIIHHQQQQ', 4, 0, 0, 0x201, 0, 3, 0, 7, 0x500000001, 0, 0) + b'abc'
nack = struct.pack('!BBHIIHHQQQQ', 6, 2, 1, 0, 0, 0, 0, 4100, 0, 4, 4101)
with open(sys.argv[1], 'wb') as f:
    f.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 101))
    for p in (ip_udp(base + a2, 40000, 34952), ip_udp(base + nack, 34952, 40000)):
        f.write(struct.pack('<IIII', 0, 0, len(p), len(p)) + p)
PYEOF
out=$(timeout 30 tshark -X lua_script:tools/wireshark/innet.lua -r "$tmp/px.pcap" -T fields \
	-e innet.paxos.type -e innet.paxos.status -e innet.paxos.node -e innet.paxos.ballot \
	-e innet.paxos.vlen -e innet.paxos.instance -e innet.paxos.req_id -e innet.paxos.trim \
	-e innet.paxos.hi 2>/dev/null)
want=$'4\t0\t0\t0x00000201\t3\t7\t0x0000000500000001\t0\t0\n6\t2\t1\t0x00000000\t0\t4100\t0x0000000000000000\t4\t4101'
if [ "$out" != "$want" ]; then
	echo "FAIL: tshark decoded"; echo "$out"; echo "want"; echo "$want"; exit 1
fi
echo PASS
