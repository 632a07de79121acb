#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The audit log end to end, through a real mount: denied operations made by real processes
become rows that `piworkfs log`, `log --follow`, `why` and `status` show.

Each test mounts the standard fixture tree (tests/lib/harness.py) in private temp dirs
with its own state database ($PIWORKFS_STATE_DB, and `--state-db` for the daemon):

    project/
      .git/config, .git/hooks/**   protected (EACCES in build)
      docs/design/{a,b,c}.md       design-writable
      docs/{x,y}.md                build/off only
      src/{a,b}.c, src/empty/      build/off only

Timing: the audit writer drains its queue in the background, so every test that expects a
row polls the log with a deadline (WRITER_DEADLINE) rather than sleeping a fixed time; a
test that expects no row first waits for a later denial (a barrier: the writer keeps the
order of the queue) or unmounts (stop flushes the queue). No test asserts how long
anything took: a deadline only turns a hang into a failure.
"""

import errno
import json
import os
import select
import sqlite3
import subprocess
import sys
import time
import unittest

import harness  # noqa: E402

WRITER_DEADLINE = 60.0
DEADLINE = 60.0  # for anything else another process must do
WINDOW_NS = 1_000_000_000  # the audit writer's coalescing window (fs/store/audit.c)


def my_comm():
    with open("/proc/self/comm") as f:
        return f.read().strip()


class AuditCase(harness.MountCase):
    """MountCase plus readers of the audit log and of the view's status."""

    def log_rows(self, *args, cwd=None):
        """Every row `piworkfs log --json -n 0 ARGS` prints, oldest first."""
        p = self.run_pw("log", "--json", "-n", "0", *args, cwd=cwd)
        self.assertEqual(p.returncode, 0, "piworkfs log: %s%s" % (p.stderr,
                                                                  self.daemon_logs()))
        return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]

    def wait_rows(self, pred, what, *args, deadline=WRITER_DEADLINE):
        """Polls the log until PRED(rows) is true; returns the rows."""
        rows = []
        end = time.monotonic() + deadline
        while True:
            rows = self.log_rows(*args)
            if pred(rows):
                return rows
            if time.monotonic() >= end:
                self.fail("after %.0f s the log still lacks %s; it holds:\n%s%s" %
                          (deadline, what, "\n".join(json.dumps(r) for r in rows),
                           self.daemon_logs()))
            time.sleep(0.05)

    def wait_row(self, op, path, *args, deadline=WRITER_DEADLINE, **fields):
        """Waits for a row with OP and PATH (and FIELDS); returns it."""
        def find(rows):
            return [r for r in rows if r["op"] == op and r["path"] == path and
                    all(r.get(k) == v for k, v in fields.items())]
        rows = self.wait_rows(find, "a %s row of %s %s" % (op, path, fields), *args,
                              deadline=deadline)
        return find(rows)[-1]

    def status(self, v):
        """The view's `status --json` object (through its own socket: other views of the
        machine are not ours)."""
        sock = self.socket_path(v)
        self.assertIsNotNone(sock, "no control socket for %s" % v.mp)
        p = self.run_pw("status", "--json", env={"PIWORKFS_SOCKET": sock})
        self.assertEqual(p.returncode, 0, "status: %s %s" % (p.stdout, p.stderr))
        arr = json.loads(p.stdout)
        self.assertEqual(len(arr), 1, p.stdout)
        return arr[0]

    def status_text(self, v):
        """`piworkfs status` for V: {field: value} of its table."""
        p = self.run_pw("status", env={"PIWORKFS_SOCKET": self.socket_path(v)}, check=True)
        fields = {}
        for line in p.stdout.splitlines()[1:]:
            key, _, value = line.strip().partition(" ")
            fields[key] = value.strip()
        return fields

    def db_count(self, sql, *params):
        """One number from the state database (read-only, as the CLI reads it)."""
        con = sqlite3.connect("file:%s?mode=ro" % self.state_db, uri=True, timeout=10)
        try:
            return con.execute(sql, params).fetchone()[0]
        finally:
            con.close()

    def run_denied(self, argv, cwd, err_text):
        """Runs ARGV (a real binary) in CWD; it must fail with ERR_TEXT on stderr. Returns its
        pid."""
        proc = subprocess.Popen(argv, cwd=cwd, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate(timeout=60)
        self.assertNotEqual(proc.returncode, 0, "%s succeeded: %s" % (argv, out))
        self.assertIn(err_text, err, "%s: %s" % (argv, err))
        return proc.pid

    def assert_event(self, row, **want):
        for k, v in want.items():
            self.assertEqual(row.get(k), v, "field %s of %s" % (k, json.dumps(row)))


class TestAcceptance(AuditCase):
    """The issue's acceptance: a denied `touch src/x` in plan, then `piworkfs log -n 1`."""

    def test_touch_in_plan_is_logged(self):
        v = self.mount("plan")
        pid = self.run_denied(["touch", "src/x"], v.mp, "Read-only file system")
        row = self.wait_row("create", "src/x")
        self.assert_event(row, mode="plan", errno="EROFS", errno_num=errno.EROFS,
                          reason="read-only", rule=None, denied=True, comm="touch", pid=pid,
                          path2=None, count=1, project=os.path.realpath(self.project),
                          mountpoint=v.mp)
        # The text a person reads: the newest line names all of it.
        p = self.run_pw("log", "-n", "1", check=True)
        lines = p.stdout.splitlines()
        self.assertEqual(len(lines), 2, p.stdout)  # header + one event
        self.assertTrue(lines[0].startswith("TIME"), p.stdout)
        cols = lines[1].split()
        for word in ("plan", "create", "EROFS", str(pid), "touch", "src/x", "read-only"):
            self.assertIn(word, cols, p.stdout)
        self.assertFalse(os.path.exists(os.path.join(self.project, "src/x")))


class TestOpTypes(AuditCase):
    """One event per denied operation type, with its fields (`log --json`)."""

    def check_ops(self, v, mode, err, ops):
        """Runs each (op, path, path2, fn) of OPS in this process; each must fail with ERR
        and leave a row with these fields."""
        for op, path, path2, fn in ops:
            with self.subTest(op=op, path=path):
                self.assertErrno(err, fn)
        pid, comm = os.getpid(), my_comm()
        for op, path, path2, fn in ops:
            with self.subTest(op=op, path=path):
                row = self.wait_row(op, path)
                self.assert_event(row, path2=path2, errno=errno.errorcode[err],
                                  errno_num=err, mode=mode, pid=pid, uid=os.getuid(),
                                  comm=comm, denied=True, mountpoint=v.mp,
                                  project=os.path.realpath(self.project))

    def test_each_op_in_plan(self):
        v = self.mount("plan")
        P = v.path
        ops = [
            ("create", "src/new.c", None,
             lambda: os.open(P("src/new.c"), os.O_WRONLY | os.O_CREAT, 0o644)),
            ("mkdir", "src/newdir", None, lambda: os.mkdir(P("src/newdir"))),
            ("unlink", "src/b.c", None, lambda: os.unlink(P("src/b.c"))),
            ("truncate", "docs/x.md", None, lambda: os.truncate(P("docs/x.md"), 0)),
            ("chmod", "docs/y.md", None, lambda: os.chmod(P("docs/y.md"), 0o600)),
            ("setxattr", "src/a.c", None,
             lambda: os.setxattr(P("src/a.c"), "user.test", b"1")),
            ("symlink", "src/sym", None, lambda: os.symlink("a.c", P("src/sym"))),
        ]
        before = harness.tree_hash(self.project)
        self.check_ops(v, "plan", errno.EROFS, ops)
        self.assertEqual(before, harness.tree_hash(self.project))

    def test_rename_and_link_carry_both_paths(self):
        v = self.mount("plan")
        P = v.path
        ops = [
            ("rename", "src/a.c", "docs/a.c",
             lambda: os.rename(P("src/a.c"), P("docs/a.c"))),
            ("link", "src/b.c", "docs/b.c", lambda: os.link(P("src/b.c"), P("docs/b.c"))),
        ]
        self.check_ops(v, "plan", errno.EROFS, ops)

    def test_protected_in_build_names_the_rule(self):
        v = self.mount("build")
        self.assertErrno(errno.EACCES, os.unlink, v.path(".git/hooks/pre-commit"))
        row = self.wait_row("unlink", ".git/hooks/pre-commit")
        self.assert_event(row, mode="build", errno="EACCES", reason="protected",
                          pid=os.getpid(), comm=my_comm())
        self.assertIsInstance(row["rule"], dict, json.dumps(row))
        self.assertEqual(row["rule"]["kind"], "protected", json.dumps(row))
        self.assertIn(".git/hooks", row["rule"]["pattern"], json.dumps(row))

    def test_write_through_fd_after_switch(self):
        v = self.mount("build")
        fd = os.open(v.path("src/a.c"), os.O_WRONLY)
        try:
            self.set_mode(v, "plan")
            self.assertErrno(errno.EROFS, os.write, fd, b"x")
        finally:
            os.close(fd)
        row = self.wait_row("write", "src/a.c")
        self.assert_event(row, mode="plan", errno="EROFS", reason="read-only",
                          pid=os.getpid(), comm=my_comm(), path2=None)
        # The generation is the switched policy's, later than the one the open saw.
        self.assertGreaterEqual(row["generation"], 2, json.dumps(row))
        with open(os.path.join(self.project, "src/a.c")) as f:
            self.assertEqual(f.read(), harness.STANDARD_TREE["src/a.c"])


WRITER_LOOP = r"""
import errno, os, sys, time
path, n = sys.argv[1], int(sys.argv[2])
t0 = time.monotonic()
for _ in range(n):
    try:
        os.close(os.open(path, os.O_WRONLY))
        sys.exit("open for writing succeeded")
    except OSError as e:
        if e.errno != errno.EROFS:
            raise
print("%.3f" % (time.monotonic() - t0))
sys.stdout.flush()
sys.stdin.read()   # stay alive until told: the writer reads /proc/PID/comm
"""


class TestCoalescing(AuditCase):
    """A storm of identical denials from one process becomes one row with a count."""

    def test_2000_denied_writes_one_row(self):
        n = 2000
        v = self.mount("plan")
        proc = subprocess.Popen([sys.executable, "-c", WRITER_LOOP, v.path("src/a.c"), str(n)],
                                env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            elapsed = float(proc.stdout.readline() or "nan")
            rows = self.wait_rows(
                lambda rs: sum(r["count"] for r in rs if r["pid"] == proc.pid) >= n,
                "%d events of pid %d" % (n, proc.pid))
        finally:
            proc.stdin.close()
            proc.wait(30)
            err = proc.stderr.read()
            proc.stdout.close()
            proc.stderr.close()
        self.assertEqual(proc.returncode, 0, err)
        mine = sorted((r for r in rows if r["pid"] == proc.pid), key=lambda r: r["first_ns"])
        listing = "%d denials in %.3f s became:\n%s" % (
            n, elapsed, "\n".join(json.dumps(r) for r in mine))
        # The window is measured on the events' own times, so how many rows a storm
        # makes depends on how long it lasted (a loaded machine stretches it): one row
        # per window, each row's events within 1 s of its first, and a new row only for
        # an event that no longer fits the previous one's window.
        self.assertEqual(sum(r["count"] for r in mine), n, listing)
        for row in mine:
            self.assert_event(row, op="open-write", path="src/a.c", errno="EROFS",
                              mode="plan")
            self.assertEqual(row["time_ns"], row["first_ns"], listing)
            self.assertLessEqual(row["first_ns"], row["last_ns"], listing)
            self.assertLess(row["last_ns"] - row["first_ns"], WINDOW_NS, listing)
        for prev, row in zip(mine, mine[1:]):
            self.assertGreaterEqual(row["first_ns"] - prev["first_ns"], WINDOW_NS, listing)
        self.assertLessEqual(len(mine), n // 2, "a storm is coalesced: " + listing)
        st = self.status(v)
        self.assertEqual(st["audit"]["coalesced"], n - len(mine), json.dumps(st))
        self.assertEqual(st["audit"]["dropped"], 0, json.dumps(st))
        self.assertEqual(self.db_count("SELECT count(*) FROM audit"), len(mine))


class TestQueueFull(AuditCase):
    """A tiny queue and a locked database: every event is written or counted as dropped,
    exactly."""

    def test_written_plus_dropped_is_submitted(self):
        n = 60
        v = self.mount("plan", args=["--audit-queue", "4"])
        st0 = self.status(v)["audit"]
        self.assertEqual(st0["dropped"], 0, st0)
        lock = sqlite3.connect(self.state_db, timeout=10, isolation_level=None)
        locked = True
        try:
            lock.execute("BEGIN EXCLUSIVE")
            # Distinct paths: no coalescing, one row per event written. Two bursts, both
            # while the writer waits on the lock, the second just before the lock goes,
            # as the tail of a real storm would. A denial is submitted before the
            # operation returns, so the counts below hold whenever they are read.
            first = 2 * n // 3
            for i in range(first):
                self.assertErrno(errno.EROFS, os.mkdir, v.path("src/d%03d" % i))
            st = self.status(v)
            self.assertEqual(st["audit"]["submitted"] - st0["submitted"], first,
                             json.dumps(st))
            self.assertEqual(st["audit"]["written"], st0["written"], json.dumps(st))
            self.assertGreaterEqual(st["audit"]["dropped"], first - 4, json.dumps(st))
            for i in range(first, n):
                self.assertErrno(errno.EROFS, os.mkdir, v.path("src/d%03d" % i))
            lock.execute("ROLLBACK")
            locked = False
        finally:
            if locked:
                lock.execute("ROLLBACK")
            lock.close()

        def settled():
            a = self.status(v)["audit"]
            return a if a["written"] + a["dropped"] == a["submitted"] else None
        harness.wait_until(settled, WRITER_DEADLINE, 0.05)
        a = settled()
        self.assertIsNotNone(a, "the writer did not settle: %s" % self.status(v))
        rows = self.wait_rows(lambda rs: len([r for r in rs if r["op"] == "mkdir"]) ==
                              a["written"] - st0["written"], "the written mkdir rows")
        written = [r for r in rows if r["op"] == "mkdir"]
        self.assertEqual(len(written) + a["dropped"], n,
                         "rows %d + dropped %d != %d" % (len(written), a["dropped"], n))
        self.assertGreater(a["dropped"], 0)
        self.assertGreater(len(written), 0)
        self.assertTrue(all(r["count"] == 1 for r in written))
        self.assertEqual(self.status(v)["denied"], n)
        text = self.status_text(v)
        self.assertEqual(text.get("audit"), "%d submitted, %d written, %d dropped, 0 coalesced"
                         % (a["submitted"], a["written"], a["dropped"]), text)
        self.assertEqual(text.get("denied"), str(n), text)
        # The total survives the daemon (docs/AUDIT.md: meta.audit_dropped).
        self.unmount(v)
        self.assertEqual(int(self.db_count(
            "SELECT value FROM meta WHERE key = 'audit_dropped'")), a["dropped"])


class TestOptions(AuditCase):
    """--log-allowed and --no-audit."""

    def allowed_then_barrier(self, v):
        with open(v.path("docs/x.md"), "a") as f:
            f.write("more\n")
        self.assertErrno(errno.EACCES, os.unlink, v.path(".git/config"))
        return self.wait_row("unlink", ".git/config")

    def test_log_allowed_records_allowed_writes(self):
        v = self.mount("build", args=["--log-allowed"])
        self.allowed_then_barrier(v)
        rows = self.log_rows()
        allowed = [r for r in rows if r["path"] == "docs/x.md"]
        self.assertTrue(allowed, "no allowed row:\n%s" % "\n".join(map(json.dumps, rows)))
        for r in allowed:
            self.assert_event(r, denied=False, errno=None, errno_num=0, mode="build",
                              pid=os.getpid())
        self.assertIn("open-write", {r["op"] for r in allowed})
        # --denied leaves them out.
        self.assertEqual([r for r in self.log_rows("--denied") if r["path"] == "docs/x.md"],
                         [])

    def test_allowed_writes_not_logged_by_default(self):
        v = self.mount("build")
        self.allowed_then_barrier(v)
        rows = self.log_rows()
        self.assertEqual([r for r in rows if not r["denied"]], [],
                         "\n".join(map(json.dumps, rows)))
        self.assertEqual(self.db_count("SELECT count(*) FROM audit WHERE errno = 0"), 0)

    def test_no_audit_writes_nothing(self):
        v = self.mount("plan", args=["--no-audit"])
        self.run_denied(["touch", "src/x"], v.mp, "Read-only file system")
        st = self.status(v)
        self.assertIsNone(st["audit"], json.dumps(st))
        self.assertEqual(self.status_text(v).get("audit"), "off (no audit log)")
        self.assertGreaterEqual(st["denied"], 1, json.dumps(st))
        self.unmount(v)  # a writer, if there were one, flushes at stop
        self.assertEqual(self.log_rows(), [])
        if os.path.exists(self.state_db):
            self.assertEqual(self.db_count("SELECT count(*) FROM audit"), 0)


def following(pid):
    """Is process PID waiting in its follow loop? Outside a view it sleeps (nanosleep,
    clock_nanosleep), inside it waits on its subscription (poll, ppoll); per
    /proc/PID/syscall, x86_64 and aarch64 numbers."""
    waits = {"35", "230", "101", "115", "7", "271", "73"}
    try:
        with open("/proc/%d/syscall" % pid) as f:
            return f.read().split(" ", 1)[0] in waits
    except OSError:
        return False


class TestFollow(AuditCase):
    """`piworkfs log --follow` prints a new denial; inside a view it subscribes."""

    def follow_case(self, cwd, clients_expected):
        """Starts `log --follow` in CWD (None: inside the view); checks that the view then
        has CLIENTS_EXPECTED control connections (status's own included)."""
        v = self.mount("plan")
        self.run_denied(["touch", "src/first"], v.mp, "Read-only file system")
        self.wait_row("create", "src/first")
        proc = subprocess.Popen([harness.PIWORKFS, "log", "--follow", "--json", "-n", "1"],
                                cwd=cwd or v.mp, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        try:
            first = self.read_line(proc, DEADLINE)
            self.assertEqual(json.loads(first)["path"], "src/first")
            # The listing is out: the follower has its starting point. It subscribes (inside
            # the view) after that, then waits: wait for both, never for a fixed time.
            clients = None

            def settled():
                nonlocal clients
                clients = self.status(v)["clients"]["connected"]
                return following(proc.pid) and clients == clients_expected
            harness.wait_until(settled, DEADLINE, 0.02)
            self.assertEqual(clients, clients_expected, "control connections while following")
            self.assertErrno(errno.EROFS, os.mkdir, v.path("src/second"))
            line = self.read_line(proc, DEADLINE)
            row = json.loads(line)
            self.assert_event(row, op="mkdir", path="src/second", pid=os.getpid())
        finally:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
            err = proc.stderr.read().decode(errors="replace")
            proc.stdout.close()
            proc.stderr.close()
        self.assertEqual(proc.returncode, 0, err)

    def read_line(self, proc, timeout):
        """One line of PROC's stdout within TIMEOUT seconds."""
        fd = proc.stdout.fileno()
        buf = b""
        end = time.monotonic() + timeout
        while not buf.endswith(b"\n"):
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.fail("no line from log --follow within %.1f s (got %r)%s" %
                          (timeout, buf, self.daemon_logs()))
            chunk = os.read(fd, 1)
            if not chunk:
                self.fail("log --follow exited: %s" % proc.stderr.read())
            buf += chunk
        return buf.decode()

    def test_follow_outside_a_view(self):
        self.follow_case(self.cwd, 1)  # outside a view the follower only polls

    def test_follow_inside_the_view(self):
        self.follow_case(None, 2)  # inside the view the follower subscribes


class TestLogScope(AuditCase):
    """Inside a live view `log` shows that view's project; --all and --project widen it."""

    def test_default_project_inside_a_view(self):
        v1 = self.mount("plan")
        proj2, mp2 = self.fresh_project("second")
        v2 = self.mount("plan", mountpoint=mp2, project=proj2)
        self.assertErrno(errno.EROFS, os.mkdir, v1.path("src/one"))
        self.assertErrno(errno.EROFS, os.mkdir, v2.path("src/two"))
        self.wait_rows(lambda rs: len(rs) == 2, "both denials")

        def paths(*args, cwd):
            p = self.run_pw("log", "--json", *args, cwd=cwd, check=True)
            return sorted(json.loads(line)["path"] for line in p.stdout.splitlines())
        self.assertEqual(paths(cwd=self.cwd), ["src/one", "src/two"])
        self.assertEqual(paths(cwd=v1.path("src")), ["src/one"])
        self.assertEqual(paths(cwd=v2.mp), ["src/two"])
        self.assertEqual(paths("--all", cwd=v1.mp), ["src/one", "src/two"])
        self.assertEqual(paths("--project", proj2, cwd=v1.mp), ["src/two"])
        p = self.run_pw("log", "--all", "--project", proj2)
        self.assertEqual(p.returncode, 2, p.stderr)


class TestWhy(AuditCase):
    """`piworkfs why PATH` after a denial: the denial, and the current decision."""

    def test_why_after_denial(self):
        v = self.mount("plan")
        pid = self.run_denied(["rm", "-f", "src/a.c"], v.mp, "Read-only file system")
        self.wait_row("unlink", "src/a.c")
        p = self.run_pw("why", "--json", "src/a.c", cwd=v.mp, check=True)
        out = json.loads(p.stdout)
        self.assertEqual(out["path"], "src/a.c", p.stdout)
        self.assertEqual(out["project"], os.path.realpath(self.project), p.stdout)
        self.assertEqual(out["mode"], "plan", p.stdout)
        self.assertEqual(out["mode_source"], "live", p.stdout)
        self.assertEqual(out["now"]["decision"], "denied", p.stdout)
        self.assertEqual(out["now"]["errno"], "EROFS", p.stdout)
        self.assertEqual(len(out["denials"]), 1, p.stdout)
        self.assert_event(out["denials"][0], op="unlink", comm="rm", pid=pid)
        # Text: the decision now, then the denial.
        p = self.run_pw("why", "src/a.c", cwd=v.mp, check=True)
        self.assertIn("denied EROFS", p.stdout)
        self.assertIn("mode plan", p.stdout)
        self.assertIn("rm", p.stdout.split())
        # After a switch to build the same path is allowed now; the denial stays.
        self.set_mode(v, "build")
        out = json.loads(self.run_pw("why", "--json", "src/a.c", cwd=v.mp, check=True).stdout)
        self.assertEqual(out["mode"], "build")
        self.assertEqual(out["now"]["decision"], "allowed")
        self.assertEqual(len(out["denials"]), 1)
        # From a subdirectory of the view, a relative path maps through the mountpoint.
        out = json.loads(self.run_pw("why", "--json", "a.c", cwd=v.path("src"),
                                     check=True).stdout)
        self.assertEqual((out["path"], len(out["denials"])), ("src/a.c", 1))
        # Offline (outside the view, naming the project) the denial is the same.
        out = json.loads(self.run_pw("why", "--json", "--project", self.project, "src/a.c",
                                     check=True).stdout)
        self.assertEqual(len(out["denials"]), 1)


class TestCorruptDatabase(AuditCase):
    """A corrupt state database never fails a mount: it is set aside and rebuilt."""

    def corrupt_case(self, content):
        with open(self.state_db, "wb") as f:
            f.write(content)
        v = self.mount("plan")
        self.run_denied(["touch", "src/x"], v.mp, "Read-only file system")
        row = self.wait_row("create", "src/x")
        self.assert_event(row, comm="touch", mode="plan")
        with open(self.state_db, "rb") as f:
            self.assertEqual(f.read(16), b"SQLite format 3\0")
        aside = [n for n in os.listdir(self.tmp) if n.startswith("state.db.corrupt-")]
        self.assertTrue(aside, os.listdir(self.tmp))
        with open(os.path.join(self.tmp, sorted(aside)[0]), "rb") as f:
            # The content set aside is the user's (opening may have rewritten the header's
            # version and change-counter bytes, not the pages).
            self.assertEqual(f.read()[100:], content[100:])
        self.assertIn("corrupt", v.log().lower())
        self.assertIn(self.state_db, v.log())

    def test_not_a_database(self):
        self.corrupt_case(b"this is not an SQLite database\n" * 200)

    def test_damaged_database(self):
        # A real database whose pages after the header are overwritten.
        con = sqlite3.connect(self.state_db)
        con.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)")
        con.executemany("INSERT INTO meta VALUES (?, ?)",
                        [("k%d" % i, "v" * 200) for i in range(200)])
        con.commit()
        con.close()
        with open(self.state_db, "rb") as f:
            data = bytearray(f.read())
        for i in range(4096, len(data), 97):
            data[i] = 0xA5
        self.corrupt_case(bytes(data))


if __name__ == "__main__":
    unittest.main(verbosity=2)
