// SPDX-License-Identifier: MIT
/*
 * Drives `piworkfs mcp` with the official MCP TypeScript SDK's client (pinned in
 * package-lock.json) over stdio, the way an agent does, and prints one JSON object with
 * what it saw; test_mcp_sdk.py asserts on it. Arguments: the piworkfs binary, then the
 * working directory (a view). The SDK validates every answer against the protocol's
 * schemas (and each tool's input schema is checked to be valid JSON Schema by listTools).
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import {
	ResourceUpdatedNotificationSchema,
	ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [piworkfs, cwd] = process.argv.slice(2);
const out = { notifications: [] };

const transport = new StdioClientTransport({ command: piworkfs, args: ["mcp"], cwd, env: process.env, stderr: "inherit" });
const client = new Client({ name: "piworkfs-test", version: "1.0.0" });
let changed, updated;
const listChanged = new Promise((resolve) => (changed = resolve));
const resourceUpdated = new Promise((resolve) => (updated = resolve));
client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
	out.notifications.push("tools/list_changed");
	changed();
});
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
	out.notifications.push("resources/updated " + n.params.uri);
	updated();
});

const text = (r) => r.content.map((c) => c.text).join("\n");
async function error(fn) {
	try {
		await fn();
		return null;
	} catch (e) {
		return { code: e.code, message: e.message };
	}
}

await client.connect(transport);
out.protocol = transport.protocolVersion ?? client.getServerVersion()?.version;
out.server = client.getServerVersion();
out.capabilities = client.getServerCapabilities();
out.instructions = client.getInstructions();
const tools = await client.listTools();
out.tools = tools.tools.map((t) => ({ name: t.name, description: t.description, schema: t.inputSchema }));
out.status = text(await client.callTool({ name: "piworkfs_status", arguments: {} }));
out.check = text(await client.callTool({ name: "piworkfs_check", arguments: { paths: ["src/main.c", "docs/design/a.md"] } }));
out.check_bash = text(await client.callTool({ name: "piworkfs_check_bash", arguments: { command: "echo x > src/new.c" } }));
out.changes = text(await client.callTool({ name: "piworkfs_changes", arguments: {} }));
out.diff = text(await client.callTool({ name: "piworkfs_diff", arguments: { stat: true } }));
out.resources = (await client.listResources()).resources.map((r) => r.uri);
out.resource = (await client.readResource({ uri: "piworkfs://mode" })).contents[0].text;
await client.subscribeResource({ uri: "piworkfs://mode" });
out.unknown_tool = await error(() => client.callTool({ name: "piworkfs_nope", arguments: {} }));
out.wrong_type = await error(() => client.callTool({ name: "piworkfs_check", arguments: { paths: "src" } }));
out.unknown_arg = await error(() => client.callTool({ name: "piworkfs_status", arguments: { x: 1 } }));
out.huge = await error(() => client.callTool({ name: "piworkfs_check_bash", arguments: { command: "x".repeat(200000) } }));
// A tightening needs no consent: done at once, and the switch comes back as a notification.
const req = await client.callTool({ name: "piworkfs_request_mode", arguments: { mode: "review", wait_s: 0 } });
out.request = { text: text(req), isError: req.isError };
const deadline = new Promise((r) => setTimeout(r, 60000).unref());
await Promise.race([Promise.all([listChanged, resourceUpdated]), deadline]);
// The notification says "list again": the description carries the new mode.
out.status_after = (await client.listTools()).tools.find((t) => t.name === "piworkfs_status").description;
out.ping = await client.ping();
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
