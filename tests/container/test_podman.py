# SPDX-License-Identifier: MIT
"""`piworkfs run --podman IMAGE`: the agent in a Podman container over the view (Python 3
stdlib only).

No registry is reachable, so the image is built here: the root file system that
integrations/kubernetes/build-image stages (busybox from Debian's busybox-static, the
piworkfs program under test with the libraries it loads), as a tar for `podman import`. Podman keeps everything in the test's temp dir, and the test
is skipped (exit 77, with the reason) where Podman cannot start a container
(podman_env.py).

Environment: $PIWORKFS is the binary under test, $PIWORKFS_DEMO the demo project,
$SOURCE_MODES the bundled modes.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from podman_env import Podman, preflight  # beside this file
from run_case import (DEADLINE, LOOSEN_HINT, PIWORKFS, RunCase,  # tests/lib, on PYTHONPATH
                      Terminal)
from harness import SOURCE  # tests/lib

BUILD_IMAGE = os.path.join(SOURCE, "integrations", "kubernetes", "build-image")

IMAGE = "localhost/piworkfs-test-agent:1"
GRACE_S = 0.4  # keys read this soon after the consent bar appeared are dropped (run/ask.c)


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return [a.decode() for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def descendants(pid):
    """Every descendant of PID, breadth first."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        for task in os.listdir("/proc/%d/task" % p) if os.path.isdir("/proc/%d" % p) else []:
            try:
                with open("/proc/%d/task/%s/children" % (p, task)) as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                kids = []
            out += kids
            todo += kids
    return out


