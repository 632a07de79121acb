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

import json
import os
import pty
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import termios
import textwrap
import time
import unittest

from run_case import DEADLINE, PIWORKFS, RunCase, Terminal  # tests/lib, on PYTHONPATH

GRACE_S = 0.35  # run/ask.c GRACE_MS, and a margin


class PtyTest(RunCase):
    tmp_prefix = "pw-pty-"

    def setUp(self):
        super().setUp()
        self.env["TERM"] = "xterm"
        self.terms = []

    def _teardown(self):
        for t in self.terms:
            t.close()
        super()._teardown()

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
                    if st.st_rdev:
                        rdevs.add("%d:%d" % (st.st_dev, st.st_ino))
                except OSError:
                    pass
            os.write(fd, b"VIA-DEV-TTY\\r\\n")
            print("TTY", os.isatty(fd),
                  os.getsid(0) == os.getpid(), os.tcgetpgrp(0) == os.getpgrp(),
                  "RDEVS", ",".join(sorted(rdevs)), "END", flush=True)
        """)
        t.expect(b"VIA-DEV-TTY")
        m = t.expect(rb"TTY (\w+) (\w+) (\w+) RDEVS ([\d:,]*) END")
        self.assertEqual(m.group(1, 2, 3), (b"True", b"True", b"True"),
                         "/dev/tty, the session and the foreground group inside")
        rdevs = {r.decode() for r in m.group(4).split(b",") if r}
        self.assertNotIn(t.slave_id, rdevs, "the outer terminal entered the sandbox")
        self.assertEqual(t.wait(), 0)
        self.assert_restored(t)

    def test_tty_names_a_pty_of_the_sandbox_and_not_the_console(self):
        # Issue 36, item 6: tty printed /dev/console (bwrap's bind of a pty of the host).
        t = self.start(["sh", "-c", "tty; ps -o tty= -p $$; "
                        "[ -e /dev/console ] && echo CONSOLE-THERE; echo END"])
        m = t.expect(rb"(\S+)\r\n\s*(\S+)\r\n(?:CONSOLE-THERE\r\n)?END")
        self.assertRegex(m.group(1), rb"^/dev/pts/\d+$", "tty inside")
        self.assertEqual(b"/dev/" + m.group(2), m.group(1), "ps names the same terminal")
        self.assertNotIn(b"CONSOLE-THERE", t.buf)
        self.assertEqual(t.wait(), 0)

    def test_no_terminal_of_the_host_is_reachable_inside(self):
        # The host's devpts holds every terminal of the machine: no file of it may be
        # reachable inside, under any name (old: /dev/console was a pty of the host), and
        # the path of another terminal of the host opens nothing of the host's. New ptys
        # come from the sandbox's own devpts.
        other_master, other_slave = pty.openpty()
        self.addCleanup(os.close, other_master)
        self.addCleanup(os.close, other_slave)
        host_devpts = os.fstat(other_slave).st_dev
        other = os.ttyname(other_slave)
        t = self.python("""
            import os, pty, stat, sys
            host_devpts, other = int(sys.argv[1]), sys.argv[2]
            found = []
            for root, dirs, files in os.walk("/dev"):
                for n in dirs + files:
                    p = os.path.join(root, n)
                    try:
                        if os.lstat(p).st_dev == host_devpts:
                            found.append(p)
                    except OSError:
                        pass
            try:
                fd = os.open(other, os.O_RDWR | os.O_NOCTTY)
                opened = "host" if os.fstat(fd).st_dev == host_devpts else "sandbox's"
            except OSError as e:
                opened = "nothing (%s)" % e.strerror
            m, s = pty.openpty()
            print("FOUND", found or "none", "OTHER", opened, "NEW", os.ttyname(s),
                  "END", flush=True)
        """.replace("sys.argv[1]", repr(str(host_devpts))).replace("sys.argv[2]",
                                                                  repr(other)))
        m = t.expect(rb"FOUND (.*) OTHER (.*) NEW (\S+) END")
        self.assertEqual(m.group(1), b"none", "files of the host's devpts inside")
        self.assertNotEqual(m.group(2), b"host", other + " reached the host's terminal")
        self.assertRegex(m.group(3), rb"^/dev/pts/\d+$")
        self.assertEqual(t.wait(), 0)

    def test_ctrl_d_typed_ahead_is_end_of_file_not_a_nul(self):
        # Issue 36, item 6: a NUL reached the command's input at start, echoed as ^@: a
        # Ctrl-D typed (or sent, as script(1) does at the end of its input) before run put
        # the terminal in raw mode was stored by the line discipline as a NUL, and relayed.
        t = self.python("""
            import os
            print("READY", flush=True)
            print("FIRST", repr(os.read(0, 100)), flush=True)
        """)
        t.send(b"\x04")  # long before run has mounted its view and started the sandbox
        t.expect(b"READY")
        t.send(b"x\r")
        m = t.expect(rb"FIRST (.*)\r\n")
        self.assertEqual(m.group(1), b"b''", "Ctrl-D typed ahead: end of file, first")
        self.assertEqual(t.wait(), 0)
        shown = t.buf[t.buf.index(b"\n") + 1:]  # after run's own line
        self.assertNotIn(b"\0", shown)
        self.assertNotIn(b"^@", shown)

    def test_bwraps_own_error_reaches_the_terminal(self):
        # bwrap never holds the person's terminal: its stderr is a pipe run shows there.
        fake = os.path.join(self.tmp, "fakebin")
        os.mkdir(fake)
        with open(os.path.join(fake, "bwrap"), "w") as f:
            f.write('#!/bin/sh\n[ "$1" = --help ] && exec bwrap-real --help\n'
                    '[ -t 2 ] && echo "bwrap: stderr is a terminal" >&2\n'
                    'echo "bwrap: cannot do that: Operation not permitted" >&2\nexit 1\n')
        os.chmod(os.path.join(fake, "bwrap"), 0o755)
        os.symlink(shutil.which("bwrap"), os.path.join(fake, "bwrap-real"))
        env = dict(self.env, PATH=fake + ":" + self.env["PATH"])
        t = self.start(["true"], env=env)
        t.expect(b"bwrap: cannot do that: Operation not permitted")
        self.assertEqual(t.wait(), 1)
        self.assertNotIn(b"stderr is a terminal", t.buf)
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

# The sandboxed command of the asking tests: it draws a tick every 100 ms, reads its own
# keys in raw mode and reports them, and on cue keys talks to the agent socket (it is the
# agent): a asks for build, s asks twice (the second supersedes), t asks with a 1 s expiry,
# L asks with a long reason (LONG_REASON), r asks with a reason full of terminal controls,
# f forges an answer every way it can, F floods requests, x asks, q quits. (While a
# question is open, the person's keys go to the question, so each cue starts one scene.)
ASKER = r"""
import fcntl, json, os, select, signal, socket, struct, sys, termios, time, tty

