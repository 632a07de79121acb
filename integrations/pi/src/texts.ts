// SPDX-License-Identifier: MIT
/*
 * What the model reads, asked of the daemon (docs/PROTOCOL.md: text.mode, text.refusals,
 * text.bash, text.overlap). The extension words none of it: the announcement, the mode
 * section, the refusal lines, a blocked command's reason and the overlap note are written
 * once, in C (policy/agent_text.c), and Pi, `piworkfs mcp` and the hooks of the other
 * agents print the same bytes (docs/ARCHITECTURE.md, "Texts written once"). The daemon is
 * asked anyway for the mode every turn and for every check, so this costs one local round
 * trip where a text is needed, never a process.
 *
 * A daemon older than the extension answers "method not found": then the mode texts are
 * the minimal ones of fallbackTexts (they name the mode and its instructions and claim no
 * writable path), refusals get no line and no command is blocked; the view still refuses
 * every write its mode refuses. A daemon that does not answer at all: the caller keeps what
 * it last had (index.ts).
 */
import { RPC_METHOD_NOT_FOUND, RpcError } from "./rpc.ts";
import { TAG } from "./text.ts";

/** One request on the view's socket (index.ts request()). */
export type Request = (method: string, params?: Record<string, unknown>) => Promise<any>;

/** text.mode's answer: the mode's texts, as the daemon words them. */
export type ModeTexts = {
	mode: string;
	generation: number | null;
	fail_closed: boolean;
	/** The per-turn announcement (with the active plan's line when one was passed). */
	announcement: string;
	/** The system prompt's mode section: header and the mode's instructions. */
	system: string;
	/** What the mode writes, in words. */
	writable: string;
	/** With `from`: the announcement of a switch from that mode, carrying the instructions. */
	switch?: string;
};

/** Who reads the lines and how it asks for a looser mode: Pi, in words on a bare view, with
 * `piworkfs mode NAME --reason` inside `piworkfs run` (its agent socket). */
export type Reader = { agent: string; ask: "words" | "command" };

export function reader(insideRun: boolean): Reader {
	return { agent: "Pi", ask: insideRun ? "command" : "words" };
}

/** A refused operation, from a `check` decision or a `denied` event (docs/JSON.md). */
export type Refusal = {
	path: string; // project-relative
	op: string;
	errno: string | null;
	reason: string;
	mode: string; // the mode that refused it (the mode at the time of the call)
	rule: unknown;
	message?: string | null;
};

/** The texts of the active mode (or PARAMS.mode). PARAMS: text.mode's (from, store_full,
 * plan). */
export async function modeTexts(request: Request, params: Record<string, unknown> = {}): Promise<ModeTexts> {
	try {
		return (await request("text.mode", params)) as ModeTexts;
	} catch (e) {
		// Another mode than the active one has no fallback: mode.get knows only the active.
		if (!(e instanceof RpcError) || e.code !== RPC_METHOD_NOT_FOUND || params.mode !== undefined) throw e;
		return fallbackTexts(await request("mode.get", { body: true }));
	}
}

/** The texts for a daemon without text.mode, from its mode.get: the mode's name and
 * instructions, and nothing it cannot vouch for (no writable path is named). */
export function fallbackTexts(st: { mode: string; generation?: number; fail_closed?: boolean; body?: string | null }): ModeTexts {
	const body = (st.body ?? "").trim();
	const announcement =
		`${TAG} Active mode: ${st.mode}${st.fail_closed ? " (failing closed)" : ""}. This view's daemon is older than ` +
		"the extension and did not say what the mode writes: the filesystem enforces it, and a refused write fails with " +
		"EACCES or EROFS.";
	return {
		mode: st.mode,
		generation: st.generation ?? null,
		fail_closed: !!st.fail_closed,
		announcement,
		system: `# piworkfs mode: ${st.mode}${body ? `\n\n${body}` : ""}`,
		writable: "?",
		switch: `${announcement}${body ? `\n\n${body}` : ""}`,
	};
}

/** One line per refusal (in order) and, when MORE were left out, a last line saying so;
 * none when the daemon does not word them (no explanation rather than a wrong one). */
export async function refusalLines(request: Request, refusals: Refusal[], who: Reader, more = 0): Promise<string[]> {
	if (!refusals.length) return [];
	try {
		const r = await request("text.refusals", { refusals, agent: who.agent, ask: who.ask, ...(more > 0 ? { more } : {}) });
		return Array.isArray(r?.lines) ? r.lines.filter((l: unknown) => typeof l === "string") : [];
	} catch {
		return [];
	}
}

/** How many targets of a bash.check go to text.bash: the request stays one socket line. */
export const BASH_TARGETS_SENT = 256;

/** What to do with a command bash.check answered CHECK for: block (the reason the model
 * reads) and warn (the line a project that warns adds to the result), or null when the
 * command may run (nothing is certain to be refused, or no answer). Only the denied targets
 * are sent: text.bash decides which of them are certain. */
export async function bashTexts(request: Request, check: any, who: Reader): Promise<{ block: string; warn: string } | null> {
	if (check?.verdict !== "denied") return null;
	const targets = (Array.isArray(check.targets) ? check.targets : []).filter((t: any) => t?.status === "denied").slice(0, BASH_TARGETS_SENT);
	try {
		const r = await request("text.bash", { check: { ...check, targets }, agent: who.agent, ask: who.ask });
		return typeof r?.block === "string" && typeof r?.warn === "string" ? { block: r.block, warn: r.warn } : null;
	} catch {
		return null;
	}
}

/** The note for each overlapping write (the `overlap` event: PATH, and PATH2 the other view's
 * mountpoint): told, not refused. */
export async function overlapLines(request: Request, overlaps: { path: string; view: string }[]): Promise<string[]> {
	const out: string[] = [];
	for (const o of overlaps) {
		try {
			const r = await request("text.overlap", { path: o.path, views: [{ mountpoint: o.view }] });
			if (typeof r?.text === "string") out.push(r.text);
		} catch {
			/* the write went through; the note is only lost */
		}
	}
	return out;
}
