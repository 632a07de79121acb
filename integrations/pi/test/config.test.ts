// SPDX-License-Identifier: MIT
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseConfig } from "../src/config.ts";
import { lineage } from "../src/procs.ts";

test("the project's bash setting: block by default, warn, off; bad input keeps block", () => {
	assert.deepEqual(parseConfig(null), { bash: "block", warning: null });
	assert.deepEqual(parseConfig('{"bash": "warn"}'), { bash: "warn", warning: null });
	assert.deepEqual(parseConfig('{"bash": "off"}'), { bash: "off", warning: null });
	assert.equal(parseConfig('{"bash": "maybe"}').bash, "block");
	assert.match(parseConfig('{"bash": "maybe"}').warning!, /expected one of block, warn, off/);
	assert.equal(parseConfig("not json").bash, "block");
	assert.match(parseConfig('{"other": 1}').warning!, /unknown key "other"/);
	assert.equal(parseConfig('{"bash": "warn"}', "off").bash, "off", "the environment overrides the file");
	assert.equal(parseConfig(null, "bogus").bash, "block");
});

test("lineage: this process, its children, and others", async () => {
	const { spawn } = await import("node:child_process");
	assert.equal(lineage(process.pid), "self");
	assert.equal(lineage(1), "other");
	assert.equal(lineage(-5), "other");
	const child = spawn("sleep", ["30"]);
	try {
		assert.equal(lineage(child.pid!), "descendant");
		assert.equal(lineage(child.pid!, child.pid!), "self");
		assert.equal(lineage(process.pid, child.pid!), "other", "a parent is no descendant");
	} finally {
		child.kill();
	}
});
