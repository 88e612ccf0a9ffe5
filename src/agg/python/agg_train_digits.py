#!/usr/bin/python3
"""agg_train_digits — data-parallel training whose gradients the switch sums.

A small MLP (64 -> 32 tanh -> 10 softmax) learns sklearn's digits data set
(8x8 images of handwritten digits). N workers (threads, each with its own
model replica and innet_agg.Worker) take their share of every minibatch,
compute the gradient of their share, all-reduce it through an innet switch
running the agg program (float32, block floating point), and each applies
the same SGD update to its replica. The same training is run again with the
gradients summed by numpy in float32 (the float all-reduce), from the same
initial weights over the same minibatches; the test accuracies must agree
within ACC_TOLERANCE, and the innet replicas must be bit-identical.

    make build/innet build/libinnet-agg.so
    /usr/bin/python3 src/agg/python/agg_train_digits.py --workers 4 --epochs 30

starts its own switch (build/innet switch, 127.0.9.1, job 1) and prints one
RESULT line. --switch-ip/--worker-ip/--udp change the loopback addresses.
"""

import argparse
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import innet_agg  # noqa: E402

ACC_TOLERANCE = 0.01   # |test accuracy (innet) - test accuracy (float all-reduce)|
HIDDEN = 32
PER_WORKER_BATCH = 16
LR = 0.5
MOMENTUM = 0.9


def load_data(seed=0):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    return train_test_split(x, d.target, test_size=0.25, random_state=seed, stratify=d.target)


def init_params(seed):
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((64, HIDDEN)) / 8.0).astype(np.float32)
    w2 = (rng.standard_normal((HIDDEN, 10)) / np.sqrt(HIDDEN)).astype(np.float32)
    return np.concatenate([w1.ravel(), np.zeros(HIDDEN, np.float32), w2.ravel(),
                           np.zeros(10, np.float32)])


def unpack(p):
    i = 0
    w1 = p[i:i + 64 * HIDDEN].reshape(64, HIDDEN); i += 64 * HIDDEN
    b1 = p[i:i + HIDDEN]; i += HIDDEN
    w2 = p[i:i + HIDDEN * 10].reshape(HIDDEN, 10); i += HIDDEN * 10
    b2 = p[i:i + 10]
    return w1, b1, w2, b2


def grad_sum(p, x, y):
    """Gradient of the summed cross-entropy over (x, y), flattened like p."""
    w1, b1, w2, b2 = unpack(p)
    h = np.tanh(x @ w1 + b1)
    z = h @ w2 + b2
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    prob = e / e.sum(axis=1, keepdims=True)
    dz = prob
    dz[np.arange(len(y)), y] -= 1
    dh = (dz @ w2.T) * (1 - h * h)
    return np.concatenate([(x.T @ dh).ravel(), dh.sum(0), (h.T @ dz).ravel(), dz.sum(0)]).astype(np.float32)


def accuracy(p, x, y):
    w1, b1, w2, b2 = unpack(p)
    return float(np.mean(np.argmax(np.tanh(x @ w1 + b1) @ w2 + b2, axis=1) == y))


def batches(n_train, n_workers, epochs, seed):
    """Per step: the list of each worker's sample indices (same for both runs)."""
    rng = np.random.default_rng(seed + 1)
    gb = PER_WORKER_BATCH * n_workers
    for _ in range(epochs):
        perm = rng.permutation(n_train)
        for s in range(0, n_train - gb + 1, gb):
            yield [perm[s + w * PER_WORKER_BATCH: s + (w + 1) * PER_WORKER_BATCH] for w in range(n_workers)]


def sgd(p, v, g, gb):
    v *= np.float32(MOMENTUM)
    v += g * np.float32(1.0 / gb)
    p -= np.float32(LR) * v


def train_float(data, n_workers, epochs, seed):
    """Reference: gradients summed by numpy (float32)."""
    xtr, xte, ytr, yte = data
    p = init_params(seed)
    v = np.zeros_like(p)
    for idx in batches(len(xtr), n_workers, epochs, seed):
        g = np.sum(np.stack([grad_sum(p, xtr[i], ytr[i]) for i in idx]), axis=0, dtype=np.float32)
        sgd(p, v, g, PER_WORKER_BATCH * n_workers)
    return p


def train_innet(sw, data, n_workers, epochs, seed):
    """One thread per worker; returns every worker's final parameters and stats."""
    xtr, xte, ytr, yte = data
    steps = list(batches(len(xtr), n_workers, epochs, seed))
    out, errs = [None] * n_workers, []

    def worker(w):
        try:
            with innet_agg.Worker(**sw.worker_args(w)) as a:
                p = init_params(seed)
                v = np.zeros_like(p)
                g_sum = np.empty_like(p)
                for idx in steps:
                    g = grad_sum(p, xtr[idx[w]], ytr[idx[w]])
                    a.allreduce(g, out=g_sum)
                    sgd(p, v, g_sum, PER_WORKER_BATCH * n_workers)
                out[w] = (p, a.stats())
        except BaseException as e:
            errs.append(e)

    th = [threading.Thread(target=worker, args=(w,)) for w in range(n_workers)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    if errs:
        raise errs[0]
    return out, len(steps)


def train_both(sw, n_workers=4, epochs=30, seed=0):
    """Train with the switch and with numpy's sum; a dict of the figures."""
    data = load_data(seed)
    xte, yte = data[1], data[3]
    t0 = time.monotonic()
    res, steps = train_innet(sw, data, n_workers, epochs, seed)
    t_innet = time.monotonic() - t0
    t0 = time.monotonic()
    p_float = train_float(data, n_workers, epochs, seed)
    t_float = time.monotonic() - t0
    p0 = res[0][0]
    return {
        "workers": n_workers, "epochs": epochs, "steps": steps, "params": p0.size,
        "acc_innet": accuracy(p0, xte, yte), "acc_float": accuracy(p_float, xte, yte),
        "max_param_diff": float(np.max(np.abs(p0 - p_float))),
        "replicas_identical": all(np.array_equal(p0, r[0]) for r in res),
        "retransmits": sum(r[1]["retransmits"] for r in res),
        "partial": sum(r[1]["partial"] for r in res),
        "seconds_innet": t_innet, "seconds_float": t_float,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--switch-ip", default="127.0.9.1")
    ap.add_argument("--worker-ip", default="127.0.9.10")
    ap.add_argument("--udp", type=int, default=innet_agg.DEFAULT_UDP)
    ap.add_argument("--worker-udp", type=int, default=30000)
    o = ap.parse_args()
    with innet_agg.LocalSwitch(o.workers, switch_ip=o.switch_ip, worker_ip=o.worker_ip,
                               worker_udp=o.worker_udp, udp=o.udp) as sw:
        r = train_both(sw, o.workers, o.epochs, o.seed)
    ok = r["replicas_identical"] and abs(r["acc_innet"] - r["acc_float"]) <= ACC_TOLERANCE
    print("RESULT agg_train_digits workers=%d epochs=%d steps=%d params=%d acc_innet=%.4f acc_float=%.4f "
          "tolerance=%.2f max_param_diff=%.3g replicas_identical=%s retransmits=%d seconds_innet=%.2f "
          "seconds_float=%.2f check=%s" % (
              r["workers"], r["epochs"], r["steps"], r["params"], r["acc_innet"], r["acc_float"],
              ACC_TOLERANCE, r["max_param_diff"], r["replicas_identical"], r["retransmits"],
              r["seconds_innet"], r["seconds_float"], "ok" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
