# SPDX-License-Identifier: MIT
"""Undo and redo round-trip any sequence of changes (issue 44, item 3).

Random sequences of changes go through a real view: create, overwrite, append, truncate,
write in the middle, chmod, utime, unlink, mkdir -p of nested directories (with files in
them), rmdir, rm -r, renames of files and of directories with their contents (into other
directories, over files, exchanges), symbolic links (dangling ones too), hard links, an
editor's atomic save, a file replaced by a directory and back; contents are text, binary
with NUL bytes and non-UTF-8 bytes. For each sequence: the backing tree's state before
(harness.tree_state: type, mode, owner, size, mtime, link count, content, symlink target,
xattrs), a checkpoint, the changes, the state after; then `piworkfs undo --all` must give
back exactly the state before, and `piworkfs redo` exactly the state after.

Reproducible: sequence I of a run with seed S draws every choice from random.Random of
"S:I", and starts from a tree of its own (a fresh directory seq-I, made through the view
before the checkpoint), so `--seed S --only I` replays it alone. A failure prints the seed,
the sequence, the changes it made and the paths that differ.

The suite runs a few sequences (PIWORKFS_UNDO_SEQUENCES, default 8). The long run, 1,000
sequences:

    meson devenv -C build -w . python3 tests/mount/test_undo_property.py --sequences 1000

(--seed S to repeat a run, --only I for one sequence of it, -v to print each sequence.)
"""

import argparse
import os
import random
import shutil
import stat
import sys
import time
import unittest

from harness import MountCase, renameat2, RENAME_EXCHANGE, tree_changes, tree_state

SEQUENCES = int(os.environ.get("PIWORKFS_UNDO_SEQUENCES", "8"))
SEED = os.environ.get("PIWORKFS_UNDO_SEED") or str(random.SystemRandom().randrange(1 << 32))
FIRST = 0
ONLY = None
VERBOSE = False
# A view serves this many sequences, then a fresh one takes over (the store and the
# daemon's tables stay small; a long run also crosses mounts).
PER_MOUNT = 50

NAMES = ["a", "b", "c.txt", "d.bin", "e e", "f\u00fc", "g.c", "h"]
FILE_MODES = [0o600, 0o644, 0o640, 0o755, 0o700]
DIR_MODES = [0o700, 0o755, 0o750]


