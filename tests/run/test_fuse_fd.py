# SPDX-License-Identifier: MIT
"""`piworkfs mount --fuse-fd N`: a view served on a FUSE connection that another process
opened and mounted, the step the FUSE CSI driver pattern needs (docs/DEPLOY.md).

A small privileged helper (fuse_fd_mounter.py) opens /dev/fuse, mounts it with mount(2),
and sends the descriptor over a Unix socket (SCM_RIGHTS); the test, in the place of the
unprivileged server's launcher, receives it and starts piworkfs with it. The view must
serve, enforce its mode and switch modes as a view piworkfs mounted itself; piworkfs must
never mount or unmount it; bad descriptors get one line and exit 3.
"""

import errno
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import unittest

import harness  # noqa: E402

MOUNTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuse_fd_mounter.py")
MNT_DETACH = 2
harness._libc.umount2.argtypes = [harness.ctypes.c_char_p, harness.ctypes.c_int]


def umount2(path, flags=0):
    if harness._libc.umount2(os.fsencode(path), flags) != 0:
        e = harness.ctypes.get_errno()
        raise OSError(e, os.strerror(e), path)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie of ours would still answer: the daemonized view is not our child, though.
    return True


class FuseFd(harness.MountCase):

    def setUp(self):
        super().setUp()
        # Whatever a test leaves, the mount made by the helper goes (piworkfs never
        # unmounts it; the harness's sweep would call a left mount a failure).
        self.addCleanup(self._detach_helper_mount)
        self.daemon_pids = []
        self.addCleanup(self._kill_daemons)

    def _detach_helper_mount(self):
        while harness.mount_entries(self.mp):
            try:
                umount2(self.mp, MNT_DETACH)
            except OSError:
                break

    def _kill_daemons(self):
        for pid in self.daemon_pids:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)

    def receive_mounted_fd(self, extra_options="", owner=()):
        """Runs the privileged helper and receives the descriptor it mounted at self.mp over
        a Unix socket, as an unprivileged server would; OWNER is (uid, gid) of the mount's
        user_id and group_id (default: ours). Returns the descriptor (ours)."""
        self.handoffs = getattr(self, "handoffs", 0) + 1
        sock_path = os.path.join(self.tmp, "handoff-%d.sock" % self.handoffs)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as srv:
            srv.bind(sock_path)
            srv.listen(1)
            srv.settimeout(harness.DEADLINE)
            helper = subprocess.Popen([sys.executable, MOUNTER, self.project, self.mp,
                                       sock_path, extra_options] +
                                      [str(i) for i in owner],
                                      stderr=subprocess.PIPE, text=True)
            try:
                conn, _ = srv.accept()
            except socket.timeout:
                helper.kill()
                self.fail("the helper did not connect: %s" % helper.communicate()[1])
            with conn:
                _, fds, _, _ = socket.recv_fds(conn, 16, 1)
        _, err = helper.communicate(timeout=harness.DEADLINE)
        self.assertEqual(helper.returncode, 0, err)
        self.assertEqual(len(fds), 1)
        self.assertEqual(harness.mounts_at(self.mp), ["fuse.piworkfs"])
        return fds[0]

    def start_view(self, fd, *args, state_db=None, preexec_fn=None):
        """`piworkfs mount -f --fuse-fd FD ...` with FD inherited (PREEXEC_FN runs in the
        child first); our copy is closed, so the connection is the daemon's alone. Returns
        the View once it serves."""
        log_path = os.path.join(self.tmp, "daemon-%d.log" % len(self.views))
        argv = [harness.PIWORKFS, "mount", "-f", "--state-db", state_db or self.state_db,
                "--fuse-fd", str(fd)] + list(args) + [self.project, self.mp]
        with open(log_path, "wb") as logf:
            proc = subprocess.Popen(argv, cwd=self.cwd, env=self.env, pass_fds=(fd,),
                                    stdin=subprocess.DEVNULL, stdout=logf,
                                    stderr=subprocess.STDOUT, preexec_fn=preexec_fn)
        os.close(fd)
        v = harness.View(self, proc, self.mp, log_path)
        self.views.append(v)
        self.addCleanup(self._teardown_view, v)
        ok = harness.wait_until(lambda: "piworkfs: serving " in v.log() or
                                proc.poll() is not None, harness.MOUNT_DEADLINE)
        self.assertTrue(ok and proc.poll() is None,
                        "the view did not serve (exit %s)\n%s" % (proc.poll(), v.log()))
        return self.wait_answering(v)

    def start_detached(self, fd, *args):
        """`piworkfs mount --json --fuse-fd FD ...` detached (no -f), as a sidecar would
        start it, with FD inherited and our copy closed. Returns what it printed (pid,
        mode...); the daemon's pid is in self.daemon_pids."""
        p = subprocess.run([harness.PIWORKFS, "mount", "--json", "--state-db", self.state_db]
                           + list(args) + ["--fuse-fd", str(fd), self.project, self.mp],
                           cwd=self.cwd, env=self.env, pass_fds=(fd,), capture_output=True,
                           text=True, timeout=120)
        os.close(fd)
        self.assertEqual(p.returncode, 0, p.stderr)
        started = json.loads(p.stdout)
        self.daemon_pids.append(started["pid"])
        return started

    @staticmethod
    def dev_fuse_flags(pid):
        """{descriptor: open flags} of process PID's descriptors of /dev/fuse."""
        out = {}
        for name in os.listdir("/proc/%d/fd" % pid):
            try:
                if os.readlink("/proc/%d/fd/%s" % (pid, name)) != "/dev/fuse":
                    continue
                with open("/proc/%d/fdinfo/%s" % (pid, name)) as f:
                    for line in f:
                        if line.startswith("flags:"):
                            out[int(name)] = int(line.split()[1], 8)
            except FileNotFoundError:
                continue  # a worker's descriptor closed meanwhile
        return out

    def status(self, v):
        p = self.run_pw("status", "--json")
        self.assertIn(p.returncode, (0, 4), p.stderr)
        rows = [s for s in json.loads(p.stdout) if s.get("mountpoint") == v.mp]
        self.assertEqual(len(rows), 1, p.stdout)
        return rows[0]

    # -- the tests ------------------------------------------------------------------------

    def test_serves_enforces_and_switches_a_view_mounted_by_a_helper(self):
        fd = self.receive_mounted_fd()
        # A wrong name is refused without touching the connection (nor the mount, which
        # would hang until served): the right one then serves it.
        other = os.path.join(self.tmp, "elsewhere")
        p = subprocess.run([harness.PIWORKFS, "mount", "-f", "--state-db", self.state_db,
                            "--fuse-fd", str(fd), self.project, other], cwd=self.cwd,
                           env=self.env, pass_fds=(fd,), capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("is not mounted: with --fuse-fd, name where the descriptor is mounted",
                      p.stderr)
        v = self.start_view(fd, "--mode", "plan")

        # It serves, and in its mode: a read works, a write plan does not allow is refused.
        with open(v.path("src/a.c")) as f:
            self.assertEqual(f.read(), harness.STANDARD_TREE["src/a.c"])
        self.assertErrno(errno.EROFS, os.open, v.path("src/a.c"), os.O_WRONLY | os.O_TRUNC)
        self.assertErrno(errno.EROFS, os.open, v.path("src/new.c"),
                         os.O_WRONLY | os.O_CREAT, 0o644)
        st = self.status(v)
        self.assertEqual(st["mode"], "plan")
        self.assertEqual(st["project"], self.project)
        self.assertEqual(st["transport"]["name"], "io_uring" if harness.OVER_URING
                         else "/dev/fuse")
        # No program the view starts inherits the connection (it could answer the kernel in
        # the daemon's place): every /dev/fuse descriptor of the daemon is close-on-exec.
        fuse_fds = self.dev_fuse_flags(v.pid)
        self.assertTrue(fuse_fds)
        for n, flags in fuse_fds.items():
            self.assertTrue(flags & 0o2000000, "descriptor %d of the daemon is /dev/fuse "
                            "without O_CLOEXEC (flags %o)" % (n, flags))

        # A mode switch applies to the view.
        self.set_mode(v, "build")
        with open(v.path("src/new.c"), "w") as f:
            f.write("int n;\n")
        with open(os.path.join(self.project, "src/new.c")) as f:
            self.assertEqual(f.read(), "int n;\n")
        self.set_mode(v, "plan")
        self.assertErrno(errno.EROFS, os.open, v.path("src/new.c"), os.O_WRONLY | os.O_TRUNC)

        # `piworkfs umount` unmounts it (the caller may: root here) and the daemon ends.
        p = self.run_pw("umount", self.mp)
        self.assertEqual(p.returncode, 0, p.stderr + v.log())
        self.assertEqual(self.wait_daemon_exit(v), 0, v.log())
        v.unmounted = True
        self.assertEqual(harness.mounts_at(self.mp), [])
        self.assertIn("stopped serving %s (its mount is left to the process that made it)"
                      % self.mp, v.log())

    def test_daemon_leaves_the_mount_to_its_maker(self):
        # Detached (no -f), as a sidecar would start it.
        pid = self.start_detached(self.receive_mounted_fd(), "--mode", "plan")["pid"]
        with open(os.path.join(self.mp, "docs/x.md")) as f:
            self.assertEqual(f.read(), "# x\n")
        # A daemon that dies does not unmount: its connection ends with its descriptor and
        # the mount answers ENOTCONN until its maker (or `piworkfs umount`) detaches it.
        os.kill(pid, signal.SIGKILL)
        self.assertTrue(harness.wait_until(lambda: not pid_alive(pid), harness.DEADLINE))
        self.assertEqual(harness.mounts_at(self.mp), ["fuse.piworkfs"])
        # (The root's attributes stay cached; a listing needs the connection.)
        self.assertErrno(errno.ENOTCONN, os.listdir, self.mp)
        p = self.run_pw("umount", self.mp)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(harness.mounts_at(self.mp), [])

        # And the maker unmounting a live view ends its daemon, which never tries to
        # unmount it again.
        started = self.start_detached(self.receive_mounted_fd())
        pid = started["pid"]
        self.assertEqual(started["mode"], "plan")  # the last mode, restored
        umount2(self.mp)
        self.assertTrue(harness.wait_until(lambda: not pid_alive(pid), harness.DEADLINE),
                        "the daemon did not end when its connection did")

    def test_an_allow_other_mount_serves_each_caller_as_themselves(self):
        # A mount the maker made for several users (allow_other with the kernel's
        # permission check) is served as the view's own -o allow_other is: each caller
        # acts with their own credentials.
        nobody = pwd.getpwnam("nobody")
        os.chmod(self.tmp, 0o755)  # nobody must reach the mountpoint
        shared = os.path.join(self.project, "shared")
        os.makedirs(shared)
        os.chmod(shared, 0o1777)
        fd = self.receive_mounted_fd("allow_other,default_permissions")
        v = self.start_view(fd, "--mode", "build")

        def drop():
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
        python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) \
            else sys.executable
        code = ("import errno\n"
                "open(%r, 'w').write('mine')\n"
                "try:\n"
                "    open(%r, 'a')\n"
                "    print('wrote root file')\n"
                "except OSError as e:\n"
                "    print(errno.errorcode[e.errno])\n"
                % (v.path("shared/n.txt"), v.path("src/a.c")))
        p = subprocess.run([python, "-c", code], preexec_fn=drop, capture_output=True,
                           text=True, timeout=60, cwd="/")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr + v.log())
        self.assertIn("EACCES", p.stdout)
        st = os.stat(os.path.join(shared, "n.txt"))
        self.assertEqual((st.st_uid, st.st_gid), (nobody.pw_uid, nobody.pw_gid))

    def test_an_unprivileged_server_that_cannot_open_dev_fuse(self):
        # The pattern's point: the server is not root, and here may not open /dev/fuse
        # (0600 root on this machine; its workers then share the one descriptor).
        nobody = pwd.getpwnam("nobody")
        ids = (nobody.pw_uid, nobody.pw_gid)

        def drop():
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
        os.chmod(self.tmp, 0o755)
        state = os.path.join(self.tmp, "nobody-state")
        os.makedirs(state)
        for d in [self.project, self.runtime, state, self.env["HOME"]]:
            for root, dirs, files in os.walk(d):
                for name in [root] + [os.path.join(root, n) for n in dirs + files]:
                    os.lchown(name, *ids)
        fd = self.receive_mounted_fd(owner=ids)  # user_id=nobody: only nobody may enter
        v = self.start_view(fd, "--mode", "plan", state_db=os.path.join(state, "state.db"),
                            preexec_fn=drop)
        self.assertNotIn("failed to open /dev/fuse", v.log())

        python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) \
            else sys.executable
        env = dict(self.env, PIWORKFS=harness.PIWORKFS)
        code = ("import errno, os, subprocess\n"
                "print(open(%(a)r).read() == %(text)r)\n"
                "try:\n"
                "    open(%(a)r, 'w')\n"
                "except OSError as e:\n"
                "    print(errno.errorcode[e.errno])\n"
                "subprocess.run([os.environ['PIWORKFS'], 'mode', '--mount', %(mp)r, 'build'],"
                " check=True, stdout=subprocess.DEVNULL)\n"
                "open(%(new)r, 'w').write('n')\n"
                "print('written')\n"
                % {"a": v.path("src/a.c"), "text": harness.STANDARD_TREE["src/a.c"],
                   "mp": self.mp, "new": v.path("src/new.c")})
        p = subprocess.run([python, "-c", code], preexec_fn=drop, env=env, cwd="/",
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr + v.log())
        self.assertEqual(p.stdout.split(), ["True", "EROFS", "written"], p.stderr + v.log())
        st = os.stat(os.path.join(self.project, "src/new.c"))
        self.assertEqual((st.st_uid, st.st_gid), ids)

    def test_bad_descriptors_are_refused(self):
        def mount_fd(fd, *extra, pass_fds=()):
            return subprocess.run([harness.PIWORKFS, "mount", "-f", "--state-db",
                                   self.state_db, "--fuse-fd", str(fd)] + list(extra) +
                                  [self.project, self.mp], cwd=self.cwd, env=self.env,
                                  pass_fds=pass_fds, capture_output=True, text=True,
                                  timeout=60)

        p = mount_fd("three")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--fuse-fd: not a file descriptor number: 'three'", p.stderr)
        p = mount_fd(250)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("--fuse-fd 250: not an open descriptor", p.stderr)
        r, w = os.pipe()
        self.addCleanup(os.close, r)
        self.addCleanup(os.close, w)
        p = mount_fd(r, pass_fds=(r,))
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("--fuse-fd %d is not /dev/fuse (it is pipe:" % r, p.stderr)
        unmounted = os.open("/dev/fuse", os.O_RDWR)
        self.addCleanup(os.close, unmounted)
        p = mount_fd(unmounted, pass_fds=(unmounted,))
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("this /dev/fuse is not mounted", p.stderr)
        # The mount's own options are the mounter's to choose.
        p = mount_fd(unmounted, "-o", "allow_other", pass_fds=(unmounted,))
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("-o allow_other is an option of the mount", p.stderr)
        # allow_other without the kernel's permission check would open everyone's
        # FIFOs and sockets to every user.
        fd = self.receive_mounted_fd("allow_other")
        self.addCleanup(os.close, fd)
        p = mount_fd(fd, pass_fds=(fd,))
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("has allow_other without default_permissions", p.stderr)
        self.assertEqual(harness.mounts_at(self.mp), ["fuse.piworkfs"])  # left alone


if __name__ == "__main__":
    unittest.main(verbosity=2)
