"""Checkpoints from Python: Client.snapshot() takes a snapshot of the whole
cluster and returns once every shard wrote it; a shard restarted from it
holds what was pushed before it (async: a point in time; bsp: the cut);
without a snapshot_dir it is a clear error."""
import os
import time

import numpy as np
import pytest

from zeps import errors


def test_snapshot_async_then_restart(make_cluster):
    snap = os.path.join(str(make_cluster.tmp), "snap-async")
    cl = make_cluster(servers=2, workers=1, extra=f'  snapshot_dir = "{snap}";\n')
    c = cl.client(0)
    w = c.declare("w", 8, optimizer="sgd", lr=1.0)
    c.declare("bounded", 4, staleness=3)  # a table's own ssp bound is part of its spec
    w.push(np.ones(8, np.float32))
    got = c.snapshot(timeout=30)
    assert got["clock"] == -1 and got["set"] > 0
    sets = [d for d in os.listdir(snap) if d.startswith("set-")]
    assert f"set-{got['set']:016x}" in sets
    w.push(np.ones(8, np.float32))          # after the snapshot: lost by the restart below
    c.close(done=False)
    for p in cl.procs:
        p.kill()
        p.wait()
    cl.procs = []
    cl2 = make_cluster(servers=2, workers=1, extra=f'  snapshot_dir = "{snap}";\n')
    for k in range(2):
        assert f"restored snapshot set {got['set']:016x}" in cl2.log(k)
    with cl2.client(0) as c2:
        w2 = c2.declare("w", 8, optimizer="sgd", lr=1.0)
        assert np.array_equal(w2.pull(), -np.ones(8, np.float32))
        c2.declare("bounded", 4, staleness=3)  # restored with its bound: the same spec
        with pytest.raises(errors.ECONFLICT):
            c2.declare("bounded", 4, staleness=4)


def test_snapshot_bsp_cut(make_cluster):
    snap = os.path.join(str(make_cluster.tmp), "snap-bsp")
    cl = make_cluster(servers=2, workers=1, consistency="bsp",
                      extra=f'  snapshot_dir = "{snap}";\n')
    with cl.client(0) as c:
        w = c.declare("w", 4, optimizer="sgd", lr=0.5)
        b = c.declare("b", 1, optimizer="sgd", lr=0.5)  # an empty slice on shard 0
        for k in range(3):
            w.pull(clock=k)
            w.push(np.ones(4, np.float32), clock=k)
            b.push(np.ones(1, np.float32), clock=k)
            c.clock(k)
        t0 = time.monotonic()
        got = c.snapshot(timeout=30)
        assert got["clock"] == 3 and got["set"] == 3
        assert time.monotonic() - t0 < 10  # the empty slice does not hold the cut at 0
        for k in range(2):
            assert "snapshot set 0000000000000003" in cl.log(k)


def test_a_failed_writer_ends_the_take_at_once(make_cluster):
    """A shard whose writer fails (here a file where the set's folder goes)
    makes the take fail at once with EIO naming it, instead of waiting out
    the timeout for a file that will never come."""
    snap = os.path.join(str(make_cluster.tmp), "snap-fail")
    cl = make_cluster(servers=2, workers=1, consistency="bsp",
                      extra=f'  snapshot_dir = "{snap}";\n')
    with cl.client(0) as c:
        w = c.declare("w", 4, optimizer="sgd", lr=0.5)
        for k in range(2):
            w.pull(clock=k)
            w.push(np.ones(4, np.float32), clock=k)
            c.clock(k)
        os.makedirs(snap, exist_ok=True)
        with open(os.path.join(snap, "set-%016x" % 2), "w") as f:
            f.write("in the way\n")  # the writers cannot make set 2's folder
        t0 = time.monotonic()
        with pytest.raises(errors.EIO) as ei:
            c.snapshot(timeout=60)
        assert time.monotonic() - t0 < 20
        assert "writer failed" in ei.value.message, ei.value.message
        raw = c.shard_stats_raw(0)
        assert raw  # the shard still serves


def test_snapshot_without_dir_is_an_error(make_cluster):
    cl = make_cluster(servers=1, workers=1)
    with cl.client(0) as c:
        c.declare("w", 4)
        t0 = time.monotonic()
        with pytest.raises(errors.ESTATE) as ei:
            c.snapshot(timeout=10)
        assert time.monotonic() - t0 < 5
        assert "snapshot_dir" in ei.value.message
        for bad in (0, -1.0):
            with pytest.raises(errors.EINVAL):
                c.snapshot(timeout=bad)
