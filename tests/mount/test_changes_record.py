# SPDX-License-Identifier: MIT
"""What `changes`, `diff`, `undo` and `log` say: agent-chosen names quoted as git quotes
them (never raw on the person's terminal, exact in JSON); a record that never rewrites
itself (a later change set never alters how an earlier one reads); undo that steps back
and redo that steps forward; errors that name the path."""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import PIWORKFS, MountCase, RpcClient, tree_hash, wait_until  # noqa: E402,F401

TREE = {
    "README.md": "# demo\n",
    "src/x.c": "int x;\n",
    "docs/arch.md": "one\ntwo\n",
}

EVIL = "evil\x1b]0;T\x07\x1b[2K\rdeleted  .gitconfig"
EVIL_Q = '"evil\\033]0;T\\a\\033[2K\\rdeleted  .gitconfig"'
NEWLINE = "two\nlines.txt"
NEWLINE_Q = '"two\\nlines.txt"'
RAW = ("\x1b", "\x07", "\r")


class Changes(MountCase):
    tree = TREE

    def mount(self, *args, **kw):
        v = super().mount(*args, **kw)

        def answers():
            try:
                c = RpcClient(self.socket_path(v) or "/nonexistent", timeout=10)
            except OSError:
                return False
            try:
                c.call("status")
                return True
            except (OSError, RuntimeError, ConnectionError):
                return False
            finally:
                c.close()
        self.assertTrue(wait_until(answers, 60), self.daemon_logs())
        return v

    def pw(self, *args, check=True):
        p = self.run_pw(*args, "--mount", self.mp)
        if check and p.returncode != 0:
            self.fail("piworkfs %s: exit %d\n%s%s%s" % (" ".join(args), p.returncode,
                                                        p.stdout, p.stderr, self.daemon_logs()))
        return p

    def assertNoRaw(self, text):
        for c in RAW:
            self.assertNotIn(c, text, repr(text))

    # -- quoting (issue 35, finding 8) -------------------------------------------------

    def test_agent_names_are_quoted_in_changes_diff_and_stat(self):
        v = self.mount("build")
        self.pw("checkpoint")
        for name in (EVIL, NEWLINE):
            with open(v.path(name), "w") as f:
                f.write("x\n")
        out = self.pw("changes").stdout
        self.assertNoRaw(out)
        self.assertIn(EVIL_Q, out)
        self.assertIn(NEWLINE_Q, out)
        # one line per change: the newline in a name forges none
        self.assertEqual(len([ln for ln in out.splitlines() if "created" in ln]), 2, out)
        for args in (("diff",), ("diff", "--stat")):
            out = self.pw(*args).stdout
            self.assertNoRaw(out)
            self.assertNotIn("\ntwo\n", "\n" + out, out)
            self.assertIn("evil\\033]0;T", out)
        # JSON stays exact
        res = json.loads(self.pw("changes", "--json").stdout)
        paths = {c["path"] for s in res["changesets"] for c in s["changes"]}
        self.assertIn(EVIL, paths)
        self.assertIn(NEWLINE, paths)
        out = self.pw("undo", "--dry-run", "--all").stdout
        self.assertNoRaw(out)
        self.assertIn(EVIL_Q, out)

    def test_agent_names_are_quoted_in_log_and_why(self):
        v = self.mount("plan")
        with self.assertRaises(OSError):
            with open(v.path(EVIL), "w") as f:
                f.write("x\n")

        def logged():
            return "evil" in self.run_pw("log", "-C", self.project).stdout
        self.assertTrue(wait_until(logged, 60), self.run_pw("log", "-C", self.project))
        out = self.run_pw("log", "-C", self.project).stdout
        self.assertNoRaw(out)
        self.assertIn("evil\\033]0;T", out)
        p = self.run_pw("why", os.path.join(self.project, EVIL), "-C", self.project)
        self.assertNoRaw(p.stdout)
        self.assertIn("evil\\033]0;T", p.stdout, p.stdout + p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
