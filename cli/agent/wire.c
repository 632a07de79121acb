/* SPDX-License-Identifier: MIT */
/*
 * `piworkfs run -- AGENT ...` wires piworkfs into the agents that take it on their command
 * line, for that run only; the person's own settings are never edited:
 *
 *   claude  the hooks (`piworkfs hook claude`) and the MCP server (`piworkfs mcp`) as
 *           `--settings=JSON` and `--mcp-config=JSON` (with "=": --mcp-config takes several
 *           values, and the person's own arguments after it must not become more of them),
 *           which Claude Code merges with the person's settings for this session without
 *           writing any file. $PIWORKFS_CLAUDE set and empty turns it off.
 *   codex   the MCP server as `-c mcp_servers.piworkfs.*` overrides (TOML values), with
 *           $PIWORKFS_SOCKET and $XDG_RUNTIME_DIR passed on (Codex starts an MCP server
 *           with a reduced environment) and a tool timeout above piworkfs_request_mode's
 *           wait. Codex runs only hooks the person has reviewed, so no hook is added
 *           (integrations/README.md). $PIWORKFS_CODEX set and empty turns it off.
 *   opencode the MCP server and the plugin (integrations/opencode: its hooks ask
 *           `piworkfs hook opencode`) in $OPENCODE_CONFIG_CONTENT, which opencode merges
 *           over its config files; the person's own value of it is kept and extended.
 *           $PIWORKFS_OPENCODE set and empty turns it off.
 *   gemini  the MCP server and the hooks (`piworkfs hook gemini`: SessionStart,
 *           BeforeAgent, BeforeTool, AfterTool) in a per-run settings file named by
 *           $GEMINI_CLI_SYSTEM_DEFAULTS_PATH, the lowest of Gemini CLI's settings layers:
 *           its mcpServers and hooks are merged with the person's own (Gemini runs hooks
 *           only in a folder the person trusts). Gemini CLI 0.61 reads that
 *           file only when root owns it and every directory above it, none writable by
 *           group or others (else it warns and skips it): so the file is made in /run, and
 *           only when run runs as root; for anyone else run says so and wires nothing
 *           (integrations/README.md gives the settings snippet). Not wired when the person
 *           set that variable. The file is removed when the run ends (pw_agent_wire_done).
 *           $PIWORKFS_GEMINI set and empty turns it off.
 *
 * The piworkfs inside the sandbox is this very program (/proc/self/exe): the host is bound
 * in the sandbox, and the hook and the server then find the run's agent socket through
 * $PIWORKFS_SOCKET.
 */
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "output.h"
#include "util.h"

/* The settings: one command hook per event, and the piworkfs tools allowed without a
 * prompt (they read, or ask the person: none can loosen the mode). Claude Code runs a hook's
 * command with sh: EXE goes in quoted. */
