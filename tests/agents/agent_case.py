# SPDX-License-Identifier: MIT
"""What the end-to-end tests of every agent client share (tests/agents/test_CLIENT.py): the
client's binary on a PATH of the test's own, the state database apart from HOME (`piworkfs
run` covers its directory), the view's status, the recorded requests kept on request, the
mode announcement a design view makes, and typing the answer into run's consent bar; the
scripted model started and the client pointed at it, the client run with or without a
terminal, the answers its tools gave the model, and the request for build every client makes
through the piworkfs tools.
"""

import json
import os
import subprocess
import time

import harness  # tests/lib, on PYTHONPATH
from run_case import Terminal  # tests/lib, on PYTHONPATH

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
    failure). A client's case names its scripted model (MODEL_CLASS), says how the client
    finds it (point_at) and reads the answers its tools gave (TOOL_ANSWERS, a function of one
    request body to {call id: answer})."""

    deadline = 280
    client = None
    client_label = None
    client_path = None
    model_class = None
    tool_answers = None

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

    def client_home(self, name):
        """A directory NAME in HOME, made, for the client's own settings."""
        home = os.path.join(self.env["HOME"], name)
        os.makedirs(home)
        return home

    def design_view(self):
        """The person's view in design: (the view, its policy as `allowed --json` gives it,
        the backing path of src/hack.c, which design does not allow)."""
        v = self.mount("design")
        policy = json.loads(self.run_pw("allowed", "--json", cwd=v.mp, check=True).stdout)
        return v, policy, os.path.join(self.project, "src", "hack.c")

    def design_attempts(self, write, path_key, shell, tool_call, then=("done.",)):
        """The person's view in design and a scripted model that writes src/hack.c (which
        design does not allow) with the client's tool WRITE (the path under PATH_KEY), then
        writes src/from_shell.c through its shell tool SHELL, then makes TOOL_CALL (a (name,
        arguments) call), then THEN. Returns (the view, its policy as design_view gives it,
        the backing path of src/hack.c, the model)."""
        v, policy, hack = self.design_view()
        model = self.start_model([
            [(write, {path_key: hack, "content": "int x;\n"})],
            [(shell, {"command": "echo x > src/from_shell.c", "description": "write"})],
            [tool_call],
            *then,
        ])
        return v, policy, hack, model

    def script(self, steps):
        """The scripted model's steps for STEPS (the client's case may add its own turns)."""
        return steps

    def point_at(self, model):
        """Points the client at MODEL, a started scripted model (its environment)."""
        raise NotImplementedError

    def start_model(self, steps):
        """A scripted model answering with STEPS, stopped on the way out; the client is
        pointed at it."""
        m = self.model_class(self.script(steps)).start()
        self.addCleanup(m.stop)
        self.point_at(m)
        return m

    def dump_model(self, model):
        self.dump(model.all_requests)

    def run_client(self, prompt):
        """The client on PROMPT inside `piworkfs run`, without a terminal."""
        return subprocess.run(self.argv(prompt), cwd=self.project, env=self.env,
                              capture_output=True, text=True, timeout=DEADLINE,
                              stdin=subprocess.DEVNULL)

    def assert_exited_0(self, p):
        self.assertEqual(p.returncode, 0, "%s exited %d\nstdout: %s\nstderr: %s%s" %
                         (self.client, p.returncode, p.stdout, p.stderr, self.daemon_logs()))

    def terminal(self, prompt):
        """The client on PROMPT inside `piworkfs run`, on a terminal of its own, as a person
        runs it."""
        t = Terminal(self.argv(prompt), self.env, self.project)
        self.addCleanup(t.close)
        return t

    def answers(self, model):
        """{call id: answer} of every tool call the model made, as the client sent them
        back."""
        out = {}
        for r in model.requests:
            out.update(self.tool_answers(r))
        return out

    def ask_for_build_and_allow(self, tool, then=("done.",)):
        """The person's view in design; inside `piworkfs run`, the model calls TOOL (the
        piworkfs_request_mode tool as the client names it) for build, then THEN; the person
        answers run's consent bar with the target's name and Enter. Returns the person's view
        and the model once the run exited 0 and the model saw no error."""
        v = self.mount("design")
        model = self.start_model([
            [(tool, {"mode": "build", "reason": "implement src/hack.c"})],
            *then,
        ])
        t = self.terminal("Switch to build.")
        t.expect("the agent asks to switch design \u2192 build", deadline=DEADLINE)
        answer_consent(t, allow=True)
        self.assertEqual(t.wait(DEADLINE), 0, t.buf[-3000:])
        self.dump_model(model)
        self.assertEqual(model.errors, [])
        return v, model

    def assert_nothing_written(self, v, *paths):
        """None of PATHS (in the backing project) exists and neither view denied anything:
        the refusals stopped the writes before they reached the file system."""
        for path in paths:
            self.assertFalse(os.path.exists(path), path)
        self.assertEqual(self.status(v)["denied"], 0, "the view saw an attempt")
        self.assertEqual(self.denials(), [], "the run's view saw an attempt")

    def assert_mode_of(self, v, mode):
        """V, the person's view, is in MODE (a run's switch is the run's own, issue 34)."""
        m = self.run_pw("mode", "--json", cwd=v.mp, check=True)
        self.assertEqual(json.loads(m.stdout)["mode"], mode, m.stdout)
