#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Differential test: in build mode the view is a faithful passthrough of its backing
directory. Every row of the table below is one operation (or a short sequence) run twice
with the same relative paths: once on a native scratch directory (a plain directory, not
the view's backing project) and once inside a view mounted in build mode over a scratch
project with identical initial contents. The outcomes (return values or errno names) and
the relevant results (stat fields, explicit timestamps, link text, xattrs, listings) must
be equal.

Each row works in its own directory rNN/, populated identically on both sides before the
mount with the fixture below, so the rows are independent of one another:

    rNN/                  mtime and atime explicit (ROOT_TIMES)
      f                   "hello\\n", 0644, xattr user.k=v, explicit times (F_TIMES)
      g, hl               "other\\n", 0644, two hard links to one inode (the view refuses
                          writes to g until hl has been looked up, by design: see
                          docs/ARCHITECTURE.md; tests/mount/test_escape.py tests that rule)
      o                   "other\\n", 0644, one link
      d/inner             "in\\n"; d has explicit times (D_TIMES)
      e/                  empty directory
      ln -> f             explicit times (LN_TIMES)
      lnd -> d
      dangling -> nowhere
      loop -> loop

The native root ("nat") and the mountpoint ("mnt") have names of equal length, so every
absolute path has the same length on both sides (the rows near PATH_MAX rely on it). The
view is mounted with allow_other so a few rows can act as an unprivileged user (nobody)
through a forked child.
"""

import contextlib
import ctypes
import errno
import hashlib
import os
import pickle
import re
import socket
import stat
import sys
import time
import unittest

import harness  # noqa: E402

F_TIMES = (1_000_000_123, 1_500_000_456)
LN_TIMES = (2_000_000_001, 2_500_000_002)
D_TIMES = (3_000_000_003, 3_500_000_004)
ROOT_TIMES = (5_000_000_005, 5_500_000_006)
NOBODY = 65534
NOGROUP = 65534

UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2
AT_SYMLINK_NOFOLLOW = 0x100
AT_SYMLINK_FOLLOW = 0x400
FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_COLLAPSE_RANGE = 0x08
FALLOC_FL_ZERO_RANGE = 0x10
FALLOC_FL_INSERT_RANGE = 0x20
XATTR_CREATE = os.XATTR_CREATE
XATTR_REPLACE = os.XATTR_REPLACE


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_libc = ctypes.CDLL("libc.so.6", use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
_libc.fallocate.restype = ctypes.c_int


def utimensat(path, atime, mtime, flags=0):
    """utimensat(AT_FDCWD, PATH, [ATIME, MTIME], FLAGS); each a (sec, nsec) pair,
    UTIME_NOW or UTIME_OMIT."""
    def ts(t):
        return Timespec(0, t) if t in (UTIME_NOW, UTIME_OMIT) else Timespec(*t)
    arr = (Timespec * 2)(ts(atime), ts(mtime))
    if _libc.utimensat(harness.AT_FDCWD, os.fsencode(path), arr, flags) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), path)


def linkat_follow(src, dst):
    """linkat(AT_FDCWD, SRC, AT_FDCWD, DST, AT_SYMLINK_FOLLOW) (os.link calls plain link(),
    which does not follow)."""
    if _libc.linkat(harness.AT_FDCWD, os.fsencode(src), harness.AT_FDCWD, os.fsencode(dst),
                    AT_SYMLINK_FOLLOW) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), src)


def fallocate(fd, mode, offset, length):
    if _libc.fallocate(fd, mode, offset, length) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


# --- outcomes ---------------------------------------------------------------------------

class Err(str):
    """An errno name standing for a failed call (shown bare in failure messages)."""

    def __repr__(self):
        return str(self)


def ename(e):
    return Err(errno.errorcode.get(e.errno, str(e.errno)))


def t(fn, *a, **k):
    """FN(*A, **K), or the errno name it failed with."""
    try:
        return fn(*a, **k)
    except OSError as e:
        return ename(e)


def ok(fn, *a, **k):
    """'ok' or the errno name (for calls whose return value is not comparable)."""
    r = t(fn, *a, **k)
    return r if isinstance(r, Err) else "ok"


def opn(path, flags, mode=0o644, dir_fd=None):
    """Opens and closes: 'ok' or the errno name."""
    try:
        fd = os.open(path, flags | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as e:
        return ename(e)
    os.close(fd)
    return "ok"


def st(path, follow=False, times=False, blocks=False, dir_fd=None):
    """The comparable part of a stat: type and permission bits, nlink, size, owner; with
    TIMES the atime and mtime in ns (only where they were set explicitly), with BLOCKS
    st_blocks."""
    try:
        s = os.stat(path, follow_symlinks=follow, dir_fd=dir_fd)
    except OSError as e:
        return ename(e)
    r = {"mode": stat.filemode(s.st_mode), "nlink": s.st_nlink, "size": s.st_size,
         "uid": s.st_uid, "gid": s.st_gid}
    if times == "m":
        r["mtime"] = s.st_mtime_ns
    elif times:
        r["atime"] = s.st_atime_ns
        r["mtime"] = s.st_mtime_ns
    if blocks:
        r["blocks"] = s.st_blocks
    return r


def rd(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        return ename(e)


def wr(path, data, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode=0o644):
    fd = os.open(path, flags | os.O_CLOEXEC, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    return "ok"


def ls(path):
    r = t(os.listdir, path)
    return r if isinstance(r, Err) else sorted(r)


def types(path):
    """Sorted (name, d_type letter) of a directory's entries, as readdir reports them."""
    out = []
    with os.scandir(path) as it:
        for e in it:
            kind = ("l" if e.is_symlink() else "d" if e.is_dir(follow_symlinks=False)
                    else "f" if e.is_file(follow_symlinks=False) else "o")
            out.append((e.name, kind))
    return sorted(out)


def xattrs(path, follow=False):
    """{name: value} of every xattr, or the errno name."""
    names = t(os.listxattr, path, follow_symlinks=follow)
    if isinstance(names, Err):
        return names
    return {n: t(os.getxattr, path, n, follow_symlinks=follow) for n in sorted(names)}


def with_fd(path, flags, fn, mode=0o644):
    fd = os.open(path, flags | os.O_CLOEXEC, mode)
    try:
        return fn(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def listening(path, mode):
    """A Unix socket bound at PATH, chmod MODE, listening while the block runs."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(path)
        os.chmod(path, mode)
        s.listen(4)
        yield s
    finally:
        s.close()


def connect(path):
    """The outcome (ok) of connecting to the Unix socket at PATH; the connection closed."""
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        return ok(c.connect, path)
    finally:
        c.close()


def as_user(uid, gid, groups, fn):
    """Runs FN() in a forked child with the given credentials; returns its result (an
    OSError escaping FN becomes ('raised', errno name))."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setgroups(groups)
            os.setgid(gid)
            os.setuid(uid)
            try:
                res = fn()
            except OSError as e:
                res = ("raised", ename(e))
            data = pickle.dumps(res)
        except BaseException as e:  # noqa: B902 - anything, reported to the parent
            data = pickle.dumps(("child-exception", repr(e)))
        try:
            os.write(w, data)
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while True:
        c = os.read(r, 65536)
        if not c:
            break
        chunks.append(c)
    os.close(r)
    os.waitpid(pid, 0)
    return pickle.loads(b"".join(chunks))


def nobody(fn, groups=()):
    return as_user(NOBODY, NOGROUP, list(groups), fn)


def long_path(base, total, dir_name="D" * 200, leaf_char="L"):
    """(directory, path) with len(path) == TOTAL: BASE, then 200-byte directories, then a
    leaf of at most 255 bytes."""
    cur = base
    while total - len(cur) > 256:
        cur += "/" + dir_name
    leaf = total - len(cur) - 1
    return cur, cur + "/" + leaf_char * leaf


# --- the fixture ------------------------------------------------------------------------

def populate(root):
    os.makedirs(root)
    wr(os.path.join(root, "f"), b"hello\n")
    os.setxattr(os.path.join(root, "f"), "user.k", b"v")
    wr(os.path.join(root, "g"), b"other\n")
    os.link(os.path.join(root, "g"), os.path.join(root, "hl"))
    wr(os.path.join(root, "o"), b"other\n")
    os.mkdir(os.path.join(root, "d"))
    wr(os.path.join(root, "d/inner"), b"in\n")
    os.mkdir(os.path.join(root, "e"))
    os.symlink("f", os.path.join(root, "ln"))
    os.symlink("d", os.path.join(root, "lnd"))
    os.symlink("nowhere", os.path.join(root, "dangling"))
    os.symlink("loop", os.path.join(root, "loop"))
    for p in ("f", "g", "o", "d/inner"):
        os.chmod(os.path.join(root, p), 0o644)
    os.utime(os.path.join(root, "f"), ns=F_TIMES)
    os.utime(os.path.join(root, "ln"), ns=LN_TIMES, follow_symlinks=False)
    os.utime(os.path.join(root, "d"), ns=D_TIMES)
    os.utime(root, ns=ROOT_TIMES)


def snapshot(root):
    """{relpath: (mode, nlink, size, uid, gid, content digest or link target, xattrs)} of
    everything under ROOT, walked with directory descriptors (the tree goes deeper than
    PATH_MAX)."""
    out = {}
    for dirpath, dirnames, filenames, dfd in os.fwalk(root):
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(dirnames + filenames):
            rel = os.path.normpath(os.path.join(rel_dir, name))
            s = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            if stat.S_ISLNK(s.st_mode):
                data = os.readlink(name, dir_fd=dfd)
                xa = None
            else:
                data = None
                if stat.S_ISREG(s.st_mode):
                    fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=dfd)
                    try:
                        h = hashlib.sha256()
                        for chunk in iter(lambda: os.read(fd, 1 << 20), b""):
                            h.update(chunk)
                        data = h.hexdigest()
                    finally:
                        os.close(fd)
                xa = None
                if stat.S_ISREG(s.st_mode) or stat.S_ISDIR(s.st_mode):
                    fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK,
                                 dir_fd=dfd)
                    try:
                        xa = {n: os.getxattr(fd, n) for n in sorted(os.listxattr(fd))}
                    finally:
                        os.close(fd)
            out[rel] = (stat.filemode(s.st_mode), s.st_nlink, s.st_size, s.st_uid,
                        s.st_gid, data, xa)
    return out


