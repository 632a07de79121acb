/* SPDX-License-Identifier: MIT */
/*
 * The bash pre-flight's types (bash.h is its API): what a target is and what an analysis is
 * given. Apart from bash.h so that the analysis's own pieces (bash_internal.h) can name
 * them without including the API that bash.c implements over them.
 */
#pragma once

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
	char *command; /* what writes or reads it: "sed -i", "redirect >>", "git commit" */
	char *path;    /* see kind; NULL for PW_BASH_KIND_COMMAND */
	char *note;    /* why it is outside or unknown ("cd to an unknown directory"); or NULL */
	pw_bash_kind kind;
	pw_bash_access access;
	pw_op op;	/* the filesystem operation it stands for (PW_OP_READ for reads) */
	bool is_dir;	/* a directory (existing, or created as one) */
	bool subtree;	/* the command may write anything beneath the path */
	bool heuristic; /* found by the token scan, not the parser */
	pw_bash_status status;
	bool decided;	      /* pw_bash_decide() set decision */
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
