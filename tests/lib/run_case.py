# SPDX-License-Identifier: MIT
"""What the tests of `piworkfs run` share (Python 3 standard library only): tests/run (under
bubblewrap, on a terminal), tests/container (under Podman) and the agents' consent tests
(tests/agents, which type into run's consent bar with Terminal).

RunCase gives each test a private temp dir: a copy of demo/project (the backing directory),
HOME, XDG_CONFIG_HOME, XDG_RUNTIME_DIR (0700), XDG_STATE_HOME and PIWORKFS_STATE_DB, in an
environment of its own (self.env); teardown unmounts every view of the temp dir (lazily),
so a failing test leaves nothing mounted. Terminal is a person's terminal: a pseudo-terminal
with a process on it, and what is drawn there. Agent is an agent the test drives: a program
inside `piworkfs run` that answers the test's requests over a Unix socket (SERVE_LOOP).

A module, not a file next to the tests: `import run_case` finds it through PYTHONPATH
(tests/lib), as harness.py is found.

Environment: $PIWORKFS is the binary under test, $PIWORKFS_DEMO the demo project,
$SOURCE_MODES the bundled modes.
"""

import fcntl
import json
import os
import pty
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import textwrap
import threading
import time
import unittest

from harness import COMMAND_SANITIZER_ENV  # noqa: F401  (tests/lib; for the tests' commands)

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
PIWORKFS = os.path.abspath(os.environ.get("PIWORKFS", "piworkfs"))
DEMO = os.environ.get("PIWORKFS_DEMO", os.path.join(SOURCE, "demo", "project"))
SOURCE_MODES = os.environ.get("SOURCE_MODES", os.path.join(SOURCE, "modes"))
DEADLINE = 60

# What run's refusal of a loosening tells the agent to ask the person for.
LOOSEN_HINT = "piworkfs mode build"


def views():
    """[(mountpoint, source)] of every fuse.piworkfs mount."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            fields, pfields = pre.split(), post.split()
            if pfields and pfields[0] == "fuse.piworkfs":
                dec = lambda s: s.encode().decode("unicode_escape")
                out.append((dec(fields[4]), dec(pfields[1])))
    return out


class RunCase(unittest.TestCase):
    """A test of `piworkfs run` in a private temp dir (the module's docstring)."""

    tmp_prefix = "pw-run-"
    tmp_parent = None  # the temp dir's parent; None: the system's
    piworkfs_on_path = True  # PATH starts with the directory of the binary under test

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix=self.tmp_prefix, dir=self.tmp_parent)
        self.addCleanup(self._teardown)
        self.project = os.path.join(self.tmp, "proj")
        shutil.copytree(DEMO, self.project, symlinks=True)
        self.project = os.path.realpath(self.project)
        self.runtime = os.path.join(self.tmp, "run")
        os.mkdir(self.runtime, 0o700)
        for d in ("home", "config", "state"):
            os.mkdir(os.path.join(self.tmp, d))
        self.state_db = os.path.join(self.tmp, "state", "piworkfs", "state.db")
        self.env = dict(os.environ)
        self.env.update({
            "HOME": os.path.join(self.tmp, "home"),
            "XDG_CONFIG_HOME": os.path.join(self.tmp, "config"),
            "XDG_RUNTIME_DIR": self.runtime,
            "XDG_STATE_HOME": os.path.join(self.tmp, "state"),
            "PIWORKFS_STATE_DB": self.state_db,
            "PIWORKFS_MODES_DIR": SOURCE_MODES,
        })
        if self.piworkfs_on_path:
            self.env["PATH"] = (os.path.dirname(PIWORKFS) + ":"
                                + os.environ.get("PATH", "/usr/bin:/bin"))
        self.env.pop("PIWORKFS_SOCKET", None)

    def _teardown(self):
        self.unmount_views()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def unmount_views(self):
        """Unmounts (lazily) every view mounted in the temp dir or of a project in it."""
        for mp, source in views():
            if mp.startswith(self.tmp) or source.startswith(self.tmp):
                subprocess.run(["fusermount3", "-u", "-z", mp], stderr=subprocess.DEVNULL)

    def my_views(self):
        """[(mountpoint, source)] of the views of this test's project."""
        return [(mp, s) for mp, s in views() if s == self.project]

    def signal_when_ready(self, argv, sig, **popen):
        """Starts ARGV in the project (self.env), waits for its "ready" line on stdout and
        sends it SIG; returns (exit status, the rest of stdout, stderr). Killed if it is
        still there on the way out."""
        proc = subprocess.Popen(argv, cwd=self.project, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, **popen)
        try:
            self.assertEqual(proc.stdout.readline(), "ready\n")
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=DEADLINE)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        return proc.returncode, out, err

    def bare_view(self, mode, name="view"):
        """The person's view of the project (not a run's) in MODE at TMP/NAME, unmounted on
        the way out; returns its mountpoint."""
        mp = os.path.join(self.tmp, name)
        os.mkdir(mp)
        p = subprocess.run([PIWORKFS, "mount", "--mode", mode, self.project, mp],
                           cwd=self.project, env=self.env, capture_output=True, text=True,
                           timeout=DEADLINE)
        self.assertEqual(p.returncode, 0, "piworkfs mount: %s" % p.stderr)
        self.addCleanup(lambda: subprocess.run([PIWORKFS, "umount", mp], env=self.env,
                                               capture_output=True, timeout=DEADLINE))
        return mp

    def assert_unmounted(self):
        """No view of the project is left (waiting up to DEADLINE for the run's to go)."""
        deadline = time.monotonic() + DEADLINE
        while self.my_views() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.my_views(), [], "the view is still mounted")


