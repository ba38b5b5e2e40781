#!/usr/bin/python3
"""A shard keeps serving pushes while its metrics endpoint is abused.

    http_abuse.py ZEPS_SERVER_BINARY WORKDIR

Starts zeps-server (--metrics-listen 127.0.0.1:0), connects a client
(Python binding over libzeps) and times blocking pushes of 1024 floats:
PUSHES while nothing else happens (idle), then PUSHES while another
process opens 1,000 idle connections to the endpoint and keeps sending
malformed requests, oversized headers and slowloris requests (a byte every
200 ms). Reports the median push latency of both phases and their ratio
(the median under attack must stay under 20 ms: a shard that waited on the
endpoint would wait on the slowloris client's 200 ms; the ratio, 0.7-1.0
on a quiet machine, is printed, not asserted: on 2 shared cores it
reached 3.29 with the shard healthy), the shard's resident memory before and after
(growth at most 16 MiB), and checks the endpoint stayed bounded (open
connections at most the cap, evictions, timeouts and bad requests counted)
and still answers /metrics. Prints "N passed, N failed"; exits 1 on a
failure.
"""
import multiprocessing
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

import numpy as np
import zeps

PUSHES = 3000
IDLE_CONNS = 1000


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def attacker(port, stop):
    """Idle connections, garbage, huge headers and slowloris until stop."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    idle, slow = [], []
    t_slow = 0.0
    while not stop.is_set():
        if len(idle) < IDLE_CONNS:
            for _ in range(50):
                try:
                    idle.append(socket.create_connection(("127.0.0.1", port), timeout=1))
                except OSError:
                    break
        for payload in (b"GARBAGE\x01\x02 / HTTP/9.9\r\n\r\n",
                        b"GET /metrics HTTP/1.1\r\nX-Big: " + b"b" * 20000 + b"\r\n\r\n",
                        b"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.sendall(payload)
                    s.recv(256)
            except OSError:
                pass
        if len(slow) < 20:
            try:
                slow.append(socket.create_connection(("127.0.0.1", port), timeout=1))
            except OSError:
                pass
        now = time.monotonic()
        if now - t_slow > 0.2:
            t_slow = now
            for s in list(slow):
                try:
                    s.send(b"G")
                except OSError:
                    slow.remove(s)
                    s.close()
        time.sleep(0.02)
    for s in idle + slow:
        s.close()


def push_latencies(table, n):
    g = np.ones(1024, dtype=np.float32) * 1e-6
    lat = []
    for i in range(n):
        t0 = time.perf_counter()
        table.push(g, clock=0)
        lat.append(time.perf_counter() - t0)
    return lat


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def metric(text, name):
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def main():
    server_bin, work = sys.argv[1], sys.argv[2]
    conf = os.path.join(work, "c.conf")
    with open(conf, "w") as f:
        f.write(f'cluster = {{ servers = ["ipc://{work}/s0.sock"]; workers = 1; '
                f'consistency = "async"; }};\n')
    log = open(os.path.join(work, "server.log"), "w")
    srv = subprocess.Popen([server_bin, "--config", conf, "--shard", "0",
                            "--metrics-listen", "127.0.0.1:0"], stdout=log, stderr=log)
    passed = failed = 0

    def check(what, ok):
        nonlocal passed, failed
        passed, failed = passed + bool(ok), failed + (not ok)
        print(("ok   - " if ok else "FAIL - ") + what, flush=True)

    try:
        port = None
        for _ in range(100):
            m = re.search(r"\(port (\d+)\)", open(os.path.join(work, "server.log")).read())
            if m:
                port = int(m.group(1))
                break
            time.sleep(0.1)
        check(f"the shard serves metrics on port {port}", port)
        c = zeps.Client(conf, rank=0)
        t = c.declare("w", 1024, optimizer="sgd", lr=0.01)
        push_latencies(t, 200)  # warm up
        rss0 = rss_kib(srv.pid)
        idle = push_latencies(t, PUSHES)
        stop = multiprocessing.Event()
        att = multiprocessing.Process(target=attacker, args=(port, stop))
        att.start()
        time.sleep(2.0)  # the idle connections are open, the rest keeps coming
        busy = push_latencies(t, PUSHES)
        during = scrape(port)
        rss1 = rss_kib(srv.pid)
        stop.set()
        att.join(30)
        m_idle, m_busy = statistics.median(idle), statistics.median(busy)
        ratio = m_busy / m_idle
        print(f"     push of 4 KiB, median of {PUSHES}: idle {m_idle * 1e6:.1f} us, "
              f"under attack {m_busy * 1e6:.1f} us, ratio {ratio:.2f}; "
              f"p90 {statistics.quantiles(idle, n=10)[-1] * 1e6:.1f} / "
              f"{statistics.quantiles(busy, n=10)[-1] * 1e6:.1f} us", flush=True)
        # Timing on a shared 2-core machine is not asserted to a ratio (it
        # reached 3.29 at a load of 20 with the shard healthy): a shard that
        # waited on the endpoint would wait on the slowloris client's 200 ms.
        check(f"pushes under attack not held up by the endpoint (median "
              f"{m_busy * 1e6:.0f} us, at most 20 ms)", m_busy <= 0.020)
        if ratio > 3.0:
            print(f"     note: the ratio {ratio:.2f} is above 3 at a load average of "
                  f"{os.getloadavg()[0]:.1f} (other processes on the cores)", flush=True)
        check(f"resident memory bounded: {rss0} KiB before, {rss1} KiB under attack "
              f"(+{rss1 - rss0} KiB, at most 16 MiB)", rss1 - rss0 <= 16 * 1024)
        openc = metric(during, "zeps_http_connections")
        check(f"open connections stayed at the cap of 64 or below ({openc})",
              openc is not None and openc <= 64)
        # silent clients with the endpoint otherwise quiet: closed by their
        # timers (5 s), not by evictions
        quiet = [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]
        time.sleep(6.5)
        after = scrape(port)
        for q in quiet:
            q.close()
        v = metric(after, 'zeps_http_connections_total{result="timed_out"}')
        check(f"silent connections were closed by their timers ({v})", v is not None and v >= 5)
        for res in ("evicted", "bad"):
            v = metric(during, f'zeps_http_connections_total{{result="{res}"}}')
            check(f"connections {res} were counted ({v})", v is not None and v > 0)
        check("/metrics answered during the attack",
              metric(during, "zeps_requests_total") is not None)
        check("and after it", metric(after, "zeps_requests_total") is not None)
        c.close()
    finally:
        srv.terminate()
        rc = srv.wait(30)
        check(f"the shard exits 0 on SIGTERM ({rc})", rc == 0)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