tty.setraw(0)
out = lambda s: os.write(1, (s + "\r\n").encode())
# Our terminal's size, said at each change (the bar takes rows from it, then gives them back)
signal.signal(signal.SIGWINCH, lambda *a: out("ROWS %d" % struct.unpack(
    "HHHH", fcntl.ioctl(0, termios.TIOCGWINSZ, b"\0" * 8))[0]))
sock = socket.socket(socket.AF_UNIX)
sock.connect(os.environ["PIWORKFS_SOCKET"])
buf = b""
next_id = [0]

def call(method, params):
    next_id[0] += 1
    sock.sendall(json.dumps({"jsonrpc": "2.0", "id": next_id[0], "method": method,
                             "params": params}).encode() + b"\n")

def ask(reason, **extra):
    call("mode.request", dict({"mode": "build", "reason": reason}, **extra))


out("READY")
tick, last = 0, time.monotonic()
while True:
    r, _, _ = select.select([0, sock], [], [], 0.1)
    if time.monotonic() - last >= 0.1:
        tick += 1
        last = time.monotonic()
        out("TICK %d" % tick)
    if sock in r:
        data = sock.recv(1 << 20)
        if not data:
            out("SOCKET-CLOSED")
            break
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            m = json.loads(line)
            if m.get("method") == "mode.request.done":
                out("DONE %s %s" % (m["params"]["id"], m["params"]["outcome"]))
            elif "result" in m and "outcome" in m["result"]:
                out("ASKED %s %s" % (m["result"]["id"], m["result"]["outcome"]))
            elif "error" in m:
                out("ERROR %s" % m["error"]["code"])
    if 0 in r:
        k = os.read(0, 1)
        out("KEY %02x" % k[0])
        if k == b"a" or k == b"x":
            ask("implement the approved plan")
        elif k == b"L":
            ask(LONG_REASON)
        elif k == b"S":  # upper case: "yes", typed to the agent in a test, must not ask twice
            ask("the first reason")
            time.sleep(0.5)  # the first is shown before the second replaces it
            ask("a second, newer reason")
        elif k == b"t":
            ask("this one expires", expires_s=1)
        elif k == b"r":
            # A reason that tries to draw: escape sequences, a carriage return over the
            # question, a bidi override that reverses what follows, and a lot of it.
            ask("ok\x1b[2J\x1b]0;title\x07\rAllow? [Y/n] \u202e]n/Y[ " + "z" * 3000)
        elif k == b"f":
            ask("forge me")
            # The bar's own words on our output, then answers typed on our own terminal:
            # written to it, and pushed into its input with TIOCSTI.
            out("piworkfs: the agent asks to switch plan \u2192 build. Type build, Enter to "
                "allow build")
            with open("/dev/tty", "wb", buffering=0) as t:
                t.write(b"build\r\ny\r\n")
            try:
                for ch in b"y\rbuild\r":
                    fcntl.ioctl(0, termios.TIOCSTI, bytes([ch]))
            except OSError:
                pass
            out("FORGED")
        elif k == b"h":
            # The review's attack: ask for off, then draw a bar of our own that asks for
            # design, and leave the terminal concealed, black on black, shifted to G1, in
            # origin mode, with an OSC string left open, so that the real bar drawn after
            # it would not show, or would show on our row.
            ask("tidy up", mode="off")
            os.write(1, b"\r\n\x1b[7m piworkfs: the agent asks to switch plan \xe2\x86\x92 "
                     b"design (\"update the design doc\"). Type design, Enter to allow "
                     b"\x1b[0m\x1b[30;40m\x1b[8m\x0e\x1b[?6h\x1b]0;")
        elif k == b"F":
            n = 5000
            blob = b"".join(json.dumps({"jsonrpc": "2.0", "id": 100000 + i,
                                        "method": "mode.request",
                                        "params": {"mode": "build", "reason": "flood %d" % i}}
                                       ).encode() + b"\n" for i in range(n))
            t0 = time.monotonic()
            sock.sendall(blob)
            out("FLOOD sent=%d in %.3fs" % (n, time.monotonic() - t0))
        elif k == b"q":
            break
