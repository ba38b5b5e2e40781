"""PyTorch on zeps: embeddings whose rows live in sparse tables, and dense
parameters kept on dense tables (docs/python.md).

- :class:`Embedding` and :class:`EmbeddingBag` are ``nn.Module``s whose rows
  live in a zeps sparse table. Forward pulls the rows of the batch's unique
  ids (one Batch: libzeps groups them by shard, one request per shard);
  backward starts the push of their row gradients, summed over repeats (the
  module's next forward, or :func:`flush`, collects its reply), and the
  shard's per-row optimizer (Adagrad, Adam, FTRL, SGD) updates them. The Batch sends
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
import contextlib
import math
import time
from collections import defaultdict

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ._common import _ids_u64
from ._native import ffi
from .request import Request
from .sparse import Batch

__all__ = ["Embedding", "EmbeddingBag", "DenseParameters", "ShardOptimizer", "set_clock",
           "flush", "StepProfile"]


class StepProfile:
    """Where the time of a step goes inside zeps.torch, per phase (docs/python.md,
    "Per-step budget"): `batch` (one libzeps call makes the Batch, the ids
    deduplicated and grouped by shard, and starts the pull of its distinct
    rows), `dedup` (each position's distinct-row index as an int32 tensor
    over the batch's array), `sparse_pull` (waiting for the rows),
    `sparse_push` (starting the push in the gradient hook),
    `sparse_push_wait` (its reply), `dense_pull`, `dense_push` (starting the
    pushes in the gradient hooks), `dense_wait` (DenseParameters.step: the
    pushes' replies and the clock). ``zt.StepProfile.start()`` makes one
    the active profile; the modules then add to it (off: one test per
    call). ``per_step(steps)`` gives microseconds per step."""

    active = None

    def __init__(self):
        self.seconds = defaultdict(float)

    @classmethod
    def start(cls):
        cls.active = cls()
        return cls.active

    @classmethod
    def stop(cls):
        cls.active = None

    def per_step(self, steps):
        return {k: 1e6 * v / max(steps, 1) for k, v in sorted(self.seconds.items())}


def _timed(name, f, *args, **kw):
    """f(*args, **kw), its time added to the active profile's `name`."""
    prof = StepProfile.active
    if prof is None:
        return f(*args, **kw)
    t0 = time.perf_counter()
    try:
        return f(*args, **kw)
    finally:
        prof.seconds[name] += time.perf_counter() - t0


def set_clock(module, clock):
    """Set `clock` on every zeps module in `module` (itself included)."""
    for m in module.modules():
        if isinstance(m, _SparseModule):
            m.clock = clock


def flush(module):
    """Wait until every push the zeps modules in `module` started is
    acknowledged (raising the first error). Backward only starts a sparse
    push; the module's next forward collects it. Call flush at the end of
    training, and before an evaluation or a snapshot that must see the last
    step's rows (Client.close also waits for them)."""
    for m in module.modules():
        if isinstance(m, _SparseModule):
            m.flush()


def _ids_at(ids):
    """(an object holding the ids' memory, its address, count) of `ids` as
    uint64 (int64 ids in two's complement: -1 is 2^64-1). A contiguous
    int64 CPU tensor, the common case, is read where it lies (no numpy
    array made: a tensor's .numpy() costs microseconds a step)."""
    if type(ids) is torch.Tensor and ids.dtype is torch.int64 and ids.is_cpu \
            and ids.is_contiguous():
        return ids, ids.data_ptr(), ids.numel()
    a = _ids_u64(ids.detach().cpu().numpy() if torch.is_tensor(ids) else ids)
    return a, a.ctypes.data, a.size


def _positions(batch):
    """Each position's distinct-row index, as the index tensor
    torch.embedding takes: int32, over the batch's own array (no copy),
    which the tensor keeps alive (Batch._positions_buffer)."""
    b = batch._positions_buffer()
    if b is None:
        return torch.zeros(0, dtype=torch.int32)
    return torch.frombuffer(b, dtype=torch.int32)


def _probe_hook_dict():
    """Whether a leaf tensor takes its gradient hooks as a dict set on
    `_backward_hooks` (what Tensor.register_hook does underneath, without
    its handle and checks: a few microseconds a step less). Tried once, on
    a tensor of one value; False sends every hook through register_hook."""
    seen = []
    try:
        t = torch.zeros(1, requires_grad=True)
        t._backward_hooks = {0: seen.append}
        (t * 2).sum().backward()
    except Exception:  # noqa: BLE001 - any failure: use the public way
        return False
    return len(seen) == 1


_HOOK_DICT = _probe_hook_dict()


def _push_hook(module, batch, clock):
    """The gradient hook of a step's rows: start pushing their gradient
    (summed over repeated positions by autograd before it gets here) with
    the Batch that pulled them; not waited for: the reply is collected at
    the module's next forward (or flush), so the push overlaps the rest of
    the step. libzeps copies the gradient as the push starts, so nothing
    here holds it: autograd's accumulation takes it without a copy. A
    contiguous float32 gradient (what F.embedding's backward gives) is read
    where it lies."""
    def hook(grad):
        prof = StepProfile.active
        t0 = time.perf_counter() if prof is not None else 0.0
        # autograd hands a leaf's hook a gradient of the leaf's shape
        if grad.dtype is torch.float32 and grad.is_contiguous():
            r = batch._push_unique_at(grad.data_ptr(), clock)
        else:
            r = batch.push_unique_async(grad.detach().numpy(), clock)
        module._pushes.append(r)
        if prof is not None:
            prof.seconds["sparse_push"] += time.perf_counter() - t0
    return hook


class _SparseModule(nn.Module):
    def __init__(self, table, clock=0):
        super().__init__()
        self.table = table
        self.dim = table.dim
        self.clock = clock
        # per-step state lives in containers changed in place: assigning an
        # nn.Module attribute goes through Module.__setattr__ (tens of us a step)
        self._pushes = []  # pushes started by backward, not yet acknowledged
        self._next = [None]  # prefetch(): (ids, batch, inverse, pull in flight, clock)
        # the pulls' destination, grown as needed and reused: no allocation
        # per step, and memory the caches hold. One is enough: a forward
        # waits for any pull in flight before its own, and is done with its
        # rows once it returns (its output is a copy; backward reads the
        # positions only), so a pull started after it (a prefetch) may write
        # over them. [(rows, dim) array, its cffi pointer]
        self._buf = [np.empty((0, self.dim), np.float32), None]
        self._cell = ffi.new("_zp_py_pulled *")  # what the pull call gives back

    def _pull(self, ids, clock, wait):
        """Make the Batch of `ids` and pull its distinct rows at `clock`
        into the module's buffer, in one libzeps call: (batch, each
        position's index among the distinct rows as an int32 tensor, the
        (unique, dim) rows when `wait`, else the pull in flight, whose
        wait() gives them)."""
        if type(ids) is torch.Tensor and ids.dtype is torch.int64 and ids.is_cpu \
                and ids.is_contiguous():  # _ids_at's common case, inline
            owner, address, n = ids, ids.data_ptr(), ids.numel()
        else:
            owner, address, n = _ids_at(ids)
        buf = self._buf
        if buf[0].shape[0] < n:  # the distinct rows are at most n
            buf[0] = np.empty((max(n, 2 * buf[0].shape[0]), self.dim), np.float32)
            buf[1] = ffi.from_buffer("float[]", buf[0], require_writable=True)
        prof = StepProfile.active
        if prof is None:
            req = None if wait else Request(self.table.client, buf[:])
            batch, got = Batch._pulled(self.table, owner, address, n, buf[0], buf[1], clock, req,
                                       self._cell)
            return batch, _positions(batch), got
        # profiled: the pull started, then waited for, each phase timed
        req = Request(self.table.client, buf[:])
        batch, got = _timed("batch", Batch._pulled, self.table, owner, address, n, buf[0],
                            buf[1], clock, req, self._cell)
        inverse = _timed("dedup", _positions, batch)
        if wait:
            got = _timed("sparse_pull", got.wait)
        return batch, inverse, got

    def prefetch(self, ids, clock=None):
        """Start pulling the rows of the next step's `ids` (at `clock`,
        default this module's clock + 1) now, so the pull travels while this
        step computes; the next forward given this same `ids` tensor takes
        them instead of pulling (C's step pipeline does the same,
        docs/pipeline.md). The rows then miss this step's own push: one
        update staler (the shards measure it: the Batch carries the row
        versions it read). Under bsp the pull is held by the shards until
        its round is in, so it costs nothing to start early."""
        self.flush()
        clock = self.clock + 1 if clock is None else clock
        self._next[0] = (ids, *self._pull(ids, clock, False), clock)

    def flush(self):
        """Wait for every push this module started (raises its error)."""
        pending = self._pushes
        while pending:
            r = pending.pop(0)
            if StepProfile.active is None:
                r.wait()
            else:
                _timed("sparse_push_wait", r.wait)

    # state_dict() and load_state_dict(): the rows of the table, through
    # SCAN and PUT (docs/python.md, "Saving and loading a model")
    _ROW_KEYS = ("ids", "weight", "optimizer_state", "row_versions", "row_touches",
                 "row_last_clock", "table")

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """Every row of the table as plain tensors under `prefix`: ids
        (int64: a uint64 id in two's complement), weight (n, dim) float32,
        optimizer_state (n, k, dim), row_versions, row_touches,
        row_last_clock (int64), and table: the declaration as a dict of
        plain values (with "lr_in_force")."""
        self.flush()
        d = self.table.export()
        destination[prefix + "ids"] = torch.from_numpy(d["ids"].view(np.int64))
        destination[prefix + "weight"] = torch.from_numpy(d["values"])
        destination[prefix + "optimizer_state"] = torch.from_numpy(d["state"])
        destination[prefix + "row_versions"] = torch.from_numpy(d["versions"].astype(np.int64))
        destination[prefix + "row_touches"] = torch.from_numpy(d["touches"].astype(np.int64))
        destination[prefix + "row_last_clock"] = torch.from_numpy(d["last_clock"])
        destination[prefix + "table"] = dict(self.table.spec, lr_in_force=self.table.lr)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """Put the rows of a state_dict into the table (PUT: made if
        missing, values, optimizer state, versions), then its learning rate
        in force if it was changed (TUNE)."""
        keys = [prefix + k for k in self._ROW_KEYS]
        missing = [k for k in keys if k not in state_dict]
        if missing:
            missing_keys.extend(missing)
            return
        spec = state_dict[prefix + "table"]
        mine = self.table.spec
        for f in ("dim", "optimizer"):
            if spec.get(f) != mine.get(f):
                error_msgs.append(f"{prefix}table: {f} {spec.get(f)!r} in the state_dict, "
                                  f"{mine.get(f)!r} in table {self.table.name!r}")
                return
        self.flush()
        self.table.load({
            "ids": state_dict[prefix + "ids"].numpy().view(np.uint64),
            "values": state_dict[prefix + "weight"].numpy(),
            "state": state_dict[prefix + "optimizer_state"].numpy(),
            "versions": state_dict[prefix + "row_versions"].numpy(),
            "touches": state_dict[prefix + "row_touches"].numpy(),
            "last_clock": state_dict[prefix + "row_last_clock"].numpy()})
        lr = spec.get("lr_in_force")
        if lr is not None and lr != self.table.lr:
            self.table.set_lr(lr)

    def _unique_rows(self, ids):
        if self._pushes:
            self.flush()  # the previous step's push first: its error surfaces here
        nxt = self._next[0]
        if nxt is not None:
            self._next[0] = None
        if nxt is not None and nxt[0] is ids:
            _, batch, inverse, started, clock = nxt
            rows = _timed("sparse_pull", started.wait)  # in flight since the last step
        else:
            if nxt is not None:
                nxt[3].wait()  # prefetched for other ids: drained, not used
            clock = self.clock
            batch, inverse, rows = self._pull(ids, clock, True)
        # the distinct rows as a leaf: autograd sums the repeated positions'
        # gradients into it, and its hook pushes them (a leaf's hook costs
        # less than a custom autograd Function's backward)
        rows = torch.from_numpy(rows)
        if torch.is_grad_enabled():
            rows.requires_grad_()
            if _HOOK_DICT:
                rows._backward_hooks = {0: _push_hook(self, batch, clock)}
            else:
                rows.register_hook(_push_hook(self, batch, clock))
        return rows, inverse


class Embedding(_SparseModule):
    """``nn.Embedding`` over a zeps SparseTable: ``forward(ids)`` (int64 ids
    of any shape, any value) returns ids.shape + (dim,)."""

    def forward(self, ids):
        rows, inverse = self._unique_rows(ids)
        return torch.embedding(rows, inverse.view(ids.shape))  # F.embedding without its checks


class EmbeddingBag(_SparseModule):
    """``nn.EmbeddingBag`` (mode "sum" or "mean") over a zeps SparseTable:
    ``forward(ids)`` with 2-D ids (one bag per row), or 1-D ids and
    ``offsets`` (bag starts), returns (bags, dim); ``per_sample_weights``
    (the shape of ids, mode "sum") scales each id's row, as in torch."""

    def __init__(self, table, mode="sum", clock=0):
        super().__init__(table, clock)
        if mode not in ("sum", "mean"):
            raise ValueError(f"mode must be 'sum' or 'mean', not {mode!r}")
        self.mode = mode

    def forward(self, ids, offsets=None, per_sample_weights=None):
        rows, inverse = self._unique_rows(ids)
        if ids.dim() == 2:
            inverse = inverse.reshape(ids.shape)
        elif offsets is not None and offsets.dtype != inverse.dtype:
            offsets = offsets.to(inverse.dtype)  # F.embedding_bag takes one index type
        return F.embedding_bag(inverse, rows, offsets, mode=self.mode,
                               per_sample_weights=per_sample_weights)


def _default_init(name, p):
    """The shards' initializer for a parameter: He-normal for weights
    (std sqrt(2 / fan_in)), zeros for biases and 1-D parameters."""
    if p.dim() < 2:
        return "zeros", 0.0
    fan_in = p[0].numel()
    return "normal", math.sqrt(2.0 / fan_in)


class _Unit:
    """One dense table of DenseParameters and the parameters it holds:
    ``members`` [(name, param, offset, numel)], the values' buffer pulls
    write into (the parameters' own storage: one parameter's, or a flat
    buffer every member is a view of), and the gradient buffer a push is
    sent from once every member's gradient of the step is in."""

    def __init__(self, table, members, values):
        self.table, self.members, self.values = table, members, values
        self.n = sum(m[3] for m in members)
        self.grad = np.zeros(self.n, np.float32) if len(members) > 1 else None
        self.have = set()  # offsets of the members whose gradient of this step is in grad
        self.sent = False  # this step's push went
        self.acc = None  # gradients summed under no_sync(), not pushed yet
        self.acc_has = set()  # offsets of the members with a sum in acc

    def accumulate(self, off, g):
        """Add a member's gradient of a no_sync() backward to its sum."""
        if self.acc is None:
            self.acc = np.zeros(self.n, np.float32)
        if off in self.acc_has:
            self.acc[off:off + g.size] += g
        else:
            self.acc[off:off + g.size] = g
            self.acc_has.add(off)

    def with_accumulated(self, off, g):
        """g plus what no_sync() backwards summed for the member (a new
        array then; the sum is used up)."""
        if off not in self.acc_has:
            return g
        self.acc_has.discard(off)
        return self.acc[off:off + g.size] + g


class DenseParameters:
    """Keep every parameter of `module` on zeps dense tables (declared with
    `optimizer` and its hyper-parameters; ``init`` a function (name, param)
    -> (init, scale), He-normal weights and zero biases by default, seeded
    by `seed`).

    With ``flat=True`` (the default) each parameter group is one table,
    ``prefix + "group<i>"``: the parameters become views of one buffer, a
    step pulls and pushes each group with one request per shard, and each
    parameter starts with the values a table of its own would have (the
    table's init segments, docs/protocol.md). ``flat=False`` gives every
    parameter a table of its own, ``prefix + parameter name``.

    `groups`, as ``torch.optim``'s parameter groups: a list of dicts, each
    with ``"params"`` (parameters of `module`) and any of ``"optimizer"``,
    ``"lr"`` and the hyper-parameters (momentum, beta1, beta2, eps,
    weight_decay, staleness) for those parameters' tables; parameters in no
    group take the arguments. ``param_groups`` lists the groups (the
    defaults' group last, if it has parameters), each dict with its
    ``"lr"`` and ``"tables"``.

    Per iteration: ``pull(clock)`` before forward, ``loss.backward()``
    (gradients are pushed as autograd produces them: a group's once all of
    its parameters' are in), then ``step(clock)``. The module's parameters
    are updated only by pulls: do not give them to a torch optimizer
    (:class:`ShardOptimizer` drives torch's learning-rate schedulers
    instead)."""

    _HYPER = ("momentum", "beta1", "beta2", "eps", "weight_decay", "staleness")

    def __init__(self, client, module, optimizer="sgd", lr=0.01, prefix="", init=None, seed=1,
                 groups=None, flat=True, **hyper):
        self.client = client
        self.module = module  # its buffers and frozen parameters stay local (state_dict)
        self.params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        for name, p in self.params:
            if p.dtype != torch.float32 or p.device.type != "cpu":
                raise ValueError(f"parameter {name}: zeps keeps float32 CPU tensors only")
        self.tables = []
        self._units = []
        self._pending = []
        self._clock = 0
        self._listeners = []
        self._next = None  # step(pull_next=True): (clock, its pulls in flight)
        self._accumulating = False  # inside no_sync()
        self.param_groups = self._groups(groups, dict(optimizer=optimizer, lr=lr, **hyper))
        init = init or _default_init
        index = {id(p): i for i, (_, p) in enumerate(self.params)}
        for gi, g in enumerate(self.param_groups):
            mine = [(self.params[index[id(p)]][0], p, index[id(p)]) for p in g["params"]]
            mine.sort(key=lambda m: m[2])  # module order, whatever the group's
            parts = [mine] if flat else [[m] for m in mine]
            for part in parts:
                name = f"{prefix}group{gi}" if flat else prefix + part[0][0]
                self._add_unit(client, name, g, part, init, seed)
        # the last flat table's push waits for step(): it carries the clock
        # there (one message less per shard and step)
        last = self._units[-1] if self._units else None
        self._last = last if last is not None and last.grad is not None else None

    def _add_unit(self, client, name, g, part, init, seed):
        """Declare the table of the parameters `part` [(name, param, index)]
        of group g; with several, make them views of one buffer."""
        opts = {k: g[k] for k in self._HYPER if k in g}
        segs = [(p.numel(),) + tuple(init(n, p)) + (seed + i,) for n, p, i in part]
        if len(part) == 1:
            _, kind, scale, sd = segs[0]
            t = client.declare(name, part[0][1].numel(), optimizer=g["optimizer"], lr=g["lr"],
                               init=kind, init_scale=scale, seed=sd, **opts)
            values = part[0][1].data
        else:
            total = sum(s[0] for s in segs)
            t = client.declare(name, total, optimizer=g["optimizer"], lr=g["lr"],
                               segments=segs, **opts)
            values = torch.empty(total)
        members, off = [], 0
        for n, p, _ in part:
            if len(part) > 1:
                with torch.no_grad():
                    values[off:off + p.numel()].copy_(p.data.reshape(-1))
                p.data = values[off:off + p.numel()].view_as(p)
            members.append((n, p, off, p.numel()))
            off += p.numel()
        u = _Unit(t, members, values)
        self._units.append(u)
        self.tables.append(t)
        g["tables"].append(t)
        for m in members:
            m[1].register_hook(self._pusher(u, m[2], m[3]))

    def _groups(self, groups, defaults):
        """The parameter groups: each asked-for group with the defaults filled
        in, then the defaults' own group for the rest (if any)."""
        mine = {id(p): n for n, p in self.params}
        out, taken = [], set()
        for g in groups or []:
            g = dict(g)
            ps = list(g.get("params", []))
            for p in ps:
                if id(p) not in mine:
                    raise ValueError("a parameter group names a parameter the module does not "
                                     "train")
                if id(p) in taken:
                    raise ValueError(f"parameter {mine[id(p)]} is in two parameter groups")
                taken.add(id(p))
            unknown = set(g) - {"params", "optimizer", "lr", *self._HYPER}
            if unknown:
                raise ValueError(f"parameter group keys {sorted(unknown)} are not known")
            out.append({**defaults, **g, "params": ps, "tables": []})
        rest = [p for _, p in self.params if id(p) not in taken]
        if rest:
            out.append({**defaults, "params": rest, "tables": []})
        return out

    def _pusher(self, u, off, n):
        def hook(grad):
            g = grad.detach().contiguous().reshape(-1).numpy()
            if self._accumulating:  # no_sync(): summed, pushed by a later backward or step
                u.accumulate(off, g)
                return grad
            if u.sent or off in u.have:
                raise RuntimeError(
                    "DenseParameters: a second backward in one step (clock "
                    f"{self._clock}): its gradients are pushed as backward makes them; to "
                    "accumulate over micro-batches run every backward but the last inside "
                    "`with dense.no_sync():`, as with DDP (docs/python.md)")
            self._deliver(u, off, u.with_accumulated(off, g))
            return grad
        return hook

    def _deliver(self, u, off, g):
        """A member's whole gradient of this step: pushed at once (a table
        of its own), or put in its table's buffer, which is pushed when
        complete (the last flat table waits for step)."""
        if u.grad is None:
            u.sent = True
            self._pending.append(_timed("dense_push", u.table.push_async, g, clock=self._clock))
            return
        u.grad[off:off + g.size] = g
        u.have.add(off)
        if len(u.have) == len(u.members) and u is not self._last:
            self._push_unit(u)

    @contextlib.contextmanager
    def no_sync(self):
        """Backwards inside the block sum their gradients here instead of
        pushing them; the step's next backward outside it (or step()) pushes
        the sums, as DDP's no_sync does for gradient accumulation."""
        before, self._accumulating = self._accumulating, True
        try:
            yield
        finally:
            self._accumulating = before

    def _push_unit(self, u):
        u.have, u.sent = set(), True
        self._pending.append(_timed("dense_push", u.table.push_async, u.grad, clock=self._clock))

    def pull(self, clock):
        """Pull every parameter as seen at `clock` into the module, in place
        (the pulls of all tables travel together). Then a learning rate
        changed since (:class:`ShardOptimizer`) goes to the shards: after
        the pull, so under bsp it takes effect from this clock's round on,
        the same round on every run."""
        self._clock = clock
        nxt, self._next = self._next, None
        if nxt is not None and nxt[0] == clock:  # started by step(clock - 1)
            _timed("dense_pull", self._wait_all, nxt[1])
        else:
            if nxt is not None:
                self._wait_all(nxt[1])  # another clock's: finished, then pulled again
            _timed("dense_pull", self._wait_all, self._pull_start(clock))
        for f in self._listeners:
            f()

    def _pull_start(self, clock):
        with torch.no_grad():
            return [u.table.pull_async(clock, out=u.values.view(-1).numpy()) for u in self._units]

    @staticmethod
    def _wait_all(reqs):
        for r in reqs:
            r.wait()

    def step(self, clock=None, pull_next=False):
        """Tell the shards `clock` is done (default: the clock of the last
        pull) and wait for this iteration's pushes. With `pull_next` the
        pulls of clock + 1 start too (sent after the pushes and the clock,
        so they see them, as a pull after step would) and the next
        pull(clock + 1) only waits for them: a round trip saved per step.
        Until that pull returns the parameters are being written: do not
        read them in between (an evaluation pulls first)."""
        clock = self._clock if clock is None else clock
        _timed("dense_wait", self._finish, clock, pull_next)

    def state_dict(self):
        """The tables' contents now, as plain tensors and values for
        ``torch.save`` (docs/python.md, "Saving and loading a model"):
        ``{"params": {name: tensor shaped as the parameter}, "optimizer_state":
        {name: (k,) + shape tensor}, "versions": {name: int (Adam's step
        count)}, "tables": {name: the declaration, with "lr_in_force"}}``
        (a parameter's version and declaration are its table's).
        ``params`` alone loads into the plain module
        (``module.load_state_dict(sd["params"])``): it also holds what the
        module keeps outside the shards, this worker's own copies of its
        buffers (BatchNorm's running statistics) and frozen parameters,
        named in ``"local"``. Call it after ``step(clock)``: pushes in
        flight would be missed."""
        out = {"params": {}, "optimizer_state": {}, "versions": {}, "tables": {}, "local": []}
        for u in self._units:
            d = u.table.export()
            for name, p, off, n in u.members:
                out["params"][name] = torch.from_numpy(d["values"][off:off + n].copy()).reshape(
                    p.shape)
                st = d["state"][:, off:off + n].copy()
                out["optimizer_state"][name] = torch.from_numpy(st).reshape(
                    (st.shape[0],) + tuple(p.shape))
                out["versions"][name] = int(d["version"])
                out["tables"][name] = dict(u.table.spec, lr_in_force=u.table.lr)
        for name, v in self.module.state_dict().items():
            if name not in out["params"]:
                out["params"][name] = v.detach().clone()
                out["local"].append(name)
        return out

    def load_state_dict(self, state_dict):
        """Write a state_dict() into the tables (this cluster or a new one
        of any shard count, flat or not): values, optimizer state and
        versions (PUT; a flat table takes the largest of its parameters'),
        the learning rate in force if it was changed (TUNE); the module's
        parameters take the values too, and its buffers and frozen
        parameters the "local" ones. Every parameter must be there with
        its shape and optimizer."""
        for u in self._units:
            vals, states, version, lr = [], [], 0, None
            for name, p, _, _ in u.members:
                if name not in state_dict["params"]:
                    raise KeyError(f"parameter {name!r} is not in the state_dict")
                v = state_dict["params"][name]
                spec = state_dict["tables"][name]
                if tuple(v.shape) != tuple(p.shape) or spec["optimizer"] != u.table.spec["optimizer"]:
                    raise ValueError(f"parameter {name!r}: {tuple(v.shape)} {spec['optimizer']} "
                                     f"in the state_dict, {tuple(p.shape)} "
                                     f"{u.table.spec['optimizer']} here")
                st = state_dict["optimizer_state"][name]
                vals.append(v.reshape(-1).numpy())
                states.append(st.reshape(st.shape[0], -1).numpy() if st.shape[0] else None)
                version = max(version, int(state_dict["versions"][name]))
                lr = spec.get("lr_in_force", lr)
            state = np.concatenate(states, axis=1) if states[0] is not None else None
            u.table.load({"values": np.concatenate(vals), "state": state, "version": version})
            if lr is not None and lr != u.table.lr:
                u.table.set_lr(lr)
            with torch.no_grad():
                for (name, p, _, _), v in zip(u.members, vals):
                    p.copy_(torch.from_numpy(v).reshape(p.shape))
        own = self.module.state_dict()  # tensors sharing the module's storage
        with torch.no_grad():
            for name in state_dict.get("local", []):
                if name in own:
                    own[name].copy_(state_dict["params"][name])

    def _unsent(self, clock):
        """Push what a step left unpushed: a flat table some of whose
        parameters got no gradient (their part zero); under bsp also a table
        none of whose parameters got one (zeros: its round needs every
        worker's push); the last flat table's push, with `clock` on it
        (else a CLOCK). Then the next step starts afresh."""
        rounds = self.client.consistency.get("mode") == "bsp"
        clocked = False
        for u in self._units:  # sums of no_sync() backwards no later backward took
            for _, _, off, n in u.members:
                if off in u.acc_has:
                    self._deliver(u, off, u.with_accumulated(off, np.zeros(n, np.float32)))
        for u in self._units:
            if not u.sent and (u.have or rounds):
                if u.grad is None:
                    u.grad = np.zeros(u.n, np.float32)
                for _, _, off, n in u.members:
                    if off not in u.have:
                        u.grad[off:off + n] = 0.0
                if u is self._last:
                    u.have, u.sent, clocked = set(), True, True
                    self._pending += _timed("dense_push", u.table.push_clock_async, u.grad,
                                            clock)
                else:
                    self._push_unit(u)
            if len(u.members) == 1:
                u.grad = None  # pushed from its gradient as it comes
            u.sent = False
        if not clocked:
            self._pending.append(self.client.clock_async(clock))

    def _finish(self, clock, pull_next):
        self._unsent(clock)
        reqs, self._pending = self._pending, []
        for _, p in self.params:
            p.grad = None  # the shards hold the update; nothing accumulates here
        if pull_next:  # started, not waited for: pull(clock + 1) collects them
            self._next = (clock + 1, self._pull_start(clock + 1))
        self._wait_all(reqs)


class ShardOptimizer(torch.optim.Optimizer):
    """The learning rates of zeps tables as a ``torch.optim.Optimizer``, so
    torch's learning-rate schedulers (``StepLR``, ``LambdaLR``,
    ``CosineAnnealingLR``, ...) drive them. Its ``param_groups`` are the
    DenseParameters' groups (the same dicts) and one group per sparse table
    of `sparse` (``"table"``, ``"lr"``). The shards update the parameters,
    so ``step()`` changes nothing; a learning rate a scheduler changed goes
    to the shards at the next ``dense.pull(clock)``, after the pull (under
    bsp the round of that clock on, the same on every run), or at
    ``sync()`` without DenseParameters (call it after the step's pulls).
    Call ``scheduler.step()`` where torch's docs say, after the iteration's
    or epoch's last ``dense.step(clock)``.

    ``opt = zt.ShardOptimizer(dense, [emb.table]); sched =
    torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)``"""

    def __init__(self, dense=None, sparse=()):
        groups = []
        if dense is not None:
            groups += dense.param_groups
            dense._listeners.append(self.sync)
        for t in sparse:
            if t.lr is None:
                raise ValueError(f"table {t.name!r}: declare it through this client first")
            groups.append({"params": [torch.zeros((), requires_grad=True)], "lr": t.lr,
                           "table": t})
        if not groups:
            raise ValueError("ShardOptimizer needs DenseParameters or sparse tables")
        super().__init__(groups, {})
        self.sync()

    def sync(self):
        """Send every group's "lr" that differs from what its tables have."""
        for g in self.param_groups:
            tables = g.get("tables") or [g["table"]]
            for t in tables:
                if t.lr != g["lr"]:
                    t.set_lr(g["lr"])

    @torch.no_grad()
    def step(self, closure=None):
        return closure() if closure is not None else None

    def zero_grad(self, set_to_none=True):
        pass  # nothing accumulates here: DenseParameters.step clears .grad
