// SPDX-License-Identifier: MIT
/*
 * piworkfs for opencode: a plugin that tells the model its mode, stops an edit or a shell
 * command the mode refuses before it runs, and explains a refusal in a tool's output.
 *
 * It holds no logic of its own: each hook asks `piworkfs hook opencode`, the program
 * that answers Claude Code's hooks, with the event in Claude Code's shape, so both agents
 * read the same bytes (the Pi extension's announcement and refusal lines). That program
 * talks to the view through a restricted socket only and says nothing outside a view, so
 * this plugin does nothing there either. `piworkfs run -- opencode` loads it
 * ($OPENCODE_CONFIG_CONTENT); $PIWORKFS_BIN names the piworkfs to run (default: PATH).
 *
 *   experimental.chat.system.transform  the mode section and announcement in the system
 *                                       prompt of every request (rebuilt each time, so a
 *                                       switch shows in the next request)
 *   tool.execute.before                 write/edit/bash the mode refuses: thrown as the
 *                                       tool's error, with the reason, before it runs
 *   tool.execute.after                  EACCES/EROFS in the output: the refusal lines
 */
import { spawnSync } from "node:child_process";

const BIN = process.env.PIWORKFS_BIN || "piworkfs";
const FILE_TOOLS = { write: "Write", edit: "Edit", multiedit: "MultiEdit", patch: "Edit" };

/** The answer of `piworkfs hook claude` to EVENT, or null (nothing to say, or it failed:
 * the view still decides every write). */
function ask(event) {
	const r = spawnSync(BIN, ["hook", "opencode"], { input: JSON.stringify(event), encoding: "utf8", timeout: 30000 });
	if (r.status !== 0 || !r.stdout || !r.stdout.trim()) return null;
	try {
		return JSON.parse(r.stdout).hookSpecificOutput ?? null;
	} catch {
		return null;
	}
}

function claudeTool(tool, args) {
	if (tool === "bash" && typeof args?.command === "string") return { tool_name: "Bash", tool_input: { command: args.command } };
	const name = FILE_TOOLS[tool];
	const path = args?.filePath ?? args?.file_path ?? args?.path;
	if (name && typeof path === "string") return { tool_name: name, tool_input: { file_path: path } };
	return null;
}

export const Piworkfs = async ({ directory }) => {
	const cwd = directory || process.cwd();
	return {
		"experimental.chat.system.transform": async (_input, output) => {
			const a = ask({ hook_event_name: "SessionStart", cwd });
			if (a?.additionalContext) output.system.push(a.additionalContext);
		},
		"tool.execute.before": async (input, output) => {
			const t = claudeTool(input.tool, output.args);
			if (!t) return;
			const a = ask({ hook_event_name: "PreToolUse", cwd, ...t });
			if (a?.permissionDecision === "deny") throw new Error(a.permissionDecisionReason);
		},
		"tool.execute.after": async (input, output) => {
			if (typeof output?.output !== "string") return;
			const t = claudeTool(input.tool, output.metadata ?? {}) ?? { tool_name: input.tool, tool_input: {} };
			const a = ask({ hook_event_name: "PostToolUse", cwd, ...t, tool_response: output.output });
			if (a?.additionalContext) output.output = `${output.output.replace(/\s+$/, "")}\n\n${a.additionalContext}`;
		},
	};
};
