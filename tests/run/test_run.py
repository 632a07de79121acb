# SPDX-License-Identifier: MIT
"""Integration tests of `piworkfs run`, the sandboxed launcher (Python 3 stdlib only).

Each test owns a private temp dir: a copy of demo/project (the backing directory), HOME,
XDG_CONFIG_HOME, XDG_RUNTIME_DIR (0700), XDG_STATE_HOME and PIWORKFS_STATE_DB. Every
command runs under a deadline, and teardown unmounts every view of the temp dir (a lazy
unmount if needed), so a failing test leaves nothing mounted.

Probes run inside the sandbox as `python3 probe.py` (probe.py lives in the temp dir, outside
the project, which the sandbox shows as the host shows it) and print JSON on stdout.

Environment: $PIWORKFS is the binary under test, $PIWORKFS_DEMO the demo project,
$SOURCE_MODES the bundled modes.
"""

import errno
import hashlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
import unittest

from run_case import (COMMAND_SANITIZER_ENV, DEADLINE, LOOSEN_HINT, PIWORKFS, SOURCE,  # tests/lib
                      SOURCE_MODES, RunCase)


def fingerprint(root):
    """{relative path: (kind, mode, content hash)} of every entry under ROOT."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            digest = None
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            out[os.path.relpath(p, root)] = (stat.S_IFMT(st.st_mode), st.st_mode, digest)
    return out


PROBE = textwrap.dedent(r'''
    import errno, json, os, sys
    args = json.loads(sys.argv[1])
    res = {}

    def try_write(p):
        try:
            with open(p, "w") as f:
                f.write("x")
            return 0
        except OSError as e:
            return e.errno

    if "writes" in args:
        res["writes"] = {p: try_write(p) for p in args["writes"]}

    if "find" in args:
        # Everything that has the backing directory's (st_dev, st_ino). Walks the whole of
        # the test's temp dir, / to a bounded depth, every mountpoint and what lies below it
        # to a bounded depth, and /proc/*/cwd and /proc/*/root of every visible process.
        dev, ino = args["find"]["dev"], args["find"]["ino"]
        hits, seen = [], set()

        def check(p):
            try:
                st = os.stat(p)
            except OSError:
                return None
            if (st.st_dev, st.st_ino) == (dev, ino):
                hits.append(p)
            return st

        def walk(top, depth):
            if depth < 0 or top in seen:
                return
            seen.add(top)
            try:
                entries = list(os.scandir(top))
            except OSError:
                return
            for e in entries:
                if e.path in ("/proc", "/sys", "/dev"):
                    continue
                try:
                    if e.is_dir(follow_symlinks=False):
                        check(e.path)
                        walk(e.path, depth - 1)
                except OSError:
                    pass

        check("/")
        walk("/", 3)
        walk(args["find"]["tmp"], 50)
        with open("/proc/self/mountinfo") as f:
            for line in f:
                mp = line.split()[4].encode().decode("unicode_escape")
                if not mp.startswith(("/proc", "/sys", "/dev")):
                    check(mp)
                    walk(mp, 3)
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                for link in ("cwd", "root"):
                    check("/proc/%s/%s" % (pid, link))
                    if link == "root":
                        check("/proc/%s/root%s" % (pid, args["find"]["project"]))
        res["hits"] = hits
        st = os.stat(args["find"]["project"])
        res["project_stat"] = [st.st_dev, st.st_ino]
        res["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())

    if "exists" in args:
        res["exists"] = {p: os.path.lexists(p) for p in args["exists"]}
    if "listdir" in args:
        res["listdir"] = {p: sorted(os.listdir(p)) if os.path.isdir(p) else None
                          for p in args["listdir"]}
    res["cwd"] = os.getcwd()
    res["env_socket"] = os.environ.get("PIWORKFS_SOCKET")
    print(json.dumps(res))
''')


class RunTest(RunCase):
    def setUp(self):
        super().setUp()
        self.probe = os.path.join(self.tmp, "probe.py")
        with open(self.probe, "w") as f:
            f.write(PROBE)
        self.before = fingerprint(self.project)

    def unmount_views(self):
        super().unmount_views()
        subprocess.run(["umount", "-l", os.path.join(self.tmp, "alias")],
                       stderr=subprocess.DEVNULL)

    # --- helpers -------------------------------------------------------------------------

    def pw(self, *args, cwd=None, check=True):
        """piworkfs ARGS, a command: no leak scan at its exit (tests/lib/harness.py)."""
        p = subprocess.run([PIWORKFS, *args], cwd=cwd or self.project,
                           env=dict(self.env, **COMMAND_SANITIZER_ENV),
                           capture_output=True, text=True, timeout=DEADLINE)
        if check:
            self.assertEqual(p.returncode, 0, "piworkfs %s: %s" % (args, p.stderr))
        return p

    def start_until_ready(self, argv, ready, cwd=None):
        """Starts ARGV (in CWD, the project by default; stdout and stderr piped as text) and
        waits, DEADLINE at the most, until it makes the file READY; killed on the way out."""
        proc = subprocess.Popen(argv, cwd=cwd or self.project, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: proc.poll() is None and (proc.kill(), proc.wait()))
        deadline = time.monotonic() + DEADLINE
        while not os.path.exists(ready) and time.monotonic() < deadline:
            self.assertIsNone(proc.poll(), proc.stderr.read() if proc.poll() else "")
            time.sleep(0.02)
        return proc

    def go_and_finish(self, proc, go):
        """Makes the file GO, which PROC waits for, and PROC's exit 0; returns its stdout."""
        open(go, "w").close()
        out, err = proc.communicate(timeout=DEADLINE)
        self.assertEqual(proc.returncode, 0, err)
        return out

    def run_in(self, command, *opts, cwd=None):
        """piworkfs run OPTS -- COMMAND; returns the CompletedProcess."""
        return subprocess.run([PIWORKFS, "run", *opts, "--project", self.project, "--",
                               *command], cwd=cwd or self.project, env=self.env,
                              capture_output=True, text=True, timeout=DEADLINE)

    def sh(self, script, *opts, cwd=None):
        return self.run_in(["sh", "-c", script], *opts, cwd=cwd)

    def probe_in(self, args, *opts, cwd=None):
        p = self.run_in([sys.executable, self.probe, json.dumps(args)], *opts, cwd=cwd)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def probe_host(self, args):
        """The same probe outside the sandbox: the control that proves it can see."""
        p = subprocess.run([sys.executable, self.probe, json.dumps(args)], cwd=self.project,
                           env=self.env, capture_output=True, text=True, timeout=DEADLINE)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def assert_unchanged(self):
        self.assertEqual(fingerprint(self.project), self.before,
                         "the backing directory changed")


