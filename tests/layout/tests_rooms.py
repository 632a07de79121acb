#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Whether tests/ mirrors the rooms of the code (issue #45, item 5).

A room's tests sit in the folder named for it (tests/run for cli/run, tests/undo for fs/undo,
tests/pi for integrations/pi), so a newcomer who reads a room finds its tests by its name,
and a test of one room in another's folder is a wrong turn on the map. This fails on:

  - a folder of tests/ that names no room of the code and is not one of the few folders
    that hold no room's tests (the shared harness, the fixtures, the end-to-end folders
    that cross rooms, listed below with why), or an entry of those lists that is gone;
  - a test of the launcher (`piworkfs run`, `mount --fuse-fd`: cli/run) outside the folders
    of the rooms that start it: tests/mount, tests/security and the other folders of the
    daemon test the view, and a test there that starts the launcher belongs in tests/run
    (test_fuse_fd.py sat in tests/mount until issue #45).

A room of the code is a folder outside tests/, docs/, demo/, third_party/ and the build that
holds source: C, TypeScript, JavaScript, Python or shell.

    tests/layout/tests_rooms.py SRCDIR
"""
import os
import re
import sys

from verdict import verdict  # the closing every layout check shares (this directory)
SOURCE = (".c", ".h", ".ts", ".mjs", ".js", ".py", ".sh")
NOT_CODE = {"tests", "docs", "demo", "third_party", "node_modules", "subprojects"}

# Folders of tests/ whose name is not a room's, each with the room it tests.
NAMED = {
    "agents": "cli/agent",  # one end-to-end test per agent client, over the agent side
}

# Folders of tests/ that hold no single room's tests, and why.
ACROSS = {
    "lib": "the shared harness of the tests (harness.py, run_case.py; fixture_tree.h and "
           "testdir.h for C)",
    "fixtures": "mode files and configurations the tests load",
    "layout": "the shape of the tree itself: layering, circles, rooms",
    "mount": "the view through a real mount: the FUSE layer with fs/ctl, fs/store, fs/undo",
    "security": "attacks found in review, each through a real view, whatever room it hit",
    "audit": "the audit log end to end: the FUSE layer's denials, the store, `piworkfs log`",
    "memory": "the daemon's memory under a large tree, through a real mount",
    "container": "the launcher's Podman and integrations/kubernetes' pod, on a real Podman",
}

# The folders whose tests start the launcher (cli/run): its own, and the rooms that run
# under it or name its errors (the agents, Pi, Podman, the commands' messages); layout/ is
# this file, which names what it looks for.
LAUNCHER_USERS = {"run", "container", "agents", "pi", "cli", "lib", "layout"}
LAUNCHER_START = re.compile(r'PIWORKFS\w*\s*,\s*"run"|"--fuse-fd"|"__run-tty"|pw\("run"')


def code_rooms(src):
    """{path relative to SRC} of every folder holding source, outside NOT_CODE."""
    rooms = set()
    for top in os.listdir(src):
        if top.startswith(".") or top in NOT_CODE or top.startswith("build"):
            continue
        for d, dirs, files in os.walk(os.path.join(src, top)):
            dirs[:] = [x for x in dirs if not x.startswith(".") and x not in NOT_CODE]
            if any(f.endswith(SOURCE) for f in files):
                rooms.add(os.path.relpath(d, src))
    return rooms


def misplaced_folders(src, folders):
    """A line per folder of tests/ that names no room, and per stale list entry."""
    rooms = code_rooms(src)
    names = {os.path.basename(r) for r in rooms}
    bad = []
    for name in folders:
        if name in ACROSS:
            continue
        room = NAMED.get(name)
        if room is not None and room not in rooms:
            bad.append(f"tests/{name}/ tests {room}/, which holds no code")
        elif room is None and name not in names:
            bad.append(f"tests/{name}/ names no room of the code (rooms: "
                       + ", ".join(sorted(rooms)) + ")")
    for name in sorted(set(NAMED) | set(ACROSS)):
        if name not in folders:
            bad.append(f"tests/{name}/ is listed in tests_rooms.py but is gone")
    return bad


def misplaced_launcher_tests(tests, folders):
    """A line per test file outside LAUNCHER_USERS that starts the launcher."""
    bad = []
    for name in folders:
        if name in LAUNCHER_USERS:
            continue
        for d, dirs, files in os.walk(os.path.join(tests, name)):
            dirs[:] = [x for x in dirs if x != "node_modules"]
            for f in sorted(files):
                if not f.endswith(".py"):
                    continue
                path = os.path.join(d, f)
                with open(path, encoding="utf-8") as fh:
                    m = LAUNCHER_START.search(fh.read())
                if m:
                    bad.append(f"{os.path.relpath(path, os.path.dirname(tests))} starts the "
                               f"launcher ({m.group(0)}): it belongs in tests/run/")
    return bad


def check(src):
    """(offences, what holds when there is none) for tests/ under SRC."""
    tests = os.path.join(src, "tests")
    folders = sorted(n for n in os.listdir(tests)
                     if os.path.isdir(os.path.join(tests, n)) and not n.startswith("."))
    bad = misplaced_folders(src, folders) + misplaced_launcher_tests(tests, folders)
    return bad, (f"tests/: {len(folders)} folders, each a room's or listed with why; "
                 "the launcher tested where it lives")


def main():
    args = sys.argv[1:]
    if len(args) != 1:
        sys.exit(__doc__)
    return verdict(*check(args[0]))


if __name__ == "__main__":
    sys.exit(main())
