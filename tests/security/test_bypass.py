#!/usr/bin/env python3
"""Attacks that once stepped around the policy, kept as regression tests.

Fixture (the shared harness's standard tree, plus what each test adds):
    src/a.c                 read-only outside build
    docs/design/a.md        writable in design
    conf/secrets.yaml       hidden by a project mode rule (tests that add it)
"""
import errno
import os
import sys
import threading
import time
import unittest

import harness  # noqa: E402

EACCES, ENOENT = errno.EACCES, errno.ENOENT


def read(path):
    with open(path, "rb") as f:
        return f.read()


def project_mode(project, name, body):
    d = os.path.join(project, ".piworkfs", "modes")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name + ".md"), "w") as f:
        f.write(body)


class DirectoryMoves(harness.MountCase):
    def test_renaming_a_directory_does_not_reveal_hidden_files(self):
        os.makedirs(os.path.join(self.project, "conf"))
        with open(os.path.join(self.project, "conf", "secrets.yaml"), "w") as f:
            f.write("TOPSECRET\n")
        # An untrusted project may add hide rules to a bundled mode.
        project_mode(self.project, "build",
                     "---\nname: build\nhide: [\"conf/secrets.yaml\"]\n---\nHide secrets.\n")
        v = self.mount("build")
        self.assertErrno(ENOENT, os.stat, v.path("conf/secrets.yaml"))
        before = harness.tree_hash(self.project)
        self.assertErrno(EACCES, os.rename, v.path("conf"), v.path("cfg"))
        self.assertErrno(ENOENT, os.stat, v.path("cfg/secrets.yaml"))
        self.assertEqual(before, harness.tree_hash(self.project))

    def test_a_directory_cannot_be_moved_under_a_deny_rule(self):
        project_mode(self.project, "build",
                     "---\nname: build\nwrites:\n  deny: [\"vendor/**\"]\n---\nNo vendoring.\n")
        v = self.mount("build")
        os.mkdir(v.path("evil"))
        with open(v.path("evil/x.c"), "w") as f:
            f.write("int x;\n")
        before = harness.tree_hash(self.project)
        self.assertErrno(EACCES, os.rename, v.path("evil"), v.path("vendor"))
        self.assertFalse(os.path.exists(os.path.join(self.project, "vendor")))
        self.assertEqual(before, harness.tree_hash(self.project))
        # The same move to an ordinary name works: the refusal is about the rule.
        os.rename(v.path("evil"), v.path("fine"))
        self.assertTrue(os.path.exists(os.path.join(self.project, "fine", "x.c")))


class HiddenDirectoryCounts(harness.MountCase):
    """A directory's link count counts its subdirectories: a hidden one must not show.

        d1/{a,b,c,secret}/    secret hidden (a project mode rule: **/secret)
        d2/{a,secret}/
        secret/               at the root too
    """

    def subdirs(self, path):
        return sum(1 for e in os.scandir(path) if e.is_dir(follow_symlinks=False))

    def test_link_counts_leave_hidden_subdirectories_out(self):
        for d in ("d1/a", "d1/b", "d1/c", "d1/secret", "d2/a", "d2/secret", "secret"):
            os.makedirs(os.path.join(self.project, d))
        project_mode(self.project, "build",
                     "---\nname: build\nhide: [\"**/secret\"]\n---\nHide secrets.\n")
        v = self.mount("build")
        # Through LOOKUP and GETATTR first, then through READDIRPLUS: d2's attributes
        # come with the listing of the root.
        self.assertEqual(os.stat(v.path("d1")).st_nlink, 2 + 3)
        self.assertEqual(self.subdirs(v.path("d1")), 3)
        self.assertEqual(os.stat(v.path()).st_nlink, 2 + self.subdirs(v.path()))
        self.assertEqual(os.stat(v.path("d2")).st_nlink, 2 + 1)
        self.assertEqual(os.stat(os.path.join(self.project, "d2")).st_nlink, 2 + 2)
        # A mode without the rule counts them again (the switch drops cached attributes).
        self.set_mode(v, "plan")
        self.assertEqual(os.stat(v.path("d1")).st_nlink, 2 + 4)
        self.assertEqual(os.stat(v.path("d2")).st_nlink, 2 + 2)
        self.assertEqual(os.stat(v.path()).st_nlink, 2 + self.subdirs(v.path()))


class HardLinks(harness.MountCase):
    def link_outside(self):
        """docs/design/m is a second name of src/a.c, made on the backing tree."""
        os.link(os.path.join(self.project, "src/a.c"),
                os.path.join(self.project, "docs/design/m"))

    def test_a_link_whose_other_name_was_never_seen_is_not_writable(self):
        self.link_outside()
        v = self.mount("design")
        before = read(os.path.join(self.project, "src/a.c"))
        # Only the writable name is looked up: the read-only one is unknown to the view.
        self.assertErrno(EACCES, os.open, v.path("docs/design/m"), os.O_WRONLY | os.O_APPEND)
        self.assertEqual(before, read(os.path.join(self.project, "src/a.c")))

    def test_once_every_name_is_known_build_may_write_it(self):
        self.link_outside()
        v = self.mount("build")
        os.stat(v.path("src/a.c"))
        os.stat(v.path("docs/design/m"))
        with open(v.path("docs/design/m"), "a") as f:
            f.write("// build\n")
        self.assertTrue(read(os.path.join(self.project, "src/a.c")).endswith(b"// build\n"))

    def test_concurrent_writers_never_get_through_a_denied_name(self):
        self.link_outside()
        v = self.mount("design")
        os.stat(v.path("src/a.c"))  # both names known: every write must check both
        os.stat(v.path("docs/design/m"))
        before = read(os.path.join(self.project, "src/a.c"))
        stop = time.time() + 2.0
        landed = []

        def writer():
            while time.time() < stop:
                try:
                    fd = os.open(v.path("docs/design/m"), os.O_WRONLY | os.O_APPEND)
                except OSError as e:
                    if e.errno != EACCES:
                        landed.append("open: %s" % e)
                    continue
                try:
                    os.write(fd, b"RACED\n")
                    landed.append("write landed")
                except OSError:
                    pass
                finally:
                    os.close(fd)

        threads = [threading.Thread(target=writer) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        self.assertEqual(landed, [])
        self.assertEqual(before, read(os.path.join(self.project, "src/a.c")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
