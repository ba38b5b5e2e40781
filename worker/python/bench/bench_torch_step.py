"""What zeps.torch costs per embedding step over the C API (docs/python.md).

    ZEPS_BINDIR=build/bin PYTHONPATH=build/python /usr/bin/python3 \\
        worker/python/bench/bench_torch_step.py [--reps 7] [--seconds 1] [--steps 1500]

One zeps-server on an ipc endpoint; STEPS batches of 256 examples x 26
fields of ids (Criteo's shape: each field's values drawn from a Zipf law,
so ids repeat within a batch as they do in CTR data). One embedding step of
a batch is timed five ways:

  C        tests/bench/bench_sparse_loop.c: zeps_sbatch_new (the ids
           deduplicated once, in C), pull the rows, push a gradient for
           every position, free the batch;
  binding  the same calls from Python (zeps.Batch: make it, pull_unique,
           push_unique of a gradient per distinct row), no torch;
  hand     binding's calls with PyTorch's arithmetic written around them by
           hand: the pulled rows as a leaf tensor, F.embedding by the
           positions, backward of a given output gradient, push of the
           leaf's gradient;
  torch    the same step through zeps.torch: Embedding(ids) forward,
           backward of that output gradient, flush (the push acknowledged);
  plain    PyTorch's arithmetic alone (F.embedding and its backward on
           rows made beforehand), no zeps: what any version of the step
           computes.

C and binding run as loops of `--seconds`, interleaved rep by rep (C in a
process of its own): binding - C is what calling libzeps from Python costs.
hand, torch and plain run in one process interleaved step by step, so load
from elsewhere on the machine falls on all three alike: the median of the
per-step differences torch - hand is what zeps.torch adds (its module, the
gradient hook, array conversions, Python calls). zeps.torch's own cost over
the C API is the sum of the two. Each is reported as wall time and as the
worker process's CPU time (all its threads), which leaves out the waits for
the shard that the versions share.
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


def declared(ep):
    """A client of rank 0 (the C loop takes rank 0 over with a HELLO of its
    own: each part makes its client anew) and the benchmark's table."""
    c = zeps.Client.from_endpoints([ep], 0, request_timeout_ms=10000)
    return c, c.declare_sparse("bench-emb", DIM, optimizer="adagrad", lr=1e-3)


def binding_loop(ep, flat, g, seconds):
    """(wall, CPU) microseconds per step of the C API's calls from Python."""
    c, table = declared(ep)

    def step(s):
        b = zeps.Batch(table, flat[s])
        b.pull_unique()
        b.push_unique(g[:b.unique])
        b.free()

    for s in range(20):
        step(s % STEPS)
    iters, t0, c0 = 0, time.perf_counter(), time.process_time()
    while True:
        step(iters % STEPS)
        iters += 1
        el = time.perf_counter() - t0
        if el >= seconds:
            cpu = time.process_time() - c0
            c.close()
            return el / iters * 1e6, cpu / iters * 1e6


def step_versions(table, ids, grad):
    """The in-process versions of a step: {name: step(s)}."""
    flat = [ids[s].reshape(-1).view(np.uint64) for s in range(STEPS)]
    tensors = [torch.from_numpy(ids[s]) for s in range(STEPS)]
    emb = zt.Embedding(table)
    pre = []
    for s in range(STEPS):
        uniq, inv = np.unique(ids[s].reshape(-1), return_inverse=True)
        pre.append((torch.zeros(len(uniq), DIM, requires_grad=True),
                    torch.from_numpy(inv.astype(np.int64))))

    def hand(s):
        b = zeps.Batch(table, flat[s])
        rows = torch.from_numpy(b.pull_unique()).requires_grad_()
        inv = torch.from_numpy(b.positions.astype(np.int64))
        F.embedding(inv, rows).reshape(BATCH, FIELDS, DIM).backward(grad)
        b.push_unique(rows.grad.numpy())

    def torch_step(s):
        emb(tensors[s]).backward(grad)
        emb.flush()

    def plain(s):
        rows, inv = pre[s]
        rows.grad = None
        F.embedding(inv, rows).reshape(BATCH, FIELDS, DIM).backward(grad)

    return {"hand": hand, "torch": torch_step, "plain": plain}


def interleaved(versions, steps):
    """Per version, the per-step (wall, CPU) seconds of `steps` steps run
    in turn, step by step."""
    for s in range(40):
        for f in versions.values():
            f(s % STEPS)
    out = {n: [] for n in versions}
    for i in range(steps):
        for n, f in versions.items():
            w0, c0 = time.perf_counter(), time.process_time()
            f(i % STEPS)
            out[n].append((time.perf_counter() - w0, time.process_time() - c0))
    return out


def med_diff(a, b, i):
    return statistics.median(x[i] - y[i] for x, y in zip(a, b)) * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--steps", type=int, default=1500)
    a = ap.parse_args()
    torch.set_num_threads(1)  # one core for the worker, one for the shard
    ids = make_ids()
    grad = torch.full((BATCH, FIELDS, DIM), 1e-3)
    g = np.full((BATCH * FIELDS, DIM), 1e-3, np.float32)
    with one_shard() as (ep, d):
        path = os.path.join(d, "ids.u64")
        ids.astype(np.uint64).tofile(path)
        flat = [ids[s].reshape(-1).view(np.uint64) for s in range(STEPS)]
        cs, bs = [], []
        for _ in range(a.reps):
            cs.append(c_loop(ep, path, a.seconds))
            bs.append(binding_loop(ep, flat, g, a.seconds))
        c, t = declared(ep)
        per = interleaved(step_versions(t, ids, grad), a.steps)
        c.close()
    uniq = np.mean([len(np.unique(ids[s])) for s in range(STEPS)])
    print(f"{BATCH} x {FIELDS} ids per step ({uniq:.0f} distinct on average), dim {DIM}")
    own = []
    for i, what in ((0, "wall"), (1, "CPU")):
        c, b = (statistics.median(x[i] for x in xs) for xs in (cs, bs))
        print(f"{what:4s} C {c:.1f} us per step, binding {b:.1f} (reps: C "
              f"{' '.join(f'{x[i]:.0f}' for x in cs)}; binding "
              f"{' '.join(f'{x[i]:.0f}' for x in bs)})")
        meds = {n: statistics.median(x[i] for x in v) * 1e6 for n, v in per.items()}
        print(f"{what:4s} per step, interleaved: " +
              ", ".join(f"{n} {v:.1f} us" for n, v in meds.items()))
        d = med_diff(per["torch"], per["hand"], i)
        print(f"{what:4s} binding - C {b - c:.1f} us; zeps.torch - hand {d:.1f} us "
              f"(median of {a.steps} per-step differences)")
        own.append(b - c + d)
    print(f"zeps.torch's own cost per step over the C API: {own[0]:.1f} us wall, "
          f"{own[1]:.1f} us CPU")


if __name__ == "__main__":
    sys.exit(main())
