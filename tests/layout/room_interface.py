#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Whether the rest of a library reaches a room only through the room's interface headers.

OBJDIR is a meson `*.a.p` directory; the room's objects are those named PREFIX* (meson names
fs/undo/x.c undo_x.c.o). Every symbol the room defines and an object outside it uses must be
declared in one of the HEADERs: the room's interface. And every #include "DIR/x.h" of a
source outside the room's folder (DIR, the folder of the first HEADER, below SRCDIR, its
parent) names one of the HEADERs. Prints each use past the interface, or "only through
..."; exits 1 when there is one.

    tests/layout/room_interface.py build/fs/libpwfs.a.p undo_ fs/undo/undo.h fs/undo/changes.h
"""
import os
import re
import sys

from verdict import verdict  # the closing every layout check shares (this directory)
from circles import symbols_in  # the same reading of nm's output (this directory)


def declared(headers):
    names = set()
    for h in headers:
        names.update(re.findall(r"\b[A-Za-z_]\w*\b", open(h).read()))
    return names


def check(objdir, prefix, headers):
    """(offences, what holds when there is none) for the room of PREFIX* in OBJDIR, whose
    interface is HEADERS."""
    objs = symbols_in(objdir)
    room = set()
    for f, (defined, _) in objs.items():
        if f.startswith(prefix):
            room |= defined
    if not room:
        return [f"no objects named {prefix}* in {objdir}"], ""
    allowed = declared(headers)
    bad = [(f, s) for f, (_, used) in objs.items() if not f.startswith(prefix)
           for s in sorted(used & room) if s not in allowed]
    roomdir = os.path.dirname(os.path.abspath(headers[0]))
    srcdir, room_name = os.path.split(roomdir)
    names = {os.path.basename(h) for h in headers}
    for top, dirs, files in os.walk(srcdir):
        if os.path.abspath(top).startswith(roomdir):
            continue
        for n in sorted(files):
            if not n.endswith((".c", ".h")):
                continue
            text = open(os.path.join(top, n)).read()
            for m in re.finditer(r'^#include "' + re.escape(room_name) + r'/([^"]+)"', text, re.M):
                if m.group(1) not in names:
                    bad.append((os.path.relpath(os.path.join(top, n), srcdir),
                                "#include " + room_name + "/" + m.group(1)))
    return ([f"{f}: {s}" for f, s in bad],
            "only through " + " ".join(os.path.basename(h) for h in headers))


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    return verdict(*check(sys.argv[1], sys.argv[2], sys.argv[3:]))


if __name__ == "__main__":
    sys.exit(main())
