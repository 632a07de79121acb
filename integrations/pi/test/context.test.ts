// SPDX-License-Identifier: MIT
import assert from "node:assert/strict";
import { test } from "node:test";
import { ANNOUNCEMENT_TYPE, filterContext } from "../src/context.ts";

const ann = (text: string) => ({ role: "custom", customType: ANNOUNCEMENT_TYPE, content: text, display: false, timestamp: 1 });
const user = (text: string) => ({ role: "user", content: [{ type: "text", text }], timestamp: 1 });
const other = { role: "custom", customType: "other-ext", content: "x", display: false, timestamp: 1 };

test("outside a view nothing changes", () => {
	const msgs = [user("a"), ann("old")];
	assert.equal(filterContext(msgs, null), undefined);
});

test("one current copy: the request is left untouched", () => {
	assert.equal(filterContext([user("a"), ann("A"), user("b")], "A"), undefined);
});

test("older copies are dropped, the newest current one stays in place", () => {
	const out = filterContext([user("a"), ann("A"), user("b"), other, ann("A")], "A")!;
	assert.deepEqual(out, [user("a"), user("b"), other, ann("A")]);
	const out2 = filterContext([user("a"), ann("OLD"), user("b"), ann("A"), user("c")], "A")!;
	assert.deepEqual(out2, [user("a"), user("b"), ann("A"), user("c")]);
});

test("a stale newest copy is replaced by the current text after the latest message", () => {
	const msgs = [user("a"), ann("design"), { role: "assistant", content: [] }, { role: "toolResult", content: [] }];
	const out = filterContext(msgs, "build", 7)!;
	assert.equal(out.length, 4);
	assert.deepEqual(out.slice(0, 3), [user("a"), { role: "assistant", content: [] }, { role: "toolResult", content: [] }]);
	assert.deepEqual(out[3], { role: "custom", customType: ANNOUNCEMENT_TYPE, content: "build", display: false, timestamp: 7 });
	assert.equal(msgs.length, 4, "the input is not modified");
});

test("no copy at all: one is appended", () => {
	const out = filterContext([user("a")], "A")!;
	assert.equal(out.filter((m) => m.customType === ANNOUNCEMENT_TYPE).length, 1);
});

test("the result is the same for the same input (byte stability)", () => {
	const msgs = [user("a"), ann("A"), user("b"), ann("A")];
	assert.deepEqual(filterContext(msgs, "A", 1), filterContext(structuredClone(msgs), "A", 1));
});
