"""Saving and loading a model (SCAN and PUT): a small model trained on a
2-shard cluster is exported with state_dict(), saved with torch.save and
loaded with torch.load; a plain PyTorch program serves it from the saved
dict alone with the same predictions, bit for bit; imported into a new
cluster of 3 shards it predicts the same bits, and one more training step
on both clusters gives the same bits again (the optimizer state and step
counts came across, not only the values)."""
import numpy as np
import pytest
import torch
from torch import nn

import zeps.torch as zt
from zeps import errors

DIM = 8
BIG_ID = 2 ** 64 - 5  # an id past 2^63: -5 as int64


def _data(seed, n=64):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 200, (n, 3), generator=g)
    ids[0, 0] = BIG_ID - 2 ** 64
    y = (ids.float().sin().sum(1, keepdim=True) > 0).float()
    return ids, y


def _model(c):
    """EmbeddingBag on a sparse adagrad table, an MLP on adam dense tables."""
    emb = zt.EmbeddingBag(c.declare_sparse("emb", DIM, optimizer="adagrad", lr=0.05,
                                           init="normal", init_scale=0.1, seed=11))
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(DIM, 16), nn.ReLU(), nn.Linear(16, 1))
    dense = zt.DenseParameters(c, mlp, optimizer="adam", lr=0.01, prefix="mlp.", seed=5)
    model = nn.Sequential()
    model.add_module("emb", emb)
    model.add_module("mlp", mlp)
    return model, dense


def _step(model, dense, clock, seed):
    ids, y = _data(seed)
    dense.pull(clock)
    zt.set_clock(model, clock)
    loss = nn.functional.binary_cross_entropy_with_logits(model(ids), y)
    loss.backward()
    dense.step(clock)
    zt.flush(model)


def _predict(model, dense, clock, ids):
    dense.pull(clock)
    with torch.no_grad():
        return model(ids)


def _serve_plain(sd, ids):
    """Predictions from the saved dict alone, in plain PyTorch."""
    m = sd["model"]
    index = {int(i): k for k, i in enumerate(m["emb.ids"].tolist())}
    bag = nn.EmbeddingBag(len(index), DIM, mode="sum")
    mlp = nn.Sequential(nn.Linear(DIM, 16), nn.ReLU(), nn.Linear(16, 1))
    with torch.no_grad():
        bag.weight.copy_(m["emb.weight"])
    mlp.load_state_dict(sd["dense"]["params"])
    mapped = torch.tensor([[index[int(i)] for i in row] for row in ids.tolist()])
    with torch.no_grad():
        return mlp(bag(mapped))


def test_save_serve_and_load_into_another_cluster(make_cluster, tmp_path):
    ca = make_cluster(servers=2).client(0)
    model_a, dense_a = _model(ca)
    for clock in range(20):
        _step(model_a, dense_a, clock, seed=clock)
    test_ids, _ = _data(99)
    pred_a = _predict(model_a, dense_a, 20, test_ids)

    sd = {"model": model_a.state_dict(), "dense": dense_a.state_dict()}
    m = sd["model"]
    assert m["emb.ids"].dtype == torch.int64 and m["emb.weight"].dtype == torch.float32
    assert m["emb.weight"].shape[1] == DIM and m["emb.optimizer_state"].shape[1:] == (1, DIM)
    assert BIG_ID - 2 ** 64 in m["emb.ids"].tolist()
    assert int(m["emb.row_versions"].max()) > 1          # rows updated several times
    assert m["emb.table"]["optimizer"] == "adagrad" and m["emb.table"]["dim"] == DIM
    assert sd["dense"]["versions"]["0.weight"] == 20      # adam's step count
    assert sd["dense"]["optimizer_state"]["0.weight"].shape == (2, 16, DIM)
    path = tmp_path / "model.pt"
    torch.save(sd, path)
    sd = torch.load(path)

    assert torch.equal(_serve_plain(sd, test_ids), pred_a)   # served without zeps

    cb = make_cluster(servers=3).client(0)                # a new cluster, another shard count
    model_b, dense_b = _model(cb)
    model_b.load_state_dict(sd["model"])
    dense_b.load_state_dict(sd["dense"])
    assert torch.equal(_predict(model_b, dense_b, 20, test_ids), pred_a)

    # one more step on both: the same bits (adagrad accumulators, adam m, v
    # and step counts were imported, not only the values)
    _step(model_a, dense_a, 20, seed=500)
    _step(model_b, dense_b, 20, seed=500)
    da, db = dense_a.state_dict(), dense_b.state_dict()
    for name in da["params"]:
        assert torch.equal(da["params"][name], db["params"][name]), name
        assert torch.equal(da["optimizer_state"][name], db["optimizer_state"][name]), name
    ea, eb = model_a.state_dict(), model_b.state_dict()
    assert torch.equal(ea["emb.ids"], eb["emb.ids"])
    for k in ("emb.weight", "emb.optimizer_state", "emb.row_versions"):
        assert torch.equal(ea[k], eb[k]), k
    ca.close()
    cb.close()


