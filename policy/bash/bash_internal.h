/* SPDX-License-Identifier: MIT */
/*
 * Private to the bash analysis (bash*.c). The pieces:
 *   bash.c           the result object, decisions, verdict, JSON; pw_bash_analyze()
 *   bash_walk.c      walks the tree-sitter tree: lists, pipelines, bodies, functions,
 *                    redirections, word expansion, cd and variables
 *   bash_writers.c   the table of known commands and what their arguments write
 *   bash_path.c      words to project paths: cwd, ~, absolute paths, globs, braces
 *   bash_heuristic.c a token scan for commands that do not parse
 * The walk and the heuristic both turn a simple command into an argv of bw_word and hand
 * it to bw_dispatch(), so a writer is described once, in the table.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "bash.h"

/* Budget of steps (nodes visited, commands dispatched, directory entries read) one analysis
 * may spend, on top of a per-byte allowance; bounds loops walked per value, functions
 * called many times, and glob expansion. Exhausting it makes the rest "unknown". */
#define BW_STEPS_BASE 200000u
#define BW_STEPS_PER_BYTE 8u
#define BW_SHELL_NEST_MAX 8     /* sh -c 'sh -c ...' levels followed */
#define BW_FOR_VALUES_MAX 16    /* for-loop values walked one by one */
#define BW_FUNC_CALLS_MAX 8     /* times one function body is walked */
#define BW_BRACE_MAX 64         /* words one brace expansion may produce */
#define BW_GLOB_MATCHES_MAX 256 /* paths one glob may expand to */
#define BW_VARS_MAX 256         /* tracked variables */
#define BW_FUNCS_MAX 256        /* tracked functions */

/* One word of a command line after quote removal. */
typedef struct bw_word {
	char *lit;     /* the literal text (quotes removed); NULL when unknown */
	char *pat;     /* the same with quoted glob/brace bytes escaped by '\'; NULL if unknown */
	char *raw;     /* the source text, for messages */
	bool glob;     /* an unquoted '*', '?' or '[' is active */
	bool unknown;  /* an expansion we cannot resolve ($VAR, $(...), ...) */
	bool tilde;    /* an unquoted leading '~' */
	bool special;  /* not a path at all (process substitution) */
	bool under;    /* stands for some path beneath lit (find's {}): a subtree target */
	const char *why; /* why unknown (static) */
} bw_word;

typedef enum bw_cwd_state {
	BW_CWD_KNOWN,
	BW_CWD_OUTSIDE,
	BW_CWD_UNKNOWN,
} bw_cwd_state;

typedef struct bw_var {
	char *name;
	char *value; /* NULL: unknown */
	bool glob;   /* the value is a pattern (a for-loop over a glob) */
} bw_var;

/* The shell state that cd and assignments change; copied into subshells. */
typedef struct bw_state {
	bw_cwd_state cwd_state;
	char *cwd; /* normalized project-relative, when KNOWN */
	bw_var *vars;
	size_t n_vars;
} bw_state;

typedef struct bw_func {
	char *name;
	const void *body; /* a TSNode *, owned by the tree of the analysis that defined it */
	const char *src;  /* the text of that tree */
	unsigned calls;
	bool active;
} bw_func;

typedef struct pw_bash_result {
	pw_bash_target *targets;
	size_t n_targets, cap_targets;
	/* Open-addressing index over targets for de-duplication (slot = target index + 1, 0
	 * empty); BW_INDEX_SLOTS, twice PW_BASH_TARGETS_MAX, so it never fills. */
	uint32_t *index;
	bool heuristic;
	bool truncated;
	bool oom;
} pw_bash_result;

#define BW_STAT_MEMO_SLOTS 1024u
typedef struct bw_stat_memo {
	char *path;
	int mode; /* st_mode, or -1 when absent */
} bw_stat_memo;

