#!/usr/bin/env bash
# fabric_spine_leaf.sh — `innet fabric` end to end over examples/spine-leaf.json:
# up (12 switch processes), status, refuse a second up, down, every pid gone,
# down again (idempotent). Traffic through the fabric is tested elsewhere.
#
#          spine0         spine1         spine2         spine3          nodes 1-4
#            |              |              |              |
#     +------+-------+------+-------+------+-------+------+------+
#     |   every leaf has one link to every spine: 32 links       |
#     |   leaf port i = spine i (0-3); spine port j = leaf j     |
#     +---+------+------+------+------+------+------+------+-----+
#         |      |      |      |      |      |      |      |
#       leaf0  leaf1  leaf2  leaf3  leaf4  leaf5  leaf6  leaf7          nodes 11-18
#       /  \   /  \   /  \   /  \   /  \   /  \   /  \   /  \          leaf ports 4, 5
#      h0  h1 h2  h3 h4  h5 h6  h7 h8  h9 h10 h11 h12 h13 h14 h15       nodes 101-116
#                                              (127.0.30.1 .. 127.0.30.16)
#
# Uses $INNET (default ./build/innet). Exit 0 = pass. Bounded: each step has
# a timeout; the trap brings the fabric down whatever happens.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=${INNET:-./build/innet}
TOPO=examples/spine-leaf.json
STATE=/tmp/innet-spine-leaf
N_SWITCHES=12

step() { echo "--- $*"; }

[ -x "$INNET" ] || fail "$INNET not built (run make)"

cleanup() { timeout 30 "$INNET" fabric down "$TOPO" >/dev/null 2>&1 || true; }

# Gone = no /proc entry, or a zombie waiting to be reaped.
pid_gone() {
	local st
	st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 0
	[ -z "$st" ] || [ "$st" = Z ] || [ "$st" = X ]
}

step "show"
out=$(timeout 10 "$INNET" fabric show "$TOPO")
grep -q "^topology spine-leaf: 12 switches, 16 hosts, 48 links" <<<"$out" || fail "show: $out"
grep -q "via 0-3 .*h10" <<<"$out" || fail "show: no ECMP route over the 4 spines"

step "up"
cleanup # a fabric left over from an earlier run
timeout 60 "$INNET" fabric up "$TOPO" --timeout 20 || fail "fabric up failed"

step "status"
status=$(timeout 10 "$INNET" fabric status "$TOPO") || fail "status: not all running:
$status"
echo "$status"
mapfile -t pids < <(awk '$3 == "running" { print $2 }' <<<"$status")
[ "${#pids[@]}" -eq $N_SWITCHES ] || fail "expected $N_SWITCHES running switches, got ${#pids[@]}"
for p in "${pids[@]}"; do
	tr '\0' ' ' <"/proc/$p/cmdline" | grep -q "switch --topology .*spine-leaf.json --name " ||
		fail "pid $p is not an innet switch"
done
for sw in spine0 spine3 leaf0 leaf7; do
	[ -S "$STATE/$sw.sock" ] || fail "no control socket $STATE/$sw.sock"
	grep -q "ready" "$STATE/$sw.log" || fail "$sw did not log ready"
done
[ -f "$STATE/fabric.json" ] || fail "no $STATE/fabric.json"

step "second up is refused"
if timeout 30 "$INNET" fabric up "$TOPO" 2>/dev/null; then
	fail "a second 'fabric up' succeeded"
fi
n=$(timeout 10 "$INNET" fabric status "$TOPO" | awk '$3 == "running"' | wc -l)
[ "$n" -eq $N_SWITCHES ] || fail "second up disturbed the fabric ($n running)"

step "down"
timeout 30 "$INNET" fabric down "$TOPO" || fail "fabric down failed"
for _ in $(seq 50); do
	left=0
	for p in "${pids[@]}"; do pid_gone "$p" || left=$((left + 1)); done
	[ $left -eq 0 ] && break
	sleep 0.1
done
[ $left -eq 0 ] || fail "$left switch processes still running after down"
[ ! -e "$STATE/fabric.json" ] || fail "fabric.json left behind"
ls "$STATE"/*.sock >/dev/null 2>&1 && fail "control sockets left behind"

step "down again, status"
timeout 30 "$INNET" fabric down "$TOPO" >/dev/null || fail "second down failed"
if timeout 10 "$INNET" fabric status "$TOPO" >/dev/null; then
	fail "status says running after down"
fi
echo "PASS"
