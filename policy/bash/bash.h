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

#include "policy.h"

typedef enum pw_bash_access {
	PW_BASH_WRITE,
	PW_BASH_READ,
	PW_BASH_EXEC, /* a command itself (kind PW_BASH_KIND_COMMAND) */
} pw_bash_access;

typedef enum pw_bash_status {
	PW_BASH_ALLOWED,
	PW_BASH_DENIED,
	PW_BASH_OUTSIDE,
	PW_BASH_UNKNOWN,
} pw_bash_status;

typedef enum pw_bash_kind {
	PW_BASH_KIND_PATH,    /* path: a normalized project-relative path ("" is the root) */
	PW_BASH_KIND_PATTERN, /* path: a glob that matched nothing, taken literally as bash does */
	PW_BASH_KIND_RAW,     /* path: the text as written; it could not be resolved */
	PW_BASH_KIND_COMMAND, /* path: NULL; command names a command the analysis cannot judge */
} pw_bash_kind;

typedef struct pw_bash_target {
	char *command;   /* what writes or reads it: "sed -i", "redirect >>", "git commit" */
	char *path;      /* see kind; NULL for PW_BASH_KIND_COMMAND */
	char *note;      /* why it is outside or unknown ("cd to an unknown directory"); or NULL */
	pw_bash_kind kind;
	pw_bash_access access;
	pw_op op;        /* the filesystem operation it stands for (PW_OP_READ for reads) */
	bool is_dir;     /* a directory (existing, or created as one) */
	bool subtree;    /* the command may write anything beneath the path */
	bool heuristic;  /* found by the token scan, not the parser */
	pw_bash_status status;
	bool decided;        /* pw_bash_decide() set decision */
	pw_decision decision; /* valid when decided */
} pw_bash_target;

typedef struct pw_bash_opts {
	/* The project root, opened O_DIRECTORY; used to expand globs and to stat targets.
	 * -1: no tree access (globs are reported as patterns). Not closed by the analysis. */
	int root_fd;
	/* Absolute path of the project root, to map absolute paths inside it to project paths;
	 * NULL: every absolute path is outside. */
	const char *root_path;
	/* The working directory, project-relative ("" or NULL: the root). */
	const char *cwd;
	/* What the asker may not see: is PATH (project-relative; IS_DIR its type), or a
	 * directory above it, hidden? A hidden name reads as absent to every look at the tree
	 * (globs do not match it, stat finds nothing), as it does in the view. The caller
	 * supplies the rules (the analysis knows no view); NULL: nothing is hidden. */
	bool (*hidden)(const char *path, bool is_dir, void *arg);
	void *hidden_arg;
} pw_bash_opts;

typedef struct pw_bash_result pw_bash_result;

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
int pw_bash_analyze(const char *cmd, size_t len, const pw_bash_opts *opts,
		    pw_bash_result **ret);

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
const char *pw_bash_kind_name(pw_bash_kind k);     /* "path", "pattern", "raw", "command" */

/*
 * The result as JSON: {"verdict", "heuristic", "truncated", "targets": [{"command",
 * "path", "kind", "access", "op", "status", "is_dir", "subtree", "heuristic", "note",
 * and when decided "errno", "reason", "rule": {"pattern", "kind", "file", "line"}}]}.
 * Returns a new reference, or NULL on allocation failure.
 */
json_t *pw_bash_result_json(const pw_bash_result *r);

void pw_bash_result_free(pw_bash_result *r); /* accepts NULL */
