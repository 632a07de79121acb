/* SPDX-License-Identifier: MIT */
/*
 * What an agent reads about its mode, written once: the announcement, the mode section of
 * the system prompt, the refusal lines, the text of a blocked shell command, the note on an
 * overlapping write and the active plan's line. Every integration prints these bytes: the
 * daemon serves them to the Pi extension (the text.* methods, docs/PROTOCOL.md), and
 * `piworkfs mcp` and `piworkfs hook` call these functions (cli/agent/). docs/ARCHITECTURE.md,
 * "Texts written once", says why they live here.
 *
 * Pure functions of the daemon's objects (docs/JSON.md's policy, rule and decision;
 * docs/PROTOCOL.md's bash.check result and plan.status), so two promises hold and the unit
 * tests pin them:
 *   - Byte stability: the announcement and the mode section depend only on the policy and
 *     the body, never on time, counters or order of arrival, so a prompt cache keeps hitting
 *     while the mode does not change.
 *   - Truth: the writable set, the protected paths and the rule named in a refusal are the
 *     daemon's own rules, not a paraphrase of the mode's name.
 *
 * Strings returned are malloc'd (NULL: out of memory); json_t arguments are borrowed and may
 * be anything (a missing or mistyped key reads as absent: the objects may come from a
 * client). Texts only one integration prints (the MCP tools' answers, the hook's switch
 * lead, the Pi extension's /mode listing) stay with that integration.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The prefix of every line piworkfs adds to what a model reads. */
#define PW_TEXT_TAG "[piworkfs]"

/* How a refusal line tells the agent to get a looser mode. */
typedef enum pw_text_ask {
	PW_TEXT_ASK_WORDS,   /* ask the person to run `piworkfs mode M` outside AGENT */
	PW_TEXT_ASK_COMMAND, /* inside `piworkfs run`: `piworkfs mode M --reason` asks them */
	PW_TEXT_ASK_TOOL,    /* the MCP tool piworkfs_request_mode, or the words */
} pw_text_ask;

/* "words", "command", "tool": 0 with *ret, or -EINVAL. */
int pw_text_ask_from_name(const char *name, pw_text_ask *ret);

/* ---- the mode ------------------------------------------------------------------------- */

/* What POLICY may write, in words: "nothing", "everything", "everything except ...", "only
 * the plans in DIR/ (not approved ones)" or its writable patterns, narrowed by the lane. */
char *pw_text_writable(json_t *policy);

/* The short per-turn announcement of POLICY's real rules; STORE_FULL adds that undo is
 * incomplete because the originals store is full. */
char *pw_text_announcement(json_t *policy, bool store_full);

/* The announcement when the mode changed from FROM after the system prompt was set for this
 * task: it names both modes, supersedes the system prompt's mode section and carries BODY,
 * the new mode's instructions. */
char *pw_text_switch_announcement(json_t *policy, const char *body, const char *from,
				  bool store_full);

/* The lead of the texts an agent whose client keeps no system prompt of ours gets after a
 * switch (the hooks: the mode section and the announcement follow it): the mode changed
 * from FROM to MODE during this session. */
char *pw_text_session_switch(const char *from, const char *mode);

/* The authoritative mode section: one header ("# piworkfs mode: MODE") and BODY. */
char *pw_text_system_section(const char *mode, const char *body);

/* TEXT with the active plan's line under it (PLAN: a plan.status result; none active, or
 * not an object: TEXT as it is). Byte-stable while the plan's progress does not change. */
char *pw_text_with_plan(const char *text, json_t *plan);

/* ---- refusals ------------------------------------------------------------------------- */

/*
 * One line per refused path. REFUSAL has path, op, errno, reason, mode, rule and message
 * (a decision of `check` or a `denied` event). WRITABLE: what its mode writes
 * (pw_text_writable). HINT_MODE: the narrowest mode that would allow it, or NULL. PROJECT:
 * the project's path, to show a rule's file relative to it. AGENT names who reads it
 * ("Pi": "outside Pi"); ASK how it asks for another mode.
 */
char *pw_text_refusal_line(json_t *refusal, const char *writable, const char *hint_mode,
			   const char *project, const char *agent, pw_text_ask ask);

/* The last line when N refused paths were left out. */
char *pw_text_more_line(size_t n, const char *agent);

/* Modes from the narrowest to the widest (MODES: modes.list's), to suggest the least
 * loosening that allows an operation: a new array of names. */
json_t *pw_text_rank_modes(json_t *modes);

/* ---- shell commands ------------------------------------------------------------------- */

/* The writes a bash.check RESULT is certain would be refused: denied write targets the
 * parser found (never the heuristic) at a resolved path. A new array (empty: the command
 * may run) holding references to RESULT's targets; NULL without memory. */
json_t *pw_text_certain_refusals(json_t *result);

/* A certain target of a command checked in MODE, as a refusal for pw_text_refusal_line:
 * a new object. */
json_t *pw_text_target_refusal(json_t *target, const char *mode);

/* Why a shell command was not run: the head line, then LINES (strings), one a line. */
char *pw_text_bash_block(const char *mode, json_t *lines);

/* The warning added to a command's result when the project asks to warn instead of block:
 * TARGETS, the certain ones. */
char *pw_text_bash_warn(json_t *targets, const char *mode);

/* ---- overlapping writes --------------------------------------------------------------- */

/* PATH was changed by other live views too (VIEWS: [{"mountpoint", "changeset"}], the
 * change set optional): told, not refused. */
char *pw_text_overlap_line(const char *path, json_t *views);
