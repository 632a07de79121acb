// SPDX-License-Identifier: MIT
// What the person reads in Pi (src/text.ts). What the model reads is the daemon's
// (texts.test.ts here; tests/policy/test_agent_text.c pins the words).
import assert from "node:assert/strict";
import { test } from "node:test";
import { appendToContent, footerText, loosenText, modeList } from "../src/text.ts";

const design = { mode: "design", fail_closed: false, writable: "docs/design/**, styles/tokens.css" };

test("refusal lines are appended to the last text part", () => {
	const c = [{ type: "text", text: "EACCES: permission denied\n" }];
	assert.deepEqual(appendToContent(c, ["L1", "L2"]), [{ type: "text", text: "EACCES: permission denied\n\nL1\nL2" }]);
	assert.equal(c[0].text, "EACCES: permission denied\n", "the input is not modified");
	assert.deepEqual(appendToContent([{ type: "image", data: "x" }], ["L"]), [{ type: "image", data: "x" }, { type: "text", text: "L" }]);
	assert.equal(appendToContent(c, []), c);
});

test("footer levels and the loosening instructions", () => {
	assert.equal(footerText(design, 0), "mode: design");
	assert.equal(footerText(design, 1), "mode: design · writes: docs/design/**, styles/tokens.css");
	assert.equal(footerText(design, 2), undefined);
	assert.equal(footerText(null, 0), undefined);
	assert.equal(footerText({ ...design, fail_closed: true, writable: "nothing" }, 1), "mode: design (failing closed) · writes: nothing");
	assert.match(loosenText("design", "build", "/home/u/my view", false), /piworkfs mode build --mount '\/home\/u\/my view'$/);
	assert.match(loosenText("design", "build", null, true), /outside the `piworkfs run` sandbox:\n  piworkfs mode build$/);
});

test("the /mode listing shows what each mode writes, as the daemon says it", () => {
	const ws = new Map([["design", design.writable]]);
	const out = modeList([{ name: "build", description: "Implement" }, { name: "design", description: "Design" }], ws, "design");
	assert.equal(
		out,
		"Active mode: design\n\n  build: Implement\n    writes: ?\n* design: Design\n    writes: docs/design/**, styles/tokens.css\n\n" +
			"/mode NAME switches to a stricter mode; the person loosens it outside Pi with `piworkfs mode NAME`.",
	);
});
