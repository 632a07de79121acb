# SPDX-License-Identifier: MIT
"""End to end: a real Codex CLI (pinned in tests/agents/package-lock.json) inside
`piworkfs run`, which wires the MCP server (`piworkfs mcp`) with -c overrides, driven by a
scripted OpenAI Responses model (responses_server.py) on 127.0.0.1, in a view the test
mounts. Codex runs offline here: a custom model provider with an API key in the
environment is all `codex exec` needs.

Codex 0.169 runs only hooks the person has reviewed in its own interface, so `run` adds
none: a refused write reaches the model as the shell's bare error, and the model learns the
rule through the piworkfs tools (integrations/README.md says so)."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from agent_case import AgentCase, design_announcement  # noqa: E402
import harness  # noqa: E402  (tests/lib, on PYTHONPATH)
from responses_server import ScriptedModel, call_outputs  # noqa: E402

CODEX = os.path.join(HERE, "node_modules", "@openai", "codex-linux-x64", "vendor",
                     "x86_64-unknown-linux-musl", "bin", "codex")


class CodexCase(AgentCase):
    client, client_label, client_path = "codex", "Codex", CODEX
    model_class, tool_answers = ScriptedModel, staticmethod(call_outputs)

    def setUp(self):
        super().setUp()
        codex_home = self.client_home(".codex")
        self.env.update({"CODEX_HOME": codex_home, "SCRIPTED_API_KEY": "test"})

    def point_at(self, model):
        self.base_url = model.base_url

    def argv(self, prompt):
        provider = ('model_providers.scripted={name="scripted",base_url="%s",'
                    'env_key="SCRIPTED_API_KEY",wire_api="responses"}' % self.base_url)
        return [harness.PIWORKFS, "run", "--project", self.project, "--", "codex", "exec",
                "--skip-git-repo-check", "-s", "danger-full-access",
                "-c", 'model_provider="scripted"', "-c", 'model="scripted"', "-c", provider,
                prompt]


class TestDesign(CodexCase):
    def test_design_mode_end_to_end(self):
        v, policy, _ = self.design_view()
        model = self.start_model([
            [("exec_command", {"cmd": "echo x > src/from_shell.c"})],
            [("mcp__piworkfs/piworkfs_check", {"paths": ["src/from_shell.c"]})],
            "done.",
        ])
        p = self.run_client("Add src/from_shell.c.")
        self.assert_exited_0(p)
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
        out = self.answers(model)
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
        v, model = self.ask_for_build_and_allow("mcp__piworkfs/piworkfs_request_mode")
        answer = self.answers(model)["call_0_0"]
        self.assertIn("Approved: the mode is now build.", answer)
        # The switch was the run's own (issue 34): the person's view keeps its mode.
        self.assert_mode_of(v, "design")


class TestOwnSandbox(CodexCase):
    """Codex's own sandbox (`-s workspace-write`: bubblewrap in user namespaces of its own)
    inside run's (issue 44, item 12): it starts, and a command it runs writes the project
    through the view, in the run's mode. Before, run's sandbox refused any user namespace
    and bwrap said "Creating new namespace failed", so nothing landed in any mode."""

    def setUp(self):
        super().setUp()
        # Codex will not make its helper's links in a temporary directory that holds its
        # home (our HOME is in the test's temp dir, under /tmp): its temp dir is elsewhere.
        tmpdir = os.path.join(self.tmp, "codex-tmp")
        os.makedirs(tmpdir)
        self.env["TMPDIR"] = tmpdir
        # Codex's sandbox keeps .git read-only in its workspace; the view lets build write
        # there (only .git/config and .git/hooks are protected).
        os.makedirs(os.path.join(self.project, ".git", "info"))

    def argv(self, prompt):
        argv = super().argv(prompt)
        argv[argv.index("danger-full-access")] = "workspace-write"
        return argv

    def run_codex(self, cmd):
        model = self.start_model([[("exec_command", {"cmd": cmd})], "done."])
        p = self.run_client("Write it.")
        self.assert_exited_0(p)
        self.assertEqual(model.errors, [])
        out = self.answers(model).get("call_0_0", "")
        self.assertNotIn("Creating new namespace failed", out + p.stderr)
        return out

    def test_a_command_in_codexs_sandbox_writes_the_project_in_build(self):
        self.mount("build")
        out = self.run_codex("echo from-sandbox > src/sandboxed.c; echo rc=$?; "
                             "echo x > .git/info/probe; echo git=$?")
        with open(os.path.join(self.project, "src", "sandboxed.c")) as f:
            self.assertEqual(f.read(), "from-sandbox\n", out)
        self.assertIn("rc=0", out)
        # Codex's own sandbox was in force: it refused .git, which the view allows.
        self.assertIn("Read-only file system", out)
        self.assertNotIn("git=0", out)
        self.assertFalse(os.path.exists(os.path.join(self.project, ".git", "info", "probe")))

    def test_codexs_sandbox_allows_what_the_mode_refuses_and_the_view_refuses_it(self):
        self.mount("design")
        out = self.run_codex("echo x > src/from_sandbox.c; echo rc=$?")
        self.assertIn("Permission denied", out)
        self.assertNotIn("rc=0", out)
        self.assertFalse(os.path.exists(os.path.join(self.project, "src", "from_sandbox.c")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
