#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every layout check of tests/layout, in one process: the `layout` test of the unit suite.

Each check is a rule of the tree's shape (the table CHECKS below says which and why) and
keeps the name it had as a test of its own (layout-circles, layout-store-sql, ...). They
ran as ten tests, each starting Python and most running nm over the same objects: about 7 s
of every round of the unit suite, nearly all of it starting processes. Here Python starts
once and nm runs once per object directory (circles.symbols_in keeps what it read), and
every check still runs: one that fails, or breaks, does not stop the others. Prints each
check's name and either what holds or every offence; exits 1 when any check failed.

    tests/layout/check_layout.py --src . --base build/base/libpwbase.a.p \\
        --policy build/policy/libpwpolicy.a.p --fs build/fs/libpwfs.a.p \\
        --cli build/cli/piworkfs.p

Each check also runs alone by its own script (circles.py, room_interface.py, ...).
"""
import argparse
import os
import sys
import traceback

import circles
import cli_rooms
import room_interface
import store_sql
import tests_rooms
import texts_once


def no_circles(holds, *args, **kw):
    """circles.check's offences, and HOLDS when there is none (no circle is known here)."""
    bad, _known = circles.check(*args, **kw)
    return bad, holds


def checks(a):
    """[(name, what it checks, a function returning (offences, what holds))] over the
    directories in A (the parsed arguments)."""
    src = a.src

    def undo_h(name):
        return os.path.join(src, "fs", "undo", name)

    def cli_h(*parts):
        return os.path.join(src, "cli", *parts)

    return [
        # The layering: no two files of a room (base/, policy/, policy/bash/, fs/, fs/ctl/,
        # fs/store/, fs/undo/, cli/) call each other in a circle or include each other in
        # one, and no #include runs back up the layers base <- policy <- fs <- cli. No known
        # circles are left: every one fails. The last two went in issue #30: devio.c and
        # uring.c (what both do with a request they receive is transport.c's, and uring.c
        # calls nothing of devio.c), and ctl/jobs.c and ctl/server.c (the jobs wake the
        # server and answer through a host it gives them, jobs.h; the server calls and
        # includes jobs, never the reverse).
        ("layout-circles", "no call or include circle in a room; the layers only look down",
         lambda: no_circles("no circles; no include runs up the layers",
                            [a.base, a.policy, a.fs, a.cli], src=src)),
        # The undo room (fs/undo/): no call circle inside it (its includes are
        # layout-circles'), and the rest of fs/ reaches it only through its interface,
        # undo.h (the FUSE layer's hooks), node.h (the inode's undo state, which pw_inode
        # embeds) and changes.h (the daemon registers the control methods): never the store
        # of originals, its journal or keep.h (the room's inside).
        ("layout-circles-undo", "no call circle inside fs/undo/",
         lambda: no_circles("no call circle among undo_*", [a.fs], prefix="undo_")),
        ("layout-undo-interface", "the rest of fs/ reaches fs/undo/ only through its faces",
         lambda: room_interface.check(a.fs, "undo_", [undo_h("undo.h"), undo_h("changes.h"),
                                                      undo_h("node.h")])),
        # Every SQL statement lives in fs/store/ (no sqlite3_ name in a source of fs/ outside
        # it, no sqlite3_ call from an object outside it), and in the undo room only the
        # methods (fs/undo/changes.c) know the control server (issue #45).
        ("layout-store-sql", "SQL only in fs/store/; only fs/undo/changes.c knows fs/ctl/",
         lambda: store_sql.check(a.fs, os.path.join(src, "fs"))),
        # cli/ in rooms (issue #45): no file of the launcher, the agent side or the socket
        # client at cli/'s top, and the rest of cli/ reaches each room only through its
        # face: run/run.h, agent/agent.h, client/ctl_client.h (meson names cli/run/x.c's
        # object run_x.c.o).
        ("layout-cli-rooms", "cli/'s launcher, agent side and client in their rooms",
         lambda: cli_rooms.check(src)),
        ("layout-cli-run-interface", "the rest of cli/ reaches cli/run/ only through run.h",
         lambda: room_interface.check(a.cli, "run_", [cli_h("run", "run.h")])),
        ("layout-cli-agent-interface", "the rest of cli/ reaches cli/agent/ only through "
         "agent.h", lambda: room_interface.check(a.cli, "agent_", [cli_h("agent", "agent.h")])),
        ("layout-cli-client-interface", "the rest of cli/ reaches cli/client/ only through "
         "ctl_client.h",
         lambda: room_interface.check(a.cli, "client_", [cli_h("client", "ctl_client.h")])),
        # The texts agents read are written once (issue #45): no wording of
        # policy/agent_text.c in the Pi extension, the opencode plugin or the rest of cli/
        # (they ask the daemon, or call it).
        ("layout-texts-once", "no wording of policy/agent_text.c written again",
         lambda: texts_once.check(src)),
        # tests/ mirrors the rooms of the code (issue #45): each folder of tests/ names a
        # room (or is listed with why it holds no single room's tests), and no test outside
        # the launcher's and its users' folders starts `piworkfs run` or `mount --fuse-fd`.
        ("layout-tests-rooms", "tests/ mirrors the rooms of the code",
         lambda: tests_rooms.check(src)),
    ]


def run_one(name, what, fn):
    """Runs one check and prints its verdict; True when it holds."""
    try:
        bad, holds = fn()
    except Exception:  # a broken check fails, and the others still run
        bad, holds = ["the check broke:"] + traceback.format_exc().splitlines(), ""
    if bad:
        print(f"{name}: FAILED ({what})")
        for line in bad:
            print(f"  {line}")
        return False
    print(f"{name}: ok: {holds}")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", required=True, help="the source root")
    for layer in ("base", "policy", "fs", "cli"):
        ap.add_argument("--" + layer, required=True, help=f"meson's object directory of {layer}/")
    a = ap.parse_args()
    failed = [name for name, what, fn in checks(a) if not run_one(name, what, fn)]
    if failed:
        print(f"layout: {len(failed)} of {len(checks(a))} checks failed: " + ", ".join(failed))
        return 1
    print(f"layout: all {len(checks(a))} checks hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
