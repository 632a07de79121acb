/* SPDX-License-Identifier: MIT */
/*
 * Shared printing for the piworkfs commands. Errors are one line on stderr,
 * "piworkfs: CMD: MESSAGE", naming what is wrong (file, line, key for configuration
 * problems). JSON goes to stdout with a stable key order (insertion order, which
 * policy/report.c fixes) and a trailing newline. A small table printer aligns columns for
 * the human-readable output.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "util.h"

/* Prints "piworkfs: CMD: MESSAGE\n" to stderr. CMD may be NULL ("piworkfs: MESSAGE"). */
void pw_err(const char *cmd, const char *fmt, ...) _printf_(2, 3);

/* Reports the option getopt_long rejected (called on '?' or ':' with opterr = 0 and an
 * optstring starting with ':'), and returns PW_EXIT_USAGE. */
int pw_err_option(const char *cmd, int c, char **argv);

/* Prints USAGE (a command's help text) to stdout, or a one-line hint to stderr when
 * TO_STDERR. Returns the exit status to use (0 for --help, PW_EXIT_USAGE otherwise). */
int pw_usage(const char *cmd, const char *usage, bool to_stderr);

/* Dumps J to stdout (indented, key order preserved) followed by a newline, and releases
 * it. Returns 0 or -EIO/-ENOMEM; J == NULL counts as -ENOMEM. */
int pw_print_json(json_t *j);

/* A table of string cells printed with aligned columns; the last column is not padded. */
typedef struct pw_table pw_table;

pw_table *pw_table_new(size_t n_cols); /* NULL on allocation failure */
void pw_table_free(pw_table *t);       /* accepts NULL */
/* Appends a row of n_cols cells (copied; NULL prints as ""). Returns 0 or -ENOMEM. */
int pw_table_add(pw_table *t, const char *const *cells);
/* Prints the rows to F, each line prefixed by INDENT spaces, columns separated by two
 * spaces. */
void pw_table_print(const pw_table *t, FILE *f, unsigned indent);

static inline void pw_table_freep(pw_table **t)
{
	pw_table_free(*t);
}
#define _cleanup_table_ _cleanup_(pw_table_freep)

static inline void pw_json_decrefp(json_t **j)
{
	json_decref(*j);
}
#define _cleanup_json_ _cleanup_(pw_json_decrefp)
