#!/usr/bin/env python3
"""What a piworkfs daemon spends per request, workload by workload, and on what: this build
against another commit, each view over a tmpfs project of its own (so the disk below adds
nothing), in interleaved rounds.

The workloads are the bench's kinds (bench/bench.py) on a smaller tree (5,000 files in 50
directories, committed to git): git status, find, grep -r, rg, ls -lR (warm), ls -lR cold
(the kernel's names dropped first, as root), a warm read and an overwrite of 64 MiB,
create+delete of 2,000 files, tar x of 2,000, and cp -a of the same 2,000. Per workload and build:

- requests per file, and CPU per request: the daemon's process CPU clock
  (clock_getcpuclockid, ns, every thread) around each run, divided by the requests
  `status --json` counted. All of it: the transport's wake-ups, the handlers' system calls,
  the view's own code. Median of the rounds, and the least (the run the machine disturbed
  least: on a shared machine the figure to compare builds by).
- context switches per request (voluntary and involuntary, summed over the daemon's threads
  from /proc/PID/task/*/status): each is a worker put to sleep and woken, the transport's
  largest cost on /dev/fuse. Exact, whatever the machine's load.
- with --syscalls, the daemon's system calls per request in one more run under
  `strace -f -c` (those of sleeping threads left out: futex, poll, clock_nanosleep): exact
  counts, the figure that says what a change saved.
- with --handlers, each handler's time from its entry to its reply's write (uprobes through
  `perf probe`: pw_op_* and the session's writev hook), median per opcode: the view's own
  work for that request, without the transport. A uprobe costs a trap at each end, the same
  for both builds, so the figures compare builds; they are not absolute.

Root only (tmpfs mounts, drop_caches, uprobes). Speed is reported, never asserted.
    python3 bench/daemon_cost.py --piworkfs build/cli/piworkfs --modes modes --baseline b094a77
    python3 bench/daemon_cost.py ... --syscalls --rounds 5     # and exact system calls
    python3 bench/daemon_cost.py ... --only "create+delete 2k" --handlers --rounds 4
    python3 bench/daemon_cost.py ... --uring                    # over FUSE over io_uring
"""
import argparse
import collections
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (build_baseline, enable_uring, restore_uring)

HANDLERS = ["pw_op_create", "pw_op_unlink", "pw_op_readdirplus", "pw_op_getxattr",
            "pw_op_write_buf", "pw_op_release"]
REPLY = "io_writev"  # devio.c's writev hook: every reply over /dev/fuse goes through it


