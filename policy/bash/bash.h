/* SPDX-License-Identifier: MIT */
/*
 * Bash pre-flight: what a shell command line would write, before it runs.
 *
 * The filesystem is the enforcement; this is the explanation. pw_bash_analyze() parses a
 * command string with tree-sitter-bash and lists every *target*: each path a command would
 * write (redirections and the arguments of known writers, bash_writers.c), the paths it
 * reads through redirections and copy sources, every command it cannot judge, and every
 * path that leaves the project. pw_bash_decide() then asks a compiled policy about each
 * target, with the same pw_policy_decide() the filesystem uses, and pw_bash_verdict()
 * folds the answers into one verdict.
 *
 * Verdict order, most restrictive first: denied > outside > unknown > allowed.
 *   - denied:  some target the policy refuses (a write the mode forbids, a hidden read);
 *   - outside: some write leaves the project (the view cannot judge or stop it);
 *   - unknown: a command, path or construct the analysis cannot judge;
 *   - allowed: every write target is allowed and nothing is unknown or outside.
 * Reads outside the project are listed but do not change the verdict (the view does not
 * govern them). A command that does not parse cleanly is analyzed by a conservative
 * token scan (bash_heuristic.c); its targets carry heuristic = true and its verdict is
 * never "allowed" (at best "unknown").
 *
 * Pure and thread-safe: no globals besides const tables; the only I/O is reading the
 * project directory (opendir through opts->root_fd, never following symlinks) to expand
 * globs and tell files from directories.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "bash_types.h"

/*
 * Analyzes CMD (LEN bytes; need not be NUL-terminated). Returns 0 with *ret, or:
 *   -E2BIG   LEN exceeds PW_BASH_INPUT_MAX
 *   -EINVAL  opts->cwd is not a normalizable project path, or CMD contains a NUL byte
 *   -ENOTSUP the tree-sitter runtime does not support the grammar's ABI version
 *   -ENOMEM
 * Everything the analysis cannot follow (nesting deeper than PW_BASH_DEPTH_MAX, more than
 * PW_BASH_TARGETS_MAX targets, an unknown command) becomes an unknown target, never an
 * error. Statuses of path targets are provisional (allowed) until pw_bash_decide().
 */
int pw_bash_analyze(const char *cmd, size_t len, const pw_bash_opts *opts, pw_bash_result **ret);

/* Checks that the linked tree-sitter runtime can load the bash grammar. Returns 0, or
 * -ENOTSUP with a static message in *ret_err. */
int pw_bash_check_runtime(const char **ret_err);

/* Decides each path target with POLICY (PW_OP_READ for reads), setting status/decision. */
void pw_bash_decide(pw_bash_result *r, const pw_policy *policy);

/* The folded verdict (see the order above). */
pw_bash_status pw_bash_verdict(const pw_bash_result *r);

size_t pw_bash_target_count(const pw_bash_result *r);
const pw_bash_target *pw_bash_target_get(const pw_bash_result *r, size_t i);
bool pw_bash_result_heuristic(const pw_bash_result *r); /* the parse failed */
bool pw_bash_result_truncated(const pw_bash_result *r); /* a limit cut the analysis */

/* "allowed", "denied", "outside", "unknown". */
const char *pw_bash_status_name(pw_bash_status s);
const char *pw_bash_access_name(pw_bash_access a); /* "write", "read", "exec" */
const char *pw_bash_kind_name(pw_bash_kind k);	   /* "path", "pattern", "raw", "command" */

/*
 * The result as JSON: {"verdict", "heuristic", "truncated", "targets": [{"command",
 * "path", "kind", "access", "op", "status", "is_dir", "subtree", "heuristic", "note",
 * and when decided "errno", "reason", "rule": {"pattern", "kind", "file", "line"}}]}.
 * Returns a new reference, or NULL on allocation failure.
 */
json_t *pw_bash_result_json(const pw_bash_result *r);

void pw_bash_result_free(pw_bash_result *r); /* accepts NULL */
