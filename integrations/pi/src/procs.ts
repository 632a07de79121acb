// SPDX-License-Identifier: MIT
/*
 * Whose denial is it? A `denied` event carries the pid of the process (or thread) the
 * daemon refused. On a bare view every process of every terminal shares the view, so the
 * extension keeps only the denials of Pi and its descendants: the thread's thread group
 * (Tgid) is Pi's, or Pi is among its ancestors (PPid chain in /proc). A process that is
 * gone by the time the event arrives cannot be placed and is left out (fail closed: never
 * another process's denial); the refusal is then still explained from the tool's own
 * output and `check`.
 */
import * as fs from "node:fs";

function statusOf(pid: number): { tgid: number; ppid: number } | null {
	try {
		const s = fs.readFileSync(`/proc/${pid}/status`, "utf8");
		const tgid = /^Tgid:\s*(\d+)/m.exec(s);
		const ppid = /^PPid:\s*(\d+)/m.exec(s);
		if (!tgid || !ppid) return null;
		return { tgid: Number(tgid[1]), ppid: Number(ppid[1]) };
	} catch {
		return null;
	}
}

export type Lineage = "self" | "descendant" | "other";

/** Where PID stands relative to ANCESTOR (default: this process). */
export function lineage(pid: number, ancestor = process.pid): Lineage {
	if (!Number.isInteger(pid) || pid <= 0) return "other";
	let st = statusOf(pid);
	if (!st) return "other";
	if (st.tgid === ancestor) return "self";
	for (let depth = 0; depth < 128 && st; depth++) {
		if (st.ppid === ancestor) return "descendant";
		if (st.ppid <= 1) return "other";
		st = statusOf(st.ppid);
	}
	return "other";
}
