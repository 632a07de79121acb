#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The transport: FUSE over io_uring wherever the kernel allows it, else /dev/fuse.

A view takes FUSE over io_uring by default when the fuse module parameter enable_uring is
on; `-o no_io_uring` refuses it, `-o io_uring` requires it (the mount fails, in one line,
where it cannot be had). Where the parameter is off the mount says so in one line, with
what it costs and how to turn it on for good, and serves through /dev/fuse. `piworkfs
status` (and --json) names the transport in use.

The kernel offers the transport only while the parameter is on, so the tests that need one
value set it (as root) for their own mount and put the previous value back as soon as the
view has taken its transport (the kernel reads the parameter at INIT and when the rings
register): they run alone (is_parallel false), and are skipped where the parameter cannot
be changed or does not exist.
"""

import json
import os
import sys
import unittest

import harness  # noqa: E402

PARAM = "/sys/module/fuse/parameters/enable_uring"
DEADLINE = 60.0


def read_param():
    try:
        with open(PARAM) as f:
            return f.read().strip()
    except OSError:
        return None


class Transport(harness.MountCase):
    tree = {"src/a.c": "int a;\n", "src/b.c": "int b;\n"}

    def setUp(self):
        super().setUp()
        # These tests are about the default: the test passes' PIWORKFS_IO_URING (which
        # stands for -o io_uring or -o no_io_uring) must not decide for them.
        self.env.pop("PIWORKFS_IO_URING", None)

    # -- the module parameter -----------------------------------------------------------

    def set_param(self, value):
        """Sets enable_uring to VALUE ("Y" or "N") for this test; the cleanup (and
        restore_param, as soon as the test's views have their transport) puts the previous
        value back."""
        prev = read_param()
        if prev is None:
            self.skipTest("this kernel has no FUSE over io_uring (no %s)" % PARAM)
        if prev == value:
            return
        try:
            with open(PARAM, "w") as f:
                f.write(value)
        except OSError as e:
            self.skipTest("cannot set %s to %s: %s" % (PARAM, value, e.strerror))
        self._restore = prev
        self.addCleanup(self.restore_param)

    def restore_param(self):
        prev, self._restore = getattr(self, "_restore", None), None
        if prev is not None:
            with open(PARAM, "w") as f:
                f.write(prev)

    # -- status ---------------------------------------------------------------------------

    def status(self, v):
        p = self.run_pw("status", "--json")
        self.assertIn(p.returncode, (0, 4), p.stderr)
        (st,) = [s for s in json.loads(p.stdout) if s.get("mountpoint") == v.mp]
        return st

    def transport(self, v):
        return self.status(v)["transport"]

    def status_text(self, v):
        p = self.run_pw("status")
        self.assertIn(p.returncode, (0, 4), p.stderr)
        rows = []
        for line in p.stdout.split(v.mp + "\n", 1)[1].splitlines():
            if not line[:1].isspace():
                break  # the next view's mountpoint
            rows.append(line.strip())
        return [row for row in rows if row.startswith("transport")]

    def through_ring(self, v):
        """Waits until requests come through V's rings (the kernel switches once every
        CPU's queue has an entry); returns the transport."""
        n = [0]

        def served():
            n[0] += 1
            os.path.exists(v.path("src/never-%d" % n[0]))  # a LOOKUP the cache cannot answer
            return self.transport(v)["ring_requests"] > 0

        self.assertTrue(harness.wait_until(served, DEADLINE, step=0.05),
                        "no request came through the rings: %s\n%s" % (self.transport(v),
                                                                       v.log()))
        return self.transport(v)

    # -- the tests ------------------------------------------------------------------------

    def test_default_takes_io_uring_where_the_kernel_allows_it(self):
        self.set_param("Y")
        v = self.mount("build")
        refused = self.mount("build", args=["-o", "no_io_uring"],
                             mountpoint=self.mkdir("mnt2"))
        tr = self.through_ring(v)
        for _ in range(20):  # the refusing view's requests, meanwhile
            os.listdir(refused.path("src"))
        self.restore_param()  # both views have their transport
        self.assertEqual(tr["name"], "io_uring", v.log())
        self.assertIn("io_uring: requests arrive through the ring", v.log())
        self.assertNotIn("serving through /dev/fuse", v.log())
        with open(v.path("src/a.c")) as f:
            self.assertEqual(f.read(), "int a;\n")
        (row,) = self.status_text(v)
        self.assertRegex(row, r"transport +io_uring \(\d+ requests through the rings\)")
        # -o no_io_uring: /dev/fuse, even with the kernel offering the rings.
        self.assertEqual(self.transport(refused), {"name": "/dev/fuse", "ring_requests": 0},
                         refused.log())
        self.assertNotIn("requests arrive through the ring", refused.log())
        (row,) = self.status_text(refused)
        self.assertRegex(row, r"transport +/dev/fuse$")

    def test_parameter_off_falls_back_to_dev_fuse_with_one_line(self):
        self.set_param("N")
        # The detached daemon has no stderr: `mount` itself says it, in one line.
        mp = self.mkdir("mnt-bg")
        p = self.run_pw("mount", "--state-db", self.state_db, "--mode", "build",
                        self.project, mp)
        if harness.is_view_mounted(mp):
            self.addCleanup(self.run_pw, "umount", mp)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = [line for line in p.stderr.splitlines() if "io_uring" in line]
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("piworkfs: mount: serving through /dev/fuse: FUSE over io_uring is off "
                      "in the kernel", lines[0])
        self.assertIn("enable_uring=1", lines[0])  # how to turn it on for good
        self.assertIn("echo 1 > " + PARAM, lines[0])  # and now
        self.assertIn("twice", lines[0])  # what it costs
        # With --json (piworkfs run mounts so) the sentence is in the result, not on stderr.
        mp = self.mkdir("mnt-json")
        p = self.run_pw("mount", "--json", "--state-db", self.state_db, "--mode", "build",
                        self.project, mp)
        if harness.is_view_mounted(mp):
            self.addCleanup(self.run_pw, "umount", mp)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("io_uring", p.stderr)
        self.assertIn("FUSE over io_uring is off in the kernel",
                      json.loads(p.stdout)["io_uring_off"])
        # In the foreground the daemon's own log has the line, once.
        v = self.mount("build")
        self.assertEqual(v.log().count("serving through /dev/fuse: FUSE over io_uring is off"),
                         1, v.log())
        os.listdir(v.path("src"))
        self.assertEqual(self.transport(v), {"name": "/dev/fuse", "ring_requests": 0})
        # -o io_uring requires it: the mount fails, saying why.
        p = self.run_pw("mount", "--state-db", self.state_db, "--mode", "build", "-o",
                        "io_uring", self.project, self.mkdir("mnt-req"))
        self.assertEqual(p.returncode, 5, p.stderr)
        self.assertIn("-o io_uring: FUSE over io_uring is off in the kernel", p.stderr)
        self.assertFalse(harness.is_view_mounted(os.path.join(self.tmp, "mnt-req")))

    def test_io_uring_and_no_io_uring_together_are_a_usage_error(self):
        p = self.run_pw("mount", "-o", "io_uring,no_io_uring", self.project, self.mp)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("give one of them", p.stderr)

    def mkdir(self, name):
        path = os.path.join(self.tmp, name)
        os.makedirs(path, exist_ok=True)
        return path


if __name__ == "__main__":
    unittest.main()
