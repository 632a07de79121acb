# SPDX-License-Identifier: MIT
"""End to end: a real opencode (pinned in tests/agents/package-lock.json) inside
`piworkfs run`, which puts the MCP server and the plugin (integrations/opencode) in
$OPENCODE_CONFIG_CONTENT, driven by a scripted OpenAI-compatible chat model
(tests/pi/model_server.py) on 127.0.0.1, in a view the test mounts. opencode runs offline
here: an openai-compatible provider in the config, and its model list and updates off."""

import json
import os
import shutil
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SOURCE, "tests", "pi"))
sys.path.insert(0, HERE)

from agent_case import DEADLINE, AgentCase, design_announcement  # noqa: E402
import harness  # noqa: E402  (tests/lib, on PYTHONPATH)
from model_server import ScriptedModel, text_of, tool_results  # noqa: E402

OPENCODE = os.path.join(HERE, "node_modules", "opencode-linux-x64", "bin", "opencode")
PLUGIN_SDK = "@opencode-ai/plugin"


def closure(lock, name, seen=None):
    """The package NAME and everything it depends on, as paths in tests/agents'
    node_modules (package-lock.json's "packages"; npm's resolution: the nearest
    node_modules up from the dependent)."""
    seen = set() if seen is None else seen
    path = "node_modules/" + name
    if path in seen or path not in lock["packages"]:
        return seen
    seen.add(path)
    for dep in lock["packages"][path].get("dependencies", {}):
        closure(lock, dep, seen)
    return seen


def seed_opencode_config(config_dir):
    """opencode installs its plugin SDK into its config directory at every start (in the
    background, from the npm registry; offline it waits for that install to fail). Seeded
    from the copy pinned in tests/agents' lock, as opencode itself would leave it, the
    install has nothing to do and the test needs no network."""
    with open(os.path.join(HERE, "package-lock.json")) as f:
        lock = json.load(f)
    version = lock["packages"]["node_modules/" + PLUGIN_SDK]["version"]
    os.makedirs(config_dir, exist_ok=True)
    with open(os.path.join(config_dir, "package.json"), "w") as f:
        json.dump({"dependencies": {PLUGIN_SDK: version}}, f)
    packages = {"": {"dependencies": {PLUGIN_SDK: version}}}
    for path in sorted(closure(lock, PLUGIN_SDK)):
        shutil.copytree(os.path.join(HERE, path), os.path.join(config_dir, path),
                        symlinks=True)
        packages[path] = {k: v for k, v in lock["packages"][path].items() if k != "dev"}
    # npm's own lock and its record of node_modules: an install then finds it done.
    seeded = {"name": "opencode", "lockfileVersion": 3, "requires": True, "packages": packages}
    with open(os.path.join(config_dir, "package-lock.json"), "w") as f:
        json.dump(seeded, f, indent=2)
    hidden = dict(seeded, packages={k: v for k, v in packages.items() if k})
    with open(os.path.join(config_dir, "node_modules", ".package-lock.json"), "w") as f:
        json.dump(hidden, f, indent=2)


def agent_turns(calls):
    """Steps for ScriptedModel: opencode also asks the model for a title (a request without
    tools); those get a title, and the agent's turns get CALLS in order."""
    queue = list(calls)

    def step(i, req):
        if not req.get("tools"):
            return "a title"
        return queue.pop(0) if queue else "done."
    return [step] * 64


def system_of(req):
    return "\n".join(text_of(m.get("content")) for m in req.get("messages", [])
                     if m.get("role") == "system")


class OpencodeCase(AgentCase):
    client, client_label, client_path = "opencode", "opencode", OPENCODE
    model_class, tool_answers = ScriptedModel, staticmethod(tool_results)

    def setUp(self):
        super().setUp()
        home = self.env["HOME"]
        self.env.update({
            "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
            "XDG_CACHE_HOME": os.path.join(home, ".cache"),
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        })
        seed_opencode_config(os.path.join(self.env["XDG_CONFIG_HOME"], "opencode"))

    def script(self, calls):
        return agent_turns(calls)

    def point_at(self, model):
        self.env["OPENCODE_CONFIG_CONTENT"] = json.dumps({
            "provider": {"scripted": {
                "npm": "@ai-sdk/openai-compatible", "name": "scripted",
                "options": {"baseURL": model.base_url, "apiKey": "test"},
                "models": {"scripted": {"name": "scripted", "tool_call": True}}}},
            "model": "scripted/scripted", "autoupdate": False, "share": "disabled"})

    def argv(self, prompt):
        return [harness.PIWORKFS, "run", "--project", self.project, "--", "opencode", "run",
                "--auto", prompt]

    # Every test runs opencode on a terminal of its own (self.terminal), as a person runs
    # it: without a terminal, run's own agent socket goes away once its connection has been
    # idle for 30 s, and opencode may take that long to start (see the note in
    # integrations/README.md).

    def main_requests(self, model):
        return [r for r in model.requests if r.get("tools")]

class TestDesign(OpencodeCase):
    def test_design_mode_end_to_end(self):
        v, policy, hack, model = self.design_attempts(
            "write", "filePath", "bash", ("piworkfs_piworkfs_status", {}), then=())
        t = self.terminal("Add src/hack.c.")
        self.assertEqual(t.wait(DEADLINE), 0, t.buf[-3000:])
        self.assertEqual(model.errors, [])
        main = self.main_requests(model)
        self.assertGreaterEqual(len(main), 4, t.buf[-3000:])
        # The mode section and the announcement in the system prompt of every request.
        for r in main:
            s = system_of(r)
            self.assertEqual(s.count("# piworkfs mode: design"), 1,
                             "%s\n%s" % ([t["function"]["name"] for t in r["tools"]], s[:300]))
            self.assertTrue(design_announcement(policy) in s, "no announcement")
        res = self.answers(model)
        write = [t for k, t in res.items() if "src/hack.c" in t]
        self.assertTrue(write, res)
        self.assertIn("[piworkfs] Refused: write src/hack.c (EACCES) in design mode, because "
                      "no allow rule of design matches it. Writable in design: ", write[0])
        self.assertIn("outside opencode", write[0])
        shell = [t for t in res.values() if "The command was not run" in t]
        self.assertTrue(shell, res)
        self.assertIn("Refused: write src/from_shell.c", shell[0])
        self.assertTrue(any(design_announcement(policy) in t for t in res.values()), res)
        self.assert_nothing_written(v, hack, os.path.join(self.project, "src", "from_shell.c"))


class TestRequestMode(OpencodeCase):
    def test_request_mode_raises_the_consent_bar_and_y_enter_switches(self):
        # opencode's script ends with "done." by itself (agent_turns).
        v, model = self.ask_for_build_and_allow("piworkfs_piworkfs_request_mode", then=())
        res = self.answers(model)
        self.assertTrue(any("Approved: the mode is now build." in x for x in res.values()), res)
        # The switch was the run's own (issue 34): the person's view keeps its mode.
        self.assert_mode_of(v, "design")


if __name__ == "__main__":
    unittest.main(verbosity=2)
