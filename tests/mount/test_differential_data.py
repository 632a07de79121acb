#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Differential test, the contents: open flags (O_CREAT, O_EXCL, O_NOFOLLOW, O_DIRECTORY,
O_APPEND, O_TRUNC), open and unlinked files, sparse files, truncate, fallocate and
copy_file_range, and extended attributes (namespaces, flags, sizes, an inherited ACL).

The method (each row run on a native directory and in a build view, outcomes compared),
the fixture each row starts from and the comparison of the final trees are
differential.py's.
"""

import os
import unittest

import differential
import harness  # noqa: E402
from differential import (Err, FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE,
                          FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE,
                          XATTR_CREATE, XATTR_REPLACE, fallocate, ls, opn, rd, st, t, with_fd,
                          wr, xattrs)

ROWS, row = harness.table()


# open flags

@row("O_CREAT|O_EXCL: existing file, directory, dangling symlink -> EEXIST")
def _(p):
    fl = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    return ([opn(p(x), fl) for x in ("f", "ln", "dangling", "loop")],
            opn(p("d"), os.O_RDONLY | os.O_CREAT | os.O_EXCL), st(p("nowhere")))


@row("O_CREAT without O_EXCL through a dangling symlink creates its target")
def _(p):
    return (opn(p("dangling"), os.O_WRONLY | os.O_CREAT, 0o600), st(p("nowhere")),
            st(p("dangling")), t(os.readlink, p("dangling")))


@row("O_NOFOLLOW: final symlink -> ELOOP, symlink in a middle component is followed")
def _(p):
    return (opn(p("ln"), os.O_RDONLY | os.O_NOFOLLOW),
            opn(p("ln"), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW),
            opn(p("lnd/inner"), os.O_RDONLY | os.O_NOFOLLOW),
            opn(p("f"), os.O_RDONLY | os.O_NOFOLLOW))


@row("O_DIRECTORY: file -> ENOTDIR, symlink to dir ok, with O_NOFOLLOW on it fails")
def _(p):
    return [opn(p(x), os.O_RDONLY | os.O_DIRECTORY | fl) for x, fl in (
        ("f", 0), ("ln", 0), ("d", 0), ("lnd", 0), ("lnd", os.O_NOFOLLOW),
        ("missing", 0), ("fnew", os.O_CREAT))]


@row("opening a directory for writing -> EISDIR (O_WRONLY, O_RDWR, O_CREAT, O_TRUNC)")
def _(p):
    return [opn(p("d"), fl) for fl in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_CREAT,
                                       os.O_RDONLY | os.O_TRUNC)]


@row("open errors: ENOENT, O_CREAT under a missing dir or a file, trailing slash -> EISDIR")
def _(p):
    return (opn(p("missing"), os.O_RDONLY), opn(p("nodir/x"), os.O_WRONLY | os.O_CREAT),
            opn(p("f/x"), os.O_WRONLY | os.O_CREAT), opn(p("dangling"), os.O_RDONLY),
            opn(p("new/"), os.O_WRONLY | os.O_CREAT), st(p("new")), ls(p("")))


@row("O_CREAT mode with umask 022: 0777, 0, 06777, 0600")
def _(p):
    out = []
    for name, mode in (("a", 0o777), ("b", 0), ("c", 0o6777), ("e2", 0o600)):
        out.append((opn(p(name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), st(p(name))))
    return out


@row("O_APPEND: write and pwrite land at EOF whatever the offset")
def _(p):
    def go(fd):
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, b"A")
        pos1 = os.lseek(fd, 0, os.SEEK_CUR)
        os.pwrite(fd, b"B", 0)
        pos2 = os.lseek(fd, 0, os.SEEK_CUR)
        return pos1, pos2
    return with_fd(p("f"), os.O_WRONLY | os.O_APPEND, go), rd(p("f")), st(p("f"))


@row("O_TRUNC empties the file (also with O_RDONLY, as Linux does)")
def _(p):
    return (opn(p("f"), os.O_WRONLY | os.O_TRUNC), st(p("f")),
            opn(p("o"), os.O_RDONLY | os.O_TRUNC), st(p("o")), rd(p("o")))


@row("an unlinked open file: fstat nlink 0, still readable and writable")
def _(p):
    def go(fd):
        os.unlink(p("f"))
        s = t(os.fstat, fd)
        return (t(os.pwrite, fd, b"J", 0), s if isinstance(s, Err) else (s.st_nlink, s.st_size),
                t(os.pread, fd, 100, 0), st(p("f")))
    return with_fd(p("f"), os.O_RDWR, go), ls(p(""))


@row("rename over an open file: the old descriptor keeps the old contents")
def _(p):
    def go(fd):
        os.rename(p("g"), p("f"))
        return os.pread(fd, 100, 0)
    return with_fd(p("f"), os.O_RDONLY, go), rd(p("f")), st(p("f")), st(p("hl"))


@row("write through one hard link is seen through the other (size and data)")
def _(p):
    st(p("hl"))
    rd(p("hl"))
    wr(p("g"), b"changed contents\n")
    return rd(p("hl")), st(p("hl")), st(p("g"))

# sparse files, truncate, fallocate, copy_file_range

@row("sparse file: one byte at 1 MiB; size, st_blocks, zero-filled hole")
def _(p):
    with_fd(p("sp"), os.O_WRONLY | os.O_CREAT | os.O_EXCL,
            lambda fd: (os.pwrite(fd, b"x", 1 << 20), os.fsync(fd)))
    data = rd(p("sp"))
    return st(p("sp"), blocks=True), data[:-1] == bytes(1 << 20), data[-1:]


@row("SEEK_DATA / SEEK_HOLE on a sparse file; SEEK_DATA past EOF -> ENXIO")
def _(p):
    def go(fd):
        os.pwrite(fd, b"x" * 4096, 1 << 20)
        os.fsync(fd)
        return (t(os.lseek, fd, 0, os.SEEK_DATA), t(os.lseek, fd, 0, os.SEEK_HOLE),
                t(os.lseek, fd, 1 << 20, os.SEEK_HOLE),
                t(os.lseek, fd, (1 << 20) + 8192, os.SEEK_DATA))
    return with_fd(p("sp"), os.O_RDWR | os.O_CREAT | os.O_EXCL, go)


@row("large sparse file: a write at 5 GiB")
def _(p):
    with_fd(p("big"), os.O_WRONLY | os.O_CREAT | os.O_EXCL,
            lambda fd: (os.pwrite(fd, b"end", 5 << 30), os.fsync(fd)))
    r = st(p("big"), blocks=True), with_fd(p("big"), os.O_RDONLY,
                                           lambda fd: os.pread(fd, 10, (5 << 30) - 2))
    os.unlink(p("big"))  # (the final comparison would read 5 GiB of zeros)
    return r


@row("truncate grows with zeros (no blocks), shrinks, and follows a symlink")
def _(p):
    os.truncate(p("f"), 10000)
    a = st(p("f"), blocks=True), rd(p("f")) == b"hello\n" + bytes(10000 - 6)
    os.truncate(p("f"), 2)
    b = st(p("f")), rd(p("f"))
    os.truncate(p("ln"), 1)
    return a, b, st(p("f")), st(p("ln"))


@row("truncate errors: EINVAL, EISDIR, ENOENT, ENOTDIR, ELOOP; ftruncate of an O_RDONLY fd")
def _(p):
    a = with_fd(p("f"), os.O_RDONLY, lambda fd: t(os.ftruncate, fd, 0))
    b = with_fd(p("f"), os.O_WRONLY, lambda fd: t(os.ftruncate, fd, 3))
    return ([t(os.truncate, p(x), n) for x, n in (("f", -1), ("d", 0), ("missing", 0),
                                                 ("f/x", 0), ("loop", 0))],
            a, b, st(p("f")), rd(p("f")))


@row("fallocate: mode 0 extends and allocates; KEEP_SIZE allocates past EOF, same size")
def _(p):
    r = with_fd(p("fa"), os.O_RDWR | os.O_CREAT | os.O_EXCL,
                lambda fd: t(fallocate, fd, 0, 0, 65536))
    k = with_fd(p("f"), os.O_RDWR, lambda fd: t(fallocate, fd, FALLOC_FL_KEEP_SIZE, 0,
                                                 65536))
    return (r, st(p("fa"), blocks=True), rd(p("fa")) == bytes(65536), k,
            st(p("f"), blocks=True), rd(p("f")))


@row("fallocate PUNCH_HOLE|KEEP_SIZE frees blocks and reads back zeros")
def _(p):
    wr(p("ph"), b"a" * 65536)

    def go(fd):
        os.fsync(fd)
        return t(fallocate, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 8192)
    r = with_fd(p("ph"), os.O_RDWR, go)
    data = rd(p("ph"))
    return r, st(p("ph"), blocks=True), data[4096:12288] == bytes(8192), data.count(b"a")


@row("fallocate ZERO_RANGE zeroes in place, extends without KEEP_SIZE, not past EOF with it")
def _(p):
    wr(p("zr"), b"a" * 65536)

    def go(fd):
        return (t(fallocate, fd, FALLOC_FL_ZERO_RANGE, 4096, 8192),
                t(fallocate, fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 61440, 65536),
                os.fstat(fd).st_size, t(fallocate, fd, FALLOC_FL_ZERO_RANGE, 65536, 4096),
                os.fstat(fd).st_size)
    r = with_fd(p("zr"), os.O_RDWR, go)
    data = rd(p("zr"))
    return r, st(p("zr")), data[4096:12288] == bytes(8192), data.count(b"a")


@row("fallocate errors: PUNCH_HOLE without KEEP_SIZE, zero length, read-only fd")
def _(p):
    a = with_fd(p("f"), os.O_RDWR, lambda fd: (
        t(fallocate, fd, FALLOC_FL_PUNCH_HOLE, 0, 4096), t(fallocate, fd, 0, 0, 0),
        t(fallocate, fd, 0, -1, 10)))
    b = with_fd(p("f"), os.O_RDONLY, lambda fd: t(fallocate, fd, 0, 0, 4096))
    return a, b, st(p("f"))


@row("copy_file_range copies bytes between two files")
def _(p):
    def go(src):
        return with_fd(p("copy"), os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                       lambda dst: t(os.copy_file_range, src, dst, 100, 0, 2))
    return with_fd(p("f"), os.O_RDONLY, go), rd(p("copy")), st(p("copy"))

# xattrs

@row("listxattr/getxattr: file, directory, through and on a symlink")
def _(p):
    return (xattrs(p("f")), xattrs(p("d")), xattrs(p("ln"), follow=True),
            xattrs(p("ln")), t(os.getxattr, p("f"), "user.k"), xattrs(p("missing")))


@row("xattr errors: ENODATA, unknown namespace, empty name; XATTR_CREATE/REPLACE")
def _(p):
    return (t(os.getxattr, p("f"), "user.nope"), t(os.removexattr, p("f"), "user.nope"),
            t(os.setxattr, p("f"), "bogus.x", b"1"), t(os.getxattr, p("f"), "bogus.x"),
            t(os.setxattr, p("f"), "user.", b"1"), t(os.getxattr, p("f"), ""),
            t(os.getxattr, p("d"), "user.k"),
            t(os.setxattr, p("f"), "user.k", b"w", XATTR_CREATE),
            t(os.setxattr, p("f"), "user.n", b"w", XATTR_REPLACE),
            t(os.setxattr, p("f"), "user.k", b"replaced", XATTR_REPLACE),
            t(os.setxattr, p("f"), "user.n", b"created", XATTR_CREATE), xattrs(p("f")))


@row("xattr round trips: binary and empty values, remove, via hard link and directory")
def _(p):
    os.setxattr(p("o"), "user.bin", b"\x00\xff\n\x00")
    os.setxattr(p("o"), "user.empty", b"")
    os.setxattr(p("d"), "user.dir", b"dv")
    st(p("hl"))
    os.setxattr(p("g"), "user.via", b"g")
    a = xattrs(p("o")), xattrs(p("hl")), xattrs(p("lnd"), follow=True)
    os.removexattr(p("o"), "user.bin")
    os.removexattr(p("hl"), "user.via")
    return a, xattrs(p("o")), xattrs(p("g")), t(os.getxattr, p("o"), "user.empty")


@row("a new file inherits a default ACL: its attributes read back, before and after a write")
def _(p):
    # system.posix_acl_default: version 2, then (tag, perm, id) entries: user::rwx,
    # user:65534:r, group::r-x, mask::r-x, other::r-x. The view learns at CREATE whether the
    # new file has attributes (ops_file.c); a wrong "none" would hide the inherited ACL.
    none = 0xFFFFFFFF
    acl = b"".join([(2).to_bytes(4, "little")] + [
        tag.to_bytes(2, "little") + perm.to_bytes(2, "little") + i.to_bytes(4, "little")
        for tag, perm, i in ((1, 7, none), (2, 4, 65534), (4, 5, none), (0x10, 5, none),
                             (0x20, 5, none))])
    os.mkdir(p("acl"))
    r = t(os.setxattr, p("acl"), "system.posix_acl_default", acl)
    fd = os.open(p("acl/new"), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    before = (t(os.getxattr, p("acl/new"), "system.posix_acl_access"),
              t(os.getxattr, p("acl/new"), "security.capability"))
    os.write(fd, b"x")
    os.close(fd)
    return r, before, xattrs(p("acl/new")), st(p("acl/new"))


@row("xattr sizes: 4000-byte value ok, 60000 -> backing errno, 65537 -> E2BIG")
def _(p):
    v = bytes(range(256)) * 15 + b"z" * 160
    return (t(os.setxattr, p("f"), "user.big", v), t(os.getxattr, p("f"), "user.big") == v,
            t(os.setxattr, p("f"), "user.huge", b"h" * 60000),
            t(os.setxattr, p("f"), "user.over", b"o" * 65537),
            sorted(t(os.listxattr, p("f"))))


@row("xattrs on special files: user.* on symlink/FIFO -> EPERM, trusted.* on symlink ok")
def _(p):
    os.mkfifo(p("fifo"))
    return (t(os.setxattr, p("ln"), "user.x", b"1", follow_symlinks=False),
            t(os.setxattr, p("fifo"), "user.x", b"1"),
            t(os.setxattr, p("ln"), "trusted.x", b"1", follow_symlinks=False),
            xattrs(p("ln")), xattrs(p("f")),
            t(os.removexattr, p("ln"), "trusted.x", follow_symlinks=False), xattrs(p("ln")))


class Contents(differential.TableCase):
    def test_table(self):
        self.compare_table(ROWS, at_least=28)


class FallocateModesTheKernelRefuses(harness.MountCase):
    """The one place the contents differ from the backing filesystem's, and not by the
    view's doing: fallocate modes the kernel's FUSE answers itself."""
    tree = {}

    def test_collapse_and_insert_range_are_the_kernels_to_refuse(self):
        # The kernel's FUSE passes fallocate only with KEEP_SIZE, PUNCH_HOLE and ZERO_RANGE
        # (fs/fuse/file.c, fuse_file_fallocate) and answers EOPNOTSUPP for the rest without
        # a request; the daemon passes through every mode it gets (the rows above). A kernel
        # that passes COLLAPSE_RANGE or INSERT_RANGE must get the backing's own answer.
        native = os.path.join(self.tmp, "nat")
        os.mkdir(native)
        v = self.mount("build")
        for mode in (FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE):
            got = []
            for root in (native, v.mp):
                path = os.path.join(root, "r%d" % mode)
                wr(path, bytes(range(256)) * 256)
                r = with_fd(path, os.O_RDWR, lambda fd: t(fallocate, fd, mode, 4096, 4096))
                got.append((r, rd(path)))
            self.assertEqual(got[0][0], None, "native ext4 does %#x" % mode)
            if got[1][0] in ("EOPNOTSUPP", "ENOTSUP"):  # one errno, two names
                self.assertEqual(got[1][1], bytes(range(256)) * 256)
            else:
                self.assertEqual(got[1], got[0])


if __name__ == "__main__":
    unittest.main(verbosity=2)
