"""Client, tables, sparse batches and non-blocking requests over libzeps.

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

_F32 = np.dtype(np.float32)
_U64 = np.dtype(np.uint64)


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


def _f32(a, writable=False):
    """`a` as a C-contiguous float32 array: itself when it already is."""
    arr = np.asarray(a)
    if arr.dtype == _F32 and arr.flags.c_contiguous and (arr.flags.writeable or not writable):
        return arr
    if writable:
        raise ValueError("out must be a writable, C-contiguous float32 array")
    return np.ascontiguousarray(arr, dtype=_F32)


def _spec_strings(keep, **fields):
    """cffi char* fields from str values; `keep` holds the buffers alive."""
    out = {}
    for k, v in fields.items():
        if v is None:
            out[k] = ffi.NULL
        else:
            b = ffi.new("char[]", str(v).encode())
            keep.append(b)
            out[k] = b
    return out


class Request:
    """A non-blocking pull, push or clock in flight; `wait()` finishes it.

    It holds the arrays the request reads or writes until wait returns."""

    __slots__ = ("_client", "_pp", "_keep", "_result", "_done")

    def __init__(self, client, keep, result=None):
        self._client = client
        self._pp = ffi.new("zeps_req **")
        self._keep = keep
        self._result = result
        self._done = False

    def wait(self):
        """Wait for every shard's reply (retrying as configured). Returns the
        pulled array for pulls (a View for view pulls), None otherwise.
        Raises zeps.Error."""
        if self._done:
            return self._result
        c = self._client
        lib._zp_py_arm()  # the SIGINT chain, re-armed if replaced (Client._arm)
        rc = self._finish()
        self._done = True
        c._pending.discard(self)
        self._keep = None
        if rc != 0:
            c._raise(rc)
        return self._result

    @property
    def done(self):
        return self._done

    def _give_up(self):
        """Finish the request with the client's interrupt flag set: libzeps
        gives up at once and frees it. Its result is lost; wait() returns
        None from here."""
        self._finish()
        self._done = True
        self._client._pending.discard(self)
        self._keep = None
        self._result = None

    def _finish(self):
        return lib.zeps_wait(self._pp)


class _ViewRequest(Request):
    """A view pull in flight: its wait() gives a View."""

    __slots__ = ()

    def _finish(self):
        vp = ffi.new("zeps_view **")
        rc = lib.zeps_wait_view(self._pp, vp)
        if rc == 0:
            self._result = View(vp[0])
        return rc


class _ViewBuffers:
    """Owns one zeps_view: the buffers go back to libzeps
    (zeps_view_release) when the last reference to this goes, the View's
    or an array's. A view needs no client: it may outlive Client.close()."""

    __slots__ = ("_v", "__weakref__")

    def __init__(self, v):
        self._v = v

    def __del__(self):
        if self._v is not None:
            lib.zeps_view_release(ffi.new("zeps_view **", self._v))
            self._v = None


class _Part:
    """One part's memory as numpy takes it (__array_interface__, read-only):
    the array made from it keeps this as its base, and this keeps the
    buffers."""

    __slots__ = ("__array_interface__", "_bufs")

    def __init__(self, bufs, ptr, n):
        self._bufs = bufs
        self.__array_interface__ = {"data": (int(ffi.cast("uintptr_t", ptr)), True),
                                    "shape": (n,), "typestr": "<f4", "version": 3}


