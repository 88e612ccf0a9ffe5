#!/usr/bin/python3
"""train.py — train a small CNN on the sklearn digits set with numpy only,
quantize it to the innet integer model format (docs/dnn.md) and write:

  OUT.innet        the model file (int8 weights, int32 biases, power-of-two shifts)
  OUT.testset      the held-out test set, inputs quantized as the model expects
  OUT.float.npz    the float weights (for the float level of the three-level check)

and report float and int8 accuracy on the test set. Deterministic (fixed seeds).

  /usr/bin/python3 tools/dnn/train.py --out examples/dnn-digits [--epochs 40]

Network (8x8x1 input, pixels 0..16 quantized as q = 4 * pixel, x = q / 64):
  conv2d 3x3 pad 1, 8 filters -> relu -> maxpool2 -> flatten (128)
  -> dense 32 -> relu -> dense 10 (logits)
"""
import argparse
import math
import os
import sys

import numpy as np
from sklearn.datasets import load_digits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import innetdnn as nd  # noqa: E402

IN_EXP = 6  # input activations: x = q * 2^-6


def im2col(x, k=3, pad=1):
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    cols = np.empty((n, h, w, c, k, k), dtype=x.dtype)
    for ky in range(k):
        for kx in range(k):
            cols[:, :, :, :, ky, kx] = xp[:, :, ky:ky + h, kx:kx + w].transpose(0, 2, 3, 1)
    return cols.reshape(n, h * w, c * k * k)


def col2im(dcols, shape, k=3, pad=1):
    n, c, h, w = shape
    d = dcols.reshape(n, h, w, c, k, k)
    dx = np.zeros((n, c, h + 2 * pad, w + 2 * pad))
    for ky in range(k):
        for kx in range(k):
            dx[:, :, ky:ky + h, kx:kx + w] += d[:, :, :, :, ky, kx].transpose(0, 3, 1, 2)
    return dx[:, :, pad:pad + h, pad:pad + w]


class Net:
    def __init__(self, rng, filters=8, hidden=32):
        self.p = {
            "cw": rng.normal(0, math.sqrt(2 / 9), (filters, 1, 3, 3)),
            "cb": np.zeros(filters),
            "w1": rng.normal(0, math.sqrt(2 / (filters * 16)), (hidden, filters * 16)),
            "b1": np.zeros(hidden),
            "w2": rng.normal(0, math.sqrt(2 / hidden), (10, hidden)),
            "b2": np.zeros(10),
        }

    def forward(self, x, keep=False):
        p = self.p
        n = x.shape[0]
        f = p["cw"].shape[0]
        cols = im2col(x)                                          # n, 64, 9
        conv = cols @ p["cw"].reshape(f, -1).T + p["cb"]          # n, 64, f
        conv = conv.transpose(0, 2, 1).reshape(n, f, 8, 8)
        r1 = np.maximum(conv, 0)
        win = r1.reshape(n, f, 4, 2, 4, 2)
        pool = win.max(axis=(3, 5))
        flat = pool.reshape(n, -1)
        h = flat @ p["w1"].T + p["b1"]
        r2 = np.maximum(h, 0)
        out = r2 @ p["w2"].T + p["b2"]
        if keep:
            self.cache = (x, cols, conv, r1, pool, flat, h, r2)
        return out, conv, h

    def backward(self, dout):
        p = self.p
        x, cols, conv, r1, pool, flat, h, r2 = self.cache
        n, f = x.shape[0], p["cw"].shape[0]
        g = {}
        g["w2"] = dout.T @ r2
        g["b2"] = dout.sum(0)
        dr2 = dout @ p["w2"]
        dh = dr2 * (h > 0)
        g["w1"] = dh.T @ flat
        g["b1"] = dh.sum(0)
        dpool = (dh @ p["w1"]).reshape(pool.shape)
        win = r1.reshape(n, f, 4, 2, 4, 2)
        mask = win == pool[:, :, :, None, :, None]
        # route the gradient to one maximum per window (the first, as argmax would)
        first = np.cumsum(mask.reshape(n, f, 4, 2, 4, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, f, 4, 4, 4), axis=4)
        first = (first == 1) & mask.transpose(0, 1, 2, 4, 3, 5).reshape(n, f, 4, 4, 4)
        first = first.reshape(n, f, 4, 4, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, f, 8, 8)
        dr1 = first * np.repeat(np.repeat(dpool, 2, axis=2), 2, axis=3)
        dconv = dr1 * (conv > 0)
        dc = dconv.reshape(n, f, 64).transpose(0, 2, 1)            # n, 64, f
        g["cw"] = np.einsum("npf,npk->fk", dc, cols).reshape(p["cw"].shape)
        g["cb"] = dc.sum((0, 1))
        return g


def softmax_xent(logits, y):
    z = logits - logits.max(1, keepdims=True)
    e = np.exp(z)
    pr = e / e.sum(1, keepdims=True)
    loss = -np.log(pr[np.arange(len(y)), y] + 1e-12).mean()
    d = pr.copy()
    d[np.arange(len(y)), y] -= 1
    return loss, d / len(y)


