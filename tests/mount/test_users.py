#!/usr/bin/env python3
"""Several users in one view (-o allow_other, daemon as root): every operation acts with
the caller's credentials, so ownership of new files and the backing filesystem's own
permission checks are what a user would get without the view.

    project/                 root 0755
      shared/                root 1777 (sticky, world-writable)
      src/a.c                root 0644
"""
import errno
import os
import pwd
import subprocess
import sys
import unittest

import harness  # noqa: E402

NOBODY = pwd.getpwnam("nobody")
# The system interpreter: one under root's home (pyenv) is not executable by nobody.
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def as_nobody(code):
    """Runs CODE (Python) as nobody; returns (exit status, stdout)."""
    def drop():
        os.setgroups([])
        os.setgid(NOBODY.pw_gid)
        os.setuid(NOBODY.pw_uid)
    p = subprocess.run([PYTHON, "-c", code], preexec_fn=drop, capture_output=True,
                       text=True, timeout=30, cwd="/")
    return p.returncode, p.stdout + p.stderr


def errno_as_nobody(statement):
    """Runs STATEMENT (Python, with os) as nobody; returns (exit status, what it printed):
    "done", or the name of the errno it failed with."""
    return as_nobody("import errno, os\n"
                     "try:\n"
                     "    %s\n"
                     "    print('done')\n"
                     "except OSError as e:\n"
                     "    print(errno.errorcode[e.errno])\n" % statement)


class UsersTest(harness.MountCase):
    def setUp(self):
        super().setUp()
        os.chmod(self.tmp, 0o755)  # nobody must be able to reach the mountpoint
        shared = os.path.join(self.project, "shared")
        os.makedirs(shared, exist_ok=True)
        os.chmod(shared, 0o1777)

    def test_new_files_belong_to_the_caller_and_permissions_are_the_backings(self):
        v = self.mount("build", args=["-o", "allow_other"])
        code, out = as_nobody(
            "import os\n"
            "open(%r, 'w').write('mine')\n"
            "os.mkdir(%r)\n"
            "try:\n"
            "    open(%r, 'a')\n"
            "    print('wrote root file')\n"
            "except PermissionError:\n"
            "    print('EACCES on root file')\n"
            % (v.path("shared/n.txt"), v.path("shared/d"), v.path("src/a.c")))
        self.assertEqual(code, 0, out)
        self.assertIn("EACCES on root file", out)
        st = os.stat(os.path.join(self.project, "shared/n.txt"))
        self.assertEqual((st.st_uid, st.st_gid), (NOBODY.pw_uid, NOBODY.pw_gid))
        st = os.stat(os.path.join(self.project, "shared/d"))
        self.assertEqual(st.st_uid, NOBODY.pw_uid)

    def test_sticky_directory_protects_other_users_files(self):
        with open(os.path.join(self.project, "shared/roots"), "w") as f:
            f.write("root's\n")
        os.chmod(os.path.join(self.project, "shared/roots"), 0o666)
        v = self.mount("build", args=["-o", "allow_other"])
        code, out = errno_as_nobody("os.unlink(%r)" % v.path("shared/roots"))
        native = "EPERM"  # sticky bit: only the owner (or root) may remove
        self.assertIn(native, out)
        self.assertTrue(os.path.exists(os.path.join(self.project, "shared/roots")))

    def _setid_file(self, name):
        p = os.path.join(self.project, "shared", name)
        with open(p, "w") as f:
            f.write("data\n")
        os.chmod(p, 0o6777)  # root's, setuid and setgid, writable by anyone
        return p

    def test_a_write_by_another_user_clears_setuid_and_setgid_as_natively(self):
        # The kernel clears S_ISUID/S_ISGID before a write by a caller without CAP_FSETID.
        # The view must do the same (and not fail the write: the writer may not chmod).
        native = self._setid_file("native")
        code, out = as_nobody("open(%r, 'a').write('more\\n')" % native)
        self.assertEqual(code, 0, out)
        native_mode = os.stat(native).st_mode & 0o7777
        self.assertEqual(native_mode, 0o777)
        viewed = self._setid_file("viewed")
        direct = self._setid_file("direct")
        v = self.mount("build", args=["-o", "allow_other"])
        code, out = as_nobody(
            "import os, mmap\n"
            "open(%r, 'a').write('more\\n')\n"
            "fd = os.open(%r, os.O_WRONLY | os.O_DIRECT)\n"
            "buf = mmap.mmap(-1, 4096)\n"
            "buf.write(b'x' * 4096)\n"
            "os.write(fd, buf)\n"
            "os.close(fd)\n" % (v.path("shared/viewed"), v.path("shared/direct")))
        self.assertEqual(code, 0, out)
        for p in (viewed, direct):
            self.assertEqual(os.stat(p).st_mode & 0o7777, native_mode, p)
        with open(viewed) as f:
            self.assertEqual(f.read(), "data\nmore\n")
        # The view shows the new mode too (the watcher refreshes the kernel's copy).
        self.assertTrue(harness.wait_until(
            lambda: os.stat(v.path("shared/viewed")).st_mode & 0o7777 == native_mode,
            harness.DEADLINE), "the view never showed the cleared mode")

    def test_a_write_by_root_keeps_setuid_as_natively(self):
        p = self._setid_file("roots")
        v = self.mount("build", args=["-o", "allow_other"])
        with open(v.path("shared/roots"), "a") as f:
            f.write("more\n")
        self.assertEqual(os.stat(p).st_mode & 0o7777, 0o6777)

    def test_the_mode_still_decides_first(self):
        v = self.mount("plan", args=["-o", "allow_other"])
        code, out = errno_as_nobody("open(%r, 'w')" % v.path("shared/x"))
        self.assertIn("EROFS", out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
