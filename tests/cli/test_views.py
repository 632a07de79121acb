#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Naming a view (issue 44, items 16, 17 and 23).

-M PATH, "the view containing PATH", works in every command that talks to a view (check
refused it), and answers for that view wherever the current directory is; `status` shows
the view you are in first; `mount` on a mountpoint that does not exist says the mkdir to
run, and that command, run as printed, makes the mount work.

Python 3 standard library only; views are mounted with the mount tests' harness
(tests/lib/harness.py): private temp dirs, always unmounted.
"""

import json
import os
import re
import subprocess
import unittest

import harness  # tests/lib, on PYTHONPATH

PIWORKFS = harness.PIWORKFS

# Every command: what -M PATH makes it answer for the view V (mode design) while the current
# directory is inside another view W (mode plan), as (argv after the command, what its
# output must hold, the exit statuses it may end with). None: the command names its view
# otherwise and refuses -M as an unknown option.
DESIGN_FILE = "docs/design/a.md"
TABLE = {
    "mode": (["--json"], '"mode": "design"', (0,)),
    "reload": ([], "reloaded: mode design", (0,)),
    "status": ([], "mode       design", (0,)),
    "modes": ([], "project {V}", (0,)),
    "allowed": ([], "mode design", (0,)),
    "check": ([DESIGN_FILE], "allowed  docs/design/a.md", (0,)),
    "why": ([DESIGN_FILE], "(mode design, the live view's mode)", (0,)),
    "check-bash": (["touch " + DESIGN_FILE], "in mode design", (0,)),
    "log": (["--switches"], "(none) -> design", (0,)),
    "trust": ([], "trusted {V}", (0,)),
    "changes": (["--json"], '"changesets"', (0,)),
    "diff": (["--no-pager"], "", (0,)),
    "undo": (["--all", "--dry-run"], "", (0, 1)),
    "redo": (["--dry-run"], "", (0, 1)),
    "checkpoint": (["named-by-M"], "named-by-M", (0,)),
    "plan": (["list"], "", (0,)),
    "mount": None,
    "umount": None,
    "run": None,
    "completion": None,
    "mcp": None,
    "hook": None,
}


class MountOption(harness.MountCase):
    def setUp(self):
        super().setUp()
        self.v = self.mount("design")
        self.other, other_mp = self.fresh_project("other")
        self.w = self.mount("plan", project=self.other, mountpoint=other_mp)
        self.here = self.w.path("src")  # the current directory: inside W

    def test_every_command_takes_M_for_the_view_it_names(self):
        self.assertEqual(sorted(TABLE), sorted(harness.commands(self.env)),
                         "a command is missing from the table")
        # The control: from inside W, without -M, check answers for W (plan).
        p = self.run_pw("check", DESIGN_FILE, cwd=self.here)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        project = os.path.realpath(self.project)
        for cmd, row in TABLE.items():
            with self.subTest(cmd=cmd):
                p = self.run_pw(cmd, "-M", self.v.mp, *(row[0] if row else []),
                                cwd=self.here)
                if row is None:
                    self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                    self.assertIn("unknown option '-M'", p.stderr)
                    continue
                argv, want, statuses = row
                self.assertIn(p.returncode, statuses, p.stdout + p.stderr)
                self.assertIn(want.format(V=project), p.stdout, p.stderr)
                # The long name means the same.
                q = self.run_pw(cmd, "--mount", self.v.mp, *argv, cwd=self.here)
                self.assertEqual(q.returncode, p.returncode, q.stdout + q.stderr)
        self.run_pw("trust", "--revoke", "-M", self.v.mp, check=True)
        # A PATH under the view (or its project) names it too.
        p = self.run_pw("check", "-M", self.v.path("docs"), DESIGN_FILE, cwd=self.here)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        p = self.run_pw("check", "-M", os.path.join(self.project, "src"), DESIGN_FILE,
                        cwd=self.here)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_M_outside_every_view_exits_4_and_with_C_is_a_usage_error(self):
        for cmd, row in TABLE.items():
            if row is None or cmd == "status":
                continue
            with self.subTest(cmd=cmd):
                p = self.run_pw(cmd, "-M", self.cwd, *row[0], cwd=self.here)
                self.assertEqual(p.returncode, 4, p.stdout + p.stderr)
                self.assertIn("not inside a live piworkfs view", p.stderr)
        p = self.run_pw("status", "-M", self.cwd)
        self.assertEqual(p.returncode, 4, p.stdout + p.stderr)
        p = self.run_pw("check", "-M", self.v.mp, "-C", self.project, DESIGN_FILE)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("-M and -C both name the project", p.stderr)


class StatusOrder(harness.MountCase):
    def test_the_view_you_are_in_comes_first(self):
        views = [self.mount("plan")]
        for name in ("second", "third"):
            proj, mp = self.fresh_project(name)
            views.append(self.mount("design", project=proj, mountpoint=mp))
        for v in views:
            for cwd in (v.mp, v.path("src")):
                p = self.run_pw("status", cwd=cwd)
                # 4 when a view of another test (of another environment) does not answer us
                self.assertIn(p.returncode, (0, 4), p.stderr)
                self.assertTrue(p.stdout.startswith(v.mp + "\n"), p.stdout[:400])
                shown = json.loads(self.run_pw("status", "--json", cwd=cwd).stdout)
                self.assertEqual(shown[0]["mountpoint"], v.mp)
                # Every other view of ours is still listed after it.
                mps = [s["mountpoint"] for s in shown]
                for other in views:
                    self.assertIn(other.mp, mps)
        # -M: only that view.
        p = self.run_pw("status", "--json", "-M", views[1].path("src"), cwd=views[2].mp)
        self.assertEqual([s["mountpoint"] for s in json.loads(p.stdout)], [views[1].mp])


class MissingMountpoint(harness.MountCase):
    def test_the_error_says_the_mkdir_to_run_and_it_works_as_printed(self):
        mp = os.path.join(self.tmp, "not yet", "proj.view")
        p = self.run_pw("mount", "--state-db", self.state_db, self.project,
                        os.path.relpath(mp, self.cwd))
        self.assertEqual(p.returncode, 3, p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("No such file or directory", lines[0])
        self.assertFalse(os.path.exists(mp), "mount made the mountpoint")
        m = re.search(r"\((mkdir -p .*)\)", lines[0])
        self.assertIsNotNone(m, lines[0])
        # Run as printed, from anywhere (the path in it is absolute and quoted).
        self.run_tool(["sh", "-c", m.group(1)], cwd="/")
        self.assertTrue(os.path.isdir(mp))
        v = self.mount("plan", mountpoint=mp)
        self.assertTrue(harness.is_view_mounted(v.mp))


if __name__ == "__main__":
    unittest.main(verbosity=2)
