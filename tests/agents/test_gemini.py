# SPDX-License-Identifier: MIT
"""End to end: a real Gemini CLI (pinned in tests/agents/package-lock.json) inside
`piworkfs run`, which wires the MCP server (`piworkfs mcp`) and the hooks
(`piworkfs hook gemini`) in a per-run settings file ($GEMINI_CLI_SYSTEM_DEFAULTS_PATH, in
/run: Gemini reads it only when root owns it and every directory above it), driven by a
scripted Gemini API model (gemini_server.py) on 127.0.0.1, in a view the test mounts.
Every assertion reads what the model received (the recorded request bodies) and the
view's own counters.

Gemini CLI runs offline here: an API key in the environment, GOOGLE_GEMINI_BASE_URL at the
scripted model, the API-key auth selected in a private home's settings (the person's own
~/.gemini is never read), an explicit model (the default, "auto", first asks a routing
model), and telemetry, usage statistics and update checks off."""

import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from agent_case import AgentCase, design_announcement  # noqa: E402
import harness  # noqa: E402  (tests/lib, on PYTHONPATH)
from gemini_server import ScriptedModel, all_text, declarations, function_responses  # noqa: E402

GEMINI = os.path.join(HERE, "node_modules", "@google", "gemini-cli", "bundle", "gemini.js")
MODEL = "gemini-2.5-flash"

# The private home's settings: API-key auth, nothing sent anywhere but the scripted model.
SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
}


# Gemini CLI reads run's per-run settings file only when root owns it (cli/agent/wire.c): as
# anyone else run wires nothing and says so, and there is nothing here to test.
NOT_ROOT = ("piworkfs run wires Gemini CLI only as root (Gemini reads a per-run settings "
            "file only when root owns it)")


@unittest.skipUnless(os.geteuid() == 0, NOT_ROOT)
class GeminiCase(AgentCase):
    client, client_label, client_path = "gemini", "Gemini CLI", GEMINI
    model_class, tool_answers = ScriptedModel, staticmethod(function_responses)

    def setUp(self):
        super().setUp()
        gemini_home = self.client_home(".gemini")
        with open(os.path.join(gemini_home, "settings.json"), "w") as f:
            json.dump(SETTINGS, f)
        self.env.update({
            "GEMINI_API_KEY": "dummy",
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            # One process: the CLI otherwise starts itself again with a larger heap.
            "GEMINI_CLI_NO_RELAUNCH": "true",
        })
        self.env.pop("GEMINI_CLI_SYSTEM_DEFAULTS_PATH", None)

    def point_at(self, model):
        self.env["GOOGLE_GEMINI_BASE_URL"] = model.base_url

    def dump_model(self, model):
        self.dump({"paths": model.paths, "requests": model.all_requests})

    def argv(self, prompt):
        return [harness.PIWORKFS, "run", "--project", self.project, "--", "gemini", "-p",
                prompt, "-m", MODEL, "--approval-mode", "yolo"]

    def gemini(self, prompt, model):
        """`piworkfs run -- gemini -p PROMPT` without a terminal; asserts it ran."""
        p = self.run_client(prompt)
        self.dump_model(model)
        self.assert_exited_0(p)
        self.assertNotIn("Skipping system defaults", p.stderr)
        self.assertEqual(model.errors, [])
        self.assertTrue(model.requests, "Gemini CLI never asked the model")
        return p

class TestDesign(GeminiCase):
    def test_design_mode_end_to_end(self):
        v, policy, hack, model = self.design_attempts(
            "write_file", "file_path", "run_shell_command",
            ("mcp_piworkfs_piworkfs_check", {"paths": ["src/hack.c"]}))
        p = self.gemini("Add src/hack.c.", model)
        self.assertEqual(len(model.requests), 4, p.stderr)
        # The mode and what it may write, in every request: the section and announcement
        # from the SessionStart and BeforeAgent hooks, and piworkfs_status's description
        # (with the active mode) in Gemini CLI's function declarations.
        want = design_announcement(policy)
        for r in model.requests:
            text = all_text(r)
            self.assertEqual(text.count("# piworkfs mode: design"), 1, "no mode section")
            self.assertIn("<hook_context>" + want + "</hook_context>", text)
            status = declarations(r).get("mcp_piworkfs_piworkfs_status")
            self.assertTrue(status, "no piworkfs tools in a request")
            self.assertIn("Now: " + want, status["description"])
        res = self.answers(model)
        # The refused write: stopped before it ran (BeforeTool), with mode, rule and what
        # is writable.
        self.assertIn("Tool execution blocked: [piworkfs] Refused: write src/hack.c (EACCES) "
                      "in design mode, because no allow rule of design matches it. Writable "
                      "in design: docs/design/**.", res["call_0_0"])
        self.assertIn("piworkfs_request_mode with mode build", res["call_0_0"])
        self.assertIn("outside Gemini CLI", res["call_0_0"])
        # The shell command certain to be refused never ran.
        self.assertIn("Tool execution blocked: [piworkfs] The command was not run",
                      res["call_1_0"])
        self.assertIn("Refused: write src/from_shell.c", res["call_1_0"])
        # piworkfs_check (MCP) explains a path the same way.
        self.assertIn("[piworkfs] Refused: write src/hack.c (EACCES) in design mode, because "
                      "no allow rule of design matches it. Writable in design: ",
                      res["call_2_0"])
        # Neither reached the file system: no file, and the view denied nothing.
        self.assert_nothing_written(v, hack, os.path.join(self.project, "src", "from_shell.c"))

    def test_a_refusal_the_preflight_cannot_foresee_is_explained_after(self):
        self.mount("design")
        model = self.start_model([
            [("run_shell_command", {"command": "python3 -c \"open('src/py.c', 'w')\"",
                                    "description": "write"})],
            "done.",
        ])
        self.gemini("Add src/py.c.", model)
        out = self.answers(model)["call_0_0"]
        # It ran (the pre-flight is not certain about python), the view refused it, and
        # AfterTool added the reason to the shell's own error.
        self.assertIn("Permission denied", out)
        self.assertIn("<hook_context>[piworkfs] Refused: write src/py.c (EACCES) in design "
                      "mode", out)
        self.assertFalse(os.path.exists(os.path.join(self.project, "src", "py.c")))


class TestRequestMode(GeminiCase):
    def test_request_mode_raises_the_consent_bar_and_y_enter_switches(self):
        v, model = self.ask_for_build_and_allow("mcp_piworkfs_piworkfs_request_mode")
        answer = self.answers(model)["call_0_0"]
        self.assertIn("Approved: the mode is now build.", answer)
        # The switch was the run's own (issue 34): the person's view keeps its mode.
        self.assert_mode_of(v, "design")


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("SKIP: " + NOT_ROOT)
        sys.exit(77)  # meson's skip
    unittest.main(verbosity=2)