class Acceptance(RunTest):
    def test_demo_plan_refuses_two_writes_and_the_loosening(self):
        p = self.sh('echo x > src/a.c; echo y > "$PWD/docs/design/a.md"; piworkfs mode build',
                    "--mode", "plan")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stderr.count("Read-only file system"), 2, p.stderr)
        self.assertIn("src/a.c", p.stderr)
        self.assertIn(self.project + "/docs/design/a.md", p.stderr)
        self.assertIn("refused", p.stderr)
        self.assertIn(LOOSEN_HINT, p.stderr)
        self.assert_unchanged()
        self.assert_unmounted()



# The start of a program run inside the sandbox: subscribed to its run's denials on the
# agent socket (f reads what the socket sends).
SUBSCRIBED = r'''
    import json, os, socket, sys, time
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(60)
    s.connect(os.environ["PIWORKFS_SOCKET"])
    f = s.makefile("rb")
    s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"events":["denied"]}}\n')
    assert "result" in json.loads(f.readline())
'''

OVERLAP_LISTENER = textwrap.dedent(SUBSCRIBED + r'''
    with open("src/greet.c", "a") as g:
        g.write("// from the run\n")
    while True:
        m = json.loads(f.readline())
        if m.get("method") == "overlap":
            print(json.dumps(m["params"]))
            break
''')

class Lanes(RunTest):
    """`run --only GLOB`: the run's own view with a lane (mount --only)."""

    def test_a_run_with_a_lane_writes_only_inside_it_in_every_mode(self):
        for mode in ("build", "off", "design"):
            p = self.sh('echo a > src/lane.c && echo in; echo b > Makefile2 || echo out',
                        "--mode", mode, "--only", "src/**")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("out", p.stdout, mode)
            # In design the mode itself refuses src/: the lane never widens it.
            self.assertEqual("in" in p.stdout, mode != "design", (mode, p.stdout, p.stderr))
            self.assertFalse(os.path.exists(os.path.join(self.project, "Makefile2")))
            self.assert_unmounted()

    def test_a_lane_never_narrows_a_shared_view(self):
        mp = self.bare_view("build")
        p = self.sh('echo b > Makefile2 || echo refused', "--only", "src/**")
        self.assertIn("refused", p.stdout, p.stderr)
        # The run had a view of its own; the bare one still writes everything.
        with open(os.path.join(mp, "Makefile2"), "w") as f:
            f.write("b\n")
        # (Not the exit status: another user's or test's view may not answer.)
        st = json.loads(self.pw("status", "--json", cwd=mp, check=False).stdout)
        self.assertEqual([v.get("lane") for v in st if v.get("mountpoint") == mp], [[]])
        self.pw("umount", mp)

    def test_a_run_is_told_when_it_writes_what_another_view_changed(self):
        # The person's view changes src/greet.c; a run (a view of its own) then writes it:
        # the write goes through, and the run's agent socket says whose work it touched.
        mp = self.bare_view("build")
        with open(os.path.join(mp, "src", "greet.c"), "a") as f:
            f.write("// from the person\n")
        p = self.run_in([sys.executable, "-c", OVERLAP_LISTENER], "--mode", "build",
                        "--only", "src/**")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        heard = json.loads(p.stdout)
        self.assertEqual((heard["path"], heard["path2"], heard["reason"]),
                         ("src/greet.c", mp, "overlap"))
        with open(os.path.join(self.project, "src", "greet.c")) as f:
            self.assertTrue(f.read().endswith("// from the person\n// from the run\n"))
        self.pw("umount", mp)

