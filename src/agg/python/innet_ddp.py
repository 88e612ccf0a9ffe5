"""innet_ddp — a PyTorch DistributedDataParallel communication hook that sums
gradient buckets in an innet switch (in-network all-reduce, as SwitchML's
PyTorch plugin does on a Tofino).

    import torch.distributed as dist, innet_ddp          # PYTHONPATH=python
    dist.init_process_group("gloo", ...)                 # everything else: gloo
    model = torch.nn.parallel.DistributedDataParallel(net)
    state = innet_ddp.InnetState(switch="127.0.9.1:47800", bind_ip="127.0.9.10",
                                 base_udp=30000, job=1, slots=64, k=256)
    model.register_comm_hook(state, innet_ddp.innet_allreduce_hook)
    ... train ...
    state.close()

What runs where: torch.distributed (the gloo backend) does what DDP does
besides the gradient all-reduce — the broadcast of rank 0's initial
parameters, the bucket layout agreement after the first iteration, barriers
— and InnetState uses it once at setup, so that every rank fails together.
Each DDP gradient bucket (a flat float32 tensor) is divided by the world
size, as DDP's default hook does, and summed across the ranks by the switch
through innet's host library (src/agg/python/innet_agg.py over
build/libinnet-agg.so; protocol and float quantization in
docs/aggregation.md). The sum is written back into the bucket in place.
Buckets of another dtype or device go to gloo, as DDP's default hook would.

Rank r is worker r of the switch's job and binds bind_ip:(base_udp + r): the
job's member list on the switch must list those addresses in rank order
(`innet switch --program agg --args '{"jobs": [{"id": 1, "workers": 4,
"members": [...]}]}'`; LocalSwitch in innet_agg starts one).

Overlap: the hook hands the bucket to a helper thread and returns a
torch.futures.Future at once, so backward goes on computing the next
buckets while this one is on the wire (the C call releases the GIL); DDP
waits for every bucket's future at the end of backward. overlap=False does
the all-reduce inside the hook and returns a completed future.

Errors are bounded, never a hang: InnetState raises InnetDDPError on every
rank if any rank cannot open its worker (bad address, port in use) or if the
switch does not answer a first one-element all-reduce within timeout_ms (not
running, wrong job, this address not in the job's member list). A failed
all-reduce during training (a rank or the switch died: ETIMEDOUT after
timeout_ms without progress; ESTALE) completes that bucket's future with an
InnetDDPError, which DDP raises from backward(); every later bucket fails the
same way (the worker is out of step with the job). A non-finite gradient
(inf/nan) cannot be quantized: that rank's bucket fails with EDOM at once and
the other ranks' with ETIMEDOUT — training stops with an error instead of
spreading NaN into every replica.

Floats: every block of k elements is quantized with one exponent the ranks
agree on; per element |result - exact sum| <= innet_agg.error_bound(n, m)
(m = the block's largest |gradient| over the ranks), about 7.5e-9 * m for
4 ranks — below float32's own rounding of a sum (2^-24 relative), so the
training follows plain DDP's to within rounding (docs/aggregation.md,
"PyTorch").
"""

import errno
import os
import queue
import sys
import threading

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import innet_agg  # noqa: E402

__all__ = ["InnetDDPError", "InnetState", "innet_allreduce_hook", "switch_results"]


class InnetDDPError(RuntimeError):
    """The innet all-reduce failed (setup or a bucket); .errno is the
    library's error (positive) when there is one."""

    def __init__(self, msg, err=None):
        super().__init__(msg)
        self.errno = err


