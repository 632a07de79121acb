#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The life of a view: mounts refused with a clear one-line reason and a non-zero exit,
clean unmounts on SIGTERM, SIGINT, `piworkfs umount` and `fusermount3 -u`, recovery of a
mountpoint whose daemon was killed, the daemonized mount that returns only once the view
answers, and path and name length limits.

Fixture: harness.STANDARD_TREE (drawn there).
"""

import errno
import json
import os
import signal
import subprocess
import sys
import unittest

import harness  # noqa: E402

EXIT_CONFIG = 3


class RefusalTest(harness.MountCase):
    def refused(self, *args, code=None, needles=()):
        """`piworkfs mount ARGS` (daemonizing, so an unexpected success cannot hang) must
        fail with one line on stderr naming the problem, and mount nothing."""
        mine = lambda: [m for m in harness.piworkfs_mounts()  # noqa: E731
                        if m == self.tmp or m.startswith(self.tmp + "/")]
        mounted = mine()
        p = self.run_pw("mount", *args, timeout=60)
        self.assertNotEqual(p.returncode, 0, "mount %s succeeded: %s" % (args, p.stdout))
        if code is not None:
            self.assertEqual(p.returncode, code, p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertTrue(lines[0].startswith("piworkfs: "), p.stderr)
        for n in needles:
            self.assertIn(n, lines[0])
        self.assertEqual(mine(), mounted)
        return lines[0]

    def test_mountpoint_inside_project(self):
        inner = os.path.join(self.project, "view")
        os.mkdir(inner)
        self.refused(self.project, inner, code=EXIT_CONFIG, needles=("inside the project",))
        self.refused(self.project, self.project, code=EXIT_CONFIG)

    def test_project_inside_mountpoint(self):
        outer = os.path.join(self.tmp, "outer")
        proj = os.path.join(outer, "proj")
        os.makedirs(os.path.join(proj, "src"))
        self.refused(proj, outer, code=EXIT_CONFIG, needles=("inside the mountpoint",))

    def test_nonempty_mountpoint(self):
        open(os.path.join(self.mp, "stray"), "w").close()
        self.refused(self.project, self.mp, code=EXIT_CONFIG, needles=("not empty", "nonempty"))
        # -o nonempty mounts over it; the view shows the project, not the stray file.
        v = self.mount("plan", args=["-o", "nonempty"])
        self.assertNotIn("stray", os.listdir(v.mp))
        self.assertIn("src", os.listdir(v.mp))
        self.unmount(v)
        self.assertEqual(os.listdir(self.mp), ["stray"])

    def test_project_not_a_directory(self):
        f = os.path.join(self.tmp, "file")
        open(f, "w").close()
        self.refused(f, self.mp, code=EXIT_CONFIG, needles=("not a directory",))
        self.refused(os.path.join(self.tmp, "missing"), self.mp, code=EXIT_CONFIG,
                     needles=("does not exist",))

    def test_missing_mountpoint(self):
        mp = os.path.join(self.tmp, "nowhere")
        line = self.refused(self.project, mp, code=EXIT_CONFIG, needles=(mp,))
        self.assertIn("No such file or directory", line)
        f = os.path.join(self.tmp, "afile")
        open(f, "w").close()
        self.refused(self.project, f, code=EXIT_CONFIG, needles=("not a directory",))

    def test_unknown_mode(self):
        self.refused("--mode", "frobnicate", self.project, self.mp, code=EXIT_CONFIG,
                     needles=("unknown mode 'frobnicate'", "plan", "build"))

    def test_mountpoint_holding_a_live_view(self):
        v = self.mount("plan")
        other, _ = self.fresh_project("other")
        self.refused(other, self.mp, code=EXIT_CONFIG, needles=("already holds a live",))
        # The live view is untouched.
        self.assertTrue(os.path.exists(v.path("src/a.c")))
        self.assertTrue(harness.is_view_mounted(self.mp))

    def test_bad_option(self):
        p = self.run_pw("mount", "--bogus", self.project, self.mp)
        self.assertEqual(p.returncode, 2)
        p = self.run_pw("mount", self.project)
        self.assertEqual(p.returncode, 2)
        self.assertIn("MOUNTPOINT", p.stderr)


class UnmountTest(harness.MountCase):
    @staticmethod
    def stat_errno(path):
        try:
            os.stat(path)
            return 0
        except OSError as e:
            return e.errno

    def gone(self, v):
        self.assertFalse(harness.is_view_mounted(v.mp), "a mount is left at %s" % v.mp)
        self.assertFalse(os.path.exists("/proc/%d" % v.pid) and v.proc.poll() is None)
        v.unmounted = True

    def check_signal(self, sig):
        v = self.mount("build")
        os.stat(v.path("src/a.c"))
        v.proc.send_signal(sig)
        rc = self.wait_daemon_exit(v)
        self.assertEqual(rc, 0, "daemon exit after %s\n%s" % (sig, v.log()))
        self.gone(v)
        self.assertEqual(os.listdir(self.mp), [])

    def test_sigterm(self):
        self.check_signal(signal.SIGTERM)

    def test_sigint(self):
        self.check_signal(signal.SIGINT)

    def test_piworkfs_umount(self):
        v = self.mount("plan")
        p = self.run_pw("umount", v.mp)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.wait_daemon_exit(v), 0, v.log())
        self.gone(v)
        # Not a view any more: a clear refusal.
        p = self.run_pw("umount", v.mp)
        self.assertEqual(p.returncode, 4, p.stderr)
        self.assertIn("not a piworkfs view", p.stderr)

    def test_fusermount(self):
        v = self.mount("plan")
        self.unmount(v)
        self.gone(v)

    def test_sigterm_with_open_files(self):
        # A process still holds a descriptor and a cwd in the view: SIGTERM still unmounts
        # (the view goes away; the holder's descriptor stops working), and the daemon exits.
        v = self.mount("build")
        fd = os.open(v.path("src/a.c"), os.O_RDONLY | os.O_CLOEXEC)
        self.addCleanup(os.close, fd)
        holder = self.user_in(v)
        v.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.wait_daemon_exit(v), 0, v.log())
        self.gone(v)

    def test_umount_busy_then_lazy(self):
        v = self.mount("plan")
        holder = self.user_in(v)
        p = self.run_pw("umount", v.mp)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--lazy", p.stderr)
        self.assertTrue(harness.is_view_mounted(v.mp))
        os.stat(v.path("src/a.c"))  # the view still answers
        p = self.run_pw("umount", "--lazy", v.mp)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse(harness.is_view_mounted(v.mp))
        holder.kill()
        holder.wait(10)
        self.assertEqual(self.wait_daemon_exit(v), 0, v.log())
        v.unmounted = True

    def test_sigkill_then_remount_recovers(self):
        v = self.mount("build")
        os.stat(v.path("src/a.c"))
        v.proc.kill()
        v.proc.wait(10)
        v.unmounted = True  # the daemon is gone; the stale mount is the next mount's job
        if harness.OVER_URING:
            # Over FUSE over io_uring the kernel drops the connection only once the dead
            # daemon's rings are torn down, by a kernel worker after the process is reaped
            # (their commands hold /dev/fuse open): a request made in between waits for that
            # and fails with ECONNABORTED, as one in flight at the abort would.
            harness.wait_until(lambda: self.stat_errno(v.path("src/never-seen")) !=
                               errno.ECONNABORTED, 30)
        # (A name never looked up: cached attributes may still answer for known ones.)
        self.assertErrno(errno.ENOTCONN, os.stat, v.path("src/never-seen"))
        self.assertTrue("fuse.piworkfs" in harness.mounts_at(self.mp))
        v2 = self.mount("plan")
        self.assertIn("detached a stale view", v2.log())
        self.assertEqual(harness.mounts_at(self.mp), ["fuse.piworkfs"],
                         "the stale mount is still stacked under the new one")
        with open(v2.path("src/a.c")) as f:
            self.assertEqual(f.read(), harness.STANDARD_TREE["src/a.c"])
        self.unmount(v2)
        self.assertEqual(harness.mounts_at(self.mp), [])

    def test_umount_of_a_stale_view(self):
        v = self.mount("plan")
        v.proc.kill()
        v.proc.wait(10)
        v.unmounted = True
        p = self.run_pw("umount", self.mp)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(harness.mounts_at(self.mp), [])


class DaemonizedTest(harness.MountCase):
    def test_returns_when_the_view_answers(self):
        p = self.run_pw("mount", "--mode", "build", "--state-db", self.state_db, "--json",
                        self.project, self.mp, timeout=60)
        self.addCleanup(self._cleanup_daemon, p)
        self.assertEqual(p.returncode, 0, p.stderr)
        # Immediately usable: no wait, no retry.
        with open(os.path.join(self.mp, "src/a.c")) as f:
            self.assertEqual(f.read(), harness.STANDARD_TREE["src/a.c"])
        j = json.loads(p.stdout)
        self.assertEqual(j["mode"], "build")
        self.assertEqual(j["mountpoint"], self.mp)
        self.assertEqual(j["project"], self.project)
        self.assertTrue(os.path.exists("/proc/%d" % j["pid"]))
        r = subprocess.run(["fusermount3", "-u", self.mp], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(harness.wait_until(lambda: not os.path.exists("/proc/%d" % j["pid"]),
                                           harness.EXIT_DEADLINE), "the daemon did not exit")

    def test_prints_the_mode(self):
        p = self.run_pw("mount", "--mode", "design", "--state-db", self.state_db,
                        self.project, self.mp, timeout=60)
        self.addCleanup(self._cleanup_daemon, p)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "Mounted %s on %s in mode design.\n" % (self.project, self.mp))
        os.stat(os.path.join(self.mp, "docs/design/a.md"))
        r = self.run_pw("umount", self.mp)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_restores_the_last_mode(self):
        # Without --mode: a project never seen starts in plan; the next mount restores the
        # mode the view was left in.
        self.addCleanup(self._cleanup_daemon, None)
        self.assertEqual(self._mount_and_unmount(), "plan")
        self.assertEqual(self._mount_and_unmount("--mode", "design"), "design")
        self.assertEqual(self._mount_and_unmount(), "design")

    def _mount_and_unmount(self, *args):
        """Mounts (daemonized), checks the view obeys the mode it reports, unmounts, and
        waits for the daemon to exit: the next daemon reads the state this one wrote, so
        the daemon's exit, not a pause, is what the next mount waits for. Returns the mode."""
        p = self.run_pw("mount", "--json", *args, "--state-db", self.state_db, self.project,
                        self.mp)
        self.assertEqual(p.returncode, 0, p.stderr)
        j = json.loads(p.stdout)
        if j["mode"] == "plan":
            self.assertErrno(errno.EROFS, os.open, os.path.join(self.mp, "src/a.c"),
                             os.O_WRONLY | os.O_CLOEXEC)
        self.assertEqual(self.run_pw("umount", self.mp).returncode, 0)
        self.assertTrue(harness.wait_until(lambda: not os.path.exists("/proc/%d" % j["pid"]),
                                           harness.EXIT_DEADLINE), "the daemon did not exit")
        self.assertFalse(harness.is_view_mounted(self.mp))
        return j["mode"]

    def _cleanup_daemon(self, p):
        if harness.is_view_mounted(self.mp):
            subprocess.run(["fusermount3", "-u", "-z", self.mp], capture_output=True, timeout=30)


