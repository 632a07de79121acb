// SPDX-License-Identifier: MIT
/*
 * Paths between Pi's working directory, the view and the project. A tool names a path
 * relative to Pi's cwd or absolute; the daemon wants it project-relative. The project shows
 * under one or more roots: on a bare view the mountpoint (and the backing directory, whose
 * paths the daemon also understands), inside `piworkfs run` the project's own path, which
 * shows the view there.
 */
import * as path from "node:path";
import { isUnder } from "./view.ts";

/** The project-relative form of P (relative to CWD or absolute), or null when it lies
 * under none of ROOTS. The root itself is ".". */
export function toProjectPath(p: string, cwd: string, roots: string[]): string | null {
	if (!p) return null;
	if (p.startsWith("~/") || p === "~") return null; // the home directory is not the project
	const abs = path.resolve(cwd, p);
	const sorted = [...roots].filter(Boolean).sort((a, b) => b.length - a.length);
	for (const r of sorted) {
		const root = r.length > 1 ? r.replace(/\/+$/, "") : r;
		if (isUnder(abs, root)) {
			const rel = abs === root ? "." : abs.slice(root === "/" ? 1 : root.length + 1);
			return rel || ".";
		}
	}
	return null;
}

/** Pi's cwd, project-relative ("" at the root), for bash.check; null outside the roots. */
export function projectCwd(cwd: string, roots: string[]): string | null {
	const rel = toProjectPath(cwd, "/", roots);
	if (rel === null) return null;
	return rel === "." ? "" : rel;
}
