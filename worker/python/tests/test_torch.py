"""zeps.torch against real servers: Embedding / EmbeddingBag autograd equal
to torch's own modules, and DenseParameters."""
import numpy as np
import pytest
import torch
from torch import nn

import zeps
import zeps.torch as zt


def _reference_embedding(rows_by_id, ids, dim):
    ref = nn.Embedding(len(rows_by_id), dim)
    index = {i: k for k, i in enumerate(rows_by_id)}
    with torch.no_grad():
        for i, k in index.items():
            ref.weight[k] = torch.from_numpy(rows_by_id[i])
    mapped = torch.tensor([[index[int(i)] for i in row] for row in ids.tolist()])
    return ref, index, mapped


def test_embedding_grad_equals_nn_embedding(make_cluster):
    cl = make_cluster(servers=2)
    with cl.client(0) as c:
        table = c.declare_sparse("emb", 6, optimizer="sgd", lr=1.0, init="normal",
                                 init_scale=0.5, seed=3)
        emb = zt.Embedding(table)
        ids = torch.tensor([[3, 9, 3], [2 ** 40, 9, 1]], dtype=torch.int64)
        uniq = sorted(set(ids.reshape(-1).tolist()))
        before = table.pull(np.array(uniq, np.uint64))
        rows_by_id = {i: before[k].copy() for k, i in enumerate(uniq)}
        ref, index, mapped = _reference_embedding(rows_by_id, ids, 6)
        w = torch.randn(2, 3, 6, generator=torch.Generator().manual_seed(0))

        out = emb(ids)
        np.testing.assert_array_equal(out.detach().numpy(), ref(mapped).detach().numpy())
        (out * w).sum().backward()
        (ref(mapped) * w).sum().backward()
        assert len(emb._pushes) == 1          # backward started the push...
        zt.flush(emb)                         # ...flush waits for its reply
        assert emb._pushes == []
        # sgd, lr 1: the row moved by exactly minus its gradient
        after = table.pull(np.array(uniq, np.uint64))
        for k, i in enumerate(uniq):
            np.testing.assert_allclose(before[k] - after[k], ref.weight.grad[index[i]].numpy(),
                                       rtol=1e-6, atol=1e-6)


def test_positions_tensor_keeps_its_batch(make_cluster):
    """The index tensor a forward makes lies in its batch's own positions
    array (no copy) and holds the batch: with every other reference to the
    batch dropped and later batches made (libzeps reuses a freed batch's
    memory for the next one), it still reads its own positions."""
    import gc
    cl = make_cluster(servers=1, workers=1)
    with cl.client(0) as c:
        emb = zt.Embedding(c.declare_sparse("emb", 2, optimizer="sgd", lr=0.1))
        batch, inverse, rows = emb._pull(torch.tensor([5, 7, 5, 9, 7, 5]), 0, True)
        del batch, rows
        gc.collect()
        for k in range(20):  # as many ids, all distinct: 0..5 if the memory were reused
            emb._pull(torch.arange(6) + 100 * (k + 1), 0, True)
        gc.collect()
        assert inverse.tolist() == [0, 1, 0, 2, 1, 0]
        assert inverse.dtype == torch.int32

