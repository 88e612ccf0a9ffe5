#!/usr/bin/python3
"""ddp_train_digits — PyTorch DistributedDataParallel training whose gradient
buckets the switch sums (--comm innet: src/agg/python/innet_ddp.py's hook) or gloo
does (--comm gloo: plain DDP, no hook).

An MLP (64 -> H -> H -> 10, ReLU) learns sklearn's digits (8x8 images; 1347
training, 450 test images; no download). --world processes (4), one torch
thread each, same seed; torch.distributed with the gloo backend over a file
store on loopback. Every run starts from the same initial parameters and
goes over the training set in the same shuffled order: per step each rank
takes its --batch images of a global batch of batch x world, DDP averages
the gradients, SGD with momentum. The two modes differ only in who sums.

    make build/innet build/libinnet-agg.so
    /usr/bin/python3 src/agg/python/ddp_train_digits.py --comm innet   # starts its own switch
    /usr/bin/python3 src/agg/python/ddp_train_digits.py --comm gloo
    /usr/bin/python3 src/agg/python/ddp_train_digits.py --comm innet,gloo --rounds 3
    /usr/bin/python3 src/agg/python/ddp_train_digits.py --comm innet --switch 127.0.9.1:47800 \\
        --worker-ip 127.0.9.10 --worker-udp 30000           # a switch you started

--comm takes a list: the same processes train once per mode and round, in
the order given on even rounds and reversed on odd ones (so that neither
mode always runs first), a fresh model and DDP each time; torch and the
process group are set up once. --warmup-epochs N first trains each mode for
N epochs unreported (`WARMUP ...` lines): a process's first run is slower.

Prints key=value lines: per epoch `EPOCH comm=C round=R epoch=E seconds=S
loss=L acc=A` (seconds: the slowest rank's wall time for the epoch's steps),
per run `RUN comm=C round=R epoch_s=... first_epoch_s=... acc=...
replicas_identical=...` (epoch_s: the median over the epochs after the first,
which includes DDP's bucket rebuild and warm-up), and last `RESULT
ddp_train_digits C_epoch_s=... C_acc=... ...` per mode (medians over the
rounds; the accuracy of the last round), replicas_identical (every rank
ended every run with bit-identical parameters), and for innet the hook's and
library's counters summed over the ranks and switch_results: the results the
switch must have multicast for this process group (a check against `innet ctl
--json stats`: the agg program's multicast actions).

The launcher (no --rank) starts the ranks as subprocesses of this script and
kills them all if one fails or --timeout-s passes; its exit status is the
first failing rank's (3: innet setup failed, 4: training failed).
"""

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
COMMS = ("innet", "gloo")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--comm", default="innet",
                    help="innet, gloo, or a comma-separated list of them (see above)")
    ap.add_argument("--rounds", type=int, default=1, help="runs per mode, alternated")
    ap.add_argument("--warmup-epochs", type=int, default=0,
                    help="first, an unreported run of this many epochs per mode (a process's "
                    "first run is slower: allocation, lazy initialization)")
    ap.add_argument("--world", type=int, default=4, help="processes (ranks)")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--hidden", type=int, default=256, help="hidden layer width H")
    ap.add_argument("--batch", type=int, default=16, help="images per rank per step")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0,
                    help="DDP bucket_cap_mb (same for both modes; 25 is DDP's default)")
    ap.add_argument("--first-bucket-mb", type=float,
                    help="cap of DDP's first bucket (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES, "
                    "1 MiB by default), same for both modes")
    ap.add_argument("--switch", help="IP[:UDP] of a running switch (agg program); "
                    "default: start one (build/innet switch) for this run")
    ap.add_argument("--switch-ip", default="127.0.9.1", help="address of the switch started here")
    ap.add_argument("--worker-ip", default="127.0.9.10")
    ap.add_argument("--worker-udp", type=int, default=30000, help="rank r binds worker-udp + r")
    ap.add_argument("--job", type=int, default=1)
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--k", type=int, default=2048,
                    help="elements per packet (the switch's k): 2048 on loopback; 358 fits a "
                    "1500-byte MTU")
    ap.add_argument("--timeout-ms", type=int, default=5000, help="innet call timeout")
    ap.add_argument("--rto-us", type=int, default=0,
                    help="innet first retransmission timeout (0: the library's 2000)")
    ap.add_argument("--no-overlap", action="store_true",
                    help="all-reduce inside the hook (no helper thread)")
    ap.add_argument("--timeout-s", type=float, default=300, help="launcher: kill the ranks after this")
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    o = ap.parse_args(argv)
    o.comms = o.comm.split(",")
    if not o.comms or any(c not in COMMS for c in o.comms) or len(set(o.comms)) != len(o.comms):
        ap.error("--comm: innet, gloo or both, comma-separated")
    if o.rounds < 1 or o.epochs < 1 or o.warmup_epochs < 0 or not 1 <= o.world <= 48:
        ap.error("--rounds, --epochs >= 1; --warmup-epochs >= 0; --world 1..48")
    return o


