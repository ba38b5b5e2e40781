"""What the Python binding costs over C (docs/python.md).

    ZEPS_BINDIR=build/bin PYTHONPATH=build/python /usr/bin/python3 \\
        worker/python/bench/bench_overhead.py [--reps 5] [--seconds 1]

Starts one zeps-server on an ipc endpoint, then, interleaved rep by rep,
times a blocking push + pull of the same dense table from C
(tests/bench/bench_client_loop.c) and from Python (zeps.DenseTable.push and
.pull into a reused array), for 64 bytes and 4 MB. Prints per-size medians:
microseconds per push+pull pair, the 64-byte difference (Python - C), and
the 4 MB throughput ratio (C time / Python time: 1.0 means as fast).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import zeps

BINDIR = os.environ.get("ZEPS_BINDIR", "build/bin")


def python_loop(endpoints, n, seconds):
    with zeps.Client.from_endpoints(endpoints, 0, request_timeout_ms=10000) as c:
        t = c.declare(f"bench-{n}", n, optimizer="sgd", lr=1e-9)
        g = np.zeros(n, np.float32)
        out = np.empty(n, np.float32)
        for _ in range(20):
            t.push(g)
            t.pull(out=out)
        iters, t0 = 0, time.perf_counter()
        while True:
            t.push(g)
            t.pull(out=out)
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
    with tempfile.TemporaryDirectory() as d:
        ep = f"ipc://{d}/shard-0"
        conf = os.path.join(d, "cluster.conf")
        with open(conf, "w") as f:
            f.write(f'cluster = {{ servers = ["{ep}"]; workers = 1; consistency = "async"; }};\n')
        srv = subprocess.Popen([os.path.join(BINDIR, "zeps-server"), "--config", conf,
                                "--shard", "0"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        try:
            zeps.Client.from_endpoints([ep], 0xFFFFFFFF, hello_timeout_ms=10000).close()
            res = {}
            for n, label in ((16, "64 B"), (1 << 20, "4 MB")):
                cs, ps = [], []
                for _ in range(a.reps):
                    cs.append(c_loop([ep], n, a.seconds))
                    ps.append(python_loop([ep], n, a.seconds))
                res[label] = (statistics.median(cs), statistics.median(ps), cs, ps)
        finally:
            srv.terminate()
            srv.wait()
    for label, (c, p, cs, ps) in res.items():
        print(f"{label:5s} push+pull: C {c:9.1f} us  Python {p:9.1f} us  "
              f"(C reps {' '.join(f'{x:.1f}' for x in cs)}; Python {' '.join(f'{x:.1f}' for x in ps)})")
    c64, p64 = res["64 B"][0], res["64 B"][1]
    c4, p4 = res["4 MB"][0], res["4 MB"][1]
    print(f"64 B: Python adds {p64 - c64:.1f} us per push+pull pair ({(p64 - c64) / 2:.1f} us per call)")
    print(f"4 MB: Python/C throughput ratio {c4 / p4:.3f}")


if __name__ == "__main__":
    sys.exit(main())