def short(s):
    """S with long runs of one character abbreviated (deep paths, long names)."""
    return re.sub(r"(.)\1{15,}", lambda m: "%s*%d" % (m.group(1), len(m.group(0))), s)


# --- the table --------------------------------------------------------------------------

ROWS, row = harness.table()


# lookups, stat, readlink, readdir

@row("lstat of a regular file: mode, nlink, size, owner, explicit ns atime/mtime")
def _(p):
    return st(p("f"), times=True), st(p(""), times=True), st(p("d"), times=True)


@row("lookup errors: missing -> ENOENT, through a file -> ENOTDIR, 'f/' -> ENOTDIR")
def _(p):
    return [st(p(x)) for x in ("missing", "f/x", "f/", "missing/x", "dangling/x")]


@row("symlink loop: stat -> ELOOP, lstat ok; path through it -> ELOOP")
def _(p):
    return st(p("loop"), follow=True), st(p("loop")), st(p("loop/x"))


@row("symlink: lstat, readlink text, stat follows; readlink of non-links -> EINVAL")
def _(p):
    return (st(p("ln"), times=True), t(os.readlink, p("ln")), st(p("ln"), follow=True),
            t(os.readlink, p("dangling")), st(p("dangling"), follow=True),
            [t(os.readlink, p(x)) for x in ("f", "d", "missing", "lnd/")])


