#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The command line as users of sshfs, git and systemctl expect it (issue 18).

Offline tests run the built binary against private temp dirs (test_cli.Base); the tests
that need a live view use the mount tests' harness (private dirs, daemon with -f, sure
unmount). Python 3 standard library only.
"""

import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_cli  # noqa: E402
from test_cli import Base, PIWORKFS, DEMO, on_a_terminal  # noqa: E402

harness = test_cli.harness
SOURCE = test_cli.SOURCE
MAN = os.path.join(SOURCE, "docs", "man", "piworkfs.1")
COMMANDS = ["mount", "umount", "mode", "status", "reload", "modes", "allowed", "check",
            "why", "check-bash", "log", "trust", "run", "completion", "plan", "mcp", "hook"]
# The commands over the originals: their --help and piworkfs(1) agree too, with examples
# (issue 29); their -n is --dry-run, as in git, where log's is a count.
DOCUMENTED = COMMANDS + ["changes", "diff", "undo", "redo", "checkpoint"]
NOBODY = pwd.getpwnam("nobody")


def help_options(text):
    """{(letter or None, long name)} of the option lines of a --help text."""
    out = set()
    for m in re.finditer(r"(?m)^\s+(?:-([A-Za-z]), )?--([a-z][a-z-]*)", text):
        out.add((m.group(1), m.group(2)))
    return out


def exit_statuses(text):
    """The exit statuses a text names: the digits of its "Exit status:" paragraph."""
    m = re.search(r"Exit status:(.*?)(?:\n\n|\Z)", text, re.S)
    return set(int(d) for d in re.findall(r"(?<![\d-])([0-5])(?:[;,:.]| |$)", m.group(1))) \
        if m else set()


class Arguments(Base):
    """Options anywhere, one error line naming the option, one meaning per letter."""

    def test_options_after_the_operands(self):
        proj = self.copy_demo()
        mp = os.path.join(self.tmp, "mp")
        os.makedirs(mp)
        # The mode is read although it follows the paths: an unknown one is refused as such.
        rc, _, err = self.run_pw("mount", proj, mp, "--mode", "nosuch")
        self.assertEqual(rc, 3, err)
        self.assert_one_line_error(err, "mount", "unknown mode 'nosuch'")
        rc, _, err = self.run_pw("mount", proj, mp, "-m", "nosuch", "-o", "nonempty")
        self.assertEqual(rc, 3, err)
        self.assert_one_line_error(err, "unknown mode 'nosuch'")
        rc, out, err = self.run_pw("umount", mp, "--help")
        self.assertEqual(rc, 0, err)
        self.assertIn("Usage: piworkfs umount", out)
        rc, out, err = self.run_pw("check", "README.md", "--mode", "build", "-C", DEMO)
        self.assertEqual(rc, 0, err)

    def test_run_and_check_bash_take_the_rest_as_the_command(self):
        rc, out, err = self.run_pw("check-bash", "-C", DEMO, "--mode", "build",
                                   "touch", "src/a.c", "--mode", "plan")
        self.assertIn("warning: '--mode' comes after the command", err)
        self.assertIn("in mode build", out)
        # With --, the person said where the command starts: no warning.
        rc, out, err = self.run_pw("check-bash", "-C", DEMO, "--mode", "build", "--",
                                   "touch", "src/a.c", "--mode", "plan")
        self.assertNotIn("warning", err)

    def test_one_error_line_naming_the_option(self):
        rc, _, err = self.run_pw("mount", "-m")
        self.assertEqual(rc, 2)
        self.assert_one_line_error(err, "mount", "'-m'", "needs an argument")
        rc, _, err = self.run_pw("umount", "--json")
        self.assertEqual(rc, 2)
        self.assert_one_line_error(err, "umount", "MOUNTPOINT")
        rc, _, err = self.run_pw("check", "--mdoe", "build", "x")
        self.assertEqual(rc, 2)
        self.assert_one_line_error(err, "unknown option '--mdoe'", "did you mean '--mode'")
        rc, _, err = self.run_pw("check", "--json=1", "x")
        self.assert_one_line_error(err, "'--json' takes no argument")

    def test_each_short_letter_means_one_thing(self):
        meaning = {}
        for cmd in COMMANDS:
            rc, out, err = self.run_pw(cmd, "--help")
            self.assertEqual(rc, 0, (cmd, err))
            for letter, name in help_options(out):
                if letter:
                    meaning.setdefault(letter, set()).add(name)
        clashes = {k: v for k, v in meaning.items() if len(v) > 1}
        self.assertEqual(clashes, {}, "a short letter with several meanings")
        self.assertEqual(meaning.get("C"), {"project"})
        self.assertEqual(meaning.get("f"), {"foreground"})

    def test_clear_mount_errors(self):
        proj = self.copy_demo()
        mp = os.path.join(self.tmp, "mp")
        os.makedirs(mp)
        rc, _, err = self.run_pw("mount", os.path.join(self.tmp, "nosuch"), mp)
        self.assertEqual(rc, 3)
        self.assert_one_line_error(err, "does not exist")
        rc, _, err = self.run_pw("mount", "-o", "nonempty,foo", proj, mp)
        self.assertEqual(rc, 2, err)
        self.assert_one_line_error(err, "unknown mount option 'foo'")
        self.assertNotIn("nonempty,foo", err)
        rc, _, err = self.run_pw("mount", "-o", "allow_othr", proj, mp)
        self.assert_one_line_error(err, "did you mean 'allow_other'")

    def test_run_errors_are_run_errors(self):
        proj = self.copy_demo()
        rc, _, err = self.run_pw("run", "--mode", "bogus", "-C", proj, "--", "true")
        self.assertEqual(rc, 3, err)
        self.assert_one_line_error(err, "piworkfs: run: unknown mode 'bogus'")
        rc, _, err = self.run_pw("run", "--mode", "desgin", "-C", proj, "--", "true")
        self.assert_one_line_error(err, "did you mean 'design'")

    def test_run_refuses_home_as_a_fallback_project(self):
        home = self.env["HOME"]
        rc, _, err = self.run_pw("run", "--", "true", cwd=home)
        self.assertEqual(rc, 3, err)
        self.assert_one_line_error(err, "run", "no .git/ or .piworkfs/", "-C DIR")

    def test_did_you_mean(self):
        rc, _, err = self.run_pw("mdoe")
        self.assertEqual(rc, 2)
        self.assert_one_line_error(err, "unknown command 'mdoe'", "did you mean 'mode'")
        rc, _, err = self.run_pw("check", "--mode", "desgin", "-C", DEMO, "README.md")
        self.assertEqual(rc, 3)
        self.assert_one_line_error(err, "unknown mode 'desgin'", "did you mean 'design'")

    def test_json_failures_are_json_on_stdout(self):
        rc, out, err = self.run_pw("check", "--json", "--mode", "nosuch", "-C", DEMO, "x")
        self.assertEqual(rc, 3)
        j = json.loads(out)
        self.assertEqual(list(j), ["error"])
        self.assertEqual(j["error"]["status"], 3)
        self.assertIn("unknown mode 'nosuch'", j["error"]["message"])
        self.assertEqual(j["error"]["command"], "check")
        rc, out, _ = self.run_pw("modes", "--bogus", "--json")
        self.assertEqual(rc, 2)
        self.assertIn("--bogus", json.loads(out)["error"]["message"])
        # Success prints the command's own document, nothing else.
        rc, out, _ = self.run_pw("check", "--json", "--mode", "build", "-C", DEMO, "README.md")
        self.assertIsInstance(json.loads(out), list)

    def test_log_json_lines_are_named_jsonl(self):
        rc, out, err = self.run_pw("log", "--jsonl")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "")
        rc, out, _ = self.run_pw("log", "--help")
        self.assertIn("--jsonl", out)
        self.assertIn("JSON Lines", out)


class Docs(Base):
    """--help and piworkfs(1) list the same options and exit statuses."""

    def man_section(self, cmd):
        with open(MAN) as f:
            man = f.read().replace("\\-", "-")
        # The command's entry in COMMANDS: from its .TP tag to the next command's.
        # (Option tags inside an entry start with a dash; command tags with a letter.)
        m = re.search(r'\n\.TP\n\.B[RI]? "?%s\b.*?(?=\n\.TP\n\.B[RI]? "?[a-z]|\n\.SH )' %
                      re.escape(cmd), man, re.S)
        self.assertIsNotNone(m, "piworkfs(1) has no entry for " + cmd)
        return m.group(0)

    def man_options(self, section):
        text = section.replace("\\-", "-").replace("\\fB", "").replace("\\fR", "") \
            .replace("\\fI", "")
        return set(re.findall(r"(?<![\w-])--([a-z][a-z-]*)", text))

    def test_help_and_man_page_agree(self):
        for cmd in DOCUMENTED:
            rc, out, err = self.run_pw(cmd, "--help")
            self.assertEqual(rc, 0, err)
            helped = {name for _, name in help_options(out)} - {"help"}
            section = self.man_section(cmd)
            manned = self.man_options(section) - {"help"}
            self.assertEqual(helped - manned, set(), "%s: in --help, not in piworkfs(1)" % cmd)
            self.assertEqual(manned - helped, set(), "%s: in piworkfs(1), not in --help" % cmd)
            self.assertIn("Examples:", out, cmd)
            want = exit_statuses(out)
            self.assertTrue(want, "%s --help names no exit status" % cmd)
            m = re.search(r"Exit status: ([0-9, ]+)", section)
            self.assertIsNotNone(m, "piworkfs(1) gives no exit statuses for " + cmd)
            self.assertEqual(set(int(x) for x in re.findall(r"\d", m.group(1))), want, cmd)

    def test_check_outside_a_view_exits_as_its_help_says(self):
        rc, out, _ = self.run_pw("check", "--help")
        rc, _, err = self.run_pw("check", "README.md", cwd=self.cwd)
        self.assertIn(rc, exit_statuses(out))
        self.assertIn("no --mode given and not inside a live view", err)
        self.assertRegex(out, r"2 usage error \(also: no --mode outside a live view\)")

    def test_man_page_names_roots_paths(self):
        with open(MAN) as f:
            man = f.read()
        self.assertIn("/var/lib/piworkfs", man)
        self.assertIn("/run/piworkfs", man)
        rc, out, _ = self.run_pw("mount", "--help")
        self.assertIn("/var/lib/piworkfs", out)
        self.assertIn("/run/piworkfs", out)


def bash_complete(case, env, cwd, *words):
    """What bash's completion with the generated script offers for WORDS (the last one is
    the word being completed), run as bash runs it, in CWD."""
    script = subprocess.run([PIWORKFS, "completion", "bash"], capture_output=True,
                            text=True, env=env, check=True).stdout
    line = " ".join(words)
    prog = (script + "\nCOMP_WORDS=(%s)\nCOMP_CWORD=%d\nCOMP_LINE=%s\nCOMP_POINT=%d\n"
            "_piworkfs piworkfs\nprintf '%%s\\n' \"${COMPREPLY[@]}\"\n") % (
                " ".join("'%s'" % w for w in words), len(words) - 1,
                "'%s'" % line, len(line))
    e = dict(env, PATH=os.path.dirname(os.path.abspath(PIWORKFS)) + ":" + env["PATH"])
    p = subprocess.run(["bash", "--norc", "-c", prog], capture_output=True, text=True,
                       env=e, cwd=cwd, timeout=60)
    case.assertEqual(p.returncode, 0, p.stderr)
    return [x for x in p.stdout.splitlines() if x]


class Completion(Base):
    """The bash completion, generated from the parser's tables, run as bash runs it."""

    def complete(self, *words, cwd=None):
        return bash_complete(self, self.env, cwd or self.cwd, *words)

    def test_commands(self):
        got = self.complete("piworkfs", "mo")
        self.assertEqual(sorted(got), ["mode", "modes", "mount"])

    def test_options_are_the_parsers(self):
        got = set(self.complete("piworkfs", "allowed", "--"))
        rc, out, _ = self.run_pw("allowed", "--help")
        self.assertEqual(got, {"--" + n for _, n in help_options(out)})

    def test_plan_subcommands(self):
        self.assertEqual(self.complete("piworkfs", "plan", "ap"), ["approve"])
        self.assertEqual(sorted(self.complete("piworkfs", "plan", "")),
                         ["approve", "done", "list", "reopen", "show", "status"])

    def test_mode_names_offline(self):
        got = self.complete("piworkfs", "check", "-C", DEMO, "--mode", "de")
        self.assertEqual(got, ["design"])

    def test_zsh_and_fish_scripts(self):
        for shell, needle in [("zsh", "#compdef piworkfs"), ("fish", "complete -c piworkfs")]:
            rc, out, err = self.run_pw("completion", shell)
            self.assertEqual(rc, 0, err)
            self.assertIn(needle, out)
            self.assertIn("allowed", out)
            self.assertIn("tree", out)
        rc, _, err = self.run_pw("completion", "tcsh")
        self.assertEqual(rc, 2)


