// SPDX-License-Identifier: MIT
/*
 * piworkfs for Pi: the agent knows its mode.
 *
 * The view enforces the mode at the filesystem for every process; this extension tells the
 * agent about it, through the view's control socket (docs/PROTOCOL.md):
 *
 *   before_agent_start  the mode's body in the system prompt under one authoritative header,
 *                       and a hidden announcement with the policy's real rules
 *   context             exactly one announcement, the current one, in every model request
 *                       (a switch between two tool calls is announced in the next request)
 *   tool_call           bash.check before a bash command runs: a certain refusal blocks it
 *   tool_result         one line per refused path: mode, rule, what is writable, how on
 *   /mode, alt+m        list modes and tighten; the footer and its detail level
 *   plan_done           a tool: marks a task of the active plan done (plan.done, through an
 *                       agent socket); the announcement carries the active plan's line
 *
 * Every text the model reads comes from the daemon (src/texts.ts: the text.* methods), which
 * words it from the one source Pi, the MCP server and the hooks of other agents share
 * (policy/agent_text.c); this file decides when to say what, never the words.
 *
 * Outside a view every handler returns nothing: Pi behaves as without the extension. The
 * extension never loosens the mode: /mode switches through a restricted (agent) socket, so
 * the daemon itself refuses a loosening, on a bare view as inside `piworkfs run`. A refused
 * loosening becomes a request to the person (mode.request): inside `piworkfs run` they
 * answer on run's terminal, elsewhere with `piworkfs mode --approve ID`; never Pi.
 *
 * Type imports only: the same file loads in @earendil-works/pi-coding-agent 1.x and in
 * @mariozechner/pi-coding-agent 0.73 (Pi strips the types with jiti).
 */
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";

import { ANNOUNCEMENT_TYPE, filterContext } from "./src/context.ts";
import { type PiConfig, loadConfig } from "./src/config.ts";
import { projectCwd, toProjectPath } from "./src/paths.ts";
import { lineage } from "./src/procs.ts";
import { candidatePaths, errorKinds } from "./src/refusals.ts";
import { Connection, RPC_REFUSED, RPC_UNKNOWN_MODE, RpcError, type Notification, callOnce } from "./src/rpc.ts";
import { FOOTER_LEVELS, type ModeInfo, type ModeSummary, TAG, appendToContent, footerText, loosenText, modeList } from "./src/text.ts";
import { type ModeTexts, type Refusal, bashTexts, modeTexts, overlapLines, reader, refusalLines } from "./src/texts.ts";
import { type FoundView, findView } from "./src/view.ts";

const STATUS_KEY = "piworkfs";
const SHORTCUT = "alt+m";
const MAX_LINES = 8; // refused paths explained per tool result
const DENIALS_KEPT = 512;
const SETTLE_MS = 1500; // at most, waiting for the audit writer's denied events

type Denial = { seq: number; ev: any; ours: "self" | "descendant" };

type ModeState = ModeTexts;

type CallStart = { seq: number; state: ModeState; warn?: string };

/* One copy per Pi process: `piworkfs run -- pi` adds `-e` with the installed extension, and
 * the person may have installed it too (`pi install`). The first copy loaded claims the
 * process; the claim is released at session_shutdown, which Pi emits before it loads the
 * extensions again (/reload, /new, /resume, /fork). */
const CLAIM = Symbol.for("piworkfs.pi.extension");

