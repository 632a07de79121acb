# SPDX-License-Identifier: MIT
"""`piworkfs run` without a terminal keeps its agent socket for as long as it runs.

A run opens the sandbox's agent socket as its own (agent.open "own": the socket goes with
the run's connection). Without a terminal the run subscribes to nothing, and the control
server dropped such a silent connection after its idle timeout (30 s), closing the agent
socket under a headless agent (`piworkfs run -- claude -p ...` in a script): every later
call to PIWORKFS_SOCKET was refused. The daemon's idle timeout is made short here
(PIWORKFS_CTL_IDLE_MS) and a silent client of our own shows when it has passed.
"""

import os
import socket
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_run import DEADLINE  # noqa: E402
from test_runs import Agent, RunsTest  # noqa: E402


class Headless(RunsTest):
    def setUp(self):
        super().setUp()
        self.env = dict(self.env, PIWORKFS_CTL_IDLE_MS="300")

    def view_of(self, agent):
        for v in self.status():
            if (v.get("run") or {}).get("pid") == agent.proc.pid:
                return v
        raise AssertionError("piworkfs status names no run with pid %d" % agent.proc.pid)

    def wait_for_idle_drop(self, agent):
        """Connects a client that says nothing and waits until the run's daemon dropped it:
        the idle timeout has then passed for every silent connection older than it."""
        silent = socket.socket(socket.AF_UNIX)
        self.addCleanup(silent.close)
        silent.settimeout(DEADLINE)
        silent.connect(self.view_of(agent)["socket"])
        # recv returns b"" (EOF) once the server closed it; it blocks until then.
        self.assertEqual(silent.recv(1), b"", "the idle client was answered")
        self.assertGreaterEqual(self.view_of(agent)["clients"]["dropped"], 1)

    def test_the_agent_socket_outlives_the_idle_timeout(self):
        agent = Agent(self, "plan", "a")
        self.assertEqual(agent.ask("mode"), "plan")
        self.wait_for_idle_drop(agent)
        # The agent's socket still answers, and a request through it still works.
        self.assertEqual(agent.ask("mode"), "plan")
        self.pw("mode", "--run", agent.id, "build")
        self.assertEqual(agent.ask("mode"), "build")


if __name__ == "__main__":
    unittest.main(verbosity=2)