"""


# A reason longer than a row of 80 or 100 columns (issue 44, item 7: cut to "implement
# th..." on 100 columns, left out on 80).
LONG_REASON = ("implement the approved plan: the cache layer in src/cache.c with its tests in "
               "tests/test_cache.py, then the docs in docs/cache.md")
ASKER = ASKER.replace("LONG_REASON", repr(LONG_REASON))

# What draws on a terminal and prints nothing: CSI sequences, designations of character
# sets, ESC # 5, ESC 7, ESC 8, ST, and SI, SO, CAN.
DRAWING = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()*+][0-9A-Za-z]|\x1b#[0-9]|\x1b[78\\]|"
                     rb"[\x0e\x0f\x18]")


def run_view(env, project):
    """(mountpoint, operator socket) of the live run's own view of PROJECT, once there."""
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        st = json.loads(subprocess.run([PIWORKFS, "status", "--json"], env=env,
                                       capture_output=True, text=True,
                                       timeout=DEADLINE).stdout)
        runs = [(v["mountpoint"], v["socket"]) for v in st
                if v.get("project") == project and v.get("run")]
        if runs:
            return runs[0]
        time.sleep(0.05)
    raise AssertionError("no run's view of %s in piworkfs status" % project)


class AskingBase(PtyTest):
    """The person's view in plan, and run's command (ASKER) on a terminal of COLS columns."""

    cols = 160  # the reason beside the question on one row

    def setUp(self):
        super().setUp()
        # The person's view in plan: the run takes its mode, in a view of its own, whose
        # mountpoint (self.mp) and operator socket the person's commands then name.
        self.bare_view("plan")
        if self.cols:
            self.start_asker(self.cols)

    def start_asker(self, cols, rows=24):
        self.rows = rows
        self.t = self.python(ASKER, cols=cols, rows=rows)
        self.t.expect(b"READY")
        self.mp, self.socket = run_view(self.env, self.project)
        # The person's own view of the mode: a subscriber to mode.changed.
        self.sub = socket.socket(socket.AF_UNIX)
        self.sub.connect(self.socket)
        self.addCleanup(self.sub.close)
        self.sub.sendall(b'{"jsonrpc":"2.0","id":1,"method":"subscribe","params":'
                         b'{"events":["mode.changed"]}}\n')
        self.sub_buf = b""
        self.changes = []
        self.read_sub(lambda m: m.get("id") == 1)

    def read_sub(self, until, deadline=DEADLINE):
        """Reads the subscriber until a message satisfies UNTIL; returns (message, time)."""
        end = time.monotonic() + deadline
        while True:
            while b"\n" in self.sub_buf:
                line, self.sub_buf = self.sub_buf.split(b"\n", 1)
                m = json.loads(line)
                if m.get("method") == "mode.changed":
                    self.changes.append(m["params"]["to"])
                if until(m):
                    return m, time.monotonic()
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError("no such message from the daemon")
            r, _, _ = select.select([self.sub], [], [], left)
            if r:
                data = self.sub.recv(65536)
                if not data:
                    raise AssertionError("the daemon closed the connection")
                self.sub_buf += data

    def mode(self):
        p = subprocess.run([PIWORKFS, "mode", "--json", "--mount", self.mp], env=self.env,
                           capture_output=True, text=True, timeout=DEADLINE)
        return json.loads(p.stdout)["mode"]

    def pending(self):
        p = subprocess.run([PIWORKFS, "mode", "--mount", self.mp], env=self.env,
                           capture_output=True, text=True, timeout=DEADLINE)
        return "pending request" in p.stdout

    def asked(self, key):
        """Types KEY, on which the asker asks; returns (the terminal's mark before it, the
        request's id)."""
        at = self.t.mark()
        self.t.send(key)
        return at, int(self.t.expect(rb"ASKED (\d+) pending", at).group(1))

    def ask(self, key=b"a"):
        at, rid = self.asked(key)
        self.t.expect("the agent asks to switch plan \u2192 build", at)
        return rid

    def past_grace(self):
        """Waits out the grace time: keys read in the first 300 ms after the bar appeared
        are dropped (run/ask.c GRACE_MS). The bar was drawn before the test saw it, so once
        that much time has passed since, the next key counts: the wait is the condition."""
        time.sleep(GRACE_S)

    def arm(self, name=b"build"):
        """Types the target's name, as the bar asks; then Enter allows."""
        self.past_grace()
        at = self.t.mark()
        self.t.send(name)
        self.t.expect(b"Press Enter to allow", at)

    def switch_history(self):
        """The project's switch history, `log --switches --json`, a row a switch."""
        p = subprocess.run([PIWORKFS, "log", "--switches", "--json", "-C", self.project],
                           env=self.env, capture_output=True, text=True, timeout=DEADLINE)
        self.assertEqual(p.returncode, 0, p.stderr)
        return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]

    def deny(self, rid):
        """Types n until the request is denied (the first keys may fall in the grace)."""
        end = time.monotonic() + DEADLINE
        while True:
            at = self.t.mark()
            self.t.send(b"n")
            try:
                self.t.expect(("DONE %d denied" % rid).encode(), at, deadline=1)
                return
            except AssertionError:
                if time.monotonic() > end:
                    raise

    def bar(self, start, needle="the agent asks"):
        """{row: text} of the first drawing of the bar after START whose words hold NEEDLE:
        what each row of the screen shows once it is drawn (escape sequences removed). A
        drawing runs from the bar's reset (CAN, ST, save the cursor) to its restore."""
        end = time.monotonic() + DEADLINE
        while True:
            with self.t.cond:
                buf = self.t.buf
            for d in re.finditer(rb"\x18\x1b\\\x1b7(.*?)\x1b8", buf[start:], re.S):
                rows = {}
                for part in re.split(rb"(?=\x1b\[\d+;1H)", d.group(1)):
                    at = re.match(rb"\x1b\[(\d+);1H", part)
                    if at:
                        rows[int(at.group(1))] = DRAWING.sub(b"", part[at.end():]).decode()
                rows = {r: text.strip() for r, text in rows.items()}
                if needle in self.bar_text(rows):
                    return rows
            if time.monotonic() > end:
                raise AssertionError("no bar saying %r; the terminal shows:\n%r"
                                     % (needle, buf[-3000:]))
            with self.t.cond:
                self.t.cond.wait(0.5)  # for more output

    def bar_text(self, rows):
        """The words of the bar's rows, in order, one space between rows."""
        return " ".join(rows[r] for r in sorted(rows) if rows[r])

    def assert_keeps_drawing_and_reading(self):
        at = self.t.mark()
        self.t.expect(rb"TICK \d+", at)
        self.t.send(b"k")
        self.t.expect(b"KEY 6b", at)

    def finish(self):
        self.assert_keeps_drawing_and_reading()
        self.t.send(b"q")
        self.assertEqual(self.t.wait(), 0)
        self.assert_restored(self.t)



