// SPDX-License-Identifier: MIT
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { Connection, RpcError, callOnce } from "../src/rpc.ts";

/** A fake control socket: answers each request line with REPLY(request), after sending
 * a notification first (the protocol allows them between a request and its reply). */
async function fakeServer(reply: (req: any) => any): Promise<{ path: string; close: () => void }> {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pw-rpc-"));
	const p = path.join(dir, "s.sock");
	const server = net.createServer((c) => {
		let buf = "";
		c.setEncoding("utf8");
		c.on("data", (d: string) => {
			buf += d;
			let nl: number;
			while ((nl = buf.indexOf("\n")) >= 0) {
				const req = JSON.parse(buf.slice(0, nl));
				buf = buf.slice(nl + 1);
				c.write(JSON.stringify({ jsonrpc: "2.0", method: "mode.changed", params: { to: "plan" } }) + "\r\n");
				const r = reply(req);
				if (r !== undefined) c.write(JSON.stringify({ jsonrpc: "2.0", id: req.id, ...r }) + "\n");
			}
		});
	});
	await new Promise<void>((res) => server.listen(p, res));
	return {
		path: p,
		close: () => {
			server.close();
			fs.rmSync(dir, { recursive: true, force: true });
		},
	};
}

test("replies are matched by id; notifications in between go to the handler", async () => {
	const s = await fakeServer((req) => (req.method === "fail" ? { error: { code: -32002, message: "refused", data: { a: 1 } } } : { result: { echo: req.method, params: req.params ?? null } }));
	const c = new Connection(s.path, 2000);
	const seen: any[] = [];
	c.onNotification = (n) => seen.push(n);
	try {
		assert.deepEqual(await c.call("status"), { echo: "status", params: null });
		assert.deepEqual(await c.call("mode.get", { body: true }), { echo: "mode.get", params: { body: true } });
		await assert.rejects(c.call("fail"), (e: any) => e instanceof RpcError && e.code === -32002 && e.data.a === 1);
		assert.equal(seen.length, 3);
		assert.deepEqual(seen[0], { method: "mode.changed", params: { to: "plan" } });
	} finally {
		c.close();
		s.close();
	}
});

test("a call without an answer times out; a missing socket is an error", async () => {
	const s = await fakeServer(() => undefined);
	try {
		await assert.rejects(callOnce(s.path, "status", undefined, 200), /no answer within 200 ms/);
	} finally {
		s.close();
	}
	await assert.rejects(callOnce("/nonexistent/pw.sock", "status", undefined, 500), (e: any) => e instanceof RpcError && e.code === 0);
});

test("a request longer than the protocol's line cap is refused before it is sent", async () => {
	const s = await fakeServer((req) => ({ result: {} }));
	try {
		await assert.rejects(callOnce(s.path, "bash.check", { command: "x".repeat(70000) }), (e: any) => e.code === -32004);
	} finally {
		s.close();
	}
});
