/* SPDX-License-Identifier: MIT */
/*
 * What any agent reads about its mode: `piworkfs mcp` (agent/mcp_server.c, an MCP server) and
 * `piworkfs hook claude` (agent/hook.c, Claude Code's hooks) share these parts.
 *
 *   policy/agent_text.h  the texts every agent reads (the announcement, the mode
 *           section, the refusal lines, a blocked command's): written once there, so Pi,
 *           the MCP server and the hooks print the same bytes; what needs the view (the
 *           narrowest mode that would allow a path) the daemon adds (text.refusals,
 *           text.bash)
 *   refusals.c  reading a tool's output for the refusals it reports
 *   view.c  the view as an agent sees it: always through a restricted socket (the agent
 *           socket inside `piworkfs run`, the view's shared agent socket on a bare view),
 *           so nothing here can loosen the mode; and the explanations, which the daemon
 *           words
 *   wire.c  what `piworkfs run` adds to each client's command line or settings
 *
 * Strings returned are malloc'd (NULL: out of memory); json_t arguments are borrowed.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "agent_text.h"
#include "client/ctl_client.h"

/* `piworkfs mcp` (mcp_server.c) and `piworkfs hook CLIENT` (hook.c): main.c's dispatch
 * table. */
int cmd_mcp(int argc, char **argv);
int cmd_hook(int argc, char **argv);

/* ---- refusals.c -------------------------------------------------------------------- */

/* Does TEXT report a refused write (EACCES, EROFS, "Permission denied", "Read-only file
 * system")? */
bool pw_agent_reports_refusal(const char *text);
/* Paths named on the lines of TEXT that report a refusal (refusals.ts candidatePaths()),
 * appended to the array OUT (strings, without repeats). */
void pw_agent_candidate_paths(const char *text, json_t *out);

/* ---- view.c ------------------------------------------------------------------------ */

typedef struct pw_agent_view {
	char *socket;	  /* a restricted socket of the view */
	char *mountpoint; /* the view's mountpoint (status), or NULL */
	char *project;	  /* the backing project (status), or NULL */
	bool run;	  /* inside `piworkfs run` ($PIWORKFS_SOCKET) */
} pw_agent_view;

/*
 * Finds the view around CWD (NULL: the current directory) the way the Pi extension does:
 * $PIWORKFS_SOCKET inside `run`, else the view containing CWD, whose shared agent socket
 * it opens (agent.open), so that every later call is restricted. Returns 0, -ENOENT (not
 * in a view), -errno / -EREMOTE (the daemon does not answer or refused).
 */
int pw_agent_view_open(const char *cwd, pw_agent_view *ret);
void pw_agent_view_done(pw_agent_view *v);

/* One call on a fresh connection to the view's restricted socket (pw_ctl_call's
 * contract; TIMEOUT_MS 0: 10 s). */
int pw_agent_call(const pw_agent_view *v, unsigned timeout_ms, const char *method, json_t *params,
		  json_t **ret_result, int *ret_code, char **ret_message);

/* mode.get with the body: the active mode's state. Returns 0 with a new reference. */
int pw_agent_mode(const pw_agent_view *v, json_t **ret_state);

/* PATH (absolute or relative to CWD) as the daemon names it: project-relative, "" at the
 * root; NULL when it lies outside the project (under neither the project nor the
 * mountpoint). */
char *pw_agent_project_path(const pw_agent_view *v, const char *cwd, const char *path);

/*
 * The refusal lines for PATHS (strings, as the tool named them; relative to CWD) that the
 * mode MODE (NULL: the active one) refuses for OP ("write"): one line each, with the
 * narrowest mode that would allow it, worded by the daemon (text.refusals) for AGENT;
 * WITH_TOOL: they point at piworkfs_request_mode. Returns a new array of strings (empty:
 * none refused, or the daemon did not answer), NULL without memory.
 */
json_t *pw_agent_explain(const pw_agent_view *v, const char *cwd, json_t *paths, const char *op,
			 const char *mode, const char *agent, bool with_tool);

/*
 * Overlapping writes (fs/overlap.h): the note for PATH (absolute or relative to CWD) when
 * another live view of the project changed it in its current change set too, as
 * `changes` marks it ("[piworkfs] Note: PATH was also changed by ..."), or NULL.
 */
char *pw_agent_overlap_note(const pw_agent_view *v, const char *cwd, const char *path);

/* The explanation of a shell command bash.check is certain would be refused in the active
 * mode (text.bash's block), or NULL when it may run (allowed, heuristic, unknown, outside
 * the project, or no answer). CWD: the command's working directory, absolute or relative
 * to BASE. */
char *pw_agent_bash_refusal(const pw_agent_view *v, const char *base, const char *cwd,
			    const char *command, const char *agent, bool with_tool);

/* ---- wire.c ------------------------------------------------------------------------ */

/* `piworkfs run`: COMMAND with piworkfs wired in for the agent it names (claude: the hooks
 * and the MCP server on its command line; codex: the MCP server as -c overrides; opencode:
 * the server and the plugin in $OPENCODE_CONFIG_CONTENT, set here; gemini: the server in
 * a per-run settings file named by $GEMINI_CLI_SYSTEM_DEFAULTS_PATH), or NULL when the
 * command stays as it is. The vector is malloc'd; its new strings live until exit, the
 * others are COMMAND's. */
char **pw_agent_wire(char **command);
/* Removes what pw_agent_wire left for the run (gemini's per-run settings file). */
void pw_agent_wire_done(void);
