#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Audit storm: what a flood of denied writes costs the allowed work beside it.

Run by hand (not a test; nothing is asserted):

    python3 bench/audit_storm.py [--piworkfs BUILD/cli/piworkfs] [--rounds 3]
                                 [--storm 100000] [--files 2000] [--json]

It makes two identical temp projects and mounts one with the audit log on and one with
`--no-audit`, both in `design` mode, so that denied writes (anything under src/, EACCES)
and allowed ones (docs/design/) run side by side. In each round, for each view (the order
alternates between rounds, so a noisy neighbour hurts both alike):

  - two storm processes each make STORM denied writes: one opens src/a.c for writing over
    and over (identical events: the coalescing path), the other creates src/storm-N, a new
    name each time (every event its own row: the writer's worst case);
  - meanwhile a third process times a fixed allowed workload, FILES x (create, write 4 KiB,
    close, unlink) in docs/design/, as many times as the storm lasts (at least once).

It reports the allowed workload's median time per view and the slowdown of audit on over
audit off (the issue asks for at most 5%), the storms' denied operations per second, the
audit rows written per second (rows added to the database over the time from the storm's
start to the writer having drained its queue), and the audit writer's counters (submitted,
written, dropped, coalesced) from `piworkfs status --json`.

Everything lives in a private temp dir (HOME, XDG_RUNTIME_DIR, XDG_CONFIG_HOME,
PIWORKFS_STATE_DB); both views are always unmounted (fusermount3 -u, else a lazy unmount
and a kill). On a shared machine, expect noise: compare medians, not single runs.
"""
import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)

# A storm of N refused writes, each of which must fail with EACCES; prints its elapsed time.
# KIND "same": opens the file PATH for writing N times (one path: the audit coalesces);
# "new": creates N new files in the directory PATH (a new path each time).
STORM = r"""
import os, sys, time
kind, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if kind == "same":
    def refused(i):
        return os.open(path, os.O_WRONLY)
else:
    def refused(i):
        return os.open("%s/storm-%d" % (path, i), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
print("go", flush=True)
t0 = time.monotonic()
for i in range(n):
    try:
        os.close(refused(i))
        sys.exit("%s: the write was allowed" % kind)
    except PermissionError:
        pass
print("%.6f" % (time.monotonic() - t0), flush=True)
"""

# Times the allowed workload until told to stop (a line on stdin) and at least once; prints
# one elapsed time per run.
WORKLOAD = r"""
import os, select, sys, time
d, files = sys.argv[1], int(sys.argv[2])
data = b"x" * 4096
print("ready", flush=True)
sys.stdin.readline()
while True:
    t0 = time.monotonic()
    for i in range(files):
        p = "%s/w-%d" % (d, i)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, data)
        os.close(fd)
        os.unlink(p)
    print("%.6f" % (time.monotonic() - t0), flush=True)
    if select.select([sys.stdin], [], [], 0)[0]:
        break
