#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""One view over /dev/fuse and one over FUSE over io_uring, side by side: the time of a
single-threaded open+close (and stat of a name never seen, a LOOKUP) in each, interleaved,
as a ratio in one run; and which of the daemon's threads answered, on which CPU, with how
much CPU per request.

    bench/transport_latency.py [--piworkfs build/cli/piworkfs] [--n 2000] [--rounds 5]
                               [--cpu N]

The kernel offers FUSE over io_uring only while the fuse module parameter enable_uring is
on: this sets it (as root) for the io_uring view's mount and puts the previous value back
as soon as that view's requests come through its rings (the kernel reads it at INIT and
when the rings register). Without root, or without the parameter, it measures /dev/fuse
alone. Not a test: it measures time.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PARAM = "/sys/module/fuse/parameters/enable_uring"
TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


class View:
    def __init__(self, pw, tmp, name, opts, env):
        self.pw, self.env = pw, env
        self.project = os.path.join(tmp, name + "-project")
        self.mp = os.path.join(tmp, name + "-mnt")
        os.makedirs(os.path.join(self.project, "d"))
        os.makedirs(self.mp)
        for i in range(64):
            with open(os.path.join(self.project, "d", "f%d" % i), "w") as f:
                f.write("x\n")
        self.log = open(os.path.join(tmp, name + ".log"), "w+")
        argv = [pw, "mount", "-f", "--mode", "build", "--no-originals", "--no-audit",
                "--state-db", os.path.join(tmp, name + ".db")] + opts + [self.project, self.mp]
        self.proc = subprocess.Popen(argv, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        end = time.monotonic() + 30
        while not self.mounted():
            if self.proc.poll() is not None or time.monotonic() > end:
                self.log.seek(0)
                sys.exit("%s did not mount: %s" % (name, self.log.read()))
            time.sleep(0.05)
        while self.status() is None and time.monotonic() < end:
            time.sleep(0.05)

    def mounted(self):
        with open("/proc/self/mountinfo") as f:
            return any(line.split()[4] == self.mp for line in f)

    def status(self):
        p = subprocess.run([self.pw, "status", "--json"], env=self.env, capture_output=True,
                           text=True)
        try:
            return next(s for s in json.loads(p.stdout) if s.get("mountpoint") == self.mp)
        except (ValueError, StopIteration):
            return None

    def threads(self):
        """{tid: (CPU time in ns, voluntary context switches, last CPU)} of the daemon's
        threads (schedstat: exact, where stat's ticks are 10 ms)."""
        out = {}
        base = "/proc/%d/task" % self.proc.pid
        for tid in os.listdir(base):
            st, ss = read("%s/%s/stat" % (base, tid)), read("%s/%s/schedstat" % (base, tid))
            status = read("%s/%s/status" % (base, tid))
            if not st or not ss or not status:
                continue
            f = st[st.rindex(")") + 2:].split()
            vol = next(int(line.split()[1]) for line in status.splitlines()
                       if line.startswith("voluntary_ctxt_switches"))
            out[tid] = (int(ss.split()[0]), vol, int(f[36]))
        return out

    def close(self):
        subprocess.run(["fusermount3", "-u", self.mp], capture_output=True)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def open_close(path, n):
    t = time.perf_counter()
    for _ in range(n):
        os.close(os.open(path, os.O_RDONLY))
    return (time.perf_counter() - t) / n * 1e6


def lookups(d, n, tag):
    t = time.perf_counter()
    for i in range(n):
        try:
            os.stat("%s/none-%s-%d" % (d, tag, i))
        except FileNotFoundError:
            pass
    return (time.perf_counter() - t) / n * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--piworkfs", default=os.path.join(TOP, "build", "cli", "piworkfs"))
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cpu", type=int, default=None, help="pin this process to CPU N")
    args = ap.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    tmp = tempfile.mkdtemp(prefix="pw-lat-")
    env = dict(os.environ, XDG_RUNTIME_DIR=tmp, PIWORKFS_MODES_DIR=os.path.join(TOP, "modes"))
    env.pop("PIWORKFS_IO_URING", None)
    views = {}
    prev = read(PARAM)
    try:
        views["/dev/fuse"] = View(args.piworkfs, tmp, "devfuse", ["-o", "no_io_uring"], env)
        if prev is not None:
            try:
                if prev != "Y":
                    with open(PARAM, "w") as f:
                        f.write("Y")
                v = View(args.piworkfs, tmp, "uring", ["-o", "io_uring"], env)
                end = time.monotonic() + 30
                i = 0
                while v.status()["transport"]["ring_requests"] == 0:
                    i += 1
                    os.path.exists(os.path.join(v.mp, "warm-%d" % i))
                    if time.monotonic() > end:
                        sys.exit("no request came through the rings")
                    time.sleep(0.01)
                views["io_uring"] = v
            except OSError as e:
                print("io_uring: cannot set %s: %s" % (PARAM, e.strerror))
            finally:
                if prev != "Y":
                    with open(PARAM, "w") as f:
                        f.write(prev)
        res = {k: {"open+close": [], "lookup": []} for k in views}
        before = {k: (v.threads(), v.status()["requests"]["total"]) for k, v in views.items()}
        for r in range(args.rounds):
            for k, v in views.items():
                f = os.path.join(v.mp, "d", "f1")
                open_close(f, 50)  # warm
                res[k]["open+close"].append(open_close(f, args.n))
                res[k]["lookup"].append(lookups(os.path.join(v.mp, "d"), args.n // 4,
                                                "%d" % r))
        print("single-threaded, %d ops x %d interleaved rounds, caller on CPU %s" % (
            args.n, args.rounds, "any" if args.cpu is None else args.cpu))
        for k, v in views.items():
            tb, rb = before[k]
            ta, st = v.threads(), v.status()
            reqs = st["requests"]["total"] - rb
            busy, cpu_ns, sleeps = [], 0, 0
            for tid, (ns, vol, cpu) in ta.items():
                ns0, vol0, _ = tb.get(tid, (0, 0, cpu))
                cpu_ns += ns - ns0
                sleeps += vol - vol0
                if vol - vol0 > reqs // 20:
                    busy.append("%s on cpu%d: %d wake-ups" % (tid, cpu, vol - vol0))
            print("  %-9s open+close %6.1f us  lookup %6.1f us  (medians); daemon %.1f us "
                  "CPU and %.2f wake-ups per request (%d requests, %d through the rings); "
                  "threads: %s" % (
                      k, statistics.median(res[k]["open+close"]),
                      statistics.median(res[k]["lookup"]), cpu_ns / 1000 / max(reqs, 1),
                      sleeps / max(reqs, 1), reqs, st["transport"]["ring_requests"],
                      ", ".join(busy) or "-"))
        if len(views) == 2:
            for w in ("open+close", "lookup"):
                print("  io_uring / /dev/fuse, %s: %.2f" % (
                    w, statistics.median(res["io_uring"][w]) /
                    statistics.median(res["/dev/fuse"][w])))
    finally:
        for v in views.values():
            v.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
