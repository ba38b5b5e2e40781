#!/usr/bin/python3
"""Hold a `zepsctl study --inject` run against the reference simulation.

  textbook_compare.py [--markdown FILE] STUDY_JSON ZT_DELAY_SIM

Every run of the study (each seed of each cell of the steps table, each
bisection run of the stability part) is computed again by zt_delay_sim, the
delayed-gradient iteration in one process (tests/support/zt_delay_sim.c); a
run that ended at the threshold (target_rel_distance, the workers stopped on
FINISH) against the simulation stopped there too. A run matches when both
have the same outcome and, converged, updates to the threshold within 10% of
the simulation's (both stalled or stable: final distances within 10%, or
both under 1e-5). Then every cell of the steps table: the study's median
over seeds against the simulation's median over the same seeds, within 10%,
and divergence (the median run not converging) exactly where the
simulation's. Prints one line per run and per cell, with
--markdown also the cells as a markdown table, and exits 1 on any mismatch.
"""
import json
import math
import statistics
import subprocess
import sys


def simulate(sim, study, run):
    args = [sim, run["inject"], str(run["s"]), repr(run["lr"]), run["function"], str(run["seed"]),
            str(study["workers"]), str(run["iterations"]), str(study["dim"]),
            repr(study["condition"]), repr(study["threshold"])]
    if run.get("target_rel_distance"):
        args.append("stop")
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout.split()
    return out[0], float(out[1]), float(out[2])


def close(a, b, tol=0.10):
    return abs(a - b) <= tol * abs(b)


def matches(run, outcome, updates, final):
    if run["outcome"] != outcome:
        return False
    if outcome == "converged" and run["part"] == "steps":
        return close(run["updates_to_threshold"], updates)
    if outcome == "diverges":
        return True
    fin = run["final_rel_distance"]
    return (fin < 1e-5 and final < 1e-5) or close(fin, final)


def median(updates):
    """The study's rule (ctl_study_report.c): the median over seeds, a run
    that did not converge counting as inf."""
    ups = sorted(updates)
    n = len(ups)
    return ups[n // 2] if n % 2 else 0.5 * (ups[n // 2 - 1] + ups[n // 2])


def fmt(v):
    return "—" if v is None else ("no" if math.isinf(v) else "%.0f" % v)


def check_runs(study, sim):
    bad, sims = 0, []
    for run in study["runs"]:
        outcome, updates, final = simulate(sim, study, run)
        sims.append((outcome, updates))
        ok = matches(run, outcome, updates, final)
        bad += not ok
        zu = run["updates_to_threshold"]
        print("%-4s %-9s s=%-3d lr=%-8.4g %-11s seed %-2d zeps %-9s %8s  simulation %-9s %8s  "
              "final %.3g / %.3g"
              % ("ok" if ok else "FAIL", run["part"], run["s"], run["lr"], run["function"],
                 run["seed"], run["outcome"], "inf" if zu is None else "%.0f" % zu, outcome,
                 "inf" if math.isinf(updates) else "%.0f" % updates,
                 run["final_rel_distance"] or float("nan"), final))
    print("runs: %d passed, %d failed" % (len(study["runs"]) - bad, bad))
    return bad, sims


def check_cells(study, sims):
    """Per cell (s, setting): medians of the study and of the simulation."""
    cells = {}
    for run, (outcome, updates) in zip(study["runs"], sims):
        if run["part"] != "steps":
            continue
        zu = run["updates_to_threshold"]
        zeps = math.inf if zu is None or run["outcome"] != "converged" else zu
        sim_u = updates if outcome == "converged" else math.inf
        c = cells.setdefault((run["s"], run["setting"]), ([], []))
        c[0].append(zeps)
        c[1].append(sim_u)
    bad, table = 0, {}
    for (s, setting), (zeps, simu) in sorted(cells.items()):
        z, m = median(zeps), median(simu)
        ok = (math.isinf(z) and math.isinf(m)) or (
            math.isfinite(z) and math.isfinite(m) and close(z, m))
        bad += not ok
        table[(s, setting)] = (z, m, ok)
        print("%-4s cell s=%-3d %s  zeps %8s  simulation %8s  (%d seeds)"
              % ("ok" if ok else "FAIL", s, setting, fmt(z), fmt(m), len(zeps)))
    print("cells: %d passed, %d failed" % (len(cells) - bad, bad))
    return bad, table


def markdown(table, path):
    settings = sorted({k[1] for k in table})
    rows = ["| s | " + " | ".join("%s: zeps / simulation" % k for k in settings) + " |",
            "|---|" + "---|" * len(settings)]
    for s in sorted({k[0] for k in table}):
        cells = []
        for k in settings:
            z, m, ok = table.get((s, k), (None, None, True))
            cells.append("%s / %s%s" % (fmt(z), fmt(m), "" if ok else " (differs)"))
        rows.append("| %d | %s |" % (s, " | ".join(cells)))
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


def main():
    args = sys.argv[1:]
    md = None
    if len(args) == 4 and args[0] == "--markdown":
        md, args = args[1], args[2:]
    if len(args) != 2:
        sys.exit(__doc__)
    study = json.load(open(args[0]))
    if not study["inject"]:
        sys.exit("textbook_compare: not an --inject study")
    bad, sims = check_runs(study, args[1])
    bad_cells, table = check_cells(study, sims)
    if md:
        markdown(table, md)
    print("%d passed, %d failed" % (len(study["runs"]) + len(table) - bad - bad_cells,
                                    bad + bad_cells))
    sys.exit(1 if bad or bad_cells else 0)


main()