@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_grad(make_cluster, mode):
    cl = make_cluster(servers=3)
    with cl.client(0) as c:
        table = c.declare_sparse("bag", 4, optimizer="sgd", lr=1.0, init="uniform",
                                 init_scale=1.0, seed=5)
        bag = zt.EmbeddingBag(table, mode=mode)
        ids = torch.tensor([[1, 2, 2, 7], [7, 8, 1, 1]], dtype=torch.int64)
        uniq = sorted(set(ids.reshape(-1).tolist()))
        before = table.pull(np.array(uniq, np.uint64))
        rows_by_id = {i: before[k].copy() for k, i in enumerate(uniq)}
        index = {i: k for k, i in enumerate(uniq)}
        ref = nn.EmbeddingBag(len(uniq), 4, mode=mode)
        with torch.no_grad():
            ref.weight.copy_(torch.from_numpy(before))
        mapped = torch.tensor([[index[int(i)] for i in r] for r in ids.tolist()])
        out = bag(ids)
        np.testing.assert_allclose(out.detach().numpy(), ref(mapped).detach().numpy(), rtol=1e-6)
        out.pow(2).sum().backward()
        ref(mapped).pow(2).sum().backward()
        after = table.pull(np.array(uniq, np.uint64))
        np.testing.assert_allclose(before - after, ref.weight.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_embedding_bag_per_sample_weights(make_cluster):
    """per_sample_weights scale each id's row, forward and backward, as
    torch's nn.EmbeddingBag does (mode "sum")."""
    cl = make_cluster(servers=2)
    with cl.client(0) as c:
        table = c.declare_sparse("bagw", 4, optimizer="sgd", lr=1.0, init="uniform",
                                 init_scale=1.0, seed=6)
        bag = zt.EmbeddingBag(table, mode="sum")
        ids = torch.tensor([[1, 2, 2], [7, 1, 9]], dtype=torch.int64)
        w = torch.tensor([[0.5, 2.0, -1.0], [1.5, 0.25, 3.0]])
        uniq = sorted(set(ids.reshape(-1).tolist()))
        before = table.pull(np.array(uniq, np.uint64))
        index = {i: k for k, i in enumerate(uniq)}
        ref = nn.EmbeddingBag(len(uniq), 4, mode="sum")
        with torch.no_grad():
            ref.weight.copy_(torch.from_numpy(before))
        mapped = torch.tensor([[index[int(i)] for i in r] for r in ids.tolist()])
        out = bag(ids, per_sample_weights=w)
        want = ref(mapped, per_sample_weights=w)
        np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-6)
        out.pow(2).sum().backward()
        want.pow(2).sum().backward()
        after = table.pull(np.array(uniq, np.uint64))
        np.testing.assert_allclose(before - after, ref.weight.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_float_ids_are_refused(make_cluster):
    """Ids must be integers, as torch's embeddings require: a float id would
    be truncated to another row."""
    cl = make_cluster(servers=1)
    with cl.client(0) as c:
        table = c.declare_sparse("fl", 4)
        with pytest.raises(TypeError, match="ids must be integers"):
            zt.Embedding(table)(torch.tensor([1.0, 2.5]))
        with pytest.raises(TypeError, match="ids must be integers"):
            table.pull(np.array([1.5]))
        assert table.pull([]).shape == (0, 4)
        assert table.pull([-1]).shape == (1, 4)  # two's complement, as documented


def _accumulated_weights(c, prefix, micro, flat, last_inside, base):
    """Three sgd steps of a 3-4-1 MLP on 64 examples, each step's gradient
    summed over `micro` micro-batches (every backward but the last inside
    no_sync(), or all of them with `last_inside`)."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    d = zt.DenseParameters(c, m, optimizer="sgd", lr=0.1, prefix=prefix, flat=flat,
                           groups=[{"params": m[0].parameters(), "lr": 0.05}])
    x = torch.randn(64, 3, generator=torch.Generator().manual_seed(1))
    y = x.sum(1, keepdim=True)
    n = 64 // micro
    for clock in range(base, base + 3):
        d.pull(clock)
        for k in range(micro):
            loss = ((m(x[k * n:(k + 1) * n]) - y[k * n:(k + 1) * n]) ** 2).mean() / micro
            if k + 1 < micro or last_inside:
                with d.no_sync():
                    loss.backward()
            else:
                loss.backward()
        d.step(clock)
    d.pull(base + 3)
    return torch.cat([p.detach().reshape(-1) for p in m.parameters()])


@pytest.mark.parametrize("mode", ["bsp", "async"])
def test_gradient_accumulation_with_no_sync(make_cluster, mode):
    """Backwards inside no_sync() sum their gradients; the step pushes the
    sum once: the same weights as one backward of the whole batch, flat or
    not, with two groups (a table pushed during backward and the last one,
    pushed by step), and when every backward is inside no_sync."""
    cl = make_cluster(servers=2, consistency=mode)
    with cl.client(0) as c:
        base = 0
        for flat in (True, False):
            want = _accumulated_weights(c, f"f{flat}1.", 1, flat, False, base)
            got = _accumulated_weights(c, f"f{flat}2.", 2, flat, False, base + 3)
            torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
            got = _accumulated_weights(c, f"f{flat}4.", 4, flat, True, base + 6)
            torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
            base += 9


def test_second_backward_without_no_sync_is_an_error(make_cluster):
    """A second backward in one step would push a second gradient (or
    overwrite the first): refused, naming no_sync."""
    cl = make_cluster(servers=1)
    with cl.client(0) as c:
        m = nn.Linear(2, 1)
        d = zt.DenseParameters(c, m, optimizer="sgd", lr=0.1)
        d.pull(0)
        x = torch.ones(4, 2)
        m(x).sum().backward()
        with pytest.raises(RuntimeError, match="no_sync"):
            m(x).sum().backward()


def test_dense_parameters_train_a_linear_model(make_cluster):
    """Two workers under bsp fit y = 3x - 1; both end with the same bits."""
    cl = make_cluster(servers=2, workers=2, consistency="bsp")
    clients = [cl.client(r) for r in range(2)]
    models = [nn.Linear(1, 1) for _ in range(2)]
    ps = [zt.DenseParameters(c, m, optimizer="sgd", lr=0.1) for c, m in zip(clients, models)]
    x = torch.linspace(-1, 1, 32).reshape(-1, 1)
    y = 3 * x - 1
    for clock in range(60):
        for r in range(2):  # each worker pulls, computes on its half, pushes
            ps[r].pull(clock)
            xs, ys = x[r::2], y[r::2]
            loss = ((models[r](xs) - ys) ** 2).mean()
            loss.backward()
            ps[r].step(clock, pull_next=r == 1)  # rank 1 starts its next pulls in step
    for r in range(2):
        ps[r].pull(60)
    w0, w1 = [m.weight.item() for m in models], [m.bias.item() for m in models]
    assert w0[0] == w0[1] and w1[0] == w1[1]
    assert abs(w0[0] - 3) < 0.05 and abs(w1[0] + 1) < 0.05
    for c in clients:
        c.close()


def _train_mlp(cl, flat, prefix):
    """Two workers under bsp train a small MLP with adam for 8 clocks;
    returns rank 0's parameters (each a copy) and the number of tables."""
    clients = [cl.client(r) for r in range(2)]
    models, ps = [], []
    for c in clients:
        torch.manual_seed(3)
        m = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 3), nn.ReLU(), nn.Linear(3, 1))
        models.append(m)
        ps.append(zt.DenseParameters(c, m, optimizer="adam", lr=0.01, prefix=prefix, flat=flat,
                                     groups=[{"params": m[4].parameters(), "optimizer": "sgd",
                                              "lr": 0.05}]))
    g = torch.Generator().manual_seed(4)
    x, y = torch.randn(32, 5, generator=g), torch.randn(32, 1, generator=g)
    for clock in range(8):
        for r in range(2):
            ps[r].pull(clock)
            loss = ((models[r](x[r::2]) - y[r::2]) ** 2).mean()
            if clock == 5:  # the last layer gets no gradient this step
                loss = ((models[r][:4](x[r::2]).sum(1, keepdim=True) - y[r::2]) ** 2).mean()
            loss.backward()
            ps[r].step(clock)
    ps[0].pull(8)
    out = [p.detach().clone() for p in models[0].parameters()], len(ps[0].tables)
    for c in clients:
        c.close()
    return out