def quiet(*argv):
    subprocess.run(list(argv), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def cpu_clock(pid):
    return time.clock_gettime(((~pid) << 3) | 2)  # MAKE_PROCESS_CPUCLOCK(pid, SCHED)


class View:
    """A view of NAME's build over a project on a tmpfs of its own, mounted in `build`."""

    def __init__(self, name, program, modes, workdir, uring):
        self.name, self.program = name, program
        self.base = tempfile.mkdtemp(prefix=re.sub(r"\W", "_", name) + "-", dir=workdir)
        self.project, self.mnt = f"{self.base}/project", f"{self.base}/view"
        for d in ("project", "view", "run", "config"):
            os.makedirs(f"{self.base}/{d}")
        quiet("mount", "-t", "tmpfs", "-o", "size=1g", "pw-daemon-cost", self.project)
        self.proc = None
        self.probes = None
        for d in range(50):
            os.makedirs(f"{self.project}/tree/d{d}")
            for i in range(100):
                with open(f"{self.project}/tree/d{d}/f{i}.c", "w") as f:
                    f.write(f"int f{i};\n" + "alpha beta gamma delta\n" * (i % 40))
        os.makedirs(f"{self.project}/scratch")
        os.makedirs(f"{self.project}/io")
        with open(f"{self.project}/io/read.bin", "wb") as f:
            f.write(os.urandom(IO_BYTES))
        with open(f"{self.project}/io/write.bin", "wb") as f:
            f.write(b"\0" * IO_BYTES)
        with open(f"{self.project}/.gitignore", "w") as f:
            f.write("io/\nscratch/\n")  # git status walks the tree, not the I/O files
        git = ["git", "-C", self.project, "-c", "user.name=b", "-c", "user.email=b@x"]
        quiet(*git, "init", "-q")
        quiet(*git, "add", "-A")
        quiet(*git, "commit", "-qm", "tree")
        self.env = dict(os.environ, XDG_RUNTIME_DIR=f"{self.base}/run",
                        PIWORKFS_STATE_DB=f"{self.base}/state.db",
                        XDG_CONFIG_HOME=f"{self.base}/config", PIWORKFS_MODES_DIR=modes,
                        PIWORKFS_IO_URING="1" if uring else "0")
        self.proc = subprocess.Popen([program, "mount", "-f", "--mode", "build", self.project,
                                      self.mnt], env=self.env, stdout=subprocess.DEVNULL,
                                     stderr=open(f"{self.base}/daemon.log", "w"))
        deadline = time.monotonic() + 60
        while not os.path.ismount(self.mnt):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{name}: the view did not mount")
            time.sleep(0.05)

    def wait_for_ring(self):
        """Until a request came through the rings (the daemon's log says so): only then may
        the module parameter go back."""
        deadline = time.monotonic() + 20
        i = 0
        while time.monotonic() < deadline:
            with open(f"{self.base}/daemon.log", errors="replace") as f:
                if "requests arrive through the ring" in f.read():
                    return
            i += 1
            os.path.exists(f"{self.mnt}/ring-probe-{i}")
            time.sleep(0.02)
        raise SystemExit(f"{self.name}: no request came through the rings")

    def requests(self):
        out = subprocess.run([self.program, "status", "--json"], env=self.env,
                             capture_output=True, text=True).stdout
        for v in json.loads(out or "[]"):
            if v.get("mountpoint") == self.mnt and "requests" in v:
                return sum(v["requests"]["ops"].values())
        raise SystemExit(f"{self.name}: status --json counts no requests")

    def add_probes(self):
        """uprobes on the handlers' entries and returns and on the reply hook, in a group of
        this view's own (event names are unique across groups too)."""
        g = "pwcost" + re.sub(r"\W", "", self.name)
        subprocess.run(["perf", "probe", "-q", "-d", f"{g}:*"], capture_output=True)
        specs = [f"{g}:reply_{g}={REPLY}"]
        for f in HANDLERS:
            short = f[len("pw_op_"):]
            specs += [f"{g}:{short}_{g}={f}", f"{g}:{short}_{g}_ret={f}%return"]
        for spec in specs:
            p = subprocess.run(["perf", "probe", "-q", "-x", self.program, "-a", spec],
                               capture_output=True, text=True)
            if p.returncode:
                raise SystemExit(f"perf probe {spec}: {p.stderr.strip()}")
        self.probes = g

    def close(self):
        if self.proc:
            subprocess.run([self.program, "umount", self.mnt], env=self.env, capture_output=True)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                subprocess.run(["fusermount3", "-u", "-z", self.mnt], capture_output=True)
        if self.probes:
            subprocess.run(["perf", "probe", "-q", "-d", f"{self.probes}:*"], capture_output=True)
        subprocess.run(["umount", "-l", self.project], capture_output=True)
        shutil.rmtree(self.base, ignore_errors=True)


def settle(v):
    """Until the daemon's CPU clock stands still (FORGETs of dropped names answered)."""
    deadline = time.monotonic() + 10
    last = cpu_clock(v.proc.pid)
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = cpu_clock(v.proc.pid)
        if now - last < 0.0005:
            return
        last = now


IO_BYTES = 64 << 20
TAR_FILES = 2000
TARBALL = None  # made once in main
CP_SOURCE = None  # the tarball's tree, unpacked once in main (outside every view)


def sh(cmd, cwd):
    subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL)


def in_view(cmd, folder):
    """The workload that runs the shell command CMD in FOLDER of the view ("" its top)."""
    return lambda v, tag: sh(cmd, os.path.join(v.mnt, folder))


w_list = in_view("ls -lR . > /dev/null", "tree")


def w_create(v, tag):
    d = f"{v.mnt}/scratch/{tag}"
    os.makedirs(d)
    for i in range(2000):
        with open(f"{d}/n{i}", "w") as f:
            f.write("x")
    for i in range(2000):
        os.unlink(f"{d}/n{i}")
    os.rmdir(d)


