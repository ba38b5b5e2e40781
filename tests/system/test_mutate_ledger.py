#!/usr/bin/python3
"""The ledger of tests/mutate.py (tests/mutate_ledger.py): its lines read
and refused, a mutant's runs folded to the last verdict, the marks, and the
counts per folder, with an entry whose line changed or moved too far stale.
Runs on files in a scratch folder, builds nothing (a second or less)."""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import mutate_ledger as L  # noqa: E402

SRC_A = "int f(int a)\n{\n    if (a < 3)\n        return 1;\n    x = a;\n    return 0;\n}\n"


def mutant(path, line, old, new, op="cmp-flip"):
    return {"file": path, "line": line - 1, "old": old, "new": new, "op": op}


class Ledger(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="zeps-ledger-", dir=os.environ.get("TMPDIR"))
        self.path = os.path.join(self.dir, "mutants.jsonl")
        self.files = {"server/a.c": SRC_A, "server/sub/b.c": SRC_A, "common/c.c": SRC_A}

    def tearDown(self):
        shutil.rmtree(self.dir)

    def run_one(self, path, line, old, new, result, op="cmp-flip"):
        m = mutant(path, line, old, new, op)
        L.append(self.path, L.entry(m, result, ["t"], ["t"] if result == "killed" else [],
                                    "abc", 1.0))
        return L.mutant_id(path, old, new)

    def counts(self, roots=("server/",)):
        return L.tally(L.fold(L.read(self.path)), roots, self.files.get)

    def test_counts_per_folder_and_score(self):
        self.run_one("server/a.c", 3, "    if (a < 3)", "    if (a >= 3)", "killed")
        self.run_one("server/a.c", 3, "    if (a < 3)", "    if (a <= 3)", "survived", "cmp-edge")
        self.run_one("server/a.c", 5, "    x = a;", "    ;", "stillborn", "drop-assign")
        self.run_one("server/sub/b.c", 3, "    if (a < 3)", "    if (a >= 3)", "killed")
        self.run_one("common/c.c", 3, "    if (a < 3)", "    if (a >= 3)", "survived")
        rows, listed = self.counts()
        self.assertEqual(rows["server/"]["killed"], 1)
        self.assertEqual(rows["server/"]["survived"], 1)
        self.assertEqual(rows["server/"]["stillborn"], 1)
        self.assertEqual(rows["server/sub/"]["killed"], 1)
        self.assertNotIn("common/", rows)  # outside the roots asked for
        self.assertEqual(rows["total"]["killed"], 2)
        self.assertEqual(rows["total"]["survived"], 1)
        self.assertEqual(rows["all of server/"], rows["total"])
        two, _ = self.counts(("server/sub", "common"))
        self.assertEqual((two["all of server/sub/"]["killed"], two["all of common/"]["survived"],
                          two["total"]["killed"], two["total"]["survived"]), (1, 1, 1, 1))
        self.assertAlmostEqual(L.score(rows["total"]), 2 / 3)
        self.assertEqual([(v, s["file"], at) for v, s, at in listed],
                         [("survived", "server/a.c", 3)])
        self.assertIsNone(L.score(dict.fromkeys(rows["total"], 0)))

    def test_last_run_wins_and_marks(self):
        i = self.run_one("server/a.c", 3, "    if (a < 3)", "    if (a <= 3)", "survived")
        j = self.run_one("server/a.c", 5, "    x = a;", "    ;", "survived", "drop-assign")
        self.assertEqual(L.mark(self.path, i[:6], "equivalent", " a < 3 and a <= 3 agree "), i)
        L.mark(self.path, j, "killed", "LeakSanitizer")
        rows, listed = self.counts()
        self.assertEqual((rows["total"]["equivalent"], rows["total"]["killed"],
                          rows["total"]["survived"]), (1, 1, 0))
        self.assertEqual(L.score(rows["total"]), 1.0)  # 1 / (2 - 1)
        reasons = {s["id"]: s["marks"] for _, s, _ in listed}
        self.assertEqual(reasons[i], {"equivalent": "a < 3 and a <= 3 agree"})
        # the mark holds over a later run that survives again; a kill replaces it
        self.run_one("server/a.c", 3, "    if (a < 3)", "    if (a <= 3)", "survived")
        self.assertEqual(self.counts()[0]["total"]["equivalent"], 1)
        self.run_one("server/a.c", 3, "    if (a < 3)", "    if (a <= 3)", "killed")
        rows, _ = self.counts()
        self.assertEqual((rows["total"]["equivalent"], rows["total"]["killed"]), (0, 2))
        # a killed mutant marked equivalent stays killed
        self.assertEqual(L.verdict({"result": "killed", "marks": {"equivalent": "x"}}),
                         "killed")

    def test_mark_refusals(self):
        self.run_one("server/a.c", 3, "    if (a < 3)", "    if (a <= 3)", "survived")
        self.run_one("server/a.c", 3, "    if (a < 3)", "    if (a >= 3)", "survived")
        with self.assertRaisesRegex(ValueError, "0 mutants"):
            L.mark(self.path, "zzzz", "equivalent", "why")
        with self.assertRaisesRegex(ValueError, "2 mutants"):
            L.mark(self.path, "", "equivalent", "why")
        i = L.mutant_id("server/a.c", "if (a < 3)", "if (a <= 3)")
        with self.assertRaisesRegex(ValueError, "reason"):
            L.mark(self.path, i, "equivalent", "  ")

    def test_stale_when_the_line_changed_or_moved_far(self):
        self.run_one("server/a.c", 3, "    if (a < 3)", "    if (a >= 3)", "killed")
        self.run_one("server/sub/b.c", 5, "    x = a;", "    ;", "survived", "drop-assign")
        # moved a few lines: still counted, listed at its line now
        self.files["server/sub/b.c"] = "\n\n\n" + SRC_A
        rows, listed = self.counts()
        self.assertEqual(rows["total"]["survived"], 1)
        self.assertEqual(listed[0][2], 8)
        # the mutated line's text changed: stale, not counted
        self.files["server/a.c"] = SRC_A.replace("a < 3", "a < 4")
        rows, _ = self.counts()
        self.assertEqual((rows["server/"]["killed"], rows["server/"]["stale"]), (0, 1))
        self.assertIsNone(L.score(rows["server/"]))
        # the same text, but further than NEAR lines away: stale too
        self.files["server/sub/b.c"] = "\n" * (L.NEAR + 10) + SRC_A
        self.assertEqual(self.counts()[0]["total"]["stale"], 2)
        # the file gone: stale
        del self.files["server/sub/b.c"]
        self.assertEqual(self.counts()[0]["server/sub/"]["stale"], 1)

    def test_nearest_of_two_same_lines(self):
        text = "    x = a;\n" + "\n" * 20 + "    x = a;\n"
        self.assertEqual(L.locate({"line": 20, "old": "x = a;"}, text.split("\n")), 22)
        self.assertEqual(L.locate({"line": 3, "old": "x = a;"}, text.split("\n")), 1)

    def test_bad_lines_refused(self):
        with open(self.path, "w") as fh:
            fh.write('{"id": "1", "result": "killed"}\n\nnot json\n')
        with self.assertRaisesRegex(ValueError, r"mutants.jsonl:3: not JSON"):
            L.read(self.path)
        with open(self.path, "w") as fh:
            fh.write('{"id": "1", "result": "maybe"}\n')
        with self.assertRaisesRegex(ValueError, r":1: neither"):
            L.read(self.path)
        self.assertEqual(L.read(os.path.join(self.dir, "absent.jsonl")), [])

    def test_report_text(self):
        self.files = None
        os.makedirs(os.path.join(self.dir, "server"))
        with open(os.path.join(self.dir, "server", "a.c"), "w") as fh:
            fh.write(SRC_A)
        i = self.run_one("server/a.c", 3, "    if (a < 3)", "    if (a <= 3)", "survived")
        self.run_one("server/a.c", 3, "    if (a < 3)", "    if (a >= 3)", "killed")
        L.mark(self.path, i, "equivalent", "the same for every a")
        text = L.report(self.path, ["server/"], self.dir)
        self.assertRegex(text, r"\nserver/\s+1\s+0\s+1\s+0\s+0\s+100.0 %")
        self.assertRegex(text, r"\nall of server/\s+1\s+0\s+1\s+0\s+0\s+100.0 %")
        self.assertIn(f"equivalent {i} server/a.c:3 cmp-flip", text)
        self.assertIn("the same for every a", text)


if __name__ == "__main__":
    unittest.main()
