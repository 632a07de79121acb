/* SPDX-License-Identifier: MIT */
/*
 * What any agent reads about its mode: `piworkfs mcp` (agent/mcp_server.c, an MCP server) and
 * `piworkfs hook claude` (agent/hook.c, Claude Code's hooks) share these parts.
 *
 *   text.c  the texts, as pure functions of the daemon's objects (docs/JSON.md's rule,
 *           policy and decision, docs/PROTOCOL.md's bash.check): a C port of
 *           integrations/pi/src/text.ts, byte for byte where the Pi extension has the same
 *           text (the announcement, the system section, the refusal line), so every agent
 *           reads the same words and prompt caches keep hitting
 *   view.c  the view as an agent sees it: always through a restricted socket (the agent
 *           socket inside `piworkfs run`, the view's shared agent socket on a bare view),
 *           so nothing here can loosen the mode; and the explanations that need the
 *           daemon (the narrowest mode that would allow a path)
 *   wire.c  what `piworkfs run` adds to each client's command line or settings
 *
 * Strings returned are malloc'd (NULL: out of memory); json_t arguments are borrowed.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "client/ctl_client.h"

/* `piworkfs mcp` (mcp_server.c) and `piworkfs hook CLIENT` (hook.c): main.c's dispatch
 * table. */
int cmd_mcp(int argc, char **argv);
int cmd_hook(int argc, char **argv);

/* The prefix of every line piworkfs adds to what a model reads. */
#define PW_AGENT_TAG "[piworkfs]"

/* ---- text.c ------------------------------------------------------------------------ */

/* What POLICY may write, in words: "nothing", "everything", "everything except ...", or
 * its writable patterns. */
char *pw_agent_writable_text(json_t *policy);
/* The short per-turn announcement of the active policy's real rules (text.ts
 * announcement()): depends only on the policy, so it is byte-stable. */
char *pw_agent_announcement(json_t *policy);
/* The authoritative mode section: header and the mode's body (text.ts systemSection()). */
char *pw_agent_system_section(const char *mode, const char *body);
/* One line per refused path (text.ts refusalLine()). REFUSAL has path, op, errno, reason,
 * mode, rule (docs/JSON.md decision or a denied event). HINT_MODE: the narrowest mode
 * that would allow it, or NULL. AGENT names who reads it ("Pi", "the agent"); WITH_TOOL:
 * also point at the piworkfs_request_mode tool. */
char *pw_agent_refusal_line(json_t *refusal, const char *writable, const char *hint_mode,
			    const char *project, const char *agent, bool with_tool);
/* The writes bash.check is certain would be refused (parser findings at a resolved path,
 * never the heuristic): a new array of borrowed-then-increfed targets, empty to run. */
json_t *pw_agent_certain_refusals(json_t *bash_result);
/* The head line of a blocked shell command; the refusal lines follow it. */
char *pw_agent_bash_block_head(const char *mode);
/* Modes from the narrowest to the widest (text.ts rankModes()): a new array of names. */
json_t *pw_agent_rank_modes(json_t *modes);
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
 * narrowest mode that would allow it. Returns a new array of strings (empty: none refused
 * or the daemon did not answer), NULL without memory.
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
 * mode, or NULL when it may run (allowed, heuristic, unknown, outside the project, or no
 * answer). CWD: the command's working directory, absolute or relative to BASE. */
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