def switch_results(n, k, slots, f32=True):
    """Packets one worker sends (first transmissions) for a call of n
    elements, which is also the number of results the switch multicasts for
    it: C = ceil(n / k) chunks, plus W = min(slots, C) priming packets for
    float32 (docs/aggregation.md, "Protocol")."""
    c = -(-n // k)
    return c + (min(slots, c) if f32 else 0)


class InnetState:
    """One rank's side of the innet all-reduce: its innet_agg.Worker (worker
    id = rank in process_group), a helper thread, and counters. Create it
    after dist.init_process_group on every rank of process_group (it runs
    two gloo all-reduces to agree on success); pass it to
    DistributedDataParallel.register_comm_hook with innet_allreduce_hook."""

    def __init__(self, switch, bind_ip, base_udp=30000, job=1, slots=64, k=256,
                 timeout_ms=5000, rto_us=0, process_group=None, overlap=True, lib=None):
        """switch: 'IP[:UDP]' of the switch's agg program (UDP default
        47800); rank r binds bind_ip:(base_udp + r), which must be member r
        of the job; slots, k: the job's as configured on the switch;
        timeout_ms: a call fails after this long without progress (setup's
        probe too); rto_us: first retransmission timeout (0 = the library's
        2 ms)."""
        if not dist.is_initialized():
            raise InnetDDPError("torch.distributed is not initialized (init_process_group first)")
        self.process_group = process_group
        self.rank = dist.get_rank(process_group)
        self.world_size = dist.get_world_size(process_group)
        self.switch, self.job, self.slots, self.k = switch, job, slots, k
        self.bind = "%s:%d" % (bind_ip, base_udp + self.rank)
        self.timeout_ms = timeout_ms or 5000
        self.overlap = overlap
        self.calls = 0             # buckets all-reduced through the switch
        self.elements = 0          # their elements
        self.expected_results = 0  # results the switch multicasts for them (+ the probe)
        self.gloo_buckets = 0      # buckets not float32 on the CPU: sent to gloo
        self.bucket_sizes = []     # elements per bucket of the last iteration seen
        self.first_bucket_sizes = None  # of the first iteration (DDP rebuilds after it)
        self._iter_sizes = []
        self.worker = None
        self._lib_stats = {}
        self._error = None
        self._thread = None
        err = None  # (message, errno) of this rank's failure
        try:
            self.worker = innet_agg.Worker(switch=switch, bind=self.bind, job=job, worker=self.rank,
                                           n_workers=self.world_size, slots=slots, k=k,
                                           rto_us=rto_us, timeout_ms=self.timeout_ms, lib=lib)
        except (OSError, ValueError) as e:
            err = ("rank %d cannot open its innet worker at %s: %s" % (self.rank, self.bind, e),
                   getattr(e, "errno", None) or errno.EINVAL)
        self._agree(err, "open")
        # Probe: one int32 all-reduce of a single 1 (exact: the sum is the
        # world size), bounded by timeout_ms.
        err = None
        try:
            y = self.worker.allreduce(np.ones(1, np.int32))
            self.expected_results += switch_results(1, k, slots, f32=False)
            if int(y[0]) != self.world_size:
                err = ("rank %d: the switch summed %d workers, not %d (job %d's worker count?)"
                       % (self.rank, int(y[0]), self.world_size, job), errno.EPROTO)
        except innet_agg.AggError as e:
            err = ("rank %d: innet switch %s did not complete a first all-reduce within %d ms "
                   "(%s): is it running the agg program with job %d, %d workers, and %s as "
                   "member %d?" % (self.rank, switch, self.timeout_ms, os.strerror(e.errno), job,
                                   self.world_size, self.bind, self.rank), e.errno)
        self._agree(err, "probe")
        if overlap:
            self._queue = queue.SimpleQueue()
            self._thread = threading.Thread(target=self._run, name="innet-ddp-%d" % self.rank,
                                            daemon=True)
            self._thread.start()

    def _agree(self, err, what):
        """Every rank learns whether any rank failed (a gloo all-reduce MIN);
        all raise together, naming the first failure of this rank or peers."""
        ok = torch.tensor([0 if err else 1], dtype=torch.int32)
        dist.all_reduce(ok, op=dist.ReduceOp.MIN, group=self.process_group)
        if ok.item() == 1:
            return
        self._close_worker()
        if err is None:
            err = ("rank %d: innet setup (%s) failed on another rank; see its error"
                   % (self.rank, what), errno.EIO)
        raise InnetDDPError(*err)

    def _allreduce(self, buf):
        """Sum buf (a contiguous float32 CPU tensor) across the ranks in place."""
        if self._error is not None:
            raise self._error
        a = buf.numpy()
        try:
            self.worker.allreduce(a, out=a)
        except innet_agg.AggError as e:
            self._error = InnetDDPError(
                "rank %d: innet all-reduce of a %d-element gradient bucket through %s failed: %s "
                "(a rank or the switch died, or this rank fell out of step; timeout %d ms)" % (
                    self.rank, a.size, self.switch, os.strerror(e.errno), self.timeout_ms), e.errno)
            raise self._error
        self.calls += 1
        self.elements += a.size
        self.expected_results += switch_results(a.size, self.k, self.slots)
        return buf

    def _run(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            buf, fut = item
            try:
                self._allreduce(buf)
            except InnetDDPError as e:
                fut.set_exception(e)
            except Exception as e:  # never leave DDP waiting on a future
                fut.set_exception(InnetDDPError("rank %d: innet hook: %r" % (self.rank, e)))
            else:
                fut.set_result(buf)

    def submit(self, buf):
        """Start summing buf (flat contiguous float32 CPU tensor) in place;
        a torch.futures.Future whose value is buf. Calls are made in
        submission order (which DDP keeps the same on every rank)."""
        fut = torch.futures.Future()
        if self.worker is None:
            fut.set_exception(InnetDDPError("rank %d: InnetState is closed" % self.rank, errno.EBADF))
        elif self.overlap:
            self._queue.put((buf, fut))
        else:
            try:
                fut.set_result(self._allreduce(buf))
            except InnetDDPError as e:
                fut.set_exception(e)
        return fut

    def stats(self):
        """The hook's counters and the library's (innet_agg.Worker.stats)."""
        d = {"calls": self.calls, "elements": self.elements,
             "expected_results": self.expected_results, "gloo_buckets": self.gloo_buckets,
             "bucket_sizes": list(self.bucket_sizes),
             "first_bucket_sizes": list(self.first_bucket_sizes or [])}
        lib = self.worker.stats() if self.worker is not None else self._lib_stats
        d.update({"lib_" + n: v for n, v in lib.items()})
        return d

    def _close_worker(self):
        if self.worker is not None:
            self._lib_stats = self.worker.stats()  # stats() after close: the last counts
            self.worker.close()
            self.worker = None

    def close(self):
        """Stop the helper thread (after the buckets already submitted) and
        close the worker. Call on every rank at the end of training."""
        if self._thread is not None:
            self._queue.put(None)
            # bounded: each queued call ends within timeout_ms of no progress
            self._thread.join()
            self._thread = None
        self._close_worker()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def innet_allreduce_hook(state, bucket):
    """DDP communication hook (register_comm_hook(state, innet_allreduce_hook)):
    averages the bucket over the ranks, summing it in the switch. Returns a
    torch.futures.Future of the bucket's tensor (averaged in place)."""
    buf = bucket.buffer()
    if bucket.index() == 0:
        state._iter_sizes = []
    state._iter_sizes.append(buf.numel())
    if bucket.is_last():
        state.bucket_sizes = state._iter_sizes
        if state.first_bucket_sizes is None:
            state.first_bucket_sizes = state._iter_sizes
    if buf.dtype != torch.float32 or buf.device.type != "cpu" or not buf.is_contiguous():
        # what DDP's default hook does, over torch.distributed
        state.gloo_buckets += 1
        buf.div_(state.world_size)
        return (dist.all_reduce(buf, group=state.process_group, async_op=True)
                .get_future().then(lambda f: f.value()[0]))
    # divide first, as DDP's default hook does (exact for a power-of-two world)
    buf.div_(state.world_size)
    return state.submit(buf)
