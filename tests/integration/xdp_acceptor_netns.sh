#!/usr/bin/env bash
# xdp_acceptor_netns.sh — the Paxos acceptor on the XDP target, over veths
# of MTU 1500, with values of three sizes:
#
#   200 bytes    2A, 2B, RECOVER and its answer: all in eBPF
#   1416 bytes   the 2A fills one frame exactly (14 + 20 + 8 + 56 + 1416 =
#                1514): in eBPF; the RECOVER's answer grows to that size in
#                place, in eBPF
#   2000 bytes   the 2A arrives as IP fragments: the kernel reassembles, the
#                user-space engine votes and sends the 2B (fragmented); the
#                RECOVER (small, taken by eBPF) and a 1A would be answered
#                with more than one frame: eBPF passes them up untouched
#                (innet_pass_up) and the user-space engine answers — once:
#                the 1A's promise then refuses the old ballot
#
#          co 10.0.71.1 (sends 2As)
#               │ port 0
#          ┌────┴────┐   acc (paxos_acceptor, eBPF on both ports)
#          │   acc   │   learner group 0 = port 1 (UDP 34953)
#          └────┬────┘
#               │ port 1
#          l0 10.0.71.2 (gets 2Bs; sends RECOVER, 1A)
#
# Needs root; exits 77 (skip) without it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=$(realpath "${INNET:-./build/innet}")
PY=/usr/bin/python3
need_root_netns
NAME=xac$$
DIR=$(mktemp -d /tmp/innet-xac.XXXXXX)
TOPO=$DIR/topo.json
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	fabric_teardown "$TOPO" "$NAME"
	rm -rf "$DIR"
}
in_ns() { local ns=$1; shift; ip netns exec "innet-$NAME-$ns" "$@"; }
stats() { "$INNET" ctl --fabric "$TOPO" --switch acc --json stats; }
jq_py() { $PY -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

cat >"$TOPO" <<EOF
{"name": "$NAME", "target": "xdp", "state_dir": "$DIR/state", "addr_base": "127.0.70.0",
 "switches": [{"name": "acc", "node": 1, "programs": [
   {"name": "acc", "program": "paxos_acceptor", "udp": [34952],
    "args": {"id": 0, "ring": 16, "learners": [1]}}]}],
 "hosts": [{"name": "co", "node": 100, "addr": "127.0.71.1"},
           {"name": "l0", "node": 101, "addr": "127.0.71.2"}],
 "links": [{"a": "co", "b": "acc"}, {"a": "l0", "b": "acc"}]}
EOF
timeout 30 "$INNET" fabric up "$TOPO" >/dev/null || fail "fabric up"
port_addr() { "$INNET" fabric show "$TOPO" --json |
	jq_py "[p['addr'] for p in d['switches'][0]['ports'] if p['peer']=='$1'][0]"; }
acc_co=$(port_addr co)
acc_l0=$(port_addr l0)

# One Python helper for both hosts: send Paxos messages, collect answers.
cat >"$DIR/px.py" <<'EOF'
import socket, struct, sys, time
def value(inst, n):   # instance inst's value: n bytes, recognisable at both ends
    return bytes((inst * 7 + i) % 251 for i in range(n))
def msg(type_, ballot, inst, req, v=b"", flags=0):
    h = struct.pack("!BBBBHH", 0x1E, 1, 2, flags, 1, 100)
    p = struct.pack("!BBHIIHHQQQQ", type_, 0, 0, ballot, 0, len(v), 0, inst, req, 0, 0)
    return h + p + v
def parse(b):
    t, st, node, ballot, vb, vlen, _, inst, req, trim, hi = struct.unpack("!BBHIIHHQQQQ", b[8:56])
    return dict(type=t, status=st, ballot=ballot, vballot=vb, vlen=vlen, inst=inst, req=req,
                value=b[56:])
role, me, to = sys.argv[1], sys.argv[2], sys.argv[3]
sizes = {0: 200, 1: 2000, 2: 1416}
if role == "learn":      # the 2Bs of instances 0..2, multicast to UDP 34953
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((me, 34953)); s.settimeout(5)
    got = {}
    while len(got) < 3:
        m = parse(s.recvfrom(65535)[0])
        got[m["inst"]] = m
    for i, n in sizes.items():
        m = got[i]
        assert m["type"] == 5 and m["status"] == 0 and m["vballot"] == 0x100, m
        assert m["vlen"] == n and m["value"] == value(i, n), "2B %d: %d bytes" % (i, len(m["value"]))
    print("2Bs of 200, 2000, 1416 bytes: whole")
    sys.exit(0)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((me, 40000)); s.settimeout(5)
def ask(b):
    s.sendto(b, (to, 34952))
    return parse(s.recvfrom(65535)[0])
if role == "propose":    # the 2As: no answer to us (the 2Bs go to the learner)
    for i, n in sizes.items():
        s.sendto(msg(4, 0x100, i, 1000 + i, value(i, n)), (to, 34952))
        time.sleep(0.05)
elif role == "recover":  # RECOVER 0..2: each vote back, whole
    for i, n in sizes.items():
        m = ask(msg(8, 0, i, 0))
        assert m["type"] == 5 and m["status"] == 0 and m["vballot"] == 0x100, m
        assert m["req"] == 1000 + i and m["value"] == value(i, n), "RECOVER %d" % i
    print("RECOVER answers of 200, 2000, 1416 bytes: whole")
elif role == "promise":  # 1A at 1 (ballot 0x201): a 1B with the 2000-byte vote
    m = ask(msg(2, 0x201, 1, 0))
    assert m["type"] == 3 and m["status"] == 0 and m["ballot"] == 0x201, m
    assert m["vballot"] == 0x100 and m["value"] == value(1, 2000), "1B"
    print("1A answered with the 2000-byte vote")
elif role == "late":     # the old ballot at 1 is now refused: NACK(ballot, 0x201)
    m = ask(msg(4, 0x100, 1, 7, b"late"))
    assert m["type"] == 6 and m["status"] == 1 and m["ballot"] == 0x201, m
    print("2A at the old ballot: NACK(ballot 0x201)")
EOF

echo "--- 2As of 200, 2000 (fragmented) and 1416 bytes; the 2Bs reach the learner whole"
in_ns l0 $PY "$DIR/px.py" learn 10.0.71.2 - >"$DIR/learn.out" 2>&1 &
pids+=($!)
sleep 0.3
in_ns co $PY "$DIR/px.py" propose 10.0.71.1 "$acc_co" || fail "propose"
wait "${pids[@]}" || fail "learner: $(cat "$DIR/learn.out")"
pids=()
cat "$DIR/learn.out"

echo "--- RECOVER each; 1A at the fragmented one; the old ballot refused"
in_ns l0 $PY "$DIR/px.py" recover 10.0.71.2 "$acc_l0" || fail "recover"
in_ns l0 $PY "$DIR/px.py" promise 10.0.71.2 "$acc_l0" || fail "promise"
in_ns co $PY "$DIR/px.py" late 10.0.71.1 "$acc_co" || fail "late 2A"

st=$(stats)
p='d["programs"][0]'
rx=$(jq_py "$p['rx_pkts']" <<<"$st")
xrx=$(jq_py "$p['xdp_rx_pkts']" <<<"$st")
up=$(jq_py "$p['handoffs']['oversize']" <<<"$st")
mc=$(jq_py "$p['actions']['multicast']" <<<"$st")
rf=$(jq_py "$p['actions']['reflect']" <<<"$st")
echo "    rx $rx, in eBPF $xrx, passed up by the handler $up, multicast $mc, reflect $rf"
# 8 packets, each counted once. In eBPF at least: 2As 0 and 2 (the 2B is
# the 2A rewritten), the late 2A (a NACK). The fragmented 2A goes to the
# user-space engine before any handler. RECOVER 1 and the 1A must be passed
# up (their answers exceed the MTU); RECOVERs 0 and 2 are answered in eBPF
# where the frame's buffer has room to grow — on a veth that is the
# sender's skb tailroom, often too little: then they are passed up too.
[ "$rx" -eq 8 ] || fail "want 8 packets counted once each, got $rx"
[ "$xrx" -ge 3 ] || fail "want at least the 2As 0, 2 and the late one in eBPF, got $xrx"
[ "$up" -ge 2 ] || fail "want RECOVER 1 and the 1A passed up, got $up"
[ $((xrx + up)) -eq 7 ] || fail "every packet but the fragmented one goes through eBPF: $xrx + $up"
[ "$mc" -eq 3 ] && [ "$rf" -eq 5 ] || fail "want 3 multicast, 5 reflect: got $mc, $rf"
frag=$(jq_py 'sum(p["xdp_pass"]["fragment"] for p in d["ports"] if p["index"] == 0)' <<<"$st")
[ "$frag" -ge 2 ] || fail "want the 2000-byte 2A's fragments passed to the kernel, got $frag"
echo "ok"
