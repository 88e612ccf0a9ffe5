#!/usr/bin/env bash
# dnn_alexnet.sh — the paper's mini-AlexNet shape (examples/mini-alexnet.*,
# docs/dnn.md "mini-AlexNet"): 3x32x32 input, 3 conv + 3 dense layers, random
# weights from tools/dnn/randmodel.py.
#   1. regenerating the model and test set from examples/mini-alexnet.json
#      gives the shipped bytes (the generator is deterministic);
#   2. the C and Python integer references agree on every logit; `innet dnn
#      time` prints its key=value line;
#   3. `innet dnn compile` reports the expected per-layer parameters, weight
#      and accumulator bytes, MACs and shift-and-adds (the paper's Table 1
#      columns), the totals, and the Tofino2 projection: under 2 ms, and the
#      smallest operations-per-pass budget that keeps it there (8 and 4
#      pipelines per switch); a plan the layer program cannot hold (1
#      pipeline: 32768 accumulators) is reported but not written;
#   4. the model runs through a 2-spine x 6-leaf fabric (6 stages x 8
#      pipelines, shift-and-add) bit-exact with the C reference;
#   5. a generated model with a stride-2 convolution on a 96x96 input (the
#      layer program's row-segment path: strided, and planes too large for
#      its padded-plane path) and a stride-1 one, in both multiply modes,
#      through a 3-leaf fabric: bit-exact.
# Uses $INNET (default ./build/innet). Bounded; the trap takes the fabric down.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=${INNET:-./build/innet}
PY=/usr/bin/python3
M=examples/mini-alexnet
tmp=$(mktemp -d /tmp/innet-dnn-alexnet.XXXXXX)
FAB=$tmp/fab.json
SFAB=$tmp/strided-fab.json
cleanup() {
	for f in "$FAB" "$SFAB"; do
		[ -f "$f" ] && timeout 30 "$INNET" fabric down "$f" >/dev/null 2>&1 || true
	done
	# the switches' logs stay in the shipped topology's state directory
	if [ -f "$FAB" ]; then
		sd=$($PY -c 'import json, sys; print(json.load(open(sys.argv[1]))["state_dir"])' "$FAB" 2>/dev/null || true)
		case $sd in /tmp/innet-mini-alexnet-dnn) [ -e "$sd/fabric.json" ] || rm -rf "$sd" ;; esac
	fi
	rm -rf "$tmp"
}

echo "--- the generator is deterministic"
timeout 60 $PY tools/dnn/randmodel.py $M.json --out "$tmp/ma" || fail "randmodel.py"
cmp "$tmp/ma.innet" $M.innet || fail "regenerated model differs from $M.innet"
cmp "$tmp/ma.testset" $M.testset || fail "regenerated test set differs from $M.testset"

echo "--- C and Python integer references agree"
timeout 60 "$INNET" dnn ref $M.innet $M.testset >"$tmp/ref.txt" 2>/dev/null || fail "innet dnn ref"
timeout 60 $PY - $M.innet $M.testset "$tmp/ref.txt" <<'PYEOF' || fail "references differ"
import os, sys
import numpy as np
sys.path.insert(0, "tools/dnn")
import innetdnn as nd
_, layers = nd.read_model(sys.argv[1])
x, _ = nd.read_testset(sys.argv[2])
q = nd.qinfer(layers, x)
c = np.loadtxt(sys.argv[3], dtype=np.int64, ndmin=2)
assert c.shape == (len(x), 3 + q.shape[1]), c.shape
bad = np.nonzero((c[:, 3:] != q).any(axis=1))[0]
print("C and Python: %d/%d samples bit-exact" % (len(x) - len(bad), len(x)))
sys.exit(1 if len(bad) else 0)
PYEOF

echo "--- the references, timed (what bench/inference.sh reads)"
t=$(timeout 60 "$INNET" dnn time $M.innet $M.testset --count 3 --rounds 2 | tail -n 1) || fail "dnn time"
echo "$t"
grep -Eq "^int_p50_us=[0-9.]+ int_p99_us=[0-9.]+ int_per_s=[0-9.]+ int_cpu_us=[0-9.]+ float_p50_us=[0-9.]+ \
float_p99_us=[0-9.]+ float_per_s=[0-9.]+ float_cpu_us=[0-9.]+ class_agree=[0-3]/3$" <<<"$t" || fail "dnn time output"
if "$INNET" dnn time $M.innet >/dev/null 2>&1; then fail "dnn time without a test set accepted"; fi

echo "--- the compile report (8 pipelines per switch)"
timeout 30 "$INNET" dnn compile $M.innet examples/mini-alexnet-spine-leaf.json --pipes 8 --max-vals 1024 \
	--slots 32 --timeout-ms 5000 --out "$FAB" >"$tmp/compile.out" || fail "compile: $(cat "$tmp/compile.out")"
