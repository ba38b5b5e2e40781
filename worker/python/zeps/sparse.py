"""Sparse tables (SparseTable) and their batches of ids (Batch)."""
import numpy as np

from ._native import ffi, lib
from ._common import _F32, _U64, _f32, _ids_u64, _set_lr
from .request import Request


class Batch:
    """A batch of ids of a sparse table, deduplicated and grouped by shard
    once by libzeps; pull and push it as often as needed. The batch
    remembers the row versions its last pull saw and sends them with the
    next push, so the server measures each row's staleness.

    A training step makes one per step (zeps.torch does), so the calls here
    are kept to what they must do: the ids taken as they are when already a
    contiguous uint64 array, one pointer cell for the batch's whole life,
    the distinct count asked once, and a push holding only the batch (libzeps
    copies the gradients when the push starts)."""

    __slots__ = ("table", "ids", "_n", "_nu", "_b", "_pos", "_posp", "__weakref__")

    def __init__(self, table, ids):
        if type(ids) is not np.ndarray or ids.dtype != _U64 or ids.ndim != 1 \
                or not ids.flags.c_contiguous:
            ids = _ids_u64(ids)
        self._make(table, ids, ffi.from_buffer("uint64_t[]", ids), ids.size)

    @classmethod
    def _pulled(cls, table, ids, address, n, buf, p, clock, req, cell):
        """A Batch of the n uint64 ids at `address` (memory that `ids`, any
        object, holds until this returns: libzeps copies them) made and its
        distinct rows pulled into `buf`, a (rows >= n, dim) float32 array
        whose memory is the cffi float pointer `p`, in one call
        (_zp_py_pull_unique over zeps_sbatch_new_pull_unique; `cell` a
        reusable _zp_py_pulled *): with `req` None it waits and returns
        (batch, the rows as a (unique, dim) view of buf); else `req` is a
        Request made for it (holding buf), which starts the pull and whose
        wait() gives the rows. The batch's positions pointer is in _posp.
        zeps.torch's step: no numpy array made of the ids."""
        c = table.client
        if c._c is None:
            c._check()
        rc = lib._zp_py_pull_unique(c._c, table.handle, ffi.cast("uint64_t *", address), n, p,
                                    clock, cell, ffi.NULL if req is None else req._pp)
        if rc != 0:
            c._raise(rc)
        b = cls.__new__(cls)
        b.table, b.ids, b._n, b._pos = table, ids, n, None
        b._b, nu, b._posp = cell.batch, cell.unique, cell.positions
        b._nu = nu
        rows = buf[:nu]
        if req is None:
            return b, rows
        req._result = rows
        req._keep = (req._keep, b)
        c._pending.add(req)
        return b, req

    def _make(self, table, ids, p, n):
        self.table = table
        c = table.client
        if c._c is None:
            c._check()
        self.ids = ids
        self._n = n
        self._b = None
        self._pos = None
        pp = ffi.new("zeps_sbatch **")
        rc = lib.zeps_sbatch_new(c._c, table.handle, p, n, pp)
        if rc != 0:
            c._raise(rc)
        self._b = pp[0]
        self._nu = lib.zeps_sbatch_unique(self._b)
        self._posp = lib.zeps_sbatch_positions(self._b)

    def __len__(self):
        return self._n

    @property
    def unique(self):
        """Distinct ids in the batch."""
        return self._nu

    def free(self):
        b = self._b
        if b is not None:
            self._b = self._pos = self._posp = None
            lib._zp_py_sbatch_free(b)

    def __del__(self):
        if getattr(self, "_b", None) is not None and self.table.client._c is not None:
            self.free()

    def _rows_out(self, out, rows, what):
        """`out` as a writable float32 array of rows x dim (a new one if None)."""
        dim = self.table.dim
        if out is None:
            return np.empty((rows, dim), dtype=_F32)
        out = _f32(out, writable=True)
        if out.size != rows * dim:
            raise ValueError(f"out has {out.size} values, {what} need {rows} x {dim}")
        return out

    def _start_pull(self, start, out, clock):
        c = self.table.client
        p = ffi.from_buffer("float[]", out, require_writable=True)
        r = Request(c, (out, p, self), out)
        rc = start(self._b, p, clock, r._pp)
        if rc != 0:
            c._raise(rc)
        c._pending.add(r)
        return r

    def _start_push(self, start, grads, rows, what, clock):
        c = self.table.client
        p = self._grads(grads, rows, what)
        # libzeps copies grads into the batch's payload as the push starts:
        # the request keeps the batch only
        r = Request(c, self)
        rc = start(self._b, p, clock, r._pp)
        if rc != 0:
            c._raise(rc)
        c._pending.add(r)
        return r

    def pull_async(self, clock=0, out=None):
        out = self._rows_out(out, self._n, "the batch's ids")
        return self._start_pull(lib.zeps_sbatch_pull_start, out, clock)

    def pull(self, clock=0, out=None):
        """Rows of every id, (n, dim) float32 (repeats get the same row)."""
        out = self._rows_out(out, self._n, "the batch's ids")
        self._blocking(lib.zeps_sbatch_pull, self._writable(out), clock)
        return out

    def push_async(self, grads, clock=0):
        return self._start_push(lib.zeps_sbatch_push_start, grads, self._n,
                                "the batch's ids", clock)

    def push(self, grads, clock=0):
        """Push one gradient row per id (repeats are summed into one update)."""
        self._blocking(lib.zeps_sbatch_push, self._grads(grads, self._n, "the batch's ids"),
                       clock)

    # -- by distinct rows: the ids deduplicated once, in libzeps ----------------

    @property
    def positions(self):
        """uint32 array (n,): the index of each id's row among the batch's
        `unique` distinct rows, in the order the ids first appear (a view of
        the batch's own array, valid while the batch lives):
        `pull_unique()[positions]` is `pull()`."""
        if self._pos is None:
            n = self._n
            buf = ffi.buffer(self._posp, 4 * n) if n else b""
            self._pos = np.frombuffer(buf, dtype=np.uint32, count=n)
        return self._pos

    def _positions_buffer(self):
        """positions as a writable buffer (int32: the values are below 2^31)
        over the batch's own array that holds the batch alive (through a
        cffi gc pointer whose destructor is a method of the batch): a torch
        tensor made from it (zeps.torch's embedding index, torch.frombuffer)
        cannot outlive the memory it reads, and nothing is copied. None for
        an empty batch."""
        if self._n == 0:
            return None
        return ffi.buffer(ffi.gc(self._posp, self._held), 4 * self._n)

    def _held(self, _p):
        """The positions buffer's destructor: nothing to do; being referenced
        by it is what keeps the batch alive."""

    def pull_unique_async(self, clock=0, out=None):
        out = self._rows_out(out, self._nu, "the batch's distinct rows")
        return self._start_pull(lib.zeps_sbatch_pull_unique_start, out, clock)

    def pull_unique(self, clock=0, out=None):
        """The batch's distinct rows, (unique, dim) float32, in `positions`'
        order."""
        out = self._rows_out(out, self._nu, "the batch's distinct rows")
        self._blocking(lib.zeps_sbatch_pull_unique, self._writable(out), clock)
        return out

    def push_unique_async(self, grads, clock=0):
        return self._start_push(lib.zeps_sbatch_push_unique_start, grads, self._nu,
                                "the batch's distinct rows", clock)

    def push_unique(self, grads, clock=0):
        """Push one gradient row per distinct row (already summed)."""
        self._blocking(lib.zeps_sbatch_push_unique,
                       self._grads(grads, self._nu, "the batch's distinct rows"), clock)

    # The blocking calls go through libzeps' own blocking forms: one call,
    # no Request (a Request guards a request that outlives the call; here
    # none does: libzeps waits before it returns, interruptibly).

    @staticmethod
    def _writable(out):
        return ffi.from_buffer("float[]", out, require_writable=True)

    def _grads(self, grads, rows, what):
        """A cffi pointer to `grads` as rows x dim float32 (its memory when
        it is one; libzeps reads it before the call returns)."""
        g = _f32(grads)
        if g.size != rows * self.table.dim:
            raise ValueError(f"grads has {g.size} values, {what} need {rows} x "
                             f"{self.table.dim}")
        return ffi.from_buffer("float[]", g)

    def _blocking(self, call, p, clock):
        """call(batch, p, clock), a blocking libzeps call; its error raised
        (KeyboardInterrupt when a Ctrl-C woke the wait)."""
        lib._zp_py_arm()
        rc = call(self._b, p, clock)
        if rc != 0:
            self.table.client._raise(rc)

    def _push_unique_at(self, address, clock):
        """push_unique_async of the unique x dim floats at `address` (read
        before this returns: libzeps copies them as the push starts)."""
        c = self.table.client
        r = Request(c, self)
        rc = lib.zeps_sbatch_push_unique_start(self._b, ffi.cast("float *", address), clock,
                                               r._pp)
        if rc != 0:
            c._raise(rc)
        c._pending.add(r)
        return r


