# SPDX-License-Identifier: MIT
"""The pod of integrations/kubernetes/pod.yaml on the real Podman (`podman kube play`): a
privileged piworkfs sidecar serving the view, beside an agent's container that gets the view
by mount propagation and its own restricted agent socket (docs/DEPLOY.md, "A pod you can
run"). Python 3 stdlib only.

The class starts the pod once, with the one command DEPLOY.md gives
(integrations/kubernetes/run-pod PROJECT), which builds the image with build-image from the
piworkfs program under test (no registry), and every test works in that pod; the last one
takes it down with `podman kube down` and checks that nothing stays mounted. Podman keeps
everything in the test's temp dir (podman_env.py); skipped (exit 77, with the reason) only
where Podman cannot start a container.

Environment: $PIWORKFS is the binary under test, $PIWORKFS_DEMO the demo project.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from harness import DEADLINE, PIWORKFS, SOURCE, wait_until  # tests/lib, on PYTHONPATH
from podman_env import Podman, mounts_under, preflight  # beside this file

KUBE = os.path.join(SOURCE, "integrations", "kubernetes")
MANIFEST = os.path.join(KUBE, "pod.yaml")
RUN_POD = os.path.join(KUBE, "run-pod")
SIDECAR, AGENT = "agent-1-piworkfs", "agent-1-agent"
VIEW = "/view/tree"
DEMO = os.environ.get("PIWORKFS_DEMO", os.path.join(SOURCE, "demo", "project"))
START_DEADLINE = 300  # the image build and the pod's start, on a loaded machine


class Pod(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.top = tempfile.mkdtemp(prefix="pw-pod-")
        cls.podman = Podman(cls.top)
        cls.project = os.path.join(cls.top, "project")
        shutil.copytree(DEMO, cls.project, symlinks=True)
        try:
            t0 = time.monotonic()
            p = subprocess.run([RUN_POD, cls.project, "--piworkfs", PIWORKFS],
                               env=cls.podman.environ(), capture_output=True, text=True,
                               timeout=START_DEADLINE)
            cls.start_s = time.monotonic() - t0
            if p.returncode != 0:
                raise RuntimeError("run-pod exited %d:\n%s%s" %
                                   (p.returncode, p.stdout, p.stderr))
            cls.started = p.stdout
            print("run-pod: the image built and the pod serving in %.1f s" % cls.start_s,
                  file=sys.stderr)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        subprocess.run([RUN_POD, "--down"], env=cls.podman.environ(), capture_output=True,
                       timeout=DEADLINE)
        cls.podman.teardown()
        shutil.rmtree(cls.top, ignore_errors=True)

    # -- helpers ------------------------------------------------------------------------

    def exec_in(self, container, script, *args):
        """sh -c SCRIPT in CONTAINER (podman exec: the person's kubectl exec)."""
        p = self.podman("exec", container, "sh", "-c", script, "sh", *args)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    def agent(self, script):
        return self.exec_in(AGENT, script)

    def operator(self, *args):
        """piworkfs ARGS --mount /view/tree in the sidecar: the person, from outside."""
        p = self.podman("exec", SIDECAR, "piworkfs", *args, "--mount", VIEW)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    def read_project(self, rel):
        with open(os.path.join(self.project, rel)) as f:
            return f.read()

    def back_to_plan(self):
        rc, out, err = self.operator("mode", "plan")  # a tightening: always allowed
        self.assertEqual(rc, 0, out + err)

    def ask_for(self, mode):
        """The agent asks for MODE (`piworkfs mode MODE` through its agent socket): refused
        for now, pending; returns the request's id as the agent was told it."""
        rc, out, err = self.agent("piworkfs mode %s --reason 'the plan is approved'; "
                                  "echo \"asked=$?\"" % mode)
        self.assertIn("asked=1", out, err)
        m = re.search(r"'piworkfs mode --approve (\d+) %s' where the view's daemon runs" % mode,
                      err)
        self.assertTrue(m, err)
        return m.group(1)

    # -- the tests, in order: the last takes the pod down -------------------------------

    def test_1_a_write_in_plan_is_refused_with_the_reason(self):
        self.back_to_plan()
        before = self.read_project("README.md")
        rc, out, err = self.agent('pwd; echo x > README.md; echo "write=$?"; '
                                  'piworkfs check --write README.md; piworkfs mode')
        self.assertEqual(rc, 0, err)
        self.assertIn(VIEW + "\n", out)  # the agent works in the view (workingDir)
        self.assertIn("write=1", out)
        self.assertIn("README.md: Read-only file system", err)
        # The reason, through the agent socket: the rule that decided, and the mode's text.
        self.assertRegex(out, r"denied\s+README\.md\s+EROFS\s+mode plan writes only its plans "
                         r"folder, docs/plans/")
        self.assertIn("mode plan", out)
        self.assertEqual(self.read_project("README.md"), before)

    def test_2_a_switch_asked_inside_lands_when_allowed_outside_with_its_target_typed(self):
        self.back_to_plan()
        rid = self.ask_for("build")
        # The person sees it from outside the pod, with what to type.
        rc, out, err = self.operator("mode")
        self.assertEqual(rc, 0, err)
        self.assertIn("pending request %s: the agent asks to switch plan \u2192 build "
                      "(\"the plan is approved\")" % rid, out)
        # The command as printed works from anywhere: it names the view too.
        self.assertRegex(out, r"piworkfs mode --approve %s --mount \S+ MODE" % rid)
        # The id alone does not allow it: an id can be copied from the agent's own output.
        rc, out, err = self.operator("mode", "--approve", rid)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("allow it by typing what it asks for after its id", err)
        rc, out, err = self.agent("piworkfs mode")
        self.assertIn("mode plan", out, err)
        # Typed: the switch lands, and the agent's write goes through to the project.
        rc, out, err = self.operator("mode", "--approve", rid, "build")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("allowed: plan \u2192 build", out)
        rc, out, err = self.agent('piworkfs mode | head -n 1; echo "from the agent" > '
                                  'notes.txt; echo "write=$?"')
        self.assertIn("mode build", out, err)
        self.assertIn("write=0", out, err)
        self.assertEqual(self.read_project("notes.txt"), "from the agent\n")
        # A wrong target denies the request, as a wrong key does on run's consent bar.
        rid = self.ask_for("off")
        rc, out, err = self.operator("mode", "--approve", rid, "build")
        self.assertEqual(rc, 1, out + err)
        self.assertIn("request %s asks for off, not build: denied, nothing switched" % rid,
                      err)
        rc, out, err = self.agent("piworkfs mode | head -n 1")
        self.assertIn("mode build", out, err)
        self.back_to_plan()

    def test_3_the_agent_sees_neither_the_project_nor_the_state_nor_the_operator_socket(self):
        # In the sidecar they are there (the control: the names below are the right ones).
        rc, out, err = self.exec_in(SIDECAR, 'ls /project/README.md /state/state.db; '
                                             'ls /run/piworkfs')
        self.assertEqual(rc, 0, out + err)
        self.assertRegex(out, r"\.sock\n")
        # In the agent's container: the image's empty directories, no database, one socket
        # (its own), and no mount of the project's or the state's volume.
        rc, out, err = self.agent(
            'echo "project: $(ls -A /project)"; echo "state: $(ls -A /state)"; '
            'echo "run: $(ls -A /run)"; echo "net: $(ls /sys/class/net)"; '
            'find / \\( -path /proc -o -path /sys \\) -prune -o '
            '\\( -name "state.db*" -o -type s \\) -print; cat /proc/self/mountinfo')
        self.assertEqual(rc, 0, err)
        self.assertIn("project: \n", out)
        self.assertIn("state: \n", out)
        run = re.search(r"^run: (.*)$", out, re.M).group(1)  # Podman's .containerenv
        self.assertNotIn("piworkfs", run)
        self.assertIn("net: lo\n", out)  # run-pod's default: no network but loopback
        sockets = [ln for ln in out.splitlines() if ln.startswith("/") and " " not in ln]
        self.assertEqual(sockets, ["/agent/piworkfs.sock"], out)
        mounts = [ln.split() for ln in out.splitlines() if re.match(r"^\d+ \d+ ", ln)]
        roots = [m[3] for m in mounts]
        self.assertFalse([r for r in roots if "piworkfs-project" in r or "state" in r or
                          r.startswith(self.project)], roots)
        views = [m for m in mounts if m[4] == VIEW]
        self.assertEqual(len(views), 1, mounts)
        self.assertIn("fuse.piworkfs", views[0])

    def test_4_kube_down_leaves_no_mount_behind(self):
        graph = os.path.join(self.top, "graph")
        self.assertTrue([mp for mp in mounts_under(graph) if mp.endswith("/_data/tree")],
                        "the control: the view is mounted on the host's side before")
        p = self.podman("kube", "down", MANIFEST)
        self.assertEqual(p.returncode, 0, p.stderr)
        # Nothing mounted in Podman's storage but the shared bind of its volume directory
        # that run-pod made (a mount of the test's own), no dead FUSE mount anywhere.
        left = wait_until(lambda: [mp for mp in mounts_under(graph)
                                   if mp != os.path.join(graph, "volumes")] == [], DEADLINE)
        self.assertTrue(left, mounts_under(graph))
        with open("/proc/self/mountinfo") as f:
            self.assertNotIn("fuse.piworkfs " + self.project, f.read())
        for what in (("ps", "--all", "--quiet"), ("pod", "ps", "--quiet")):
            p = self.podman(*what)
            self.assertEqual((p.returncode, p.stdout), (0, b""), what)
        # The volumes run-pod made stay until `run-pod --down`, empty and unmounted; those
        # kube play made are gone.
        p = self.podman("volume", "ls", "--quiet")
        self.assertEqual(sorted(p.stdout.decode().split()),
                         ["piworkfs-project", "piworkfs-view"])
        self.assertEqual(os.listdir(os.path.join(graph, "volumes", "piworkfs-view", "_data")),
                         [])


if __name__ == "__main__":
    preflight()
    unittest.main(verbosity=2)