def w_tar(v, tag):
    d = f"{v.mnt}/scratch/tar-{tag}"
    os.makedirs(d)
    sh(f"tar xf {TARBALL} --no-same-owner --no-same-permissions", d)


def c_tar(v, tag):
    shutil.rmtree(f"{v.mnt}/scratch/tar-{tag}")


def w_cp(v, tag):
    """cp -a of the tarball's tree: each file's times set together and its mode, as cp -a,
    rsync -a and cp -p do (an IN_ATTRIB on the file, where tar x sets only the mtime)."""
    sh(f"cp -a {CP_SOURCE} {v.mnt}/scratch/cp-{tag}", "/")


def c_cp(v, tag):
    shutil.rmtree(f"{v.mnt}/scratch/cp-{tag}")


def make_tarball(path):
    src = path + ".d"
    for i in range(TAR_FILES):
        d = f"{src}/x/d{i % 20}"
        os.makedirs(d, exist_ok=True)
        with open(f"{d}/f{i}.c", "w") as f:
            f.write(f"int f{i};\n")
    sh(f"tar cf {path} x", src)
    shutil.rmtree(src)


# name -> (run, files it touches, cleanup after the measurement or None)
WORKLOADS = {
    "git status": (in_view("git status --porcelain", ""), 5000, None),
    "find": (in_view("find . -type f | wc -l", "tree"), 5000, None),
    "grep -r": (in_view("grep -r -l zzzz_not_there . ; test $? -eq 1", "tree"), 5000, None),
    "rg": (in_view("rg -l zzzz_not_there . ; test $? -eq 1", "tree"), 5000, None),
    "ls -lR": (w_list, 5000, None),
    "ls -lR cold": (w_list, 5000, None),
    "read 64 MiB": (in_view("cat read.bin > /dev/null", "io"), 1, None),
    "write 64 MiB": (in_view(f"dd if=/dev/zero of=write.bin bs=1M count={IO_BYTES >> 20} "
                             "conv=notrunc 2>/dev/null", "io"), 1, None),
    "create+delete 2k": (w_create, 2000, None),
    "tar x 2k": (w_tar, TAR_FILES, c_tar),
    "cp -a 2k": (w_cp, TAR_FILES, c_cp),
}