class LiveCompletion(harness.MountCase):
    """What only the live view knows, completed (issue 44, item 21): plan names after
    `plan show`, checkpoint names after --since."""

    def complete(self, *words, cwd=None):
        return bash_complete(self, self.env, cwd or self.cwd, *words)

    def test_plan_names_after_a_subcommand_and_checkpoints_after_since(self):
        v = self.mount("plan")
        for name in ("cache", "alpha"):
            os.makedirs(v.path("docs/plans"), exist_ok=True)
            with open(v.path("docs/plans/%s.md" % name), "w") as f:
                f.write("# %s\n\n## Tasks\n\n- [ ] do it\n" % name)
        subcommands = ["approve", "done", "list", "reopen", "show", "status"]
        self.assertEqual(sorted(self.complete("piworkfs", "plan", "", cwd=v.mp)), subcommands)
        for sub in ("show", "approve", "reopen"):
            self.assertEqual(sorted(self.complete("piworkfs", "plan", sub, "", cwd=v.mp)),
                             ["alpha", "cache"], sub)
        self.assertEqual(self.complete("piworkfs", "plan", "show", "c", cwd=v.mp), ["cache"])
        # One plan name; nothing after it, nor after the subcommands that take none.
        self.assertEqual(self.complete("piworkfs", "plan", "show", "cache", "", cwd=v.mp), [])
        self.assertEqual(self.complete("piworkfs", "plan", "list", "", cwd=v.mp), [])
        self.assertEqual(self.complete("piworkfs", "plan", "done", "1", "--plan", "",
                                       cwd=v.mp), ["alpha", "cache"])
        # From elsewhere, -M names the view.
        self.assertEqual(sorted(self.complete("piworkfs", "plan", "-M", v.mp, "show", "")),
                         ["alpha", "cache"])
        self.assertEqual(self.complete("piworkfs", "plan", "show", ""), [])  # no view here
        # Checkpoints: the names --since takes in changes, diff and undo.
        self.run_pw("mode", "build", cwd=v.mp, check=True)
        self.run_pw("checkpoint", "before-refactor", cwd=v.mp, check=True)
        self.run_pw("checkpoint", "after-lunch", cwd=v.mp, check=True)
        for cmd in ("diff", "changes", "undo"):
            for opt in ("--since", "-s"):
                self.assertEqual(sorted(self.complete("piworkfs", cmd, opt, "", cwd=v.mp)),
                                 ["after-lunch", "before-refactor"], (cmd, opt))
        self.assertEqual(self.complete("piworkfs", "diff", "--since", "b", cwd=v.mp),
                         ["before-refactor"])
        self.assertEqual(self.complete("piworkfs", "diff", "-M", v.mp, "--since", "a"),
                         ["after-lunch"])


