#!/usr/bin/python3
"""bench_elastic.py - live moves at the CTR job's scale (docs/elastic.md,
"Cost": "The CTR job 3 -> 4 -> 3").

Runs the CTR job (deploy/local/ctr.conf's model: logistic regression + a
factorization machine on the Criteo-format data set of
deploy/local/run-ctr.sh) on 3 shards and 4 workers, async, twice in one
invocation: once undisturbed, once with moves. In the second run, after
--before seconds of training, it starts a 4th shard with `zeps-server
--join`, runs `zepsctl shards add` (the map naming it, then live moves
until rows per shard are within +-10 %), lets the job train --gap seconds,
runs `zepsctl shards remove 3` (every slot of the new shard moved back by
live moves; both with --max-mb-s N when given: the copy's pace), reads shard 3's counters and stops it. It prints:

- the final test AUC of both runs (rank 0's evaluation after the barrier);
- examples/s summed over the workers before, during and after each
  command (the workers' zeps_worker_examples_total, read every --poll s);
- the longest step of any worker in each window, two ways: the longest
  time a worker's zeps_worker_steps_total did not move (a bound within
  one --poll), and the highest bucket of zeps_worker_step_seconds that
  gained a step (a step holds the wait for the pushes of the step before:
  max_inflight 1);
- rows per shard after the add and after the removal (STATS);
- each move's rows, MB, seconds and cut-over (zepsctl's summary lines),
  and bytes moved per second beside raw ZeroMQ loopback throughput
  measured in the same run (`zepsctl bench --only raw`, tcp, after the
  moves while the job trains on);
- the push oracle: per rank, the pushes the shards applied (STATS
  per-worker `pushes`, summed over the four shards, shard 3's read just
  before it stopped) against the push requests the worker counted
  acknowledged (`pushes_acked`); equal means every acknowledged push was
  applied once, at one shard, and none was applied that was not
  acknowledged.

  bench_elastic.py [--bin DIR] [--epochs E] [--before S] [--gap S]
                   [--dir DIR] [--json PATH] [--no-baseline] [--no-raw]
                   [--check] [--max-mb-s N]

Exit status 0 when both runs finished and the oracle held; the issue's
bars (AUC, stall, examples/s, migration speed) are printed, not enforced.
With --check (ctest's elastic_ctr, a small data set) it also fails unless
every command exited 0, the workers trained during both commands and on
after shard 3 stopped, rows per shard were within +-10 % of the mean
after the add, and shard 3 held no row after the removal.
"""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def data_dir(binp, train, test, seed):
    cache = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    d = os.environ.get("ZEPS_CTR_DATA") or f"{cache}/zeps/criteo-gen-{train}-{test}-seed{seed}"
    if not os.path.exists(f"{d}/truth.json"):
        os.makedirs(d, exist_ok=True)
        subprocess.run([f"{binp}/zepsctl", "gen-criteo", "--out", d, "--train", str(train),
                        "--test", str(test), "--seed", str(seed)], check=True)
    return d


def write_conf(run, data, ports, epochs):
    """deploy/local/ctr.conf with three servers, `epochs` and one evaluation."""
    text = open(f"{SRC}/deploy/local/ctr.conf").read()
    servers = ", ".join(f'"tcp://127.0.0.1:{p}"' for p in ports)
    text = re.sub(r"servers = \[[^\]]*\];", f"servers = [ {servers} ];", text)
    text = text.replace("@DATA@", data)
    text = re.sub(r"epochs = \d+;", f"epochs = {epochs};", text)
    text = re.sub(r"eval_every = \d+;", f"eval_every = {epochs};", text)
    text = text.replace("training = {", f'training = {{\n    result_dir = "{run}";', 1)
    path = f"{run}/cluster.conf"
    with open(path, "w") as f:
        f.write(text)
    return path


def spawn(argv, log):
    return subprocess.Popen(argv, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)


def scrape(port):
    """A worker's step and example counters and step histogram, or None."""
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1).read()
    except OSError:
        return None
    out = {"buckets": {}}
    for line in body.decode().splitlines():
        if line.startswith("zeps_worker_steps_total{"):
            out["steps"] = float(line.split()[-1])
        elif line.startswith("zeps_worker_examples_total{"):
            out["examples"] = float(line.split()[-1])
        elif line.startswith("zeps_worker_step_seconds_bucket{"):
            le = re.search(r'le="([^"]+)"', line).group(1)
            out["buckets"][le] = float(line.split()[-1])
    return out if "steps" in out else None


