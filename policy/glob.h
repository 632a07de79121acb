/* SPDX-License-Identifier: MIT */
/*
 * Glob patterns, as gitignore defines them, against normalized project-relative paths:
 *   a pattern with a '/' other than a trailing one is anchored at the project root
 *     (`src/` `*.c`, `/build`, `docs/design/` `**`); a leading '/' only anchors;
 *   a pattern without one matches a name at any depth ("*.pem" covers "a.pem" and
 *     "sub/b.pem", ".env" covers "x/.env"), as does "**" "/" NAME;
 *   '*'  any run of bytes within one segment (not '/'); '?' one byte, not '/'
 *   '**' as a whole segment: zero or more segments ("**" alone: everything);
 *     `dir/` `**` is everything beneath dir, not dir itself (pw_glob_match_dir_itself)
 *   '[abc]', '[a-z]', '[!a-z]' / '[^a-z]' byte classes (never match '/')
 *   '\x' the byte x literally
 *   a trailing '/' makes the pattern match directories only
 * One meaning for every use: allow, deny, hide, protected, token rules and `log --path`.
 * Patterns are compiled once; matching a path costs O(len(path) * len(pattern)) at worst
 * with no backtracking blow-up, and O(len(path)) for ordinary patterns.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pw_glob pw_glob;

/*
 * Compiles PATTERN. Returns 0 and *ret, or -EINVAL (syntax: unterminated class, trailing
 * backslash, empty pattern) or -ENAMETOOLONG (longer than PW_GLOB_LEN_MAX), with a static
 * message in *ret_err when ret_err is not NULL.
 */
int pw_glob_compile(const char *pattern, pw_glob **ret, const char **ret_err);

/* Does the glob match exactly PATH (normalized, project-relative)? IS_DIR tells whether
 * PATH names a directory (needed for patterns with a trailing '/'). */
bool pw_glob_match(const pw_glob *g, const char *path, bool is_dir);

/* Does the glob match PATH or any of its ancestor directories? A rule on a directory
 * covers everything beneath it, as in gitignore. */
bool pw_glob_match_tree(const pw_glob *g, const char *path, bool is_dir);

/*
 * Is PATH (a directory) the `dir` of a pattern `dir/` `**`, whose final "**" segment covers
 * everything beneath it? Allow and token rules use it so that `tests/` `**` lets `tests`
 * itself be created (gitignore knows no writes; for them the directory that holds the
 * allowed tree belongs to it). False for every pattern that does not end in a "**" segment
 * after another one.
 */
bool pw_glob_match_dir_itself(const pw_glob *g, const char *path);

/*
 * For tests: pw_glob_match (TREE false) or pw_glob_match_tree (TREE true), also storing in
 * *RET_WORK the work done, counted as (byte read, live NFA state) pairs plus the bytes the
 * fast paths compare: a measure of the bounded-work promise that no machine load changes.
 */
bool pw_glob_match_counted(const pw_glob *g, const char *path, bool is_dir, bool tree,
			   uint64_t *ret_work);

/* Does the pattern match one name at any depth (it has no '/' but a trailing one, or is
 * "**" "/" NAME)? Such a match depends on the names of the path alone, not on their place. */
bool pw_glob_is_basename(const pw_glob *g);

/* The pattern text as given. */
const char *pw_glob_pattern(const pw_glob *g);

/*
 * A compiled glob is immutable, so every rule that has its pattern shares one (a policy
 * compiled at a switch takes references to the globs the mode files compiled at load,
 * instead of compiling them again). pw_glob_ref adds a reference and returns G;
 * pw_glob_free drops one and frees the glob with the last. Both accept NULL.
 */
pw_glob *pw_glob_ref(pw_glob *g);
void pw_glob_free(pw_glob *g);
static inline void pw_glob_freep(pw_glob **g)
{
	pw_glob_free(*g);
}
