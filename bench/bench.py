#!/usr/bin/env python3
"""piworkfs benchmark.

Builds the peers at bench time (libfuse's passthrough.c with its cache timeouts raised and
-o kernel_cache, passthrough_ll.c, and Debian's bindfs --multithreaded), makes one test tree,
mounts every system over it, and runs each workload in interleaved rounds: round 1 runs the
workload on every system, then round 2, and so on, so a noisy neighbour hurts all systems
alike. Prints the median per workload and system and the ratio to native.

Beside the times, figures that mean something on any machine: the requests each piworkfs
view received per file of the workload, and every daemon's own CPU time (its process CPU
clock, in ns, before and after each run) per run and, for the views, per request. A peer
that serves stale data (a file changed on the backing tree, then read through the peer, does
not match native) is marked: its speed comes from not asking and is not comparable. So is a
system whose result is wrong (VERIFY: a tar x that loses the tarball's file times), on that
workload: marked (wrong), timed, and no coherent peer there.

Before and after: `--baseline REV` builds piworkfs at REV (a commit of the repository this
file belongs to) in a git worktree under the work directory, removes the worktree again, and
mounts that build as one more peer, "piworkfs@REV" (REV's short commit id; and "piworkfs@REV
io_uring" beside the io_uring view), with the same options as the current build. It runs in
the same interleaved rounds over the same tree, so on a noisy machine the two builds share
the noise; a closing table puts them side by side per workload: ratio to native, floor,
measured / floor, requests per file and the daemon's CPU per request.
    ./dev bench --baseline 26477bf              # this tree's build against commit 26477bf
    ./dev bench --files 2000 --rounds 1 --baseline HEAD~5 --switch-files 0   # a quick check
`--variant NAME=VAR=VALUE[,VAR=VALUE]` does the same for a knob of the current build: it
mounts the build again as "piworkfs NAME" over /dev/fuse with those variables in its daemon's
environment (the serving threads' PIWORKFS_WORKERS, PIWORKFS_WORKER_SCHED, PIWORKFS_SPLICE...).
    ./dev bench --no-uring --variant "before=PIWORKFS_WORKERS=16,PIWORKFS_WORKER_SCHED=normal"

Speed is reported, never asserted: these are figures for people, not a test.
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

EXAMPLES = "/usr/share/doc/libfuse3-dev/examples"
# The author and committer of the trees' commits (the machine may have none configured).
GIT_ENV = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@x", GIT_COMMITTER_NAME="b",
               GIT_COMMITTER_EMAIL="b@x")


def sh(cmd, cwd=None, check=True, quiet=True, env=None):
    out = subprocess.DEVNULL if quiet else None
    return subprocess.run(cmd, cwd=cwd, shell=isinstance(cmd, str), check=check,
                          stdout=out, stderr=out, env=env)


def build_peers(out):
    os.makedirs(out, exist_ok=True)
    cflags = subprocess.check_output(["pkg-config", "--cflags", "--libs", "fuse3"], text=True).split()
    src = open(os.path.join(EXAMPLES, "passthrough.c")).read()
    # passthrough.c overrides -o entry_timeout/attr_timeout in its init: raise them here so
    # the high-level peer runs as the fastest configuration measured on this machine.
    for key in ("entry_timeout", "attr_timeout", "negative_timeout"):
        src = src.replace(f"cfg->{key} = 0;", f"cfg->{key} = 86400;")
    hl = os.path.join(out, "passthrough_hl.c")
    with open(hl, "w") as f:
        f.write(src)
    shutil.copy(os.path.join(EXAMPLES, "passthrough_helpers.h"), out)
    sh(["cc", "-O2", "-o", os.path.join(out, "passthrough_hl"), hl] + cflags)
    sh(["cc", "-O2", "-o", os.path.join(out, "passthrough_ll"),
        os.path.join(EXAMPLES, "passthrough_ll.c")] + cflags)


def make_tree(root, nfiles, seed=1):
    """A git work tree of NFILES small source-like files in nested directories, committed."""
    rnd = random.Random(seed)
    os.makedirs(root)
    per_dir = 40
    ndirs = max(1, nfiles // per_dir)
    words = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma".split()
    made = 0
    for d in range(ndirs):
        parts = [f"m{d % 13}", f"pkg{d % 97}", f"d{d}"]
        dpath = os.path.join(root, *parts)
        os.makedirs(dpath, exist_ok=True)
        for i in range(per_dir):
            if made >= nfiles:
                break
            body = "\n".join(" ".join(rnd.choice(words) for _ in range(8)) for _ in range(20))
            with open(os.path.join(dpath, f"f{i}.c"), "w") as f:
                f.write(f"/* file {made} */\n{body}\n")
            made += 1
    commit_tree(root)


def commit_tree(root):
    """ROOT made a git repository with everything in it committed once."""
    sh(["git", "init", "-q"], cwd=root)
    # No automatic gc: after the commit of 50,000 loose objects git would start a background
    # repack that rewrites .git/objects while the workloads run (find and grep then fail with
    # ENOENT, and every system is timed against a moving tree).
    sh(["git", "config", "gc.auto", "0"], cwd=root)
    sh(["git", "add", "-A"], cwd=root, env=GIT_ENV)
    sh(["git", "commit", "-qm", "tree"], cwd=root, env=GIT_ENV)


def make_c_project(root, nunits=40):
    os.makedirs(os.path.join(root, "src"))
    objs = []
    for i in range(nunits):
        with open(os.path.join(root, "src", f"u{i}.c"), "w") as f:
            f.write(f"int f{i}(int x) {{ int s = 0; for (int k = 0; k < x; k++) s += k * {i}; return s; }}\n")
        objs.append(f"src/u{i}.o")
    with open(os.path.join(root, "src", "main.c"), "w") as f:
        f.write("int f0(int);\nint main(void) { return f0(3) == 0 ? 0 : 1; }\n")
    with open(os.path.join(root, "Makefile"), "w") as f:
        f.write(f"CFLAGS=-O2\nprog: src/main.o {' '.join(objs)}\n\t$(CC) -o $@ $^\n"
                "clean:\n\trm -f prog src/*.o\n")


class System:
    pw, floor, uring = None, False, False  # see Fuse

    def __init__(self, name, root):
        self.name, self.root, self.proc = name, root, None

    def start(self):
        pass

    def stop(self):
        pass


class Native(System):
    pass


class Fuse(System):
    """A FUSE peer. For a piworkfs view, PW is the piworkfs program that mounted it (its
    `status` reads the view's request counts), FLOOR says whether the floor and the
    before/after tables report it, URING whether it must serve through the ring."""

    def __init__(self, name, backing, mnt, argv, env=None, pw=None, floor=False, uring=False):
        super().__init__(name, mnt)
        self.backing, self.argv, self.env = backing, argv, env
        self.pw, self.floor, self.uring = pw, floor, uring

    def start(self):
        os.makedirs(self.root, exist_ok=True)
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL,
                                     stderr=open(self.root + ".log", "w"), env=self.env)
        deadline = time.time() + 20
        while time.time() < deadline:
            if os.path.ismount(self.root):
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: see {self.root}.log")
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not mount")

    def stop(self):
        subprocess.run(["fusermount3", "-u", self.root], stderr=subprocess.DEVNULL)
        if self.proc:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                subprocess.run(["fusermount3", "-uz", self.root], stderr=subprocess.DEVNULL)


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def drop_output(cmd, cwd):
    """Runs CMD under bash with pipefail; a failing workload raises (a peer that hits EMFILE
    must not look fast)."""
    p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=cwd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"`{cmd}` exited {p.returncode}: {p.stderr.strip()[:200]}")


# Workloads: name -> (setup(system_root, scratch), run(system_root, scratch), writes?)
def w_git_status(root, scratch):
    drop_output("git status --porcelain", os.path.join(root, "tree"))


def w_find(root, scratch):
    drop_output("find . -type f | wc -l", os.path.join(root, "tree"))


def w_grep(root, scratch):
    drop_output("grep -r -l zzzz_not_there . ; test $? -eq 1", os.path.join(root, "tree"))


def w_rg(root, scratch):
    # ripgrep, the search agents and Pi's search tools use: several threads, so several
    # requests in flight at once (grep -r has one).
    drop_output("rg -l zzzz_not_there . ; test $? -eq 1", os.path.join(root, "tree"))


def w_lslR(root, scratch):
    drop_output("ls -lR . > /dev/null", os.path.join(root, "tree"))


def w_lslR_cold(root, scratch):
    # The same listing after the kernel forgot every name (see PREPARE): each directory is
    # read through READDIRPLUS again and every entry is made anew, which the warm listing
    # (answered from the kernel's caches) never asks of a daemon.
    w_lslR(root, scratch)


def w_read1g(root, scratch):
    # A file no workload writes: writes through the other systems would (rightly) make
    # every view drop its cached pages, and the figure is meant to be the warm read.
    drop_output("cat read.bin > /dev/null", os.path.join(root, "io"))


def w_write1g(root, scratch):
    # Overwrite an already cached file, one per system (perf-notes: the steadier write
    # test on these VMs).
    name = "write-" + scratch.split("-", 1)[-1] + ".bin"
    drop_output(f"dd if=/dev/zero of={name} bs=1M count=1024 conv=notrunc 2>/dev/null",
                os.path.join(root, "io"))


def create_delete(d, count):
    os.makedirs(d, exist_ok=True)
    for i in range(count):
        with open(os.path.join(d, f"n{i}"), "w") as f:
            f.write("x")
    for i in range(count):
        os.unlink(os.path.join(d, f"n{i}"))
    os.rmdir(d)


def w_create_delete(root, scratch):
    create_delete(os.path.join(root, "scratch", scratch), 5000)


def in_workers(n, fn):
    """Runs FN(k) for k in 0..N-1 in N processes at once (fork); raises if one fails."""
    pids = []
    for k in range(n):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                fn(k)
            except BaseException:  # noqa: BLE001  (reported by the exit status)
                code = 1
            os._exit(code)
        pids.append(pid)
    failed = [pid for pid in pids if os.waitpid(pid, 0)[1] != 0]
    if failed:
        raise RuntimeError(f"{len(failed)} of {n} workers failed")


def w_create_delete_par(n):
    """The same 5,000 creates and deletes shared by N workers, each in a directory of its
    own: the same work as create+delete 5k, so the times compare as throughputs."""
    def run(root, scratch):
        in_workers(n, lambda k: create_delete(
            os.path.join(root, "scratch", f"{scratch}-w{k}"), 5000 // n))
    return run


def w_rg_threads(n):
    def run(root, scratch):
        drop_output(f"rg -j{n} -l zzzz_not_there . ; test $? -eq 1", os.path.join(root, "tree"))
    return run


TARBALL = None  # set in main: 5,000 small files, made once per work directory


def w_tar_x(root, scratch):
    d = os.path.join(root, "scratch", "tar-" + scratch)
    os.makedirs(d)
    # As a user unpacks (root would also chown and chmod every file: two SETATTRs more).
    drop_output(f"tar xf {TARBALL} --no-same-owner --no-same-permissions", d)


def c_tar_x(root, scratch):
    shutil.rmtree(os.path.join(root, "scratch", "tar-" + scratch))


TAR_MTIME = 1000000000  # every file's time in the tarball (2001-09-09), which tar x sets


def v_tar_x(root, scratch):
    """What tar x must leave: each file with the time the tarball gives it. A system that
    drops the SETATTR of its times (bindfs --multithreaded does) saves a system call a file
    and unpacks a tree that is not the tarball's. None when right, else what is wrong."""
    d = os.path.join(root, "scratch", "tar-" + scratch, "x")
    for i in range(0, 5000, 499):
        p = os.path.join(d, f"d{i % 50}", f"f{i}.c")
        got = os.lstat(p).st_mtime
        if got != TAR_MTIME:
            return (f"tar's file times lost: x/d{i % 50}/f{i}.c has mtime "
                    f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(got))}, not "
                    f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(TAR_MTIME))}")
    return None


