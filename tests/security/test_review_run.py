#!/usr/bin/env python3
"""Review round four (docs/SECURITY.md): the person's approvals and the agent's switches.

Each test reproduces what the review did through the control sockets, with the agent as a
client of the view's agent socket (`agent.open`, as `piworkfs run` opens one) and the
person as `piworkfs mode` on the operator socket.

Fixture: the shared harness's standard tree; the bundled modes (plan writes nothing,
design writes docs/, build writes most, off everything).
"""
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mount"))
import harness  # noqa: E402

EXIT_USAGE, EXIT_DENIED = 2, 1


class ReviewCase(harness.MountCase):
    def operator(self, v):
        c = harness.RpcClient(self.socket_path(v))
        self.addCleanup(c.close)
        return c

    def agent(self, v):
        """A client of the view's agent socket: restricted, as the sandbox's agent is."""
        path = self.operator(v).call("agent.open")["socket"]
        c = harness.RpcClient(path)
        self.addCleanup(c.close)
        return c

    def mode(self, v):
        return self.operator(v).call("mode.get")["mode"]


class SameModeSwitch(ReviewCase):
    """A switch to the mode in force starts no change set: only the person does
    (`checkpoint`). Before, the agent's `mode.set` to the current mode started one, in effect
    a checkpoint of its own, and with a small store cap it could push the change set
    holding its own deletions out at the next prune."""

    def current_set(self, op):
        return op.call("changes.list")["current"]

    def test_the_agents_switch_to_the_current_mode_starts_no_change_set(self):
        v = self.mount("build")
        op, agent = self.operator(v), self.agent(v)
        with open(v.path("src/a.c"), "w") as f:
            f.write("changed\n")
        before = self.current_set(op)
        gen = op.call("mode.get")["generation"]
        replies = []
        for _ in range(3):
            replies.append(agent.call("mode.set", {"mode": "build"}))
            self.assertEqual(agent.call("mode.request", {"mode": "build"})["outcome"], "approved")
        self.assertEqual(self.current_set(op), before, "the agent started a change set")
        # Nothing was installed: the replies describe the policy in force all along.
        for r in replies:
            self.assertEqual((r["mode"], r["previous"], r["generation"]), ("build", "build", gen))
        # Nor does the person's own `piworkfs mode build`: a checkpoint is asked for by name.
        self.set_mode(v, "build")
        self.assertEqual(self.current_set(op), before)
        # The control: the measure sees a new change set when the person starts one.
        op.call("checkpoint", {"name": "mine"})
        self.assertNotEqual(self.current_set(op), before)
        # A real switch still is one.
        self.assertEqual(agent.call("mode.set", {"mode": "plan"})["previous"], "build")
        self.assertEqual(self.mode(v), "plan")


if __name__ == "__main__":
    unittest.main(verbosity=2)