# layer type output params wbytes acc-bytes MACs shift-adds (shift-adds depend on the weights)
expect() { grep -Eq "^$1 +$2 +$3 +$4 +$5 +$6 +$7 +$8\$" "$tmp/compile.out" || fail "report: no line '$*'"; }
expect 0 conv3x3 32x32x32 896 992 131072 884736 3133440
expect 3 conv3x3 64x16x16 18496 18688 65536 4718592 16570624
expect 6 conv3x3 128x8x8 73856 74240 32768 4718592 16562240
expect 10 dense 256x1x1 524544 525312 1024 524288 1840917
expect 12 dense 128x1x1 32896 33280 512 32768 115250
expect 14 dense 10x1x1 1290 1320 40 1280 4451
expect total "" "" 651978 653832 230952 10880256 38226922
grep -q "^total: 651978 parameters, 653832 weight bytes, 10880256 MACs, 38226922 shift-and-adds" \
	"$tmp/compile.out" || fail "totals"
grep -q "^Tofino2 projection: 67.943 us .* 33924 inferences/s .*slowest stage 29.477 us" "$tmp/compile.out" ||
	fail "projection (8 pipelines): $(grep Tofino2 "$tmp/compile.out")"
grep -q "^Tofino2 2 ms check: under 2 ms at 48 operations per pass; under 2 ms from 2 operations per pass" \
	"$tmp/compile.out" || fail "2 ms check (8 pipelines): $(grep '2 ms' "$tmp/compile.out")"
for s in 0 1 2 3 4 5; do
	grep -Eq "^leaf$s +$s +7 " "$tmp/compile.out" || fail "no stage $s pipeline 7 on leaf$s"
done

echo "--- Tofino2 has 4 pipelines per switch"
timeout 30 "$INNET" dnn compile $M.innet examples/mini-alexnet-spine-leaf.json --pipes 4 >"$tmp/c4.out" ||
	fail "compile --pipes 4"
grep -q "^Tofino2 projection: 137.321 us .* 16708 inferences/s .*slowest stage 59.851 us" "$tmp/c4.out" ||
	fail "projection (4 pipelines): $(grep Tofino2 "$tmp/c4.out")"
grep -q "under 2 ms at 48 operations per pass; under 2 ms from 4 operations per pass" "$tmp/c4.out" ||
	fail "2 ms check (4 pipelines): $(grep '2 ms' "$tmp/c4.out")"

if timeout 30 "$INNET" dnn compile $M.innet examples/mini-alexnet-spine-leaf.json --pipes 1 --out "$tmp/x.json" \
	>/dev/null 2>"$tmp/c4.err"; then
	fail "a plan the layer program cannot hold (32768 accumulators per pipeline) was written"
fi
grep -q "32768 accumulators exceed the layer program's 16384; use more pipelines" "$tmp/c4.err" ||
	fail "unexpected message: $(cat "$tmp/c4.err")"

echo "--- through the fabric"
timeout 60 "$INNET" fabric up "$FAB" >/dev/null
# 40 inferences cycle through the 32 test images
out=$(timeout 120 "$INNET" dnn eval --topology "$FAB" --from h0 --testset $M.testset --count 40 --window 4 \
	--timeout 10000) || fail "eval: $out"
echo "$out"
grep -q "^40 inferences .* 40/40 bit-exact" <<<"$out" || fail "not bit-exact"
one=$(timeout 60 "$INNET" dnn infer --topology "$FAB" --from h5 --testset $M.testset --index 31 --timeout 10000) ||
	fail "infer: $one"
echo "$one"
grep -q "equal to the C reference" <<<"$one" || fail "infer differs"
timeout 30 "$INNET" fabric down "$FAB" >/dev/null

echo "--- strided and large convolutions, both multiply modes"
cat >"$tmp/strided.json" <<'JSON'
{"input": [2, 96, 96], "seed": 7, "samples": 6, "layers": [
  {"type": "conv2d", "filters": 4, "kernel": 5, "stride": 2, "pad": 2}, {"type": "relu"}, {"type": "maxpool2"},
  {"type": "conv2d", "filters": 8, "kernel": 3, "stride": 1, "pad": 1}, {"type": "relu"}, {"type": "flatten"},
  {"type": "dense", "units": 10}]}
JSON
timeout 60 $PY tools/dnn/randmodel.py "$tmp/strided.json" --out "$tmp/strided" >/dev/null || fail "randmodel strided"
$PY tools/topology/relocate.py examples/dnn-spine-leaf.json "$tmp/strided-topo.json" --name dnn-strided-test \
	--state-dir "$tmp/strided-state" --addr-base 127.0.78.0 --hosts 127.0.79
for mode in shift mul; do
	timeout 30 "$INNET" dnn compile "$tmp/strided.innet" "$tmp/strided-topo.json" --leaves leaf1,leaf2,leaf3 \
		--pipes 4 --max-vals 1024 --slots 16 --timeout-ms 5000 --multiply $mode --out "$SFAB" >/dev/null ||
		fail "compile strided ($mode)"
	timeout 60 "$INNET" fabric up "$SFAB" >/dev/null
	out=$(timeout 120 "$INNET" dnn eval --topology "$SFAB" --from h0 --testset "$tmp/strided.testset" \
		--window 3 --timeout 10000) || fail "strided eval ($mode): $out"
	echo "$mode: $out"
	grep -q "6/6 bit-exact" <<<"$out" || fail "strided ($mode): not bit-exact"
	timeout 30 "$INNET" fabric down "$SFAB" >/dev/null
done
echo "PASS"
