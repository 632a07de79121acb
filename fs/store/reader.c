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
#include "util.h"

struct pw_store_reader {
	sqlite3 *db;
};

int pw_store_open_readonly(const char *path, pw_store_reader **ret)
{
	_cleanup_(pw_db_closep) sqlite3 *db = NULL;
	int r = pw_db_open_readonly(path, &db);
	if (r < 0)
		return r;
	pw_store_reader *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->db = TAKE_PTR(db);
	*ret = s;
	return 0;
}

void pw_store_reader_close(pw_store_reader *r)
{
	if (!r)
		return;
	sqlite3_close_v2(r->db);
	free(r);
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
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(r->db, "SELECT trusted FROM projects WHERE path = ?1", -1, &st,
				    NULL);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW)
		return pw_db_errno(rc);
	return sqlite3_column_int(st, 0) != 0;
}

int pw_store_last_mode(pw_store_reader *r, const char *project, char **ret_mode)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(r->db, "SELECT last_mode FROM projects WHERE path = ?1", -1,
				    &st, NULL);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return -ENOENT;
	if (rc != SQLITE_ROW)
		return pw_db_errno(rc);
	const char *m = (const char *)sqlite3_column_text(st, 0);
	if (!m)
		return -ENOENT;
	char *copy = strdup(m);
	if (!copy)
		return -ENOMEM;
	*ret_mode = copy;
	return 0;
}

int pw_store_list_trusted(pw_store_reader *r, pw_store_trusted_cb cb, void *userdata)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(
	    r->db, "SELECT path, trusted_ns FROM projects WHERE trusted != 0 ORDER BY path", -1,
	    &st, NULL);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *path = (const char *)sqlite3_column_text(st, 0);
		int k = cb(path ? path : "", sqlite3_column_int64(st, 1), userdata);
		if (k != 0)
			return k < 0 ? k : 0;
	}
	return rc == SQLITE_DONE ? 0 : pw_db_errno(rc);
}

/* ---- plans ---------------------------------------------------------------------------- */

/* Does the database hold table NAME? 1, 0, or -errno. */
static int has_table(pw_store_reader *r, const char *name)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(
	    r->db, "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		return 1;
	return rc == SQLITE_DONE ? 0 : pw_db_errno(rc);
}

int pw_store_approved_plans(pw_store_reader *r, const char *project, pw_store_path_cb cb,
			    void *userdata)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int rc = has_table(r, "plans");

	if (rc <= 0)
		return rc; /* a database no daemon has brought to plans: nothing approved */
	rc = sqlite3_prepare_v2(r->db,
				"SELECT path FROM plans WHERE project = ?1 AND status = 'approved' "
				"ORDER BY path",
				-1, &st, NULL);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *path = (const char *)sqlite3_column_text(st, 0);
		int k = cb(path ? path : "", userdata);
		if (k != 0)
			return k < 0 ? k : 0;
	}
	return rc == SQLITE_DONE ? 0 : pw_db_errno(rc);
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

	if (f->denied)
		n += snprintf(sql + n, sizeof(sql) - n, " AND errno != 0");
	if (f->mode)
		n += snprintf(sql + n, sizeof(sql) - n, " AND mode = ?1");
	if (f->path_eq)
		n += snprintf(sql + n, sizeof(sql) - n, " AND (path = ?2 OR path2 = ?2)");
	if (f->has_pid)
		n += snprintf(sql + n, sizeof(sql) - n, " AND pid = ?3");
	if (f->has_since)
		n += snprintf(sql + n, sizeof(sql) - n, " AND last_ns >= ?4");
	if (f->project)
		n += snprintf(sql + n, sizeof(sql) - n, " AND project = ?5");
	if (f->after_id >= 0)
		n += snprintf(sql + n, sizeof(sql) - n, " AND id > ?6 ORDER BY id");
	else
		n += snprintf(sql + n, sizeof(sql) - n, " ORDER BY time_ns DESC, id DESC");
	if (n >= (int)sizeof(sql))
		return -E2BIG;

	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
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

int pw_store_audit_query(pw_store_reader *r, const pw_audit_filter *f, pw_audit_row_cb cb,
			 void *userdata)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int rc, k = build_query(r->db, f, true, &st);
	if (k == -E2BIG)
		return k;
	if (k < 0) /* no thread column yet (schema 6 and older) */
		k = build_query(r->db, f, false, &st);
	if (k < 0)
		return k;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		pw_audit_row row;
		row_read(st, &row);
		if (!row_passes(f, &row))
			continue;
		k = cb(&row, userdata);
		if (k != 0)
			return k < 0 ? k : 0;
	}
	return rc == SQLITE_DONE ? 0 : pw_db_errno(rc);
}

int pw_store_audit_max_id(pw_store_reader *r, int64_t *ret_id)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(r->db, "SELECT coalesce(max(id), 0) FROM audit", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW)
		return pw_db_errno(rc);
	*ret_id = sqlite3_column_int64(st, 0);
	return 0;
}
