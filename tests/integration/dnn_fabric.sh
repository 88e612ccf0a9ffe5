#!/usr/bin/env bash
# dnn_fabric.sh — the digits model running in a spine/leaf fabric
# (examples/dnn-spine-leaf.json: 2 spines x 4 leaves, one host per leaf):
#   1. compile: stages on leaf1, leaf2, leaf3, two pipelines each; the derived
#      topology is valid and the report names every switch and pipeline;
#   2. eval from h0: all 359 test images through the fabric, every logit equal
#      to the C reference, accuracy equal to the reference's; infer prints one;
#      nothing dropped on the layer switches, every inference completed there;
#   3. the same with 5% loss on every spine-leaf link (each direction): every
#      inference still completes (retried with a new id) with identical logits,
#      and the layer switches reclaimed the slots of the lost ones by timer;
#   4. plain-multiply mode gives the same logits as shift-and-add.
#
#          spine0   spine1
#        leaf0 leaf1 leaf2 leaf3      stage 0 on leaf1, 1 on leaf2, 2 on leaf3
#         h0    h1    h2    h3        client on h0 (its leaf is transit only)
#
# Uses $INNET (default ./build/innet). Bounded; the trap takes fabrics down.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=${INNET:-./build/innet}
PY=/usr/bin/python3
M=examples/dnn-digits
tmp=$(mktemp -d /tmp/innet-dnn-fabric.XXXXXX)
FAB=$tmp/fab.json
LOSSY=$tmp/lossy-fab.json
MUL=$tmp/mul-fab.json
cleanup() {
	for f in "$FAB" "$LOSSY" "$MUL"; do
		[ -f "$f" ] && timeout 30 "$INNET" fabric down "$f" >/dev/null 2>&1 || true
	done
	rm -rf "$tmp"
}

# stat SWITCH TOPO PYEXPR over the switch's stats JSON (d)
stat() {
	timeout 10 "$INNET" ctl --fabric "$2" --switch "$1" --json stats | "$PY" -c "import json,sys; d=json.load(sys.stdin); print($3)"
}
events() { # SWITCH TOPO INSTANCE -> "completed reclaimed"
	timeout 10 "$INNET" ctl --fabric "$2" --switch "$1" --json reg read "$3" events 0 2 |
		"$PY" -c "import json,sys; d=json.load(sys.stdin); print(*d['values'])"
}

echo "--- compile"
timeout 30 "$INNET" dnn compile $M.innet examples/dnn-spine-leaf.json --leaves leaf1,leaf2,leaf3 \
	--out "$FAB" >"$tmp/compile.out" || fail "compile: $(cat "$tmp/compile.out")"
cat "$tmp/compile.out"
for s in leaf1 leaf2 leaf3; do grep -Eq "^$s +[0-9] +1 " "$tmp/compile.out" || fail "no pipeline 1 on $s in the report"; done
grep -q "Tofino2 projection" "$tmp/compile.out" || fail "no projection"
if "$INNET" dnn compile $M.innet examples/dnn-spine-leaf.json --leaves leaf1,leaf2 >/dev/null 2>"$tmp/c.err"; then
	fail "3 stages on 2 leaves accepted"
fi
grep -q "3 stages" "$tmp/c.err" || fail "unexpected message: $(cat "$tmp/c.err")"

echo "--- eval through the fabric"
timeout 60 "$INNET" fabric up "$FAB" >/dev/null
out=$(timeout 60 "$INNET" dnn eval --topology "$FAB" --from h0 --testset $M.testset) || fail "eval: $out"
echo "$out"
grep -q "359/359 bit-exact" <<<"$out" || fail "not bit-exact"
grep -q "accuracy 97.49% (reference 97.49%)" <<<"$out" || fail "accuracy differs"
one=$(timeout 20 "$INNET" dnn infer --topology "$FAB" --from h3 --testset $M.testset --index 7) || fail "infer: $one"
echo "$one"
grep -q "equal to the C reference" <<<"$one" || fail "infer differs"
for s in leaf1 leaf2 leaf3; do
	d=$(stat $s "$FAB" 'sum(sum(p["drops"].values()) for p in d["programs"])')
	[ "$d" -eq 0 ] || fail "$s dropped $d packets"
	ev=$(events $s "$FAB" dnn0)
	[ "${ev% *}" -eq 360 ] || fail "$s dnn0 completed ${ev% *} inferences, expected 360"
done
timeout 30 "$INNET" fabric down "$FAB" >/dev/null

echo "--- 5% loss on every spine-leaf link"
"$PY" tools/topology/relocate.py examples/dnn-spine-leaf.json "$tmp/lossy.json" --name dnn-lossy \
	--state-dir /tmp/innet-dnn-lossy-test --addr-base 127.0.64.0 --hosts 127.0.65 \
	--rates 0.05,0,0 --links leaf:spine
timeout 30 "$INNET" dnn compile $M.innet "$tmp/lossy.json" --leaves leaf1,leaf2,leaf3 --timeout-ms 40 \
	--out "$LOSSY" >/dev/null || fail "compile lossy"
timeout 60 "$INNET" fabric up "$LOSSY" >/dev/null
out=$(timeout 90 "$INNET" dnn eval --topology "$LOSSY" --from h0 --testset $M.testset --timeout 120 --retries 30) ||
	fail "lossy eval: $out"
echo "$out"
grep -q "359/359 bit-exact" <<<"$out" || fail "lossy: not bit-exact"
retried=$(sed -E 's/.*, ([0-9]+) retried.*/\1/' <<<"$out")
[ "$retried" -gt 0 ] || fail "5% loss on 6 link crossings and nothing retried?"
sleep 0.2 # the last reclaim timers (40 ms)
reclaimed=0
for s in leaf1 leaf2 leaf3; do
	for i in dnn0 dnn1; do
		ev=$(events $s "$LOSSY" $i)
		reclaimed=$((reclaimed + ${ev#* }))
	done
done
echo "retried $retried inferences; layer switches reclaimed $reclaimed slots by timer"
[ "$reclaimed" -gt 0 ] || fail "no slot reclaimed"
timeout 30 "$INNET" fabric down "$LOSSY" >/dev/null

echo "--- plain multiply gives the same logits"
timeout 30 "$INNET" dnn compile $M.innet examples/dnn-spine-leaf.json --leaves leaf1,leaf2,leaf3 \
	--multiply mul --out "$MUL" >/dev/null || fail "compile mul"
timeout 60 "$INNET" fabric up "$MUL" >/dev/null
out=$(timeout 60 "$INNET" dnn eval --topology "$MUL" --from h2 --testset $M.testset --count 100 --window 32) ||
	fail "mul eval: $out"
echo "$out"
grep -q "100/100 bit-exact" <<<"$out" || fail "mul: not bit-exact"
timeout 30 "$INNET" fabric down "$MUL" >/dev/null
echo "PASS"
