// SPDX-License-Identifier: MIT
/*
 * Finding the view Pi works in, the way cli/client/ctl_client.c does (docs/PROTOCOL.md,
 * "Transport"):
 *
 *   - $PIWORKFS_SOCKET, when set and non-empty, names the socket (`piworkfs run` exports
 *     the agent socket there); discovery is skipped.
 *   - Otherwise the view is the `fuse.piworkfs` mount in /proc/self/mountinfo with the
 *     longest mountpoint that contains the real path of Pi's working directory, and its
 *     operator socket is <dir>/<B>-<H>.sock in $XDG_RUNTIME_DIR/piworkfs (or /run/piworkfs
 *     for root without XDG_RUNTIME_DIR).
 *
 * The pure functions (parseMountinfo, socketName, pickView) are unit-tested; findView does
 * the I/O.
 */
import * as fs from "node:fs";
import * as path from "node:path";

export type Mount = { mountpoint: string; source: string | null };

/** Undoes mountinfo's octal escapes (\040 space, \011 tab, \012 newline, \134 backslash). */
export function unescapeMountinfo(s: string): string {
	return s.replace(/\\([0-3][0-7][0-7])/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8)));
}

/** The fuse.piworkfs mounts of a /proc/PID/mountinfo text. */
export function parseMountinfo(text: string): Mount[] {
	const out: Mount[] = [];
	for (const line of text.split("\n")) {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPER
		const sep = line.indexOf(" - ");
		if (sep < 0) continue;
		const left = line.slice(0, sep).split(" ");
		const right = line.slice(sep + 3).split(" ");
		if (left.length < 5 || right[0] !== "fuse.piworkfs") continue;
		// mountinfo is bytes; we read it as latin1 so each byte is one char, then decode.
		const mp = Buffer.from(unescapeMountinfo(left[4]), "latin1").toString("utf8");
		const src = right[1] ? Buffer.from(unescapeMountinfo(right[1]), "latin1").toString("utf8") : null;
		out.push({ mountpoint: mp, source: src });
	}
	return out;
}

/** Is P equal to ROOT or beneath it (at a '/' boundary)? */
export function isUnder(p: string, root: string): boolean {
	if (root === "/") return p.startsWith("/");
	return p === root || p.startsWith(root + "/");
}

/** The mount with the longest mountpoint containing REALPATH, or null. */
export function pickView(mounts: Mount[], realpath: string): Mount | null {
	let best: Mount | null = null;
	for (const m of mounts) {
		if (isUnder(realpath, m.mountpoint) && (!best || m.mountpoint.length > best.mountpoint.length)) best = m;
	}
	return best;
}

/** 64-bit FNV-1a of BYTES as 16 lowercase hex digits. */
export function fnv1a64(bytes: Uint8Array): string {
	let h = 0xcbf29ce484222325n;
	const prime = 0x100000001b3n;
	const mask = (1n << 64n) - 1n;
	for (const b of bytes) {
		h ^= BigInt(b);
		h = (h * prime) & mask;
	}
	return h.toString(16).padStart(16, "0");
}

/** The socket's file name for MOUNTPOINT: <B>-<H>.sock (see the module comment). */
export function socketName(mountpoint: string): string {
	const bytes = Buffer.from(mountpoint, "utf8");
	const slash = bytes.lastIndexOf(0x2f);
	let base: Uint8Array = slash >= 0 && slash + 1 < bytes.length ? bytes.subarray(slash + 1) : Buffer.from("root");
	base = base.subarray(0, 24);
	let b = "";
	for (const c of base) {
		const ok = (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x5f || c === 0x2e;
		b += ok ? String.fromCharCode(c) : "_";
	}
	return `${b}-${fnv1a64(bytes)}.sock`;
}

/** The operator socket directory, or null (not root and no XDG_RUNTIME_DIR). */
export function socketDir(env: NodeJS.ProcessEnv, euid: number): string | null {
	const xdg = env.XDG_RUNTIME_DIR;
	if (xdg && xdg.startsWith("/")) return path.join(xdg, "piworkfs");
	if (euid === 0) return "/run/piworkfs";
	return null;
}

export type FoundView = {
	socket: string;
	/** The view's mountpoint as Pi sees it; null inside `run` (ask `status`). */
	mountpoint: string | null;
	/** Found through $PIWORKFS_SOCKET: the agent socket of a `piworkfs run` sandbox. */
	agent: boolean;
};

/** The view containing CWD, or null when Pi does not work in one (then the extension is
 * silent). Never throws. */
export function findView(cwd: string, env: NodeJS.ProcessEnv = process.env): FoundView | null {
	const envSock = env.PIWORKFS_SOCKET;
	if (envSock) {
		try {
			if (!fs.statSync(envSock).isSocket()) return null;
		} catch {
			return null;
		}
		return { socket: envSock, mountpoint: null, agent: true };
	}
	let real: string;
	let text: string;
	try {
		real = fs.realpathSync(cwd);
		text = fs.readFileSync("/proc/self/mountinfo", "latin1");
	} catch {
		return null;
	}
	const view = pickView(parseMountinfo(text), real);
	if (!view) return null;
	const dir = socketDir(env, process.geteuid ? process.geteuid() : -1);
	if (!dir) return null;
	return { socket: path.join(dir, socketName(view.mountpoint)), mountpoint: view.mountpoint, agent: false };
}
