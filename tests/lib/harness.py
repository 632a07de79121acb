# SPDX-License-Identifier: MIT
"""Shared harness of the tests that really mount a view (Python 3 standard library only).

Every test owns private temp dirs (project, mountpoint, HOME, XDG_CONFIG_HOME,
XDG_RUNTIME_DIR with mode 0700, XDG_STATE_HOME and the state database), starts the daemon
in the foreground (`piworkfs mount -f`) with its stderr captured to a file, waits for the
mount with a deadline, and always tears down (addCleanup): `fusermount3 -u` must exit 0,
the daemon must exit within 10 s; on failure a lazy unmount and a kill, and the test fails
with the daemon's log. In CI a skip is a failure, so nothing here skips.

Environment: $PIWORKFS is the binary under test, $SOURCE_MODES the bundled modes/ dir.
A module, not a file next to the tests: `import harness` finds it through PYTHONPATH
(tests/lib), which meson's test environment sets, and `meson devenv -C build` too for a test
file run by hand (README.md, "Running one test").
"""

import ctypes
import ctypes.util
import errno
import hashlib
import json
import os
import random
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
PIWORKFS = os.environ.get("PIWORKFS", "piworkfs")
SOURCE_MODES = os.environ.get("SOURCE_MODES", os.path.join(SOURCE, "modes"))

# Deadlines, not speed claims: generous, so a loaded machine (or ASan) is slower, not red.
MOUNT_DEADLINE = 60.0
# How long a test waits for a condition that another process or the kernel brings about.
# Generous on purpose: a wait ends as soon as the condition holds, so only a failure pays it.
DEADLINE = 60.0
EXIT_DEADLINE = 60.0
# How long an unmount may stay busy after the test's own work is done: on a loaded machine
# what the test started may still be letting go of the view for a moment (a child still
# exiting, a detached `git gc --auto`, a file whose last reference the kernel drops late);
# a descriptor the test really leaked keeps it busy past this and fails.
BUSY_DEADLINE = 10.0
BUNDLED = ["discuss", "plan", "review", "design", "build", "off"]
READ_ONLY_MODES = ["discuss", "plan", "review"]

# --- renameat2 through libc (Python has no binding) -------------------------------------

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
AT_FDCWD = -100
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                            ctypes.c_uint]
_libc.renameat2.restype = ctypes.c_int


def renameat2(src, dst, flags):
    """rename with FLAGS; raises OSError with the exact errno."""
    r = _libc.renameat2(AT_FDCWD, os.fsencode(src), AT_FDCWD, os.fsencode(dst), flags)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), src)


# --- the backing tree's fingerprint -----------------------------------------------------

