"""What the Python binding costs over C (docs/python.md).

    ZEPS_BINDIR=build/bin PYTHONPATH=build/python /usr/bin/python3 \\
        worker/python/bench/bench_overhead.py [--reps 5] [--seconds 1]

Starts one zeps-server on an ipc endpoint, then, interleaved rep by rep,
times a blocking push + pull of the same dense table from C
(tests/bench/bench_client_loop.c), from Python (zeps.DenseTable.push and
.pull into a reused array) and from Python with view pulls (.pull_view,
its parts read in place and released), for 64 bytes and 4 MB. Prints
per-size medians: microseconds per push+pull pair, the 64-byte difference
(Python - C), the 4 MB throughput ratio (C time / Python time: 1.0 means
as fast) and the view pull's time over the copying pull's.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import zeps
from one_shard import BINDIR, one_shard


def python_loop(endpoints, n, seconds, view=False):
    with zeps.Client.from_endpoints(endpoints, 0, request_timeout_ms=10000) as c:
        t = c.declare(f"bench-{n}", n, optimizer="sgd", lr=1e-9)
        g = np.zeros(n, np.float32)
        out = np.empty(n, np.float32)

        def pull():
            if not view:
                return t.pull(out=out)
            with t.pull_view() as v:
                return v.parts[0][1][-1]  # reads the last value in place

        for _ in range(20):
            t.push(g)
            pull()
        iters, t0 = 0, time.perf_counter()
        while True:
            t.push(g)
            pull()
            iters += 1
            el = time.perf_counter() - t0
            if el >= seconds:
                return el / iters * 1e6


def c_loop(endpoints, n, seconds):
    out = subprocess.run([os.path.join(BINDIR, "bench_client_loop"), str(n), str(seconds)] +
                         endpoints, check=True, capture_output=True, text=True)
    return float(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0)
    a = ap.parse_args()
    with one_shard() as (ep, _):
        res = {}
        for n, label in ((16, "64 B"), (1 << 20, "4 MB")):
            cs, ps, vs = [], [], []
            for _ in range(a.reps):
                cs.append(c_loop([ep], n, a.seconds))
                ps.append(python_loop([ep], n, a.seconds))
                vs.append(python_loop([ep], n, a.seconds, view=True))
            res[label] = (statistics.median(cs), statistics.median(ps), cs, ps,
                          statistics.median(vs), vs)
    for label, (c, p, cs, ps, v, vs) in res.items():
        print(f"{label:5s} push+pull: C {c:9.1f} us  Python {p:9.1f} us  Python view {v:9.1f} us  "
              f"(C reps {' '.join(f'{x:.1f}' for x in cs)}; Python {' '.join(f'{x:.1f}' for x in ps)}; "
              f"view {' '.join(f'{x:.1f}' for x in vs)})")
    c64, p64 = res["64 B"][0], res["64 B"][1]
    c4, p4 = res["4 MB"][0], res["4 MB"][1]
    print(f"64 B: Python adds {p64 - c64:.1f} us per push+pull pair ({(p64 - c64) / 2:.1f} us per call)")
    print(f"4 MB: Python/C throughput ratio {c4 / p4:.3f}")
    for label in res:
        print(f"{label}: Python push+view pull / push+pull time {res[label][4] / res[label][1]:.3f}")


if __name__ == "__main__":
    sys.exit(main())
