// SPDX-License-Identifier: MIT
import assert from "node:assert/strict";
import { test } from "node:test";
import {
	type Policy,
	announcement,
	appendToContent,
	bashBlockReason,
	certainRefusals,
	estimateTokens,
	footerText,
	loosenText,
	overlapLine,
	planLine,
	withPlan,
	rankModes,
	refusalLine,
	switchAnnouncement,
	systemSection,
	writableText,
} from "../src/text.ts";

const prot = [
	{ kind: "protected", pattern: ".git/hooks", file: "(built-in)", layer: "default" },
	{ kind: "protected", pattern: ".git/config", file: "(built-in)", layer: "default" },
	{ kind: "protected", pattern: ".piworkfs", file: "(built-in)", layer: "default" },
];
const pol = (mode: string, rules: any[], extra: Partial<Policy> = {}): Policy => ({
	mode,
	writes_nothing: false,
	fail_closed: false,
	fail_reason: null,
	rules,
	...extra,
});
const design = pol("design", [
	...prot,
	{ kind: "allow", pattern: "docs/design/**", file: "/m/design.md", line: 6, layer: "bundled" },
	{ kind: "allow", pattern: "docs/design/", file: "/m/design.md", line: 7, layer: "bundled" },
	{ kind: "token", pattern: "styles/tokens.css", file: "/p/.piworkfs/config.yaml", line: 3, layer: "project" },
]);
const plan = pol("plan", [...prot, { kind: "allow", pattern: "/docs/plans/**", file: "(plans folder)", layer: "default" }], { plans_dir: "docs/plans" });
const discuss = pol("discuss", [...prot], { writes_nothing: true });
const build = pol("build", [...prot, { kind: "allow", pattern: "**" }]);
const off = pol("off", [{ kind: "allow", pattern: "**" }]);

test("the announcement states the policy's real rules in short form", () => {
	assert.equal(
		announcement(design),
		"[piworkfs] Active mode: design. Writable: docs/design/**, styles/tokens.css. Read-only: everything else. Protected: .git/hooks, .git/config, .piworkfs.",
	);
	assert.equal(announcement(discuss), "[piworkfs] Active mode: discuss. Read-only: every write in the project fails (EROFS).");
	assert.equal(
		announcement(plan),
		"[piworkfs] Active mode: plan. Read-only: every write in the project fails (EROFS), but the plan files in docs/plans/ that are not approved.",
	);
	assert.equal(
		announcement(build),
		"[piworkfs] Active mode: build. Writable: everything except protected paths (.git/hooks, .git/config, .piworkfs).",
	);
	assert.equal(announcement(off), "[piworkfs] Active mode: off. No restrictions: everything in the project is writable.");
});

test("the announcement says undo is incomplete while the originals store is full", () => {
	assert.equal(
		announcement(build, true),
		"[piworkfs] Active mode: build. Writable: everything except protected paths (.git/hooks, .git/config, .piworkfs)." +
			" Undo is incomplete: the originals store is full, so some changes from now on are not kept and cannot be undone.",
	);
	assert.equal(announcement(build, false), announcement(build));
});

test("deny, hide and fail-closed rules show in the announcement", () => {
	const p = pol("build", [...prot, { kind: "allow", pattern: "**" }, { kind: "deny", pattern: "*.pem" }, { kind: "hide", pattern: "secrets/" }]);
	assert.equal(
		announcement(p),
		"[piworkfs] Active mode: build. Writable: everything except protected paths (.git/hooks, .git/config, .piworkfs) and denied paths (*.pem). Hidden (absent from the view): secrets/.",
	);
	const broken = pol("design", design.rules, { fail_closed: true, fail_reason: "design.md:3:1: bad" });
	assert.match(announcement(broken), /^\[piworkfs\] Active mode: design\. Failing closed \(design\.md:3:1: bad\): nothing is writable/);
	assert.equal(writableText(broken), "nothing");
});

test("the announcement and the system section are byte-stable", () => {
	assert.equal(announcement(design), announcement(structuredClone(design)));
	assert.equal(systemSection("design", "Body\n"), systemSection("design", "Body\n"));
	const s = systemSection("design", "# Mode: design\n\nDo design.\n");
	assert.ok(s.startsWith("# piworkfs mode: design\n\n"));
	assert.match(s, /supersedes every earlier statement about the mode/);
	assert.ok(s.endsWith("# Mode: design\n\nDo design."));
});

