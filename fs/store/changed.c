/* SPDX-License-Identifier: MIT */
/*
 * The other views' changes (changed.h has the contract): four statements prepared once on
 * a read-only connection, their project bound once.
 */
#include "changed.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"

struct pw_store_changed {
	sqlite3 *db;
	char *project, *mountpoint; /* bound to the statements (SQLITE_STATIC) */
	sqlite3_stmt *sets, *rows;
	sqlite3_stmt *events, *set_at; /* the overlaps the audit log recorded (history) */
};

static const char sets_sql[] =
    "SELECT mountpoint, max(id) FROM orig_changesets WHERE project = ?1 AND "
    "mountpoint IS NOT NULL AND mountpoint <> ?2 GROUP BY mountpoint";
static const char rows_sql[] =
    "SELECT id, path, path2 FROM orig_rows WHERE changeset = ?1 AND id > ?2 AND "
    "implicit = 0 ORDER BY id";
/* what the overlaps reported left in the audit log (fs/overlap.c's report, any view's) */
static const char events_sql[] =
    "SELECT time_ns, mountpoint, path, path2 FROM audit WHERE project = ?1 AND "
    "reason = 'overlap' AND time_ns >= ?2 AND time_ns < ?3 ORDER BY id";
static const char set_at_sql[] =
    "SELECT max(id) FROM orig_changesets WHERE project = ?1 AND mountpoint = ?2 AND "
    "started_ns <= ?3";

void pw_store_changed_free(pw_store_changed *c)
{
	if (!c)
		return;
	sqlite3_finalize(c->sets);
	sqlite3_finalize(c->rows);
	sqlite3_finalize(c->events);
	sqlite3_finalize(c->set_at);
	if (c->db)
		sqlite3_close(c->db);
	free(c->project);
	free(c->mountpoint);
	free(c);
}

static int prepare(pw_store_changed *c)
{
	if (sqlite3_prepare_v2(c->db, sets_sql, -1, &c->sets, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(c->db, rows_sql, -1, &c->rows, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(c->db, events_sql, -1, &c->events, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(c->db, set_at_sql, -1, &c->set_at, NULL) != SQLITE_OK)
		return -EPROTO;
	sqlite3_bind_text(c->sets, 1, c->project, -1, SQLITE_STATIC);
	sqlite3_bind_text(c->sets, 2, c->mountpoint, -1, SQLITE_STATIC);
	sqlite3_bind_text(c->events, 1, c->project, -1, SQLITE_STATIC);
	sqlite3_bind_text(c->set_at, 1, c->project, -1, SQLITE_STATIC);
	return 0;
}

int pw_store_changed_open(const char *db_path, const char *project, const char *mountpoint,
			  pw_store_changed **ret)
{
	pw_store_changed *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->project = strdup(project);
	c->mountpoint = strdup(mountpoint);
	int r = c->project && c->mountpoint ? 0 : -ENOMEM;
	if (r == 0)
		r = pw_db_open_readonly(db_path, &c->db);
	if (r == 0)
		r = prepare(c);
	if (r < 0) {
		pw_store_changed_free(c);
		return r;
	}
	*ret = c;
	return 0;
}

void pw_store_changed_sets(pw_store_changed *c,
			   void (*fn)(const char *mountpoint, int64_t changeset, void *u), void *u)
{
	sqlite3_reset(c->sets);
	while (sqlite3_step(c->sets) == SQLITE_ROW)
		fn((const char *)sqlite3_column_text(c->sets, 0), sqlite3_column_int64(c->sets, 1),
		   u);
	sqlite3_reset(c->sets);
}

void pw_store_changed_rows(pw_store_changed *c, int64_t changeset, int64_t after_id,
			   void (*fn)(int64_t id, const char *path, const char *path2, void *u),
			   void *u)
{
	sqlite3_reset(c->rows);
	sqlite3_bind_int64(c->rows, 1, changeset);
	sqlite3_bind_int64(c->rows, 2, after_id);
	while (sqlite3_step(c->rows) == SQLITE_ROW)
		fn(sqlite3_column_int64(c->rows, 0), (const char *)sqlite3_column_text(c->rows, 1),
		   (const char *)sqlite3_column_text(c->rows, 2), u);
	sqlite3_reset(c->rows);
}

void pw_store_changed_overlaps(pw_store_changed *c, int64_t from_ns, int64_t to_ns,
			       void (*fn)(int64_t time_ns, const char *writer, const char *path,
					  const char *first, void *u),
			       void *u)
{
	sqlite3_reset(c->events);
	sqlite3_bind_int64(c->events, 2, from_ns);
	sqlite3_bind_int64(c->events, 3, to_ns);
	while (sqlite3_step(c->events) == SQLITE_ROW)
		fn(sqlite3_column_int64(c->events, 0),
		   (const char *)sqlite3_column_text(c->events, 1),
		   (const char *)sqlite3_column_text(c->events, 2),
		   (const char *)sqlite3_column_text(c->events, 3), u);
	sqlite3_reset(c->events);
}

int64_t pw_store_changed_set_at(pw_store_changed *c, const char *mountpoint, int64_t t)
{
	int64_t cs = 0;
	sqlite3_reset(c->set_at);
	sqlite3_bind_text(c->set_at, 2, mountpoint, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(c->set_at, 3, t);
	if (sqlite3_step(c->set_at) == SQLITE_ROW)
		cs = sqlite3_column_int64(c->set_at, 0);
	sqlite3_reset(c->set_at);
	return cs;
}
