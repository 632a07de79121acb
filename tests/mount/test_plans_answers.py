#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What the view says about plans is what it does (issue 44, items 1, 18 and 24): `check`,
`why`, `check-bash`, `allowed` and the MCP server's piworkfs_check answer from the policy the
filesystem decides with, an approved plan's freeze and the view's lane included, live or
offline; plan mode's refusals say what it writes; `plan done` exits as its help says.

Fixture:
    project/
      src/a.c
      docs/plans/.keep      the plans folder
"""

import errno
import json
import os
import select
import subprocess
import time
import unittest

import harness  # noqa: E402

PLAN = harness.draft_plan("Add the cache", "Invalidate it on reload")

REFUSED = "approved plan docs/plans/cache.md, read-only until the person reopens it"


class Mcp:
    """`piworkfs mcp` on stdio, as an agent inside a view starts it."""

    def __init__(self, case, cwd):
        self.p = subprocess.Popen([harness.PIWORKFS, "mcp"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=case.env, cwd=cwd)
        case.addCleanup(self.close)
        self.buf = b""
        self.id = 0
        self.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "t", "version": "1"}})

    def call(self, method, params):
        self.id += 1
        msg = {"jsonrpc": "2.0", "id": self.id, "method": method, "params": params}
        self.p.stdin.write(json.dumps(msg).encode() + b"\n")
        self.p.stdin.flush()
        end = time.monotonic() + harness.DEADLINE
        while True:
            while b"\n" not in self.buf:
                left = end - time.monotonic()
                if left <= 0 or not select.select([self.p.stdout], [], [], left)[0]:
                    raise AssertionError("no reply from piworkfs mcp")
                chunk = os.read(self.p.stdout.fileno(), 65536)
                if not chunk:
                    raise AssertionError("piworkfs mcp exited: %s" % self.p.stderr.read())
                self.buf += chunk
            line, _, self.buf = self.buf.partition(b"\n")
            reply = json.loads(line)
            if reply.get("id") == self.id:
                return reply

    def check(self, *paths):
        r = self.call("tools/call", {"name": "piworkfs_check",
                                     "arguments": {"paths": list(paths)}})
        return "".join(c.get("text", "") for c in r["result"]["content"])

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=harness.DEADLINE)
        self.p.stdout.close()
        self.p.stderr.close()


class AnswersCase(harness.MountCase):
    tree = {"src/a.c": "int a;\n", "docs/plans/.keep": ""}

    def approve(self, v, name="cache"):
        with open(v.path("docs/plans/%s.md" % name), "w") as f:
            f.write(PLAN)
        self.run_pw("plan", "--mount", v.mp, "approve", name, check=True)

    def mount_run(self, mode, run_id, *args):
        d = os.path.join(self.runtime, "piworkfs", "run-" + run_id)
        os.makedirs(os.path.join(d, "view"))
        return self.mount(mode, args=["--run", run_id, *args],
                          mountpoint=os.path.join(d, "view"))

    # -- item 1: the live view's policy ----------------------------------------------------

    def test_check_why_check_bash_and_allowed_answer_with_the_freeze(self):
        v = self.mount("plan")
        self.approve(v)
        self.set_mode(v, "build")
        plan = v.path("docs/plans/cache.md")
        # What the filesystem does.
        self.assertErrno(errno.EACCES, os.open, plan, os.O_WRONLY)
        # What the commands say, from inside the view and from the backing directory.
        for cwd in (v.mp, self.project):
            p = self.run_pw("check", "docs/plans/cache.md", "src/a.c", cwd=cwd)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertIn("denied   docs/plans/cache.md  EACCES  " + REFUSED + "\n", p.stdout)
            self.assertIn("allowed  src/a.c  (allow ** ", p.stdout)
        p = self.run_pw("check", "--json", "docs/plans/cache.md", cwd=v.mp)
        d = json.loads(p.stdout)[0]
        self.assertEqual((d["decision"], d["reason"], d["rule"]["file"]),
                         ("denied", "protected", "(approved plan)"))
        # --mode naming the active mode is the same policy.
        p = self.run_pw("check", "--mode", "build", "docs/plans/cache.md", cwd=v.mp)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        p = self.run_pw("why", "docs/plans/cache.md", cwd=v.mp)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("): denied EACCES\n  " + REFUSED + "\n", p.stdout)
        p = self.run_pw("check-bash", "echo x >> docs/plans/cache.md", cwd=v.mp)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("denied   docs/plans/cache.md  (redirect >>)  EACCES: " + REFUSED,
                      p.stdout)
        self.assertNotIn("hint: ask the person to switch mode", p.stdout)
        p = self.run_pw("allowed", "--files", cwd=v.mp)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"protected +docs/plans/cache\.md +\(approved plan\)\n")
        files = p.stdout.split("writable file")[1].splitlines()[1:]
        self.assertIn("src/a.c", files)
        self.assertNotIn("docs/plans/cache.md", files)
        # Reopened: every answer says writable again, as the filesystem does.
        self.run_pw("plan", "--mount", v.mp, "reopen", "cache", check=True)
        p = self.run_pw("check", "docs/plans/cache.md", cwd=v.mp)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        os.close(os.open(plan, os.O_WRONLY))

    def test_a_runs_view_answers_with_its_lane_and_a_freeze_approved_elsewhere(self):
        bare = self.mount("build")
        run = self.mount_run("build", "ans0r1", "--only", "docs/**")
        self.approve(bare)
        plan = run.path("docs/plans/cache.md")
        self.assertErrno(errno.EACCES, os.open, plan, os.O_WRONLY)
        p = self.run_pw("check", "docs/plans/cache.md", "docs/x.md", "src/a.c", cwd=run.mp)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("denied   docs/plans/cache.md  EACCES  " + REFUSED + "\n", p.stdout)
        self.assertIn("allowed  docs/x.md", p.stdout)
        self.assertIn("denied   src/a.c  EACCES  outside the view's lane", p.stdout)
        # The MCP server an agent in the run talks to says the same.
        text = Mcp(self, run.mp).check("docs/plans/cache.md", "docs/x.md")
        self.assertIn("docs/plans/cache.md", text)
        self.assertIn("approved plan", text)
        self.assertIn("docs/x.md: write allowed", text)
        self.assertNotIn("docs/plans/cache.md: write allowed", text)

    def test_offline_answers_include_the_approved_plans(self):
        v = self.mount("plan")
        self.approve(v)
        self.unmount(v)
        p = self.run_pw("check", "--mode", "build", "-C", self.project, "docs/plans/cache.md")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("denied   docs/plans/cache.md  EACCES  " + REFUSED + "\n", p.stdout)
        p = self.run_pw("check-bash", "--mode", "build", "-C", self.project,
                        "echo x > docs/plans/cache.md")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        p = self.run_pw("allowed", "--mode", "build", "-C", self.project)
        self.assertRegex(p.stdout, r"protected +docs/plans/cache\.md +\(approved plan\)\n")
        # Off does not protect: the plan is writable there, as in a view.
        p = self.run_pw("check", "--mode", "off", "-C", self.project, "docs/plans/cache.md")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    # -- item 24: what plan mode writes ----------------------------------------------------

    def test_plan_modes_refusals_say_what_it_writes(self):
        v = self.mount("plan")
        p = self.run_pw("check", "docs/plans/x.md", "src/a.c", cwd=v.mp)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("allowed  docs/plans/x.md  (allow /docs/plans/** (built-in))\n", p.stdout)
        self.assertIn("denied   src/a.c  EROFS  mode plan writes only its plans folder, "
                      "docs/plans/\n", p.stdout)
        self.assertNotIn("writes nothing", p.stdout)
        p = self.run_pw("check", "--json", "src/a.c", cwd=v.mp)
        self.assertEqual(json.loads(p.stdout)[0]["message"],
                         "mode plan writes only its plans folder, docs/plans/")
        # A mode that writes nothing at all still says so.
        p = self.run_pw("check", "--mode", "review", "src/a.c", cwd=v.mp)
        self.assertIn("denied   src/a.c  EROFS  mode review writes nothing\n", p.stdout)

    # -- item 18: plan done's exit status --------------------------------------------------

    def test_plan_done_on_a_draft_is_refused_as_its_help_says(self):
        v = self.mount("plan")
        with open(v.path("docs/plans/cache.md"), "w") as f:
            f.write(PLAN)
        for args in (("done", "1"), ("done", "1", "--plan", "cache")):
            p = self.run_pw("plan", "--mount", v.mp, *args)
            self.assertEqual(p.returncode, 1, "%s: %s" % (args, p.stderr))
            self.assertIn("approve", p.stderr)
        # The help is filled to the terminal's width: compare its words, not its lines.
        help_text = " ".join(self.run_pw("plan", "--help", check=True).stdout.split())
        self.assertIn("1 refused (an agent approving or reopening; done on a draft, or "
                      "with no approved plan in progress)", help_text)
        # No such plan, no such task: 3, as the help says.
        p = self.run_pw("plan", "--mount", v.mp, "done", "1", "--plan", "nope")
        self.assertEqual(p.returncode, 3, p.stderr)
        self.run_pw("plan", "--mount", v.mp, "approve", "cache", check=True)
        p = self.run_pw("plan", "--mount", v.mp, "done", "9")
        self.assertEqual(p.returncode, 3, p.stderr)
        self.run_pw("plan", "--mount", v.mp, "done", "1", check=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
