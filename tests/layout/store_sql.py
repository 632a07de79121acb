#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Two edges of fs/ that must not come back (issue #45):

1. Every SQL statement lives in fs/store/: no source of fs/ outside fs/store/ names an
   sqlite3_ function or type, and no object of the FUSE library but fs/store/'s (meson
   names them store_*) calls one.
2. Only the undo room's methods (fs/undo/changes.c, changes.h) know the control server:
   no other file of fs/undo/ includes a header of fs/ctl/, and no other undo_* object
   calls a pw_ctl_* or pw_view_* function.

Prints each offence, or what holds; exits 1 when there is one.

    tests/layout/store_sql.py build/fs/libpwfs.a.p fs
"""
import os
import re
import sys

from verdict import verdict  # the closing every layout check shares (this directory)
from circles import symbols_in  # the same reading of nm's output (this directory)

UNDO_METHODS = {"changes.c", "changes.h"}


def source_offences(fsdir):
    bad = []
    for top, dirs, files in os.walk(fsdir):
        rel_top = os.path.relpath(top, fsdir)
        for n in sorted(files):
            if not n.endswith((".c", ".h")):
                continue
            path = os.path.join(top, n)
            rel = os.path.normpath(os.path.join("fs", rel_top, n))
            text = open(path).read()
            if rel_top.split(os.sep)[0] != "store":
                for i, line in enumerate(text.splitlines(), 1):
                    if re.search(r"\bsqlite3_\w+", line):
                        bad.append(f"{rel}:{i}: SQL outside fs/store/: {line.strip()}")
            if rel_top == "undo" and n not in UNDO_METHODS:
                for m in re.finditer(r'^#include "ctl/[^"]+"', text, re.M):
                    bad.append(f"{rel}: {m.group(0)}: only changes.c knows the control "
                               "server")
    return bad


def object_offences(objdir):
    bad = []
    for f, (_, used) in symbols_in(objdir).items():
        if not f.startswith("store_"):
            for s in sorted(used):
                if s.startswith("sqlite3_"):
                    bad.append(f"{f}: calls {s} (SQL outside fs/store/)")
        if f.startswith("undo_") and f != "undo_changes.c.o":
            for s in sorted(used):
                if s.startswith(("pw_ctl_", "pw_view_")):
                    bad.append(f"{f}: calls {s} (only changes.c knows the control server)")
    return bad


def check(objdir, fsdir):
    """(offences, what holds when there is none) for the FUSE library's objects in OBJDIR and
    the sources under FSDIR."""
    if not any(f.startswith("store_") for f in os.listdir(objdir)):
        return [f"no objects named store_* in {objdir}"], ""
    bad = source_offences(fsdir) + object_offences(objdir)
    return bad, "no SQL outside fs/store/; only fs/undo/changes.c knows the control server"


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    return verdict(*check(sys.argv[1], sys.argv[2]))


if __name__ == "__main__":
    sys.exit(main())