def tree_state(root):
    """Everything under ROOT as seen with lstat, an entry per path: type and mode, owner,
    size, mtime in ns, link count, and a digest of the content, symlink target and xattrs.
    Atime and ctime are left out: reads and denied attempts may legitimately touch them."""
    state = {}

    def add(rel, full):
        st = os.lstat(full)
        h = hashlib.sha256()
        try:
            for x in sorted(os.listxattr(full, follow_symlinks=False)):
                h.update(b"x" + x.encode() + b"=" +
                         os.getxattr(full, x, follow_symlinks=False) + b"\0")
        except OSError:
            pass
        if stat.S_ISLNK(st.st_mode):
            h.update(b"L" + os.fsencode(os.readlink(full)) + b"\0")
        elif stat.S_ISREG(st.st_mode):
            with open(full, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        state[rel] = "mode=%o owner=%d:%d size=%d mtime=%d nlink=%d data=%s" % (
            st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, st.st_nlink,
            h.hexdigest()[:16])

    add(".", root)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            add(os.path.relpath(full, root), full)
    return state


def tree_hash(root):
    """A digest of tree_state(ROOT): two equal digests mean the tree is unchanged byte for
    byte."""
    h = hashlib.sha256()
    for rel, entry in sorted(tree_state(root).items()):
        h.update(("%s\0%s\0" % (rel, entry)).encode())
    return h.hexdigest()


def tree_changes(before, after, limit=20):
    """The paths whose entries differ between two tree_state()s, as readable lines (for
    failure messages); empty when the trees are the same."""
    out = []
    for rel in sorted(set(before) | set(after)):
        a, b = before.get(rel, "(none)"), after.get(rel, "(none)")
        if a != b:
            out.append("%s: %s -> %s" % (rel, a, b))
    if len(out) > limit:
        out = out[:limit] + ["... and %d more" % (len(out) - limit)]
    return out


def tree_listing(root):
    """The sorted relative paths under ROOT (for readable failure messages)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            out.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(out)


# --- mountinfo --------------------------------------------------------------------------

def _unescape(s):
    return s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n") \
        .replace("\\134", "\\")


def mount_entries(path):
    """(mount id, fstype) of every mount whose mountpoint is PATH (/proc/self/mountinfo)."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = left.split()
            if len(fields) >= 5 and _unescape(fields[4]) == path:
                out.append((int(fields[0]), right.split()[0]))
    return out


def mounts_at(path):
    """The fstypes of every mount whose mountpoint is PATH."""
    return [t for _, t in mount_entries(path)]


def piworkfs_mounts():
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split()[0:1] == ["fuse.piworkfs"]:
                out.append(_unescape(left.split()[4]))
    return out


def is_view_mounted(path):
    return "fuse.piworkfs" in mounts_at(path)


# Whether this run's views serve over FUSE over io_uring (PIWORKFS_IO_URING=1: the io_uring
# pass of ./dev test) or over /dev/fuse (unset or 0).
OVER_URING = os.environ.get("PIWORKFS_IO_URING", "") not in ("", "0")

# The sanitizers' settings of the run (./dev test's sanitized pass: every finding aborts,
# UBSan's too) for every process a test starts with an environment of its own (self.env).
# Without them UBSan only prints a finding and carries on, and undefined behaviour in a
# daemon or a command would pass its test unseen.
SANITIZER_ENV = {k: os.environ[k] for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS")
                 if k in os.environ}
# The commands a test runs get the same, but no leak scan at their exit: LeakSanitizer's
# scan costs each sanitized process 40 to 80 ms (a C program that does nothing: 46 ms with
# ASan, 129 with the scan), and the mount tests run thousands of commands. Leaks are
# checked in the daemons mount() starts in the foreground (it gives them SANITIZER_ENV; a
# leak fails the daemon's exit status, which the teardown checks), the processes that live
# long enough for a leak to matter, and in the unit tests, which run the same libraries
# directly; a command is checked for every other finding.
COMMAND_SANITIZER_ENV = dict(SANITIZER_ENV)
if "ASAN_OPTIONS" in SANITIZER_ENV:
    COMMAND_SANITIZER_ENV["ASAN_OPTIONS"] = SANITIZER_ENV["ASAN_OPTIONS"] + ":detect_leaks=0"


def fusermount_u(mp):
    """fusermount3 -u MP, retried while the mount is busy (BUSY_DEADLINE): the last run."""
    end = time.monotonic() + BUSY_DEADLINE
    while True:
        p = subprocess.run(["fusermount3", "-u", mp], capture_output=True, text=True,
                           timeout=30)
        if p.returncode == 0 or "busy" not in p.stderr or time.monotonic() >= end:
            return p
        time.sleep(0.1)


def wait_until(pred, deadline, step=0.02):
    end = time.monotonic() + deadline
    while True:
        if pred():
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(step)


# --- the fixture project ----------------------------------------------------------------

# The standard fixture tree (drawn once; the tables of test_enforce.py refer to it):
#
#   project/
#     .git/config                  protected
#     .git/hooks/pre-commit        protected
#     .git/HEAD
#     .piworkfs/config.yaml        protected; declares design.tokens: [styles/tokens.css]
#     .git/hooks/empty/            protected empty directory
#     .piworkfs/empty/             protected empty directory
#     docs/design/a.md, b.md, c.md design-writable
#     docs/design/sub/             design-writable empty directory
#     docs/x.md, docs/y.md         only build/off
#     docs/empty/                  only build/off, empty directory
#     src/a.c, src/b.c             only build/off
#     src/empty/                   only build/off, empty directory
#     styles/tokens.css            a declared token file (design-writable when trusted)
STANDARD_TREE = {
    ".git/config": "[core]\n\trepositoryformatversion = 0\n",
    ".git/hooks/pre-commit": "#!/bin/sh\nexit 0\n",
    ".git/HEAD": "ref: refs/heads/main\n",
    ".piworkfs/config.yaml": "design:\n  tokens:\n    - styles/tokens.css\n",
    ".git/hooks/empty/": None,
    ".piworkfs/empty/": None,
    "docs/design/a.md": "# design a\n",
    "docs/design/b.md": "# design b\n",
    "docs/design/c.md": "# design c\n",
    "docs/design/sub/": None,
    "docs/x.md": "# x\n",
    "docs/y.md": "# y\n",
    "docs/empty/": None,
    "src/a.c": "int a(void) { return 1; }\n",
    "src/b.c": "int b(void) { return 2; }\n",
    "src/empty/": None,
    "styles/tokens.css": ":root { --c: red; }\n",
}


def write_tree(root, spec):
    """Creates SPEC ({relpath: text or None for a directory}) under ROOT."""
    for rel, content in spec.items():
        full = os.path.join(root, rel)
        if content is None:
            os.makedirs(full, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(content)
    if ".git/hooks/pre-commit" in spec:
        os.chmod(os.path.join(root, ".git/hooks/pre-commit"), 0o755)


# --- the test case base -----------------------------------------------------------------

# --- the program's commands ----------------------------------------------------------------

def commands(env):
    """Every command `piworkfs --help` lists (run with ENV)."""
    out = subprocess.run([PIWORKFS, "--help"], env=env, capture_output=True, text=True,
                         check=True).stdout
    block = out.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in block.splitlines() if line.startswith("  ")]


# --- tables of rows ------------------------------------------------------------------------

def table():
    """(ROWS, row) for a table test: decorating a function with @row(NAME) appends
    (NAME, function) to ROWS, in the order they are written."""
    rows = []

    def row(name):
        def deco(fn):
            rows.append((name, fn))
            return fn
        return deco
    return rows, row


# --- plans --------------------------------------------------------------------------------

def draft_plan(*tasks, title="Cache the parsed config", day="2026-12-02"):
    """A draft plan file's text (README "Plans"): its frontmatter, its title, and TASKS as
    the unchecked items of its Tasks section."""
    return ("---\ntitle: %s\nstatus: draft\ncreated: %s\nupdated: %s\n---\n# %s\n\n## Tasks\n"
            % (title, day, day, title) + "".join("- [ ] %s\n" % t for t in tasks))


class View:
    """One mounted view: its daemon process, paths and log."""

    def __init__(self, case, proc, mountpoint, log_path):
        self.case = case
        self.proc = proc
        self.mp = mountpoint
        self.log_path = log_path
        self.unmounted = False

    @property
    def pid(self):
        return self.proc.pid

    def path(self, rel=""):
        return os.path.join(self.mp, rel) if rel else self.mp

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError as e:
            return "(no log: %s)" % e

    def fd_count(self):
        return len(os.listdir("/proc/%d/fd" % self.proc.pid))


class MountCase(unittest.TestCase):
    """Base of every mount test: private dirs, a daemon per mount, cleanup that never leaves
    a mount behind."""

    tree = STANDARD_TREE
    deadline = 150  # seconds for one test, teardown included

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pw-mnt-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        # Runs after every view's own teardown (cleanups run last in, first out): a safety
        # net that detaches anything still mounted under our temp dir (a daemonized view,
        # a refused mount that went through after all), so rmtree never walks a view.
        self.addCleanup(self._sweep_mounts)
        # A watchdog bounds every test in time, even one blocked in a syscall on a hung
        # view: it kills the test's daemons (blocked requests then fail with ENOTCONN) and
        # detaches their mounts, so the test fails instead of hanging, and nothing stays
        # mounted if meson's own timeout kills us later. It stays armed during teardown.
        self.watchdog_fired = False
        self.watchdog = threading.Timer(self.deadline, self._watchdog_fire)
        self.watchdog.daemon = True
        self.watchdog.start()
        self.addCleanup(self._watchdog_check)
        self.project = os.path.join(self.tmp, "project")
        self.mp = os.path.join(self.tmp, "mnt")
        home = os.path.join(self.tmp, "home")
        self.runtime = os.path.join(self.tmp, "run")
        for d in (self.project, self.mp, home, self.runtime):
            os.makedirs(d)
        os.chmod(self.runtime, 0o700)
        self.config_home = os.path.join(home, ".config")
        self.state_home = os.path.join(home, ".local", "state")
        os.makedirs(self.config_home)
        os.makedirs(self.state_home)
        self.state_db = os.path.join(self.tmp, "state.db")
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LC_ALL": "C.UTF-8",
            "HOME": home,
            "XDG_CONFIG_HOME": self.config_home,
            "XDG_STATE_HOME": self.state_home,
            "XDG_RUNTIME_DIR": self.runtime,
            "PIWORKFS_STATE_DB": self.state_db,
            "PIWORKFS_MODES_DIR": SOURCE_MODES,
        }
        # PIWORKFS_IO_URING=1 runs every view over FUSE over io_uring, =0 over /dev/fuse
        # (docs/internals/fs.md); unset, over /dev/fuse too: a suite tests one transport,
        # not whichever the machine's fuse module parameter happens to allow.
        self.env["PIWORKFS_IO_URING"] = "1" if OVER_URING else "0"
        self.env.update(COMMAND_SANITIZER_ENV)
        self.cwd = os.path.join(self.tmp, "elsewhere")
        os.makedirs(self.cwd)
        if self.tree:
            write_tree(self.project, self.tree)
        self.views = []

    # -- running the program ------------------------------------------------------------

    def run_pw(self, *args, cwd=None, env=None, timeout=60, check=False):
        e = dict(self.env)
        if env:
            e.update(env)
        p = subprocess.run([PIWORKFS] + [str(a) for a in args], cwd=cwd or self.cwd, env=e,
                           capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            self.fail("piworkfs %s exited %d\nstdout: %s\nstderr: %s" %
                      (" ".join(map(str, args)), p.returncode, p.stdout, p.stderr))
        return p

    def run_tool(self, argv, cwd, timeout=120, check=True, env=None):
        e = dict(self.env)
        if env:
            e.update(env)
        p = subprocess.run(argv, cwd=cwd, env=e, capture_output=True, text=True,
                           timeout=timeout)
        if check and p.returncode != 0:
            self.fail("%s exited %d in %s\nstdout: %s\nstderr: %s%s" %
                      (argv, p.returncode, cwd, p.stdout, p.stderr, self.daemon_logs()))
        return p

    def trust(self, project=None):
        """Trusts PROJECT (default: the test's) with `piworkfs trust` (the daemon's db)."""
        self.run_pw("trust", project or self.project, check=True)

    # -- mounting -----------------------------------------------------------------------

    def mount(self, mode="build", args=(), mountpoint=None, project=None, wait=True):
        """Starts `piworkfs mount -f` and waits (MOUNT_DEADLINE) for the view to appear in
        mountinfo.
        Returns a View; the cleanup that unmounts it is registered here."""
        mp = mountpoint or self.mp
        log_path = os.path.join(self.tmp, "daemon-%d.log" % len(self.views))
        argv = [PIWORKFS, "mount", "-f", "--state-db", self.state_db]
        if mode:
            argv += ["--mode", mode]
        argv += list(args) + [project or self.project, mp]
        # A view counts as mounted when a fuse.piworkfs mount appears at MP that was not
        # there before, or, when a stale one from a killed daemon was there (the kernel may
        # give the new mount the freed id), once the daemon says it serves.
        known = {i for i, _ in mount_entries(mp)}

        def new_view():
            entries = mount_entries(mp)
            if any(t == "fuse.piworkfs" and i not in known for i, t in entries):
                return True
            return is_view_mounted(mp) and "piworkfs: serving " in v.log()

        logf = open(log_path, "wb")
        proc = subprocess.Popen(argv, cwd=self.cwd, env=dict(self.env, **SANITIZER_ENV),
                                stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT)
        logf.close()
        v = View(self, proc, mp, log_path)
        self.views.append(v)
        self.addCleanup(self._teardown_view, v)
        if wait:
            ok = wait_until(lambda: new_view() or proc.poll() is not None, MOUNT_DEADLINE)
            if proc.poll() is not None or not ok:
                self.fail("the view did not mount within %.0f s (daemon exit %s)\n%s" %
                          (MOUNT_DEADLINE, proc.poll(), v.log()))
            # The control plane is ready once the socket exists (after the FUSE mount).
            wait_until(lambda: self.socket_path(v) is not None or proc.poll() is not None,
                       MOUNT_DEADLINE)
        return v

    def unmount(self, v):
        """Unmounts V with fusermount3 -u (exit 0 required) and waits for the daemon."""
        p = fusermount_u(v.mp)
        self.assertEqual(p.returncode, 0, "fusermount3 -u %s: %s%s" % (v.mp, p.stderr,
                                                                       self.daemon_logs()))
        self.wait_daemon_exit(v)
        v.unmounted = True

    def wait_daemon_exit(self, v, deadline=EXIT_DEADLINE):
        try:
            return v.proc.wait(timeout=deadline)
        except subprocess.TimeoutExpired:
            self.fail("daemon %d did not exit within %.0f s\n%s" % (v.pid, deadline, v.log()))

    def _teardown_view(self, v):
        if v.unmounted:
            if v.proc.poll() is None:
                v.proc.kill()
                v.proc.wait(5)
            return
        problems = []
        if is_view_mounted(v.mp) and v.proc.poll() is None:
            p = fusermount_u(v.mp)
            if p.returncode != 0:
                problems.append("fusermount3 -u exited %d: %s" % (p.returncode,
                                                                  p.stderr.strip()))
            else:
                try:
                    rc = v.proc.wait(timeout=EXIT_DEADLINE)
                    if rc != 0:
                        problems.append("daemon exited %d after unmount" % rc)
                except subprocess.TimeoutExpired:
                    problems.append("daemon did not exit within %.0f s of the unmount" %
                                    EXIT_DEADLINE)
        elif v.proc.poll() is not None and is_view_mounted(v.mp):
            problems.append("daemon died (exit %s) and left its mount" % v.proc.poll())
        # Whatever happened: no mount, no process left behind.
        if is_view_mounted(v.mp) or "fuse.piworkfs" in mounts_at(v.mp):
            subprocess.run(["fusermount3", "-u", "-z", v.mp], capture_output=True, timeout=30)
        if v.proc.poll() is None:
            v.proc.kill()
            v.proc.wait(5)
        v.unmounted = True
        if problems:
            self.fail("teardown of %s: %s\n--- daemon log ---\n%s" %
                      (v.mp, "; ".join(problems), v.log()))

    def _watchdog_fire(self):
        self.watchdog_fired = True
        for v in list(self.views):
            if v.proc.poll() is None:
                v.proc.kill()
            subprocess.run(["fusermount3", "-u", "-z", v.mp], capture_output=True, timeout=30)

    def _watchdog_check(self):
        self.watchdog.cancel()
        if self.watchdog_fired:
            self.fail("the test ran over its %d s deadline: its daemons were killed and its "
                      "mounts detached%s" % (self.deadline, self.daemon_logs()))

    def _sweep_mounts(self):
        left = [m for m in piworkfs_mounts() if m == self.tmp or m.startswith(self.tmp + "/")]
        for m in reversed(left):
            subprocess.run(["fusermount3", "-u", "-z", m], capture_output=True, timeout=30)
        for m in left:
            # Anything left here was not torn down by the test itself: that is a failure.
            self.fail("a view was left mounted at %s (detached it lazily)" % m)

    def daemon_logs(self):
        return "".join("\n--- daemon %d log ---\n%s" % (v.pid, v.log()) for v in self.views)

    # -- the control socket -------------------------------------------------------------

    def wait_answering(self, v):
        """Waits until V's control socket answers `status` (a dead daemon's socket file, or
        one bound but not yet listening, would refuse the first command); returns V."""
        def answers():
            try:
                c = RpcClient(self.socket_path(v) or "/nonexistent", timeout=10)
            except OSError:
                return False
            try:
                c.call("status")
                return True
            except (OSError, RuntimeError, ConnectionError):
                return False
            finally:
                c.close()
        self.assertTrue(wait_until(answers, 60), self.daemon_logs())
        return v

    def pw_in_view(self, *args, check=True):
        """piworkfs ARGS --mount (the view); a failure when CHECK and it exits non-zero."""
        p = self.run_pw(*args, "--mount", self.mp)
        if check and p.returncode != 0:
            self.fail("piworkfs %s: exit %d\n%s%s%s" % (" ".join(args), p.returncode,
                                                        p.stdout, p.stderr, self.daemon_logs()))
        return p

    def socket_path(self, v=None):
        """The control socket of the view at V's mountpoint (the daemon's naming:
        $XDG_RUNTIME_DIR/piworkfs/<basename>-<fnv1a64(mountpoint)>.sock), or None while
        it does not exist."""
        mp = (v.mp if v else self.mp).rstrip("/") or "/"
        h = 0xcbf29ce484222325
        for c in os.fsencode(mp):
            h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
        base = mp.rsplit("/", 1)[1] or "root"
        base = "".join(c if (c.isascii() and c.isalnum()) or c in "-_." else "_"
                       for c in base)[:24]
        path = os.path.join(self.runtime, "piworkfs", "%s-%016x.sock" % (base, h))
        return path if os.path.exists(path) else None

    def rpc(self, v, method, params=None):
        """The result of METHOD(PARAMS) on V's control socket, over a connection of its own
        (closed before it returns)."""
        c = RpcClient(self.socket_path(v))
        try:
            return c.call(method, params)
        finally:
            c.close()

    def write_project_mode(self, name, text):
        """Writes TEXT as the project's own mode NAME (.piworkfs/modes/NAME.md)."""
        d = os.path.join(self.project, ".piworkfs", "modes")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, name + ".md"), "w") as f:
            f.write(text)

    def fresh_project(self, name, tree=None):
        """A new project dir and an empty mountpoint under the test's temp dir."""
        proj = os.path.join(self.tmp, name)
        mp = os.path.join(self.tmp, name + "-mnt")
        os.makedirs(proj)
        os.makedirs(mp)
        write_tree(proj, self.tree if tree is None else tree)
        return proj, mp

    def have_mode_command(self):
        p = self.run_pw("mode", "--help")
        return p.returncode == 0 and "Usage" in p.stdout

    def set_mode(self, v, mode):
        """Switches V's mode with `piworkfs mode NAME --mount MP`; returns the result."""
        p = self.run_pw("mode", "--mount", v.mp, mode)
        self.assertEqual(p.returncode, 0, "piworkfs mode %s: %s %s%s" %
                         (mode, p.stdout, p.stderr, self.daemon_logs()))
        return p

    def user_in(self, v, rel="src", seconds=60):
        """A process (sleep SECONDS) whose current directory is REL in the view V: a user
        that keeps the view busy. Killed and reaped on the way out."""
        p = subprocess.Popen(["sleep", str(seconds)], cwd=v.path(rel))
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)
        return p

    def assert_refused_and_unchanged(self, v, rows):
        """Each row (ERRNO, FN, NAME, NAME2[, FLAGS]) of ROWS: FN on the view V's NAME and
        NAME2 (and FLAGS, for renameat2) fails with ERRNO exactly; and the backing tree is the
        same after them all as before."""
        before = tree_hash(self.project)
        for err, fn, a, b, *flags in rows:
            self.assertErrno(err, fn, v.path(a), v.path(b), *flags)
        self.assertEqual(before, tree_hash(self.project))

    def assert_moves(self, v, name, to):
        """Renaming the directory NAME to TO through the view V works."""
        os.rename(v.path(name), v.path(to))
        self.assertTrue(os.path.isdir(os.path.join(self.project, to)))

    # -- stress: switches while other threads work -------------------------------------------

    def switch_storm(self, v, modes, times, seed, stop, problems, record=None, before=None,
                     after=None, until=None):
        """The body of a switcher thread: over one control connection to V, sets MODES[1],
        MODES[0], MODES[1]... TIMES times, or fewer once UNTIL(n) holds before the n-th;
        BEFORE(rng) and AFTER(rng) run around each switch (rng seeded with SEED) and RECORD
        gets (t requested, t returned, mode) of each, in monotonic ns. It never raises: what
        fails (the connect too) goes to PROBLEMS, and STOP is set on the way out, so the
        threads working beside it always stop."""
        c = None
        rng = random.Random(seed)
        try:
            c = RpcClient(self.socket_path(v))
            mode = modes[0]
            for n in range(times):
                if until is not None and until(n):
                    break
                mode = modes[1] if mode == modes[0] else modes[0]
                if before:
                    before(rng)
                t0 = time.monotonic_ns()
                c.call("mode.set", {"mode": mode})
                if record is not None:
                    record.append((t0, time.monotonic_ns(), mode))
                if after:
                    after(rng)
        except Exception as e:  # noqa: BLE001
            problems.append("switcher: %r" % e)
        finally:
            if c:
                c.close()
            stop.set()

    def timed_calls(self, stop, record, kind, op):
        """The body of a worker thread beside a switcher: calls OP() until STOP is set and
        appends (t started, t ended, succeeded, errno, KIND) of each call to RECORD, in
        monotonic ns. An OSError is a failed call with its errno; anything else escapes."""
        while not stop.is_set():
            t0 = time.monotonic_ns()
            try:
                op()
                ok, err = True, 0
            except OSError as e:
                ok, err = False, e.errno
            record.append((t0, time.monotonic_ns(), ok, err, kind))

    def run_storm(self, switcher, stop, record, ops):
        """Runs SWITCHER (a thread body that sets STOP on its way out, as switch_storm does)
        beside a thread per (KIND, OP) of OPS doing timed_calls into RECORD, and waits for
        all of them (run_threads)."""
        self.run_threads([threading.Thread(target=switcher)] +
                         [threading.Thread(target=self.timed_calls, args=(stop, record, k, op))
                          for k, op in ops])

    def run_threads(self, threads, deadline=240):
        """Starts THREADS and waits for each, DEADLINE seconds at the most (then fails)."""
        for t in threads:
            t.start()
        for t in threads:
            t.join(deadline)
            self.assertFalse(t.is_alive(), "a stress thread did not finish")

    # -- assertions ---------------------------------------------------------------------

    def assertErrno(self, err, fn, *args, **kw):
        """FN(*ARGS) must raise OSError with errno ERR (exactly)."""
        try:
            r = fn(*args, **kw)
        except OSError as e:
            self.assertEqual(e.errno, err, "%s%r: expected %s, got %s (%s)" %
                             (getattr(fn, "__name__", fn), args, errno.errorcode[err],
                              errno.errorcode.get(e.errno, e.errno), e))
            return e
        if fn is os.open and isinstance(r, int):
            os.close(r)  # an open descriptor would keep the view busy at unmount
        self.fail("%s%r succeeded, expected %s" % (getattr(fn, "__name__", fn), args,
                                                   errno.errorcode[err]))