class SparseTable:
    """A sparse table: rows of `dim` float32 keyed by uint64 ids."""

    def __init__(self, client, handle, name, dim):
        self.client, self.handle, self.name, self.dim = client, handle, name, dim
        self.lr = None  # the lr in force as this client last set or declared it

    def __repr__(self):
        return f"<zeps.SparseTable {self.name!r} dim={self.dim}>"

    def set_lr(self, lr):
        """Make `lr` the rows' learning rate on every shard from now on;
        lead columns scale with it (lead_lr x lr / the declared lr)."""
        _set_lr(self, lr)

    def export(self, max_count=0):
        """Every row the shards hold now, read page by page (SCAN), sorted
        by id: {"ids": uint64 (n,), "values": (n, dim) float32, "state": (n,
        k, dim) float32 (the optimizer's state), "versions", "touches":
        uint32 (n,) (a row's version is its Adam step count),
        "last_clock": int64 (n,)}. A row evicted and made again during the
        export could come twice: the later copy is kept."""
        c = self.client
        pages = []
        for shard in range(c.num_shards):
            cursor = 0
            while True:
                p = c.scan(self, shard, cursor, max_count)
                pages.append(p.records)
                cursor = p.next
                if cursor == 0:
                    break
        rec = np.concatenate(pages)[::-1]
        _, last = np.unique(rec["id"], return_index=True)  # first of the reversed: the later
        rec = rec[last]
        return {"ids": rec["id"].copy(), "values": np.ascontiguousarray(rec["values"]),
                "state": np.ascontiguousarray(rec["state"]), "versions": rec["version"].copy(),
                "touches": rec["touches"].copy(), "last_clock": rec["last_clock"].copy()}

    def load(self, exported):
        """Write rows as export() gave them (into this cluster or another of
        any shard count), made if missing: values, optimizer state and the
        rows' versions, touches and last clocks (PUT)."""
        self.client.put_rows(self, exported["ids"], exported["values"], exported.get("state"),
                             exported.get("versions"), exported.get("touches"),
                             exported.get("last_clock"))

    def batch(self, ids):
        """A reusable Batch of `ids`."""
        return Batch(self, ids)

    def pull(self, ids, clock=0, out=None):
        """Rows of `ids` as (n, dim) float32; rows are made on first touch."""
        return Batch(self, ids).pull(clock, out)

    def push(self, ids, grads, clock=0):
        """Push a gradient row per id; repeated ids' rows are summed."""
        Batch(self, ids).push(grads, clock)
