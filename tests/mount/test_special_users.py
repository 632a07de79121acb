#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Another user's FIFOs and device nodes through a view with several users.

The kernel opens a FIFO or a device node, and connects to a Unix socket, without asking the
daemon; an allow_other view therefore has the kernel check permission bits itself
(default_permissions, implied by allow_other: fs/fsmain.c). The rows below are the classes
pjdfstest runs as a second user (chmod/00, chown/00, chown/07, unlink/11, rename/09,
rename/10, open/06): each runs once on a native directory and once in the view, as uid
65534 (nobody) or 65533, and the answers must be equal. Every configuration the docs give
for several users runs the whole table: `-o allow_other` and
`-o allow_other,default_permissions`.

Each row works in its own directory rNN/, populated identically on both sides before the
mount:

    rNN/               root 0755
      fifo             root's FIFO 0644
      chr              root's character device 1,3 (/dev/null's numbers) 0644
      priv             root's FIFO 0600
      mine/            nobody's 0755: root's fifo and chr inside
      sticky/          nobody's 1777: root's fifo and chr inside
      rsticky/         root's 1777: root's fifo and chr, nobody's file "nf"
      own/             nobody's 0755, empty (the open/06 rows make nobody's FIFO there)

The native root ("nat") and the mountpoint ("mnt") have names of equal length.
"""

import errno
import json
import os
import stat
import struct
import sys
import time
import unittest

import harness  # noqa: E402
from differential import NOBODY, NOGROUP, Err, as_user, nobody, opn, st, t

OTHER = 65533  # a second unprivileged uid (and gid), pjdfstest's


def populate(root):
    os.makedirs(root)
    os.chmod(root, 0o755)

    def special(d):
        os.mkfifo(os.path.join(d, "fifo"))
        os.chmod(os.path.join(d, "fifo"), 0o644)
        os.mknod(os.path.join(d, "chr"), stat.S_IFCHR | 0o644, os.makedev(1, 3))
        os.chmod(os.path.join(d, "chr"), 0o644)
    special(root)
    os.mkfifo(os.path.join(root, "priv"))
    os.chmod(os.path.join(root, "priv"), 0o600)
    for name, mode, uid in (("mine", 0o755, NOBODY), ("sticky", 0o1777, NOBODY),
                            ("rsticky", 0o1777, 0), ("own", 0o755, NOBODY)):
        d = os.path.join(root, name)
        os.mkdir(d)
        os.chown(d, uid, NOGROUP if uid else 0)
        os.chmod(d, mode)
        if name != "own":
            special(d)
    nf = os.path.join(root, "rsticky", "nf")
    with open(nf, "w") as f:
        f.write("n")
    os.chown(nf, NOBODY, NOGROUP)


ROWS, row = harness.table()


def kinds(p, fn):
    """FN(path) for the FIFO and the device node named p("fifo") and p("chr")."""
    return fn(p("fifo")), fn(p("chr"))


# stat, chmod, chown: decided without the file's permission bits

@row("stat of root's FIFO and device node (chmod/00, chown/00 read them back)")
def _(p):
    return nobody(lambda: (kinds(p, st), kinds(lambda r: p("mine/" + r), st)))


@row("chmod of root's FIFO and device node -> EPERM (chmod/00 95, 99, 103)")
def _(p):
    return nobody(lambda: (kinds(p, lambda f: t(os.chmod, f, 0o111)),
                           kinds(p, lambda f: t(os.chmod, f, 0o644)))), kinds(p, st)


@row("chown of root's FIFO and device node: -1 -1 -> 0, to nobody -> EPERM (chown/00, 07)")
def _(p):
    def go():
        return (kinds(p, lambda f: t(os.chown, f, -1, -1)),
                kinds(p, lambda f: t(os.lchown, f, -1, -1)),
                kinds(p, lambda f: t(os.chown, f, NOBODY, -1)),
                kinds(p, lambda f: t(os.chown, f, -1, NOGROUP)),
                kinds(p, lambda f: t(os.chown, f, 0, 0)))
    return nobody(go), kinds(p, st)


@row("chown of nobody's FIFO and device node by uid 65533: -1 -1 -> 0, to itself -> EPERM "
     "(chown/07); by nobody: to its group -> 0, to root -> EPERM")
def _(p):
    for f in ("mine/fifo", "mine/chr"):
        os.chown(p(f), NOBODY, 0)

    def mine(r):
        return p("mine/" + r)

    def other():
        return (kinds(mine, lambda f: t(os.chown, f, -1, -1)),
                kinds(mine, lambda f: t(os.chown, f, OTHER, OTHER)),
                kinds(mine, lambda f: t(os.chmod, f, 0o600)))

    def owner():
        return (kinds(mine, lambda f: t(os.chown, f, 0, -1)),
                kinds(mine, lambda f: t(os.chown, f, -1, NOGROUP)), kinds(mine, st))
    return as_user(OTHER, OTHER, [], other), nobody(owner)


# unlink and rename: decided by the directories

@row("unlink, rename of root's FIFO and device node in root's 0755 dir -> EACCES, "
     "the names stay")
def _(p):
    return nobody(lambda: (kinds(p, lambda f: t(os.unlink, f)),
                           kinds(p, lambda f: t(os.rename, f, f + ".x")),
                           kinds(p, lambda f: st(f)["mode"]))), sorted(os.listdir(p()))


@row("unlink, rename of root's FIFO and device node in nobody's 0755 dir -> 0")
def _(p):
    def go():
        return (t(os.rename, p("mine/fifo"), p("mine/fifo2")), t(os.unlink, p("mine/chr")),
                t(os.rename, p("mine/fifo2"), p("own/fifo")), sorted(os.listdir(p("own"))))
    return nobody(go), sorted(os.listdir(p("mine")))


@row("unlink, rename of root's FIFO and device node in nobody's sticky dir -> 0 "
     "(unlink/11, rename/09, rename/10)")
def _(p):
    def go():
        return (t(os.rename, p("sticky/fifo"), p("sticky/f2")),
                t(os.rename, p("sticky/chr"), p("own/chr")),
                t(os.unlink, p("sticky/f2")), t(os.unlink, p("own/chr")),
                sorted(os.listdir(p("sticky"))))
    return nobody(go)


@row("unlink, rename of root's FIFO and device node in root's sticky dir -> EPERM")
def _(p):
    def go():
        return (t(os.unlink, p("rsticky/fifo")), t(os.unlink, p("rsticky/chr")),
                t(os.rename, p("rsticky/fifo"), p("rsticky/f2")),
                t(os.rename, p("rsticky/chr"), p("own/chr")),
                t(os.rename, p("rsticky/nf"), p("rsticky/fifo")),
                t(os.rename, p("rsticky/nf"), p("rsticky/chr")))
    return nobody(go), sorted(os.listdir(p("rsticky")))


@row("rename of nobody's file over root's FIFO and device node in nobody's sticky dir -> 0")
def _(p):
    def go():
        with open(p("sticky/n1"), "w") as f:
            f.write("1")
        with open(p("sticky/n2"), "w") as f:
            f.write("2")
        return (t(os.rename, p("sticky/n1"), p("sticky/fifo")),
                t(os.rename, p("sticky/n2"), p("sticky/chr")),
                kinds(lambda r: p("sticky/" + r), st), sorted(os.listdir(p("sticky"))))
    return nobody(go)


# opening: the permission bits decide (the kernel's check)

@row("open of root's FIFOs by nobody: 0644 read-only -> 0, write -> EACCES; 0600 -> EACCES")
def _(p):
    def go():
        return (opn(p("fifo"), os.O_RDONLY | os.O_NONBLOCK), opn(p("fifo"), os.O_RDWR),
                opn(p("fifo"), os.O_WRONLY | os.O_NONBLOCK),
                opn(p("priv"), os.O_RDONLY | os.O_NONBLOCK), opn(p("priv"), os.O_RDWR),
                opn(p("chr"), os.O_RDWR), st(p("priv")))
    return nobody(go)


def open06(mode, uid, gid, flags):
    """pjdfstest open/06: nobody makes a FIFO in its directory, sets MODE; UID:GID opens."""
    def f(p):
        def make():
            os.mkfifo(p("own/f"), 0o644)
            os.chmod(p("own/f"), mode)
        made = nobody(make)
        return made, as_user(uid, gid, [], lambda: opn(p("own/f"), flags))
    return f


for _n, _mode, _uid, _gid, _flags, _fl in (
        (78, 0o477, NOBODY, NOGROUP, os.O_RDWR, "O_RDWR"),
        (80, 0o747, OTHER, NOGROUP, os.O_RDONLY | os.O_NONBLOCK, "O_RDONLY|O_NONBLOCK"),
        (84, 0o774, OTHER, OTHER, os.O_RDONLY | os.O_NONBLOCK, "O_RDONLY|O_NONBLOCK"),
        (88, 0o177, NOBODY, NOGROUP, os.O_RDONLY | os.O_NONBLOCK, "O_RDONLY|O_NONBLOCK"),
        (90, 0o177, NOBODY, NOGROUP, os.O_RDWR, "O_RDWR"),
        (100, 0o077, NOBODY, NOGROUP, os.O_RDONLY | os.O_NONBLOCK, "O_RDONLY|O_NONBLOCK"),
        (102, 0o077, NOBODY, NOGROUP, os.O_RDWR, "O_RDWR")):
    row("open/06 %d: nobody's FIFO %04o opened %s by %d:%d" % (_n, _mode, _fl, _uid, _gid))(
        open06(_mode, _uid, _gid, _flags))


class SpecialFilesAsAnotherUser:
    """The table, in a view mounted with OPTIONS (a mixin: each configuration is a
    harness.MountCase below)."""
    tree = {}
    options = None

    def setUp(self):
        super().setUp()
        old = os.umask(0o022)
        self.addCleanup(os.umask, old)
        os.chmod(self.tmp, 0o755)  # the other users must reach both sides
        self.native = os.path.join(self.tmp, "nat")
        self.assertEqual(len(self.native), len(self.mp))
        os.mkdir(self.native)
        for root in (self.native, self.project):
            os.chmod(root, 0o755)
            for i in range(len(ROWS)):
                populate(os.path.join(root, "r%02d" % i))

    def run_row(self, fn, root):
        def p(rel=""):
            return os.path.join(root, rel) if rel else root
        try:
            return fn(p)
        except OSError as e:
            return ("raised", Err(errno.errorcode.get(e.errno, str(e.errno))))

    def table(self):
        v = self.mount("build", args=["-o", self.options])
        differ = []
        for i, (name, fn) in enumerate(ROWS):
            rel = "r%02d" % i
            native = self.run_row(fn, os.path.join(self.native, rel))
            view = self.run_row(fn, v.path(rel))
            with self.subTest(row=name):
                if native != view:
                    differ.append("%s\n native: %r\n view:   %r" % (name, native, view))
                self.assertEqual(native, view, name)
        if differ:
            sys.stderr.write("\n-o %s: %d of %d rows differ:\n  %s\n" %
                             (self.options, len(differ), len(ROWS), "\n  ".join(differ)))
        return v

    def test_table(self):
        self.table()

    def test_a_read_only_mode_answers_erofs_to_another_user_and_logs_it(self):
        # The kernel checks permission bits in such a view, so the view shows the backing
        # file's own write bits: a write the mode refuses reaches the daemon, which answers
        # EROFS (not the kernel's EACCES) and records the denial with the caller's uid.
        shared = os.path.join(self.project, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o777)
        with open(os.path.join(shared, "w"), "w") as f:
            f.write("w")
        os.chmod(os.path.join(shared, "w"), 0o666)
        v = self.mount("plan", args=["-o", self.options])

        def go():
            return (opn(v.path("shared/w"), os.O_WRONLY),
                    opn(v.path("shared/new"), os.O_WRONLY | os.O_CREAT),
                    t(os.unlink, v.path("shared/w")))
        self.assertEqual(nobody(go), ("EROFS", "EROFS", "EROFS"))
        self.assertEqual(os.listdir(shared), ["w"])
        end = time.monotonic() + harness.DEADLINE
        rows = []
        while time.monotonic() < end:
            p = self.run_pw("log", "--json", "-n", "0", "--project", self.project)
            rows = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
            if any(r.get("uid") == NOBODY and r.get("path") == "shared/new" for r in rows):
                break
            time.sleep(0.05)
        self.assertTrue(any(r.get("uid") == NOBODY and r.get("path") == "shared/new"
                            for r in rows), "no denial of nobody's create in %r" % rows)


class AllowOther(SpecialFilesAsAnotherUser, harness.MountCase):
    options = "allow_other"


class AllowOtherDefaultPermissions(SpecialFilesAsAnotherUser, harness.MountCase):
    options = "allow_other,default_permissions"


ACL_USER_OBJ, ACL_GROUP_OBJ, ACL_GROUP, ACL_MASK, ACL_OTHER = 0x01, 0x04, 0x08, 0x10, 0x20


def access_acl(entries):
    """The system.posix_acl_access value for ENTRIES: (tag, perm, id) triples."""
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, i)
                                           for tag, perm, i in entries)


class SpecialFileWithAnAcl(harness.MountCase):
    """The kernel's check does not see ACLs (no FUSE_POSIX_ACL): it judges the group class by
    the ACL's mask. A special file with an access ACL is therefore looked up, in an
    allow_other view, only for its owner and for callers the backing filesystem lets read
    and write it (docs/SECURITY.md): an owning-group member the ACL keeps out stays out."""
    tree = {}

    def test_a_group_the_acl_keeps_out_cannot_open_the_fifo(self):
        os.chmod(self.tmp, 0o755)
        native = os.path.join(self.tmp, "nat")
        os.mkdir(native)
        for root in (native, self.project):
            os.chmod(root, 0o755)
            f = os.path.join(root, "fifo")
            os.mkfifo(f)
            os.chown(f, 0, 1234)
            # owning group ---, group 5678 rw-: the mask (rw-) becomes the group bits
            os.setxattr(f, "system.posix_acl_access", access_acl([
                (ACL_USER_OBJ, 6, 0xffffffff), (ACL_GROUP_OBJ, 0, 0xffffffff),
                (ACL_GROUP, 6, 5678), (ACL_MASK, 6, 0xffffffff), (ACL_OTHER, 0, 0xffffffff)]))
            self.assertEqual(os.stat(f).st_mode & 0o777, 0o660)
        v = self.mount("build", args=["-o", "allow_other"])

        def go(root):
            def f():
                path = os.path.join(root, "fifo")
                return (opn(path, os.O_RDONLY | os.O_NONBLOCK), opn(path, os.O_RDWR))
            return f
        self.assertEqual(nobody(go(native), [1234]), ("EACCES", "EACCES"))
        self.assertEqual(nobody(go(v.mp), [1234]), ("EACCES", "EACCES"))
        # The documented costs: the excluded member cannot stat the name either, and a
        # group only the ACL lets in is refused by the kernel, which sees the bits alone.
        self.assertEqual(nobody(lambda: st(v.path("fifo")), [1234]), "EACCES")
        self.assertEqual(nobody(go(native), [5678]), ("ok", "ok"))
        self.assertEqual(nobody(go(v.mp), [5678]), ("EACCES", "EACCES"))
        self.assertNotIsInstance(nobody(lambda: st(v.path("fifo")), [5678]), Err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
