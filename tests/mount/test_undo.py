# SPDX-License-Identifier: MIT
"""Originals and undo: every kind of change made through the view is put back by
`piworkfs undo --all`, byte for byte and metadata included (harness.tree_hash of the
backing tree before the change set equals the one after the undo); `diff` shows exactly
the change; retention prunes the oldest change sets first and never breaks a restore of
what remains; a daemon killed with SIGKILL in a storm of writes leaves every applied change
restorable; the agent socket may list changes but never undo them."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import unittest

from harness import (PIWORKFS, RENAME_EXCHANGE, MountCase, RpcClient, renameat2,  # noqa: E402
                     tree_changes, tree_hash, tree_state, wait_until)

TREE = {
    "README.md": "# demo\n",
    "src/main.c": "int main(void) { return 0; }\n",
    "src/util.c": "int util(void) { return 1; }\n",
    "src/lib/deep.c": "/* deep */\n",
    "notes/todo.txt": "one\ntwo\nthree\n",
    "bin/blob.bin": "\x00\x01\x02binary\x00",
}


class Undo(MountCase):
    tree = TREE

    def mount(self, *args, **kw):
        """A view whose control socket answers (a dead daemon's socket file, or one bound
        but not yet listening, would refuse the first command)."""
        v = super().mount(*args, **kw)

        return self.wait_answering(v)

    def pw(self, *args, check=True):
        return self.pw_in_view(*args, check=check)

    def checkpoint(self, name=None):
        self.pw("checkpoint", *([name] if name else []))

    def undo_all(self):
        p = self.pw("undo", "--all", "--json")
        res = json.loads(p.stdout)
        self.assertEqual(res["failed"], [], p.stdout)
        return res

    def roundtrip(self, change, cwd_in_view=True):
        """Checkpoint, CHANGE(view path), then undo --all: the backing tree is back."""
        v = self.mount("build")
        self.checkpoint()
        before = tree_hash(self.project)
        change(v.path())
        self.assertNotEqual(tree_hash(self.project), before, "the change changed nothing")
        self.undo_all()
        self.assertEqual(tree_hash(self.project), before, self.listing())
        return v

    def link_util_c(self):
        """src/util.c gets a second name, util-link.c, in the backing directory."""
        os.link(os.path.join(self.project, "src", "util.c"),
                os.path.join(self.project, "util-link.c"))

    def assert_util_c_linked(self):
        """src/util.c and util-link.c are one file again, with these two names only."""
        a = os.stat(os.path.join(self.project, "src", "util.c"))
        b = os.stat(os.path.join(self.project, "util-link.c"))
        self.assertEqual((a.st_ino, a.st_nlink), (b.st_ino, 2))

    def listing(self):
        return self.pw("changes", check=False).stdout + self.daemon_logs()

    # -- each kind of change -------------------------------------------------------------

    def test_rm_rf_tree(self):
        self.roundtrip(lambda root: self.run_tool(["rm", "-rf", "src"], cwd=root))

    def test_sed_in_place(self):
        self.roundtrip(lambda root: self.run_tool(["sed", "-i", "s/two/TWO/", "notes/todo.txt"],
                                                  cwd=root))

    def test_atomic_editor_save(self):
        def save(root):
            tmp = os.path.join(root, "src", ".main.c.swp")
            with open(tmp, "w") as f:
                f.write("int main(void) { return 42; }\n")
            os.chmod(tmp, 0o600)
            os.rename(tmp, os.path.join(root, "src", "main.c"))
        self.roundtrip(save)

    def test_chmod_and_truncate(self):
        def change(root):
            os.chmod(os.path.join(root, "README.md"), 0o600)
            os.truncate(os.path.join(root, "src", "util.c"), 3)
            os.utime(os.path.join(root, "notes", "todo.txt"), ns=(1, 2))
        self.roundtrip(change)

    def test_symlinks(self):
        os.symlink("src/main.c", os.path.join(self.project, "link"))

        def change(root):
            os.unlink(os.path.join(root, "link"))
            os.symlink("README.md", os.path.join(root, "link"))
            os.symlink("nowhere", os.path.join(root, "new-link"))
        self.roundtrip(change)

    def test_xattrs(self):
        os.setxattr(os.path.join(self.project, "README.md"), "user.tag", b"original")

        def change(root):
            os.setxattr(os.path.join(root, "README.md"), "user.tag", b"changed")
            os.setxattr(os.path.join(root, "src", "main.c"), "user.new", b"1")
        self.roundtrip(change)

    def test_hard_links(self):
        self.link_util_c()

        def change(root):
            # The view writes a linked file once it knows all its names (ops.c).
            os.stat(os.path.join(root, "src", "util.c"))
            os.stat(os.path.join(root, "util-link.c"))
            os.stat(os.path.join(root, "README.md"))
            with open(os.path.join(root, "util-link.c"), "a") as f:
                f.write("/* through the other name */\n")
            with open(os.path.join(root, "src", "util.c"), "a") as f:
                f.write("/* and this one */\n")
            os.link(os.path.join(root, "README.md"), os.path.join(root, "readme-link"))
        self.roundtrip(change)
        a = os.stat(os.path.join(self.project, "src", "util.c"))
        b = os.stat(os.path.join(self.project, "util-link.c"))
        self.assertEqual((a.st_dev, a.st_ino), (b.st_dev, b.st_ino), "still one file")

    # -- a removed file is kept as a blob of the store's own, never by a link ------------

    def blob_inodes(self):
        """{inode: hash} of the blobs in the store (beside the state database)."""
        d = os.path.join(os.path.dirname(self.state_db), "originals", "blobs")
        if not os.path.isdir(d):
            return {}
        return {os.stat(os.path.join(d, h)).st_ino: h for h in os.listdir(d)}

    def test_removed_file_is_kept_as_its_own_blob_and_restored_exactly(self):
        # The store is on the project's filesystem here: a file an unlink or a rename over
        # it removes is still kept as an inode of the store's own (a reflink or a copy), so
        # nothing that still reaches the removed inode can change the kept original (issue
        # 35, finding 5); undo gives it back byte for byte, metadata included.
        os.setxattr(os.path.join(self.project, "README.md"), "user.tag", b"kept")
        os.chmod(os.path.join(self.project, "notes", "todo.txt"), 0o640)
        os.utime(os.path.join(self.project, "notes", "todo.txt"), ns=(1000, 2000))
        # Held open (read only, outside the view) so their inode numbers stay theirs.
        held = [os.open(os.path.join(self.project, p), os.O_RDONLY)
                for p in ("README.md", "notes/todo.txt", "src/main.c")]
        for fd in held:
            self.addCleanup(os.close, fd)
        ino = dict(zip(("README.md", "notes/todo.txt", "src/main.c"),
                       (os.fstat(fd).st_ino for fd in held)))

        def change(root):
            os.unlink(os.path.join(root, "README.md"))
            os.rename(os.path.join(root, "src", "util.c"), os.path.join(root, "notes", "todo.txt"))
            with open(os.path.join(root, "src", "main.c"), "a") as f:
                f.write("/* in place */\n")
            blobs = self.blob_inodes()
            self.assertEqual(len(blobs), 3, blobs)
            for p in ino:
                self.assertNotIn(ino[p], blobs, p)
        self.roundtrip(change)
        self.assertEqual(os.getxattr(os.path.join(self.project, "README.md"), "user.tag"), b"kept")

    def test_a_file_with_another_name_or_a_writer_is_copied(self):
        self.link_util_c()
        ino = {p: os.stat(os.path.join(self.project, p)).st_ino
               for p in ("src/util.c", "notes/todo.txt")}

        def change(root):
            os.stat(os.path.join(root, "util-link.c"))
            os.unlink(os.path.join(root, "src", "util.c"))  # its other name lives on
            # Open for writing through the view when removed: written on after.
            with open(os.path.join(root, "notes", "todo.txt"), "r+") as f:
                os.unlink(os.path.join(root, "notes", "todo.txt"))
                f.write("written after the unlink\n")
            blobs = self.blob_inodes()
            self.assertNotIn(ino["src/util.c"], blobs)
            self.assertNotIn(ino["notes/todo.txt"], blobs)
        v = self.mount("build")
        self.checkpoint()
        change(v.path())
        self.undo_all()
        for p in ("src/util.c", "notes/todo.txt"):
            with open(os.path.join(self.project, p)) as f:
                self.assertEqual(f.read(), TREE[p])

    def test_unlink_of_one_name_is_undone_as_a_hard_link(self):
        # The inode lives on under its other name, unchanged: undo gives the removed name
        # back as a link to it (tree_hash counts links), not as an independent copy.
        self.link_util_c()
        self.roundtrip(lambda root: os.unlink(os.path.join(root, "src", "util.c")))
        self.assert_util_c_linked()

    def test_unlink_then_a_write_through_the_other_name_is_undone_as_a_hard_link(self):
        # The other name's content is put back by its own row, after or before the removed
        # name's: the link is made once both are back.
        self.link_util_c()

        def change(root):
            os.stat(os.path.join(root, "util-link.c"))
            os.unlink(os.path.join(root, "src", "util.c"))
            with open(os.path.join(root, "util-link.c"), "a") as f:
                f.write("/* after the unlink */\n")
        self.roundtrip(change)
        self.assert_util_c_linked()

    def test_other_name_changed_outside_stays_an_independent_copy(self):
        # The surviving inode no longer holds the original: linking to it would give the
        # removed name content it never had.
        self.link_util_c()
        v = self.mount("build")
        self.checkpoint()
        os.unlink(v.path("src/util.c"))
        with open(os.path.join(self.project, "util-link.c"), "a") as f:
            f.write("/* outside the view */\n")
        self.undo_all()
        with open(os.path.join(self.project, "src", "util.c")) as f:
            self.assertEqual(f.read(), TREE["src/util.c"])
        a = os.stat(os.path.join(self.project, "src", "util.c"))
        b = os.stat(os.path.join(self.project, "util-link.c"))
        self.assertNotEqual(a.st_ino, b.st_ino)

    # -- a new name for a file that was there: a change through it is a change to the file

    def link_roundtrip(self, change, changed="src/util.c"):
        """ln src/util.c tmp-link through the view, then CHANGE(view root): undo --all
        gives the tree back (the file's content, metadata and single link), and diff shows
        the change under CHANGED, the file's own name."""
        diffs = {}

        def run(root):
            os.link(os.path.join(root, "src", "util.c"), os.path.join(root, "tmp-link"))
            change(root)
            res = json.loads(self.pw("diff", "--json").stdout)
            diffs.update({f["path"]: f for f in res["files"]})
        self.roundtrip(run)
        self.assertIn(changed, diffs, diffs)
        self.assertEqual(os.stat(os.path.join(self.project, "src", "util.c")).st_nlink, 1)
        self.assertFalse(os.path.lexists(os.path.join(self.project, "tmp-link")))
        return diffs

    def test_write_through_a_new_link_is_undone(self):
        def write(root):
            with open(os.path.join(root, "tmp-link"), "a") as f:
                f.write("/* through the new link */\n")
        d = self.link_roundtrip(write)
        self.assertEqual(d["src/util.c"]["kind"], "modified", d)
        self.assertIn("+/* through the new link */\n", d["src/util.c"]["diff"], d)
        self.assertEqual(d["tmp-link"]["kind"], "created", d)

    def test_write_through_the_old_name_after_a_new_link_is_undone(self):
        # The view names a file by the name it learnt last (the link): the write comes
        # through the new link as far as the originals are concerned.
        def write(root):
            with open(os.path.join(root, "src", "util.c"), "w") as f:
                f.write("replaced\n")
        d = self.link_roundtrip(write)
        self.assertIn("+replaced\n", d["src/util.c"]["diff"], d)

    def test_truncate_through_a_new_link_is_undone(self):
        d = self.link_roundtrip(lambda root: os.truncate(os.path.join(root, "tmp-link"), 3))
        self.assertEqual(d["src/util.c"]["kind"], "modified", d)

    def test_chmod_and_xattr_through_a_new_link_are_undone(self):
        def change(root):
            os.chmod(os.path.join(root, "tmp-link"), 0o600)
            os.setxattr(os.path.join(root, "tmp-link"), "user.tag", b"new")
        self.link_roundtrip(change)

    def test_link_then_unlink_of_the_old_name_then_write_is_undone(self):
        def change(root):
            os.unlink(os.path.join(root, "src", "util.c"))
            with open(os.path.join(root, "tmp-link"), "a") as f:
                f.write("/* after the old name went */\n")
        d = self.link_roundtrip(change)
        self.assertEqual(d["src/util.c"]["kind"], "deleted", d)

    def test_link_then_write_then_unlink_of_the_old_name_is_undone(self):
        def change(root):
            with open(os.path.join(root, "tmp-link"), "a") as f:
                f.write("/* before the old name went */\n")
            os.unlink(os.path.join(root, "src", "util.c"))
        d = self.link_roundtrip(change)
        self.assertEqual(d["src/util.c"]["kind"], "deleted", d)

    def test_write_through_a_renamed_new_link_is_undone(self):
        # A link the change set made, renamed: still a name of the file that was there.
        def change(root):
            os.rename(os.path.join(root, "tmp-link"), os.path.join(root, "notes", "moved"))
            with open(os.path.join(root, "notes", "moved"), "a") as f:
                f.write("/* through the moved link */\n")
        d = self.link_roundtrip(change)
        self.assertIn("+/* through the moved link */\n", d["src/util.c"]["diff"], d)

    def test_write_through_a_link_where_a_removed_file_was_is_undone(self):
        # The name was recorded already (its own original, removed): the link makes it a
        # name of another file, whose original a write through it must keep.
        def change(root):
            os.unlink(os.path.join(root, "notes", "todo.txt"))
            os.link(os.path.join(root, "src", "util.c"), os.path.join(root, "notes", "todo.txt"))
            with open(os.path.join(root, "notes", "todo.txt"), "a") as f:
                f.write("/* through the reused name */\n")
        self.roundtrip(change)
        self.assertEqual(os.stat(os.path.join(self.project, "src", "util.c")).st_nlink, 1)

    def test_a_new_link_renamed_over_a_file_then_written_is_undone(self):
        def change(root):
            os.link(os.path.join(root, "src", "util.c"), os.path.join(root, "tmp-link"))
            os.rename(os.path.join(root, "tmp-link"), os.path.join(root, "notes", "todo.txt"))
            with open(os.path.join(root, "notes", "todo.txt"), "a") as f:
                f.write("/* through the link moved over a file */\n")
        self.roundtrip(change)
        self.assertEqual(os.stat(os.path.join(self.project, "src", "util.c")).st_nlink, 1)

    def roundtrip_linked_over_todo(self, then):
        """src/util.c, linked as util-link.c in the backing, is renamed over notes/todo.txt
        through the view (the link looked up first), then THEN(path of notes/todo.txt); the
        round trip of that change (roundtrip)."""
        self.link_util_c()

        def change(root):
            os.stat(os.path.join(root, "util-link.c"))
            os.rename(os.path.join(root, "src", "util.c"), os.path.join(root, "notes", "todo.txt"))
            then(os.path.join(root, "notes", "todo.txt"))
        self.roundtrip(change)

    def test_a_linked_file_renamed_over_another_then_written_is_undone(self):
        # Two rows for notes/todo.txt: the file renamed over it (kept by the rename) and,
        # after, the linked file written there. The older one is what undo leaves there,
        # never a hard link to the linked file.
        def then(todo):
            with open(todo, "a") as f:
                f.write("/* moved, then written */\n")
        self.roundtrip_linked_over_todo(then)

    def test_a_linked_file_renamed_over_another_then_removed_is_undone_as_a_link(self):
        # The removed name is restored as a copy, which the rename's undo moves back: the
        # link to the other name is made where the copy ends up.
        self.roundtrip_linked_over_todo(os.unlink)
        self.assert_util_c_linked()

    def test_write_through_a_new_link_finds_names_the_view_forgot(self):
        # The view remembers 8 names of a file: after 8 new links it no longer knows
        # src/util.c. A mode that writes everything lets a write through the last link
        # pass (build mode refuses a file with names it does not know), and the file's
        # original is then kept under the name the walk of the tree finds.
        modes = os.path.join(self.config_home, "piworkfs", "modes")
        os.makedirs(modes)
        with open(os.path.join(modes, "open.md"), "w") as f:
            f.write("---\nname: open\ndescription: writes everything, keeps originals\n"
                    "writes:\n  allow:\n    - \"**\"\nprotect: false\n"
                    "keep_originals: true\n---\nEverything.\n")
        v = self.mount("open")
        self.checkpoint()
        before = tree_hash(self.project)
        root = v.path()
        for i in range(8):
            os.link(os.path.join(root, "src", "util.c"), os.path.join(root, "l%d" % i))
        with open(os.path.join(root, "l7"), "a") as f:
            f.write("/* through the ninth name */\n")
        self.assertEqual(os.stat(os.path.join(self.project, "src", "util.c")).st_nlink, 9)
        self.undo_all()
        self.assertEqual(tree_hash(self.project), before, self.listing())

    def test_write_through_the_new_name_of_a_renamed_file_is_undone(self):
        def change(root):
            os.rename(os.path.join(root, "src", "util.c"), os.path.join(root, "u2.c"))
            with open(os.path.join(root, "u2.c"), "a") as f:
                f.write("/* renamed, then written */\n")
            res = json.loads(self.pw("diff", "--json").stdout)
            by = {f["path"]: f for f in res["files"]}
            self.assertIn("+/* renamed, then written */\n", by["u2.c"]["diff"], res)
        self.roundtrip(change)

    def test_link_of_a_file_the_change_set_made_keeps_nothing(self):
        # A new file linked and written through the link: nothing was there, nothing kept.
        v = self.mount("build")
        self.checkpoint()
        before = tree_hash(self.project)
        blobs = set(self.blob_inodes().values())
        root = v.path()
        with open(os.path.join(root, "new.c"), "w") as f:
            f.write("new\n")
        os.link(os.path.join(root, "new.c"), os.path.join(root, "new-link.c"))
        with open(os.path.join(root, "new-link.c"), "a") as f:
            f.write("more\n")
        os.chmod(os.path.join(root, "new.c"), 0o600)
        res = json.loads(self.pw("changes", "--json").stdout)
        kinds = {(c["path"], c["kind"]) for cs in res["changesets"] for c in cs["changes"]}
        self.assertEqual(kinds, {("new.c", "created"), ("new-link.c", "created")}, res)
        self.assertEqual(set(self.blob_inodes().values()), blobs)
        self.undo_all()
        self.assertEqual(tree_hash(self.project), before, self.listing())

    # -- names the change set made: their records may follow the change -----------------

    def test_created_names_are_listed_at_once_and_survive_a_clean_unmount(self):
        v = self.mount("build")
        self.checkpoint()
        before = tree_hash(self.project)
        root = v.path()
        os.mkdir(os.path.join(root, "made"))
        for i in range(20):
            with open(os.path.join(root, "made", "f%d" % i), "w") as f:
                f.write("x")
        os.rename(os.path.join(root, "made", "f0"), os.path.join(root, "made", "g0"))
        os.rename(os.path.join(root, "made", "g0"), os.path.join(root, "src", "g0"))
        os.makedirs(os.path.join(root, "tmpdir", "sub"))
        os.rmdir(os.path.join(root, "tmpdir", "sub"))
        os.rmdir(os.path.join(root, "tmpdir"))
        # A directory the change set made, holding an original moved in and removed there:
        # its removal is recorded, so undo can put the original back through it.
        os.mkdir(os.path.join(root, "box"))
        os.rename(os.path.join(root, "README.md"), os.path.join(root, "box", "R"))
        os.unlink(os.path.join(root, "box", "R"))
        os.rmdir(os.path.join(root, "box"))
        # Listed right away (the deferred records are committed before a read) ...
        res = json.loads(self.pw("changes", "--json").stdout)
        paths = {c["path"] for cs in res["changesets"] for c in cs["changes"]}
        self.assertIn("made/f7", paths, res)
        # ... and committed at unmount: a new daemon undoes them all.
        self.unmount(v)
        self.mount("build")
        self.pw("undo", "--all", "--since", "1970-01-01", "--json")
        self.assertEqual(tree_hash(self.project), before, self.listing())

    def test_a_removal_that_fails_leaves_no_second_name(self):
        # rename(2) with RENAME_NOREPLACE over an existing file fails after the original
        # of the destination was kept: the link goes with the row, so the file keeps one
        # name (a second one would make the view refuse writes to it as a hard link).
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        v = self.mount("build")
        dst = v.path("notes/todo.txt")
        rc = libc.renameat2(-100, v.path("src/util.c").encode(), -100, dst.encode(), 1)
        self.assertEqual((rc, ctypes.get_errno()), (-1, 17))
        st = os.stat(os.path.join(self.project, "notes", "todo.txt"))
        self.assertEqual(st.st_nlink, 1)
        self.assertNotIn(st.st_ino, self.blob_inodes())
        with open(dst, "a") as f:
            f.write("still writable\n")

    def test_a_kept_file_written_afterwards_is_still_restored_whole(self):
        # A process outside the view holds the file open for writing when the view removes
        # it, and writes on (the agent's stand-in for a writer the view cannot see, issue
        # 35 finding 5): the kept original is the store's own inode, so undo brings back
        # the file exactly as it was removed.
        v = self.mount("build")
        self.checkpoint()
        with open(os.path.join(self.project, "notes", "todo.txt")) as f:
            before = f.read()
        outside = open(os.path.join(self.project, "notes", "todo.txt"), "r+")
        self.addCleanup(outside.close)
        os.unlink(v.path("notes/todo.txt"))
        outside.truncate(0)
        outside.write("changed after the unlink\n")
        outside.flush()
        self.undo_all()
        with open(os.path.join(self.project, "notes", "todo.txt")) as f:
            self.assertEqual(f.read(), before)

    def test_git_checkout_over_modified_and_untracked(self):
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
        self.run_tool(git + ["init", "-q"], cwd=self.project)
        self.run_tool(git + ["add", "-A"], cwd=self.project)
        self.run_tool(git + ["commit", "-qm", "one"], cwd=self.project)
        self.run_tool(git + ["checkout", "-qb", "other"], cwd=self.project)
        with open(os.path.join(self.project, "src", "main.c"), "w") as f:
            f.write("int main(void) { return 7; }\n")
        os.unlink(os.path.join(self.project, "notes", "todo.txt"))
        self.run_tool(git + ["commit", "-qam", "two"], cwd=self.project)
        self.run_tool(git + ["checkout", "-q", "main"], cwd=self.project)
        # Uncommitted work: a modified tracked file and an untracked one.
        with open(os.path.join(self.project, "src", "util.c"), "a") as f:
            f.write("/* local edit */\n")
        with open(os.path.join(self.project, "untracked.txt"), "w") as f:
            f.write("mine\n")

        def change(root):
            self.run_tool(git + ["checkout", "-qf", "other"], cwd=root)
            self.run_tool(git + ["clean", "-qfdx"], cwd=root)
        self.roundtrip(change)

    # -- changes and diff ----------------------------------------------------------------

    def test_changes_and_diff_show_exactly_the_change(self):
        v = self.mount("build")
        self.checkpoint("start")
        root = v.path()
        self.run_tool(["sed", "-i", "s/two/TWO/", "notes/todo.txt"], cwd=root)
        with open(os.path.join(root, "new.txt"), "w") as f:
            f.write("fresh\n")
        os.unlink(os.path.join(root, "README.md"))
        os.rename(os.path.join(root, "src", "util.c"), os.path.join(root, "src", "u.c"))
        res = json.loads(self.pw("changes", "--since", "start", "--json").stdout)
        kinds = {(c["path"], c["kind"], c.get("to")) for s in res["changesets"]
                 for c in s["changes"]}
        self.assertIn(("notes/todo.txt", "modified", None), kinds)
        self.assertIn(("new.txt", "created", None), kinds)
        self.assertIn(("README.md", "deleted", None), kinds)
        self.assertIn(("src/util.c", "renamed", "src/u.c"), kinds)
        for s in res["changesets"]:
            for c in s["changes"]:
                self.assertEqual(c["mode"], "build")
                self.assertTrue(c["pid"] > 0)
        d = self.pw("diff", v.path("notes/todo.txt")).stdout
        self.assertEqual(d, "diff --git a/notes/todo.txt b/notes/todo.txt\n"
                            "--- a/notes/todo.txt\n+++ b/notes/todo.txt\n"
                            "@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n")
        st = json.loads(self.pw("diff", "--stat", "--json").stdout)
        by = {f["path"]: f for f in st["files"]}
        self.assertEqual((by["notes/todo.txt"]["added"], by["notes/todo.txt"]["removed"]), (1, 1))
        self.assertEqual(by["new.txt"]["kind"], "created")

    def test_diff_of_a_file_replaced_by_a_fifo_does_not_wait_for_a_writer(self):
        # The agent may leave a FIFO where a file was: diff reports the change, and never
        # opens it for reading (that would wait for a writer that never comes).
        v = self.mount("build")
        self.checkpoint()
        os.unlink(v.path("notes/todo.txt"))
        os.mkfifo(v.path("notes/todo.txt"))
        res = json.loads(self.pw("diff", "--json").stdout)
        kinds = {f["path"]: f["kind"] for f in res["files"]}
        self.assertEqual(kinds.get("notes/todo.txt"), "modified", res)

    def test_binary_diff_is_summarised(self):
        v = self.mount("build")
        self.checkpoint()
        with open(v.path("bin/blob.bin"), "ab") as f:
            f.write(b"\x00more")
        files = json.loads(self.pw("diff", "--json").stdout)["files"]
        self.assertEqual(len(files), 1, files)
        self.assertTrue(files[0]["binary"])

    # -- undo of undo, conflicts, authority ----------------------------------------------

    def test_undo_is_recorded_and_can_be_undone(self):
        v = self.mount("build")
        self.checkpoint()
        with open(v.path("README.md"), "w") as f:
            f.write("changed\n")
        after = tree_hash(self.project)
        self.undo_all()
        self.assertEqual(open(os.path.join(self.project, "README.md")).read(), "# demo\n")
        # a second undo never re-applies the change (issue 29): redo does
        self.assertEqual(self.pw("undo", "--all").stdout, "nothing to undo\n")
        self.assertEqual(open(os.path.join(self.project, "README.md")).read(), "# demo\n")
        self.pw("redo")
        self.assertEqual(tree_hash(self.project), after)

    def undo_redo_roundtrip(self, change, after_undo=lambda: None):
        """Checkpoint, CHANGE(view path); undo --all gives the tree before, redo the tree
        after, each byte for byte (tree_state), through the commands as typed."""
        v = self.mount("build")
        self.checkpoint("c")
        before = tree_state(self.project)
        change(v.path())
        after = tree_state(self.project)
        p = self.pw("undo", "--all", check=False)
        self.assertEqual((p.returncode, p.stderr), (0, ""), p.stdout + self.listing())
        self.assertEqual(tree_changes(before, tree_state(self.project)), [], p.stdout)
        after_undo()
        p = self.pw("redo", check=False)
        self.assertEqual((p.returncode, p.stderr), (0, ""), p.stdout + self.listing())
        self.assertEqual(tree_changes(after, tree_state(self.project)), [], p.stdout)
        return v

    def test_redo_makes_new_directories_before_what_goes_back_into_them(self):
        # issue 44, item 3: redo said done, then "restore n1/n2/n3/f.txt: No such file"
        def change(root):
            os.makedirs(os.path.join(root, "n1", "n2", "n3"))
            with open(os.path.join(root, "n1", "n2", "n3", "f.txt"), "w") as f:
                f.write("f\n")
        self.undo_redo_roundtrip(change)
        self.assertIn("nothing to redo", self.pw("redo", check=False).stderr)

    def test_redo_of_an_exchange_and_of_a_directory_renamed_with_its_contents(self):
        # undo recorded its own exchange as a rename, and a directory's times by a path
        # the directory left
        def change(root):
            renameat2(os.path.join(root, "src", "lib"), os.path.join(root, "README.md"),
                      RENAME_EXCHANGE)
            with open(os.path.join(root, "notes", "new.txt"), "w") as f:
                f.write("new\n")
            os.rename(os.path.join(root, "notes"), os.path.join(root, "moved"))
        self.undo_redo_roundtrip(change)

    def put(self, rel, data=b"", mode=0o644, symlink=None):
        """A file (or a symbolic link to SYMLINK) in the backing tree, before the view."""
        path = os.path.join(self.project, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if symlink is not None:
            os.symlink(symlink, path)
            return
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)

    def test_redo_after_an_exchange_whose_side_is_removed_then_remade_by_undo(self):
        # issue 44, item 3 (property seed 4277824018, sequence 444): undo recreated the
        # symbolic link, then exchanged it back to lib/h; the exchange changed its ctime,
        # but only the other side was marked as the view's, so redo refused lib/h as
        # "changed outside the view"
        self.put("n2/e e", b"e e e\n")
        self.put("n2/g.c", b"g" * 100, 0o700)
        self.put("n2/n2/f\u00fc", bytes(range(100)), 0o755)
        self.put("lib/h", symlink="../n2/g.c")

        def change(root):
            os.unlink(os.path.join(root, "n2", "e e"))
            renameat2(os.path.join(root, "n2", "n2", "f\u00fc"), os.path.join(root, "lib", "h"),
                      RENAME_EXCHANGE)
            with open(os.path.join(root, "n2", "g.c"), "ab") as f:
                f.write(b"more\n")
            shutil.rmtree(os.path.join(root, "n2"))
            with open(os.path.join(root, "lib", "h"), "wb") as f:
                f.write(b"\0overwritten\xff")
            os.unlink(os.path.join(root, "lib", "h"))
            os.symlink("nowhere/at/all", os.path.join(root, "f\u00fc"))
            os.chmod(os.path.join(root, "lib"), 0o700)
            with open(os.path.join(root, "last"), "ab") as f:
                f.write(b"last\n")
        self.undo_redo_roundtrip(change)

    def test_redo_after_an_exchange_into_a_renamed_directory_then_more_renames(self):
        # issue 44, item 3 (property seed 4277824018, sequence 479): the same, the exchanged
        # link's directory renamed first, the other side's directory replaced by a file
        self.put("n1/g.c", symlink="target")
        self.put("n2/b", b"bbbbbbb", 0o755)
        self.put("n2/f\u00fc", b"\x80\xc3" * 27 + b"\n", 0o600)
        self.put("b", b"bbbb\n", 0o600)

        def change(root):
            os.rename(os.path.join(root, "n1"), os.path.join(root, "e e"))
            renameat2(os.path.join(root, "n2", "f\u00fc"), os.path.join(root, "e e", "g.c"),
                      RENAME_EXCHANGE)
            shutil.rmtree(os.path.join(root, "n2"))
            with open(os.path.join(root, "n2"), "wb") as f:
                f.write(b"now a file\n")
            os.link(os.path.join(root, "n2"), os.path.join(root, "e e", "f\u00fc"))
            os.rename(os.path.join(root, "n2"), os.path.join(root, "e e", "d.bin"))
            os.chmod(os.path.join(root, "e e"), 0o700)
            os.truncate(os.path.join(root, "b"), 10)
            with open(os.path.join(root, "last"), "ab") as f:
                f.write(b"last\n")
        self.undo_redo_roundtrip(change)

    def test_undo_waits_for_a_daemon_slower_than_a_quick_call(self):
        # issue 44 (property seed 4277824018, sequences 997 and 998, 5,000 change sets on a
        # loaded machine): undo gave up on its call after 10 s, printed "the view's daemon
        # does not answer" and exited 4, while the daemon went on and undid the changes.
        # The daemon is held stopped past those 10 s once the command waits for its answer:
        # time is what this test is about, so it waits it out (once, 12 s).
        v = self.mount("build")
        self.checkpoint("slow")
        with open(v.path("slow.txt"), "w") as f:
            f.write("made in the view\n")
        os.kill(v.pid, signal.SIGSTOP)
        self.addCleanup(os.kill, v.pid, signal.SIGCONT)
        cmd = subprocess.Popen([PIWORKFS, "undo", "--all", "--mount", v.mp], cwd=self.cwd,
                               env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        self.addCleanup(lambda: cmd.poll() is None and cmd.kill())

        def waits_for_the_answer():  # in poll(2) or ppoll(2) on the control socket
            try:
                with open("/proc/%d/syscall" % cmd.pid) as f:
                    return f.read().split()[0] in ("7", "271")
            except (OSError, IndexError):
                return False
        self.assertTrue(wait_until(waits_for_the_answer, 60), "undo never sent its call")
        self.assertIsNone(cmd.poll())
        try:
            out, err = cmd.communicate(timeout=12)
            self.fail("undo gave up on a daemon that was only slow: exit %d\n%s%s" %
                      (cmd.returncode, out, err))
        except subprocess.TimeoutExpired:
            pass
        os.kill(v.pid, signal.SIGCONT)
        out, err = cmd.communicate(timeout=120)
        self.assertEqual((cmd.returncode, err), (0, ""), out)
        self.assertFalse(os.path.exists(os.path.join(self.project, "slow.txt")))

    def test_redo_after_a_file_moved_into_a_directory_that_became_a_file(self):
        # issue 44, item 3 (property seed 4277824018, sequence 714): undo recorded the
        # move back of lib/g.c although the object was gone with its directory (now a
        # file), so redo moved "it" into that file: "move-back lib/g.c: Not a directory"
        self.put("lib/b", b"b\n")
        os.makedirs(os.path.join(self.project, "lib", "n1"))

        def change(root):
            lib = os.path.join(root, "lib")
            with open(os.path.join(lib, "g.c"), "wb") as f:
                f.write(b"g.c g.c")
            os.makedirs(os.path.join(lib, "n1", "d", "d"))
            with open(os.path.join(lib, "n1", "d", "d", "g.c"), "wb") as f:
                f.write(b"inner\n")
            os.rename(os.path.join(lib, "g.c"), os.path.join(lib, "n1", "d", "d", "d.bin"))
            shutil.rmtree(os.path.join(lib, "n1", "d", "d"))
            with open(os.path.join(lib, "n1", "d", "d"), "wb") as f:
                f.write(b"now a file\n")
        self.undo_redo_roundtrip(change)

    def test_redo_after_an_exchange_of_a_directory_with_a_link_then_removed(self):
        # issue 44, item 3 (property seed 4277824018, sequence 198): a directory exchanged
        # with a symbolic link, which is then removed; undo remakes the link and exchanges
        # it back into src/a
        self.put("g.c", b"", 0o640)
        self.put("n2/g.c", b"\n", 0o700)
        os.makedirs(os.path.join(self.project, "n2", "n1"))
        self.put("src/a", symlink="../n2/g.c")

        def change(root):
            g = os.path.join(root, "g.c")
            with open(g, "ab") as f:
                f.write(b"one\n")
            with open(g + ".tmp", "wb") as f:  # an editor's save
                f.write(b"saved\n")
            os.rename(g + ".tmp", g)
            with open(g, "ab") as f:
                f.write(b"two\n")
            os.chmod(g, 0o755)
            os.chmod(os.path.join(root, "n2"), 0o700)
            renameat2(os.path.join(root, "n2"), os.path.join(root, "src", "a"), RENAME_EXCHANGE)
            os.makedirs(os.path.join(root, "src", "n2", "n3", "n2"))
            with open(os.path.join(root, "src", "n2", "n3", "n2", "g.c"), "wb") as f:
                f.write(b"deep\n")
            os.unlink(os.path.join(root, "n2"))
            with open(os.path.join(root, "last"), "ab") as f:
                f.write(b"last\n")
        self.undo_redo_roundtrip(change)

    def test_undo_links_the_names_of_a_hard_link_again_when_every_name_went(self):
        os.link(os.path.join(self.project, "src", "util.c"),
                os.path.join(self.project, "notes", "util-link.c"))

        def change(root):
            for rel in ("src/util.c", "notes/util-link.c"):
                os.stat(os.path.join(root, rel))  # the view writes links it knows whole
            os.chmod(os.path.join(root, "src", "util.c"), 0o600)
            os.unlink(os.path.join(root, "src", "util.c"))
            shutil.rmtree(os.path.join(root, "notes"))
        def linked():
            a = os.stat(os.path.join(self.project, "src", "util.c"))
            b = os.stat(os.path.join(self.project, "notes", "util-link.c"))
            self.assertEqual((a.st_ino, a.st_nlink), (b.st_ino, 2))
        self.undo_redo_roundtrip(change, linked)

    def test_undo_of_a_rename_into_a_directory_that_became_a_file(self):
        # the move back found "Not a directory" and failed the undo (exit 5)
        def change(root):
            os.makedirs(os.path.join(root, "d", "n2"))
            with open(os.path.join(root, "d", "n2", "g"), "w") as f:
                f.write("g\n")
            os.rename(os.path.join(root, "d", "n2", "g"), os.path.join(root, "d", "b"))
            shutil.rmtree(os.path.join(root, "d"))
            with open(os.path.join(root, "d"), "w") as f:
                f.write("now a file\n")
        self.undo_redo_roundtrip(change)

    def test_changed_outside_the_view_is_refused_unless_forced(self):
        v = self.mount("build")
        self.checkpoint()
        with open(v.path("README.md"), "w") as f:
            f.write("through the view\n")
        with open(os.path.join(self.project, "README.md"), "w") as f:
            f.write("outside\n")
        p = self.pw("undo", "--all", check=False)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("README.md", p.stderr)
        self.assertEqual(open(os.path.join(self.project, "README.md")).read(), "outside\n")
        self.pw("undo", "--all", "--force")
        self.assertEqual(open(os.path.join(self.project, "README.md")).read(), "# demo\n")

    def test_agent_socket_may_list_but_never_undo(self):
        v = self.mount("build")
        with open(v.path("README.md"), "w") as f:
            f.write("changed\n")
        a = RpcClient(self.rpc(v, "agent.open")["socket"])
        self.addCleanup(a.close)
        listed = a.call("changes.list")
        self.assertTrue(any(ch["path"] == "README.md" for s in listed["changesets"]
                            for ch in s["changes"]))
        a.call("changes.diff")
        for method, params in (("changes.undo", {"all": True}), ("checkpoint", {}),
                               ("changes.prune", {})):
            with self.assertRaises(RuntimeError) as e:
                a.call(method, params)
            self.assertIn("-32002", str(e.exception))
        self.assertEqual(open(os.path.join(self.project, "README.md")).read(), "changed\n")

    def test_agent_socket_never_sees_what_the_mode_hides(self):
        # A trusted (global) mode that writes everywhere but hides .env: the original of a
        # .env changed earlier stays out of the agent's list and diff, not the person's.
        modes = os.path.join(self.config_home, "piworkfs", "modes")
        os.makedirs(modes)
        with open(os.path.join(modes, "secret.md"), "w") as f:
            f.write("---\nname: secret\ndescription: hides .env\nwrites:\n  allow:\n"
                    "    - \"**\"\nhide:\n  - \".env\"\n---\nSecrets are hidden.\n")
        with open(os.path.join(self.project, ".env"), "w") as f:
            f.write("KEY=hunter2\n")
        v = self.mount("build")
        with open(v.path(".env"), "w") as f:
            f.write("KEY=changed\n")
        with open(v.path("README.md"), "w") as f:
            f.write("changed\n")
        self.pw("mode", "secret")
        c = RpcClient(self.socket_path(v))
        self.addCleanup(c.close)
        agent = c.call("agent.open")["socket"]
        a = RpcClient(agent)
        self.addCleanup(a.close)
        every = {"since_ns": 1}

        def paths(res):
            return {ch["path"] for s in res["changesets"] for ch in s["changes"]}
        self.assertEqual(paths(c.call("changes.list")), {".env", "README.md"})
        self.assertIn("hunter2", json.dumps(c.call("changes.diff", every)))
        self.assertEqual(paths(a.call("changes.list")), {"README.md"})
        d = a.call("changes.diff", every)
        self.assertEqual([f["path"] for f in d["files"]], ["README.md"])
        self.assertNotIn("hunter2", json.dumps(d))
        d = a.call("changes.diff", dict(every, paths=[".env"]))
        self.assertEqual(d["files"], [])

    # -- keeping is configurable -----------------------------------------------------------

    def test_off_mode_and_no_originals_keep_nothing(self):
        v = self.mount("off")
        with open(v.path("README.md"), "w") as f:
            f.write("changed\n")
        res = json.loads(self.pw("changes", "--json").stdout)
        self.assertEqual([c for s in res["changesets"] for c in s["changes"]], [])
        self.unmount(v)
        self.wait_daemon_exit(v)
        v = self.mount("build", args=["--no-originals"])
        p = self.pw("changes", check=False)
        self.assertEqual(p.returncode, 4, p.stderr)
        self.assertIn("keeps no originals", p.stderr)

    # -- retention -------------------------------------------------------------------------

    def test_prune_removes_oldest_first_and_keeps_the_rest_restorable(self):
        v = self.mount("build")
        hashes = []
        for i in range(3):
            self.checkpoint("c%d" % i)
            hashes.append(tree_hash(self.project))
            with open(v.path("notes/todo.txt"), "a") as f:
                f.write("x" * 1000 * (i + 1) + "\n")
        c = RpcClient(self.socket_path(v))
        self.addCleanup(c.close)
        # The originals kept: 14 bytes (c0), 1015 (c1), 3016 (c2). A cap of 4040 bytes
        # takes the oldest change sets away until what remains fits: c0 alone.
        res = c.call("changes.prune", {"max_bytes": 4040})
        self.assertGreaterEqual(res["removed"], 1)
        names = [s.get("name") for s in c.call("changes.list")["changesets"]]
        self.assertNotIn("c0", names)
        self.assertIn("c1", names)
        self.assertIn("c2", names)
        self.assertEqual(res["bytes"], 1015 + 3016)
        # What remains restores: back to the state at c1.
        self.pw("undo", "--all", "--since", "c1")
        self.assertEqual(tree_hash(self.project), hashes[1], self.listing())

    def test_a_large_file_is_kept_whole_and_named_by_its_content(self):
        """Over 16 MiB, the copy and the hash of a kept original run in two threads
        (fs/undo/copyhash.c): the blob must still be the whole file, byte for byte, named
        by the SHA-256 of exactly that content, and undo must put it back."""
        size = 40 * 1024 * 1024 + 12345  # not a whole number of chunks
        data = hashlib.sha256(b"seed").digest() * (size // 32 + 1)
        data = bytes(b ^ (i % 251) for i, b in enumerate(data[:size // 64])) * 64 + b"t" * (size % 64)
        self.assertEqual(len(data), size)
        with open(os.path.join(self.project, "large.bin"), "wb") as f:
            f.write(data)
        v = self.mount("build")
        self.checkpoint()
        before = tree_hash(self.project)
        with open(v.path("large.bin"), "r+b") as f:  # in place: the original is copied
            f.seek(size // 2)
            f.write(b"changed in the middle")
        blob = os.path.join(os.path.dirname(self.state_db), "originals", "blobs",
                            hashlib.sha256(data).hexdigest())
        self.assertTrue(os.path.exists(blob), os.listdir(os.path.dirname(blob)))
        with open(blob, "rb") as f:
            self.assertTrue(f.read() == data, "the kept blob differs from the original")
        self.undo_all()
        self.assertEqual(tree_hash(self.project), before, self.listing())

    def test_size_cap_and_retention_are_configurable_at_mount(self):
        # --originals-max-file: a file over it is recorded as changed, its content not
        # kept; --originals-max-total: the cap the store holds at every keep (issue 27).
        with open(os.path.join(self.project, "big.bin"), "wb") as f:
            f.write(b"b" * 3000)
        v = self.mount("build", args=["--originals-max-file", "2K",
                                      "--originals-max-total", "1K"])
        self.checkpoint("c0")
        with open(v.path("big.bin"), "ab") as f:
            f.write(b"more")
        with open(v.path("README.md"), "a") as f:
            f.write("x" * 1000 + "\n")
        with open(v.path("src/main.c"), "a") as f:
            f.write("/* c0 */\n")
        res = json.loads(self.pw("changes", "--json").stdout)
        kinds = {c["path"]: c.get("not_kept") for s in res["changesets"] for c in s["changes"]}
        self.assertEqual(kinds, {"big.bin": "too-big", "README.md": None, "src/main.c": None})
        self.checkpoint("c1")
        with open(v.path("README.md"), "a") as f:
            f.write("y\n")
        # c0 keeps 7 + 29 bytes, c1's keep 1008: over 1K, so the oldest went before that
        # keep (the mount's, empty, and c0), never c1, the one open now; a prune then finds
        # nothing over the cap.
        names = [s.get("name") for s in json.loads(self.pw("changes", "--json").stdout)
                 ["changesets"]]
        self.assertEqual(names, ["c1"])
        res = json.loads(self.pw("changes", "--prune", "--json").stdout)
        self.assertEqual(res["removed"], 0, res)

    def test_bad_limits_are_usage_errors(self):
        for args in (["--originals-max-file", "0"], ["--originals-max-file", "12X"],
                     ["--originals-keep", "3y"], ["--originals-max-total", "-1"]):
            p = self.run_pw("mount", *args, self.project, self.mp)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(args[0], p.stderr)

    # -- long calls run off the control thread -----------------------------------------

    def test_status_and_mode_are_served_during_a_long_undo(self):
        # The undo is held in the middle by its own blob: the test swaps it for a FIFO, so
        # the undo's read of it waits until the test writes the content. Meanwhile the
        # control socket must answer other clients (before, the undo ran on its thread).
        v = self.mount("build")
        self.checkpoint()
        before = tree_hash(self.project)
        with open(v.path("README.md"), "w") as f:
            f.write("changed\n")
        original = TREE["README.md"].encode()
        blobs = os.path.join(os.path.dirname(self.state_db), "originals", "blobs")
        blob = os.path.join(blobs, hashlib.sha256(original).hexdigest())
        self.assertTrue(os.path.exists(blob), os.listdir(blobs))
        os.unlink(blob)
        os.mkfifo(blob, 0o600)
        undo = subprocess.Popen([PIWORKFS, "undo", "--all", "--json", "--mount", self.mp],
                                env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        writer = []

        def reader_waits():
            # A writer's non-blocking open succeeds once a reader has the FIFO open (the
            # undo's verification of the blob): its open returns, and its read then waits
            # for what this writer sends.
            try:
                writer.append(os.open(blob, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                return False
            return True

        def cleanup():
            for fd in writer:
                os.close(fd)
            if undo.poll() is None:
                undo.kill()
            undo.wait(timeout=60)
        self.addCleanup(cleanup)
        self.assertTrue(wait_until(reader_waits, 60), self.daemon_logs())
        c = RpcClient(self.socket_path(v), timeout=60)
        try:
            self.assertEqual(c.call("status")["mode"], "build")
            self.assertEqual(c.call("mode.get")["mode"], "build")
        finally:
            c.close()
        self.assertIsNone(undo.poll(), "the undo ended before the blob was sent")
        # The restore opens the blob again: a file this time. Then the verification gets
        # the content, and the undo goes on.
        tmp = blob + ".tmp"
        with open(tmp, "wb") as f:
            f.write(original)
        os.rename(tmp, blob)
        os.write(writer[0], original)
        os.close(writer.pop())
        out, err = undo.communicate(timeout=120)
        self.assertEqual(undo.returncode, 0, out + err)
        self.assertEqual(json.loads(out)["failed"], [], out)
        self.assertEqual(tree_hash(self.project), before, self.listing())

    # -- a daemon killed in a storm of writes -------------------------------------------

    def kill_amid(self, v, storm):
        """SIGKILLs V's daemon once STORM (a process changing files through it) says "go",
        then stops the storm and lazily unmounts the dead view."""
        self.assertEqual(storm.stdout.readline().strip(), "go")
        os.kill(v.pid, signal.SIGKILL)
        v.proc.wait(timeout=60)
        storm.kill()  # its requests fail with ENOTCONN now
        storm.wait(timeout=60)
        subprocess.run(["fusermount3", "-uz", v.mp], capture_output=True)
        wait_until(lambda: not os.path.ismount(v.mp), 30)
        v.unmounted = True

    def test_sigkill_in_a_storm_of_writes_leaves_every_change_restorable(self):
        v = self.mount("build")
        self.checkpoint()
        before = tree_state(self.project)
        script = ("import os,sys\nroot=sys.argv[1]\ni=0\n"
                  "names=['README.md','src/main.c','src/util.c','notes/todo.txt']\n"
                  "while True:\n"
                  "  n=names[i%4]\n"
                  "  try:\n"
                  "    with open(os.path.join(root,n),'a') as f: f.write('w%d\\n'%i)\n"
                  "    if i%7==0: os.unlink(os.path.join(root,'src/lib/deep.c'))\n"
                  "    with open(os.path.join(root,'f%d'%(i%50)),'w') as f: f.write('n')\n"
                  "  except OSError: pass\n"
                  "  i+=1\n"
                  "  if i==200: print('go',flush=True)\n")
        storm = subprocess.Popen([sys.executable, "-c", script, v.path()],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.addCleanup(lambda: storm.poll() is None and storm.kill())
        self.kill_amid(v, storm)
        # A new daemon, the same store: every change applied has its original.
        self.mount("build")
        res = self.pw("undo", "--all", "--since", "1970-01-01", "--json")
        self.assertEqual(json.loads(res.stdout)["failed"], [], res.stdout)
        # Nothing is lost, not even the records of the names created in the last moment
        # (their rows were still in the batch the kill cut short: the journal has them).
        self.assertEqual(tree_changes(before, tree_state(self.project)), [], self.listing())

    def test_sigkill_while_originals_are_kept_restores_them_from_the_journal(self):
        """The rows of kept originals (not only of created names) wait in the journal for
        their batch: a kill amid first changes of existing files loses none of them."""
        files = [f"many/d{i % 10}/f{i}" for i in range(3000)]
        for i, rel in enumerate(files):
            p = os.path.join(self.project, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write(f"original {i}\n" * (i % 5 + 1))
        # Rows wait in the journal until the kill (the default 100 ms could commit them all
        # just before it, and the records this test is about would not be replayed at all).
        self.env["PIWORKFS_ORIG_DEFER_MS"] = "3600000"
        v = self.mount("build")
        del self.env["PIWORKFS_ORIG_DEFER_MS"]
        self.checkpoint()
        before = tree_state(self.project)
        # Each file changed once, its first change: removed, appended to, truncated or
        # chmod'ed, so every change keeps an original.
        script = ("import os,sys\nroot=sys.argv[1]\nfiles=sys.argv[2:]\n"
                  "for i,n in enumerate(files):\n"
                  "  p=os.path.join(root,n)\n"
                  "  try:\n"
                  "    k=i%4\n"
                  "    if k==0: os.unlink(p)\n"
                  "    elif k==1:\n"
                  "      with open(p,'a') as f: f.write('changed\\n')\n"
                  "    elif k==2: open(p,'w').close()\n"
                  "    else: os.chmod(p,0o600)\n"
                  "  except OSError: pass\n"
                  "  if i==300: print('go',flush=True)\n"
                  "import time\ntime.sleep(60)\n")
        storm = subprocess.Popen([sys.executable, "-c", script, v.path()] + files,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.addCleanup(lambda: storm.poll() is None and storm.kill())
        self.kill_amid(v, storm)
        # The kill cut a batch short: its rows are in the dead daemon's journal only.
        store = os.path.join(os.path.dirname(self.state_db), "originals")
        journals = [n for n in os.listdir(store) if n.startswith("journal.")]
        self.assertTrue(any(os.path.getsize(os.path.join(store, n)) > 0 for n in journals),
                        journals)
        self.mount("build")
        res = self.pw("undo", "--all", "--since", "1970-01-01", "--json")
        self.assertEqual(json.loads(res.stdout)["failed"], [], res.stdout)
        self.assertEqual(tree_changes(before, tree_state(self.project)), [], self.listing())


if __name__ == "__main__":
    unittest.main(verbosity=2)
