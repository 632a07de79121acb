/* SPDX-License-Identifier: MIT */
/*
 * The SQL of the store of originals (orig_sql.h has the contract).
 */
#include "orig_sql.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "util.h"

struct pw_store_orig {
	sqlite3 *db; /* first: pw_db_handle_open */
	sqlite3_stmt
	    *insert; /* pw_store_orig_row_add's, prepared once: one runs per first change */
};

int pw_store_orig_open(const char *path, int busy_ms, pw_store_orig **ret)
{
	return pw_db_handle_open(path, busy_ms, 0, sizeof(pw_store_orig), (void **)ret, NULL);
}

void pw_store_orig_close(pw_store_orig *q)
{
	if (!q)
		return;
	sqlite3_finalize(q->insert);
	pw_db_handle_free(q);
}

/* ---- transactions ---- */

static int exec(pw_store_orig *q, const char *sql)
{
	return pw_db_errno(sqlite3_exec(q->db, sql, NULL, NULL, NULL));
}

int pw_store_orig_begin(pw_store_orig *q)
{
	return exec(q, "BEGIN IMMEDIATE");
}

int pw_store_orig_commit(pw_store_orig *q)
{
	return exec(q, "COMMIT");
}

void pw_store_orig_rollback(pw_store_orig *q)
{
	if (!sqlite3_get_autocommit(q->db))
		(void)exec(q, "ROLLBACK");
}

bool pw_store_orig_in_txn(pw_store_orig *q)
{
	return !sqlite3_get_autocommit(q->db);
}

int pw_store_orig_savepoint(pw_store_orig *q)
{
	return pw_db_exec(q->db, "SAVEPOINT one_row");
}

int pw_store_orig_savepoint_undo(pw_store_orig *q)
{
	int r = pw_db_exec(q->db, "ROLLBACK TO one_row");
	return r < 0 ? r : pw_db_exec(q->db, "RELEASE one_row");
}

/* ---- the journals' marks ---- */

int pw_store_orig_journal_mark(pw_store_orig *q, const char *name, uint64_t seq)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = pw_db_prepare_text(q->db,
				   "INSERT INTO orig_journals(name, seq) VALUES (?1, ?2) "
				   "ON CONFLICT(name) DO UPDATE SET seq = excluded.seq",
				   name, &st);
	if (r < 0)
		return r;
	sqlite3_bind_int64(st, 2, (sqlite3_int64)seq);
	return pw_db_step_done(st);
}

uint64_t pw_store_orig_journal_seq(pw_store_orig *q, const char *name)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	if (pw_db_prepare_text(q->db, "SELECT seq FROM orig_journals WHERE name = ?1", name, &st) <
	    0)
		return 0;
	return pw_db_step_row(st) > 0 ? (uint64_t)sqlite3_column_int64(st, 0) : 0;
}

void pw_store_orig_journal_forget(pw_store_orig *q, bool (*gone)(const char *name, void *u),
				  void *u)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL, *del = NULL;
	if (pw_db_prepare(q->db, "SELECT name FROM orig_journals", &st) < 0 ||
	    pw_db_prepare(q->db, "DELETE FROM orig_journals WHERE name = ?1", &del) < 0)
		return;
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		if (!name || !gone(name, u))
			continue;
		sqlite3_bind_text(del, 1, name, -1, SQLITE_TRANSIENT);
		(void)sqlite3_step(del);
		sqlite3_reset(del);
	}
}

/* ---- blobs ---- */

int pw_store_orig_blob_add(pw_store_orig *q, const char *hex, uint64_t size)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	if (pw_db_prepare_text(q->db,
			       "INSERT OR IGNORE INTO orig_blobs(hash, size) VALUES (?1, ?2)", hex,
			       &st) < 0)
		return -EIO;
	sqlite3_bind_int64(st, 2, (sqlite3_int64)size);
	return pw_db_step_done(st) < 0 ? -EIO : 0;
}

/* Steps SQL with HASH bound to ?1 once: 1 at a row, 0 when done (the end, or a statement
 * that returns no rows), or -errno. */
static int probe(pw_store_orig *q, const char *sql, const char *hash)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = pw_db_prepare_text(q->db, sql, hash, &st);
	return r < 0 ? r : pw_db_step_row(st);
}