class Paths(RunTest):
    def test_every_path_to_the_project_is_read_only_in_plan(self):
        os.mkdir(os.path.join(self.tmp, "elsewhere"))
        writes = [
            os.path.join(self.project, "src", "new.c"),
            os.path.join(self.project, "src", "main.c"),
            "src/../src/new2.c",
            os.path.join(self.project, "src", "..", "docs", "design", "x.md"),
            "../proj/src/new3.c",
            "/proc/self/cwd/src/new4.c",
        ]
        r = self.probe_in({"writes": writes}, "--mode", "plan")
        for path in writes:
            self.assertEqual(r["writes"][path], errno.EROFS, path)
        self.assertEqual(r["cwd"], self.project)
        self.assert_unchanged()

    def test_outside_the_project_the_host_is_writable_unless_ro_host(self):
        out = os.path.join(self.tmp, "out.txt")
        r = self.probe_in({"writes": [out]}, "--mode", "plan")
        self.assertEqual(r["writes"][out], 0)
        os.unlink(out)
        r = self.probe_in({"writes": [out]}, "--mode", "plan", "--ro-host")
        self.assertEqual(r["writes"][out], errno.EROFS)
        share = os.path.join(self.tmp, "share")
        os.mkdir(share)
        inside = os.path.join(share, "x")
        r = self.probe_in({"writes": [out, inside]}, "--mode", "plan", "--ro-host",
                          "--share", share)
        self.assertEqual(r["writes"][out], errno.EROFS)
        self.assertEqual(r["writes"][inside], 0)

    def test_mode_directories_are_read_only(self):
        global_dir = os.path.join(self.tmp, "config", "piworkfs")
        self.assertFalse(os.path.exists(global_dir))
        planted = [os.path.join(global_dir, "plan.md"),
                   os.path.join(global_dir, "modes", "plan.md"),
                   os.path.join(SOURCE_MODES, "plan.md")]
        r = self.probe_in({"writes": planted}, "--mode", "plan")
        for path in planted:
            self.assertIn(r["writes"][path], (errno.EROFS, errno.ENOENT), path)
        self.assertEqual(r["writes"][planted[0]], errno.EROFS)
        self.assertEqual(os.listdir(global_dir), [])

    def test_working_directory_maps_into_the_project(self):
        sub = os.path.join(self.project, "src")
        r = self.probe_in({}, "--mode", "plan", cwd=sub)
        self.assertEqual(r["cwd"], sub)
        r = self.probe_in({}, "--mode", "plan", cwd=self.tmp)
        self.assertEqual(r["cwd"], self.project)

    def test_backing_directory_has_no_other_path(self):
        st = os.stat(self.project)
        find = {"find": {"dev": st.st_dev, "ino": st.st_ino, "tmp": self.tmp,
                         "project": self.project}}
        self.assertIn(self.project, self.probe_host(find)["hits"])
        r = self.probe_in(find, "--mode", "plan")
        self.assertEqual(r["hits"], [])
        # The project's path shows the view: same inode number, another device.
        self.assertEqual(r["project_stat"][1], st.st_ino)
        self.assertNotEqual(r["project_stat"][0], st.st_dev)
        # No process outside the sandbox is visible.
        self.assertLessEqual(len(r["pids"]), 3, r["pids"])

    @unittest.skipUnless(os.geteuid() == 0, "bind mounts need root")
    def test_another_mount_of_the_backing_directory_shows_the_view_too(self):
        alias = os.path.join(self.tmp, "alias")
        os.mkdir(alias)
        subprocess.run(["mount", "--bind", self.tmp, alias], check=True)
        st = os.stat(self.project)
        self.assertEqual(os.stat(os.path.join(alias, "proj")).st_ino, st.st_ino)
        find = {"find": {"dev": st.st_dev, "ino": st.st_ino, "tmp": self.tmp,
                         "project": self.project}}
        self.assertIn(os.path.join(alias, "proj"), self.probe_host(find)["hits"])
        find["writes"] = [os.path.join(alias, "proj", "src", "x.c")]
        r = self.probe_in(find, "--mode", "plan")
        self.assertEqual(r["hits"], [])
        self.assertEqual(r["writes"][os.path.join(alias, "proj", "src", "x.c")], errno.EROFS)
        self.assert_unchanged()

    def test_umount_inside_fails(self):
        p = self.run_in(["sh", "-c", 'umount "$0"; echo "umount=$?"; umount -l "$0"; '
                         'echo "lazy=$?"; fusermount3 -u "$0"; echo "fusermount=$?"; '
                         'echo x > "$0/src/a.c" || echo still-the-view', self.project],
                        "--mode", "plan")
        self.assertNotIn("umount=0", p.stdout)
        self.assertNotIn("lazy=0", p.stdout)
        self.assertNotIn("fusermount=0", p.stdout)
        self.assertIn("still-the-view", p.stdout)
        self.assert_unchanged()


