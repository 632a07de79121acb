#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Live switching (design.md section 5): when `piworkfs mode X` returns, every operation
that starts afterwards obeys X, including writes through descriptors opened under the old
mode, and kernel caches (write bits, entries of hidden names) do not outlive the switch.

Fixture: harness.STANDARD_TREE (drawn there); HiddenSwitchTest adds a project mode layer
that hides .env in build (an untrusted project may add hide rules).
"""

import bisect
import errno
import json
import mmap
import os
import socket
import subprocess
import sys
import threading
import time
import unittest

import harness  # noqa: E402
from test_enforce import expect  # noqa: E402

EROFS, EACCES, ENOENT = errno.EROFS, errno.EACCES, errno.ENOENT


def _recv_line(sock):
    """One line from SOCK (its timeout is the deadline); b"" at EOF or reset."""
    buf = b""
    while not buf.endswith(b"\n"):
        try:
            chunk = sock.recv(1)
        except ConnectionResetError:
            break
        if not chunk:
            break
        buf += chunk
    return buf


class LiveCase(harness.MountCase):
    def setUp(self):
        super().setUp()
        # The mode command and the control socket are part of the product under test.
        p = self.run_pw("mode", "--help")
        self.assertEqual(p.returncode, 0, "piworkfs mode --help: %s" % p.stderr)

    def probe(self, v, mode, i):
        """Direct syscalls after a switch to MODE: each must obey MODE exactly."""
        cases = [
            ("src/a.c", lambda: _write(v.path("src/a.c"), b"/* %d */\n" % i)),
            ("docs/design/a.md", lambda: _write(v.path("docs/design/a.md"), b"# %d\n" % i)),
            (".git/config", lambda: _write(v.path(".git/config"), b"[core]\n")),
            ("docs/n%d" % i, lambda: os.close(os.open(v.path("docs/n%d" % i),
                                                      os.O_CREAT | os.O_WRONLY |
                                                      os.O_CLOEXEC, 0o644))),
            ("docs/design/n%d" % i, lambda: os.mkdir(v.path("docs/design/n%d" % i))),
        ]
        for rel, fn in cases:
            exp = expect(mode, rel)
            with self.subTest(step=i, mode=mode, path=rel):
                before = harness.tree_hash(self.project)
                if exp is None:
                    fn()
                    self.assertNotEqual(before, harness.tree_hash(self.project))
                else:
                    self.assertErrno(exp, fn)
                    self.assertEqual(before, harness.tree_hash(self.project))
                # The view tells the truth about it, at once.
                if rel in ("src/a.c", "docs/design/a.md", ".git/config"):
                    allowed = exp is None
                    self.assertEqual(os.access(v.path(rel), os.W_OK), allowed,
                                     "access(W_OK) of %s right after switching to %s" %
                                     (rel, mode))
                    self.assertEqual(bool(os.stat(v.path(rel)).st_mode & 0o200), allowed,
                                     "write bit of %s right after switching to %s" %
                                     (rel, mode))


def _write(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.pwrite(fd, data, 0)
    finally:
        os.close(fd)


class SwitchTest(LiveCase):
    def test_switch_sequences_across_all_modes(self):
        v = self.mount("plan", args=["--timeout", "86400"])
        seq = ["build", "design", "off", "review", "discuss", "build", "plan", "off", "design",
               "plan", "build", "discuss", "design", "review", "off", "plan"]
        self.probe(v, "plan", 0)
        for i, mode in enumerate(seq, 1):
            p = self.set_mode(v, mode)
            self.assertIn(mode, p.stdout)
            self.probe(v, mode, i)
        # Without NAME, inside the view: the live mode.
        p = self.run_pw("mode", cwd=v.path("src"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("plan", p.stdout)

    def test_unknown_mode_keeps_the_active_one(self):
        v = self.mount("build")
        p = self.run_pw("mode", "--mount", v.mp, "frobnicate")
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("frobnicate", p.stderr)
        _write(v.path("src/a.c"), b"still build\n")

    def test_unknown_mode_is_answered_in_one_connection(self):
        # The error's data lists the modes and names the project: `piworkfs mode` needs no
        # second call to say "did you mean" or that a file was added since the load
        # (it took three connections: mode.set, status, modes.list).
        v = self.mount("build")

        def accepted():
            return self.rpc(v, "status")["clients"]["accepted"]

        before = accepted()
        p = self.run_pw("mode", "--mount", v.mp, "desgin")
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("did you mean 'design'", p.stderr)
        p = self.run_pw("mode", "--mount", v.mp, "frobnicate")
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("available: build, design", p.stderr)
        os.makedirs(os.path.join(self.project, ".piworkfs", "modes"), exist_ok=True)
        with open(os.path.join(self.project, ".piworkfs", "modes", "late.md"), "w") as f:
            f.write("---\ndescription: added after the mount\n---\nLate.\n")
        p = self.run_pw("mode", "--mount", v.mp, "late")
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("run 'piworkfs reload' first", p.stderr)
        # Three commands, one connection each, then this status call's own.
        self.assertEqual(accepted() - before, 4)

    def test_acceptance(self):
        # The acceptance: mount in plan, a shell write fails, `piworkfs mode build`
        # answers, the same write succeeds.
        v = self.mount("plan")
        sh = ["sh", "-c", "echo x > src/a.c"]
        p = self.run_tool(sh, cwd=v.mp, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("Read-only file system", p.stderr)
        self.assertEqual(harness.STANDARD_TREE["src/a.c"],
                         open(os.path.join(self.project, "src/a.c")).read())
        p = self.run_pw("mode", "build", cwd=v.mp)
        self.assertEqual(p.returncode, 0, p.stderr + self.daemon_logs())
        self.assertIn("build", p.stdout)
        self.run_tool(sh, cwd=v.mp)
        with open(os.path.join(self.project, "src/a.c")) as f:
            self.assertEqual(f.read(), "x\n")


class DescriptorTest(LiveCase):
    def test_descriptor_opened_in_build_obeys_later_modes(self):
        v = self.mount("build")
        fd = os.open(v.path("src/a.c"), os.O_RDWR | os.O_CLOEXEC)
        self.addCleanup(os.close, fd)
        src = os.open(v.path("docs/design/a.md"), os.O_RDONLY | os.O_CLOEXEC)
        self.addCleanup(os.close, src)
        os.pwrite(fd, b"/* build */", 0)
        for mode, err in (("plan", EROFS), ("design", EACCES), ("discuss", EROFS)):
            self.set_mode(v, mode)
            before = harness.tree_hash(self.project)
            with self.subTest(mode=mode):
                self.assertErrno(err, os.pwrite, fd, b"/* late */", 0)
                self.assertErrno(err, os.write, fd, b"/* late */")
                self.assertErrno(err, os.ftruncate, fd, 0)
                self.assertErrno(err, os.posix_fallocate, fd, 0, 1 << 20)
                self.assertErrno(err, os.copy_file_range, src, fd, 100, 0, 0)
                self.assertErrno(err, os.fchmod, fd, 0o600)
                self.assertErrno(err, os.setxattr, fd, "user.late", b"1")
                # Reads still work.
                self.assertEqual(os.pread(fd, 11, 0), b"/* build */")
            self.assertEqual(before, harness.tree_hash(self.project))
        self.set_mode(v, "build")
        os.pwrite(fd, b"/* again */", 0)
        with open(os.path.join(self.project, "src/a.c"), "rb") as f:
            self.assertEqual(f.read(11), b"/* again */")

    def test_mmap_opened_in_build_after_plan(self):
        # A shared writable mapping made in build: after the switch to plan, dirty pages
        # must not reach the backing file, at msync, fsync, munmap, close or unmount. The
        # check comes after the unmount, when the kernel has nothing left to write back,
        # never after a pause. The control: the same steps in build do reach the file.
        def dirty_mapping(v, rel, data, switch_to=None):
            fd = os.open(v.path(rel), os.O_RDWR | os.O_CLOEXEC)
            try:
                m = mmap.mmap(fd, len(data), mmap.MAP_SHARED,
                              mmap.PROT_READ | mmap.PROT_WRITE)
                try:
                    if switch_to:
                        self.set_mode(v, switch_to)
                    m[0:len(data)] = data
                    try:
                        m.flush()  # msync: the write-back may fail (how is the kernel's choice)
                    except OSError:
                        pass
                    try:
                        os.fsync(fd)
                    except OSError:
                        pass
                finally:
                    m.close()
            finally:
                os.close(fd)

        def backing(rel):
            with open(os.path.join(self.project, rel), "rb") as f:
                return f.read()

        v = self.mount("build")
        dirty_mapping(v, "src/b.c", b"CTRL")
        self.unmount(v)
        self.assertEqual(backing("src/b.c")[:4], b"CTRL",
                         "control: a page dirtied in build reaches the backing file")

        before = harness.tree_hash(self.project)
        v = self.mount("build")
        dirty_mapping(v, "src/a.c", b"MMAP", switch_to="plan")
        self.unmount(v)
        self.assertEqual(before, harness.tree_hash(self.project),
                         "a page dirtied through a mapping after the switch to plan reached "
                         "the backing file")


class WriteBitsTest(LiveCase):
    """Write bits shown by stat after a switch, with 5,000 attributes in the kernel's cache
    (--timeout 86400)."""

    def setUp(self):
        super().setUp()
        for d in range(50):
            harness.write_tree(self.project, {"many/d%02d/f%03d" % (d, f): ""
                                              for f in range(100)})
        self.paths = ["many/d%02d/f%03d" % (d, f) for d in range(50) for f in range(100)]

    def stale(self, v, writable):
        return [p for p in self.paths if bool(os.stat(v.path(p)).st_mode & 0o200) != writable]

    # How long the first test waits for the write bits: a deadline that turns a missed
    # invalidation into a failure (the second test checks that there is no lag at all).
    DEADLINE = 60.0

    def test_write_bits_follow_each_switch(self):
        v = self.mount("plan", args=["--timeout", "86400"])
        for mode, writable in (("build", True), ("plan", False), ("off", True),
                               ("design", False)):
            for p in self.paths:
                os.stat(v.path(p))
            self.set_mode(v, mode)
            self.assertTrue(harness.wait_until(lambda: not self.stale(v, writable),
                                               self.DEADLINE),
                            "%d cached attributes still show the old write bits after the "
                            "switch to %s" % (len(self.stale(v, writable)), mode))

    def test_write_bits_are_invalidated_when_the_switch_answers(self):
        # design.md section 5: when the switch answers, the kernel's cached write bits are
        # invalidated already (fs/switch.c waits for its attribute pass). The status asked
        # on the same connection right after the answer says so, and stat agrees at once.
        # (Regression test: the pass used to run after the answer, so a stat right after
        # `piworkfs mode design` could still show build's write bit.)
        v = self.mount("plan", args=["--timeout", "86400"])
        for p in self.paths:
            os.stat(v.path(p))
        c = harness.RpcClient(self.socket_path(v))
        self.addCleanup(c.close)
        for mode, writable in (("build", True), ("design", False), ("off", True)):
            gen = c.call("mode.set", {"mode": mode})["generation"]
            inv = c.call("status")["invalidations"]
            self.assertGreaterEqual(inv["generation"], gen,
                                    "the switch to %s answered before its attribute "
                                    "invalidations were sent: %r" % (mode, inv))
            self.assertEqual(inv["pending"], 0, inv)
            stale = self.stale(v, writable)
            self.assertEqual(stale, [], "%d of %d cached attributes showed the old write bit "
                             "right after the switch to %s answered" %
                             (len(stale), len(self.paths), mode))


class InsideTheViewTest(LiveCase):
    def test_check_inside_the_view_agrees_with_the_daemon(self):
        # Trust is recorded for the project's real path; run inside the view, `check` and
        # `allowed` must use the backing project's modes and trust, as the daemon does.
        self.trust()
        v = self.mount("design")
        with open(v.path("styles/tokens.css"), "a") as f:  # the daemon allows it
            f.write("/* token */\n")
        p = self.run_pw("check", "--mode", "design", "styles/tokens.css", "src/a.c", cwd=v.mp)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)  # src/a.c is denied
        lines = p.stdout.splitlines()
        self.assertTrue(lines[0].startswith("allowed") and "styles/tokens.css" in lines[0], p.stdout)
        self.assertTrue(lines[1].startswith("denied") and "src/a.c" in lines[1], p.stdout)
        p = self.run_pw("allowed", "--mode", "design", cwd=v.mp)
        self.assertIn("styles/tokens.css", p.stdout)


class PersistAndAuthorityTest(LiveCase):
    def test_switch_is_restored_on_the_next_mount(self):
        v = self.mount(None)  # a project never seen: plan
        self.assertErrno(EROFS, _write, v.path("src/a.c"), b"x")
        self.set_mode(v, "design")
        self.unmount(v)
        v = self.mount(None)
        _write(v.path("docs/design/a.md"), b"# restored\n")
        self.assertErrno(EACCES, _write, v.path("src/a.c"), b"x")
        p = self.run_pw("mode", "--mount", v.mp)
        self.assertIn("design", p.stdout)

    def test_another_uid_cannot_switch(self):
        # The socket's directory is 0700; opened up here on purpose, so that the server's
        # own check of the peer's uid (SO_PEERCRED) is what refuses.
        v = self.mount("plan")
        sock = self.socket_path(v)
        os.chmod(self.tmp, 0o755)
        os.chmod(self.runtime, 0o755)
        os.chmod(os.path.dirname(sock), 0o755)
        os.chmod(sock, 0o777)
        probe = ("import json,os,socket,sys\n"
                 "os.setgid(65534); os.setuid(65534)\n"
                 "s=socket.socket(socket.AF_UNIX); s.settimeout(10)\n"
                 "try:\n  s.connect(sys.argv[1])\n"
                 "  s.sendall(b'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"mode.set\",'\n"
                 "            b'\"params\":{\"mode\":\"off\"}}\\n')\n"
                 "  print(s.recv(65536).decode())\n"
                 "except OSError as e:\n  print('oserror', e)\n")
        p = subprocess.run([sys.executable, "-c", probe, sock], capture_output=True, text=True,
                           timeout=30)
        self.assertNotIn('"result"', p.stdout, "another uid switched the mode: %s" % p.stdout)
        # The server itself answered the refusal (docs/PROTOCOL.md: -32002, authority).
        self.assertIn("-32002", p.stdout, "stdout: %r stderr: %r" % (p.stdout, p.stderr))
        # Still plan.
        self.assertErrno(EROFS, _write, v.path("src/a.c"), b"x")

    def test_agent_socket_flood_cannot_lock_the_person_out(self):
        # An agent fills its socket with subscribed connections (exempt from the idle
        # timeout). Its socket has its own limit, so `piworkfs mode plan` outside still
        # gets a slot and switches (docs/SECURITY.md). Before the limits were separate,
        # 256 such connections made it exit 5 ("too many connections").
        v = self.mount("build")
        agent = self.rpc(v, "agent.open")["socket"]
        sub = b'{"jsonrpc":"2.0","id":1,"method":"subscribe"}\n'
        flood = []
        try:
            for _ in range(300):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                flood.append(s)
                s.connect(agent)  # blocking: waits while the listen backlog is full
                s.settimeout(60)  # the deadline for its answer
                try:
                    s.sendall(sub)
                except OSError:
                    pass  # refused (and closed) already: the answer is still to be read
            answers = [json.loads(_recv_line(s)) for s in flood]
            subscribed = [a for a in answers if "result" in a]
            refused = [a for a in answers if a.get("error", {}).get("code") == -32005]
            self.assertEqual(len(subscribed) + len(refused), len(flood), answers[:3])
            self.assertGreaterEqual(len(subscribed), 16, "room for an agent's own needs")
            self.assertGreater(len(refused), 0, "the agent socket has a limit")
            p = self.set_mode(v, "plan")  # exit 0 required
            self.assertIn("plan", p.stdout)
            self.assertErrno(EROFS, _write, v.path("src/a.c"), b"x")
        finally:
            for s in flood:
                s.close()


HIDE_TREE = dict(harness.STANDARD_TREE)
HIDE_TREE.update({
    ".env": "SECRET=1\n",
    ".piworkfs/modes/build.md": ("---\nname: build\ndescription: build without .env\n"
                                 "hide:\n  - \".env\"\n---\nNo secrets.\n"),
})


class HiddenSwitchTest(LiveCase):
    tree = HIDE_TREE

    def visible(self, v):
        try:
            os.lstat(v.path(".env"))
            st = True
        except FileNotFoundError:
            st = False
        return st, ".env" in os.listdir(v.mp)

    def test_hidden_name_follows_the_mode(self):
        v = self.mount("plan", args=["--timeout", "86400"])
        for i, (mode, shown) in enumerate([("plan", True), ("build", False), ("plan", True),
                                           ("build", False), ("off", True), ("build", False),
                                           ("design", True)]):
            if i:
                self.set_mode(v, mode)
            with self.subTest(step=i, mode=mode):
                # Twice: the first answer fills the kernel's caches, which the next switch
                # must not leave behind.
                self.assertEqual(self.visible(v), (shown, shown))
                self.assertEqual(self.visible(v), (shown, shown))
                if shown:
                    with open(v.path(".env")) as f:
                        self.assertEqual(f.read(), "SECRET=1\n")
                else:
                    self.assertErrno(ENOENT, os.open, v.path(".env"), os.O_RDONLY | os.O_CLOEXEC)


    def test_descriptors_opened_before_the_switch_stop_reading_a_hidden_file(self):
        v = self.mount("plan", args=["--timeout", "86400"])
        plain = os.open(v.path(".env"), os.O_RDONLY | os.O_CLOEXEC)
        direct = os.open(v.path(".env"), os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
        self.addCleanup(os.close, plain)
        self.addCleanup(os.close, direct)
        self.assertEqual(os.pread(plain, 100, 0), b"SECRET=1\n")  # now in the page cache
        # A process that maps the file, then reads it again after the switch.
        child = subprocess.Popen(
            [sys.executable, "-c",
             "import mmap, os, sys\n"
             "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
             "m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ)\n"
             "print(m[:9].decode(), flush=True)\n"
             "sys.stdin.readline()\n"
             "print(m[:9].decode(), flush=True)\n", v.path(".env")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.addCleanup(child.kill)
        self.assertEqual(child.stdout.readline().strip(), "SECRET=1")
        self.set_mode(v, "build")  # hides .env
        with open(os.path.join(self.project, ".env"), "w") as f:
            f.write("SECRET=2\n")
        self.assertErrno(ENOENT, os.pread, plain, 100, 0)
        buf = mmap.mmap(-1, 4096)
        self.assertErrno(ENOENT, os.preadv, direct, [buf], 0)
        self.assertErrno(ENOENT, os.getxattr, plain, "user.k")
        self.assertErrno(ENOENT, os.listxattr, plain)
        out, _ = child.communicate("\n", timeout=30)
        self.assertNotIn("SECRET", out, "the mapping still showed the file (exit %s)" %
                         child.returncode)


PROBE_TREE = dict(harness.STANDARD_TREE)
PROBE_TREE.update({
    "src/.secret": "token\n",
    ".piworkfs/modes/design.md": ("---\nname: design\ndescription: design, src/.secret hidden\n"
                                  "hide:\n  - \"src/.secret\"\n---\nNo secrets.\n"),
})


class HiddenProbeTest(LiveCase):
    """A refused create must not tell a hidden name from a free one: in a directory the
    mode makes read-only, both answer the mode's errno."""
    tree = PROBE_TREE

    def test_refused_creates_read_the_same_for_hidden_and_free_names(self):
        v = self.mount("design")
        self.assertErrno(ENOENT, os.lstat, v.path("src/.secret"))
        with open(v.path("docs/design/mine.md"), "w") as f:
            f.write("x\n")
        attempts = {
            "create": lambda p: os.close(os.open(p, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC)),
            "create excl": lambda p: os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY)),
            "mkdir": os.mkdir,
            "mkfifo": os.mkfifo,
            "symlink": lambda p: os.symlink("a.c", p),
            "link": lambda p: os.link(v.path("docs/design/mine.md"), p),
            "rename onto": lambda p: os.rename(v.path("docs/design/mine.md"), p),
        }
        for what, fn in attempts.items():
            with self.subTest(what=what):
                errs = []
                for name in ("src/.secret", "src/free"):
                    try:
                        fn(v.path(name))
                        errs.append("succeeded")
                    except OSError as e:
                        errs.append(errno.errorcode[e.errno])
                self.assertEqual(errs[0], errs[1], errs)
                self.assertEqual(errs[0], "EACCES")
        with open(os.path.join(self.project, "src/.secret")) as f:
            self.assertEqual(f.read(), "token\n")


