# SPDX-License-Identifier: MIT
"""What the end-to-end tests of every agent client share (tests/agents/test_CLIENT.py): the
client's binary on a PATH of the test's own, the state database apart from HOME (`piworkfs
run` covers its directory), the view's status, the recorded requests kept on request, the
mode announcement a design view makes, and typing the answer into run's consent bar.
"""

import json
import os
import time

import harness  # tests/lib, on PYTHONPATH

DEADLINE = 150  # seconds for one Claude Code run


def uniq(xs):
    return list(dict.fromkeys(xs))


def design_announcement(policy):
    """Design mode's announcement, from the daemon's own rules (as tests/pi does)."""
    w = uniq(r["pattern"] for r in policy["rules"] if r["kind"] in ("allow", "token"))
    w = [x for x in w if not (x.endswith("/") and x + "**" in w)]
    prot = uniq(r["pattern"] for r in policy["rules"] if r["kind"] == "protected")
    return ("[piworkfs] Active mode: design. Writable: %s. Read-only: everything else. "
            "Protected: %s." % (", ".join(w), ", ".join(prot)))


def answer_consent(term, allow=True, target="build"):
    """Answers run's consent bar on the outer terminal TERM. The only place that types the
    answer, which is the target mode's name then Enter (any other key denies). Keys in the
    bar's first moments never answer, so the first letter is repeated until the bar shows
    it typed; then the rest of the name, and Enter once the bar says it will allow."""
    end = time.monotonic() + DEADLINE
    first = (target[0] if allow else "#").encode()
    while True:
        at = term.mark()
        term.send(first)
        try:
            term.expect(b"Typed: " + first if allow else b"denied", at, deadline=3)
            break
        except AssertionError:
            if time.monotonic() > end:
                raise
    if allow:
        at = term.mark()
        term.send(target[1:].encode())
        term.expect(b"Press Enter to allow", at, deadline=DEADLINE)
        term.send(b"\r")


class AgentCase(harness.MountCase):
    """CLIENT (the command's name) is linked from CLIENT_PATH into a bin directory first on
    PATH; a missing binary fails the test (scripts/setup installs it: in CI a skip is a
    failure)."""

    deadline = 280
    client = None
    client_label = None
    client_path = None

    def setUp(self):
        super().setUp()
        self.assertTrue(os.path.exists(self.client_path), "%s is missing at %s: run "
                        "scripts/setup (npm ci in tests/agents)" %
                        (self.client_label, self.client_path))
        os.makedirs(os.path.join(self.tmp, "state"))
        self.state_db = os.path.join(self.tmp, "state", "state.db")
        self.bin = os.path.join(self.tmp, "bin")
        os.makedirs(self.bin)
        os.symlink(self.client_path, os.path.join(self.bin, self.client))
        self.env.update({
            "PIWORKFS_STATE_DB": self.state_db,
            "PATH": self.bin + ":" + self.env["PATH"],
            "TERM": "xterm",
        })
        self.env.pop("PIWORKFS_SOCKET", None)

    def dump(self, data):
        """Keeps DATA (the recorded requests) in $AGENTS_TEST_DUMP, a directory, if set."""
        d = os.environ.get("AGENTS_TEST_DUMP")
        if d:
            name = "%s-%s.json" % (self.client, self.id().rsplit(".", 1)[1])
            with open(os.path.join(d, name), "w") as f:
                json.dump(data, f, indent=1)

    def denials(self):
        """The project's denied operations in the audit log, through any of its views (the
        run's own view shares the database of the person's, issue 34)."""
        p = self.run_pw("log", "--json", "--project", self.project, check=True)
        rows = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
        return [r for r in rows if r.get("denied")]

    def status(self, v):
        return self.rpc(v, "status")
