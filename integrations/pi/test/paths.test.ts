// SPDX-License-Identifier: MIT
import assert from "node:assert/strict";
import { test } from "node:test";
import { projectCwd, toProjectPath } from "../src/paths.ts";
import { candidatePaths, errorKinds } from "../src/refusals.ts";
import { fnv1a64, parseMountinfo, pickView, socketDir, socketName } from "../src/view.ts";

test("tool paths map to project paths from Pi's cwd, under the view or the project", () => {
	const roots = ["/home/u/proj.view", "/home/u/proj"];
	assert.equal(toProjectPath("src/a.c", "/home/u/proj.view", roots), "src/a.c");
	assert.equal(toProjectPath("../src/a.c", "/home/u/proj.view/docs", roots), "src/a.c");
	assert.equal(toProjectPath("/home/u/proj.view/docs/x.md", "/tmp", roots), "docs/x.md");
	assert.equal(toProjectPath("/home/u/proj/docs/x.md", "/tmp", roots), "docs/x.md", "the backing path too");
	assert.equal(toProjectPath(".", "/home/u/proj.view", roots), ".");
	assert.equal(toProjectPath("../../etc/passwd", "/home/u/proj.view", roots), null);
	assert.equal(toProjectPath("/home/u/proj.viewer/a", "/", roots), null, "a / boundary");
	assert.equal(toProjectPath("~/x", "/home/u/proj.view", roots), null);
	// Inside `piworkfs run` the project's own path shows the view.
	assert.equal(toProjectPath("a/b", "/home/u/proj/sub", ["/home/u/proj"]), "sub/a/b");
	assert.equal(projectCwd("/home/u/proj.view/docs", roots), "docs");
	assert.equal(projectCwd("/home/u/proj.view", roots), "");
	assert.equal(projectCwd("/tmp", roots), null);
});

test("view discovery: mountinfo, longest mountpoint, socket name", () => {
	const mi = [
		"36 35 98:0 /mnt1 /mnt1 rw,noatime master:1 - ext3 /dev/root rw,errors=continue",
		"40 36 0:50 / /home/u/proj.view rw,nosuid,nodev,relatime - fuse.piworkfs /home/u/proj rw,user_id=0,group_id=0",
		"41 40 0:51 / /home/u/proj.view/in\\040side rw - fuse.piworkfs /other\\040p rw",
		"42 36 0:52 / /x rw - fuse.sshfs host: rw",
	].join("\n");
	const m = parseMountinfo(mi);
	assert.deepEqual(m, [
		{ mountpoint: "/home/u/proj.view", source: "/home/u/proj" },
		{ mountpoint: "/home/u/proj.view/in side", source: "/other p" },
	]);
	assert.equal(pickView(m, "/home/u/proj.view/in side/a")!.mountpoint, "/home/u/proj.view/in side");
	assert.equal(pickView(m, "/home/u/proj.view/src")!.mountpoint, "/home/u/proj.view");
	assert.equal(pickView(m, "/home/u/proj.viewx"), null);
	// FNV-1a 64 test vectors, and the daemon's naming (docs/PROTOCOL.md).
	assert.equal(fnv1a64(Buffer.from("")), "cbf29ce484222325");
	assert.equal(fnv1a64(Buffer.from("a")), "af63dc4c8601ec8c");
	assert.equal(socketName("/home/u/work/view"), `view-${fnv1a64(Buffer.from("/home/u/work/view"))}.sock`);
	assert.equal(socketName("/"), `root-${fnv1a64(Buffer.from("/"))}.sock`);
	assert.match(socketName("/a/b c+d-0123456789012345678901234"), /^b_c_d-012345678901234567-[0-9a-f]{16}\.sock$/);
	assert.equal(socketDir({ XDG_RUNTIME_DIR: "/run/user/1000" }, 1000), "/run/user/1000/piworkfs");
	assert.equal(socketDir({}, 0), "/run/piworkfs");
	assert.equal(socketDir({}, 1000), null);
});

test("refusals in tool output: kinds and candidate paths", () => {
	assert.deepEqual(errorKinds("EACCES: permission denied, open '/v/src/hack.c'"), { write: true, read: false });
	assert.deepEqual(errorKinds("ls: cannot access 'x': No such file or directory"), { write: false, read: true });
	assert.deepEqual(errorKinds("all good"), { write: false, read: false });
	assert.deepEqual(candidatePaths("EACCES: permission denied, open '/v/src/hack.c'"), [{ path: "/v/src/hack.c", kind: "write" }]);
	assert.deepEqual(candidatePaths("/bin/bash: line 1: src/sh.txt: Permission denied"), [{ path: "src/sh.txt", kind: "write" }]);
	assert.deepEqual(candidatePaths("touch: cannot touch 'src/x': Read-only file system"), [{ path: "src/x", kind: "write" }]);
	assert.deepEqual(candidatePaths("PermissionError: [Errno 13] Permission denied: 'src/py.txt'"), [{ path: "src/py.txt", kind: "write" }]);
	assert.deepEqual(candidatePaths("mkdir: cannot create directory ‘src/d’: Permission denied"), [{ path: "src/d", kind: "write" }]);
	assert.deepEqual(candidatePaths("Could not edit file: docs/x.md. Error code: EACCES."), [], "prose is no path");
	assert.deepEqual(candidatePaths("cat: secrets/k: No such file or directory\nok line 'a'"), [{ path: "secrets/k", kind: "read" }]);
	assert.deepEqual(candidatePaths("a: Permission denied\na: Permission denied"), [{ path: "a", kind: "write" }], "no repeats");
});
