# SPDX-License-Identifier: MIT
"""`piworkfs mcp` under the official MCP TypeScript SDK's client (mcp_client.mjs; the SDK is
pinned in tests/agents/package-lock.json), in a view the test mounts: the handshake, every
tool, the resource, the notifications of a switch, and errors for bad calls."""

import json
import os
import shutil
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))

import harness  # noqa: E402

SDK = os.path.join(HERE, "node_modules", "@modelcontextprotocol", "sdk")
NODE = shutil.which("node") or "/usr/bin/node"


class TestSdkClient(harness.MountCase):
    tree = {"src/main.c": "int main(void) { return 0; }\n", "docs/design/a.md": "# a\n"}

    def test_every_tool_and_the_switch_notification(self):
        self.assertTrue(os.path.isdir(SDK), "the MCP SDK is missing at %s: run scripts/setup "
                        "(npm ci in tests/agents)" % SDK)
        v = self.mount("design")
        p = subprocess.run([NODE, os.path.join(HERE, "mcp_client.mjs"), harness.PIWORKFS, v.mp],
                           env=self.env, capture_output=True, text=True, timeout=90,
                           cwd=HERE)
        self.assertEqual(p.returncode, 0, "stdout: %s\nstderr: %s" % (p.stdout, p.stderr))
        out = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual(out["server"]["name"], "piworkfs")
        self.assertTrue(out["capabilities"]["tools"]["listChanged"])
        self.assertIn("Active mode: design", out["instructions"])
        names = [t["name"] for t in out["tools"]]
        self.assertEqual(names, ["piworkfs_status", "piworkfs_check", "piworkfs_check_bash",
                                 "piworkfs_request_mode", "piworkfs_changes", "piworkfs_diff"])
        for t in out["tools"]:
            self.assertEqual(t["schema"]["type"], "object", t)
        self.assertIn("Now: [piworkfs] Active mode: design. Writable: docs/design/**.",
                      out["tools"][0]["description"])
        self.assertIn("[piworkfs] Active mode: design. Writable: docs/design/**. Read-only: "
                      "everything else.", out["status"])
        self.assertIn("[piworkfs] Refused: write src/main.c (EACCES) in design mode, because "
                      "no allow rule of design matches it. Writable in design: docs/design/**.",
                      out["check"])
        self.assertIn("docs/design/a.md: write allowed by rule allow \"docs/design/**\"",
                      out["check"])
        self.assertIn("The command was not run", out["check_bash"])
        self.assertIn("Change set", out["changes"])
        self.assertEqual(out["resources"], ["piworkfs://mode"])
        self.assertTrue(out["resource"].startswith("# piworkfs mode: design\n"))
        for k in ("unknown_tool", "wrong_type", "unknown_arg", "huge"):
            self.assertIsNotNone(out[k], k)
            self.assertEqual(out[k]["code"], -32602, (k, out[k]))
        self.assertIn("unknown tool", out["unknown_tool"]["message"])
        self.assertFalse(out["request"]["isError"], out["request"])
        self.assertIn("Approved: the mode is now review.", out["request"]["text"])
        self.assertIn("tools/list_changed", out["notifications"])
        self.assertIn("resources/updated piworkfs://mode", out["notifications"])
        self.assertIn("Now: [piworkfs] Active mode: review.", out["status_after"])
        m = self.run_pw("mode", "--json", cwd=v.mp, check=True)
        self.assertEqual(json.loads(m.stdout)["mode"], "review")


if __name__ == "__main__":
    unittest.main(verbosity=2)