# ---------------------------------------------------------------------------
# One rank

def load_data(seed):
    """sklearn's digits, split 75/25 (stratified), pixels scaled to [0, 1]."""
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    return train_test_split(x, d.target, test_size=0.25, random_state=seed, stratify=d.target)


def rank_main(o):
    import datetime
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    if o.first_bucket_mb is not None:
        # read by DDP's constructor (torch 1.13's documented knob for it)
        dist._DEFAULT_FIRST_BUCKET_BYTES = int(o.first_bucket_mb * 1024 * 1024)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(o.tmp, "store"),
                            rank=o.rank, world_size=o.world, timeout=datetime.timedelta(seconds=60))
    with np.load(os.path.join(o.tmp, "digits.npz")) as d:  # the launcher's load_data
        xtr, xte = torch.from_numpy(d["xtr"]), torch.from_numpy(d["xte"])
        ytr, yte = torch.from_numpy(d["ytr"]).long(), torch.from_numpy(d["yte"]).long()
    state = None
    if "innet" in o.comms:
        import innet_ddp
        try:
            state = innet_ddp.InnetState(switch=o.switch, bind_ip=o.worker_ip, base_udp=o.worker_udp,
                                         job=o.job, slots=o.slots, k=o.k, timeout_ms=o.timeout_ms,
                                         rto_us=o.rto_us, overlap=not o.no_overlap)
        except innet_ddp.InnetDDPError as e:
            print("error: %s" % e, file=sys.stderr, flush=True)
            return 3
    gb = o.batch * o.world
    steps = len(xtr) // gb

    def train(comm, rnd, epochs):
        torch.manual_seed(o.seed)
        net = nn.Sequential(nn.Linear(64, o.hidden), nn.ReLU(), nn.Linear(o.hidden, o.hidden),
                            nn.ReLU(), nn.Linear(o.hidden, 10))
        # DDP broadcasts rank 0's parameters (gloo); the seed makes them equal anyway
        model = DDP(net, bucket_cap_mb=o.bucket_cap_mb)
        if comm == "innet":
            model.register_comm_hook(state, innet_ddp.innet_allreduce_hook)
        opt = torch.optim.SGD(model.parameters(), lr=o.lr, momentum=o.momentum)
        times, losses = [], []

        def accuracy():
            with torch.no_grad():
                return float((net(xte).argmax(1) == yte).float().mean())

        for ep in range(epochs):
            g = torch.Generator().manual_seed(o.seed * 1000 + ep)
            perm = torch.randperm(len(xtr), generator=g)
            dist.barrier()
            t0 = time.perf_counter()
            tot = 0.0
            for s in range(steps):
                idx = perm[s * gb + o.rank * o.batch: s * gb + (o.rank + 1) * o.batch]
                opt.zero_grad(set_to_none=True)
                loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
                loss.backward()
                opt.step()
                tot += loss.item()
            dt = torch.tensor([time.perf_counter() - t0, tot / steps], dtype=torch.float64)
            dist.all_reduce(dt, op=dist.ReduceOp.MAX)  # the slowest rank's time
            times.append(dt[0].item())
            losses.append(dt[1].item())
            if o.rank == 0 and rnd >= 0:
                print("EPOCH comm=%s round=%d epoch=%d seconds=%.4f loss=%.4f acc=%.4f"
                      % (comm, rnd, ep, times[-1], losses[-1], accuracy()), flush=True)
        # Replicas: every rank's parameters, gathered, must be bit-identical.
        flat = torch.cat([p.detach().reshape(-1) for p in net.parameters()])
        allp = [torch.empty_like(flat) for _ in range(o.world)]
        dist.all_gather(allp, flat)
        identical = all(torch.equal(allp[0], p) for p in allp[1:])
        r = {"epoch_s": statistics.median(times[1:] or times), "first_epoch_s": times[0],
             "loss": losses[-1], "acc": accuracy(), "identical": identical,
             "params": flat.numel()}
        if o.rank == 0:
            print("%s comm=%s round=%d epochs=%d epoch_s=%.4f first_epoch_s=%.4f loss=%.4f acc=%.4f "
                  "replicas_identical=%s" % ("RUN" if rnd >= 0 else "WARMUP", comm, rnd, epochs,
                                             r["epoch_s"], r["first_epoch_s"], r["loss"], r["acc"],
                                             identical), flush=True)
        return r

    runs = {c: [] for c in o.comms}
    try:
        warm = []
        for comm in (o.comms if o.warmup_epochs > 0 else ()):
            warm.append(train(comm, -1, o.warmup_epochs))
        for rnd in range(o.rounds):
            for comm in (o.comms if rnd % 2 == 0 else o.comms[::-1]):
                runs[comm].append(train(comm, rnd, o.epochs))
    except RuntimeError as e:
        # an innet failure surfaces from backward() as DDP's RuntimeError
        print("error: rank %d: training failed: %s" % (o.rank, str(e).strip().splitlines()[0]),
              file=sys.stderr, flush=True)
        os._exit(4)  # no teardown: the peers may be gone

    identical = all(r["identical"] for rs in list(runs.values()) + [warm] for r in rs)
    kv = ["world=%d" % o.world, "epochs=%d" % o.epochs, "rounds=%d" % o.rounds,
          "warmup_epochs=%d" % o.warmup_epochs,
          "steps_per_epoch=%d" % steps, "params=%d" % runs[o.comms[0]][0]["params"],
          "hidden=%d" % o.hidden, "bucket_cap_mb=%g" % o.bucket_cap_mb,
          "first_bucket_mb=%.3g" % (dist._DEFAULT_FIRST_BUCKET_BYTES / 1048576.0)]
    for c in o.comms:
        kv += ["%s_epoch_s=%.4f" % (c, statistics.median(r["epoch_s"] for r in runs[c])),
               "%s_first_epoch_s=%.4f" % (c, statistics.median(r["first_epoch_s"] for r in runs[c])),
               "%s_acc=%.4f" % (c, runs[c][-1]["acc"]), "%s_loss=%.4f" % (c, runs[c][-1]["loss"])]
    kv.append("replicas_identical=%s" % identical)
    if state is not None:
        state.close()
        s = state.stats()
        keys = ("calls", "elements", "expected_results", "gloo_buckets", "lib_packets_sent",
                "lib_results", "lib_retransmits", "lib_partial")
        t = torch.tensor([s[k] for k in keys], dtype=torch.float64)
        dist.all_reduce(t)
        st = {k: int(v) for k, v in zip(keys, t.tolist())}
        kv += ["k=%d" % o.k, "slots=%d" % o.slots, "rto_us=%d" % (o.rto_us or 2000),
               "overlap=%s" % (not o.no_overlap),
               "first_buckets=%s" % "/".join(str(n) for n in s["first_bucket_sizes"]),
               "buckets=%s" % "/".join(str(n) for n in s["bucket_sizes"])]
        kv += ["%s=%s" % (n, st[n]) for n in ("calls", "elements", "gloo_buckets", "lib_packets_sent",
                                              "lib_results", "lib_retransmits", "lib_partial")]
        # the switch multicasts each result once for the whole group: this
        # rank's count (the same on every rank), probe included
        kv.append("switch_results=%d" % s["expected_results"])
    if o.rank == 0:
        print("RESULT ddp_train_digits " + " ".join(kv), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0 if identical else 5


# ---------------------------------------------------------------------------
# The launcher

def _die_with_parent():
    """In a rank, before exec: SIGKILL when the launcher dies (even by SIGKILL)."""
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def launch(o):
    import numpy as np
    tmp = tempfile.mkdtemp(prefix="innet-ddp-")
    sw, procs, rc = None, [], 0
    try:
        # the data once, for every rank (sklearn is slow to import)
        xtr, xte, ytr, yte = load_data(o.seed)
        np.savez(os.path.join(tmp, "digits.npz"), xtr=xtr, xte=xte, ytr=ytr, yte=yte)
        if "innet" in o.comms and not o.switch:
            import innet_agg
            sw = innet_agg.LocalSwitch(o.world, switch_ip=o.switch_ip, worker_ip=o.worker_ip,
                                       worker_udp=o.worker_udp, job=o.job, slots=o.slots, k=o.k)
            o.switch = "%s:%d" % (o.switch_ip, sw.udp)
        env = dict(os.environ)
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")      # gloo on loopback
        env.setdefault("OMP_NUM_THREADS", "1")
        for r in range(o.world):
            cmd = [sys.executable, os.path.abspath(__file__)] + sys.argv[1:] + [
                "--rank", str(r), "--tmp", tmp]
            if o.switch:
                cmd += ["--switch", o.switch]
            procs.append(subprocess.Popen(cmd, env=env, preexec_fn=_die_with_parent))
        deadline = time.monotonic() + o.timeout_s
        while any(p.poll() is None for p in procs):
            failed = [p.returncode for p in procs if p.returncode not in (None, 0)]
            if failed and rc == 0:
                # one rank failed; the others fail too within an innet or gloo
                # timeout: give them the innet one to say why, then kill them
                rc = failed[0]
                deadline = min(deadline, time.monotonic() + o.timeout_ms / 1000.0 + 2.0)
            if time.monotonic() > deadline:
                if rc == 0:
                    print("error: ranks still running after %g s; killed" % o.timeout_s,
                          file=sys.stderr, flush=True)
                    rc = 124
                break
            time.sleep(0.05)
        rc = rc or next((p.returncode for p in procs if p.returncode not in (None, 0)), 0)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
        if sw is not None:
            sw.close()
    return 128 - rc if rc < 0 else rc


def _terminated(signum, frame):
    raise SystemExit(128 + signum)  # the launcher's finally kills the ranks


def main():
    o = parse_args()
    if o.rank is None:
        signal.signal(signal.SIGTERM, _terminated)
        return launch(o)
    return rank_main(o)


if __name__ == "__main__":
    sys.exit(main())