class Sampler(threading.Thread):
    """Every `poll` s, each worker's counters: samples[rank] = [(t, metrics)]."""

    def __init__(self, ports, poll):
        super().__init__(daemon=True)
        self.ports, self.poll, self.stop = ports, poll, False
        self.samples = [[] for _ in ports]

    def run(self):
        while not self.stop:
            for r, p in enumerate(self.ports):
                m = scrape(p)
                if m:
                    self.samples[r].append((time.monotonic(), m))
            time.sleep(self.poll)

    def examples(self):
        last = [s[-1][1]["examples"] if s else 0 for s in self.samples]
        return sum(last)


def window(sampler, t0, t1):
    """examples/s summed over the workers in [t0, t1]; the longest time a
    worker's step count stood still; the highest step bucket that gained."""
    eps, still, top = 0.0, 0.0, 0.0
    for s in sampler.samples:
        w = [x for x in s if t0 <= x[0] <= t1]
        if len(w) < 2:
            continue
        eps += (w[-1][1]["examples"] - w[0][1]["examples"]) / (w[-1][0] - w[0][0])
        moved = w[0][0]
        for (ta, a), (tb, b) in zip(w, w[1:]):
            if b["steps"] > a["steps"]:
                still = max(still, tb - moved)
                moved = tb
        # cumulative buckets: the lowest le that holds every step of the
        # window bounds its longest step
        gain_inf = w[-1][1]["buckets"]["+Inf"] - w[0][1]["buckets"]["+Inf"]
        les = sorted((float(le), n - w[0][1]["buckets"].get(le, 0))
                     for le, n in w[-1][1]["buckets"].items() if le != "+Inf")
        bound = next((le for le, g in les if g >= gain_inf), float("inf"))
        top = max(top, bound)
    return {"t0": t0, "t1": t1, "examples_per_s": eps, "longest_still_s": still,
            "step_bucket_le_s": top}


def stats(binp, conf):
    p = subprocess.run([f"{binp}/zepsctl", "stats", "--config", conf, "--json"],
                       capture_output=True, text=True, timeout=60)
    try:
        return json.loads(p.stdout)
    except ValueError:
        return []


def rows_per_shard(shards):
    return {s.get("shard"): sum(t.get("rows", 0) for t in s.get("tables", [])
                                if t.get("kind") == "sparse")
            for s in shards if s.get("answered")}


def ctl(binp, args, log, rec):
    t0 = time.monotonic()
    p = subprocess.run([f"{binp}/zepsctl"] + args, capture_output=True, text=True, timeout=900)
    t1 = time.monotonic()
    with open(log, "a") as f:
        f.write(f"$ zepsctl {' '.join(args)}\n{p.stdout}{p.stderr}exit {p.returncode}\n")
    moves = [dict(kv.split("=") for kv in line.split()[1:])
             for line in p.stdout.splitlines() if line.startswith("summary:")]
    rec.append({"cmd": " ".join(args[:3]), "rc": p.returncode, "t0": t0, "t1": t1,
                "moves": moves})
    return p.returncode, t0, t1


def run_job(a, binp, data, name, moves):
    run = f"{a.dir}/{name}"
    os.makedirs(run, exist_ok=True)
    ports = [free_port() for _ in range(3)]
    conf = write_conf(run, data, ports, a.epochs)
    srv = [spawn([f"{binp}/zeps-server", "--config", conf, "--shard", str(k)],
                 f"{run}/server-{k}.log") for k in range(3)]
    mports = [free_port() for _ in range(4)]
    wrk = [spawn([f"{binp}/zeps-worker", "--config", conf, "--rank", str(r),
                  "--metrics-listen", f"127.0.0.1:{mports[r]}"], f"{run}/worker-{r}.log")
           for r in range(4)]
    sampler = Sampler(mports, a.poll)
    sampler.start()
    res = {"name": name, "dir": run, "commands": []}
    try:
        if moves:
            drive_moves(a, binp, conf, run, sampler, wrk, res)
        rcs = [w.wait(timeout=a.timeout) for w in wrk]
        res["end"] = time.monotonic()
        res["worker_rc"] = rcs
        res["stats_end"] = stats(binp, conf)
    finally:
        sampler.stop = True
        for p in wrk + srv + res.pop("extra", []):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in srv:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
    res["sampler"] = sampler
    res["results"] = [json.load(open(f"{run}/worker-{r}.json")) if os.path.exists(
        f"{run}/worker-{r}.json") else {} for r in range(4)]
    return res


