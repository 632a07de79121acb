/* SPDX-License-Identifier: MIT */
/*
 * `piworkfs run -- claude ...` wires piworkfs into Claude Code for that run only: the
 * hooks (`piworkfs hook claude`) and the MCP server (`piworkfs mcp`) go on its command line
 * as `--settings=JSON` and `--mcp-config=JSON` (with "=": --mcp-config takes several
 * values, and the person's own arguments after it must not become more of them), which Claude Code
 * merges with the person's own settings for this session without writing any file. The person's
 * settings are never edited. $PIWORKFS_CLAUDE set and empty turns it off.
 *
 * The piworkfs inside the sandbox is this very program (/proc/self/exe): the host is bound
 * in the sandbox, and the hook and the server then find the run's agent socket through
 * $PIWORKFS_SOCKET.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"
#include "util.h"

/* S quoted for sh (Claude Code runs a hook's command with the shell). */
static char *sh_quote(const char *s)
{
	size_t n = 3;
	char *out, *o;

	for (const char *p = s; *p; p++)
		n += *p == '\'' ? 4 : 1;
	out = malloc(n);
	if (!out)
		return NULL;
	o = out;
	*o++ = '\'';
	for (const char *p = s; *p; p++) {
		if (*p == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else {
			*o++ = *p;
		}
	}
	*o++ = '\'';
	*o = '\0';
	return out;
}

/* The settings: one command hook per event, and the piworkfs tools allowed without a
 * prompt (they read, or ask the person: none can loosen the mode). */
static char *claude_settings(const char *exe)
{
	_cleanup_free_ char *q = sh_quote(exe), *cmd = NULL;
	json_t *hook, *tools, *s;
	char *out;

	if (!q || asprintf(&cmd, "%s hook claude", q) < 0)
		return NULL;
	hook = json_pack("[{s:[{s:s,s:s,s:i}]}]", "hooks", "type", "command", "command", cmd,
			 "timeout", 30);
	tools = json_pack("[{s:s,s:[{s:s,s:s,s:i}]}]", "matcher",
			  "Write|Edit|MultiEdit|NotebookEdit|Bash", "hooks", "type", "command",
			  "command", cmd, "timeout", 30);
	s = json_pack("{s:{s:O,s:O,s:O,s:O,s:O},s:{s:[s]}}", "hooks", "SessionStart", hook,
		      "UserPromptSubmit", hook, "PreToolUse", tools, "PostToolUse", tools,
		      "PostToolUseFailure", tools, "permissions", "allow", "mcp__piworkfs");
	json_decref(hook);
	json_decref(tools);
	out = s ? json_dumps(s, JSON_COMPACT) : NULL;
	json_decref(s);
	return out;
}

static char *mcp_config(const char *exe)
{
	json_t *c = json_pack("{s:{s:{s:s,s:s,s:[s]}}}", "mcpServers", "piworkfs", "type", "stdio",
			      "command", exe, "args", "mcp");
	char *out = c ? json_dumps(c, JSON_COMPACT) : NULL;

	json_decref(c);
	return out;
}

/* PREFIX and S (taken) in one malloc'd string. */
static char *with_prefix(const char *prefix, char *s)
{
	char *out = NULL;

	if (s && asprintf(&out, "%s%s", prefix, s) < 0)
		out = NULL;
	free(s);
	return out;
}

char **pw_agent_wire(char **command)
{
	const char *name = strrchr(command[0], '/'), *env = getenv("PIWORKFS_CLAUDE");
	_cleanup_free_ char *exe = NULL;
	char *settings = NULL, *mcp = NULL, **v;
	size_t n = 0;

	name = name ? name + 1 : command[0];
	if (!streq(name, "claude") || (env && !env[0]))
		return NULL;
	exe = realpath("/proc/self/exe", NULL);
	if (!exe)
		return NULL;
	settings = with_prefix("--settings=", claude_settings(exe));
	mcp = with_prefix("--mcp-config=", mcp_config(exe));
	while (command[n])
		n++;
	v = settings && mcp ? calloc(n + 3, sizeof(*v)) : NULL;
	if (!v) {
		free(settings);
		free(mcp);
		return NULL;
	}
	/* The strings live as long as the run: the vector and they are never freed. */
	v[0] = command[0];
	v[1] = settings;
	v[2] = mcp;
	memcpy(v + 3, command + 1, n * sizeof(*v)); /* with the terminating NULL */
	return v;
}
