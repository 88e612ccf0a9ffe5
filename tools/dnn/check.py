#!/usr/bin/python3
"""check.py — the three levels of the DNN model, compared on a test set:

  1. float:  the trained float weights (PREFIX.float.npz), argmax accuracy;
  2. int:    the integer model file through the Python integer reference
             (innetdnn.qinfer) and through the C reference (`innet dnn ref`,
             whose output is read from --c-ref FILE): every logit must be equal;
  3. fabric: checked by `innet dnn eval` (tests/integration/dnn_fabric.sh).

  check.py --model M.innet --testset M.testset --float M.float.npz --c-ref REF.txt [--max-drop 1.0]

Exit 0 if C and Python agree bit for bit and int8 accuracy is within
--max-drop points of float accuracy; 1 otherwise.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import innetdnn as nd  # noqa: E402
import train  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--testset", required=True)
    ap.add_argument("--float", required=True)
    ap.add_argument("--c-ref", required=True, help="output of 'innet dnn ref MODEL TESTSET'")
    ap.add_argument("--max-drop", type=float, default=1.0)
    a = ap.parse_args()
    x, y = nd.read_testset(a.testset)
    _, layers = nd.read_model(a.model)
    qlogits = nd.qinfer(layers, x)
    net = train.Net(np.random.default_rng(0))
    w = np.load(a.float)
    for k in net.p:
        net.p[k] = w[k]
    fout, _, _ = net.forward(x.astype(np.float64) / 2.0 ** train.IN_EXP)
    float_acc = (fout.argmax(1) == y).mean() * 100
    int_acc = (qlogits.argmax(1) == y).mean() * 100
    c = np.loadtxt(a.c_ref, dtype=np.int64, ndmin=2)
    ok = True
    if c.shape != (len(y), 3 + qlogits.shape[1]):
        print("C reference output has shape %s, expected %s" % (c.shape, (len(y), 3 + qlogits.shape[1])))
        return 1
    if not (c[:, 1] == y).all():
        print("C reference labels differ from the test set")
        ok = False
    diff = np.nonzero((c[:, 3:] != qlogits).any(axis=1))[0]
    if len(diff):
        i = diff[0]
        print("C and Python integer references differ on %d samples; first %d: C %s python %s"
              % (len(diff), i, c[i, 3:].tolist(), qlogits[i].tolist()))
        ok = False
    if not (c[:, 2] == qlogits.argmax(1)).all():
        print("C classes differ from Python argmax")
        ok = False
    print("float %.2f%%, int8 %.2f%% (C and Python integer references: %d/%d samples bit-exact), "
          "drop %.2f points (allowed %.2f)" % (float_acc, int_acc, len(y) - len(diff), len(y),
                                               float_acc - int_acc, a.max_drop))
    if float_acc - int_acc > a.max_drop:
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