def wait_training(sampler, wrk, secs):
    """Until the workers trained `secs` seconds (all four report steps)."""
    while not all(s and s[-1][1]["steps"] > 0 for s in sampler.samples):
        if any(w.poll() is not None for w in wrk):
            raise RuntimeError("a worker ended before training started")
        time.sleep(0.1)
    t = time.monotonic()
    time.sleep(secs)
    return t


def quiet(binp, conf, k, settle=1.0, limit=30.0):
    """Wait until no worker's clock moved on shard k for `settle` s (each
    learnt a map without k, so none sends it a CLOCK any more: a removed
    shard stopped before that fails their CLOCKs, docs/elastic.md); the
    last STATS and the seconds waited."""
    t0 = time.monotonic()
    seen, since = None, t0
    while True:
        st = stats(binp, conf)
        clocks = [(w["rank"], w["clock"]) for s in st if s.get("shard") == k
                  for w in s.get("workers", [])]
        now = time.monotonic()
        if clocks != seen:
            seen, since = clocks, now
        elif now - since >= settle or now - t0 > limit:
            return st, now - t0
        time.sleep(0.2)


def drive_moves(a, binp, conf, run, sampler, wrk, res):
    log, rec = f"{run}/zepsctl.log", res["commands"]
    res["t_train"] = wait_training(sampler, wrk, a.before)
    p4 = free_port()
    ep = f"tcp://127.0.0.1:{p4}"
    s3 = spawn([f"{binp}/zeps-server", "--config", conf, "--shard", "3", "--join", ep],
               f"{run}/server-3.log")
    res["extra"] = [s3]
    time.sleep(0.5)
    pace = ["--max-mb-s", f"{a.max_mb_s:g}"] if a.max_mb_s > 0 else []
    ctl(binp, ["shards", "add", ep, "--config", conf] + pace, log, rec)
    res["rows_after_add"] = rows_per_shard(stats(binp, conf))
    time.sleep(a.gap)
    ctl(binp, ["shards", "remove", "3", "--config", conf] + pace, log, rec)
    res["rows_after_remove"] = rows_per_shard(stats(binp, conf))
    st, res["quiet_s"] = quiet(binp, conf, 3)
    res["shard3_stats"] = [s for s in st if s.get("shard") == 3]
    s3.send_signal(signal.SIGTERM)
    s3.wait(timeout=20)
    res["t_stopped"] = time.monotonic()
    if a.no_raw:
        return
    # raw ZeroMQ loopback in the same run, while the job trains on
    p = subprocess.run([f"{binp}/zepsctl", "bench", "--only", "raw", "--sizes", "256K,4M",
                        "--reps", "1", "--json", f"{run}/raw.json"], capture_output=True,
                       text=True, timeout=300)
    with open(log, "a") as f:
        f.write(f"$ zepsctl bench --only raw\n{p.stdout}{p.stderr}exit {p.returncode}\n")
    res["raw"] = raw_mbps(f"{run}/raw.json")
    res["t_raw_end"] = time.monotonic()


def oracle(res):
    """Per rank: pushes applied (the shards' STATS, shard 3's before it
    stopped) against pushes acknowledged (the worker's result)."""
    shards = [s for s in res.get("stats_end", []) if s.get("answered") and s.get("shard") != 3]
    shards += res.get("shard3_stats", [])
    out, ok = [], True
    for r in range(4):
        applied = sum(w["pushes"] for s in shards for w in s.get("workers", [])
                      if w["rank"] == r)
        acked = res["results"][r].get("pushes_acked")
        ok = ok and acked is not None and applied == acked
        out.append((r, applied, acked))
    return ok, out


