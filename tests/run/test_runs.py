# SPDX-License-Identifier: MIT
"""Several `piworkfs run`s on one project at once (issue 34): each has a mode of its own.

Each run's command is AGENT, a small server inside the sandbox that connects to a Unix
socket the test listens on (in the test's temp dir, outside the project, which the sandbox
shows as the host does) and answers one JSON request per line: write, read, stat, list,
chmod, rename, or its mode (mode.get on its agent socket). So the test drives several live
agents at once and asks each what its view decides, while it switches the others from
outside with `piworkfs mode --run ID`.

The temp dirs, environment and teardown are test_run.RunTest's (every view of the temp dir
is unmounted, lazily if need be, even when a test fails).
"""

import errno
import json
import os
import re
import subprocess
import sys
import textwrap
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_run import DEADLINE, RunTest  # noqa: E402
import run_case  # noqa: E402  (tests/lib, on PYTHONPATH)
from run_case import SERVE_LOOP  # noqa: E402

AGENT = textwrap.dedent(r'''
    import json, os, socket, sys

    def rpc(method):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(60)
        s.connect(os.environ["PIWORKFS_SOCKET"])
        s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method}).encode() + b"\n")
        return json.loads(s.makefile("rb").readline())["result"]

    def serve(q):
        op, p = q["op"], q.get("path")
        try:
            if op == "mode":
                return rpc("mode.get")["mode"]
            if op == "write":
                with open(p, "w") as f:
                    f.write(q["data"])
                return 0
            if op == "read":
                with open(p) as f:
                    return f.read()
            if op == "stat":
                st = os.stat(p)
                return [st.st_mode & 0o7777, st.st_size]
            if op == "list":
                return sorted(os.listdir(p))
            if op == "chmod":
                os.chmod(p, q["mode"])
                return 0
            if op == "rename":
                os.rename(p, q["to"])
                return 0
        except OSError as e:
            return {"errno": e.errno}
        return {"error": "unknown op " + op}
''') + SERVE_LOOP


class Agent(run_case.Agent):
    """One `piworkfs run --mode MODE` whose command is AGENT, connected to the test."""

    def __init__(self, test, mode, name):
        super().__init__(test, mode, name, AGENT)
        self._id = None

    @property
    def id(self):
        """The run's id: the one `status` names with this run's pid."""
        if not self._id:
            self._id = self.find_id()
        return self._id

    def find_id(self):
        for v in self.test.status():
            run = v.get("run") or {}
            if v.get("project") == self.test.project and run.get("pid") == self.proc.pid:
                return run["id"]
        raise AssertionError("piworkfs status names no run with pid %d" % self.proc.pid)

    def write(self, path, data="x\n"):
        """0, or the errno the view answered."""
        r = self.ask("write", path=path, data=data)
        return r if r == 0 else r["errno"]


def eventually(check, what):
    """Waits (with the suite's deadline) until CHECK() is true."""
    end = time.monotonic() + DEADLINE
    while not check():
        if time.monotonic() > end:
            raise AssertionError("not seen within %ds: %s" % (DEADLINE, what))
        time.sleep(0.02)


class RunsTest(RunTest):
    def status(self):
        # Every view of the machine is listed (exit 4 when one of another test's does not
        # answer us): only ours count.
        return json.loads(self.pw("status", "--json", check=False).stdout)

    def mode_of(self, *where):
        return json.loads(self.pw("mode", "--json", *where).stdout)["mode"]