class RpcClient:
    """A minimal JSON-RPC 2.0 client of the control socket (one JSON object per line)."""

    def __init__(self, path, timeout=60):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""
        self.next_id = 1

    def call(self, method, params=None):
        """The result of METHOD(PARAMS); RuntimeError when it answers an error."""
        id = self.next_id
        self.next_id += 1
        self.send(method, params, id)
        msg = self.reply(id)
        if "error" in msg:
            raise RuntimeError("%s: %s" % (method, msg["error"]))
        return msg.get("result")

    def send(self, method, params=None, id=None):
        """Sends one request without waiting for its answer (a notification when ID is
        None), as pipelined calls do."""
        req = {"jsonrpc": "2.0", "method": method}
        if id is not None:
            req["id"] = id
        if params is not None:
            req["params"] = params
        self.sock.sendall(json.dumps(req).encode() + b"\n")

    def reply(self, id):
        """Reads up to the message with ID and returns it whole (result or error); the
        messages before it (other replies, notifications) are dropped."""
        while True:
            while b"\n" not in self.buf:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise ConnectionError("control socket closed")
                self.buf += chunk
            line, _, self.buf = self.buf.partition(b"\n")
            msg = json.loads(line)
            if msg.get("id") == id:
                return msg

    def close(self):
        self.sock.close()
