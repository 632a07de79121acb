// SPDX-License-Identifier: MIT
/*
 * The project's settings for the extension: `.piworkfs/pi.json` in the project, e.g.
 * {"bash": "warn"}. It lives under `.piworkfs/`, a protected path, so the agent cannot
 * change it (only the person, in mode off or in the backing directory). Keys:
 *
 *   bash: "block" (default) | "warn" | "off"   what a certain bash.check refusal does:
 *         block the call before it runs, add a warning to its result, or nothing.
 *
 * $PIWORKFS_PI_BASH, set by the person when starting Pi, overrides the file.
 */
import * as fs from "node:fs";
import * as path from "node:path";

export type BashPolicy = "block" | "warn" | "off";
export type PiConfig = { bash: BashPolicy; warning: string | null };

const BASH: BashPolicy[] = ["block", "warn", "off"];

/** Parses the file's TEXT (null: absent). Bad input keeps the default and says why. */
export function parseConfig(text: string | null, envBash?: string): PiConfig {
	const cfg: PiConfig = { bash: "block", warning: null };
	if (text !== null) {
		try {
			const j = JSON.parse(text);
			if (!j || typeof j !== "object" || Array.isArray(j)) throw new Error("not an object");
			for (const k of Object.keys(j)) {
				if (k === "bash") {
					if (!BASH.includes(j.bash)) throw new Error(`bash: expected one of ${BASH.join(", ")}`);
					cfg.bash = j.bash;
				} else {
					cfg.warning = `.piworkfs/pi.json: unknown key "${k}" ignored`;
				}
			}
		} catch (e: any) {
			return { bash: "block", warning: `.piworkfs/pi.json: ${e.message}; using bash: block` };
		}
	}
	if (envBash) {
		if (BASH.includes(envBash as BashPolicy)) cfg.bash = envBash as BashPolicy;
		else cfg.warning = `PIWORKFS_PI_BASH=${envBash}: expected one of ${BASH.join(", ")}`;
	}
	return cfg;
}

/** Reads ROOT/.piworkfs/pi.json (ROOT: the project as Pi sees it). */
export function loadConfig(root: string, env: NodeJS.ProcessEnv = process.env): PiConfig {
	let text: string | null = null;
	try {
		text = fs.readFileSync(path.join(root, ".piworkfs", "pi.json"), "utf8");
	} catch {
		text = null;
	}
	return parseConfig(text, env.PIWORKFS_PI_BASH);
}
