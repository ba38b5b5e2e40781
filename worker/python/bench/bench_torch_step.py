"""What zeps.torch costs per embedding step over the C API (docs/python.md).

    ZEPS_BINDIR=build/bin PYTHONPATH=build/python /usr/bin/python3 \\
        worker/python/bench/bench_torch_step.py [--reps 5] [--seconds 1]

Starts one zeps-server on an ipc endpoint and a file of STEPS batches of
256 examples x 26 fields of ids (Criteo's shape: each field's values drawn
from a Zipf law, so ids repeat within a batch as they do in CTR data).
Then, interleaved rep by rep, times one embedding step of a batch:

  C       tests/bench/bench_sparse_loop.c: zeps_sbatch_new (ids deduplicated
          once, in C), pull the rows, push a gradient for every position,
          free the batch;
  binding the C API's calls of that step from Python (zeps.Batch: make it,
          pull_unique, push_unique of a gradient per distinct row), no torch;
  torch   the same step through zeps.torch: Embedding(ids) forward, backward
          of a given output gradient, flush (the push acknowledged);
  plain   the PyTorch arithmetic every version of that step does, with no
          zeps at all: F.embedding of the batch's distinct rows (a leaf
          tensor) by the positions' indices, and its backward (the
          scatter-add of the gradient into the rows).

zeps.torch's own cost per step is torch - C - plain: what the Python layer
adds (array conversions, the autograd Function, Python calls) over what the
C library and PyTorch must do anyway; binding - C is the part of it that
the calls from Python into libzeps take. Each is measured as wall time per
step and as the worker process's CPU time per step (all its threads); the
CPU time leaves out the waits for the shard, which the three share and
which another process on the machine stretches. Prints the medians of each
and that difference.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import zeps
import zeps.torch as zt
from one_shard import BINDIR, one_shard
BATCH, FIELDS, DIM, STEPS = 256, 26, 16, 64


def make_ids(seed=1):
    """(STEPS, BATCH, FIELDS) int64 ids: field f's values from Zipf(1.2)
    over a million, in a range of their own."""
    rng = np.random.default_rng(seed)
    v = np.minimum(rng.zipf(1.2, size=(STEPS, BATCH, FIELDS)), 1 << 20)
    return (v + (np.arange(FIELDS) << 32)).astype(np.int64)


def c_loop(ep, path, seconds):
    out = subprocess.run([os.path.join(BINDIR, "bench_sparse_loop"), path, str(STEPS),
                          str(BATCH * FIELDS), str(DIM), str(seconds), ep],
                         check=True, capture_output=True, text=True)
    wall, cpu = out.stdout.split()
    return float(wall), float(cpu)


def timed_loop(step, seconds):
    """(wall, CPU) microseconds per step of `step` for `seconds`."""
    for s in range(min(STEPS, 20)):
        step(s)
    iters, t0, c0 = 0, time.perf_counter(), time.process_time()
    while True:
        step(iters % STEPS)
        iters += 1
        el = time.perf_counter() - t0
        if el >= seconds:
            return el / iters * 1e6, (time.process_time() - c0) / iters * 1e6


def torch_loop(ep, ids, grad, seconds):
    with zeps.Client.from_endpoints([ep], 0, request_timeout_ms=10000) as c:
        emb = zt.Embedding(c.declare_sparse("bench-emb", DIM, optimizer="adagrad", lr=1e-3))
        steps = [torch.from_numpy(ids[s]) for s in range(STEPS)]

        def step(s):
            emb(steps[s]).backward(grad)
            emb.flush()

        return timed_loop(step, seconds)


def binding_loop(ep, ids, seconds):
    with zeps.Client.from_endpoints([ep], 0, request_timeout_ms=10000) as c:
        t = c.declare_sparse("bench-emb", DIM, optimizer="adagrad", lr=1e-3)
        flat = [ids[s].reshape(-1).view(np.uint64) for s in range(STEPS)]
        g = np.full((BATCH * FIELDS, DIM), 1e-3, np.float32)

        def step(s):
            b = zeps.Batch(t, flat[s])
            b.pull_unique()
            b.push_unique(g[:b.unique])
            b.free()

        return timed_loop(step, seconds)


def plain_loop(ids, grad, seconds):
    pre = []
    for s in range(STEPS):
        uniq, inv = np.unique(ids[s].reshape(-1), return_inverse=True)
        pre.append((torch.zeros(len(uniq), DIM, requires_grad=True),
                    torch.from_numpy(inv.astype(np.int64))))

    def step(s):
        rows, inv = pre[s]
        rows.grad = None
        F.embedding(inv, rows).reshape(BATCH, FIELDS, DIM).backward(grad)

    return timed_loop(step, seconds)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0)
    a = ap.parse_args()
    torch.set_num_threads(1)  # one core for the worker, one for the shard
    ids = make_ids()
    grad = torch.full((BATCH, FIELDS, DIM), 1e-3)
    with one_shard() as (ep, d):
        path = os.path.join(d, "ids.u64")
        ids.astype(np.uint64).tofile(path)
        cs, bs, ts, ps = [], [], [], []
        for _ in range(a.reps):
            cs.append(c_loop(ep, path, a.seconds))
            bs.append(binding_loop(ep, ids, a.seconds))
            ts.append(torch_loop(ep, ids, grad, a.seconds))
            ps.append(plain_loop(ids, grad, a.seconds))
    uniq = np.mean([len(np.unique(ids[s])) for s in range(STEPS)])
    print(f"{BATCH} x {FIELDS} ids per step ({uniq:.0f} distinct on average), dim {DIM}")
    for i, what in ((0, "wall"), (1, "CPU")):
        c, b, t, p = (statistics.median(x[i] for x in xs) for xs in (cs, bs, ts, ps))
        for name, v, xs in (("C", c, cs), ("binding", b, bs), ("zeps.torch", t, ts),
                            ("plain torch", p, ps)):
            reps = " ".join(f"{x[i]:.1f}" for x in xs)
            print(f"{what:4s} {name:12s} {v:9.1f} us per step  (reps {reps})")
        print(f"{what:4s} zeps.torch's own cost per step (zeps.torch - C - plain torch): "
              f"{t - c - p:.1f} us, of which the binding's calls (binding - C) {b - c:.1f} us")


if __name__ == "__main__":
    sys.exit(main())