def raw_mbps(path):
    """`zepsctl bench --only raw`'s JSON: {payload bytes: raw push MB/s}."""
    try:
        return {r["bytes"]: r["raw"]["push_MBps"] for r in json.load(open(path))["results"]}
    except (OSError, ValueError, KeyError):
        return {}


def windows(res):
    """The windows of a run with moves: before, during and after each command."""
    s, c = res["sampler"], res["commands"]
    add, rm = c[0], c[1]
    return [("before the add", res["t_train"], add["t0"]),
            ("during shards add", add["t0"], add["t1"]),
            ("between (4 shards)", add["t1"], rm["t0"]),
            ("during shards remove 3", rm["t0"], rm["t1"]),
            ("after (3 shards)", rm["t1"], res["t_stopped"])], s


def report(a, base, moved):
    out = {"command": " ".join(sys.argv), "epochs": a.epochs}
    auc = lambda r: r["results"][0].get("final_auc") if r else None
    eps = lambda r: sum(x.get("examples_per_s", 0) for x in r["results"]) if r else None
    print(f"\nbench_elastic: CTR job, 3 shards x 4 workers, async, {a.epochs} epochs")
    if base:
        print(f"  without moves: AUC {auc(base)}, {eps(base):,.0f} examples/s "
              f"(whole run, sum of workers), worker exits {base['worker_rc']}")
        out["auc_without"] = auc(base)
    out["max_mb_s"] = a.max_mb_s
    print(f"  moves paced at --max-mb-s {a.max_mb_s:g}" if a.max_mb_s > 0 else
          "  moves unpaced (no --max-mb-s)")
    print(f"  with moves:    AUC {auc(moved)}, {eps(moved):,.0f} examples/s, "
          f"worker exits {moved['worker_rc']}")
    out["auc_with"] = auc(moved)
    if base and auc(base) is not None and auc(moved) is not None:
        print(f"  AUC difference {auc(moved) - auc(base):+.4f} (bar: within 0.002)")
    ws, sampler = windows(moved)
    out["windows"] = []
    for name, t0, t1 in ws:
        w = window(sampler, t0, t1)
        w["name"] = name
        out["windows"].append(w)
        print(f"  {name:24s} {t1 - t0:6.2f} s  {w['examples_per_s']:10,.0f} examples/s  "
              f"longest step <= {w['step_bucket_le_s'] * 1e3:6.1f} ms (bucket), "
              f"steps still {w['longest_still_s'] * 1e3:6.1f} ms (poll {a.poll * 1e3:.0f} ms)")
    before = out["windows"][0]["examples_per_s"]
    for w in out["windows"][1:]:
        w["ratio"] = w["examples_per_s"] / before if before else None
    print("  examples/s over before: " + ", ".join(
        f"{w['name']} {w['ratio']:.2f}" for w in out["windows"][1:] if w["ratio"] is not None))
    for c in moved["commands"]:
        print(f"  zepsctl {c['cmd']}: exit {c['rc']}, {c['t1'] - c['t0']:.2f} s, "
              f"{len(c['moves'])} moves")
        for m in c["moves"]:  # a slot move's rows, or a dense range's elements
            what = "rows" if "rows" in m else "elements"
            r, b, s = int(m[what]), int(m["bytes"]), float(m["seconds"])
            print(f"    {r:9,} {what} {b / 1e6:7.1f} MB in {s:6.3f} s: "
                  f"{b / 1e6 / max(s, 1e-9):7.1f} MB/s, cut-over {m['cutover_ms']} ms")
    out["commands"] = [{k: v for k, v in c.items() if k not in ("t0", "t1")} | {
        "seconds": c["t1"] - c["t0"]} for c in moved["commands"]]
    moves = [m for c in moved["commands"] for m in c["moves"]]
    if moves:
        mb = sum(int(m["bytes"]) for m in moves) / 1e6
        secs = sum(float(m["seconds"]) for m in moves)
        out["move_mbps"] = mb / secs
        print(f"  all moves: {mb:.1f} MB in {secs:.2f} s = {mb / secs:.1f} MB/s; longest cut-over "
              f"{max(float(m['cutover_ms']) for m in moves):.1f} ms")
    raw = moved.get("raw", {})
    out["raw_mbps"] = raw
    if raw and moves:
        print("  raw ZeroMQ tcp loopback (zepsctl bench --only raw, same run): " + ", ".join(
            f"{k >> 10} KiB pages {v:.0f} MB/s (moves {out['move_mbps'] / v:.3f}x)"
            for k, v in raw.items()))
    print(f"  rows per shard after shards add: {moved.get('rows_after_add')}")
    print(f"  rows per shard after shards remove 3: {moved.get('rows_after_remove')}; shard 3 "
          f"stopped {moved.get('quiet_s', 0):.1f} s after, once no worker clocked there")
    out["rows_after_add"] = moved.get("rows_after_add")
    out["trained_after_stop"] = trained_after(moved["sampler"], moved.get("t_stopped"))
    out["rows_after_remove"] = moved.get("rows_after_remove")
    ok, per = oracle(moved)
    out["oracle"] = {"ok": ok, "ranks": per}
    print("  pushes applied (shards' STATS) / acknowledged (workers): " + "; ".join(
        f"rank {r} {ap}/{ac}" for r, ap, ac in per) + (" : equal" if ok else " : DIFFER"))
    if base:
        okb, perb = oracle(base)
        print("  without moves: " + "; ".join(f"rank {r} {ap}/{ac}" for r, ap, ac in perb) +
              (" : equal" if okb else " : DIFFER"))
        ok = ok and okb
    if a.check:
        ok = ok and checked(out)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    return ok and all(rc == 0 for rc in moved["worker_rc"]) and (
        not base or all(rc == 0 for rc in base["worker_rc"]))


