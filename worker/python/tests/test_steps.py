"""Unequal step counts under bsp: a rank parked on a round that a worker
which finished all its steps will never join gets an error at once, naming
that worker and its last clock (docs/python.md, "Every rank the same number
of steps"); a worker that merely stopped is waited for as configured."""
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import zeps
from zeps import errors

# rank 1: two steps, then the end of its `with` block (done) or an
# exception out of it (not done: it may be replaced)
RANK1 = textwrap.dedent("""
    import sys, numpy as np, zeps
    eps, how = sys.argv[2:], sys.argv[1]
    with zeps.Client.from_endpoints(eps, 1, request_timeout_ms=2000) as c:
        w = c.declare("w", 4)
        for k in range(2):
            w.pull(clock=k)
            w.push(np.ones(4, np.float32), clock=k)
            c.clock(k)
        if how == "crash":
            raise RuntimeError("rank 1 fails")
""")


def run_rank1(cl, how):
    p = subprocess.run([sys.executable, "-c", RANK1, how] + cl.endpoints, capture_output=True,
                       text=True, env=dict(os.environ), timeout=60)
    return p.returncode


def three_steps(c):
    w = c.declare("w", 4)
    for k in range(3):
        w.pull(clock=k)
        w.push(np.ones(4, np.float32), clock=k)
        c.clock(k)
    return w


def test_finished_worker_ends_the_wait_at_once(make_cluster):
    cl = make_cluster(servers=2, workers=2, consistency="bsp")
    c = cl.client(0)
    import threading
    rc = []
    t = threading.Thread(target=lambda: rc.append(run_rank1(cl, "done")))
    t.start()
    w = three_steps(c)   # its clock 2 closes no round: rank 1 stops after clock 1
    t.join()
    assert rc == [0]
    t0 = time.monotonic()
    with pytest.raises(errors.ECLOCK) as ei:
        w.pull(clock=3)
    took = time.monotonic() - t0
    assert took < 1.0, took
    msg = ei.value.message
    assert "worker 1 finished all its steps at clock 2" in msg, msg
    assert "same number of steps" in msg and "docs/python.md" in msg, msg
    c.close(done=False)


def test_stopped_worker_is_waited_for(make_cluster):
    cl = make_cluster(servers=1, workers=2, consistency="bsp",
                      extra="  lost_worker_wait_s = 2;\n")
    c = cl.client(0)
    import threading
    rc = []
    t = threading.Thread(target=lambda: rc.append(run_rank1(cl, "crash")))
    t.start()
    w = three_steps(c)
    t.join()
    assert rc and rc[0] != 0
    t0 = time.monotonic()
    with pytest.raises(errors.ETIMEDOUT) as ei:
        w.pull(clock=3)
    # not at once: a replacement had lost_worker_wait_s to take rank 1
    assert time.monotonic() - t0 >= 1.5
    assert "worker 1 said BYE" in ei.value.message
    c.close(done=False)


def test_rank_sampler_gives_every_rank_the_same_steps():
    from zeps.data import RankSampler, steps_per_epoch
    n, world, bs = 1003, 4, 8
    assert steps_per_epoch(n, world, bs) == 31           # 250 per rank -> 31 batches
    for shuffle in (False, True):
        seen = []
        for r in range(world):
            s = RankSampler(n, r, world, bs, shuffle=shuffle, seed=5)
            s.set_epoch(3)
            idx = s.indices()
            assert len(s) == len(idx) == 31 * 8
            assert s.batches().shape == (31, 8)
            assert list(s) == idx.tolist()
            seen.append(idx)
        allidx = np.concatenate(seen)
        assert len(np.unique(allidx)) == len(allidx)     # disjoint
        assert allidx.min() >= 0 and allidx.max() < n
    a = RankSampler(n, 0, world, bs, shuffle=True, seed=5)
    b = RankSampler(n, 0, world, bs, shuffle=True, seed=5)
    b.set_epoch(1)
    assert not np.array_equal(a.indices(), b.indices())  # each epoch its own order
    with pytest.raises(ValueError):
        RankSampler(n, 4, world, bs)


def test_forgotten_set_clock_is_an_error(make_cluster):
    """A step whose embedding pushes carry an older step's clock (no
    zt.set_clock) is refused with ECLOCK naming the fix, where the shards
    used to drop those pushes silently: the rows stopped learning."""
    torch = pytest.importorskip("torch")
    import zeps.torch as zt
    cl = make_cluster(servers=2, workers=1, consistency="bsp")
    c = cl.client(0)
    emb = zt.Embedding(c.declare_sparse("emb", 4, optimizer="sgd", lr=1.0, init="zeros"))
    ids = torch.tensor([1, 2, 3])
    emb(ids).sum().backward()      # step 0 at clock 0
    zt.flush(emb)
    c.clock(0)
    with pytest.raises(errors.ECLOCK) as ei:
        emb(ids).sum().backward()  # step 1, its clock still 0
        zt.flush(emb)
    msg = ei.value.message
    assert "already finished" in msg and "zt.set_clock" in msg, msg
    zt.set_clock(emb, 1)           # the same step with its clock: applied
    emb(ids).sum().backward()
    zt.flush(emb)
    c.clock(1)
    zt.set_clock(emb, 2)
    assert np.allclose(emb(ids).detach().numpy(), -2.0)  # two sgd steps of 1
    c.close()


def test_a_wait_for_a_worker_that_never_joined_is_said_in_the_worker_log(make_cluster):
    """A pull parked for a worker that never said HELLO waits without a bound
    (a scheduler may start workers minutes apart), but not in silence where
    its user looks: after 10 s libzeps logs what its shard says it waits
    for, from the PARKED reply to a retry."""
    import selectors
    cl = make_cluster(servers=2, workers=2, consistency="bsp")
    code = textwrap.dedent("""
        import sys, numpy as np, zeps
        with zeps.Client.from_endpoints(sys.argv[1:], 0) as c:
            w = c.declare("w", 4)
            w.pull(clock=0)
            w.push(np.ones(4, np.float32), clock=0)
            c.clock(0)
            w.pull(clock=1)  # round 0 waits for rank 1, which never comes
    """)
    p = subprocess.Popen([sys.executable, "-c", code] + cl.endpoints, stderr=subprocess.PIPE,
                         text=True, env=dict(os.environ))
    sel = selectors.DefaultSelector()
    sel.register(p.stderr, selectors.EVENT_READ)
    said, deadline = "", time.monotonic() + 90
    try:
        while "never joined" not in said and time.monotonic() < deadline:
            if sel.select(timeout=1.0):
                line = p.stderr.readline()
                if not line:
                    break
                said += line
    finally:
        p.kill()
        p.wait()
    assert "PULL to shard" in said and "has waited" in said, said
    assert "waits for worker(s) 1 (never joined)" in said, said
