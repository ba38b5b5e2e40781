"""A run driven from Python gives the same bits as the same run driven from
C (tests/support/zt_replay.c), the same gradients and ids: a dense momentum
table and sparse adagrad rows under bsp with two and three workers on two
shards (a round's pushes, dense or sparse, are summed in rank order, so the
result does not depend on the order they arrive in: the Python run pushes
rank by rank, the C workers race), and under async with one worker."""
import os
import subprocess

import numpy as np
import pytest

from conftest import bin_path

T, N, K, D = 12, 3001, 40, 8


def _data(tmp, W):
    rng = np.random.default_rng(11)
    grads = rng.standard_normal((T, W, N)).astype(np.float32)
    ids = rng.integers(0, 60, size=(T, W, K)).astype(np.uint64)  # repeats within and across
    sgrads = rng.standard_normal((T, W, K, D)).astype(np.float32)
    grads.tofile(os.path.join(tmp, "grads.f32"))
    ids.tofile(os.path.join(tmp, "ids.u64"))
    sgrads.tofile(os.path.join(tmp, "sgrads.f32"))
    return grads, ids, sgrads


def _python_run(cl, W, grads, ids, sgrads):
    clients = [cl.client(r) for r in range(W)]
    ws, es = [], []
    for c in clients:
        ws.append(c.declare("w", N, optimizer="momentum", lr=0.05))
        es.append(c.declare_sparse("e", D, optimizer="adagrad", lr=0.1, init="normal",
                                   init_scale=0.1, seed=9))
    for t in range(T):
        for r in range(W):  # bsp: rank r's pull at t waits only for round t-1
            ws[r].pull(clock=t)
            ws[r].push(grads[t, r], clock=t)
            b = es[r].batch(ids[t, r])
            b.pull(clock=t)
            b.push(sgrads[t, r], clock=t)
            clients[r].clock(t)
    final_w = ws[0].pull(clock=T)
    rows = es[0].pull(ids.reshape(-1), clock=T)
    for c in clients:
        c.close()
    return final_w, rows


@pytest.mark.parametrize("W,consistency", [(2, "bsp"), (3, "bsp"), (1, "async")])
def test_python_equals_c(make_cluster, tmp_path, W, consistency):
    grads, ids, sgrads = _data(str(tmp_path), W)
    py = make_cluster(servers=2, workers=W, consistency=consistency)
    py_w, py_rows = _python_run(py, W, grads, ids, sgrads)

    cc = make_cluster(servers=2, workers=W, consistency=consistency)
    procs = [subprocess.Popen([bin_path("zt_replay"), str(r), str(W), str(T), str(N), str(K),
                               str(D), str(tmp_path)] + cc.endpoints) for r in range(W)]
    for p in procs:
        assert p.wait(120) == 0
    c_w = np.fromfile(os.path.join(tmp_path, "c-w-0.f32"), np.float32)
    c_rows = np.fromfile(os.path.join(tmp_path, "c-rows-0.f32"), np.float32).reshape(-1, D)
    assert np.any(c_w != 0) and np.any(py_rows != 0)
    assert c_w.tobytes() == py_w.tobytes()  # dense: the same bits
    assert c_rows.tobytes() == py_rows.tobytes()  # sparse rows: the same bits
