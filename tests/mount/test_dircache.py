#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Directory descriptors kept between requests (fs/dircache.c).

A create's LOOKUP, CREATE and UNLINK each act in the parent directory, which the daemon
used to open from the root and check (openat2, fstat, close) for every one of them. It now
keeps the descriptor while the guard (a second inotify instance watching every directory
the view knows for moves, removals and permission changes) has seen nothing since, and the
kernel says so at each use. What that must never change: a directory moved or replaced
outside the view is never written through its old descriptor, inside the project or out of
it (containment does not rest on when the watcher reads its events).

The tests of a stale directory mount with PIWORKFS_WATCH_BATCH_MS: the watcher then waits
seconds before reading its events, so the kernel still believes in the old directory when the
test creates a file in it through the view, and the request reaches the daemon with the stale
node, which is what is tested (without the knob the watcher would often invalidate first and
the kernel alone would refuse). The control, test_the_stale_requests_reach_the_daemon,
proves that they do. Changes of files in a kept directory (touch, chmod: IN_ATTRIB events
about the file) keep it; a change of a directory's permissions outside the view reaches a
daemon whose walks check search permission (WithoutSearchCapability: root's pass every
directory anyway, so its guard does not ask for IN_ATTRIB).

Fixture:

    project/            (inside the test's temp dir, beside outside/)
      d/seed            a directory the view has used before the change
      a/b/seed          a directory two levels down
    outside/            a directory of the test, not in the project
"""

import errno
import os
import shutil
import sys
import time
import unittest

import harness  # noqa: E402

TREE = {"d/seed": "s\n", "a/b/seed": "s\n"}
SLOW_WATCH_MS = "20000"


class DirCache(harness.MountCase):
    tree = TREE

    def status(self, v):
        return self.rpc(v, "status")

    def warm(self, v, rel):
        """Creates and removes a file in REL through the view, so the daemon holds REL."""
        path = v.path(os.path.join(rel, "warm"))
        with open(path, "w") as f:
            f.write("w")
        os.unlink(path)

    def outside(self):
        d = os.path.join(self.tmp, "outside")
        os.makedirs(d, exist_ok=True)
        return d

    def create_fails(self, path):
        """Creating PATH through the view must fail (the name it lies in is gone)."""
        try:
            with open(path, "w") as f:
                f.write("x")
        except OSError as e:
            return e.errno
        self.fail("%s was created through a directory that is no longer there" % path)

    def test_creates_in_one_directory_resolve_it_once(self):
        """100 files created and removed in one directory: the directory is resolved from
        the root a few times, not once per LOOKUP, CREATE and UNLINK (300 times)."""
        v = self.mount()
        os.mkdir(v.path("w"))
        before = self.status(v)["dircache"]
        for i in range(100):
            with open(v.path("w/n%d" % i), "w") as f:
                f.write("x")
        for i in range(100):
            os.unlink(v.path("w/n%d" % i))
        after = self.status(v)["dircache"]
        self.assertTrue(after["enabled"], after)
        self.assertLessEqual(after["misses"] - before["misses"], 5, after)
        self.assertGreaterEqual(after["hits"] - before["hits"], 295, after)
        self.assertEqual(sorted(os.listdir(os.path.join(self.project, "w"))), [])

    def test_the_stale_requests_reach_the_daemon(self):
        """Control: with the watcher slowed down, a directory renamed outside the view is
        still believed in by the kernel, so the create below is sent to the daemon (a
        CREATE counted), not refused by the kernel alone."""
        self.env["PIWORKFS_WATCH_BATCH_MS"] = SLOW_WATCH_MS
        v = self.mount()
        self.warm(v, "d")
        os.rename(os.path.join(self.project, "d"), os.path.join(self.project, "e"))
        creates = self.status(v)["requests"]["ops"].get("CREATE", 0)
        self.create_fails(v.path("d/new"))
        self.assertGreater(self.status(v)["requests"]["ops"].get("CREATE", 0), creates)

    def test_a_directory_renamed_outside_is_not_written_through(self):
        self.env["PIWORKFS_WATCH_BATCH_MS"] = SLOW_WATCH_MS
        v = self.mount()
        self.warm(v, "d")
        os.rename(os.path.join(self.project, "d"), os.path.join(self.project, "e"))
        self.create_fails(v.path("d/new"))
        self.assertEqual(sorted(os.listdir(os.path.join(self.project, "e"))), ["seed"])

    def test_a_directory_moved_out_of_the_project_is_not_written_through(self):
        self.env["PIWORKFS_WATCH_BATCH_MS"] = SLOW_WATCH_MS
        v = self.mount()
        self.warm(v, "d")
        gone = os.path.join(self.outside(), "d")
        os.rename(os.path.join(self.project, "d"), gone)
        self.create_fails(v.path("d/new"))
        self.assertEqual(sorted(os.listdir(gone)), ["seed"])

    def test_an_ancestor_moved_out_and_replaced_by_a_symlink(self):
        """a/ moves out of the project and a symlink to where it went takes its name: the
        view must neither write into a/b through the old descriptor nor follow the link."""
        self.env["PIWORKFS_WATCH_BATCH_MS"] = SLOW_WATCH_MS
        v = self.mount()
        self.warm(v, "a/b")
        gone = os.path.join(self.outside(), "a")
        os.rename(os.path.join(self.project, "a"), gone)
        os.symlink(gone, os.path.join(self.project, "a"))
        self.create_fails(v.path("a/b/new"))
        self.assertEqual(sorted(os.listdir(os.path.join(gone, "b"))), ["seed"])

    def test_a_directory_replaced_by_a_new_one(self):
        """d/ is moved aside and a new d/ made: a file created through the view as d/x
        lands in the new directory, never in the old one."""
        self.env["PIWORKFS_WATCH_BATCH_MS"] = SLOW_WATCH_MS
        v = self.mount()
        self.warm(v, "d")
        os.rename(os.path.join(self.project, "d"), os.path.join(self.project, "old"))
        os.mkdir(os.path.join(self.project, "d"))
        try:
            with open(v.path("d/x"), "w") as f:
                f.write("x")
        except OSError as e:
            self.assertEqual(e.errno, errno.ESTALE)
        self.assertEqual(sorted(os.listdir(os.path.join(self.project, "old"))), ["seed"])

    def test_changes_of_files_keep_what_is_kept(self):
        """touch and chmod of files in a kept directory change no directory's path or
        permissions: the directory stays kept (nothing is given up)."""
        v = self.mount()
        self.warm(v, "a/b")
        before = self.status(v)["dircache"]
        for i in range(20):
            path = v.path("a/b/t%d" % i)
            with open(path, "w") as f:
                f.write("x")
            os.utime(path)
            os.chmod(path, 0o600)
        after = self.status(v)["dircache"]
        self.assertEqual(after["flushes"], before["flushes"], after)
        self.assertLessEqual(after["misses"] - before["misses"], 2, after)

    def test_descriptors_stay_bounded(self):
        """Files created in 300 directories: the daemon keeps at most 64 of them open."""
        v = self.mount()
        for i in range(300):
            os.mkdir(v.path("m%d" % i))
        for i in range(300):
            self.warm(v, "m%d" % i)
        self.assertLessEqual(self.project_dirs_open(v), 64)
        self.assertGreater(self.status(v)["dircache"]["hits"], 0)

    def project_dirs_open(self, v):
        """The daemon's descriptors of directories of the project (the root's own aside)."""
        n = 0
        fds = "/proc/%d/fd" % v.pid
        for fd in os.listdir(fds):
            try:
                target = os.readlink(os.path.join(fds, fd))
            except OSError:
                continue
            if target.startswith(self.project + "/") and os.path.isdir(target):
                n += 1
        return n


class WithoutSearchCapability(harness.MountCase):
    """A daemon whose walks from the root check search permission (root without
    CAP_DAC_READ_SEARCH and CAP_DAC_OVERRIDE, as a daemon of another user would): a change of
    a directory's permissions outside the view must reach what is kept, while changes of
    files in it keep it. The daemon is started through setpriv with both capabilities out of
    its bounding set (/dev/fuse is root's alone here, so an unprivileged daemon could not
    mount)."""

    tree = TREE

    def setUp(self):
        super().setUp()
        if not shutil.which("setpriv"):
            self.fail("setpriv (util-linux) is needed")
        wrapper = os.path.join(self.tmp, "piworkfs-nodac")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\nexec setpriv --bounding-set -dac_read_search,-dac_override"
                    " -- %s \"$@\"\n" % harness.PIWORKFS)
        os.chmod(wrapper, 0o755)
        real = harness.PIWORKFS
        harness.PIWORKFS = wrapper

        def restore():
            harness.PIWORKFS = real
        self.addCleanup(restore)

    def test_a_directory_made_unsearchable_outside_is_not_walked_through(self):
        v = self.mount()
        with open("/proc/%d/status" % v.pid) as f:
            eff = [int(line.split()[1], 16) for line in f if line.startswith("CapEff:")][0]
        self.assertEqual(eff & 0b110, 0, "the daemon still has CAP_DAC_*")
        b = v.path("a/b")
        # Files created, touched and chmodded in a kept directory (IN_ATTRIB events about
        # files, in a/b's guard): the directory stays kept.
        for i in range(10):
            p = os.path.join(b, "t%d" % i)
            with open(p, "w") as f:
                f.write("x")
        before = self.rpc(v, "status")["dircache"]
        self.assertTrue(before["enabled"], before)
        for i in range(10):
            p = os.path.join(b, "t%d" % i)
            os.utime(p)
            os.chmod(p, 0o600)
        with open(os.path.join(b, "u"), "w") as f:
            f.write("x")
        after = self.rpc(v, "status")["dircache"]
        self.assertEqual(after["flushes"], before["flushes"], after)
        self.assertGreater(after["hits"], before["hits"], after)
        # a/ made unsearchable outside the view: the daemon's walk from the root stops
        # there, as it does natively for this daemon, kept descriptor of a/b or not.
        os.chmod(os.path.join(self.project, "a"), 0o600)
        try:
            with self.assertRaises(OSError) as cm:
                with open(os.path.join(b, "new"), "w") as f:
                    f.write("x")
            self.assertEqual(cm.exception.errno, errno.EACCES, v.log())
        finally:
            os.chmod(os.path.join(self.project, "a"), 0o755)
        self.assertFalse(os.path.exists(os.path.join(self.project, "a", "b", "new")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
