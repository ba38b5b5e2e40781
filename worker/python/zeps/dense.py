"""Dense tables (DenseTable) and SCAN pages (Page)."""
import numpy as np

from ._native import ffi, lib
from ._common import _F32, _f32, _codec_opts, _record_dtype, _set_lr
from .request import _ViewRequest


class Page:
    """One SCAN page (Client.scan), its arrays copied out of the reply:
    `count`, `offset` (dense: its first element), `next` (the cursor of the
    shard's next page; 0: the last), `version` (the table's on that shard),
    `state_per_value` (k). Dense: `values` (count,), `state` (k, count).
    Sparse: `records` (the row records) and, as views of them, `ids`,
    `versions`, `touches`, `last_clock`, `values` (count, dim), `state`
    (count, k, dim)."""

    def __init__(self, p, dim=None):
        self.count, self.offset, self.next = int(p.count), int(p.offset), int(p.next)
        self.version, self.state_per_value = int(p.version), int(p.state_per_value)
        k, n = self.state_per_value, self.count
        raw = (np.frombuffer(ffi.buffer(p.data, p.bytes), dtype=np.uint8).copy() if p.bytes
               else np.zeros(0, np.uint8))
        if dim is not None:  # a sparse table's
            self.records = raw.view(_record_dtype(dim, k))
            r = self.records
            self.ids, self.versions, self.touches = r["id"], r["version"], r["touches"]
            self.last_clock, self.values, self.state = r["last_clock"], r["values"], r["state"]
        else:
            f = raw.view(_F32)
            self.values, self.state = f[:n], f[n:].reshape(k, n)


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