class PodmanRun(RunCase):
    tmp_prefix = "t-"
    piworkfs_on_path = False

    @classmethod
    def setUpClass(cls):
        cls.top = cls.tmp_parent = tempfile.mkdtemp(prefix="pw-podman-")
        cls.podman = Podman(cls.top)
        tar = os.path.join(cls.top, "rootfs.tar")
        p = subprocess.run([BUILD_IMAGE, "--piworkfs", PIWORKFS, "--rootfs", tar],
                           capture_output=True, timeout=DEADLINE)
        if p.returncode == 0:
            p = cls.podman("import", tar, IMAGE)
        if p.returncode != 0:
            cls.tearDownClass()
            raise RuntimeError("the image: " + p.stderr.decode())

    @classmethod
    def tearDownClass(cls):
        cls.podman.teardown()
        shutil.rmtree(cls.top, ignore_errors=True)

    def setUp(self):
        super().setUp()
        self.env.update(self.podman.env)

    def sh(self, script, *opts, args=()):
        """piworkfs run --podman IMAGE OPTS -- sh -c SCRIPT sh ARGS..., in the project."""
        return subprocess.run([PIWORKFS, "run", "--podman", IMAGE, *opts, "--project",
                               self.project, "--", "sh", "-c", script, "sh", *args],
                              cwd=self.project,
                              env=self.env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=DEADLINE)

    def assert_nothing_left_running(self):
        """No process of this test's run is left on the host (the supervisor, the signal
        forwarder and Podman name files in the test's temp dir on their command lines)."""
        def left():
            out = []
            for pid in os.listdir("/proc"):
                if pid.isdigit() and int(pid) != os.getpid() and \
                        any(self.tmp in a for a in cmdline(int(pid))):
                    out.append(" ".join(cmdline(int(pid)))[:200])
            return out
        deadline = time.monotonic() + DEADLINE
        while left() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(left(), [], "processes of the run are still there")

    def read_host(self, rel):
        with open(os.path.join(self.project, rel)) as f:
            return f.read()

    def test_the_mode_holds_inside_the_container(self):
        readme = self.read_host("README.md")
        main_c = self.read_host("src/main.c")
        p = self.sh('cat README.md; echo x > src/main.c; echo "src=$?"; '
                    'echo y > "$PWD/docs/design/new.md"; echo "design=$?"; pwd',
                    "--mode", "design")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(readme, p.stdout)
        self.assertIn("src=1", p.stdout)
        # As under bwrap: the view shows the file read-only, so the kernel says EACCES.
        self.assertIn("src/main.c: Permission denied", p.stderr)
        self.assertIn("design=0", p.stdout, p.stderr)
        self.assertIn(self.project + "\n", p.stdout)
        self.assertIn("piworkfs: run: project %s" % self.project, p.stderr)
        self.assertEqual(self.read_host("src/main.c"), main_c)
        self.assertEqual(self.read_host("docs/design/new.md"), "y\n")
        self.assert_unmounted()

    def test_the_agent_socket_answers_and_refuses_to_loosen(self):
        p = self.sh('echo y > docs/design/a.md; piworkfs mode; '
                    'piworkfs mode review && piworkfs mode; '
                    'piworkfs mode build; echo "loosen=$?"', "--mode", "plan")
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertIn("docs/design/a.md: Read-only file system", p.stderr)
        self.assertIn("plan", lines[0])
        self.assertIn("review", p.stdout)
        self.assertIn("loosen=1", p.stdout)
        self.assertIn("refused", p.stderr)
        self.assertIn(LOOSEN_HINT, p.stderr)

    def test_nothing_else_of_the_project_reaches_the_container(self):
        # The view is bound at the project's path (its device is the view's, not the
        # backing directory's); of the temp dir around it, where the state database and
        # the person's home are, only the two bind points' parents are there, made empty
        # by Podman; the agent socket's directory holds the agent socket alone; and there
        # is no network but loopback.
        st = os.stat(self.project)
        sockdir = os.path.join(self.runtime, "piworkfs")
        p = self.sh('stat -c "%d %i" "$PWD"; echo "sock=$PIWORKFS_SOCKET"; '
                    'ls -a "$(dirname "$PIWORKFS_SOCKET")"; echo "around: $(ls "$1")"; '
                    'ls /sys/class/net; true', "--mode", "plan", args=(self.tmp,))
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        dev, ino = (int(x) for x in lines[0].split())
        self.assertNotEqual((dev, ino), (st.st_dev, st.st_ino),
                            "the backing directory itself is inside")
        agent = lines[1][len("sock="):]
        self.assertTrue(agent.startswith(sockdir + "/") and agent.endswith(".agent.sock"),
                        agent)
        self.assertIn("around: proj\nrun\n", p.stdout)
        socks = [n for n in lines[2:] if n.endswith(".sock")]
        self.assertEqual(socks, [os.path.basename(agent)], "only the agent socket is inside")
        self.assertEqual(lines[-1], "lo", "no network but loopback")

    def test_hidden_paths_are_absent(self):
        # Mount a view outside first, so its operator socket and state database exist.
        mp = os.path.join(self.tmp, "view")
        os.mkdir(mp)
        subprocess.run([PIWORKFS, "mount", "--mode", "plan", self.project, mp], env=self.env,
                       check=True, capture_output=True, timeout=DEADLINE)
        sockdir = os.path.join(self.runtime, "piworkfs")
        socks = [os.path.join(sockdir, n) for n in os.listdir(sockdir) if n.endswith(".sock")
                 and not n.endswith(".agent.sock")]
        self.assertTrue(socks)
        self.assertTrue(os.path.exists(self.state_db))
        hidden = socks + [self.state_db, os.path.dirname(self.state_db), mp,
                          os.path.join(self.tmp, "home")]
        script = 'for f in "$@"; do [ -e "$f" ] && echo "reachable: $f"; done; true'
        p = subprocess.run([PIWORKFS, "run", "--podman", IMAGE, "--project", self.project,
                            "--", "sh", "-c", script, "sh", *hidden], cwd=mp, env=self.env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=DEADLINE)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "")
        # Every run has a view of its own (the live one's paths above are hidden all the same).
        self.assertIn("(its own)", p.stderr)
        self.assertNotIn("view %s " % mp, p.stderr)
        subprocess.run([PIWORKFS, "umount", mp], env=self.env, capture_output=True,
                       timeout=DEADLINE)

    def test_exit_status_and_stdin_pass_through(self):
        p = subprocess.run([PIWORKFS, "run", "--podman", IMAGE, "--project", self.project,
                            "--", "sh", "-c", "read x; echo \"got $x\"; exit 7"],
                           cwd=self.project, env=self.env, input="hello\n",
                           capture_output=True, text=True, timeout=DEADLINE)
        self.assertEqual(p.returncode, 7, p.stderr)
        self.assertEqual(p.stdout, "got hello\n")

    def test_the_consent_bar_asks_the_person_and_the_switch_holds_inside(self):
        # On a terminal: the agent in the container asks for build; the question is drawn
        # on the person's terminal, the person types the target's name and Enter there,
        # and the container's next `piworkfs mode` says build. The command's own terminal
        # is a pty of the container (tty names /dev/pts/N there).
        t = Terminal([PIWORKFS, "run", "--podman", IMAGE, "--mode", "plan", "--project",
                      self.project, "--", "sh", "-c",
                      'tty; piworkfs mode build --reason "from the container"; '
                      'echo "asked=$?"; piworkfs mode'], self.env, self.project, cols=160)
        self.addCleanup(t.close)
        t.expect(rb"/dev/pts/\d+")
        t.expect("the agent asks to switch plan \u2192 build".encode())
        time.sleep(GRACE_S)  # the grace time is the condition: keys before it never count
        at = t.mark()
        t.send(b"build")
        t.expect(b"Press Enter to allow", at)
        t.send(b"\r")
        t.expect(b"asked=0", at)
        m = t.expect(rb"asked=0[\s\S]*build", at)
        self.assertTrue(m)
        self.assertEqual(t.proc.wait(timeout=DEADLINE), 0, t.buf[-2000:])

    def signal_run(self, script, sig):
        """Starts SCRIPT in a container, waits for its "ready" line, sends SIG to `run`;
        returns (exit status, the rest of stdout, stderr)."""
        got = self.signal_when_ready([PIWORKFS, "run", "--podman", IMAGE, "--project",
                                      self.project, "--", "sh", "-c", script], sig,
                                     stdin=subprocess.DEVNULL)
        self.assert_unmounted()
        self.assert_nothing_left_running()
        return got

    def test_sigterm_to_run_reaches_the_command(self):
        rc, out, err = self.signal_run('trap "echo got-term; exit 3" TERM; echo ready; '
                                       'while :; do sleep 0.1; done', signal.SIGTERM)
        self.assertEqual((rc, out), (3, "got-term\n"), err)

    def test_sigint_ends_a_command_that_does_not_catch_it(self):
        # The command is not the container's PID 1 (an init is, as bwrap's reaper is in
        # the sandbox), so a signal it does not handle ends it as on a terminal.
        rc, out, err = self.signal_run('echo ready; exec sleep 1000', signal.SIGINT)
        self.assertEqual(rc, 128 + signal.SIGINT, err)

    def test_the_container_never_outlives_the_run(self):
        # Podman's client killed outright (SIGKILL: nothing of it can clean up): the run
        # still removes the container it started, so the agent does not go on working
        # after `run` has returned.
        proc = subprocess.Popen([PIWORKFS, "run", "--podman", IMAGE, "--project",
                                 self.project, "--", "sh", "-c",
                                 'echo ready; while :; do sleep 0.1; done'],
                                cwd=self.project, env=self.env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            self.assertEqual(proc.stdout.readline(), "ready\n")
            self.assertEqual(len(self.containers()), 1)
            client = [pid for pid in descendants(proc.pid)
                      if cmdline(pid)[:2] == ["podman", "run"]]
            self.assertEqual(len(client), 1)
            os.kill(client[0], signal.SIGKILL)
            proc.communicate(timeout=DEADLINE)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertEqual(self.containers(), [])
        self.assert_unmounted()
        self.assert_nothing_left_running()

    def containers(self):
        p = self.podman("ps", "--all", "--quiet")
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout.split()

    def test_bubblewrap_only_options_are_refused(self):
        p = self.sh("true", "--ro-host")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--ro-host", p.stderr)


if __name__ == "__main__":
    preflight()
    unittest.main(verbosity=2)
