#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Whether cli/ shows its parts: the commands at its top, and each other part in its room.

cli/ holds four different things (docs/ARCHITECTURE.md "cli/"): the commands (cmd_*.c and
what they share: options, output, the project), the control-socket client (client/), the
launcher of `piworkfs run` and `mount --fuse-fd` (run/), and the agent side: the MCP server,
the hooks and their texts (agent/). A launcher, agent or client file at cli/'s top hides
that shape again, so this fails on any, naming it and the room it belongs in. Each room must
have its face, the one header the rest of cli/ includes (room_interface.py checks that
nothing else of the room is reached).

    tests/layout/cli_rooms.py SRCDIR
"""
import os
import re
import sys

from verdict import verdict  # the closing every layout check shares (this directory)
# Room -> (its face, the names at cli/'s top that belong in it).
ROOMS = {
    "run": ("run.h", re.compile(r"^(run_|podman|sandbox|pty|tty|mount_fd|launch)")),
    "agent": ("agent.h", re.compile(r"^(mcp|hook|cmd_mcp|cmd_hook|agent)")),
    "client": ("ctl_client.h", re.compile(r"^(ctl_client|client)")),
}


def check(src):
    """(offences, what holds when there is none) for cli/ under SRC."""
    cli = os.path.join(src, "cli")
    bad = []
    for room, (face, pattern) in ROOMS.items():
        if not os.path.isfile(os.path.join(cli, room, face)):
            bad.append(f"cli/{room}/ has no face: cli/{room}/{face} is missing")
    for name in sorted(os.listdir(cli)):
        if not name.endswith((".c", ".h")):
            continue
        for room, (_, pattern) in ROOMS.items():
            if pattern.match(name):
                bad.append(f"cli/{name} belongs in cli/{room}/")
    return bad, ("cli/: the commands at the top; run/, agent/ and client/ in rooms, "
                 "each with its face")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    return verdict(*check(sys.argv[1]))


if __name__ == "__main__":
    sys.exit(main())