@row("symlink to a directory: 'lnd/' follows (stat and lstat), 'lnd/inner' resolves")
def _(p):
    return st(p("lnd/")), st(p("lnd/"), follow=True), st(p("lnd/inner")), rd(p("lnd/inner"))


@row("hard links: both names have nlink 2 and one inode")
def _(p):
    a, b = os.stat(p("g")), os.stat(p("hl"))
    return st(p("g")), st(p("hl")), a.st_ino == b.st_ino, a.st_dev == b.st_dev


@row("readdir: names and d_types of every kind of entry; of a file -> ENOTDIR")
def _(p):
    os.mkfifo(p("fifo"), 0o644)
    return (types(p("")), ls(p("d")), ls(p("e")), ls(p("f")), ls(p("missing")),
            ls(p("lnd")), ls(p("loop")))


@row("directory nlink follows subdirectories; stat of '.' and '..' inside")
def _(p):
    return st(p("")), st(p("d")), st(p("e")), st(p("d/.")), st(p("d/..")), st(p("e/.."))


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


# mkdir, rmdir, unlink

@row("mkdir errors: existing dir/file/symlinks -> EEXIST, missing parent, under a file")
def _(p):
    return [t(os.mkdir, p(x)) for x in ("d", "f", "ln", "dangling", "loop", "missing/x",
                                        "f/x", "d/inner/x")]


