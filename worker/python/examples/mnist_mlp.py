"""A PyTorch MLP (784-256-10) on Fashion-MNIST, trained on a zeps cluster.

Run as every worker of a cluster, e.g. 2 servers x 4 workers under bsp:

    zepsctl local --exec 'python3 worker/python/examples/mnist_mlp.py'

Each worker is this program with its rank in $ZEPS_RANK and the cluster file
in $ZEPS_CONFIG (zepsctl local, the Slurm script and the Kubernetes Job set
them). The parameters live on zeps dense tables (zeps.torch.DenseParameters:
momentum on the shards); every worker trains on its own partition of a
seeded permutation of the training set, reshuffled each epoch; rank 0
evaluates on the test set at the end and, when $ZEPS_RESULT_DIR is set,
every worker writes worker-<rank>.json there (the fields zeps-worker writes).

The data come from Debian's dataset-fashion-mnist package
(/usr/share/datasets/fashion-mnist, gzipped IDX files).
"""
import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
from torch import nn

import zeps
import zeps.torch as zt

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path, magic):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    got, n = struct.unpack(">II", raw[:8])
    if got != magic:
        sys.exit(f"{path}: not an IDX file of the expected kind (magic {got:#x})")
    if magic == 0x803:
        rows, cols = struct.unpack(">II", raw[8:16])
        return np.frombuffer(raw, np.uint8, n * rows * cols, 16).reshape(n, rows * cols)
    return np.frombuffer(raw, np.uint8, n, 8)


def load(split, limit=0):
    x = read_idx(os.path.join(DATA, f"{split}-images-idx3-ubyte.gz"), 0x803)
    y = read_idx(os.path.join(DATA, f"{split}-labels-idx1-ubyte.gz"), 0x801)
    if limit:
        x, y = x[:limit], y[:limit]
    return torch.from_numpy(x.astype(np.float32) / 255.0), torch.from_numpy(y.astype(np.int64))


def main():
    ap = argparse.ArgumentParser(description="PyTorch MLP on Fashion-MNIST over zeps")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.025)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--examples", type=int, default=0, help="use the first N training examples")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(1)

    client = zeps.Client()  # $ZEPS_CONFIG, rank from $ZEPS_RANK / Slurm / Kubernetes
    rank, workers = client.rank, client.num_workers
    x, y = load("train", a.examples)
    perm = np.random.default_rng(a.seed).permutation(len(x))
    mine = perm[rank::workers]
    steps = (len(x) // workers) // a.batch  # the same on every worker (bsp rounds)

    model = nn.Sequential(nn.Linear(784, a.hidden), nn.ReLU(), nn.Linear(a.hidden, 10))
    ps = zt.DenseParameters(client, model, optimizer="momentum", lr=a.lr, momentum=a.momentum,
                            prefix="mlp.", seed=a.seed)
    loss_fn = nn.CrossEntropyLoss()
    rng = np.random.default_rng(a.seed * 1000 + rank)
    clock = client.resume_clock
    t0, comm0 = time.monotonic(), client.stats()["wait_s"]
    for epoch in range(a.epochs):
        order = mine[rng.permutation(len(mine))]
        total = 0.0
        for s in range(steps):
            idx = order[s * a.batch:(s + 1) * a.batch]
            ps.pull(clock)
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            ps.step(clock)
            total += loss.item()
            clock += 1
        if rank == 0:
            print(f"epoch {epoch + 1}/{a.epochs}: train loss {total / steps:.4f}", flush=True)
    wall = time.monotonic() - t0
    client.barrier()
    ps.pull(clock)
    result = {"rank": rank, "stopped": False, "epochs": a.epochs, "iterations": clock, "wall_s": wall,
              "comm_s": client.stats()["wait_s"] - comm0,
              "compute_s": wall - (client.stats()["wait_s"] - comm0),
              "examples": steps * a.batch * a.epochs,
              "examples_per_s": steps * a.batch * a.epochs / wall}
    if rank == 0:
        xt, yt = load("t10k")
        with torch.no_grad():
            out = model(xt)
            result["final_loss"] = loss_fn(out, yt).item()
            result["final_accuracy"] = (out.argmax(1) == yt).float().mean().item()
        print(f"final: test accuracy {result['final_accuracy']:.4f}, "
              f"test loss {result['final_loss']:.4f}", flush=True)
    zeps.write_result(rank, result)  # $ZEPS_RESULT_DIR/worker-<rank>.json
    client.close()


if __name__ == "__main__":
    main()