bool pw_store_orig_blob_recorded(pw_store_orig *q, const char *hash)
{
	return probe(q, "SELECT 1 FROM orig_blobs WHERE hash = ?1", hash) == 1;
}

bool pw_store_orig_blob_unrecorded(pw_store_orig *q, const char *hash)
{
	return probe(q, "SELECT 1 FROM orig_blobs WHERE hash = ?1", hash) == 0;
}

bool pw_store_orig_blob_unreferenced(pw_store_orig *q, const char *hash)
{
	return probe(q, "SELECT 1 FROM orig_rows WHERE blob = ?1 LIMIT 1", hash) == 0;
}

bool pw_store_orig_blob_forget(pw_store_orig *q, const char *hash)
{
	return probe(q, "DELETE FROM orig_blobs WHERE hash = ?1", hash) == 0;
}

/* The one integer SQL answers with, or FAILED. */
static uint64_t one_u64(pw_store_orig *q, const char *sql, uint64_t failed)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	if (pw_db_prepare(q->db, sql, &st) < 0 || pw_db_step_row(st) <= 0)
		return failed;
	return (uint64_t)sqlite3_column_int64(st, 0);
}

uint64_t pw_store_orig_blob_bytes(pw_store_orig *q)
{
	return one_u64(q, "SELECT coalesce(sum(size), 0) FROM orig_blobs", UINT64_MAX);
}

uint64_t pw_store_orig_referenced_bytes(pw_store_orig *q)
{
	return one_u64(q,
		       "SELECT coalesce(sum(size), 0) FROM orig_blobs WHERE hash IN "
		       "(SELECT blob FROM orig_rows WHERE blob IS NOT NULL)",
		       0);
}

int pw_store_orig_total(pw_store_orig *q, uint64_t *ret_bytes, uint64_t *ret_blobs)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r =
	    pw_db_prepare(q->db, "SELECT coalesce(sum(size), 0), count(*) FROM orig_blobs", &st);
	if (r >= 0)
		r = pw_db_step_row(st);
	if (r <= 0)
		return r < 0 ? r : -EIO;
	*ret_bytes = (uint64_t)sqlite3_column_int64(st, 0);
	if (ret_blobs)
		*ret_blobs = (uint64_t)sqlite3_column_int64(st, 1);
	return 0;
}

void pw_store_orig_unreferenced(pw_store_orig *q,
				void (*fn)(const char *hash, uint64_t size, void *u), void *u)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	if (pw_db_prepare(q->db,
			  "SELECT hash, size FROM orig_blobs WHERE hash NOT IN "
			  "(SELECT blob FROM orig_rows WHERE blob IS NOT NULL)",
			  &st) < 0)
		return;
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *hash = (const char *)sqlite3_column_text(st, 0);
		if (hash)
			fn(hash, (uint64_t)sqlite3_column_int64(st, 1), u);
	}
}

void pw_store_orig_forget_unreferenced(pw_store_orig *q)
{
	(void)pw_db_exec(q->db, "DELETE FROM orig_blobs WHERE hash NOT IN "
				"(SELECT blob FROM orig_rows WHERE blob IS NOT NULL)");
}

/* ---- rows ---- */

static const char insert_sql[] =
    "INSERT INTO orig_rows(changeset, action, path, path2, exchange, implicit, "
    "src_dev, src_ino, present, mode, uid, gid, atime_ns, mtime_ns, ctime_ns, "
    "size, "
    "dev, ino, nlink, blob, target, xattrs, not_kept, op, pid, comm, mode_name, "
    "time_ns, thread, id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
    "?12, "
    "?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, "
    "?28, ?30, "
    /* NULL (SQLite's next) but above ?29, the floor a lost batch left (the store's
     * batch_lost): its ids are never given again by this store. In the statement, so no
     * other daemon's insert can come between the look and the insert. */
    "CASE WHEN ?29 IS NOT NULL AND "
    "(SELECT coalesce(max(id), 0) FROM orig_rows) < ?29 THEN ?29 + 1 END)";