# The end of every agent program Agent runs: it connects to the test's socket (argv[1]) and
# answers each JSON line {"op": OP, ...} with {"r": serve(request)} until the op "exit".
# The program defines serve(q) before it.
SERVE_LOOP = textwrap.dedent(r'''
    import json as _json, socket as _socket, sys as _sys

    _c = _socket.socket(_socket.AF_UNIX)
    # No timeout: an agent the test leaves alone while it drives another run (100
    # switches: minutes under ASan) must still be there; the test's end closes the
    # connection, and the agent ends at that EOF.
    _c.connect(_sys.argv[1])
    _f = _c.makefile("rwb")
    for _line in _f:
        _q = _json.loads(_line)
        if _q["op"] == "exit":
            break
        _f.write(_json.dumps({"r": serve(_q)}).encode() + b"\n")
        _f.flush()
''')


class Agent:
    """One `piworkfs run [--mode MODE]` whose command is PROGRAM (Python source that ends
    with SERVE_LOOP), connected to TEST (a RunCase) through the socket TMP/NAME.sock. The
    run ends on the way out (or at stop()); ask() sends a request and returns its answer."""

    def __init__(self, test, mode, name, program):
        self.test = test
        self.stopped = None
        path = os.path.join(test.tmp, name + ".sock")
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(path)
        srv.listen(1)
        srv.settimeout(DEADLINE)
        args = [PIWORKFS, "run"] + (["--mode", mode] if mode else []) + [
            "--project", test.project, "--", sys.executable, "-c", program, path]
        self.proc = subprocess.Popen(args, cwd=test.project, env=test.env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        test.addCleanup(self.stop)
        try:
            self.conn, _ = srv.accept()
        except socket.timeout:
            self.proc.kill()
            self.stopped = self.proc.communicate()[1]
            raise AssertionError("the run did not start: " + self.stopped)
        finally:
            srv.close()
        self.conn.settimeout(DEADLINE)
        self.io = self.conn.makefile("rwb")

    def ask(self, op, **kw):
        self.io.write(json.dumps(dict(op=op, **kw)).encode() + b"\n")
        self.io.flush()
        line = self.io.readline()
        if not line:
            raise AssertionError("the agent went away: " + self.stop())
        return json.loads(line)["r"]

    def stop(self):
        """Ends the agent and its run; returns the run's stderr."""
        if self.stopped is not None:
            return self.stopped
        err = None
        if self.proc.poll() is None:
            try:
                self.io.write(b'{"op": "exit"}\n')
                self.io.flush()
            except OSError:
                pass
            try:
                _, err = self.proc.communicate(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if err is None:
            err = self.proc.communicate()[1]
        for f in (self.io, self.conn):
            f.close()
        self.stopped = err or ""
        return self.stopped


class Terminal:
    """An outer pseudo-terminal with a process running on it as its controlling terminal.

    A reader thread collects everything drawn on it; expect() waits for a pattern with a
    deadline. The test keeps the slave open, to read its settings and pending input."""

    def __init__(self, argv, env, cwd, rows=24, cols=80):
        self.master, self.slave = pty.openpty()
        self.set_size(rows, cols)
        st = os.fstat(self.slave)
        self.slave_rdev = st.st_rdev
        # Which terminal: the device number alone is not enough, a devpts instance of the
        # sandbox's own numbers its ptys from 0 as the host's does.
        self.slave_id = "%d:%d" % (st.st_dev, st.st_ino)
        self.settings = termios.tcgetattr(self.slave)
        self.buf = b""
        self.cond = threading.Condition()
        self.eof = False

        slave = self.slave

        def ctty():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                     cwd=cwd, preexec_fn=ctty, close_fds=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                data = b""
            with self.cond:
                if not data:
                    self.eof = True
                    self.cond.notify_all()
                    return
                self.buf += data
                self.cond.notify_all()

    def set_size(self, rows, cols):
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        os.write(self.master, data)

    def expect(self, pattern, start=0, deadline=DEADLINE):
        """Waits until PATTERN (bytes regex) appears in the output after offset START.
        Returns the match (offsets into the whole buffer)."""
        rx = re.compile(pattern if isinstance(pattern, bytes) else pattern.encode())
        end = time.monotonic() + deadline
        with self.cond:
            while True:
                m = rx.search(self.buf, start)
                if m:
                    return m
                # Once the process is gone, what it drew arrives at once: give up soon.
                if self.proc.poll() is not None:
                    end = min(end, time.monotonic() + 2)
                left = end - time.monotonic()
                if left <= 0 or (self.eof and not rx.search(self.buf, start)):
                    raise AssertionError("%r not shown; the terminal shows:\n%r"
                                         % (pattern, self.buf[-3000:]))
                self.cond.wait(min(left, 0.5))

    def mark(self):
        with self.cond:
            return len(self.buf)

    def wait(self, deadline=DEADLINE):
        return self.proc.wait(timeout=deadline)

    def pending_input(self):
        """What is waiting to be read on the outer terminal (nothing should be)."""
        flags = fcntl.fcntl(self.slave, fcntl.F_GETFL)
        fcntl.fcntl(self.slave, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        try:
            return os.read(self.slave, 4096)
        except BlockingIOError:
            return b""
        finally:
            fcntl.fcntl(self.slave, fcntl.F_SETFL, flags)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=DEADLINE)
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass
        self.reader.join(timeout=DEADLINE)