class ModePerRun(RunsTest):
    def test_two_runs_keep_their_modes_through_100_switches_of_the_other(self):
        bare = self.bare_view("build")
        design, plan = Agent(self, "design", "a"), Agent(self, "plan", "b")
        # The second run started in its mode without changing the first one's.
        self.assertEqual(design.ask("mode"), "design")
        self.assertEqual(plan.ask("mode"), "plan")
        self.assertNotEqual(design.id, plan.id)

        def check_design():
            self.assertEqual(design.ask("mode"), "design")
            self.assertEqual(design.write("docs/design/a.md"), 0)
            # Refused (EACCES: design writes something, so it is no read-only mode).
            self.assertEqual(design.write("src/a.c"), errno.EACCES)

        def check_plan():
            self.assertEqual(plan.ask("mode"), "plan")
            self.assertEqual(plan.write("src/b.c"), errno.EROFS)
            self.assertEqual(plan.write("docs/design/b.md"), errno.EROFS)

        for i in range(100):
            target = ("build", "review")[i % 2]
            self.pw("mode", "--run", plan.id, target)
            self.assertEqual(self.mode_of("--run", plan.id), target)
            check_design()
        self.pw("mode", "--run", plan.id, "plan")
        check_plan()
        for i in range(100):
            target = ("build", "plan")[i % 2]
            self.pw("mode", "--run", design.id, target)
            self.assertEqual(design.ask("mode"), target)
            check_plan()
        # The person's view kept its mode through all of it.
        self.assertEqual(self.mode_of("--mount", bare), "build")

    def test_the_bare_view_and_the_last_mode_are_untouched_by_a_run(self):
        bare = self.bare_view("design")
        a = Agent(self, "plan", "a")
        self.assertEqual(self.mode_of("--mount", bare), "design")
        self.pw("mode", "--run", a.id, "build")
        self.assertEqual(a.write("src/a.c"), 0)
        self.assertEqual(self.mode_of("--mount", bare), "design")
        # Through the person's view the run's build allows nothing new.
        with self.assertRaises(OSError):
            open(os.path.join(bare, "src", "outside.c"), "w")
        a.stop()
        self.assertEqual(self.mode_of("--mount", bare), "design")
        # Mounted again without --mode: the last mode is the person's, not the run's.
        self.pw("umount", bare)
        self.pw("mount", self.project, bare)
        self.assertEqual(self.mode_of("--mount", bare), "design")

    def test_a_run_without_mode_takes_the_bare_views_and_leaves_it(self):
        bare = self.bare_view("design")
        a = Agent(self, None, "a")
        self.assertEqual(a.ask("mode"), "design")
        self.pw("mode", "--run", a.id, "plan")
        self.assertEqual(a.write("docs/design/x.md"), errno.EROFS)
        self.assertEqual(self.mode_of("--mount", bare), "design")

    def test_mode_run_names_a_live_run(self):
        p = self.pw("mode", "--run", "nOsUcH", "build", check=False)
        self.assertEqual(p.returncode, 4, p.stderr)
        self.assertIn("no live run nOsUcH", p.stderr)
        p = self.pw("mode", "--run", "../x", check=False)
        self.assertEqual(p.returncode, 2, p.stderr)


class Coherence(RunsTest):
    def test_a_write_through_one_run_is_seen_by_the_other_both_ways(self):
        a, b = Agent(self, "build", "a"), Agent(self, "build", "b")
        views = {v["mountpoint"] for v in self.status()
                 if v.get("project") == self.project and v.get("run")}
        self.assertEqual(len(views), 2, "each run has a view of its own")
        for writer, reader, name in ((a, b, "src/from_a.c"), (b, a, "src/from_b.c")):
            # The reader looks first, so its view has the directory and the name cached.
            self.assertNotIn(os.path.basename(name), reader.ask("list", path="src"))
            self.assertEqual(reader.ask("stat", path=name), {"errno": errno.ENOENT})
            self.assertEqual(writer.write(name, "one\n"), 0)
            eventually(lambda: reader.ask("read", path=name) == "one\n", "the content")
            eventually(lambda: os.path.basename(name) in reader.ask("list", path="src"),
                       "the name in the listing")
            # Overwritten with other content and length, then its attributes changed.
            self.assertEqual(writer.write(name, "second version\n"), 0)
            eventually(lambda: reader.ask("read", path=name) == "second version\n",
                       "the new content")
            self.assertEqual(writer.ask("chmod", path=name, mode=0o600), 0)
            eventually(lambda: reader.ask("stat", path=name) == [0o600, 15],
                       "the attributes")
            # Renamed: the new name appears and the old one goes.
            moved = name + ".moved"
            self.assertEqual(writer.ask("rename", path=name, to=moved), 0)
            eventually(lambda: reader.ask("stat", path=name) == {"errno": errno.ENOENT} and
                       reader.ask("read", path=moved) == "second version\n", "the rename")