class LengthTest(harness.MountCase):
    def test_name_max(self):
        v = self.mount("build")
        name = "n" * 255
        fd = os.open(v.path("src/" + name), os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644)
        os.write(fd, b"x")
        os.close(fd)
        self.assertTrue(os.path.exists(os.path.join(self.project, "src", name)))
        self.assertIn(name, os.listdir(v.path("src")))
        os.rename(v.path("src/" + name), v.path("src/" + "m" * 255))
        os.mkdir(v.path("src/" + "d" * 255))
        before = harness.tree_hash(self.project)
        long = "n" * 256
        self.assertErrno(errno.ENAMETOOLONG, os.open, v.path("src/" + long),
                         os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644)
        self.assertErrno(errno.ENAMETOOLONG, os.mkdir, v.path("src/" + long))
        self.assertErrno(errno.ENAMETOOLONG, os.stat, v.path("src/" + long))
        self.assertErrno(errno.ENAMETOOLONG, os.rename, v.path("src/a.c"), v.path("src/" + long))
        self.assertErrno(errno.ENAMETOOLONG, os.symlink, "x", v.path("src/" + long))
        self.assertEqual(before, harness.tree_hash(self.project))

    def test_path_max(self):
        v = self.mount("build")
        # Directories of 200-byte names down to an absolute view path of exactly 4095
        # bytes (PATH_MAX with its NUL), each step made with an ordinary path syscall.
        path = v.mp
        comp = 0
        while len(path) + 1 + 200 + 1 + 10 <= 4095:
            path = path + "/" + ("%03d" % comp) * 66 + "dd"
            comp += 1
            os.mkdir(path)
        last = "f" * (4095 - len(path) - 1)
        full = path + "/" + last
        self.assertEqual(len(full), 4095)
        fd = os.open(full, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644)
        os.write(fd, b"deep")
        os.close(fd)
        with open(full, "rb") as f:
            self.assertEqual(f.read(), b"deep")
        self.assertEqual(os.stat(full).st_size, 4)
        # On the backing (whose own absolute path is longer): walk it with descriptors.
        bfd = os.open(self.project, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        for c in full[len(v.mp) + 1:].split("/")[:-1]:
            nfd = os.open(c, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=bfd)
            os.close(bfd)
            bfd = nfd
        fd = os.open(last, os.O_RDONLY | os.O_CLOEXEC, dir_fd=bfd)
        self.assertEqual(os.read(fd, 10), b"deep")
        os.close(fd)
        os.close(bfd)
        # One byte more is the kernel's ENAMETOOLONG.
        self.assertErrno(errno.ENAMETOOLONG, os.stat, full + "g")
        # Deeper than PATH_MAX, reached through directory descriptors, the view goes on
        # (the daemon opens such paths in steps) up to its own limit of 64 KiB from the
        # project root (PW_TREE_PATH_MAX): there a clean ENAMETOOLONG, and the view keeps
        # answering.
        base = len(path) - len(v.mp) - 1  # project-relative
        limit_at = next(i for i in range(1000) if base + 201 * (i + 1) >= 65536)
        dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            depth_err = None
            for i in range(limit_at + 2):
                try:
                    os.mkdir("x" * 200, dir_fd=dfd)
                    nfd = os.open("x" * 200, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC,
                                  dir_fd=dfd)
                except OSError as e:
                    depth_err = e
                    break
                os.close(dfd)
                dfd = nfd
            self.assertIsNotNone(depth_err, "no limit on the depth of project paths")
            self.assertEqual(depth_err.errno, errno.ENAMETOOLONG, depth_err)
            self.assertEqual(i, limit_at)
        finally:
            os.close(dfd)
        self.assertTrue(os.path.exists(v.path("src/a.c")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
