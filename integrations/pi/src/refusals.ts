// SPDX-License-Identifier: MIT
/*
 * Reading a tool result for refusals: does its text report EACCES/EROFS (a write the view
 * refused) or ENOENT (maybe a hidden path), and which paths does it name? The daemon then
 * decides each candidate with `check`; a string that is not a refused path in the view
 * simply comes back allowed or outside and is dropped, so the extraction may be generous.
 */

export type Kind = "write" | "read";
export type Candidate = { path: string; kind: Kind };

const WRITE_ERR = /\bEACCES\b|\bEROFS\b|[Pp]ermission denied|[Rr]ead-only file system/;
const READ_ERR = /\bENOENT\b|[Nn]o such file or directory/;
// The C library's wording, as shells and coreutils print it after "PATH: ".
const PHRASES = [/^[Pp]ermission denied\b/, /^[Rr]ead-only file system\b/, /^[Nn]o such file or directory\b/];

/** The kinds of refusal TEXT reports, if any. */
export function errorKinds(text: string): { write: boolean; read: boolean } {
	return { write: WRITE_ERR.test(text), read: READ_ERR.test(text) };
}

/* A candidate must look like a path: `check` calls any path the mode cannot write
 * "denied", so a word taken for a path would be explained as a refusal it was not. */
function plausible(s: string): boolean {
	if (!s || s.length > 4096 || /[\n\0]/.test(s)) return false;
	if (s === "." || /^\d+$/.test(s) || /^line \d+$/.test(s)) return false;
	if (/^E[A-Z0-9]+$/.test(s)) return false; // an error code
	if (/[.,;]\s/.test(s)) return false; // prose ("docs/x.md. Error code")
	return true;
}

/** Paths named on the lines of TEXT that report a refusal: quoted strings ('x', ‘x’, "x",
 * `x`), and the segment before ": Permission denied" in "bash: line 1: src/a: Permission
 * denied". In order of appearance, without repeats. */
export function candidatePaths(text: string): Candidate[] {
	const out: Candidate[] = [];
	const seen = new Set<string>();
	const add = (p: string, kind: Kind) => {
		p = p.trim();
		const key = kind + "\0" + p;
		if (!plausible(p) || seen.has(key)) return;
		seen.add(key);
		out.push({ path: p, kind });
	};
	for (const line of text.split("\n")) {
		const kind: Kind | null = WRITE_ERR.test(line) ? "write" : READ_ERR.test(line) ? "read" : null;
		if (!kind) continue;
		for (const m of line.matchAll(/'([^'\n]+)'|‘([^’\n]+)’|"([^"\n]+)"|`([^`\n]+)`/g)) add(m[1] ?? m[2] ?? m[3] ?? m[4], kind);
		const parts = line.split(": ");
		for (let i = 1; i < parts.length; i++) {
			const seg = parts[i - 1];
			if (PHRASES.some((re) => re.test(parts[i])) && !/['‘"`]/.test(seg)) add(seg, kind);
		}
	}
	return out;
}
