"""Sparse tables from Python against real zeps-server processes."""
import numpy as np
import pytest

import zeps


def test_rows_made_on_first_touch_and_pushed(make_cluster):
    cl = make_cluster(servers=3)
    with cl.client(0) as c:
        e = c.declare_sparse("e", 4, optimizer="sgd", lr=0.5, init="constant", init_scale=1.0)
        ids = np.array([7, 2**63, 7, 2**64 - 1, 0], dtype=np.uint64)
        rows = e.pull(ids)
        assert rows.shape == (5, 4) and rows.dtype == np.float32
        np.testing.assert_array_equal(rows, np.ones((5, 4), np.float32))
        g = np.arange(20, dtype=np.float32).reshape(5, 4)
        e.push(ids, g)
        after = e.pull(ids)
        # repeated id 7: its two gradient rows are summed into one update
        np.testing.assert_array_equal(after[0], 1 - 0.5 * (g[0] + g[2]))
        np.testing.assert_array_equal(after[0], after[2])
        np.testing.assert_array_equal(after[1], 1 - 0.5 * g[1])
        np.testing.assert_array_equal(after[4], 1 - 0.5 * g[4])


def test_batch_reuse_and_out(make_cluster):
    cl = make_cluster(servers=2)
    with cl.client(0) as c:
        e = c.declare_sparse("e", 8, optimizer="adagrad", lr=0.1)
        b = e.batch([5, 6, 5, 9])
        assert len(b) == 4 and b.unique == 3
        out = np.empty((4, 8), np.float32)
        assert b.pull(out=out) is out
        for step in range(3):
            b.pull(clock=step, out=out)
            b.push(np.ones((4, 8), np.float32), clock=step)
        rows = b.pull(clock=3)
        assert np.all(rows < 0)
        np.testing.assert_array_equal(rows[0], rows[2])
        r = b.pull_async(clock=3)
        np.testing.assert_array_equal(r.wait(), rows)


@pytest.mark.parametrize("servers", [1, 3])
def test_batch_by_distinct_rows(make_cluster, servers):
    """positions, pull_unique and push_unique: the ids deduplicated once in
    libzeps; pull_unique()[positions] is pull(), and a push of the distinct
    rows' summed gradients leaves the same bits as a push per position."""
    cl = make_cluster(servers=servers)
    with cl.client(0) as c:
        a = c.declare_sparse("a", 4, optimizer="adagrad", lr=0.1, init="normal", seed=3)
        b = c.declare_sparse("b", 4, optimizer="adagrad", lr=0.1, init="normal", seed=3)
        rng = np.random.default_rng(5)
        ids = rng.integers(0, 40, size=300).astype(np.uint64)
        g = rng.standard_normal((300, 4)).astype(np.float32)
        ba, bb = a.batch(ids), b.batch(ids)
        pos = ba.positions
        assert pos.dtype == np.uint32 and pos.shape == (300,)
        assert ba.unique == len(np.unique(ids)) and pos.max() == ba.unique - 1
        # distinct rows in the order the ids first appear, on any shard count
        _, first = np.unique(pos, return_index=True)
        assert np.all(np.diff(first) > 0)
        rows = ba.pull_unique()
        assert rows.shape == (ba.unique, 4)
        np.testing.assert_array_equal(rows[pos], ba.pull())
        # the distinct rows hold distinct ids: every position of a row has its id
        for u in range(ba.unique):
            assert len(set(ids[pos == u].tolist())) == 1
        summed = np.zeros((ba.unique, 4), np.float32)
        for i in range(300):  # position order: the order libzeps sums in
            summed[pos[i]] += g[i]
        ba.push_unique(summed, clock=0)
        bb.push(g, clock=0)
        np.testing.assert_array_equal(a.pull(ids, clock=1), b.pull(ids, clock=1))
        with pytest.raises(ValueError, match="distinct rows need"):
            ba.push_unique(g)


def test_lead_columns(make_cluster):
    # an id's bias in the row of its embedding: column 0 takes lead_lr and
    # lead_init, the rest lr and init
    cl = make_cluster(servers=2)
    with cl.client(0) as c:
        e = c.declare_sparse("e", 3, optimizer="sgd", lr=0.5, init="constant", init_scale=1.0,
                             lead_cols=1, lead_lr=2.0, lead_init="zeros")
        ids = np.array([4, 11], dtype=np.uint64)
        np.testing.assert_array_equal(e.pull(ids), [[0, 1, 1], [0, 1, 1]])
        e.push(ids, np.ones((2, 3), np.float32))
        np.testing.assert_array_equal(e.pull(ids), [[-2, 0.5, 0.5], [-2, 0.5, 0.5]])
        with pytest.raises(zeps.errors.EINVAL, match="lead_cols = 4 must be at most dim = 3"):
            c.declare_sparse("f", 3, lead_cols=4, lead_lr=1.0)