test("a switch during a task carries the new mode's body and names both modes", () => {
	const t = switchAnnouncement(build, "# Mode: build\nBuild.\n", "design");
	assert.ok(t.startsWith("[piworkfs] The person switched the mode from design to build during this task."));
	assert.ok(t.includes(announcement(build)));
	assert.ok(t.endsWith("# Mode: build\nBuild."));
});

test("a refusal line: mode, rule, writable set, how to proceed, past tense", () => {
	const line = refusalLine(
		{ path: "src/hack.c", op: "create", errno: "EACCES", reason: "no-allow", mode: "design", rule: null },
		writableText(design),
		{ mode: "build" },
	);
	assert.equal(
		line,
		"[piworkfs] Refused: create src/hack.c (EACCES) in design mode, because no allow rule of design matches it. " +
			"Writable in design: docs/design/**, styles/tokens.css. To create it, ask the person to run `piworkfs mode build` outside Pi; don't work around the refusal.",
	);
	// Inside `piworkfs run` the agent asks itself: `piworkfs mode NAME --reason` is the request.
	assert.match(
		refusalLine(
			{ path: "src/hack.c", op: "create", errno: "EACCES", reason: "no-allow", mode: "design", rule: null },
			writableText(design),
			{ mode: "build", agent: true },
		),
		/To create it, ask the person for mode build: run `piworkfs mode build --reason "why you need it"`, which asks them and waits for their answer; don't work around the refusal\.$/,
	);
	const p = refusalLine(
		{ path: ".git/config", op: "open-write", errno: "EACCES", reason: "protected", mode: "build", rule: prot[1] },
		writableText(build),
		{ mode: "off" },
	);
	assert.match(p, /because it is protected \(rule "\.git\/config", built-in\)/);
	assert.match(p, /Only mode off allows it/);
	const d = refusalLine(
		{ path: "keys/a.pem", op: "unlink", errno: "EACCES", reason: "deny-rule", mode: "build", rule: { kind: "deny", pattern: "*.pem", file: "/p/.piworkfs/modes/build.md", line: 9 } },
		"everything",
		{ mode: null },
		"/p",
	);
	assert.match(d, /Refused: delete keys\/a\.pem \(EACCES\) in build mode, because the deny rule "\*\.pem" \(\.piworkfs\/modes\/build\.md:9\) matches it\./);
	assert.match(d, /No mode allows it/);
	const h = refusalLine({ path: "secrets/x", op: "read", errno: "ENOENT", reason: "hidden", mode: "plan", rule: { kind: "hide", pattern: "secrets/" } }, "nothing", { mode: null });
	assert.match(h, /^\[piworkfs\] secrets\/x was hidden in plan mode \(ENOENT\)/);
	const ro = refusalLine({ path: "a", op: "write", errno: "EROFS", reason: "read-only", mode: "plan", rule: null }, writableText(plan), { mode: "build" });
	assert.match(ro, /because plan keeps the project read-only\. Writable in plan: only the plans in docs\/plans\/ \(not approved ones\)\./);
	const ap = refusalLine(
		{ path: "docs/plans/cache.md", op: "write", errno: "EACCES", reason: "protected", mode: "build", rule: { kind: "protected", pattern: "/docs/plans/cache.md", file: "(approved plan)", layer: "default" } },
		writableText(build),
		{ mode: "off" },
	);
	assert.match(ap, /because it is an approved plan, read-only until the person reopens it\./);
	assert.match(ap, /ask the person to run `piworkfs plan reopen cache` outside Pi\.$/);
});

test("refusal lines are appended to the last text part", () => {
	const c = [{ type: "text", text: "EACCES: permission denied\n" }];
	assert.deepEqual(appendToContent(c, ["L1", "L2"]), [{ type: "text", text: "EACCES: permission denied\n\nL1\nL2" }]);
	assert.equal(c[0].text, "EACCES: permission denied\n", "the input is not modified");
	assert.deepEqual(appendToContent([{ type: "image", data: "x" }], ["L"]), [{ type: "image", data: "x" }, { type: "text", text: "L" }]);
	assert.equal(appendToContent(c, []), c);
});

test("the narrowest mode is suggested first, off last", () => {
	const modes = [
		{ name: "build", protect: true, rules: [{ kind: "allow", pattern: "**" }] },
		{ name: "design", protect: true, tokens: true, rules: [{ kind: "allow", pattern: "docs/design/**" }, { kind: "allow", pattern: "docs/design/" }] },
		{ name: "off", protect: false, rules: [{ kind: "allow", pattern: "**" }] },
		{ name: "plan", protect: true, rules: [] },
		{ name: "docs", protect: true, rules: [{ kind: "allow", pattern: "docs/**" }] },
	];
	assert.deepEqual(rankModes(modes), ["plan", "docs", "design", "build", "off"]);
});