def test_flat_tables_train_the_same_bits(make_cluster):
    """DenseParameters with one table per parameter group (flat, the
    default: the parameters views of one buffer, one push per group and
    shard, init segments) trains the same bits as one table per parameter,
    on another shard count too, also when a parameter of a group gets no
    gradient in a step."""
    flat, nflat = _train_mlp(make_cluster(servers=2, workers=2, consistency="bsp"), True, "f.")
    own, nown = _train_mlp(make_cluster(servers=3, workers=2, consistency="bsp"), False, "o.")
    assert (nflat, nown) == (2, 6)
    for a, b in zip(flat, own):
        assert torch.equal(a, b)
    assert not torch.equal(flat[0], torch.zeros_like(flat[0]))


def test_step_profile_times_each_phase(make_cluster):
    """zt.StepProfile: with a profile active every phase of a step is timed;
    stopped, nothing is added."""
    cl = make_cluster(servers=2, workers=1)
    with cl.client(0) as c:
        emb = zt.Embedding(c.declare_sparse("p.emb", 4, optimizer="sgd", lr=0.1))
        lin = nn.Linear(4, 1)
        dense = zt.DenseParameters(c, lin, prefix="p.")
        ids = torch.tensor([[1, 2, 2], [3, 1, 5]])

        def step(clock):
            dense.pull(clock)
            lin(emb(ids)).sum().backward()
            dense.step(clock)

        prof = zt.StepProfile.start()
        for k in range(3):
            step(k)
        zt.StepProfile.stop()
        per = prof.per_step(3)
        for phase in ("dedup", "batch", "sparse_pull", "sparse_push", "dense_pull",
                      "dense_push", "dense_wait"):
            assert per[phase] > 0, (phase, per)
        before = dict(prof.seconds)
        step(3)
        assert prof.seconds == before


def test_prefetch_pulls_the_next_rows_early(make_cluster):
    """prefetch(next_ids) starts the next step's pull now: the next forward
    with that tensor takes those rows (pulled before this step's push: one
    update staler), a forward with other ids pulls as usual."""
    cl = make_cluster(servers=2, workers=1)
    with cl.client(0) as c:
        table = c.declare_sparse("pf", 2, optimizer="sgd", lr=1.0, init="constant",
                                 init_scale=1.0)
        emb = zt.Embedding(table)
        a, b = torch.tensor([1, 2]), torch.tensor([2, 3])
        out = emb(a)
        emb.prefetch(b)                     # before this step's push
        out.sum().backward()                # rows 1 and 2 go from 1 to 0
        zt.set_clock(emb, 1)
        got = emb(b)                        # the prefetched rows: row 2 still 1
        assert got.detach().numpy().tolist() == [[1, 1], [1, 1]]
        zt.flush(emb)
        assert table.pull(np.array([2], np.uint64)).tolist() == [[0, 0]]
        other = emb(torch.tensor([2]))      # no prefetch for these: pulled now
        assert other.detach().numpy().tolist() == [[0, 0]]
        emb.prefetch(a)
        assert emb(b).shape == (2, 2)       # other ids than prefetched: pulled, no hang