static void bind_object(sqlite3_stmt *st, const pw_undo_orig_object *o)
{
	sqlite3_bind_int64(st, 10, o->mode);
	sqlite3_bind_int64(st, 11, o->uid);
	sqlite3_bind_int64(st, 12, o->gid);
	sqlite3_bind_int64(st, 13, o->atime_ns);
	sqlite3_bind_int64(st, 14, o->mtime_ns);
	sqlite3_bind_int64(st, 15, o->ctime_ns);
	sqlite3_bind_int64(st, 16, (sqlite3_int64)o->size);
	sqlite3_bind_int64(st, 17, (sqlite3_int64)o->dev);
	sqlite3_bind_int64(st, 18, (sqlite3_int64)o->ino);
	sqlite3_bind_int64(st, 19, (sqlite3_int64)o->nlink);
	if (o->blob[0])
		sqlite3_bind_text(st, 20, o->blob, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 21, o->target, -1, SQLITE_STATIC);
	if (o->xattrs_len)
		sqlite3_bind_blob(st, 22, o->xattrs, (int)o->xattrs_len, SQLITE_STATIC);
	sqlite3_bind_text(st, 23, o->not_kept, -1, SQLITE_STATIC);
}

int pw_store_orig_row_add(pw_store_orig *q, const pw_undo_orig_row *row, int64_t time_ns,
			  int64_t id_floor, int64_t *ret_id)
{
	const pw_undo_orig_object *o = row->obj;
	int rc =
	    q->insert ? SQLITE_OK : sqlite3_prepare_v2(q->db, insert_sql, -1, &q->insert, NULL);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	sqlite3_stmt *st = q->insert;
	if (id_floor)
		sqlite3_bind_int64(st, 29, id_floor);
	sqlite3_bind_int64(st, 1, row->changeset);
	sqlite3_bind_text(st, 2, row->action == PW_UNDO_ORIG_MOVE ? "move" : "keep", -1,
			  SQLITE_STATIC);
	sqlite3_bind_text(st, 3, row->path, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, row->path2, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 5, row->exchange);
	sqlite3_bind_int(st, 6, row->implicit);
	sqlite3_bind_int64(st, 7, (sqlite3_int64)row->src_dev);
	sqlite3_bind_int64(st, 8, (sqlite3_int64)row->src_ino);
	sqlite3_bind_int(st, 9, o && o->present);
	if (o && o->present)
		bind_object(st, o);
	sqlite3_bind_text(st, 24, row->op, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 25, row->pid);
	sqlite3_bind_text(st, 26, row->comm, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 27, row->mode, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 28, time_ns ? time_ns : pw_db_now_ns());
	sqlite3_bind_text(st, 30, row->thread, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	/* The bound strings are the caller's: let go of them, ready for the next row. */
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE)
		return pw_db_errno(rc);
	*ret_id = sqlite3_last_insert_rowid(q->db);
	return 0;
}

int pw_store_orig_row_set_content(pw_store_orig *q, int64_t id, const pw_undo_orig_object *o)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = pw_db_prepare_text(q->db,
				   "UPDATE orig_rows SET blob = ?1, not_kept = ?2, size = ?3 "
				   "WHERE id = ?4",
				   o->blob[0] ? o->blob : NULL, &st);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 2, o->not_kept, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)o->size);
	sqlite3_bind_int64(st, 4, id);
	r = pw_db_step_done(st);
	if (r < 0)
		return r;
	return sqlite3_changes(q->db) ? 0 : -ENOENT;
}

void pw_store_orig_row_blob(pw_store_orig *q, int64_t id, char hash[PW_SHA256_HEX])
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	hash[0] = '\0';
	if (pw_db_prepare(q->db, "SELECT blob FROM orig_rows WHERE id = ?1", &st) < 0)
		return;
	sqlite3_bind_int64(st, 1, id);
	if (pw_db_step_row(st) > 0 && sqlite3_column_text(st, 0))
		snprintf(hash, PW_SHA256_HEX, "%s", (const char *)sqlite3_column_text(st, 0));
}

bool pw_store_orig_row_delete(pw_store_orig *q, int64_t id)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	if (pw_db_prepare(q->db, "DELETE FROM orig_rows WHERE id = ?1", &st) < 0)
		return false;
	sqlite3_bind_int64(st, 1, id);
	(void)sqlite3_step(st);
	return true;
}

/* ---- change sets ---- */

