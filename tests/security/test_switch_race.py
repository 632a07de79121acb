#!/usr/bin/env python3
"""A switch storm against denials that carry a rule: the daemon must not touch a policy it no
longer holds.

A denial's rule and mode name live in the policy that decided it; a switch frees that
policy once the last reference goes. The review reproduced a use-after-free (renaming a
directory into a deny rule's tree while an agent re-selected its current mode) with nothing
but the agent socket and the view: the daemon died under ASan and the view then answered
ENOTCONN. Run under the sanitized build (build-*-asan), where a stale read aborts at once.

Fixture: the shared harness's standard tree, plus
    .piworkfs/modes/build.md    build with writes.deny: ["**/locked/**"]
    w<i>/d/f                    one directory per renamer, moved to w<i>/locked (refused)
"""
import errno
import os
import sys
import threading
import time
import unittest

import harness  # noqa: E402

RENAMERS = 6
SWITCHERS = 2
SWITCHES = 3000  # in all; the old code died within a few hundred under ASan
STORM_DEADLINE = 60.0  # seconds; the storm stops at whichever bound comes first


class SwitchStorm(harness.MountCase):
    def setUp(self):
        super().setUp()
        d = os.path.join(self.project, ".piworkfs", "modes")
        os.makedirs(d)
        with open(os.path.join(d, "build.md"), "w") as f:
            f.write("---\nname: build\nwrites:\n  deny: [\"**/locked/**\"]\n---\nNo locks.\n")
        for i in range(RENAMERS):
            harness.write_tree(self.project, {"w%d/d/f" % i: "x\n"})

    def agent_client(self, v):
        op = harness.RpcClient(self.socket_path(v))
        try:
            path = op.call("agent.open")["socket"]
        finally:
            op.close()
        return lambda: harness.RpcClient(path)

    def test_denials_during_switches_of_the_current_mode(self):
        v = self.mount("build")
        connect = self.agent_client(v)
        before = harness.tree_hash(self.project)
        stop = threading.Event()
        deadline = time.monotonic() + STORM_DEADLINE
        switched = [0] * SWITCHERS
        refused = [0] * RENAMERS
        errors = []

        def dead():
            return v.proc.poll() is not None

        def renamer(i):
            src, dst = v.path("w%d/d" % i), v.path("w%d/locked" % i)
            while not stop.is_set():
                try:
                    os.rename(src, dst)
                    errors.append("rename w%d/d -> w%d/locked went through" % (i, i))
                    stop.set()
                except OSError as e:
                    if e.errno != errno.EACCES:
                        errors.append("rename w%d: %s" % (i, e))
                        stop.set()
                    refused[i] += 1

        def switcher(k):
            # Only the agent socket: re-selecting the active mode is a (trivial) tightening,
            # which a restricted client may do, and each one swaps in a new policy.
            c = connect()
            try:
                while not stop.is_set() and sum(switched) < SWITCHES:
                    if time.monotonic() > deadline:
                        break
                    c.call("mode.set", {"mode": "build"})
                    switched[k] += 1
            except (OSError, ConnectionError, RuntimeError) as e:
                if not dead():
                    errors.append("mode.set on the agent socket: %r" % e)
            finally:
                c.close()
                stop.set()

        threads = [threading.Thread(target=renamer, args=(i,)) for i in range(RENAMERS)]
        threads += [threading.Thread(target=switcher, args=(k,)) for k in range(SWITCHERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(STORM_DEADLINE + 30)
        stop.set()

        log = v.log()
        # A sanitizer report is long: its first lines name the fault and where it happened.
        brief = log[:4000]
        self.assertNotIn("AddressSanitizer", log, brief)
        self.assertNotIn("runtime error", log, brief)
        self.assertFalse(dead(), "the daemon died during the switch storm (exit %s)\n%s" %
                         (v.proc.poll(), brief))
        self.assertEqual(errors, [], brief)
        self.assertTrue(all(refused), "every renamer was refused at least once: %r" % refused)
        self.assertGreater(sum(switched), 0)
        # The view and the agent socket keep answering.
        self.assertIn("d", os.listdir(v.path("w0")))
        c = connect()
        try:
            self.assertEqual(c.call("mode.get")["mode"], "build")
        finally:
            c.close()
        self.assertEqual(before, harness.tree_hash(self.project))


if __name__ == "__main__":
    unittest.main(verbosity=2)
