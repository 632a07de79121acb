/* SPDX-License-Identifier: MIT */
/*
 * The store's read API (reader.h): read-only queries on the tables state.c and audit.c
 * write. The schema is db.c's; a column added there is read here.
 */
#include "reader.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "state.h"
#include "util.h"

struct pw_store_reader {
	sqlite3 *db; /* first: pw_db_handle_open */
};

int pw_store_open_readonly(const char *path, pw_store_reader **ret)
{
	return pw_db_handle_open(path, 0, PW_DB_READONLY, sizeof(pw_store_reader), (void **)ret,
				 NULL);
}

void pw_store_reader_close(pw_store_reader *r)
{
	pw_db_handle_free(r);
}

void pw_store_reader_closep(pw_store_reader **r)
{
	pw_store_reader_close(*r);
}

const char *pw_store_reader_error(const pw_store_reader *r)
{
	return r && r->db ? sqlite3_errmsg(r->db) : "";
}

/* ---- projects ------------------------------------------------------------------------- */

int pw_store_is_trusted(pw_store_reader *r, const char *project)
{
	return pw_state_db_is_trusted(r->db, project);
}

int pw_store_last_mode(pw_store_reader *r, const char *project, char **ret_mode)
{
	return pw_state_db_last_mode(r->db, project, ret_mode);
}

/* The row's path, never NULL. */
static const char *path_of(sqlite3_stmt *st)
{
	const char *path = (const char *)sqlite3_column_text(st, 0);
	return path ? path : "";
}

/* A walk over rows (pw_db_each): the caller's callback of the one kind it is, and its data. */
typedef struct walk {
	pw_store_trusted_cb trusted;
	pw_store_path_cb path;
	pw_audit_row_cb audit;
	const pw_audit_filter *f;
	void *userdata;
} walk;

static int trusted_row(sqlite3_stmt *st, void *u)
{
	walk *w = u;
	return w->trusted(path_of(st), sqlite3_column_int64(st, 1), w->userdata);
}

int pw_store_list_trusted(pw_store_reader *r, pw_store_trusted_cb cb, void *userdata)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	walk w = {.trusted = cb, .userdata = userdata};
	int k = pw_db_prepare(
	    r->db, "SELECT path, trusted_ns FROM projects WHERE trusted != 0 ORDER BY path", &st);
	return k < 0 ? k : pw_db_each(st, trusted_row, &w);
}

/* ---- plans ---------------------------------------------------------------------------- */

static int path_row(sqlite3_stmt *st, void *u)
{
	walk *w = u;
	return w->path(path_of(st), w->userdata);
}

int pw_store_approved_plans(pw_store_reader *r, const char *project, pw_store_path_cb cb,
			    void *userdata)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	walk w = {.path = cb, .userdata = userdata};
	int k = pw_db_has_table(r->db, "plans");

	if (k <= 0)
		return k; /* a database no daemon has brought to plans: nothing approved */
	k = pw_db_prepare_text(r->db,
			       "SELECT path FROM plans WHERE project = ?1 AND status = 'approved' "
			       "ORDER BY path",
			       project, &st);
	return k < 0 ? k : pw_db_each(st, path_row, &w);
}

/* ---- the audit log -------------------------------------------------------------------- */

/* The columns of a row, THREAD last: "thread", or "NULL" for a database no daemon has
 * brought to schema 7 yet (read-only here: never migrated). */
#define ROW_COLUMNS(THREAD)                                                                        \
	"id, time_ns, project, mountpoint, mode, generation, op, path, path2, errno, reason, "     \
	"rule_kind, rule_pattern, rule_file, rule_line, pid, uid, comm, count, first_ns, "         \
	"last_ns, " THREAD

static const char *col_text(sqlite3_stmt *st, int col)
{
	return (const char *)sqlite3_column_text(st, col);
}

