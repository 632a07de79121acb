/* SPDX-License-Identifier: MIT */
/*
 * The audit log as `piworkfs log` and `piworkfs why` read and print it: its rows and the
 * query for them (log_rows.c), the table and the JSON lines they print as (log_table.c).
 * The commands are cmd_log.c and cmd_why.c.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "glob.h"
#include "store/reader.h"
#include "store/state.h"

typedef struct log_row {
	int64_t id, time_ns, generation, rule_line, pid, uid, count, first_ns, last_ns;
	int err;
	char *project, *mountpoint, *mode, *op, *path, *path2, *reason, *rule_kind, *rule_pattern,
	    *rule_file, *comm, *thread;
} log_row;

enum {
	COL_TIME,
	COL_PROJECT,
	COL_MODE,
	COL_OP,
	COL_ERRNO,
	COL_PID,
	COL_COMM,
	COL_COUNT,
	COL_PATH,
	COL_RULE,
	N_COLS
};

/* One line of the table: an audit event or a mode switch. */
typedef struct log_line {
	int64_t time_ns, id;
	bool is_switch, denied;
	char *cells[N_COLS];
} log_line;

typedef struct log_printer {
	size_t width[N_COLS];	   /* 0: not sized yet */
	size_t path_max, rule_max; /* 0: no limit (not a terminal) */
	bool color;
	bool all_projects; /* rows of every project: the PROJECT column */
	bool hide[N_COLS];
	bool fit;	 /* laid out for a width: on a terminal every cell cut to its column's */
	bool whole;	 /* not a terminal: laid out for 80 columns, nothing cut, RULE wrapped */
	size_t term;	 /* the width laid out for */
	bool rule_below; /* too narrow for PATH and RULE side by side: RULE on a line below */
	bool path_below; /* not a terminal, no room for PATH on the row: PATH below, then RULE */
	size_t time_from, time_len; /* the part of "YYYY-MM-DD HH:MM:SS.mmm" shown */
} log_printer;

typedef struct log_filter {
	bool denied;
	const char *mode;
	pw_glob *path_glob;  /* matched in C: SQL has no gitignore globs */
	const char *path_eq; /* exact path (why) */
	bool has_pid;
	int64_t pid;
	bool has_since;
	int64_t since_ns;
	const char *project;
} log_filter;

typedef struct live_view {
	char *socket;
	char *mountpoint; /* NULL when found through $PIWORKFS_SOCKET */
	char *project;	  /* the project's real path, as the daemon reports it */
} live_view;

typedef struct log_opts {
	log_filter f;
	size_t limit;
	bool limit_given;
	bool json, jsonl, follow, all, switches;
	const char *project_opt, *glob;
} log_opts;

/* ---- log_rows.c ---- */

/* A copy of the store's row A that outlives the query's callback. */
int pw_log_row_copy(const pw_audit_row *a, log_row *r);

/* Frees R's strings and zeroes it. */
void pw_log_row_done(log_row *r);

/* The store's filter for F. AFTER_ID >= 0 asks for rows with a larger id, oldest first (for
 * --follow); otherwise rows come newest first. */
pw_audit_filter pw_log_audit_filter(const log_filter *f, int64_t after_id);

/* The last LIMIT rows passing F (0: all), oldest first, in *ret_rows. */
int pw_log_collect(pw_store_reader *db, const log_filter *f, size_t limit, log_row **ret_rows,
		   size_t *ret_n);

/* Frees N rows of ROWS and the array. */
void pw_log_rows_free(log_row *rows, size_t n);

/* --since S: a time ago (relative) or an ISO 8601 time. Returns 0 with *ret_ns
 * (CLOCK_REALTIME ns), or -EINVAL. */
int pw_log_parse_since(const char *s, int64_t *ret_ns);

/* A count option's value S (WHAT names it): 0 with *ret, or -EINVAL after saying why. */
int pw_log_parse_count(const char *cmd, const char *s, const char *what, int64_t *ret);

/* The live view containing the current directory (or named by $PIWORKFS_SOCKET), with the
 * project its daemon serves. Returns 0, -ENOENT when not inside a view, another -errno when
 * its daemon does not answer (a stale mount): callers then behave as outside a view. */
int pw_log_live_view_find(live_view *ret);

/* Frees V's strings and zeroes it. */
void pw_log_live_view_done(live_view *v);

/* ---- log_table.c ---- */

/* NS as "YYYY-MM-DD HH:MM:SS.mmm" local time, or as ISO 8601 with Z when UTC, into BUF. */
void pw_log_format_time(int64_t ns, bool utc, char *buf, size_t size);

/* A reload that kept the mode is no switch: the log leaves it out (every reload recorded
 * "design -> design"). */
bool pw_log_noop_switch(const pw_switch_row *w);

/* The table line of switch W in L. Returns 0 or -ENOMEM. */
int pw_log_line_from_switch(const pw_switch_row *w, log_line *l);

/* Prints L as the printer P lays lines out. */
void pw_log_print_line(const log_printer *p, const log_line *l);

/* Frees L's cells. */
void pw_log_line_done(log_line *l);

/* Sizes the columns for LINES; on a terminal, PATH and RULE share what the others leave of
 * its width (PATH shortened in the middle, RULE at its end), and no line is wider. Not on a
 * terminal (a file, a pipe) the rows are laid out for 80 columns too, but nothing is cut:
 * RULE goes below the row, wrapped, when it has no room beside PATH. */
void pw_log_printer_size(log_printer *p, const log_line *lines, size_t n);

/* Prints the header line of the columns P shows. */
void pw_log_print_header(const log_printer *p);

/* Prints R as one JSON line. Returns 0 or -errno. */
int pw_log_print_row_json(const log_row *r);

/* Prints R as a line of P's table. Returns 0 or -errno. */
int pw_log_print_row_text(const log_printer *p, const log_row *r);

/* Prints ROWS and the switches SW among them, by time, as the table (PR) or JSON lines.
 * Returns an exit status. */
int pw_log_print(const log_opts *o, log_printer *pr, bool json, const log_row *rows, size_t n,
		 const pw_switch_row *sw, size_t n_sw);

/* The row as `log --jsonl` prints it: ctl/events.h, the shape of the live notification. */
json_t *pw_log_row_json(const log_row *r);

/* A switch as one JSON object (with "kind": "switch"): ctl/events.h. */
json_t *pw_log_switch_json(const pw_switch_row *w);

/* Prints O (taken) as one compact line. Returns 0, -ENOMEM (O NULL) or -EIO. */
int pw_log_print_json_line(json_t *o);
