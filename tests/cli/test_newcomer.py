#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A new user's first steps (issue 36): a normal user's first mount, honest exit codes,
each error once, and the conventions of mount(8).

The tests that mount as a normal user run in a private mount namespace of their own
(unshare -m), where a 0666 copy of /dev/fuse is bound over the real one: the user
`nobody` can then mount through fusermount3 as on a distribution that opens the device to
users, while the machine's /dev/fuse stays as it is. Every mount made there is detached in
the namespace before the driver returns. Python 3 standard library only.
"""

import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_cli  # noqa: E402
from test_cli import Base, PIWORKFS, DEMO, MODES_DIR, on_a_terminal  # noqa: E402

NOBODY = pwd.getpwnam("nobody")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

# Runs as root inside the private mount namespace: binds the device copy, runs each step as
# nobody, detaches every mount it was told of (whatever happened), prints the results.
DRIVER = r'''
import json, os, subprocess, sys
spec = json.load(open(sys.argv[1]))
subprocess.run(["mount", "--bind", spec["dev"], "/dev/fuse"], check=True)
def drop():
    os.setgroups([])
    os.setgid(spec["gid"])
    os.setuid(spec["uid"])
out = []
try:
    for st in spec["steps"]:
        env = dict(spec["env"])
        env.update(st.get("env", {}))
        for k in st.get("unset", []):
            env.pop(k, None)
        try:
            # cd as nobody: root may not enter nobody's view (no allow_other).
            argv = ["/bin/sh", "-c", 'cd "$0" && exec "$@"', st["cwd"]] + st["argv"]
            p = subprocess.run(argv, cwd="/", env=env, capture_output=True, text=True,
                               timeout=90, preexec_fn=None if st.get("root") else drop)
            out.append({"rc": p.returncode, "out": p.stdout, "err": p.stderr})
        except subprocess.TimeoutExpired:
            out.append({"rc": -1, "out": "", "err": "timed out"})
        mi = open("/proc/self/mountinfo").read()
        out[-1]["mounted"] = [m for m in spec["mounts"] if (" %s " % m) in mi]
finally:
    for m in spec["mounts"]:
        subprocess.run(["fusermount3", "-u", "-z", m], capture_output=True)
print(json.dumps(out))
'''


def have_namespaces():
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("fusermount3"):
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


class SecondUser(unittest.TestCase):
    """piworkfs used by `nobody`, as a normal user on a machine where /dev/fuse is 0666."""

    def setUp(self):
        if not have_namespaces():
            self.fail("these tests need root and unshare(1) to run as a second user")
        self.tmp = tempfile.mkdtemp(prefix="pw-user-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        os.chmod(self.tmp, 0o755)
        self.home = os.path.join(self.tmp, "home")
        self.proj = os.path.join(self.tmp, "proj")
        self.view = os.path.join(self.tmp, "proj.view")
        shutil.copytree(DEMO, self.proj, symlinks=True)
        os.makedirs(self.home)
        os.makedirs(self.view)
        for d in (self.home, self.proj, self.view):
            for root, dirs, files in os.walk(d):
                for n in [root] + [os.path.join(root, x) for x in dirs + files]:
                    os.lchown(n, NOBODY.pw_uid, NOBODY.pw_gid)
        self.dev = os.path.join(self.tmp, "fuse")
        os.mknod(self.dev, 0o666 | 0o020000, os.makedev(10, 229))
        os.chmod(self.dev, 0o666)
        # The fallback socket dir is fixed (/tmp/piworkfs-UID): remove it after the test if
        # the test made it.
        self.fallback = "/tmp/piworkfs-%d" % NOBODY.pw_uid
        if not os.path.exists(self.fallback):
            self.addCleanup(self._remove_fallback)
        self.env = {
            "PATH": "/usr/bin:/bin",
            "LC_ALL": "C.UTF-8",
            "HOME": self.home,
            "PIWORKFS_MODES_DIR": MODES_DIR,
        }

    def _remove_fallback(self):
        try:
            for n in os.listdir(self.fallback):
                os.unlink(os.path.join(self.fallback, n))
            os.rmdir(self.fallback)
        except OSError:
            pass

    def step(self, *args, cwd=None, env=None, unset=("XDG_RUNTIME_DIR",)):
        return {"argv": [PIWORKFS] + list(args), "cwd": cwd or self.tmp, "env": env or {},
                "unset": list(unset)}

    def completion_step(self, words, root=False):
        """Bash's completion of WORDS with the generated script, as nobody (or root)."""
        return {"argv": ["bash", "--norc", "-c", completion_program(words)], "cwd": self.tmp,
                "env": {"PATH": os.path.dirname(os.path.abspath(PIWORKFS)) + ":/usr/bin:/bin"},
                "unset": ["XDG_RUNTIME_DIR"], "root": root}

    def run_steps(self, steps, mounts=None):
        spec = {"dev": self.dev, "uid": NOBODY.pw_uid, "gid": NOBODY.pw_gid, "env": self.env,
                "steps": steps, "mounts": mounts or [self.view]}
        path = os.path.join(self.tmp, "spec.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        drv = os.path.join(self.tmp, "driver.py")
        with open(drv, "w") as f:
            f.write(DRIVER)
        p = subprocess.run(["unshare", "-m", "--propagation", "private", PYTHON, drv, path],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def test_mount_without_xdg_runtime_dir_works(self):
        # su -, cron, ssh without a login session: no XDG_RUNTIME_DIR. The view comes up,
        # and every command finds it, from inside it and by name.
        r = self.run_steps([
            self.step("mount", self.proj, self.view, "-m", "design"),
            self.step("mode", cwd=self.view),
            self.step("status"),
            self.step("mode", "build", cwd=self.proj),
            self.step("check", "src/main.c", cwd=self.view),
            self.step("changes", cwd=self.proj),
            self.step("log", "--switches", cwd=self.view),
            self.step("umount", self.view),
        ])
        self.assertEqual(r[0]["rc"], 0, r[0])
        self.assertIn("in mode design", r[0]["out"])
        self.assertEqual(r[1]["rc"], 0, r[1])
        self.assertIn("design", r[1]["out"])
        self.assertEqual(r[2]["rc"], 0, r[2])
        self.assertIn("/tmp/piworkfs-%d/" % NOBODY.pw_uid, r[2]["out"])
        self.assertEqual(r[3]["rc"], 0, r[3])
        self.assertTrue(r[4]["out"].startswith("allowed  src/main.c"), r[4])
        self.assertEqual(r[5]["rc"], 0, r[5])
        self.assertIn("design -> build", r[6]["out"])
        self.assertIn("user nobody", r[6]["out"])
        self.assertEqual(r[7]["rc"], 0, r[7])
        self.assertEqual(r[7]["mounted"], [])
        st = os.lstat(self.fallback)
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (NOBODY.pw_uid, 0o700))

    def test_run_without_xdg_runtime_dir_works_and_hides_the_operator_socket(self):
        # The README's "As a normal user": run too, where XDG_RUNTIME_DIR is unset.
        script = ("touch x 2>/dev/null && echo wrote || echo refused; "
                  "ls /tmp/piworkfs-%d; piworkfs mode build --mount %s; echo rc=$?"
                  % (NOBODY.pw_uid, self.view))
        r = self.run_steps([
            self.step("mount", self.proj, self.view, "-m", "plan"),
            self.step("run", "--mode", "plan", "-C", self.proj, "--", "sh", "-c", script,
                      env={"PATH": os.path.dirname(os.path.abspath(PIWORKFS)) +
                           ":/usr/bin:/bin"}),
            self.step("mode", cwd=self.view),
            self.step("umount", self.view),
        ])
        self.assertEqual(r[0]["rc"], 0, r[0])
        self.assertEqual(r[1]["rc"], 0, r[1])
        self.assertIn("refused", r[1]["out"])
        # Inside, the socket directory holds the agent's socket only, which may not loosen.
        names = [x for x in r[1]["out"].split() if x.endswith(".sock")]
        self.assertTrue(names and all(x.endswith(".agent.sock") for x in names), r[1])
        self.assertIn("rc=1", r[1]["out"])
        self.assertTrue(r[2]["out"].startswith("mode plan"), r[2])
        self.assertEqual(r[3]["rc"], 0, r[3])

    def test_umount_completes_only_the_users_own_views(self):
        # Item 12: `umount <TAB>` must not offer another user's view (mountinfo's user_id=).
        r = self.run_steps([
            self.step("mount", self.proj, self.view, "-m", "design"),
            self.completion_step(["piworkfs", "umount", ""]),
            self.completion_step(["piworkfs", "umount", ""], root=True),
            self.completion_step(["piworkfs", "mode", "--mount", ""], root=True),
            self.step("umount", self.view),
        ])
        self.assertEqual(r[0]["rc"], 0, r[0])
        self.assertEqual(r[1]["rc"], 0, r[1])
        self.assertEqual(r[1]["out"].split(), [self.view], "nobody's own view")
        self.assertEqual(r[2]["rc"], 0, r[2])
        self.assertNotIn(self.view, r[2]["out"], "root was offered nobody's view")
        self.assertNotIn(self.view, r[3]["out"], "root was offered nobody's view")
        self.assertEqual(r[4]["rc"], 0, r[4])

    def test_unusable_socket_dir_fails_before_anything_is_mounted(self):
        # A socket directory that is not the user's: one clear line, nothing mounted, and
        # no mode switch in the log for a view that never came up.
        theirs = os.path.join(self.tmp, "roots")
        os.makedirs(theirs, 0o700)
        r = self.run_steps([
            self.step("mount", self.proj, self.view, "-m", "design", "--socket-dir", theirs),
            self.step("log", "--switches", cwd=self.proj),
        ])
        lines = r[0]["err"].strip().splitlines()
        self.assertEqual(r[0]["rc"], 3, r[0])
        self.assertEqual(len(lines), 1, r[0])
        self.assertIn("not a private directory of yours", lines[0])
        self.assertIn(theirs, lines[0])
        self.assertEqual(r[0]["mounted"], [])
        self.assertNotIn("(none) -> design", r[1]["out"])

    def test_socket_dir_view_is_found_from_inside(self):
        sd = os.path.join(self.tmp, "sockets")
        os.makedirs(sd, 0o700)
        os.chown(sd, NOBODY.pw_uid, NOBODY.pw_gid)
        r = self.run_steps([
            self.step("mount", self.proj, self.view, "-m", "design", "--socket-dir", sd),
            self.step("mode", cwd=self.view),
            self.step("mode", "build", cwd=os.path.join(self.view, "src")),
            self.step("umount", self.view),
        ])
        self.assertEqual(r[0]["rc"], 0, r[0])
        self.assertEqual(r[1]["rc"], 0, r[1])
        self.assertEqual(r[2]["rc"], 0, r[2])
        self.assertIn("build", r[2]["out"])
        self.assertEqual(r[3]["rc"], 0, r[3])
        self.assertEqual(r[3]["mounted"], [])


def completion_program(words):
    """A bash program that loads `piworkfs completion bash`, completes WORDS (the last one
    being completed) as bash would on TAB, and prints the candidates, one a line."""
    line = " ".join(words)
    return ('source <(piworkfs completion bash)\n'
            "COMP_WORDS=(%s)\nCOMP_CWORD=%d\nCOMP_LINE=%s\nCOMP_POINT=%d\n"
            "_piworkfs piworkfs\nprintf '%%s\\n' \"${COMPREPLY[@]}\"\n") % (
                " ".join("'%s'" % w for w in words), len(words) - 1, "'%s'" % line, len(line))


ALL_COMMANDS = ["mount", "umount", "mode", "status", "reload", "modes", "allowed", "check",
                "why", "check-bash", "log", "trust", "run", "completion", "changes", "diff",
                "undo", "checkpoint"]


class Offline(Base):
    """The items that need no view."""

    def test_each_short_letter_means_one_thing_in_every_command(self):
        # Item 4: -n was log's --lines and undo's --dry-run.
        meaning = {}
        for cmd in ALL_COMMANDS:
            rc, out, err = self.run_pw(cmd, "--help")
            self.assertEqual(rc, 0, (cmd, err))
            for m in re.finditer(r"(?m)^\s+-([A-Za-z]), --([a-z][a-z-]*)", out):
                meaning.setdefault(m.group(1), set()).add(m.group(2))
        self.assertEqual({k: v for k, v in meaning.items() if len(v) > 1}, {})
        rc, _, err = self.run_pw("undo", "-n", "x")
        self.assertEqual(rc, 2, err)

    def test_an_unknown_command_with_json_is_a_json_error(self):
        # Item 17.
        rc, out, err = self.run_pw("bogus", "--json")
        self.assertEqual(rc, 2, err)
        j = json.loads(out)
        self.assertEqual(j["error"]["status"], 2)
        self.assertIn("unknown command 'bogus'", j["error"]["message"])

    def complete(self, *words):
        """What bash's completion of WORDS offers, with the generated script."""
        prog = completion_program(list(words))
        e = dict(self.env, PATH=os.path.dirname(os.path.abspath(PIWORKFS)) + ":" +
                 self.env["PATH"])
        p = subprocess.run(["bash", "--norc", "-c", prog], capture_output=True, text=True,
                           env=e, cwd=self.cwd, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return [x for x in p.stdout.splitlines() if x]

    def test_mount_o_completes_the_options(self):
        # Item 12: `mount -o <TAB>` offered nothing.
        got = self.complete("piworkfs", "mount", "-o", "")
        for want in ["mode=", "allow_other", "nonempty", "no_originals", "default_permissions"]:
            self.assertIn(want, got)
        self.assertEqual(self.complete("piworkfs", "mount", "-o", "nonempty,allow_o"),
                         ["nonempty,allow_other"])
        self.assertEqual(self.complete("piworkfs", "mount", "-o", "ro,mode=des"),
                         ["ro,mode=design"])

    def test_allowed_lists_a_subtree_once(self):
        # Item 17: design's docs/design/** and docs/design/ were two lines.
        rc, out, err = self.run_pw("allowed", "--mode", "design", "-C", DEMO)
        self.assertEqual(rc, 0, err)
        self.assertIn("docs/design/**", out)
        self.assertNotRegex(out, r"(?m)^allow +docs/design/ ")
        rc, out, err = self.run_pw("allowed", "--mode", "design", "-C", DEMO, "--json")
        self.assertIn("docs/design/", [r["pattern"] for r in json.loads(out)["rules"]])

    def test_file_names_short_in_text_absolute_in_json_as_docs_json_says(self):
        # Item 17: text named modes/build.md, JSON the full path; say which, consistently.
        proj = os.path.join(self.tmp, "proj")
        shutil.copytree(DEMO, proj, symlinks=True)
        proj = os.path.realpath(proj)
        os.makedirs(os.path.join(proj, ".piworkfs", "modes"), exist_ok=True)
        with open(os.path.join(proj, ".piworkfs", "modes", "tidy.md"), "w") as f:
            f.write("---\nname: tidy\ndescription: Tidy\nwrites:\n  allow: [src/**]\n"
                    "protect: true\n---\nTidy.\n")
        with open(os.path.join(proj, ".piworkfs", "modes", "bad.md"), "w") as f:
            f.write("---\nname: bad\ndescription: [x\n---\n")
        rc, out, err = self.run_pw("modes", "-C", proj)
        self.assertRegex(out, r"(?m)^build +bundled +modes/build\.md ")
        self.assertRegex(out, r"(?m)^tidy +project +\.piworkfs/modes/tidy\.md ")
        bad = os.path.join(proj, ".piworkfs", "modes", "bad.md")
        self.assertRegex(out + err, r"(?m)^ *%s:\d+:\d+: error: " % re.escape(bad))
        rc, out, err = self.run_pw("modes", "-C", proj, "--json")
        j = json.loads(out)
        files = {m["name"]: m["file"] for m in j["modes"]}
        self.assertEqual(files["build"], os.path.join(os.path.realpath(MODES_DIR), "build.md"))
        self.assertEqual(files["tidy"], os.path.join(proj, ".piworkfs", "modes", "tidy.md"))
        self.assertIn(bad, [w["file"] for w in j["warnings"]])
        rc, out, err = self.run_pw("check", "--mode", "build", "-C", proj, "src/main.c")
        self.assertIn("modes/build.md:6", out)
        self.assertNotIn(os.path.realpath(MODES_DIR), out)
        rc, out, err = self.run_pw("check", "--mode", "build", "-C", proj, "src/main.c",
                                   "--json")
        self.assertEqual(json.loads(out)[0]["rule"]["file"], files["build"])
        with open(os.path.join(test_cli.SOURCE, "docs", "JSON.md")) as f:
            doc = " ".join(f.read().split())
        for said in ("JSON always gives a file as its absolute real path",
                     "A diagnostic is the one exception"):
            self.assertTrue(said in doc, "docs/JSON.md does not say: " + said)

    def test_builtin_protected_paths_are_spelt_alike(self):
        # Item 17: "/.piworkfs" had a leading slash, ".git/hooks" none.
        rc, out, err = self.run_pw("allowed", "--mode", "build", "-C", DEMO)
        self.assertRegex(out, r"(?m)^protected +\.piworkfs +\(built-in\)$")
        self.assertRegex(out, r"(?m)^protected +\.git/hooks +\(built-in\)$")


import harness  # noqa: E402  (the mount tests' harness: private dirs, sure unmount)


class ViewTest(harness.MountCase):
    """A live view, mounted by root with the mount tests' harness."""

    def test_a_switch_that_worked_exits_0_and_warns(self):
        # Item 7: another mode file is broken; the switch works, so `&&` goes on.
        self.write_project_mode("lint", '---\nname: lint\nhide: ["[x"]\n---\nLint.\n')
        v = self.mount("plan")
        p = self.run_tool(["sh", "-c", '"$0" mode build && echo make-ran', PIWORKFS],
                          cwd=v.mp, check=False)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("mode build (was plan)", p.stdout)
        self.assertIn("make-ran", p.stdout)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("warning: 1 error in other mode files", lines[0])
        # The broken mode itself is still refused with 3.
        p = self.run_pw("mode", "lint", cwd=v.mp)
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)

    def test_mode_and_changes_work_from_the_backing_directory(self):
        # Item 3: the README promises every command from the backing directory.
        v = self.mount("plan")
        for cwd in (self.project, os.path.join(self.project, "src")):
            p = self.run_pw("mode", cwd=cwd)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertTrue(p.stdout.startswith("mode plan"), p.stdout)
            p = self.run_pw("changes", cwd=cwd)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        p = self.run_pw("mode", "build", cwd=self.project)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        p = self.run_pw("mode", cwd=v.mp)
        self.assertTrue(p.stdout.startswith("mode build"), p.stdout)
        # Outside both, still no view.
        p = self.run_pw("mode", cwd=self.cwd)
        self.assertEqual(p.returncode, 4, p.stdout + p.stderr)

    def test_check_takes_absolute_paths_of_the_view_and_of_the_backing_directory(self):
        # Item 2: the project under either of its names.
        v = self.mount("design")
        for cwd, path in [(v.mp, os.path.join(self.project, "src", "a.c")),
                          (self.project, os.path.join(v.mp, "src", "a.c"))]:
            p = self.run_pw("check", path, cwd=cwd)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertTrue(p.stdout.startswith("denied   src/a.c  EACCES"), p.stdout)
            p = self.run_pw("check", "--mode", "build", path, cwd=cwd)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertTrue(p.stdout.startswith("allowed  src/a.c"), p.stdout)
        p = self.run_pw("check", "/etc/passwd", cwd=v.mp)
        self.assertTrue(p.stdout.startswith("outside  /etc/passwd"), p.stdout)

    def test_a_busy_umount_is_one_message_naming_the_holders(self):
        # Item 13: fusermount3's line and ours were two; neither named who holds the view.
        v = self.mount("plan")
        holder = subprocess.Popen(["sleep", "600"], cwd=v.path("src"))
        self.addCleanup(holder.wait)
        self.addCleanup(holder.kill)
        p = self.run_pw("umount", v.mp)
        self.assertEqual(p.returncode, 5, p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("is busy: in use by ", lines[0])
        self.assertIn("sleep (pid %d)" % holder.pid, lines[0])
        self.assertIn("--lazy", lines[0])
        holder.kill()
        holder.wait()
        p = self.run_pw("umount", v.mp)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.wait_daemon_exit(v)
        v.unmounted = True

    def test_status_of_a_killed_daemon_says_what_to_do(self):
        v = self.mount("plan")
        v.proc.kill()
        v.proc.wait()
        p = self.run_pw("status")
        mine = p.stdout.split("\n\n")
        block = next(b for b in mine if b.startswith(v.mp + "\n"))
        self.assertIn("piworkfs umount %s" % v.mp, block)
        self.assertIn("daemon is gone", block)
        p = self.run_pw("status", "--json")
        j = next(x for x in json.loads(p.stdout) if x.get("mountpoint") == v.mp)
        self.assertIn("piworkfs umount", j["hint"])
        # What it says works: the stale view is detached.
        p = self.run_pw("umount", v.mp)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse(harness.is_view_mounted(v.mp))
        v.unmounted = True

    def test_each_problem_once_with_the_right_word(self):
        # Item 8: a broken config.yaml was listed three times, twice as "warning: ...:
        # error:", and `modes` put "2 warnings:" over two error lines.
        with open(os.path.join(self.project, ".piworkfs", "config.yaml"), "w") as f:
            f.write('protected: ["secrets/[x"]\n')
        v = self.mount("build")
        glob = 'invalid glob "secrets/[x"'
        p = self.run_pw("reload", cwd=v.mp)
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertEqual((p.stdout + p.stderr).count(glob), 1, p.stdout + p.stderr)
        self.assertNotIn("warning", p.stdout + p.stderr)
        p = self.run_pw("mode", "build", cwd=v.mp)
        self.assertEqual((p.stdout + p.stderr).count(glob), 1, p.stdout + p.stderr)
        self.assertIn("mode 'build' is broken", p.stderr)
        p = self.run_pw("modes", cwd=v.mp)
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertEqual((p.stdout + p.stderr).count(glob), 1, p.stdout + p.stderr)
        self.assertIn("\n1 error:\n", p.stdout)
        self.assertNotIn("warning", p.stdout)
        p = self.run_pw("status", "--json")
        st = next(x for x in json.loads(p.stdout) if x.get("mountpoint") == v.mp)
        p = self.run_pw("status")
        block = next(b for b in p.stdout.split("\n\n") if b.startswith(v.mp + "\n"))
        self.assertEqual(block.count(glob), 1, block)
        self.assertNotIn("warning", block)
        self.assertTrue(st["fail_closed"])

    def test_trust_inside_a_view_reloads_it_and_ignored_keys_are_shown(self):
        # Item 9: the widening keys an untrusted project declares are shown where they
        # bite, and trusting the project from inside its view takes effect at once.
        ignored = "ignored: the project is not trusted (piworkfs trust)"
        self.write_project_mode("docs", '---\nname: docs\ndescription: docs only\nwrites:\n'
                                '  allow: ["docs/**"]\n---\nWrite docs.\n')
        v = self.mount("docs")
        p = self.run_pw("mode", cwd=v.mp)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("writes nothing", p.stdout)
        self.assertIn("writes.allow (.piworkfs/modes/docs.md:5) " + ignored, p.stdout)
        p = self.run_pw("check", "--mode", "design", "styles/tokens.css", cwd=v.mp)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("no allow rule matches", p.stdout)
        self.assertIn("design.tokens (.piworkfs/config.yaml:2) " + ignored, p.stdout)
        self.assertErrno(harness.errno.EROFS, os.open, v.path("docs/x.md"),
                         os.O_WRONLY | os.O_CLOEXEC)
        p = self.run_pw("trust", cwd=v.mp)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("reloaded the view at %s" % v.mp, p.stdout)
        self.assertNotIn("next reload", p.stdout)
        os.close(os.open(v.path("docs/x.md"), os.O_WRONLY | os.O_CLOEXEC))
        p = self.run_pw("mode", cwd=v.mp)
        self.assertNotIn(ignored, p.stdout)


class LogTest(harness.MountCase):
    """Items 5 and 14: the log on a terminal and its rows."""

    def denials(self, v, *names):
        for rel in names:
            with self.assertRaises(OSError):
                open(v.path(rel), "w")
        self.assertTrue(harness.wait_until(
            lambda: all(n in self.run_pw("log", "--all").stdout for n in names), 60),
            self.run_pw("log", "--all").stdout)

    def test_log_fits_80_columns(self):
        deep = "docs/" + "d" * 30 + "/" + "e" * 30 + "/file.txt"
        os.makedirs(os.path.join(self.project, os.path.dirname(deep)))
        v = self.mount("plan")
        self.denials(v, deep, "src/new.c")
        self.run_pw("mode", "build", cwd=v.mp, check=True)
        rc, out = on_a_terminal([PIWORKFS, "log"], dict(self.env, COLUMNS="80", NO_COLOR="1"),
                                v.mp)
        self.assertEqual(rc, 0, out)
        lines = out.splitlines()
        self.assertTrue(all(len(x) <= 80 for x in lines), "\n".join(lines))
        self.assertTrue(any("src/new.c" in x for x in lines), out)
        self.assertTrue(any("file.txt" in x for x in lines), out)
        # The rule is not cut to "r...": it has a line of its own when it has no room.
        self.assertIn("read-only", out)
        self.assertIn("asked by ", out)
        self.assertNotRegex(out, r"\b[a-z]\.\.\.$")

    def test_switch_rows_name_who_asked_and_reloads_add_none(self):
        v = self.mount("design")
        for _ in range(2):
            self.run_pw("reload", cwd=v.mp)
        p = self.run_pw("log", "--switches", cwd=v.mp)
        # who asked is on the lines under the row when it has no room beside it
        rows = re.findall(r"(?m)^\S.* switch .*(?:\n .*)*", p.stdout)
        rows = [re.sub(r"\n\s+", " ", x) for x in rows]
        self.assertEqual(len(rows), 1, p.stdout)
        self.assertIn("(none) -> design", rows[0])
        self.assertIn("asked by piworkfs mount (pid %d, user root)" % v.pid, rows[0])
        self.assertNotIn("design -> design", p.stdout)
        p = self.run_pw("log", "--switches", "--jsonl", cwd=v.mp)
        self.assertEqual(len(p.stdout.splitlines()), 1, p.stdout)

    def test_project_column_outside_a_view(self):
        v = self.mount("plan")
        other, other_mp = self.fresh_project("other")
        w = self.mount("plan", project=other, mountpoint=other_mp)
        self.denials(v, "src/one.c")
        self.denials(w, "src/two.c")
        p = self.run_pw("log", cwd=self.cwd)
        self.assertIn("PROJECT", p.stdout.splitlines()[0], p.stdout)
        # each event with the lines under it (its path and rule, when the row has no room)
        rows = [re.sub(r"\n\s+", "  ", x) for x in re.findall(r"(?m)^\S.*(?:\n .*)*", p.stdout)]
        one = next(x for x in rows if "src/one.c" in x)
        two = next(x for x in rows if "src/two.c" in x)
        self.assertIn(self.project, one)
        self.assertIn(other, two)
        # Inside a view, one project: no column.
        p = self.run_pw("log", cwd=v.mp)
        self.assertNotIn("PROJECT", p.stdout)

    def test_follow_n_0_prints_nothing_old(self):
        v = self.mount("plan")
        self.denials(v, "src/old.c")
        out = open(os.path.join(self.tmp, "follow.out"), "w+")
        f = subprocess.Popen([PIWORKFS, "log", "--follow", "-n", "0"], cwd=v.mp, env=self.env,
                             stdout=out, stderr=subprocess.STDOUT)
        self.addCleanup(f.wait)
        self.addCleanup(f.kill)

        def text():
            out.seek(0)
            return out.read()
        self.assertTrue(harness.wait_until(lambda: "TIME" in text(), 60), text())
        with self.assertRaises(OSError):
            open(v.path("src/new.c"), "w")
        self.assertTrue(harness.wait_until(lambda: "src/new.c" in text(), 60), text())
        self.assertNotIn("src/old.c", text())
        f.kill()


# Runs as root in a private mount namespace: /usr/sbin is covered by a copy of its links
# plus mount.fuse.piworkfs, a link to the program under test, so that mount(8) finds the
# helper as it would once installed; the view is unmounted before the namespace ends.
HELPER_SCRIPT = r'''
set -u
sbin=$1 pw=$2 proj=$3 view=$4
# every helper of the machine but an installed piworkfs's own (ninja install links one):
# the helper under test is this build's
for f in /usr/sbin/*; do
	case ${f##*/} in mount.fuse.piworkfs|mount.piworkfs) continue ;; esac
	ln -s "$f" "$sbin/"
done
ln -sfn "$pw" "$sbin/mount.fuse.piworkfs"
mount --bind "$sbin" /usr/sbin
trap 'fusermount3 -u -z "$view" 2>/dev/null' EXIT
mount -t fuse.piworkfs "$proj" "$view" -o mode=design,noauto,nodev,x-systemd.automount
echo "mount=$?"
(cd "$view" && "$pw" mode | head -1)
grep -c " $view .* - fuse.piworkfs " /proc/self/mountinfo
umount "$view"; echo "umount=$?"
grep -c " $view .* - fuse.piworkfs " /proc/self/mountinfo
'''


class MountConventions(harness.MountCase):
    """Item 11: the view's options in -o, and mount(8)'s helper."""

    def test_view_options_in_o_as_sshfs(self):
        v = self.mount(None, args=["-o", "mode=design,noauto,_netdev,x-systemd.automount"])
        p = self.run_pw("mode", cwd=v.mp)
        self.assertTrue(p.stdout.startswith("mode design"), p.stdout + p.stderr)
        p = self.run_pw("mount", self.project, self.tmp, "-o", "mode=nosuch")
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("unknown mode 'nosuch'", p.stderr)
        p = self.run_pw("mount", self.project, self.tmp, "-o", "mdoe=build")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("did you mean 'mode'", p.stderr)

    def test_mount_t_fuse_piworkfs_uses_the_helper(self):
        if not have_namespaces():
            self.fail("needs root and unshare(1)")
        sbin = os.path.join(self.tmp, "sbin")
        os.mkdir(sbin)
        script = os.path.join(self.tmp, "helper.sh")
        with open(script, "w") as f:
            f.write(HELPER_SCRIPT)
        p = subprocess.run(["unshare", "-m", "--propagation", "private", "bash", script, sbin,
                            os.path.abspath(PIWORKFS), self.project, self.mp],
                           env=self.env, capture_output=True, text=True, timeout=300)
        self.assertEqual(p.stdout.split(), ["mount=0", "mode", "design", "1", "umount=0", "0"],
                         p.stdout + p.stderr)
        self.assertFalse(harness.is_view_mounted(self.mp))


class DevScripts(unittest.TestCase):
    """Item 15: ./dev demo installs only what it needs, and shows refusals as a shell does."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pw-dev-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def test_setup_for_the_demo_leaves_out_the_pi_releases(self):
        # A copy of scripts/setup in a tree of its own, with dpkg-query and npm stubbed:
        # every package counts as installed, and npm only records what it was asked.
        tree = os.path.join(self.tmp, "tree")
        os.makedirs(os.path.join(tree, "scripts"))
        shutil.copy(os.path.join(test_cli.SOURCE, "scripts", "setup"),
                    os.path.join(tree, "scripts", "setup"))
        tsb = os.path.join(tree, "third_party", "tree-sitter-bash")
        os.makedirs(tsb)
        with open(os.path.join(tsb, ".version"), "w") as f:
            f.write("0.23.3\n")
        os.makedirs(os.path.join(tree, "tests", "pi"))
        with open(os.path.join(tree, "tests", "pi", "package-lock.json"), "w") as f:
            f.write("{}\n")
        stubs = os.path.join(self.tmp, "bin")
        os.makedirs(stubs)
        calls = os.path.join(self.tmp, "npm-calls")
        for name, body in [("dpkg-query", "printf 'install ok installed'"),
                           ("npm", 'echo "$*" >> %s' % calls)]:
            with open(os.path.join(stubs, name), "w") as f:
                f.write("#!/bin/sh\n%s\n" % body)
            os.chmod(os.path.join(stubs, name), 0o755)
        env = {"PATH": stubs + ":/usr/bin:/bin"}
        p = subprocess.run([os.path.join(tree, "scripts", "setup"), "demo"], env=env,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse(os.path.exists(calls), "setup demo ran npm: %s" %
                         (open(calls).read() if os.path.exists(calls) else ""))
        p = subprocess.run([os.path.join(tree, "scripts", "setup")], env=env,
                           capture_output=True, text=True, timeout=60)
        self.assertIn("ci", open(calls).read(), p.stdout + p.stderr)

    def demo_env(self, **extra):
        """The environment of a person running demo/run: piworkfs on PATH, this test's HOME,
        runtime directory (made, 0700), configuration and state, the bundled modes; EXTRA
        added."""
        runtime = os.path.join(self.tmp, "run")
        os.makedirs(runtime, 0o700)
        return dict({
            "PATH": os.path.dirname(os.path.abspath(PIWORKFS)) + ":/usr/bin:/bin",
            "LC_ALL": "C.UTF-8", "HOME": self.tmp, "XDG_RUNTIME_DIR": runtime,
            "XDG_CONFIG_HOME": os.path.join(self.tmp, "config"),
            "PIWORKFS_STATE_DB": os.path.join(self.tmp, "state.db"),
            "PIWORKFS_MODES_DIR": MODES_DIR,
        }, **extra)

    @staticmethod
    def unmount_demos(env, demos):
        """Unmounts the view of each demo directory in DEMOS (read at cleanup): with
        `piworkfs umount`, lazily if that left it mounted."""
        for d in demos:
            view = os.path.join(d, "greeter.view")
            if harness.is_view_mounted(view):
                subprocess.run([PIWORKFS, "umount", view], env=env, capture_output=True)
            if harness.is_view_mounted(view):
                subprocess.run(["fusermount3", "-u", "-z", view], capture_output=True)

    def test_the_demo_shows_a_refusal_as_the_shell_prints_it(self):
        base = os.path.join(self.tmp, "demo")
        env = self.demo_env(PIWORKFS_DEMO_DIR=base)
        self.addCleanup(self.unmount_demos, env, [base])
        p = subprocess.run([os.path.join(test_cli.SOURCE, "demo", "run")], env=env,
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("  bash: src/main.c: Read-only file system\n", p.stdout)
        self.assertNotIn("demo/run: line", p.stdout)

    def test_the_demo_has_a_private_directory_and_writes_plain_text_to_a_file(self):
        # Issue 44, item 15: `./dev demo > file` wrote bold escape codes, and every user's
        # demo went to one fixed /tmp/piworkfs-demo. Now a private directory of mktemp's,
        # printed, replaced by the next demo; escape codes only on a terminal.
        env = self.demo_env(TMPDIR=self.tmp)
        demos = []
        self.addCleanup(self.unmount_demos, env, demos)
        for _ in range(2):
            out = os.path.join(self.tmp, "demo.txt")
            with open(out, "w") as f:
                p = subprocess.run([os.path.join(test_cli.SOURCE, "demo", "run")], env=env,
                                   stdout=f, stderr=subprocess.PIPE, text=True, timeout=300)
            with open(out) as f:
                text = f.read()
            self.assertEqual(p.returncode, 0, text + p.stderr)
            self.assertNotIn("\x1b", text, "escape codes in a file")
            m = re.search(r"The demo's directory: (\S+) ", text)
            self.assertIsNotNone(m, text)
            d = m.group(1)
            demos.append(d)
            self.assertEqual(os.path.dirname(d), self.tmp)
            self.assertTrue(os.path.basename(d).startswith("piworkfs-demo."), d)
            st = os.stat(d)
            self.assertEqual((st.st_mode & 0o777, st.st_uid), (0o700, os.getuid()))
            self.assertIn("cd %s/greeter.view" % d, text)
            self.assertTrue(harness.is_view_mounted(os.path.join(d, "greeter.view")))
        self.assertNotEqual(demos[0], demos[1])
        # The second demo replaced the first: unmounted, and gone.
        self.assertFalse(harness.is_view_mounted(os.path.join(demos[0], "greeter.view")))
        self.assertFalse(os.path.exists(demos[0]))


class AgentMessages(unittest.TestCase):
    """Item 10: one truthful message per situation for the agent inside `run`."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pw-agent-")
        self.addCleanup(self._teardown)
        self.project = os.path.realpath(os.path.join(self.tmp, "proj"))
        shutil.copytree(DEMO, self.project, symlinks=True)
        runtime = os.path.join(self.tmp, "run")
        os.mkdir(runtime, 0o700)
        for d in ("home", "config", "state"):
            os.mkdir(os.path.join(self.tmp, d))
        self.env = {
            "PATH": os.path.dirname(os.path.abspath(PIWORKFS)) + ":/usr/bin:/bin",
            "LC_ALL": "C.UTF-8",
            "HOME": os.path.join(self.tmp, "home"),
            "XDG_CONFIG_HOME": os.path.join(self.tmp, "config"),
            "XDG_RUNTIME_DIR": runtime,
            "XDG_STATE_HOME": os.path.join(self.tmp, "state"),
            "PIWORKFS_STATE_DB": os.path.join(self.tmp, "state", "state.db"),
            "PIWORKFS_MODES_DIR": MODES_DIR,
        }

    def _teardown(self):
        for mp in harness.piworkfs_mounts():
            if mp.startswith(self.tmp):
                subprocess.run(["fusermount3", "-u", "-z", mp], stderr=subprocess.DEVNULL)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_a_request_nobody_sees_yet_is_one_message(self):
        # No terminal: the request waits for `piworkfs mode --approve`. The agent is told
        # that, once, and not also to "ask the person to run piworkfs mode build".
        p = subprocess.run([PIWORKFS, "run", "--mode", "plan", "--project", self.project,
                            "--", "sh", "-c", "piworkfs mode build --reason test; echo rc=$?"],
                           cwd=self.project, env=self.env, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=120)
        self.assertIn("rc=1", p.stdout, p.stderr)
        lines = [x for x in p.stderr.splitlines() if x.startswith("piworkfs: mode:")]
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("refused for now: 'piworkfs mode build' loosens the mode", lines[0])
        self.assertIn("asked them", lines[0])
        self.assertIn("piworkfs mode --approve", lines[0])
        self.assertNotIn("ask the person you work for to run", p.stderr)

    def test_plan_approve_inside_prints_an_answer_that_works_as_printed(self):
        # Issue 45, item 5: inside the agent, `plan approve NAME` asked the person and
        # printed "allow it with 'piworkfs mode --approve'", which from the person's shell
        # names no request and no view. Printed now: the request's id and the run's view,
        # a command that, run as printed outside every view, approves the plan.
        os.makedirs(os.path.join(self.project, "docs", "plans"), exist_ok=True)
        with open(os.path.join(self.project, "docs", "plans", "cache.md"), "w") as f:
            f.write("---\ntitle: Cache\nstatus: draft\ncreated: 2026-12-02\n"
                    "updated: 2026-12-02\n---\n# Cache\n\n## Tasks\n- [ ] Add it\n")
        run = subprocess.Popen(
            [PIWORKFS, "run", "--mode", "plan", "--project", self.project, "--", "sh", "-c",
             "piworkfs plan approve cache; echo ASKED >&2; read x; piworkfs plan show cache "
             "--json"],
            cwd=self.project, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        self.addCleanup(lambda: run.poll() is None and run.kill())
        err = b""
        end = time.monotonic() + 120
        while b"ASKED" not in err:
            self.assertLess(time.monotonic(), end, err)
            line = run.stderr.readline()
            self.assertTrue(line, err)
            err += line
        m = re.search(rb"allow it with '(piworkfs mode --approve \d+ --run \w+)'", err)
        self.assertIsNotNone(m, err)
        p = subprocess.run(["sh", "-c", m.group(1).decode()], cwd=self.tmp, env=self.env,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("allowed: approve plan cache", p.stdout)
        out, _ = run.communicate(b"go\n", timeout=120)
        self.assertEqual(run.returncode, 0, out)
        self.assertEqual(json.loads(out)["status"], "approved")

    def test_mode_bodies_say_how_the_agent_asks(self):
        # The bodies said "Only they can switch, outside your session", but inside run the
        # agent's own `piworkfs mode NAME --reason` is how it asks, and tightening needs
        # nobody.
        for name in test_cli.BUNDLED:
            with open(os.path.join(MODES_DIR, name + ".md")) as f:
                body = f.read()
            self.assertNotIn("Only they can switch", body, name)
            if name != "off":
                self.assertIn("--reason", body, name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