KERNEL_SCAN = textwrap.dedent(r'''
    import json, os, sys
    # Every entry under /proc (but the processes' own) and /sys, opened for writing and
    # closed at once (nothing is written), at most LIMIT entries. Symlinks are not
    # followed: each target is reached as an entry of its own.
    LIMIT = 200000
    seen, writable = 0, []
    stack = ["/proc", "/sys"]
    while stack and seen < LIMIT:
        top = stack.pop()
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for e in entries:
            if top == "/proc" and (e.name.isdigit() or e.name in ("self", "thread-self")):
                continue
            seen += 1
            try:
                if e.is_symlink():
                    continue
                if e.is_dir():
                    stack.append(e.path)
                    continue
                fd = os.open(e.path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
            except OSError:
                continue
            os.close(fd)
            writable.append(e.path)
    def write_back(path):
        """Writes PATH's own value back (no change made): 0 or the errno."""
        try:
            with open(path) as f:
                v = f.read()
            with open(path, "w") as f:
                f.write(v)
            return 0
        except OSError as e:
            return e.errno
    def opens(path, flags):
        try:
            os.close(os.open(path, flags))
            return 0
        except OSError as e:
            return e.errno
    print(json.dumps({
        "seen": seen, "writable": writable,
        "printk_ratelimit": write_back("/proc/sys/kernel/printk_ratelimit"),
        "core_pattern": opens("/proc/sys/kernel/core_pattern", os.O_WRONLY),
        "sysrq": opens("/proc/sysrq-trigger", os.O_WRONLY),
        "oom_score_adj": write_back("/proc/self/oom_score_adj"),
    }))
''')


class KernelInterfaces(RunTest):
    """The sandbox's /proc and /sys are read-only, but each process's own entries.

    Started as root, the command is the host's uid 0 without capabilities; the kernel lets
    that uid write most sysctls and sysfs attributes by file mode alone, and a
    `|program` in kernel.core_pattern would run as real root outside every namespace."""

    def scan(self, *opts):
        path = os.path.join(self.tmp, "kscan.py")
        with open(path, "w") as f:
            f.write(KERNEL_SCAN)
        p = self.run_in([sys.executable, path], "--mode", "plan", *opts)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def test_no_kernel_setting_is_writable_inside(self):
        for opts in ((), ("--ro-host",)):
            r = self.scan(*opts)
            self.assertGreater(r["seen"], 100, "the scan saw /proc and /sys")
            self.assertEqual(r["writable"][:20], [], "%d entries open for writing with %s"
                             % (len(r["writable"]), opts or "a writable host"))
            # The reproductions of the review: the first printed OK, the second opened.
            self.assertIn(r["printk_ratelimit"], (errno.EROFS, errno.EACCES, errno.ENOENT),
                          opts)
            self.assertIn(r["core_pattern"], (errno.EROFS, errno.EACCES, errno.ENOENT), opts)
            self.assertIn(r["sysrq"], (errno.EROFS, errno.EACCES, errno.ENOENT), opts)
            # A process's own settings stay its own to write.
            self.assertEqual(r["oom_score_adj"], 0, opts)


# Run inside `piworkfs run --ro-host --mode plan --share SCRATCH`, in a user namespace of
# its own made inside the sandbox, where it holds every capability, and a mount namespace
# of that user namespace: one line per attempt to reach beneath the sandbox's mounts.
NESTED_PROBE = textwrap.dedent(r'''
    P=$1 S=$2 RT=$3
    try() { d=$1; shift; if "$@" >/dev/null 2>&1; then echo "ALLOWED $d"; else echo "refused $d"; fi; }
    mkdir -p "$S/t" "$S/b" "$S/rb" "$S/mv" "$S/p" "$S/y"
    try control-tmpfs mount -t tmpfs none "$S/t"
    try umount-view umount "$P"
    try umount-lazy umount -l "$P"
    try move-view mount --move "$P" "$S/mv"
    try bind-parent mount --bind "${P%/*}" "$S/b"
    try write-via-rbind sh -c 'mount --rbind "${1%/*}" "$2/rb" && echo x > "$2/rb/${1##*/}/src/main.c"' - "$P" "$S"
    try write-project sh -c 'echo x > "$1/src/main.c"' - "$P"
    try umount-socket-cover umount "$RT/piworkfs"
    try see-operator-sockets sh -c '[ "$(ls -A "$1/piworkfs")" != "${PIWORKFS_SOCKET##*/}" ]' - "$RT"
    try remount-host-rw mount -o remount,bind,rw /
    try remount-proc-sys-rw mount -o remount,bind,rw /proc/sys
    try write-sysctl sh -c 'cat /proc/sys/kernel/printk_ratelimit > /proc/sys/kernel/printk_ratelimit'
    try mount-proc mount -t proc proc "$S/p"
    try mount-sysfs mount -t sysfs sysfs "$S/y"
''')


