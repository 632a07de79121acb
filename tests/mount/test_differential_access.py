#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Differential test, access: permission bits, ownership and timestamps (chmod, chown,
utimensat, access, statvfs), and an unprivileged user (nobody) through allow_other: file and
directory permissions, owner-only calls, the sticky bit, supplementary groups, FIFOs and
sockets. Then where the view knowingly differs (DocumentedDifferences) and the kernel's
cache of names in a directory not every user may search (CachedEntries).

The method (each row run on a native directory and in a build view, outcomes compared),
the fixture each row starts from and the comparison of the final trees are
differential.py's.
"""

import os
import stat
import time
import unittest

import differential
import harness  # noqa: E402
from differential import (AT_SYMLINK_NOFOLLOW, D_TIMES, Err, F_TIMES, NOBODY, NOGROUP,
                          UTIME_NOW, UTIME_OMIT, connect, listening, ls, nobody, opn, rd, st,
                          t, utimensat, with_fd, wr, xattrs)

ROWS, row = harness.table()


# permissions, ownership, timestamps

@row("chmod: setuid/setgid/sticky bits, 0000, through a symlink, missing -> ENOENT")
def _(p):
    out = []
    for m in (0o4755, 0o7777, 0, 0o2644):
        os.chmod(p("f"), m)
        out.append(st(p("f")))
    os.chmod(p("d"), 0o3777)
    os.chmod(p("ln"), 0o600)
    return out, st(p("d")), st(p("f")), st(p("ln")), t(os.chmod, p("missing"), 0o644)


@row("chown: uid/gid, -1 keeps, clears setuid and group-exec setgid; lchown of a symlink")
def _(p):
    os.chown(p("f"), 1234, 5678)
    a = st(p("f"))
    os.chown(p("f"), -1, 42)
    b = st(p("f"))
    os.chmod(p("f"), 0o6755)
    os.chown(p("f"), 1234, -1)
    c = st(p("f"))
    os.chmod(p("o"), 0o2644)
    os.chown(p("o"), 7, 7)
    d = st(p("o")), t(os.chown, p("missing"), 1, 1)
    os.chown(p("ln"), 4321, 8765, follow_symlinks=False)
    e = st(p("ln")), st(p("f"))
    os.chown(p("ln"), 111, 222)
    return a, b, c, d, e, st(p("ln")), st(p("f"))


@row("writes clear setuid/setgid: kept for root, cleared for nobody")
def _(p):
    os.chmod(p("f"), 0o6777)
    wr(p("f"), b"root\n", os.O_WRONLY | os.O_APPEND)
    a = st(p("f"))
    r = nobody(lambda: wr(p("f"), b"nobody\n", os.O_WRONLY | os.O_APPEND))
    return a, r, st(p("f")), rd(p("f"))


@row("utime with explicit ns: before 1970, after 2038, on a directory")
def _(p):
    out = []
    for ns in ((-86_400_000_000_123, -1_000_000_001), (4_102_444_800_123_456_789,
                                                       4_102_444_800_987_654_321),
               (0, 999_999_999)):
        os.utime(p("f"), ns=ns)
        out.append(st(p("f"), times=True))
    os.utime(p("e"), ns=(12_000_000_345, 13_000_000_678))
    return out, st(p("e"), times=True), t(os.utime, p("missing"), ns=(1, 1)), \
        t(os.utime, p("f/"), ns=(1, 1))


@row("utimensat UTIME_OMIT leaves that timestamp exactly as it was")
def _(p):
    utimensat(p("f"), UTIME_OMIT, (5, 6))
    a = st(p("f"), times=True)
    utimensat(p("f"), (7, 8), UTIME_OMIT)
    return a, st(p("f"), times=True), t(utimensat, p("f"), UTIME_OMIT, UTIME_OMIT), \
        st(p("f"), times=True)


@row("utimensat UTIME_NOW sets the current time; utime(None) sets both")
def _(p):
    t0 = time.time_ns() - 50_000_000
    utimensat(p("f"), UTIME_OMIT, UTIME_NOW)
    s = os.stat(p("f"))
    a = s.st_atime_ns == F_TIMES[0], t0 <= s.st_mtime_ns <= time.time_ns() + 50_000_000
    utimensat(p("o"), UTIME_NOW, (9, 10))
    s = os.stat(p("o"))
    b = t0 <= s.st_atime_ns <= time.time_ns() + 50_000_000, s.st_mtime_ns
    os.utime(p("d"))
    s = os.stat(p("d"))
    return a, b, s.st_atime_ns >= t0, s.st_mtime_ns >= t0


@row("utimensat AT_SYMLINK_NOFOLLOW sets the symlink's own times, not the target's")
def _(p):
    utimensat(p("ln"), (11, 12), (13, 14), AT_SYMLINK_NOFOLLOW)
    return st(p("ln"), times=True), st(p("f"), times=True), \
        t(utimensat, p("dangling"), (1, 2), (3, 4), AT_SYMLINK_NOFOLLOW), \
        st(p("dangling"), times="m"), t(utimensat, p("dangling"), (1, 2), (3, 4))


@row("creating and removing entries updates the directory's mtime, not the entry's")
def _(p):
    wr(p("d/new"), b"n")
    a = os.stat(p("d")).st_mtime_ns != D_TIMES[1]
    os.utime(p("d"), ns=D_TIMES)
    os.unlink(p("d/inner"))
    b = os.stat(p("d")).st_mtime_ns != D_TIMES[1]
    os.utime(p("d"), ns=D_TIMES)
    os.setxattr(p("d"), "user.a", b"1")
    return a, b, st(p("d"), times=True)


@row("access(): R/W/X for root (X needs an x bit), missing and dangling -> false")
def _(p):
    out = [os.access(p("f"), m) for m in (os.R_OK, os.W_OK, os.X_OK)]
    os.chmod(p("f"), 0)
    out += [os.access(p("f"), m) for m in (os.R_OK, os.W_OK, os.X_OK)]
    os.chmod(p("f"), 0o010)
    out += [os.access(p("f"), os.X_OK), os.access(p("d"), os.X_OK),
            os.access(p("missing"), os.F_OK), os.access(p("dangling"), os.F_OK),
            os.access(p("ln"), os.F_OK, follow_symlinks=False)]
    return out


@row("statvfs: block size, fragment size, total blocks and inodes, name max")
def _(p):
    s = os.statvfs(p(""))
    return s.f_bsize, s.f_frsize, s.f_blocks, s.f_files, s.f_namemax

# as an unprivileged user (nobody), through allow_other

@row("as nobody: read/write permission on root's files, search permission on dirs")
def _(p):
    os.chmod(p("o"), 0o600)
    os.chmod(p("e"), 0o700)

    def go():
        return (opn(p("o"), os.O_RDONLY), opn(p("f"), os.O_RDONLY),
                opn(p("f"), os.O_WRONLY), opn(p("f"), os.O_RDONLY | os.O_TRUNC),
                opn(p("new"), os.O_WRONLY | os.O_CREAT), os.access(p("f"), os.W_OK),
                os.access(p("f"), os.R_OK), ls(p("e")), st(p("e/x")), t(os.mkdir, p("dd")),
                t(os.unlink, p("f")), t(os.rename, p("f"), p("d/f")),
                t(os.truncate, p("f"), 0), rd(p("ln")))
    return nobody(go), st(p("f"))


@row("as nobody: new files, dirs, symlinks, fifos belong to nobody:nogroup")
def _(p):
    os.chmod(p("e"), 0o777)

    def go():
        wr(p("e/file"), b"mine")
        os.mkdir(p("e/dir"))
        os.symlink("file", p("e/sl"))
        os.mkfifo(p("e/fifo"))
        os.link(p("e/file"), p("e/hard"))
        return "done"
    return nobody(go), [st(p("e/" + x)) for x in ("file", "dir", "sl", "fifo", "hard")]


@row("as nobody: owner-only operations on root's files -> EPERM, UTIME_NOW needs write")
def _(p):
    os.chmod(p("o"), 0o666)

    def go():
        return (t(os.chmod, p("f"), 0o777), t(os.chown, p("f"), NOBODY, NOGROUP),
                t(os.chown, p("f"), -1, -1), t(os.utime, p("o"), ns=(1, 2)),
                t(os.utime, p("o")), t(os.utime, p("f")),
                t(os.setxattr, p("f"), "user.x", b"1"),
                t(os.setxattr, p("o"), "user.x", b"1"),
                t(os.removexattr, p("f"), "user.k"),
                t(os.chown, p("ln"), NOBODY, -1, follow_symlinks=False))
    return nobody(go), st(p("f")), xattrs(p("o")), xattrs(p("f"))


@row("as nobody on own files: chmod ok, chown to root -> EPERM, trusted.* -> EPERM")
def _(p):
    os.chmod(p("e"), 0o777)

    def go():
        wr(p("e/mine"), b"m")
        return (t(os.chmod, p("e/mine"), 0o4711), t(os.chown, p("e/mine"), 0, -1),
                t(os.chown, p("e/mine"), -1, 0), t(os.chown, p("e/mine"), -1, NOGROUP),
                t(os.setxattr, p("e/mine"), "trusted.x", b"1"),
                t(os.setxattr, p("e/mine"), "user.x", b"1"), xattrs(p("e/mine")),
                t(os.utime, p("e/mine"), ns=(3, 4)))
    return nobody(go), st(p("e/mine"), times=True)


@row("as nobody in a sticky 1777 directory: others' entries -> EPERM, own entries ok")
def _(p):
    os.chmod(p("e"), 0o1777)
    wr(p("e/rootfile"), b"r")
    os.chmod(p("e/rootfile"), 0o666)
    os.mkdir(p("e/rootdir"))

    def go():
        wr(p("e/mine"), b"m")
        return (t(os.unlink, p("e/rootfile")), t(os.rename, p("e/rootfile"), p("e/x")),
                t(os.rmdir, p("e/rootdir")), t(os.rename, p("e/mine"), p("e/rootfile")),
                wr(p("e/rootfile"), b"w", os.O_WRONLY | os.O_APPEND),
                t(os.rename, p("e/mine"), p("e/mine2")), t(os.unlink, p("e/mine2")))
    return nobody(go), ls(p("e")), rd(p("e/rootfile"))


@row("as nobody with supplementary group 1234: group permissions apply")
def _(p):
    os.chown(p("o"), 0, 1234)
    os.chmod(p("o"), 0o640)
    os.chown(p("e"), 0, 1234)
    os.chmod(p("e"), 0o770)

    def go():
        return rd(p("o")), opn(p("o"), os.O_WRONLY), t(wr, p("e/new"), b"x"), st(p("e/new"))
    # The non-member first: after a member looked e/new up, the kernel answers from its
    # entry cache (see CachedEntries below).
    return nobody(go), nobody(go, [1234]), st(p("e/new"))


@row("as nobody: root's 0600 FIFO, socket and device node -> EACCES, after root used them")
def _(p):
    os.mkfifo(p("fifo"), 0o600)
    os.mknod(p("chr"), stat.S_IFCHR | 0o600, os.makedev(1, 3))
    os.mkfifo(p("d/fifo"), 0o604)
    with listening(p("sock"), 0o600):
        # Root reaches each first, so the kernel has looked them up already.
        mine = (opn(p("fifo"), os.O_RDWR), st(p("fifo")), st(p("chr")), st(p("sock")),
                ls(p("")))

        def go():
            conn = connect(p("sock"))
            return (opn(p("fifo"), os.O_RDONLY | os.O_NONBLOCK),
                    opn(p("fifo"), os.O_WRONLY | os.O_NONBLOCK), opn(p("fifo"), os.O_RDWR),
                    conn, opn(p("chr"), os.O_RDONLY), opn(p("chr"), os.O_WRONLY),
                    opn(p("d/fifo"), os.O_RDWR), opn(p("d/fifo"), os.O_WRONLY | os.O_NONBLOCK))
        return mine, nobody(go), nobody(go), opn(p("fifo"), os.O_RDWR)


@row("as nobody: FIFOs and sockets it may use: its own, and others' 0666 ones")
def _(p):
    os.chmod(p("e"), 0o777)
    os.mkfifo(p("e/shared"), 0o666)
    os.chmod(p("e/shared"), 0o666)
    with listening(p("e/sock"), 0o666):
        def go():
            os.mkfifo(p("e/mine"), 0o600)
            conn = connect(p("e/sock"))
            rfd = os.open(p("e/mine"), os.O_RDONLY | os.O_NONBLOCK)
            try:
                w = with_fd(p("e/mine"), os.O_WRONLY | os.O_NONBLOCK,
                            lambda fd: os.write(fd, b"hi"))
                data = os.read(rfd, 10)
            finally:
                os.close(rfd)
            return (opn(p("e/shared"), os.O_RDWR),
                    opn(p("e/shared"), os.O_RDONLY | os.O_NONBLOCK), conn, w, data,
                    st(p("e/mine")), t(os.chmod, p("e/mine"), 0o640), st(p("e/mine")))
        return nobody(go), st(p("e/mine")), opn(p("e/mine"), os.O_RDWR)


class Access(differential.TableCase):
    def test_table(self):
        self.compare_table(ROWS, at_least=18)


class DocumentedDifferences(harness.MountCase):
    """Where the view knowingly differs from the backing filesystem (docs/SECURITY.md)."""
    tree = {}

    def test_allow_other_shows_the_backings_write_bits_and_refuses_with_the_mode(self):
        # An allow_other view has the kernel check permission bits (it opens FIFOs, device
        # nodes and sockets without asking the daemon); so stat shows the backing file's own
        # write bits even in a read-only mode, and access(W_OK), which the kernel then
        # answers by itself, follows them. The write itself reaches the daemon: EROFS.
        os.chmod(self.tmp, 0o755)
        with open(os.path.join(self.project, "f"), "w") as f:
            f.write("x")
        os.chmod(os.path.join(self.project, "f"), 0o666)
        v = self.mount("plan", args=["-o", "allow_other"])
        path = v.path("f")

        def go():
            return st(path)["mode"], os.access(path, os.W_OK), opn(path, os.O_WRONLY)
        self.assertEqual(go(), ("-rw-rw-rw-", True, "EROFS"))
        self.assertEqual(nobody(go), ("-rw-rw-rw-", True, "EROFS"))

    def test_default_permissions_lets_the_kernel_check_special_files(self):
        os.chmod(self.tmp, 0o755)
        os.chmod(self.project, 0o777)
        os.mkfifo(os.path.join(self.project, "readable"), 0o604)
        os.chmod(os.path.join(self.project, "readable"), 0o604)
        v = self.mount("build", args=["-o", "allow_other,default_permissions"])
        path = v.path("readable")
        self.assertEqual(nobody(lambda: (opn(path, os.O_RDONLY | os.O_NONBLOCK),
                                         opn(path, os.O_RDWR), st(path)["mode"])),
                         ("ok", "EACCES", "prw----r--"))


class CachedEntries(harness.MountCase):
    """allow_other, several users: the kernel checks search permission on a directory only
    when it asks the daemon to look a name up (the daemon does it with the caller's
    credentials). Names in a directory that not everyone may search are therefore not
    cached, so a user without search permission cannot reach a name another user looked
    up; a directory made private drops its cached names, and so does a rename into one."""
    tree = {}

    def setUp(self):
        super().setUp()
        os.chmod(self.tmp, 0o755)
        self.e = os.path.join(self.project, "e")
        os.mkdir(self.e)
        os.chown(self.e, 0, 1234)
        with open(os.path.join(self.e, "new"), "w") as f:
            f.write("x")

    def stat_as_nobody(self, path, groups=()):
        return nobody(lambda: st(path), groups)

    def test_search_permission_is_checked_for_names_already_looked_up(self):
        os.chmod(self.e, 0o770)
        v = self.mount("build", args=["-o", "allow_other"])
        self.assertNotIsInstance(self.stat_as_nobody(v.path("e/new"), [1234]), Err)
        self.assertEqual(self.stat_as_nobody(v.path("e/new")), "EACCES")
        # and still for the member, and for a name that does not exist
        self.assertNotIsInstance(self.stat_as_nobody(v.path("e/new"), [1234]), Err)
        self.assertEqual(self.stat_as_nobody(v.path("e/none"), [1234]), "ENOENT")
        self.assertEqual(self.stat_as_nobody(v.path("e/none")), "EACCES")

    def test_a_directory_made_private_drops_the_names_it_had_cached(self):
        os.chmod(self.e, 0o775)
        v = self.mount("build", args=["-o", "allow_other"])
        self.assertNotIsInstance(self.stat_as_nobody(v.path("e/new")), Err)
        os.chmod(v.path("e"), 0o770)  # through the view, by root
        self.assertTrue(harness.wait_until(
            lambda: self.stat_as_nobody(v.path("e/new")) == "EACCES", harness.DEADLINE))

    def test_a_name_renamed_into_a_private_directory_is_not_kept(self):
        os.chmod(self.e, 0o770)
        pub = os.path.join(self.project, "pub")
        os.mkdir(pub)
        with open(os.path.join(pub, "x"), "w") as f:
            f.write("x")
        v = self.mount("build", args=["-o", "allow_other"])
        self.assertNotIsInstance(self.stat_as_nobody(v.path("pub/x")), Err)
        os.rename(v.path("pub/x"), v.path("e/x"))  # the kernel moves the cached entry
        self.assertTrue(harness.wait_until(
            lambda: self.stat_as_nobody(v.path("e/x")) == "EACCES", harness.DEADLINE))
        self.assertNotIsInstance(self.stat_as_nobody(v.path("e/x"), [1234]), Err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
