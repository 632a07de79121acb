#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Differential test, the namespace: lookups, stat, readlink and readdir; mkdir, rmdir and
unlink; rename in every form; hard links, symlinks, FIFOs and sockets; long names and paths
up to PATH_MAX and beyond it (by descriptor and from the working directory), and the
policy's rules at the bottom of such a tree (DeepPaths).

The method (each row run on a native directory and in a build view, outcomes compared),
the fixture each row starts from and the comparison of the final trees are
differential.py's.
"""

import os
import socket
import stat
import unittest

import differential
import harness  # noqa: E402
from differential import (D_TIMES, ROOT_TIMES, linkat_follow, long_path, ls, ok, opn, rd, st,
                          t, types, with_fd, wr, xattrs)

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


class Namespace(differential.TableCase):
    def test_table(self):
        self.compare_table(ROWS, at_least=38)


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


if __name__ == "__main__":
    unittest.main(verbosity=2)