def ctx_switches(pid):
    """{tid: context switches so far (voluntary and involuntary)} of PID's threads."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                out[tid] = sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except OSError:
            pass
    return out


def switches_between(before, after):
    """The context switches between two ctx_switches(): of the threads alive at the end (a
    worker that ended in between takes its own with it: libfuse's come and go in bursts)."""
    return sum(n - before.get(tid, 0) for tid, n in after.items())


# System calls of threads that wait, left out of the counts: their number says how often a
# thread slept, not what a request cost.
WAITING = {"futex", "poll", "ppoll", "epoll_wait", "clock_nanosleep", "nanosleep",
           "restart_syscall", "io_uring_enter"}


def count_syscalls(v, wname, tag):
    """One run of WNAME under strace -f -c: ({syscall: calls}, requests)."""
    out = f"{v.base}/strace.txt"
    st = subprocess.Popen(["strace", "-f", "-c", "-o", out, "-p", str(v.proc.pid)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)  # strace attaches to every thread
    if wname == "ls -lR cold":
        drop_names()
        settle(v)
    q0 = v.requests()
    run, _, cleanup = WORKLOADS[wname]
    run(v, tag)
    q1 = v.requests()
    time.sleep(0.3)
    st.send_signal(2)
    st.wait()
    if cleanup:
        cleanup(v, tag)
    calls = {}
    with open(out) as f:
        for line in f:
            m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$", line)
            if m and m.group(2) != "total" and m.group(2) not in WAITING:
                calls[m.group(2)] = int(m.group(1))
    return calls, q1 - q0


def drop_names():
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2")


def handler_times(v, data, into):
    """Entry-to-return and entry-to-reply times from a perf.data of V's probes, by handler."""
    txt = subprocess.run(["perf", "script", "-i", data, "-F", "tid,time,event", "--ns"],
                         capture_output=True, text=True).stdout
    start, replied = {}, set()
    for line in txt.splitlines():
        m = re.match(r"\s*(\d+)\s+([\d.]+):\s+(\S+):", line)
        if not m:
            continue
        tid, t = m.group(1), float(m.group(2))
        ev = m.group(3).split(":")[-1].replace("__return", "").replace("_" + v.probes, "")
        if ev == "reply":
            for (ttid, h), t0 in start.items():
                if ttid == tid and (tid, h) not in replied:
                    into[h + " before reply"].append((t - t0) * 1e6)
                    replied.add((tid, h))
        elif ev.endswith("_ret"):
            h = ev[:-len("_ret")]
            t0 = start.pop((tid, h), None)
            if t0 is not None:
                into[h + " whole"].append((t - t0) * 1e6)
        else:
            start[(tid, ev)] = t
            replied.discard((tid, ev))


def rewarm(views, wname):
    """After the cold listings of a round: the kernel's names were dropped for every view at
    each one's turn (drop_caches is global), so the views listed first lost what their own
    listing made. Untimed listings bring every view back to warm, equally."""
    if wname == "ls -lR cold":
        for v in views:
            w_list(v, "rewarm")


def run_once(v, wname, tag, record, cpu, handlers):
    if wname == "ls -lR cold":
        drop_names()
    settle(v)
    rec = None
    if handlers and record:
        data = f"{v.base}/perf.data"
        rec = subprocess.Popen(["perf", "record", "-q", "-o", data, "-e", f"{v.probes}:*", "-p",
                                str(v.proc.pid)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # perf attaches its probes
    run, _, cleanup = WORKLOADS[wname]
    q0, c0, s0 = v.requests(), cpu_clock(v.proc.pid), ctx_switches(v.proc.pid)
    run(v, tag)
    c1, s1 = cpu_clock(v.proc.pid), ctx_switches(v.proc.pid)
    sw = switches_between(s0, s1)
    q1 = v.requests()
    if cleanup:
        cleanup(v, tag)  # untimed, uncounted
    if rec:
        rec.send_signal(2)
        rec.wait()
        handler_times(v, data, handlers[v.name])
    elif record:
        cpu[wname][v.name].append(((c1 - c0) * 1e6, q1 - q0, sw))


def report(views, workloads, cpu, handlers, syscalls):
    print("\nPer request, by workload (tmpfs projects; medians of the rounds, the least in"
          " brackets)")
    cols = ["workload", "requests/file"]
    for v in views:
        cols += [f"{v.name} CPU us", f"{v.name} switches"]
        if syscalls:
            cols.append(f"{v.name} syscalls")
    print("| " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * (len(cols) - 1))
    for wname in workloads:
        files = WORKLOADS[wname][1]
        cells = [wname]
        reqs = [q for v in views for _, q, _ in cpu[wname][v.name]]
        cells.append(f"{statistics.median(reqs) / files:.2f}" if reqs else "-")
        for v in views:
            xs = [(c / q, sw / q) for c, q, sw in cpu[wname][v.name] if q]
            if xs:
                per = [a for a, _ in xs]
                cells.append(f"{statistics.median(per):.2f} ({min(per):.2f})")
                cells.append(f"{statistics.median(b for _, b in xs):.2f}")
            else:
                cells += ["-", "-"]
            if syscalls:
                calls, q = syscalls.get(wname, {}).get(v.name, ({}, 0))
                cells.append(f"{sum(calls.values()) / q:.2f}" if q else "-")
        print("| " + " | ".join(cells) + " |")
    if syscalls:
        print("\nSystem calls per request by name (strace -f -c, one run; waiting ones left out)")
        for wname in workloads:
            for v in views:
                calls, q = syscalls.get(wname, {}).get(v.name, ({}, 0))
                if q:
                    top = sorted(calls.items(), key=lambda kv: -kv[1])
                    print(f"  {wname:<18}{v.name:<14}" + ", ".join(
                        f"{k} {n / q:.2f}" for k, n in top if n / q >= 0.01))
    if not handlers:
        return
    print("\nHandler time, us, median (uprobes: entry to the reply's write, and to return)")
    print(f"  {'handler':<34}" + "".join(f"{v.name:>22}" for v in views))
    for f in HANDLERS:
        for part in ("before reply", "whole"):
            key = f"{f[len('pw_op_'):]} {part}"
            row = f"  {key:<34}"
            for v in views:
                xs = handlers[v.name].get(key) or []
                row += f"{statistics.median(xs):>13.2f} n={len(xs):<6}" if xs else f"{'-':>22}"
            print(row)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--piworkfs", required=True)
    ap.add_argument("--modes", required=True)
    ap.add_argument("--baseline", metavar="REV", help="also build and run commit REV")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--handlers", action="store_true", help="also time each handler (perf)")
    ap.add_argument("--uring", action="store_true", help="views over FUSE over io_uring")
    ap.add_argument("--dir", help="work directory (default: a new one under /var/tmp)")
    ap.add_argument("--only", action="append", help="run only this workload (repeatable)")
    ap.add_argument("--syscalls", action="store_true",
                    help="also count the daemon's system calls per request (strace, one run)")
    args = ap.parse_args()
    workloads = [w for w in WORKLOADS if not args.only or w in args.only]
    if args.only and len(workloads) != len(args.only):
        sys.exit(f"--only: workloads are {', '.join(WORKLOADS)}")
    if os.geteuid() != 0:
        sys.exit("daemon_cost.py: needs root (tmpfs mounts, drop_caches, perf probe)")
    if args.handlers and args.uring:
        sys.exit("--handlers: the reply hook is /dev/fuse's; leave out --uring")
    base = args.dir or tempfile.mkdtemp(prefix="piworkfs-daemon-cost-", dir="/var/tmp")
    global TARBALL
    TARBALL = os.path.join(base, "files.tar")
    if not os.path.exists(TARBALL):
        make_tarball(TARBALL)
    global CP_SOURCE
    CP_SOURCE = os.path.join(base, "files.d")
    if not os.path.exists(CP_SOURCE):
        os.makedirs(CP_SOURCE)
        sh(f"tar xf {TARBALL}", CP_SOURCE)
    builds = [("build", os.path.abspath(args.piworkfs), os.path.abspath(args.modes))]
    if args.baseline:
        prog, modes, short = bench.build_baseline(args.baseline, base)
        builds.append((f"@{short}", prog, modes))
    restore = bench.enable_uring() if args.uring else None
    views = []
    try:
        for name, prog, modes in builds:
            views.append(View(name, prog, modes, base, args.uring))
        if restore is not None:
            for v in views:
                v.wait_for_ring()
            bench.restore_uring(restore)
            restore = None
        if args.handlers:
            for v in views:
                v.add_probes()
        cpu = {w: collections.defaultdict(list) for w in workloads}
        handlers = {v.name: collections.defaultdict(list) for v in views} if args.handlers \
            else None
        for r in range(-1, args.rounds):  # round -1 warms and is not recorded
            for wname in workloads:
                order = views[:]
                random.Random(r).shuffle(order)
                for v in order:
                    run_once(v, wname, f"r{r}", r >= 0, cpu, handlers)
                rewarm(views, wname)
            print(f"round {r + 2}/{args.rounds + 1} done", flush=True)
        if handlers:  # CPU rounds without the probes' traps
            for v in views:
                subprocess.run(["perf", "probe", "-q", "-d", f"{v.probes}:*"],
                               capture_output=True)
                v.probes = None
            for r in range(args.rounds):
                for wname in workloads:
                    order = views[:]
                    random.Random(r).shuffle(order)
                    for v in order:
                        run_once(v, wname, f"c{r}", True, cpu, None)
                    rewarm(views, wname)
        syscalls = {}
        if args.syscalls:  # after the timed rounds: strace slows the daemon down
            for wname in workloads:
                for v in views:
                    syscalls.setdefault(wname, {})[v.name] = count_syscalls(v, wname, "s")
                rewarm(views, wname)
            print("system calls counted", flush=True)
        report(views, workloads, cpu, handlers, syscalls)
    finally:
        if restore is not None:
            bench.restore_uring(restore)
        for v in views:
            v.close()


if __name__ == "__main__":
    main()