static void row_read(sqlite3_stmt *st, pw_audit_row *r)
{
	*r = (pw_audit_row){
	    .id = sqlite3_column_int64(st, 0),
	    .time_ns = sqlite3_column_int64(st, 1),
	    .project = col_text(st, 2),
	    .mountpoint = col_text(st, 3),
	    .mode = col_text(st, 4),
	    .generation = sqlite3_column_int64(st, 5),
	    .op = col_text(st, 6),
	    .path = col_text(st, 7),
	    .path2 = col_text(st, 8),
	    .err = sqlite3_column_int(st, 9),
	    .reason = col_text(st, 10),
	    .rule_kind = col_text(st, 11),
	    .rule_pattern = col_text(st, 12),
	    .rule_file = col_text(st, 13),
	    .rule_line = sqlite3_column_int64(st, 14),
	    .pid = sqlite3_column_int64(st, 15),
	    .uid = sqlite3_column_int64(st, 16),
	    .comm = col_text(st, 17),
	    .count = sqlite3_column_int64(st, 18),
	    .first_ns = sqlite3_column_int64(st, 19),
	    .last_ns = sqlite3_column_int64(st, 20),
	    .thread = col_text(st, 21),
	};
}

/* The SELECT for F: SQL narrows what it can, the glob is matched in C (SQL has no
 * gitignore globs). */
static int build_query(sqlite3 *db, const pw_audit_filter *f, bool has_thread, sqlite3_stmt **ret)
{
	char sql[1024];
	int n = snprintf(sql, sizeof(sql), "SELECT %s FROM audit WHERE 1",
			 has_thread ? ROW_COLUMNS("thread") : ROW_COLUMNS("NULL"));

	/* The clauses F asks for, in this order; ?N is bound below. */
	const struct {
		bool on;
		const char *sql;
	} clauses[] = {
	    {f->denied, " AND errno != 0"},
	    {f->mode, " AND mode = ?1"},
	    {f->path_eq, " AND (path = ?2 OR path2 = ?2)"},
	    {f->has_pid, " AND pid = ?3"},
	    {f->has_since, " AND last_ns >= ?4"},
	    {f->project, " AND project = ?5"},
	    {f->after_id >= 0, " AND id > ?6 ORDER BY id"},
	    {f->after_id < 0, " ORDER BY time_ns DESC, id DESC"},
	};
	for (size_t i = 0; i < ELEMENTSOF(clauses) && n < (int)sizeof(sql); i++)
		if (clauses[i].on)
			n += snprintf(sql + n, sizeof(sql) - n, "%s", clauses[i].sql);
	if (n >= (int)sizeof(sql))
		return -E2BIG;

	sqlite3_stmt *st = NULL;
	int r = pw_db_prepare(db, sql, &st);
	if (r < 0)
		return r;
	if (f->mode)
		sqlite3_bind_text(st, 1, f->mode, -1, SQLITE_STATIC);
	if (f->path_eq)
		sqlite3_bind_text(st, 2, f->path_eq, -1, SQLITE_STATIC);
	if (f->has_pid)
		sqlite3_bind_int64(st, 3, f->pid);
	if (f->has_since)
		sqlite3_bind_int64(st, 4, f->since_ns);
	if (f->project)
		sqlite3_bind_text(st, 5, f->project, -1, SQLITE_STATIC);
	if (f->after_id >= 0)
		sqlite3_bind_int64(st, 6, f->after_id);
	*ret = st;
	return 0;
}

static bool row_passes(const pw_audit_filter *f, const pw_audit_row *r)
{
	if (!f->path_glob)
		return true;
	return (r->path && pw_glob_match_tree(f->path_glob, r->path, false)) ||
	       (r->path2 && pw_glob_match_tree(f->path_glob, r->path2, false));
}

static int audit_row(sqlite3_stmt *st, void *u)
{
	walk *w = u;
	pw_audit_row row;
	row_read(st, &row);
	return row_passes(w->f, &row) ? w->audit(&row, w->userdata) : 0;
}

int pw_store_audit_query(pw_store_reader *r, const pw_audit_filter *f, pw_audit_row_cb cb,
			 void *userdata)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	walk w = {.audit = cb, .f = f, .userdata = userdata};
	int k = build_query(r->db, f, true, &st);
	if (k == -E2BIG)
		return k;
	if (k < 0) /* no thread column yet (schema 6 and older) */
		k = build_query(r->db, f, false, &st);
	return k < 0 ? k : pw_db_each(st, audit_row, &w);
}

int pw_store_audit_max_id(pw_store_reader *r, int64_t *ret_id)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int k = pw_db_prepare(r->db, "SELECT coalesce(max(id), 0) FROM audit", &st);
	if (k >= 0)
		k = pw_db_step_row(st);
	if (k <= 0)
		return k < 0 ? k : -EIO;
	*ret_id = sqlite3_column_int64(st, 0);
	return 0;
}
