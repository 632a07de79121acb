#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""An approved plan is frozen in every live view of the project, through every write path,
including descriptors and mappings opened before the approval (issue 48).

Two views of one project, both in build (where every path below is allowed while the plan
is a draft, so each refusal is the freeze's): the shared (bare) view, and a run's own view
as `piworkfs run` mounts it (`mount --run ID` at DIR/run-ID/view, docs/internals/fs.md "A
view per run"). Each test writes through one of them, the target, and the person approves
through the other: the approval must reach a view that did not approve, before `plan
approve` returns. Every test runs twice, the target being the bare view and the run's view.

Fixture:
    project/
      src/a.c
      src/other.md          a file to rename, link or copy over the plan
      docs/plans/.keep      the plans folder
"""

import errno
import json
import mmap
import os
import signal
import sqlite3
import unittest

import harness  # noqa: E402

PLAN = harness.draft_plan("Add the cache", "Invalidate it on reload")

RUN_ID = "frz0r1"


class FrozenCase(harness.MountCase):
    """Target "bare" or "run"; subclasses below set it."""

    tree = {"src/a.c": "int a;\n", "src/other.md": "other\n", "docs/plans/.keep": ""}
    target = None

    def setUp(self):
        super().setUp()
        self.bare = self.mount("build")
        run_dir = os.path.join(self.runtime, "piworkfs", "run-" + RUN_ID)
        os.makedirs(os.path.join(run_dir, "view"))
        self.run = self.mount("build", args=["--run", RUN_ID],
                              mountpoint=os.path.join(run_dir, "view"))
        self.t, self.other = ((self.bare, self.run) if self.target == "bare"
                              else (self.run, self.bare))
        self.plan_path = self.t.path("docs/plans/cache.md")
        with open(self.plan_path, "w") as f:
            f.write(PLAN)

    # -- helpers --------------------------------------------------------------------------

    def pw_plan(self, v, *args):
        p = self.run_pw("plan", "--mount", v.mp, "--json", *args)
        self.assertEqual(p.returncode, 0, "plan %s: %s %s%s" % (args, p.stdout, p.stderr,
                                                                self.daemon_logs()))
        return json.loads(p.stdout)

    def approve(self):
        """Approves the plan through the other view; returns what it answered."""
        res = self.pw_plan(self.other, "approve", "cache")
        self.assertEqual(res["status"], "approved")
        self.approved = self.backing()
        return res

    def backing(self):
        with open(os.path.join(self.project, "docs/plans/cache.md"), "rb") as f:
            return f.read()

    def assert_frozen(self):
        """The approved file is as approval left it, and its hash still matches."""
        self.assertEqual(self.backing(), self.approved)
        shown = self.pw_plan(self.t, "show", "cache")
        self.assertEqual(shown["hash"], shown["file_hash"])
        self.assertEqual(shown["problems"], [])

    def old_fd(self, flags=os.O_RDWR):
        fd = os.open(self.plan_path, flags | os.O_CLOEXEC)
        self.addCleanup(os.close, fd)
        return fd

    # -- descriptors opened before the approval --------------------------------------------

    def test_pwrite_through_a_descriptor_opened_before(self):
        fd = self.old_fd()
        os.pwrite(fd, b"Cache", PLAN.index("Cache"))  # the draft is writable
        self.approve()
        self.assertErrno(errno.EACCES, os.pwrite, fd, b"EVIL", 200)
        self.assert_frozen()

    def test_append_through_a_descriptor_opened_before(self):
        fd = self.old_fd(os.O_WRONLY | os.O_APPEND)
        self.approve()
        self.assertErrno(errno.EACCES, os.write, fd, b"- [ ] one more\n")
        self.assert_frozen()

    def test_ftruncate_through_a_descriptor_opened_before(self):
        fd = self.old_fd()
        self.approve()
        self.assertErrno(errno.EACCES, os.ftruncate, fd, 10)
        self.assert_frozen()

    def test_fallocate_through_a_descriptor_opened_before(self):
        fd = self.old_fd()
        self.approve()
        self.assertErrno(errno.EACCES, os.posix_fallocate, fd, 0, 1 << 20)
        self.assert_frozen()

    def test_copy_file_range_into_a_descriptor_opened_before(self):
        fd = self.old_fd()
        src = os.open(self.t.path("src/other.md"), os.O_RDONLY | os.O_CLOEXEC)
        self.addCleanup(os.close, src)
        self.approve()
        self.assertErrno(errno.EACCES, os.copy_file_range, src, fd, 5, 0, 0)
        self.assert_frozen()

    def test_fchmod_and_fsetxattr_through_a_descriptor_opened_before(self):
        fd = self.old_fd()
        os.setxattr(fd, "user.note", b"draft")
        self.approve()
        self.assertErrno(errno.EACCES, os.fchmod, fd, 0o600)
        self.assertErrno(errno.EACCES, os.setxattr, fd, "user.note", b"changed")
        self.assertErrno(errno.EACCES, os.removexattr, fd, "user.note")
        self.assert_frozen()

    def test_shared_mapping_written_back_after(self):
        # A page dirtied while the plan was a draft, and dirtied again after the approval:
        # its write-back reaches the view after the approval, which refuses it.
        fd = self.old_fd()
        m = mmap.mmap(fd, len(PLAN), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.addCleanup(m.close)
        m[0:3] = b"---"
        self.approve()
        m[40:44] = b"MMAP"
        with self.assertRaises(OSError) as cm:
            m.flush()
        self.assertEqual(cm.exception.errno, errno.EACCES)
        self.assert_frozen()

    # -- new operations by name ------------------------------------------------------------

    def test_open_for_writing(self):
        self.approve()
        for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_APPEND,
                      os.O_WRONLY | os.O_TRUNC):
            self.assertErrno(errno.EACCES, os.open, self.plan_path, flags)
        self.assertFalse(os.access(self.plan_path, os.W_OK))
        self.assertFalse(os.stat(self.plan_path).st_mode & 0o222)
        self.assert_frozen()

    def test_setattr_by_name(self):
        self.approve()
        self.assertErrno(errno.EACCES, os.chmod, self.plan_path, 0o600)
        self.assertErrno(errno.EACCES, os.chown, self.plan_path, os.getuid(), os.getgid())
        self.assertErrno(errno.EACCES, os.utime, self.plan_path, (1, 1))
        self.assertErrno(errno.EACCES, os.truncate, self.plan_path, 0)
        self.assert_frozen()

    def test_xattrs_by_name(self):
        self.approve()
        self.assertErrno(errno.EACCES, os.setxattr, self.plan_path, "user.x", b"1")
        self.assertErrno(errno.EACCES, os.removexattr, self.plan_path, "user.x")
        self.assert_frozen()

    def test_rename_of_the_plan_and_of_its_folder(self):
        self.approve()
        self.assertErrno(errno.EACCES, os.rename, self.plan_path,
                         self.t.path("docs/plans/z.md"))
        self.assertErrno(errno.EACCES, os.rename, self.t.path("docs/plans"),
                         self.t.path("docs/p2"))
        self.assertErrno(errno.EACCES, os.rename, self.t.path("docs"), self.t.path("d2"))
        self.assert_frozen()

    def test_rename_and_link_over_or_of_it(self):
        self.approve()
        other = self.t.path("src/other.md")
        self.assertErrno(errno.EACCES, os.rename, other, self.plan_path)
        self.assertErrno(errno.EACCES, harness.renameat2, other, self.plan_path,
                         harness.RENAME_EXCHANGE)
        self.assertErrno(errno.EACCES, os.link, self.plan_path, self.t.path("src/hard.md"))
        self.assertFalse(os.path.exists(os.path.join(self.project, "src/hard.md")))
        self.assert_frozen()

    def test_unlink(self):
        self.approve()
        self.assertErrno(errno.EACCES, os.unlink, self.plan_path)
        self.assert_frozen()

    # -- the plans folder moved ------------------------------------------------------------

    def test_still_frozen_after_trust_moves_the_plans_folder(self):
        fd = self.old_fd()
        self.approve()
        os.makedirs(os.path.join(self.project, ".piworkfs"), exist_ok=True)
        os.makedirs(os.path.join(self.project, "notes/plans"))
        with open(os.path.join(self.project, ".piworkfs/config.yaml"), "w") as f:
            f.write("plans: notes/plans\n")
        self.trust()  # reloads every live view of the project: the folder moves
        for v in (self.t, self.other):
            self.run_pw("reload", "--mount", v.mp, check=True)
            self.assertEqual(self.rpc(v, "status")["fail_closed"], False)
        self.assertErrno(errno.EACCES, os.pwrite, fd, b"EVIL", 0)
        self.assertErrno(errno.EACCES, os.open, self.plan_path, os.O_WRONLY)
        self.assertErrno(errno.EACCES, os.rename, self.plan_path, self.t.path("src/z.md"))
        names = [p["name"] for p in self.pw_plan(self.t, "list")["plans"]]
        self.assertEqual(names, ["cache"])
        self.assert_frozen()

    # -- what the approval says ------------------------------------------------------------

    def test_the_approval_names_every_view_it_froze(self):
        res = self.approve()
        views = {v["mountpoint"]: v for v in res["views"]}
        self.assertEqual(set(views), {self.t.mp, self.other.mp})
        self.assertEqual(views[self.other.mp]["outcome"], "frozen")
        self.assertTrue(views[self.other.mp]["self"])
        self.assertEqual(views[self.t.mp]["outcome"], "frozen")
        self.assertEqual(views[self.run.mp]["run"], RUN_ID)
        # In words: where it holds, and no view left out.
        self.pw_plan(self.other, "reopen", "cache")
        p = self.run_pw("plan", "--mount", self.other.mp, "approve", "cache")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("protected in 2 views of the project: this view, ", p.stdout)
        self.assertIn("run " + RUN_ID if self.target == "run" else "the view at " + self.t.mp,
                      p.stdout)
        self.assertEqual(p.stderr, "")

    # -- reopened and approved again -------------------------------------------------------

    def test_reopen_then_approve_again(self):
        fd = self.old_fd()
        self.approve()
        self.pw_plan(self.other, "reopen", "cache")
        # Writable again in the target: the reopening reached it too.
        with open(self.plan_path, "a") as f:
            f.write("- [ ] Document it\n")
        fd2 = self.old_fd()
        self.approve()
        for d in (fd, fd2):
            self.assertErrno(errno.EACCES, os.pwrite, d, b"EVIL", 0)
        self.assertErrno(errno.EACCES, os.open, self.plan_path, os.O_WRONLY)
        self.assertErrno(errno.EACCES, os.unlink, self.plan_path)
        self.assert_frozen()
        self.assertIn(b"- [ ] Document it\n", self.backing())


class TargetBare(FrozenCase):
    target = "bare"


class TargetRun(FrozenCase):
    target = "run"


del FrozenCase  # a base, not a test


class WhenAFreezeCannotBeApplied(harness.MountCase):
    """A view that cannot apply the approved plans fails closed, says why in status, and
    `plan approve` says so; a view that does not answer is named and the approval fails; a
    view it cannot protect (another state database, mode off) is named."""

    tree = {"src/a.c": "int a;\n", "docs/plans/.keep": ""}

    def record_unprotectable_plan(self):
        # A recorded path no literal glob can name (only a damaged or hand-edited database
        # holds one): the view cannot protect it, so it must not guess.
        db = sqlite3.connect(self.state_db, timeout=60)
        with db:
            db.execute("INSERT INTO plans(project, path, status, hash, approved_ns, "
                       "approved_by, updated_ns) VALUES (?, 'docs/plans/[x].md', 'approved', "
                       "'0', 1, 'test', 1)", (self.project,))
        db.close()

    def status(self, v):
        return self.rpc(v, "status")

    def test_reload_fails_closed_and_status_says_why(self):
        v = self.mount("build")
        self.record_unprotectable_plan()
        p = self.run_pw("reload", "--mount", v.mp)
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)  # reload's: failing closed
        self.assertIn("FAILING CLOSED", p.stdout)
        st = self.status(v)
        self.assertTrue(st["fail_closed"], st)
        self.assertIn("docs/plans/[x].md", st["fail_reason"])
        self.assertErrno(errno.EROFS, os.open, v.path("src/a.c"), os.O_WRONLY)
        # Every mode: a switch happens into the mode failing closed.
        for mode in ("plan", "build"):
            p = self.run_pw("mode", "--mount", v.mp, mode)
            self.assertEqual(p.returncode, 3, p.stdout + p.stderr)  # mode's: failing closed
            self.assertIn("FAILING CLOSED", p.stdout)
            self.assertEqual(self.status(v)["mode"], mode)
            self.assertTrue(self.status(v)["fail_closed"])
            self.assertErrno(errno.EROFS, os.open, v.path("docs/plans/y.md"),
                             os.O_WRONLY | os.O_CREAT)
        # The record repaired, a reload recovers.
        db = sqlite3.connect(self.state_db, timeout=60)
        with db:
            db.execute("DELETE FROM plans WHERE path = 'docs/plans/[x].md'")
        db.close()
        self.run_pw("reload", "--mount", v.mp, check=True)
        self.assertFalse(self.status(v)["fail_closed"])
        os.close(os.open(v.path("src/a.c"), os.O_WRONLY))

    def test_approval_says_which_views_fail_closed(self):
        bare = self.mount("build")
        run_dir = os.path.join(self.runtime, "piworkfs", "run-" + RUN_ID)
        os.makedirs(os.path.join(run_dir, "view"))
        run = self.mount("build", args=["--run", RUN_ID], mountpoint=os.path.join(run_dir, "view"))
        with open(bare.path("docs/plans/cache.md"), "w") as f:
            f.write(PLAN)
        self.record_unprotectable_plan()
        p = self.run_pw("plan", "--mount", bare.mp, "approve", "cache")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("warning: this view fails closed, nothing is writable there: ", p.stderr)
        self.assertIn("warning: run %s fails closed" % RUN_ID, p.stderr)
        for v in (bare, run):
            self.assertTrue(self.status(v)["fail_closed"])
            self.assertErrno(errno.EROFS, os.open, v.path("docs/plans/cache.md"), os.O_WRONLY)

    def test_views_it_cannot_protect_are_named(self):
        # Another state database (approval is recorded per database), and mode off (which
        # protects nothing): both named, neither an error.
        bare = self.mount("build")
        d1, d2 = os.path.join(self.tmp, "v-other-db"), os.path.join(self.tmp, "v-off")
        os.makedirs(d1)
        os.makedirs(d2)
        other_db = os.path.join(self.tmp, "other.db")
        self.mount("build", mountpoint=d1, args=["--state-db", other_db])
        self.mount("off", mountpoint=d2)
        with open(bare.path("docs/plans/cache.md"), "w") as f:
            f.write(PLAN)
        p = self.run_pw("plan", "--mount", bare.mp, "--json", "approve", "cache")
        self.assertEqual(p.returncode, 0, p.stderr)
        views = {v["mountpoint"]: v for v in json.loads(p.stdout)["views"]}
        self.assertEqual(views[d1]["outcome"], "other-database")
        self.assertEqual(views[d1]["reason"], other_db)
        self.assertEqual(views[d2]["outcome"], "unprotected")
        self.assertEqual(views[bare.mp]["outcome"], "frozen")
        self.run_pw("plan", "--mount", bare.mp, "reopen", "cache", check=True)
        p = self.run_pw("plan", "--mount", bare.mp, "approve", "cache")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("note: the view at %s keeps another state database (%s)" % (d1, other_db),
                      p.stdout)
        self.assertIn("note: the view at %s is in a mode that protects nothing" % d2, p.stdout)
        # What each does: the other database's view never heard of the approval.
        os.close(os.open(os.path.join(d1, "docs/plans/cache.md"), os.O_WRONLY))
        self.assertErrno(errno.EACCES, os.open, bare.path("docs/plans/cache.md"), os.O_WRONLY)

    def test_a_view_that_does_not_answer_is_named_and_the_approval_fails(self):
        bare = self.mount("build")
        other = os.path.join(self.tmp, "other")
        os.makedirs(other)
        stuck = self.mount("build", mountpoint=other)
        with open(bare.path("docs/plans/cache.md"), "w") as f:
            f.write(PLAN)
        os.kill(stuck.pid, signal.SIGSTOP)
        try:
            p = self.run_pw("plan", "--mount", bare.mp, "approve", "cache", timeout=120)
        finally:
            os.kill(stuck.pid, signal.SIGCONT)
        self.assertEqual(p.returncode, 5, p.stdout + p.stderr)
        self.assertIn("the view at %s did not confirm (it did not answer in time)" % other,
                      p.stderr)
        # The approval stands where it was confirmed.
        self.assertErrno(errno.EACCES, os.open, bare.path("docs/plans/cache.md"), os.O_WRONLY)

if __name__ == "__main__":
    unittest.main(verbosity=2)
