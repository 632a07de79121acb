# SPDX-License-Identifier: MIT
"""What `changes`, `diff`, `undo` and `log` say: agent-chosen names quoted as git quotes
them (never raw on the person's terminal, exact in JSON); a record that never rewrites
itself (a later change set never alters how an earlier one reads); undo that steps back
and redo that steps forward; errors that name the path."""

import json
import os
import sys
import unittest

from harness import PIWORKFS, MountCase, RpcClient, tree_hash, wait_until  # noqa: E402,F401

TREE = {
    "README.md": "# demo\n",
    "src/x.c": "int x;\n",
    "docs/arch.md": "one\ntwo\n",
}

EVIL = "evil\x1b]0;T\x07\x1b[2K\rdeleted  .gitconfig"
EVIL_Q = '"evil\\033]0;T\\a\\033[2K\\rdeleted  .gitconfig"'
NEWLINE = "two\nlines.txt"
NEWLINE_Q = '"two\\nlines.txt"'
RAW = ("\x1b", "\x07", "\r")


class Changes(MountCase):
    tree = TREE

    def mount(self, *args, **kw):
        v = super().mount(*args, **kw)

        return self.wait_answering(v)

    def pw(self, *args, check=True):
        return self.pw_in_view(*args, check=check)

    def assertNoRaw(self, text):
        for c in RAW:
            self.assertNotIn(c, text, repr(text))

    # -- quoting (issue 35, finding 8) -------------------------------------------------

    def test_agent_names_are_quoted_in_changes_diff_and_stat(self):
        v = self.mount("build")
        self.pw("checkpoint")
        for name in (EVIL, NEWLINE):
            with open(v.path(name), "w") as f:
                f.write("x\n")
        out = self.pw("changes").stdout
        self.assertNoRaw(out)
        self.assertIn(EVIL_Q, out)
        self.assertIn(NEWLINE_Q, out)
        # one line per change: the newline in a name forges none
        self.assertEqual(len([ln for ln in out.splitlines() if "created" in ln]), 2, out)
        for args in (("diff",), ("diff", "--stat")):
            out = self.pw(*args).stdout
            self.assertNoRaw(out)
            self.assertNotIn("\ntwo\n", "\n" + out, out)
            self.assertIn("evil\\033]0;T", out)
        # JSON stays exact
        res = json.loads(self.pw("changes", "--json").stdout)
        paths = {c["path"] for s in res["changesets"] for c in s["changes"]}
        self.assertIn(EVIL, paths)
        self.assertIn(NEWLINE, paths)
        out = self.pw("undo", "--dry-run", "--all").stdout
        self.assertNoRaw(out)
        self.assertIn(EVIL_Q, out)

    def test_agent_names_are_quoted_in_log_and_why(self):
        v = self.mount("plan")
        with self.assertRaises(OSError):
            with open(v.path(EVIL), "w") as f:
                f.write("x\n")

        def logged():
            return "evil" in self.run_pw("log", "-C", self.project).stdout
        self.assertTrue(wait_until(logged, 60), self.run_pw("log", "-C", self.project))
        out = self.run_pw("log", "-C", self.project).stdout
        self.assertNoRaw(out)
        self.assertIn("evil\\033]0;T", out)
        p = self.run_pw("why", os.path.join(self.project, EVIL), "-C", self.project)
        self.assertNoRaw(p.stdout)
        self.assertIn("evil\\033]0;T", p.stdout, p.stdout + p.stderr)

    # -- a record fixed when written (issue 29, item 1) -------------------------------

    def checkpoint(self, name=None):
        out = self.pw("checkpoint", *([name] if name else []), "--json").stdout
        return json.loads(out)["changeset"]

    def set_changes(self, cs):
        res = json.loads(self.pw("changes", "--json").stdout)
        for s in res["changesets"]:
            if s["id"] == cs:
                return sorted((c["path"], c["kind"], c.get("to"), c.get("now"), c["comm"],
                               c["pid"], c["mode"]) for c in s["changes"])
        self.fail("no change set %d in %s" % (cs, res))

    def set_diff(self, cs, *args):
        return json.loads(self.pw("diff", "--change-set", str(cs), *args, "--json").stdout)

    def test_an_old_change_set_reads_the_same_after_later_ones(self):
        v = self.mount("build")
        a = self.checkpoint("a")
        self.run_tool(["sh", "-c", "echo three >> docs/arch.md"], cwd=v.path())
        self.run_tool(["sed", "-i", "s/x;/y;/", "src/x.c"], cwd=v.path())
        os.rename(v.path("README.md"), v.path("READ.md"))
        listed = self.set_changes(a)
        self.assertIn(("docs/arch.md", "modified"), [c[:2] for c in listed])
        self.assertIn(("src/x.c", "modified"), [c[:2] for c in listed])
        diff, stat = self.set_diff(a), self.set_diff(a, "--stat")
        text = self.pw("diff", "--change-set", str(a)).stdout
        self.assertIn("+three", text)
        # later change sets remove, chmod, rewrite and rename what set A changed
        self.checkpoint("b")
        self.run_tool(["rm", "-rf", "docs"], cwd=v.path())
        os.chmod(v.path("src/x.c"), 0o600)
        os.rename(v.path("READ.md"), v.path("R.md"))
        self.checkpoint("c")
        with open(v.path("src/x.c"), "w") as f:
            f.write("rewritten\n")
        self.assertEqual(self.set_changes(a), listed)
        self.assertEqual(self.set_diff(a), diff)
        self.assertEqual(self.set_diff(a, "--stat"), stat)
        self.assertEqual(self.pw("diff", "--change-set", str(a)).stdout, text)

    def test_a_change_set_one_names_reads_that_set_only(self):
        v = self.mount("build")
        a = self.checkpoint()
        with open(v.path("src/x.c"), "a") as f:
            f.write("more\n")
        self.checkpoint()
        with open(v.path("README.md"), "a") as f:
            f.write("more\n")
        paths = [f["path"] for f in self.set_diff(a)["files"]]
        self.assertEqual(paths, ["src/x.c"])
        p = self.pw("diff", "--change-set", "999", check=False)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("no change set 999", p.stderr)

    # -- undo steps back, redo steps forward (issue 29, item 2) -------------------------

    def write(self, v, rel, text):
        with open(v.path(rel), "w") as f:
            f.write(text)

    def backing(self, rel):
        with open(os.path.join(self.project, rel)) as f:
            return f.read()

    def test_undo_twice_steps_back_and_redo_steps_forward(self):
        v = self.mount("build")
        a = self.checkpoint()
        self.write(v, "src/x.c", "v1\n")
        b = self.checkpoint()
        self.write(v, "src/x.c", "v2\n")
        out = self.pw("undo", v.path("src/x.c")).stdout
        self.assertEqual(self.backing("src/x.c"), "v1\n")
        # it says what it is about to do, naming the change set, before it does it
        lines = out.splitlines()
        self.assertEqual(lines[0], "undo: putting back the originals of change set %d:" % b, out)
        self.assertIn("  restore src/x.c", lines, out)
        self.pw("undo", v.path("src/x.c"))  # again: further back, never the agent's edit again
        self.assertEqual(self.backing("src/x.c"), "int x;\n")
        p = self.pw("undo", v.path("src/x.c"), check=False)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertEqual(self.backing("src/x.c"), "int x;\n")
        out = self.pw("redo").stdout
        self.assertTrue(out.startswith("redo: "), out)
        self.assertEqual(self.backing("src/x.c"), "v1\n")
        self.pw("redo")
        self.assertEqual(self.backing("src/x.c"), "v2\n")
        p = self.pw("redo", check=False)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertEqual(self.backing("src/x.c"), "v2\n")
        self.assertTrue(a < b)

    def test_undo_all_twice_does_not_redo(self):
        v = self.mount("build")
        self.checkpoint()
        self.write(v, "README.md", "changed\n")
        self.pw("undo", "--all")
        self.assertEqual(self.backing("README.md"), "# demo\n")
        self.pw("undo", "--all")
        self.assertEqual(self.backing("README.md"), "# demo\n")

    def test_diff_and_undo_of_an_unchanged_path_fail_naming_it(self):
        v = self.mount("build")
        self.checkpoint()
        self.write(v, "src/x.c", "v1\n")
        for cmd in ("diff", "undo"):
            p = self.pw(cmd, v.path("README.md"), check=False)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
            self.assertIn("README.md", p.stderr)
            self.assertEqual(p.stdout, "")
        p = self.pw("diff", v.path("nosuch.c"), check=False)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("nosuch.c", p.stderr)
        self.assertEqual(self.backing("src/x.c"), "v1\n")

    def test_a_store_of_schema_4_is_migrated_and_its_history_kept(self):
        import sqlite3
        v = self.mount("build")
        self.checkpoint()
        self.write(v, "README.md", "changed\n")
        self.assertEqual(len(self.in_named_thread(lambda: os.mkdir(v.path(".piworkfs")))), 1)

        def denials():
            p = self.run_pw("log", "-C", self.project, "--jsonl")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            events = [json.loads(ln) for ln in p.stdout.splitlines() if ln.strip()]
            return [e for e in events if e.get("path") == ".piworkfs"]
        self.assertTrue(wait_until(lambda: denials(), 60), self.run_pw("log", "-C", self.project))
        self.unmount(v)
        # the store as 83bbf90 left it: schema 4, without migrations 5, 6, 7 and 8
        db = sqlite3.connect(self.state_db)
        for table, column in (("orig_changesets", "undoes"), ("orig_changesets", "redone_by"),
                              ("orig_rows", "thread"), ("audit", "thread"),
                              ("switches", "outcome"), ("switches", "plan"),
                              ("switches", "asked_pid"), ("switches", "asked_comm"),
                              ("switches", "how")):
            db.execute("ALTER TABLE %s DROP COLUMN %s" % (table, column))
        for table in ("plans", "plan_tasks", "plan_changesets"):  # migration 6
            db.execute("DROP TABLE %s" % table)
        db.execute("PRAGMA user_version = 4")
        db.commit()
        db.close()
        # read as it is (the log opens the store read-only: no migration), then migrated
        self.assertNotIn("thread", denials()[0])
        v = self.mount("build")
        self.assertNotIn("thread", denials()[0])
        res = json.loads(self.pw("changes", "--all", "--json").stdout)
        kinds = {(c["path"], c["kind"]) for s in res["changesets"] for c in s["changes"]}
        self.assertIn(("README.md", "modified"), kinds)
        self.pw("undo", v.path("README.md"))
        self.assertEqual(self.backing("README.md"), "# demo\n")
        p = self.pw("undo", v.path("README.md"), check=False)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertEqual(self.backing("README.md"), "# demo\n")
        db = sqlite3.connect(self.state_db)
        self.assertEqual(db.execute("PRAGMA user_version").fetchone()[0], 8)
        db.close()

    # -- processes by program (issue 29, item 7) ----------------------------------------

    def in_named_thread(self, fn):
        """Runs FN in a thread named libuv-worker (as Node's writes are), returns its error."""
        import ctypes
        import threading
        err = []

        def body():
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(15, b"libuv-worker", 0, 0, 0)  # PR_SET_NAME
            try:
                fn()
            except OSError as e:
                err.append(e)
        t = threading.Thread(target=body)
        t.start()
        t.join()
        return err

    def test_a_change_names_the_program_not_the_thread(self):
        v = self.mount("build")
        self.checkpoint()
        self.assertEqual(self.in_named_thread(lambda: self.write(v, "src/x.c", "w\n")), [])
        res = json.loads(self.pw("changes", "--json").stdout)
        c = [c for s in res["changesets"] for c in s["changes"] if c["path"] == "src/x.c"]
        self.assertEqual(len(c), 1, res)
        self.assertEqual((c[0]["comm"], c[0]["pid"]), ("python3", os.getpid()), c)
        self.assertEqual(c[0].get("thread"), "libuv-worker", c)  # the thread, in JSON only
        self.assertNotIn("libuv-worker", self.pw("changes").stdout)

    def logged_denial(self, path):
        """The first denial of PATH in `log --jsonl`, once there is one (a minute at most)."""
        def denied():
            p = self.run_pw("log", "-C", self.project, "--jsonl")
            events = [json.loads(ln) for ln in p.stdout.splitlines() if ln.strip()]
            return [e for e in events if e.get("path") == path]
        self.assertTrue(wait_until(lambda: denied(), 60), self.run_pw("log", "-C", self.project))
        return denied()[0]

    def test_a_denial_names_the_program_not_the_thread(self):
        v = self.mount("plan")
        err = self.in_named_thread(lambda: self.write(v, "new.txt", "w\n"))
        self.assertEqual(len(err), 1)
        e = self.logged_denial("new.txt")
        self.assertEqual((e["comm"], e["pid"]), ("python3", os.getpid()), e)
        self.assertEqual(e.get("thread"), "libuv-worker", e)  # the thread, in JSON only
        self.assertNotIn("libuv-worker", self.run_pw("log", "-C", self.project).stdout)

    def test_a_denial_from_the_main_thread_names_no_thread(self):
        v = self.mount("plan")
        with self.assertRaises(OSError):
            self.write(v, "main.txt", "w\n")
        e = self.logged_denial("main.txt")
        self.assertEqual((e["comm"], e["pid"]), ("python3", os.getpid()), e)
        self.assertNotIn("thread", e)  # the program names it: no thread key, as `changes`

    # -- a change set per rule set (issue 29, item 6) -----------------------------------

    def write_mode(self, allow):
        modes = os.path.join(self.config_home, "piworkfs", "modes")
        os.makedirs(modes, exist_ok=True)
        with open(os.path.join(modes, "edit.md"), "w") as f:
            f.write("---\nname: edit\ndescription: edits\nwrites:\n  allow:\n"
                    "    - \"%s\"\n---\nEdits.\n" % allow)

    def test_a_reload_that_changes_what_the_mode_allows_starts_a_change_set(self):
        self.write_mode("docs/**")
        v = self.mount("edit")
        self.write(v, "docs/arch.md", "docs\n")
        self.pw("reload")  # the same rules: no new change set
        self.write(v, "docs/new.md", "docs\n")
        self.write_mode("**")
        self.pw("reload")
        self.write(v, "src/x.c", "anywhere\n")
        res = json.loads(self.pw("changes", "--json").stdout)
        where = {c["path"]: s for s in res["changesets"] for c in s["changes"]}
        self.assertEqual(where["docs/arch.md"]["id"], where["docs/new.md"]["id"], res)
        self.assertNotEqual(where["docs/arch.md"]["id"], where["src/x.c"]["id"], res)
        self.assertEqual(where["src/x.c"]["reason"], "reload")
        self.assertEqual(where["src/x.c"]["mode"], "edit")

    # -- git's diff format (issue 29, item 4) -------------------------------------------

    def snapshot(self, root):
        """{path: (kind, content or target, exec bit)} of the files under ROOT."""
        out = {}
        for d, dirs, files in os.walk(root):
            for name in files + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
                p = os.path.join(d, name)
                rel = os.path.relpath(p, root)
                if os.path.islink(p):
                    out[rel] = ("link", os.readlink(p), False)
                else:
                    with open(p, "rb") as f:
                        out[rel] = ("file", f.read(), bool(os.stat(p).st_mode & 0o100))
        return out

    def test_git_apply_reverse_of_the_diff_gives_the_tree_before(self):
        import shutil
        v = self.mount("build")
        self.checkpoint()
        before = self.snapshot(self.project)
        root = v.path()
        self.run_tool(["sed", "-i", "s/two/TWO/", "docs/arch.md"], cwd=root)
        self.write(v, "new.txt", "fresh\nlines\n")
        self.write(v, "empty.txt", "")
        self.write(v, "nonl.txt", "a\nb")
        os.unlink(v.path("README.md"))
        os.rename(v.path("src/x.c"), v.path("src/y.c"))
        os.chmod(v.path("docs/arch.md"), 0o755)
        os.symlink("docs/arch.md", v.path("link"))
        os.makedirs(v.path("newdir/sub"))
        self.write(v, "newdir/sub/f.txt", "in a new dir\n")
        os.setxattr(v.path("docs/arch.md"), "user.tag", b"v")
        patch = self.pw("diff").stdout
        for want in ("--- /dev/null\n+++ b/new.txt", "--- a/README.md\n+++ /dev/null",
                     "new file mode 100644", "deleted file mode 100644",
                     "old mode 100644\nnew mode 100755", "rename from src/x.c\nrename to src/y.c",
                     "similarity index 100%", "new file mode 120000",
                     "+docs/arch.md\n\\ No newline at end of file"):
            self.assertIn(want, patch, patch)
        # path order, as git
        heads = [ln for ln in patch.splitlines() if ln.startswith("diff --git ")]
        self.assertEqual(heads, sorted(heads), patch)
        work = os.path.join(self.tmp, "apply")
        shutil.copytree(self.project, work, symlinks=True)
        with open(os.path.join(self.tmp, "p.diff"), "w") as f:
            f.write(patch)
        p = self.run_tool(["git", "apply", "-R", os.path.join(self.tmp, "p.diff")], cwd=work,
                          check=False)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr + patch)
        self.assertEqual(self.snapshot(work), before, patch)

    def test_dry_run_says_which_change_set_and_lists_in_the_order_undo_acts(self):
        # issue 44, item 20: parents were listed before their children, no header
        v = self.mount("build")
        self.checkpoint("c")
        os.makedirs(v.path("n1/n2"))
        self.write(v, "n1/n2/f.txt", "f\n")
        self.write(v, "src/x.c", "int y;\n")
        sets = json.loads(self.pw("changes", "--json").stdout)["changesets"]
        cs = [s["id"] for s in sets if s.get("name") == "c"][0]
        before = tree_hash(self.project)
        out = self.pw("undo", "--all", "--dry-run").stdout.splitlines()
        self.assertEqual(out[0], "undo --dry-run: would put back the originals of change set "
                                 "%d (nothing is done):" % cs, out)
        self.assertEqual(out[1:], ["  restore src/x.c", "  remove n1/n2/f.txt",
                                   "  remove n1/n2", "  remove n1"])
        self.assertEqual(tree_hash(self.project), before)
        # the undo itself says the same, in the same order, then does it
        done = self.pw("undo", "--all").stdout.splitlines()
        self.assertEqual(done[1:5], out[1:], done)
        out = self.pw("redo", "--dry-run").stdout.splitlines()
        self.assertRegex(out[0], r"^redo --dry-run: would put back what the undo in change "
                                 r"set \d+ took away \(nothing is done\):$")
        self.assertEqual(out[1:], ["  recreate n1", "  recreate n1/n2", "  recreate n1/n2/f.txt",
                                   "  restore src/x.c"])

    def git_commit_all(self):
        """The project becomes a git repository with everything in one commit."""
        self.run_tool(["git", "init", "-q"], cwd=self.project, env=self.GIT_ENV)
        self.run_tool(["git", "add", "-A"], cwd=self.project, env=self.GIT_ENV)
        self.run_tool(["git", "commit", "-qm", "one"], cwd=self.project, env=self.GIT_ENV)

    def test_stat_counts_files_not_directories_and_says_what_git_did_aside(self):
        # issue 44, item 20: directories counted as files, a cryptic ".git/" line
        self.git_commit_all()
        v = self.mount("build")
        self.checkpoint()
        os.makedirs(v.path("n1/n2"))
        self.write(v, "n1/n2/f.txt", "f\n")
        self.write(v, "docs/arch.md", "one\ntwo\nthree\n")
        self.run_tool(["git", "add", "-A"], cwd=v.path(), env=self.GIT_ENV)
        stat = self.pw("diff", "--stat").stdout.splitlines()
        self.assertEqual([ln.split("|")[0].strip() for ln in stat[:2]],
                         ["docs/arch.md", "n1/n2/f.txt"], stat)
        self.assertEqual(stat[2], " 2 files changed, 2 insertions(+)", stat)
        self.assertRegex(stat[3], r"^ and \.git/, git's own files \(not counted above\): "
                                  r"\d+ objects?, index; piworkfs diff --stat \.git lists each$")
        self.assertEqual(len(stat), 4, stat)
        ns = self.pw("diff", "--name-status").stdout.splitlines()
        self.assertEqual(ns[:2], ["M\tdocs/arch.md", "A\tn1/n2/f.txt"], ns)
        # the directories are in JSON, marked as nothing git's format shows
        files = {f["path"]: f for f in json.loads(self.pw("diff", "--json").stdout)["files"]}
        self.assertIs(files["n1"]["patch"], False)
        self.assertIs(files["n1/n2/f.txt"]["patch"], True)

    def test_stat_and_name_status_read_as_git_does(self):
        v = self.mount("build")
        self.checkpoint()
        self.run_tool(["sed", "-i", "s/two/TWO/", "docs/arch.md"], cwd=v.path())
        self.write(v, "new.txt", "a\nb\nc\n")
        os.unlink(v.path("README.md"))
        os.rename(v.path("src/x.c"), v.path("src/y.c"))
        stat = self.pw("diff", "--stat").stdout.splitlines()
        self.assertEqual(stat[-1], " 4 files changed, 4 insertions(+), 2 deletions(-)", stat)
        self.assertEqual(stat[0].split("|")[1], " 1 -", stat)
        self.assertEqual(stat[1].split("|")[1], " 2 +-", stat)
        self.assertEqual(stat[2].split("|")[1], " 3 +++", stat)
        self.assertIn("src/x.c => src/y.c", stat[3])
        # one column of bars for every name, however long
        self.assertEqual(len({ln.index("|") for ln in stat[:-1]}), 1, stat)
        ns = self.pw("diff", "--name-status").stdout
        self.assertEqual(ns, "D\tREADME.md\nM\tdocs/arch.md\nA\tnew.txt\n"
                             "R100\tsrc/x.c\tsrc/y.c\n")
        color = self.pw("diff", "--color=always", "--no-pager").stdout
        self.assertIn("\x1b[31m-two\x1b[m", color)
        self.assertNotIn("\x1b[", self.pw("diff").stdout)

    def test_binary_is_told_by_content_and_sent_as_git_binary_patches(self):
        v = self.mount("build")
        self.checkpoint()
        with open(v.path("blob.bin"), "wb") as f:
            f.write(b"\x00\x01binary")
        with open(v.path("late.txt"), "wb") as f:
            f.write(b"a" * 9000 + b"\x00")  # a NUL after git's first 8000 bytes
        patch = self.pw("diff").stdout
        # git's binary patch (tests/mount/test_diff_apply.py applies them), not a line that
        # makes git apply refuse the whole patch
        self.assertIn("diff --git a/blob.bin b/blob.bin\nnew file mode 100644\nindex "
                      "0000000000000000000000000000000000000000..", patch)
        self.assertNotIn("Binary files", patch)
        # git would show it as text; its NUL cannot travel in the reply's JSON string, so a
        # binary patch (which git applies the same) rather than a hunk cut at the NUL
        self.assertIn("diff --git a/late.txt b/late.txt\nnew file mode 100644\nindex ", patch)
        with open(v.path("plain.txt"), "w") as f:
            f.write("plain\n")
        self.assertIn("+++ b/plain.txt\n@@ -0,0 +1 @@\n+plain\n", self.pw("diff").stdout)

    # -- net effect per path (issue 29, item 3) -----------------------------------------

    GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_NOSYSTEM": "1"}

    def git_status_outside(self):
        """`git status` in the backing project, outside the view: git refreshes the stat
        data its index caches and writes the index again (a new file renamed over it)."""
        index = os.path.join(self.project, ".git", "index")
        before = os.stat(index).st_ino
        # every entry racily clean (not older than the index), so git refreshes them
        os.utime(index, ns=(10**9, 10**9))
        self.run_tool(["git", "status", "--short"], cwd=self.project, env=self.GIT_ENV)
        self.assertNotEqual(os.stat(os.path.join(self.project, ".git", "index")).st_ino,
                            before, "git status did not rewrite the index")

    def test_git_status_outside_the_view_blocks_neither_undo_nor_redo(self):
        # issue 44, item 19: "refused: changed outside the view since ...: .git/index"
        from harness import tree_changes, tree_state
        self.git_commit_all()
        v = self.mount("build")
        self.checkpoint("c")
        before = tree_state(self.project)
        self.write(v, "src/x.c", "int y;\n")
        self.run_tool(["git", "commit", "-qam", "two"], cwd=v.path(), env=self.GIT_ENV)
        # git status outside: the agent's commit is undone all the same
        self.git_status_outside()
        after = tree_state(self.project)
        p = self.pw("undo", "--all", check=False)
        self.assertEqual((p.returncode, p.stderr), (0, ""), p.stdout)
        self.assertIn("note: .git/index was rewritten outside the view since (git refreshes "
                      "its index on `git status`): put back as recorded", p.stdout)
        self.assertEqual(tree_changes(before, tree_state(self.project)), [])
        # then git status again, and redo: no refusal, a note, the tree after the commit
        self.git_status_outside()
        p = self.pw("redo", check=False)
        self.assertEqual((p.returncode, p.stderr), (0, ""), p.stdout)
        self.assertIn("note: .git/index was rewritten outside the view since", p.stdout)
        self.assertEqual(tree_changes(after, tree_state(self.project)), [])
        # a real change outside the view still refuses, naming the file
        with open(os.path.join(self.project, "src", "x.c"), "w") as f:
            f.write("outside\n")
        p = self.pw("undo", "--all", check=False)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("src/x.c", p.stderr)
        self.assertNotIn(".git/index", p.stderr)

    def test_changes_and_undo_show_the_net_effect_per_path(self):
        self.git_commit_all()
        v = self.mount("build")
        self.checkpoint()
        root = v.path()
        self.run_tool(["sed", "-i", "s/x;/y;/", "src/x.c"], cwd=root)
        self.write(v, "tmp.lock", "x")
        os.unlink(v.path("tmp.lock"))
        os.rename(v.path("docs/arch.md"), v.path("docs/ARCH.md"))
        os.unlink(v.path("README.md"))
        self.write(v, "new.txt", "new\n")
        self.run_tool(["git", "add", "-A"], cwd=root, env=self.GIT_ENV)
        self.run_tool(["git", "commit", "-qm", "two"], cwd=root, env=self.GIT_ENV)
        out = self.pw("changes").stdout
        lines = [ln for ln in out.splitlines() if ln.startswith("  ")]
        git = [ln for ln in lines if ".git" in ln]
        self.assertEqual(len(git), 1, out)
        self.assertRegex(git[0], r"^  \.git/: \d+ objects, ", out)
        rest = sorted(" ".join(ln.split()[:4] if "->" in ln else ln.split()[:2])
                      for ln in lines if ".git" not in ln)
        self.assertEqual(rest, ["created new.txt", "deleted README.md", "modified src/x.c",
                                "renamed docs/arch.md -> docs/ARCH.md"], out)
        # a .git path asked for: its changes one by one
        self.assertGreater(len(self.pw("changes", v.path(".git")).stdout.splitlines()), 3)
        stat = self.pw("diff", "--stat").stdout
        self.assertNotIn(".git/objects", stat)
        out = self.pw("undo", "--all").stdout
        steps = [ln.strip() for ln in out.splitlines() if ln.startswith("  ")]
        self.assertEqual(sorted(s for s in steps if ".git" not in s),
                         ["recreate README.md", "remove new.txt",
                          "rename back docs/ARCH.md -> docs/arch.md", "restore src/x.c"], out)
        self.assertEqual(len([s for s in steps if ".git" in s]), 1, out)
        self.assertEqual(self.backing("src/x.c"), "int x;\n")
        # the undo's own change set reads as what it did, too
        res = json.loads(self.pw("changes", "--json").stdout)
        undo = [s for s in res["changesets"] if s["reason"] == "undo"][0]
        kinds = {(c["path"], c["kind"]) for c in undo["changes"]
                 if not c["path"].startswith(".git")}
        self.assertIn(("src/x.c", "modified"), kinds)
        self.assertFalse([p for p, _ in kinds if "sed" in p], kinds)

    def test_undo_and_redo_of_an_edit_then_rename_say_one_line_per_path(self):
        v = self.mount("build")
        self.checkpoint()
        self.run_tool(["sh", "-c", "sed -i 's/x;/y;/' src/x.c && mv src/x.c src/app.c"],
                      cwd=v.path())
        out = self.pw("undo", v.path("src/app.c")).stdout
        self.assertEqual([ln.strip() for ln in out.splitlines() if ln.startswith("  ")],
                         ["rename back src/app.c -> src/x.c"], out)
        self.assertEqual(self.backing("src/x.c"), "int x;\n")
        self.assertFalse(os.path.exists(os.path.join(self.project, "src/app.c")))
        out = self.pw("redo").stdout
        self.assertEqual(sorted(ln.strip() for ln in out.splitlines() if ln.startswith("  ")),
                         ["recreate src/app.c", "remove src/x.c"], out)
        self.assertEqual(self.backing("src/app.c"), "int y;\n")
        self.assertFalse(os.path.exists(os.path.join(self.project, "src/x.c")))

    def on_a_terminal(self, *args, env=None):
        """piworkfs ARGS with stdout on a terminal (a pty): what it wrote there."""
        import pty
        import subprocess
        master, slave = pty.openpty()
        e = dict(self.env)
        e.update(env or {})
        p = subprocess.Popen([PIWORKFS, *args, "--mount", self.mp], stdout=slave,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=e,
                             cwd=self.cwd)
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        os.close(master)
        p.wait(timeout=60)
        return out.decode(errors="replace").replace("\r\n", "\n")

    def test_diff_on_a_terminal_goes_through_the_pager_in_colour(self):
        v = self.mount("build")
        self.checkpoint()
        self.write(v, "src/x.c", "int y;\n")
        env = {"PAGER": "sed s/^/P:/", "TERM": "xterm"}
        out = self.on_a_terminal("diff", env=env)
        self.assertIn("P:\x1b[31m-int x;\x1b[m", out, repr(out))
        out = self.on_a_terminal("diff", "--no-pager", "--color=never", env=env)
        self.assertNotIn("P:", out)
        self.assertIn("-int x;", out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
