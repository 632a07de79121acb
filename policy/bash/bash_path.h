/* SPDX-License-Identifier: MIT */
/* Words to project paths (bash_path.c): cwd, ~, absolute paths, globs, braces; the word and
 * shell-state helpers the walk, the writers and the heuristic share. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "bash_internal.h"

/* Resolves W against the current cwd and adds the target(s): expanded braces and globs,
 * outside, unknown. IS_DIR is the role's guess (mkdir: true); existing paths are stat'ed. */
void bw_target_word(bw_ctx *c, const char *command, const bw_word *w, pw_bash_access access,
		    pw_op op, bool is_dir, bool subtree);
/* A path known to the command rather than written by the user (".git", "node_modules"),
 * relative to the current cwd. */
void bw_target_lit(bw_ctx *c, const char *command, const char *rel, pw_bash_access access, pw_op op,
		   bool is_dir, bool subtree);
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

/* --- word helpers --- */
void bw_word_done(bw_word *w);
int bw_word_literal(bw_word *w, const char *lit, const char *raw); /* a known literal */
void bw_word_unknown(bw_word *w, const char *raw, const char *why);
bw_state *bw_state_copy(const bw_state *s);
void bw_state_free(bw_state *s);
const bw_var *bw_var_get(const bw_state *s, const char *name);
void bw_var_set(bw_state *s, const char *name, const char *value, bool glob);
void bw_set_cwd(bw_state *s, bw_cwd_state st, const char *cwd);
bool bw_state_same_cwd(const bw_state *a, const bw_state *b);
