/* SPDX-License-Identifier: MIT */
/*
 * The store's read API: what the CLI (log, why, trust, the offline commands) reads from the
 * daemon's state database, without a line of SQL outside fs/store/.
 *
 * A reader opens the database read-only: it never creates, migrates or repairs the file (a
 * corrupt file is the daemon's to move aside, with a warning). The schema is db.c's; the
 * writers are state.c (trust, last mode, switches) and audit.c (the audit log). A reader is
 * used by one thread at a time.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "glob.h"

typedef struct pw_store_reader pw_store_reader;

/* Opens the database at PATH read-only. Returns 0, -ENOENT when there is no file, -EPROTO
 * when it holds no piworkfs schema yet, or another -errno. */
int pw_store_open_readonly(const char *path, pw_store_reader **ret);
void pw_store_reader_close(pw_store_reader *r); /* accepts NULL */
void pw_store_reader_closep(pw_store_reader **r);

/* The last SQLite error message of R, for diagnostics ("" when none). */
const char *pw_store_reader_error(const pw_store_reader *r);

/* ---- projects (state.c writes them) ---------------------------------------------------- */

/* Is PROJECT (real path) trusted? 1 yes, 0 no (or never seen), -errno. */
int pw_store_is_trusted(pw_store_reader *r, const char *project);

/* The last mode of PROJECT. 0 with a malloc'd *ret_mode, -ENOENT when none, or -errno. */
int pw_store_last_mode(pw_store_reader *r, const char *project, char **ret_mode);

/* Calls CB for each trusted project, by path, with when trust was given. CB returning
 * non-zero stops the walk (a negative value is returned). Returns 0 or -errno. */
typedef int (*pw_store_trusted_cb)(const char *project, int64_t since_ns, void *userdata);
int pw_store_list_trusted(pw_store_reader *r, pw_store_trusted_cb cb, void *userdata);

/* Calls CB with the project-relative path of each plan of PROJECT recorded approved, by path
 * (state.h "Plans"; what a view freezes). A database from before plans holds none. CB
 * returning non-zero stops the walk (a negative value is returned). Returns 0 or -errno. */
typedef int (*pw_store_path_cb)(const char *path, void *userdata);
int pw_store_approved_plans(pw_store_reader *r, const char *project, pw_store_path_cb cb,
			    void *userdata);

/* ---- the audit log (audit.c writes it) ------------------------------------------------- */

/* One audit row. Strings are NULL when not recorded; they live until the callback returns. */
typedef struct pw_audit_row {
	int64_t id, time_ns, generation, rule_line, pid, uid, count, first_ns, last_ns;
	int err; /* 0: an allowed mutation */
	const char *project, *mountpoint, *mode, *op, *path, *path2, *reason, *rule_kind,
	    *rule_pattern, *rule_file, *comm;
	const char *thread; /* the asking thread's name beside its program (comm), or NULL:
			     * the program's main thread, or a row older than schema 7 */
} pw_audit_row;

/* Which rows. Every member set narrows the query; a zeroed filter (after_id -1) is "all". */
typedef struct pw_audit_filter {
	bool denied;		  /* only refusals (errno != 0) */
	const char *mode;	  /* only in this mode */
	const pw_glob *path_glob; /* path or path2 matches (pw_glob_match_tree) */
	const char *path_eq;	  /* path or path2 equals */
	bool has_pid;
	int64_t pid;
	bool has_since;
	int64_t since_ns; /* last occurrence at or after */
	const char *project;
	int64_t after_id; /* >= 0: rows with a larger id, oldest first; < 0: newest first */
} pw_audit_filter;

/* Calls CB for each row passing F, in F's order, until CB returns non-zero (a negative
 * value is returned, a positive one stops with 0). Returns 0 or -errno (-E2BIG: a filter
 * the query cannot hold). */
typedef int (*pw_audit_row_cb)(const pw_audit_row *row, void *userdata);
int pw_store_audit_query(pw_store_reader *r, const pw_audit_filter *f, pw_audit_row_cb cb,
			 void *userdata);

/* The largest audit id so far (0 when empty), where a follower starts. */
int pw_store_audit_max_id(pw_store_reader *r, int64_t *ret_id);
