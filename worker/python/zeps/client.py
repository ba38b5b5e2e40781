"""The Client: a connection to every shard of one cluster (its tables are in
dense.py and sparse.py, its requests and views in request.py).

Threading: a Client and everything it hands out belong to one thread at a
time, as in C. Calls that wait (pull, push, clock, barrier, Request.wait)
release the GIL while libzeps waits, and a Ctrl-C (SIGINT) interrupts them:
the wait gives up and KeyboardInterrupt is raised.

Memory: arrays cross by pointer. A pull fills the caller's `out` array when
given (float32, C-contiguous, the right size), else a new one; a view pull
(`DenseTable.pull_view`) copies nothing: its arrays are read-only windows
on the buffers ZeroMQ received, which each array keeps alive. A push sends
the caller's array without copying when it is float32 and C-contiguous,
else a contiguous float32 copy. A non-blocking request keeps every array it
uses alive (the Request holds them, and the Client holds every Request not
yet waited for) until its wait returns, so dropping an array, or the
Request itself, can never free memory ZeroMQ still reads or writes.
"""
import os

import numpy as np

from ._native import ffi, lib
from .errors import raise_for, Error
from ._common import (_F32, _f32, _spec_strings, _let_signal_handlers_run, lib_code,
                      _record_dtype)
from .request import Request
from .dense import DenseTable, Page
from .sparse import SparseTable


def rank_from_env(value=None):
    """This worker's rank: `value` (a number, "auto", "hostname" or
    "env:NAME"), else $ZEPS_RANK, else torchrun's $RANK (with $LOCAL_RANK
    and $WORLD_SIZE beside it), else as zeps-worker finds it:
    $JOB_COMPLETION_INDEX, else $SLURM_PROCID (docs/operations.md,
    docs/python.md)."""
    if value is None and "ZEPS_RANK" not in os.environ and _torchrun():
        value = "env:RANK"
    rank = ffi.new("uint32_t *")
    err = ffi.new("char[]", 256)
    rc = lib.zeps_resolve_rank(value.encode() if value is not None else ffi.NULL, rank, err, 256)
    if rc != 0:
        msg = ffi.string(err).decode()
        if value is None:
            msg += ("; from Python pass rank= to zeps.Client, set ZEPS_RANK, or start the "
                    "program with torchrun (its RANK is read)")
        raise_for(rc, msg)
    return int(rank[0])


