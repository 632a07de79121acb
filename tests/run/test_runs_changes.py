# SPDX-License-Identifier: MIT
"""What `piworkfs changes` says of several runs (issue 44, items 5 and 6), with real
`piworkfs run`s (the agents of test_runs.py) beside the person's view of the project.

- By default `changes` lists everything since the view asked was mounted, every run's
  change sets included, each labelled with its run (it listed the newest run's only).
- Two runs writing one path: each one's change says "also changed by run ID", in
  `changes` and `changes --json`, while the runs live and after they are gone (the
  overlap was in `log` only); `log` names the other run instead of a "path -> mountpoint"
  that read as a rename.
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_runs import Agent, RunsTest, eventually  # noqa: E402


def changes_by_set(res):
    """{(run or None): [paths]} of a changes --json result."""
    out = {}
    for s in res["changesets"]:
        out.setdefault(s.get("run"), []).extend(c["path"] for c in s["changes"])
    return out


class RunsChanges(RunsTest):
    def changes(self, *args, cwd):
        return json.loads(self.pw("changes", "--json", *args, cwd=cwd).stdout)

    def test_changes_lists_every_runs_change_sets_since_the_view_was_mounted(self):
        bare = self.bare_view("build")
        a, b = Agent(self, "build", "a"), Agent(self, "build", "b")
        self.assertEqual(a.write("src/by_a.c"), 0)
        self.assertEqual(b.write("src/by_b.c"), 0)
        with open(os.path.join(bare, "src", "by_person.c"), "w") as f:
            f.write("p\n")
        res = self.changes(cwd=bare)
        by = changes_by_set(res)
        self.assertIn("src/by_a.c", by.get(a.id, []), res)
        self.assertIn("src/by_b.c", by.get(b.id, []), res)
        self.assertIn("src/by_person.c", by.get(None, []), res)
        text = self.pw("changes", cwd=bare).stdout
        self.assertIn("by run " + a.id, text)
        self.assertIn("by run " + b.id, text)
        # diff takes the same default
        paths = {f["path"] for f in
                 json.loads(self.pw("diff", "--json", cwd=bare).stdout)["files"]}
        self.assertTrue({"src/by_a.c", "src/by_b.c", "src/by_person.c"} <= paths, paths)

    def test_two_runs_writing_one_path_each_say_also_changed_by_the_other(self):
        bare = self.bare_view("build")
        a, b = Agent(self, "build", "a"), Agent(self, "build", "b")
        self.assertEqual(a.write("src/ov.txt", "from a\n"), 0)
        self.assertEqual(a.write("src/only_a.txt", "a\n"), 0)
        # a's row reaches the store (batches commit within 100 ms): then b overlaps it
        eventually(lambda: "src/ov.txt" in changes_by_set(self.changes("--all", cwd=bare)).get(a.id, []),
                   "a's change recorded")
        self.assertEqual(b.write("src/ov.txt", "from b\n"), 0)

        def marks(run, path, res):
            for s in res["changesets"]:
                if s.get("run") != run:
                    continue
                for c in s["changes"]:
                    if c["path"] == path:
                        return [o.get("run") for o in c.get("also_changed_by", [])]
            return None

        def both_marked():
            res = self.changes("--all", cwd=bare)
            return marks(b.id, "src/ov.txt", res) == [a.id] and \
                marks(a.id, "src/ov.txt", res) == [b.id]
        eventually(both_marked, "src/ov.txt marked in both runs' change sets")
        res = self.changes("--all", cwd=bare)
        self.assertEqual(marks(a.id, "src/only_a.txt", res), [], res)
        text = self.pw("changes", "--all", cwd=bare).stdout
        self.assertIn("also changed by run " + a.id, text)
        self.assertIn("also changed by run " + b.id, text)
        # the log names the other run, not a rename to its mountpoint
        log = self.pw("log", "--project", self.project).stdout
        rows = [ln for ln in log.splitlines() if "src/ov.txt" in ln and "overlap" in ln]
        self.assertTrue(rows, log)
        self.assertIn("also changed by run " + a.id, rows[0])
        self.assertNotIn(" -> ", rows[0])
        # history: both runs gone, their change sets still say it
        a.stop()
        b.stop()
        res = self.changes("--all", cwd=bare)
        self.assertEqual(marks(b.id, "src/ov.txt", res), [a.id], res)
        self.assertEqual(marks(a.id, "src/ov.txt", res), [b.id], res)


if __name__ == "__main__":
    unittest.main(verbosity=2)
