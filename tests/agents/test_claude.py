# SPDX-License-Identifier: MIT
"""End to end: a real Claude Code (pinned in tests/agents/package-lock.json) inside
`piworkfs run`, which wires the hooks (`piworkfs hook claude`) and the MCP server
(`piworkfs mcp`) on its command line, driven by a scripted Anthropic Messages model
(anthropic_server.py) on 127.0.0.1, in a view the test mounts (tests/mount/harness.py owns
the mounts). Every assertion reads what the model received: the request bodies the scripted
model recorded, and the view's own counters.

Claude Code runs offline here: an API key in the environment and ANTHROPIC_BASE_URL are
all it needs in print mode (-p), and nonessential traffic is turned off. A missing binary
fails the test (scripts/setup installs it): in CI a skip is a failure.
"""

import json
import os
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SOURCE, "tests", "mount"))
sys.path.insert(0, os.path.join(SOURCE, "tests", "run"))
sys.path.insert(0, HERE)

import harness  # noqa: E402
from anthropic_server import ScriptedModel, all_text, tool_results  # noqa: E402

CLAUDE = os.path.join(HERE, "node_modules", "@anthropic-ai", "claude-code-linux-x64", "claude")
DEADLINE = 150  # seconds for one Claude Code run


def uniq(xs):
    return list(dict.fromkeys(xs))


def design_announcement(policy):
    """Design mode's announcement, from the daemon's own rules (as tests/pi does)."""
    w = uniq(r["pattern"] for r in policy["rules"] if r["kind"] in ("allow", "token"))
    w = [x for x in w if not (x.endswith("/") and x + "**" in w)]
    prot = uniq(r["pattern"] for r in policy["rules"] if r["kind"] == "protected")
    return ("[piworkfs] Active mode: design. Writable: %s. Read-only: everything else. "
            "Protected: %s." % (", ".join(w), ", ".join(prot)))


def answer_consent(term, allow=True, target="build"):
    """Answers run's consent bar on the outer terminal TERM. The only place that types the
    answer, which is the target mode's name then Enter (any other key denies). Keys in the
    bar's first moments never answer, so the first letter is repeated until the bar shows
    it typed; then the rest of the name, and Enter once the bar says it will allow."""
    end = time.monotonic() + DEADLINE
    first = (target[0] if allow else "#").encode()
    while True:
        at = term.mark()
        term.send(first)
        try:
            term.expect(b"Typed: " + first if allow else b"denied", at, deadline=3)
            break
        except AssertionError:
            if time.monotonic() > end:
                raise
    if allow:
        at = term.mark()
        term.send(target[1:].encode())
        term.expect(b"Press Enter to allow", at, deadline=DEADLINE)
        term.send(b"\r")


class ClaudeCase(harness.MountCase):
    deadline = 280

    def setUp(self):
        super().setUp()
        self.assertTrue(os.path.exists(CLAUDE), "Claude Code is missing at %s: run "
                        "scripts/setup (npm ci in tests/agents)" % CLAUDE)
        # `piworkfs run` covers the state database's directory: keep it apart from HOME.
        os.makedirs(os.path.join(self.tmp, "state"))
        self.state_db = os.path.join(self.tmp, "state", "state.db")
        self.bin = os.path.join(self.tmp, "bin")
        os.makedirs(self.bin)
        os.symlink(CLAUDE, os.path.join(self.bin, "claude"))
        self.env.update({
            "PIWORKFS_STATE_DB": self.state_db,
            "PATH": self.bin + ":" + self.env["PATH"],
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "TERM": "xterm",
        })
        self.env.pop("PIWORKFS_SOCKET", None)

    def start_model(self, steps):
        m = ScriptedModel(steps).start()
        self.addCleanup(m.stop)
        self.env["ANTHROPIC_BASE_URL"] = m.base_url
        return m

    def argv(self, prompt):
        return [harness.PIWORKFS, "run", "--project", self.project, "--", "claude", "-p",
                prompt, "--model", "claude-sonnet-4-5", "--permission-mode", "acceptEdits",
                "--allowedTools", "Bash,Write,Edit"]

    def claude(self, prompt):
        p = subprocess.run(self.argv(prompt), cwd=self.project, env=self.env,
                           capture_output=True, text=True, timeout=DEADLINE,
                           stdin=subprocess.DEVNULL)
        self.last = p
        return p

    def assertRan(self, p, model):
        dump = os.environ.get("AGENTS_TEST_DUMP")  # a directory: keep the requests
        if dump:
            with open(os.path.join(dump, "claude-%s.json" % self.id().rsplit(".", 1)[1]),
                      "w") as f:
                json.dump(model.all_requests, f, indent=1)
        self.assertEqual(p.returncode, 0, "claude exited %d\nstdout: %s\nstderr: %s%s" %
                         (p.returncode, p.stdout, p.stderr, self.daemon_logs()))
        self.assertEqual(model.errors, [], "the scripted model: %s" % model.errors)
        self.assertTrue(model.requests, "Claude Code never asked the model")

    def status(self, v):
        c = harness.RpcClient(self.socket_path(v))
        try:
            return c.call("status")
        finally:
            c.close()


