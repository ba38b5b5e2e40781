"""Dense tables from Python against real zeps-server processes."""
import gc
import threading
import time

import numpy as np
import pytest

import zeps


def test_push_pull_sgd_exact(make_cluster):
    cl = make_cluster(servers=2, workers=1)
    with cl.client(0) as c:
        assert (c.rank, c.num_shards, c.num_workers) == (0, 2, 1)
        assert c.consistency == {"mode": "async", "cuts": False, "rollback": False,
                                 "bound": False}
        w = c.declare("w", 1001, optimizer="sgd", lr=0.5)
        assert w.length == 1001
        np.testing.assert_array_equal(w.pull(clock=0), np.zeros(1001, np.float32))
        g = np.arange(1001, dtype=np.float32)
        w.push(g, clock=0)
        got = w.pull(clock=1)
        assert got.dtype == np.float32 and got.shape == (1001,)
        np.testing.assert_array_equal(got, -0.5 * g)
        # a range spanning both shards
        part = w.pull(clock=1, offset=400, count=300)
        np.testing.assert_array_equal(part, -0.5 * g[400:700])


def test_pull_into_out_without_copy(make_cluster):
    cl = make_cluster(servers=2)
    with cl.client(0) as c:
        w = c.declare("w", 64, optimizer="sgd", lr=1.0, init="constant", init_scale=2.0)
        out = np.full(64, -1.0, dtype=np.float32)
        got = w.pull(out=out)
        assert got is out
        np.testing.assert_array_equal(out, np.full(64, 2.0, np.float32))
        with pytest.raises(ValueError):
            w.pull(out=np.zeros(63, np.float32))
        with pytest.raises(ValueError):
            w.pull(out=np.zeros(64, np.float64))  # not float32: would need a copy


def test_async_requests_and_noncontiguous_push(make_cluster):
    cl = make_cluster(servers=2)
    with cl.client(0) as c:
        w = c.declare("w", 100, optimizer="sgd", lr=1.0)
        g = np.arange(200, dtype=np.float64)[::2]  # strided float64: pushed as a copy
        r1 = w.push_async(g)
        r1.wait()
        r2 = w.pull_async()
        np.testing.assert_array_equal(r2.wait(), -np.arange(0, 200, 2, dtype=np.float32))
        assert r2.done


def test_dropped_array_during_push(make_cluster):
    """The array of a non-blocking push is kept alive until its wait: drop
    every reference to it (and to the request), collect, and the push still
    applies exactly what the array held."""
    cl = make_cluster(servers=2)
    with cl.client(0) as c:
        w = c.declare("w", 1 << 20, optimizer="sgd", lr=1.0)
        for _ in range(3):
            g = np.full(1 << 20, 1.0, dtype=np.float32)
            w.push_async(g)  # request dropped at once
            del g
            gc.collect()
            junk = [np.full(1 << 20, 7.0, np.float32) for _ in range(4)]  # reuse freed memory
            del junk
        c.barrier()  # a blocking call; the pending pushes finish at close or in order
        np.testing.assert_array_equal(w.pull(), np.full(1 << 20, -3.0, np.float32))


def test_compression_and_stats(make_cluster):
    cl = make_cluster(servers=1)
    with cl.client(0) as c:
        w = c.declare("w", 1000, optimizer="sgd", lr=1.0)
        w.set_push_codec("topk", fraction=0.1, error_feedback=True)
        g = np.linspace(-1, 1, 1000, dtype=np.float32)
        w.push(g)
        s = c.stats()
        assert s["bytes_out_raw"] == 4000
        assert 800 <= s["bytes_out"] < 900  # 100 values and 100 u32 indices, and a header
        w.set_pull_codec("fp16")
        buf = np.zeros(1000, np.float32)
        w.pull_codec_reset()
        w.pull(out=buf)
        assert np.count_nonzero(buf) == 100  # the top 10 % were applied
        assert c.stats()["bytes_in"] > 0
        raw = c.shard_stats_raw(0)
        assert isinstance(raw, bytes) and len(raw) > 0


def test_gil_released_while_waiting(make_cluster):
    """A BSP pull parked for the next clock blocks in C; another Python
    thread keeps running meanwhile."""
    cl = make_cluster(servers=1, workers=2, consistency="bsp")
    with cl.client(0) as c0, cl.client(1) as c1:
        assert c0.consistency == {"mode": "bsp", "cuts": True, "rollback": True, "bound": False}
        w0 = c0.declare("w", 10, optimizer="sgd", lr=1.0)
        w1 = c1.declare("w", 10, optimizer="sgd", lr=1.0)
        w0.push(np.ones(10, np.float32), clock=0)
        ticks = []
        stop = threading.Event()

        def spin():
            while not stop.is_set():
                ticks.append(1)
                time.sleep(0.001)

        t = threading.Thread(target=spin)
        t.start()
        done = []
        waiter = threading.Thread(target=lambda: done.append(w0.pull(clock=1)))
        waiter.start()
        time.sleep(0.5)
        assert not done  # parked: rank 1 has not pushed clock 0
        n = len(ticks)
        assert n > 50  # the spinning thread ran while the pull waited
        w1.push(np.ones(10, np.float32), clock=0)
        waiter.join(10)
        stop.set()
        t.join()
        assert done and np.allclose(done[0], -1.0)


def test_push_clock_finishes_the_clock_on_every_shard(make_cluster):
    """push_clock_async: the push carries the clock to the shards it
    touches, and the others get a CLOCK: a 1-element table lives on shard 1
    only, yet after both workers' push_clock of clock 0 a pull at clock 1
    under ssp with bound 0 (it waits for every worker's clock 0 on every
    shard) is answered on both shards; the push is applied once."""
    import threading
    cl = make_cluster(servers=2, workers=2, consistency="ssp", extra="  staleness = 0;\n")
    c0, c1 = cl.client(0), cl.client(1)
    one = [c.declare("one", 1, optimizer="sgd", lr=1.0) for c in (c0, c1)]
    w = [c.declare("w", 8, optimizer="sgd", lr=1.0) for c in (c0, c1)]
    reqs = one[0].push_clock_async(np.ones(1, np.float32), 0)
    assert len(reqs) == 2  # the push (shard 1) and a CLOCK (shard 0)
    for r in reqs + one[1].push_clock_async(np.ones(1, np.float32), 0):
        r.wait()
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("w", w[1].pull(clock=1)), daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "a pull at clock 1 still waits: a shard missed a clock"
    assert one[0].pull(clock=1)[0] == -2.0  # both pushes, each applied once
    reqs = w[0].push_clock_async(np.ones(8, np.float32), 1)
    assert len(reqs) == 1  # touches both shards: the clock rides on each part
    for r in reqs:
        r.wait()
    c0.close()
    c1.close()