def test_pages_and_refusals(make_cluster):
    cl = make_cluster(servers=2)
    with cl.client(0) as c:
        t = c.declare_sparse("e", 3, optimizer="adagrad", lr=0.1)
        w = c.declare("w", 10, optimizer="sgd", lr=1.0)
        ids = np.arange(50, dtype=np.uint64)
        t.push(ids, np.ones((50, 3), np.float32))
        got = t.export(max_count=4)                          # many pages per shard
        assert np.array_equal(got["ids"], ids)
        assert np.array_equal(got["state"], np.ones((50, 1, 3), np.float32))
        pages, cursor = 0, 0
        while True:
            p = c.scan(t, 0, cursor, max_count=4)
            assert p.count <= 4 and p.state_per_value == 1
            pages, cursor = pages + 1, p.next
            if cursor == 0:
                break
        assert pages >= 6
        with pytest.raises(errors.EINVAL) as ei:             # adagrad rows without their state
            c.put_rows(t, ids[:2], np.zeros((2, 3), np.float32))
        assert "adagrad keeps 1" in ei.value.message
        with pytest.raises(errors.ERANGE):
            c.scan(t, 0, cursor=1 << 40)
        with pytest.raises(errors.ENONFINITE):
            c.put_dense(w, np.full(10, np.nan, np.float32))
        assert np.array_equal(t.export()["values"], got["values"])   # nothing changed
        w.load({"values": np.arange(10, dtype=np.float32), "state": None, "version": 7})
        assert np.array_equal(w.pull(), np.arange(10, dtype=np.float32))
        assert w.export()["version"] == 7


def test_buffers_and_frozen_parameters_travel_with_the_model(make_cluster, tmp_path):
    """A module with BatchNorm (buffers) and a frozen parameter: the
    state_dict's "params" loads strictly into a plain module, which then
    predicts the same bits in eval mode; load_state_dict puts the buffers
    back into a fresh DenseParameters' module."""
    def build():
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 1))
        m[3].bias.requires_grad_(False)  # frozen: not on the shards
        return m
    cl = make_cluster(servers=2)
    x = torch.randn(32, 3, generator=torch.Generator().manual_seed(1))
    with cl.client(0) as c:
        m = build()
        dense = zt.DenseParameters(c, m, optimizer="sgd", lr=0.1, prefix="bn.")
        for clock in range(3):
            dense.pull(clock)
            m(x).pow(2).mean().backward()
            dense.step(clock)
        dense.pull(3)
        sd = dense.state_dict()
        assert set(sd["local"]) == {"1.running_mean", "1.running_var", "1.num_batches_tracked",
                                    "3.bias"}
        torch.save(sd, tmp_path / "bn.pt")
        m.eval()
        want = m(x).detach()
        plain = build()
        plain.load_state_dict(torch.load(tmp_path / "bn.pt")["params"])  # strict
        plain.eval()
        assert torch.equal(plain(x), want)
    cl2 = make_cluster(servers=1)
    with cl2.client(0) as c:
        fresh = build()
        d2 = zt.DenseParameters(c, fresh, optimizer="sgd", lr=0.1, prefix="bn.")
        d2.load_state_dict(torch.load(tmp_path / "bn.pt"))
        d2.pull(0)
        fresh.eval()
        assert torch.equal(fresh[1].running_mean, m[1].running_mean)
        assert torch.equal(fresh(x), want)
