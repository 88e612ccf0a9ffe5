#!/usr/bin/env bash
# dnn_paper.sh — the paper's own mini-AlexNet (Razavi et al., EuroP4'22,
# Table 1; examples/paper-alexnet.json, docs/dnn.md "The paper's network"):
# conv 3x3x3x64, 3x3x64x192, 3x3x192x384, FC 4096, 2048, 10, random weights.
#   1. tools/dnn/randmodel.py generates the same bytes as documented (SHA-256;
#      the 15 MB model is not shipped);
#   2. the C and Python integer references agree on every logit;
#   3. `innet dnn compile` onto the paper's fabric (4 spines x 8 leaves, one
#      layer per leaf S2..S7, 4 pipelines per switch) reports exactly the
#      figures of examples/paper-alexnet-table1.tsv (per layer and in the
#      paper's conventions), which docs/dnn.md shows; the Tofino2 projection
#      and its 2 ms check are the documented ones;
#   4. 8 images through that fabric (12 switches, 24 pipelines): bit-exact
#      with the C reference.
# Uses $INNET (default ./build/innet). Bounded; the trap takes the fabric down.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=${INNET:-./build/innet}
PY=/usr/bin/python3
TSV=examples/paper-alexnet-table1.tsv
MODEL_SHA=f5df0c1f8fb8d2288865d53277574ae9199a10f94b8599e7e7d665b5666e3f02
TESTSET_SHA=94f0eb546d8861833c7b8d5327e146e1d9f6d97da87bad99bb2b82877ff28af3
tmp=$(mktemp -d /tmp/innet-dnn-paper.XXXXXX)
FAB=$tmp/fab.json
M=$tmp/pa
cleanup() {
	[ -f "$FAB" ] && timeout 30 "$INNET" fabric down "$FAB" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}

echo "--- generate the paper's network (random weights, deterministic)"
timeout 120 $PY tools/dnn/randmodel.py examples/paper-alexnet.json --out "$M" || fail "randmodel.py"
echo "$MODEL_SHA  $M.innet" | sha256sum -c --quiet || fail "model bytes differ from the documented SHA-256"
echo "$TESTSET_SHA  $M.testset" | sha256sum -c --quiet || fail "test set bytes differ from the documented SHA-256"

echo "--- C and Python integer references agree"
timeout 120 "$INNET" dnn ref "$M.innet" "$M.testset" >"$tmp/ref.txt" 2>/dev/null || fail "innet dnn ref"
timeout 120 $PY - "$M.innet" "$M.testset" "$tmp/ref.txt" <<'PYEOF' || fail "references differ"
import sys
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

echo "--- compile onto the paper's fabric: the figures of $TSV"
timeout 60 "$INNET" dnn compile "$M.innet" examples/paper-alexnet-spine-leaf.json \
	--leaves leaf1,leaf2,leaf3,leaf4,leaf5,leaf6 --pipes 4 --max-vals 1024 --slots 8 --timeout-ms 10000 \
	--out "$FAB" >"$tmp/compile.out" || fail "compile: $(cat "$tmp/compile.out")"
timeout 30 $PY - "$TSV" "$tmp/compile.out" docs/dnn.md <<'PYEOF' || fail "the compiler's figures differ from the documented ones"
import re, sys
tsv, out, doc = sys.argv[1], open(sys.argv[2]).read().splitlines(), open(sys.argv[3]).read()
rows = [l.rstrip("\n").split("\t") for l in open(tsv) if l.strip() and not l.startswith("#")]
head, rows = rows[0], rows[1:]
R = [dict(zip(head, r)) for r in rows]
t1 = [l.split() for l in out if l.startswith("table1 ")][1:]          # skip the column header
per_layer = {}
for l in out:
    f = l.split()
    if len(f) == 8 and f[0].isdigit() and f[1].startswith(("conv", "dense")):
        per_layer.setdefault("order", []).append(f)
layers = per_layer["order"]
bad = 0
def check(what, got, want):
    global bad
    ok = str(got) == str(want)
    bad += not ok
    print("%-34s compiler %12s  documented %12s  %s" % (what, got, want, "ok" if ok else "DIFFERS"))
assert len(t1) == len(R), (len(t1), len(R))
for r, f in zip(R, t1):
    if r["row"] != "total":
        check(r["name"] + " output (after pooling)", f[3].replace("x1x1", ""), r["output"])
    check(r["name"] + " params (Table 1)", f[-3], r["innet_params"])
    check(r["name"] + " ops = 2 x MACs", f[-2], r["innet_ops"])
    check(r["name"] + " memory", f[-1], r["innet_memory"])
for r, f in zip(R[1:-1], layers):
    check(r["name"] + " MACs", f[6], r["innet_macs"])
    check(r["name"] + " weight bytes", f[4], r["innet_weight_bytes"])
    check(r["name"] + " accumulator bytes", f[5], r["innet_acc_bytes"])
    check(r["name"] + " shift-and-adds", f[7], r["innet_shift_adds"])
tot = [l.split() for l in out if l.startswith("total ")][0]
check("total MACs", tot[4], R[-1]["innet_macs"])
check("total shift-and-adds", tot[5], R[-1]["innet_shift_adds"])
# the paper's own figures, as documented, add up as the data file says
for col in ("paper_params", "paper_ops", "paper_memory", "innet_params", "innet_ops", "innet_memory"):
    check("sum of " + col, sum(int(r[col]) for r in R[:-1]), R[-1][col])
# docs/dnn.md shows the same rows
def n(x):
    return "{:,}".format(int(x))
for r in R:
    line = [l for l in doc.splitlines() if l.startswith("| %s | %s" % (r["row"], r["switch"]))]
    cells = [n(r[c]) for c in ("paper_params", "paper_ops", "paper_memory", "innet_params", "innet_ops", "innet_memory")]
    ok = len(line) == 1 and all(c in line[0] for c in cells)
    bad += not ok
    print("docs/dnn.md row %-5s %s" % (r["row"], "ok" if ok else "MISSING or DIFFERS: want " + " ".join(cells)))
sys.exit(1 if bad else 0)
PYEOF
grep -q "^Tofino2 projection: 560.449 us .* 4332 inferences/s .*slowest stage 230.853 us" "$tmp/compile.out" ||
	fail "projection: $(grep Tofino2 "$tmp/compile.out")"
grep -q "^Tofino2 2 ms check: under 2 ms at 48 operations per pass; under 2 ms from 14 operations per pass" \
	"$tmp/compile.out" || fail "2 ms check: $(grep '2 ms' "$tmp/compile.out")"
grep -q "560.449 µs" docs/dnn.md && grep -q "| 14 operations per pass |" docs/dnn.md ||
	fail "docs/dnn.md does not show the projection"
for s in 0 1 2 3 4 5; do
	grep -Eq "^leaf$((s + 1)) +$s +3 " "$tmp/compile.out" || fail "no stage $s pipeline 3 on leaf$((s + 1))"
done

echo "--- 8 images through the fabric (4 spines x 8 leaves, 6 stages x 4 pipelines)"
timeout 60 "$INNET" fabric up "$FAB" >/dev/null
out=$(timeout 120 "$INNET" dnn eval --topology "$FAB" --from h0 --testset "$M.testset" --count 8 --window 2 \
	--timeout 20000) || fail "eval: $out"
echo "$out"
grep -q "^8 inferences .* 8/8 bit-exact" <<<"$out" || fail "not bit-exact"
echo "dnn_paper: ok"