def trained_after(sampler, t):
    """Examples the workers trained on after time t (shard 3 stopped)."""
    if t is None:
        return 0
    n = 0
    for s in sampler.samples:
        at = [m["examples"] for ts, m in s if ts <= t]
        n += s[-1][1]["examples"] - at[-1] if s and at else 0
    return n


def checked(out):
    """--check: the moves' outcome (see the module's text); says what failed."""
    bad = [f"zepsctl {c['cmd']} exited {c['rc']}" for c in out["commands"] if c["rc"] != 0]
    bad += [f"no training {w['name']}" for w in out["windows"][1:4:2]
            if not w["examples_per_s"] > 0]
    rows = [v for k, v in (out["rows_after_add"] or {}).items()]
    mean = sum(rows) / len(rows) if rows else 0
    if len(rows) != 4 or any(abs(v - mean) > 0.10 * mean for v in rows):
        bad.append(f"rows per shard after the add not within 10 % of the mean: {rows}")
    if not out["trained_after_stop"] > 0:
        bad.append("the workers did not train on after shard 3 stopped")
    if (out["rows_after_remove"] or {}).get(3, 1) != 0:
        bad.append(f"shard 3 holds rows after its removal: {out['rows_after_remove']}")
    for b in bad:
        print(f"  CHECK FAILED: {b}")
    return not bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.environ.get("ZEPS_BINDIR", f"{SRC}/build/bin"))
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--before", type=float, default=8.0, help="training before the add (s)")
    ap.add_argument("--gap", type=float, default=8.0, help="between the add and the removal (s)")
    ap.add_argument("--poll", type=float, default=0.05, help="metrics poll interval (s)")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-baseline", action="store_true", help="skip the run without moves")
    ap.add_argument("--no-raw", action="store_true", help="skip the raw ZeroMQ reference")
    ap.add_argument("--check", action="store_true", help="fail unless the moves went right")
    ap.add_argument("--max-mb-s", type=float, default=0.0,
                    help="pace of the moves' copy, passed to shards add/remove (0: unlimited)")
    a = ap.parse_args()
    a.dir = a.dir or tempfile.mkdtemp(prefix="zeps-elastic-")
    binp = os.path.abspath(a.bin)
    data = data_dir(binp, int(os.environ.get("ZEPS_CTR_TRAIN", 1000000)),
                    int(os.environ.get("ZEPS_CTR_TEST", 100000)),
                    int(os.environ.get("ZEPS_CTR_SEED", 1)))
    print(f"bench_elastic: data {data}, runs in {a.dir}", flush=True)
    base = None if a.no_baseline else run_job(a, binp, data, "without-moves", False)
    moved = run_job(a, binp, data, "with-moves", True)
    return 0 if report(a, base, moved) else 1


if __name__ == "__main__":
    sys.exit(main())