class Asking(AskingBase):
    """The agent asks for build; the person answers on the outer terminal."""

    def test_the_targets_name_then_enter_on_the_outer_terminal_switches(self):
        self.assert_keeps_drawing_and_reading()
        asked = self.t.mark()
        rid = self.ask()
        self.assertEqual(self.mode(), "plan")
        self.assertTrue(self.pending(), "piworkfs mode shows the pending request")
        self.arm()
        at = self.t.mark()
        t0 = time.monotonic()
        self.t.send(b"\r")
        _, t1 = self.read_sub(lambda m: m.get("method") == "mode.changed"
                              and m["params"]["to"] == "build")
        print("\nlatency from the confirming key to mode.changed: %.1f ms"
              % ((t1 - t0) * 1000), file=sys.stderr)
        self.t.expect(("DONE %d approved" % rid).encode(), at)
        self.assertEqual(self.mode(), "build")
        # The switch history says it was asked for, why, and who allowed it.
        rows = self.switch_history()
        granted = [r for r in rows if r.get("origin") == "request"]
        self.assertEqual(len(granted), 1, rows)
        self.assertEqual((granted[0]["from"], granted[0]["to"]), ("plan", "build"))
        self.assertEqual(granted[0]["reason"], "implement the approved plan")
        self.assertIn("the terminal of piworkfs run", granted[0]["answered_by"])
        # The answer's keys never reached the command.
        for ch in b"build":
            self.assertNotIn(b"KEY %02x" % ch, self.t.buf[asked:])
        self.assertNotIn(b"KEY 0d", self.t.buf[at:])
        self.finish()

    def test_n_denies(self):
        rid = self.ask()
        self.deny(rid)
        self.assertEqual(self.mode(), "plan")
        self.assertFalse(self.pending())
        self.finish()

    def test_the_name_then_anything_but_enter_denies(self):
        rid = self.ask()
        self.arm()
        at = self.t.mark()
        self.t.send(b"e")
        self.t.expect(("DONE %d denied" % rid).encode(), at)
        self.assertEqual(self.mode(), "plan")
        self.finish()

    def test_y_another_name_or_an_early_enter_denies(self):
        for keys in (b"y", b"Y\r", b"design\r", b"bu\r", b"buildd"):
            rid = self.ask()
            self.past_grace()
            at = self.t.mark()
            self.t.send(keys)
            self.t.expect(("DONE %d denied" % rid).encode(), at)
            self.assertEqual(self.mode(), "plan", keys)
        self.finish()

    def test_each_denial_at_the_bar_is_logged_with_the_key_that_denied(self):
        # Issue 44 item 10: a wrong word, Ctrl-C, an early Enter: each denial is in the
        # switch history with who asked, why, who denied (this run's terminal) and how.
        keys = ((b"y", '"y"'), (b"\x03", "Ctrl-C"), (b"bu\r", 'Enter after typing "bu"'))
        for typed, _ in keys:
            rid = self.ask()
            self.past_grace()
            at = self.t.mark()
            self.t.send(typed)
            self.t.expect(("DONE %d denied" % rid).encode(), at)
        self.assertEqual(self.mode(), "plan")
        rows = self.switch_history()
        denied = [r for r in rows if r.get("outcome") == "denied"]
        self.assertEqual([r.get("how") for r in denied], [how for _, how in keys], rows)
        for r in denied:
            self.assertEqual((r["from"], r["to"]), ("plan", "build"))
            self.assertEqual(r["reason"], "implement the approved plan")
            self.assertIn("the terminal of piworkfs run", r["answered_by"])
            self.assertEqual(r["asked_by"]["comm"], "python3", r)
        p = subprocess.run([PIWORKFS, "log", "--switches", "-C", self.project], env=self.env,
                           capture_output=True, text=True, timeout=DEADLINE)
        table = re.sub(r"\n +", " ", p.stdout)  # each row's rule, under it, joined to it
        self.assertIn('denied by the terminal of piworkfs run (pid', table)
        self.assertIn("): Ctrl-C", table)
        self.finish()

    def test_a_fake_bar_and_a_hidden_real_one_never_approve_another_target(self):
        # The agent asks for off, draws a bar asking for design and leaves the terminal in
        # a state that hid the real bar: concealed, black on black, SO, origin mode, an
        # open OSC string. Before, the real bar drew in that state and `y` Enter, typed to
        # the fake, switched to off.
        for keys, outcome in ((b"y\r", "denied"), (b"design\r", "denied"),
                              (b"off\r", "approved")):
            at, rid = self.asked(b"h")
            fake_end = self.t.expect(rb"\x0e\x1b\[\?6h\x1b\]0;", at).end()
            real = self.t.expect(rb"the agent asks to switch plan \xe2\x86\x92 off", fake_end)
            # The real bar's own bytes, from its save of the cursor: the state is reset
            # before its text, and nothing the agent left is in force there.
            begin = self.t.buf.rindex(b"\x1b7", fake_end, real.start())
            head = self.t.buf[begin - 4:real.start()]
            for reset in (b"\x18", b"\x1b\\", b"\x1b[?6l", b"\x1b(B", b"\x0f", b"\x1b[0m",
                          b"\x1b#5"):
                self.assertIn(reset, head, "the bar does not reset %r: %r" % (reset, head))
            for bad in (b"\x1b[8m", b"\x1b[30;40m", b"\x0e", b"\x1b[?6h"):
                self.assertNotIn(bad, head)
            self.assertLess(head.rindex(b"\x1b[0m"), head.rindex(b"\x1b[2K"))
            self.past_grace()
            at = self.t.mark()
            self.t.send(keys)
            self.t.expect(("DONE %d %s" % (rid, outcome)).encode(), at)
            self.assertEqual(self.mode(), "off" if outcome == "approved" else "plan", keys)
        # The one switch the person's subscriber heard of is the approved one.
        self.read_sub(lambda m: m.get("method") == "mode.changed")
        self.assertEqual(self.changes, ["off"])
        self.finish()

    def test_a_reason_cannot_draw_on_the_terminal(self):
        at = self.t.mark()
        self.t.send(b"r")
        m = self.t.expect(rb"ASKED (\d+) pending", at)
        # What the rows show: the reason's text, none of its controls doing anything.
        self.t.expect(rb"the agent asks to switch plan \xe2\x86\x92 build \(\"", at)
        shown = self.bar_text(self.bar(at))
        self.assertIn('build ("ok[2J]0;title Allow? [Y/n] ]n/Y[ zzz', shown)
        for bad in ("\x1b", "\r", "\x07", "\u202e"):
            self.assertNotIn(bad, shown)
        # Nothing but the bar's own sequences between its save and restore of the cursor.
        begin = self.t.buf.rindex(b"\x1b7", at, self.t.expect(b"the agent asks", at).start())
        drawn = self.t.buf[begin:self.t.expect(rb"\x1b8", begin + 2).start()]
        self.assertNotIn(b"\x1b[2J", drawn)
        self.assertNotIn(b"\x1b]0;", drawn)
        self.assertNotIn(b"\x07", drawn)
        # The daemon kept it cleaned and bounded (what piworkfs mode shows the person).
        p = subprocess.run([PIWORKFS, "mode", "--mount", self.mp], env=self.env,
                           capture_output=True, timeout=DEADLINE)
        reason = re.search(rb'build \("(.*)"\), \d+s left', p.stdout).group(1)
        self.assertTrue(reason.startswith(b"ok[2J]0;title Allow? [Y/n] ]n/Y[ zzz"), reason)
        self.assertTrue(reason.endswith(b"...") and len(reason) <= 200, reason)
        self.deny(int(m.group(1)))
        self.finish()

    def test_a_request_expires(self):
        at = self.t.mark()
        self.t.send(b"t")
        m = self.t.expect(rb"ASKED (\d+) pending", at)
        self.t.expect(("DONE %s expired" % m.group(1).decode()).encode(), at)
        self.assertEqual(self.mode(), "plan")
        self.finish()

    def test_a_newer_request_supersedes(self):
        at = self.t.mark()
        self.t.send(b"S")
        first = int(self.t.expect(rb"ASKED (\d+) pending", at).group(1))
        self.t.expect(b"the first reason", at)
        self.t.expect(("DONE %d superseded" % first).encode(), at)
        self.t.expect(b"a second, newer reason", at)
        m = self.t.expect(rb"ASKED (\d+) pending", self.t.expect(b"superseded", at).end())
        self.deny(int(m.group(1)))
        self.assertEqual(self.mode(), "plan")
        self.finish()

    def test_approve_and_deny_from_another_terminal(self):
        rid = self.ask()
        p = subprocess.run([PIWORKFS, "mode", "--deny", "--mount", self.mp], env=self.env,
                           capture_output=True, text=True, timeout=DEADLINE)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.t.expect(("DONE %d denied" % rid).encode())
        rid = self.ask()
        p = subprocess.run([PIWORKFS, "mode", "--approve", str(rid), "--mount", self.mp],
                           env=self.env,
                           capture_output=True, text=True, timeout=DEADLINE)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.t.expect(("DONE %d approved" % rid).encode())
        self.assertEqual(self.mode(), "build")
        self.finish()

    def test_forged_answers_never_switch(self):
        at = self.t.mark()
        self.t.send(b"f")
        m = self.t.expect(rb"ASKED (\d+) pending", at)
        rid = int(m.group(1))
        self.t.expect(b"FORGED", at)
        # What it typed on its own terminal came back to it as its own input.
        self.t.expect(b"KEY 79", at)
        self.assert_keeps_drawing_and_reading_while_asked(rid)
        self.assertEqual(self.mode(), "plan")
        self.assertTrue(self.pending())
        self.deny(rid)
        self.assertEqual(self.mode(), "plan")
        self.finish()

    def assert_keeps_drawing_and_reading_while_asked(self, rid):
        at = self.t.mark()
        self.t.expect(rb"TICK \d+", at)
        self.assertNotIn(("DONE %d" % rid).encode(), self.t.buf[at:])

    def test_a_request_raised_while_the_person_types_y_never_switches(self):
        # The person types a word starting with y, then Enter, to the agent; the agent
        # asks on the first key, hoping the rest answers its question. The keys after the
        # first reach the agent or the bar, as fast as the bar comes up: none of them may
        # ask anything more (the "s" of "xyes" once made the agent ask twice, the second
        # time after the loop below had seen nothing pending, and the next word answered
        # that bar instead of reaching the agent).
        for word in (b"xyes\r", b"xy\r", b"x" + b"y\r" * 20):
            at = self.t.mark()
            self.t.send(word)
            self.t.expect(rb"ASKED (\d+) pending", at)
            self.assertEqual(self.mode(), "plan")
            end = time.monotonic() + DEADLINE
            while self.pending():  # the keys after the bar may have denied it already
                subprocess.run([PIWORKFS, "mode", "--deny", "--mount", self.mp],
                               env=self.env, capture_output=True, timeout=DEADLINE)
                self.assertLess(time.monotonic(), end)
            self.assertEqual(self.mode(), "plan")
        self.assertEqual(self.changes, [])
        self.finish()

    def test_a_request_flood_neither_switches_nor_freezes_the_relay(self):
        at = self.t.mark()
        self.t.send(b"F")
        self.t.expect(rb"FLOOD sent=5000", at)
        self.t.expect(rb"ERROR -32005", at)  # the daemon refuses the excess
        # The command keeps drawing through the flood.
        at = self.t.mark()
        self.t.expect(rb"TICK \d+", at)
        self.t.expect(rb"TICK \d+", self.t.expect(rb"TICK \d+", at).end())
        self.assertEqual(self.mode(), "plan")
        # Deny whatever is pending now, then the command reads its keys again.
        end = time.monotonic() + DEADLINE
        while self.pending():
            subprocess.run([PIWORKFS, "mode", "--deny", "--mount", self.mp], env=self.env,
                           capture_output=True, timeout=DEADLINE)
            self.assertLess(time.monotonic(), end)
        self.assertEqual(self.mode(), "plan")
        self.assertEqual(self.changes, [])
        self.finish()