class NestedNamespaces(RunTest):
    """An agent's own sandbox (Codex's bwrap) makes user namespaces inside run's: they work,
    writes still go through the view in the run's mode, and every mount the sandbox made is
    locked there (docs/SECURITY.md, "Namespaces inside the sandbox")."""

    def test_bwrap_inside_run_writes_through_the_view_in_the_runs_mode(self):
        nested = ["bwrap", "--unshare-user", "--unshare-pid", "--bind", "/", "/", "--chdir",
                  self.project, "sh", "-c"]
        p = self.run_in(nested + ["echo x > nested.txt"], "--mode", "build")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(self.project, "nested.txt")) as f:
            self.assertEqual(f.read(), "x\n")
        os.unlink(os.path.join(self.project, "nested.txt"))
        # Outside what the mode allows, the nested sandbox is refused as the run is.
        p = self.run_in(nested + ["echo x > src/main.c"], "--mode", "design")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("Permission denied", p.stderr)
        self.assert_unchanged()

    def test_a_nested_namespace_reaches_nothing_beneath_the_sandboxs_mounts(self):
        scratch = os.path.join(self.tmp, "scratch")
        os.mkdir(scratch)
        probe = os.path.join(self.tmp, "nested-probe.sh")
        with open(probe, "w") as f:
            f.write(NESTED_PROBE)
        p = self.run_in(["unshare", "--user", "--map-root-user", "--mount", "--propagation",
                         "private", "sh", probe, self.project, scratch, self.runtime],
                        "--ro-host", "--mode", "plan", "--share", scratch)
        self.assertEqual(p.returncode, 0, p.stderr)
        got = dict(reversed(line.split(" ", 1)) for line in p.stdout.splitlines())
        self.assertEqual(got.pop("control-tmpfs"), "ALLOWED",
                         "the nested namespace holds CAP_SYS_ADMIN: " + p.stdout)
        self.assertEqual(len(got), 13, p.stdout)
        self.assertEqual({k: v for k, v in got.items() if v != "refused"}, {}, p.stdout)
        self.assert_unchanged()


class Hidden(RunTest):
    def test_operator_socket_and_state_are_absent(self):
        # A view mounted outside: its operator socket and mountpoint exist on the host.
        mp = self.bare_view("plan")
        sockdir = os.path.join(self.runtime, "piworkfs")
        socks = [os.path.join(sockdir, n) for n in os.listdir(sockdir) if n.endswith(".sock")]
        self.assertTrue(socks)
        self.assertTrue(os.path.exists(self.state_db))
        r = self.probe_in({"exists": socks + [self.state_db, self.state_db + "-wal"],
                           "listdir": [sockdir, os.path.dirname(self.state_db)]})
        agent = r["env_socket"]
        self.assertTrue(agent and agent.endswith(".agent.sock"), agent)
        for s in socks:
            self.assertEqual(r["exists"][s], s == agent, s)
        self.assertFalse(r["exists"][self.state_db])
        self.assertEqual(r["listdir"][sockdir], [os.path.basename(agent)])
        self.assertEqual(r["listdir"][os.path.dirname(self.state_db)], [])
        # The person's view stays mounted after the run (the run's own is gone).
        self.assertEqual(len(self.my_views()), 1)
        self.pw("umount", mp)

    def test_audit_log_is_not_readable_inside(self):
        p = self.sh('echo x > src/a.c; piworkfs log', "--mode", "plan")
        self.assertNotIn("src/a.c", p.stdout)

    def test_a_state_database_elsewhere_is_hidden_too(self):
        # A view mounted with --state-db outside the state directory the sandbox derives
        # from its own environment: in a directory of its own (hidden whole), then in one
        # shared with another file (each database file covered, the neighbour kept); the
        # originals store beside it either way.
        own = os.path.join(self.tmp, "own-db", "v.db")
        shared = os.path.join(self.tmp, "shared", "v.db")
        os.makedirs(os.path.dirname(own))
        os.makedirs(os.path.dirname(shared))
        neighbour = os.path.join(self.tmp, "shared", "notes.txt")
        with open(neighbour, "w") as f:
            f.write("notes\n")
        for db in (own, shared):
            with self.subTest(db=db):
                # A mountpoint each: the first daemon may still be removing its socket.
                mp = os.path.join(self.tmp, "view-" + os.path.basename(os.path.dirname(db)))
                os.mkdir(mp)
                self.pw("mount", "--mode", "plan", "--state-db", db, self.project, mp)
                try:
                    # Other views on the host may not answer: only ours counts here.
                    st = json.loads(self.pw("status", "--json", check=False).stdout)
                    self.assertEqual([v.get("state_db") for v in st if v.get("mountpoint") ==
                                      os.path.realpath(mp)], [db])
                    files = [db + s for s in ("", "-wal", "-shm")]
                    self.assertTrue(all(os.path.exists(f) for f in files), files)
                    # The originals store beside the database: it lists outside (the
                    # control) and lists nothing inside.
                    orig = os.path.join(os.path.dirname(db), "originals")
                    self.assertIn("blobs", os.listdir(orig))
                    # Inside, each file is absent or reads empty; outside (the control) the
                    # database reads as SQLite.
                    script = 'for f in "$@"; do printf "%s=" "$f"; ' \
                             'od -An -tx1 -N16 "$f" 2>/dev/null | tr -d " \\n"; echo; done; ' \
                             'ls -A ' + orig + ' 2>/dev/null; cat ' + neighbour
                    with open(db, "rb") as f:
                        self.assertEqual(f.read(15), b"SQLite format 3")
                    p = self.run_in(["sh", "-c", script, "sh"] + files)
                    self.assertEqual(p.returncode, 0, p.stderr)
                    self.assertEqual(p.stdout, "".join(f + "=\n" for f in files) + "notes\n")
                finally:
                    self.pw("umount", mp)


