#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Escape attempts: symlinks, `..`, a directory swapped for a symlink while the view
works in it, hard links and renames across allowed and denied areas.

What a bare mount can and cannot promise (and what is therefore asserted here):
  - The daemon never follows a symlink: every name it touches is resolved beneath the
    project root without following links. A relative symlink inside the view is resolved
    by the kernel through the view, so the policy applies to where it lands.
  - An absolute symlink is resolved by the kernel on the host. A symlink inside the project
    that names the project's own backing path therefore leads a process straight to the
    backing directory, bypassing the view. That is the documented limit of a bare mount
    (docs/SECURITY.md) and the reason `piworkfs run` exists: it runs the agent where the
    backing directory is not reachable. test_absolute_symlink_is_resolved_by_the_host
    pins that limit down so a change in behaviour is noticed.

Fixture: harness.STANDARD_TREE (drawn there).
"""

import errno
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest

import harness  # noqa: E402

EACCES = errno.EACCES
EROFS = errno.EROFS


class SymlinkTest(harness.MountCase):
    def test_relative_symlink_out_of_the_allowed_area(self):
        # docs/design/up -> ../../src: in design, the kernel resolves it inside the view to
        # src/, where writes are denied.
        os.symlink("../../src", os.path.join(self.project, "docs/design/up"))
        os.symlink("../../src/a.c", os.path.join(self.project, "docs/design/a-link.c"))
        v = self.mount("design")
        before = harness.tree_hash(self.project)
        self.assertEqual(os.listdir(v.path("docs/design/up")), os.listdir(v.path("src")))
        self.assertErrno(EACCES, os.open, v.path("docs/design/up/a.c"),
                         os.O_WRONLY | os.O_CLOEXEC)
        self.assertErrno(EACCES, os.open, v.path("docs/design/a-link.c"),
                         os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
        self.assertErrno(EACCES, os.open, v.path("docs/design/up/new.c"),
                         os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644)
        self.assertErrno(EACCES, os.truncate, v.path("docs/design/a-link.c"), 0)
        self.assertErrno(EACCES, os.chmod, v.path("docs/design/a-link.c"), 0o600)
        self.assertErrno(EACCES, os.mkdir, v.path("docs/design/up/d"))
        self.assertErrno(EACCES, os.unlink, v.path("docs/design/up/a.c"))
        self.assertEqual(before, harness.tree_hash(self.project))
        # The link itself lives in the allowed area: it may be removed, and replaced.
        os.unlink(v.path("docs/design/a-link.c"))
        self.assertFalse(os.path.lexists(os.path.join(self.project, "docs/design/a-link.c")))
        with open(os.path.join(self.project, "src/a.c")) as f:
            self.assertEqual(f.read(), harness.STANDARD_TREE["src/a.c"])

    def test_symlink_to_the_view_path(self):
        # An absolute symlink naming a path inside the VIEW goes back through the view.
        os.symlink(os.path.join(self.mp, "src"), os.path.join(self.project, "docs/design/vw"))
        v = self.mount("design")
        before = harness.tree_hash(self.project)
        self.assertErrno(EACCES, os.open, v.path("docs/design/vw/a.c"),
                         os.O_WRONLY | os.O_CLOEXEC)
        self.assertErrno(EACCES, os.open, v.path("docs/design/vw/n.c"),
                         os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644)
        self.assertEqual(before, harness.tree_hash(self.project))

    def test_daemon_does_not_follow_the_last_component(self):
        # O_NOFOLLOW on a symlink through the view answers ELOOP: the view presents the
        # link as a link, never as its target.
        os.symlink("../../src/a.c", os.path.join(self.project, "docs/design/l.c"))
        os.symlink("/etc/passwd", os.path.join(self.project, "docs/design/etc"))
        v = self.mount("design")
        self.assertErrno(errno.ELOOP, os.open, v.path("docs/design/l.c"),
                         os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        self.assertEqual(os.readlink(v.path("docs/design/l.c")), "../../src/a.c")
        self.assertEqual(os.readlink(v.path("docs/design/etc")), "/etc/passwd")
        st = os.lstat(v.path("docs/design/etc"))
        self.assertTrue(os.path.islink(v.path("docs/design/etc")), oct(st.st_mode))

    def test_absolute_symlink_is_resolved_by_the_host(self):
        # The documented limit of a bare mount (see the module docstring): a symlink naming
        # the project's own backing directory leads out of the view. The write succeeds in
        # plan mode because it never reaches the daemon. `piworkfs run` closes this hole.
        os.symlink(os.path.join(self.project, "src"), os.path.join(self.project, "docs/back"))
        v = self.mount("plan")
        with open(v.path("docs/back/a.c"), "a") as f:
            f.write("/* written through an absolute symlink */\n")
        with open(os.path.join(self.project, "src/a.c")) as f:
            self.assertIn("absolute symlink", f.read())
        # The view itself still refuses the same file by its own name.
        self.assertErrno(EROFS, os.open, v.path("src/a.c"), os.O_WRONLY | os.O_CLOEXEC)


class DotDotTest(harness.MountCase):
    def test_dotdot_paths(self):
        v = self.mount("design")
        before = harness.tree_hash(self.project)
        mp = v.mp
        for p in ["docs/design/../../src/a.c", "docs/design/sub/../../x.md",
                  "docs/design/../x.md", "src/../docs/x.md", "./src/./a.c"]:
            with self.subTest(path=p):
                self.assertErrno(EACCES, os.open, mp + "/" + p, os.O_WRONLY | os.O_CLOEXEC)
        self.assertErrno(EACCES, os.open, mp + "/docs/design/sub/../../new.md",
                         os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644)
        self.assertErrno(EACCES, os.mkdir, mp + "/docs/design/../newdir")
        self.assertErrno(EACCES, os.rename, mp + "/docs/design/a.md",
                         mp + "/docs/design/sub/../../a.md")
        self.assertEqual(before, harness.tree_hash(self.project))
        # `..` that stays inside the allowed area is allowed, and lands where it says.
        fd = os.open(mp + "/docs/design/sub/../new.md", os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC,
                     0o644)
        os.write(fd, b"new\n")
        os.close(fd)
        with open(os.path.join(self.project, "docs/design/new.md")) as f:
            self.assertEqual(f.read(), "new\n")
        # `..` of the view's root is the mountpoint's parent on the host, not the project's.
        self.assertTrue(os.path.samefile(mp + "/..", os.path.dirname(mp)))
        self.assertTrue(os.path.samefile(mp + "/src/../..", os.path.dirname(mp)))


class SwapRaceTest(harness.MountCase):
    """A directory swapped for a symlink to an outside directory while the view creates,
    renames and links in it through a directory descriptor: the daemon resolves every name
    beneath the project root without following links, so nothing may ever land outside."""

    DURATION = 3.0

    def test_swap_dir_and_symlink(self):
        outside = tempfile.mkdtemp(prefix="pw-outside-")
        self.addCleanup(shutil.rmtree, outside, True)
        os.chmod(outside, 0o777)
        design = os.path.join(self.project, "docs/design")
        os.symlink(outside, os.path.join(design, "sub.link"))
        os.symlink(outside, os.path.join(design, "rel.link"))
        v = self.mount("design")
        stop = threading.Event()
        counts = {"swaps": 0, "creates": 0, "ops": 0}
        failures = []

        def swapper():
            a = os.path.join(design, "sub")
            b = os.path.join(design, "sub.link")
            try:
                while not stop.is_set():
                    harness.renameat2(a, b, harness.RENAME_EXCHANGE)
                    counts["swaps"] += 1
                    # Let each state last a moment, so both get used through the view.
                    time.sleep(0.0002 * (counts["swaps"] % 7))
            except Exception as e:  # noqa: BLE001
                failures.append("swapper: %r" % e)

        def dir_ops(dfd, tid, i):
            name = "f-%d-%d" % (tid, i)
            for op in (
                lambda: os.close(os.open(name, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC |
                                         os.O_NOFOLLOW, 0o644, dir_fd=dfd)),
                lambda: os.mkdir("d-%d-%d" % (tid, i), dir_fd=dfd),
                lambda: os.symlink("t", "s-%d-%d" % (tid, i), dir_fd=dfd),
                lambda: os.rename(name, "r-%d-%d" % (tid, i), src_dir_fd=dfd, dst_dir_fd=dfd),
                lambda: os.link("r-%d-%d" % (tid, i), "h-%d-%d" % (tid, i), src_dir_fd=dfd,
                                dst_dir_fd=dfd),
                lambda: os.mkfifo("p-%d-%d" % (tid, i), dir_fd=dfd),
                lambda: os.utime(".", dir_fd=dfd),
            ):
                counts["ops"] += 1
                try:
                    op()
                    counts["creates"] += 1
                except OSError as e:
                    k = "op:" + errno.errorcode.get(e.errno, "?")
                    counts[k] = counts.get(k, 0) + 1

        def writer(tid, held):
            # HELD is a descriptor of docs/design/sub opened through the view while it was
            # still a directory: the daemon keeps knowing that node by its name, which the
            # swapper keeps pointing at a symlink to OUTSIDE half of the time.
            i = 0
            while not stop.is_set():
                i += 1
                dir_ops(held, tid, i)
                # Freshly opened too (fails while the view shows the symlink).
                try:
                    dfd = os.open(v.path("docs/design/sub"),
                                  os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
                except OSError:
                    counts["reopen-failed"] += 1
                else:
                    try:
                        dir_ops(dfd, tid + 100, i)
                    finally:
                        os.close(dfd)
                # Path-based too, with the last component not followed.
                try:
                    os.close(os.open(v.path("docs/design/sub/q-%d-%d" % (tid, i)),
                                     os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW,
                                     0o644))
                except OSError:
                    pass

        held = [os.open(v.path("docs/design/sub"), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                for _ in range(2)]
        for fd in held:
            self.addCleanup(os.close, fd)
        counts["reopen-failed"] = 0
        threads = [threading.Thread(target=swapper)] + \
            [threading.Thread(target=writer, args=(t, held[t])) for t in range(2)]
        for t in threads:
            t.start()
        time.sleep(self.DURATION)
        stop.set()
        for t in threads:
            t.join(30)
            self.assertFalse(t.is_alive(), "a thread did not stop")
        self.assertEqual(failures, [])
        # Path-based creation through the view resolves the swapped-in symlink on the HOST
        # (its target is absolute): that is the bare-mount limit, not the daemon following
        # a link. Only names the daemon resolved itself count: the f-/d-/s-/r-/p- ones.
        leaked = [n for n in os.listdir(outside) if not n.startswith("q-")]
        self.assertEqual(leaked, [], "the daemon created names outside the project "
                         "(%s)\n%s" % (counts, v.log()))
        # The storm really ran through the daemon.
        self.assertGreater(counts["swaps"], 100, counts)
        self.assertGreater(counts["ops"], 1000, counts)
        # Afterwards, with the directory back at its name, the view recovers: a fresh
        # descriptor works, and so do the held ones.
        # (Before 02e1095 the held descriptors answered EIO here.)
        if os.path.islink(os.path.join(design, "sub")):
            harness.renameat2(os.path.join(design, "sub"), os.path.join(design, "sub.link"),
                              harness.RENAME_EXCHANGE)
        self.assertTrue(harness.wait_until(
            lambda: os.path.isdir(v.path("docs/design/sub")) and
            not os.path.islink(v.path("docs/design/sub")), harness.DEADLINE),
            "the view still shows docs/design/sub as a symlink long after the storm")
        for n, fd in enumerate(held):
            os.mkdir("after-%d" % n, dir_fd=fd)
            self.assertTrue(os.path.isdir(os.path.join(design, "sub", "after-%d" % n)))


class LinkRenameAcrossTest(harness.MountCase):
    def test_design_link_and_rename_across(self):
        v = self.mount("design")
        self.assert_refused_and_unchanged(v, [
            (EACCES, os.link, "src/a.c", "docs/design/b"),
            (EACCES, os.link, "docs/design/a.md", "src/x"),
            (EACCES, os.rename, "docs/design/a.md", "src/x"),
            (EACCES, os.rename, "src/a.c", "docs/design/a.c"),
            (EACCES, os.rename, "docs/design", "design2"),
            (EACCES, os.rename, "docs", "docs2"),
            (EACCES, harness.renameat2, "docs/design/a.md", "docs/x.md",
             harness.RENAME_EXCHANGE),
        ])
        # Within the allowed area both work.
        os.link(v.path("docs/design/a.md"), v.path("docs/design/hl.md"))
        os.rename(v.path("docs/design/hl.md"), v.path("docs/design/sub/hl.md"))
        self.assertTrue(os.path.samefile(os.path.join(self.project, "docs/design/a.md"),
                                         os.path.join(self.project, "docs/design/sub/hl.md")))

    def test_build_rename_of_protected_parents(self):
        v = self.mount("build")
        os.mkdir(v.path("newdir"))
        self.assert_refused_and_unchanged(v, [
            # .git holds protected paths (.git/hooks, .git/config): moving it would move
            # them to names no rule protects.
            (EACCES, os.rename, ".git", ".gitx"),
            (EACCES, harness.renameat2, ".git", ".gitx", harness.RENAME_NOREPLACE),
            (EACCES, harness.renameat2, ".git", "src", harness.RENAME_EXCHANGE),
            (EACCES, harness.renameat2, "src", ".git", harness.RENAME_EXCHANGE),
            (EACCES, os.rename, ".git/hooks", ".git/hooks2"),
            (EACCES, os.rename, ".piworkfs", "piworkfs"),
            (EACCES, os.rename, "src", ".git/hooks"),
            (EACCES, os.rename, "newdir", ".git/hooks"),
            (EACCES, os.rename, "newdir", ".git/hooks/new"),
            (EACCES, os.rename, "newdir", ".piworkfs/new"),
        ])
        # A directory with nothing protected beneath it moves freely.
        self.assert_moves(v, "src", "src2")

    def test_hard_link_alias_of_a_protected_file(self):
        # A hard link made outside the view to a protected file: once the view knows both
        # names, a write through the unprotected name must be refused (a mutation must be
        # allowed under every name of the node).
        os.link(os.path.join(self.project, ".git/hooks/pre-commit"),
                os.path.join(self.project, "src/alias"))
        v = self.mount("build")
        os.stat(v.path(".git/hooks/pre-commit"))
        os.stat(v.path("src/alias"))
        before = harness.tree_hash(self.project)
        self.assertErrno(EACCES, os.open, v.path("src/alias"), os.O_WRONLY | os.O_CLOEXEC)
        self.assertErrno(EACCES, os.truncate, v.path("src/alias"), 0)
        self.assertErrno(EACCES, os.chmod, v.path("src/alias"), 0o777)
        self.assertEqual(before, harness.tree_hash(self.project))
        # The alias name itself may be removed (the protected name keeps the data).
        os.unlink(v.path("src/alias"))
        self.assertTrue(os.path.exists(os.path.join(self.project, ".git/hooks/pre-commit")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
