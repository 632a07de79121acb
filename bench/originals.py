#!/usr/bin/env python3
"""What keeping originals costs: the write workloads through a view in build mode with
originals kept (the default) and with `mount --no-originals`, side by side in one run.

Two identical backing trees, each with its own view and state directory (beside the
backing trees, so on the same filesystem: files removed are kept by a link there). Each
round runs every workload on every view, each view taking each place in the order in turn
(what a run leaves slows the next one: ext4 skips recently deleted inodes), so a noisy
neighbour hurts all alike; and everything is synced before each timed run (untimed), so a
run's writeback, such as the large file's kept copy, is not billed to the next workload
(make -j2 read 1.12 to 1.18 right after the overwrite, 0.85 to 0.88 on its own). Before
every timed run the kept view starts a new change set (`piworkfs
checkpoint`, untimed): each run is the first change of its files, the costly case.

Workloads: create+delete of N small files, an overwrite in place of a large file (its first
overwrite in a change set keeps one copy of it, or a reflink where the filesystem can; the
kept view's size cap is raised above the file for that),
`make -j2` of a small C project, `git checkout` of another branch over a tree (modified,
deleted and new files) and back, and `grep -r` over the tree (a read: nothing to keep).
Prints the median per workload, the ratio kept/not kept, the daemon's CPU time per run
(steadier than wall time on a busy machine), and how big the store grew.

With `--baseline REV` (as in bench.py: commit REV built in a worktree that is removed after
the build) two more views run REV's build, off and on, in the same rounds, and the table puts
its columns beside this build's. The table is printed in markdown.

Speed is reported, never asserted: these are figures for people, not a test.
    bench/originals.py --piworkfs build/cli/piworkfs                      # the full run
    bench/originals.py --piworkfs build/cli/piworkfs --small              # a quick check
    bench/originals.py --piworkfs build/cli/piworkfs --baseline 26477bf   # before and after
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import (GIT_ENV, build_baseline, create_delete, drop_output,  # noqa: E402
                   make_c_project, make_tree, sh)


def make_backing(root, files, big_mib):
    """A git tree with a second branch that changes a third of its files, deletes a tenth
    and adds new ones; a C project; a large file to overwrite."""
    tree = os.path.join(root, "tree")
    make_tree(tree, files)
    sh(["git", "config", "gc.auto", "0"], cwd=tree, env=GIT_ENV)
    sh(["git", "branch", "-M", "main"], cwd=tree, env=GIT_ENV)
    sh(["git", "checkout", "-qb", "other"], cwd=tree, env=GIT_ENV)
    names = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(tree) if ".git" not in dp
                   for f in fs)
    for i, p in enumerate(names):
        if i % 10 == 0:
            os.unlink(p)
        elif i % 3 == 0:
            with open(p, "a") as f:
                f.write("/* changed on the other branch */\n")
    for i in range(max(1, files // 20)):
        with open(os.path.join(tree, f"new{i}.c"), "w") as f:
            f.write(f"int new{i};\n")
    sh(["git", "add", "-A"], cwd=tree, env=GIT_ENV)
    sh(["git", "commit", "-qm", "other"], cwd=tree, env=GIT_ENV)
    sh(["git", "checkout", "-q", "main"], cwd=tree, env=GIT_ENV)
    # The first commit may have started `git gc --auto` in the background: let it finish
    # before the tree is copied (it removes loose objects as it packs them).
    deadline = time.time() + 300
    while os.path.exists(os.path.join(tree, ".git", "gc.pid")) and time.time() < deadline:
        time.sleep(0.5)
    make_c_project(os.path.join(root, "cproj"))
    os.makedirs(os.path.join(root, "io"))
    os.makedirs(os.path.join(root, "scratch"))
    drop_output(f"dd if=/dev/urandom of=big.bin bs=1M count={big_mib} 2>/dev/null",
                os.path.join(root, "io"))


def w_create_delete(root, n):
    create_delete(os.path.join(root, "scratch", "cd"), n)


def w_overwrite(root, big_mib):
    drop_output(f"dd if=/dev/zero of=big.bin bs=1M count={big_mib} conv=notrunc 2>/dev/null",
                os.path.join(root, "io"))


def one_copy(backing):
    """The bound for a first overwrite: one copy of the file, fsync'd (native, untouched by
    any view: the copy is made beside it and removed)."""
    io = os.path.join(backing, "io")
    t = time.perf_counter()
    drop_output("cp --reflink=auto big.bin ../scratch/ref.bin && sync ../scratch/ref.bin", io)
    took = time.perf_counter() - t
    os.unlink(os.path.join(backing, "scratch", "ref.bin"))
    return took


def w_make(root, _):
    drop_output("make -s clean && make -s -j2", os.path.join(root, "cproj"))


def w_checkout(root, _):
    tree = os.path.join(root, "tree")
    drop_output("git checkout -q other && git checkout -q main", tree)


def w_grep(root, _):
    drop_output("grep -r -l zzzz_not_there . ; test $? -eq 1", os.path.join(root, "tree"))


class View:
    def __init__(self, name, base, piworkfs, env, keep, max_file_mib=0):
        self.name, self.piworkfs, self.keep = name, piworkfs, keep
        self.max_file_mib = max_file_mib
        self.backing = os.path.join(base, name, "backing")
        self.mnt = os.path.join(base, name, "view")
        self.state = os.path.join(base, name, "state", "state.db")
        self.env = dict(env)
        self.env["PIWORKFS_STATE_DB"] = self.state

    def pw(self, *args, check=True):
        return subprocess.run([self.piworkfs] + list(args), env=self.env, check=check,
                              capture_output=True, text=True)

    def mount(self):
        os.makedirs(self.mnt, exist_ok=True)
        args = ["mount", "--mode", "build", "--state-db", self.state]
        if not self.keep:
            args.append("--no-originals")
        elif self.max_file_mib:
            args += ["--originals-max-file", f"{self.max_file_mib}M"]
        self.pw(*args, self.backing, self.mnt)

    def umount(self):
        self.pw("umount", self.mnt, check=False)

    def find_pid(self):
        """The daemon's pid, from `status` (every view of the run shares one runtime dir)."""
        # check=False: another view of the run may not answer yet (exit 4); this one does.
        for st in json.loads(self.pw("status", "--json", check=False).stdout or "[]"):
            if st.get("mountpoint") == self.mnt and st.get("pid"):
                self.pid = st["pid"]
                return
        raise RuntimeError(f"no status for {self.mnt}")

    def cpu(self):
        """The daemon's CPU seconds so far (user + system, every thread)."""
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def checkpoint(self):
        if self.keep:
            self.pw("checkpoint", "--mount", self.mnt)

    def store(self):
        """(bytes of the contents kept, blobs, bytes on disk of originals/)."""
        p = self.pw("changes", "--json", "--mount", self.mnt, check=False)
        if p.returncode != 0:  # a figure missing, not the whole run's table
            print(f"{self.name}: `changes` failed with {p.returncode}: {p.stderr.strip()}",
                  file=sys.stderr)
            return None
        res = json.loads(p.stdout)
        d = os.path.join(os.path.dirname(self.state), "originals")
        du = int(subprocess.check_output(["du", "-sk", d], text=True).split()[0]) * 1024
        return res["store"]["bytes"], res["store"]["blobs"], du


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--piworkfs", required=True)
    ap.add_argument("--modes", help="the bundled modes directory")
    ap.add_argument("--files", type=int, default=5000, help="files in the git tree (5000)")
    ap.add_argument("--creates", type=int, default=5000, help="files created and deleted (5000)")
    ap.add_argument("--big-mib", type=int, default=1024, help="the overwritten file, MiB (1024)")
    ap.add_argument("--rounds", type=int, default=5,
                    help="rounds (5); a multiple of the number of views (2, or 4 with "
                         "--baseline) puts each view in each place equally often")
    ap.add_argument("--small", action="store_true",
                    help="a quick check: 500 files, 500 creates, 64 MiB, 2 rounds")
    ap.add_argument("--dir", help="work directory (default: a new one under /var/tmp)")
    ap.add_argument("--only", action="append",
                    help="run only the workloads whose name starts with this (repeatable)")
    ap.add_argument("--json", help="also write the results as JSON to this file")
    ap.add_argument("--baseline", metavar="REV",
                    help="also run commit REV's build (built in a git worktree under the work "
                         "directory, removed after the build), off and on, beside this one")
    args = ap.parse_args()
    if args.small:
        args.files, args.creates, args.big_mib, args.rounds = 500, 500, 64, 2

    base = args.dir or tempfile.mkdtemp(prefix="piworkfs-originals-", dir="/var/tmp")
    print(f"work directory: {base}", flush=True)
    env = dict(os.environ)
    env["XDG_RUNTIME_DIR"] = os.path.join(base, "run")
    env["XDG_CONFIG_HOME"] = os.path.join(base, "config")
    if args.modes:
        env["PIWORKFS_MODES_DIR"] = os.path.abspath(args.modes)  # the daemon's cwd is /
    os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)
    # The size cap (64 MiB by default) is raised above the large file, so that its first
    # overwrite is kept and the copy measured: the default would record it, not keep it.
    views = [View("off", base, args.piworkfs, env, False),
             View("on", base, args.piworkfs, env, True, max_file_mib=2 * args.big_mib)]
    before = None  # the baseline's label
    if args.baseline:
        bprog, bmodes, short = build_baseline(args.baseline, base)
        before = f"@{short}"
        benv = dict(env, PIWORKFS_MODES_DIR=bmodes)
        views += [View("off" + before, base, bprog, benv, False),
                  View("on" + before, base, bprog, benv, True, max_file_mib=2 * args.big_mib)]
    first = views[0].backing
    print(f"making the backing trees ({args.files} files, {args.big_mib} MiB)...", flush=True)
    make_backing(first, args.files, args.big_mib)
    for v in views[1:]:
        shutil.copytree(first, v.backing, symlinks=True)

    workloads = [
        (f"create+delete {args.creates}", w_create_delete, args.creates),
        (f"overwrite {args.big_mib} MiB", w_overwrite, args.big_mib),
        ("make -j2", w_make, None),
        ("git checkout", w_checkout, None),
        ("grep -r (read)", w_grep, None),
    ]
    if args.only:
        workloads = [w for w in workloads if any(w[0].startswith(o) for o in args.only)]
    times = {(w[0], v.name): [] for w in workloads for v in views}
    cpu = {(w[0], v.name): [] for w in workloads for v in views}
    copies = []
    try:
        for v in views:
            v.mount()
            v.find_pid()
        for v in views:  # untimed: warm the caches, build once
            w_make(v.mnt, None)
            w_grep(v.mnt, None)
        for rnd in range(args.rounds):
            for wi, (wname, fn, arg) in enumerate(workloads):
                # Each view takes each place in the order in turn (over a multiple of as
                # many rounds as there are views): a run is slowed by what the one before
                # it left (ext4 skips recently deleted inodes, dirty pages are written back),
                # and a view that always ran second or third would carry that alone.
                shift = (rnd + wi) % len(views)
                order = views[shift:] + views[:shift]
                for v in order:
                    v.checkpoint()
                    # Untimed: the dirty pages earlier runs left are written back now, so
                    # the writeback of one run (the large file's kept copy is 1 GiB) is
                    # not billed to whichever workload follows it.
                    os.sync()
                    c = v.cpu()
                    t = time.perf_counter()
                    fn(v.mnt, arg)
                    times[(wname, v.name)].append(time.perf_counter() - t)
                    cpu[(wname, v.name)].append(v.cpu() - c)
            copies.append(one_copy(first))
            print(f"round {rnd + 1}/{args.rounds} done", flush=True)
        kept_bytes, blobs, du = views[1].store() or (0, 0, 0)
        bstore = views[3].store() if before else None
    finally:
        for v in views:
            v.umount()

    rows = []
    print()
    print(f"Medians over {args.rounds} interleaved rounds ({args.files}-file tree)")
    hdr = "| workload | originals off | originals on | on/off |"
    if before:
        hdr += f" off{before} | on{before} | on/off{before} |"
    print(hdr)
    print("|---" + "|---:" * (hdr.count("|") - 2) + "|")
    for wname, _, _ in workloads:
        off = statistics.median(times[(wname, "off")])
        on = statistics.median(times[(wname, "on")])
        row = {"workload": wname, "off_s": off, "on_s": on, "ratio": on / off}
        line = f"| {wname} | {off:.3f}s | {on:.3f}s | {on / off:.2f} |"
        if before:
            boff = statistics.median(times[(wname, "off" + before)])
            bon = statistics.median(times[(wname, "on" + before)])
            row.update({"before_off_s": boff, "before_on_s": bon, "before_ratio": bon / boff})
            line += f" {boff:.3f}s | {bon:.3f}s | {bon / boff:.2f} |"
        rows.append(row)
        print(line)
    # The daemon's own CPU time per run: what keeping costs the daemon, much steadier than
    # wall time on a busy machine (a tick is 10 ms: read it over many files).
    print(f"\nDaemon CPU per run (user + system, medians), originals off / on / on-off")
    for wname, _, _ in workloads:
        line = f"- {wname}:"
        for suffix in [""] + ([before] if before else []):
            off = statistics.median(cpu[(wname, "off" + suffix)])
            on = statistics.median(cpu[(wname, "on" + suffix)])
            rows[[r["workload"] for r in rows].index(wname)].update(
                {f"cpu_off{suffix}_s": off, f"cpu_on{suffix}_s": on})
            line += f" {suffix or 'this build'} {off:.2f}s / {on:.2f}s / {on - off:+.2f}s;"
        print(line.rstrip(";"))
    print(f"\none copy of the large file (cp + fsync, native): {statistics.median(copies):.3f}s")
    print(f"\nstore after {args.rounds} rounds ({args.rounds * len(workloads)} change sets): "
          f"{kept_bytes / 2**20:.1f} MiB in {blobs} blobs (content), "
          f"{du / 2**20:.1f} MiB on disk under originals/ (links to removed files count "
          f"there, not twice)")
    if bstore:
        print(f"store of on{before}: {bstore[0] / 2**20:.1f} MiB in {bstore[1]} blobs, "
              f"{bstore[2] / 2**20:.1f} MiB on disk")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "one_copy_s": statistics.median(copies), "rounds": args.rounds, "store_bytes": kept_bytes,
                       "store_blobs": blobs, "store_du": du, "baseline": before,
                       "before_store": bstore}, f, indent=1)


if __name__ == "__main__":
    main()