class Authority(RunTest):
    def test_tightening_inside_succeeds_loosening_is_refused(self):
        p = self.sh('piworkfs mode review && piworkfs mode', "--mode", "plan")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("review", p.stdout)
        p = self.sh('piworkfs mode build', "--mode", "design")
        self.assertEqual(p.returncode, 1)
        self.assertIn("refused", p.stderr)
        self.assertIn(LOOSEN_HINT, p.stderr)
        p = self.sh('piworkfs mode off', "--mode", "plan")
        self.assertEqual(p.returncode, 1)
        self.assertIn("piworkfs mode off", p.stderr)
        self.assert_unchanged()

    def test_trust_inside_is_refused_and_trusts_nothing(self):
        # Issue 44, item 9: `trust` inside said "trusted ..." and wrote a throwaway database
        # (the run hides the real one). Refused, saying why and what to do, as undo is; with
        # PIWORKFS_SOCKET unset too (the hidden database tells); --list too, which said
        # "no trusted projects" whatever the person trusted.
        self.pw("trust", "--list")
        for script in ("piworkfs trust", "env -u PIWORKFS_SOCKET piworkfs trust",
                       "piworkfs trust --revoke", "env -u PIWORKFS_SOCKET piworkfs trust --list"):
            p = self.sh(script + "; echo rc=$?", "--mode", "build")
            self.assertIn("rc=1", p.stdout, script + ": " + p.stdout + p.stderr)
            lines = [x for x in p.stderr.splitlines() if x.startswith("piworkfs: trust:")]
            self.assertEqual(len(lines), 1, p.stderr)
            self.assertIn("refused inside `piworkfs run`", lines[0])
            self.assertIn("on your own terminal, outside the run", lines[0])
            self.assertNotIn("trusted", p.stdout)
        self.assertIn("no trusted projects", self.pw("trust", "--list").stdout)
        # Outside, the same command works.
        self.pw("trust")
        self.assertIn(self.project, self.pw("trust", "--list").stdout)

    def test_queries_work_inside_through_the_agent_socket(self):
        p = self.sh('piworkfs status && piworkfs check --write src/main.c; '
                    'echo "check=$?"; piworkfs allowed; echo "allowed=$?"; '
                    'piworkfs check-bash "rm -rf src"; echo "bash=$?"', "--mode", "design")
        self.assertIn("design", p.stdout)
        self.assertIn("check=1", p.stdout)
        self.assertIn("allowed=0", p.stdout)
        self.assertIn("bash=1", p.stdout, p.stderr)

    def test_the_person_outside_loosens_and_it_holds_inside_at_once(self):
        go = os.path.join(self.tmp, "go")
        ready = os.path.join(self.tmp, "ready")
        script = textwrap.dedent('''
            piworkfs mode build 2>/dev/null && echo LOOSENED
            echo x > docs/design/new.md 2>/dev/null && echo EARLY
            touch "$0"
            i=0; while [ ! -e "$1" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
            echo y > docs/design/new.md && echo DESIGN-WRITE
            echo z > src/main.c 2>/dev/null || echo SRC-REFUSED
        ''')
        proc = self.start_until_ready([PIWORKFS, "run", "--mode", "plan", "--project",
                                       self.project, "--", "sh", "-c", script, ready, go], ready)
        [(mp, _)] = self.my_views()
        self.pw("mode", "design", "--mount", mp)
        out = self.go_and_finish(proc, go)
        self.assertNotIn("LOOSENED", out)
        self.assertNotIn("EARLY", out)
        self.assertIn("DESIGN-WRITE", out)
        self.assertIn("SRC-REFUSED", out)
        with open(os.path.join(self.project, "docs", "design", "new.md")) as f:
            self.assertEqual(f.read(), "y\n")


