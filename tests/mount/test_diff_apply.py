# SPDX-License-Identifier: MIT
"""`piworkfs diff` is a patch git applies, both ways (issue 44, item 4): binary files (NUL
bytes, non-UTF-8 bytes, random bytes; modified, created, deleted) as git's binary patches,
beside text, mode changes and symbolic links. `git apply -R` of it, run in the view, gives
back the tree before the changes byte for byte; `git apply` of it on a copy of that tree
gives the tree after. The real git, no stand-in."""

import os
import random
import shutil
import stat
import unittest

from harness import MountCase


def snapshot(root):
    """{path: (kind, bytes or target, exec bit)} under ROOT: what a patch can carry."""
    out = {}
    for d, dirs, files in os.walk(root):
        for name in files + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
            p = os.path.join(d, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p), False)
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", f.read(), bool(st.st_mode & 0o100))
    return out


def differences(want, got):
    return ["%s: %r -> %r" % (k, want.get(k, "(none)")[:2] if k in want else "(none)",
                              got.get(k, "(none)")[:2] if k in got else "(none)")
            for k in sorted(set(want) | set(got)) if want.get(k) != got.get(k)][:20]


class DiffApply(MountCase):
    rng = random.Random(44)
    tree = {
        "text.txt": "one\ntwo\nthree\n",
        "docs/x.md": "# x\n",
    }

    def setUp(self):
        super().setUp()
        os.symlink("text.txt", os.path.join(self.project, "link"))
        os.symlink("docs", os.path.join(self.project, "gone-link"))
        self.files = {
            "bin/nul.bin": b"a\x00b\x00c",
            "bin/random.bin": bytes(self.rng.randrange(256) for _ in range(20000)),
            "bin/latin1.txt": "caf\xe9 cr\xe8me\n".encode("latin-1"),  # no NUL, not UTF-8
            "bin/gone.bin": b"\x00\xff" * 300,
            "bin/exec.bin": b"\x7fELF\x00\x01",
            "bin/empty.bin": b"",
        }
        for rel, data in self.files.items():
            p = os.path.join(self.project, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(data)
            os.chmod(p, 0o644)

    def write(self, v, rel, data, mode="wb"):
        with open(v.path(rel), mode) as f:
            f.write(data)

    def change(self, v):
        rnd = bytes(self.rng.randrange(256) for _ in range(5000))
        self.write(v, "bin/nul.bin", b"a\x00B\x00c\x00and more")
        with open(v.path("bin/random.bin"), "r+b") as f:  # a few bytes in the middle
            f.seek(10000)
            f.write(b"\x00changed\xff")
        self.write(v, "bin/latin1.txt", "caf\xe9 au lait\n".encode("latin-1"))
        os.unlink(v.path("bin/gone.bin"))
        self.write(v, "bin/new.bin", rnd)
        self.write(v, "bin/new-latin1.txt", b"\xe9t\xe9\n")
        os.chmod(v.path("bin/exec.bin"), 0o755)
        self.write(v, "bin/exec.bin", b"\x00", "ab")
        self.write(v, "bin/empty.bin", b"\x00\x00")
        self.write(v, "text.txt", b"one\nTWO\nthree\n")
        os.chmod(v.path("docs/x.md"), 0o755)
        os.unlink(v.path("link"))
        os.symlink("docs/x.md", v.path("link"))
        os.unlink(v.path("gone-link"))
        os.symlink("bin/new.bin", v.path("new-link"))

    def test_git_apply_both_ways_restores_binary_changes_byte_for_byte(self):
        v = self.wait_answering(self.mount("build"))
        self.pw_in_view("checkpoint", "c")
        original = os.path.join(self.tmp, "original")
        shutil.copytree(self.project, original, symlinks=True)
        before = snapshot(self.project)
        self.change(v)
        after = snapshot(self.project)
        patch = self.pw_in_view("diff", "--since", "c", "--no-pager").stdout
        self.assertNotIn("Binary files", patch)
        for want in ("diff --git a/bin/nul.bin b/bin/nul.bin\nindex ", "GIT binary patch\nliteral ",
                     "new file mode 100644\nindex 0000000000000000000000000000000000000000..",
                     "deleted file mode 100644\nindex ", "old mode 100644\nnew mode 100755"):
            self.assertIn(want, patch)
        p_path = os.path.join(self.tmp, "p.diff")
        with open(p_path, "w") as f:
            f.write(patch)
        # Forward, on a copy of the tree as it was.
        p = self.run_tool(["git", "apply", p_path], cwd=original, check=False)
        self.assertEqual(p.returncode, 0, p.stderr + patch[:4000])
        self.assertEqual(differences(after, snapshot(original)), [])
        # Backward, in the view itself: the tree before, byte for byte.
        p = self.run_tool(["git", "apply", "-R", p_path], cwd=v.path(), check=False)
        self.assertEqual(p.returncode, 0, p.stderr + patch[:4000])
        self.assertEqual(differences(before, snapshot(self.project)), [])

    def test_json_carries_binary_patches_and_says_binary(self):
        v = self.wait_answering(self.mount("build"))
        self.pw_in_view("checkpoint", "c")
        self.change(v)
        import json
        files = {f["path"]: f for f in
                 json.loads(self.pw_in_view("diff", "--since", "c", "--json").stdout)["files"]}
        for rel in ("bin/nul.bin", "bin/random.bin", "bin/latin1.txt", "bin/gone.bin",
                    "bin/new.bin", "bin/new-latin1.txt", "bin/exec.bin", "bin/empty.bin"):
            self.assertTrue(files[rel].get("binary"), files[rel])
            self.assertIn("GIT binary patch\n", files[rel]["diff"], rel)
        self.assertNotIn("binary", files["text.txt"])
        stat_out = self.pw_in_view("diff", "--since", "c", "--stat").stdout
        self.assertIn("bin/nul.bin", stat_out)
        self.assertRegex(stat_out, r"bin/nul\.bin +\| +Bin")


if __name__ == "__main__":
    unittest.main(verbosity=2)
