"""mutate_ledger.py - the ledger of tests/mutate.py (docs/testing.md,
"The mutant ledger").

tests/mutants.jsonl holds one JSON object a line, appended and never
rewritten: a mutant's run (id, file, line, old, new, op, result, tests,
killed_by, commit, date) or a mark written by hand (id, mark, reason,
date): "equivalent" for a survivor that no test can kill, "killed" for one
a test kills outside the runs (LeakSanitizer on a dropped free). A
mutant's id is a hash of its file and its two line texts, so that a run
of the same mutant later (after a test was added) replaces the earlier
verdict. The report counts an entry only while the line it mutated is
still that text in the file as it is now, near where it was (it names the
others stale): the report is about the tree as it is, not as it was.
"""
import hashlib
import json
import os
import subprocess
import time

NEAR = 200  # how far a mutated line may have moved and still be the same one
RESULTS = ("killed", "survived", "stillborn")


def mutant_id(path, old, new):
    """The id of a mutant: its file and both texts of its line."""
    h = hashlib.sha1("\0".join((path, old.strip(), new.strip())).encode())
    return h.hexdigest()[:10]


def head_commit(src):
    p = subprocess.run(["git", "-C", src, "rev-parse", "--short=10", "HEAD"],
                       capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else "?"


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def entry(m, result, tests, killed_by, commit, seconds):
    """The ledger line of one mutant's run (m: a mutant of mutate.py,
    its line 0-based)."""
    return {"id": mutant_id(m["file"], m["old"], m["new"]), "file": m["file"],
            "line": m["line"] + 1, "old": m["old"].strip(), "new": m["new"].strip(),
            "op": m["op"], "result": result, "tests": tests, "killed_by": killed_by,
            "commit": commit, "date": now(), "seconds": seconds}


def append(path, obj):
    """Append one line to the ledger (made if absent)."""
    with open(path, "a") as fh:
        fh.write(json.dumps(obj, sort_keys=True) + "\n")


def read(path):
    """The ledger's lines, in order; a line that is not an object with an
    id raises ValueError naming the line."""
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as fh:
        for k, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as e:
                raise ValueError(f"{path}:{k}: not JSON ({e})") from None
            if not isinstance(obj, dict) or "id" not in obj or not (
                    obj.get("result") in RESULTS or obj.get("mark") in ("equivalent", "killed")):
                raise ValueError(f"{path}:{k}: neither a mutant's run nor a mark")
            out.append(obj)
    return out


def mark(path, ident, kind, reason):
    """Append a mark to the mutant whose id starts with ident; returns the
    full id. Raises ValueError when no run or several have that prefix, or
    the reason is empty."""
    if not reason.strip():
        raise ValueError("a mark needs its reason")
    ids = {e["id"] for e in read(path) if "result" in e and e["id"].startswith(ident)}
    if len(ids) != 1:
        raise ValueError(f"{len(ids)} mutants in {path} have an id starting with {ident!r}")
    full = ids.pop()
    append(path, {"id": full, "mark": kind, "reason": reason.strip(), "date": now()})
    return full


def locate(e, lines):
    """The current 1-based line of entry e's original text in lines (the
    file now), the nearest to where it was within NEAR; None if gone."""
    best = None
    for i in range(max(0, e["line"] - 1 - NEAR), min(len(lines), e["line"] + NEAR)):
        if lines[i].strip() == e["old"] and (
                best is None or abs(i + 1 - e["line"]) < abs(best - e["line"])):
            best = i + 1
    return best


def fold(entries):
    """One state per mutant id: the last run's verdict and the marks since
    any run (a mark holds over later runs: a survivor marked equivalent
    that survives again stays equivalent; one killed later is killed)."""
    state = {}
    for e in entries:
        if "result" in e:
            prev = state.get(e["id"], {})
            state[e["id"]] = dict(e, marks=prev.get("marks", {}))
        elif e["id"] in state:
            state[e["id"]]["marks"][e["mark"]] = e["reason"]
    return state


def verdict(s):
    """killed / survived / equivalent / stillborn of one folded mutant."""
    if s["result"] == "survived":
        if "killed" in s["marks"]:
            return "killed"
        if "equivalent" in s["marks"]:
            return "equivalent"
    return s["result"]


def under(path, roots):
    return any(path == r.rstrip("/") or path.startswith(r.rstrip("/") + "/") for r in roots)


def tally(state, roots, read_file):
    """Count the mutants of files under roots. read_file(path) gives the
    file's text now (None if gone). Returns (rows, listed): rows maps a
    folder (and "total") to counts of killed, survived, equivalent,
    stillborn, stale; listed is the survivors, equivalents and hand kills
    with their reasons, each (verdict, state, current line)."""
    rows, listed, texts = {}, [], {}
    for s in sorted(state.values(), key=lambda s: (s["file"], s["line"], s["id"])):
        if not under(s["file"], roots):
            continue
        if s["file"] not in texts:
            t = read_file(s["file"])
            texts[s["file"]] = t.split("\n") if t is not None else []
        at = locate(s, texts[s["file"]])
        v = verdict(s) if at else "stale"
        root = next(r for r in roots if under(s["file"], [r]))
        for key in (os.path.dirname(s["file"]) + "/", "all of " + root.rstrip("/") + "/",
                    "total"):
            row = rows.setdefault(key, dict.fromkeys(RESULTS + ("equivalent", "stale"), 0))
            row[v] += 1
        if at and (v in ("survived", "equivalent") or "killed" in s["marks"]):
            listed.append((v, s, at))
    return rows, listed


def score(row):
    """killed / (compiled - equivalent); None with nothing to count."""
    den = row["killed"] + row["survived"]
    return row["killed"] / den if den else None


def report(path, roots, src):
    """The ledger's report over roots, as text."""
    def read_file(p):
        try:
            with open(os.path.join(src, p)) as fh:
                return fh.read()
        except OSError:
            return None
    rows, listed = tally(fold(read(path)), roots, read_file)
    out = [f"{'folder':30} {'killed':>6} {'surv.':>6} {'equiv.':>6} {'stillb.':>7} "
           f"{'stale':>6} {'score':>7}"]
    keys = sorted(k for k in rows if k != "total" and not k.startswith("all of "))
    keys += sorted(k for k in rows if k.startswith("all of ")) + (["total"] if rows else [])
    for key in keys:
        r = rows[key]
        sc = score(r)
        out.append(f"{key:30} {r['killed']:6} {r['survived']:6} {r['equivalent']:6} "
                   f"{r['stillborn']:7} {r['stale']:6} "
                   f"{'-' if sc is None else f'{100 * sc:.1f} %':>7}")
    for v, s, at in listed:
        why = s["marks"].get("killed" if v == "killed" else "equivalent", "")
        out.append(f"\n{v} {s['id']} {s['file']}:{at} {s['op']}\n    - {s['old']}\n"
                   f"    + {s['new']}" + (f"\n    {why}" if why else ""))
    return "\n".join(out)
