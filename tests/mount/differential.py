# SPDX-License-Identifier: MIT
"""The shared part of the differential tests (test_differential_*.py): in build mode the
view is a faithful passthrough of its backing directory. Every row of their tables is one
operation (or a short sequence) run twice with the same relative paths: once on a native
scratch directory (a plain directory, not the view's backing project) and once inside a
view mounted in build mode over a scratch project with identical initial contents. The
outcomes (return values or errno names) and the relevant results (stat fields, explicit
timestamps, link text, xattrs, listings) must be equal. The tables are split by area: the
namespace (names, links, renames, long paths), the contents (open flags, sizes, holes,
xattrs), and access (permissions, ownership, timestamps, another user).

Each row works in its own directory rNN/, populated identically on both sides before the
mount with the fixture below, so the rows are independent of one another:

    rNN/                  mtime and atime explicit (ROOT_TIMES)
      f                   "hello\\n", 0644, xattr user.k=v, explicit times (F_TIMES)
      g, hl               "other\\n", 0644, two hard links to one inode (the view refuses
                          writes to g until hl has been looked up, by design: see
                          docs/internals/fs.md; tests/mount/test_escape.py tests that rule)
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

A module beside the tests that import it (Python puts a script's own folder first on its
path); the outcomes and as_user() serve test_special_users.py too.
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


# --- the table's test -------------------------------------------------------------------

FINAL = "final trees: the native tree, the view and its backing project are equal"


class TableCase(harness.MountCase):
    """Runs a table of rows on both sides, then compares the final trees (a base: each
    test file's case calls compare_table with its own rows)."""
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

    def run_row(self, fn, root, catch_all):
        def p(rel=""):
            return os.path.join(root, rel) if rel else root
        try:
            return fn(p)
        except OSError as e:
            return ("raised", ename(e))
        except Exception as e:  # noqa: B902 - only on the view side (see compare_table)
            if not catch_all:
                raise
            return ("exception", repr(e))

    def compare_table(self, rows, at_least):
        """Every row of ROWS (at least AT_LEAST of them: a table that lost its rows fails)
        on the native side and in a build view, then the final trees."""
        self.assertGreaterEqual(len(rows), at_least)
        for i in range(len(rows)):
            for root in (self.native, self.project):
                populate(os.path.join(root, "r%02d" % i))
        os.utime(self.native, ns=ROOT_TIMES)
        os.utime(self.project, ns=ROOT_TIMES)
        v = self.mount("build", args=["-o", "allow_other"])
        differ = []
        for i, (name, fn) in enumerate(rows):
            rel = "r%02d" % i
            native = self.run_row(fn, os.path.join(self.native, rel), False)
            view = self.run_row(fn, v.path(rel), True)
            with self.subTest(row=name):
                if native != view:
                    differ.append(name)
                    self.fail(short("\nrow %s: %s\n native: %r\n view:   %r" %
                                    (rel, name, native, view)))
        with self.subTest(row=FINAL):
            nat, view, backing = snapshot(self.native), snapshot(v.mp), \
                snapshot(self.project)
            diff = sorted(k for k in set(nat) | set(view) | set(backing)
                          if not (nat.get(k) == view.get(k) == backing.get(k)))
            if diff:
                differ.append(FINAL)
                self.fail(short("\n".join(
                    "%s\n native:  %r\n view:    %r\n backing: %r" %
                    (k, nat.get(k), view.get(k), backing.get(k)) for k in diff[:40])))
        if differ:
            sys.stderr.write("\n%d of %d rows differ:\n  %s\n" %
                             (len(differ), len(rows) + 1, "\n  ".join(differ)))
