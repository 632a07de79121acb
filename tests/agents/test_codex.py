# SPDX-License-Identifier: MIT
"""End to end: a real Codex CLI (pinned in tests/agents/package-lock.json) inside
`piworkfs run`, which wires the MCP server (`piworkfs mcp`) with -c overrides, driven by a
scripted OpenAI Responses model (responses_server.py) on 127.0.0.1, in a view the test
mounts. Codex runs offline here: a custom model provider with an API key in the
environment is all `codex exec` needs.

Codex 0.169 runs only hooks the person has reviewed in its own interface, so `run` adds
none: a refused write reaches the model as the shell's bare error, and the model learns the
rule through the piworkfs tools (integrations/README.md says so)."""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from agent_case import DEADLINE, AgentCase, answer_consent, design_announcement  # noqa: E402
import harness  # noqa: E402  (tests/lib, on PYTHONPATH)
from run_case import Terminal  # noqa: E402  (tests/lib, on PYTHONPATH)
from responses_server import ScriptedModel, call_outputs  # noqa: E402

CODEX = os.path.join(HERE, "node_modules", "@openai", "codex-linux-x64", "vendor",
                     "x86_64-unknown-linux-musl", "bin", "codex")


class CodexCase(AgentCase):
    client, client_label, client_path = "codex", "Codex", CODEX

    def setUp(self):
        super().setUp()
        codex_home = os.path.join(self.env["HOME"], ".codex")
        os.makedirs(codex_home)
        self.env.update({"CODEX_HOME": codex_home, "SCRIPTED_API_KEY": "test"})

    def start_model(self, steps):
        m = ScriptedModel(steps).start()
        self.addCleanup(m.stop)
        self.base_url = m.base_url
        return m

    def argv(self, prompt):
        provider = ('model_providers.scripted={name="scripted",base_url="%s",'
                    'env_key="SCRIPTED_API_KEY",wire_api="responses"}' % self.base_url)
        return [harness.PIWORKFS, "run", "--project", self.project, "--", "codex", "exec",
                "--skip-git-repo-check", "-s", "danger-full-access",
                "-c", 'model_provider="scripted"', "-c", 'model="scripted"', "-c", provider,
                prompt]

    def outputs(self, model):
        out = {}
        for r in model.requests:
            out.update(call_outputs(r))
        return out


class TestDesign(CodexCase):
    def test_design_mode_end_to_end(self):
        v = self.mount("design")
        policy = json.loads(self.run_pw("allowed", "--json", cwd=v.mp, check=True).stdout)
        model = self.start_model([
            [("exec_command", {"cmd": "echo x > src/from_shell.c"})],
            [("mcp__piworkfs/piworkfs_check", {"paths": ["src/from_shell.c"]})],
            "done.",
        ])
        p = subprocess.run(self.argv("Add src/from_shell.c."), cwd=self.project, env=self.env,
                           capture_output=True, text=True, timeout=DEADLINE,
                           stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, "codex exited %d\nstdout: %s\nstderr: %s%s" %
                         (p.returncode, p.stdout, p.stderr, self.daemon_logs()))
        self.assertEqual(model.errors, [])
        self.assertGreaterEqual(len(model.requests), 3, p.stderr)
        # The mode and what it may write, in every request: the server's instructions and
        # piworkfs_status's description are in Codex's tool list.
        want = design_announcement(policy)
        for r in model.requests:
            ns = [t for t in r["tools"] if t.get("name") == "mcp__piworkfs"]
            self.assertTrue(ns, "no piworkfs tools in a request")
            self.assertIn(want, ns[0]["description"])
            status = [t for t in ns[0]["tools"] if t["name"] == "piworkfs_status"][0]
            self.assertIn("Now: " + want, status["description"])
        out = self.outputs(model)
        # The shell's refusal comes back bare (no hook in Codex): the view refused it.
        self.assertIn("Permission denied", out["call_0_0"])
        self.assertFalse(os.path.exists(os.path.join(self.project, "src", "from_shell.c")))
        # piworkfs_check explains it: mode, rule, what is writable, the mode to ask for.
        self.assertIn("[piworkfs] Refused: write src/from_shell.c (EACCES) in design mode, "
                      "because no allow rule of design matches it. Writable in design: ",
                      out["call_1_0"])
        self.assertIn("piworkfs_request_mode with mode build", out["call_1_0"])


class TestRequestMode(CodexCase):
    def test_request_mode_raises_the_consent_bar_and_y_enter_switches(self):
        v = self.mount("design")
        model = self.start_model([
            [("mcp__piworkfs/piworkfs_request_mode",
              {"mode": "build", "reason": "implement src/hack.c"})],
            "done.",
        ])
        t = Terminal(self.argv("Switch to build."), self.env, self.project)
        self.addCleanup(t.close)
        t.expect("the agent asks to switch design \u2192 build")
        answer_consent(t, allow=True)
        self.assertEqual(t.wait(DEADLINE), 0, t.buf[-3000:])
        self.assertEqual(model.errors, [])
        answer = self.outputs(model)["call_0_0"]
        self.assertIn("Approved: the mode is now build.", answer)
        # The switch was the run's own (issue 34): the person's view keeps its mode.
        m = self.run_pw("mode", "--json", cwd=v.mp, check=True)
        self.assertEqual(json.loads(m.stdout)["mode"], "design", m.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