def _torchrun():
    """True in a process torchrun (torch.distributed.run) started."""
    return all(k in os.environ for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"))


class Client:
    """A connection to every shard of one zeps cluster, as worker `rank`.

    ``Client(config)`` reads the cluster file (the same file the servers
    read); ``rank`` defaults to :func:`rank_from_env`. Use it as a context
    manager or call :meth:`close`. ``Client.from_endpoints(endpoints, rank,
    **options)`` connects to explicit shard endpoints instead."""

    def __init__(self, config=None, rank=None, *, _endpoints=None, **options):
        self._c = None
        self._pending = set()
        self._tables = {}
        self._clocks = 0  # clocks this worker finished (the last clock() + 1)
        if rank is None:
            rank = rank_from_env()
        pp = ffi.new("zeps_client **")
        # armed before the HELLO wait, so a Ctrl-C while the shards are not
        # up yet ends it at once (KeyboardInterrupt), as in zeps-worker
        self._flag = lib._zp_py_arm()
        if _endpoints is None:
            if config is None:
                config = os.environ.get("ZEPS_CONFIG")
            if config is None:
                raise ValueError("no cluster file: pass config= or set ZEPS_CONFIG")
            rc = lib.zeps_client_new_interruptible(pp, os.fsencode(config), rank, self._flag)
        else:
            eps = [ffi.new("char[]", e.encode()) for e in _endpoints]
            arr = ffi.new("const char *[]", eps)
            opt = ffi.new("zeps_options *")
            keep = []
            for k, v in options.items():
                if isinstance(v, str):
                    v = _spec_strings(keep, x=v)["x"]
                setattr(opt, k, v)
            opt.interrupt = self._flag
            rc = lib.zeps_client_new_endpoints(pp, arr, len(eps), rank, opt)
        if rc != 0:
            if rc == lib_code("ECLOSED") and self._flag[0]:
                self._flag[0] = 0
                _let_signal_handlers_run()
                raise_for(rc, f"rank {rank}: interrupted by a signal while waiting for the shards")
            why = ffi.string(lib.zeps_last_error(ffi.NULL)).decode()
            raise_for(rc, f"zeps.Client as rank {rank}: "
                          f"{why or ffi.string(lib.zeps_strerror(rc)).decode()}")
        self._c = pp[0]
        self._arm()
        lib.zeps_client_set_interrupt(self._c, self._flag)

    @classmethod
    def from_endpoints(cls, endpoints, rank, **options):
        """Connect to shards at `endpoints` (endpoints[i] is shard i);
        options are zeps_options fields (request_timeout_ms, max_retries,
        hello_timeout_ms, ...)."""
        return cls(rank=rank, _endpoints=list(endpoints), **options)

    # -- lifecycle -----------------------------------------------------------

    def close(self, abandon=False, done=True):
        """Finish every request not yet waited for, say BYE to every shard
        and free the client. Idempotent.

        With `done` (the default, and the end of a ``with`` block left
        without an exception) the BYE says this worker ran all its steps:
        under bsp a worker still training, parked on a round this one will
        never join, gets an error at once naming it (docs/python.md, "Every
        rank the same number of steps") instead of waiting for a
        replacement.

        With `abandon`, requests in flight are given up at once instead of
        waited for (whether a push among them was applied is then unknown);
        leaving a ``with`` block on KeyboardInterrupt or SystemExit does
        this, so a Ctrl-C ends the program at once. BYE is still said (a
        bounded wait: under a second when the shards are up)."""
        if self._c is None:
            return
        if abandon and self._pending:
            # the interrupt flag set: each wait gives up at once (ECLOSED)
            # and frees its request, so ZeroMQ writes into no array after
            self._flag[0] = 1
            for r in list(self._pending):
                r._give_up()
            self._flag[0] = 0
        for r in list(self._pending):
            try:
                r.wait()
            except Error:
                pass
        if done:
            lib.zeps_client_set_done(self._c, self._clocks)
        pp = ffi.new("zeps_client **", self._c)
        self._c = None
        lib.zeps_client_destroy(pp)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        # KeyboardInterrupt, SystemExit: the program is stopping, nothing
        # in flight is waited for (an ordinary exception still waits); only
        # a block that ended normally ran all its steps
        self.close(abandon=exc_type is not None and not issubclass(exc_type, Exception),
                   done=exc_type is None)

    def __del__(self):
        if getattr(self, "_c", None) is not None:
            self.close(done=False)

    # -- internals -------------------------------------------------------------

    def _arm(self):
        flag = lib._zp_py_arm()
        if self._flag is None:
            self._flag = flag
        return flag

    def _check(self):
        if self._c is None:
            raise_for(lib_code("ECLOSED"), "the client is closed")

    def _raise(self, rc):
        msg = ffi.string(lib.zeps_last_error(self._c)).decode() if self._c else ""
        if rc == lib_code("ECLOSED") and self._flag is not None and self._flag[0]:
            # A signal woke the wait. Running Python code lets the
            # interpreter call its handler now (KeyboardInterrupt for
            # SIGINT); if the handler returns, say so as an error.
            self._flag[0] = 0
            _let_signal_handlers_run()
            raise_for(rc, "interrupted by a signal")
        raise_for(rc, msg or ffi.string(lib.zeps_strerror(rc)).decode())

    def _call(self, rc):
        if rc != 0:
            self._raise(rc)

    def _start(self, keep, result=None):
        r = Request(self, keep, result)
        self._pending.add(r)
        return r

    # -- cluster ---------------------------------------------------------------

    @property
    def rank(self):
        return int(lib.zeps_rank(self._c))

    @property
    def num_shards(self):
        return int(lib.zeps_num_shards(self._c))

    @property
    def num_workers(self):
        return int(lib.zeps_num_workers(self._c))

    @property
    def consistency(self):
        """The cluster's consistency mode as the shards told it at HELLO:
        {"mode": "bsp", "cuts": bool, "rollback": bool, "bound": bool}
        (cuts: snapshots are consistent cuts; rollback: a restored shard
        sends the job back to its cut; bound: pulls wait for a staleness
        bound)."""
        self._check()
        caps = ffi.new("uint32_t *")
        name = ffi.string(lib.zeps_consistency(self._c, caps)).decode()
        return {"mode": name, "cuts": bool(caps[0] & 1), "rollback": bool(caps[0] & 2),
                "bound": bool(caps[0] & 4)}

    @property
    def resume_clock(self):
        """The clock this worker resumes at (0 for a new job)."""
        return int(lib.zeps_resume_clock(self._c))

    @property
    def rejoined(self):
        return bool(lib.zeps_rejoined(self._c))

    def clock(self, clock):
        """Tell every shard this worker finished `clock`."""
        self._check()
        self._arm()
        self._call(lib.zeps_clock(self._c, clock))
        self._clocks = max(self._clocks, clock + 1)

    def clock_async(self, clock):
        self._check()
        r = self._start(None)
        self._call(lib.zeps_clock_start(self._c, clock, r._pp))
        self._clocks = max(self._clocks, clock + 1)
        return r

    def barrier(self):
        """Block until every worker of the cluster entered the barrier."""
        self._check()
        self._arm()
        self._call(lib.zeps_barrier(self._c))

    def snapshot(self, timeout=60.0):
        """Take a snapshot of the whole cluster and wait until every shard
        wrote it (at most `timeout` s). Under bsp it is a consistent cut:
        call it after a step's pushes and clock (dense.step), or it would
        hold that round back. Returns {"set": id, "clock": the cut (-1 for a
        point in time, other modes)}; the shards need a snapshot_dir
        (ESTATE otherwise). docs/python.md, "Checkpoints"."""
        self._check()
        clock, setid = ffi.new("int64_t *"), ffi.new("uint64_t *")
        self._arm()
        self._call(lib.zeps_snapshot_take(self._c, float(timeout), clock, setid))
        return {"set": int(setid[0]), "clock": int(clock[0])}

    def stats(self):
        """This client's counters as a dict (wait_s, requests, retries,
        bytes_out, bytes_in, dropped, bytes_out_raw, bytes_in_raw, encode_s,
        decode_s, restarts, pushes_acked, redirects, slot_redirects,
        slot_epoch)."""
        self._check()
        s = ffi.new("zeps_client_stats *")
        lib.zeps_client_get_stats(self._c, s)
        return {f: getattr(s, f) for f, _ in ffi.typeof("zeps_client_stats").fields}

    def shard_stats_raw(self, shard):
        """Shard `shard`'s statistics as the protobuf-encoded zeps.ShardStats
        bytes (docs/protocol.md)."""
        self._check()
        buf = ffi.new("void **")
        n = ffi.new("size_t *")
        self._arm()
        self._call(lib.zeps_stats_raw(self._c, shard, buf, n))
        try:
            return bytes(ffi.buffer(buf[0], n[0]))
        finally:
            lib.free(buf[0])

    # -- a table read and written whole (SCAN, PUT) -----------------------------

    def scan(self, table, shard, cursor=0, max_count=0):
        """One page of `table` (a DenseTable or SparseTable of this client)
        on `shard`, from `cursor` (0: the first page; then each page's
        `next`, until it is 0), at most `max_count` rows or elements (0: as
        many as fit max_message_mb): a Page of numpy arrays, copied out of
        the received buffer. Rows come in the shard's storage order; a row
        there for the whole scan is in exactly one page (docs/python.md,
        "Saving and loading a model")."""
        self._check()
        page = ffi.new("zeps_page *")
        self._arm()
        self._call(lib.zeps_scan(self._c, table.handle, int(shard), int(cursor),
                                 int(max_count), page))
        try:
            return Page(page, getattr(table, "dim", None))
        finally:
            lib.zeps_page_release(page)

    def put_dense(self, table, values, state=None, offset=0, version=0):
        """Write elements [offset, offset + len(values)) of dense `table`:
        `values` and `state` ((k, len(values)) float32: the k floats of
        optimizer state per value its optimizer keeps; None when it keeps
        none). Each shard's slice takes version max(its version + 1,
        `version`). Applied at once, once (docs/protocol.md, PUT)."""
        self._check()
        v = _f32(values).reshape(-1)
        st, sp, k = None, ffi.NULL, 0
        if state is not None:
            st = np.ascontiguousarray(state, dtype=_F32).reshape(-1)
            if v.size == 0 or st.size % v.size:
                raise ValueError(f"state has {st.size} values, not k x {v.size}")
            k = st.size // v.size
            sp = ffi.from_buffer("float[]", st)
        vp = ffi.from_buffer("float[]", v)
        self._arm()
        self._call(lib.zeps_put_dense(self._c, table.handle, int(offset), v.size, k, vp, sp,
                                      int(version)))

    def put_rows(self, table, ids, values, state=None, versions=None, touches=None,
                 last_clock=None, version=0):
        """Write rows of sparse `table` by id (distinct; made if missing):
        `values` (n, dim), `state` (n, k, dim) float32 (the k floats of
        optimizer state per value its optimizer keeps; None when it keeps
        none), and per row its version (Adam's step count), touches and
        last clock (0, 1 and 0 by default). Each shard's table version
        becomes max(its version + 1, `version`)."""
        self._check()
        dim = table.dim
        ids = np.asarray(ids).reshape(-1)
        n = ids.size
        if n == 0:
            return
        vals = np.asarray(values, dtype=_F32).reshape(n, dim)
        st = np.zeros((n, 0, dim), _F32) if state is None else np.asarray(state, dtype=_F32)
        st = st.reshape(n, -1, dim)
        rec = np.zeros(n, _record_dtype(dim, st.shape[1]))
        rec["id"] = ids.astype(np.int64, copy=False).view(np.uint64) \
            if ids.dtype != np.uint64 else ids
        rec["values"], rec["state"] = vals, st
        rec["version"] = 0 if versions is None else np.asarray(versions).reshape(-1)
        rec["touches"] = 1 if touches is None else np.asarray(touches).reshape(-1)
        rec["last_clock"] = 0 if last_clock is None else np.asarray(last_clock).reshape(-1)
        p = ffi.from_buffer("char[]", rec)
        self._arm()
        self._call(lib.zeps_put_rows(self._c, table.handle, st.shape[1], p, n, int(version)))

    # -- tables ----------------------------------------------------------------

    def declare(self, name, length, optimizer="sgd", lr=0.01, *, momentum=0.0, beta1=0.0,
                beta2=0.0, eps=0.0, weight_decay=0.0, init=None, init_scale=0.0, seed=0,
                staleness=None, segments=None):
        """Declare a dense table of `length` float32 elements on every shard
        (idempotent with the same spec). `segments`: a list of (length,
        init, init_scale, seed) covering the table, each segment initialised
        as a table of its own would be (init, init_scale and seed then
        unused). Returns a DenseTable."""
        self._check()
        keep = []
        spec = ffi.new("zeps_table_spec *")
        for k, v in _spec_strings(keep, name=name, optimizer=optimizer, init=init).items():
            setattr(spec, k, v)
        spec.length = int(length)
        spec.lr, spec.momentum, spec.beta1, spec.beta2 = lr, momentum, beta1, beta2
        spec.eps, spec.weight_decay, spec.init_scale, spec.seed = eps, weight_decay, init_scale, seed
        if staleness is not None:
            spec.has_staleness, spec.staleness = 1, int(staleness)
        if segments:
            segs = ffi.new("zeps_init_segment[]", len(segments))
            for g, (n, kind, scale, sd) in zip(segs, segments):
                g.length, g.init_scale, g.seed = int(n), float(scale), int(sd)
                g.init = _spec_strings(keep, init=kind)["init"]
            keep.append(segs)
            spec.segments, spec.nsegments = segs, len(segments)
        h = ffi.new("uint32_t *")
        self._arm()
        self._call(lib.zeps_declare(self._c, spec, h))
        t = DenseTable(self, int(h[0]), name, int(length))
        t.lr = lr
        t.spec = dict(kind="dense", name=name, length=int(length), optimizer=optimizer, lr=lr,
                      momentum=momentum, beta1=beta1, beta2=beta2, eps=eps,
                      weight_decay=weight_decay, init=init, init_scale=init_scale, seed=seed,
                      staleness=staleness,
                      segments=[tuple(g) for g in segments] if segments else None)
        self._tables[name] = t
        return t

    def declare_sparse(self, name, dim, optimizer="adagrad", lr=0.01, *, beta1=0.0, beta2=0.0,
                       eps=0.0, weight_decay=0.0, l1=0.0, l2=0.0, ftrl_beta=0.0, init=None,
                       init_scale=0.0, seed=0, admit_count=0, admit_prob=0.0, ttl_clocks=0,
                       capacity_rows=0, memory_budget=0, evict=None, lead_cols=0,
                       lead_lr=0.0, lead_init=None, lead_init_scale=0.0, tier=False):
        """Declare a sparse table of rows of `dim` float32 keyed by uint64
        ids (docs/sparse.md); the first `lead_cols` values of each row take
        `lead_lr` and `lead_init` instead. With tier=True, rows evicted
        under capacity_rows or memory_budget (the hot budget) are kept in the
        shards' cold tier on disk (cluster.tier_dir) and come back exactly
        when touched; with memory_budget, half of it goes to the tier's
        RocksDB and half to the hot rows. Returns a SparseTable."""
        self._check()
        keep = []
        spec = ffi.new("zeps_sparse_spec *")
        for k, v in _spec_strings(keep, name=name, optimizer=optimizer, init=init,
                                  evict=evict, lead_init=lead_init).items():
            setattr(spec, k, v)
        spec.dim = int(dim)
        for k, v in dict(lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay,
                         l1=l1, l2=l2, ftrl_beta=ftrl_beta, init_scale=init_scale, seed=seed,
                         admit_count=admit_count, admit_prob=admit_prob, ttl_clocks=ttl_clocks,
                         capacity_rows=capacity_rows, memory_budget=memory_budget,
                         lead_cols=lead_cols, lead_lr=lead_lr,
                         lead_init_scale=lead_init_scale, tier=1 if tier else 0).items():
            setattr(spec, k, v)
        h = ffi.new("uint32_t *")
        self._arm()
        self._call(lib.zeps_declare_sparse(self._c, spec, h))
        t = SparseTable(self, int(h[0]), name, int(dim))
        t.lr = lr
        t.spec = dict(kind="sparse", name=name, dim=int(dim), optimizer=optimizer, lr=lr,
                      beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay, l1=l1, l2=l2,
                      ftrl_beta=ftrl_beta, init=init, init_scale=init_scale, seed=seed,
                      admit_count=admit_count, admit_prob=admit_prob, ttl_clocks=ttl_clocks,
                      capacity_rows=capacity_rows, memory_budget=memory_budget, evict=evict,
                      lead_cols=lead_cols, lead_lr=lead_lr, lead_init=lead_init,
                      lead_init_scale=lead_init_scale, tier=bool(tier))
        self._tables[name] = t
        return t
