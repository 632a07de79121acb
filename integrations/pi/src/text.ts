// SPDX-License-Identifier: MIT
/*
 * Everything the model and the person read, as pure functions of the daemon's objects
 * (docs/JSON.md: rule, policy, decision; docs/PROTOCOL.md: the denied event, bash.check).
 *
 * Two promises hold here and the unit tests pin them:
 *   - Byte stability: the announcement and the system prompt section depend only on the
 *     policy (and the body), never on time, counters or order of arrival, so a prompt cache
 *     keeps hitting while the mode does not change.
 *   - Truth: the writable set, the protected paths and the rule named in a refusal are the
 *     daemon's own rules, not a paraphrase of the mode's name.
 */

export type Rule = {
	kind: string; // allow | deny | hide | protected | token
	pattern: string;
	file?: string;
	line?: number;
	column?: number;
	layer?: string;
};

export type Policy = {
	mode: string;
	description?: string | null;
	writes_nothing: boolean;
	fail_closed: boolean;
	fail_reason?: string | null;
	rules: Rule[];
	plans_dir?: string | null; // a mode with writes.plans (plan): its plans folder
	lane?: string[]; // the view's lane (`run --only`): writes outside it are refused
};

/** A refused operation, from a `check` decision or a `denied` event. */
export type Refusal = {
	path: string; // project-relative
	op: string;
	errno: string | null;
	reason: string;
	mode: string | null; // the mode that refused it (the mode at the time of the call)
	rule: Rule | null;
	message?: string | null;
};

/** The prefix of every line the extension adds to what the model reads. */
export const TAG = "[piworkfs]";

/** Tokens as Pi itself estimates them for context accounting (compaction.ts:
 * ceil(chars / 4)). A documented estimate, not a tokenizer: English prose with code
 * spans runs at about 4 characters per token for current models. */
export function estimateTokens(text: string): number {
	return Math.ceil(text.length / 4);
}

// ---- the policy in short ------------------------------------------------------------

function uniq(xs: string[]): string[] {
	return [...new Set(xs)];
}

/** The writable patterns: allow and token rules, with "dir/" dropped where "dir/**" is
 * listed too (it only says the directory itself may be created). */
export function writablePatterns(p: Policy): string[] {
	const w = uniq(p.rules.filter((r) => r.kind === "allow" || r.kind === "token").map((r) => r.pattern));
	return w.filter((x) => !(x.endsWith("/") && w.includes(x + "**")));
}

function patterns(p: Policy, kind: string): string[] {
	return uniq(p.rules.filter((r) => r.kind === kind).map((r) => r.pattern));
}

/** May the mode write everything (an allow rule "**")? */
export function writesEverything(p: Policy): boolean {
	return !p.writes_nothing && !p.fail_closed && writablePatterns(p).includes("**");
}

/** Does the mode write its plans folder and nothing else (plan)? */
export function writesOnlyPlans(p: Policy): boolean {
	if (!p.plans_dir || p.fail_closed || p.writes_nothing) return false;
	const own = `/${p.plans_dir}/**`;
	return writablePatterns(p).every((x) => x === own);
}

/** The view's lane (`run --only` globs), or null when it has none. */
export function laneOf(p: Policy): string[] | null {
	return p.lane && p.lane.length ? p.lane : null;
}

/** The lane in the announcement, where the mode writes anything ("" without a lane). */
function laneSentence(p: Policy): string {
	const lane = laneOf(p);
	return lane
		? ` Lane of this run (--only): ${lane.join(", ")}; writes outside it are refused in every mode, whatever the mode allows.`
		: "";
}

/** What the mode may write, in words, narrowed by the run's lane when it has one. */
export function writableText(p: Policy): string {
	const base = baseWritableText(p);
	const lane = laneOf(p);
	if (!lane || p.fail_closed || p.writes_nothing) return base;
	return `${base}, within this run's lane: ${lane.join(", ")}`;
}

/** What the mode may write, in words: "nothing", "everything", "everything except ...",
 * "the plans in DIR/ (not approved ones)", or the list of patterns. */
export function baseWritableText(p: Policy): string {
	if (p.fail_closed || p.writes_nothing) return "nothing";
	if (writesOnlyPlans(p)) return `only the plans in ${p.plans_dir}/ (not approved ones)`;
	const w = writablePatterns(p);
	if (w.length === 0) return "nothing";
	if (!w.includes("**")) return w.join(", ");
	const except: string[] = [];
	const prot = patterns(p, "protected");
	const deny = patterns(p, "deny");
	if (prot.length) except.push(`protected paths (${prot.join(", ")})`);
	if (deny.length) except.push(`denied paths (${deny.join(", ")})`);
	return except.length ? `everything except ${except.join(" and ")}` : "everything";
}