class AllowedTree(Base):
    def test_tree_text(self):
        rc, out, err = self.run_pw("allowed", "--tree", "--mode", "design", "-C", DEMO)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"(?m)^W  .*── design/  \(1 file\)$")
        self.assertRegex(out, r"(?m)^R  .*── src/  \(1 file\)$")
        self.assertRegex(out, r"(?m)^R  .*── guide\.md$")
        self.assertIn("legend:", out)

    def test_tree_why_and_json(self):
        rc, out, err = self.run_pw("allowed", "--tree", "--why", "--mode", "design", "-C",
                                   DEMO)
        self.assertEqual(rc, 0, err)
        self.assertIn("(allow docs/design/", out)
        rc, out, err = self.run_pw("allowed", "--tree", "--json", "--mode", "design", "-C",
                                   DEMO)
        self.assertEqual(rc, 0, err)
        j = json.loads(out)
        self.assertEqual(j["mode"], "design")
        names = {e["path"]: e for e in j["tree"]}
        self.assertEqual(names["docs/design"]["verdict"], "writable")
        self.assertEqual(names["src"]["verdict"], "read-only")
        self.assertEqual(names["src"]["files"], 1)

    def test_untrusted_widening_is_said_on_top(self):
        rc, out, err = self.run_pw("allowed", "--tree", "--mode", "design", "-C", DEMO)
        first = out.splitlines()[0:3]
        self.assertTrue(any("untrusted" in line and "tokens/colors.json" in line
                            for line in first), out)


