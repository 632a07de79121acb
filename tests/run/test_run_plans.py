# SPDX-License-Identifier: MIT
"""An agent inside `piworkfs run --mode plan` writes a draft plan and keeps it open (a
descriptor and a shared mapping); the person approves it from outside, through their own
view of the project. Every way the agent had of changing the plan is refused from the
answer on (issue 48): the approval reached the run's own view, which the person's view
does not serve.

The agent is AGENT, a small server in the sandbox that answers one JSON request per line on
a Unix socket the test listens on (in the test's temp dir, outside the project).
"""

import errno
import json
import os
import subprocess
import textwrap
import unittest

from harness import draft_plan  # noqa: E402  (tests/lib, on PYTHONPATH)
from run_case import DEADLINE, PIWORKFS, SERVE_LOOP, Agent, RunCase

PLAN = draft_plan("Add the cache")

AGENT = textwrap.dedent(r'''
    import errno, json, mmap, os, socket, sys

    plan = "docs/plans/fdplan.md"
    fd = m = None

    def attempt(fn):
        try:
            fn()
            return 0
        except OSError as e:
            return e.errno

    def append():
        with open(plan, "a") as f:
            f.write("x")

    def msync():
        m[30:34] = b"MMAP"
        m.flush()

    def serve(q):
        global fd, m
        op = q["op"]
        if op == "draft":
            os.makedirs("docs/plans", exist_ok=True)
            with open(plan, "w") as f:
                f.write(q["text"])
            fd = os.open(plan, os.O_RDWR)
            m = mmap.mmap(fd, len(q["text"]), mmap.MAP_SHARED,
                          mmap.PROT_READ | mmap.PROT_WRITE)
            return 0
        with open("docs/plans/other.md", "w") as f:
            f.write("not a plan\n")
        return {
            "pwrite": attempt(lambda: os.pwrite(fd, b"EVIL", 100)),
            "ftruncate": attempt(lambda: os.ftruncate(fd, 10)),
            "msync": attempt(msync),
            "open-append": attempt(append),
            "rename-away": attempt(lambda: os.rename(plan, "docs/plans/z.md")),
            "rename-over": attempt(lambda: os.rename("docs/plans/other.md", plan)),
            "unlink": attempt(lambda: os.unlink(plan)),
        }

''') + SERVE_LOOP + textwrap.dedent('''
    if m:
        m.close()
    if fd is not None:
        os.close(fd)
''')


class ApprovedFromOutside(RunCase):
    def pw(self, *args):
        p = subprocess.run([PIWORKFS, *args], cwd=self.project, env=self.env,
                           capture_output=True, text=True, timeout=DEADLINE * 2)
        self.assertEqual(p.returncode, 0, "piworkfs %s: %s %s" % (args, p.stdout, p.stderr))
        return p

    def test_the_agents_open_plan_is_frozen_in_its_run(self):
        bare = self.bare_view("build")
        agent = Agent(self, "plan", "agent", AGENT)
        self.assertEqual(agent.ask("draft", text=PLAN), 0)
        p = self.pw("plan", "--mount", bare, "--json", "approve", "fdplan")
        views = json.loads(p.stdout)["views"]
        self.assertEqual(sorted(v["outcome"] for v in views), ["frozen", "frozen"], views)
        self.assertEqual(len([v for v in views if v["run"]]), 1, views)
        with open(os.path.join(self.project, "docs/plans/fdplan.md")) as f:
            approved = f.read()
        tried = agent.ask("tamper")
        self.assertEqual(tried, {k: errno.EACCES for k in tried}, tried)
        with open(os.path.join(self.project, "docs/plans/fdplan.md")) as f:
            self.assertEqual(f.read(), approved)
        shown = json.loads(self.pw("plan", "--mount", bare, "--json", "show",
                                   "fdplan").stdout)
        self.assertEqual(shown["problems"], [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
