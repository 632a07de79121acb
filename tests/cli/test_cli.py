#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Tests of the offline piworkfs commands (modes, allowed, check) and the program frame.

Runs the built binary ($PIWORKFS) against the fixture project tests/fixtures/demo-cli:

    demo-cli/
      .piworkfs/config.yaml   design.tokens: [tokens/colors.json], protected: [secrets/**]
      README.md
      docs/design/a.md
      docs/guide.md
      src/main.c
      tokens/colors.json

HOME, XDG_CONFIG_HOME, XDG_STATE_HOME and the state database point into a private temp
dir, so the user's own configuration never leaks in. Python 3 standard library only.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
PIWORKFS = os.environ.get("PIWORKFS", "piworkfs")
FIXTURES = os.environ.get("PIWORKFS_FIXTURES", os.path.join(SOURCE, "tests", "fixtures"))
MODES_DIR = os.environ.get("PIWORKFS_SOURCE_MODES", os.path.join(SOURCE, "modes"))
DEMO = os.path.join(FIXTURES, "demo-cli")
BUNDLED = ["build", "design", "discuss", "off", "plan", "review"]


def on_a_terminal(argv, env, cwd):
    """ARGV with a pty as stdout: (exit status, its output with the pty's carriage returns
    taken out)."""
    import pty
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode().replace("\r", "")


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pw-cli-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        home = os.path.join(self.tmp, "home")
        os.makedirs(home)
        self.config_home = os.path.join(home, ".config")
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LC_ALL": "C.UTF-8",
            "HOME": home,
            "XDG_CONFIG_HOME": self.config_home,
            "XDG_STATE_HOME": os.path.join(home, ".local", "state"),
            "XDG_RUNTIME_DIR": os.path.join(self.tmp, "run"),
            "PIWORKFS_STATE_DB": os.path.join(self.tmp, "state.db"),
            "PIWORKFS_MODES_DIR": MODES_DIR,
        }
        # A neutral working directory outside any project.
        self.cwd = os.path.join(self.tmp, "elsewhere")
        os.makedirs(self.cwd)

    def run_pw(self, *args, cwd=None, env=None):
        e = dict(self.env)
        if env:
            e.update(env)
        p = subprocess.run([PIWORKFS] + list(args), cwd=cwd or self.cwd, env=e,
                           capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout, p.stderr

    def assert_one_line_error(self, err, *needles):
        lines = err.strip().splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertTrue(lines[0].startswith("piworkfs: "), err)
        for n in needles:
            self.assertIn(n, lines[0])

    def copy_demo(self):
        dst = os.path.join(self.tmp, "proj")
        shutil.copytree(DEMO, dst, symlinks=True)
        return dst


class FrameTest(Base):
    def test_version(self):
        rc, out, _ = self.run_pw("--version")
        self.assertEqual(rc, 0)
        self.assertRegex(out, r"^piworkfs \d+\.\d+\.\d+\n$")

    def test_help_lists_every_command(self):
        rc, out, _ = self.run_pw("--help")
        self.assertEqual(rc, 0)
        for cmd in ["mount", "umount", "mode", "status", "modes", "allowed", "check",
                    "check-bash", "log", "trust"]:
            self.assertRegex(out, r"\n  %s\s" % re.escape(cmd))

    def test_no_command_is_usage_error(self):
        rc, out, err = self.run_pw()
        self.assertEqual(rc, 2)
        self.assertIn("Usage:", err)

    def test_unknown_command(self):
        rc, out, err = self.run_pw("frobnicate")
        self.assertEqual(rc, 2)
        self.assertEqual(out, "")
        self.assert_one_line_error(err, "unknown command 'frobnicate'")

    def test_help_command_equals_dash_help(self):
        for cmd in ["modes", "allowed", "check"]:
            rc1, out1, _ = self.run_pw("help", cmd)
            rc2, out2, _ = self.run_pw(cmd, "--help")
            self.assertEqual((rc1, rc2), (0, 0))
            self.assertEqual(out1, out2)
            self.assertIn("Usage: piworkfs " + cmd, out1)
            self.assertIn("--json", out1)

    def test_unknown_option(self):
        rc, out, err = self.run_pw("check", "--bogus", "x")
        self.assertEqual(rc, 2)
        self.assert_one_line_error(err, "check", "'--bogus'")

    def test_missing_option_argument(self):
        rc, _, err = self.run_pw("check", "x", "--mode")
        self.assertEqual(rc, 2)
        self.assert_one_line_error(err, "check", "needs an argument")


class ModesTest(Base):
    def test_text_lists_bundled_modes(self):
        rc, out, err = self.run_pw("modes", "--project", DEMO)
        self.assertEqual(rc, 0, err)
        for name in BUNDLED:
            self.assertRegex(out, r"(?m)^%s\s+bundled\s+modes/%s\.md\s+\S" % (name, name))
        self.assertIn(os.path.realpath(DEMO), out)

    def test_json(self):
        rc, out, err = self.run_pw("modes", "--project", DEMO, "--json")
        self.assertEqual(rc, 0, err)
        j = json.loads(out)
        self.assertEqual(list(j), ["project", "trusted", "modes", "protected", "tokens",
                                   "warnings"])
        self.assertEqual(j["project"], os.path.realpath(DEMO))
        self.assertFalse(j["trusted"])
        names = [m["name"] for m in j["modes"]]
        self.assertEqual(names, sorted(names))
        for name in BUNDLED:
            self.assertIn(name, names)
        design = next(m for m in j["modes"] if m["name"] == "design")
        self.assertEqual(list(design), ["name", "description", "file", "layer", "tokens",
                                        "protect", "rules"])
        self.assertEqual(design["layer"], "bundled")
        self.assertTrue(design["file"].endswith("/modes/design.md"))
        self.assertTrue(design["description"])
        allow = [r for r in design["rules"] if r["kind"] == "allow"]
        self.assertIn("docs/design/**", [r["pattern"] for r in allow])
        for r in design["rules"]:
            self.assertEqual(list(r), ["kind", "pattern", "file", "line", "column", "layer"])
        protected = [r["pattern"] for r in j["protected"]]
        for pat in [".git/hooks", ".git/config", "/.piworkfs", "secrets/**"]:
            self.assertIn(pat, protected)
        for w in j["warnings"]:
            self.assertEqual(list(w), ["severity", "file", "line", "column", "key", "message",
                                       "text", "mode"])

    def test_untrusted_tokens_warned(self):
        rc, out, err = self.run_pw("modes", "--project", DEMO, "--json")
        self.assertEqual(rc, 0, err)
        j = json.loads(out)
        texts = [w["text"] for w in j["warnings"]]
        self.assertTrue(any("config.yaml" in t and "tokens" in t for t in texts), texts)

    def test_bad_yaml_reports_line_and_column_and_others_load(self):
        proj = self.copy_demo()
        os.makedirs(os.path.join(proj, ".piworkfs", "modes"), exist_ok=True)
        bad = os.path.join(proj, ".piworkfs", "modes", "x.md")
        with open(bad, "w") as f:
            f.write("---\nname: x\ndescription: broken\nwrites:\n  allow: [\"a/**\"\n"
                    "hide: {\n---\nbody\n")
        rc, out, err = self.run_pw("modes", "--project", proj)
        self.assertEqual(rc, 3, err)  # a file with errors: the configuration exit status
        self.assertRegex(out, r"\.piworkfs/modes/x\.md:\d+:\d+: ")
        for name in BUNDLED:
            self.assertRegex(out, r"(?m)^%s\s+bundled" % name)
        rc, out, err = self.run_pw("modes", "--project", proj, "--json")
        j = json.loads(out)
        ws = [w for w in j["warnings"] if w["file"].endswith("x.md")]
        self.assertTrue(ws, j["warnings"])
        self.assertGreater(ws[0]["line"], 0)
        self.assertGreater(ws[0]["column"], 0)

    def write_project_file(self, proj, rel, text):
        full = os.path.join(proj, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)

    def demo_with_lint(self, front):
        """A copy of the demo with a project mode lint (.piworkfs/modes/lint.md) whose front
        matter after its name is FRONT, YAML lines."""
        proj = self.copy_demo()
        self.write_project_file(proj, ".piworkfs/modes/lint.md",
                                "---\nname: lint\n" + front + "---\nLint.\n")
        return proj

    def test_errors_exit_3_warnings_do_not(self):
        proj = self.copy_demo()
        rc, out, err = self.run_pw("modes", "--project", proj)
        self.assertEqual(rc, 0, err)  # one warning (untrusted tokens), no error
        self.write_project_file(proj, ".piworkfs/config.yaml", 'protected: ["[x"]\n')
        for args in [(), ("--json",)]:
            rc, out, err = self.run_pw("modes", "--project", proj, *args)
            self.assertEqual(rc, 3, out + err)
            self.assertIn("invalid glob", out)

    def test_check_clean_project(self):
        proj = os.path.join(self.tmp, "clean")
        os.makedirs(os.path.join(proj, ".git"))
        rc, out, err = self.run_pw("modes", "--check", "--project", proj)
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out, "%s: 6 modes, no problems in the mode files and configuration\n"
                         % os.path.realpath(proj))
        rc, out, err = self.run_pw("modes", "--help")
        self.assertIn("--check", out)

    def test_check_reads_the_project_as_trusted(self):
        # The demo's design.tokens is a trust warning for `modes`, not a problem of its files.
        rc, out, err = self.run_pw("modes", "--check", "--project", DEMO)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("no problems", out)

    def test_check_fails_on_a_warning(self):
        proj = self.demo_with_lint("writes:\n  colour: blue\n")
        rc, out, err = self.run_pw("modes", "--project", proj)
        self.assertEqual(rc, 0, out + err)
        rc, out, err = self.run_pw("modes", "--check", "--project", proj)
        self.assertEqual(rc, 3, out + err)
        lines = out.splitlines()
        self.assertRegex(lines[0], r"\.piworkfs/modes/lint\.md:4:3: warning: writes\.colour: ")
        self.assertEqual(lines[-1], "%s: 0 errors, 1 warning in the mode files and "
                         "configuration" % os.path.realpath(proj))

    def test_misspelt_key_is_an_error_with_a_hint(self):
        proj = self.demo_with_lint("writes:\n  alow: [src/**]\n")
        rc, out, err = self.run_pw("modes", "--project", proj)
        self.assertEqual(rc, 3, out + err)
        self.assertRegex(out, r"lint\.md:4:3: error: writes\.alow: unknown key; did you mean "
                         r"'allow'\?")

    def test_check_fails_on_an_error(self):
        proj = self.demo_with_lint("hide: [\"[x\"]\n")
        rc, out, err = self.run_pw("modes", "--check", "--project", proj)
        self.assertEqual(rc, 3, out + err)
        self.assertRegex(out, r"lint\.md:3:8: error: hide\[0\]: invalid glob")
        self.assertTrue(out.endswith(" 1 error, 0 warnings in the mode files and "
                                     "configuration\n"), out)

    def test_unreadable_bundled_dir_exits_3(self):
        rc, out, err = self.run_pw("modes", "--project", DEMO,
                                   env={"PIWORKFS_MODES_DIR": os.path.join(self.tmp, "none")})
        self.assertEqual(rc, 3)
        self.assertIn("bundled", err)

    def test_missing_project(self):
        rc, out, err = self.run_pw("modes", "--project", os.path.join(self.tmp, "nope"))
        self.assertEqual(rc, 3)
        self.assert_one_line_error(err, "modes", "does not exist")

    def test_project_found_from_cwd(self):
        rc, out, err = self.run_pw("modes", "--json", cwd=os.path.join(DEMO, "docs", "design"))
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["project"], os.path.realpath(DEMO))

    def test_global_mode_replaces_bundled(self):
        gdir = os.path.join(self.config_home, "piworkfs", "modes")
        os.makedirs(gdir)
        with open(os.path.join(gdir, "review.md"), "w") as f:
            f.write("---\nname: review\ndescription: My review\n---\nRead only.\n")
        rc, out, err = self.run_pw("modes", "--project", DEMO, "--json")
        self.assertEqual(rc, 0, err)
        review = next(m for m in json.loads(out)["modes"] if m["name"] == "review")
        self.assertEqual(review["layer"], "global")
        self.assertEqual(review["description"], "My review")


class AllowedTest(Base):
    def test_rules_of_design(self):
        rc, out, err = self.run_pw("allowed", "--mode", "design", "--project", DEMO)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"(?m)^mode design \(modes/design\.md\)")
        self.assertRegex(out, r"(?m)^allow\s+docs/design/\*\*\s+modes/design\.md:\d+$")
        self.assertRegex(out, r"(?m)^protected\s+\.git/hooks\s+\(built-in\)$")
        self.assertRegex(out, r"(?m)^protected\s+secrets/\*\*\s+\.piworkfs/config\.yaml:\d+$")

    def test_plan_writes_only_its_plans_folder(self):
        rc, out, err = self.run_pw("allowed", "--mode", "plan", "--project", DEMO, "--files")
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"(?m)^allow\s+docs/plans/\*\*\s+\(plans folder\)$")
        self.assertEqual(len(re.findall(r"(?m)^allow", out)), 1, out)
        self.assertIn("0 writable files", out)  # the demo has no plans folder

    def test_files_of_design(self):
        rc, out, err = self.run_pw("allowed", "--mode", "design", "--project", DEMO, "--files")
        self.assertEqual(rc, 0, err)
        files = out.split("writable file", 1)[1].splitlines()[1:]
        self.assertEqual(files, ["docs/design/a.md"])

    def test_files_of_build(self):
        rc, out, err = self.run_pw("allowed", "--mode", "build", "--project", DEMO, "--files",
                                   "--json")
        self.assertEqual(rc, 0, err)
        j = json.loads(out)
        self.assertEqual(j["files"], ["README.md", "docs/design/a.md", "docs/guide.md",
                                      "src/main.c", "tokens/colors.json"])

    def test_files_skip_symlinks_and_protected(self):
        proj = self.copy_demo()
        os.makedirs(os.path.join(proj, "secrets"))
        open(os.path.join(proj, "secrets", "key"), "w").close()
        os.symlink("/etc/passwd", os.path.join(proj, "src", "link"))
        os.symlink(os.path.join(proj, "src"), os.path.join(proj, "docs", "design", "srclink"))
        rc, out, err = self.run_pw("allowed", "--mode", "build", "--project", proj, "--files",
                                   "--json")
        self.assertEqual(rc, 0, err)
        files = json.loads(out)["files"]
        self.assertNotIn("secrets/key", files)
        self.assertNotIn("src/link", files)
        self.assertFalse([f for f in files if "srclink" in f], files)

    def test_files_pruning_keeps_deep_matches(self):
        proj = self.copy_demo()
        deep = os.path.join(proj, "docs", "design", "x", "y")
        os.makedirs(deep)
        open(os.path.join(deep, "z.md"), "w").close()
        os.makedirs(os.path.join(proj, "docsx", "design"))
        open(os.path.join(proj, "docsx", "design", "no.md"), "w").close()
        rc, out, err = self.run_pw("allowed", "--mode", "design", "--project", proj, "--files",
                                   "--json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["files"], ["docs/design/a.md", "docs/design/x/y/z.md"])

    def test_json_shape(self):
        rc, out, err = self.run_pw("allowed", "--mode", "design", "--project", DEMO, "--json")
        self.assertEqual(rc, 0, err)
        j = json.loads(out)
        self.assertEqual(list(j), ["project", "mode", "description", "file", "writes_nothing",
                                   "protect", "keep_originals", "fail_closed", "fail_reason",
                                   "rules", "plans_dir", "lane"])
        self.assertEqual(j["mode"], "design")
        self.assertFalse(j["writes_nothing"])
        kinds = {r["kind"] for r in j["rules"]}
        self.assertTrue({"allow", "protected"} <= kinds, kinds)

    def test_no_mode_offline(self):
        rc, out, err = self.run_pw("allowed", "--project", DEMO)
        self.assertEqual(rc, 2)
        self.assert_one_line_error(err, "allowed", "no --mode given and not inside a live view")

    def test_unknown_mode(self):
        rc, out, err = self.run_pw("allowed", "--mode", "nosuch", "--project", DEMO)
        self.assertEqual(rc, 3)
        self.assert_one_line_error(err, "unknown mode 'nosuch'", "design", "plan")


class CheckTest(Base):
    def check(self, *args, **kw):
        return self.run_pw("check", "--project", DEMO, *args, **kw)

    def test_acceptance_design(self):
        rc, out, err = self.check("--mode", "design", "docs/design/a.md", "src/main.c")
        self.assertEqual(rc, 1, err)
        lines = out.splitlines()
        self.assertEqual(len(lines), 3, out)
        self.assertRegex(lines[0], r"^allowed  docs/design/a\.md  "
                         r"\(allow docs/design/\*\* \u2014 modes/design\.md:\d+\)$")
        self.assertEqual(lines[1],
                         "denied   src/main.c  EACCES  no allow rule matches in mode design")
        # The fixture declares a token file but is not trusted: said under the denial.
        self.assertEqual(lines[2], "         design.tokens (.piworkfs/config.yaml:3) ignored: "
                         "the project is not trusted (piworkfs trust)")

    def test_all_allowed_exits_0(self):
        rc, out, err = self.check("--mode", "design", "docs/design/a.md")
        self.assertEqual(rc, 0, err)

    def test_plan_is_erofs(self):
        rc, out, err = self.check("--mode", "plan", "docs/design/a.md")
        self.assertEqual(rc, 1)
        self.assertEqual(out, "denied   docs/design/a.md  EROFS  mode plan writes only its "
                         "plans folder, docs/plans/\n")

    def test_read_is_allowed_in_plan(self):
        rc, out, err = self.check("--mode", "plan", "--read", "src/main.c")
        self.assertEqual(rc, 0, err)
        self.assertTrue(out.startswith("allowed  src/main.c  "), out)

    def test_protected_paths(self):
        rc, out, err = self.check("--mode", "build", ".git/hooks/pre-commit",
                                  ".piworkfs/config.yaml", "secrets/a", "src/main.c")
        self.assertEqual(rc, 1)
        lines = out.splitlines()
        self.assertRegex(lines[0], r"^denied   \.git/hooks/pre-commit  EACCES  protected path "
                         r"\.git/hooks \(built-in\)$")
        self.assertRegex(lines[1], r"^denied   \.piworkfs/config\.yaml  EACCES  protected")
        self.assertRegex(lines[2], r"^denied   secrets/a  EACCES  protected path secrets/\*\* "
                         r"\u2014 \.piworkfs/config\.yaml:\d+$")
        self.assertRegex(lines[3], r"^allowed  src/main\.c  ")

    def test_off_allows_protected(self):
        rc, out, err = self.check("--mode", "off", ".git/config")
        self.assertEqual(rc, 0, out + err)

    def test_untrusted_tokens_not_writable(self):
        rc, out, err = self.check("--mode", "design", "tokens/colors.json")
        self.assertEqual(rc, 1)
        self.assertIn("EACCES", out)

    def test_global_tokens_writable(self):
        gdir = os.path.join(self.config_home, "piworkfs")
        os.makedirs(gdir)
        with open(os.path.join(gdir, "config.yaml"), "w") as f:
            f.write("design:\n  tokens:\n    - tokens/colors.json\n")
        rc, out, err = self.check("--mode", "design", "tokens/colors.json")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("design token file tokens/colors.json", out)

    def test_trusted_project_tokens_writable(self):
        proj = self.copy_demo()
        rc, out, err = self.run_pw("trust", proj)
        if rc == 5 and "not available" in err:
            self.skipTest("piworkfs trust is not in this build yet")
        self.assertEqual(rc, 0, err)
        rc, out, err = self.run_pw("check", "--project", proj, "--mode", "design",
                                   "tokens/colors.json")
        self.assertEqual(rc, 0, out + err)
        self.assertRegex(out, r"^allowed  tokens/colors\.json  \(design token file "
                         r"tokens/colors\.json \u2014 \.piworkfs/config\.yaml:\d+\)$")
        rc, out, err = self.run_pw("modes", "--project", proj, "--json")
        self.assertTrue(json.loads(out)["trusted"])

    def test_normalization_and_dirs(self):
        rc, out, err = self.check("--mode", "design", "--json", "./docs//x/../design/a.md",
                                  "docs/design", "docs/design/new/")
        self.assertEqual(rc, 0, out + err)
        j = json.loads(out)
        self.assertEqual([d["path"] for d in j],
                         ["docs/design/a.md", "docs/design", "docs/design/new"])
        self.assertEqual([d["is_dir"] for d in j], [False, True, True])

    def test_outside(self):
        rc, out, err = self.check("--mode", "off", "../elsewhere", "/etc/passwd")
        self.assertEqual(rc, 1)
        lines = out.splitlines()
        self.assertEqual(len(lines), 2, out)
        self.assertTrue(lines[0].startswith("outside  ../elsewhere  EXDEV  "), lines[0])
        self.assertTrue(lines[1].startswith("outside  /etc/passwd  EXDEV  "), lines[1])
        rc, out, err = self.check("--mode", "off", "--json", "/etc/passwd")
        d = json.loads(out)[0]
        self.assertEqual((d["decision"], d["errno"], d["reason"]),
                         ("outside", "EXDEV", "outside"))

    def test_absolute_inside(self):
        path = os.path.join(os.path.realpath(DEMO), "docs", "design", "a.md")
        rc, out, err = self.check("--mode", "design", path)
        self.assertEqual(rc, 0, out + err)
        self.assertTrue(out.startswith("allowed  docs/design/a.md  "), out)

    def test_relative_to_cwd_inside_project(self):
        rc, out, err = self.run_pw("check", "--mode", "design", "a.md", "../../src/main.c",
                                   cwd=os.path.join(DEMO, "docs", "design"))
        self.assertEqual(rc, 1)
        lines = out.splitlines()
        self.assertTrue(lines[0].startswith("allowed  docs/design/a.md  "), out)
        self.assertTrue(lines[1].startswith("denied   src/main.c  EACCES  "), out)

    def test_unknown_mode(self):
        rc, out, err = self.check("--mode", "nosuch", "src/main.c")
        self.assertEqual(rc, 3)
        self.assertEqual(out, "")
        self.assert_one_line_error(err, "check", "unknown mode 'nosuch'", "available:",
                                   "build", "design", "discuss", "off", "plan", "review")

    def test_no_path(self):
        rc, out, err = self.check("--mode", "design")
        self.assertEqual(rc, 2)
        self.assert_one_line_error(err, "check", "no PATH")

    def test_no_mode_offline(self):
        rc, out, err = self.check("src/main.c")
        self.assertEqual(rc, 2)
        self.assert_one_line_error(err, "no --mode given and not inside a live view")

    def test_project_layer_tightens(self):
        # An untrusted project may add deny and hide rules to a bundled mode.
        proj = self.copy_demo()
        os.makedirs(os.path.join(proj, ".piworkfs", "modes"), exist_ok=True)
        with open(os.path.join(proj, ".piworkfs", "modes", "build.md"), "w") as f:
            f.write("---\nname: build\ndescription: tighter\nwrites:\n  deny:\n"
                    "    - \"src/**\"\nhide:\n  - \"docs/guide.md\"\n---\nBody.\n")
        rc, out, err = self.run_pw("check", "--project", proj, "--mode", "build",
                                   "src/main.c", "README.md")
        self.assertEqual(rc, 1, err)
        lines = out.splitlines()
        self.assertRegex(lines[0], r"^denied   src/main\.c  EACCES  deny src/\*\* \u2014 "
                         r"\.piworkfs/modes/build\.md:6$")
        self.assertTrue(lines[1].startswith("allowed  README.md  (allow ** "), out)
        rc, out, err = self.run_pw("check", "--project", proj, "--mode", "build", "--read",
                                   "--json", "docs/guide.md")
        self.assertEqual(rc, 1, err)
        d = json.loads(out)[0]
        self.assertEqual((d["op"], d["errno"], d["reason"]), ("read", "ENOENT", "hidden"))
        self.assertEqual(d["rule"]["layer"], "project")
        rc, out, err = self.run_pw("allowed", "--project", proj, "--mode", "build", "--files",
                                   "--json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["files"],
                         ["README.md", "docs/design/a.md", "tokens/colors.json"])

    def test_broken_config_fails_closed(self):
        proj = self.copy_demo()
        with open(os.path.join(proj, ".piworkfs", "config.yaml"), "w") as f:
            f.write('protected: ["secrets/[x", "*.pem"]\n')
        for mode in ["build", "off"]:
            rc, out, err = self.run_pw("check", "--project", proj, "--mode", mode, "--json",
                                       "src/main.c", "keys/a.pem")
            self.assertEqual(rc, 1, out + err)
            self.assertEqual([(d["decision"], d["errno"], d["reason"]) for d in json.loads(out)],
                             [("denied", "EROFS", "fail-closed")] * 2)
            self.assertIn("config.yaml", err)
            self.assertIn("invalid glob", err)

    def test_project_not_a_directory(self):
        rc, out, err = self.run_pw("check", "--project", os.path.join(DEMO, "README.md"),
                                   "--mode", "plan", "x")
        self.assertEqual(rc, 3)
        self.assert_one_line_error(err, "check", "not a directory")

    def test_json_shape(self):
        rc, out, err = self.check("--mode", "design", "--json", "docs/design/a.md", "src/main.c")
        self.assertEqual(rc, 1)
        j = json.loads(out)
        self.assertEqual(len(j), 2)
        keys = ["path", "op", "is_dir", "decision", "errno", "reason", "mode", "rule",
                "message"]
        for d in j:
            self.assertEqual(list(d), keys)
            self.assertEqual(d["op"], "write")
            self.assertEqual(d["mode"], "design")
        a, b = j
        self.assertEqual((a["decision"], a["errno"], a["reason"]),
                         ("allowed", None, "allow-rule"))
        self.assertEqual(a["rule"]["kind"], "allow")
        self.assertEqual(a["rule"]["pattern"], "docs/design/**")
        self.assertTrue(a["rule"]["file"].endswith("/modes/design.md"))
        self.assertGreater(a["rule"]["line"], 0)
        self.assertEqual((b["decision"], b["errno"], b["reason"], b["rule"]),
                         ("denied", "EACCES", "no-allow", None))
        self.assertEqual(b["message"], "no allow rule matches in mode design")



class CheckBashTest(Base):
    """The acceptance of the bash pre-flight, on the repository's demo project."""

    def test_issue_acceptance_in_design(self):
        project = os.path.join(self.tmp, "demo")
        shutil.copytree(os.path.join(SOURCE, "demo", "project"), project)
        code, out, err = self.run_pw(
            "check-bash", "--mode", "design", "--project", project, "--",
            "sed -i s/a/b/ src/*.c > docs/design/out.md; echo x >> /etc/hosts")
        self.assertEqual(code, 1, out + err)
        lines = out.splitlines()
        for f in ("src/greet.c", "src/main.c"):
            line = next((l for l in lines if l.split()[1:2] == [f]), "")
            self.assertTrue(line.startswith("denied"), out)
            self.assertIn("EACCES", line)
            self.assertIn("no allow rule matches in mode design", line)
        self.assertTrue(any(l.startswith("allowed") and "docs/design/out.md" in l for l in lines),
                        out)
        self.assertTrue(any(l.startswith("outside") and "/etc/hosts" in l for l in lines), out)
        self.assertTrue(any(l.startswith("verdict: denied") for l in lines), out)
        code, out, _ = self.run_pw(
            "check-bash", "--mode", "design", "--project", project, "--json", "--",
            "sed -i s/a/b/ src/*.c > docs/design/out.md; echo x >> /etc/hosts")
        doc = json.loads(out)
        self.assertEqual(doc.get("verdict"), "denied", out)

class GlobTest(Base):
    """gitignore's glob meaning, the same in check, allowed --files and check-bash. The
    global layer is tests/fixtures/globs-global: config.yaml protects "*.pem" and declares
    the token "theme.css"; mode globs allows "tests/**" and "/top.txt", denies "*.log" and
    "gen/", hides ".env"."""

    def setUp(self):
        super().setUp()
        shutil.copytree(os.path.join(FIXTURES, "globs-global"),
                        os.path.join(self.config_home, "piworkfs"))
        self.proj = os.path.join(self.tmp, "proj")
        for rel in ["tests/a.c", "tests/x.log", "tests/sub/b.pem", "lib/tests/a.c",
                    "web/theme.css", "top.txt", "lib/top.txt", "sub/b.pem", "src/main.c"]:
            full = os.path.join(self.proj, rel)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            open(full, "w").close()
        os.makedirs(os.path.join(self.proj, ".git"))

    def check(self, mode, *paths):
        rc, out, err = self.run_pw("check", "--project", self.proj, "--mode", mode, "--json",
                                   *paths)
        self.assertIn(rc, (0, 1), err)
        return [(d["path"], d["decision"], d["reason"], (d["rule"] or {}).get("pattern"))
                for d in json.loads(out)]

    def test_check(self):
        self.assertEqual(self.check("globs", "tests/", "tests/a.c", "tests/x.log",
                                    "tests/sub/b.pem", "lib/tests/a.c", "top.txt",
                                    "lib/top.txt"), [
            ("tests", "allowed", "allow-rule", "tests/**"),
            ("tests/a.c", "allowed", "allow-rule", "tests/**"),
            ("tests/x.log", "denied", "deny-rule", "*.log"),
            ("tests/sub/b.pem", "denied", "protected", "*.pem"),
            ("lib/tests/a.c", "denied", "no-allow", None),
            ("top.txt", "allowed", "allow-rule", "/top.txt"),
            ("lib/top.txt", "denied", "no-allow", None)])
        self.assertEqual(self.check("build", "sub/b.pem", "src/main.c"), [
            ("sub/b.pem", "denied", "protected", "*.pem"),
            ("src/main.c", "allowed", "allow-rule", "**")])
        self.assertEqual(self.check("design", "web/theme.css"), [
            ("web/theme.css", "allowed", "token", "theme.css")])

    def test_allowed_files(self):
        def files(mode):
            rc, out, err = self.run_pw("allowed", "--mode", mode, "--project", self.proj,
                                       "--files", "--json")
            self.assertEqual(rc, 0, err)
            return json.loads(out)["files"]
        self.assertEqual(files("globs"), ["tests/a.c", "top.txt"])
        self.assertEqual(files("design"), ["web/theme.css"])
        self.assertNotIn("sub/b.pem", files("build"))

    def test_check_bash_agrees(self):
        fresh = os.path.join(self.tmp, "fresh")
        os.makedirs(os.path.join(fresh, ".git"))
        rc, out, err = self.run_pw("check", "--project", fresh, "--mode", "globs", "tests/")
        self.assertEqual(rc, 0, out + err)

        def targets(mode, cmd, project=self.proj):
            rc, out, err = self.run_pw("check-bash", "--mode", mode, "--project", project,
                                       "--json", "--", cmd)
            self.assertIn(rc, (0, 1), out + err)
            return {(t["path"], t["status"]) for t in json.loads(out)["targets"]}
        self.assertEqual(targets("globs", "mkdir tests", fresh), {("tests", "allowed")})
        doc = targets("globs", "mkdir tests/new && touch tests/x.log lib/tests/b.c top.txt")
        self.assertIn(("tests/new", "allowed"), doc)
        self.assertIn(("tests/x.log", "denied"), doc)
        self.assertIn(("lib/tests/b.c", "denied"), doc)
        self.assertIn(("top.txt", "allowed"), doc)
        doc = targets("build", "touch sub/c.pem src/x.c")
        self.assertIn(("sub/c.pem", "denied"), doc)
        self.assertIn(("src/x.c", "allowed"), doc)


import harness  # noqa: E402  (the mount tests' harness: private dirs, sure unmount)

BAD_CONFIG = 'protected: ["secrets/[x", "*.pem"]\n'
GOOD_CONFIG = 'protected: ["secrets/x", "*.pem"]\n'


class BrokenConfigViewTest(harness.MountCase):
    """A config.yaml with one bad glob fails the view closed, in every mode, with the reason
    in status, mode and reload; fixed and reloaded, all its rules apply."""
    tree = dict(harness.STANDARD_TREE, **{
        ".piworkfs/config.yaml": BAD_CONFIG,
        "a.pem": "key\n",
        "keys/b.pem": "key\n",
    })

    def write_config(self, text):
        with open(os.path.join(self.project, ".piworkfs", "config.yaml"), "w") as f:
            f.write(text)

    def status(self, v):
        # status lists every view on the machine; another's daemon may not answer (exit 4),
        # which says nothing about this one.
        p = self.run_pw("status", "--json")
        self.assertIn(p.returncode, (0, 4), p.stderr)
        return next(x for x in json.loads(p.stdout) if x.get("mountpoint") == v.mp)

    def assert_fails_closed(self, v):
        for rel in ["a.pem", "keys/b.pem", "src/a.c"]:
            self.assertErrno(harness.errno.EROFS, os.open, v.path(rel),
                             os.O_WRONLY | os.O_CLOEXEC)
        st = self.status(v)
        self.assertTrue(st["fail_closed"], st)
        self.assertIn("config.yaml", st["fail_reason"])
        self.assertIn("invalid glob", st["fail_reason"])
        p = self.run_pw("mode", "--mount", v.mp)
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("FAILING CLOSED", p.stdout)
        self.assertIn("config.yaml", p.stdout)

    def test_bad_protected_glob_fails_closed_until_fixed(self):
        v = self.mount("build")
        self.assert_fails_closed(v)
        p = self.run_pw("reload", "--mount", v.mp)
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("FAILING CLOSED", p.stdout)
        self.assertIn("invalid glob", p.stdout)
        self.assert_fails_closed(v)
        # No mode is a way around it: off, too, fails closed.
        p = self.run_pw("mode", "--mount", v.mp, "off")
        self.assertNotEqual(p.returncode, 0, p.stdout)
        self.assertIn("config.yaml", p.stderr)
        self.assert_fails_closed(v)

        p = self.run_pw("modes", cwd=v.mp)
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)

        self.write_config(GOOD_CONFIG)
        p = self.run_pw("reload", "--mount", v.mp)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        p = self.run_pw("mode", "--mount", v.mp)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertNotIn("FAILING CLOSED", p.stdout)
        self.assertFalse(self.status(v)["fail_closed"])
        for rel in ["a.pem", "keys/b.pem"]:
            self.assertErrno(harness.errno.EACCES, os.open, v.path(rel),
                             os.O_WRONLY | os.O_CLOEXEC)
        os.close(os.open(v.path("src/a.c"), os.O_WRONLY | os.O_CLOEXEC))


class ExitStatusViewTest(harness.MountCase):
    """mode, reload and modes tell a script what their text tells a person: exit 3 when the
    view fails closed or a mode file has errors, 0 when all is well."""

    def test_a_broken_mode_file_is_exit_3(self):
        v = self.mount("build")
        for args in [("mode",), ("mode", "build"), ("reload",), ("mode", "--json")]:
            p = self.run_pw(*args, "--mount", v.mp)
            self.assertEqual((p.returncode, p.stderr), (0, ""), args)
        # A mode that is not the active one breaks: reload says so in its exit status; a
        # switch that worked exits 0 and warns (issue 36: `mode build && make` runs make).
        self.write_project_mode("lint", '---\nname: lint\nhide: ["[x"]\n---\nLint.\n')
        p = self.run_pw("reload", "--mount", v.mp)
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("lint.md", p.stdout)
        self.assertNotIn("FAILING CLOSED", p.stdout)
        p = self.run_pw("mode", "--mount", v.mp, "plan")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertTrue(p.stdout.startswith("mode plan (was build)\n"), p.stdout)
        self.assertEqual(p.stderr, "piworkfs: mode: warning: 1 error in other mode files or "
                         "config.yaml (see 'piworkfs modes')\n")
        p = self.run_pw("mode", "--mount", v.mp, "--json")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(json.loads(p.stdout)["mode"], "plan")
        p = self.run_pw("modes", "--check", cwd=v.mp)
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        # The broken mode itself: refused, exit 3.
        p = self.run_pw("mode", "--mount", v.mp, "lint")
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        # Fixed: all zero again.
        self.write_project_mode("lint", "---\nname: lint\nhide: [x]\n---\nLint.\n")
        p = self.run_pw("reload", "--mount", v.mp)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        p = self.run_pw("mode", "--mount", v.mp)
        self.assertEqual((p.returncode, p.stderr), (0, ""))

    def test_active_mode_gone_is_exit_3(self):
        # The active mode's own file disappears: the view fails closed after a reload though
        # no file has an error, and modes (inside the view) says so.
        self.write_project_mode("lint", "---\nname: lint\nhide: [x]\n---\nLint.\n")
        v = self.mount("lint")
        os.unlink(os.path.join(self.project, ".piworkfs", "modes", "lint.md"))
        p = self.run_pw("reload", "--mount", v.mp)
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("FAILING CLOSED", p.stdout)
        p = self.run_pw("mode", "--mount", v.mp)
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        p = self.run_pw("modes", cwd=v.mp)
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("fails closed", p.stderr)


if __name__ == "__main__":
    if not os.path.exists(PIWORKFS) and os.sep in PIWORKFS:
        sys.exit("PIWORKFS=%s does not exist" % PIWORKFS)
    unittest.main(verbosity=2)
