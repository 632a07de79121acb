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
import socket
import subprocess
import sys
import textwrap
import unittest

from run_case import DEADLINE, PIWORKFS, RunCase

PLAN = """---
title: Cache the parsed config
status: draft
created: 2026-12-02
updated: 2026-12-02
---
# Cache the parsed config

## Tasks
- [ ] Add the cache
"""

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

    c = socket.socket(socket.AF_UNIX)
    c.settimeout(120)
    c.connect(sys.argv[1])
    f = c.makefile("rwb")
    for line in f:
        q = json.loads(line)
        if q["op"] == "exit":
            break
        f.write(json.dumps({"r": serve(q)}).encode() + b"\n")
        f.flush()
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
        bare = os.path.join(self.tmp, "view")
        os.mkdir(bare)
        self.pw("mount", "--mode", "build", self.project, bare)
        self.addCleanup(lambda: subprocess.run([PIWORKFS, "umount", bare], env=self.env,
                                               capture_output=True, timeout=DEADLINE))
        path = os.path.join(self.tmp, "agent.sock")
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(path)
        srv.listen(1)
        srv.settimeout(DEADLINE)
        proc = subprocess.Popen([PIWORKFS, "run", "--mode", "plan", "--project", self.project,
                                 "--", sys.executable, "-c", AGENT, path],
                                cwd=self.project, env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        try:
            conn, _ = srv.accept()
        except socket.timeout:
            proc.kill()
            self.fail("the run did not start: " + proc.communicate()[1])
        finally:
            srv.close()
        io = conn.makefile("rwb")

        def ask(op, **kw):
            io.write(json.dumps(dict(op=op, **kw)).encode() + b"\n")
            io.flush()
            return json.loads(io.readline())["r"]

        try:
            self.assertEqual(ask("draft", text=PLAN), 0)
            p = self.pw("plan", "--mount", bare, "--json", "approve", "fdplan")
            views = json.loads(p.stdout)["views"]
            self.assertEqual(sorted(v["outcome"] for v in views), ["frozen", "frozen"], views)
            self.assertEqual(len([v for v in views if v["run"]]), 1, views)
            with open(os.path.join(self.project, "docs/plans/fdplan.md")) as f:
                approved = f.read()
            tried = ask("tamper")
            self.assertEqual(tried, {k: errno.EACCES for k in tried}, tried)
            with open(os.path.join(self.project, "docs/plans/fdplan.md")) as f:
                self.assertEqual(f.read(), approved)
            shown = json.loads(self.pw("plan", "--mount", bare, "--json", "show",
                                       "fdplan").stdout)
            self.assertEqual(shown["problems"], [])
        finally:
            try:
                io.write(b'{"op": "exit"}\n')
                io.flush()
            except OSError:
                pass
            try:
                proc.communicate(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
            io.close()
            conn.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
