// SPDX-License-Identifier: MIT
// The texts the model reads are the daemon's (src/texts.ts): what is asked, what comes back,
// and what an older daemon without the text.* methods gets. tests/pi/test_pi.py checks them
// against a real daemon, beside the MCP server and the hooks.
import assert from "node:assert/strict";
import { test } from "node:test";
import { RpcError } from "../src/rpc.ts";
import { BASH_TARGETS_SENT, bashTexts, fallbackTexts, modeTexts, overlapLines, reader, refusalLines } from "../src/texts.ts";

type Call = { method: string; params?: Record<string, unknown> };

/** A request function answering from ANSWERS (a method's answer, or an error to throw). */
function fake(answers: Record<string, any>): { request: (m: string, p?: Record<string, unknown>) => Promise<any>; calls: Call[] } {
	const calls: Call[] = [];
	return {
		calls,
		request: async (method, params) => {
			calls.push({ method, params });
			const a = answers[method];
			if (a instanceof Error) throw a;
			if (a === undefined) throw new RpcError(-32601, `method not found: ${method}`);
			return typeof a === "function" ? a(params) : a;
		},
	};
}

const texts = { mode: "design", generation: 3, fail_closed: false, announcement: "A", system: "S", writable: "W" };

test("the mode's texts are text.mode's answer, with the params as given", async () => {
	const f = fake({ "text.mode": texts });
	assert.deepEqual(await modeTexts(f.request, { store_full: true, from: "plan" }), texts);
	assert.deepEqual(f.calls, [{ method: "text.mode", params: { store_full: true, from: "plan" } }]);
});

test("a daemon without text.mode: the minimal texts, from mode.get, claiming no writable path", async () => {
	const f = fake({ "mode.get": { mode: "design", generation: 4, fail_closed: false, body: "\n# Design\n\nDo it.\n" } });
	const t = await modeTexts(f.request, { store_full: true });
	assert.deepEqual(f.calls.map((c) => c.method), ["text.mode", "mode.get"]);
	assert.equal(t.mode, "design");
	assert.equal(t.generation, 4);
	assert.equal(t.writable, "?");
	assert.equal(t.system, "# piworkfs mode: design\n\n# Design\n\nDo it.");
	assert.match(t.announcement, /^\[piworkfs\] Active mode: design\. This view's daemon is older than the extension/);
	assert.doesNotMatch(t.announcement, /Writable/);
	assert.equal(t.switch, `${t.announcement}\n\n# Design\n\nDo it.`);
	assert.match(fallbackTexts({ mode: "x", fail_closed: true }).announcement, /Active mode: x \(failing closed\)\./);
	// Another mode's texts have no fallback: mode.get knows only the active one.
	await assert.rejects(modeTexts(f.request, { mode: "build" }), (e: any) => e instanceof RpcError && e.code === -32601);
	// Any other failure is the caller's to handle (it keeps the texts it had).
	const down = fake({ "text.mode": new RpcError(0, "connection closed") });
	await assert.rejects(modeTexts(down.request), /connection closed/);
});

test("refusal lines: Pi reads them, in words on a bare view and as a command inside run", async () => {
	assert.deepEqual(reader(false), { agent: "Pi", ask: "words" });
	assert.deepEqual(reader(true), { agent: "Pi", ask: "command" });
	const refusals = [{ path: "src/a", op: "create", errno: "EACCES", reason: "no-allow", mode: "design", rule: null }];
	const f = fake({ "text.refusals": { lines: ["L1", "L2"] } });
	assert.deepEqual(await refusalLines(f.request, refusals, reader(true), 2), ["L1", "L2"]);
	assert.deepEqual(f.calls[0].params, { refusals, agent: "Pi", ask: "command", more: 2 });
	assert.deepEqual(await refusalLines(f.request, [], reader(false)), [], "nothing to ask");
	assert.equal(f.calls.length, 1);
	// No answer: no explanation rather than a wrong one.
	assert.deepEqual(await refusalLines(fake({}).request, refusals, reader(false)), []);
});

test("a command is blocked only on text.bash's word; only denied targets are sent", async () => {
	const targets = [
		{ status: "allowed", path: "docs/x" },
		...Array.from({ length: BASH_TARGETS_SENT + 5 }, (_, i) => ({ status: "denied", path: `src/${i}` })),
	];
	const f = fake({ "text.bash": { block: "B", warn: "W" } });
	assert.deepEqual(await bashTexts(f.request, { verdict: "denied", mode: "design", targets }, reader(false)), { block: "B", warn: "W" });
	const sent: any = f.calls[0].params;
	assert.equal(sent.check.targets.length, BASH_TARGETS_SENT);
	assert.ok(sent.check.targets.every((t: any) => t.status === "denied"));
	assert.equal(sent.check.mode, "design");
	// Nothing denied: no call at all. Nothing certain, or no answer: the command runs.
	assert.equal(await bashTexts(f.request, { verdict: "allowed", targets: [] }, reader(false)), null);
	assert.equal(f.calls.length, 1);
	assert.equal(await bashTexts(fake({ "text.bash": { block: null, warn: null } }).request, { verdict: "denied", targets }, reader(false)), null);
	assert.equal(await bashTexts(fake({}).request, { verdict: "denied", targets }, reader(false)), null);
});

test("overlap notes come from text.overlap; a failed one is only lost", async () => {
	const f = fake({ "text.overlap": (p: any) => (p.path === "bad" ? undefined : { text: `N ${p.path} ${p.views[0].mountpoint}` }) });
	assert.deepEqual(await overlapLines(f.request, [{ path: "a", view: "/v" }, { path: "bad", view: "/w" }]), ["N a /v"]);
});
