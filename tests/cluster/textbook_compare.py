#!/usr/bin/python3
"""Hold a `zepsctl study --inject` run against the reference simulation.

  textbook_compare.py STUDY_JSON ZT_DELAY_SIM

Every run of the study (each cell of the steps table, each bisection run of
the stability part) is computed again by zt_delay_sim, the delayed-gradient
iteration in one process (tests/support/zt_delay_sim.c). A run matches when
both have the same outcome and, converged, updates to the threshold within
10% of the simulation's (both stalled or stable: final distances within 10%,
or both under 1e-5). Prints one line per run and exits 1 on any mismatch.
"""
import json
import math
import subprocess
import sys


def simulate(sim, study, run):
    schedule = run["inject"]
    args = [sim, schedule, str(run["s"]), repr(run["lr"]), run["function"], str(run["seed"]),
            str(study["workers"]), str(run["iterations"]), str(study["dim"]),
            repr(study["condition"]), repr(study["threshold"])]
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


def main():
    study = json.load(open(sys.argv[1]))
    if not study["inject"]:
        sys.exit("textbook_compare: not an --inject study")
    bad = 0
    for run in study["runs"]:
        outcome, updates, final = simulate(sys.argv[2], study, run)
        ok = matches(run, outcome, updates, final)
        bad += not ok
        print("%-4s %-9s s=%-3d lr=%-8.4g %-11s zeps %-9s %8s  simulation %-9s %8s  final %.3g / %.3g"
              % ("ok" if ok else "FAIL", run["part"], run["s"], run["lr"], run["function"],
                 run["outcome"], run["updates_to_threshold"], outcome,
                 "inf" if math.isinf(updates) else "%.0f" % updates,
                 run["final_rel_distance"] or float("nan"), final))
    print("%d passed, %d failed" % (len(study["runs"]) - bad, bad))
    sys.exit(1 if bad else 0)


main()
