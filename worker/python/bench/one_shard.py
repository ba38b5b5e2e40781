"""One zeps-server on an ipc endpoint in a temporary folder, for the
benchmarks that hold the Python binding beside C (bench_overhead.py,
bench_torch_step.py)."""
import contextlib
import os
import subprocess
import tempfile

import zeps

BINDIR = os.environ.get("ZEPS_BINDIR", "build/bin")


@contextlib.contextmanager
def one_shard():
    """Yield (endpoint, folder) of a running shard (async, one worker), up
    and answering; stop it at the end."""
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
            yield ep, d
        finally:
            srv.terminate()
            srv.wait()
