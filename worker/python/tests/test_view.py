"""View pulls from Python (DenseTable.pull_view): arrays over the buffers
ZeroMQ received, not copies, that keep those buffers alive."""
import gc
import weakref

import numpy as np
import pytest

import zeps
from zeps._native import ffi, lib


def addr(a):
    return a.__array_interface__["data"][0]


def part_addr(view, i):
    """Where libzeps says part i of the view's C zeps_view lies."""
    return int(ffi.cast("uintptr_t", lib.zeps_view_part(view._bufs._v, i, ffi.NULL, ffi.NULL)))


def test_view_is_the_received_buffer(make_cluster):
    cl = make_cluster(servers=1)
    with cl.client(0) as c:
        w = c.declare("w", 5000, optimizer="sgd", lr=0.5, init="normal", init_scale=1.0, seed=7)
        w.push(np.linspace(-3, 3, 5000, dtype=np.float32))
        copied = w.pull(clock=1)
        with w.pull_view(clock=1) as v:
            assert v.contiguous and len(v.parts) == 1
            off, a = v.parts[0]
            assert off == 0 and a.dtype == np.float32 and a.shape == (5000,)
            # not a copy: the array's memory is the frame libzeps holds
            assert addr(a) == part_addr(v, 0)
            assert not a.flags.owndata and not a.flags.writeable
            assert v.array() is a
            # the same bits as the copying pull
            assert a.tobytes() == copied.tobytes()
            with pytest.raises(ValueError):
                a[0] = 1.0
            with pytest.raises(ValueError):
                a.flags.writeable = True


def test_view_over_shards_has_a_part_per_shard(make_cluster):
    cl = make_cluster(servers=3)
    with cl.client(0) as c:
        w = c.declare("w", 1000, optimizer="sgd", lr=1.0, init="uniform", init_scale=1.0, seed=3)
        full = w.pull()
        v = w.pull_view()
        assert [off for off, _ in v.parts] == [0, 333, 666]
        for k, (off, a) in enumerate(v.parts):
            assert addr(a) == part_addr(v, k)
            assert a.tobytes() == full[off:off + a.size].tobytes()
        assert not v.contiguous
        whole = v.array()  # three parts: copied into one array
        assert whole.flags.owndata and whole.tobytes() == full.tobytes()
        # a range inside one shard comes in one part
        inner = w.pull_view(offset=400, count=200)
        assert inner.contiguous and inner.parts[0][0] == 400
        assert inner.array().tobytes() == full[400:600].tobytes()
        v.release()
        inner.release()


def test_view_lifetime_follows_its_arrays(make_cluster):
    cl = make_cluster(servers=1)
    with cl.client(0) as c:
        w = c.declare("w", 256, optimizer="sgd", lr=1.0, init="constant", init_scale=2.0)
        # released at once when no array was taken
        v = w.pull_view()
        bufs = weakref.ref(v._bufs)
        v.release()
        assert bufs() is None
        with pytest.raises(ValueError):
            v.parts
        v.release()  # idempotent
        # collected with the view
        v = w.pull_view()
        bufs = weakref.ref(v._bufs)
        del v
        gc.collect()
        assert bufs() is None
        # an array taken from the view keeps the buffers past release ...
        with w.pull_view() as v:
            a = v.array()
            bufs = weakref.ref(v._bufs)
        assert bufs() is not None
        w.push(np.ones(256, np.float32))  # the table changes; the received bytes do not
        gc.collect()
        np.testing.assert_array_equal(a, np.full(256, 2.0, np.float32))
        b = a[10:20]  # a slice holds them too
        del a
        gc.collect()
        assert bufs() is not None
        np.testing.assert_array_equal(b, np.full(10, 2.0, np.float32))
        del b
        gc.collect()
        assert bufs() is None  # ... and they go back with the last one
        np.testing.assert_array_equal(w.pull_view().array(), np.full(256, 1.0, np.float32))


def test_view_async_and_after_close(make_cluster):
    cl = make_cluster(servers=2)
    c = cl.client(0)
    w = c.declare("w", 100, optimizer="sgd", lr=1.0, init="constant", init_scale=0.5)
    with pytest.raises(ValueError):
        w.pull_view(offset=50, count=51)
    r = w.pull_view_async(clock=0)
    v = r.wait()
    assert isinstance(v, zeps.View) and r.done and r.wait() is v
    parts = [a for _, a in v.parts]
    pending = w.pull_view_async()  # never waited for: close() finishes it
    c.close()
    for a in parts:  # the buffers belong to the view, not the client
        np.testing.assert_array_equal(a, np.full(a.size, 0.5, np.float32))
    assert pending.done
    with pytest.raises(zeps.errors.ECLOSED):
        w.pull_view()
