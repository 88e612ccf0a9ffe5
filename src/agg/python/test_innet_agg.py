"""test_innet_agg — the Python binding (src/agg/python/innet_agg.py) against a real
`innet switch` on loopback: int32 bit-exact against numpy's (wrapping) sum,
float32 within the documented bound, in-place and asynchronous calls, 5%
loss/duplication/reordering, a dead worker (ETIMEDOUT, not a hang), bad
arguments, and the training demo (src/agg/python/agg_train_digits.py) reaching the
float all-reduce's accuracy.

Run: /usr/bin/python3 -m unittest -v src/agg/python/test_innet_agg.py
(needs build/innet and build/libinnet-agg.so; tests/integration/agg_python.sh
builds them). Addresses: 127.209.P.0/24, P from the process id.
"""

import errno
import os
import sys
import threading
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import innet_agg  # noqa: E402
import agg_train_digits  # noqa: E402

NET = "127.209.%d" % (os.getpid() % 250 + 1)


def switch(n, port, **kw):
    return innet_agg.LocalSwitch(n, switch_ip=NET + ".1", worker_ip=NET + ".10",
                                 worker_udp=31000 + 100 * (port - 47900), udp=port, **kw)


def run_workers(sw, fn, n=None, **worker_kw):
    """fn(worker, w) in one thread per worker; returns the results, re-raises
    the first exception."""
    n = sw.n_workers if n is None else n
    res, errs = [None] * n, [None] * n

    def main(w):
        try:
            with innet_agg.Worker(**sw.worker_args(w, **worker_kw)) as a:
                res[w] = fn(a, w)
        except BaseException as e:  # handed to the main thread
            errs[w] = e

    th = [threading.Thread(target=main, args=(w,)) for w in range(n)]
    for t in th:
        t.start()
    for t in th:
        t.join(60)
        assert not t.is_alive(), "worker thread hung"
    for e in errs:
        if e is not None:
            raise e
    return res


def ints(w, call, n):
    return np.random.default_rng(1000 * w + call).integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)