int pw_store_orig_changeset_add(pw_store_orig *q, const char *project, const char *mountpoint,
				const char *reason, const char *name, const char *mode,
				int64_t *ret_id)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = pw_db_prepare_text(q->db,
				   "INSERT INTO orig_changesets(project, mountpoint, started_ns, "
				   "reason, name, mode) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
				   project, &st);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 2, mountpoint, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, pw_db_now_ns());
	sqlite3_bind_text(st, 4, reason, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 6, mode, -1, SQLITE_STATIC);
	r = pw_db_step_done(st);
	if (r < 0)
		return r;
	*ret_id = sqlite3_last_insert_rowid(q->db);
	return 0;
}

void pw_store_orig_changeset_drop_if_empty(pw_store_orig *q, int64_t id)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	if (pw_db_prepare(q->db,
			  "DELETE FROM orig_changesets WHERE id = ?1 AND name IS NULL AND "
			  "reason IN ('mount', 'switch') AND NOT EXISTS "
			  "(SELECT 1 FROM orig_rows WHERE changeset = ?1)",
			  &st) < 0)
		return;
	sqlite3_bind_int64(st, 1, id);
	(void)sqlite3_step(st);
}

int pw_store_orig_changeset_drop(pw_store_orig *q, int64_t id)
{
	char sql[160];
	snprintf(sql, sizeof(sql),
		 "DELETE FROM orig_rows WHERE changeset = %lld;"
		 "DELETE FROM orig_changesets WHERE id = %lld;",
		 (long long)id, (long long)id);
	return pw_db_exec(q->db, sql);
}

/* UPDATE orig_changesets SET a column (SQL) = the text or integer value WHERE id = ID. */
static int changeset_update(pw_store_orig *q, const char *sql, const char *text_v, int64_t int_v,
			    int64_t id)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = pw_db_prepare(q->db, sql, &st);
	if (r < 0)
		return r;
	if (text_v)
		sqlite3_bind_text(st, 1, text_v, -1, SQLITE_STATIC);
	else
		sqlite3_bind_int64(st, 1, int_v);
	sqlite3_bind_int64(st, 2, id);
	return pw_db_step_done(st);
}

int pw_store_orig_changeset_set_undoes(pw_store_orig *q, int64_t id, const char *undoes)
{
	return changeset_update(q, "UPDATE orig_changesets SET undoes = ?1 WHERE id = ?2", undoes,
				0, id);
}

int pw_store_orig_changeset_set_redone(pw_store_orig *q, int64_t id, int64_t by)
{
	return changeset_update(q, "UPDATE orig_changesets SET redone_by = ?1 WHERE id = ?2", NULL,
				by, id);
}

int64_t pw_store_orig_changeset_oldest(pw_store_orig *q, int64_t protect, int64_t *ret_started)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	if (pw_db_prepare(q->db,
			  "SELECT id, started_ns FROM orig_changesets WHERE id != ?1 "
			  "ORDER BY id LIMIT 1",
			  &st) < 0)
		return 0;
	sqlite3_bind_int64(st, 1, protect);
	if (pw_db_step_row(st) <= 0)
		return 0;
	*ret_started = sqlite3_column_int64(st, 1);
	return sqlite3_column_int64(st, 0);
}

/* ---- reading back ---- */

static const char *text(sqlite3_stmt *st, int i)
{
	return (const char *)sqlite3_column_text(st, i);
}

/* The walk of pw_store_orig_read_sets or _read_rows (pw_db_each): the caller's function of the
 * one kind it is, and its U. The function's positive answers go on. */
typedef struct walk {
	int (*set)(const pw_undo_orig_changeset *c, void *u);
	int (*rec)(const pw_undo_orig_rec *r, void *u);
	void *u;
} walk;

static int set_row(sqlite3_stmt *st, void *u)
{
	walk *w = u;
	pw_undo_orig_changeset c = {
	    .id = sqlite3_column_int64(st, 0),
	    .started_ns = sqlite3_column_int64(st, 1),
	    .reason = text(st, 2),
	    .name = text(st, 3),
	    .mode = text(st, 4),
	    .undoes = text(st, 5),
	    .redone_by = sqlite3_column_int64(st, 6),
	    .mountpoint = text(st, 7),
	};
	int r = w->set(&c, w->u);
	return r < 0 ? r : 0;
}

