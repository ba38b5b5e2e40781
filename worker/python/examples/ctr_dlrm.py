"""A PyTorch CTR model on sparse zeps tables: embedding bags + a small MLP.

    zepsctl gen-criteo --out DATA --train 1000000 --test 100000
    zepsctl local --config deploy/local/ctr.conf \\
        --exec 'python3 worker/python/examples/ctr_dlrm.py --data DATA'

The model (a DLRM-like shape, kept small): for the 26 categorical fields of
a Criteo-format line, a first-order weight per id and an 8-dimensional
embedding per id whose pairwise interactions are summed (a factorization
machine); the 13 integer fields, log(1 + x), go through an MLP (13-16-1).
The logit is the sum of the three. An id's weight and embedding are one
row of 1 + 8 values in one sparse table (the weight is the row's lead
column, with its own lr and zero init: docs/sparse.md, "Lead columns"), as
the C ctr model keeps them: one deduplication, one pull and one push per
step for both. Adagrad on the shards (rows created on first touch); the
MLP's parameters in dense tables (for --model dlrm at --dense-lr times the
square root of the number of workers: --dense-lr-scale). Every worker reads its
partition of the training file (lines i with i mod workers == rank), one
epoch; rank 0 evaluates AUC and log-loss on the test file and compares with
the generator's hidden model (truth.json beside the data).

Rank and cluster file come from $ZEPS_RANK and $ZEPS_CONFIG; with
$ZEPS_RESULT_DIR set every worker writes worker-<rank>.json there.
"""
import argparse
import json
import math
import os
import time

import numpy as np
import torch
from torch import nn

import zeps
import zeps.torch as zt

NDENSE, NCAT = 13, 26


def parse(path, part=0, parts=1, limit=0):
    """Labels, dense features (log1p) and field-aware ids of a Criteo file."""
    labels, dense, ids = [], [], []
    with open(path) as f:
        for i, line in enumerate(f):
            if limit and i >= limit:
                break
            if i % parts != part:
                continue
            cols = line.rstrip("\n").split("\t")
            if len(cols) != 1 + NDENSE + NCAT:
                raise SystemExit(f"{path}:{i + 1}: {len(cols)} fields, expected 40")
            labels.append(float(cols[0]))
            dense.append([np.log1p(float(v)) if v and float(v) > 0 else 0.0
                          for v in cols[1:1 + NDENSE]])
            row = []
            for j, v in enumerate(cols[1 + NDENSE:]):
                field = (j + 1) << 32
                row.append(field | (int(v, 16) & 0xFFFFFFFF) if v else field | (1 << 40))
            ids.append(row)
    return (torch.tensor(labels, dtype=torch.float32), torch.tensor(dense, dtype=torch.float32),
            torch.tensor(np.array(ids, dtype=np.uint64).view(np.int64)))


def auc(scores, labels):
    """Area under the ROC curve, ties averaged."""
    order = np.argsort(scores, kind="mergesort")
    s, y = scores[order], labels[order]
    ranks = np.empty(len(s))
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[i:j + 1] = (i + j) / 2 + 1
        i = j + 1
    pos = y.sum()
    return (ranks[y == 1].sum() - pos * (pos + 1) / 2) / (pos * (len(y) - pos))


