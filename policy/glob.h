/* SPDX-License-Identifier: MIT */
/*
 * Glob patterns, gitignore-like and anchored at the project root:
 *   '*'  any run of bytes within one segment (not '/'); '?' one byte, not '/'
 *   '**' as a whole segment: zero or more segments ("**" alone: everything)
 *   '[abc]', '[a-z]', '[!a-z]' / '[^a-z]' byte classes (never match '/')
 *   '\x' the byte x literally
 *   a trailing '/' makes the pattern match directories only
 * A leading '/' is accepted and ignored (patterns are always anchored).
 * Patterns are compiled once; matching a path costs O(len(path) * len(pattern)) at worst
 * with no backtracking blow-up, and O(len(path)) for ordinary patterns.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

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

/* The pattern text as given. */
const char *pw_glob_pattern(const pw_glob *g);

/* Destructor; accepts NULL. */
void pw_glob_free(pw_glob *g);
