#!/usr/bin/env bash
# xdp_coordinator_netns.sh — the Paxos coordinator on the XDP target: a
# client's REQUESTs become 2A messages multicast by devmap broadcast, each
# copy rewritten by the egress program for its acceptor. A group XDP cannot
# broadcast (two members on one port) falls back to the user-space engine,
# counted as a hand-off, and still delivers every copy.
#
#          client 10.0.61.1
#               │ port 0
#          ┌────┴────┐   coordinator (paxos_coordinator, eBPF on p0..p3)
#          │   co    │   group 0 = ports 1, 2, 3 (the acceptors' links)
#          └┬───┬───┬┘
#      port 1  2   3
#          a1  a2  a3    (hosts: listeners on UDP 34952, counting 2As)
#
# Needs root; exits 77 (skip) without it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=$(realpath "${INNET:-./build/innet}")
PY=/usr/bin/python3
need_root_netns
NAME=xco$$
DIR=$(mktemp -d /tmp/innet-xco.XXXXXX)
TOPO=$DIR/topo.json
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	fabric_teardown "$TOPO" "$NAME"
	rm -rf "$DIR"
}
in_ns() { local ns=$1; shift; ip netns exec "innet-$NAME-$ns" "$@"; }
stats() { "$INNET" ctl --fabric "$TOPO" --switch co --json stats; }
jq_py() { $PY -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

cat >"$TOPO" <<EOF
{"name": "$NAME", "target": "xdp", "state_dir": "$DIR/state", "addr_base": "127.0.60.0",
 "switches": [{"name": "co", "node": 1, "programs": [
   {"name": "coord", "program": "paxos_coordinator", "udp": [34952],
    "args": {"acceptors": [1, 2, 3], "ballot": 513}}]}],
 "hosts": [{"name": "client", "node": 100, "addr": "127.0.61.1"},
           {"name": "a1", "node": 11, "addr": "127.0.61.11"},
           {"name": "a2", "node": 12, "addr": "127.0.61.12"},
           {"name": "a3", "node": 13, "addr": "127.0.61.13"}],
 "links": [{"a": "client", "b": "co"}, {"a": "a1", "b": "co"}, {"a": "a2", "b": "co"},
           {"a": "a3", "b": "co"}]}
EOF
timeout 30 "$INNET" fabric up "$TOPO" >/dev/null || fail "fabric up"
co=$("$INNET" fabric show "$TOPO" --json | jq_py '[p["addr"] for p in d["switches"][0]["ports"] if p["peer"]=="client"][0]')

listen() { # acceptor host, count to expect, output file
	in_ns "$1" $PY - "10.0.61.$2" "$3" "$4" <<'EOF' &
import socket, struct, sys, time
addr, want, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
# a frame that came through XDP becomes an skb of a whole page: 50 of them
# overflow the default receive buffer while python is slow to read
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
s.bind((addr, 34952)); s.settimeout(5)
open(out + ".ready", "w").close()   # bound: the sender may start
seen = []
try:
    while len(seen) < want:
        b, src = s.recvfrom(9000)
        if len(b) < 56 or b[0] != 0x1E or b[8] != 4:
            continue
        ballot, = struct.unpack("!I", b[12:16]); inst, = struct.unpack("!Q", b[24:32])
        seen.append((inst, ballot, b[56:].decode()))
except socket.timeout:
    pass
open(out, "w").write("\n".join("%d %d %s" % t for t in sorted(seen)) + "\n")
EOF
	pids+=($!)
}
ready() { # output files: wait until each listener is bound (python starts slowly on a busy machine)
	local f i
	for f in "$@"; do
		for ((i = 0; i < 200; i++)); do [ -e "$f.ready" ] && break; sleep 0.05; done
		[ -e "$f.ready" ] || fail "listener for $f did not start"
	done
}
send() { # n requests, first value index
	in_ns client $PY - "$co" "$1" "$2" <<'EOF'
import socket, struct, sys
co, n, first = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("10.0.61.1", 40000))
for i in range(first, first + n):
    v = b"SET k%d v" % i
    h = struct.pack("!BBBBHH", 0x1E, 1, 2, 0, 1, 100)
    p = struct.pack("!BBHIIHHQQQQ", 1, 0, 0, 0, 0, len(v), 0, 0, (5 << 32) | (i + 1), 0, 0)
    s.sendto(h + p + v, (co, 34952))
EOF
}

echo "--- 50 requests: 2As by devmap broadcast to a1, a2, a3"
for a in 1 2 3; do listen "a$a" 1$a 50 "$DIR/a$a.out"; done
ready "$DIR"/a{1,2,3}.out
send 50 0
wait "${pids[@]}"; pids=()
for a in 1 2 3; do
	n=$(wc -l <"$DIR/a$a.out")
	[ "$n" -eq 50 ] || fail "a$a got $n of 50 2As"
	head -n 1 "$DIR/a$a.out" | grep -q "^0 513 SET k0 v$" || fail "a$a's first 2A: $(head -n 1 "$DIR/a$a.out")"
	tail -n 1 "$DIR/a$a.out" | grep -q "^49 513 SET k49 v$" || fail "a$a's last 2A: $(tail -n 1 "$DIR/a$a.out")"
done
cmp -s "$DIR/a1.out" "$DIR/a2.out" && cmp -s "$DIR/a2.out" "$DIR/a3.out" || fail "the acceptors saw different 2As"
st=$(stats)
xrx=$(jq_py 'd["programs"][0]["xdp_rx_pkts"]' <<<"$st")
mc=$(jq_py 'd["programs"][0]["actions"]["multicast"]' <<<"$st")
slow=$(jq_py 'd["programs"][0]["handoffs"]["multicast"]' <<<"$st")
[ "$xrx" -eq 50 ] && [ "$mc" -eq 50 ] && [ "$slow" -eq 0 ] ||
	fail "want 50 handled in eBPF, 50 multicast, 0 hand-offs: got $xrx, $mc, $slow"
ptx=$(jq_py 'sum(p["xdp_tx_pkts"] for p in d["ports"] if p["index"] in (1,2,3))' <<<"$st")
[ "$ptx" -eq 150 ] || fail "the acceptor ports sent $ptx copies from XDP, want 150"
echo "    each acceptor got instances 0..49, ballot 513, byte-identical; 150 copies from XDP"

echo "--- a group XDP cannot broadcast (a2 twice on port 2): the user-space engine sends it"
"$INNET" ctl --fabric "$TOPO" --switch co group set coord 0 1 2 2 3 >/dev/null || fail "group set"
for a in 1 3; do listen "a$a" 1$a 20 "$DIR/b$a.out"; done
listen a2 12 40 "$DIR/b2.out"
ready "$DIR"/b{1,2,3}.out
send 20 100
wait "${pids[@]}"; pids=()
[ "$(wc -l <"$DIR/b1.out")" -eq 20 ] || fail "a1 got $(wc -l <"$DIR/b1.out") of 20"
[ "$(wc -l <"$DIR/b3.out")" -eq 20 ] || fail "a3 got $(wc -l <"$DIR/b3.out") of 20"
[ "$(wc -l <"$DIR/b2.out")" -eq 40 ] || fail "a2 got $(wc -l <"$DIR/b2.out") of 40 (two copies each)"
slow=$(stats | jq_py 'd["programs"][0]["handoffs"]["multicast"]')
[ "$slow" -eq 20 ] || fail "want 20 multicast hand-offs, got $slow"
echo "    a1 20, a2 40, a3 20 copies; 20 hand-offs counted"
echo "ok"
