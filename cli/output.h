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

/*
 * Answer failures in JSON too: once on, the first error pw_err() prints is kept, and
 * pw_err_json_flush() prints it on stdout as {"error": {"command", "message", "status"}}
 * unless the command already printed its JSON document. main.c calls the flush with the
 * exit status; commands turn it on when they see --json (options.c does).
 */
void pw_err_json(bool on);
void pw_err_json_flush(int status);

/* Prints "piworkfs: CMD: TEXT" to stderr: on a terminal wrapped to its width (at most 80
 * columns), elsewhere (a log, a pipe) on one line. For notices longer than a line. */
void pw_notice(const char *cmd, const char *text);

/* Should output to F be coloured? Only on a terminal, and never with $NO_COLOR set
 * (https://no-color.org) or TERM=dumb. */
bool pw_use_color(FILE *f);

/* The width of the terminal on stdout ($COLUMNS, else TIOCGWINSZ), or 0 when stdout is
 * not a terminal. */
unsigned pw_terminal_width(void);

/* Writes S into BUF (SIZE bytes) shortened to at most WIDTH characters by replacing its
 * middle with "...", and returns BUF (or S when it fits). */
const char *pw_ellipsize_middle(const char *s, size_t width, char *buf, size_t size);

/* Prints USAGE (a command's help text) to stdout filled to PW_HELP_WIDTH, or a one-line
 * hint to stderr when TO_STDERR. Returns the exit status to use (0 for --help,
 * PW_EXIT_USAGE otherwise). */
int pw_usage(const char *cmd, const char *usage, bool to_stderr);

/* Help texts and tables fit a terminal of this many columns. */
#define PW_HELP_WIDTH 80

/* Prints TEXT (paragraphs, a usage, two-column lists of options and examples) to F with no
 * line wider than WIDTH columns: blocks with a line too wide are filled again (fill.c says
 * how), the others print as written. Returns 0 or -ENOMEM. */
int pw_print_filled(FILE *f, const char *text, size_t width);

/* Prints the words of S to F from column AT of the current line (what is before it is
 * printed already), each further line indented by HANG, none wider than WIDTH (but for a
 * word wider than the room), then a newline. */
void pw_print_wrapped(FILE *f, const char *s, size_t at, size_t hang, size_t width);

/* The width output should fit: the terminal's on stdout, else PW_HELP_WIDTH. */
size_t pw_output_width(void);

/* S as one word of a shell command line, for commands printed to be run as printed: as it
 * is when it holds only characters no shell reads specially, else in single quotes.
 * Malloc'd, NULL when out of memory. */
char *pw_shell_word(const char *s);
/* S in single quotes, always (a ' as '\''). Malloc'd, NULL when out of memory. */
char *pw_shell_quote(const char *s);

/* "error" or "warning": the word a problem formatted as FILE:LINE:COL: SEVERITY: ...
 * (pw_warning_format) is listed under. */
const char *pw_problem_word(const char *formatted);

/* The string at KEY of the JSON object O, or NULL (no such key, not a string, O not an
 * object). */
static inline const char *pw_json_str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

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
 * spaces. A last column that would make a line wider than pw_output_width() wraps under
 * itself (or, with too little room beside the others, on the lines below the row). */
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

/* A daemon error code a command gives an exit status of its own (pw_cli_call_failed). */
typedef struct pw_rpc_exit {
	int code, exit;
} pw_rpc_exit;

/* The message and exit status of the view at MOUNT (NULL: the current directory's) that
 * cannot be reached, R from finding or connecting to it: no view there (-ENOENT), else a
 * daemon that does not answer. Returns PW_EXIT_NO_VIEW. */
int pw_cli_no_view(const char *cmd, const char *mount, int r);

/*
 * The one message and exit status of a call to the view at MOUNT (NULL: the current
 * directory's) that failed with R: no view there (-ENOENT) or a daemon that does not answer,
 * PW_EXIT_NO_VIEW; the daemon's refusal (-EREMOTE, CODE and MESSAGE), the exit MAP gives CODE
 * (N entries), else PW_EXIT_SYSTEM; any other error, OTHER.
 */
int pw_cli_call_failed(const char *cmd, const char *mount, int r, int code, const char *message,
		       const pw_rpc_exit *map, size_t n, int other);