@row("mkdir: modes under umask 022 (sticky kept), parent nlink + 1, trailing slash ok")
def _(p):
    before = st(p(""))
    os.mkdir(p("m1"), 0o1777)
    os.mkdir(p("m2"), 0o777)
    os.mkdir(p("m3"), 0)
    os.mkdir(p("m4/"), 0o750)
    return before, st(p("")), [st(p(x)) for x in ("m1", "m2", "m3", "m4")]


@row("setgid directory: new files inherit its group, new subdirectories its setgid bit")
def _(p):
    os.chown(p("d"), 0, 1234)
    os.chmod(p("d"), 0o2775)
    wr(p("d/new"), b"x")
    os.mkdir(p("d/sub"), 0o755)
    os.mkfifo(p("d/fifo"), 0o644)
    return [st(p(x)) for x in ("d", "d/new", "d/sub", "d/fifo")]


@row("rmdir errors: ENOTEMPTY, ENOTDIR (file, symlink to dir), EINVAL ('.'), ENOENT")
def _(p):
    return [t(os.rmdir, p(x)) for x in ("d", "f", "lnd", "lnd/", "e/.", "missing",
                                        "f/x", "dangling")]


@row("rmdir of an empty directory: gone, parent nlink - 1")
def _(p):
    st(p("e"))
    return t(os.rmdir, p("e")), st(p("e")), st(p("")), ls(p(""))


@row("unlink errors: directory -> EISDIR, missing -> ENOENT, 'f/' -> ENOTDIR")
def _(p):
    return [t(os.unlink, p(x)) for x in ("d", "e", "missing", "f/", "d/inner/x", "lnd/")]


@row("unlink of a symlink removes the link, not its target")
def _(p):
    return (t(os.unlink, p("ln")), t(os.unlink, p("lnd")), st(p("ln")), st(p("f")),
            st(p("d")), ls(p("")))


@row("unlink of one hard link: the other name's nlink drops to 1")
def _(p):
    st(p("g"))
    return t(os.unlink, p("hl")), st(p("g")), st(p("hl")), rd(p("g"))


# rename

@row("rename file over file: destination replaced (data, xattrs, mtime), source gone")
def _(p):
    return (t(os.rename, p("f"), p("g")), st(p("f")), st(p("g"), times="m"), rd(p("g")),
            xattrs(p("g")), st(p("hl")), rd(p("hl")))


@row("rename of a file onto its own hard link is a no-op: both names remain")
def _(p):
    return t(os.rename, p("g"), p("hl")), st(p("g")), st(p("hl")), ls(p(""))


@row("rename errors: file over dir -> EISDIR, dir over file -> ENOTDIR, ENOTEMPTY")
def _(p):
    os.mkdir(p("e/sub"))
    return [t(os.rename, p(a), p(b)) for a, b in (
        ("f", "d"), ("d", "f"), ("d", "e"), ("f", "g/"), ("f", "missing/x"),
        ("missing", "x"), ("f/", "x"), ("lnd/", "x"))]


@row("rename: into own subdir -> EINVAL, onto itself no-op, dir over empty dir ok")
def _(p):
    os.mkdir(p("d/sub"))
    return (t(os.rename, p("d"), p("d/sub/x")), t(os.rename, p("d"), p("d/sub")),
            t(os.rename, p("f"), p("f")), t(os.rename, p("d"), p("d")), ls(p("d")),
            t(os.rename, p("d"), p("e")), st(p("d")), ls(p("e")), st(p("e")), st(p("")))


@row("rename a directory: children move with it, old paths ENOENT, nlinks updated")
def _(p):
    os.mkdir(p("d/sub"))
    wr(p("d/sub/file"), b"deep\n")
    st(p("d/sub/file"))
    st(p("d/inner"))
    os.rename(p("d"), p("e/moved"))
    return (st(p("d/inner")), st(p("d/sub/file")), rd(p("e/moved/sub/file")),
            st(p("e/moved")), st(p("e")), st(p("")), ls(p("e/moved")), st(p("lnd"),
                                                                         follow=True))


@row("rename a symlink: the link moves, its text and mtime unchanged")
def _(p):
    return (t(os.rename, p("ln"), p("d/ln2")), st(p("d/ln2"), times="m"),
            t(os.readlink, p("d/ln2")), st(p("d/ln2"), follow=True), st(p("ln")))


