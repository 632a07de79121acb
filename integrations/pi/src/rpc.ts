// SPDX-License-Identifier: MIT
/*
 * A client of a view's control socket (docs/PROTOCOL.md): JSON-RPC 2.0, one object per line
 * over a UNIX stream socket. One Connection carries requests (answered in order) and, after
 * `subscribe`, the server's notifications, which may arrive between a request and its reply
 * and are handed to `onNotification`.
 *
 * Every call has a deadline: the extension must never hang Pi on a stuck daemon. A call that
 * times out or a connection that breaks rejects with an RpcError whose code is 0.
 */
import * as net from "node:net";

/** The protocol's request line cap (PW_MSG_MAX). */
export const MSG_MAX = 65536;
/** The reply line cap (PW_RPC_REPLY_MAX): a longer line means a broken peer. */
const REPLY_MAX = 1 << 20;

export class RpcError extends Error {
	code: number;
	data: unknown;
	constructor(code: number, message: string, data?: unknown) {
		super(message);
		this.code = code;
		this.data = data;
	}
}

/** Error codes of docs/PROTOCOL.md that the extension acts on. */
export const RPC_METHOD_NOT_FOUND = -32601;
export const RPC_REFUSED = -32002;
export const RPC_UNKNOWN_MODE = -32001;

type Pending = {
	resolve: (v: any) => void;
	reject: (e: Error) => void;
	timer: ReturnType<typeof setTimeout>;
};

export type Notification = { method: string; params: any };

export class Connection {
	private sock: net.Socket;
	private buf = "";
	private nextId = 1;
	private pending = new Map<number, Pending>();
	private closed = false;
	private readyPromise: Promise<void>;
	onNotification: ((n: Notification) => void) | null = null;
	onClose: ((why: string) => void) | null = null;
	private timeoutMs: number;

	constructor(path: string, timeoutMs = 3000) {
		this.timeoutMs = timeoutMs;
		this.sock = net.createConnection({ path });
		this.sock.setEncoding("utf8");
		this.readyPromise = new Promise((resolve, reject) => {
			const t = setTimeout(() => {
				reject(new RpcError(0, `connect ${path}: timed out`));
				this.close("connect timed out");
			}, timeoutMs);
			this.sock.once("connect", () => {
				clearTimeout(t);
				resolve();
			});
			this.sock.once("error", (e) => {
				clearTimeout(t);
				reject(new RpcError(0, `connect ${path}: ${e.message}`));
			});
		});
		this.readyPromise.catch(() => {});
		this.sock.on("data", (chunk: string) => this.onData(chunk));
		this.sock.on("error", (e) => this.close(e.message));
		this.sock.on("close", () => this.close("connection closed"));
	}

	/** Resolves once connected; rejects when the socket cannot be reached. */
	ready(): Promise<void> {
		return this.readyPromise;
	}

	/** Does not keep Node's event loop alive (a subscription must not delay Pi's exit). */
	unref(): void {
		this.sock.unref();
	}

	get isClosed(): boolean {
		return this.closed;
	}

	private onData(chunk: string): void {
		this.buf += chunk;
		let nl: number;
		while ((nl = this.buf.indexOf("\n")) >= 0) {
			const line = this.buf.slice(0, nl).replace(/\r$/, "");
			this.buf = this.buf.slice(nl + 1);
			if (line) this.onLine(line);
		}
		if (this.buf.length > REPLY_MAX) this.close("reply line too long");
	}

	private onLine(line: string): void {
		let msg: any;
		try {
			msg = JSON.parse(line);
		} catch {
			this.close("the daemon sent a line that is not JSON");
			return;
		}
		if (msg && typeof msg.method === "string" && msg.id === undefined) {
			this.onNotification?.({ method: msg.method, params: msg.params ?? {} });
			return;
		}
		const p = typeof msg?.id === "number" ? this.pending.get(msg.id) : undefined;
		if (!p) {
			// id null: a connection-level error (too many clients, another uid).
			if (msg?.error) this.close(`${msg.error.message ?? "refused"}`);
			return;
		}
		this.pending.delete(msg.id);
		clearTimeout(p.timer);
		if (msg.error) p.reject(new RpcError(msg.error.code ?? 0, String(msg.error.message ?? "error"), msg.error.data));
		else p.resolve(msg.result);
	}

	/** Calls METHOD; resolves with its result or rejects with an RpcError. */
	async call(method: string, params?: Record<string, unknown>, timeoutMs = this.timeoutMs): Promise<any> {
		await this.readyPromise;
		if (this.closed) throw new RpcError(0, "connection closed");
		const id = this.nextId++;
		const line = JSON.stringify({ jsonrpc: "2.0", id, method, ...(params ? { params } : {}) });
		if (Buffer.byteLength(line) > MSG_MAX) throw new RpcError(-32004, "request too long for the control socket");
		return new Promise((resolve, reject) => {
			const timer = setTimeout(() => {
				this.pending.delete(id);
				reject(new RpcError(0, `${method}: no answer within ${timeoutMs} ms`));
			}, timeoutMs);
			this.pending.set(id, { resolve, reject, timer });
			this.sock.write(line + "\n");
		});
	}

	close(why = "closed"): void {
		if (this.closed) return;
		this.closed = true;
		for (const [, p] of this.pending) {
			clearTimeout(p.timer);
			p.reject(new RpcError(0, why));
		}
		this.pending.clear();
		this.sock.destroy();
		this.onClose?.(why);
	}
}

/** One request on a fresh connection, closed afterwards. */
export async function callOnce(path: string, method: string, params?: Record<string, unknown>, timeoutMs = 3000): Promise<any> {
	const c = new Connection(path, timeoutMs);
	try {
		return await c.call(method, params, timeoutMs);
	} finally {
		c.close();
	}
}
