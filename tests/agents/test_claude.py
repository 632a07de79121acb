# SPDX-License-Identifier: MIT
"""End to end: a real Claude Code (pinned in tests/agents/package-lock.json) inside
`piworkfs run`, which wires the hooks (`piworkfs hook claude`) and the MCP server
(`piworkfs mcp`) on its command line, driven by a scripted Anthropic Messages model
(anthropic_server.py) on 127.0.0.1, in a view the test mounts (tests/lib/harness.py owns
the mounts). Every assertion reads what the model received: the request bodies the scripted
model recorded, and the view's own counters.

Claude Code runs offline here: an API key in the environment and ANTHROPIC_BASE_URL are
all it needs in print mode (-p), and nonessential traffic is turned off. A missing binary
fails the test (scripts/setup installs it): in CI a skip is a failure.
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from agent_case import AgentCase, design_announcement  # noqa: E402
import harness  # noqa: E402  (tests/lib, on PYTHONPATH)
from anthropic_server import ScriptedModel, all_text, tool_results  # noqa: E402

CLAUDE = os.path.join(HERE, "node_modules", "@anthropic-ai", "claude-code-linux-x64", "claude")


class ClaudeCase(AgentCase):
    client, client_label, client_path = "claude", "Claude Code", CLAUDE
    model_class, tool_answers = ScriptedModel, staticmethod(tool_results)

    def setUp(self):
        super().setUp()
        self.env.update({
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
        })

    def point_at(self, model):
        self.env["ANTHROPIC_BASE_URL"] = model.base_url

    def argv(self, prompt):
        return [harness.PIWORKFS, "run", "--project", self.project, "--", "claude", "-p",
                prompt, "--model", "claude-sonnet-4-5", "--permission-mode", "acceptEdits",
                "--allowedTools", "Bash,Write,Edit"]

    def assertRan(self, p, model):
        self.dump_model(model)
        self.assert_exited_0(p)
        self.assertEqual(model.errors, [], "the scripted model: %s" % model.errors)
        self.assertTrue(model.requests, "Claude Code never asked the model")

class TestDesign(ClaudeCase):
    def test_design_mode_end_to_end(self):
        v, policy, hack, model = self.design_attempts(
            "Write", "file_path", "Bash", ("mcp__piworkfs__piworkfs_status", {}))
        p = self.run_client("Add src/hack.c.")
        self.assertRan(p, model)
        first = model.requests[0]
        text = all_text(first)
        # The mode and what it may write, in the model's very first request.
        self.assertTrue("# piworkfs mode: design" in text, "no mode section in the first "
                        "request")
        self.assertTrue(design_announcement(policy) in text, "no announcement in the first "
                        "request: %r" % design_announcement(policy))

        results = self.answers(model)
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
        self.assert_nothing_written(v, hack, os.path.join(self.project, "src", "from_shell.c"))


class TestRequestMode(ClaudeCase):
    def test_request_mode_raises_the_consent_bar_and_y_enter_switches(self):
        v, model = self.ask_for_build_and_allow("mcp__piworkfs__piworkfs_request_mode")
        answer, is_error = self.answers(model)["toolu_0_0"]
        self.assertFalse(is_error, answer)
        self.assertIn("Approved: the mode is now build.", answer)
        self.assertIn("# piworkfs mode: build", answer)
        # The switch was the run's own (issue 34): the person's view keeps its mode.
        self.assert_mode_of(v, "design")


if __name__ == "__main__":
    unittest.main(verbosity=2)