typedef struct bw_ctx {
	pw_bash_result *res;
	const pw_bash_opts *opts;
	bw_state *st;       /* current shell state */
	bw_func *funcs;
	size_t n_funcs;
	unsigned long steps; /* remaining budget */
	unsigned shell_level;
	bool heuristic;     /* targets found now come from the token scan */
	const char *src;    /* text of the tree being walked */
	/* git_root() memo: the last cwd asked about and its answer (a script runs many git
	 * commands from one directory; each probe walks up the tree). */
	char *git_memo_cwd;
	char *git_memo_root;
	bool git_memo_found;
	bw_stat_memo *stat_memo; /* path_mode() answers (bash_path.c) */
	size_t n_stat_memo;
	void *parser;       /* TSParser * */
} bw_ctx;

/* --- bash.c --- */
/* Adds a target. Copies strings; dedupes identical targets; past PW_BASH_TARGETS_MAX marks
 * the result truncated and drops further targets. Never fails (OOM is recorded). */
void bw_add(bw_ctx *c, const char *command, pw_bash_access access, pw_op op,
	    pw_bash_kind kind, const char *path, pw_bash_status status, bool is_dir, bool subtree,
	    const char *note);
void bw_add_unknown_cmd(bw_ctx *c, const char *command, const char *note);
/* Spends N steps; false (and the result marked truncated, once) when the budget is gone. */
bool bw_spend(bw_ctx *c, unsigned long n);

/* --- bash_path.c --- */
/* Resolves W against the current cwd and adds the target(s): expanded braces and globs,
 * outside, unknown. IS_DIR is the role's guess (mkdir: true); existing paths are stat'ed. */
void bw_target_word(bw_ctx *c, const char *command, const bw_word *w, pw_bash_access access,
		    pw_op op, bool is_dir, bool subtree);
/* A path known to the command rather than written by the user (".git", "node_modules"),
 * relative to the current cwd. */
void bw_target_lit(bw_ctx *c, const char *command, const char *rel, pw_bash_access access,
		   pw_op op, bool is_dir, bool subtree);
/* Is LIT (relative to the current cwd, or absolute inside the root) an existing directory? */
bool bw_word_is_dir(bw_ctx *c, const char *lit);
/* Does the normalized project path PATH exist (without following a final symlink)? False
 * when there is no tree access. */
bool bw_exists(bw_ctx *c, const char *path);
/* cd: changes the current cwd state per W (NULL: `cd` alone, which goes home). */
void bw_cd(bw_ctx *c, const bw_word *w);
/* Matches NAME against one glob segment PAT (escapes with '\'); a leading '.' must be
 * matched literally. Linear-time two-pointer matching, no recursion. */
bool bw_segment_match(const char *pat, const char *name);

/* --- bash_walk.c --- */
/* Parses and walks TEXT (sh -c, eval) in a copy of the current state, one shell level
 * deeper. */
void bw_analyze_string(bw_ctx *c, const char *text, size_t len, unsigned depth,
		       const char *command);

/* --- bash_writers.c --- */
/* Judges one simple command: ARGV[0] is the name (argv words are borrowed). Wrappers
 * (env, sudo, xargs, find -exec, sh -c, ...) recurse with DEPTH + 1. */
void bw_dispatch(bw_ctx *c, bw_word *argv, size_t argc, unsigned depth);

/* --- bash_heuristic.c --- */
/* Scans TEXT as tokens and dispatches every command it can make out. */
void bw_heuristic_scan(bw_ctx *c, const char *text, size_t len);

/* --- word helpers (bash_path.c) --- */
void bw_word_done(bw_word *w);
int bw_word_literal(bw_word *w, const char *lit, const char *raw); /* a known literal */
void bw_word_unknown(bw_word *w, const char *raw, const char *why);
bw_state *bw_state_copy(const bw_state *s);
void bw_state_free(bw_state *s);
const bw_var *bw_var_get(const bw_state *s, const char *name);
void bw_var_set(bw_state *s, const char *name, const char *value, bool glob);
void bw_set_cwd(bw_state *s, bw_cwd_state st, const char *cwd);
bool bw_state_same_cwd(const bw_state *a, const bw_state *b);
