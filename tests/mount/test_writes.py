#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The write path: what a write puts in the backing file, whatever its size and offset.

The daemon receives each request by splicing it from /dev/fuse into a pipe of its own
(devio.c): a small request is read whole, a large WRITE leaves its data in the pipe, page by
page as the kernel put it there, and the handler splices it into the backing file (or, for an
O_DIRECT file, reads it into aligned memory). These tests cover the shapes that path has to
get right: writes of one byte to several MiB, at offsets inside a page, across the threshold
between read and spliced requests and across the largest request (max_write), from the page
cache and from O_DIRECT callers; a large write refused by the mode, whose data the handler
never takes out of the pipe (the next requests must not see it); and a large write by a
caller without CAP_FSETID, which must clear setuid and setgid as a small one does.

The view splices only while large writes stream, and a thread already waiting in read(2)
when a stream starts reads its next request; so which path a given write takes depends on
the threads. Each test therefore runs twice: with PIWORKFS_SPLICE=always, where every request
goes through the pipe, and as shipped, where the paths alternate (plus a long stream with
other requests in between, which moves the threads from one path to the other and back).

Fixture: a project with one file, seed.txt.
"""

import errno
import mmap
import os
import pwd
import random
import subprocess
import sys
import unittest

import harness  # noqa: E402

KIB = 1 << 10
MIB = 1 << 20
PAGE = mmap.PAGESIZE
# Sizes around the thresholds of the path: a page, a request read whole (a page of data and
# the request header), the largest request (1 MiB less a page) and more than one request.
SIZES = [1, 100, PAGE - 1, PAGE, PAGE + 1, PAGE + 97, 2 * PAGE, 64 * KIB + 13,
         MIB - PAGE - 1, MIB - PAGE, MIB - PAGE + 1, MIB, MIB + 1, 3 * MIB + 123]
OFFSETS = [0, 1, 777, PAGE - 1, PAGE, 5 * PAGE + 123]

NOBODY = pwd.getpwnam("nobody")
# The system interpreter: one under root's home (pyenv) is not executable by nobody.
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


class WritesCase(harness.MountCase):
    tree = {"seed.txt": "seed\n"}
    splice = None  # PIWORKFS_SPLICE for the daemon

    def setUp(self):
        super().setUp()
        if self.splice:
            self.env["PIWORKFS_SPLICE"] = self.splice

    def backing(self, rel):
        with open(os.path.join(self.project, rel), "rb") as f:
            return f.read()

    def test_writes_of_every_size_and_offset_land_whole(self):
        v = self.mount("build")
        rnd = random.Random(17)
        model = bytearray()
        fd = os.open(v.path("big.bin"), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o644)
        try:
            for size in SIZES:
                for off in OFFSETS:
                    data = rnd.randbytes(size)
                    with self.subTest(size=size, offset=off):
                        self.assertEqual(os.pwrite(fd, data, off), size)
                    if len(model) < off + size:
                        model.extend(b"\0" * (off + size - len(model)))
                    model[off:off + size] = data
            # Appends from a second descriptor: the offset is the kernel's (the file's end).
            with open(v.path("big.bin"), "ab") as f:
                for size in (PAGE + 1, MIB + 3):
                    data = rnd.randbytes(size)
                    f.write(data)
                    f.flush()
                    model.extend(data)
        finally:
            os.close(fd)
        self.assertEqual(self.backing("big.bin"), bytes(model))
        with open(v.path("big.bin"), "rb") as f:
            self.assertEqual(f.read(), bytes(model))

    def test_o_direct_writes_larger_than_a_request(self):
        # The kernel copies an O_DIRECT caller's pages into the pipe behind the request
        # header, so the data is never aligned there: it goes through aligned memory.
        v = self.mount("build")
        size = 3 * MIB
        buf = mmap.mmap(-1, size)
        data = random.Random(5).randbytes(size)
        buf.write(data)
        fd = os.open(v.path("direct.bin"), os.O_CREAT | os.O_RDWR | os.O_DIRECT | os.O_CLOEXEC,
                     0o644)
        try:
            self.assertEqual(os.pwritev(fd, [buf], 2 * PAGE), size)
            self.assertEqual(os.pwritev(fd, [memoryview(buf)[:PAGE]], 0), PAGE)
            back = mmap.mmap(-1, size)
            self.assertEqual(os.preadv(fd, [back], 2 * PAGE), size)
            self.assertEqual(back[:], data)
        finally:
            os.close(fd)
        self.assertEqual(self.backing("direct.bin"), data[:PAGE] + b"\0" * PAGE + data)

    def test_refused_large_writes_leave_the_next_requests_intact(self):
        # A refused WRITE's data stays in the pipe it came in: every request after it, on
        # whichever thread, must be read from where it starts, not from that data.
        v = self.mount("build")
        first = random.Random(1).randbytes(2 * MIB)
        with open(v.path("seed.txt"), "wb") as f:
            f.write(first)
        fd = os.open(v.path("seed.txt"), os.O_WRONLY | os.O_CLOEXEC)
        try:
            self.set_mode(v, "plan")
            junk = b"J" * MIB
            for i in range(16):
                self.assertErrno(errno.EROFS, os.pwrite, fd, junk, i * PAGE)
                with open(v.path("seed.txt"), "rb") as f:
                    self.assertEqual(f.read(), first)
                self.assertEqual(os.stat(v.path("seed.txt")).st_size, 2 * MIB)
            self.set_mode(v, "build")
            second = random.Random(2).randbytes(MIB + 5)
            self.assertEqual(os.pwrite(fd, second, 3), MIB + 5)
        finally:
            os.close(fd)
        want = first[:3] + second + first[3 + MIB + 5:]
        self.assertEqual(self.backing("seed.txt"), want)

    def test_a_large_write_by_another_user_clears_setuid_and_setgid(self):
        # As test_users.py shows for small writes: the kernel tells the daemon to clear the
        # bits (FUSE_WRITE_KILL_SUIDGID in the WRITE's header), which a large write carries
        # too although its data never reaches the daemon's memory.
        os.chmod(self.tmp, 0o755)  # nobody must be able to reach the mountpoint
        shared = os.path.join(self.project, "shared")
        os.makedirs(shared)
        os.chmod(shared, 0o1777)
        p = os.path.join(shared, "setid")
        with open(p, "w") as f:
            f.write("data\n")
        os.chmod(p, 0o6777)  # root's, setuid and setgid, writable by anyone
        v = self.mount("build", args=["-o", "allow_other"])

        def drop():
            os.setgroups([])
            os.setgid(NOBODY.pw_gid)
            os.setuid(NOBODY.pw_uid)
        code = ("import os\nfd = os.open(%r, os.O_WRONLY)\n"
                "assert os.pwrite(fd, b'z' * %d, 0) == %d\nos.close(fd)\n"
                % (v.path("shared/setid"), 2 * MIB, 2 * MIB))
        r = subprocess.run([PYTHON, "-c", code], preexec_fn=drop, capture_output=True,
                           text=True, timeout=60, cwd="/")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(os.stat(p).st_mode & 0o7777, 0o777)
        self.assertEqual(self.backing("shared/setid"), b"z" * (2 * MIB))


class SplicedWritesTest(WritesCase):
    splice = "always"


class WritesTest(WritesCase):
    def test_a_stream_of_large_writes_between_other_requests(self):
        v = self.mount("build")
        rnd = random.Random(9)
        model = bytearray(8 * MIB)
        with open(v.path("stream.bin"), "wb") as f:
            f.write(model)
        fd = os.open(v.path("stream.bin"), os.O_WRONLY | os.O_CLOEXEC)
        try:
            for phase in range(3):
                # Large writes: the view starts splicing (every thread, once it has
                # handled a request), then small requests until it stops again.
                for i in range(24):
                    size = rnd.choice([MIB, 300 * KIB, 2 * MIB + 5])
                    off = rnd.randrange(0, len(model) - size)
                    data = rnd.randbytes(size)
                    self.assertEqual(os.pwrite(fd, data, off), size)
                    model[off:off + size] = data
                    os.stat(v.path("seed.txt"))
                for i in range(200):
                    with open(v.path("seed.txt"), "rb") as f:
                        self.assertEqual(f.read(), b"seed\n")
                    data = rnd.randbytes(rnd.choice([1, 100, PAGE]))
                    off = rnd.randrange(0, len(model) - len(data))
                    self.assertEqual(os.pwrite(fd, data, off), len(data))
                    model[off:off + len(data)] = data
        finally:
            os.close(fd)
        self.assertEqual(self.backing("stream.bin"), bytes(model))


del WritesCase  # the base: not a test of its own

if __name__ == "__main__":
    unittest.main()
