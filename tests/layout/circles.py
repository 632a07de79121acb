#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Which files of a room call or include each other in a circle, and whether a layer reaches up.

Calls: for every object in OBJDIR (a meson `*.a.p` directory; several may be given), `nm`
gives the functions and variables it defines and the ones it uses; file A depends on file
B when A uses a symbol B defines. A circle is a strongly connected component of more than
one file.

Includes: with --src ROOT, every room (each directory under the layers: base/, policy/,
policy/bash/, fs/, fs/ctl/, fs/store/, cli/, ...) is checked over the project's own
#include "x.h" lines, resolved as the compiler does (the including file's directory, then
the layer's include path), where x.h belongs to x.c (a header without a .c is a node of its
own). A circle among the files of one room fails. So does an include that runs back up the
layers, base <- policy <- fs <- cli: base includes nothing above it, policy nothing from fs
or cli, fs nothing from cli; and cli includes of fs only its public headers (FS_PUBLIC).

Prints one line per circle (files sorted) and per upward include, or "no circles but the
known ones"; exits 1 when there is one not listed with --known (for a test), 0 otherwise.

    tests/layout/circles.py build/fs/libpwfs.a.p build/cli/piworkfs.p --src .
"""
import argparse
import functools
import os
import re
import subprocess
import sys


@functools.lru_cache(maxsize=None)
def _symbols_in(objdir):
    names = sorted(f for f in os.listdir(objdir) if f.endswith(".o"))
    if not names:
        return {}
    out = subprocess.run(["nm", "--"] + names, cwd=objdir, capture_output=True, text=True,
                         check=True).stdout
    objs = {n: (set(), set()) for n in names}
    cur = names[0] if len(names) == 1 else None  # nm names each file only when given several
    for line in out.splitlines():
        if line.endswith(":") and line[:-1] in objs:
            cur = line[:-1]
            continue
        parts = line.split()
        if cur is None:
            continue
        if len(parts) == 3 and parts[1] in "TDBRC":
            objs[cur][0].add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            objs[cur][1].add(parts[1])
    return objs


def symbols_in(objdir):
    """{object's file name: (symbols it defines, symbols it uses)} for every object in OBJDIR,
    from one `nm` run over them all: one run per object (about 130) took over the test's
    two minutes on a loaded machine, nearly all of it starting processes. Read once per
    directory and process (check_layout.py runs every check that reads a directory on one
    reading); the answer is shared, so callers must not change it."""
    return _symbols_in(os.path.realpath(objdir))


def call_graph(objdir, prefix):
    objs = {f[:-len(".c.o")]: syms for f, syms in symbols_in(objdir).items()
            if f.startswith(prefix)}
    owner = {}
    for name, (defined, _) in objs.items():
        for s in defined:
            owner[s] = name
    return {a: {owner[s] for s in used if s in owner and owner[s] != a}
            for a, (_, used) in objs.items()}


# The layers, lowest first, and each one's include path (meson's include_directories).
LAYERS = ["base", "policy", "fs", "cli"]
SEARCH = {
    "base": ["base"],
    "policy": ["policy", "policy/bash", "base"],
    "fs": ["fs", "base", "policy", "policy/bash"],
    "cli": ["cli", "fs", "base", "policy", "policy/bash"],
}
INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)
# What cli/ may include of fs/: its public headers (docs/ARCHITECTURE.md). The rest of fs/
# is the daemon's inside.
FS_PUBLIC = {"fs/fs", "fs/daemon", "fs/ctl/sockets", "fs/ctl/run_id", "fs/ctl/events",
             "fs/store/state", "fs/store/reader"}


def layer_of(rel):
    return rel.split("/", 1)[0]


def sources(root):
    """Every .c and .h under the layers, as paths relative to ROOT."""
    out = []
    for layer in LAYERS:
        for d, _, files in os.walk(os.path.join(root, layer)):
            for f in files:
                if f.endswith((".c", ".h")):
                    out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out)


def resolve(root, rel, name):
    """The file #include "NAME" in REL opens (relative to ROOT), or None (a system or a
    third-party header). Tries the compiler's order, then the other layers, so an include
    of a layer above is found and reported rather than ignored."""
    here = os.path.dirname(rel)
    order = [here] + SEARCH[layer_of(rel)]
    order += [d for layer in LAYERS for d in SEARCH[layer] if d not in order]
    for d in order:
        cand = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def node(rel):
    """x.c and x.h are one node: fs/ctl/server.c and fs/ctl/server.h are fs/ctl/server."""
    return rel[:-2]


def include_edges(root):
    """(from node, to node) for every resolved #include between two different nodes."""
    edges = set()
    for rel in sources(root):
        for m in INCLUDE.finditer(open(os.path.join(root, rel)).read()):
            target = resolve(root, rel, m.group(1))
            if target and node(target) != node(rel):
                edges.add((node(rel), node(target)))
    return edges


