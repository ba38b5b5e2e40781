"""Every error class the binding raises, and Ctrl-C during a wait."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import zeps
from zeps import errors


def test_error_classes_follow_libzeps():
    assert issubclass(errors.ETIMEDOUT, zeps.Error)
    assert errors.ETIMEDOUT.code == 11 and errors.ETIMEDOUT.name == "ETIMEDOUT"
    assert zeps.error_class(7) is errors.ECONFLICT
    assert zeps.error_class(999) is zeps.Error
    e = errors.ETABLE("no such table")
    assert (e.code, e.name, e.message) == (6, "ETABLE", "no such table")
    assert str(e) == "ETABLE: no such table"


def test_server_errors(make_cluster):
    cl = make_cluster(servers=2)
    with cl.client(0) as c:
        with pytest.raises(errors.EOPTIM) as ei:
            c.declare("w", 10, optimizer="rmsprop")
        assert "rmsprop" in ei.value.message
        c.declare("w", 10)
        with pytest.raises(errors.ECONFLICT) as ei:
            c.declare("w", 11)
        assert "'w'" in ei.value.message
        w = c.declare("v", 10)
        g = np.zeros(10, np.float32)
        g[3] = np.nan
        with pytest.raises(errors.ENONFINITE):
            w.push(g)
        np.testing.assert_array_equal(w.pull(), np.zeros(10, np.float32))  # nothing applied
        with pytest.raises(ValueError):
            w.push(np.zeros(11, np.float32))  # outside the table: refused before sending
        s = c.declare_sparse("e", 4)
        with pytest.raises(errors.EOPTIM):
            c.declare_sparse("f", 4, optimizer="momentum")
        with pytest.raises(ValueError):
            s.push([1, 2], np.zeros((2, 3), np.float32))
        # a re-declaration names the first difference, the shape first, and
        # the kinds in words
        with pytest.raises(errors.ECONFLICT) as ei:
            c.declare_sparse("e", 8, init="normal")
        assert "already declared with dim = 4, not 8" in ei.value.message, ei.value.message
        with pytest.raises(errors.ECONFLICT) as ei:
            c.declare("e", 10)
        assert "already declared as sparse, not dense" in ei.value.message, ei.value.message
        with pytest.raises(errors.ECONFLICT) as ei:
            c.declare_sparse("w", 4)
        assert "already declared as dense, not sparse" in ei.value.message, ei.value.message


def test_rank_outside_cluster(make_cluster):
    cl = make_cluster(servers=1, workers=2)
    with pytest.raises(errors.ERANK):
        cl.client(5)


def test_timeout_when_shard_dies(make_cluster):
    cl = make_cluster(servers=1)
    c = cl.client(0, request_timeout_ms=200, max_retries=2)
    w = c.declare("w", 10)
    cl.procs[0].kill()
    cl.procs[0].wait()
    t0 = time.monotonic()
    with pytest.raises(errors.ETIMEDOUT):
        w.pull()
    assert time.monotonic() - t0 < 5
    c.close()


def test_closed_client(make_cluster):
    cl = make_cluster(servers=1)
    c = cl.client(0)
    w = c.declare("w", 4)
    c.close()
    c.close()  # idempotent
    with pytest.raises(errors.ECLOSED):
        c.clock(0)
    with pytest.raises(errors.ECLOSED):
        w.pull()


def test_rank_from_env(monkeypatch):
    monkeypatch.setenv("ZEPS_RANK", "3")
    assert zeps.rank_from_env() == 3
    assert zeps.rank_from_env("5") == 5
    monkeypatch.setenv("ZEPS_RANK", "x")
    with pytest.raises(errors.ECONFIG) as ei:
        zeps.rank_from_env()
    assert "ZEPS_RANK" in ei.value.message


CHILD = textwrap.dedent("""
    import sys, time, numpy as np, zeps
    eps = sys.argv[1:]
    c = zeps.Client.from_endpoints(eps, 0, request_timeout_ms=60000)
    w = c.declare("w", 10)
    w.push(np.ones(10, np.float32), clock=0)
    print("parked", flush=True)
    t0 = time.monotonic()
    try:
        w.pull(clock=1)          # bsp: parked until rank 1 pushes clock 0
    except KeyboardInterrupt:
        print("interrupted %.2f" % (time.monotonic() - t0), flush=True)
        sys.exit(3)
    print("returned", flush=True)
""")


def test_ctrl_c_interrupts_a_wait(make_cluster):
    cl = make_cluster(servers=1, workers=2, consistency="bsp")
    p = subprocess.Popen([sys.executable, "-c", CHILD] + cl.endpoints, stdout=subprocess.PIPE,
                         text=True, env=dict(os.environ))
    assert p.stdout.readline().strip() == "parked"
    time.sleep(0.5)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=10)
    assert p.returncode == 3, out
    assert out.startswith("interrupted")
    assert time.monotonic() - t0 < 3


# The documented pattern, `with zeps.Client(...) as c:`, with a pull left in
# flight (parked under bsp) when Ctrl-C interrupts a second one: leaving the
# block must not wait out that request's retries (it did: 40 s and more).
# A child's SIGINT handler that notes when the signal came (got[0]).
NOTE_SIGINT = textwrap.dedent("""
    import signal, sys, time, numpy as np, zeps
    got = []
    def on_int(*_):
        got.append(time.monotonic())
        raise KeyboardInterrupt
    signal.signal(signal.SIGINT, on_int)
