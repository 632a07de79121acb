// SPDX-License-Identifier: MIT
/*
 * The token budget of what the extension adds to every request: the system prompt section
 * (header and the mode's body) and the announcement, for each bundled mode (modes/*.md),
 * under 400 tokens by Pi's own estimate (ceil(chars / 4), text.ts). The policies are
 * rebuilt from the mode files' frontmatter with the default protected paths and, for
 * design, one declared token file, as a trusted project has.
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { type Policy, announcement, estimateTokens, systemSection, withPlan } from "../src/text.ts";

const here = path.dirname(fileURLToPath(import.meta.url));
const modesDir = path.resolve(here, "../../../modes");
const BUDGET = 400;
const ACTIVE_PLAN = {
	active: { name: "cache-config", done: 3, total: 7, next: { task: 4, text: "Invalidate the cache on reload and test it in test_reload.py" } },
	line: null,
};

function load(name: string): { body: string; policy: Policy } {
	const text = fs.readFileSync(path.join(modesDir, name + ".md"), "utf8");
	const [, front, body] = text.split(/^---$/m);
	const allow: string[] = [];
	let inAllow = false;
	for (const line of front.split("\n")) {
		if (/^\s*allow:/.test(line)) inAllow = !/\[\]/.test(line);
		else if (inAllow && /^\s*-\s*"(.*)"\s*$/.test(line)) allow.push(/"(.*)"/.exec(line)![1]);
		else if (!/^\s*-/.test(line)) inAllow = false;
	}
	const protect = !/^protect:\s*false/m.test(front);
	const rules = [
		...(protect ? [".git/hooks", ".git/config", ".piworkfs"].map((p) => ({ kind: "protected", pattern: p })) : []),
		...allow.map((p) => ({ kind: "allow", pattern: p })),
		...(/^\s*tokens:\s*true/m.test(front) ? [{ kind: "token", pattern: "styles/tokens.css" }] : []),
	];
	const plans = /^\s*plans:\s*true/m.test(front);
	if (plans) rules.push({ kind: "allow", pattern: "/docs/plans/**" });
	const policy = { mode: name, writes_nothing: allow.length === 0 && !plans, fail_closed: false, rules, plans_dir: plans ? "docs/plans" : null };
	return { body: body.trim() + "\n", policy };
}

export function budget(): Record<string, number> {
	const out: Record<string, number> = {};
	for (const f of fs.readdirSync(modesDir).filter((f) => f.endsWith(".md")).sort()) {
		const name = f.slice(0, -3);
		const { body, policy } = load(name);
		// With an approved plan in progress: its line comes with the announcement.
		out[name] = estimateTokens(systemSection(name, body)) + estimateTokens(withPlan(announcement(policy), ACTIVE_PLAN));
	}
	return out;
}

test(`every bundled mode costs under ${BUDGET} tokens per request (body, header, announcement)`, () => {
	const b = budget();
	assert.ok(Object.keys(b).length >= 6, "the bundled modes");
	if (process.env.PI_BUDGET_REPORT) console.log(JSON.stringify(b));
	for (const [name, tokens] of Object.entries(b)) assert.ok(tokens < BUDGET, `${name}: ${tokens} tokens`);
});