class ViewFriction(harness.MountCase):
    """What needs a live view."""

    def pw(self, *args, cwd=None, env=None):
        return self.run_pw(*args, cwd=cwd, env=env)

    def test_every_command_names_the_backing_project(self):
        v = self.mount("design")
        sub = os.path.join(self.project, "docs")
        real = os.path.realpath(self.project)
        for where, rel in ((v.mp, "docs/design/a.md"), (v.path("docs"), "design/a.md"),
                           (self.project, "docs/design/a.md"), (sub, "design/a.md")):
            p = self.pw("modes", "--json", cwd=where)
            self.assertEqual(json.loads(p.stdout)["project"], real, (where, p.stderr))
            p = self.pw("allowed", "--json", cwd=where)
            self.assertEqual(p.returncode, 0, (where, p.stderr))
            self.assertEqual(json.loads(p.stdout)["project"], real, where)
            self.assertEqual(json.loads(p.stdout)["mode"], "design", where)
            p = self.pw("check", rel, cwd=where)
            self.assertEqual(p.returncode, 0, (where, p.stdout, p.stderr))
            p = self.pw("why", "--json", "src/a.c", cwd=where)
            self.assertEqual(json.loads(p.stdout)["project"], real, where)
            self.assertEqual(json.loads(p.stdout)["mode"], "design", where)
        p = self.pw("check", "/etc/passwd", cwd=v.mp)
        self.assertIn(real, p.stdout)

    def test_trust_inside_a_view_trusts_the_project(self):
        v = self.mount("design")
        p = self.pw("trust", "--json", cwd=v.path("docs"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["project"], os.path.realpath(self.project))
        p = self.pw("reload", "--mount", v.mp)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        st = json.loads(self.pw("status", "--json").stdout)
        mine = next(x for x in st if x.get("mountpoint") == v.mp)
        self.assertTrue(mine["trusted"], mine)

    def test_a_view_is_not_a_project(self):
        v = self.mount("plan")
        mp2 = os.path.join(self.tmp, "mp2")
        os.makedirs(mp2)
        p = self.pw("mount", v.mp, mp2)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("is a piworkfs view of", p.stderr)
        self.assertFalse(harness.is_view_mounted(mp2))

    def test_a_new_mode_file_needs_reload(self):
        v = self.mount("plan")
        modes = os.path.join(self.project, ".piworkfs", "modes")
        os.makedirs(modes, exist_ok=True)
        with open(os.path.join(modes, "tests.md"), "w") as f:
            f.write("---\ndescription: tests only\nwrites:\n  allow: [tests/**]\n---\nTests.\n")
        p = self.pw("mode", "tests", cwd=v.mp)
        self.assertEqual(p.returncode, 3)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("piworkfs reload", lines[0])
        p = self.pw("mode", "bulid", cwd=v.mp)
        self.assertIn("did you mean 'build'", p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)

    def test_log_shows_switches_with_who_asked(self):
        v = self.mount("plan")
        self.assertEqual(self.pw("mode", "build", cwd=v.mp).returncode, 0)
        p = self.pw("log", "--all")
        self.assertRegex(p.stdout, r"switch\s+.*plan -> build")
        self.assertIn("asked by piworkfs", p.stdout)
        p = self.pw("log", "--all", "--switches", "--jsonl")
        rows = [json.loads(x) for x in p.stdout.splitlines()]
        last = rows[-1]
        self.assertEqual((last["kind"], last["from"], last["to"]), ("switch", "plan", "build"))
        self.assertEqual(last["comm"], "piworkfs")

    def log_on_a_terminal(self, env):
        """`piworkfs log --all` with a pty as stdout: (exit status, output)."""
        return on_a_terminal([PIWORKFS, "log", "--all"], dict(self.env, **env), self.cwd)

    def test_log_fits_the_terminal(self):
        deep = "d" * 60 + "/" + "e" * 60 + "/file.txt"
        os.makedirs(os.path.join(self.project, os.path.dirname(deep)))
        v = self.mount("plan")
        with self.assertRaises(OSError):
            open(v.path(deep), "w")
        with self.assertRaises(OSError):
            open(v.path("src/new.c"), "w")
        self.assertTrue(harness.wait_until(
            lambda: "file.txt" in self.pw("log", "--all").stdout, 60), "no audit rows")
        rc, out = self.log_on_a_terminal({"COLUMNS": "140", "TERM": "xterm"})
        self.assertEqual(rc, 0, out)
        lines = [re.sub(r"\x1b\[[0-9;]*m", "", x) for x in out.splitlines()]
        self.assertTrue(all(len(x) <= 140 for x in lines), "\n".join(lines))
        self.assertTrue(any("..." in x and "ddd" in x and "file.txt" in x for x in lines),
                        "\n".join(lines))
        self.assertIn("\x1b[", out, "a terminal gets colour")
        rc, out = self.log_on_a_terminal({"COLUMNS": "140", "NO_COLOR": "1"})
        self.assertNotIn("\x1b[", out, "NO_COLOR turns colour off")
        # Not a terminal: nothing shortened, no colour.
        p = self.pw("log", "--all")
        self.assertIn(deep, p.stdout)
        self.assertNotIn("\x1b[", p.stdout)

    def test_status_shows_the_callers_views(self):
        self.mount("plan")
        os.chmod(self.tmp, 0o755)
        run = os.path.join(self.tmp, "nobody-run")
        os.makedirs(run)
        os.chown(run, NOBODY.pw_uid, NOBODY.pw_gid)
        os.chmod(run, 0o700)
        env = dict(self.env, XDG_RUNTIME_DIR=run, HOME=run)

        def drop():
            os.setgroups([])
            os.setgid(NOBODY.pw_gid)
            os.setuid(NOBODY.pw_uid)
        p = subprocess.run([PIWORKFS, "status"], env=env, cwd="/", preexec_fn=drop,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertNotIn(self.mp, p.stdout)
        p = subprocess.run([PIWORKFS, "status", "--all"], env=env, cwd="/", preexec_fn=drop,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn(self.mp, p.stdout)

    def test_umount_returns_once_the_daemon_is_gone(self):
        mp = self.mp
        for i in range(3):
            p = self.pw("mount", "--json", "--mode", "plan", self.project, mp)
            self.assertEqual(p.returncode, 0, p.stderr)
            pid = json.loads(p.stdout)["pid"]
            sock = self.socket_path()
            p = self.pw("umount", mp)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertFalse(os.path.exists("/proc/%d/exe" % pid),
                             "the daemon still runs after umount returned")
            self.assertFalse(sock and os.path.exists(sock), "its socket is still there")

    def test_run_scopes_its_mode_and_says_where(self):
        v = self.mount("plan")
        p = self.pw("run", "--mode", "build", "--", "true", cwd=self.project)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = [x for x in p.stderr.splitlines() if x.startswith("piworkfs: run:")]
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("project " + os.path.realpath(self.project), lines[0])
        # A view of the run's own, named by the run's id, whichever view is live.
        m = re.search(r"run ([A-Za-z0-9]+), view (\S+) \(its own\)", lines[0])
        self.assertIsNotNone(m, lines[0])
        self.assertTrue(m.group(2).endswith("/run-%s/view" % m.group(1)), lines[0])
        self.assertIn("mode build", lines[0])
        p = self.pw("mode", "--json", "--mount", v.mp)
        self.assertEqual(json.loads(p.stdout)["mode"], "plan", "run left its mode behind")

    def test_run_a_missing_command_in_piworkfs_words(self):
        p = self.pw("run", "--", "nosuchcmd-xyz", cwd=self.project)
        self.assertEqual(p.returncode, 127, p.stderr)
        self.assertIn("piworkfs: run: nosuchcmd-xyz: command not found", p.stderr)


class UnprivilegedUser(harness.MountCase):
    """A normal user: the mount works where /dev/fuse is open to users, and where it is not
    the message says why and what to do. /dev/fuse's mode is changed for the test and always
    put back."""

    def setUp(self):
        super().setUp()
        self.fuse_mode = stat.S_IMODE(os.stat("/dev/fuse").st_mode)
        self.addCleanup(os.chmod, "/dev/fuse", self.fuse_mode)
        for d in (self.tmp, self.project):
            os.chmod(d, 0o755)
        for root, dirs, files in os.walk(self.tmp):
            for n in dirs + files:
                os.lchown(os.path.join(root, n), NOBODY.pw_uid, NOBODY.pw_gid)
        os.chown(self.tmp, NOBODY.pw_uid, NOBODY.pw_gid)
        self.env = dict(self.env, PIWORKFS_STATE_DB=os.path.join(self.tmp, "nobody.db"))

    def as_nobody(self, *args):
        def drop():
            os.setgroups([])
            os.setgid(NOBODY.pw_gid)
            os.setuid(NOBODY.pw_uid)
        return subprocess.run([PIWORKFS] + list(args), env=self.env, cwd=self.tmp,
                              preexec_fn=drop, capture_output=True, text=True, timeout=60)

    def test_device_closed_to_users(self):
        os.chmod("/dev/fuse", 0o600)
        p = self.as_nobody("mount", self.project, self.mp)
        self.assertEqual(p.returncode, 5, p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("/dev/fuse", lines[0])
        self.assertIn("Permission denied", lines[0])
        self.assertIn("chmod 0666 /dev/fuse", lines[0])
        self.assertFalse(harness.is_view_mounted(self.mp))

    def test_device_open_to_users(self):
        os.chmod("/dev/fuse", 0o666)
        p = self.as_nobody("mount", "--mode", "plan", self.project, self.mp)
        try:
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue(harness.is_view_mounted(self.mp))
            p = self.as_nobody("mode", "--mount", self.mp, "build")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("mode build", p.stdout)
        finally:
            p = self.as_nobody("umount", self.mp)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse(harness.is_view_mounted(self.mp))


if __name__ == "__main__":
    unittest.main(verbosity=2)