@row("rename keeps the moved file's mtime and changes both parents' mtimes")
def _(p):
    os.rename(p("f"), p("d/f"))
    return (st(p("d/f"), times="m"), os.stat(p("d")).st_mtime_ns != D_TIMES[1],
            os.stat(p("")).st_mtime_ns != ROOT_TIMES[1])


@row("RENAME_NOREPLACE: existing target (file, dangling symlink) -> EEXIST; new ok")
def _(p):
    n = harness.RENAME_NOREPLACE
    return (t(harness.renameat2, p("f"), p("g"), n),
            t(harness.renameat2, p("f"), p("dangling"), n),
            t(harness.renameat2, p("f"), p("new"), n), st(p("f")), rd(p("new")), rd(p("g")))


@row("RENAME_EXCHANGE: file and directory swap; missing target; with NOREPLACE -> EINVAL")
def _(p):
    x = harness.RENAME_EXCHANGE
    return (t(harness.renameat2, p("f"), p("d"), x), st(p("f")), st(p("d")), ls(p("f")),
            rd(p("d")), t(harness.renameat2, p("g"), p("missing"), x),
            t(harness.renameat2, p("g"), p("hl"), x | harness.RENAME_NOREPLACE),
            t(harness.renameat2, p("e"), p("e/x"), x))


# links, symlinks, mknod, sockets

@row("link: nlink 2 on both; EEXIST, EPERM for a directory, ENOENT, ENOTDIR")
def _(p):
    return (t(os.link, p("f"), p("f2")), st(p("f")), st(p("f2")), xattrs(p("f2")),
            [t(os.link, p(a), p(b)) for a, b in (
                ("f", "g"), ("d", "dx"), ("missing", "x"), ("f", "missing/x"),
                ("f", "f/x"), ("f", "dangling"))])


@row("link of a symlink links the symlink itself; with AT_SYMLINK_FOLLOW its target")
def _(p):
    return (t(os.link, p("ln"), p("ln2"), follow_symlinks=False), st(p("ln2")),
            t(os.readlink, p("ln2")), t(linkat_follow, p("ln"), p("f3")),
            st(p("f3")), st(p("f")), st(p("ln")))


@row("symlink: existing name -> EEXIST, empty target -> ENOENT, 4095/4096-byte targets")
def _(p):
    long_t = "t" * 4095
    return (t(os.symlink, "x", p("f")), t(os.symlink, "x", p("dangling")),
            t(os.symlink, "", p("empty")), t(os.symlink, long_t, p("long")),
            t(os.readlink, p("long")) == long_t, st(p("long")),
            t(os.symlink, long_t + "t", p("toolong")), t(os.symlink, "é\n x", p("odd")),
            t(os.readlink, p("odd")), t(os.symlink, "x", p("missing/x")))