class TestDesign(ClaudeCase):
    def test_design_mode_end_to_end(self):
        v = self.mount("design")
        policy = json.loads(self.run_pw("allowed", "--json", cwd=v.mp, check=True).stdout)
        hack = os.path.join(self.project, "src", "hack.c")
        model = self.start_model([
            [("Write", {"file_path": hack, "content": "int x;\n"})],
            [("Bash", {"command": "echo x > src/from_shell.c", "description": "write"})],
            [("mcp__piworkfs__piworkfs_status", {})],
            "done.",
        ])
        p = self.claude("Add src/hack.c.")
        self.assertRan(p, model)
        first = model.requests[0]
        text = all_text(first)
        # The mode and what it may write, in the model's very first request.
        self.assertTrue("# piworkfs mode: design" in text, "no mode section in the first "
                        "request")
        self.assertTrue(design_announcement(policy) in text, "no announcement in the first "
                        "request: %r" % design_announcement(policy))

        results = {}
        for r in model.requests:
            results.update(tool_results(r))
        # The refused write: stopped before it ran, with mode, rule and what is writable.
        write, is_error = results["toolu_0_0"]
        self.assertTrue(is_error, write)
        self.assertIn("[piworkfs] Refused: write src/hack.c (EACCES) in design mode, because "
                      "no allow rule of design matches it. Writable in design: ", write)
        self.assertIn("piworkfs_request_mode with mode build", write)
        # The shell command certain to be refused never ran.
        shell, is_error = results["toolu_1_0"]
        self.assertTrue(is_error, shell)
        self.assertIn("[piworkfs] The command was not run", shell)
        self.assertIn("Refused: write src/from_shell.c", shell)
        # The MCP server answered through the run's agent socket.
        st, _ = results["toolu_2_0"]
        self.assertIn(design_announcement(policy), st)
        # Neither reached the file system: no file, and the view denied nothing.
        self.assertFalse(os.path.exists(hack))
        self.assertFalse(os.path.exists(os.path.join(self.project, "src", "from_shell.c")))
        self.assertEqual(self.status(v)["denied"], 0, "the view saw an attempt")


class TestRequestMode(ClaudeCase):
    def test_request_mode_raises_the_consent_bar_and_y_enter_switches(self):
        from test_pty import Terminal

        v = self.mount("design")
        model = self.start_model([
            [("mcp__piworkfs__piworkfs_request_mode",
              {"mode": "build", "reason": "implement src/hack.c"})],
            "done.",
        ])
        t = Terminal(self.argv("Switch to build."), self.env, self.project)
        self.addCleanup(t.close)
        t.expect("the agent asks to switch design \u2192 build")
        answer_consent(t, allow=True)
        self.assertEqual(t.wait(DEADLINE), 0, t.buf[-3000:])
        self.assertEqual(model.errors, [])
        results = {}
        for r in model.requests:
            results.update(tool_results(r))
        answer, is_error = results["toolu_0_0"]
        self.assertFalse(is_error, answer)
        self.assertIn("Approved: the mode is now build.", answer)
        self.assertIn("# piworkfs mode: build", answer)
        m = self.run_pw("mode", "--mount", v.mp, "--json", check=True)
        self.assertEqual(json.loads(m.stdout)["mode"], "build", m.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