/** Said when the view's originals store is full (status.store_full, issue 27). */
export const STORE_FULL = " Undo is incomplete: the originals store is full, so some changes from now on are not kept and cannot be undone.";

/** The hidden message of every turn: the active mode's real rules in short form, and
 * whether undo is incomplete because the store is full (STOREFULL). */
export function announcement(p: Policy, storeFull = false): string {
	return rulesAnnouncement(p) + (storeFull ? STORE_FULL : "");
}

function rulesAnnouncement(p: Policy): string {
	const hide = patterns(p, "hide");
	const hidden = hide.length ? ` Hidden (absent from the view): ${hide.join(", ")}.` : "";
	const head = `${TAG} Active mode: ${p.mode}.`;
	if (p.fail_closed)
		return `${head} Failing closed (${p.fail_reason ?? "the mode's file is broken"}): nothing is writable until the person fixes it.${hidden}`;
	if (p.writes_nothing) return `${head} Read-only: every write in the project fails (EROFS).${hidden}`;
	const lane = laneSentence(p);
	if (writesOnlyPlans(p))
		return `${head} Read-only: every write in the project fails (EROFS), but the plan files in ${p.plans_dir}/ that are not approved.${lane}${hidden}`;
	const w = writablePatterns(p);
	if (w.includes("**")) {
		const t = baseWritableText(p);
		if (t === "everything" && !laneOf(p)) return `${head} No restrictions: everything in the project is writable.${hidden}`;
		return `${head} Writable: ${t}.${lane}${hidden}`;
	}
	const deny = patterns(p, "deny");
	const prot = patterns(p, "protected");
	return (
		`${head} Writable: ${w.join(", ")}. Read-only: everything else.` +
		(deny.length ? ` Denied: ${deny.join(", ")}.` : "") +
		(prot.length ? ` Protected: ${prot.join(", ")}.` : "") +
		lane +
		hidden
	);
}

/** The announcement when the mode changed after the system prompt was set for this task
 * (a switch between two model requests): it carries the new mode's instructions, since
 * the system prompt still holds the old one's until the next prompt. */
export function switchAnnouncement(p: Policy, body: string | null, promptMode: string, storeFull = false): string {
	const lead =
		`${TAG} The person switched the mode from ${promptMode} to ${p.mode} during this task. ` +
		`This message supersedes the mode section of the system prompt.`;
	const b = (body ?? "").trim();
	return `${lead}\n${announcement(p, storeFull)}${b ? `\n\n${b}` : ""}`;
}

/** The system prompt section: one authoritative header and the mode's body. */
export function systemSection(mode: string, body: string | null): string {
	const b = (body ?? "").trim();
	return (
		`# piworkfs mode: ${mode}\n\n` +
		`The project is a piworkfs view: the filesystem enforces the active mode for every ` +
		`process and tool. This section supersedes every earlier statement about the mode in ` +
		`this conversation, your own included; only a later "${TAG}" message supersedes it.` +
		(b ? `\n\n${b}` : "")
	);
}

// ---- refusals -----------------------------------------------------------------------

const OP_WORDS: Record<string, string> = {
	create: "create",
	mknod: "create",
	mkdir: "create the directory",
	symlink: "create the symlink",
	link: "link",
	unlink: "delete",
	rmdir: "remove the directory",
	rename: "rename",
	"open-write": "write",
	write: "write",
	truncate: "truncate",
	chmod: "chmod",
	chown: "chown",
	utimens: "set the times of",
	setxattr: "set an xattr of",
	removexattr: "remove an xattr of",
	fallocate: "allocate space in",
	"copy-range": "write",
	"access-write": "write",
	lookup: "look up",
	read: "read",
};

export function opWord(op: string): string {
	return OP_WORDS[op] ?? op;
}

/** Where a rule comes from: "built-in", or FILE:LINE with FILE relative to PROJECT when
 * it lies in the project. */
export function ruleOrigin(r: Rule, project?: string | null): string {
	if (!r.file || r.file === "(built-in)" || r.layer === "default") return "built-in";
	let f = r.file;
	if (project && f.startsWith(project + "/")) f = f.slice(project.length + 1);
	return r.line ? `${f}:${r.line}` : f;
}