@row("mkfifo/mknod: FIFO and regular nodes; EEXIST; ENXIO without a reader; data")
def _(p):
    res = [t(os.mkfifo, p("fifo"), 0o640), st(p("fifo")), t(os.mkfifo, p("f")),
           opn(p("fifo"), os.O_WRONLY | os.O_NONBLOCK),
           t(os.mknod, p("reg"), stat.S_IFREG | 0o600), st(p("reg")),
           t(os.mknod, p("g"), stat.S_IFREG | 0o600)]
    rfd = os.open(p("fifo"), os.O_RDONLY | os.O_NONBLOCK)
    try:
        wfd = os.open(p("fifo"), os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(wfd, b"hi")
            res.append(os.read(rfd, 10))
        finally:
            os.close(wfd)
    finally:
        os.close(rfd)
    return res


@row("bind a unix socket in the tree: socket node, connect works, rebind -> EADDRINUSE")
def _(p):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s2 = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(p("sock"))
        s.listen(1)
        c.connect(p("sock"))
        a, _ = s.accept()
        c.sendall(b"ping")
        got = a.recv(10)
        a.close()
        return st(p("sock")), got, t(s2.bind, p("sock"))
    finally:
        s.close()
        c.close()
        s2.close()


# long names and long paths

@row("255-byte names (ASCII and UTF-8): create, stat, list, rename, link, unlink")
def _(p):
    a, b, u = "n" * 255, "m" * 255, "é" * 127 + "x"
    return (opn(p(a), os.O_WRONLY | os.O_CREAT | os.O_EXCL), st(p(a)), ls(p("")),
            t(os.rename, p(a), p(b)), t(os.link, p(b), p(u)), st(p(u)),
            t(os.mkdir, p("d/" + a)), t(os.symlink, a, p("e/" + a)),
            t(os.readlink, p("e/" + a)) == a, t(os.unlink, p(b)), st(p(u)))


@row("256-byte names -> ENAMETOOLONG for open, mkdir, stat, symlink, rename, link, xattr")
def _(p):
    n = "n" * 256
    return (opn(p(n), os.O_WRONLY | os.O_CREAT), t(os.mkdir, p(n)), st(p(n)),
            t(os.symlink, "f", p(n)), t(os.rename, p("f"), p(n)), t(os.link, p("f"), p(n)),
            t(os.mkfifo, p(n)), t(os.unlink, p(n)), opn(p("é" * 128), os.O_RDONLY),
            t(os.setxattr, p("f"), "user." + "x" * 251, b"v"))


@row("an absolute path of 4095 bytes: create, write, stat, list, rename, unlink")
def _(p):
    d, full = long_path(p(""), 4095)
    os.makedirs(d)
    return (len(full), opn(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL), st(full),
            t(lambda: with_fd(full, os.O_WRONLY, lambda fd: os.write(fd, b"x"))), st(full),
            len(ls(d)), t(os.rename, full, full[:-1] + "M"), st(full[:-1] + "M"),
            t(os.unlink, full[:-1] + "M"), ls(d), t(os.mkdir, full), t(os.rmdir, full))


@row("an absolute path of 4096 bytes -> ENAMETOOLONG")
def _(p):
    d, full = long_path(p(""), 4096)
    os.makedirs(d)
    return (len(full), opn(full, os.O_WRONLY | os.O_CREAT), st(full), t(os.mkdir, full),
            t(os.symlink, "x", full), ls(d))


DEEP_NAME = "k" * 200


def descend(p, levels=24):
    """Makes LEVELS nested directories of 200-byte names below P("") with mkdirat and
    openat, one level at a time, and returns a descriptor of the deepest (its path from the
    project root is about 4,850 bytes, more than PATH_MAX)."""
    fd = os.open(p(""), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for _ in range(levels):
        os.mkdir(DEEP_NAME, dir_fd=fd)
        nfd = os.open(DEEP_NAME, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
        os.close(fd)
        fd = nfd
    return fd


def in_dir(fd, fn):
    """FN() run with the working directory at FD; the old one is restored."""
    old = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fchdir(fd)
        return fn()
    finally:
        os.fchdir(old)
        os.close(old)


def every_op_here():
    """Every kind of operation on short relative names in the working directory."""
    out = [opn("f", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644),
           t(wr, "f", b"deep\n", os.O_WRONLY | os.O_APPEND), st("f"), rd("f"),
           t(os.chmod, "f", 0o642), st("f"), t(os.chown, "f", 1234, 5678), st("f"),
           t(os.truncate, "f", 3), rd("f"),
           with_fd("f", os.O_WRONLY, lambda fd: t(os.ftruncate, fd, 2)), rd("f"),
           opn("f", os.O_WRONLY | os.O_TRUNC), st("f"),
           t(os.utime, "f", ns=(12_000_000_001, 13_000_000_002)), st("f", times=True),
           t(os.link, "f", "hard"), st("hard"), st("f"),
           t(os.mkdir, "sub", 0o750), st("sub"), t(os.mkfifo, "fifo", 0o640), st("fifo"),
           t(os.mknod, "reg", stat.S_IFREG | 0o600), st("reg"),
           t(os.mknod, "chr", stat.S_IFCHR | 0o600, os.makedev(1, 3)), st("chr"),
           t(os.symlink, "f", "sl"), t(os.readlink, "sl"), st("sl", follow=True), rd("sl"),
           t(os.setxattr, "hard", "user.x", b"1"), xattrs("hard"),
           os.access("f", os.W_OK), os.access("missing", os.F_OK),
           t(os.rename, "f", "sub/f2"), st("sub/f2"), st("f"), t(os.rename, "sub", "sub2"),
           st("sub2/f2"), ls("."), st(".."), st("../" + DEEP_NAME)]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind("sock")
        s.listen(1)
        out += [ok(c.connect, "sock"), st("sock")]
    finally:
        s.close()
        c.close()
    out += [t(os.unlink, x) for x in ("sock", "chr", "reg", "fifo", "sl", "sub2/f2")]
    out += [t(os.rmdir, "sub2"), t(os.rmdir, "."), t(os.unlink, "hard"), ls("."),
            t(os.mkdir, "sub3"), t(os.rmdir, "sub3"), ls(".")]
    return out


@row("deeper than PATH_MAX, built with mkdirat/openat: every operation, by descriptor")
def _(p):
    fd = descend(p)
    try:
        lf = os.open("leaf", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644,
                     dir_fd=fd)
        os.write(lf, b"deep\n")
        os.close(lf)
        r = [st("leaf", dir_fd=fd), t(os.chmod, "leaf", 0o600, dir_fd=fd),
             t(os.chown, "leaf", 7, 8, dir_fd=fd), st("leaf", dir_fd=fd),
             t(os.rename, "leaf", "leaf2", src_dir_fd=fd, dst_dir_fd=fd),
             t(os.link, "leaf2", "leaf3", src_dir_fd=fd, dst_dir_fd=fd),
             t(os.symlink, "leaf2", "sl", dir_fd=fd), t(os.readlink, "sl", dir_fd=fd),
             t(os.mkfifo, "fifo", 0o600, dir_fd=fd),
             t(os.mknod, "reg", stat.S_IFREG | 0o640, dir_fd=fd),
             sorted(os.listdir(fd)), st("..", dir_fd=fd), t(os.mkdir, "sub", dir_fd=fd),
             t(os.utime, "sub", ns=(5, 6), dir_fd=fd), st("sub", times=True, dir_fd=fd),
             t(os.rmdir, "sub", dir_fd=fd), t(os.unlink, "leaf3", dir_fd=fd),
             t(os.unlink, "fifo", dir_fd=fd), st("leaf2", dir_fd=fd)]
        rf = os.open("sl", os.O_RDONLY | os.O_CLOEXEC, dir_fd=fd)
        r.append(os.read(rf, 100))
        os.close(rf)
        return r
    finally:
        os.close(fd)


@row("deeper than PATH_MAX, the working directory at the bottom: every operation")
def _(p):
    fd = descend(p)
    try:
        return in_dir(fd, every_op_here)
    finally:
        os.close(fd)


def relative_long_path(total):
    """(directory, path), both relative, len(path) == TOTAL: 200-byte directories, then a
    leaf of at most 255 bytes (pjdfstest's dirgen_max)."""
    cur = ""
    while total - len(cur) > 256:
        cur += ("/" if cur else "") + "D" * 200
    return cur, cur + "/" + "L" * (total - len(cur) - 1)


@row("relative paths of PATH_MAX - 1 bytes below the root: create, chmod, rename, unlink...")
def _(p):
    def go():
        d, full = relative_long_path(4095)
        os.makedirs(d)
        other = full[:-1] + "M"
        return (len(full), opn(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL), st(full),
                t(os.chmod, full, 0o642), t(os.chown, full, 65534, 65534), st(full),
                t(os.truncate, full, 5), st(full), t(os.utime, full, ns=(1, 2)),
                st(full, times=True), t(os.rename, full, other), st(other),
                t(os.link, other, full), t(os.unlink, other), t(os.symlink, "x", other),
                t(os.readlink, other), t(os.unlink, other), t(os.mkfifo, other),
                t(os.unlink, other), t(os.mknod, other, stat.S_IFREG), t(os.unlink, other),
                t(os.mkdir, other), t(os.rmdir, other), t(os.unlink, full),
                opn(full + "x", os.O_WRONLY | os.O_CREAT), t(os.mkdir, full + "x"),
                t(os.chmod, full + "x", 0o600), ls(d))
    fd = os.open(p(""), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return in_dir(fd, go)
    finally:
        os.close(fd)


@row("a directory with 300 entries with 200-byte names lists completely")
def _(p):
    os.mkdir(p("many"))
    for i in range(300):
        wr(p("many/%03d-%s" % (i, "x" * 196)), b"")
    names = ls(p("many"))
    return len(names), names == sorted("%03d-%s" % (i, "x" * 196) for i in range(300)), \
        len(types(p("many"))), st(p("many"))


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


# the whole tree, at the end

FINAL = "final trees: the native tree, the view and its backing project are equal"


class DifferentialTest(harness.MountCase):
    tree = {}
    deadline = 120

    def setUp(self):
        super().setUp()
        old = os.umask(0o022)
        self.addCleanup(os.umask, old)
        # nobody must reach both sides (mkdtemp makes the temp dir 0700).
        os.chmod(self.tmp, 0o755)
        self.native = os.path.join(self.tmp, "nat")
        self.assertEqual(len(self.native), len(self.mp))
        os.mkdir(self.native)
        for i in range(len(ROWS)):
            for root in (self.native, self.project):
                populate(os.path.join(root, "r%02d" % i))
        os.utime(self.native, ns=ROOT_TIMES)
        os.utime(self.project, ns=ROOT_TIMES)

    def run_row(self, fn, root, catch_all):
        def p(rel=""):
            return os.path.join(root, rel) if rel else root
        try:
            return fn(p)
        except OSError as e:
            return ("raised", ename(e))
        except Exception as e:  # noqa: B902 - only on the view side (see test_table)
            if not catch_all:
                raise
            return ("exception", repr(e))

    def test_table(self):
        v = self.mount("build", args=["-o", "allow_other"])
        self.assertGreaterEqual(len(ROWS), 40)
        differ = []
        for i, (name, fn) in enumerate(ROWS):
            rel = "r%02d" % i
            native = self.run_row(fn, os.path.join(self.native, rel), False)
            view = self.run_row(fn, v.path(rel), True)
            with self.subTest(row=name):
                if native != view:
                    differ.append(name)
                if native != view:
                    self.fail(short("\nrow %s: %s\n native: %r\n view:   %r" %
                                    (rel, name, native, view)))
        with self.subTest(row=FINAL):
            nat, view, backing = snapshot(self.native), snapshot(v.mp), \
                snapshot(self.project)
            diff = sorted(k for k in set(nat) | set(view) | set(backing)
                          if not (nat.get(k) == view.get(k) == backing.get(k)))
            if diff:
                differ.append(FINAL)
            if diff:
                self.fail(short("\n".join(
                    "%s\n native:  %r\n view:    %r\n backing: %r" %
                    (k, nat.get(k), view.get(k), backing.get(k)) for k in diff[:40])))
        if differ:
            sys.stderr.write("\n%d of %d rows differ:\n  %s\n" %
                             (len(differ), len(ROWS) + 1, "\n  ".join(differ)))


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


DEEP_MODE = ("---\nname: build\ndescription: build, with a deny and a hide rule\n"
             "writes:\n  allow:\n    - \"**\"\n  deny:\n    - \"**/deny-me\"\n"
             "hide:\n  - \"**/*.key\"\n---\nDeep paths.\n")


class DeepPaths(harness.MountCase):
    """The policy decides on the whole path of an object deeper than PATH_MAX: rules that
    match its last component (deny, hide) and rules that match its first (protected) apply
    at the bottom of a tree 24 levels of 200-byte names deep."""
    tree = {".piworkfs/modes/build.md": DEEP_MODE, ".git/hooks/README": "hooks\n"}

    @staticmethod
    def reopen(top):
        """A descriptor of the bottom of the deep tree below TOP."""
        fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        for _ in range(24):
            nfd = os.open(DEEP_NAME, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nfd
        return fd

    def test_rules_apply_below_path_max(self):
        for top in ("src", ".git/hooks"):
            os.makedirs(os.path.join(self.project, top), exist_ok=True)
            fd = descend(lambda rel="", top=top: os.path.join(self.project, top))
            for name in ("deny-me", "a.key", "x"):
                os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644,
                                 dir_fd=fd))
            os.close(fd)
        v = self.mount("build")
        fd = self.reopen(v.path("src"))
        try:
            self.assertEqual(opn("x", os.O_WRONLY | os.O_APPEND, dir_fd=fd), "ok")
            self.assertEqual(opn("new", os.O_WRONLY | os.O_CREAT, dir_fd=fd), "ok")
            self.assertEqual(opn("deny-me", os.O_WRONLY | os.O_APPEND, dir_fd=fd), "EACCES")
            self.assertEqual(t(os.unlink, "deny-me", dir_fd=fd), "EACCES")
            self.assertEqual(st("a.key", dir_fd=fd), "ENOENT")
            self.assertEqual(sorted(os.listdir(fd)), ["deny-me", "new", "x"])
        finally:
            os.close(fd)
        fd = self.reopen(v.path(".git/hooks"))
        try:
            self.assertEqual(opn("x", os.O_WRONLY | os.O_APPEND, dir_fd=fd), "EACCES")
            self.assertEqual(t(os.unlink, "x", dir_fd=fd), "EACCES")
            self.assertEqual(opn("new", os.O_WRONLY | os.O_CREAT, dir_fd=fd), "EACCES")
            self.assertEqual(opn("x", os.O_RDONLY, dir_fd=fd), "ok")
        finally:
            os.close(fd)


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
