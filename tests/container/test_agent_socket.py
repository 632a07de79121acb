# SPDX-License-Identifier: MIT
"""`piworkfs mount --agent-socket PATH`: the restricted socket a pod gives its agent's
container (docs/DEPLOY.md, "A pod you can run"; docs/PROTOCOL.md, "mode.request.answer"),
without Podman: a real view, its agent socket at a path of the test's, the person's answers
through `piworkfs mode --approve` on the operator socket. Python 3 stdlib only.

What is checked: the socket is made where named (0600, outside the operator's directory,
which is refused), answers as an agent socket (status; a loosening refused) and is gone
after the unmount; a request made through it is allowed only with its target typed after
the id (`--approve ID MODE`, or `--approve MODE`), an id alone is refused and leaves it
pending, a wrong target denies it; and the rule does not touch a request through the view's
shared agent socket, which its id alone still allows.
"""

import os
import stat
import subprocess
import unittest

import harness  # tests/lib, on PYTHONPATH
from harness import PIWORKFS, RpcClient


class AgentSocket(harness.MountCase):
    def setUp(self):
        super().setUp()
        self.agent_dir = os.path.join(self.tmp, "agent")
        self.agent = os.path.join(self.agent_dir, "piworkfs.sock")

    def mount_with_agent_socket(self, mode="plan"):
        v = self.mount(mode, args=["--agent-socket", self.agent])
        # Made after the operator socket, which mount() waits for.
        self.assertTrue(harness.wait_until(lambda: os.path.exists(self.agent) or
                                           v.proc.poll() is not None, harness.DEADLINE),
                        v.log())
        return v

    def agent_pw(self, *args):
        """piworkfs ARGS as the agent's container runs it: through PIWORKFS_SOCKET, from
        inside the view."""
        return self.run_pw(*args, cwd=self.mp, env={"PIWORKFS_SOCKET": self.agent})

    def ask(self, mode):
        """The agent asks for MODE through its socket; returns the pending request's id."""
        c = RpcClient(self.agent)
        try:
            r = c.call("mode.request", {"mode": mode, "reason": "the plan is approved"})
        finally:
            c.close()
        self.assertEqual(r["outcome"], "pending", r)
        self.assertTrue(r["needs_target"], r)
        return str(r["id"])

    def mode_now(self, v):
        return self.rpc(v, "mode.get")["mode"]

    def test_the_socket_is_made_where_named_and_is_an_agent_socket(self):
        v = self.mount_with_agent_socket()
        st = os.lstat(self.agent)
        self.assertTrue(stat.S_ISSOCK(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)
        self.assertEqual(os.listdir(self.agent_dir), ["piworkfs.sock"])
        c = RpcClient(self.agent)
        try:
            self.assertEqual(c.call("status")["mode"], "plan")
            with self.assertRaisesRegex(RuntimeError, "-32002.*only tighten"):
                c.call("mode.set", {"mode": "build"})
            with self.assertRaisesRegex(RuntimeError, "-32002"):
                c.call("agent.open")
        finally:
            c.close()
        # The agent's `piworkfs mode build` asks, and says how the person allows it.
        p = self.agent_pw("mode", "build")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertRegex(p.stderr, r"'piworkfs mode --approve \d+ build' where the view's "
                                   r"daemon runs")
        self.assertEqual(self.mode_now(v), "plan")
        self.unmount(v)
        self.assertFalse(os.path.exists(self.agent), "the socket outlives its daemon")

    def test_a_request_through_it_is_allowed_only_with_its_target_typed(self):
        v = self.mount_with_agent_socket()
        rid = self.ask("build")
        p = self.pw_in_view("mode")
        self.assertIn("answer: piworkfs mode --approve %s --mount %s MODE (the mode it asks "
                      "for, typed)" % (rid, v.mp), p.stdout)
        # The id alone: refused, nothing switched, the request still pending.
        p = self.pw_in_view("mode", "--approve", rid, check=False)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("refused: request %s came through an agent socket that no terminal of "
                      "a run shows" % rid, p.stderr)
        self.assertEqual(self.mode_now(v), "plan")
        self.assertEqual(self.rpc(v, "mode.request.list")["pending"]["id"], int(rid))
        # The id and its target: allowed.
        p = self.pw_in_view("mode", "--approve", rid, "build")
        self.assertIn("allowed: plan \u2192 build", p.stdout)
        self.assertEqual(self.mode_now(v), "build")
        # The target alone is typed too.
        rid = self.ask("off")
        self.pw_in_view("mode", "--approve", "off")
        self.assertEqual(self.mode_now(v), "off")

    def test_a_wrong_target_denies_the_request(self):
        v = self.mount_with_agent_socket()
        rid = self.ask("off")
        p = self.pw_in_view("mode", "--approve", rid, "build", check=False)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("request %s asks for off, not build: denied, nothing switched" % rid,
                      p.stderr)
        self.assertEqual(self.mode_now(v), "plan")
        self.assertIsNone(self.rpc(v, "mode.request.list")["pending"])

    def test_the_shared_agent_socket_keeps_the_id_alone(self):
        # The control: the rule is the pod socket's, a request through the view's shared
        # agent socket (answered by `--approve ID` as before) is unchanged.
        v = self.mount_with_agent_socket()
        shared = self.rpc(v, "agent.open")["socket"]
        c = RpcClient(shared)
        try:
            r = c.call("mode.request", {"mode": "build"})
        finally:
            c.close()
        self.assertFalse(r["needs_target"], r)
        self.pw_in_view("mode", "--approve", str(r["id"]))
        self.assertEqual(self.mode_now(v), "build")

    def test_refused_in_the_operator_socket_directory(self):
        opdir = os.path.join(self.runtime, "piworkfs")
        p = subprocess.run([PIWORKFS, "mount", "--mode", "plan", "--agent-socket",
                            os.path.join(opdir, "agent.sock"), self.project, self.mp],
                           env=self.env, capture_output=True, text=True,
                           timeout=harness.DEADLINE)
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("in the control socket's directory", p.stderr)
        self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
        self.assertFalse(harness.is_view_mounted(self.mp))

    def test_refused_where_something_else_is(self):
        os.makedirs(self.agent_dir)
        with open(self.agent, "w") as f:
            f.write("not a socket\n")
        p = subprocess.run([PIWORKFS, "mount", "--mode", "plan", "--agent-socket", self.agent,
                            self.project, self.mp], env=self.env, capture_output=True,
                           text=True, timeout=harness.DEADLINE)
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("exists and is not a socket", p.stderr)
        self.assertFalse(harness.is_view_mounted(self.mp))
        with open(self.agent) as f:
            self.assertEqual(f.read(), "not a socket\n")


if __name__ == "__main__":
    unittest.main(verbosity=2)
