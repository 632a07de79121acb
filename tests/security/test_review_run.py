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


class ApproveByIdOrTarget(ReviewCase):
    """`piworkfs mode --approve` answers the request the person saw, never a newer one. Before,
    it listed and answered in one process: the agent asked for design, `piworkfs mode`
    showed plan -> design, the agent asked for off, and `--approve` said "allowed: plan ->
    off"."""

    def ask(self, agent, mode):
        r = agent.call("mode.request", {"mode": mode, "reason": "please"})
        self.assertEqual(r["outcome"], "pending", r)
        return r["id"]

    def shown_id(self, v):
        """The id `piworkfs mode` shows for the pending request, and its target."""
        p = self.run_pw("mode", "--mount", v.mp)
        self.assertEqual(p.returncode, 0, p.stderr)
        m = re.search(r"pending request (\d+): the agent asks to switch \S+ \u2192 (\S+) ",
                      p.stdout)
        self.assertIsNotNone(m, p.stdout)
        self.assertIn("piworkfs mode --approve %s" % m.group(1), p.stdout)
        return int(m.group(1)), m.group(2)

    def test_an_id_no_longer_pending_is_refused_and_approves_nothing(self):
        v = self.mount("plan")
        agent = self.agent(v)
        first = self.ask(agent, "design")
        self.assertEqual(self.shown_id(v), (first, "design"))
        second = self.ask(agent, "off")  # after the person looked
        p = self.run_pw("mode", "--mount", v.mp, "--approve", str(first))
        self.assertEqual(p.returncode, EXIT_DENIED, p.stdout + p.stderr)
        self.assertIn("request %d is no longer pending" % first, p.stderr)
        self.assertNotIn("allowed", p.stdout)
        self.assertEqual(self.mode(v), "plan")
        # The newer request is untouched: the person may still answer it, by its own id.
        self.assertEqual(self.shown_id(v), (second, "off"))
        p = self.run_pw("mode", "--mount", v.mp, "--approve", str(second))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "allowed: plan \u2192 off\n")
        self.assertEqual(self.mode(v), "off")

    def test_approving_by_target_approves_only_that_target(self):
        v = self.mount("plan")
        agent = self.agent(v)
        self.ask(agent, "design")
        self.ask(agent, "off")
        p = self.run_pw("mode", "--mount", v.mp, "--approve", "design")
        self.assertEqual(p.returncode, EXIT_DENIED, p.stdout + p.stderr)
        self.assertIn("asks for off, not design", p.stderr)
        self.assertEqual(self.mode(v), "plan")
        third = self.ask(agent, "design")
        p = self.run_pw("mode", "--mount", v.mp, "--approve", "design")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "allowed: plan \u2192 design\n")
        self.assertEqual(self.mode(v), "design")
        p = self.run_pw("mode", "--mount", v.mp, "--approve", str(third))
        self.assertEqual(p.returncode, EXIT_DENIED, p.stdout + p.stderr)
        self.assertIn("no request is pending", p.stderr)

    def test_a_bare_approve_is_a_usage_error(self):
        v = self.mount("plan")
        agent = self.agent(v)
        self.ask(agent, "off")
        p = self.run_pw("mode", "--mount", v.mp, "--approve")
        self.assertEqual(p.returncode, EXIT_USAGE, p.stdout + p.stderr)
        self.assertIn("--approve", p.stderr)
        self.assertEqual(self.mode(v), "plan")
        # --deny needs nothing: refusing whatever is pending can loosen nothing.
        p = self.run_pw("mode", "--mount", v.mp, "--deny")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.mode(v), "plan")


if __name__ == "__main__":
    unittest.main(verbosity=2)
