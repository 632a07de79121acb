# SPDX-License-Identifier: MIT
"""Lanes: `mount --only GLOB...` (what `run --only` mounts) narrows the writable set of every
mode of the view, tighten-only, and the agent is told: its announcement names the lane, and
a refusal by the lane says the path is outside this run's lane and names the globs."""

import errno
import json
import os
import subprocess
import unittest

import harness

LANE = ("--only", "src/a/**", "--only", "docs/design")

# What each bundled mode answers, alone, for a create of each path (None: allowed), and
# whether the lane (src/a/**, docs/design) reaches the path.
PATHS = {
    # path: (in lane, {mode: errno the mode alone gives, None when it allows})
    "src/a/new.c": (True, {"build": None, "off": None, "design": errno.EACCES,
                           "plan": errno.EROFS, "discuss": errno.EROFS, "review": errno.EROFS}),
    "src/b.c": (False, {"build": None, "off": None, "design": errno.EACCES,
                        "plan": errno.EROFS, "discuss": errno.EROFS, "review": errno.EROFS}),
    "docs/design/n.md": (True, {"build": None, "off": None, "design": None,
                                "plan": errno.EROFS, "discuss": errno.EROFS,
                                "review": errno.EROFS}),
    "docs/plans/p.md": (False, {"build": None, "off": None, "design": errno.EACCES,
                                "plan": None, "discuss": errno.EROFS, "review": errno.EROFS}),
    "README2.md": (False, {"build": None, "off": None, "design": errno.EACCES,
                           "plan": errno.EROFS, "discuss": errno.EROFS,
                           "review": errno.EROFS}),
}


class TestLanes(harness.MountCase):
    tree = {"src/a/x.c": "x\n", "src/main.c": "m\n", "docs/design/spec.md": "s\n",
            "docs/plans/.keep": "", "README.md": "r\n"}

    def status(self, v):
        return self.rpc(v, "status")

    def create(self, v, rel):
        fd = os.open(v.path(rel), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.close(fd)
        os.unlink(v.path(rel))  # the next mode starts from the same tree

    def test_a_lane_narrows_every_mode_and_holds_across_switches(self):
        v = self.mount("build", args=LANE)
        for mode in harness.BUNDLED + ["build", "design"]:
            self.set_mode(v, mode)
            for rel, (in_lane, by_mode) in PATHS.items():
                alone = by_mode[mode]
                if alone is not None:
                    # Never widened: the mode's own refusal stands.
                    self.assertErrno(alone, self.create, v, rel)
                elif in_lane:
                    self.create(v, rel)
                else:
                    self.assertErrno(errno.EACCES, self.create, v, rel)
            # Writing an existing file outside the lane is refused too (build allows it).
            if mode in ("build", "off"):
                self.assertErrno(errno.EACCES, open, v.path("src/main.c"), "a")
                with open(v.path("src/a/x.c"), "a") as f:
                    f.write("more\n")
        # Nothing outside the lane changed in the backing tree.
        with open(os.path.join(self.project, "src/main.c")) as f:
            self.assertEqual(f.read(), "m\n")

    def test_status_shows_the_lane(self):
        v = self.mount("build", args=LANE)
        st = self.status(v)
        self.assertEqual(st["lane"], ["src/a/**", "docs/design"])
        # (Not the exit status: another test's view may not answer.)
        p = self.run_pw("status", cwd=v.mp)
        self.assertRegex(p.stdout, r"lane +src/a/\*\*, docs/design \(writes outside it are "
                         r"refused in every mode\)")
        j = json.loads(self.run_pw("status", "--json", cwd=v.mp).stdout)
        self.assertEqual([x.get("lane") for x in j if x.get("mountpoint") == v.mp],
                         [["src/a/**", "docs/design"]])
        # `allowed` inside the view answers as the view does.
        p = self.run_pw("allowed", cwd=v.mp, check=True)
        self.assertIn("src/a/**", p.stdout)
        p = self.run_pw("check", "src/b.c", cwd=v.mp)
        self.assertIn("outside the view's lane", p.stdout)

    def test_a_view_without_a_lane_is_unchanged(self):
        v = self.mount("build")
        with open(v.path("src/b.c"), "w") as f:
            f.write("b\n")
        st = self.status(v)
        self.assertEqual(st["lane"], [])

    def test_a_bad_glob_is_a_usage_error(self):
        p = self.run_pw("mount", "--only", "", self.project, self.mp)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--only ''", p.stderr)

    def hook(self, v, event):
        ev = dict(event, cwd=v.mp)
        p = subprocess.run([harness.PIWORKFS, "hook", "claude"], input=json.dumps(ev),
                           env=self.env, capture_output=True, text=True,
                           timeout=harness.DEADLINE, check=True)
        return json.loads(p.stdout) if p.stdout.strip() else {}

    def test_the_agent_is_told_its_lane(self):
        v = self.mount("build", args=LANE)
        out = self.hook(v, {"hook_event_name": "UserPromptSubmit"})
        ann = out["hookSpecificOutput"]["additionalContext"]
        self.assertIn("Lane of this run (--only): src/a/**, docs/design;", ann)
        self.assertNotIn("No restrictions", ann)
        out = self.hook(v, {"hook_event_name": "PreToolUse", "tool_name": "Write",
                            "tool_input": {"file_path": v.path("src/b.c"), "content": "x"}})
        why = json.dumps(out)
        self.assertIn("because it is outside this run's lane", why)
        self.assertIn("within this run's lane: src/a/**, docs/design", why)
        self.assertIn("The lane holds in every mode", why)
        # Inside the lane, the hook lets the write go.
        out = self.hook(v, {"hook_event_name": "PreToolUse", "tool_name": "Write",
                            "tool_input": {"file_path": v.path("src/a/y.c"), "content": "x"}})
        self.assertNotIn("deny", json.dumps(out))


if __name__ == "__main__":
    unittest.main(verbosity=2)
