// SPDX-License-Identifier: MIT
/*
 * What the person reads in Pi: the footer, the /mode listing, how a loosening is done. The
 * texts the model reads are not here: the daemon words them (texts.ts, the text.* methods
 * of docs/PROTOCOL.md), from the one source every integration prints (policy/agent_text.c).
 */

/** The prefix of every line the extension adds to what the model reads. */
export const TAG = "[piworkfs]";

/** The parts of a mode's texts the person's side shows (texts.ts ModeTexts). */
export type ModeSummary = {
	mode: string;
	fail_closed: boolean;
	/** What the mode writes, in words, as the daemon says it (text.mode). */
	writable: string;
};

export type ModeInfo = {
	name: string;
	description?: string | null;
};

/** Appends LINES to a tool result's content (the last text part, or a new one). */
export function appendToContent(content: any[], lines: string[]): any[] {
	if (!lines.length) return content;
	const add = lines.join("\n");
	const out = content.map((c) => ({ ...c }));
	for (let i = out.length - 1; i >= 0; i--) {
		if (out[i].type === "text") {
			out[i].text = (out[i].text ?? "").replace(/\s+$/, "") + "\n\n" + add;
			return out;
		}
	}
	out.push({ type: "text", text: add });
	return out;
}

// ---- /mode and the footer -----------------------------------------------------------

/** The /mode listing: every mode with its description and what it may write (WRITABLE: by
 * mode name; "?" where the daemon did not say). */
export function modeList(modes: ModeInfo[], writable: Map<string, string>, active: string): string {
	const lines = [`Active mode: ${active}`, ""];
	for (const m of modes) {
		lines.push(`${m.name === active ? "*" : " "} ${m.name}: ${m.description ?? ""}`);
		lines.push(`    writes: ${writable.get(m.name) ?? "?"}`);
	}
	lines.push("", "/mode NAME switches to a stricter mode; the person loosens it outside Pi with `piworkfs mode NAME`.");
	return lines.join("\n");
}

/** How a loosening is done: the exact command for the person. */
export function loosenText(from: string, to: string, mountpoint: string | null, agent: boolean): string {
	const where = agent
		? "in a shell outside the `piworkfs run` sandbox"
		: mountpoint
			? `in a shell outside Pi`
			: "in a shell outside Pi";
	const cmd = !agent && mountpoint ? `piworkfs mode ${to} --mount ${shellQuote(mountpoint)}` : `piworkfs mode ${to}`;
	return `${from} -> ${to} loosens the mode, and the piworkfs extension never loosens it. Run this ${where}:\n  ${cmd}`;
}

export function shellQuote(s: string): string {
	return /^[A-Za-z0-9_./:=@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/** The footer at each detail level: 0 the mode, 1 the mode and what it writes, 2 nothing. */
export const FOOTER_LEVELS = 3;
export function footerText(m: ModeSummary | null, level: number): string | undefined {
	if (!m || level === 2) return undefined;
	const name = m.fail_closed ? `${m.mode} (failing closed)` : m.mode;
	if (level === 0) return `mode: ${name}`;
	return `mode: ${name} · writes: ${m.writable}`;
}
