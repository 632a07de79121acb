/* SPDX-License-Identifier: MIT */
/*
 * Private to the bash analysis (bash*.c): the types its pieces share. Each piece declares
 * its functions in a header of its own, and the pieces call one way, top to bottom:
 *   bash.c           decisions, verdict, JSON; pw_bash_analyze()
 *   bash_walk.c      walks the tree-sitter tree: lists, pipelines, bodies, functions,
 *                    redirections, word expansion, cd and variables
 *   bash_heuristic.c a token scan for commands that do not parse
 *   bash_writers.c   the table of known commands, and the dispatch of one command to its row
 *   bash_files.c, bash_archives.c, bash_builds.c, bash_git.c, bash_wrappers.c
 *                    the rows' handlers, by kind of command: what their arguments write
 *   bash_cmd.c       one command: its options scanned, and the handlers' target helpers
 *   bash_path.c      words to project paths: cwd, ~, absolute paths, globs, braces
 *   bash_targets.c   the result's targets (added once each) and the step budget
 * The walk and the heuristic both turn a simple command into an argv of bw_word and hand
 * it to bw_dispatch(), so a writer is described once, in the table. A wrapper judges the
 * command it runs through bw_cmd.dispatch, and a shell on a string (sh -c, flock -c) through
 * bw_ctx.analyze_string, which bash.c sets to the walk: so the handlers need neither
 * bash_writers.c nor bash_walk.c, though the three recurse.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "bash_types.h"
#include "pw_limits.h"

/* Budget of steps (nodes visited, commands dispatched, directory entries read) one analysis
 * may spend, on top of a per-byte allowance; bounds loops walked per value, functions
 * called many times, and glob expansion. Exhausting it makes the rest "unknown". */
#define BW_STEPS_BASE 200000u
#define BW_STEPS_PER_BYTE 8u

/* One word of a command line after quote removal. */
typedef struct bw_word {
	char *lit;	 /* the literal text (quotes removed); NULL when unknown */
	char *pat;	 /* the same with quoted glob/brace bytes escaped by '\'; NULL if unknown */
	char *raw;	 /* the source text, for messages */
	bool glob;	 /* an unquoted '*', '?' or '[' is active */
	bool unknown;	 /* an expansion we cannot resolve ($VAR, $(...), ...) */
	bool tilde;	 /* an unquoted leading '~' */
	bool special;	 /* not a path at all (process substitution) */
	bool under;	 /* stands for some path beneath lit (find's {}): a subtree target */
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
	bw_state *st; /* current shell state */
	bw_func *funcs;
	size_t n_funcs;
	unsigned long steps; /* remaining budget */
	unsigned shell_level;
	bool heuristic;	 /* targets found now come from the token scan */
	const char *src; /* text of the tree being walked */
	/* git_root() memo: the last cwd asked about and its answer (a script runs many git
	 * commands from one directory; each probe walks up the tree). */
	char *git_memo_cwd;
	char *git_memo_root;
	bool git_memo_found;
	bw_stat_memo *stat_memo; /* path_mode() answers (bash_path.c) */
	size_t n_stat_memo;
	void *parser; /* TSParser * */
	/* Parses and walks TEXT (sh -c, eval) one shell level deeper: bw_analyze_string
	 * (bash_walk.h), set by pw_bash_analyze. */
	void (*analyze_string)(struct bw_ctx *c, const char *text, size_t len, unsigned depth,
			       const char *command);
} bw_ctx;