def room_graphs(edges):
    """Per room (a directory), the graph of its own files' includes."""
    rooms = {}
    for a, b in edges:
        ra, rb = os.path.dirname(a), os.path.dirname(b)
        rooms.setdefault(ra, {}).setdefault(os.path.basename(a), set())
        if ra == rb:
            rooms[ra][os.path.basename(a)].add(os.path.basename(b))
    return rooms


def private_fs(edges):
    """The includes by cli/ of an fs/ header that is not public."""
    return sorted((a, b) for a, b in edges
                  if layer_of(a) == "cli" and layer_of(b) == "fs" and b not in FS_PUBLIC)


def upward(edges):
    """The includes that run back up the layers."""
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    return sorted((a, b) for a, b in edges if rank[layer_of(b)] > rank[layer_of(a)])


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


def check(objdirs, prefix="", exclude_prefixes=(), src=None, known=()):
    """(offences, known circles found): the call circles among the objects of OBJDIRS named
    PREFIX* (less those named by EXCLUDE_PREFIXES) and, with SRC, the include circles of every
    room and the includes that break the layering, as lines to print. A circle in KNOWN (a
    set of sorted tuples of files) is not an offence."""
    bad, seen_known = [], []

    def report(kind, c):
        (seen_known if tuple(c) in known else bad).append(kind + " " + " ".join(c))

    for objdir in objdirs:
        g = call_graph(objdir, prefix)
        for x in exclude_prefixes:
            g = {a: {b for b in d if not b.startswith(x)} for a, d in g.items()
                 if not a.startswith(x)}
        for c in circles(g):
            report("calls:", c)
    if src:
        edges = include_edges(src)
        for room, g in sorted(room_graphs(edges).items()):
            for c in circles(g):
                report("includes in %s/:" % room, c)
        for a, b in upward(edges):
            bad.append("layering: %s includes %s, a layer above it" % (a, b))
        for a, b in private_fs(edges):
            bad.append("layering: %s includes %s, not one of fs/'s public headers" % (a, b))
    return bad, seen_known


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("objdir", nargs="*", help="meson object directories for the call graph")
    ap.add_argument("--prefix", default="", help="only objects whose name starts so "
                    "(meson names fs/ctl/x.c ctl_x.c.o)")
    ap.add_argument("--exclude-prefix", action="append", default=[])
    ap.add_argument("--src", help="the source root: check every room's includes and the "
                    "layering")
    ap.add_argument("--known", action="append", default=[],
                    help="a circle left for later (its files, space-separated, as printed): "
                    "printed, not a failure while it stays exactly this circle")
    args = ap.parse_args()
    known = {tuple(sorted(k.split())) for k in args.known}
    bad, seen_known = check(args.objdir, args.prefix, args.exclude_prefix, args.src, known)
    for line in seen_known:
        print(line, "(known)")
    for line in bad:
        print(line)
    if not bad:
        print("no circles but the known ones")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
