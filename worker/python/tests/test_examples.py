"""The examples of worker/python/examples at a small size, as real worker
processes of a real cluster (rank in $ZEPS_RANK, cluster file in
$ZEPS_CONFIG, results in $ZEPS_RESULT_DIR)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import bin_path

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def run_workers(cl, n, script, *args):
    env = dict(os.environ, ZEPS_CONFIG=cl.conf, ZEPS_RESULT_DIR=cl.dir)
    procs = [subprocess.Popen([sys.executable, os.path.join(EXAMPLES, script)] + list(args),
                              env=dict(env, ZEPS_RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(n)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out
    with open(os.path.join(cl.dir, "worker-0.json")) as f:
        return json.load(f), outs[0]


@pytest.mark.skipif(not os.path.isdir("/usr/share/datasets/fashion-mnist"),
                    reason="dataset-fashion-mnist not installed")
def test_mnist_mlp_bsp(make_cluster):
    cl = make_cluster(servers=2, workers=2, consistency="bsp")
    res, out = run_workers(cl, 2, "mnist_mlp.py", "--epochs", "2", "--examples", "12000")
    assert res["final_accuracy"] > 0.75, out  # 2 epochs on a fifth of the data
    assert res["iterations"] == 2 * (12000 // 2 // 64)


@pytest.mark.parametrize("model", ["ctr", "dlrm"])
def test_ctr_dlrm(make_cluster, tmp_path, model):
    data = tmp_path / "data"
    subprocess.run([bin_path("zepsctl"), "gen-criteo", "--out", str(data), "--train", "40000",
                    "--test", "10000", "--seed", "2"], check=True, capture_output=True)
    with open(data / "truth.json") as f:
        truth = json.load(f)
    # dlrm under bsp: its AUC under async moves with the machine's load (the
    # order of the workers' pushes of the shared MLPs; docs/python.md), and
    # missed this bar once at a load of 17; under bsp it is the same bits
    # on every run
    cl = make_cluster(servers=2, workers=2, consistency="bsp" if model == "dlrm" else "async")
    res, out = run_workers(cl, 2, "ctr_dlrm.py", "--data", str(data), "--model", model,
                           "--profile")
    # a small run: clearly above what the dense fields alone give
    assert res["final_auc"] > truth["dense_only_test_auc"] + 0.02, out
    assert res["examples"] == 20000
    assert res["step_us"]["sparse_pull"] > 0 and res["step_us"]["step"] > 0, res


def test_staleness_sweep():
    out = subprocess.run([sys.executable, os.path.join(EXAMPLES, "staleness_sweep.py"),
                          "--iters", "80", "--settings", "bsp,ssp:2,async"],
                         capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, ZEPS_BINDIR=os.path.dirname(bin_path("x"))))
    assert out.returncode == 0, out.stderr
    rows = [l.split() for l in out.stdout.splitlines()[1:]]
    assert [r[0] for r in rows] == ["bsp", "ssp:2", "async"]
    assert all(float(r[1]) < 0.05 for r in rows), out.stdout  # every setting converges


@pytest.mark.skipif(not os.path.isdir("/usr/share/datasets/fashion-mnist"),
                    reason="dataset-fashion-mnist not installed")
def test_zepsctl_local_shows_every_rank(tmp_path):
    """zepsctl local echoes every rank's output, prefixed by rank: rank 0's
    every line, the others' rate-limited (one per 5 s, warnings always,
    their last line at the end); every line is in each worker's log."""
    prog = tmp_path / "talk.py"
    prog.write_text(textwrap.dedent("""
        import os, sys, time, zeps
        r = int(os.environ["ZEPS_RANK"])
        for i in range(30):
            print(f"step {i} of rank {r}", flush=True)
            time.sleep(0.01)
        if r == 2:
            print("x WARN rank 2 is slow", flush=True)
        print(f"last line of rank {r}", flush=True)
        zeps.write_result(r, {"final_accuracy": 0.5})
    """))
    out = subprocess.run([bin_path("zepsctl"), "local", "--servers", "1", "--workers", "3",
                          "--dir", str(tmp_path / "run"), "--exec", f"{sys.executable} {prog}"],
                         env=dict(os.environ), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    for r in range(3):
        mine = [x for x in lines if x.startswith(f"[rank {r}] ")]
        assert mine and mine[-1].endswith(f"last line of rank {r}"), mine
        with open(tmp_path / "run" / f"worker-{r}.log") as f:
            assert sum(x.startswith("step ") for x in f) == 30   # the log has them all
    assert sum(x.startswith("[rank 0] step ") for x in lines) == 30
    assert sum(x.startswith("[rank 1] step ") for x in lines) < 5   # rate-limited
    assert any(x.startswith("[rank 2] ") and x.endswith(" x WARN rank 2 is slow") for x in lines)
    assert any("lines in its log) last line of rank 1" in x for x in lines)


def test_zepsctl_local_exec_without_result(tmp_path):
    """A program that trains, exits 0 and writes no result: zepsctl local
    says how to write one, and the run is not called a success."""
    prog = tmp_path / "noresult.py"
    prog.write_text("import zeps\nwith zeps.Client() as c:\n    c.declare('w', 4)\n")
    env = dict(os.environ)
    out = subprocess.run([bin_path("zepsctl"), "local", "--servers", "1", "--workers", "2",
                          "--dir", str(tmp_path / "run"), "--exec", f"{sys.executable} {prog}"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stdout + out.stderr
    for r in (0, 1):
        assert f"worker {r} exited 0 but wrote no result" in out.stderr, out.stderr
    assert "zeps.write_result(rank" in out.stderr


def test_zepsctl_local_exec(tmp_path):
    """zepsctl local --exec runs the program as every worker of its local
    cluster, with the build tree's package on PYTHONPATH, and sums up the
    results the workers wrote."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # zepsctl must find the package itself
    cmd = (f"{sys.executable} {os.path.join(EXAMPLES, 'mnist_mlp.py')} "
           f"--epochs 1 --examples 8000")
    out = subprocess.run([bin_path("zepsctl"), "local", "--servers", "2", "--workers", "2",
                          "--dir", str(tmp_path / "run"), "--exec", cmd], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "running '" in out.stdout
    with open(tmp_path / "run" / "summary.json") as f:
        s = json.load(f)
    assert s["outcome"] == "done" and s["model"] == "exec" and s["exec"] == cmd
    assert s["final_accuracy"] > 0.7
    assert all(w["result_ok"] and w["exit_status"] == 0 for w in s["worker_results"])


def test_ctr_bsp_same_bits(make_cluster, tmp_path):
    """Under bsp a job with sparse tables is reproducible: three runs of the
    CTR example (embeddings and the dense MLP, two workers racing on two
    shards) end with the same test loss and AUC to the last bit. Sparse
    pushes are held for their round and merged in rank order; applied on
    arrival (before), the test loss differed in its third decimal."""
    data = tmp_path / "data"
    subprocess.run([bin_path("zepsctl"), "gen-criteo", "--out", str(data), "--train", "16000",
                    "--test", "4000", "--seed", "3"], check=True, capture_output=True)
    finals = []
    for _ in range(3):
        cl = make_cluster(servers=2, workers=2, consistency="bsp")
        res, out = run_workers(cl, 2, "ctr_dlrm.py", "--data", str(data), "--model", "dlrm")
        finals.append((res["final_loss"], res["final_auc"]))
    assert finals[0][1] > 0.6, finals
    assert finals[1] == finals[0] and finals[2] == finals[0], finals