def node_major():
    """The major version of the node on PATH, or None."""
    try:
        out = subprocess.run(["node", "--version"], capture_output=True, text=True,
                             timeout=DEADLINE).stdout
    except OSError:
        return None
    return int(out.strip().lstrip("v").split(".")[0]) if out.startswith("v") else None


class NodeTooOld(RunTest):
    """Issue 44, item 22: Pi 1.6.0 needs Node 22, and on Debian 12's Node 20 it dies with an
    unexplained SyntaxError; run says why when a Node program fails on an older Node than
    its package.json declares."""

    def program(self, engines, status):
        """A Node program `prog` in a package that declares ENGINES, ending with STATUS."""
        pkg = os.path.join(self.tmp, "pkg")
        os.makedirs(os.path.join(pkg, "dist"), exist_ok=True)
        with open(os.path.join(pkg, "package.json"), "w") as f:
            json.dump({"name": "prog", "bin": {"prog": "dist/cli.js"},
                       "engines": {"node": engines}}, f)
        cli = os.path.join(pkg, "dist", "cli.js")
        with open(cli, "w") as f:
            f.write("#!/usr/bin/env node\nconsole.log('RAN');\nprocess.exit(%d);\n" % status)
        os.chmod(cli, 0o755)
        bindir = os.path.join(self.tmp, "bin")
        os.makedirs(bindir, exist_ok=True)
        link = os.path.join(bindir, "prog")
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(cli, link)
        self.env["PATH"] = bindir + ":" + self.env["PATH"]

    def test_a_failure_on_an_older_node_says_which_node_it_needs(self):
        major = node_major()
        self.assertIsNotNone(major, "these tests need node on PATH (scripts/setup)")
        self.program(">=%d.0.0" % (major + 1), 3)
        p = self.run_in(["prog"])
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("RAN", p.stdout)  # it ran all the same
        last = p.stderr.strip().splitlines()[-1]
        self.assertIn("piworkfs: run: prog exited 3: it needs Node.js >=%d.0.0" % (major + 1),
                      last)
        self.assertIn("is v%d." % major, last)
        self.assertIn("install Node.js %d or later" % (major + 1), last)
        # Controls: a Node new enough, or a program that did not fail: nothing said.
        self.program(">=%d.0.0" % major, 3)
        p = self.run_in(["prog"])
        self.assertEqual(p.returncode, 3)
        self.assertNotIn("needs Node.js", p.stderr)
        self.program(">=%d.0.0" % (major + 1), 0)
        p = self.run_in(["prog"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("needs Node.js", p.stderr)

    def test_the_real_pi_1_6_on_this_node(self):
        pi = os.path.join(SOURCE, "tests", "pi", "node_modules", ".bin", "pi")
        self.assertTrue(os.path.exists(pi), "scripts/setup installs the pinned Pi releases")
        with open(os.path.join(os.path.dirname(os.path.realpath(pi)), "..", "..",
                               "package.json")) as f:
            pkg = json.load(f)
        self.assertEqual(pkg["version"], "1.6.0")
        needs = int(pkg["engines"]["node"].lstrip(">= ").split(".")[0])
        p = self.run_in([pi, "--version"])
        if node_major() >= needs:
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertNotIn("needs Node.js", p.stderr)
        else:  # Debian 12's Node 20: the SyntaxError, then what it means
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("enableCompileCache", p.stderr)
            self.assertIn("it needs Node.js %s" % pkg["engines"]["node"],
                          p.stderr.strip().splitlines()[-1])


class Process(RunTest):
    def test_exit_status_passes_through(self):
        self.assertEqual(self.sh("exit 7").returncode, 7)
        self.assertEqual(self.sh("exit 0").returncode, 0)
        self.assertEqual(self.sh("kill -TERM $$").returncode, 128 + signal.SIGTERM)
        self.assert_unmounted()

    def test_a_missing_or_unexecutable_command_exits_127_or_126_as_in_a_shell(self):
        p = self.run_in(["no-such-command-piworkfs"])
        self.assertEqual(p.returncode, 127, p.stderr)
        self.assertIn("no-such-command-piworkfs", p.stderr)
        plain = os.path.join(self.project, "plain.txt")
        with open(plain, "w") as f:
            f.write("not a program\n")
        os.chmod(plain, 0o644)
        self.assertEqual(self.run_in([plain]).returncode, 126)
        # The command still gets its own argv[0] and arguments, untouched by the shell.
        p = self.run_in([sys.executable, "-c", "import sys; print(sys.argv)", "a b", "$HOME"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), repr(["-c", "a b", "$HOME"]))
        self.assert_unmounted()

    def test_stdio_passes_through(self):
        p = subprocess.run([PIWORKFS, "run", "--project", self.project, "--", "sh", "-c",
                            "read line; echo \"out:$line\"; echo err >&2"],
                           input="hello\n", cwd=self.project, env=self.env,
                           capture_output=True, text=True, timeout=DEADLINE)
        self.assertEqual(p.stdout, "out:hello\n")
        # run's own start-up line (project, view, mode) comes first, then the command's.
        first, rest = p.stderr.split("\n", 1)
        self.assertTrue(first.startswith("piworkfs: run: project "), p.stderr)
        self.assertEqual(rest, "err\n")

    def _signalled(self, sig):
        script = ('trap "echo got-%s; exit 9" %s; echo ready; '
                  'i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done' %
                  (sig.name, sig.name[3:]))
        rc, out, err = self.signal_when_ready([PIWORKFS, "run", "--mode", "plan", "--project",
                                               self.project, "--", "sh", "-c", script], sig)
        self.assertEqual(out, "got-%s\n" % sig.name, err)
        self.assertEqual(rc, 9)
        self.assert_unmounted()

    def test_sigterm_reaches_the_command(self):
        self._signalled(signal.SIGTERM)

    def test_sigint_reaches_the_command(self):
        self._signalled(signal.SIGINT)

    def test_sighup_reaches_the_command(self):
        self._signalled(signal.SIGHUP)

    def test_view_goes_away_when_the_command_is_killed(self):
        p = self.sh("kill -KILL $$", "--mode", "plan")
        self.assertEqual(p.returncode, 128 + signal.SIGKILL)
        self.assert_unmounted()
        self.assertEqual(os.listdir(os.path.join(self.runtime, "piworkfs")), [])

    def test_two_runs_from_a_live_view_write_the_project_in_its_mode(self):
        # Each run has a view of its own, in the live view's mode (build), starting in the
        # place of the current directory; the person's view stays.
        mp = self.bare_view("build")
        for _ in range(2):
            p = self.sh('echo x > new.c && echo wrote', cwd=os.path.join(mp, "src"))
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("wrote", p.stdout)
        self.assertEqual(len(self.my_views()), 1)
        with open(os.path.join(self.project, "src", "new.c")) as f:
            self.assertEqual(f.read(), "x\n")
        p = self.sh('pwd', cwd=os.path.join(mp, "src"))
        self.assertEqual(p.stdout.strip(), os.path.join(self.project, "src"))
        self.pw("umount", mp)


AGENT_LISTENER = textwrap.dedent(SUBSCRIBED + r'''
    ready, go = sys.argv[1], sys.argv[2]
    open(ready, "w").close()
    end = time.monotonic() + 60
    while not os.path.exists(go) and time.monotonic() < end:
        time.sleep(0.02)
    try:
        open("src/inside.txt", "w")
        sys.exit("the write went through")
    except OSError:
        pass
    heard = []
    while not heard or heard[-1][0] != "src/inside.txt":
        p = json.loads(f.readline())["params"]
        heard.append((p["path"], p["pid"]))
    print(json.dumps({"pid": os.getpid(), "heard": heard}))
''')


class AgentNotifications(RunTest):
    def test_the_agent_hears_only_of_denials_in_its_sandbox(self):
        # The person's own denial outside, and the agent's inside: the agent's socket
        # delivers only the second, with the pid the agent knows; the operator socket of the
        # run's own view delivers both (the outside one made through that view's
        # mountpoint). Audit events keep their order, so once the agent has heard of its
        # own denial it would have heard of the earlier one outside.
        mp = self.bare_view("plan")
        ready, go = os.path.join(self.tmp, "ready"), os.path.join(self.tmp, "go")
        proc = self.start_until_ready([PIWORKFS, "run", "--project", self.project, "--",
                                       sys.executable, "-c", AGENT_LISTENER, ready, go],
                                      ready, cwd=mp)
        # Every view of the machine is listed (exit 4 if one of another test does not
        # answer us): the run's is the one naming a run of our project.
        [(sock, run_mp)] = [
            (v["socket"], v["mountpoint"])
            for v in json.loads(self.pw("status", "--json", check=False).stdout)
            if v.get("project") == self.project and v.get("run")]
        op = socket.socket(socket.AF_UNIX)
        op.settimeout(DEADLINE)
        op.connect(sock)
        self.addCleanup(op.close)
        opf = op.makefile("rb")
        op.sendall(b'{"jsonrpc":"2.0","id":1,"method":"subscribe",'
                   b'"params":{"events":["denied"]}}\n')
        self.assertIn("result", json.loads(opf.readline()))
        with self.assertRaises(OSError):
            open(os.path.join(run_mp, "src", "outside.txt"), "w")
        out = self.go_and_finish(proc, go)
        inside = json.loads(out)
        self.assertEqual(inside["heard"], [["src/inside.txt", inside["pid"]]], out)

        heard = {}
        while len(heard) < 2:
            p = json.loads(opf.readline())["params"]
            heard[p["path"]] = p["pid"]
        self.assertEqual(heard["src/outside.txt"], os.getpid())
        self.assertNotEqual(heard["src/inside.txt"], inside["pid"],
                            "the operator sees the pid as the daemon does")
        self.pw("umount", mp)

if __name__ == "__main__":
    unittest.main(verbosity=2)