export default function piworkfs(pi: ExtensionAPI) {
	const g = globalThis as any;
	if (g[CLAIM]) return;
	g[CLAIM] = true;

	let view: FoundView | null = null;
	let conn: Connection | null = null; // requests
	let sub: Connection | null = null; // subscription: mode.changed, denied
	let subAudit = false;
	let viewRoot: string | null = null; // the project as Pi sees it
	let roots: string[] = [];
	let cwd = process.cwd();
	let state: ModeState | null = null;
	let prompt: { mode: string; system: string } | null = null; // in the system prompt
	let config: PiConfig = { bash: "block", warning: null };
	let footerLevel = 0;
	let uiCtx: any = null;
	let denials: Denial[] = [];
	let overlaps: { path: string; view: string }[] = []; // `overlap` events not yet told
	let seq = 0;
	const calls = new Map<string, CallStart>();
	const writables = new Map<string, string>(); // what each mode writes, for one generation
	let writablesGen: number | null = -1;
	let warned = false;
	let planTool = false; // plan_done registered (once per process, and only in a view)

	// ---- the connection -----------------------------------------------------------

	async function request(method: string, params?: Record<string, unknown>, timeoutMs = 3000): Promise<any> {
		if (!view) throw new RpcError(0, "not in a view");
		if (!conn || conn.isClosed) conn = new Connection(view.socket, timeoutMs);
		conn.unref();
		return conn.call(method, params, timeoutMs);
	}

	function setState(t: ModeTexts): ModeState {
		state = t;
		if (writablesGen !== t.generation) {
			writables.clear();
			writablesGen = t.generation;
		}
		writables.set(t.mode, t.writable);
		updateFooter();
		return state;
	}

	/** The active mode and its texts, fresh: the active plan (plan.status) and text.mode,
	 * two local round trips per model request. The announcement says when undo is
	 * incomplete (the originals store is full) and carries the plan's line; once the system
	 * prompt holds a mode, the switch announcement from it comes too. The daemon is the
	 * truth; the subscription only makes the footer immediate. */
	async function refresh(): Promise<ModeState | null> {
		if (!view) return null;
		const plan = await planStatus();
		try {
			const params: Record<string, unknown> = { store_full: true };
			if (plan) params.plan = plan;
			if (prompt) params.from = prompt.mode;
			return setState(await modeTexts(request, params));
		} catch (e: any) {
			warnOnce(`piworkfs: the view's control socket did not answer (${e.message}); the mode is not shown to the agent`);
			return state;
		}
	}

	function subscribe(): void {
		if (!view || (sub && !sub.isClosed)) return;
		const s = new Connection(view.socket, 3000);
		sub = s;
		s.unref();
		s.onNotification = onNotification;
		// "denied" brings the `overlap` events too (a write another view's work shares).
		s.call("subscribe", { events: ["mode.changed", "denied"] })
			.then((r: any) => {
				subAudit = !!r?.audit;
			})
			.catch(() => s.close());
	}

	function onNotification(n: Notification): void {
		if (n.method === "mode.changed") {
			// The footer at once; the state (and the texts) from the daemon.
			if (state && n.params?.to) {
				const known = writables.get(n.params.to);
				if (known !== undefined && n.params.from !== n.params.to)
					state = { ...state, mode: n.params.to, writable: known, fail_closed: false, generation: -1 };
				updateFooter(n.params.to);
			}
			void refresh();
		} else if (n.method === "denied") {
			// Placed now, while the process is most likely alive (procs.ts).
			const who = lineage(Number(n.params?.pid));
			if (who === "other") return;
			denials.push({ seq: ++seq, ev: n.params, ours: who });
			if (denials.length > DENIALS_KEPT) denials = denials.slice(-DENIALS_KEPT);
		} else if (n.method === "overlap") {
			// Said with the next tool result: the write went through.
			if (lineage(Number(n.params?.pid)) === "other" || typeof n.params?.path !== "string") return;
			overlaps.push({ path: n.params.path, view: String(n.params.path2 ?? "?") });
			if (overlaps.length > MAX_LINES) overlaps = overlaps.slice(-MAX_LINES);
		}
	}

	/** Waits until every denial the daemon recorded so far has reached the subscription:
	 * the audit writer posts an event before counting it written, and the daemon answers a
	 * request before it sends the events posted meanwhile, so once written + dropped covers
	 * what was submitted, one more round trip on the subscription brings them all. */
	async function settleDenials(): Promise<void> {
		if (!sub || sub.isClosed || !subAudit) return;
		const until = Date.now() + SETTLE_MS;
		try {
			let st = await sub.call("status", undefined, SETTLE_MS);
			const target = st?.audit?.submitted ?? 0;
			let wait = 5;
			while (st?.audit && st.audit.written + st.audit.dropped < target && Date.now() < until) {
				await new Promise((r) => setTimeout(r, wait));
				wait = Math.min(wait * 2, 100);
				st = await sub.call("status", undefined, SETTLE_MS);
			}
			await sub.call("status", undefined, SETTLE_MS);
		} catch {
			/* explain from the output and check alone */
		}
	}

	function warnOnce(msg: string): void {
		if (warned) return;
		warned = true;
		if (uiCtx?.hasUI) uiCtx.ui.notify(msg, "warning");
	}

	// ---- output to the person -------------------------------------------------------

	function updateFooter(name?: string): void {
		if (!uiCtx?.hasUI) return;
		let p: ModeSummary | null = state;
		if (p && name && p.mode !== name) p = { ...p, mode: name };
		uiCtx.ui.setStatus(STATUS_KEY, footerText(p, footerLevel));
	}

	/** Text for the person: a notification with a UI; without one (print and JSON modes)
	 * plain lines on stderr. Pi keeps stdout for the answer or the event stream there, and
	 * sends what extensions write to stdout to stderr anyway. */
	function say(ctx: any, text: string, level: "info" | "warning" | "error" = "info"): void {
		if (ctx?.hasUI) ctx.ui.notify(text, level);
		else process.stderr.write(text + "\n");
	}

	// ---- lifecycle ------------------------------------------------------------------

	async function start(ctx: any): Promise<void> {
		uiCtx = ctx;
		cwd = ctx?.cwd ?? process.cwd();
		view = findView(cwd);
		if (!view) return;
		try {
			const st = await request("status");
			viewRoot = view.mountpoint ?? st.project;
			roots = [viewRoot!, st.project].filter(Boolean);
			setState(await modeTexts(request));
		} catch (e: any) {
			// A view whose daemon does not answer: say so once, then stay out of the way.
			warnOnce(`piworkfs: ${view.socket}: ${e.message}`);
			stop();
			return;
		}
		registerPlanTool();
		config = loadConfig(viewRoot!);
		if (config.warning && ctx?.hasUI) ctx.ui.notify(`piworkfs: ${config.warning}`, "warning");
		subscribe();
	}

	function stop(): void {
		conn?.close();
		sub?.close();
		conn = sub = null;
		view = null;
		state = null;
		prompt = null;
		denials = [];
		overlaps = [];
		calls.clear();
	}

	pi.on("session_start", async (_event: any, ctx: any) => {
		stop();
		await start(ctx);
	});

	pi.on("session_shutdown", async () => {
		if (uiCtx?.hasUI) uiCtx.ui.setStatus(STATUS_KEY, undefined);
		stop();
		g[CLAIM] = false;
	});

	// ---- the mode, every turn -------------------------------------------------------

	pi.on("before_agent_start", async (event: any, ctx: any) => {
		uiCtx = ctx;
		if (!view) return undefined;
		subscribe();
		const s = await refresh();
		if (!s) return undefined;
		prompt = { mode: s.mode, system: s.system };
		return {
			systemPrompt: `${event.systemPrompt}\n\n${s.system}`,
			message: { customType: ANNOUNCEMENT_TYPE, content: s.announcement, display: false, details: { mode: s.mode } },
		};
	});

	/** The active plan (plan.status), or null: none, or a daemon without plans. */
	async function planStatus(): Promise<object | null> {
		try {
			const r = await request("plan.status");
			return r && typeof r === "object" ? r : null;
		} catch {
			return null;
		}
	}

	/** The announcement the next request must carry: the switch announcement when the mode
	 * (or its instructions) changed since the system prompt was set. */
	function currentAnnouncement(s: ModeState): string {
		if (!prompt || (prompt.mode === s.mode && prompt.system === s.system)) return s.announcement;
		return s.switch ?? s.announcement;
	}

	pi.on("context", async (event: any) => {
		if (!view) return undefined;
		const s = await refresh();
		if (!s) return undefined;
		const messages = filterContext(event.messages, currentAnnouncement(s), Date.now());
		return messages ? { messages } : undefined;
	});

	// ---- plans: plan_done -------------------------------------------------------------

	/** An agent socket: the one Pi was started with inside `piworkfs run`, else the view's
	 * (agent.open). Never the operator socket: what Pi does, it does with the agent's
	 * authority, so the daemon refuses what only the person may do. */
	async function agentSocket(): Promise<string> {
		if (view!.agent) return view!.socket;
		return (await request("agent.open")).socket;
	}

	/** Registered once a view is found (a Pi outside a view gets no tool of ours). Marking a
	 * task changes no file and no permission (plan.done); approving and reopening are the
	 * person's and have no tool. */
	function registerPlanTool(): void {
		if (planTool) return;
		planTool = true;
		pi.registerTool({
			name: "plan_done",
			label: "Plan: task done",
			description:
				"piworkfs: mark task N of the active approved plan done once its work is finished and tested " +
				"(progress is kept by piworkfs, not in the plan file, which is read-only). Returns the plan's new progress and next task.",
			parameters: {
				type: "object",
				properties: {
					task: { type: "integer", minimum: 1, description: "the task's number, as the plan line shows it" },
					note: { type: "string", description: "optional: what was done, where (kept with the task)" },
				},
				required: ["task"],
				additionalProperties: false,
			} as any,
			async execute(_id: string, params: any) {
				if (!view) throw new Error("piworkfs: Pi is not in a piworkfs view");
				const args: Record<string, unknown> = { task: params.task };
				if (typeof params.note === "string" && params.note) args.note = params.note;
				const r: any = await callOnce(await agentSocket(), "plan.done", args);
				const text = r?.line ?? "every task of the plan is done: tell the person.";
				return { content: [{ type: "text", text: `${TAG} ${text}` }], details: { status: r } };
			},
		} as any);
	}

	// ---- shell commands, checked before they run ------------------------------------

	pi.on("tool_call", async (event: any, ctx: any) => {
		if (!view) return undefined;
		const s = state ?? (await refresh());
		if (!s) return undefined;
		const call: CallStart = { seq, state: s };
		calls.set(event.toolCallId, call);
		if (event.toolName !== "bash" || config.bash === "off" || typeof event.input?.command !== "string") return undefined;
		const rel = projectCwd(ctx?.cwd ?? cwd, roots);
		if (rel === null) return undefined; // Pi works outside the project: nothing to say
		let r: any;
		try {
			r = await request("bash.check", { command: event.input.command, cwd: rel });
		} catch {
			return undefined; // no verdict: the command runs and the filesystem decides
		}
		// Blocked only when the daemon is certain (text.bash): a heuristic or unknown
		// verdict, or no answer, lets the command run and the filesystem decide.
		const t = await bashTexts(request, r, reader(!!view.agent));
		if (!t) return undefined;
		if (config.bash === "warn") {
			call.warn = t.warn;
			return undefined;
		}
		return { block: true, reason: t.block };
	});

	// ---- every refusal explained ----------------------------------------------------

	pi.on("tool_result", async (event: any, ctx: any) => {
		if (!view) return undefined;
		const call = calls.get(event.toolCallId);
		calls.delete(event.toolCallId);
		const text = (event.content ?? []).map((c: any) => (c?.type === "text" ? c.text : "")).join("\n");
		const kinds = errorKinds(text);
		const extra: string[] = [];
		if (call?.warn) extra.push(call.warn);
		const told = overlaps;
		overlaps = [];
		extra.push(...(await overlapLines(request, told)));
		if (!kinds.write && !kinds.read) return extra.length ? { content: appendToContent(event.content, extra) } : undefined;

		const s = call?.state ?? state;
		if (!s) return undefined;
		const here = ctx?.cwd ?? cwd;
		const refusals = new Map<string, Refusal>();

		// 1. The daemon's own record: denials of Pi's processes during this call.
		if (kinds.write || kinds.read) await settleDenials();
		const mine = denials.filter((d) => d.seq > (call?.seq ?? seq));
		const inputPath = typeof event.input?.path === "string" ? toProjectPath(event.input.path, here, roots) : null;
		for (const d of mine) {
			const ev = d.ev;
			// A bash command's denials come from its processes; Pi's own tools write from
			// Pi itself, and then only the tool's own path counts.
			if (event.toolName === "bash" ? d.ours !== "descendant" : ev.path !== inputPath) continue;
			if (!refusals.has(ev.path))
				refusals.set(ev.path, { path: ev.path, op: ev.op, errno: ev.errno, reason: ev.reason, mode: ev.mode ?? s.mode, rule: ev.rule ?? null });
		}

		// 2. The paths the tool and its output name, decided by `check` in the mode of the call.
		const cands = candidatePaths(text);
		if (inputPath && kinds.write) cands.unshift({ path: event.input.path, kind: "write" });
		const byKind: Record<string, Set<string>> = { write: new Set(), read: new Set() };
		for (const c of cands) {
			const rel = toProjectPath(c.path, here, roots);
			if (rel !== null && rel !== "." && !refusals.has(rel)) byKind[c.kind].add(rel);
		}
		for (const op of ["write", "read"] as const) {
			const paths = [...byKind[op]].slice(0, 64);
			if (!paths.length) continue;
			try {
				const r = await request("check", { paths, op, mode: s.mode });
				for (const d of r.decisions) {
					if (d.decision !== "denied" || refusals.has(d.path)) continue;
					if (op === "read" && d.reason !== "hidden") continue;
					refusals.set(d.path, { path: d.path, op: op === "write" ? (event.toolName === "edit" ? "write" : d.op) : "read", errno: d.errno, reason: d.reason, mode: s.mode, rule: d.rule ?? null, message: d.message });
				}
			} catch {
				/* the daemon did not answer: no explanation rather than a wrong one */
			}
		}
		if (!refusals.size) return extra.length ? { content: appendToContent(event.content, extra) } : undefined;

		const all = [...refusals.values()];
		const shown = all.slice(0, MAX_LINES);
		// Grouped by the mode that refused them, in the order each mode first refused.
		const byMode = new Map<string, Refusal[]>();
		for (const r of shown) byMode.set(r.mode, [...(byMode.get(r.mode) ?? []), r]);
		const lines = await refusalLines(request, [...byMode.values()].flat(), reader(!!view?.agent), all.length - shown.length);
		if (!lines.length) return extra.length ? { content: appendToContent(event.content, extra) } : undefined;
		return { content: appendToContent(event.content, [...extra, ...lines]) };
	});

	// ---- /mode and the footer -------------------------------------------------------

	pi.registerCommand("mode", {
		description: "piworkfs: list the modes, or switch to a stricter one (/mode NAME)",
		handler: async (args: string, ctx: any) => {
			uiCtx = ctx;
			if (!view) await start(ctx);
			if (!view) {
				say(ctx, "piworkfs: Pi does not work in a piworkfs view (no view contains its working directory).", "warning");
				return;
			}
			const name = (args ?? "").trim();
			const s = await refresh();
			if (!s) {
				say(ctx, "piworkfs: the view's control socket does not answer.", "error");
				return;
			}
			if (!name) {
				try {
					const ml = await request("modes.list");
					const ws = new Map<string, string>();
					for (const m of ml.modes as ModeInfo[]) {
						try {
							ws.set(m.name, (await modeTexts(request, { mode: m.name })).writable);
						} catch {
							/* that mode cannot be compiled: "?" */
						}
					}
					say(ctx, modeList(ml.modes, ws, s.mode));
				} catch (e: any) {
					say(ctx, `piworkfs: ${e.message}`, "error");
				}
				return;
			}
			if (name === s.mode) {
				say(ctx, `piworkfs: already in mode ${name}.`);
				return;
			}
			await tighten(ctx, s.mode, name);
		},
	});

	/** Switches through a restricted socket, so the daemon refuses a loosening whatever
	 * socket Pi found: inside `run` the agent socket itself; on a bare view the view's
	 * agent socket (agent.open), never the operator socket's full authority. */
	async function tighten(ctx: any, from: string, to: string): Promise<void> {
		let agentSocket = view!.agent ? view!.socket : null;
		try {
			if (!agentSocket) agentSocket = (await request("agent.open")).socket;
			const r = await callOnce(agentSocket!, "mode.set", { mode: to });
			const t = setState(await modeTexts(request));
			say(ctx, `piworkfs: switched from ${r.previous ?? from} to ${r.mode}. ${t.announcement}`);
		} catch (e: any) {
			if (e instanceof RpcError && e.code === RPC_REFUSED && agentSocket) await ask(ctx, agentSocket, from, to);
			else if (e instanceof RpcError && e.code === RPC_REFUSED) say(ctx, `piworkfs: ${loosenText(from, to, view!.mountpoint, view!.agent)}`, "warning");
			else if (e instanceof RpcError && e.code === RPC_UNKNOWN_MODE) say(ctx, `piworkfs: no mode ${to}; /mode lists them.`, "error");
			else say(ctx, `piworkfs: ${e.message}`, "error");
		}
	}

	/** A loosening is the person's to grant: ask them (docs/PROTOCOL.md, mode.request).
	 * When run's terminal shows the question, wait for the answer; otherwise say how the
	 * person allows it. Nothing here can answer: only the person's keyboard or their own
	 * `piworkfs mode --approve ID` outside the agent does. */
	async function ask(ctx: any, agentSocket: string, from: string, to: string): Promise<void> {
		const c = new Connection(agentSocket, 130000);
		try {
			let r = await c.call("mode.request", { mode: to, reason: `/mode ${to} in Pi` });
			if (r.outcome === "pending" && r.shown) {
				say(ctx, `piworkfs: ${from} -> ${to} loosens the mode: asked the person on the terminal of \`piworkfs run\`; waiting for the answer.`);
				r = await c.call("mode.request.wait", { id: r.id, wait_ms: 125000 }, 130000);
			}
			if (r.outcome === "approved") {
				const st = setState(await modeTexts(request));
				say(ctx, `piworkfs: the person allowed it: switched from ${from} to ${st.mode}. ${st.announcement}`);
			} else if (r.outcome === "pending") {
				say(ctx, `piworkfs: ${loosenText(from, to, view!.mountpoint, view!.agent)}\nAsked the person too: \`piworkfs mode --approve ${r.id}\` outside Pi allows it (within 2 minutes).`, "warning");
			} else {
				say(ctx, `piworkfs: not switched to ${to}: the request was ${r.outcome}.`, "warning");
			}
		} catch (e: any) {
			say(ctx, `piworkfs: ${loosenText(from, to, view!.mountpoint, view!.agent)}`, "warning");
		} finally {
			c.close();
		}
	}

	pi.registerShortcut(SHORTCUT as any, {
		description: "piworkfs: cycle the footer's detail (mode, mode and writable paths, hidden)",
		handler: async (ctx: any) => {
			uiCtx = ctx;
			footerLevel = (footerLevel + 1) % FOOTER_LEVELS;
			updateFooter();
		},
	});
}