"""


def mounted(mp):
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = left.split()
            if len(fields) >= 5 and fields[4] == mp and right.startswith("fuse.piworkfs"):
                return True
    return False


def make_project(root):
    for d in ("src", "docs/design", ".git"):
        os.makedirs(os.path.join(root, d))
    for rel, text in (("src/a.c", "int a;\n"), ("docs/design/a.md", "# a\n"),
                      (".git/HEAD", "ref: refs/heads/main\n")):
        with open(os.path.join(root, rel), "w") as f:
            f.write(text)


class View:
    def __init__(self, bench, name, audit):
        self.bench = bench
        self.name = name
        self.audit = audit
        self.project = os.path.join(bench.tmp, name)
        self.mp = os.path.join(bench.tmp, name + "-mnt")
        self.db = os.path.join(bench.tmp, name + ".db")
        self.log = os.path.join(bench.tmp, name + ".log")
        self.proc = None
        make_project(self.project)
        os.makedirs(self.mp)

    def env(self):
        e = dict(self.bench.env)
        e["PIWORKFS_STATE_DB"] = self.db
        return e

    def mount(self):
        argv = [self.bench.piworkfs, "mount", "-f", "--mode", "design", "--state-db", self.db]
        if not self.audit:
            argv.append("--no-audit")
        argv += [self.project, self.mp]
        with open(self.log, "wb") as logf:
            self.proc = subprocess.Popen(argv, env=self.env(), stdin=subprocess.DEVNULL,
                                         stdout=logf, stderr=subprocess.STDOUT)
        end = time.monotonic() + 10
        while not mounted(self.mp):
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError("%s did not mount:\n%s" % (self.name, open(self.log).read()))
            time.sleep(0.02)
        end = time.monotonic() + 5
        while self.status() is None and time.monotonic() < end:
            time.sleep(0.05)

    def unmount(self):
        if self.proc is None:
            return
        if mounted(self.mp):
            r = subprocess.run(["fusermount3", "-u", self.mp], capture_output=True)
            if r.returncode != 0:
                subprocess.run(["fusermount3", "-u", "-z", self.mp], capture_output=True)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        if mounted(self.mp):
            subprocess.run(["fusermount3", "-u", "-z", self.mp], capture_output=True)
        self.proc = None

    def status(self):
        """The view's status object, or None while its socket does not answer."""
        p = subprocess.run([self.bench.piworkfs, "status", "--json"], cwd=self.mp,
                           env=dict(self.env(), PIWORKFS_SOCKET=self.socket()),
                           capture_output=True, text=True)
        if p.returncode != 0:
            return None
        return json.loads(p.stdout)[0]

    def socket(self):
        # The daemon's naming (ctl/server.h): <basename>-<fnv1a64(mountpoint)>.sock.
        h = 0xcbf29ce484222325
        for c in os.fsencode(self.mp):
            h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
        base = "".join(c if (c.isascii() and c.isalnum()) or c in "-_." else "_"
                       for c in os.path.basename(self.mp))[:24]
        return os.path.join(self.bench.runtime, "piworkfs", "%s-%016x.sock" % (base, h))

    def rows(self):
        if not os.path.exists(self.db):
            return 0
        con = sqlite3.connect("file:%s?mode=ro" % self.db, uri=True, timeout=30)
        try:
            return con.execute("SELECT count(*) FROM audit").fetchone()[0]
        finally:
            con.close()

    def settled(self, deadline=120):
        """Waits until the audit writer has drained its queue; returns its counters."""
        end = time.monotonic() + deadline
        while True:
            st = self.status()
            a = st and st["audit"]
            if not a or a["written"] + a["dropped"] == a["submitted"]:
                return a
            if time.monotonic() > end:
                return a
            time.sleep(0.05)