def make_tarball(path, n=5000):
    """A tarball of N small files in 50 directories (what an unpack or a checkout writes)."""
    src = path + ".d"
    for i in range(n):
        d = os.path.join(src, "x", f"d{i % 50}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i}.c"), "w") as f:
            f.write(f"int f{i};\n")
        os.utime(os.path.join(d, f"f{i}.c"), (TAR_MTIME, TAR_MTIME))
    drop_output(f"tar cf {path} x", src)
    shutil.rmtree(src)


def w_make(root, scratch):
    p = os.path.join(root, "cproj")
    drop_output("make -s clean && make -s -j2", p)


WORKLOADS = {
    "git status": (w_git_status, False),
    "find": (w_find, False),
    "grep -r": (w_grep, False),
    "rg": (w_rg, False),
    "ls -lR": (w_lslR, False),
    "ls -lR cold": (w_lslR_cold, False),
    "read 1 GiB": (w_read1g, False),
    "write 1 GiB": (w_write1g, True),
    "create+delete 5k": (w_create_delete, True),
    "tar x 5k": (w_tar_x, True),
    "make -j2": (w_make, True),
    # Concurrency: the same work by 1, 2 and 4 workers at once (create+delete 5k is the one
    # worker of its row); the throughput table compares each system's times with its own
    # single worker's.
    "create+delete 5k x2": (w_create_delete_par(2), True),
    "create+delete 5k x4": (w_create_delete_par(4), True),
    "rg -j1": (w_rg_threads(1), False),
    "rg -j2": (w_rg_threads(2), False),
    "rg -j4": (w_rg_threads(4), False),
}

