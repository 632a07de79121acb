#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Plans (README "Plans"): plan mode writes its plans folder and nothing else, an approved
plan is read-only to every process in every mode but off until the person reopens it, the
agent may mark tasks done but not approve or reopen, and progress outlives the mount.

Fixture:
    project/
      src/a.c
      docs/plans/            (the plans folder, empty)
"""

import errno
import json
import os
import subprocess
import sys
import unittest

import harness  # noqa: E402

PLAN = harness.draft_plan("Add the cache", "Invalidate it on reload", "Document it")


class PlansCase(harness.MountCase):
    tree = {"src/a.c": "int a;\n", "docs/plans/.keep": ""}

    def plan(self, v, *args, check=True):
        p = self.run_pw("plan", "--mount", v.mp, "--json", *args)
        if check and p.returncode != 0:
            self.fail("piworkfs plan %s exited %d: %s %s%s" % (" ".join(args), p.returncode,
                                                             p.stdout, p.stderr,
                                                             self.daemon_logs()))
        return json.loads(p.stdout) if p.returncode == 0 else p

    def write_plan(self, v, name="cache", text=PLAN):
        with open(v.path("docs/plans/%s.md" % name), "w") as f:
            f.write(text)

    def test_plan_mode_writes_plans_and_nothing_else(self):
        v = self.mount("plan")
        self.write_plan(v)
        with open(os.path.join(self.project, "docs/plans/cache.md")) as f:
            self.assertEqual(f.read(), PLAN)
        # sed -i (a temporary file beside it, renamed over it) works on a draft.
        self.run_tool(["sed", "-i", "s/Document it/Document it in the README/",
                       "docs/plans/cache.md"], cwd=v.path())
        os.makedirs(v.path("docs/plans/notes"))
        # Everything else stays read-only, with the errno it always had.
        self.assertErrno(errno.EROFS, os.open, v.path("src/a.c"), os.O_WRONLY)
        self.assertErrno(errno.EROFS, os.open, v.path("src/b.c"), os.O_WRONLY | os.O_CREAT)
        self.assertErrno(errno.EROFS, os.open, v.path("docs/x.md"), os.O_WRONLY | os.O_CREAT)
        self.assertErrno(errno.EROFS, os.rename, v.path("docs/plans/cache.md"),
                         v.path("src/cache.md"))
        self.assertTrue(os.access(v.path("docs/plans/cache.md"), os.W_OK))
        self.assertFalse(os.access(v.path("src/a.c"), os.W_OK))
        shown = self.plan(v, "show", "cache")
        self.assertEqual(shown["status"], "draft")
        self.assertEqual([t["text"] for t in shown["tasks"]],
                         ["Add the cache", "Invalidate it on reload",
                          "Document it in the README"])
        self.assertEqual(shown["tasks_from"], "section")
        # discuss and review stay read-only, the plans folder included.
        for mode in ("discuss", "review"):
            self.set_mode(v, mode)
            self.assertErrno(errno.EROFS, os.open, v.path("docs/plans/y.md"),
                             os.O_WRONLY | os.O_CREAT)

    def test_plan_mode_starts_the_folder_in_a_project_without_one(self):
        proj, mp = self.fresh_project("bare", {"src/a.c": "int a;\n"})
        v = self.mount("plan", project=proj, mountpoint=mp)
        os.makedirs(v.path("docs/plans"))
        self.write_plan(v)
        self.assertErrno(errno.EROFS, os.mkdir, v.path("docs/other"))
        self.assertErrno(errno.EROFS, os.mkdir, v.path("src/sub"))
        self.assertErrno(errno.EROFS, os.rmdir, v.path("docs"))
        self.assertEqual(self.plan(v, "list")["plans"][0]["name"], "cache")

    def test_plans_folder_from_config_and_trust(self):
        os.makedirs(os.path.join(self.project, ".piworkfs"))
        os.makedirs(os.path.join(self.project, "notes/plans"))
        with open(os.path.join(self.project, ".piworkfs/config.yaml"), "w") as f:
            f.write("plans: notes/plans\n")
        v = self.mount("plan")
        # Untrusted: the key is ignored (it would widen plan mode), with a warning.
        self.assertErrno(errno.EROFS, os.open, v.path("notes/plans/a.md"),
                         os.O_WRONLY | os.O_CREAT)
        self.write_plan(v)
        self.plan(v, "approve", "cache")
        self.trust()
        self.run_pw("reload", "--mount", v.mp, check=True)
        with open(v.path("notes/plans/next.md"), "w") as f:
            f.write(PLAN)
        self.assertErrno(errno.EROFS, os.open, v.path("docs/plans/y.md"),
                         os.O_WRONLY | os.O_CREAT)
        # The plan approved in the old folder stays protected, listed, and can be reopened.
        self.set_mode(v, "build")
        self.assertErrno(errno.EACCES, os.open, v.path("docs/plans/cache.md"), os.O_WRONLY)
        names = [p["name"] for p in self.plan(v, "list")["plans"]]
        self.assertEqual(sorted(names), ["cache", "next"])
        self.plan(v, "reopen", "cache")
        with open(v.path("docs/plans/cache.md"), "a") as f:
            f.write("- [ ] one more\n")

    def test_approved_plan_stays_protected_through_a_name_the_kernel_still_caches(self):
        # Approving rewrites the plan aside and renames it over the old file, whose inode
        # number the next file made may take. Until the watcher drops the kernel's entry of
        # the plan (never here: the watch is off; late under load), that entry names the
        # old node: the file made next must not become it (test_coherence.py says more).
        v = self.mount("plan", args=["--timeout", "86400", "--no-watch"])
        self.write_plan(v)
        with open(v.path("docs/plans/cache.md")) as f:
            self.assertIn("status: draft\n", f.read())
        self.plan(v, "approve", "cache")
        for i in range(8):
            with open(v.path("docs/plans/next%d.md" % i), "w") as f:
                f.write(PLAN)
        self.set_mode(v, "build")
        self.assertErrno(errno.EACCES, os.open, v.path("docs/plans/cache.md"), os.O_WRONLY)
        with open(v.path("docs/plans/cache.md")) as f:
            self.assertIn("status: approved\n", f.read())

    def test_approved_plan_is_read_only_for_every_process(self):
        v = self.mount("plan")
        self.write_plan(v)
        res = self.plan(v, "approve", "cache")
        self.assertEqual(res["status"], "approved")
        with open(os.path.join(self.project, "docs/plans/cache.md")) as f:
            frozen = f.read()
        self.assertIn("status: approved\n", frozen)
        self.assertIn("approved: ", frozen)
        # Plan mode may no longer edit it, nor build, by any means.
        target = v.path("docs/plans/cache.md")
        self.assertErrno(errno.EACCES, os.open, target, os.O_WRONLY)
        self.set_mode(v, "build")
        self.assertErrno(errno.EACCES, os.open, target, os.O_WRONLY)
        self.assertErrno(errno.EACCES, os.open, target, os.O_WRONLY | os.O_TRUNC)
        self.assertErrno(errno.EACCES, os.truncate, target, 0)
        with open(v.path("src/new.md"), "w") as f:
            f.write("replacement\n")
        self.assertErrno(errno.EACCES, os.rename, v.path("src/new.md"), target)
        self.assertErrno(errno.EACCES, os.link, target, v.path("src/hard.md"))
        self.assertErrno(errno.EACCES, os.unlink, target)
        self.assertErrno(errno.EACCES, os.rename, v.path("docs/plans"), v.path("docs/p2"))
        for argv in (["sed", "-i", "s/Add/Remove/", "docs/plans/cache.md"],
                     ["truncate", "-s", "0", "docs/plans/cache.md"],
                     ["mv", "src/new.md", "docs/plans/cache.md"],
                     ["ln", "docs/plans/cache.md", "src/hard2.md"],
                     ["sh", "-c", "echo x >> docs/plans/cache.md"]):
            p = self.run_tool(argv, cwd=v.path(), check=False)
            self.assertNotEqual(p.returncode, 0, "%s succeeded" % argv)
        self.assertFalse(os.access(target, os.W_OK))
        with open(os.path.join(self.project, "docs/plans/cache.md")) as f:
            self.assertEqual(f.read(), frozen)
        self.assertFalse(os.path.exists(os.path.join(self.project, "src/hard.md")))
        shown = self.plan(v, "show", "cache")
        self.assertEqual(shown["hash"], shown["file_hash"])
        self.assertEqual(shown["problems"], [])
        # Reopened by the person: writable again, a draft.
        self.plan(v, "reopen", "cache")
        self.run_tool(["sed", "-i", "s/Add the cache/Add the LRU cache/",
                       "docs/plans/cache.md"], cwd=v.path())
        self.run_tool(["truncate", "-s", "+0", "docs/plans/cache.md"], cwd=v.path())
        os.link(target, v.path("src/hard.md"))
        os.unlink(v.path("src/hard.md"))
        shown = self.plan(v, "show", "cache")
        self.assertEqual(shown["status"], "draft")
        self.assertEqual(shown["tasks"][0]["text"], "Add the LRU cache")

    def test_agent_marks_tasks_but_cannot_approve_or_reopen(self):
        v = self.mount("plan")
        self.write_plan(v)
        c = harness.RpcClient(self.socket_path(v))
        self.addCleanup(c.close)
        agent_path = c.call("agent.open")["socket"]
        agent = harness.RpcClient(agent_path)
        self.addCleanup(agent.close)
        with self.assertRaisesRegex(RuntimeError, "only the person approves"):
            agent.call("plan.approve", {"name": "cache"})
        self.assertEqual(self.plan(v, "show", "cache")["status"], "draft")
        with self.assertRaisesRegex(RuntimeError, "is a draft"):
            agent.call("plan.done", {"task": 1, "name": "cache"})
        self.plan(v, "approve", "cache")
        st = agent.call("plan.done", {"task": 1, "note": "in cache.c"})
        self.assertEqual(st["line"], "plan cache: 1/3 done; next: 2. Invalidate it on reload")
        self.assertEqual(st["active"]["status"], "in_progress")
        with self.assertRaisesRegex(RuntimeError, "only the person reopens"):
            agent.call("plan.reopen", {"name": "cache"})
        with self.assertRaisesRegex(RuntimeError, "already done"):
            agent.call("plan.done", {"task": 1})
        with self.assertRaisesRegex(RuntimeError, "tasks 1 to 3"):
            agent.call("plan.done", {"task": 4})
        # The CLI inside the agent's sandbox uses the agent socket: refused the same way.
        p = self.run_pw("plan", "approve", "cache", env={"PIWORKFS_SOCKET": agent_path})
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("only the person", p.stderr)
        shown = self.plan(v, "show", "cache")
        self.assertEqual(shown["status"], "in_progress")
        self.assertTrue(shown["tasks"][0]["done"])
        self.assertTrue(shown["tasks"][0]["done_by"].startswith("agent"))
        self.assertEqual(shown["tasks"][0]["note"], "in cache.c")
        # Marking a task changed no file.
        with open(os.path.join(self.project, "docs/plans/cache.md")) as f:
            self.assertNotIn("[x]", f.read())

    def test_agent_asks_for_approval_and_the_person_answers(self):
        v = self.mount("plan")
        self.write_plan(v)
        c = harness.RpcClient(self.socket_path(v))
        self.addCleanup(c.close)
        agent = harness.RpcClient(c.call("agent.open")["socket"])
        self.addCleanup(agent.close)
        r = agent.call("plan.request_approval", {"name": "cache", "reason": "ready for review"})
        self.assertEqual(r["outcome"], "pending")
        # The person sees it where they see requests to switch, and answers it there.
        p = self.run_pw("mode", "--mount", v.mp, check=True)
        self.assertIn("the agent asks you to approve plan cache (\"ready for review\")",
                      p.stdout)
        self.assertEqual(c.call("mode.request.list")["pending"]["plan"], "cache")
        self.assertEqual(self.plan(v, "show", "cache")["status"], "draft")
        with self.assertRaisesRegex(RuntimeError, "only the person answers"):
            agent.call("mode.request.answer", {"approve": True})
        p = self.run_pw("mode", "--mount", v.mp, "--approve", str(r["id"]), check=True)
        self.assertIn("allowed: approve plan cache", p.stdout)
        self.assertEqual(agent.call("mode.request.wait", {"id": r["id"]})["outcome"],
                         "approved")
        shown = self.plan(v, "show", "cache")
        self.assertEqual(shown["status"], "approved")
        self.assertIn("request", shown["approved_by"])
        self.assertErrno(errno.EACCES, os.open, v.path("docs/plans/cache.md"), os.O_WRONLY)
        # The mode did not change; a denied request approves nothing.
        self.assertEqual(json.loads(self.run_pw("mode", "--mount", v.mp, "--json",
                                                check=True).stdout)["mode"], "plan")
        self.write_plan(v, "other")
        agent.call("plan.request_approval", {"name": "other"})
        self.run_pw("mode", "--mount", v.mp, "--deny", check=True)
        self.assertEqual(self.plan(v, "show", "other")["status"], "draft")

    def test_progress_and_protection_survive_a_remount(self):
        v = self.mount("plan")
        self.write_plan(v)
        self.plan(v, "approve", "cache")
        # Switching into a writing mode names the task to start with.
        p = self.set_mode(v, "build")
        self.assertIn("plan cache: 0/3 done; next: 1. Add the cache\n", p.stdout)
        p = self.set_mode(v, "plan")
        self.assertNotIn("next:", p.stdout)
        self.plan(v, "done", "1")
        self.plan(v, "done", "2", "--note", "second")
        self.unmount(v)
        v = self.mount("build")
        st = self.plan(v, "status")
        self.assertEqual(st["line"], "plan cache: 2/3 done; next: 3. Document it")
        self.assertErrno(errno.EACCES, os.open, v.path("docs/plans/cache.md"), os.O_WRONLY)
        st = self.plan(v, "done", "3")
        self.assertEqual(st["line"], "plan cache: 3/3 done; all tasks done")
        self.assertIsNone(st["active"])
        lst = self.plan(v, "list")
        self.assertEqual([(p["name"], p["status"], p["done"], p["total"])
                          for p in lst["plans"]], [("cache", "done", 3, 3)])
        self.assertIsNone(lst["active"])
        # Reopened, the progress stays.
        self.plan(v, "reopen", "cache")
        shown = self.plan(v, "show", "cache")
        self.assertEqual((shown["status"], shown["done"]), ("draft", 3))

    def test_changes_by_task(self):
        v = self.mount("plan")
        self.write_plan(v)
        self.plan(v, "approve", "cache")
        # The switch starts a change set: task 1 is in progress.
        self.set_mode(v, "build")
        with open(v.path("src/a.c"), "w") as f:
            f.write("int a = 1;\n")
        self.plan(v, "done", "1")
        # A checkpoint's change set is recorded with the task it did, when that is marked.
        self.run_pw("checkpoint", "--mount", v.mp, check=True)
        with open(v.path("src/b.c"), "w") as f:
            f.write("int b;\n")
        self.plan(v, "done", "2")
        p = self.run_pw("changes", "--mount", v.mp, "--plan", "cache", "--json", check=True)
        tasks = json.loads(p.stdout)["tasks"]
        changed = [sorted((c["kind"], c["path"]) for cs in t["changesets"]
                          for c in cs["changes"]) for t in tasks]
        self.assertEqual(changed, [[("modified", "src/a.c")], [("created", "src/b.c")], []])
        self.assertEqual([t["done"] for t in tasks], [True, True, False])
        p = self.run_pw("changes", "--mount", v.mp, "--plan", "cache", check=True)
        self.assertIn("1. [x] Add the cache\n", p.stdout)
        self.assertRegex(p.stdout, r"modified +src/a\.c")

    def test_broken_plan_is_writable_but_reported_and_not_approvable(self):
        v = self.mount("plan")
        self.write_plan(v, "broken", "no frontmatter here\n")
        shown = self.plan(v, "show", "broken")
        self.assertTrue(any("missing frontmatter" in p for p in shown["problems"]),
                        shown["problems"])
        p = self.plan(v, "approve", "broken", check=False)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("cannot be approved", p.stderr)
        self.write_plan(v, "broken", PLAN)  # still writable, and fixed


if __name__ == "__main__":
    unittest.main(verbosity=2)
