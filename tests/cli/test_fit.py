#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What the program prints fits a terminal of 80 columns (issue 44, item 14).

Every command's --help, and the tables a person reads (log, modes, status, mode, check,
allowed, changes), whether on a terminal or written to a file or a pipe; and the notice
that FUSE over io_uring is off is said once per boot and user, not at every mount.

Python 3 standard library only; the views are mounted with the mount tests' harness
(tests/lib/harness.py): private temp dirs, always unmounted.
"""

import json
import os
import re
import subprocess
import sys
import unittest

import harness  # tests/lib, on PYTHONPATH

PIWORKFS = harness.PIWORKFS
WIDTH = 80
URING_PARAM = "/sys/module/fuse/parameters/enable_uring"


def too_wide(text):
    """The lines of TEXT wider than 80 columns (characters, as our texts have no wide
    ones)."""
    return [x for x in text.splitlines() if len(x) > WIDTH]


class Help(harness.MountCase):
    tree = None

    def test_every_help_fits_80_columns(self):
        names = harness.commands(self.env)
        self.assertIn("mount", names)
        self.assertIn("checkpoint", names)
        p = self.run_pw("--help")
        self.assertEqual(too_wide(p.stdout), [], "piworkfs --help")
        for name in names:
            p = self.run_pw(name, "--help")
            self.assertEqual(p.returncode, 0, name + ": " + p.stderr)
            self.assertIn("Usage: piworkfs " + name, p.stdout)
            self.assertEqual(too_wide(p.stdout), [], "piworkfs %s --help" % name)
            self.assertEqual(self.run_pw("help", name).stdout, p.stdout, name)

    def test_filling_keeps_every_word_and_what_a_person_copies(self):
        # The texts are filled to 80 columns: no word lost or added, the exit statuses read
        # as before ("5 system error" is never split after its number), and a quoted
        # command stays on one line.
        p = self.run_pw("undo", "--help")
        self.assertRegex(p.stdout, r"(?m)(^| )5 system error")
        p = self.run_pw("run", "--help")
        self.assertIn("`piworkfs mode --run ID`", p.stdout)
        p = self.run_pw("mode", "--help")
        words = p.stdout.split()
        for w in ("--approve", "ID|MODE", "--deny", "--reason", "--run", "--mount",
                  "Exit", "status:"):
            self.assertIn(w, words)


class Tables(harness.MountCase):
    """A view with denials and switches; every table fits, on a terminal and off it."""

    def denied_write(self, path):
        with self.assertRaises(OSError):
            with open(path, "w") as f:
                f.write("x")

    def test_tables_fit_80_columns(self):
        v = self.mount("plan")
        self.denied_write(v.path("src/a_rather_long_name_for_a_source_file.c"))
        self.denied_write(v.path("README.md"))
        self.run_pw("mode", "build", cwd=v.mp, check=True)
        with open(v.path("src/a.c"), "a") as f:
            f.write("int b;\n")
        self.run_pw("mode", "plan", cwd=v.mp, check=True)
        self.assertTrue(harness.wait_until(
            lambda: "README.md" in self.run_pw("log", "--jsonl", cwd=v.mp).stdout,
            harness.DEADLINE))
        runs = {
            "log": ["log"],
            "log --switches": ["log", "--switches"],
            "log --all": ["log", "--all"],
            "modes": ["modes"],
            "mode": ["mode"],
            "mode build": ["mode", "build"],
            "check": ["check", "--mode", "plan", "src/a.c", "README.md"],
            "allowed": ["allowed", "--mode", "build"],
            "allowed --tree": ["allowed", "--tree", "--why"],
            "changes": ["changes"],
            "why": ["why", "README.md"],
        }
        for what, argv in runs.items():
            p = self.run_pw(*argv, cwd=v.mp)
            self.assertIn(p.returncode, (0, 1), "%s: %s" % (what, p.stderr))
            text = p.stdout
            if what == "modes":  # the table; each problem below it is one line, FILE:LINE:
                text = text.split("\n\n")[1]
            self.assertEqual(too_wide(text), [], "piworkfs %s:\n%s" % (what, p.stdout))
        # The log off a terminal keeps every word: the rule is on the lines under its row.
        p = self.run_pw("log", "--switches", cwd=v.mp)
        joined = re.sub(r"\n +", " ", p.stdout)
        self.assertRegex(joined, r"plan -> build .*asked by piworkfs \(pid \d+, user \w+\)")
        # status lists other views of the machine too: ours is the one that must fit.
        p = self.run_pw("status", cwd=v.mp)
        block = next(b for b in p.stdout.split("\n\n") if b.startswith(v.mp + "\n"))
        self.assertEqual(too_wide(block), [], block)
        self.assertIn("requests", block)


class IoUringNotice(harness.MountCase):
    """The mount says once per boot and user that FUSE over io_uring is off."""

    tree = {"a.txt": "a\n"}

    def mount_bg(self, name, *args, env=None):
        mp = os.path.join(self.tmp, name)
        os.mkdir(mp)
        e = dict(self.env, **(env or {}))
        e.pop("PIWORKFS_IO_URING")  # the kernel decides, as for a person
        p = subprocess.run([PIWORKFS, "mount", "--state-db", self.state_db, *args,
                            self.project, mp], env=e, cwd=self.cwd, capture_output=True,
                           text=True, timeout=harness.DEADLINE)
        if harness.is_view_mounted(mp):
            self.addCleanup(self.run_pw, "umount", mp, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p

    def test_said_once_per_boot_and_user(self):
        with open(URING_PARAM) as f:
            on = f.read().strip() in ("Y", "1")
        first = self.mount_bg("one")
        second = self.mount_bg("two")
        as_json = self.mount_bg("three", "--json")
        if on:
            # The kernel serves over the rings: nothing to say, ever.
            for p in (first, second, as_json):
                self.assertNotIn("serving through /dev/fuse", p.stderr)
            self.assertNotIn("io_uring_off", json.loads(as_json.stdout))
            return
        self.assertIn("serving through /dev/fuse: FUSE over io_uring is off", first.stderr)
        self.assertNotIn("io_uring", second.stderr, "said again at the second mount")
        # A script reads it in the result, every time.
        self.assertIn("FUSE over io_uring is off", json.loads(as_json.stdout)["io_uring_off"])
        # Another user, or the next boot (a runtime directory of its own): said again.
        other = os.path.join(self.tmp, "run2")
        os.mkdir(other, 0o700)
        p = self.mount_bg("four", env={"XDG_RUNTIME_DIR": other})
        self.assertIn("serving through /dev/fuse", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
