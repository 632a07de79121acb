#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`piworkfs log`, `why` and `trust` against a state database seeded with sqlite3.

The database is created by the program itself (`piworkfs trust` runs the migrations), then
rows are inserted into the audit table directly, with chosen times, so filters can be
checked exactly. Environment: PIWORKFS is the program to test.
"""

import contextlib
import json
import os
import select
import shutil
import sqlite3
import subprocess
import tempfile
import time
import unittest

PIWORKFS = os.environ.get("PIWORKFS", "piworkfs")
SOURCE_MODES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "modes")
NS = 1_000_000_000
EROFS, EACCES = 30, 13
# How long a test waits for the follower before calling it a failure: a deadline, not a
# speed claim (how soon `log --follow` prints is the benchmark's business).
DEADLINE = 60.0


class LineReader:
    """Reads whole lines from a child's stdout with a deadline (select on the raw fd, so
    no line can hide in a Python buffer while select says there is nothing to read)."""

    def __init__(self, proc):
        self.proc, self.buf = proc, b""

    def line(self, deadline=DEADLINE):
        end = time.monotonic() + deadline
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    return None
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()


def wait_sleeping(pid, deadline=DEADLINE):
    """Waits until process PID is asleep in nanosleep or clock_nanosleep (per
    /proc/PID/syscall, x86_64 and aarch64 numbers): the follower without a database to
    read or a view to listen to has nothing else to sleep in."""
    sleeps = {"35", "230", "101", "115"}
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        with open(f"/proc/{pid}/syscall") as f:
            if f.read().split(" ", 1)[0] in sleeps:
                return True
        time.sleep(0.01)
    return False


class LogCliTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pw-test-log-")
        self.db = os.path.join(self.tmp, "state", "state.db")
        self.project = os.path.join(self.tmp, "proj")
        os.makedirs(os.path.join(self.project, ".git"))
        os.makedirs(os.path.join(self.project, "src"))
        self.other = os.path.join(self.tmp, "other")
        os.makedirs(self.other)
        self.env = dict(os.environ)
        self.env.update(
            PIWORKFS_STATE_DB=self.db,
            HOME=self.tmp,
            XDG_CONFIG_HOME=os.path.join(self.tmp, "config"),
            PIWORKFS_MODES_DIR=os.path.abspath(SOURCE_MODES),
            TZ="UTC",
        )
        self.env.pop("XDG_STATE_HOME", None)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_pw(self, *args, cwd=None, check=True):
        p = subprocess.run(
            [PIWORKFS, *args], cwd=cwd or self.project, env=self.env, capture_output=True,
            text=True, timeout=30)
        if check and p.returncode != 0:
            self.fail(f"piworkfs {' '.join(args)} exited {p.returncode}: {p.stderr}")
        return p

    def create_db(self):
        # The program creates the schema; revoke leaves nothing trusted.
        self.run_pw("trust", "--revoke", self.project)

    def insert(self, con, **kw):
        now = time.time_ns()
        row = dict(time_ns=now, project=self.project, mountpoint="/mnt/v", mode="plan",
                   generation=1, op="create", path="a.txt", path2=None, errno=EROFS,
                   reason="read-only", rule_kind=None, rule_pattern=None, rule_file=None,
                   rule_line=None, pid=100, uid=1000, comm="bash", count=1)
        row.update(kw)
        row.setdefault("first_ns", row["time_ns"])
        row.setdefault("last_ns", row["time_ns"])
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        cur = con.execute(f"INSERT INTO audit({cols}) VALUES ({marks})", list(row.values()))
        con.commit()
        return cur.lastrowid

    def seed(self):
        """Six rows, one hour apart, oldest first; times end one minute ago."""
        self.create_db()
        con = sqlite3.connect(self.db)
        base = time.time_ns() - 60 * NS - 5 * 3600 * NS
        rows = [
            dict(path="docs/a.md", op="create", mode="plan", pid=100, comm="bash"),
            dict(path="src/main.c", op="open-write", mode="design", pid=101, comm="vim",
                 errno=EACCES, reason="no-allow"),
            dict(path="src/lib/x.c", op="unlink", mode="build", pid=102, comm="rm",
                 errno=EACCES, reason="deny-rule", rule_kind="deny",
                 rule_pattern="src/lib/**", rule_file=os.path.join(self.tmp, "m/build.md"),
                 rule_line=7, count=42),
            dict(path="old.txt", path2="new.txt", op="rename", mode="build", pid=100,
                 errno=EACCES, reason="protected", rule_kind="protected",
                 rule_pattern=".git/hooks/**", rule_file="(built-in)", rule_line=0),
            dict(path="src/ok.c", op="write", mode="build", pid=103, errno=0,
                 reason="allow-rule"),
            dict(path="src/main.c", op="truncate", mode="plan", pid=101, comm="vim",
                 project=self.other),
        ]
        for i, r in enumerate(rows):
            self.insert(con, time_ns=base + i * 3600 * NS, **r)
        con.close()
        return base

    def json_lines(self, *args):
        out = self.run_pw("log", "--json", *args).stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    # ---- log ----

    def test_missing_database_is_an_empty_log(self):
        p = self.run_pw("log")
        self.assertIn("no events", p.stdout)
        self.assertFalse(os.path.exists(self.db), "log must not create the database")
        self.assertEqual(self.run_pw("log", "--json").stdout, "")

    def test_table_newest_last(self):
        self.seed()
        lines = self.run_pw("log").stdout.splitlines()
        self.assertTrue(lines[0].startswith("TIME"), lines[0])
        for col in ("MODE", "OP", "ERRNO", "PID", "COMM", "COUNT"):
            self.assertIn(col, lines[0])
        # Off a terminal too the rows fit 80 columns: a rule with no room beside its row
        # is on the lines under it, whole (issue 44, item 14).
        self.assertEqual([x for x in lines if len(x) > 80], [])
        self.assertEqual(lines[1].split(), ["PATH", "RULE"], "what the lines under a row say")
        body = []
        for x in lines[2:]:
            if x.startswith(" "):
                body[-1] += "  " + x.strip()
            else:
                body.append(x)
        self.assertEqual(len(body), 6)
        self.assertIn("docs/a.md", body[0])
        self.assertIn("EROFS", body[0])
        self.assertIn("src/main.c", body[-1])
        self.assertIn("truncate", body[-1])
        unlink = next(line for line in body if "unlink" in line)
        self.assertIn("EACCES", unlink)
        self.assertIn("src/lib/**", unlink)
        self.assertIn("~/m/build.md:7", unlink, "the rule's file, shortened under $HOME")
        self.assertIn(" 42 ", unlink)
        self.assertIn("rm", unlink)
        self.assertIn("old.txt -> new.txt", self.run_pw("log").stdout)

    def test_limit(self):
        self.seed()
        rows = self.json_lines("-n", "2")
        self.assertEqual([r["op"] for r in rows], ["write", "truncate"])
        self.assertEqual(len(self.json_lines("-n", "0")), 6)
        self.assertEqual(len(self.json_lines()), 6)

    def test_denied(self):
        self.seed()
        rows = self.json_lines("--denied")
        self.assertEqual(len(rows), 5)
        self.assertTrue(all(r["denied"] for r in rows))
        self.assertNotIn("src/ok.c", [r["path"] for r in rows])

    def test_mode_filter(self):
        self.seed()
        rows = self.json_lines("--mode", "build")
        self.assertEqual([r["op"] for r in rows], ["unlink", "rename", "write"])

    def test_path_glob(self):
        self.seed()
        self.assertEqual([r["path"] for r in self.json_lines("--path", "src/**")],
                         ["src/main.c", "src/lib/x.c", "src/ok.c", "src/main.c"])
        self.assertEqual([r["path"] for r in self.json_lines("--path", "src/*.c")],
                         ["src/main.c", "src/ok.c", "src/main.c"])
        # A directory covers what is beneath it; the second path of a rename counts.
        self.assertEqual([r["path"] for r in self.json_lines("--path", "src/lib")],
                         ["src/lib/x.c"])
        self.assertEqual([r["op"] for r in self.json_lines("--path", "new.txt")], ["rename"])
        self.assertEqual(self.json_lines("--path", "nothing/**"), [])
        p = self.run_pw("log", "--path", "[abc", check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("glob", p.stderr)

    def test_pid_filter(self):
        self.seed()
        self.assertEqual([r["op"] for r in self.json_lines("--pid", "100")],
                         ["create", "rename"])
        self.assertEqual(self.run_pw("log", "--pid", "x", check=False).returncode, 2)

    def test_since_relative_and_iso(self):
        base = self.seed()
        # Rows are at now-5h-1m, -4h-1m, ..., -1m.
        self.assertEqual(len(self.json_lines("--since", "150m")), 3)
        self.assertEqual(len(self.json_lines("--since", "2h")), 2)
        self.assertEqual(len(self.json_lines("--since", "1d")), 6)
        self.assertEqual(len(self.json_lines("--since", "30s")), 0)
        iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(base // NS + 3 * 3600 - 30))
        self.assertEqual([r["op"] for r in self.json_lines("--since", iso)],
                         ["rename", "write", "truncate"])
        offset = time.strftime("%Y-%m-%dT%H:%M:%S+01:00",
                               time.gmtime(base // NS + 3 * 3600 - 30 + 3600))
        self.assertEqual(len(self.json_lines("--since", offset)), 3)
        # TZ=UTC here, so local times equal UTC.
        local = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(base // NS + 3 * 3600 - 30))
        self.assertEqual(len(self.json_lines("--since", local)), 3)
        day = time.strftime("%Y-%m-%d", time.gmtime(time.time() + 2 * 86400))
        self.assertEqual(self.json_lines("--since", day), [])
        for bad in ("yesterday", "10x", "2025-13-01", "2025-01-01T25:00"):
            p = self.run_pw("log", "--since", bad, check=False)
            self.assertEqual(p.returncode, 2, bad)

    def test_project_filter(self):
        self.seed()
        rows = self.json_lines("--project", self.other)
        self.assertEqual([r["op"] for r in rows], ["truncate"])
        self.assertEqual(len(self.json_lines("--project", self.project)), 5)

    def test_json_fields(self):
        self.seed()
        rows = self.json_lines("--mode", "build", "--denied")
        unlink = rows[0]
        self.assertEqual(unlink["op"], "unlink")
        self.assertEqual(unlink["errno"], "EACCES")
        self.assertEqual(unlink["errno_num"], EACCES)
        self.assertEqual(unlink["reason"], "deny-rule")
        self.assertEqual(unlink["rule"], {"kind": "deny", "pattern": "src/lib/**",
                                          "file": os.path.join(self.tmp, "m/build.md"),
                                          "line": 7})
        self.assertEqual(unlink["count"], 42)
        self.assertEqual(unlink["pid"], 102)
        self.assertEqual(unlink["comm"], "rm")
        self.assertEqual(unlink["project"], self.project)
        self.assertTrue(unlink["time"].endswith("Z"))
        self.assertEqual(rows[1]["path2"], "new.txt")
        allowed = self.json_lines("--pid", "103")[0]
        self.assertIsNone(allowed["errno"])
        self.assertFalse(allowed["denied"])
        self.assertIsNone(allowed["rule"])

    @contextlib.contextmanager
    def follower(self, *args):
        """`piworkfs log --follow --json ARGS` in the project: (the process, a LineReader of
        its output), terminated on the way out."""
        proc = subprocess.Popen([PIWORKFS, "log", "--follow", "--json", *args],
                                cwd=self.project, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        try:
            yield proc, LineReader(proc)
        finally:
            proc.terminate()
            proc.communicate(timeout=5)

    def assert_next_path(self, lines, path, what):
        """The follower's next line (WHAT, if none comes) is the row of PATH."""
        line = lines.line()
        self.assertIsNotNone(line, what)
        self.assertEqual(json.loads(line)["path"], path)

    def test_follow_prints_new_rows(self):
        self.create_db()
        con = sqlite3.connect(self.db)
        self.insert(con, path="before.txt")
        with self.follower("--denied") as (proc, lines):
            # The history comes first; once it is out, the follower is following.
            self.assert_next_path(lines, "before.txt", "the history row")
            self.insert(con, path="ignored.txt", errno=0)  # filtered out
            self.insert(con, path="followed.txt")
            con.close()
            self.assert_next_path(lines, "followed.txt", "no line for the new row")
        self.assertEqual(proc.returncode, 0)

    def test_follow_waits_for_the_database(self):
        with self.follower() as (proc, lines):
            # The database appears only once the follower waits without one.
            self.assertTrue(wait_sleeping(proc.pid), "the follower never waited")
            self.assertFalse(os.path.exists(self.db))
            self.create_db()
            con = sqlite3.connect(self.db)
            self.insert(con, path="late.txt")
            con.close()
            self.assert_next_path(lines, "late.txt", "no line for the row")

    # ---- why ----

    def test_why_shows_denials_and_the_decision_now(self):
        self.seed()
        p = self.run_pw("why", "--mode", "plan", "src/main.c")
        self.assertIn("mode plan", p.stdout)
        self.assertIn("denied EROFS", p.stdout)
        self.assertIn("open-write", p.stdout, "the past denial in this project")
        self.assertNotIn("truncate", p.stdout, "the other project's denial is left out")

        out = json.loads(self.run_pw("why", "--json", "--mode", "build", "src/main.c").stdout)
        self.assertEqual(out["path"], "src/main.c")
        self.assertEqual(out["mode"], "build")
        self.assertEqual(out["mode_source"], "option")
        self.assertEqual(out["now"]["decision"], "allowed")
        self.assertEqual([d["op"] for d in out["denials"]], ["open-write"])

    def test_why_uses_the_last_mode_then_plan(self):
        self.seed()
        out = json.loads(self.run_pw("why", "--json", "docs/a.md").stdout)
        self.assertEqual((out["mode"], out["mode_source"]), ("plan", "default"))
        self.assertEqual(out["now"]["decision"], "denied")
        con = sqlite3.connect(self.db)
        con.execute("UPDATE projects SET last_mode = 'build' WHERE path = ?", (self.project,))
        con.commit()
        con.close()
        out = json.loads(self.run_pw("why", "--json", "docs/a.md").stdout)
        self.assertEqual((out["mode"], out["mode_source"]), ("build", "last"))
        self.assertEqual(out["now"]["decision"], "allowed")
        self.assertEqual(out["now"]["op"], "create", "judged as the op last denied")
        # A protected path stays denied in build, with its rule.
        out = json.loads(self.run_pw("why", "--json", ".git/hooks/pre-commit").stdout)
        self.assertEqual(out["now"]["decision"], "denied")
        self.assertEqual(out["now"]["reason"], "protected")

    def test_why_errors(self):
        self.create_db()
        self.assertEqual(self.run_pw("why", check=False).returncode, 2)
        p = self.run_pw("why", "/etc/passwd", check=False)
        self.assertEqual(p.returncode, 3)
        p = self.run_pw("why", "--mode", "nosuchmode", "a", check=False)
        self.assertEqual(p.returncode, 3)

    # ---- trust ----

    def test_trust_list_and_revoke(self):
        p = self.run_pw("trust", "--list")
        self.assertIn("no trusted projects", p.stdout)
        p = self.run_pw("trust")  # the enclosing project (cwd)
        self.assertIn(f"trusted {self.project}", p.stdout)
        self.assertIn("no live view of it: this takes effect when it is mounted", p.stdout)
        p = self.run_pw("trust", self.project)
        self.assertIn("already trusted", p.stdout)
        out = json.loads(self.run_pw("trust", "--list", "--json").stdout)
        self.assertEqual([t["project"] for t in out["trusted"]], [self.project])
        con = sqlite3.connect(self.db)
        self.assertEqual(con.execute("SELECT trusted FROM projects WHERE path = ?",
                                     (self.project,)).fetchone(), (1,))
        con.close()
        out = json.loads(self.run_pw("trust", "--revoke", "--json", self.project).stdout)
        self.assertEqual(out, {"project": self.project, "trusted": False, "changed": True,
                               "reloaded": [], "takes_effect": "next mount"})
        self.assertIn("no trusted projects", self.run_pw("trust", "--list").stdout)

    def test_trust_uses_the_real_path(self):
        link = os.path.join(self.tmp, "link")
        os.symlink(self.project, link)
        self.run_pw("trust", link)
        out = json.loads(self.run_pw("trust", "--list", "--json").stdout)
        self.assertEqual([t["project"] for t in out["trusted"]], [self.project])

    def test_trust_errors(self):
        self.assertEqual(self.run_pw("trust", "a", "b", check=False).returncode, 2)
        self.assertEqual(self.run_pw("trust", "--list", "--revoke", check=False).returncode, 2)
        p = self.run_pw("trust", os.path.join(self.tmp, "missing"), check=False)
        self.assertEqual(p.returncode, 3)
        self.assertIn("does not exist", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