int pw_store_orig_read_sets(pw_store_orig *q, const char *project,
			    int (*fn)(const pw_undo_orig_changeset *c, void *u), void *u)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	walk w = {.set = fn, .u = u};
	int r = pw_db_prepare_text(q->db,
				   "SELECT id, started_ns, reason, name, mode, undoes, redone_by, "
				   "mountpoint FROM orig_changesets "
				   "WHERE project = ?1 ORDER BY id",
				   project, &st);
	return r < 0 ? r : pw_db_each(st, set_row, &w);
}

/* The object columns of a row read back (9 to 19 and 25 to 28 of read_rows' SELECT). */
static void read_object(sqlite3_stmt *st, pw_undo_orig_object *o)
{
	const char *blob = text(st, 16);
	o->present = sqlite3_column_int(st, 9);
	o->mode = (mode_t)sqlite3_column_int64(st, 10);
	o->uid = (uid_t)sqlite3_column_int64(st, 11);
	o->gid = (gid_t)sqlite3_column_int64(st, 12);
	o->atime_ns = sqlite3_column_int64(st, 13);
	o->mtime_ns = sqlite3_column_int64(st, 14);
	o->size = (uint64_t)sqlite3_column_int64(st, 15);
	snprintf(o->blob, sizeof(o->blob), "%s", blob ? blob : "");
	o->target = (char *)text(st, 17);
	int xl = sqlite3_column_bytes(st, 18);
	o->xattrs = xl > 0 ? (void *)sqlite3_column_blob(st, 18) : NULL;
	o->xattrs_len = o->xattrs ? (size_t)xl : 0;
	o->not_kept = text(st, 19);
	o->ctime_ns = sqlite3_column_int64(st, 25);
	o->ino = (uint64_t)sqlite3_column_int64(st, 26);
	o->dev = (uint64_t)sqlite3_column_int64(st, 27);
	o->nlink = (uint64_t)sqlite3_column_int64(st, 28);
}

static int rec_row(sqlite3_stmt *st, void *u)
{
	walk *w = u;
	const char *action = text(st, 2), *path = text(st, 3);
	pw_undo_orig_rec r = {
	    .id = sqlite3_column_int64(st, 0),
	    .changeset = sqlite3_column_int64(st, 1),
	    .action = action && streq(action, "move") ? PW_UNDO_ORIG_MOVE : PW_UNDO_ORIG_KEEP,
	    .path = path ? path : "",
	    .path2 = text(st, 4),
	    .exchange = sqlite3_column_int(st, 5),
	    .implicit = sqlite3_column_int(st, 6),
	    .src_dev = (uint64_t)sqlite3_column_int64(st, 7),
	    .src_ino = (uint64_t)sqlite3_column_int64(st, 8),
	    .op = text(st, 20),
	    .pid = sqlite3_column_int64(st, 21),
	    .comm = text(st, 22),
	    .thread = text(st, 29),
	    .mode_name = text(st, 23),
	    .time_ns = sqlite3_column_int64(st, 24),
	};
	read_object(st, &r.o);
	int e = w->rec(&r, w->u);
	return e < 0 ? e : 0;
}

int pw_store_orig_read_rows(pw_store_orig *q, const char *project,
			    int (*fn)(const pw_undo_orig_rec *r, void *u), void *u)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	walk w = {.rec = fn, .u = u};
	int r = pw_db_prepare_text(
	    q->db,
	    "SELECT r.id, r.changeset, r.action, r.path, r.path2, r.exchange, r.implicit, "
	    "r.src_dev, r.src_ino, r.present, r.mode, r.uid, r.gid, r.atime_ns, r.mtime_ns, "
	    "r.size, r.blob, r.target, r.xattrs, r.not_kept, r.op, r.pid, r.comm, "
	    "r.mode_name, r.time_ns, r.ctime_ns, r.ino, r.dev, r.nlink, r.thread FROM orig_rows "
	    "r JOIN "
	    "orig_changesets c ON c.id = r.changeset WHERE c.project = ?1 ORDER BY r.id",
	    project, &st);
	return r < 0 ? r : pw_db_each(st, rec_row, &w);
}