/** Why it was refused, as a clause: "no allow rule of design matches it". */
export function becauseText(r: Refusal, project?: string | null): string {
	const mode = r.mode ?? "the active mode";
	const rule = r.rule;
	switch (r.reason) {
		case "no-allow":
			return `no allow rule of ${mode} matches it`;
		case "read-only":
			return `${mode} keeps the project read-only`;
		case "protected":
			if (rule?.file === "(approved plan)") return "it is an approved plan, read-only until the person reopens it";
			return rule ? `it is protected (rule "${rule.pattern}", ${ruleOrigin(rule, project)})` : "it is a protected path";
		case "deny-rule":
			return rule ? `the deny rule "${rule.pattern}" (${ruleOrigin(rule, project)}) matches it` : "a deny rule matches it";
		case "fail-closed":
			return `the file of mode ${mode} is broken, so nothing is writable`;
		case "hidden":
			return rule ? `it is hidden (rule "${rule.pattern}", ${ruleOrigin(rule, project)})` : "it is hidden";
		case "outside":
			return "it is outside the project";
		case "outside-lane":
			return "it is outside this run's lane";
		default:
			return r.message ? r.message : `the mode refused it (${r.reason})`;
	}
}

export type ProceedHint = {
	/** A mode that would allow the operation (the narrowest such), or null. */
	mode: string | null;
	/** Inside `piworkfs run`: the agent asks for a looser mode itself (`piworkfs mode NAME
	 * --reason`, answered by the person on run's terminal) instead of asking in words. */
	agent?: boolean;
};

/** How to proceed after a refusal by the lane: no mode switch helps. */
export const LANE_HOW =
	"The lane holds in every mode: leave the path to the agent whose lane it is, or tell the person what you needed; don't work around the refusal.";

/** One line per refused path: what was refused, in which mode, by which rule, what is
 * writable in that mode, and how to proceed. Past tense: it describes the call. */
