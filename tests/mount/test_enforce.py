#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Enforcement at the filesystem: for each bundled mode, a table of operations x paths,
each made through a mounted view with a direct syscall, asserting the exact errno.

The fixture tree (harness.STANDARD_TREE):

    project/
      .git/HEAD                    writable in build
      .git/config                  protected
      .git/hooks/pre-commit        protected
      .git/hooks/empty/            protected
      .piworkfs/config.yaml        protected; declares design.tokens: [styles/tokens.css]
      .piworkfs/empty/             protected
      docs/design/{a,b,c}.md       design-writable
      docs/design/sub/             design-writable
      docs/{x,y}.md, docs/empty/   build/off only
      src/{a,b}.c, src/empty/      build/off only
      styles/tokens.css            a declared token: design-writable only when trusted

Expected outcome of a mutation of one path (None: allowed):
    discuss, plan, review   EROFS everywhere
    design                  allowed under docs/design/ (and the token file when trusted),
                            EACCES elsewhere
    build                   EACCES on .git/config, .git/hooks/**, .piworkfs/**; else allowed
    off                     allowed everywhere
An operation on two names (link, rename) fails with the first name's errno, else the second's.

After every denied operation the backing tree's hash (names, modes, sizes, mtimes,
contents, xattrs, symlink targets) must be unchanged; after every allowed one its effect
must be on the backing directory.

Write through a descriptor, fallocate and copy_file_range need a writable descriptor, which a
denying mode never hands out: here their denial is the open's; the same operations on a
descriptor opened before a switch to a stricter mode are in test_live.py.
"""


import errno
import os
import stat
import subprocess
import sys
import unittest

import harness  # noqa: E402

EROFS = errno.EROFS
EACCES = errno.EACCES
ENOENT = errno.ENOENT
TOKEN = "styles/tokens.css"


def protected(rel):
    return (rel == ".git/config" or rel == ".git/hooks" or rel.startswith(".git/hooks/")
            or rel == ".piworkfs" or rel.startswith(".piworkfs/"))


def expect(mode, rel, trusted=False):
    """The errno a mutation of REL fails with in MODE, or None when it is allowed."""
    if mode in harness.READ_ONLY_MODES:
        return EROFS
    if mode == "off":
        return None
    if mode == "build":
        return EACCES if protected(rel) else None
    assert mode == "design"
    if rel.startswith("docs/design/") or rel == "docs/design":
        return None
    if trusted and rel == TOKEN:
        return None
    return EACCES


def expect_all(mode, rels, trusted=False):
    """Operations on several names fail with the first denied name's errno."""
    for r in rels:
        e = expect(mode, r, trusted)
        if e is not None:
            return e
    return None


FILES = ["src/a.c", "docs/design/a.md", "docs/x.md", ".git/HEAD", ".git/config",
         ".git/hooks/pre-commit", ".piworkfs/config.yaml", TOKEN]
NEW_DIRS = ["src", "docs/design", "docs/design/sub", "docs", ".git", ".git/hooks", ".piworkfs",
            "styles"]
DIRS = ["", "src", "docs/design", "docs/design/sub", "docs", ".git", ".git/hooks", ".piworkfs"]
EMPTY_DIRS = ["src/empty", "docs/design/sub", "docs/empty", ".git/hooks/empty",
              ".piworkfs/empty"]
XATTR = "user.piworkfs-test"
MTIME_NS = 1_234_567_891_234_567_891
CFR_SOURCE = "docs/design/c.md"

# --- operations ----------------------------------------------------------------------------
# op(V, *rels) mutates through the view (V maps a relative path to its view path);
# effect(t, B, *rels) asserts the change on the backing directory (B: backing path).


def op_create(V, r):
    os.close(os.open(V(r), os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o644))


def eff_create(t, B, r):
    t.assertTrue(stat.S_ISREG(os.lstat(B(r)).st_mode))


def op_mknod(V, r):
    os.mkfifo(V(r), 0o644)


def eff_mknod(t, B, r):
    t.assertTrue(stat.S_ISFIFO(os.lstat(B(r)).st_mode))


def op_mkdir(V, r):
    os.mkdir(V(r), 0o755)


def eff_mkdir(t, B, r):
    t.assertTrue(stat.S_ISDIR(os.lstat(B(r)).st_mode))


def op_symlink(V, r):
    os.symlink("some-target", V(r))


def eff_symlink(t, B, r):
    t.assertEqual(os.readlink(B(r)), "some-target")


def op_open_wronly(V, r):
    os.close(os.open(V(r), os.O_WRONLY | os.O_CLOEXEC))


def op_open_trunc(V, r):
    os.close(os.open(V(r), os.O_RDWR | os.O_TRUNC | os.O_CLOEXEC))


def eff_empty(t, B, r):
    t.assertEqual(os.lstat(B(r)).st_size, 0)


PAYLOAD = b"written through a descriptor"


def op_write(V, r):
    fd = os.open(V(r), os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.pwrite(fd, PAYLOAD, 0)
    finally:
        os.close(fd)


def eff_write(t, B, r):
    with open(B(r), "rb") as f:
        t.assertEqual(f.read(len(PAYLOAD)), PAYLOAD)


def op_open_rdonly_trunc(V, r):
    # Linux truncates on O_RDONLY|O_TRUNC too (POSIX leaves it undefined).
    os.close(os.open(V(r), os.O_RDONLY | os.O_TRUNC | os.O_CLOEXEC))


def op_touch_now(V, r):
    os.utime(V(r))  # UTIME_NOW for both times, as touch(1) does


def eff_touch_now(t, B, r):
    t.assertGreater(os.lstat(B(r)).st_mtime_ns, 10**18)


def op_chown_other(V, r):
    os.chown(V(r), 4321, 4321, follow_symlinks=False)


def eff_chown_other(t, B, r):
    st = os.lstat(B(r))
    t.assertEqual((st.st_uid, st.st_gid), (4321, 4321))


def op_set_trusted_xattr(V, r):
    os.setxattr(V(r), "trusted.piworkfs-test", b"t")


def eff_set_trusted_xattr(t, B, r):
    t.assertEqual(os.getxattr(B(r), "trusted.piworkfs-test"), b"t")


def op_truncate(V, r):
    os.truncate(V(r), 3)


def eff_truncate(t, B, r):
    t.assertEqual(os.lstat(B(r)).st_size, 3)


def op_chmod(V, r):
    os.chmod(V(r), 0o700 if os.path.isdir(V(r)) else 0o600)


def eff_chmod(t, B, r):
    t.assertEqual(stat.S_IMODE(os.lstat(B(r)).st_mode), 0o700 if os.path.isdir(B(r)) else 0o600)


def op_chown(V, r):
    os.chown(V(r), os.getuid(), os.getgid())


def eff_chown(t, B, r):
    st = os.lstat(B(r))
    t.assertEqual((st.st_uid, st.st_gid), (os.getuid(), os.getgid()))


def op_utime(V, r):
    os.utime(V(r), ns=(MTIME_NS, MTIME_NS))


def eff_utime(t, B, r):
    t.assertEqual(os.lstat(B(r)).st_mtime_ns, MTIME_NS)


def op_setxattr(V, r):
    os.setxattr(V(r), XATTR, b"value")


def eff_setxattr(t, B, r):
    t.assertEqual(os.getxattr(B(r), XATTR), b"value")


def op_removexattr(V, r):
    os.removexattr(V(r), "user.keep")


def eff_removexattr(t, B, r):
    t.assertNotIn("user.keep", os.listxattr(B(r)))


def op_fallocate(V, r):
    fd = os.open(V(r), os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.posix_fallocate(fd, 0, 1 << 16)
    finally:
        os.close(fd)


def eff_fallocate(t, B, r):
    t.assertGreaterEqual(os.lstat(B(r)).st_size, 1 << 16)


def op_copy_file_range(V, r):
    src = os.open(V(CFR_SOURCE), os.O_RDONLY | os.O_CLOEXEC)
    try:
        dst = os.open(V(r), os.O_WRONLY | os.O_CLOEXEC)
        try:
            n = os.copy_file_range(src, dst, 1 << 16, 0, 0)
            assert n > 0, "copy_file_range copied nothing"
        finally:
            os.close(dst)
    finally:
        os.close(src)


def eff_copy_file_range(t, B, r):
    with open(B(CFR_SOURCE), "rb") as f:
        want = f.read()
    with open(B(r), "rb") as f:
        t.assertEqual(f.read(len(want)), want)


def op_unlink(V, r):
    os.unlink(V(r))


def op_rmdir(V, r):
    os.rmdir(V(r))


def eff_gone(t, B, r):
    t.assertFalse(os.path.lexists(B(r)))


def op_link(V, a, b):
    os.link(V(a), V(b))


def eff_link(t, B, a, b):
    t.assertTrue(os.path.samestat(os.lstat(B(a)), os.lstat(B(b))))


def op_rename(V, a, b):
    os.rename(V(a), V(b))


def op_rename_noreplace(V, a, b):
    harness.renameat2(V(a), V(b), harness.RENAME_NOREPLACE)


def eff_renamed(t, B, a, b):
    t.assertFalse(os.path.lexists(B(a)))
    t.assertTrue(os.path.lexists(B(b)))


def op_rename_whiteout(V, a, b):
    harness.renameat2(V(a), V(b), RENAME_WHITEOUT)


def op_rename_exchange(V, a, b):
    harness.renameat2(V(a), V(b), harness.RENAME_EXCHANGE)


# Operations on one path: (label, op, effect, targets, the backing must change when allowed).
# New names are "<dir>/new-<label>".
SINGLE = [
    ("create", op_create, eff_create, "new", True),
    ("mknod", op_mknod, eff_mknod, "new", True),
    ("mkdir", op_mkdir, eff_mkdir, "new", True),
    ("symlink", op_symlink, eff_symlink, "new", True),
    ("open-O_WRONLY", op_open_wronly, None, "files", False),
    ("open-O_TRUNC", op_open_trunc, eff_empty, "files", True),
    ("write", op_write, eff_write, "files", True),
    ("open-O_RDONLY|O_TRUNC", op_open_rdonly_trunc, eff_empty, "files", True),
    ("truncate", op_truncate, eff_truncate, "files", True),
    ("touch", op_touch_now, eff_touch_now, "files", True),
    ("chown-other", op_chown_other, eff_chown_other, "files", True),
    ("setxattr-trusted", op_set_trusted_xattr, eff_set_trusted_xattr, "files", True),
    ("chmod", op_chmod, eff_chmod, "files", True),
    ("chown", op_chown, eff_chown, "files", False),  # to the same owner: nothing changes
    ("utime", op_utime, eff_utime, "files", True),
    ("setxattr", op_setxattr, eff_setxattr, "files", True),
    ("removexattr", op_removexattr, eff_removexattr, "files", True),
    ("fallocate", op_fallocate, eff_fallocate, "files", True),
    ("copy_file_range", op_copy_file_range, eff_copy_file_range, "files", True),
    ("chmod-dir", op_chmod, eff_chmod, "dirs", True),
    ("utime-dir", op_utime, eff_utime, "dirs", True),
    ("chown-dir-other", op_chown_other, eff_chown_other, "dirs", True),
    ("setxattr-dir", op_setxattr, eff_setxattr, "dirs", True),
]

# Destructive operations: each group runs in its own fresh project.
LINK_PAIRS = [
    ("src/a.c", "docs/design/l1"),            # denied source, design-allowed target
    ("docs/design/a.md", "src/l2"),           # design-allowed source, denied target
    ("docs/design/b.md", "docs/design/l3"),   # both design-allowed
    ("src/b.c", "src/l4"),                    # both build-allowed
    (".git/config", "src/l5"),                # protected source
    ("docs/x.md", ".git/hooks/l6"),           # protected target
    (".git/HEAD", ".git/l7"),                 # .git itself is writable in build
    (TOKEN, "docs/design/l8"),                # an untrusted token file
]
RENAME_PAIRS = [
    ("src/a.c", "docs/design/r1"),
    ("docs/design/a.md", "src/r2"),
    ("docs/design/b.md", "docs/design/c.md"),  # over an existing file
    ("src/b.c", "src/r4"),
    (".git/config", "src/r5"),
    ("docs/x.md", ".git/hooks/pre-commit"),    # over a protected file
    (".git/HEAD", ".git/r7"),
    ("src/empty", "docs/design/r8"),           # directories
    ("docs/design/sub", "docs/r9"),
    (".piworkfs/empty", "src/r10"),
    ("docs/empty", "docs/r11"),
]
NOREPLACE_PAIRS = [
    ("src/a.c", "docs/design/n1"),
    ("docs/design/a.md", "src/n2"),
    ("docs/design/b.md", "docs/design/n3"),
    ("src/b.c", "src/n4"),
    (".git/hooks/pre-commit", "docs/design/n5"),
    ("docs/x.md", ".piworkfs/n6"),
]
EXCHANGE_PAIRS = [
    ("docs/design/a.md", "docs/design/b.md"),  # both design-allowed
    ("src/a.c", "docs/design/c.md"),           # denied <-> design-allowed
    ("src/b.c", "docs/x.md"),                  # both build-allowed
    (".git/HEAD", ".git/config"),              # writable <-> protected
    ("docs/y.md", ".piworkfs/config.yaml"),
]
# RENAME_WHITEOUT would leave a device node (0:0) at the old name: EINVAL in every mode, the
# backing tree unchanged (EnforceTest.test_rename_whiteout_is_refused).
RENAME_WHITEOUT = 4
WHITEOUT_PAIRS = [
    ("src/a.c", "src/w1"),
    ("docs/design/a.md", "docs/design/w2"),
    ("docs/design/b.md", "src/w3"),
    (".git/config", ".git/w4"),
]
GROUPS = [
    ("unlink", op_unlink, eff_gone, [(r,) for r in FILES]),
    ("rmdir", op_rmdir, eff_gone, [(r,) for r in EMPTY_DIRS]),
    ("link", op_link, eff_link, LINK_PAIRS),
    ("rename", op_rename, eff_renamed, RENAME_PAIRS),
    ("rename-NOREPLACE", op_rename_noreplace, eff_renamed, NOREPLACE_PAIRS),
    ("rename-EXCHANGE", op_rename_exchange, None, EXCHANGE_PAIRS),
]


def prepare_backing(proj):
    """Marks every file and directory with a user.keep xattr (for removexattr)."""
    for dirpath, dirnames, filenames in os.walk(proj):
        for n in dirnames + filenames:
            os.setxattr(os.path.join(dirpath, n), "user.keep", b"1", follow_symlinks=False)


class EnforceBase(harness.MountCase):
    trusted = False

    def fresh_project(self, name, tree=None):
        proj, mp = super().fresh_project(name, tree)
        if self.trusted:
            self.trust(proj)
        return proj, mp

    def run_case(self, mode, label, proj, mp, fn, effect, rels, must_change=True):
        V = lambda r: os.path.join(mp, r)      # noqa: E731
        B = lambda r: os.path.join(proj, r)    # noqa: E731
        exp = expect_all(mode, rels, self.trusted)
        with self.subTest(mode=mode, op=label, paths=rels):
            before = harness.tree_hash(proj)
            try:
                fn(V, *rels)
            except OSError as e:
                if exp is None:
                    self.fail("%s %s in %s: expected success, got %s (%s)" %
                              (label, rels, mode, errno.errorcode.get(e.errno, e.errno), e))
                self.assertEqual(e.errno, exp, "%s %s in %s: expected %s, got %s (%s)" %
                                 (label, rels, mode, errno.errorcode[exp],
                                  errno.errorcode.get(e.errno, e.errno), e))
                self.assertEqual(before, harness.tree_hash(proj),
                                 "%s %s in %s: denied, but the backing tree changed" %
                                 (label, rels, mode))
                return
            if exp is not None:
                self.fail("%s %s in %s: succeeded, expected %s (backing %s)" %
                          (label, rels, mode, errno.errorcode[exp],
                           "changed" if before != harness.tree_hash(proj) else "unchanged"))
            if effect:
                effect(self, B, *rels)
            if must_change:
                self.assertNotEqual(before, harness.tree_hash(proj),
                                    "%s %s in %s: allowed, but the backing is unchanged" %
                                    (label, rels, mode))

    def run_table(self, mode):
        # Single-path operations share one mount: their targets never collide.
        proj, mp = self.fresh_project("single")
        prepare_backing(proj)
        self.mount(mode, project=proj, mountpoint=mp)
        for label, fn, effect, kind, must_change in SINGLE:
            if kind == "new":
                targets = [d + "/new-" + label for d in NEW_DIRS]
            elif kind == "files":
                targets = FILES
            else:
                targets = DIRS
            for t in targets:
                self.run_case(mode, label, proj, mp, fn, effect, (t,), must_change)
        # Destructive groups: a fresh project each.
        for i, (label, fn, effect, cases) in enumerate(GROUPS):
            proj, mp = self.fresh_project("g%d" % i)
            v = self.mount(mode, project=proj, mountpoint=mp)
            for rels in cases:
                self.run_case(mode, label, proj, mp, fn, effect, rels)
            self.unmount(v)

    def check_write_bits(self, mode):
        """getattr strips write bits and access(W_OK) fails exactly where writes are denied."""
        proj, mp = self.fresh_project("bits-" + mode)
        self.mount(mode, project=proj, mountpoint=mp)
        for rel in FILES + DIRS:
            with self.subTest(mode=mode, path=rel):
                bst = os.lstat(os.path.join(proj, rel))
                vst = os.lstat(os.path.join(mp, rel))
                allowed = expect(mode, rel, self.trusted) is None
                want = bst.st_mode if allowed else bst.st_mode & ~0o222
                self.assertEqual(oct(vst.st_mode), oct(want), "st_mode of %s in %s" %
                                 (rel, mode))
                self.assertEqual(os.access(os.path.join(mp, rel), os.W_OK), allowed,
                                 "access(%s, W_OK) in %s" % (rel, mode))
                self.assertTrue(os.access(os.path.join(mp, rel), os.R_OK))


class EnforceTest(EnforceBase):
    def test_discuss(self):
        self.run_table("discuss")

    def test_plan(self):
        self.run_table("plan")

    def test_review(self):
        self.run_table("review")

    def test_design(self):
        self.run_table("design")

    def test_build(self):
        self.run_table("build")

    def test_off(self):
        self.run_table("off")

    def test_write_bits(self):
        for mode in harness.BUNDLED:
            self.check_write_bits(mode)

    def test_rename_whiteout_is_refused(self):
        for mode in harness.BUNDLED:
            proj, mp = self.fresh_project("wh-" + mode)
            v = self.mount(mode, project=proj, mountpoint=mp)
            before = harness.tree_hash(proj)
            for a, b in WHITEOUT_PAIRS:
                with self.subTest(mode=mode, paths=(a, b)):
                    self.assertErrno(errno.EINVAL, op_rename_whiteout,
                                     lambda r: os.path.join(mp, r), a, b)
            self.assertEqual(before, harness.tree_hash(proj), mode)
            self.unmount(v)


class TokensTrustedTest(EnforceBase):
    """Design mode with the project trusted: its declared token file becomes writable."""
    trusted = True

    def test_design_trusted(self):
        self.run_table("design")
        self.check_write_bits("design")


ODD_NAMES = ["a\nb", "tab\there", "*", "?", "[x]", "**", " lead", "trail ", "-dash", ".dot",
             "...", "back\\slash", "caf\u00e9", os.fsdecode(b"bad\xff\xfeutf8"), "x" * 255]


class OddNamesTest(harness.MountCase):
    """Names with glob characters, control characters, invalid UTF-8 and maximal length are
    judged by where they are, and globs are anchored at the project root."""

    def test_design(self):
        os.makedirs(os.path.join(self.project, "src/docs/design"))
        v = self.mount("design")
        for n in ODD_NAMES:
            with self.subTest(name=n):
                p = v.path("docs/design/" + n)
                os.close(os.open(p, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
                self.assertTrue(os.path.lexists(os.path.join(self.project, "docs/design", n)))
                self.assertIn(n, os.listdir(v.path("docs/design")))
                os.rename(p, v.path("docs/design/renamed"))
                os.rename(v.path("docs/design/renamed"), p)
                os.unlink(p)
                before = harness.tree_hash(self.project)
                self.assertErrno(EACCES, os.open, v.path("src/" + n),
                                 os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644)
                self.assertErrno(EACCES, os.mkdir, v.path("docs/" + n))
                self.assertEqual(before, harness.tree_hash(self.project))
        # "docs/design/**" does not match src/docs/design/: anchored at the root.
        before = harness.tree_hash(self.project)
        self.assertErrno(EACCES, os.open, v.path("src/docs/design/x.md"),
                         os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644)
        self.assertEqual(before, harness.tree_hash(self.project))

    def test_build_protection_is_anchored(self):
        harness.write_tree(self.project, {"vendor/lib/.git/hooks/pre-commit": "x\n",
                                          "vendor/lib/.git/config": "y\n"})
        v = self.mount("build")
        # Only the project's own .git/hooks and .git/config are protected by default.
        _write_all(v.path("vendor/lib/.git/hooks/pre-commit"), b"changed\n")
        _write_all(v.path("vendor/lib/.git/config"), b"changed\n")
        before = harness.tree_hash(self.project)
        self.assertErrno(EACCES, _write_all, v.path(".git/hooks/pre-commit"), b"changed\n")
        self.assertErrno(EACCES, os.open, v.path(".git/hooks/" + ODD_NAMES[0]),
                         os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644)
        self.assertEqual(before, harness.tree_hash(self.project))


def _write_all(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


HIDE_TREE = dict(harness.STANDARD_TREE)
HIDE_TREE.update({
    ".env": "SECRET=1\n",
    "secrets/s.txt": "s\n",
    "src/k.key": "key\n",
    "docs/design/d.key": "key\n",
    ".piworkfs/modes/build.md": (
        "---\nname: build\ndescription: build, with secrets hidden\n"
        "hide:\n  - \".env\"\n  - \"secrets/\"\n  - \"**/*.key\"\n---\nSecrets are hidden.\n"),
    ".piworkfs/modes/design.md": (
        "---\nname: design\ndescription: design, with secrets hidden\n"
        "hide:\n  - \".env\"\n  - \"secrets/\"\n  - \"**/*.key\"\n---\nSecrets are hidden.\n"),
})
HIDDEN = [".env", "secrets", "secrets/s.txt", "src/k.key", "docs/design/d.key"]


