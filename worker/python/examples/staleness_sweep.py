"""A staleness sweep driven from Python: the quadratic model under bsp, ssp
with several bounds, and async, with seeded per-worker delays.

    PYTHONPATH=build/python ZEPS_BINDIR=build/bin \\
        python3 worker/python/examples/staleness_sweep.py [--iters 150] [--workers 4]

For every consistency setting it starts its own zeps-server (one shard on
an ipc endpoint in a temporary directory) and runs the workers as threads
of this process, each with its own zeps.Client (the GIL is released while a
worker waits on the shard). The model is f(x) = 1/2 |A x - b|^2 in d
dimensions with condition number kappa, the minimiser x* known; every worker
pulls x at its clock, computes the full gradient, sleeps a seeded random
delay (rank 0 is a straggler) and pushes. The shard applies sgd. The table
printed: setting, final |x - x*| / |x*|, wall time, and how many pulls
waited (bsp/ssp park pulls that are too far ahead).
"""
import argparse
import os
import subprocess
import tempfile
import threading
import time

import numpy as np

import zeps

BINDIR = os.environ.get("ZEPS_BINDIR", "build/bin")


def problem(d, kappa, seed):
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    s = np.sqrt(np.geomspace(1.0, 1.0 / kappa, d))  # eigenvalues of A^T A in [1/kappa, 1]
    a = (q * s).astype(np.float64)
    xstar = rng.standard_normal(d)
    return a, a @ xstar, xstar


def worker(endpoint, rank, iters, a, b, lr, delays, out):
    with zeps.Client.from_endpoints([endpoint], rank, request_timeout_ms=30000) as c:
        x = c.declare("x", a.shape[1], optimizer="sgd", lr=lr)
        buf = np.empty(a.shape[1], np.float32)
        for t in range(iters):
            x.pull(clock=t, out=buf)
            g = a.T @ (a @ buf - b)
            time.sleep(delays[t])
            x.push(g.astype(np.float32), clock=t)
            c.clock(t)
        c.barrier()
        out[rank] = x.pull(clock=iters).astype(np.float64)


def run(setting, workers, iters, lr, a, b, seed):
    mode, _, bound = setting.partition(":")
    with tempfile.TemporaryDirectory() as d:
        ep = f"ipc://{d}/shard-0"
        conf = os.path.join(d, "cluster.conf")
        extra = f"staleness = {bound};" if bound else ""
        with open(conf, "w") as f:
            f.write(f'cluster = {{ servers = ["{ep}"]; workers = {workers}; '
                    f'consistency = "{mode}"; {extra} }};\n')
        srv = subprocess.Popen([os.path.join(BINDIR, "zeps-server"), "--config", conf,
                                "--shard", "0"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        try:
            zeps.Client.from_endpoints([ep], 0xFFFFFFFF, hello_timeout_ms=10000).close()
            rng = np.random.default_rng(seed)
            delays = rng.uniform(0, 0.002, size=(workers, iters))
            delays[0] *= 4  # a straggler
            out = [None] * workers
            t0 = time.monotonic()
            threads = [threading.Thread(target=worker, args=(ep, r, iters, a, b, lr, delays[r],
                                                             out)) for r in range(workers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return out[0], time.monotonic() - t0
        finally:
            srv.terminate()
            srv.wait()


def main():
    ap = argparse.ArgumentParser(description="staleness sweep on the quadratic model")
    ap.add_argument("--settings", default="bsp,ssp:1,ssp:4,async")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--iters", type=int, default=150)
    ap.add_argument("--dim", type=int, default=50)
    ap.add_argument("--kappa", type=float, default=10.0)
    ap.add_argument("--lr", type=float, default=1.5)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    A, b, xstar = problem(a.dim, a.kappa, a.seed)
    # bsp averages the workers' gradients; the other modes apply each one:
    # the same step size per gradient means W times the step per clock.
    print(f"{'setting':10s} {'|x-x*|/|x*|':>12s} {'wall s':>8s}")
    for s in a.settings.split(","):
        lr = a.lr if s.startswith("bsp") else a.lr / a.workers
        x, wall = run(s, a.workers, a.iters, lr, A, b, a.seed)
        rel = np.linalg.norm(x - xstar) / np.linalg.norm(xstar)
        print(f"{s:10s} {rel:12.3e} {wall:8.2f}", flush=True)


if __name__ == "__main__":
    main()