# The concurrency rows: (label, [(workers, workload)]) for the throughput table.
CONCURRENCY = [
    ("create+delete 5k", [(1, "create+delete 5k"), (2, "create+delete 5k x2"),
                          (4, "create+delete 5k x4")]),
    ("rg", [(1, "rg -j1"), (2, "rg -j2"), (4, "rg -j4")]),
]
WORKERS = {w: n for _, rows in CONCURRENCY for n, w in rows}


# What a workload leaves behind, removed after its timing and its counts.
CLEANUP = {"tar x 5k": c_tar_x}
# What a workload must have done, checked after its timing (before its cleanup): a system
# whose result is wrong is marked (wrong) on that workload and is no coherent peer there.
VERIFY = {"tar x 5k": v_tar_x}


def drop_names(pid):
    """Make the kernel forget every unused name and inode (root only), then wait until the
    daemon PID has answered the FORGETs that sends, so that they fall outside the timing."""
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2")
    if not pid:
        return
    deadline = time.monotonic() + 10
    last = cpu_seconds(pid)
    while last is not None and time.monotonic() < deadline:
        time.sleep(0.05)
        now = cpu_seconds(pid)
        if now is None or now - last < 0.0005:
            return
        last = now


# What a workload needs first, untimed and uncounted: called with the system's daemon pid.
PREPARE = {"ls -lR cold": drop_names}


def piworkfs_env(base):
    env = dict(os.environ)
    env["XDG_RUNTIME_DIR"] = os.path.join(base, "run")
    env["PIWORKFS_STATE_DB"] = os.path.join(base, "state.db")
    env["XDG_CONFIG_HOME"] = os.path.join(base, "config")
    os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)
    return env


def workload_files(wname, nfiles, cproj_units=40):
    """The files a workload touches, for requests per file."""
    if wname in ("read 1 GiB", "write 1 GiB"):
        return 1
    if wname.startswith("create+delete 5k") or wname == "tar x 5k":
        return 5000
    if wname == "make -j2":
        return cproj_units + 1
    return nfiles


def cpu_seconds(pid):
    """CPU time of process PID in seconds (all its threads, those ended included), or None.

    Read from the process's CPU clock (clock_getcpuclockid(3), in ns): /proc/PID/stat's
    utime + stime are the same sum in clock ticks (10 ms), too coarse for a 50 ms run's CPU
    per request to mean anything."""
    try:
        # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) of the kernel's posix-timers.h
        return time.clock_gettime(((~pid) << 3) | 2)
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pw_daemon_pid(piworkfs, env, mountpoint):
    p = subprocess.run([piworkfs, "status", "--json"], env=env, capture_output=True, text=True)
    try:
        for v in json.loads(p.stdout):
            if v.get("mountpoint") == mountpoint:
                return v.get("pid")
    except ValueError:
        pass
    return None


PROBE = os.path.join("probe", "stale.txt")


