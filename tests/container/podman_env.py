# SPDX-License-Identifier: MIT
"""Podman for the container suite's tests, with everything it keeps in the test's temp dir
(Python 3 stdlib only): its storage (vfs driver), run root and temp dir come from a
containers.conf and a storage.conf there (CONTAINERS_CONF, CONTAINERS_STORAGE_CONF), so a
test leaves nothing behind. No registry is reachable, so every image is built here.

That containers.conf also says what this kind of machine needs (docs/SECURITY.md, "In a
container"): root without CAP_SYS_RESOURCE cannot raise the open-files and processes limits
Podman asks for by default (the OCI runtime's setrlimit fails with EPERM), so the defaults
are set lower; and where cgroup v1 and v2 controllers are mixed ("hybrid"), crun refuses to
start ("cgroups in hybrid mode not supported"), so runc runs the container when installed.

preflight() exits 77 (skipped, with the reason) when not root, when podman or
busybox-static is missing, or when Podman cannot start a container here at all (its error
is printed). A module beside the tests that use it: a script's own directory is on
sys.path.
"""

import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

from harness import DEADLINE  # tests/lib, on PYTHONPATH

BUSYBOX = "/bin/busybox"
SKIP = 77


def mounts_under(top):
    """The mountpoints at or below TOP in this mount namespace."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].encode().decode("unicode_escape")
            if mp == top or mp.startswith(top + "/"):
                out.append(mp)
    return out


def skip(reason):
    print("SKIP: " + reason)
    sys.exit(SKIP)


class Podman:
    """Podman with its storage and state in DIR."""

    def __init__(self, top):
        self.top = top
        conf = os.path.join(top, "containers.conf")
        storage = os.path.join(top, "storage.conf")
        runtime = 'runtime = "runc"\n' if shutil.which("runc") else ""
        with open(conf, "w") as f:
            f.write('[containers]\n'
                    'default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n'
                    '[engine]\n'
                    'cgroup_manager = "cgroupfs"\n'
                    'events_logger = "file"\n'
                    'events_logfile_path = "%s/events.log"\n'
                    'tmp_dir = "%s/libpod-tmp"\n'
                    '%s'
                    '[network]\n'
                    'network_config_dir = "%s/net"\n' % (top, top, runtime, top))
        with open(storage, "w") as f:
            f.write('[storage]\n'
                    'driver = "vfs"\n'
                    'graphroot = "%s/graph"\n'
                    'runroot = "%s/runroot"\n' % (top, top))
        self.env = {"CONTAINERS_CONF": conf, "CONTAINERS_STORAGE_CONF": storage}

    def environ(self):
        """This process's environment with Podman's storage in the test's dir."""
        env = dict(os.environ)
        env.update(self.env)
        return env

    def __call__(self, *args, data=None, timeout=DEADLINE):
        return subprocess.run(["podman", *args], input=data, env=self.environ(),
                              capture_output=True, timeout=timeout)

    def teardown(self):
        """Removes every pod, container and volume, then detaches whatever is still
        mounted under the test's dir (deepest first)."""
        self("pod", "rm", "--all", "--force", "--time", "0")
        self("rm", "--all", "--force", "--time", "0")
        self("volume", "rm", "--all", "--force")
        for mp in sorted(mounts_under(self.top), reverse=True):
            subprocess.run(["umount", "-l", mp], stderr=subprocess.DEVNULL)


def preflight():
    """Skips (exit 77, with the reason) where Podman cannot run a container."""
    if os.geteuid() != 0:
        skip("needs root: the test runs rootful Podman (the view's FUSE mount admits its "
             "mounting user, who makes the bind)")
    if not shutil.which("podman"):
        skip("podman is not installed (scripts/setup installs it)")
    if not os.access(BUSYBOX, os.X_OK):
        skip("%s is missing (busybox-static; scripts/setup installs it)" % BUSYBOX)
    # Can Podman start a container here at all? Its error is the reason.
    top = tempfile.mkdtemp(prefix="pw-podman-probe-")
    podman = Podman(top)
    try:
        with open(BUSYBOX, "rb") as f:
            data = f.read()
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            ti = tarfile.TarInfo("true")
            ti.size, ti.mode = len(data), 0o755
            tar.addfile(ti, io.BytesIO(data))
        p = podman("import", "-", "localhost/piworkfs-probe:1", data=buf.getvalue())
        if p.returncode == 0:
            p = podman("run", "--rm", "--network=none", "localhost/piworkfs-probe:1", "/true")
        if p.returncode != 0:
            skip("podman cannot run a container here: " + p.stderr.decode().strip())
    finally:
        podman.teardown()
        shutil.rmtree(top, ignore_errors=True)