class ConsentBar(AskingBase):
    """The question on terminals of 80 and 100 columns (issue 44, item 7): the agent's reason
    whole, on as many rows as it needs, and what any other answer does."""

    cols = None  # each test starts its own

    def test_the_reason_shows_whole_on_80_and_100_columns(self):
        for cols in (80, 100):
            with self.subTest(cols=cols):
                self.start_asker(cols)
                at, rid = self.asked(b"L")
                rows = self.bar(at)
                text = self.bar_text(rows)
                self.assertIn('the agent asks to switch plan \u2192 build ("%s")' % LONG_REASON,
                              text)
                self.assertIn("Type build, then Enter, to allow; any other answer denies.",
                              text)
                # The bottom rows, each within the width (never its last column).
                n = len(rows)
                self.assertGreaterEqual(n, 2, rows)
                self.assertEqual(sorted(rows), list(range(self.rows - n + 1, self.rows + 1)))
                for r in rows.values():
                    self.assertLessEqual(len(r), cols - 1, r)
                # The command keeps the rows above: scrolling stops there, its terminal
                # shrinks to them.
                self.assertIn(b"\x1b[1;%dr" % (self.rows - n), self.t.buf[at:])
                self.t.expect(b"ROWS %d" % (self.rows - n), at)
                # Typing the name keeps the reason in view; Enter allows.
                self.arm()
                at = self.t.mark()
                self.t.send(b"\r")
                self.t.expect(("DONE %d approved" % rid).encode(), at)
                # The rows are cleared and given back.
                self.t.expect(b"ROWS %d" % self.rows, at)
                self.assertIn(b"\x1b[r", self.t.buf[at:])
                self.assertEqual(self.mode(), "build")
                self.finish()

    def test_the_armed_bar_keeps_the_reason_and_says_what_denies(self):
        self.start_asker(80)
        at, rid = self.asked(b"L")
        self.past_grace()
        at = self.t.mark()
        self.t.send(b"bu")
        typed = self.bar_text(self.bar(at, "Typed: bu;"))
        self.assertIn(LONG_REASON, typed)
        self.assertIn("any other key denies", typed)
        at = self.t.mark()
        self.t.send(b"ild")
        armed = self.bar_text(self.bar(at, "Press Enter to allow"))
        self.assertIn(LONG_REASON, armed)
        self.assertIn("any other key denies", armed)
        at = self.t.mark()
        self.t.send(b"x")  # anything but Enter
        self.t.expect(("DONE %d denied" % rid).encode(), at)
        self.assertEqual(self.mode(), "plan")
        self.finish()

    def test_a_reason_full_of_controls_on_80_columns(self):
        self.start_asker(80)
        at, rid = self.asked(b"r")
        rows = self.bar(at)
        text = self.bar_text(rows)
        self.assertIn('("ok[2J]0;title Allow? [Y/n] ]n/Y[ zzz', text)
        self.assertTrue(all(len(r) <= 79 for r in rows.values()), rows)
        self.assertFalse(any(ord(c) < 0x20 or c == "\u202e" for c in text), text)
        self.deny(rid)
        self.finish()


