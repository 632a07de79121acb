#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Whether the texts agents read are written once (docs/ARCHITECTURE.md, "Texts written
once"): every wording of policy/agent_text.c (the announcement, the mode section, the
refusal lines, a blocked command's, the overlap note, the plan line) lives there and nowhere
else in the sources that talk to agents: the Pi extension (integrations/pi: it asks the
daemon's text.* methods), the opencode plugin and the rest of cli/ (the MCP server and the
hooks call policy/agent_text.h). A copy elsewhere is a second wording that will drift from
the first, and the prompt cache and the promise that every agent reads the same bytes go
with it. So this fails on any such copy, naming the file and the words.

A wording is a run of at least MIN characters of one C string literal (adjacent literals
joined), cut at each printf conversion: "%s mode refuses. Nothing ran" gives the fragment
" mode refuses. Nothing ran" and the search is for that text.

    tests/layout/texts_once.py SRCDIR
"""
import os
import re
import sys

from verdict import verdict  # the closing every layout check shares (this directory)

MIN = 24
SOURCE = os.path.join("policy", "agent_text.c")
# Where an agent's words could be written again.
SEARCHED = (("integrations", (".ts", ".js", ".mjs")), ("cli", (".c", ".h")))

LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
# Between two literals that C joins: white space, comments, a macro's line continuation.
JOINER = re.compile(r'^(?:\s|\\\n|/\*.*?\*/)*$', re.S)
CONVERSION = re.compile(r"%[-+ #0]*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|z|j|t)?[diouxXcsp%]")
ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


def literals(text):
    """The C string literals of TEXT, adjacent ones joined, escapes undone."""
    out, last_end = [], None
    for m in LITERAL.finditer(text):
        value = re.sub(r"\\(.)", lambda e: ESCAPES.get(e.group(1), e.group(1)), m.group(1))
        if last_end is not None and JOINER.match(text[last_end:m.start()]):
            out[-1] += value
        else:
            out.append(value)
        last_end = m.end()
    return out


def wordings(text):
    """The fragments of at least MIN characters of TEXT's literals, between conversions."""
    frags = set()
    for lit in literals(text):
        for frag in CONVERSION.split(lit):
            for line in frag.split("\n"):
                if len(line.strip()) >= MIN:
                    frags.add(line)
    return frags


def check(src):
    """(offences, what holds when there is none) for the sources under SRC."""
    with open(os.path.join(src, SOURCE), encoding="utf-8") as f:
        words = wordings(f.read())
    if len(words) < 30:
        return [f"texts_once: only {len(words)} wordings found in {SOURCE}: the parser is "
                "broken"], ""
    bad = []
    for top, exts in SEARCHED:
        for root, dirs, files in os.walk(os.path.join(src, top)):
            dirs[:] = sorted(d for d in dirs if d != "node_modules")
            for name in sorted(files):
                if not name.endswith(exts):
                    continue
                path = os.path.join(root, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for w in sorted(words):
                    if w in text:
                        bad.append(f"written twice (the words live in {SOURCE} only): "
                                   f"{os.path.relpath(path, src)}: {w.strip()!r}")
    return bad, f"the texts agents read are written once, in {SOURCE}"


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    return verdict(*check(sys.argv[1]))


if __name__ == "__main__":
    sys.exit(main())
