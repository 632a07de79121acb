#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Which files of a room call each other in a circle, from the objects' symbol tables.

For every object in OBJDIR (a meson `*.a.p` directory), `nm` gives the functions and
variables it defines and the ones it uses; file A depends on file B when A uses a symbol B
defines. A circle is a strongly connected component of more than one file. Also, with
--includes SRCDIR, the same over the project's own #include "x.h" lines, where x.h belongs
to x.c. Prints one line per circle (files sorted), or "no circles"; exits 1 when there is
one (for a test), 0 otherwise.

    tests/layout/circles.py build/fs/libpwfs.a.p [--prefix ''] [--includes fs]
"""
import argparse
import os
import re
import subprocess
import sys


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBRC":
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
    return defined, used


def call_graph(objdir, prefix):
    objs = {}
    for f in sorted(os.listdir(objdir)):
        if f.endswith(".o") and f.startswith(prefix):
            objs[f[:-len(".c.o")]] = symbols(os.path.join(objdir, f))
    owner = {}
    for name, (defined, _) in objs.items():
        for s in defined:
            owner[s] = name
    return {a: {owner[s] for s in used if s in owner and owner[s] != a}
            for a, (_, used) in objs.items()}


def include_graph(srcdir):
    files = {f[:-2] for f in os.listdir(srcdir) if f.endswith(".c")}
    graph = {}
    for f in files:
        deps = set()
        for name in (f + ".c", f + ".h"):
            p = os.path.join(srcdir, name)
            if not os.path.exists(p):
                continue
            for m in re.finditer(r'^#include "([^"/]+)\.h"', open(p).read(), re.M):
                if m.group(1) in files and m.group(1) != f:
                    deps.add(m.group(1))
        graph[f] = deps
    return graph


def circles(graph):
    """Tarjan's strongly connected components of more than one node."""
    index, low, stack, on, out = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("objdir")
    ap.add_argument("--prefix", default="", help="only objects whose name starts so "
                    "(meson names fs/ctl/x.c ctl_x.c.o)")
    ap.add_argument("--exclude-prefix", action="append", default=[])
    ap.add_argument("--includes", help="also the #include graph of this source directory")
    ap.add_argument("--known", action="append", default=[],
                    help="a circle left for later (its files, space-separated): printed, "
                    "not a failure while it stays exactly this circle")
    args = ap.parse_args()
    known = {tuple(sorted(k.split())) for k in args.known}
    g = call_graph(args.objdir, args.prefix)
    for x in args.exclude_prefix:
        g = {a: {b for b in d if not b.startswith(x)} for a, d in g.items()
             if not a.startswith(x)}
    found = False
    for c in circles(g):
        ok = tuple(c) in known
        print("calls:", " ".join(c), "(known)" if ok else "")
        found = found or not ok
    if args.includes:
        for c in circles(include_graph(args.includes)):
            ok = tuple(c) in known
            print("includes:", " ".join(c), "(known)" if ok else "")
            found = found or not ok
    if not found:
        print("no circles but the known ones")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
