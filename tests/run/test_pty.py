# SPDX-License-Identifier: MIT
"""`piworkfs run` on a terminal (Python 3 stdlib only): the sandbox's own pseudo-terminal.

Each test starts `piworkfs run` on an "outer" pseudo-terminal that this test holds, as a
person's terminal emulator would: the test types on its master side and reads what is drawn
there. Inside, the command must find a terminal of its own (/dev/tty, job control, raw mode,
window size) and never the outer one, and the outer terminal's settings must come back on
every way out.

Each test owns a private temp dir (a copy of demo/project, HOME, XDG dirs, state database);
every wait has a deadline; teardown unmounts whatever is left.

Environment: $PIWORKFS is the binary under test, $PIWORKFS_DEMO the demo project,
$SOURCE_MODES the bundled modes.
"""

import fcntl
import os
import pty
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import textwrap
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
PIWORKFS = os.path.abspath(os.environ.get("PIWORKFS", "piworkfs"))
DEMO = os.environ.get("PIWORKFS_DEMO", os.path.join(SOURCE, "demo", "project"))
SOURCE_MODES = os.environ.get("SOURCE_MODES", os.path.join(SOURCE, "modes"))
DEADLINE = 60


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


class Terminal:
    """An outer pseudo-terminal with a process running on it as its controlling terminal.

    A reader thread collects everything drawn on it; expect() waits for a pattern with a
    deadline. The test keeps the slave open, to read its settings and pending input."""

    def __init__(self, argv, env, cwd, rows=24, cols=80):
        self.master, self.slave = pty.openpty()
        self.set_size(rows, cols)
        self.slave_rdev = os.fstat(self.slave).st_rdev
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


class PtyTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pw-pty-")
        self.addCleanup(self._teardown)
        self.project = os.path.join(self.tmp, "proj")
        shutil.copytree(DEMO, self.project, symlinks=True)
        self.project = os.path.realpath(self.project)
        self.runtime = os.path.join(self.tmp, "run")
        os.mkdir(self.runtime, 0o700)
        for d in ("home", "config", "state"):
            os.mkdir(os.path.join(self.tmp, d))
        self.env = dict(os.environ)
        self.env.update({
            "HOME": os.path.join(self.tmp, "home"),
            "XDG_CONFIG_HOME": os.path.join(self.tmp, "config"),
            "XDG_RUNTIME_DIR": self.runtime,
            "XDG_STATE_HOME": os.path.join(self.tmp, "state"),
            "PIWORKFS_STATE_DB": os.path.join(self.tmp, "state", "piworkfs", "state.db"),
            "PIWORKFS_MODES_DIR": SOURCE_MODES,
            "PATH": os.path.dirname(PIWORKFS) + ":" + os.environ.get("PATH", "/usr/bin:/bin"),
            "TERM": "xterm",
        })
        self.env.pop("PIWORKFS_SOCKET", None)
        self.terms = []

    def _teardown(self):
        for t in self.terms:
            t.close()
        for mp, source in views():
            if mp.startswith(self.tmp) or source.startswith(self.tmp):
                subprocess.run(["fusermount3", "-u", "-z", mp], stderr=subprocess.DEVNULL)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def script(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def start(self, command, *opts, env=None, rows=24, cols=80):
        """piworkfs run OPTS -- COMMAND on a fresh outer terminal."""
        t = Terminal([PIWORKFS, "run", *opts, "--project", self.project, "--", *command],
                     env or self.env, self.project, rows, cols)
        self.terms.append(t)
        return t

    def python(self, code, *opts, **kw):
        return self.start([sys.executable, self.script("inner.py", code)], *opts, **kw)

    def assert_restored(self, t):
        """The outer terminal has its settings back (raw mode left)."""
        now = termios.tcgetattr(t.slave)
        self.assertEqual(now, t.settings, "the outer terminal was not restored")
        self.assertTrue(now[3] & termios.ICANON and now[3] & termios.ECHO)


class Terminal_(PtyTest):
    def test_the_command_has_a_terminal_of_its_own(self):
        t = self.python("""
            import os, sys
            fd = os.open("/dev/tty", os.O_RDWR)
            rdevs = set()
            for name in os.listdir("/proc/self/fd"):
                try:
                    st = os.stat("/proc/self/fd/" + name)
                    rdevs.add(st.st_rdev)
                except OSError:
                    pass
            os.write(fd, b"VIA-DEV-TTY\\r\\n")
            print("TTY", os.isatty(fd),
                  os.getsid(0) == os.getpid(), os.tcgetpgrp(0) == os.getpgrp(),
                  "RDEVS", ",".join(str(r) for r in sorted(rdevs) if r), "END", flush=True)
        """)
        t.expect(b"VIA-DEV-TTY")
        m = t.expect(rb"TTY (\w+) (\w+) (\w+) RDEVS ([\d,]*) END")
        self.assertEqual(m.group(1, 2, 3), (b"True", b"True", b"True"),
                         "/dev/tty, the session and the foreground group inside")
        rdevs = {int(r) for r in m.group(4).split(b",") if r}
        self.assertNotIn(t.slave_rdev, rdevs, "the outer terminal entered the sandbox")
        self.assertEqual(t.wait(), 0)
        self.assert_restored(t)

    def test_exit_status_passes_through_and_the_terminal_is_restored(self):
        t = self.start(["sh", "-c", "echo started; exit 7"])
        t.expect(b"started")
        self.assertEqual(t.wait(), 7)
        self.assert_restored(t)

    def test_a_crash_of_the_command_restores_the_terminal(self):
        t = self.python("""
            import os, signal
            print("crashing", flush=True)
            os.kill(os.getpid(), signal.SIGSEGV)
        """)
        t.expect(b"crashing")
        self.assertEqual(t.wait(), 128 + signal.SIGSEGV)
        self.assert_restored(t)

    def test_sigterm_to_run_ends_the_command_and_restores_the_terminal(self):
        t = self.python("""
            import time
            print("waiting", flush=True)
            time.sleep(1000)
        """)
        t.expect(b"waiting")
        t.proc.send_signal(signal.SIGTERM)
        self.assertEqual(t.wait(), 128 + signal.SIGTERM)
        self.assert_restored(t)

    def test_a_raw_mode_program_reads_every_key_and_ctrl_c_reaches_a_plain_one(self):
        t = self.python("""
            import os, sys, tty
            tty.setraw(0)
            os.write(1, b"RAW-READY\\r\\n")
            while True:
                b = os.read(0, 1)
                os.write(1, b"got %02x\\r\\n" % b[0])
                if b == b"q":
                    break
        """)
        t.expect(b"RAW-READY")
        for key, hexa in ((b"\x03", b"03"), (b"\x1a", b"1a"), (b"\x1b", b"1b"), (b"x", b"78")):
            at = t.mark()
            t.send(key)
            t.expect(b"got " + hexa, at)
        t.send(b"q")
        self.assertEqual(t.wait(), 0)
        self.assert_restored(t)

        t2 = self.python("""
            import time
            print("sleeping", flush=True)
            time.sleep(1000)
        """)
        t2.expect(b"sleeping")
        t2.send(b"\x03")
        self.assertEqual(t2.wait(), 128 + signal.SIGINT)
        self.assert_restored(t2)

    def test_a_window_resize_reaches_the_command(self):
        t = self.python("""
            import os, signal, struct, fcntl, termios, time
            def size():
                r, c, _, _ = struct.unpack("HHHH", fcntl.ioctl(0, termios.TIOCGWINSZ, b"\\0" * 8))
                print("SIZE %dx%d" % (r, c), flush=True)
            signal.signal(signal.SIGWINCH, lambda *a: size())
            size()
            for _ in range(600):
                time.sleep(0.1)
        """, rows=30, cols=100)
        t.expect(b"SIZE 30x100")
        at = t.mark()
        t.set_size(50, 132)
        t.expect(b"SIZE 50x132", at)
        t.proc.send_signal(signal.SIGTERM)
        t.wait()
        self.assert_restored(t)

    def test_job_control_in_an_interactive_shell(self):
        # The job says when it holds the terminal, so that each key is sent to it and not
        # to the shell, which hands the terminal over after it printed the command.
        job = self.script("job.py", """
            import os, signal, time
            conts = [0]  # SIGCONTs seen: each fg continues the job
            signal.signal(signal.SIGCONT, lambda *a: conts.__setitem__(0, conts[0] + 1))
            told = None  # the SIGCONT count when FOREGROUND was last said
            while True:
                if os.tcgetpgrp(0) == os.getpgrp() and told != conts[0]:
                    told = conts[0]  # before printing: a stop inside print says it again
                    print("FOREGROUND", flush=True)
                time.sleep(0.05)
        """)
        env = dict(self.env, PS1="PROMPT$ ")
        t = self.start(["bash", "--norc", "--noprofile", "-i"], env=env)
        t.expect(b"PROMPT\\$ ")
        at = t.mark()
        t.send("%s %s &\r" % (sys.executable, job))
        t.expect(rb"\[1\] \d+", at)
        at = t.mark()
        t.send("fg\r")
        t.expect(b"FOREGROUND", at)
        at = t.mark()
        t.send(b"\x1a")  # Ctrl-Z stops the foreground job, the shell prompts again
        t.expect(rb"Stopped", at)
        t.expect(b"PROMPT\\$ ", at)
        at = t.mark()
        t.send("fg\r")
        t.expect(b"FOREGROUND", at)
        at = t.mark()
        t.send(b"\x03")  # Ctrl-C ends it
        t.expect(b"PROMPT\\$ ", at)
        at = t.mark()
        t.send("echo status=$?\r")
        t.expect(b"status=130", at)
        t.send("exit 3\r")
        self.assertEqual(t.wait(), 3)
        self.assert_restored(t)

    def test_tiocsti_inside_reaches_only_the_sandbox_terminal(self):
        # The injected bytes are queued synchronously on the terminal TIOCSTI acts on: right
        # after the ioctl they are waiting on the command's own terminal (FIONREAD), and
        # nothing ever waits on the outer one.
        t = self.python("""
            import array, fcntl, os, termios
            injected = b"echo PWNED\\n"
            try:
                for ch in injected:
                    fcntl.ioctl(0, termios.TIOCSTI, bytes([ch]))
            except OSError as e:
                print("REFUSED", e.errno, flush=True)
            else:
                n = array.array("i", [0])
                fcntl.ioctl(0, termios.FIONREAD, n)
                print("INJECTED waiting=%d of %d" % (n[0], len(injected)), flush=True)
        """)
        m = t.expect(rb"INJECTED waiting=(\d+) of (\d+)|REFUSED")
        if m.group(0) != b"REFUSED":
            self.assertEqual(m.group(1), m.group(2))
        self.assertEqual(t.wait(), 0)
        self.assertEqual(t.pending_input(), b"", "input was pushed into the outer terminal")
        self.assert_restored(t)

if __name__ == "__main__":
    unittest.main(verbosity=2)