export function refusalLine(r: Refusal, writable: string, hint: ProceedHint, project?: string | null): string {
	const mode = r.mode ?? "the active";
	const errno = r.errno ? ` (${r.errno})` : "";
	if (r.reason === "hidden") {
		return `${TAG} ${r.path} was hidden in ${mode} mode${errno}: ${becauseText(r, project)}. It does not exist in the view; don't look for another way to it.`;
	}
	let how: string;
	if (r.reason === "protected" && r.rule?.file === "(approved plan)") {
		const name = r.path.replace(/^.*\//, "").replace(/\.md$/, "");
		how = `Work to it, don't change it: if it must change, ask the person to run \`piworkfs plan reopen ${name}\` outside Pi.`;
	} else if (r.reason === "outside-lane") {
		how = LANE_HOW;
	} else if (hint.mode === "off" && r.reason === "protected") {
		how = `Only mode off allows it: if it truly has to change, ask the person to change it themselves.`;
	} else if (hint.mode && hint.agent) {
		how = `To ${opWord(r.op)} it, ask the person for mode ${hint.mode}: run \`piworkfs mode ${hint.mode} --reason "why you need it"\`, which asks them and waits for their answer; don't work around the refusal.`;
	} else if (hint.mode) {
		how = `To ${opWord(r.op)} it, ask the person to run \`piworkfs mode ${hint.mode}\` outside Pi; don't work around the refusal.`;
	} else {
		how = `No mode allows it; tell the person what you needed instead of working around it.`;
	}
	return `${TAG} Refused: ${opWord(r.op)} ${r.path}${errno} in ${mode} mode, because ${becauseText(r, project)}. Writable in ${mode}: ${writable}. ${how}`;
}

/** An overlapping write (the daemon's `overlap` event: PATH, and PATH2 the other view's
 * mountpoint): told, not refused. */
export function overlapLine(path: string, otherView: string): string {
	return `${TAG} Note: ${path} was also changed by another live view of the project, the view at ${otherView}, in its current work: your write went through, but check that it did not overwrite another agent's work (\`piworkfs changes\` shows both).`;
}

/** When a refusal list is cut: the last line. */
export function moreLine(n: number): string {
	return `${TAG} ... and ${n} more refused path${n === 1 ? "" : "s"} (run \`piworkfs log --denied\` outside Pi to see them).`;
}

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

// ---- choosing the mode to suggest ---------------------------------------------------

export type ModeInfo = {
	name: string;
	description?: string | null;
	protect?: boolean;
	tokens?: boolean;
	rules: Rule[];
};

/** Modes from the narrowest to the widest, to suggest the least loosening that would allow
 * an operation: modes without an allow "**" first (fewer allow rules first), then those
 * with one that protect, then those that do not protect (off) last. Ties keep the name
 * order. */
export function rankModes(modes: ModeInfo[]): string[] {
	const score = (m: ModeInfo) => {
		const allows = m.rules.filter((r) => r.kind === "allow").map((r) => r.pattern);
		const all = allows.includes("**");
		return [m.protect === false ? 2 : all ? 1 : 0, all ? 0 : allows.length + (m.tokens ? 1 : 0)];
	};
	return [...modes]
		.sort((a, b) => {
			const [x1, y1] = score(a);
			const [x2, y2] = score(b);
			return x1 - x2 || y1 - y2 || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
		})
		.map((m) => m.name);
}

// ---- bash pre-flight ----------------------------------------------------------------

export type BashTarget = {
	command?: string | null;
	path?: string | null;
	kind?: string;
	access?: string;
	op?: string | null;
	status?: string;
	heuristic?: boolean;
	errno?: string | null;
	reason?: string | null;
	rule?: Rule | null;
	note?: string | null;
};

export type BashResult = {
	verdict: string;
	heuristic: boolean;
	truncated?: boolean;
	targets: BashTarget[];
	mode?: string;
};

/** The writes bash.check is certain would be refused: denied write targets found by the
 * parser (not the heuristic token scan) at a resolved path. Empty: the command runs. */
export function certainRefusals(r: BashResult): BashTarget[] {
	if (!r || r.verdict !== "denied" || r.heuristic) return [];
	return (r.targets ?? []).filter(
		(t) => t.status === "denied" && t.access === "write" && !t.heuristic && t.kind === "path" && typeof t.path === "string",
	);
}

/** The reason a blocked bash call shows the model: one line per refused target. */
export function bashBlockReason(targets: BashTarget[], mode: string, writable: string, hint: (path: string) => ProceedHint, project?: string | null): string {
	const lines = targets.map((t) =>
		refusalLine(
			{ path: t.path || ".", op: t.op || "write", errno: t.errno ?? null, reason: t.reason || "no-allow", mode, rule: t.rule ?? null },
			writable,
			hint(t.path || "."),
			project,
		),
	);
	return (
		`${TAG} The command was not run: piworkfs checked it first and it would write where ${mode} mode refuses. ` +
		`Nothing ran and nothing changed. Rewrite the command to write only where ${mode} allows.\n` +
		lines.join("\n")
	);
}

/** The warning added to a bash result when the project asks to warn instead of block. */
export function bashWarnLine(targets: BashTarget[], mode: string): string {
	const paths = targets.map((t) => t.path).join(", ");
	return `${TAG} Before it ran, piworkfs found that this command writes where ${mode} mode refuses: ${paths}.`;
}

// ---- /mode and the footer -----------------------------------------------------------

/** The /mode listing: every mode with its description and what it may write. */
export function modeList(modes: ModeInfo[], policies: Map<string, Policy>, active: string): string {
	const lines = [`Active mode: ${active}`, ""];
	for (const m of modes) {
		const p = policies.get(m.name);
		const w = p ? writableText(p) : "?";
		lines.push(`${m.name === active ? "*" : " "} ${m.name}: ${m.description ?? ""}`);
		lines.push(`    writes: ${w}`);
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
export function footerText(p: Policy | null, level: number): string | undefined {
	if (!p || level === 2) return undefined;
	const name = p.fail_closed ? `${p.mode} (failing closed)` : p.mode;
	if (level === 0) return `mode: ${name}`;
	return `mode: ${name} · writes: ${writableText(p)}`;
}

// ---- plans --------------------------------------------------------------------------

/** plan.status (docs/PROTOCOL.md): the active plan, or null. */
export type PlanStatus = {
	active: { name: string; done: number; total: number; next: { task: number; text: string } | null } | null;
	line: string | null;
};

/** The announcement's plan line: name, progress and the next task, byte-stable while the
 * plan's progress does not change; null without an active plan. */
export function planLine(st: PlanStatus | null): string | null {
	const a = st?.active;
	if (!a) return null;
	const head = `${TAG} Active plan ${a.name}: ${a.done}/${a.total} done`;
	if (!a.next) return `${head}.`;
	return `${head}; next: task ${a.next.task}, "${a.next.text}". Mark it with the plan_done tool when it is done.`;
}

/** The announcement with the plan line under it, when there is one. */
export function withPlan(text: string, st: PlanStatus | null): string {
	const line = planLine(st);
	return line ? `${text}\n${line}` : text;
}