class HiddenTest(harness.MountCase):
    """A project mode (untrusted) adds hide rules to build and design: hidden names answer
    ENOENT to every operation, are absent from listings, and cannot be created."""
    tree = HIDE_TREE

    def check_hidden(self, mode):
        v = self.mount(mode)
        V = v.path
        before = harness.tree_hash(self.project)
        for rel in HIDDEN:
            with self.subTest(mode=mode, path=rel):
                self.assertErrno(ENOENT, os.lstat, V(rel))
                self.assertErrno(ENOENT, os.stat, V(rel))
                self.assertErrno(ENOENT, os.open, V(rel), os.O_RDONLY | os.O_CLOEXEC)
                self.assertErrno(ENOENT, os.open, V(rel), os.O_WRONLY | os.O_CLOEXEC)
                self.assertErrno(ENOENT, os.unlink, V(rel))
                self.assertErrno(ENOENT, os.chmod, V(rel), 0o600)
                self.assertErrno(ENOENT, os.truncate, V(rel), 0)
                self.assertErrno(ENOENT, os.getxattr, V(rel), "user.x")
                self.assertErrno(ENOENT, os.rename, V(rel), V("docs/design/moved"))
                self.assertFalse(os.path.lexists(V(rel)))
        self.assertNotIn(".env", os.listdir(V("")))
        self.assertNotIn("secrets", os.listdir(V("")))
        self.assertNotIn("k.key", os.listdir(V("src")))
        self.assertNotIn("d.key", os.listdir(V("docs/design")))
        with os.scandir(V("")) as it:
            self.assertFalse({".env", "secrets"} & {e.name for e in it})
        # Not creatable, under any name a hide rule matches.
        # "secrets" names an existing hidden directory: creating a file, fifo, symlink or
        # link under that name must not answer EISDIR/EEXIST, which would reveal it (fixed
        # in ac21225). Where the mode refuses to make the name, the refusal is the one a
        # free name gets (EACCES in design outside docs/design), so refusals do not tell
        # which hidden names exist; where it would allow it, ENOENT (the name is taken).
        # Under "secrets/" or "docs/design/sub/" the kernel finds no parent: ENOENT.
        for rel in ["docs/design/new.key", "src/new.key", "docs/design/sub/x.key",
                    "secrets/new", ".env", "secrets"]:
            allowed_here = mode == "build" or rel.startswith(("docs/design/", "secrets/"))
            err = ENOENT if allowed_here else EACCES
            with self.subTest(mode=mode, create=rel):
                self.assertErrno(err, os.open, V(rel),
                                 os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644)
                self.assertErrno(err, os.mkdir, V(rel))
                self.assertErrno(err, os.symlink, "x", V(rel))
                self.assertErrno(err, os.link, V("docs/design/a.md"), V(rel))
                self.assertErrno(err, os.rename, V("docs/design/b.md"), V(rel))
                self.assertErrno(err, os.mkfifo, V(rel))
        self.assertEqual(before, harness.tree_hash(self.project))
        # Globs mean what they mean in .gitignore: ".env" (no slash) hides the name at any
        # depth; "secrets/" only directories, so a file of that name stays creatable.
        self.assertErrno(ENOENT, os.open, V("docs/design/sub/.env"),
                         os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644)
        for rel in ["docs/design/secrets"]:
            os.close(os.open(V(rel), os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
            os.unlink(V(rel))
        # Visible neighbours still work.
        with open(V("docs/design/a.md")) as f:
            self.assertEqual(f.read(), "# design a\n")
        self.assertIn("a.md", os.listdir(V("docs/design")))

    def test_hidden_in_build(self):
        self.check_hidden("build")

    def test_hidden_in_design(self):
        self.check_hidden("design")


KEY_TREE = dict(harness.STANDARD_TREE)
KEY_TREE[".piworkfs/modes/build.md"] = ("---\nname: build\ndescription: build, keys hidden\n"
                                       "hide:\n  - \"**/*.key\"\n---\nKeys are hidden.\n")


class HiddenListingTest(harness.MountCase):
    """Listings filtered of hidden names: nothing lost or repeated at the boundaries of the
    daemon's directory buffers, even when whole buffers hold only hidden names."""
    tree = KEY_TREE

    def listings(self, path):
        a = os.listdir(path)
        p = subprocess.run(["ls", "-f", path], capture_output=True, text=True, timeout=60)
        b = [n for n in p.stdout.split("\n") if n not in ("", ".", "..")]
        return a, b

    def test_mixed(self):
        d = os.path.join(self.project, "many")
        os.mkdir(d)
        names = [("%05d-" % i) + "n" * (i % 200) + (".key" if i % 3 == 0 else ".txt")
                 for i in range(4000)]
        for n in names:
            open(os.path.join(d, n), "w").close()
        v = self.mount("build")
        want = sorted(n for n in names if not n.endswith(".key"))
        for got in self.listings(v.path("many")):
            self.assertEqual(len(got), len(set(got)), "a name is listed twice")
            self.assertEqual(sorted(got), want)

    def test_buffers_of_hidden_names_only(self):
        d = os.path.join(self.project, "many")
        os.mkdir(d)
        for i in range(3000):
            open(os.path.join(d, ("%05d-" % i) + "k" * 240 + ".key"), "w").close()
        want = ["v%d.txt" % i for i in range(7)]
        for n in want:
            open(os.path.join(d, n), "w").close()
        v = self.mount("build")
        for got in self.listings(v.path("many")):
            self.assertEqual(sorted(got), want)


PRIVATE_TREE = dict(harness.STANDARD_TREE)
PRIVATE_TREE.update({
    "docs/private/p.txt": "p\n",
    ".piworkfs/modes/build.md": ("---\nname: build\ndescription: build, docs/private hidden\n"
                                 "hide:\n  - \"docs/private/\"\n  - \"docs/private/**\"\n"
                                 "---\nPrivate notes are hidden.\n"),
})


class HiddenRenameTest(harness.MountCase):
    """Moving a directory must neither reveal hidden content under a new name nor put
    content under a hidden name."""
    tree = PRIVATE_TREE

    def test_directory_moves_around_hidden_content(self):
        v = self.mount("build")
        self.assertNotIn("private", os.listdir(v.path("docs")))
        self.assert_refused_and_unchanged(v, [
            # docs holds hidden content: under the name docs2 it would show.
            (EACCES, os.rename, "docs", "docs2"),
            (EACCES, harness.renameat2, "docs", "src", harness.RENAME_EXCHANGE),
            # Onto, or beneath, the hidden name: it does not exist as far as the view goes.
            (ENOENT, os.rename, "src", "docs/private"),
            (ENOENT, os.rename, "src/a.c", "docs/private/a.c"),
            (ENOENT, os.rename, "docs/design", "docs/private"),
            (ENOENT, os.link, "src/a.c", "docs/private/l"),
        ])
        # Directories without hidden content still move.
        self.assert_moves(v, "src", "src2")


if __name__ == "__main__":
    unittest.main(verbosity=2)