def content(rng):
    """Text, binary with NUL bytes, or non-UTF-8 bytes; sometimes empty."""
    kind = rng.randrange(4)
    n = rng.choice([0, 1, 7, 100, 3000, 9000])
    if kind == 0:
        lines = [("line %d %s" % (i, rng.choice(["x", "yy", "zzz"]))) for i in range(n // 10)]
        return ("\n".join(lines) + ("\n" if rng.random() < 0.7 else "")).encode()
    if kind == 1:
        return bytes(rng.randrange(256) for _ in range(n))
    if kind == 2:
        return bytes(rng.choice([0x80, 0xc3, 0xff, 0xfe, 0x41, 0x0a]) for _ in range(n))
    return b"\0" * min(n, 50) + b"tail\n"


class Sequence:
    """One sequence's changes under TOP (a directory of the view), drawn from RNG."""

    def __init__(self, rng, top):
        self.rng = rng
        self.top = top
        self.log = []

    # -- what is there (through the view, sorted: the same choices every time) ---------

    def entries(self):
        """(files, dirs, links) under top, as view paths; dirs include top itself."""
        files, dirs, links = [], [self.top], []
        for dirpath, dirnames, filenames in os.walk(self.top):
            dirnames.sort()
            for name in sorted(dirnames + filenames):
                p = os.path.join(dirpath, name)
                st = os.lstat(p)
                if stat.S_ISLNK(st.st_mode):
                    links.append(p)
                elif stat.S_ISDIR(st.st_mode):
                    dirs.append(p)
                elif stat.S_ISREG(st.st_mode):
                    files.append(p)
        return files, dirs, links

    def rel(self, p):
        return os.path.relpath(p, self.top)

    def new_name(self, dirs):
        return os.path.join(self.rng.choice(dirs), self.rng.choice(NAMES))

    def write(self, p, data, mode="wb"):
        with open(p, mode) as f:
            f.write(data)

    # -- the changes ---------------------------------------------------------------------

    def step(self):
        files, dirs, links = self.entries()
        rng = self.rng
        ops = [self.op_create, self.op_mkdir_p, self.op_symlink]
        if files:
            ops += [self.op_overwrite, self.op_append, self.op_truncate, self.op_pwrite,
                    self.op_chmod, self.op_unlink, self.op_rename_file, self.op_link,
                    self.op_save, self.op_utime, self.op_file_to_dir]
        if len(dirs) > 1:
            ops += [self.op_rmdir, self.op_rm_r, self.op_rename_dir, self.op_chmod_dir,
                    self.op_dir_to_file]
        if links:
            ops += [self.op_unlink_link, self.op_rename_file]
        if len(files) + len(dirs) + len(links) > 2:
            ops += [self.op_exchange]
        op = rng.choice(ops)
        try:
            what = op(files, dirs, links)
        except OSError as e:
            what = "%s failed: %s" % (op.__name__, e)
        self.log.append(what)

    def op_create(self, files, dirs, links):
        p = self.new_name(dirs)
        data = content(self.rng)
        if os.path.lexists(p):
            return "create %s: exists" % self.rel(p)
        self.write(p, data)
        return "create %s (%d bytes)" % (self.rel(p), len(data))

    def op_overwrite(self, files, dirs, links):
        p = self.rng.choice(files)
        self.write(p, content(self.rng))
        return "overwrite %s" % self.rel(p)

    def op_append(self, files, dirs, links):
        p = self.rng.choice(files)
        self.write(p, content(self.rng), "ab")
        return "append %s" % self.rel(p)

    def op_truncate(self, files, dirs, links):
        p = self.rng.choice(files)
        n = self.rng.choice([0, 1, 10, 5000])
        os.truncate(p, n)
        return "truncate %s %d" % (self.rel(p), n)

    def op_pwrite(self, files, dirs, links):
        p = self.rng.choice(files)
        with open(p, "r+b") as f:
            f.seek(self.rng.randrange(64))
            f.write(content(self.rng)[:200] or b"\0")
        return "pwrite %s" % self.rel(p)

    def op_chmod(self, files, dirs, links):
        p = self.rng.choice(files)
        m = self.rng.choice(FILE_MODES)
        os.chmod(p, m)
        return "chmod %o %s" % (m, self.rel(p))

    def op_chmod_dir(self, files, dirs, links):
        p = self.rng.choice(dirs[1:])
        m = self.rng.choice(DIR_MODES)
        os.chmod(p, m)
        return "chmod %o %s/" % (m, self.rel(p))

    def op_utime(self, files, dirs, links):
        p = self.rng.choice(files + dirs[1:])
        t = self.rng.randrange(1, 2_000_000_000) * 1_000_000_000 + self.rng.randrange(10**9)
        os.utime(p, ns=(t, t))
        return "utime %s" % self.rel(p)

    def op_unlink(self, files, dirs, links):
        p = self.rng.choice(files)
        os.unlink(p)
        return "unlink %s" % self.rel(p)

    def op_unlink_link(self, files, dirs, links):
        p = self.rng.choice(links)
        os.unlink(p)
        return "unlink %s (symlink)" % self.rel(p)

    def op_mkdir_p(self, files, dirs, links):
        base = self.rng.choice(dirs)
        parts = [self.rng.choice(["n1", "n2", "n3", "d", "x y"])
                 for _ in range(self.rng.randrange(1, 4))]
        p = os.path.join(base, *parts)
        os.makedirs(p, exist_ok=True)
        what = "mkdir -p %s" % self.rel(p)
        if self.rng.random() < 0.7:
            f = os.path.join(p, self.rng.choice(NAMES))
            if not os.path.lexists(f):
                self.write(f, content(self.rng))
                what += " + file %s" % self.rel(f)
        return what

    def op_rmdir(self, files, dirs, links):
        p = self.rng.choice(dirs[1:])
        os.rmdir(p)
        return "rmdir %s" % self.rel(p)

    def op_rm_r(self, files, dirs, links):
        p = self.rng.choice(dirs[1:])
        shutil.rmtree(p)
        return "rm -r %s" % self.rel(p)

    def op_rename_file(self, files, dirs, links):
        p = self.rng.choice(files + links)
        q = self.new_name(dirs)
        if os.path.isdir(q) and not os.path.islink(q):
            return "rename %s over directory %s: skipped" % (self.rel(p), self.rel(q))
        os.rename(p, q)
        return "rename %s -> %s" % (self.rel(p), self.rel(q))

    def op_rename_dir(self, files, dirs, links):
        p = self.rng.choice(dirs[1:])
        targets = [d for d in dirs if d != p and not d.startswith(p + "/")]
        q = os.path.join(self.rng.choice(targets), self.rng.choice(NAMES + ["n1", "moved"]))
        if os.path.lexists(q) and not (os.path.isdir(q) and not os.path.islink(q)):
            return "rename dir %s over non-directory %s: skipped" % (self.rel(p), self.rel(q))
        os.rename(p, q)  # over an empty directory, or ENOTEMPTY
        return "rename dir %s -> %s" % (self.rel(p), self.rel(q))

    def op_exchange(self, files, dirs, links):
        pool = files + dirs[1:] + links
        a, b = self.rng.sample(pool, 2)
        if a.startswith(b + "/") or b.startswith(a + "/"):
            return "exchange %s %s: nested, skipped" % (self.rel(a), self.rel(b))
        renameat2(a, b, RENAME_EXCHANGE)
        return "exchange %s <-> %s" % (self.rel(a), self.rel(b))

    def op_symlink(self, files, dirs, links):
        p = self.new_name(dirs)
        target = self.rng.choice(["a", "../b", "c.txt", "nowhere/at/all", "n1/d.bin", "."])
        os.symlink(target, p)
        return "symlink %s -> %s" % (self.rel(p), target)

    def op_link(self, files, dirs, links):
        p = self.rng.choice(files)
        q = self.new_name(dirs)
        os.link(p, q)
        return "link %s %s" % (self.rel(p), self.rel(q))

    def op_save(self, files, dirs, links):
        """An editor's save: a temporary written, renamed over the file."""
        p = self.rng.choice(files)
        tmp = os.path.join(os.path.dirname(p), ".%s.swp" % os.path.basename(p))
        self.write(tmp, content(self.rng))
        os.chmod(tmp, self.rng.choice(FILE_MODES))
        os.rename(tmp, p)
        return "save %s" % self.rel(p)

    def op_file_to_dir(self, files, dirs, links):
        p = self.rng.choice(files)
        os.unlink(p)
        os.mkdir(p)
        if self.rng.random() < 0.5:
            self.write(os.path.join(p, "inside"), content(self.rng))
        return "file %s -> directory" % self.rel(p)

    def op_dir_to_file(self, files, dirs, links):
        p = self.rng.choice(dirs[1:])
        shutil.rmtree(p)
        self.write(p, content(self.rng))
        return "directory %s -> file" % self.rel(p)

    # -- the tree a sequence starts from --------------------------------------------------

    def populate(self):
        os.mkdir(self.top)
        for _ in range(self.rng.randrange(2, 5)):
            d = os.path.join(self.top, *[self.rng.choice(["n1", "n2", "lib", "src"])
                                         for _ in range(self.rng.randrange(1, 3))])
            os.makedirs(d, exist_ok=True)
        _, dirs, _ = self.entries()
        for _ in range(self.rng.randrange(3, 9)):
            p = self.new_name(dirs)
            if not os.path.lexists(p):
                self.write(p, content(self.rng))
                os.chmod(p, self.rng.choice(FILE_MODES))
        files, dirs, _ = self.entries()
        if self.rng.random() < 0.5 and files:
            q = self.new_name(dirs)
            if not os.path.lexists(q):
                os.symlink(os.path.relpath(self.rng.choice(files), os.path.dirname(q)), q)
        if self.rng.random() < 0.3 and files:
            q = self.new_name(dirs)
            if not os.path.lexists(q):
                os.link(self.rng.choice(files), q)


class UndoProperty(MountCase):
    tree = {"README.md": "# property\n"}

    def setUp(self):
        self.deadline = 150 + 20 * self.count()
        super().setUp()

    def count(self):
        return 1 if ONLY is not None else SEQUENCES

    def pw(self, *args):
        return self.pw_in_view(*args, check=False)

    def fresh_view(self):
        if getattr(self, "view", None):
            self.unmount(self.view)
        self.view = self.wait_answering(self.mount("build"))

    def rows(self, i):
        """The store's rows since sequence I's checkpoint (-v: the record under a failure)."""
        if not VERBOSE:
            return ""
        import sqlite3
        db = sqlite3.connect(self.state_db)
        try:
            first = db.execute("SELECT id FROM orig_changesets WHERE name = ?",
                               ("seq-%d" % i,)).fetchone()[0]
            rows = db.execute("SELECT id, changeset, action, path, path2, exchange, implicit, "
                              "present, printf('%o', mode), nlink, ino, src_ino, op "
                              "FROM orig_rows WHERE changeset >= ? ORDER BY id", (first,))
            return ("  rows:\n" + "".join("    %s\n" % (r,) for r in rows) +
                    "  daemon log:\n" + self.view.log()[-4000:])
        finally:
            db.close()

    def explain(self, seed, i, seq, what, want, got, out):
        return self.rows(i) + ("\nundo/redo property failed: %s\n  reproduce: meson devenv -C build -w . "
                "python3 tests/mount/test_undo_property.py --seed %s --first %d --sequences %d "
                "(or --only %d: alone in a fresh view)\n"
                "  changes of sequence %d:\n    %s\n  differences (path: expected -> found):"
                "\n    %s\n  output:\n%s\n%s" %
                (what, seed, self.batch, i - self.batch + 1, i, i, "\n    ".join(seq.log),
                 "\n    ".join(tree_changes(want, got, limit=40)), out,
                 self.pw("changes", "--since", "seq-%d" % i).stdout))

    def test_undo_and_redo_round_trip_random_changes(self):
        indices = [ONLY] if ONLY is not None else range(FIRST, FIRST + SEQUENCES)
        failures = []
        started = time.monotonic()
        for n, i in enumerate(indices):
            if n % PER_MOUNT == 0:
                self.fresh_view()
                self.batch = i
            failure = self.one_sequence(SEED, i)
            if failure:
                failures.append(failure)
                if len(failures) >= 3:
                    break
            if VERBOSE:
                print("sequence %d: %s" % (i, "FAILED" if failure else "ok"), file=sys.stderr)
        if VERBOSE or failures:
            print("undo property: seed %s, %d sequences, %d failed, %.0f s" %
                  (SEED, len(indices), len(failures), time.monotonic() - started),
                  file=sys.stderr)
        self.assertEqual(failures, [], "seed %s:%s" % (SEED, "".join(failures)))

    def one_sequence(self, seed, i):
        rng = random.Random("%s:%d" % (seed, i))
        top = self.view.path("seq-%d" % i)
        seq = Sequence(rng, top)
        seq.populate()
        before = tree_state(self.project)
        p = self.pw("checkpoint", "seq-%d" % i)
        if p.returncode:
            return self.explain(seed, i, seq, "checkpoint failed", before, before,
                                p.stdout + p.stderr)
        for _ in range(rng.randrange(1, 13)):
            seq.step()
        # A guaranteed change, so that the checkpoint's change set is the one undone.
        seq.write(os.path.join(top, "last-%d" % rng.randrange(1000)), content(rng), "ab")
        seq.log.append("append last-*")
        after = tree_state(self.project)
        p = self.pw("undo", "--all")
        out = "  $ piworkfs undo --all (exit %d)\n%s%s" % (p.returncode, p.stdout, p.stderr)
        got = tree_state(self.project)
        if p.returncode or p.stderr or got != before:
            return self.explain(seed, i, seq, "undo --all did not give the tree before",
                                before, got, out)
        p = self.pw("redo")
        out += "  $ piworkfs redo (exit %d)\n%s%s" % (p.returncode, p.stdout, p.stderr)
        got = tree_state(self.project)
        if p.returncode or p.stderr or got != after:
            return self.explain(seed, i, seq, "redo did not give the tree after", after, got,
                                out)
        # Out of the next sequence's way (a change set of its own, never undone here).
        shutil.rmtree(top)
        return None


def main():
    global SEQUENCES, SEED, FIRST, ONLY, VERBOSE
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sequences", type=int, default=SEQUENCES)
    ap.add_argument("--seed", default=SEED)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--only", type=int, default=None)
    ap.add_argument("-v", "--verbose", action="store_true")
    args, rest = ap.parse_known_args()
    SEQUENCES, SEED, ONLY, VERBOSE = args.sequences, args.seed, args.only, args.verbose
    FIRST = args.first
    print("undo property: seed %s" % SEED, file=sys.stderr)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
