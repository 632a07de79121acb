#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Review round four (issue 35): the control socket, seen from the agent's side.

Each test reproduces, through a mounted view and its real sockets, something the review
found the agent (or a change outside the view) could do on 83bbf90, and asserts it no
longer works:

  - agent work on the control thread delays the person (finding 4);
  - bash.check and check answer for names the view hides (finding 7);
  - undo overwrites a file replaced outside the view, the store's counts confirm guesses of
    hidden content, and undo acts in another directory for paths over 4,096 bytes
    (finding 9).
"""
import os
import signal
import sys
import time
import unittest

import harness  # noqa: E402
from harness import RpcClient, wait_until  # noqa: E402

TREE = {
    "README.md": "# demo\n",
    "src/main.c": "int main(void) { return 0; }\n",
    ".env": "SECRET=hunter2\n",
    "secrets/api_token_prod": "tok\n",
    "secrets/key": "key\n",
    "secrets/sub/deeper": "x\n",
}

# A trusted (global) mode that writes everywhere and hides .env and secrets/.
HIDING_MODE = ("---\nname: secret\ndescription: hides .env and secrets\nwrites:\n  allow:\n"
               "    - \"**\"\nhide:\n  - \".env\"\n  - \"secrets/\"\n---\nSecrets are hidden.\n")


class ReviewCase(harness.MountCase):
    tree = TREE

    def mount_answering(self, mode="build"):
        """A view whose control socket answers."""
        v = self.mount(mode)

        return self.wait_answering(v)

    def pw(self, *args, check=True):
        return self.pw_in_view(*args, check=check)

    def operator(self, v, timeout=60):
        c = RpcClient(self.socket_path(v), timeout=timeout)
        self.addCleanup(c.close)
        return c

    def agent_socket(self, v):
        return self.rpc(v, "agent.open")["socket"]

    def agent(self, path, timeout=60):
        a = RpcClient(path, timeout=timeout)
        self.addCleanup(a.close)
        return a

    def hiding_view(self):
        modes = os.path.join(self.config_home, "piworkfs", "modes")
        os.makedirs(modes, exist_ok=True)
        with open(os.path.join(modes, "secret.md"), "w") as f:
            f.write(HIDING_MODE)
        v = self.mount_answering("secret")
        self.assertFalse(os.path.exists(v.path(".env")), "the mode does not hide .env")
        self.assertFalse(os.path.exists(v.path("secrets")), "the mode does not hide secrets/")
        return v


# The kernel's coarse clock's tick (CLOCK_REALTIME_COARSE is 5 on Linux): undo takes a
# ctime within a tick after the view's change for the view's own (fs/undo/restore.c,
# coarse_tick), as ctimes come from that clock.
COARSE_TICK_NS = int(time.clock_getres(5) * 1e9) if sys.platform == "linux" else 10000000


def wait_ctime_after(t0_ns, where):
    """Waits until the filesystem's clock (a new file's ctime in WHERE) is past T0_NS and
    the coarse tick of slack undo allows after it: a change made afterwards is told apart
    from anything recorded before T0_NS."""
    probe = os.path.join(where, ".ctime-probe")

    def past():
        with open(probe, "w"):
            pass
        ok = os.stat(probe).st_ctime_ns > t0_ns + COARSE_TICK_NS
        os.unlink(probe)
        return ok
    return wait_until(past, 10)


def children(pid):
    """The live child processes of PID (every thread's), as {pid: comm}."""
    out = {}
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for t in tasks:
        try:
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            continue
        for k in kids:
            try:
                with open("/proc/%d/comm" % k) as f:
                    out[k] = f.read().strip()
            except OSError:
                pass
    return out


def proc_state(pid):
    """The state letter of PID ('T' stopped), or None once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


class AgentWork(ReviewCase):
    """Finding 4: no agent request may delay an operator request."""

    # A glob-heavy check: each pattern lists t/ and every directory in it.
    HEAVY = "rm " + "t/*/x* " * 400

    def setUp(self):
        super().setUp()
        for i in range(40):
            d = os.path.join(self.project, "t", "d%02d" % i)
            os.makedirs(d)
            for k in range(25):
                with open(os.path.join(d, "x%02d" % k), "w"):
                    pass
        self.stopped = []

    def mount_answering(self, mode="build"):
        v = super().mount_answering(mode)
        # Runs before the view's teardown (last in, first out): no worker stays stopped.
        self.addCleanup(self.resume_all)
        return v

    def resume_all(self):
        for pid in self.stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
        self.stopped = []

    def workers(self, v):
        """The daemon's bash workers: children that are forks of it (its own comm)."""
        with open("/proc/%d/comm" % v.pid) as f:
            me = f.read().strip()
        return {k for k, c in children(v.pid).items() if c == me}

    def catch_worker(self, v, send):
        """Calls SEND() until a bash worker of the daemon runs, stops it (SIGSTOP) and
        returns its pid: while it is stopped, the job that waits for it is provably still
        running. SEND is called again whenever no worker shows up."""
        end = time.monotonic() + 90
        while time.monotonic() < end:
            send()
            inner = time.monotonic() + 5
            while time.monotonic() < inner:
                for pid in self.workers(v) - set(self.stopped):
                    try:
                        os.kill(pid, signal.SIGSTOP)
                    except OSError:
                        continue
                    if wait_until(lambda: proc_state(pid) in ("T", None), 10) and \
                            proc_state(pid) == "T":
                        self.stopped.append(pid)
                        return pid
                time.sleep(0.001)
        self.fail("no bash worker seen" + self.daemon_logs())

    def test_the_person_is_answered_while_an_agent_check_runs(self):
        v = self.mount_answering("build")
        path = self.agent_socket(v)
        a = RpcClient(path)
        self.addCleanup(a.close)
        ids = iter(range(1, 1000))
        sent = []

        def send():
            i = next(ids)
            a.send("bash.check", {"command": self.HEAVY}, id=i)
            sent.append(i)
        w = self.catch_worker(v, send)
        # The agent's check waits for W, stopped: the person is answered meanwhile.
        c = self.operator(v, timeout=30)
        st = c.call("status")
        self.assertGreaterEqual(st["jobs"]["agent"], 1)
        res = c.call("mode.set", {"mode": "design"})
        self.assertEqual(res["mode"], "design")
        self.assertEqual(self.pw("mode").returncode, 0)
        self.assertEqual(proc_state(w), "T", "the agent's job ended before the person's calls")
        # Released, the agent's check is answered too.
        self.resume_all()
        for i in sent:
            msg = a.reply(i)
            self.assertTrue("result" in msg or msg["error"]["code"] == -32005, msg)

    def test_agents_are_bounded_and_the_person_keeps_capacity(self):
        v = self.mount_answering("build")
        path = self.agent_socket(v)
        conns = [RpcClient(path) for _ in range(3)]
        for a in conns:
            self.addCleanup(a.close)
        # Fill the agents' pool: two jobs on each of two connections, every one waiting
        # for a stopped worker.
        n = [0]

        def sender(a):
            def send():
                n[0] += 1
                a.send("bash.check", {"command": self.HEAVY}, id=n[0])
            return send
        for a in conns[:2]:
            self.catch_worker(v, sender(a))
            self.catch_worker(v, sender(a))
        c = self.operator(v, timeout=30)
        self.assertEqual(c.call("status")["jobs"]["agent"], 4)
        # A third agent connection is turned away at once, and so are its notifications
        # (bash.check and changes.*): they cannot exceed the limit.
        b = conns[2]
        b.send("bash.check", {"command": "rm t/*"}, id=9001)
        self.assertEqual(b.reply(9001)["error"]["code"], -32005)
        before = c.call("status")["jobs"]["agent_refused"]
        for _ in range(3):
            b.send("bash.check", {"command": self.HEAVY})
            b.send("changes.diff", {"since_ns": 1})
            b.send("changes.list")
        b.send("status", id=9002)  # answered after the notifications were handled
        self.assertIn("result", b.reply(9002))
        st = c.call("status")["jobs"]
        self.assertEqual(st["agent"], 4)
        self.assertEqual(st["agent_refused"] - before, 9)
        self.assertEqual(len(self.workers(v)), 4)
        # The person's own pool is untouched: their check and their undo run now.
        res = c.call("bash.check", {"command": "rm t/d00/*"})
        self.assertIn("t/d00/x00", [t["path"] for t in res["targets"]])
        self.assertEqual(c.call("changes.undo", {"all": True, "dry_run": True})["dry_run"],
                         True)

    def test_an_agent_notification_is_bounded_per_connection(self):
        v = self.mount_answering("build")
        a = RpcClient(self.agent_socket(v))
        self.addCleanup(a.close)

        def send():
            a.send("bash.check", {"command": self.HEAVY})  # a notification: no id
        self.catch_worker(v, send)
        self.catch_worker(v, send)
        c = self.operator(v, timeout=30)
        before = c.call("status")["jobs"]
        self.assertEqual(before["agent"], 2)
        for _ in range(4):
            send()
        a.send("status", id=1)
        self.assertIn("result", a.reply(1))
        st = c.call("status")["jobs"]
        self.assertEqual(st["agent"], 2)
        self.assertEqual(st["agent_refused"] - before["agent_refused"], 4)
        self.assertEqual(len(self.workers(v)), 2)


class HiddenNames(ReviewCase):
    """Finding 7: everything the agent socket answers goes through the hide rules."""

    def targets(self, a, command):
        res = a.call("bash.check", {"command": command})
        return [t["path"] for t in res["targets"]]

    def test_bash_check_globs_do_not_list_hidden_names(self):
        v = self.hiding_view()
        a = self.agent(self.agent_socket(v))
        listed = self.targets(a, "rm secrets/*")
        self.assertNotIn("secrets/api_token_prod", listed)
        self.assertNotIn("secrets/key", listed)
        self.assertNotIn(".env", self.targets(a, "rm .e*"))
        # A glob is no yes/no probe: a matching and a non-matching pattern answer alike.
        hit = a.call("bash.check", {"command": "rm secrets/api_token_p*"})
        miss = a.call("bash.check", {"command": "rm secrets/api_token_x*"})
        strip = lambda r: [(t["kind"], t.get("note")) for t in r["targets"]]  # noqa: E731
        self.assertEqual(strip(hit), strip(miss))
        # Nor is a working directory inside a hidden one.
        inside = a.call("bash.check", {"command": "rm *", "cwd": "secrets"})
        nowhere = a.call("bash.check", {"command": "rm *", "cwd": "nosuch"})
        self.assertEqual(strip(inside), strip(nowhere))
        # Visible names still expand, and the person's socket sees everything.
        self.assertIn("src/main.c", self.targets(a, "rm src/*"))
        c = self.operator(v)
        res = c.call("bash.check", {"command": "rm secrets/*"})
        self.assertIn("secrets/key", [t["path"] for t in res["targets"]])

    def test_bash_check_is_dir_of_a_hidden_directory_reads_as_absent(self):
        v = self.hiding_view()
        a = self.agent(self.agent_socket(v))

        def is_dir(cmd):
            return [t["is_dir"] for t in a.call("bash.check", {"command": cmd})["targets"]]
        self.assertEqual(is_dir("rm secrets/sub"), is_dir("rm secrets/nosuch"))

    def test_check_is_dir_of_a_hidden_directory_reads_as_absent(self):
        v = self.hiding_view()
        a = self.agent(self.agent_socket(v))
        res = a.call("check", {"paths": ["secrets/sub", "secrets/missing"]})
        existing, missing = res["decisions"]
        self.assertEqual(existing["is_dir"], missing["is_dir"], res)
        self.assertFalse(existing["is_dir"], res)
        # A visible directory is still told, and the person's socket is told the truth.
        self.assertTrue(a.call("check", {"paths": ["src"]})["decisions"][0]["is_dir"])
        c = self.operator(v)
        self.assertTrue(c.call("check", {"paths": ["secrets/sub"]})["decisions"][0]["is_dir"])


class UndoAndStore(ReviewCase):
    """Finding 9."""

    def test_undo_refuses_a_file_replaced_outside_the_view(self):
        v = self.mount_answering("build")
        self.pw("checkpoint")
        with open(v.path("README.md"), "w") as f:
            f.write("agent's change\n")
        self.assertTrue(wait_ctime_after(time.time_ns(), self.project))
        # The person edits the backing copy as sed -i does: a new file renamed over it.
        real = os.path.join(self.project, "README.md")
        tmp = os.path.join(self.project, ".sedXYZ")
        with open(tmp, "w") as f:
            f.write("the person's edit\n")
        os.rename(tmp, real)
        p = self.pw("undo", "--all", "--json", check=False)
        self.assertNotEqual(p.returncode, 0, "undo overwrote a file changed outside the view: "
                            + p.stdout + p.stderr)
        self.assertIn("README.md", p.stdout + p.stderr)
        with open(real) as f:
            self.assertEqual(f.read(), "the person's edit\n")
        # --force still undoes it, and an undo of the view's own change is no conflict.
        self.pw("undo", "--all", "--force")
        with open(real) as f:
            self.assertEqual(f.read(), "# demo\n")
        self.pw("checkpoint")
        with open(v.path("src/main.c"), "w") as f:
            f.write("changed\n")
        self.pw("undo", "--all")
        self.pw("undo", "--all")  # the undo of the undo: its restore is the view's own

    def test_agent_is_not_told_the_store_counts(self):
        v = self.mount_answering("build")
        with open(v.path("README.md"), "w") as f:
            f.write("changed\n")
        a = self.agent(self.agent_socket(v))
        store = a.call("changes.list")["store"]
        self.assertNotIn("blobs", store)
        self.assertNotIn("bytes", store)
        c = self.operator(v)
        store = c.call("changes.list")["store"]
        self.assertIn("blobs", store)
        self.assertIn("bytes", store)

    def test_undo_of_a_path_over_4096_bytes_never_acts_elsewhere(self):
        # D is 4,095 bytes long: a parent path cut at 4,096 bytes names D itself.
        comps = ["d%02d" % i + "x" * 252 for i in range(16)]
        d = "/".join(comps)
        self.assertEqual(len(d), 4095)
        fd = os.open(self.project, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for c in comps + ["e"]:
                os.mkdir(c, dir_fd=fd)
                nfd = os.open(c, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = nfd
            with open(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
                f.write("deep\n")
        finally:
            os.close(fd)
        # A decoy in D with the name the undo would put back.
        dfd = os.open(self.project, os.O_RDONLY | os.O_DIRECTORY)
        for c in comps:
            nfd = os.open(c, os.O_RDONLY | os.O_DIRECTORY, dir_fd=dfd)
            os.close(dfd)
            dfd = nfd
        self.addCleanup(os.close, dfd)
        with open(os.open("g", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=dfd), "w") as f:
            f.write("decoy\n")

        v = self.mount_answering("build")
        self.pw("checkpoint")
        vfd = os.open(v.path(), os.O_RDONLY | os.O_DIRECTORY)
        try:
            for c in comps + ["e"]:
                nfd = os.open(c, os.O_RDONLY | os.O_DIRECTORY, dir_fd=vfd)
                os.close(vfd)
                vfd = nfd
            os.rename("f", "g", src_dir_fd=vfd, dst_dir_fd=vfd)
        finally:
            os.close(vfd)
        p = self.pw("undo", "--all", "--json", check=False)
        self.assertEqual(sorted(os.listdir(dfd)), ["e", "g"], p.stdout + p.stderr)
        with open(os.open("g", os.O_RDONLY, dir_fd=dfd)) as f:
            self.assertEqual(f.read(), "decoy\n")
        efd = os.open("e", os.O_RDONLY | os.O_DIRECTORY, dir_fd=dfd)
        self.addCleanup(os.close, efd)
        left = sorted(os.listdir(efd))
        if left != ["f"]:  # not undone: then it says why
            self.assertEqual(left, ["g"])
            self.assertIn("File name too long", p.stdout + p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