class HiddenStressTest(LiveCase):
    """3,000 switches between plan (.env visible) and build (.env hidden) while two threads
    look the name up (lstat, and open for reading) with --timeout 86400: every lookup that
    started after a switch returned and ended before the next one was requested must answer
    as the mode says.
    PRODUCT BUG (reported by mounttests): a race, seen in about a third of the runs on a
    loaded machine (two runs at once), rarely on an idle one. In one interval out of
    thousands the view keeps answering against the mode until the next switch: in build,
    lstat(".env") succeeded over a thousand times (a hidden name left in the kernel's
    caches); in plan, every open(".env") answered ENOENT while lstat succeeded."""
    tree = HIDE_TREE
    SWITCHES = 3000

    def test_lookups_follow_rapid_switches(self):
        v = self.mount("plan", args=["--timeout", "86400"])
        path = v.path(".env")
        switches, looks = [], []
        stop = threading.Event()
        problems = []

        def switcher():  # the lookers stop when it does, whatever happens
            self.switch_storm(v, ("plan", "build"), self.SWITCHES, 4321, stop, problems,
                              record=switches,
                              # leave room for whole lookups
                              after=lambda rng: time.sleep(rng.random() * 0.003))

        def open_for_reading():
            os.close(os.open(path, os.O_RDONLY | os.O_CLOEXEC))

        # Two lookers: (t started, t ended, seen, errno, kind) of each lookup in looks.
        self.run_storm(switcher, stop, looks,
                       [("stat", lambda: os.lstat(path)), ("open", open_for_reading)])
        self.assertEqual(problems, [], self.daemon_logs())
        self.assertEqual({e for _, _, seen, e, _ in looks if not seen} - {ENOENT}, set())
        ordered = sorted(looks)
        keys = [w[0] for w in ordered]
        wrong, decisive = [], 0
        for i, (t0, t1, mode) in enumerate(switches):
            hi = switches[i + 1][0] if i + 1 < len(switches) else float("inf")
            j = bisect.bisect_left(keys, t1)
            while j < len(keys) and keys[j] < hi:
                w = ordered[j]
                if w[1] < hi:
                    decisive += 1
                    if w[2] != (mode == "plan"):
                        wrong.append((mode, w, i))
                j += 1
        self.assertGreater(decisive, 200, "too few decisive lookups")
        intervals = sorted({(m, sw) for m, w, sw in wrong})
        self.assertEqual(len(wrong), 0, "%d of %d decisive lookups answered against the mode "
                         "in force, in %d switch intervals (%s); by kind: %s; first: %s" %
                         (len(wrong), decisive, len(intervals),
                          ", ".join("%s #%d" % iv for iv in intervals[:10]),
                          {k: sum(1 for _, w, _ in wrong if w[4] == k) for k in ("stat", "open")},
                          [(m, w) for m, w, _ in wrong[:3]]))