def pow2_exp(maxabs, limit=127):
    """Largest e with maxabs * 2^e <= limit."""
    if maxabs <= 0:
        return 0
    return int(math.floor(math.log2(limit / maxabs)))


def quantize(net, xcal):
    """Power-of-two quantization; activation exponents from calibration data."""
    p = net.p
    _, conv, h = net.forward(xcal)
    layers = []
    e_a = IN_EXP
    # conv
    e_w = pow2_exp(np.abs(p["cw"]).max())
    e_o = pow2_exp(np.maximum(conv, 0).max())
    e_o = min(e_o, e_a + e_w)
    layers.append({"type": nd.CONV2D, "w": np.clip(np.round(p["cw"] * 2.0 ** e_w), -127, 127),
                   "b": np.round(p["cb"] * 2.0 ** (e_a + e_w)), "shift": e_a + e_w - e_o, "stride": 1, "pad": 1})
    layers += [{"type": nd.RELU}, {"type": nd.MAXPOOL2}, {"type": nd.FLATTEN}]
    e_a = e_o
    e_w = pow2_exp(np.abs(p["w1"]).max())
    e_o = min(pow2_exp(np.maximum(h, 0).max()), e_a + e_w)
    layers.append({"type": nd.DENSE, "w": np.clip(np.round(p["w1"] * 2.0 ** e_w), -127, 127),
                   "b": np.round(p["b1"] * 2.0 ** (e_a + e_w)), "shift": e_a + e_w - e_o})
    layers.append({"type": nd.RELU})
    e_a = e_o
    e_w = pow2_exp(np.abs(p["w2"]).max())
    layers.append({"type": nd.DENSE, "w": np.clip(np.round(p["w2"] * 2.0 ** e_w), -127, 127),
                   "b": np.round(p["b2"] * 2.0 ** (e_a + e_w)), "shift": 0})
    for l in layers:
        if "w" in l:
            l["w"] = l["w"].astype(np.int8)
            l["b"] = l["b"].astype(np.int64)
    return layers


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output prefix (writes PREFIX.innet, .testset, .float.npz)")
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--test-fraction", type=float, default=0.2)
    a = ap.parse_args()

    d = load_digits()
    q_all = (d.images.astype(np.int64) * 4).astype(np.int8)          # 0..64
    y_all = d.target.astype(np.int64)
    rng = np.random.default_rng(a.seed)
    order = rng.permutation(len(y_all))
    n_test = int(round(len(y_all) * a.test_fraction))
    te, tr = order[:n_test], order[n_test:]
    x_all = q_all.astype(np.float64)[:, None] / 2.0 ** IN_EXP
    xtr, ytr, xte, yte = x_all[tr], y_all[tr], x_all[te], y_all[te]

    net = Net(rng)
    m = {k: np.zeros_like(v) for k, v in net.p.items()}
    v = {k: np.zeros_like(v) for k, v in net.p.items()}
    lr, b1, b2, t = 0.003, 0.9, 0.999, 0
    for ep in range(a.epochs):
        perm = rng.permutation(len(ytr))
        tot = 0.0
        for i in range(0, len(perm), 32):
            idx = perm[i:i + 32]
            out, _, _ = net.forward(xtr[idx], keep=True)
            loss, dout = softmax_xent(out, ytr[idx])
            tot += loss * len(idx)
            g = net.backward(dout)
            t += 1
            for k in net.p:
                m[k] = b1 * m[k] + (1 - b1) * g[k]
                v[k] = b2 * v[k] + (1 - b2) * g[k] ** 2
                net.p[k] -= lr * (m[k] / (1 - b1 ** t)) / (np.sqrt(v[k] / (1 - b2 ** t)) + 1e-8)
        if ep % 10 == 9 or ep == a.epochs - 1:
            print("epoch %d loss %.4f" % (ep + 1, tot / len(ytr)), file=sys.stderr)

    fout, _, _ = net.forward(xte)
    float_acc = (fout.argmax(1) == yte).mean() * 100
    layers = quantize(net, xtr)
    nd.write_model(a.out + ".innet", (1, 8, 8), layers)
    qte = q_all[te][:, None]
    nd.write_testset(a.out + ".testset", qte, yte)
    np.savez(a.out + ".float.npz", **net.p)
    _, layers_back = nd.read_model(a.out + ".innet")
    logits = nd.qinfer(layers_back, qte)
    int_acc = (logits.argmax(1) == yte).mean() * 100
    print("float accuracy %.2f%%, int8 accuracy %.2f%% on %d test images (difference %.2f points)"
          % (float_acc, int_acc, len(yte), float_acc - int_acc))
    print("shifts: " + " ".join("%s:%d" % (nd.NAMES[l["type"]], l["shift"]) for l in layers if "shift" in l))
    return 0 if abs(float_acc - int_acc) <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
