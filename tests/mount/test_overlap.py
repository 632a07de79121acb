# SPDX-License-Identifier: MIT
"""Overlapping writes: a view that writes a path another live view of the same project
changed in its current change set is told (the write goes through): an `overlap`
notification to its subscribers of `denied`, a row in the audit log, and `changes` marks
the path as also changed by the other view. Two mounts of one project stand for two runs."""

import json
import os
import subprocess
import time
import unittest

import harness


class Listener(harness.RpcClient):
    """A control socket client subscribed to `denied` (which carries `overlap` too)."""

    def __init__(self, path):
        super().__init__(path)
        self.call("subscribe", {"events": ["denied"]})

    def wait_for(self, method, pred, deadline=harness.DEADLINE):
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            while b"\n" not in self.buf:
                self.sock.settimeout(max(0.1, end - time.monotonic()))
                try:
                    chunk = self.sock.recv(65536)
                except TimeoutError:
                    return None
                if not chunk:
                    return None
                self.buf += chunk
            line, _, self.buf = self.buf.partition(b"\n")
            msg = json.loads(line)
            if msg.get("method") == method and pred(msg["params"]):
                return msg["params"]
        return None


class TestOverlap(harness.MountCase):
    tree = {"src/shared.c": "base\n", "src/mine.c": "m\n", "src/theirs.c": "t\n"}

    def two_views(self):
        mp2 = os.path.join(self.tmp, "mnt2")
        os.makedirs(mp2)
        a = self.wait_answering(self.mount("build"))
        b = self.wait_answering(self.mount("build", mountpoint=mp2))
        return a, b

    def write(self, v, rel, text):
        with open(v.path(rel), "a") as f:
            f.write(text)

    def test_the_second_writer_is_told_and_changes_marks_it(self):
        a, b = self.two_views()
        self.write(a, "src/shared.c", "from a\n")
        self.write(a, "src/theirs.c", "from a\n")
        # The first writer's row reaches the store (batches commit within 100 ms); the
        # second look catches a row committed a moment after the second write too.
        listen = Listener(self.socket_path(b))
        self.addCleanup(listen.close)
        self.write(b, "src/shared.c", "from b\n")
        self.write(b, "src/mine.c", "from b\n")
        got = listen.wait_for("overlap", lambda p: p.get("path") == "src/shared.c")
        self.assertIsNotNone(got, "no overlap notification" + self.daemon_logs())
        self.assertEqual(got["path2"], a.mp)
        self.assertEqual(got["reason"], "overlap")
        self.assertIsNone(got["errno"])
        # The write itself went through.
        with open(os.path.join(self.project, "src/shared.c")) as f:
            self.assertEqual(f.read(), "base\nfrom a\nfrom b\n")
        # Only the shared path: src/mine.c was changed by b alone.
        self.assertIsNone(listen.wait_for("overlap", lambda p: p.get("path") == "src/mine.c",
                                          deadline=1.0))
        # The audit log has it, though allowed writes are not logged.
        def logged():
            p = self.run_pw("log", "--jsonl", cwd=b.mp)
            return any(e.get("reason") == "overlap" and e.get("path") == "src/shared.c"
                       for e in map(json.loads, p.stdout.splitlines()))
        self.assertTrue(harness.wait_until(logged, harness.DEADLINE),
                        self.run_pw("log", "--jsonl", cwd=b.mp).stdout)
        # `changes` in b marks the path as also changed by a.
        p = self.run_pw("changes", "--json", "--mount", b.mp, check=True)
        j = json.loads(p.stdout)
        rows = {c["path"]: c for s in j["changesets"] if s["current"] for c in s["changes"]}
        self.assertEqual([o["mountpoint"] for o in rows["src/shared.c"]["also_changed_by"]],
                         [a.mp])
        self.assertEqual(rows["src/mine.c"]["also_changed_by"], [])
        p = self.run_pw("changes", "--mount", b.mp, check=True)
        self.assertIn("also changed by the view at %s" % a.mp, p.stdout)
        # `piworkfs hook` tells the agent after its file tool wrote the path.
        self.assertIn("[piworkfs] Note: src/shared.c was also changed by another live view "
                      "of the project, the view at %s" % a.mp, self.post_tool_use(b, "src/shared.c"))
        self.assertEqual(self.post_tool_use(b, "src/mine.c"), "")

    def post_tool_use(self, v, rel):
        ev = {"hook_event_name": "PostToolUse", "cwd": v.mp, "tool_name": "Write",
              "tool_input": {"file_path": v.path(rel), "content": "x"},
              "tool_response": {"filePath": v.path(rel), "success": True}}
        p = subprocess.run([harness.PIWORKFS, "hook", "claude"], input=json.dumps(ev),
                           env=self.env, capture_output=True, text=True,
                           timeout=harness.DEADLINE, check=True)
        if not p.stdout.strip():
            return ""
        return json.loads(p.stdout)["hookSpecificOutput"]["additionalContext"]

    def test_a_view_no_longer_mounted_does_not_count(self):
        a, b = self.two_views()
        self.write(a, "src/shared.c", "from a\n")
        self.unmount(a)
        listen = Listener(self.socket_path(b))
        self.addCleanup(listen.close)
        self.write(b, "src/shared.c", "from b\n")
        self.assertIsNone(listen.wait_for("overlap", lambda p: True, deadline=1.0))


if __name__ == "__main__":
    unittest.main(verbosity=2)