test("bash.check blocks only on certain write refusals", () => {
	const denied = { status: "denied", access: "write", kind: "path", path: "src/a", heuristic: false, errno: "EACCES", reason: "no-allow", op: "open-write" };
	assert.equal(certainRefusals({ verdict: "denied", heuristic: false, targets: [denied] }).length, 1);
	assert.equal(certainRefusals({ verdict: "denied", heuristic: true, targets: [{ ...denied, heuristic: true }] }).length, 0, "heuristic never blocks");
	assert.equal(certainRefusals({ verdict: "unknown", heuristic: false, targets: [{ status: "unknown", kind: "command" }] }).length, 0);
	assert.equal(certainRefusals({ verdict: "denied", heuristic: false, targets: [{ ...denied, access: "read", reason: "hidden" }] }).length, 0, "a hidden read is no write");
	assert.equal(certainRefusals({ verdict: "denied", heuristic: false, targets: [{ ...denied, kind: "raw" }] }).length, 0);
	const reason = bashBlockReason([denied], "design", "docs/design/**", () => ({ mode: "build" }));
	assert.match(reason, /^\[piworkfs\] The command was not run: .* Nothing ran and nothing changed\./);
	assert.match(reason, /\n\[piworkfs\] Refused: write src\/a \(EACCES\) in design mode/);
});

test("footer levels and the loosening instructions", () => {
	assert.equal(footerText(design, 0), "mode: design");
	assert.equal(footerText(design, 1), "mode: design · writes: docs/design/**, styles/tokens.css");
	assert.equal(footerText(design, 2), undefined);
	assert.equal(footerText(null, 0), undefined);
	assert.match(loosenText("design", "build", "/home/u/my view", false), /piworkfs mode build --mount '\/home\/u\/my view'$/);
	assert.match(loosenText("design", "build", null, true), /outside the `piworkfs run` sandbox:\n  piworkfs mode build$/);
});

test("token estimate is Pi's own: ceil(chars / 4)", () => {
	assert.equal(estimateTokens(""), 0);
	assert.equal(estimateTokens("abcde"), 2);
});

test("the plan line: name, progress and next task, the same bytes for the same progress", () => {
	const st = { active: { name: "cache", done: 1, total: 3, next: { task: 2, text: "Invalidate it" } }, line: "x" };
	const line = '[piworkfs] Active plan cache: 1/3 done; next: task 2, "Invalidate it". Mark it with the plan_done tool when it is done.';
	assert.equal(planLine(st), line);
	assert.equal(planLine(JSON.parse(JSON.stringify(st))), line);
	assert.equal(withPlan("A", st), `A\n${line}`);
	assert.equal(withPlan("A", { active: null, line: null }), "A");
	assert.equal(withPlan("A", null), "A");
});

test("a lane (run --only) is in the announcement, the writable set and its refusals", () => {
	const laned = { ...build, lane: ["src/a/**", "docs/design"] };
	const a = announcement(laned);
	assert.ok(!a.includes("No restrictions"), a);
	assert.match(a, / Lane of this run \(--only\): src\/a\/\*\*, docs\/design; writes outside it are refused in every mode/);
	assert.equal(writableText({ ...design, lane: ["docs/design/a/**"] }), "docs/design/**, styles/tokens.css, within this run's lane: docs/design/a/**");
	// A mode that writes nothing says so, lane or not.
	assert.equal(writableText({ ...plan, writes_nothing: true, lane: ["x"] }), "nothing");
	const line = refusalLine(
		{ path: "src/b.c", op: "create", errno: "EACCES", reason: "outside-lane", mode: "build", rule: null },
		writableText(laned),
		{ mode: null },
	);
	assert.match(line, /because it is outside this run's lane\. Writable in build: .*, within this run's lane: src\/a\/\*\*, docs\/design\. The lane holds in every mode/);
	// Without a lane, nothing changes.
	assert.equal(announcement({ ...build, lane: [] }), announcement(build));
});

test("an overlapping write is told, not refused", () => {
	assert.equal(
		overlapLine("src/a.c", "/run/u/piworkfs/run-x/view"),
		"[piworkfs] Note: src/a.c was also changed by another live view of the project, the view at /run/u/piworkfs/run-x/view, in its current work: your write went through, but check that it did not overwrite another agent's work (`piworkfs changes` shows both).",
	);
});