class Bench:
    def __init__(self, args):
        self.args = args
        self.piworkfs = os.path.abspath(args.piworkfs)
        self.tmp = tempfile.mkdtemp(prefix="pw-storm-")
        home = os.path.join(self.tmp, "home")
        self.runtime = os.path.join(self.tmp, "run")
        os.makedirs(os.path.join(home, ".config"))
        os.makedirs(self.runtime, mode=0o700)
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LC_ALL": "C.UTF-8",
            "HOME": home,
            "XDG_CONFIG_HOME": os.path.join(home, ".config"),
            "XDG_STATE_HOME": os.path.join(home, ".state"),
            "XDG_RUNTIME_DIR": self.runtime,
            "PIWORKFS_MODES_DIR": os.path.join(SOURCE, "modes"),
        }
        self.views = [View(self, "audit-on", True), View(self, "audit-off", False)]
        self.samples = {v.name: [] for v in self.views}
        self.storm_rates = {v.name: [] for v in self.views}
        self.row_rates = []
        self.rounds_out = []

    def popen(self, script, *args, stdin=False):
        return subprocess.Popen([sys.executable, "-c", script] + [str(a) for a in args],
                                env=self.env, stdout=subprocess.PIPE, text=True,
                                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL)

    def round(self, v, rnd):
        n, files = self.args.storm, self.args.files
        rows0 = v.rows()
        a0 = v.status()["audit"] if v.audit else None
        os.makedirs(os.path.join(v.project, "src/new-%d" % rnd), exist_ok=True)
        work = self.popen(WORKLOAD, os.path.join(v.mp, "docs/design"), files, stdin=True)
        assert work.stdout.readline().strip() == "ready"
        t0 = time.monotonic()
        storms = [self.popen(STORM, "same", os.path.join(v.mp, "src/a.c"), n),
                  self.popen(STORM, "new", os.path.join(v.mp, "src/new-%d" % rnd), n)]
        for s in storms:
            assert s.stdout.readline().strip() == "go"
        work.stdin.write("go\n")
        work.stdin.flush()
        storm_times = [float(s.stdout.readline()) for s in storms]
        for s in storms:
            s.wait()
        work.stdin.write("stop\n")
        work.stdin.flush()
        times = [float(x) for x in work.stdout.read().split()]
        work.wait()
        a1 = v.settled()
        drained = time.monotonic() - t0
        rows1 = v.rows()
        self.samples[v.name] += times
        self.storm_rates[v.name].append(2 * n / max(storm_times))
        out = {"view": v.name, "round": rnd, "workload_s": times,
               "storm_s": storm_times, "storm_ops_per_s": 2 * n / max(storm_times)}
        if v.audit:
            delta = {k: a1[k] - a0[k] for k in ("submitted", "written", "dropped", "coalesced")}
            out.update(rows=rows1 - rows0, drained_s=drained, audit=delta,
                       rows_per_s=(rows1 - rows0) / drained)
            self.row_rates.append((rows1 - rows0) / drained)
        self.rounds_out.append(out)
        return out

    def run(self):
        try:
            for v in self.views:
                v.mount()
            for rnd in range(self.args.rounds):
                order = self.views if rnd % 2 == 0 else self.views[::-1]
                for v in order:
                    out = self.round(v, rnd)
                    if not self.args.json:
                        extra = ""
                        if "audit" in out:
                            extra = ", %d rows in %.2f s, audit %s" % (
                                out["rows"], out["drained_s"], out["audit"])
                        print("round %d %-9s workload median %.3f s over %d runs; storm "
                              "%.0f denied ops/s%s" % (
                                  rnd, v.name, statistics.median(out["workload_s"]),
                                  len(out["workload_s"]), out["storm_ops_per_s"], extra),
                              flush=True)
            final = self.views[0].settled()
            total_rows = self.views[0].rows()
        finally:
            for v in self.views:
                v.unmount()
        on = statistics.median(self.samples["audit-on"])
        off = statistics.median(self.samples["audit-off"])
        summary = {
            "storm_per_process": self.args.storm, "files": self.args.files,
            "rounds": self.args.rounds,
            "workload_median_s": {"audit-on": on, "audit-off": off},
            "workload_runs": {k: len(v) for k, v in self.samples.items()},
            "slowdown_pct": (on / off - 1) * 100,
            "storm_ops_per_s_median": {k: statistics.median(v)
                                       for k, v in self.storm_rates.items()},
            "rows_written_per_s_median": statistics.median(self.row_rates),
            "audit_rows_total": total_rows,
            "audit_counters_total": final,
            "rounds_detail": self.rounds_out,
        }
        if self.args.json:
            print(json.dumps(summary, indent=1))
        else:
            print()
            print("allowed workload (%d x create+write+unlink), median: audit on %.3f s, "
                  "off %.3f s: slowdown %+.1f%% (goal: at most 5%%)" %
                  (self.args.files, on, off, summary["slowdown_pct"]))
            print("storm denied ops/s (2 processes), median: on %.0f, off %.0f" %
                  (summary["storm_ops_per_s_median"]["audit-on"],
                   summary["storm_ops_per_s_median"]["audit-off"]))
            print("audit rows written per second, median over rounds: %.0f" %
                  summary["rows_written_per_s_median"])
            print("audit writer, whole run: %s; %d rows in the database" % (final, total_rows))
        return summary

    def cleanup(self):
        if not self.args.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--piworkfs", default=os.environ.get(
        "PIWORKFS", os.path.join(SOURCE, "build", "cli", "piworkfs")))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--storm", type=int, default=100000,
                    help="denied writes per storm process per round (default 100000)")
    ap.add_argument("--files", type=int, default=2000,
                    help="files in the allowed workload (default 2000)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs, databases)")
    args = ap.parse_args()
    b = Bench(args)
    try:
        b.run()
    finally:
        b.cleanup()


if __name__ == "__main__":
    main()