class AskingWithoutTerminal(PtyTest):
    """Without run's terminal the question is not shown anywhere; the person answers with
    piworkfs mode --approve from a terminal of theirs, while the run lasts."""

    def start_asking(self, script):
        """The person's view in plan, and beside it `piworkfs run -- sh -c SCRIPT` without
        a terminal (pipes for its standard streams), killed on the way out."""
        self.bare_view("plan")
        run = subprocess.Popen([PIWORKFS, "run", "--project", self.project, "--", "sh", "-c",
                                script],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=self.env, cwd=self.project)
        self.addCleanup(lambda: run.poll() is None and run.kill())
        return run

    def until_asked(self, run):
        """What RUN prints on its stderr up to its next line ASKED."""
        err = b""
        end = time.monotonic() + DEADLINE
        while b"ASKED" not in err:
            self.assertLess(time.monotonic(), end, err)
            line = run.stderr.readline()
            self.assertTrue(line, err)
            err += line
        return err

    def test_mode_name_inside_asks_and_the_person_approves_from_outside(self):
        run = self.start_asking("piworkfs mode build --reason 'run the tests'; echo ASKED >&2; "
                                "read x; piworkfs mode --json")
        err = self.until_asked(run)
        self.assertIn(b"refused", err)
        told = re.search(rb"piworkfs mode --approve (\d+) --run \w+' \(or --approve build\)", err)
        self.assertIsNotNone(told, err)
        run_mp, _ = run_view(self.env, self.project)  # the run's own view answers for it
        p = subprocess.run([PIWORKFS, "mode", "--mount", run_mp], env=self.env,
                           capture_output=True, text=True, timeout=DEADLINE)
        self.assertIn('plan \u2192 build ("run the tests")', p.stdout)
        self.assertIn("pending request %s:" % told.group(1).decode(), p.stdout)
        p = subprocess.run([PIWORKFS, "mode", "--approve", told.group(1), "--mount", run_mp],
                           env=self.env,
                           capture_output=True, text=True, timeout=DEADLINE)
        self.assertEqual(p.returncode, 0, p.stderr)
        out, _ = run.communicate(b"go\n", timeout=DEADLINE)
        self.assertEqual(run.returncode, 0)
        self.assertEqual(json.loads(out)["mode"], "build")

    def test_the_answers_printed_work_as_printed(self):
        # Issue 44, item 8: `mode --run ID` printed `answer: piworkfs mode --approve 3`,
        # which from the person's terminal answers no view (or the bare view, where nothing
        # is pending). What is printed, run as printed from elsewhere, answers the run's.
        run = self.start_asking("piworkfs mode build --reason 'run the tests'; echo ASKED >&2; "
                                "read x; piworkfs mode off --reason 'all of it'; "
                                "echo ASKED >&2; read x; piworkfs mode --json")

        def told():
            """The command the agent was told the person may run."""
            err = self.until_asked(run)
            m = re.search(rb"allow it with '(piworkfs mode --approve \d+ --run \w+)'", err)
            self.assertIsNotNone(m, err)
            return m.group(1).decode()

        def sh(command):
            """COMMAND run by a shell of the person's, outside every view."""
            return subprocess.run(["sh", "-c", command], env=self.env, cwd=self.tmp,
                                  capture_output=True, text=True, timeout=DEADLINE)

        run_mp, _ = run_view(self.env, self.project)
        run_id = next(v["run"]["id"] for v in json.loads(
            subprocess.run([PIWORKFS, "status", "--json"], env=self.env, capture_output=True,
                           text=True, timeout=DEADLINE).stdout)
            if v.get("mountpoint") == run_mp)
        # What the agent is told to ask for works as told.
        inside = told()
        self.assertIn("--run " + run_id, inside)
        p = sh(inside)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        run.stdin.write(b"go\n")
        run.stdin.flush()
        # What `mode --run ID` shows the person works as shown.
        told()
        p = sh("piworkfs mode --run " + run_id)
        self.assertEqual(p.returncode, 0, p.stderr)
        m = re.search(r"answer: (piworkfs mode --approve \d+ --run \w+)   or   "
                      r"(piworkfs mode --deny --run \w+)", p.stdout)
        self.assertIsNotNone(m, p.stdout)
        p = sh(m.group(1))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("allowed: build \u2192 off", p.stdout)
        out, _ = run.communicate(b"go\n", timeout=DEADLINE)
        self.assertEqual(json.loads(out)["mode"], "off")


if __name__ == "__main__":
    unittest.main(verbosity=2)