class StressTest(LiveCase):
    """~2000 switches between build and plan (straight over the control socket, as
    `piworkfs mode` does) while two threads write to src/a.c, one through a descriptor
    opened in build, one opening it each time, recording when each write started and ended.

    The property: a write that started after mode.set(plan) returned, and ended before the
    next mode.set(build) was requested, failed with EROFS. A write still in flight when the
    switch to build is requested is concurrent with that switch, and may be decided under
    either mode (a first version of this test counted those too, and found dozens: all of
    them overlapped the next switch)."""
    SWITCHES = 2000

    def test_no_write_after_a_switch_to_plan_succeeds(self):
        v = self.mount("build", args=["--timeout", "86400"])
        path = v.path("src/a.c")
        held = os.open(path, os.O_WRONLY | os.O_CLOEXEC)  # opened in build
        self.addCleanup(os.close, held)
        switches = []  # (t requested, t returned, mode)
        writes = []    # (t started, t ended, succeeded, errno, kind)
        stop = threading.Event()
        problems = []

        def pause(rng):
            if rng.random() < 0.2:
                time.sleep(rng.random() * 0.002)

        def switcher():  # the writers stop when it does, whatever happens
            self.switch_storm(v, ("build", "plan"), self.SWITCHES, 1234, stop, problems,
                              record=switches, before=pause)

        def open_and_write():
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.pwrite(fd, b"o", 1)
            finally:
                os.close(fd)

        # Two writers: through the descriptor held since build, and opening anew.
        self.run_storm(switcher, stop, writes,
                       [("held", lambda: os.pwrite(held, b"h", 0)), ("open", open_and_write)])
        self.assertEqual(problems, [], self.daemon_logs())
        self.assertEqual(len(switches), self.SWITCHES)
        # Every failure is the read-only mode's EROFS.
        self.assertEqual({e for _, _, ok, e, _ in writes if not ok} - {EROFS}, set())
        # Plan intervals: from the return of a switch to plan to the request of the next
        # switch to build. A write that started and ended inside one must have failed.
        intervals = []
        for i, (t0, t1, mode) in enumerate(switches):
            if mode == "plan":
                end = switches[i + 1][0] if i + 1 < len(switches) else float("inf")
                intervals.append((t1, end))
        ordered = sorted(writes)
        keys = [w[0] for w in ordered]
        bad, decisive, overlapping = [], 0, 0
        for lo, hi in intervals:
            j = bisect.bisect_left(keys, lo)
            while j < len(keys) and keys[j] < hi:
                w = ordered[j]
                if w[1] >= hi:
                    overlapping += 1  # concurrent with the next switch: either answer
                else:
                    decisive += 1
                    if w[2]:
                        bad.append((lo, hi, w))
                j += 1
        n_ok = sum(1 for w in writes if w[2])
        n_fail = len(writes) - n_ok
        self.assertGreater(n_ok, 100, "too few successful writes to mean anything")
        self.assertGreater(n_fail, 100, "too few denied writes to mean anything")
        self.assertGreater(decisive, 100, "too few writes fell wholly inside plan intervals "
                           "(%d; %d overlapped a switch)" % (decisive, overlapping))
        detail = ["%s write started %.3f ms after the switch to plan returned, took %.3f ms"
                  % (w[4], (w[0] - lo) / 1e6, (w[1] - w[0]) / 1e6) for lo, hi, w in bad[:10]]
        self.assertEqual(len(bad), 0, "%d writes that started after a switch to plan had "
                         "returned, and ended before the next switch, succeeded (of %d "
                         "writes, %d denied; %d switches; held: %d, open: %d):\n  %s" %
                         (len(bad), len(writes), n_fail, len(switches),
                          sum(1 for b in bad if b[2][4] == "held"),
                          sum(1 for b in bad if b[2][4] == "open"), "\n  ".join(detail)))


if __name__ == "__main__":
    unittest.main(verbosity=2)