def floats(w, call, n, k):
    rng = np.random.default_rng(7000 + 1000 * w + call)
    mag = 10.0 ** rng.integers(-6, 5, (n + k - 1) // k).repeat(k)[:n]   # per block
    return (rng.uniform(-1, 1, n) * mag).astype(np.float32)


def check_floats(tc, xs, y, k):
    n_w = len(xs)
    exact = np.sum(np.stack(xs).astype(np.float64), axis=0)
    m = np.max(np.abs(np.stack(xs)).astype(np.float64), axis=0)
    n = len(exact)
    bm = np.array([m[b:b + k].max() for b in range(0, n, k)]).repeat(k)[:n]
    bound = np.array([innet_agg.error_bound(n_w, v) for v in bm]) + np.abs(y) * 2.0**-24
    err = np.abs(y.astype(np.float64) - exact)
    tc.assertTrue(np.all(err <= bound), "max err/bound %g" % np.max(err / np.maximum(bound, 1e-300)))


class TestBinding(unittest.TestCase):
    def test_conf_layout(self):
        # struct innet_agg_conf on x86-64: 44 bytes, slots at 20, timeout_ms at 36, flags at 40
        self.assertEqual(innet_agg.ctypes.sizeof(innet_agg._Conf), 44)
        self.assertEqual(innet_agg._Conf.slots.offset, 20)
        self.assertEqual(innet_agg._Conf.timeout_ms.offset, 36)
        self.assertEqual(innet_agg._Conf.flags.offset, 40)

    def test_int32_exact_and_float32_bound(self):
        lens = [1, 255, 256, 257, 10000, 3 * 64 * 256 + 5]
        with switch(4, 47901) as sw:
            def fn(a, w):
                out = []
                for c, n in enumerate(lens):
                    out.append(a.allreduce(ints(w, c, n)))
                    out.append(a.allreduce(floats(w, c, n, 256)))
                # 2-D array, result into the input (in place)
                x = ints(w, 99, 600).reshape(20, 30)
                a.allreduce(x, out=x)
                out.append(x)
                # asynchronous
                p = a.start(floats(w, 98, 5000, 256))
                out.append(p.wait())
                out.append(a.stats())
                return out
            res = run_workers(sw, fn)
        for c, n in enumerate(lens):
            want = np.sum(np.stack([ints(w, c, n).astype(np.int64) for w in range(4)]), axis=0)
            want = want.astype(np.uint32).astype(np.int32)  # wrapping modulo 2^32
            for w in range(4):
                np.testing.assert_array_equal(res[w][2 * c], want)
                np.testing.assert_array_equal(res[w][2 * c + 1], res[0][2 * c + 1])  # identical everywhere
            check_floats(self, [floats(w, c, n, 256) for w in range(4)], res[0][2 * c + 1], 256)
        want = sum(ints(w, 99, 600).astype(np.int64) for w in range(4)).astype(np.uint32).astype(np.int32)
        np.testing.assert_array_equal(res[1][-3], want.reshape(20, 30))
        check_floats(self, [floats(w, 98, 5000, 256) for w in range(4)], res[2][-2], 256)
        st = res[3][-1]
        self.assertEqual(st["calls"], 2 * len(lens) + 2)
        self.assertEqual(st["partial"], 0)

    def test_loss_dup_reorder(self):
        n = 40000
        with switch(3, 47902, link="loss=0.05,dup=0.05,reorder=0.05,seed=7", slots=32) as sw:
            res = run_workers(sw, lambda a, w: (a.allreduce(ints(w, 5, n)), a.allreduce(floats(w, 6, n, 256)),
                                                a.stats()), rto_us=2000, rto_max_us=20000)
        want = sum(ints(w, 5, n).astype(np.int64) for w in range(3)).astype(np.uint32).astype(np.int32)
        for w in range(3):
            np.testing.assert_array_equal(res[w][0], want)
        check_floats(self, [floats(w, 6, n, 256) for w in range(3)], res[1][1], 256)
        self.assertGreater(sum(r[2]["retransmits"] for r in res), 0)  # the loss was real

    def test_dead_worker_times_out(self):
        with switch(3, 47903) as sw:
            def fn(a, w):
                try:
                    a.allreduce(np.ones(1000, np.int32))
                except innet_agg.AggError as e:
                    return e.errno
                return 0
            # only 2 of the 3 workers ever call
            rcs = run_workers(sw, fn, n=2, timeout_ms=300)
        self.assertEqual(rcs, [errno.ETIMEDOUT, errno.ETIMEDOUT])

    def test_bad_arguments(self):
        with switch(1, 47904) as sw:
            with innet_agg.Worker(**sw.worker_args(0)) as a:
                with self.assertRaises(TypeError):
                    a.allreduce(np.ones(4))          # float64
                with self.assertRaises(ValueError):
                    a.allreduce(np.ones(4, np.float32), out=np.ones(3, np.float32))
                with self.assertRaises(innet_agg.AggError) as cm:
                    a.allreduce(np.array([1, np.nan], np.float32))
                self.assertEqual(cm.exception.errno, errno.EDOM)
                # one worker: the sum is the input itself
                np.testing.assert_array_equal(a.allreduce(np.arange(1000, dtype=np.int32)),
                                              np.arange(1000, dtype=np.int32))
        with self.assertRaises(ValueError):
            innet_agg.Worker(switch=NET + ".1", bind=NET + ".10:31999", job=1, worker=2, n_workers=2)


class TestTrainingDemo(unittest.TestCase):
    def test_same_accuracy_as_float_allreduce(self):
        with switch(4, 47905) as sw:
            r = agg_train_digits.train_both(sw, n_workers=4, epochs=25, seed=3)
        # replicas stayed identical on every worker (the switch sends all the same sums)
        self.assertTrue(r["replicas_identical"])
        self.assertGreaterEqual(r["acc_float"], 0.93)
        self.assertLessEqual(abs(r["acc_innet"] - r["acc_float"]), agg_train_digits.ACC_TOLERANCE)
        # the trajectories drift apart by the quantization error only (weights are O(1))
        self.assertLess(r["max_param_diff"], 2e-2)
        self.assertEqual(r["partial"], 0)


if __name__ == "__main__":
    unittest.main()