class CTR(nn.Module):
    def __init__(self, client, emb_dim, sparse_lr, emb_lr, emb_init, seed):
        super().__init__()
        rows = client.declare_sparse("ctr.rows", 1 + emb_dim, optimizer="adagrad", lr=emb_lr,
                                     init="normal", init_scale=emb_init, seed=seed,
                                     lead_cols=1, lead_lr=sparse_lr, lead_init="zeros")
        self.rows = zt.Embedding(rows)
        self.mlp = nn.Sequential(nn.Linear(NDENSE, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, dense, ids):
        r = self.rows(ids)                                 # (B, 26, 1 + dim)
        lin, e = r[:, :, 0].sum(1, keepdim=True), r[:, :, 1:]
        fm = 0.5 * (e.sum(1).pow(2) - e.pow(2).sum(1)).sum(1, keepdim=True)
        return (lin + fm + self.mlp(dense)).squeeze(1)


def interact(v):
    """DLRM's feature interaction: the dot product of every pair of the F
    vectors of each example, v (B, F, d) -> (B, F (F - 1) / 2)."""
    f = v.shape[1]
    i, j = torch.triu_indices(f, f, offset=1)
    return torch.bmm(v, v.transpose(1, 2))[:, i, j]


def dlrm_mlps(emb_dim):
    """The bottom MLP (13 dense features -> emb_dim) and the top MLP (its
    output and the 27 vectors' pairwise dots -> the logit)."""
    nf = NCAT + 1
    return nn.ModuleDict({
        "bottom": nn.Sequential(nn.Linear(NDENSE, 16), nn.ReLU(), nn.Linear(16, emb_dim),
                                nn.ReLU()),
        "top": nn.Sequential(nn.Linear(emb_dim + nf * (nf - 1) // 2, 16), nn.ReLU(),
                             nn.Linear(16, 1))})


class DLRM(nn.Module):
    """The DLRM shape (Naumov et al. 2019), small: an 8-dim embedding per
    id of the 26 fields, a bottom MLP on the dense fields, the pairwise dots
    of the 27 vectors, a top MLP. The MLPs (`mlp`) on dense tables."""

    def __init__(self, client, emb_dim, emb_lr, emb_init, seed):
        super().__init__()
        rows = client.declare_sparse("dlrm.rows", emb_dim, optimizer="adagrad", lr=emb_lr,
                                     init="normal", init_scale=emb_init, seed=seed)
        self.rows = zt.Embedding(rows)
        self.mlp = dlrm_mlps(emb_dim)

    def forward(self, dense, ids):
        b = self.mlp["bottom"](dense)                      # (B, dim)
        v = torch.cat([b.unsqueeze(1), self.rows(ids)], 1)  # (B, 27, dim)
        return self.mlp["top"](torch.cat([b, interact(v)], 1)).squeeze(1)


def model_args(ap):
    """The data and the model's hyper-parameters (shared with the plain
    PyTorch reference, worker/python/bench/ctr_torch_ref.py)."""
    ap.add_argument("--data", required=True, help="directory of train.txt, test.txt, truth.json")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--emb-dim", type=int, default=8)
    ap.add_argument("--sparse-lr", type=float, default=0.05)
    ap.add_argument("--emb-lr", type=float, default=0.003)
    ap.add_argument("--emb-init", type=float, default=0.01)
    ap.add_argument("--dense-lr", type=float, default=0.05)
    ap.add_argument("--model", choices=("ctr", "dlrm"), default="ctr",
                    help="ctr: LR + FM + an MLP on the dense fields (as zeps-worker's ctr); "
                         "dlrm: embeddings, bottom and top MLP, pairwise dots")


def main():
    ap = argparse.ArgumentParser(description="PyTorch CTR model over zeps sparse tables")
    model_args(ap)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--train-limit", type=int, default=0, help="first N lines of train.txt")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-prefetch", action="store_true",
                    help="pull each step's rows in its own forward, not during the step before")
    ap.add_argument("--dense-lr-scale", type=float, default=None,
                    help="the MLP's lr is --dense-lr times this: by default, for --model "
                         "dlrm, the square root of the number of workers (each worker's push "
                         "updates the shared top MLP from parameters a few pushes old; at "
                         "--dense-lr alone 4 workers' AUC fell below the one-process model's: "
                         "docs/python.md, 'Per-step budget'), 1 for ctr")
    ap.add_argument("--profile", action="store_true",
                    help="time each phase of a step (zeps.torch.StepProfile): printed by "
                         "rank 0, in every worker's result as step_us")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)

    client = zeps.Client()
    rank, workers = client.rank, client.num_workers
    y, dense, ids = parse(os.path.join(a.data, "train.txt"), rank, workers, a.train_limit)
    if a.model == "dlrm":
        model = DLRM(client, a.emb_dim, a.emb_lr, a.emb_init, a.seed)
    else:
        model = CTR(client, a.emb_dim, a.sparse_lr, a.emb_lr, a.emb_init, a.seed)
    scale = a.dense_lr_scale
    if scale is None:
        scale = math.sqrt(workers) if a.model == "dlrm" else 1.0
    ps = zt.DenseParameters(client, model.mlp, optimizer="adagrad", lr=a.dense_lr * scale,
                            prefix=f"{a.model}.mlp.", seed=a.seed)
    loss_fn = nn.BCEWithLogitsLoss()
    clock = client.resume_clock
    prof = zt.StepProfile.start() if a.profile else None
    t0, comm0 = time.monotonic(), client.stats()["wait_s"]
    n = 0
    batches = [(s, ids[s:s + a.batch]) for s in range(0, len(y), a.batch)]
    for epoch in range(a.epochs):
        for k, (s, bids) in enumerate(batches):
            zt.set_clock(model, clock)
            ps.pull(clock)
            logits = model(dense[s:s + a.batch], bids)
            if not a.no_prefetch and k + 1 < len(batches):
                model.rows.prefetch(batches[k + 1][1])  # travels during backward and step
            loss = loss_fn(logits, y[s:s + a.batch])
            loss.backward()
            ps.step(clock, pull_next=not a.no_prefetch)
            clock += 1
            n += min(a.batch, len(y) - s)
    zt.flush(model)  # the last step's sparse push, acknowledged
    wall = time.monotonic() - t0
    steps = clock - client.resume_clock
    zt.StepProfile.stop()
    result = {"rank": rank, "stopped": False, "epochs": a.epochs, "iterations": clock, "examples": n,
              "wall_s": wall, "examples_per_s": n / wall,
              "comm_s": client.stats()["wait_s"] - comm0,
              "compute_s": wall - (client.stats()["wait_s"] - comm0)}
    if prof is not None:
        budget = prof.per_step(steps)
        budget["step"] = 1e6 * wall / max(steps, 1)
        budget["rest"] = budget["step"] - sum(v for k, v in budget.items() if k != "step")
        result["step_us"] = budget
        if rank == 0:
            print("per-step budget (us): " + ", ".join(f"{k} {v:.0f}" for k, v in budget.items()),
                  flush=True)
    client.barrier()
    if rank == 0:
        yt, dt, it = parse(os.path.join(a.data, "test.txt"))
        zt.set_clock(model, clock)
        ps.pull(clock)
        with torch.no_grad():
            logits = torch.cat([model(dt[s:s + 4096], it[s:s + 4096])
                                for s in range(0, len(yt), 4096)])
        result["final_loss"] = loss_fn(logits, yt).item()
        result["final_auc"] = float(auc(logits.numpy(), yt.numpy()))
        truth = {}
        tpath = os.path.join(a.data, "truth.json")
        if os.path.exists(tpath):
            with open(tpath) as f:
                truth = json.load(f)
        print(f"final: test AUC {result['final_auc']:.4f}, logloss {result['final_loss']:.4f}"
              f" (hidden model AUC {truth.get('truth_test_auc', float('nan')):.4f}); "
              f"{n / wall:.0f} examples/s on rank 0", flush=True)
    zeps.write_result(rank, result)  # $ZEPS_RESULT_DIR/worker-<rank>.json
    client.close()


if __name__ == "__main__":
    main()
