# SPDX-License-Identifier: MIT
"""The text.* methods (docs/PROTOCOL.md): the words every agent reads, served by a real
daemon over its agent socket, as the Pi extension asks for them. What the words are is
tests/policy/test_agent_text.c's; here, what the daemon adds from the view (the mode's real
rules, the narrowest mode that would allow a path, whether the command is certain to be
refused) and that bad params get an error and nothing else."""

import json
import os
import unittest

import harness

HACK = {"path": "src/hack.c", "op": "create", "errno": "EACCES", "reason": "no-allow",
        "mode": "design", "rule": None}


class TestTexts(harness.MountCase):
    def agent(self, v):
        """A connection to V's agent socket (restricted, as Pi's and the MCP server's)."""
        c = harness.RpcClient(self.rpc(v, "agent.open")["socket"])
        self.addCleanup(c.close)
        return c

    def error(self, c, method, params):
        c.send(method, params, 99)
        msg = c.reply(99)
        self.assertIn("error", msg, msg)
        return msg["error"]

    def test_mode_texts_are_the_active_policy_s(self):
        self.trust()
        v = self.mount("design")
        c = self.agent(v)
        got = c.call("mode.get", {"body": True})
        t = c.call("text.mode", {"store_full": True})
        self.assertEqual((t["mode"], t["generation"], t["fail_closed"]),
                         (got["mode"], got["generation"], False))
        self.assertTrue(t["announcement"].startswith(
            "[piworkfs] Active mode: design. Writable: docs/design/**, styles/tokens.css. "
            "Read-only: everything else. Protected: "), t["announcement"])
        self.assertNotIn("Undo is incomplete", t["announcement"])  # the store is not full
        self.assertEqual(t["writable"], "docs/design/**, styles/tokens.css")
        self.assertTrue(t["system"].startswith("# piworkfs mode: design\n\n"), t["system"])
        self.assertTrue(t["system"].endswith(got["body"].strip()), t["system"])
        self.assertNotIn("switch", t)
        # Byte-stable: the same bytes while the mode holds.
        self.assertEqual(c.call("text.mode", {"store_full": True}), t)
        # The switch announcement from the mode the agent's system prompt holds, and the
        # active plan's line under both.
        plan = {"active": {"name": "cache", "done": 0, "total": 2,
                           "next": {"task": 1, "text": "Add it"}}}
        s = c.call("text.mode", {"from": "plan", "plan": plan})
        line = ('[piworkfs] Active plan cache: 0/2 done; next: task 1, "Add it". Mark it with '
                'the plan_done tool when it is done.')
        self.assertEqual(s["announcement"], t["announcement"] + "\n" + line)
        self.assertTrue(s["switch"].startswith(
            "[piworkfs] The person switched the mode from plan to design during this task. "
            "This message supersedes the mode section of the system prompt.\n" +
            t["announcement"] + "\n\n"), s["switch"])
        self.assertTrue(s["switch"].endswith(got["body"].strip() + "\n" + line), s["switch"])
        # Another mode, without switching: its own rules, no generation.
        b = c.call("text.mode", {"mode": "build"})
        self.assertEqual(b["mode"], "build")
        self.assertIsNone(b["generation"])
        self.assertTrue(b["writable"].startswith("everything except protected paths ("), b)
        self.assertEqual(c.call("mode.get")["mode"], "design")
        # A switch is in the next answer.
        self.set_mode(v, "review")
        r = c.call("text.mode")
        self.assertEqual(r["announcement"], "[piworkfs] Active mode: review. Read-only: every "
                         "write in the project fails (EROFS).")
        self.assertEqual(r["generation"], c.call("mode.get")["generation"])

    def test_refusal_lines_name_the_narrowest_mode_that_allows_each_path(self):
        self.trust()
        v = self.mount("design")
        c = self.agent(v)
        refusals = [
            HACK,
            dict(HACK, path="docs/plans/p.md"),  # plan writes its plans folder, build too
            {"path": ".git/config", "op": "open-write", "errno": "EACCES",
             "reason": "protected", "mode": "design",
             "rule": {"kind": "protected", "pattern": ".git/config", "file": "(built-in)",
                      "layer": "default"}},
            dict(HACK, path="src/old.c", mode="plan", errno="EROFS", reason="read-only"),
        ]
        r = c.call("text.refusals", {"refusals": refusals, "agent": "Pi", "more": 2})
        w = "docs/design/**, styles/tokens.css"
        self.assertEqual(r["lines"], [
            "[piworkfs] Refused: create src/hack.c (EACCES) in design mode, because no allow "
            "rule of design matches it. Writable in design: %s. To create it, ask the person "
            "to run `piworkfs mode build` outside Pi; don't work around the refusal." % w,
            "[piworkfs] Refused: create docs/plans/p.md (EACCES) in design mode, because no "
            "allow rule of design matches it. Writable in design: %s. To create it, ask the "
            "person to run `piworkfs mode plan` outside Pi; don't work around the refusal." % w,
            "[piworkfs] Refused: write .git/config (EACCES) in design mode, because it is "
            "protected (rule \".git/config\", built-in). Writable in design: %s. Only mode off "
            "allows it: if it truly has to change, ask the person to change it themselves." % w,
            # Its own mode's writable set, and looser modes than that one.
            "[piworkfs] Refused: create src/old.c (EROFS) in plan mode, because plan keeps the "
            "project read-only. Writable in plan: only the plans in docs/plans/ (not approved "
            "ones). To create it, ask the person to run `piworkfs mode build` outside Pi; "
            "don't work around the refusal.",
            "[piworkfs] ... and 2 more refused paths (run `piworkfs log --denied` outside Pi "
            "to see them).",
        ])
        # The reader's own way to ask.
        r = c.call("text.refusals", {"refusals": [HACK], "agent": "Claude Code", "ask": "tool"})
        self.assertTrue(r["lines"][0].endswith(
            "To create it, call piworkfs_request_mode with mode build (the person decides), or "
            "ask the person to run `piworkfs mode build` outside Claude Code; don't work around "
            "the refusal."), r)
        r = c.call("text.refusals", {"refusals": [HACK], "ask": "command"})
        self.assertIn("run `piworkfs mode build --reason \"why you need it\"`", r["lines"][0])
        # A mode that does not exist (any more): no writable set to name, no mode to suggest
        # other than a real one.
        r = c.call("text.refusals", {"refusals": [dict(HACK, mode="gone")]})
        self.assertIn("Writable in gone: ?.", r["lines"][0])
        # What a client passes only shapes words: odd objects still get a line.
        r = c.call("text.refusals", {"refusals": [{"path": 7, "rule": "x", "mode": []}]})
        self.assertEqual(len(r["lines"]), 1)
        self.assertTrue(r["lines"][0].startswith("[piworkfs] Refused: write . in "), r)

    def test_a_command_is_blocked_only_when_a_refusal_is_certain(self):
        self.trust()
        v = self.mount("design")
        c = self.agent(v)
        check = c.call("bash.check", {"command": "touch docs/design/ok.md && echo x > src/n.c",
                                      "cwd": ""})
        t = c.call("text.bash", {"check": check, "agent": "Pi"})
        self.assertEqual(t["block"].splitlines(), [
            "[piworkfs] The command was not run: piworkfs checked it first and it would write "
            "where design mode refuses. Nothing ran and nothing changed. Rewrite the command "
            "to write only where design allows.",
            "[piworkfs] Refused: write src/n.c (EACCES) in design mode, because no allow rule "
            "of design matches it. Writable in design: docs/design/**, styles/tokens.css. To "
            "write it, ask the person to run `piworkfs mode build` outside Pi; don't work "
            "around the refusal.",
        ])
        self.assertEqual(t["warn"], "[piworkfs] Before it ran, piworkfs found that this "
                         "command writes where design mode refuses: src/n.c.")
        # Allowed, heuristic or unknown: nothing to say, the command runs.
        for command in ("touch docs/design/ok.md", "eval \"$X\"", "./build.sh"):
            chk = c.call("bash.check", {"command": command, "cwd": ""})
            self.assertEqual(c.call("text.bash", {"check": chk}),
                             {"block": None, "warn": None}, (command, chk))
        self.assertEqual(c.call("text.bash", {"check": dict(check, heuristic=True)}),
                         {"block": None, "warn": None})
        self.assertFalse(os.path.exists(os.path.join(self.project, "src", "n.c")))

    def test_the_announcement_says_when_undo_is_incomplete(self):
        # A change set larger than the originals store's cap: what did not fit is not kept
        # (tests/mount/test_store_cap.py), and the agent that asks (Pi does) is told.
        for i in range(3):
            with open(os.path.join(self.project, "f%d.bin" % i), "wb") as f:
                f.write(bytes([i]) * (2 << 20))
        v = self.wait_answering(self.mount("build", args=("--originals-max-total", "1M")))
        for i in range(3):
            with open(v.path("f%d.bin" % i), "r+b") as f:
                f.write(b"x")
        self.assertTrue(harness.wait_until(lambda: self.rpc(v, "status").get("store_full"), 60))
        c = self.agent(v)
        full = c.call("text.mode", {"store_full": True})["announcement"]
        plain = c.call("text.mode")["announcement"]
        self.assertEqual(full, plain + " Undo is incomplete: the originals store is full, so "
                         "some changes from now on are not kept and cannot be undone.")

    def test_a_view_failing_closed_says_nothing_is_writable(self):
        # A bad glob in the project's config fails every mode closed (test_cli.py): the
        # announcement says why, and a refusal in the active mode names its real writable
        # set, nothing, not a paraphrase of the mode's name.
        harness.write_tree(self.project, {".piworkfs/config.yaml": 'protected: ["s/[x"]\n'})
        v = self.mount("build")
        c = self.agent(v)
        t = c.call("text.mode")
        self.assertTrue(t["fail_closed"], t)
        self.assertTrue(t["announcement"].startswith("[piworkfs] Active mode: build. Failing "
                                                     "closed ("), t["announcement"])
        self.assertEqual(t["writable"], "nothing")
        r = c.call("text.refusals", {"refusals": [dict(HACK, mode="build", errno="EROFS",
                                                       reason="fail-closed")]})
        self.assertEqual(r["lines"], [
            "[piworkfs] Refused: create src/hack.c (EROFS) in build mode, because the file of "
            "mode build is broken, so nothing is writable. Writable in build: nothing. No mode "
            "allows it; tell the person what you needed instead of working around it."])

    def test_overlap_note(self):
        v = self.mount("build")
        c = self.agent(v)
        t = c.call("text.overlap", {"path": "src/a.c", "views": [{"mountpoint": "/v/other"}]})
        self.assertEqual(t["text"], "[piworkfs] Note: src/a.c was also changed by another live "
                         "view of the project, the view at /v/other, in its current work: "
                         "your write went through, but check that it did not overwrite "
                         "another agent's work (`piworkfs changes` shows both).")

    def test_bad_params_are_answered_and_change_nothing(self):
        v = self.mount("design")
        c = self.agent(v)
        for method, params, code, words in (
            ("text.mode", {"mode": "nope"}, -32001, "unknown mode"),
            ("text.mode", {"plan": []}, -32602, "params.plan: expected an object"),
            ("text.mode", {"store_full": "yes"}, -32602, "expected a boolean"),
            ("text.refusals", {}, -32602, "params.refusals: missing"),
            ("text.refusals", {"refusals": [HACK] * 65}, -32602, "more than 64 items"),
            ("text.refusals", {"refusals": [1]}, -32602, "params.refusals[0]: expected an "
                                                           "object"),
            ("text.refusals", {"refusals": [HACK], "ask": "beg"}, -32602, "params.ask"),
            ("text.refusals", {"refusals": [HACK], "agent": "x" * 65}, -32602, "longer than"),
            ("text.bash", {"check": {"verdict": "denied", "targets": [{}] * 257}}, -32602,
             "more than 256 items"),
            ("text.overlap", {"path": "a", "views": [{}] * 17}, -32602, "more than 16 items"),
            ("text.overlap", {"path": "a", "views": [], "x": 1}, -32602, "unknown parameter"),
        ):
            e = self.error(c, method, params)
            self.assertEqual(e["code"], code, (method, params, e))
            self.assertIn(words, e["message"], (method, e))
        self.assertEqual(c.call("mode.get")["mode"], "design")


if __name__ == "__main__":
    unittest.main(verbosity=2)
