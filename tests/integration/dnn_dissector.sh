#!/usr/bin/env bash
# dnn_dissector.sh — the Wireshark dissector (tools/wireshark/innet.lua)
# decodes inference packets (service 4): an ACT carrying 5 activations, a
# RESULT carrying 3 logits (one negative), and an ACT whose length does not
# match n (flagged malformed), written to a pcap by python and read back by
# tshark field by field. Skips (77) without tshark.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need_cmd tshark
tmp=$(mktemp -d /tmp/innet-dnn-dis.XXXXXX)
cleanup() { rm -rf "$tmp"; }
/usr/bin/python3 - "$tmp/dnn.pcap" <<'PYEOF'
import struct, sys
def ip_udp(payload, sport, dport):
    udp = struct.pack('!HHHH', sport, dport, 8 + len(payload), 0) + payload
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
                     bytes([127, 0, 0, 1]), bytes([127, 0, 0, 2]))
    return ip + udp
def base(dst, src):
    return struct.pack('!BBBBHH', 0x1E, 1, 4, 0, dst, src)
# op stage client_node infer_id model seq n offset
act = base(12, 101) + struct.pack('!BBHIIHHI', 1, 0, 101, 77, 0x2d240c32, 2, 5, 2048) + \
    struct.pack('5b', 1, -2, 3, -128, 127)
res = base(101, 16) + struct.pack('!BBHIIHHI', 2, 5, 101, 77, 0x2d240c32, 1, 3, 2) + \
    struct.pack('!3i', 4272, -7416, 0)
bad = base(12, 101) + struct.pack('!BBHIIHHI', 1, 1, 101, 78, 0x2d240c32, 0, 9, 0) + b'\x01\x02'
with open(sys.argv[1], 'wb') as f:
    f.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 101))
    for p in (ip_udp(act, 9300, 9300), ip_udp(res, 9301, 9300), ip_udp(bad, 9300, 9302)):
        f.write(struct.pack('<IIII', 0, 0, len(p), len(p)) + p)
PYEOF
out=$(timeout 30 tshark -X lua_script:tools/wireshark/innet.lua -r "$tmp/dnn.pcap" -T fields \
	-e innet.service -e innet.dnn.op -e innet.dnn.stage -e innet.dnn.client_node -e innet.dnn.infer_id \
	-e innet.dnn.model -e innet.dnn.seq -e innet.dnn.n -e innet.dnn.offset -e innet.dnn.activations \
	-e innet.dnn.logit 2>/dev/null)
want=$'4\t1\t0\t101\t77\t0x2d240c32\t2\t5\t2048\t01fe03807f\t\n4\t2\t5\t101\t77\t0x2d240c32\t1\t3\t2\t\t4272,-7416,0\n4\t1\t1\t101\t78\t0x2d240c32\t0\t9\t0\t0102\t'
if [ "$out" != "$want" ]; then
	echo "FAIL: tshark decoded"; echo "$out"; echo "want"; echo "$want"; exit 1
fi
info=$(timeout 30 tshark -X lua_script:tools/wireshark/innet.lua -r "$tmp/dnn.pcap" 2>/dev/null)
echo "$info"
grep -q "ACT id 77 stage 0 seq 2 values \[2048, 2053)" <<<"$info" || { echo "FAIL: ACT summary"; exit 1; }
grep -q "RESULT id 77 pipe 1 logits \[2, 5): 4272 -7416 0" <<<"$info" || { echo "FAIL: RESULT summary"; exit 1; }
exp=$(timeout 30 tshark -X lua_script:tools/wireshark/innet.lua -r "$tmp/dnn.pcap" -Y 'innet.dnn.len.expert' \
	-T fields -e innet.dnn.infer_id 2>/dev/null)
[ "$exp" = 78 ] || { echo "FAIL: length expert on '$exp', want 78"; exit 1; }
echo PASS