static char *claude_settings(const char *exe)
{
	_cleanup_free_ char *q = pw_shell_quote(exe), *cmd = NULL;
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

/* What insert_after_name made for the run: freed by pw_agent_wire_done. */
static struct {
	char *extra[8];
	size_t n;
} wired;

/* COMMAND with EXTRA (N strings, taken) inserted after its argv[0]; NULL without memory
 * (EXTRA is then freed). */
static char **insert_after_name(char **command, char **extra, size_t n)
{
	size_t len = 0;
	char **v;

	for (size_t i = 0; i < n; i++)
		if (!extra[i])
			goto fail;
	while (command[len])
		len++;
	v = calloc(len + n + 1, sizeof(*v));
	if (!v)
		goto fail;
	/* The new strings live as long as the run: pw_agent_wire_done frees them. */
	if (n > ELEMENTSOF(wired.extra)) {
		free(v);
		goto fail;
	}
	v[0] = command[0];
	memcpy(v + 1, extra, n * sizeof(*v));
	memcpy(v + 1 + n, command + 1, len * sizeof(*v)); /* with the terminating NULL */
	memcpy(wired.extra, extra, n * sizeof(*extra));
	wired.n = n;
	return v;
fail:
	for (size_t i = 0; i < n; i++)
		free(extra[i]);
	return NULL;
}

static char **wire_claude(char **command, const char *exe)
{
	char *extra[] = {with_prefix("--settings=", claude_settings(exe)),
			 with_prefix("--mcp-config=", mcp_config(exe))};

	return insert_after_name(command, extra, ELEMENTSOF(extra));
}

/* A TOML basic string: JSON's string escapes are TOML's for every path. */
static char *toml_string(const char *s)
{
	json_t *j = json_string(s);
	char *out = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;

	json_decref(j);
	return out;
}

static char **wire_codex(char **command, const char *exe)
{
	_cleanup_free_ char *q = toml_string(exe);
	char *cmd = NULL;
	char *extra[8];

	if (!q || asprintf(&cmd, "mcp_servers.piworkfs.command=%s", q) < 0)
		cmd = NULL;
	extra[0] = strdup("-c");
	extra[1] = cmd;
	extra[2] = strdup("-c");
	extra[3] = strdup("mcp_servers.piworkfs.args=[\"mcp\"]");
	extra[4] = strdup("-c");
	extra[5] =
	    strdup("mcp_servers.piworkfs.env_vars=[\"PIWORKFS_SOCKET\",\"XDG_RUNTIME_DIR\"]");
	extra[6] = strdup("-c");
	extra[7] = strdup("mcp_servers.piworkfs.tool_timeout_sec=130");
	return insert_after_name(command, extra, ELEMENTSOF(extra));
}

/* The opencode plugin: $PIWORKFS_OPENCODE_PLUGIN, else the installed copy, else the source
 * tree's (running from the build directory); NULL when there is none. */
static const char *opencode_plugin(void)
{
	const char *env = getenv("PIWORKFS_OPENCODE_PLUGIN");
	struct stat st;

	if (env)
		return env[0] ? env : NULL;
	if (stat(PW_OPENCODE_PLUGIN, &st) == 0)
		return PW_OPENCODE_PLUGIN;
	if (stat(PW_SOURCE_OPENCODE_PLUGIN, &st) == 0)
		return PW_SOURCE_OPENCODE_PLUGIN;
	return NULL;
}

/* $OPENCODE_CONFIG_CONTENT with the server and the plugin added; the person's own content
 * is kept (a value that is not a JSON object is left alone: nothing is wired). */
static void wire_opencode(const char *exe)
{
	const char *old = getenv("OPENCODE_CONFIG_CONTENT"), *plugin = opencode_plugin();
	json_t *cfg = old && old[0] ? json_loads(old, 0, NULL) : json_object();
	json_t *mcp, *plugins;
	_cleanup_free_ char *url = NULL;
	char *s;

	if (!json_is_object(cfg)) {
		json_decref(cfg);
		return;
	}
	mcp = json_object_get(cfg, "mcp");
	if (!json_is_object(mcp)) {
		mcp = json_object();
		json_object_set_new(cfg, "mcp", mcp);
	}
	json_object_set_new(
	    mcp, "piworkfs",
	    json_pack("{s:s,s:[s,s],s:b}", "type", "local", "command", exe, "mcp", "enabled", 1));
	if (plugin && asprintf(&url, "file://%s", plugin) >= 0) {
		plugins = json_object_get(cfg, "plugin");
		if (!json_is_array(plugins)) {
			plugins = json_array();
			json_object_set_new(cfg, "plugin", plugins);
		}
		json_array_append_new(plugins, json_string(url));
	}
	s = json_dumps(cfg, JSON_COMPACT);
	json_decref(cfg);
	if (!s)
		return;
	/* The plugin runs this piworkfs, and so does the server. */
	setenv("OPENCODE_CONFIG_CONTENT", s, 1);
	setenv("PIWORKFS_BIN", exe, 1);
	free(s);
}

static char *gemini_file; /* the per-run settings file, removed at the end */

/* The tools whose calls `piworkfs hook gemini` checks before and explains after. */
#define GEMINI_TOOLS "write_file|replace|run_shell_command"

/* The server (trusted: its tools run without a prompt; none can loosen the mode) and one
 * command hook per event (Gemini's timeouts are in milliseconds). */
static json_t *gemini_settings(const char *exe)
{
	_cleanup_free_ char *q = pw_shell_quote(exe), *cmd = NULL;
	json_t *hook, *tools, *s;

	if (!q || asprintf(&cmd, "%s hook gemini", q) < 0)
		return NULL;
	hook = json_pack("[{s:[{s:s,s:s,s:s,s:i}]}]", "hooks", "type", "command", "name",
			 "piworkfs", "command", cmd, "timeout", 30000);
	tools = json_pack("[{s:s,s:[{s:s,s:s,s:s,s:i}]}]", "matcher", GEMINI_TOOLS, "hooks", "type",
			  "command", "name", "piworkfs", "command", cmd, "timeout", 30000);
	s = json_pack("{s:{s:{s:s,s:[s],s:b}},s:{s:O,s:O,s:O,s:O}}", "mcpServers", "piworkfs",
		      "command", exe, "args", "mcp", "trust", 1, "hooks", "SessionStart", hook,
		      "BeforeAgent", hook, "BeforeTool", tools, "AfterTool", tools);
	json_decref(hook);
	json_decref(tools);
	return s;
}

static void wire_gemini(const char *exe)
{
	/* Not /tmp: Gemini CLI skips a system settings file under a directory that others
	 * may write. /run is root's, 0755. */
	char path[] = "/run/piworkfs-gemini-XXXXXX.json";
	json_t *cfg;
	char *s;
	int fd;

	if (getenv("GEMINI_CLI_SYSTEM_DEFAULTS_PATH"))
		return; /* the person's own defaults: never replaced */
	if (geteuid() != 0) {
		fprintf(stderr, "piworkfs: run: Gemini CLI reads a per-run settings file only when "
				"root owns it: piworkfs mcp is not wired for this run (add it to "
				"~/.gemini/settings.json, see integrations/README.md)\n");
		return;
	}
	cfg = gemini_settings(exe);
	s = cfg ? json_dumps(cfg, JSON_COMPACT) : NULL;
	json_decref(cfg);
	fd = s ? mkostemps(path, 5, O_CLOEXEC) : -1;
	if (fd < 0) {
		if (s)
			fprintf(stderr,
				"piworkfs: run: %s: %s: piworkfs mcp is not wired for "
				"Gemini CLI in this run\n",
				path, strerror(errno));
		free(s);
		return;
	}
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s) || close(fd) < 0) {
		unlink(path);
		free(s);
		return;
	}
	free(s);
	gemini_file = strdup(path);
	if (!gemini_file) {
		unlink(path);
		return;
	}
	setenv("GEMINI_CLI_SYSTEM_DEFAULTS_PATH", gemini_file, 1);
}

