#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A tree larger than the open-file hard limit (20,000 here): the daemon must hold a bounded
number of descriptors whatever the number of inodes the kernel knows (one O_PATH descriptor
per inode, as libfuse's passthrough_ll keeps, fails here with EMFILE).

Fixture: the standard tree plus big/dNNN/fNNN: 250 directories of 100 files (25,000 files),
made directly in the backing directory.
"""

import os
import resource
import sys
import threading
import time
import unittest

import harness  # noqa: E402

DIRS = 250
PER_DIR = 100
FD_BOUND = 200


class ScaleTest(harness.MountCase):
    def setUp(self):
        super().setUp()
        big = os.path.join(self.project, "big")
        for d in range(DIRS):
            dd = os.path.join(big, "d%03d" % d)
            os.makedirs(dd)
            for f in range(PER_DIR):
                fd = os.open(os.path.join(dd, "f%03d" % f), os.O_CREAT | os.O_WRONLY |
                             os.O_CLOEXEC, 0o644)
                os.write(fd, b"%d/%d\n" % (d, f))
                os.close(fd)

    def test_walk_more_files_than_the_fd_limit(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        total = DIRS * PER_DIR
        self.assertGreater(total, hard, "the tree must be larger than the open-file limit")
        v = self.mount("build", args=["--timeout", "86400"])
        samples = []
        stop = threading.Event()

        def sampler():
            while not stop.is_set():
                try:
                    samples.append(v.fd_count())
                except OSError:
                    pass
                time.sleep(0.05)

        t = threading.Thread(target=sampler)
        t.start()
        try:
            # find: every entry, through readdir and lookup.
            p = self.run_tool(["find", v.path("big"), "-type", "f"], cwd=self.cwd, timeout=120)
            self.assertEqual(len(p.stdout.splitlines()), total, p.stderr[-2000:])
            # stat every file, then a `git status`-like walk: lstat and read each one.
            n = 0
            for dirpath, dirnames, filenames in os.walk(v.path("big")):
                for name in filenames:
                    full = os.path.join(dirpath, name)
                    os.lstat(full)
                    fd = os.open(full, os.O_RDONLY | os.O_CLOEXEC)
                    try:
                        data = os.read(fd, 64)
                    finally:
                        os.close(fd)
                    d, f = int(dirpath[-3:]), int(name[1:])
                    self.assertEqual(data, b"%d/%d\n" % (d, f))
                    n += 1
            self.assertEqual(n, total)
            # A second pass from the (now full) kernel caches, and a write in each dir.
            p = self.run_tool(["find", v.path("big"), "-newer", v.path("src/a.c")],
                              cwd=self.cwd, timeout=120)
            for d in range(0, DIRS, 10):
                with open(v.path("big/d%03d/new" % d), "w") as f:
                    f.write("n")
        finally:
            stop.set()
            t.join(10)
        after = v.fd_count()
        self.assertTrue(samples, "no fd samples were taken")
        self.assertLess(max(samples), FD_BOUND,
                        "the daemon held up to %d descriptors during the walk" % max(samples))
        self.assertLess(after, FD_BOUND, "the daemon holds %d descriptors after the walk"
                        % after)
        self.assertNotIn("EMFILE", v.log())
        self.assertNotIn("Too many open files", v.log())

    def test_many_open_files_at_once(self):
        # Descriptors the kernel holds open count against the daemon only while they are
        # open: 1,000 files open through the view at once, then all closed.
        v = self.mount("build")
        fds = []
        try:
            for i in range(1000):
                fds.append(os.open(v.path("big/d%03d/f%03d" % (i // PER_DIR, i % PER_DIR)),
                                   os.O_RDONLY | os.O_CLOEXEC))
        finally:
            for fd in fds:
                os.close(fd)
        self.assertTrue(harness.wait_until(lambda: v.fd_count() < FD_BOUND, 5),
                        "the daemon still holds %d descriptors after every close" %
                        v.fd_count())


if __name__ == "__main__":
    unittest.main(verbosity=2)
