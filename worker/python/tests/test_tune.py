"""Learning-rate schedules (TUNE): what the shards apply changes with the
lr set after declare, for dense and sparse tables (lead columns scale with
it), the change survives a snapshot and a restart, re-declarations are
checked against the declared lr, and torch's schedulers drive it through
zeps.torch.ShardOptimizer over DenseParameters' parameter groups."""
import json
import os
import subprocess

import numpy as np
import pytest
import torch

import zeps
import zeps.torch as zt
from zeps import errors
from conftest import bin_path


def shard_tables(cl):
    out = subprocess.run([bin_path("zepsctl"), "stats", "--config", cl.conf, "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [{t["name"]: t for t in s["tables"]} for s in json.loads(out.stdout)]


def test_dense_lr_changes_what_is_applied(make_cluster):
    cl = make_cluster(servers=2, workers=1)
    with cl.client(0) as c:
        w = c.declare("w", 6, optimizer="sgd", lr=1.0)
        one = np.ones(6, np.float32)
        w.push(one)
        assert np.array_equal(w.pull(), -one)
        w.set_lr(0.25)
        w.push(one)
        assert np.array_equal(w.pull(), np.full(6, -1.25, np.float32))
        for s in shard_tables(cl):
            assert s["w"]["lr"] == 0.25 and s["w"]["lr_declared"] == 1.0
        c.declare("w", 6, optimizer="sgd", lr=1.0)      # as declared: still the same table
        with pytest.raises(errors.ECONFLICT) as ei:
            c.declare("w", 6, optimizer="sgd", lr=0.25)
        assert "lr = 1, not 0.25" in ei.value.message
        for bad in (0.0, -1.0, float("nan"), float("inf")):
            with pytest.raises(errors.EOPTIM):
                w.set_lr(bad)
        w.push(one)                                       # a refused lr changed nothing
        assert np.array_equal(w.pull(), np.full(6, -1.5, np.float32))


def test_sparse_lr_scales_lead_columns(make_cluster):
    cl = make_cluster(servers=2, workers=1)
    with cl.client(0) as c:
        t = c.declare_sparse("e", 3, optimizer="sgd", lr=1.0, lead_cols=1, lead_lr=2.0)
        ids = np.array([7, 1 << 40], np.uint64)
        g = np.ones((2, 3), np.float32)
        t.push(ids, g)
        assert np.array_equal(t.pull(ids), np.array([[-2, -1, -1]] * 2, np.float32))
        t.set_lr(0.5)                                     # lead columns: 2 x 0.5 / 1 = 1
        t.push(ids, g)
        assert np.array_equal(t.pull(ids), np.array([[-3, -1.5, -1.5]] * 2, np.float32))


def test_lr_survives_snapshot_and_restart(make_cluster):
    snap = os.path.join(str(make_cluster.tmp), "snap")
    cl = make_cluster(servers=1, workers=1, extra=f'  snapshot_dir = "{snap}";\n')
    c = cl.client(0)
    w = c.declare("w", 4, optimizer="sgd", lr=1.0)
    w.set_lr(0.125)
    c.close()
    cl.stop()                                             # SIGTERM: a final snapshot
    assert "restored" not in cl.log(0)
    cl.procs = []
    cl2 = make_cluster(servers=1, workers=1, extra=f'  snapshot_dir = "{snap}";\n')
    assert "restored snapshot set" in cl2.log(0)
    assert shard_tables(cl2)[0]["w"]["lr"] == 0.125
    with cl2.client(0) as c:
        w = c.declare("w", 4, optimizer="sgd", lr=1.0)   # the declared lr still matches
        w.push(np.ones(4, np.float32))
        assert np.array_equal(w.pull(), np.full(4, -0.125, np.float32))


def test_groups_and_a_torch_scheduler(make_cluster):
    cl = make_cluster(servers=2, workers=1)
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    with cl.client(0) as c:
        emb = c.declare_sparse("emb", 2, optimizer="sgd", lr=0.2)
        dense = zt.DenseParameters(c, m, optimizer="sgd", lr=0.1, prefix="m.",
                                   groups=[{"params": m[0].parameters(), "optimizer": "adam",
                                            "lr": 0.01}])
        assert [g["optimizer"] for g in dense.param_groups] == ["adam", "sgd"]
        # one flat table per group (its parameters' pushes go as one request per shard)
        assert [t.name for t in dense.param_groups[0]["tables"]] == ["m.group0"]
        with pytest.raises(ValueError):
            zt.DenseParameters(c, m, prefix="x.", groups=[{"params": [m[0].weight]},
                                                          {"params": [m[0].weight]}])
        opt = zt.ShardOptimizer(dense, [emb])
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        x, y = torch.randn(8, 4), torch.randn(8, 1)
        seen = []
        for clock in range(3):
            dense.pull(clock)                 # sends the lr the scheduler set, after the pull
            s = shard_tables(cl)
            seen.append((s[0]["m.group0"]["lr"], s[1]["m.group1"]["lr"], s[0]["emb"]["lr"]))
            loss = torch.nn.functional.mse_loss(m(x), y)
            loss.backward()
            dense.step(clock)
            opt.step()
            sched.step()
        want = [(0.01, 0.1, 0.2), (0.005, 0.05, 0.1), (0.0025, 0.025, 0.05)]
        assert np.array_equal(np.float32(seen), np.float32(want)), seen  # the shards keep f32
        s = shard_tables(cl)[0]
        assert s["m.group0"]["optimizer"] == "adam" and s["m.group1"]["optimizer"] == "sgd"
