#!/usr/bin/python3
"""bsp_mlp_moves.py - the issue's first bar, end to end (docs/elastic.md,
"Dense pieces under bsp"): zeps-worker's MLP (Fashion-MNIST, 6,000
examples, hidden 64, momentum) under bsp with 3 workers on 2 shards, run
twice: once undisturbed, once going 2 -> 3 -> 2 shards while it trains
(a third zeps-server with --join, `zepsctl shards add`, `shards remove 2`,
`shards retire 2`, the third shard stopped). Every worker's result
(final loss and accuracy, the loss curve) must be the same bits in both.

  bsp_mlp_moves.py --bin DIR --dir DIR

Exit status 0 when both runs ended, every command exited 0 while every
worker still trained, dense pieces moved (the zepsctl logs' cut-over
lines; the held bsp pushes they handed over are printed), and the results
are equal; 1 otherwise (said why).
"""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

WORKERS = 3


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def write_conf(run, ports):
    servers = ", ".join(f'"tcp://127.0.0.1:{p}"' for p in ports)
    path = f"{run}/cluster.conf"
    with open(path, "w") as f:
        f.write(f"""cluster = {{
    servers = [ {servers} ];
    workers = {WORKERS};
    consistency = "bsp";
}};
training = {{
    model = "mlp"; epochs = 200; batch_size = 64; hidden = 64;
    optimizer = "momentum"; lr = 0.025; momentum = 0.9; seed = 1;
    max_train_examples = 6000;
    result_dir = "{run}";
}};
""")
    return path


def spawn(argv, log):
    return subprocess.Popen(argv, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)


def ctl(binp, conf, run, name, args, wrk):
    """zepsctl args; 0 exit and every worker still training, or exit 1."""
    r = subprocess.run([f"{binp}/zepsctl"] + args + ["--config", conf], capture_output=True,
                       text=True, timeout=120)
    with open(f"{run}/{name}.log", "w") as f:
        f.write(r.stdout + r.stderr)
    print(f"zepsctl {' '.join(args)}: exit {r.returncode}", flush=True)
    if r.returncode != 0:
        sys.exit(f"bsp_mlp_moves: zepsctl {name} failed:\n{r.stdout}{r.stderr}")
    if any(w.poll() is not None for w in wrk):
        sys.exit(f"bsp_mlp_moves: a worker ended before zepsctl {name} did: the job is too "
                 "short for this machine's speed")


def wait_training(run, wrk):
    """Until every worker logged its first epoch (its tables declared, its
    steps going), then half a second more; exit 1 after 120 s."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < 120:
        logs = [open(f"{run}/worker-{r}.log").read() for r in range(WORKERS)]
        if all("epoch 1/" in text for text in logs):
            time.sleep(0.5)
            return
        if any(w.poll() is not None for w in wrk):
            break
        time.sleep(0.05)
    sys.exit("bsp_mlp_moves: the workers did not begin training")


def run_job(binp, top, name, moves):
    run = f"{top}/{name}"
    os.makedirs(run, exist_ok=True)
    ports = [free_port() for _ in range(3)]
    conf = write_conf(run, ports[:2])
    srv = [spawn([f"{binp}/zeps-server", "--config", conf, "--shard", str(k)],
                 f"{run}/server-{k}.log") for k in range(2)]
    wrk = [spawn([f"{binp}/zeps-worker", "--config", conf, "--rank", str(r)],
                 f"{run}/worker-{r}.log") for r in range(WORKERS)]
    extra = []
    try:
        if moves:
            wait_training(run, wrk)
            ep = f"tcp://127.0.0.1:{ports[2]}"
            extra.append(spawn([f"{binp}/zeps-server", "--config", conf, "--shard", "2",
                                "--join", ep], f"{run}/server-2.log"))
            time.sleep(0.3)
            ctl(binp, conf, run, "add", ["shards", "add", ep], wrk)
            time.sleep(1.0)
            ctl(binp, conf, run, "remove", ["shards", "remove", "2"], wrk)
            ctl(binp, conf, run, "retire", ["shards", "retire", "2"], wrk)
            time.sleep(1.0)  # every worker clocked since: none waits for shard 2
            extra[0].send_signal(signal.SIGTERM)
            if extra[0].wait(timeout=20) != 0:
                sys.exit("bsp_mlp_moves: shard 2 did not exit 0 after its retirement")
            if any(w.poll() is not None for w in wrk):
                sys.exit("bsp_mlp_moves: a worker ended before shard 2 stopped")
        try:
            rcs = [w.wait(timeout=180) for w in wrk]
        except subprocess.TimeoutExpired:
            sys.exit(f"bsp_mlp_moves: {name}: the workers did not end within 180 s (logs in "
                     f"{run})")
        if rcs != [0] * WORKERS:
            sys.exit(f"bsp_mlp_moves: {name}: workers exited {rcs} (logs in {run})")
    finally:
        for p in wrk + srv + extra:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in srv + extra:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
    return [json.load(open(f"{run}/worker-{r}.json")) for r in range(WORKERS)]


def cutovers(run):
    """The dense moves of the add and remove logs, and the held pushes they
    handed over."""
    moves = held = 0
    for name in ("add", "remove"):
        for line in open(f"{run}/{name}.log"):
            m = re.match(r"cut-over: \d+ elements(?: and (\d+) held bsp pushes)? in", line)
            if m:
                moves += 1
                held += int(m.group(1) or 0)
    return moves, held


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()
    base = run_job(a.bin, a.dir, "still", False)
    moved = run_job(a.bin, a.dir, "moved", True)
    keys = ("iterations", "final_loss", "final_accuracy", "curve")
    for r in range(WORKERS):
        print(f"worker {r}: final loss {moved[r]['final_loss']!r} with moves, "
              f"{base[r]['final_loss']!r} without")
        for k in keys:
            if moved[r].get(k) != base[r].get(k):
                sys.exit(f"bsp_mlp_moves: worker {r}: {k} differs from the run without moves")
    moves, held = cutovers(f"{a.dir}/moved")
    print(f"bsp_mlp_moves: {moves} dense moves, {held} held bsp pushes handed over")
    if moves == 0:
        sys.exit("bsp_mlp_moves: no dense piece moved")
    print("bsp_mlp_moves: every worker's result is the same with and without the moves")


if __name__ == "__main__":
    main()
