"""test_innet_ddp — the DDP communication hook (src/agg/python/innet_ddp.py) against
real `innet switch` processes on loopback, in one process (a gloo group of
one rank, so the switch's job has one worker) plus one 2-rank launch:

- several buckets per iteration, whose sizes change after the first
  iteration (DDP rebuilds them), summed through the switch: the gradients
  DDP applies equal the local ones within the float bound, and the calls and
  elements are counted;
- overlap=False (the all-reduce inside the hook) gives the same result;
- a float64 model: its buckets go to gloo, none through the switch;
- no switch at the address: InnetState raises InnetDDPError (ETIMEDOUT)
  within timeout_ms, no hang;
- the switch killed mid-training: backward() raises, naming the innet
  all-reduce, within timeout_ms; later buckets fail at once;
- a rank whose UDP port is taken: every rank of a 2-rank
  ddp_train_digits.py exits 3 with a clear message (the setup agreement).

Run: /usr/bin/python3 -m unittest -v src/agg/python/test_innet_ddp.py (needs
build/innet, build/libinnet-agg.so and python3-torch;
tests/integration/agg_ddp.sh runs it). Addresses: 127.212.P.0/24, P from
the process id.
"""

import errno
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import innet_agg  # noqa: E402
import innet_ddp  # noqa: E402

NET = "127.212.%d" % (os.getpid() % 250 + 1)
_tmp = None


def setUpModule():
    global _tmp
    torch.set_num_threads(1)
    _tmp = tempfile.TemporaryDirectory(prefix="innet-ddp-test-")
    dist.init_process_group("gloo", init_method="file://" + os.path.join(_tmp.name, "store"),
                            rank=0, world_size=1)


def tearDownModule():
    dist.destroy_process_group()
    _tmp.cleanup()


def switch(port, **kw):
    return innet_agg.LocalSwitch(1, switch_ip=NET + ".1", worker_ip=NET + ".10",
                                 worker_udp=32000 + 10 * (port - 47900), udp=port, **kw)


def state_for(sw, **kw):
    return innet_ddp.InnetState(switch="%s:%d" % (sw.switch_ip, sw.udp), bind_ip=sw.worker_ip,
                                base_udp=sw.worker_udp, job=sw.job, slots=sw.slots, k=sw.k, **kw)


def mlp(dtype=torch.float32):
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10)).to(dtype)


def batch(step, dtype=torch.float32):
    g = torch.Generator().manual_seed(step)
    return torch.rand(16, 64, generator=g).to(dtype), torch.randint(0, 10, (16,), generator=g)


