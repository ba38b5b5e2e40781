"""pytest fixtures: real zeps-server processes on ipc endpoints in a
temporary directory (so tests never fight over ports).

ZEPS_BINDIR names the folder of zeps-server (ctest sets it; by hand:
ZEPS_BINDIR=build/bin PYTHONPATH=build/python /usr/bin/python3 -m pytest
worker/python/tests)."""
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

import zeps

BINDIR = os.environ.get("ZEPS_BINDIR", os.path.join(os.getcwd(), "build", "bin"))


def bin_path(name):
    return os.path.join(BINDIR, name)


class Cluster:
    """`servers` zeps-server processes of one cluster file."""

    def __init__(self, tmp, servers=1, workers=1, consistency="async", extra="", training=""):
        self.dir = str(tmp)
        self.endpoints = [f"ipc://{self.dir}/shard-{k}" for k in range(servers)]
        self.conf = os.path.join(self.dir, "cluster.conf")
        eps = ", ".join(f'"{e}"' for e in self.endpoints)
        with open(self.conf, "w") as f:
            f.write(f"cluster = {{\n  servers = [{eps}];\n  workers = {workers};\n"
                    f"  consistency = \"{consistency}\";\n{extra}}};\n{training}")
        self.procs = []
        for k in range(servers):
            log = open(os.path.join(self.dir, f"server-{k}.log"), "ab")
            self.procs.append(subprocess.Popen(
                [bin_path("zeps-server"), "--config", self.conf, "--shard", str(k)],
                stdout=log, stderr=subprocess.STDOUT))
        # a tool client waits (bounded) until every shard answers HELLO
        probe = zeps.Client.from_endpoints(self.endpoints, 0xFFFFFFFF, hello_timeout_ms=10000)
        probe.close()

    def client(self, rank, **options):
        options.setdefault("request_timeout_ms", 2000)
        return zeps.Client.from_endpoints(self.endpoints, rank, **options)

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def log(self, k):
        with open(os.path.join(self.dir, f"server-{k}.log"), errors="replace") as f:
            return f.read()


@pytest.fixture(scope="session", autouse=True)
def _scratch_removed(tmp_path_factory):
    """Every test's tmp_path lives under this session's base folder (under
    $TMPDIR); it goes when the session ends, passed or failed, unless
    ZEPS_TEST_KEEP is set (docs/testing.md, "Scratch folders")."""
    yield
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("ZEPS_TEST_KEEP"):
        print(f"kept {base}")
    else:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def make_cluster(tmp_path):
    made = []

    def make(**kw):
        c = Cluster(tmp_path / f"c{len(made)}", **kw)
        made.append(c)
        return c

    for i in range(8):
        (tmp_path / f"c{i}").mkdir()
    make.tmp = tmp_path
    yield make
    for c in made:
        c.stop()
