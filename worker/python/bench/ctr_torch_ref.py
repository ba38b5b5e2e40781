"""The reference for the Python CTR job: the same model as
worker/python/examples/ctr_dlrm.py (--model ctr or dlrm) on the same data,
in one plain PyTorch process (no zeps). What zeps' Python path is measured against
(docs/python.md, "Per-step budget"; bench_ctr.sh runs both in one run).

    /usr/bin/python3 worker/python/bench/ctr_torch_ref.py --data DIR [--batch 256]

The ids of the training and test files are numbered first (a vocabulary:
plain PyTorch needs a fixed table); each id's row is 1 + 8 values in one
nn.Embedding with sparse gradients, the weight column zero-initialised and
the embedding N(0, emb_init), as the shards initialise them; Adagrad with
the example's two learning rates (the weight column and the embedding as
two parameter groups of torch.optim.Adagrad over two Embeddings); the MLP
13-16-1 with Adagrad. One epoch, batch 256; prints and writes (--json)
examples/s (training only) and the test AUC.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from ctr_dlrm import NDENSE, auc, dlrm_mlps, interact, model_args, parse  # noqa: E402


class Ref(nn.Module):
    def __init__(self, vocab, emb_dim, emb_init):
        super().__init__()
        self.lin = nn.Embedding(vocab, 1, sparse=True)
        self.emb = nn.Embedding(vocab, emb_dim, sparse=True)
        nn.init.zeros_(self.lin.weight)
        nn.init.normal_(self.emb.weight, 0.0, emb_init)
        self.mlp = nn.Sequential(nn.Linear(NDENSE, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, dense, idx):
        lin = self.lin(idx).sum((1, 2)).unsqueeze(1)
        e = self.emb(idx)
        fm = 0.5 * (e.sum(1).pow(2) - e.pow(2).sum(1)).sum(1, keepdim=True)
        return (lin + fm + self.mlp(dense)).squeeze(1)


class RefDLRM(nn.Module):
    """ctr_dlrm.py's DLRM (--model dlrm) on a vocabulary."""

    def __init__(self, vocab, emb_dim, emb_init):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb_dim, sparse=True)
        nn.init.normal_(self.emb.weight, 0.0, emb_init)
        self.mlp = dlrm_mlps(emb_dim)

    def forward(self, dense, idx):
        b = self.mlp["bottom"](dense)
        v = torch.cat([b.unsqueeze(1), self.emb(idx)], 1)
        return self.mlp["top"](torch.cat([b, interact(v)], 1)).squeeze(1)


def main():
    ap = argparse.ArgumentParser(description="plain PyTorch reference of ctr_dlrm.py")
    model_args(ap)  # the same data and hyper-parameters as the example
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    y, dense, ids = parse(os.path.join(a.data, "train.txt"))
    yt, dt, it = parse(os.path.join(a.data, "test.txt"))
    vocab, idx = np.unique(torch.cat([ids, it]).numpy().reshape(-1), return_inverse=True)
    idx = torch.from_numpy(idx.astype(np.int64))
    train_idx, test_idx = idx[:ids.numel()].view(ids.shape), idx[ids.numel():].view(it.shape)
    if a.model == "dlrm":
        m = RefDLRM(len(vocab), a.emb_dim, a.emb_init)
        sparse = torch.optim.Adagrad(m.emb.parameters(), lr=a.emb_lr)
    else:
        m = Ref(len(vocab), a.emb_dim, a.emb_init)
        sparse = torch.optim.Adagrad([{"params": m.lin.parameters(), "lr": a.sparse_lr},
                                      {"params": m.emb.parameters(), "lr": a.emb_lr}])
    dense_opt = torch.optim.Adagrad(m.mlp.parameters(), lr=a.dense_lr)
    loss_fn = nn.BCEWithLogitsLoss()
    t0 = time.monotonic()
    for s in range(0, len(y), a.batch):
        sparse.zero_grad()
        dense_opt.zero_grad()
        loss = loss_fn(m(dense[s:s + a.batch], train_idx[s:s + a.batch]), y[s:s + a.batch])
        loss.backward()
        sparse.step()
        dense_opt.step()
    wall = time.monotonic() - t0
    with torch.no_grad():
        logits = torch.cat([m(dt[s:s + 4096], test_idx[s:s + 4096])
                            for s in range(0, len(yt), 4096)])
    res = {"examples": len(y), "wall_s": wall, "examples_per_s": len(y) / wall,
           "final_auc": float(auc(logits.numpy(), yt.numpy())),
           "final_loss": loss_fn(logits, yt).item(), "vocab": int(len(vocab))}
    print(f"plain PyTorch: {res['examples_per_s']:.0f} examples/s, test AUC "
          f"{res['final_auc']:.4f} ({len(y)} examples, {len(vocab)} ids)", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f)


if __name__ == "__main__":
    main()