class Hook(unittest.TestCase):

    def check_grads(self, overlap):
        """Every step: the DDP model's gradients (summed through the switch,
        world of one) against the same model's local gradients."""
        with switch(47901) as sw, state_for(sw, overlap=overlap) as st:
            net, ref = mlp(), mlp()
            model = DDP(net, bucket_cap_mb=0.25)
            model.register_comm_hook(st, innet_ddp.innet_allreduce_hook)
            for step in range(3):
                x, y = batch(step)
                for m in (net, ref):
                    m.zero_grad(set_to_none=True)
                F.cross_entropy(model(x), y).backward()
                F.cross_entropy(ref(x), y).backward()
                # a block of k may span two parameters of a bucket: bound it
                # by the largest |gradient| of all (docs/aggregation.md)
                bound = innet_agg.error_bound(1, max(q.grad.abs().max().item()
                                                     for q in ref.parameters()))
                for p, q in zip(net.parameters(), ref.parameters()):
                    err = ((p.grad - q.grad).abs() - 2 ** -24 * q.grad.abs()).max().item()
                    self.assertLessEqual(err, bound)
            s = st.stats()
        nparams = sum(p.numel() for p in net.parameters())
        self.assertGreaterEqual(len(s["bucket_sizes"]), 2, s)
        self.assertEqual(sum(s["bucket_sizes"]), nparams)
        self.assertEqual(sum(s["first_bucket_sizes"]), nparams)
        self.assertNotEqual(s["first_bucket_sizes"], s["bucket_sizes"], "expected DDP's rebuild")
        self.assertEqual(s["calls"], len(s["first_bucket_sizes"]) + 2 * len(s["bucket_sizes"]))
        self.assertEqual(s["elements"], 3 * nparams)
        self.assertEqual(s["gloo_buckets"], 0)
        # one probe call + the buckets; every packet answered
        self.assertEqual(s["lib_calls"], s["calls"] + 1)
        self.assertEqual(s["lib_packets_sent"], s["expected_results"])
        self.assertEqual(s["lib_results"], s["expected_results"])

    def test_buckets_overlap(self):
        self.check_grads(True)

    def test_buckets_inline(self):
        self.check_grads(False)

    def test_float64_goes_to_gloo(self):
        with switch(47902) as sw, state_for(sw) as st:
            net, ref = mlp(torch.float64), mlp(torch.float64)
            model = DDP(net)
            model.register_comm_hook(st, innet_ddp.innet_allreduce_hook)
            x, y = batch(0, torch.float64)
            F.cross_entropy(model(x), y).backward()
            F.cross_entropy(ref(x), y).backward()
            for p, q in zip(net.parameters(), ref.parameters()):
                self.assertTrue(torch.equal(p.grad, q.grad))
            s = st.stats()
        self.assertEqual(s["calls"], 0)
        self.assertGreaterEqual(s["gloo_buckets"], 1)

    def test_no_switch(self):
        t0 = time.monotonic()
        with self.assertRaises(innet_ddp.InnetDDPError) as cm:
            innet_ddp.InnetState(switch=NET + ".1:47903", bind_ip=NET + ".10", base_udp=32990,
                                 timeout_ms=500)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual(cm.exception.errno, errno.ETIMEDOUT)
        self.assertIn("did not complete a first all-reduce", str(cm.exception))

    def test_switch_dies(self):
        sw = switch(47904)
        try:
            st = state_for(sw, timeout_ms=500)
            model = DDP(mlp())
            model.register_comm_hook(st, innet_ddp.innet_allreduce_hook)
            x, y = batch(0)
            F.cross_entropy(model(x), y).backward()
            sw.close()
            t0 = time.monotonic()
            with self.assertRaises(RuntimeError) as cm:
                F.cross_entropy(model(x), y).backward()
            self.assertLess(time.monotonic() - t0, 5)
            self.assertIn("innet all-reduce", str(cm.exception))
            self.assertIn("timed out", str(cm.exception))
            # out of step for good: the next bucket fails at once
            t0 = time.monotonic()
            with self.assertRaises(innet_ddp.InnetDDPError):
                st.submit(torch.ones(10)).wait()
            self.assertLess(time.monotonic() - t0, 0.4)
            st.close()
        finally:
            sw.close()


class Launch(unittest.TestCase):

    def test_port_taken(self):
        """Rank 1 cannot bind: both ranks exit 3 at setup, each saying why."""
        blocker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        blocker.bind((NET + ".10", 33001))
        try:
            t0 = time.monotonic()
            p = subprocess.run([sys.executable, os.path.join(HERE, "ddp_train_digits.py"),
                                "--comm", "innet", "--world", "2", "--epochs", "1",
                                "--switch-ip", NET + ".1", "--worker-ip", NET + ".10",
                                "--worker-udp", "33000", "--timeout-ms", "1000",
                                "--timeout-s", "60"],
                               capture_output=True, text=True, timeout=90)
        finally:
            blocker.close()
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("rank 1 cannot open its innet worker at %s.10:33001" % NET, p.stderr)
        self.assertIn("Address already in use", p.stderr)
        self.assertIn("rank 0: innet setup (open) failed on another rank", p.stderr)
        self.assertLess(time.monotonic() - t0, 60)


if __name__ == "__main__":
    unittest.main()