class Naming(RunsTest):
    def test_status_lists_both_runs_with_their_modes_and_pids(self):
        bare = self.bare_view("build")
        a, b = Agent(self, "design", "a"), Agent(self, "plan", "b")
        runs = {v["run"]["id"]: (v["mode"], v["run"]["pid"], v["pid"]) for v in self.status()
                if v.get("project") == self.project and v.get("run")}
        self.assertEqual({k: v[:2] for k, v in runs.items()},
                         {a.id: ("design", a.proc.pid), b.id: ("plan", b.proc.pid)})
        # Each run's daemon is its own.
        self.assertEqual(len({v[2] for v in runs.values()}), 2)
        # The text: the person's view lists its project's runs; each run's view its run.
        out = self.pw("status", check=False).stdout
        blocks = out.split("\n\n")
        [mine] = [blk for blk in blocks if blk.startswith(bare + "\n")]
        runs_row = re.search(r"\n  runs +(.*)", mine)
        self.assertIsNotNone(runs_row, mine)
        self.assertIn("%s in design (pid %d)" % (a.id, a.proc.pid), runs_row.group(1))
        self.assertIn("%s in plan (pid %d)" % (b.id, b.proc.pid), runs_row.group(1))
        [theirs] = [blk for blk in blocks if "/run-%s/view\n" % b.id in blk]
        self.assertRegex(theirs, r"\n  run +%s, piworkfs run pid %d, daemon pid \d+"
                         % (b.id, b.proc.pid))

    def test_log_and_changes_attribute_a_write_to_its_run(self):
        self.bare_view("plan")
        a, b = Agent(self, "plan", "a"), Agent(self, "build", "b")
        self.assertEqual(a.write("src/denied_a.c"), errno.EROFS)
        self.assertEqual(b.write("src/written_b.c"), 0)
        self.pw("mode", "--run", b.id, "plan")
        self.assertEqual(b.write("src/denied_b.c"), errno.EROFS)

        def rows():
            out = self.pw("log", "--json", "--project", self.project).stdout
            return [json.loads(x) for x in out.splitlines() if x.strip()]

        def run_of(path):
            return {r.get("run") for r in rows() if r.get("path") == path}

        eventually(lambda: run_of("src/denied_a.c") and run_of("src/denied_b.c"),
                   "both denials in the log")
        self.assertEqual(run_of("src/denied_a.c"), {a.id})
        self.assertEqual(run_of("src/denied_b.c"), {b.id})
        text = self.pw("log", "--project", self.project).stdout
        # each event with the lines under it (its path and rule, when the row has no room)
        rows = [re.sub(r"\n\s+", "  ", x) for x in re.findall(r"(?m)^\S.*(?:\n .*)*", text)]
        line = [x for x in rows if "src/denied_a.c" in x]
        self.assertTrue(line and "plan@" + a.id in line[0], text)
        # The change set of b's write is b's, in changes from the person's view.
        res = json.loads(self.pw("changes", "--json", "--all").stdout)
        sets = [s for s in res["changesets"]
                if any(c["path"] == "src/written_b.c" for c in s["changes"])]
        self.assertEqual([s.get("run") for s in sets], [b.id], res)
        self.assertIn("by run " + b.id, self.pw("changes", "--all").stdout)


class SharedOriginals(RunsTest):
    def test_the_persons_view_undoes_what_a_run_changed(self):
        # Two daemons on one store of originals: the run's kept them, the person's view
        # puts them back. (--force: the person's view saw the run's writes as changes
        # made outside it, which undo asks to confirm.)
        bare = self.bare_view("build")
        main = os.path.join(self.project, "src", "main.c")
        with open(main) as f:
            before = f.read()
        p = self.sh("echo changed >> src/main.c && echo new > src/new.c", "--mode", "build")
        self.assertEqual(p.returncode, 0, p.stderr)
        run = re.search(r"run ([A-Za-z0-9]+),", p.stderr).group(1)
        out = self.pw("changes", cwd=bare).stdout
        self.assertIn("by run " + run, out)
        self.assertIn("modified  src/main.c", out)
        self.pw("undo", "--all", "--force", cwd=bare)
        with open(main) as f:
            self.assertEqual(f.read(), before)
        self.assertFalse(os.path.exists(os.path.join(self.project, "src", "new.c")))


def gone(pid):
    """Has process PID exited (absent, or a zombie nobody reaped yet)?"""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


class Ending(RunsTest):
    """A run's sandbox holds a copy of every mount there was when it started (it binds the
    whole host): of the person's views, and of other runs' own views. An unmount ends a view
    only in its own mount namespace, so such a copy kept the daemon serving after `piworkfs
    umount` (which said "its daemon ... has not exited after 10 s" and exited 5) and after a
    run's end (issue 44, item 11)."""

    def daemon_of(self, mountpoint):
        [pid] = [v["pid"] for v in self.status() if v.get("mountpoint") == mountpoint]
        return pid

    def test_umount_of_the_persons_view_while_a_run_holds_a_copy(self):
        # The run's view covers the person's in its sandbox: that copy has a mount on it,
        # so the unmount does not propagate to it.
        bare = self.bare_view("build")
        daemon = self.daemon_of(bare)
        agent = Agent(self, "build", "a")  # started while the view is mounted
        p = self.pw("umount", bare, check=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(gone(daemon), "umount returned before its daemon was gone")
        # The run goes on in its own view.
        self.assertEqual(agent.write(os.path.join(self.project, "src", "still.c")), 0)

    def test_a_run_ends_with_its_daemon_while_a_private_namespace_holds_a_copy(self):
        # (Another run's sandbox follows the unmount of a run's view, a slave of ours that
        # covers nothing there; a namespace with private mounts, as `unshare -m` or a
        # container makes, keeps its copy.)
        first = Agent(self, "build", "a")
        [mp] = [v["mountpoint"] for v in self.status()
                if (v.get("run") or {}).get("id") == first.id]
        daemon = self.daemon_of(mp)
        holder = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh",
                                   "-c", "echo ready; exec sleep 600"],
                                  stdout=subprocess.PIPE, text=True)
        self.addCleanup(holder.wait)
        self.addCleanup(holder.kill)
        self.assertEqual(holder.stdout.readline(), "ready\n")
        first.stop()
        self.assertEqual(first.proc.returncode, 0, first.stopped)
        self.assertTrue(gone(daemon), "the run returned before its view's daemon was gone")

if __name__ == "__main__":
    unittest.main(verbosity=2)