def probe_stale(systems, backing, tag):
    """Reads a probe file through every system (so each caches it), changes it on the
    backing tree (new content of another size, a new mtime), reads it again through each,
    and returns the names of the systems that do not show the change: a stale cache."""
    path = os.path.join(backing, PROBE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(f"before {tag}\n")
    seen = lambda s: (open(os.path.join(s.root, PROBE), "rb").read(),  # noqa: E731
                      os.stat(os.path.join(s.root, PROBE)).st_size)
    for s in systems:
        try:
            seen(s)
        except OSError:
            pass
    time.sleep(0.01)  # a distinct mtime
    with open(path, "w") as f:
        f.write(f"after {tag}, longer than before\n")
    want = seen(systems[0])
    stale = set()
    # A fresh view learns of the change from inotify: give it a moment (a stale one stays
    # stale for its whole cache timeout, a day for the high-level peer).
    deadline = time.time() + 2
    for s in systems[1:]:
        while True:
            try:
                ok = seen(s) == want
            except OSError:
                ok = False
            if ok:
                break
            if time.time() >= deadline:
                stale.add(s.name)
                break
            time.sleep(0.05)
    return stale


URING = "piworkfs io_uring"
URING_PARAM = "/sys/module/fuse/parameters/enable_uring"


def enable_uring():
    """Turns the fuse module's enable_uring on for this run; returns the value to restore,
    or None when nothing was changed (already on, no such parameter, not root)."""
    try:
        with open(URING_PARAM) as f:
            old = f.read().strip()
    except OSError:
        print("FUSE over io_uring: this kernel has no enable_uring parameter", flush=True)
        return None
    if old == "Y":
        return None
    try:
        with open(URING_PARAM, "w") as f:
            f.write("Y")
    except OSError as e:
        print(f"FUSE over io_uring: cannot turn {URING_PARAM} on ({e.strerror})", flush=True)
        return None
    print(f"FUSE over io_uring: {URING_PARAM} turned on for the io_uring views' mounts",
          flush=True)
    return old


def restore_uring(old):
    """Puts back the parameter's value before enable_uring ("": nothing was changed)."""
    if old:
        with open(URING_PARAM, "w") as f:
            f.write(old)
        print(f"FUSE over io_uring: {URING_PARAM} put back to {old}", flush=True)


def wait_for_ring(s, deadline=20):
    """Makes requests in io_uring view S until one comes through its rings (the log says
    so), for at most DEADLINE seconds."""
    end = time.time() + deadline
    i = 0
    while time.time() < end:
        with open(s.root + ".log", errors="replace") as f:
            if "requests arrive through the ring" in f.read():
                return
        i += 1
        os.path.exists(os.path.join(s.root, f"ring-probe-{i}"))
        time.sleep(0.02)


# Requests the caller does not wait for: the kernel queues them and goes on.
ASYNC_OPS = {"RELEASE", "RELEASEDIR", "FORGET", "BATCH_FORGET", "INTERRUPT", "NOTIFY_REPLY"}


def pw_requests(piworkfs, env, mountpoint):
    """The view's request counts by opcode (`status --json`), or None."""
    p = subprocess.run([piworkfs, "status", "--json"], env=env, capture_output=True, text=True)
    try:
        views = json.loads(p.stdout)
    except ValueError:
        return None
    for v in views:
        if v.get("mountpoint") == mountpoint and "requests" in v:
            return v["requests"]["ops"]
    return None


def request_delta(before, after):
    """(all, synchronous, by opcode) requests between two counts."""
    if before is None or after is None:
        return None
    d = {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}
    return sum(d.values()), sum(n for k, n in d.items() if k not in ASYNC_OPS), d


def pw_transport(piworkfs, env, mountpoint):
    """The view's transport as `status --json` names it ("io_uring", "/dev/fuse"), or None
    from a build that does not say."""
    p = subprocess.run([piworkfs, "status", "--json"], env=env, capture_output=True, text=True)
    try:
        for v in json.loads(p.stdout):
            if v.get("mountpoint") == mountpoint:
                return (v.get("transport") or {}).get("name")
    except ValueError:
        pass
    return None


def copy_tree(src, dst):
    """A real source tree for the workloads: SRC copied to DST (regular files, directories
    and symlinks as they are) and committed to git, as the synthetic tree is."""
    drop_output(f"cp -a {src} {dst}", "/")
    commit_tree(dst)
    return sum(len(fs) for d, _, fs in os.walk(dst) if "/.git" not in d + "/")


def round_trip(path, n=2000):
    """Mean cost of one GETXATTR at PATH over N: through a view it is one request answered
    from the daemon's memory, i.e. the pure round trip; natively it is the syscall."""
    t = time.perf_counter()
    for _ in range(n):
        try:
            os.getxattr(path, "user.piworkfs-bench-rtt")
        except OSError:
            pass
    return (time.perf_counter() - t) / n


def git(top, *argv):
    return subprocess.run(["git", "-C", top] + list(argv), check=True, capture_output=True,
                          text=True).stdout.strip()


def run_logged(argv, what):
    """Runs ARGV quietly; on failure exits with the command's last lines of output."""
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        tail = "\n".join(p.stdout.strip().splitlines()[-15:])
        sys.exit(f"{what} failed ({' '.join(argv)}):\n{tail}")


def remove_worktree(top, src):
    link = os.path.join(src, "third_party")
    if os.path.islink(link):
        os.unlink(link)  # never let a removal follow it into the main tree's third_party/
    subprocess.run(["git", "-C", top, "worktree", "remove", "--force", src],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shutil.rmtree(src, ignore_errors=True)


def build_baseline(rev, base):
    """Builds piworkfs at REV for the before/after peer. REV is a commit of the repository
    this file belongs to; the work tree there is never touched: a detached worktree is added
    under BASE, third_party/ (git-ignored, fetched by scripts/setup) is linked into it from
    this tree, meson and ninja build beside it (without the tests), the bundled modes are
    copied out, and the worktree is removed again. The build directory stays, so a rerun
    with --dir reuses it. Returns (program, modes directory, short commit id)."""
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        sha = git(top, "rev-parse", "--verify", "--quiet", rev + "^{commit}")
    except subprocess.CalledProcessError:
        sys.exit(f"--baseline {rev}: not a commit of the repository at {top}")
    short = git(top, "rev-parse", "--short", sha)
    out = os.path.join(base, f"baseline-{short}")
    build = os.path.join(out, "build")
    program = os.path.join(build, "cli", "piworkfs")
    modes = os.path.join(out, "modes")
    if os.access(program, os.X_OK) and os.path.isdir(modes):
        print(f"baseline {short}: reusing {program}", flush=True)
        return program, modes, short
    third_party = os.path.join(top, "third_party")
    if not os.path.isdir(third_party):
        sys.exit(f"--baseline: {third_party} is missing: run scripts/setup first")
    src = os.path.join(out, "src")
    if os.path.exists(src):  # left by an interrupted run
        remove_worktree(top, src)
    print(f"baseline {short}: building it in {out} (a worktree, removed after the build)...",
          flush=True)
    os.makedirs(out, exist_ok=True)
    git(top, "worktree", "add", "--detach", "--quiet", src, sha)
    try:
        os.symlink(third_party, os.path.join(src, "third_party"))
        opts = []
        try:
            with open(os.path.join(src, "meson_options.txt")) as f:
                if "option('tests'" in f.read():
                    opts.append("-Dtests=false")  # the daemon and the program only
        except OSError:
            pass
        shutil.rmtree(build, ignore_errors=True)
        run_logged(["meson", "setup", build, src] + opts, f"baseline {short}: meson setup")
        run_logged(["ninja", "-C", build, "cli/piworkfs"], f"baseline {short}: ninja")
        shutil.copytree(os.path.join(src, "modes"), modes, dirs_exist_ok=True)
    finally:
        remove_worktree(top, src)
    return program, modes, short


def measure_switch(args, base, nfiles):
    """Median mode.set round trip with NFILES inodes known to the kernel."""
    tree = os.path.join(base, "switch-tree")
    if not os.path.exists(tree):
        print(f"  making a {nfiles}-file tree for the switch test...", flush=True)
        make_tree(tree, nfiles, seed=2)
    mnt = os.path.join(base, "switch-view")
    env = piworkfs_env(base)
    if args.modes:
        env["PIWORKFS_MODES_DIR"] = os.path.abspath(args.modes)  # the daemon's cwd is /
    s = Fuse("piworkfs", tree, mnt, [args.piworkfs, "mount", "-f", "--mode", "build", tree, mnt], env)
    s.start()
    try:
        drop_output("find . > /dev/null", mnt)
        # The socket is named after the mountpoint (docs/PROTOCOL.md); this run's is the
        # only one for switch-view in its private runtime dir.
        import glob
        socks = glob.glob(os.path.join(env["XDG_RUNTIME_DIR"], "piworkfs", "switch-view-*.sock"))
        if not socks:
            return None
        path = socks[0]
        c = socket.socket(socket.AF_UNIX)
        c.connect(path)
        f = c.makefile("rwb")
        times = []
        for i in range(200):
            mode = "plan" if i % 2 == 0 else "build"
            req = json.dumps({"jsonrpc": "2.0", "id": i, "method": "mode.set", "params": {"mode": mode}})
            t = time.perf_counter()
            f.write(req.encode() + b"\n")
            f.flush()
            line = f.readline()
            times.append(time.perf_counter() - t)
            if b'"error"' in line:
                print("  mode.set error:", line[:200])
                return None
        f.write(b'{"jsonrpc":"2.0","id":"s","method":"status"}\n')
        f.flush()
        st = json.loads(f.readline()).get("result", {})
        c.close()
        inodes = st.get("inodes", st.get("fs", {}).get("inodes") if isinstance(st.get("fs"), dict) else None)
        return statistics.median(times), max(times), inodes
    finally:
        s.stop()


def before_after(before, after, table, rtt, workloads, label):
    """Prints, as a markdown table, BEFORE's and AFTER's figures side by side per workload:
    ratio to native, the floor (ratio to native), measured / floor, requests per file and
    the daemon's CPU per request."""
    def cells(w, n):
        c = table.get(w, {}).get(n, {})
        nat = table.get(w, {}).get("native", {}).get("median_s")
        if "median_s" not in c or not nat:
            return ["n/a"] * 5
        floor = c.get("floor_s")
        rpf, cpu = c.get("requests_per_file"), c.get("cpu_us_per_request")
        return [f"{c['ratio']:.2f}x",
                f"{floor / nat:.2f}x" if floor else "-",
                f"{c['median_s'] / floor:.2f}" if floor else "-",
                f"{rpf:.2f}" if rpf is not None else "-",
                f"{cpu:.1f}" if cpu is not None else "-"]

    rt = lambda n: f"{rtt[n] * 1e6:.1f} us" if n in rtt else "n/a"  # noqa: E731
    print()
    print(f"Before: {label(before)} (round trip {rt(before)}); after: {label(after)} (round trip "
          f"{rt(after)}); native {rt('native')}. Ratios to native; floor = native + synchronous "
          "requests x round trip; CPU = the daemon's per request, us")
    cols = ["x native", "floor", "/ floor", "req/file", "CPU/req"]
    print("| workload | native | " + " | ".join(f"before {c}" for c in cols) + " | "
          + " | ".join(f"after {c}" for c in cols) + " |")
    print("|---|---:|" + "---:|" * (2 * len(cols)))
    for w in workloads:
        nat = table.get(w, {}).get("native", {}).get("median_s")
        print(f"| {w} | " + (f"{nat:.3f}s" if nat else "n/a") + " | "
              + " | ".join(cells(w, before) + cells(w, after)) + " |")


def coherent_peers(systems, table, wname, stale, wrong):
    """The peers (FUSE systems other than piworkfs) that served WNAME, are not stale and did
    WNAME's work right."""
    return [s.name for s in systems if s.name != "native" and not s.pw and s.name not in stale
            and (s.name, wname) not in wrong and "ratio" in table.get(wname, {}).get(s.name, {})]


def summary(systems, table, stale, transports, workloads, label, failed, failed_on, wrong):
    """The table for docs/PERF.md: per workload, native's time, every system's ratio to
    native, each view's floor and measured / floor, the best coherent peer, and whether each
    view is at or below it. Returns the verdicts {workload: {view: {...}}}."""
    views = [s.name for s in systems if s.floor]
    others = [s.name for s in systems if s.name != "native" and not s.floor]
    print()
    print("Summary (ratios to native, medians; floor = native + synchronous requests x round trip,"
          " serial workloads only; best = the best coherent peer, stale, failed or wrong peers"
          " left out)")
    cols = ["workload", "native"] + [label(n) for n in others]
    for v in views:
        t = transports.get(v) or "?"
        cols += [f"{v} ({t})", "floor", "/ floor"]
    cols += ["best coherent peer"] + [f"{v} <= best" for v in views]
    print("| " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * (len(cols) - 1))
    verdicts = {}
    for w in workloads:
        row = table.get(w, {})
        nat = row.get("native", {}).get("median_s")
        cells = [w, f"{nat:.3f} s" if nat else "n/a"]
        for n in others:
            r = row.get(n, {}).get("ratio")
            gave_up = n in failed or (n, w) in failed_on
            mark = " (wrong)" if (n, w) in wrong else ""
            cells.append(f"{r:.2f}x{mark}" if r is not None else ("fails" if gave_up else "-"))
        for v in views:
            c = row.get(v, {})
            r, floor = c.get("ratio"), c.get("floor_s")
            cells.append(f"{r:.2f}x" if r is not None else "n/a")
            cells.append(f"{floor / nat:.2f}x" if floor and nat else "-")
            cells.append(f"{c['median_s'] / floor:.2f}" if floor and "median_s" in c else "-")
        peers = coherent_peers(systems, table, w, stale, wrong)
        best = min(peers, key=lambda n: row[n]["ratio"]) if peers else None
        cells.append(f"{best} {row[best]['ratio']:.2f}x" if best else "none")
        verdicts[w] = {}
        for v in views:
            r = row.get(v, {}).get("ratio")
            ok = None if r is None or best is None else r <= row[best]["ratio"]
            cells.append("-" if ok is None else ("yes" if ok else "no"))
            c = row.get(v, {})
            verdicts[w][v] = {"ratio": r, "best_peer": best,
                              "best_peer_ratio": row[best]["ratio"] if best else None,
                              "at_or_below_best": ok,
                              "per_floor": c["median_s"] / c["floor_s"]
                              if c.get("floor_s") and "median_s" in c else None}
        print("| " + " | ".join(cells) + " |")
    return verdicts


def throughput(systems, table, workloads, label):
    """Throughput with 1, 2 and 4 workers, relative to each system's own single worker
    (time with one / time with N: 2.00 is twice the work per second). Returns it by row."""
    rows = [(name, [(n, w) for n, w in ws if w in workloads]) for name, ws in CONCURRENCY]
    rows = [(name, ws) for name, ws in rows if len(ws) > 1]
    if not rows:
        return {}
    print()
    print("Throughput with several workers at once, relative to the same system's one worker"
          " (time of 1 / time of N; the same work at every level)")
    names = [s.name for s in systems]
    print("| workload | workers | " + " | ".join(label(n) for n in names) + " |")
    print("|---|---:|" + "---:|" * len(names))
    out = {}
    for name, ws in rows:
        one = {n: table.get(ws[0][1], {}).get(n, {}).get("median_s") for n in names}
        for workers, w in ws:
            cells = []
            for n in names:
                t = table.get(w, {}).get(n, {}).get("median_s")
                x = one[n] / t if t and one[n] else None
                out.setdefault(name, {}).setdefault(n, {})[workers] = x
                cells.append(f"{x:.2f}" if x else "n/a")
            print(f"| {name} | {workers} | " + " | ".join(cells) + " |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--piworkfs", required=True)
    ap.add_argument("--modes")
    ap.add_argument("--files", type=int, default=50000, help="files in the tree (default 50000)")
    ap.add_argument("--tree", metavar="DIR",
                    help="a real source tree to run on instead of the synthetic one (copied "
                         "into the work directory and committed to git: /usr/include is one "
                         "on any machine with headers installed)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmups", type=int, default=2,
                    help="untimed passes first (default 2: a first cold read makes the kernel "
                         "refetch each file's atime once, at the next stat)")
    ap.add_argument("--only", action="append",
                    help="run only this workload (repeatable); \"ls -lR cold\" runs only when named")
    ap.add_argument("--systems", help="comma-separated subset of systems")
    ap.add_argument("--dir", help="work directory (default: a new one under /var/tmp)")
    ap.add_argument("--switch-files", type=int, default=100000, help="inodes for the switch test (0: skip)")
    ap.add_argument("--json", help="also write the results as JSON to this file")
    ap.add_argument("--scratch-tmpfs", action=argparse.BooleanOptionalAction, default=None,
                    help="put the write workloads' scratch directory on a tmpfs of its own "
                         "(root only; the default as root): an ext4 without a journal that "
                         "has just deleted many files creates new ones many times slower for "
                         "minutes, natively too, which hides what each system adds")
    ap.add_argument("--no-uring", action="store_true",
                    help="leave out the view over FUSE over io_uring (and the module parameter)")
    ap.add_argument("--baseline", metavar="REV",
                    help="also build piworkfs at commit REV of this repository (in a git "
                         "worktree under the work directory, removed after the build) and "
                         "mount it as the peer piworkfs@REV beside the current build, with "
                         "the same options; prints a before/after table")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=VAR=VALUE[,VAR=VALUE]",
                    help="also mount the current build as the peer \"piworkfs NAME\" over "
                         "/dev/fuse with these variables added to its daemon's environment "
                         "(repeatable), and print a before/after table against piworkfs "
                         "build: what a knob such as PIWORKFS_WORKERS=16 changes, in one run "
                         "of one build")
    ap.add_argument("--no-originals", action="store_true",
                    help="mount every piworkfs view with --no-originals (issue #17's targets "
                         "are for originals off; bench/originals.py compares on and off)")
    args = ap.parse_args()
    if args.scratch_tmpfs is None:
        args.scratch_tmpfs = os.geteuid() == 0
    bench_start = time.monotonic()

    base = args.dir or tempfile.mkdtemp(prefix="piworkfs-bench-", dir="/var/tmp")
    print(f"work directory: {base}")
    peers = os.path.join(base, "peers")
    build_peers(peers)
    backing = os.path.join(base, "backing")
    if not os.path.exists(backing) and args.tree:
        print(f"copying {args.tree} as the tree...", flush=True)
        os.makedirs(backing)
        args.files = copy_tree(os.path.abspath(args.tree), os.path.join(backing, "tree"))
        print(f"  {args.files} files", flush=True)
        make_c_project(os.path.join(backing, "cproj"))
        os.makedirs(os.path.join(backing, "io"))
        os.makedirs(os.path.join(backing, "scratch"))
    elif args.tree:
        args.files = sum(len(fs) for d, _, fs in os.walk(os.path.join(backing, "tree"))
                         if "/.git" not in d + "/")
    if not os.path.exists(backing):
        print(f"making a {args.files}-file git tree...", flush=True)
        make_tree(os.path.join(backing, "tree"), args.files)
        make_c_project(os.path.join(backing, "cproj"))
        os.makedirs(os.path.join(backing, "io"))
        os.makedirs(os.path.join(backing, "scratch"))
        drop_output("dd if=/dev/urandom of=read.bin bs=1M count=1024 2>/dev/null", os.path.join(backing, "io"))

    if not os.path.exists(os.path.join(backing, "io", "read.bin")):
        drop_output("dd if=/dev/urandom of=read.bin bs=1M count=1024 2>/dev/null", os.path.join(backing, "io"))
    scratch_mount = None
    if args.scratch_tmpfs:
        scratch_mount = os.path.join(backing, "scratch")
        sh(["mount", "-t", "tmpfs", "-o", "size=2g,mode=0777", "pw-bench-scratch",
            scratch_mount])
        import atexit  # unmounted however the run ends (after the views' own unmounts)
        atexit.register(sh, ["umount", scratch_mount], check=False)
    global TARBALL
    TARBALL = os.path.join(base, "files-5k.tar")
    if not os.path.exists(TARBALL):
        make_tarball(TARBALL)
    env = piworkfs_env(base)
    if args.modes:
        env["PIWORKFS_MODES_DIR"] = os.path.abspath(args.modes)  # the daemon's cwd is /
    # A view takes FUSE over io_uring by default where the kernel allows it (and the bench
    # turns the parameter on): the views meant for /dev/fuse refuse it (PIWORKFS_IO_URING=0,
    # which older builds read as "not asked for"), those meant for the rings ask for it.
    uenv = dict(env)
    env["PIWORKFS_IO_URING"] = "0"
    m = lambda n: os.path.join(base, "mnt", n)

    def mount(prog, mode, *more):  # every view's command line: the same options for all
        return [prog, "mount", "-f", "--mode", mode] + \
            (["--no-originals"] if args.no_originals else []) + list(more)

    baseline = None
    if args.baseline:
        # Its own runtime and state directories: an older build may use another schema.
        bprog, bmodes, short = build_baseline(args.baseline, base)
        benv = piworkfs_env(os.path.join(base, f"baseline-{short}"))
        benv["PIWORKFS_MODES_DIR"] = bmodes
        buenv = dict(benv)
        benv["PIWORKFS_IO_URING"] = "0"
        baseline = (bprog, benv, f"piworkfs@{short}", buenv)
    systems = [
        Native("native", backing),
        Fuse("hl-passthrough", backing, m("hl"),
             [os.path.join(peers, "passthrough_hl"), "-f", "-o", f"kernel_cache,modules=subdir,subdir={backing}", m("hl")]),
        Fuse("passthrough_ll", backing, m("ll"),
             [os.path.join(peers, "passthrough_ll"), "-f", "-o", f"source={backing},cache=always", m("ll")]),
        Fuse("bindfs-mt", backing, m("bindfs"), ["bindfs", "-f", "--multithreaded", backing, m("bindfs")]),
        Fuse("piworkfs build", backing, m("pw-build"),
             mount(args.piworkfs, "build", backing, m("pw-build")), env,
             pw=args.piworkfs, floor=True),
        Fuse("piworkfs plan", backing, m("pw-plan"),
             mount(args.piworkfs, "plan", backing, m("pw-plan")), env, pw=args.piworkfs),
    ]
    pairs = []  # (before, after) for the before/after table
    if baseline:
        bprog, benv, bname, _ = baseline
        systems.append(Fuse(bname, backing, m("pw-base"),
                            mount(bprog, "build", backing, m("pw-base")), benv, pw=bprog,
                            floor=True))
        pairs.append((bname, "piworkfs build"))
    for spec in args.variant:
        vname, _, assigns = spec.partition("=")
        venv = dict(env)
        for a in filter(None, assigns.split(",")):
            k, eq, val = a.partition("=")
            if not vname or not k or not eq:
                sys.exit(f"--variant {spec}: expected NAME=VAR=VALUE[,VAR=VALUE]")
            venv[k] = val
        sysname = f"piworkfs {vname}"
        systems.append(Fuse(sysname, backing, m(f"pw-var-{len(pairs)}"),
                            mount(args.piworkfs, "build", backing, m(f"pw-var-{len(pairs)}")),
                            venv, pw=args.piworkfs, floor=True))
        pairs.append((sysname, "piworkfs build"))
    uring_restore = None
    if not args.no_uring:
        # The same view over FUSE over io_uring, side by side. The kernel offers it only
        # with the fuse module parameter on: the bench turns it on (root only) for the
        # mounts of its io_uring views and restores it as soon as their requests come
        # through the rings (the kernel reads it at INIT and when the rings register; a
        # ring in use keeps serving), so other mounts on the machine are not affected.
        systems.append(Fuse(URING, backing, m("pw-uring"),
                            mount(args.piworkfs, "build", "-o", "io_uring", backing,
                                  m("pw-uring")), uenv, pw=args.piworkfs, floor=True, uring=True))
        if baseline:
            bprog, _, bname, buenv = baseline
            systems.append(Fuse(bname + " io_uring", backing, m("pw-base-uring"),
                                mount(bprog, "build", "-o", "io_uring", backing,
                                      m("pw-base-uring")), buenv, pw=bprog, floor=True,
                                uring=True))
            pairs.append((bname + " io_uring", URING))
    if args.systems:
        keep = set(args.systems.split(","))
        systems = [s for s in systems if s.name in keep or s.name == "native"]
    kept = {s.name for s in systems}
    pairs = [p for p in pairs if p[0] in kept and p[1] in kept]
    # The cold listing only when named: its drop of the kernel's names would make the warm
    # workloads after it (the rest of the round, the next round's git status) partly cold.
    workloads = {k: v for k, v in WORKLOADS.items()
                 if k in (args.only or []) or not args.only and k not in PREPARE}
    if "ls -lR cold" in workloads and os.geteuid() != 0:
        print("ls -lR cold left out: making the kernel forget names (drop_caches) needs root")
        del workloads["ls -lR cold"]

    results = {w: {s.name: [] for s in systems} for w in workloads}
    requests = {w: {} for w in workloads}  # workload -> piworkfs system -> [(all, sync)]
    cpu = {w: {} for w in workloads}  # workload -> system -> [daemon CPU seconds per run]
    daemon_pids = {}  # system -> the pid whose CPU time is the daemon's
    transports = {}  # piworkfs system -> its transport, as its status names it
    stale = set()
    failed = {}  # system -> why it is out of every workload
    failed_on = {}  # (system, workload) -> why it is out of that workload
    wrong = {}  # (system, workload) -> what its result lacked (VERIFY): timed, not comparable
    started = []
    try:
        for s in systems:
            if s.uring and uring_restore is None and not args.no_uring:
                uring_restore = enable_uring() or ""
            s.start()
            started.append(s)
        if uring_restore is not None:
            for s in started:
                if s.uring:
                    wait_for_ring(s)
            restore_uring(uring_restore)
            uring_restore = None
        # a system that fails (passthrough_ll: EMFILE on large trees) is reported, not fatal
        for s in started:
            if s.pw:
                daemon_pids[s.name] = pw_daemon_pid(s.pw, s.env, s.root) or s.proc.pid
                transports[s.name] = pw_transport(s.pw, s.env, s.root)
            elif s.proc:
                daemon_pids[s.name] = s.proc.pid

        def attempt(s, wname, fn, tag, record=True):
            if s.name in failed or (s.name, wname) in failed_on:
                return None
            # Flush what earlier runs left dirty, outside the timing: otherwise a workload
            # pays for the previous one's writeback (1 GiB writes, 5,000 creates).
            os.sync()
            counts = record and s.pw is not None
            pid = daemon_pids.get(s.name)
            if wname in PREPARE:
                PREPARE[wname](pid)
            before = pw_requests(s.pw, s.env, s.root) if counts else None
            cpu0 = cpu_seconds(pid) if record and pid else None
            try:
                t = timed(lambda: fn(s.root, tag))
                cpu1 = cpu_seconds(pid) if cpu0 is not None else None
                if cpu1 is not None:
                    cpu[wname].setdefault(s.name, []).append(cpu1 - cpu0)
                if counts:
                    d = request_delta(before, pw_requests(s.pw, s.env, s.root))
                    if d:
                        requests[wname].setdefault(s.name, []).append(d)
                why = VERIFY[wname](s.root, tag) if wname in VERIFY else None
                if why and (s.name, wname) not in wrong:
                    wrong[(s.name, wname)] = why
                    print(f"  {s.name} is wrong on {wname}: {why}", flush=True)
                if wname in CLEANUP:
                    CLEANUP[wname](s.root, tag)  # untimed, uncounted
                return t
            except Exception as e:  # noqa: BLE001
                # Out of this workload only: a peer that cannot utime (the high-level
                # example) still counts on the others.
                failed_on[(s.name, wname)] = str(e)
                print(f"  {s.name} failed on {wname}: {e}", flush=True)
                return None

        # The round trip of every view with a floor, in batches interleaved across the views
        # after every round: views compared (two builds, two transports) share the machine's
        # state when their floors are measured, as they do for their workloads. Median of all.
        rtt_runs = {s.name: [] for s in systems if s.name == "native" or s.floor}

        def measure_rtt(seed):
            order = [s for s in systems if s.name in rtt_runs and s.name not in failed]
            for b in range(3):
                random.Random(seed * 10 + b).shuffle(order)
                for s in order:
                    rtt_runs[s.name].append(round_trip(os.path.join(s.root, "io", "read.bin")))

        # warm every system (the targets are warm figures)
        for _ in range(args.warmups):
            for wname, (fn, writes) in workloads.items():
                for s in systems:
                    if writes and s.name == "piworkfs plan":
                        continue
                    attempt(s, wname, fn, f"warm-{s.name.replace(' ', '_')}", record=False)
        stale |= probe_stale(systems, backing, "after the warm-up")
        for r in range(args.rounds):
            for wname, (fn, writes) in workloads.items():
                order = systems[:]
                random.Random(r).shuffle(order)
                for s in order:
                    if writes and s.name == "piworkfs plan":
                        continue  # plan writes nothing: the write workloads would be refused
                    t = attempt(s, wname, fn, f"r{r}-{s.name.replace(' ', '_')}")
                    if t is not None:
                        results[wname][s.name].append(t)
            measure_rtt(r)
            print(f"round {r + 1}/{args.rounds} done", flush=True)
        stale |= probe_stale(systems, backing, "after the rounds")
        rtt = {n: statistics.median(xs) for n, xs in rtt_runs.items() if xs and n not in failed}
        for s in started:
            if s.pw:  # once requests came: the ring is in use after the first ones
                transports[s.name] = pw_transport(s.pw, s.env, s.root) or transports.get(s.name)
            if s.uring:
                with open(s.root + ".log", errors="replace") as f:
                    if "requests arrive through the ring" not in f.read():
                        failed.setdefault(s.name, "served through /dev/fuse: see " + s.root + ".log")
    finally:
        for s in reversed(started):
            s.stop()
        if uring_restore is not None:
            restore_uring(uring_restore)


    names = [s.name for s in systems]
    label = lambda n: n + " (stale)" if n in stale else n  # noqa: E731
    print()
    print("Transports: " + ", ".join(f"{n}: {t or 'not said (an older build)'}"
                                     for n, t in transports.items()))
    width = max([22] + [len(label(n)) + 2 for n in names])
    print()
    print(f"Medians over {args.rounds} interleaved rounds, warm, {args.files}-file tree; ratio to native in brackets"
          + ("; piworkfs views with --no-originals" if args.no_originals else ""))
    hdr = f"{'workload':<21}" + "".join(f"{label(n):>{width}}" for n in names)
    print(hdr)
    table = {}
    for wname in workloads:
        nat = statistics.median(results[wname]["native"])
        row = f"{wname:<21}"
        table[wname] = {}
        for n in names:
            xs = results[wname][n]
            if not xs:
                row += f"{'n/a':>{width}}"
                continue
            med = statistics.median(xs)
            table[wname][n] = {"median_s": med, "ratio": med / nat if nat else None}
            cell = f"{med:.3f}s [{med / nat:5.2f}x]"
            row += f"{cell:>{width}}"
        print(row)

    for view in (s.name for s in systems if s.floor):
        if view not in rtt:
            continue
        r = rtt[view]
        print()
        print(f"{view}: one request round trip (GETXATTR answered from the daemon's memory): "
              f"{r * 1e6:.1f} us through the view, {rtt.get('native', 0) * 1e6:.1f} us natively.")
        print(f"Requests per run in {view} (synchronous ones in brackets), and the floor they set:"
              " native + synchronous requests x round trip; measured / floor")
        for wname in workloads:
            runs = requests[wname].get(view)
            if not runs or wname not in table or "native" not in table[wname] \
                    or view not in table[wname]:
                continue
            total = statistics.median(a for a, _, _ in runs)
            sync = statistics.median(b for _, b, _ in runs)
            table[wname][view].update({"requests": total, "sync_requests": sync})
            if WORKERS.get(wname, 1) > 1:
                # Several workers wait for their round trips at once: the serial floor
                # does not apply; the throughput table compares these rows.
                print(f"  {wname:<21}{total:>9.0f} [{sync:>7.0f}]   (several workers: no serial floor)")
                continue
            nat = table[wname]["native"]["median_s"]
            floor = nat + sync * r
            table[wname][view]["floor_s"] = floor
            print(f"  {wname:<21}{total:>9.0f} [{sync:>7.0f}]   floor {floor:7.3f}s [{floor / nat:5.2f}x]"
                  f"   {table[wname][view]['median_s'] / floor:5.2f}")

    # Machine-independent figures: requests per file, and the daemons' own CPU.
    print()
    print("Daemon CPU per run in ms (the process's CPU clock, median); for the views also requests"
          " per file (/f) and CPU per request in us (totals over all rounds)")
    print(f"{'workload':<21}" + "".join(f"{label(n):>{width}}" for n in names if n != "native"))
    for wname in workloads:
        row = f"{wname:<21}"
        for n in names:
            if n == "native":
                continue
            xs = cpu[wname].get(n)
            if not xs:
                row += f"{'n/a':>{width}}"
                continue
            cell = f"{statistics.median(xs) * 1e3:.1f}"
            runs = requests[wname].get(n)
            if runs:
                reqs = sum(a for a, _, _ in runs)
                nfiles = workload_files(wname, args.files)
                per_file = reqs / len(runs) / nfiles
                per_req = sum(xs) / reqs * 1e6 if reqs else None
                cell += f" {per_file:.2f}/f " + (f"{per_req:.1f}us" if per_req else "-")
                table[wname].setdefault(n, {}).update(
                    {"requests_per_file": per_file, "cpu_us_per_request": per_req})
            table[wname].setdefault(n, {})["daemon_cpu_s"] = statistics.median(xs)
            row += f"{cell:>{width}}"
        print(row)
    # What the requests per file are: by opcode, per view with a floor (median run).
    print()
    print("Requests per file by opcode (median run; FORGET and BATCH_FORGET left out: the "
          "kernel sends them when it likes)")
    for view in (s.name for s in systems if s.floor):
        print(f"  {view} ({transports.get(view) or '?'}):")
        for wname in workloads:
            runs = requests[wname].get(view)
            if not runs:
                continue
            nfiles = workload_files(wname, args.files)
            ops = {}
            for op in sorted({op for _, _, d in runs for op in d}):
                if op in ("FORGET", "BATCH_FORGET"):
                    continue
                per = statistics.median(d.get(op, 0) for _, _, d in runs) / nfiles
                if per >= 0.005:
                    ops[op] = per
            table[wname].setdefault(view, {})["ops_per_file"] = ops
            print(f"    {wname:<21}" + ", ".join(f"{op} {n:.2f}" for op, n in
                                               sorted(ops.items(), key=lambda kv: -kv[1])))
    if stale:
        print()
        print("(stale): served a file changed on the backing tree with its old content or size: "
              "its speed is not comparable.")

    for before, after in pairs:
        before_after(before, after, table, rtt, workloads, label)
    verdicts = summary(systems, table, stale, transports, workloads, label, failed, failed_on,
                       wrong)
    scaling = throughput(systems, table, workloads, label)

    sw = None
    if args.switch_files:
        print()
        sw = measure_switch(args, base, args.switch_files)
        if sw:
            print(f"mode switch (mode.set round trip, {sw[2]} inodes known): median {sw[0] * 1e6:.0f} us, max {sw[1] * 1e6:.0f} us")
    for n, why in failed.items():
        print(f"{n}: failed ({why})")
    for (n, w), why in failed_on.items():
        print(f"{n}: failed on {w} ({why.splitlines()[0][:160]})")
    for (n, w), why in wrong.items():
        print(f"{n}: wrong on {w} ({why})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": table, "switch": sw, "round_trip_s": rtt,
                       "stale": sorted(stale), "failed": failed,
                       "failed_on": {f"{n}: {w}": why for (n, w), why in failed_on.items()},
                       "wrong": {f"{n}: {w}": why for (n, w), why in wrong.items()},
                       "baseline": baseline[2] if baseline else None,
                       "transports": transports,
                       "before_after": pairs, "summary": verdicts,
                       "throughput": scaling}, f, indent=2)
    if not args.dir:
        print(f"(work directory kept for reruns: --dir {base})")
    print(f"(the bench took {(time.monotonic() - bench_start) / 60:.0f} min)")


if __name__ == "__main__":
    main()
