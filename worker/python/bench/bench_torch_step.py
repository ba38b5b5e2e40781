"""What zeps.torch costs per embedding step over the C API (docs/python.md).

    ZEPS_BINDIR=build/bin PYTHONPATH=build/python /usr/bin/python3 \\
        worker/python/bench/bench_torch_step.py [--steps 3000]

One zeps-server on an ipc endpoint; STEPS batches of 256 examples x 26
fields of ids (Criteo's shape: each field's values drawn from a Zipf law,
so ids repeat within a batch as they do in CTR data). One embedding step of
a batch is timed five ways, each making the same libzeps calls (make the
batch, pull its distinct rows, push a gradient per distinct row, free it):

  C        tests/bench/bench_sparse_step.c, a library loaded into this
           process: the calls from C, into a buffer reused step to step;
  binding  the same calls from Python (zeps.Batch: make it, pull_unique
           into a reused buffer, push_unique), no torch;
  hand     binding's calls with PyTorch's arithmetic written around them by
           hand: the pulled rows as a leaf tensor, F.embedding by the
           positions, backward of a given output gradient, push of the
           leaf's gradient;
  torch    the same step through zeps.torch: Embedding(ids) forward,
           backward of that output gradient, flush (the push acknowledged);
  plain    PyTorch's arithmetic alone (F.embedding and its backward on
           rows made beforehand), no zeps: what any version of the step
           computes.

All five run in one process (one client, one table), interleaved step by
step, so load from elsewhere on the machine falls on all alike: the median
of the per-step differences binding - C is what calling libzeps from
Python costs, torch - hand what zeps.torch adds (its module, the gradient
hook, array conversions, Python calls); zeps.torch's own cost over the C
API is the sum of the two. Each is reported as wall time and as the
process's CPU time (all its threads: ZeroMQ's I/O thread too), which
leaves out the waits for the shard that the versions share.
"""
import argparse
import os
import statistics
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


def c_step(client, table, flat):
    """The C version of a step: bench_sparse_step.c's function on this
    process's client, called through cffi's ABI mode (about a microsecond
    a call, counted on the C side)."""
    from cffi import FFI
    from zeps._native import ffi as zffi
    ffi = FFI()
    ffi.cdef("int zp_bench_sparse_step(void *c, uint32_t t, const uint64_t *ids, size_t n, "
             "float *urows, const float *ugrads);")
    lib = ffi.dlopen(os.path.join(BINDIR, "libbench_sparse_step.so"))
    c = ffi.cast("void *", int(zffi.cast("uintptr_t", client._c)))
    ids = [ffi.from_buffer("uint64_t[]", f) for f in flat]
    rows = np.empty((BATCH * FIELDS, DIM), np.float32)
    g = np.full((BATCH * FIELDS, DIM), 1e-3, np.float32)
    prow, pg = ffi.from_buffer("float[]", rows), ffi.from_buffer("float[]", g)
    step_c = lib.zp_bench_sparse_step
    h = table.handle

    def step(s):
        if step_c(c, h, ids[s], len(flat[s]), prow, pg) != 0:
            raise RuntimeError("zp_bench_sparse_step failed")
    return step


def step_versions(client, table, ids, grad):
    """The in-process versions of a step: {name: step(s)}."""
    flat = [ids[s].reshape(-1).view(np.uint64) for s in range(STEPS)]
    tensors = [torch.from_numpy(ids[s]) for s in range(STEPS)]
    emb = zt.Embedding(table)
    rows_buf = np.empty((BATCH * FIELDS, DIM), np.float32)
    g = np.full((BATCH * FIELDS, DIM), 1e-3, np.float32)
    pre = []
    for s in range(STEPS):
        uniq, inv = np.unique(ids[s].reshape(-1), return_inverse=True)
        pre.append((torch.zeros(len(uniq), DIM, requires_grad=True),
                    torch.from_numpy(inv.astype(np.int64))))

    def binding(s):
        b = zeps.Batch(table, flat[s])
        b.pull_unique(out=rows_buf[:b.unique])
        b.push_unique(g[:b.unique])
        b.free()

    def hand(s):
        b = zeps.Batch(table, flat[s])
        rows = torch.from_numpy(b.pull_unique(out=rows_buf[:b.unique])).requires_grad_()
        inv = torch.from_numpy(b.positions.astype(np.int64))
        F.embedding(inv, rows).reshape(BATCH, FIELDS, DIM).backward(grad)
        b.push_unique(rows.grad.numpy())
        b.free()

    def torch_step(s):
        emb(tensors[s]).backward(grad)
        emb.flush()

    def plain(s):
        rows, inv = pre[s]
        rows.grad = None
        F.embedding(inv, rows).reshape(BATCH, FIELDS, DIM).backward(grad)

    return {"C": c_step(client, table, flat), "binding": binding, "hand": hand,
            "torch": torch_step, "plain": plain}


def interleaved(versions, steps):
    """Per version, the per-step (wall, CPU) seconds of `steps` steps run
    in turn, step by step, the order rotated every step (so none always
    follows the same one: the shard's wake-up, caches)."""
    names = list(versions)
    for s in range(40):
        for f in versions.values():
            f(s % STEPS)
    out = {n: [] for n in names}
    for i in range(steps):
        for j in range(len(names)):
            n = names[(i + j) % len(names)]
            w0, c0 = time.perf_counter(), time.process_time()
            versions[n](i % STEPS)
            out[n].append((time.perf_counter() - w0, time.process_time() - c0))
    return out


def med_diff(a, b, i):
    return statistics.median(x[i] - y[i] for x, y in zip(a, b)) * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=3000)
    a = ap.parse_args()
    torch.set_num_threads(1)  # one core for the worker, one for the shard
    ids = make_ids()
    grad = torch.full((BATCH, FIELDS, DIM), 1e-3)
    with one_shard() as (ep, d):
        c = zeps.Client.from_endpoints([ep], 0, request_timeout_ms=10000)
        t = c.declare_sparse("bench-emb", DIM, optimizer="adagrad", lr=1e-3)
        per = interleaved(step_versions(c, t, ids, grad), a.steps)
        c.close()
    uniq = np.mean([len(np.unique(ids[s])) for s in range(STEPS)])
    print(f"{BATCH} x {FIELDS} ids per step ({uniq:.0f} distinct on average), dim {DIM}, "
          f"{a.steps} steps of each version, interleaved")
    own = []
    for i, what in ((0, "wall"), (1, "CPU")):
        meds = {n: statistics.median(x[i] for x in v) * 1e6 for n, v in per.items()}
        print(f"{what:4s} per step: " + ", ".join(f"{n} {v:.1f} us" for n, v in meds.items()))
        b = med_diff(per["binding"], per["C"], i)
        d = med_diff(per["torch"], per["hand"], i)
        print(f"{what:4s} binding - C {b:.1f} us; zeps.torch - hand {d:.1f} us "
              f"(medians of the per-step differences)")
        own.append(b + d)
    print(f"zeps.torch's own cost per step over the C API: {own[0]:.1f} us wall, "
          f"{own[1]:.1f} us CPU")


if __name__ == "__main__":
    sys.exit(main())
