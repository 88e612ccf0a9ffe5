#!/usr/bin/env bash
# fabric_traffic.sh — traffic through running fabrics:
#   1. spine/leaf (examples/spine-leaf.json): probes between hosts on different
#      leaves all come back (leaf -> spine -> leaf, both ways); flows from
#      several hosts are spread over more than one spine (ECMP), and the
#      spines together forwarded exactly 2 packets per probe (there and back).
#   2. lossy (examples/lossy.json): link emulation drops, duplicates and
#      reorders at the rates configured, every lost packet is counted on the
#      switch port (sent = received + link_lost), and the same seed gives the
#      same fate twice in a row.
#
#        spine0  spine1  spine2  spine3                 h0 ──(5% loss, 200-300 us)── s0 ──(1% dup, 2% reorder)── h1
#           every leaf linked to every spine
#     leaf0 leaf1 ... leaf7   (2 hosts each: h0..h15)
#
# Uses $INNET (default ./build/innet). Bounded; the trap takes fabrics down.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=${INNET:-./build/innet}
PY=/usr/bin/python3
SL=examples/spine-leaf.json
LOSSY=examples/lossy.json

cleanup() {
	timeout 30 "$INNET" fabric down "$SL" >/dev/null 2>&1 || true
	timeout 30 "$INNET" fabric down "$LOSSY" >/dev/null 2>&1 || true
}
cleanup

# stat SWITCH TOPO PYEXPR: evaluate PYEXPR over the switch's stats JSON (d).
stat() {
	timeout 10 "$INNET" ctl --fabric "$2" --switch "$1" --json stats | "$PY" -c "import json,sys; d=json.load(sys.stdin); print($3)"
}

echo "--- spine/leaf: probes across leaves"
timeout 60 "$INNET" fabric up "$SL"
probes=0
for pair in h0:h15 h3:h8 h5:h6 h9:h2 h12:h1; do
	out=$(timeout 60 "$INNET" ping --topology "$SL" --from "${pair%%:*}" --to "${pair##*:}" -c 20 -i 0 --quiet) ||
		fail "ping $pair lost probes: $out"
	echo "$pair: $out"
	probes=$((probes + 20))
done
for h in h2 h4 h6 h8 h10 h12; do
	timeout 60 "$INNET" ping --topology "$SL" --from "$h" --to h15 -c 10 -i 0 --quiet >/dev/null ||
		fail "ping $h -> h15 lost probes"
	probes=$((probes + 10))
done
total=0 used=0
for s in spine0 spine1 spine2 spine3; do
	n=$(stat "$s" "$SL" 'sum(p["rx_pkts"] for p in d["programs"] if p["name"]=="fwd")')
	echo "$s forwarded $n"
	total=$((total + n))
	[ "$n" -gt 0 ] && used=$((used + 1))
done
[ "$total" -eq $((2 * probes)) ] || fail "spines forwarded $total packets, expected $((2 * probes))"
[ "$used" -ge 2 ] || fail "ECMP used only $used spine(s)"
drops=$(stat leaf0 "$SL" 'sum(sum(p["drops"].values()) for p in d["programs"])')
[ "$drops" -eq 0 ] || fail "leaf0 dropped $drops packets"
timeout 30 "$INNET" fabric down "$SL" >/dev/null

lossy_run() {
	timeout 60 "$INNET" fabric up "$LOSSY" >/dev/null
	local out rc=0
	out=$(timeout 120 "$INNET" ping --topology "$LOSSY" --from h0 --to h1 -c 400 -i 0 -W 100 --quiet) || rc=$?
	[ $rc -le 1 ] || fail "ping failed: $out"
	received=$(sed -E 's/.* ([0-9]+) received.*/\1/' <<<"$out")
	dups=$(sed -E 's/.* ([0-9]+) duplicates.*/\1/' <<<"$out")
	lost0=$(stat s0 "$LOSSY" 'd["ports"][0]["link_lost"]')
	dup1=$(stat s0 "$LOSSY" 'd["ports"][1]["link_duplicated"]')
	reord1=$(stat s0 "$LOSSY" 'd["ports"][1]["link_reordered"]')
	echo "received $received/400, ping saw $dups duplicates; s0: port0 link_lost=$lost0 port1 dup=$dup1 reordered=$reord1"
	timeout 30 "$INNET" fabric down "$LOSSY" >/dev/null
}

echo "--- lossy link: emulation counted and reproducible"
lossy_run
r1=$received l1=$lost0
# 5% loss each way on h0's link: a probe survives with p = 0.9025.
if [ "$received" -lt 330 ] || [ "$received" -gt 390 ]; then
	fail "received $received of 400: outside [330, 390]"
fi
[ $((received + lost0)) -eq 400 ] || fail "received $received + link_lost $lost0 != 400 sent"
[ "$dup1" -ge 1 ] || fail "no duplicates on h1's link (1% of ~750 packets)"
[ "$reord1" -ge 1 ] || fail "no reordering on h1's link (2% of ~750 packets)"
lossy_run
if [ "$received" -ne "$r1" ] || [ "$lost0" -ne "$l1" ]; then
	fail "same seed, different fate: $r1/$l1 then $received/$lost0"
fi
echo "PASS"
