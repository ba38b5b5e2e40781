"""PyTorch on zeps: embeddings whose rows live in sparse tables, and dense
parameters kept on dense tables (docs/python.md).

- :class:`Embedding` and :class:`EmbeddingBag` are ``nn.Module``s whose rows
  live in a zeps sparse table. Forward pulls the rows of the batch's unique
  ids (one Batch: libzeps groups them by shard, one request per shard);
  backward pushes their row gradients, summed over repeats, and the shard's
  per-row optimizer (Adagrad, Adam, FTRL, SGD) updates them. The Batch sends
  back the row versions its pull read, so the shards measure every row's
  staleness. The module itself has no parameters.
- :class:`DenseParameters` keeps a module's parameters on dense tables: one
  table per parameter, initialised on the shards (the same values on every
  worker and every shard count). ``pull(clock)`` copies the current values
  into the parameters in place; during ``backward`` each parameter's
  gradient is pushed as soon as autograd has it (overlapping the rest of
  backward); ``step(clock)`` waits for the pushes and tells the shards the
  clock is done. The cluster's consistency mode (bsp, ssp, async, weighted)
  decides when a pull returns and how pushes are applied; nothing here
  changes with the mode.

Clocks: every zeps module has a ``clock`` attribute (the iteration it works
on); :func:`set_clock` sets it on every zeps module inside a model.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .client import Batch

__all__ = ["Embedding", "EmbeddingBag", "DenseParameters", "set_clock"]


def set_clock(module, clock):
    """Set `clock` on every zeps module in `module` (itself included)."""
    for m in module.modules():
        if isinstance(m, _SparseModule):
            m.clock = clock


def _as_ids(ids):
    """Torch int64 ids as numpy uint64 (two's complement: -1 is 2^64-1)."""
    a = ids.detach().cpu().contiguous().numpy() if torch.is_tensor(ids) else np.asarray(ids)
    if a.dtype != np.uint64:
        a = a.astype(np.int64, copy=False).view(np.uint64)
    return a.reshape(-1)


class _Rows(torch.autograd.Function):
    """The rows of a Batch as a leaf-like tensor: forward pulls them,
    backward pushes their gradient (summed over repeated positions by
    autograd before it gets here) and returns nothing for the anchor."""

    @staticmethod
    def forward(ctx, anchor, batch, clock):
        rows = batch.pull(clock)
        ctx.batch, ctx.clock = batch, clock
        return torch.from_numpy(rows)

    @staticmethod
    def backward(ctx, grad):
        g = grad.detach().contiguous().numpy()
        ctx.batch.push(g, ctx.clock)
        return torch.zeros(()), None, None


class _SparseModule(nn.Module):
    def __init__(self, table, clock=0):
        super().__init__()
        self.table = table
        self.dim = table.dim
        self.clock = clock
        # autograd only calls a Function's backward if an input needs a
        # gradient: this scalar is that input (not a parameter).
        self._anchor = torch.zeros((), requires_grad=True)

    def _unique_rows(self, ids):
        flat = _as_ids(ids)
        uniq, inverse = np.unique(flat, return_inverse=True)
        batch = Batch(self.table, uniq)
        rows = _Rows.apply(self._anchor, batch, self.clock)
        return rows, torch.from_numpy(inverse.astype(np.int64))


class Embedding(_SparseModule):
    """``nn.Embedding`` over a zeps SparseTable: ``forward(ids)`` (int64 ids
    of any shape, any value) returns ids.shape + (dim,)."""

    def forward(self, ids):
        rows, inverse = self._unique_rows(ids)
        shape = tuple(ids.shape) + (self.dim,)
        return F.embedding(inverse, rows).reshape(shape)


class EmbeddingBag(_SparseModule):
    """``nn.EmbeddingBag`` (mode "sum" or "mean") over a zeps SparseTable:
    ``forward(ids)`` with 2-D ids (one bag per row), or 1-D ids and
    ``offsets`` (bag starts), returns (bags, dim)."""

    def __init__(self, table, mode="sum", clock=0):
        super().__init__(table, clock)
        if mode not in ("sum", "mean"):
            raise ValueError(f"mode must be 'sum' or 'mean', not {mode!r}")
        self.mode = mode

    def forward(self, ids, offsets=None):
        rows, inverse = self._unique_rows(ids)
        if ids.dim() == 2:
            inverse = inverse.reshape(ids.shape)
        return F.embedding_bag(inverse, rows, offsets, mode=self.mode)


def _default_init(name, p):
    """The shards' initializer for a parameter: He-normal for weights
    (std sqrt(2 / fan_in)), zeros for biases and 1-D parameters."""
    if p.dim() < 2:
        return "zeros", 0.0
    fan_in = p[0].numel()
    return "normal", math.sqrt(2.0 / fan_in)


class DenseParameters:
    """Keep every parameter of `module` on a zeps dense table named
    ``prefix + parameter name`` (declared with `optimizer` and its
    hyper-parameters; ``init`` a function (name, param) -> (init, scale),
    He-normal weights and zero biases by default, seeded by `seed`).

    Per iteration: ``pull(clock)`` before forward, ``loss.backward()``
    (gradients are pushed as autograd produces them), then ``step(clock)``.
    The module's parameters are updated only by pulls: do not give them to
    a torch optimizer."""

    def __init__(self, client, module, optimizer="sgd", lr=0.01, prefix="", init=None, seed=1,
                 **hyper):
        self.client = client
        self.params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self.tables = []
        self._pending = []
        self._clock = 0
        init = init or _default_init
        for i, (name, p) in enumerate(self.params):
            if p.dtype != torch.float32 or p.device.type != "cpu":
                raise ValueError(f"parameter {name}: zeps keeps float32 CPU tensors only")
            kind, scale = init(name, p)
            t = client.declare(prefix + name, p.numel(), optimizer=optimizer, lr=lr, init=kind,
                               init_scale=scale, seed=seed + i, **hyper)
            self.tables.append(t)
            p.register_hook(self._pusher(t))

    def _pusher(self, table):
        def hook(grad):
            g = grad.detach().contiguous().reshape(-1).numpy()
            self._pending.append(table.push_async(g, clock=self._clock))
            return grad
        return hook

    def pull(self, clock):
        """Pull every parameter as seen at `clock` into the module, in place
        (the pulls of all tables travel together)."""
        self._clock = clock
        reqs = []
        with torch.no_grad():
            for (name, p), t in zip(self.params, self.tables):
                reqs.append(t.pull_async(clock, out=p.data.view(-1).numpy()))
        for r in reqs:
            r.wait()

    def step(self, clock=None):
        """Wait for this iteration's pushes, then tell the shards `clock` is
        done (default: the clock of the last pull)."""
        clock = self._clock if clock is None else clock
        pending, self._pending = self._pending, []
        for r in pending:
            r.wait()
        for _, p in self.params:
            p.grad = None  # the shards hold the update; nothing accumulates here
        self.client.clock(clock)
