#!/usr/bin/python3
"""randmodel.py — an innet integer model with random weights from an
architecture description (JSON), and a test set of random inputs for it.

  /usr/bin/python3 tools/dnn/randmodel.py examples/mini-alexnet.json --out examples/mini-alexnet

writes OUT.innet (docs/dnn.md, "Model file") and OUT.testset ("samples" random
inputs, label 0). For resource reports and benchmarks: the weights are not
trained, so the classes mean nothing, but every layer computes real sums.

Deterministic on every machine and numpy version: all random numbers come from
SplitMix64 (vectorized in uint64, which wraps mod 2^64) seeded with "seed":

  weights  uniform integers in [-127, 127]
  inputs   uniform integers in [-128, 127]
  shift    per requantized layer, the smallest s with
           percentile99(|acc|) / 2^s <= 64 over the test set's inputs
           (accumulators without bias), so activations use the int8 range
           without saturating most of them
  biases   uniform in [-2^s, 2^s] (the last layer: [-128, 128])

Description: {"input": [C, H, W], "seed": N, "samples": N, "layers": [
  {"type": "conv2d", "filters": F, "kernel": K, "stride": S, "pad": P},
  {"type": "dense", "units": U}, {"type": "relu"}, {"type": "maxpool2"},
  {"type": "flatten"}]}; the last layer must be dense.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import innetdnn as nd  # noqa: E402

GAMMA = np.uint64(0x9E3779B97F4A7C15)
M1 = np.uint64(0xBF58476D1CE4E5B9)
M2 = np.uint64(0x94D049BB133111EB)


class SplitMix64:
    """Steele, Lea, Flood: SplitMix64, one 64-bit word per call, vectorized."""

    def __init__(self, seed):
        self.state = np.uint64(seed)

    def words(self, n):
        with np.errstate(over="ignore"):
            x = self.state + GAMMA * np.arange(1, n + 1, dtype=np.uint64)
            self.state = self.state + GAMMA * np.uint64(n)
            z = (x ^ (x >> np.uint64(30))) * M1
            z = (z ^ (z >> np.uint64(27))) * M2
            return z ^ (z >> np.uint64(31))

    def ints(self, n, lo, hi):
        """n integers uniform in [lo, hi] (modulo bias < 2^-50: negligible)."""
        return (self.words(n) % np.uint64(hi - lo + 1)).astype(np.int64) + lo


def build(desc):
    rng = SplitMix64(int(desc["seed"]))
    c, h, w = (int(v) for v in desc["input"])
    n = int(desc.get("samples", 32))
    x = rng.ints(n * c * h * w, -128, 127).reshape(n, c, h, w)
    specs = desc["layers"]
    if not specs or specs[-1]["type"] != "dense":
        raise ValueError("the last layer must be dense")
    layers = []
    a = x.astype(np.int64)
    for i, s in enumerate(specs):
        t = s["type"]
        last = i == len(specs) - 1
        if t in ("conv2d", "dense"):
            if t == "conv2d":
                k = int(s["kernel"])
                wt = rng.ints(int(s["filters"]) * a.shape[1] * k * k, -127, 127)
                wt = wt.reshape(int(s["filters"]), a.shape[1], k, k)
                stride, pad = int(s.get("stride", 1)), int(s.get("pad", 0))
                acc = nd.conv_int(a, wt, np.zeros(wt.shape[0], dtype=np.int64), stride, pad)
            else:
                flat = a.reshape(a.shape[0], -1)
                wt = rng.ints(int(s["units"]) * flat.shape[1], -127, 127).reshape(int(s["units"]), -1)
                acc = (flat @ wt.T).reshape(a.shape[0], -1, 1, 1)
                stride, pad = 1, 0
            if last:
                shift = 0
                b = rng.ints(wt.shape[0], -128, 128)
            else:
                p99 = float(np.percentile(np.abs(acc), 99)) if acc.size else 0.0
                shift = 0
                while shift < 31 and p99 / (1 << shift) > 64:
                    shift += 1
                b = rng.ints(wt.shape[0], -(1 << shift), 1 << shift)
            bshape = (1, -1, 1, 1)
            acc = acc + b.reshape(bshape)
            a = acc if last else nd.requant(acc, shift)
            entry = {"type": nd.CONV2D if t == "conv2d" else nd.DENSE, "w": wt.astype(np.int8),
                     "b": b.astype(np.int32), "shift": shift}
            if t == "conv2d":
                entry.update(stride=stride, pad=pad)
            layers.append(entry)
        elif t == "relu":
            a = np.maximum(a, 0)
            layers.append({"type": nd.RELU})
        elif t == "maxpool2":
            nn, cc, hh, ww = a.shape
            a = a[:, :, :hh // 2 * 2, :ww // 2 * 2].reshape(nn, cc, hh // 2, 2, ww // 2, 2).max(axis=(3, 5))
            layers.append({"type": nd.MAXPOOL2})
        elif t == "flatten":
            a = a.reshape(a.shape[0], -1, 1, 1)
            layers.append({"type": nd.FLATTEN})
        else:
            raise ValueError("layer %d: unknown type %r" % (i, t))
    return (c, h, w), layers, x.astype(np.int8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("description", help="architecture JSON (e.g. examples/mini-alexnet.json)")
    ap.add_argument("--out", required=True, help="output prefix: OUT.innet, OUT.testset")
    ap.add_argument("--samples", type=int, help="random inputs in the test set (default: the file's)")
    args = ap.parse_args()
    desc = json.load(open(args.description))
    if args.samples is not None:
        desc["samples"] = args.samples
    shape, layers, x = build(desc)
    nd.write_model(args.out + ".innet", shape, layers)
    nd.write_testset(args.out + ".testset", x, np.zeros(x.shape[0], dtype=np.uint8))
    logits = nd.qinfer(layers, x)
    classes = np.bincount(logits.argmax(axis=1), minlength=logits.shape[1])
    shifts = [l["shift"] for l in layers if "shift" in l]
    print("%s: %d layers, shifts %s; %d random inputs, class histogram %s"
          % (args.out + ".innet", len(layers), shifts, x.shape[0], classes.tolist()))


if __name__ == "__main__":
    main()
