#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`piworkfs umount` returns once the daemon is gone, every time (issue 44, item 11).

An unmount ends the view in the mount namespace it is made in. A copy of the mount in
another namespace, made while the view was mounted (`unshare -m`, the sandbox of a
`piworkfs run` of any project, which binds the whole host, a service with private mounts),
keeps the kernel's connection alive, and so the daemon serving it: `piworkfs umount` waited
its 10 s, said "its daemon ... has not exited" and exited 5, and the daemon went when that
namespace ended, seconds or hours later. Now umount ends the daemon once the view is
unmounted (the copy answers ENOTCONN), and a daemon never unmounts what another mount put
at its mountpoint meanwhile.

These tests make mount namespaces that copy every mount of the machine, so they run alone
(tests/mount/meson.build), and each ends its own at cleanup.

Fixture: the standard tree (tests/lib/harness.py).
"""

import os
import signal
import subprocess
import unittest

import harness  # noqa: E402

DEADLINE = 60.0


class Umount(harness.MountCase):
    def holder(self):
        """A process in a mount namespace of its own, a copy of ours made now: it holds a
        copy of every mount there is, the view among them. Ended at cleanup."""
        p = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sleep",
                              "600"], stdin=subprocess.DEVNULL)
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)
        ours = os.readlink("/proc/self/ns/mnt")

        def copied():
            try:
                return (os.readlink("/proc/%d/ns/mnt" % p.pid) != ours and
                        open("/proc/%d/comm" % p.pid).read().strip() == "sleep")
            except OSError:
                return False
        self.assertTrue(harness.wait_until(copied, DEADLINE), "no namespace of its own")
        with open("/proc/%d/mountinfo" % p.pid) as f:
            self.assertIn(" %s " % self.mp, f.read(), "the copy holds no view")
        return p

    def stat_in(self, pid, path):
        """stat(1) of PATH in the mount namespace of PID: (exit status, stderr)."""
        p = subprocess.run(["nsenter", "-t", str(pid), "-m", "stat", path],
                           capture_output=True, text=True, timeout=DEADLINE)
        return p.returncode, p.stderr

    def test_umount_ends_a_daemon_a_copy_in_another_namespace_keeps(self):
        v = self.mount("build")
        h = self.holder()
        self.assertEqual(self.stat_in(h.pid, v.path("src/a.c"))[0], 0,
                         "the copy is the view, served by its daemon")
        p = self.run_pw("umount", v.mp)
        self.assertEqual(p.returncode, 0, "umount: %s%s" % (p.stderr, self.daemon_logs()))
        self.assertNotIn("has not exited", p.stderr)
        # umount returned with the daemon gone (reaped here, as its parent).
        self.assertEqual(self.wait_daemon_exit(v, DEADLINE), 0, v.log())
        v.unmounted = True
        self.assertFalse(harness.is_view_mounted(v.mp))
        # The copy does not serve on behind the person's back (a name never looked up:
        # the kernel may answer for known ones from its cache).
        rc, err = self.stat_in(h.pid, v.path("src/never-seen"))
        self.assertNotEqual(rc, 0)
        self.assertIn("Transport endpoint is not connected", err)

    def test_a_busy_view_is_still_refused_and_lazy_still_waits_for_its_users(self):
        # The control of the above: a view in use here is refused (nothing is ended), and
        # --lazy leaves the daemon to serve its users until they let go.
        v = self.mount("plan")
        self.holder()
        user = self.user_in(v, seconds=600)
        p = self.run_pw("umount", v.mp)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("busy", p.stderr)
        self.assertIsNone(v.proc.poll(), "a refused unmount ended the daemon")
        p = self.run_pw("umount", "--lazy", v.mp)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIsNone(v.proc.poll(), "a lazy unmount ended the daemon under its user")
        self.assertEqual(sorted(os.listdir("/proc/%d/cwd" % user.pid)), ["a.c", "b.c", "empty"])
        v.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.wait_daemon_exit(v, DEADLINE), 0, v.log())
        v.unmounted = True

    def test_a_daemon_never_unmounts_what_was_mounted_over_its_mountpoint(self):
        # The view is unmounted with plain fusermount3 while a copy keeps its daemon; then
        # another filesystem is mounted at the same place, and the daemon is told to end.
        # Its teardown unmounted "whatever is at the mountpoint": the new mount went.
        v = self.mount("build")
        self.holder()
        self.assertEqual(harness.fusermount_u(v.mp).returncode, 0)
        self.assertIsNone(v.proc.poll())
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "pw-other", v.mp],
                       check=True, timeout=DEADLINE)
        self.addCleanup(subprocess.run, ["umount", "-l", v.mp], stderr=subprocess.DEVNULL)
        v.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.wait_daemon_exit(v, DEADLINE), 0, v.log())
        v.unmounted = True
        self.assertEqual(harness.mounts_at(v.mp), ["tmpfs"],
                         "the daemon's teardown unmounted another mount\n" + v.log())


if __name__ == "__main__":
    unittest.main()