class View:
    """What a view pull brought, where ZeroMQ received it: `parts`, one
    (offset, array) per shard the range touched, in element order, each a
    read-only float32 array over the received buffer, nothing copied.

    Lifetime: every array taken from the view holds the buffers, so none
    can show freed memory. release() (or the end of a ``with`` block, or
    garbage collection) drops the view's own hold: the buffers go back at
    once if no array is left, else when the last one is collected."""

    __slots__ = ("_bufs", "_parts")

    def __init__(self, v):
        bufs = _ViewBuffers(v)  # owns v from here, whatever follows
        off, cnt = ffi.new("uint64_t *"), ffi.new("uint64_t *")
        parts = []
        for i in range(lib.zeps_view_parts(v)):
            p = lib.zeps_view_part(v, i, off, cnt)
            parts.append((int(off[0]), np.asarray(_Part(bufs, p, int(cnt[0])))))
        self._bufs, self._parts = bufs, tuple(parts)

    @property
    def parts(self):
        """((offset, array), ...): the values of each part, read-only."""
        if self._parts is None:
            raise ValueError("the view was released")
        return self._parts

    @property
    def contiguous(self):
        """True when the range came in one part (array() copies nothing)."""
        return len(self.parts) <= 1

    def array(self):
        """The whole range as one array: the only part itself (read-only,
        not copied) when it lay on one shard, else a new array the parts are
        copied into (a range over several shards is not contiguous in
        memory)."""
        parts = self.parts
        if len(parts) == 1:
            return parts[0][1]
        return np.concatenate([a for _, a in parts])

    def release(self):
        """Drop the view's hold on the buffers (see the class). Idempotent."""
        self._parts = self._bufs = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


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
            return Page(page, table)
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
        when touched. Returns a SparseTable."""
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


def _let_signal_handlers_run():
    """A Python-level call and loop: the interpreter checks for pending
    signals here and runs their handlers."""
    for _ in range(2):
        pass


def lib_code(name):
    """The number of zeps error `name` ("ECLOSED")."""
    from . import errors
    return getattr(errors, name).code


def _codec_opts(keep, codec, fraction, count, block, error_feedback, seed):
    o = ffi.new("zeps_codec_opts *")
    o.codec = _spec_strings(keep, c=codec)["c"]
    o.fraction, o.count, o.block = fraction, count, block
    o.error_feedback, o.seed = int(bool(error_feedback)), seed
    return o


def _record_dtype(dim, k):
    """A sparse row record of SCAN pages and PUT (zeps.h, ZEPS_ROW_RECORD_BYTES;
    the rows of a snapshot file): id, version, touches, last clock, values,
    k blocks of optimizer state; little-endian, packed."""
    return np.dtype([("id", "<u8"), ("version", "<u4"), ("touches", "<u4"),
                     ("last_clock", "<i8"), ("values", "<f4", (dim,)),
                     ("state", "<f4", (k, dim))])


class Page:
    """One SCAN page (Client.scan), its arrays copied out of the reply:
    `count`, `offset` (dense: its first element), `next` (the cursor of the
    shard's next page; 0: the last), `version` (the table's on that shard),
    `state_per_value` (k). Dense: `values` (count,), `state` (k, count).
    Sparse: `records` (the row records) and, as views of them, `ids`,
    `versions`, `touches`, `last_clock`, `values` (count, dim), `state`
    (count, k, dim)."""

    def __init__(self, p, table):
        self.count, self.offset, self.next = int(p.count), int(p.offset), int(p.next)
        self.version, self.state_per_value = int(p.version), int(p.state_per_value)
        k, n = self.state_per_value, self.count
        raw = (np.frombuffer(ffi.buffer(p.data, p.bytes), dtype=np.uint8).copy() if p.bytes
               else np.zeros(0, np.uint8))
        if isinstance(table, SparseTable):
            self.records = raw.view(_record_dtype(table.dim, k))
            r = self.records
            self.ids, self.versions, self.touches = r["id"], r["version"], r["touches"]
            self.last_clock, self.values, self.state = r["last_clock"], r["values"], r["state"]
        else:
            f = raw.view(_F32)
            self.values, self.state = f[:n], f[n:].reshape(k, n)


def _set_lr(table, lr):
    c = table.client
    c._check()
    c._arm()
    c._call(lib.zeps_set_lr(c._c, table.handle, float(lr)))
    table.lr = float(lr)


class DenseTable:
    """A dense table: a float32 vector sliced over the shards."""

    def __init__(self, client, handle, name, length):
        self.client, self.handle, self.name, self.length = client, handle, name, length
        self.lr = None  # the lr in force as this client last set or declared it

    def __repr__(self):
        return f"<zeps.DenseTable {self.name!r} length={self.length}>"

    def set_lr(self, lr):
        """Make `lr` this table's learning rate on every shard from now on
        (kept in snapshots; docs/python.md, "Learning-rate schedules");
        `lr` (the attribute) follows."""
        _set_lr(self, lr)

    def export(self, max_count=0):
        """The whole table as every shard holds it now, read page by page
        (SCAN): {"values": (length,) float32, "state": (k, length) float32
        (the optimizer's state per value), "version": the largest slice
        version (Adam's step count)}. Take it with no push in flight: pages
        are read one after another, not at one instant."""
        c = self.client
        values, state, version = np.empty(self.length, _F32), None, 0
        for shard in range(c.num_shards):
            cursor = 0
            while True:
                p = c.scan(self, shard, cursor, max_count)
                if state is None:
                    state = np.empty((p.state_per_value, self.length), _F32)
                values[p.offset:p.offset + p.count] = p.values
                state[:, p.offset:p.offset + p.count] = p.state
                version = max(version, p.version)
                cursor = p.next
                if cursor == 0:
                    break
        return {"values": values, "state": state, "version": version}

    def load(self, exported):
        """Write what export() gave (into this cluster or another of any
        shard count): values, optimizer state and version (PUT)."""
        self.client.put_dense(self, exported["values"], exported["state"], 0,
                              exported.get("version", 0))

    def _range(self, offset, count):
        if count is None:
            count = self.length - offset
        if offset < 0 or count < 0 or offset + count > self.length:
            raise ValueError(f"range [{offset}, {offset + count}) outside table {self.name!r} "
                             f"of {self.length} elements")
        return offset, count

    def _out(self, out, count):
        if out is None:
            return np.empty(count, dtype=_F32)
        out = _f32(out, writable=True)
        if out.size != count:
            raise ValueError(f"out has {out.size} elements, the pull brings {count}")
        return out

    def pull_async(self, clock=0, out=None, offset=0, count=None):
        """Start pulling [offset, offset + count) as seen at `clock` into
        `out` (or a new array); returns a Request whose wait() gives it."""
        c = self.client
        c._check()
        offset, count = self._range(offset, count)
        out = self._out(out, count)
        p = ffi.from_buffer("float[]", out, require_writable=True)
        r = c._start((out, p), out)
        c._call(lib.zeps_pull_start(c._c, self.handle, p, offset, count, clock, r._pp))
        return r

    def pull(self, clock=0, out=None, offset=0, count=None):
        """Pull [offset, offset + count) (the whole table by default) as seen
        at `clock`; fills `out` without an extra copy when given."""
        return self.pull_async(clock, out, offset, count).wait()

    def pull_view_async(self, clock=0, offset=0, count=None):
        """Start a view pull of [offset, offset + count) as seen at `clock`;
        returns a Request whose wait() gives a View."""
        c = self.client
        c._check()
        offset, count = self._range(offset, count)
        r = _ViewRequest(c, None)
        c._pending.add(r)
        c._call(lib.zeps_pull_view_start(c._c, self.handle, offset, count, clock, r._pp))
        return r

    def pull_view(self, clock=0, offset=0, count=None):
        """Pull [offset, offset + count) (the whole table by default) as seen
        at `clock` without copying: a View whose read-only arrays lie in
        the received buffers (docs/python.md, views)."""
        return self.pull_view_async(clock, offset, count).wait()

    def push_async(self, grad, clock=0, offset=0):
        """Start pushing `grad` for [offset, offset + len(grad)) computed at
        `clock`; the array is kept alive until the Request's wait()."""
        c = self.client
        c._check()
        g = _f32(grad).reshape(-1)
        offset, count = self._range(offset, g.size)
        p = ffi.from_buffer("float[]", g)
        r = c._start((g, p))
        c._call(lib.zeps_push_start(c._c, self.handle, p, offset, count, clock, r._pp))
        return r

    def push(self, grad, clock=0, offset=0):
        """Push `grad` computed at `clock` and wait for every shard."""
        self.push_async(grad, clock, offset).wait()

    def push_clock_async(self, grad, clock, offset=0):
        """A step's last push and the end of its `clock` in one
        (zeps_push_clock_start): each shard's part carries the clock, and
        shards the range does not touch get a CLOCK. Returns the Requests
        to wait for (one or two); push nothing more for this clock."""
        c = self.client
        c._check()
        g = _f32(grad).reshape(-1)
        offset, count = self._range(offset, g.size)
        p = ffi.from_buffer("float[]", g)
        r, rest = c._start((g, p)), c._start(None)
        c._call(lib.zeps_push_clock_start(c._c, self.handle, p, offset, count, clock, r._pp,
                                          rest._pp))
        if rest._pp[0] == ffi.NULL:  # every shard had a part: no CLOCK alone
            rest._done = True
            c._pending.discard(rest)
            return [r]
        return [r, rest]

    def set_push_codec(self, codec, *, fraction=0.0, count=0, block=0, error_feedback=True,
                       seed=0):
        """Compress this table's pushes ("none", "fp16", "bf16", "int8",
        "sign", "topk", "randk"), with error feedback by default."""
        keep = []
        o = _codec_opts(keep, codec, fraction, count, block, error_feedback, seed)
        self.client._call(lib.zeps_set_push_codec(self.client._c, self.handle, o))

    def set_pull_codec(self, codec, *, fraction=0.0, count=0, block=0, seed=0):
        """Pull the whole table as compressed deltas (docs/compression.md:
        the `out` buffer must keep what the previous pull left in it);
        codec None turns it off."""
        if codec is None:
            self.client._call(lib.zeps_set_pull_codec(self.client._c, self.handle, ffi.NULL))
            return
        keep = []
        o = _codec_opts(keep, codec, fraction, count, block, False, seed)
        self.client._call(lib.zeps_set_pull_codec(self.client._c, self.handle, o))

    def pull_codec_reset(self):
        self.client._call(lib.zeps_pull_codec_reset(self.client._c, self.handle))

    def pulled_version(self, shard):
        """The version of this table's slice on `shard` the last pull read."""
        return int(lib.zeps_pulled_version(self.client._c, self.handle, shard))


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
            ids = np.ascontiguousarray(ids, dtype=_U64).reshape(-1)
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