void pw_agent_wire_done(void)
{
	/* the vector is the caller's (cmd_run frees it); the strings in it are ours */
	for (size_t i = 0; i < wired.n; i++)
		free(wired.extra[i]);
	wired.n = 0;
	if (gemini_file)
		unlink(gemini_file);
	free(gemini_file);
	gemini_file = NULL;
}

/* Is the agent NAME wired? $PIWORKFS_<AGENT> set and empty says no. */
static bool wanted(const char *var)
{
	const char *env = getenv(var);

	return !env || env[0];
}

char **pw_agent_wire(char **command)
{
	const char *name = strrchr(command[0], '/');
	_cleanup_free_ char *exe = NULL;

	name = name ? name + 1 : command[0];
	if (!(streq(name, "claude") && wanted("PIWORKFS_CLAUDE")) &&
	    !(streq(name, "codex") && wanted("PIWORKFS_CODEX")) &&
	    !(streq(name, "opencode") && wanted("PIWORKFS_OPENCODE")) &&
	    !(streq(name, "gemini") && wanted("PIWORKFS_GEMINI")))
		return NULL;
	exe = realpath("/proc/self/exe", NULL);
	if (!exe)
		return NULL;
	if (streq(name, "opencode") || streq(name, "gemini")) {
		/* Through the environment: the command stays. */
		if (streq(name, "opencode"))
			wire_opencode(exe);
		else
			wire_gemini(exe);
		return NULL;
	}
	return streq(name, "claude") ? wire_claude(command, exe) : wire_codex(command, exe);
}