""")
WITH_CHILD = NOTE_SIGINT + textwrap.dedent("""
    eps = sys.argv[1:]
    try:
        with zeps.Client.from_endpoints(eps, 0, request_timeout_ms=2000, max_retries=30) as c:
            w = c.declare("w", 10)
            w.push(np.ones(10, np.float32), clock=0)
            r = w.pull_async(clock=1)    # parked: rank 1 never pushes clock 0
            print("parked", flush=True)
            w.pull(clock=1)
    except KeyboardInterrupt:
        print("left %.3f" % (time.monotonic() - got[0]), flush=True)
        sys.exit(3)
""")


def test_ctrl_c_in_with_block_leaves_at_once(make_cluster):
    cl = make_cluster(servers=2, workers=2, consistency="bsp")
    p = subprocess.Popen([sys.executable, "-c", WITH_CHILD] + cl.endpoints,
                         stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    assert p.stdout.readline().strip() == "parked"
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 3, out
    left = float(out.split()[1])
    assert left < 1.0, out       # from the signal to the end of the with block
    for k in range(2):            # and it said BYE on the way out
        assert "worker 0 left" in cl.log(k)


# Ctrl-C while zeps.Client() waits for shards that are not up yet.
CONNECT_CHILD = NOTE_SIGINT + textwrap.dedent("""
    print("connecting", flush=True)
    try:
        zeps.Client(sys.argv[1], rank=0)
    except KeyboardInterrupt:
        print("stopped %.3f" % (time.monotonic() - got[0]), flush=True)
        sys.exit(3)
""")


def test_ctrl_c_while_connecting_stops_at_once(tmp_path):
    conf = tmp_path / "cluster.conf"
    conf.write_text('cluster = { servers = [ "ipc://%s/none" ]; workers = 1; '
                    'hello_timeout_ms = 60000; };\n' % tmp_path)
    p = subprocess.Popen([sys.executable, "-c", CONNECT_CHILD, str(conf)],
                         stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    assert p.stdout.readline().strip() == "connecting"
    time.sleep(1.0)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 3, out
    assert float(out.split()[1]) < 1.0, out
    assert time.monotonic() - t0 < 10


def test_constructor_errors_carry_the_detail(tmp_path):
    bad = tmp_path / "bad.conf"
    bad.write_text('cluster = { servers = [ "ipc://%s/s0" ]; workers = 2;\n'
                   '  bogus_key = 3; };\n' % tmp_path)
    with pytest.raises(errors.ECONFIG) as ei:
        zeps.Client(str(bad), rank=0)
    assert f"{bad}:2: unknown key 'cluster.bogus_key'" in ei.value.message
    ok = tmp_path / "ok.conf"
    ok.write_text('cluster = { servers = [ "ipc://%s/s0" ]; workers = 2; '
                  'hello_timeout_ms = 500; };\n' % tmp_path)
    with pytest.raises(errors.ERANK) as ei:
        zeps.Client(str(ok), rank=7)
    assert "rank 7 is outside the cluster of 2 workers" in ei.value.message
    with pytest.raises(errors.ETIMEDOUT) as ei:
        zeps.Client(str(ok), rank=0)
    assert f"shard 0 at ipc://{tmp_path}/s0 did not answer HELLO" in ei.value.message


def test_missing_rank_names_every_way_to_give_it(monkeypatch):
    for k in ("ZEPS_RANK", "JOB_COMPLETION_INDEX", "SLURM_PROCID", "RANK", "LOCAL_RANK",
              "WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(errors.ECONFIG) as ei:
        zeps.rank_from_env()
    for words in ("rank=", "ZEPS_RANK", "torchrun", "RANK"):
        assert words in ei.value.message
    # torchrun's variables give the rank; ZEPS_RANK still wins
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert zeps.rank_from_env() == 2
    monkeypatch.setenv("ZEPS_RANK", "1")
    assert zeps.rank_from_env() == 1


RESULT_CHILD = textwrap.dedent("""
    import sys, time, zeps
    print(zeps.write_result(3, {"final_accuracy": 0.5, "stopped": False}), flush=True)
    time.sleep(30)
""")


def test_write_result_then_sigterm_exits_0(tmp_path):
    """A worker that wrote its result exits 0 when its launcher stops it."""
    p = subprocess.Popen([sys.executable, "-c", RESULT_CHILD], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, ZEPS_RESULT_DIR=str(tmp_path)))
    path = p.stdout.readline().strip()
    assert path == str(tmp_path / "worker-3.json")
    p.send_signal(signal.SIGTERM)
    assert p.wait(10) == 0
    import json
    with open(path) as f:
        assert json.load(f) == {"final_accuracy": 0.5, "stopped": False, "rank": 3}


# The interpreter's shutdown: module globals are torn down (here an object
# whose __del__ takes 3 s, as torch's teardown can under load) after the
# interpreter has reset the signal handlers it installed.
SHUTDOWN_CHILD = textwrap.dedent("""
    import signal, sys, time, zeps
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(5))   # the program's own
    class Slow:
        def __del__(self):
            print("tearing down", flush=True)
            time.sleep(3)
    slow = Slow()
    print(zeps.write_result(4, {"stopped": False}), flush=True)
""")


def test_sigterm_during_interpreter_shutdown_exits_0(tmp_path):
    """A SIGTERM that reaches a finished worker while Python shuts down
    (the Slurm job's Python workers, killed with 143) still exits 0."""
    p = subprocess.Popen([sys.executable, "-c", SHUTDOWN_CHILD], stdout=subprocess.PIPE,
                         text=True, env=dict(os.environ, ZEPS_RESULT_DIR=str(tmp_path)))
    assert p.stdout.readline().strip() == str(tmp_path / "worker-4.json")
    assert p.stdout.readline().strip() == "tearing down"
    p.send_signal(signal.SIGTERM)
    assert p.wait(10) == 0
