/* SPDX-License-Identifier: MIT */
/*
 * Schema, migrations and the open/rebuild logic of the state database (see db.h).
 *
 * Why a rebuild rather than a failure: the database holds conveniences (last modes, trust,
 * history, the audit log). Losing them is a nuisance; refusing to mount a view because a
 * disk hiccup corrupted a log would turn a nuisance into an outage. The corrupt file is kept
 * next to the new one for inspection. Trust falls back to "not trusted", which is the safe
 * default.
 */
#include "db.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "util.h"

/* Migration N (1-based) brings user_version from N-1 to N. Never edit a released migration:
 * append a new one. */
static const char *const migrations[] = {
    /* 1: the full initial schema. */
    "CREATE TABLE meta ("
    "  key TEXT PRIMARY KEY NOT NULL,"
    "  value TEXT"
    ");"
    "CREATE TABLE projects ("
    "  path TEXT PRIMARY KEY NOT NULL," /* the project's real path */
    "  trusted INTEGER NOT NULL DEFAULT 0,"
    "  trusted_ns INTEGER," /* when trust last changed */
    "  last_mode TEXT,"
    "  updated_ns INTEGER NOT NULL"
    ");"
    "CREATE TABLE switches ("
    "  id INTEGER PRIMARY KEY,"
    "  time_ns INTEGER NOT NULL,"
    "  project TEXT NOT NULL,"
    "  mountpoint TEXT,"
    "  from_mode TEXT,"
    "  to_mode TEXT NOT NULL,"
    "  generation INTEGER NOT NULL DEFAULT 0,"
    "  pid INTEGER,"
    "  uid INTEGER,"
    "  comm TEXT,"
    "  origin TEXT"
    ");"
    "CREATE INDEX switches_by_project ON switches(project, time_ns);"
    "CREATE INDEX switches_by_time ON switches(time_ns);"
    "CREATE TABLE audit ("
    "  id INTEGER PRIMARY KEY,"
    "  time_ns INTEGER NOT NULL," /* first occurrence; equals first_ns */
    "  project TEXT NOT NULL,"
    "  mountpoint TEXT,"
    "  mode TEXT,"
    "  generation INTEGER NOT NULL DEFAULT 0,"
    "  op TEXT NOT NULL,"   /* pw_op_name() */
    "  path TEXT NOT NULL," /* project-relative */
    "  path2 TEXT,"
    "  errno INTEGER NOT NULL DEFAULT 0," /* 0: an allowed mutation */
    "  reason TEXT,"			  /* pw_reason_name() */
    "  rule_kind TEXT,"
    "  rule_pattern TEXT,"
    "  rule_file TEXT,"
    "  rule_line INTEGER,"
    "  pid INTEGER,"
    "  uid INTEGER,"
    "  comm TEXT,"
    "  count INTEGER NOT NULL DEFAULT 1,"
    "  first_ns INTEGER NOT NULL,"
    "  last_ns INTEGER NOT NULL"
    ");"
    "CREATE INDEX audit_by_time ON audit(time_ns);"
    "CREATE INDEX audit_by_path ON audit(path, time_ns);"
    "CREATE INDEX audit_by_pid ON audit(pid, time_ns);"
    "CREATE INDEX audit_by_mode ON audit(mode, time_ns);"
    "CREATE INDEX audit_by_project ON audit(project, time_ns);",
    /* 2: originals kept before the view's changes (fs/undo/originals.h). */
    "CREATE TABLE orig_changesets ("
    "  id INTEGER PRIMARY KEY,"
    "  project TEXT NOT NULL,"
    "  mountpoint TEXT,"
    "  started_ns INTEGER NOT NULL,"
    "  reason TEXT NOT NULL," /* mount, switch, checkpoint, undo */
    "  name TEXT,"	      /* a checkpoint's name */
    "  mode TEXT"
    ");"
    "CREATE INDEX orig_changesets_by_project ON orig_changesets(project, id);"
    "CREATE TABLE orig_rows ("
    "  id INTEGER PRIMARY KEY," /* the order of the changes */
    "  changeset INTEGER NOT NULL,"
    "  action TEXT NOT NULL," /* keep: PATH was this; move: PATH became PATH2 */
    "  path TEXT NOT NULL,"
    "  path2 TEXT,"
    "  exchange INTEGER NOT NULL DEFAULT 0,"
    "  implicit INTEGER NOT NULL DEFAULT 0," /* a parent directory, for its times */
    "  src_dev INTEGER, src_ino INTEGER,"
    "  present INTEGER NOT NULL,"
    "  mode INTEGER, uid INTEGER, gid INTEGER,"
    "  atime_ns INTEGER, mtime_ns INTEGER, ctime_ns INTEGER,"
    "  size INTEGER, dev INTEGER, ino INTEGER, nlink INTEGER,"
    "  blob TEXT," /* sha256 of the content kept in the store */
    "  target TEXT,"
    "  xattrs BLOB,"
    "  not_kept TEXT," /* too-big, unreadable */
    "  op TEXT, pid INTEGER, comm TEXT, mode_name TEXT,"
    "  time_ns INTEGER NOT NULL"
    ");"
    "CREATE INDEX orig_rows_by_changeset ON orig_rows(changeset, id);"
    "CREATE INDEX orig_rows_by_blob ON orig_rows(blob);"
    "CREATE TABLE orig_blobs ("
    "  hash TEXT PRIMARY KEY NOT NULL,"
    "  size INTEGER NOT NULL"
    ");",
    /* 3: a switch the agent asked for (origin "request"): its reason, who allowed it. */
    "ALTER TABLE switches ADD COLUMN reason TEXT;"
    "ALTER TABLE switches ADD COLUMN answered_by TEXT;",
    /* 4: how far each originals journal is in orig_rows (fs/undo/originals.c). */
    "CREATE TABLE orig_journals ("
    "  name TEXT PRIMARY KEY NOT NULL,"
    "  seq INTEGER NOT NULL"
    ");",
    /* 5: undo and redo (fs/undo/changes.c): the rows an undo change set put back, the redo
     * that reversed it; a change's thread name beside its program (comm). */
    "ALTER TABLE orig_changesets ADD COLUMN undoes TEXT;" /* JSON: [row id, ...] */
    "ALTER TABLE orig_changesets ADD COLUMN redone_by INTEGER;"
    "ALTER TABLE orig_rows ADD COLUMN thread TEXT;",
    /* 6: plans (state.h "Plans"): approval and its hash per plan file, and task progress,
     * which never lives in the frozen file. */
    "CREATE TABLE plans ("
    "  project TEXT NOT NULL,"
    "  path TEXT NOT NULL,"   /* project-relative: docs/plans/NAME.md */
    "  status TEXT NOT NULL," /* draft, approved */
    "  hash TEXT,"	      /* sha256 of the file as approved */
    "  approved_ns INTEGER,"
    "  approved_by TEXT,"
    "  updated_ns INTEGER NOT NULL,"
    "  PRIMARY KEY (project, path)"
    ");"
    "CREATE TABLE plan_tasks ("
    "  project TEXT NOT NULL,"
    "  path TEXT NOT NULL,"
    "  task INTEGER NOT NULL," /* 1-based, in the plan's order */
    "  text TEXT,"	       /* the task as it read when marked */
    "  done_ns INTEGER NOT NULL,"
    "  done_by TEXT,"	   /* "agent (pid 12, pi)" or "person (pid 9, piworkfs)" */
    "  changeset INTEGER," /* the change set of originals in force then */
    "  note TEXT,"
    "  PRIMARY KEY (project, path, task)"
    ");"
    "CREATE TABLE plan_changesets ("
    "  changeset INTEGER PRIMARY KEY," /* orig_changesets.id */
    "  project TEXT NOT NULL,"
    "  path TEXT NOT NULL,"   /* the active plan when the change set started */
    "  task INTEGER NOT NULL" /* its task in progress then */
    ");",
    /* 7: a denial's thread name beside its program (comm), as orig_rows.thread (5). */
    "ALTER TABLE audit ADD COLUMN thread TEXT;",
    /* 8: the switch history's other entries (state.h pw_switch_record): an agent's request
     * that ended without a switch (outcome, and how), a plan approved or reopened (plan),
     * and which process asked (asked_pid, asked_comm). */
    "ALTER TABLE switches ADD COLUMN outcome TEXT;"
    "ALTER TABLE switches ADD COLUMN plan TEXT;"
    "ALTER TABLE switches ADD COLUMN asked_pid INTEGER;"
    "ALTER TABLE switches ADD COLUMN asked_comm TEXT;"
    "ALTER TABLE switches ADD COLUMN how TEXT;",
};
_Static_assert(ELEMENTSOF(migrations) == PW_DB_SCHEMA_VERSION, "one migration per version");

int64_t pw_db_now_ns(void)
{
	return pw_clock_ns(CLOCK_REALTIME);
}

int pw_db_errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return 0;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_CANTOPEN:
		return -EACCES;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return -EBADMSG;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	case SQLITE_MISUSE:
	case SQLITE_RANGE:
		return -EINVAL;
	case SQLITE_TOOBIG:
		return -E2BIG;
	default:
		return -EIO;
	}
}

void pw_db_closep(sqlite3 **db)
{
	if (*db)
		sqlite3_close_v2(*db);
}

/* Internal: exec returning the raw SQLite code so callers can tell corruption apart. */
static int exec_rc(sqlite3 *db, const char *sql)
{
	return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

int pw_db_exec(sqlite3 *db, const char *sql)
{
	return pw_db_errno(exec_rc(db, sql));
}

int pw_db_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **ret)
{
	return pw_db_errno(sqlite3_prepare_v2(db, sql, -1, ret, NULL));
}

int pw_db_prepare_text(sqlite3 *db, const char *sql, const char *text, sqlite3_stmt **ret)
{
	int r = pw_db_prepare(db, sql, ret);
	if (r < 0)
		return r;
	sqlite3_bind_text(*ret, 1, text, -1, SQLITE_STATIC);
	return 0;
}

int pw_db_step_done(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	return rc == SQLITE_DONE ? 0 : pw_db_errno(rc);
}

int pw_db_step_row(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		return 1;
	return rc == SQLITE_DONE ? 0 : pw_db_errno(rc);
}

int pw_db_each(sqlite3_stmt *st, int (*fn)(sqlite3_stmt *st, void *u), void *u)
{
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int k = fn(st, u);
		if (k != 0)
			return k < 0 ? k : 0;
	}
	return rc == SQLITE_DONE ? 0 : pw_db_errno(rc);
}

char *pw_db_text_dup(sqlite3_stmt *st, int col)
{
	const char *t = (const char *)sqlite3_column_text(st, col);
	return t ? strdup(t) : NULL;
}

void pw_db_cols_free(void *v, size_t n, size_t size, const pw_db_col *cols, size_t n_cols)
{
	for (size_t i = 0; v && i < n; i++)
		for (size_t c = 0; c < n_cols; c++)
			if (cols[c].text)
				free(*(char **)((char *)v + i * size + cols[c].offset));
	free(v);
}

/* The row ST stands on into ELEM by COLS. 0, or -ENOMEM when a text was not copied. */
static int cols_read(sqlite3_stmt *st, char *elem, const pw_db_col *cols, size_t n_cols)
{
	int r = 0;

	for (size_t c = 0; c < n_cols; c++) {
		void *at = elem + cols[c].offset;
		if (!cols[c].text) {
			*(int64_t *)at = sqlite3_column_int64(st, (int)c);
			continue;
		}
		char *t = pw_db_text_dup(st, (int)c);
		if (!t && sqlite3_column_type(st, (int)c) != SQLITE_NULL)
			r = -ENOMEM;
		*(char **)at = t;
	}
	return r;
}

int pw_db_rows_read(sqlite3_stmt *st, pw_db_rows *rows)
{
	int rc = SQLITE_DONE;
	while ((rows->limit == 0 || rows->n < rows->limit) &&
	       (rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (pw_grow(&rows->v, &rows->cap, rows->n, rows->size, 16) < 0)
			return -ENOMEM;
		char *elem = (char *)rows->v + rows->n++ * rows->size;
		memset(elem, 0, rows->size);
		int r = cols_read(st, elem, rows->cols, rows->n_cols);
		if (r < 0)
			return r;
	}
	if (rows->limit && rows->n >= rows->limit)
		return 0;
	return rc == SQLITE_DONE ? 0 : pw_db_errno(rc);
}

int64_t pw_db_delete_once(sqlite3 *db, const char *sql, int64_t arg, int64_t chunk)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = pw_db_prepare(db, sql, &st);
	if (r < 0)
		return r;
	sqlite3_bind_int64(st, 1, arg);
	sqlite3_bind_int64(st, 2, chunk);
	r = pw_db_step_done(st);
	return r < 0 ? r : sqlite3_changes(db);
}

int64_t pw_db_delete_chunks(sqlite3 *db, const char *sql, int64_t arg, int64_t chunk)
{
	int64_t total = 0;

	for (;;) {
		int64_t d = pw_db_delete_once(db, sql, arg, chunk);
		if (d < 0)
			return d;
		total += d;
		if (d < chunk)
			return total;
	}
}

static void set_busy_wait(sqlite3 *db, int busy_ms); /* below, with the contention hook */

int pw_db_handle_open(const char *path, int busy_ms, unsigned flags, size_t size, void **ret,
		      char **ret_warning)
{
	_cleanup_(pw_db_closep) sqlite3 *db = NULL;
	int r = flags & PW_DB_READONLY ? pw_db_open_readonly(path, &db)
				       : pw_db_open(path, busy_ms, flags, &db, ret_warning);
	if (r < 0)
		return r;
	if (flags & PW_DB_READONLY && busy_ms > 0)
		set_busy_wait(db, busy_ms);
	sqlite3 **h = calloc(1, size);
	if (!h)
		return -ENOMEM;
	*h = TAKE_PTR(db);
	*ret = h;
	return 0;
}

void pw_db_handle_free(void *h)
{
	if (!h)
		return;
	sqlite3_close_v2(*(sqlite3 **)h);
	free(h);
}

int pw_db_has_table(sqlite3 *db, const char *name)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = pw_db_prepare_text(
	    db, "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1", name, &st);
	return r < 0 ? r : pw_db_step_row(st);
}

static bool rc_is_corrupt(int rc)
{
	return (rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB;
}

int pw_db_mkdir_p(const char *dir)
{
	char buf[PATH_MAX];
	size_t n = strlen(dir);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, dir, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0700) < 0 && errno != EEXIST)
			return negative_errno();
		*p = '/';
	}
	if (mkdir(buf, 0700) < 0 && errno != EEXIST)
		return negative_errno();
	return 0;
}

/* Creates the missing directories above the file PATH. */
static int mkdir_parents(const char *path)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	char *slash = strrchr(buf, '/');
	if (!slash || slash == buf)
		return 0;
	*slash = '\0';
	return pw_db_mkdir_p(buf);
}

/* Prepares SQL and steps it once: the raw SQLite code, SQLITE_ROW with *RET at the row. */
static int first_row(sqlite3 *db, const char *sql, sqlite3_stmt **ret)
{
	int rc = sqlite3_prepare_v2(db, sql, -1, ret, NULL);
	return rc == SQLITE_OK ? sqlite3_step(*ret) : rc;
}

/* Reads one integer PRAGMA. Returns the raw SQLite code. */
static int pragma_int(sqlite3 *db, const char *sql, int64_t *ret)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int rc = first_row(db, sql, &st);
	if (rc != SQLITE_ROW)
		return rc;
	*ret = sqlite3_column_int64(st, 0);
	return SQLITE_OK;
}

/* One PRAGMA quick_check (SQL): SQLITE_OK when the first row says "ok", SQLITE_CORRUPT
 * otherwise. quick_check is integrity_check without the index-content cross-check: O(N), and
 * it still catches a damaged page or b-tree. */
static int quick_check_one(sqlite3 *db, const char *sql)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int rc = first_row(db, sql, &st);
	if (rc != SQLITE_ROW)
		return rc;
	const char *v = (const char *)sqlite3_column_text(st, 0);
	return v && streq(v, "ok") ? SQLITE_OK : SQLITE_CORRUPT;
}

/* Does the table exist? (A fresh file has none of ours before migration 1.) */
static bool table_exists(sqlite3 *db, const char *name)
{
	return pw_db_has_table(db, name) > 0;
}

/* The check on open: everything with FULL, else the schema and the small tables. */
static int quick_check(sqlite3 *db, bool full)
{
	static const char *const small[] = {"sqlite_schema", "meta", "projects", "switches"};

	if (full)
		return quick_check_one(db, "PRAGMA quick_check");
	for (size_t i = 0; i < ELEMENTSOF(small); i++) {
		char sql[64];
		if (i > 0 && !table_exists(db, small[i]))
			continue;
		snprintf(sql, sizeof(sql), "PRAGMA quick_check(%s)", small[i]);
		int rc = quick_check_one(db, sql);
		if (rc != SQLITE_OK)
			return rc;
	}
	return SQLITE_OK;
}

/* Applies the missing migrations. Returns the raw SQLite code. */
static int migrate(sqlite3 *db)
{
	int64_t version = 0;
	int rc = pragma_int(db, "PRAGMA user_version", &version);
	if (rc != SQLITE_OK)
		return rc;
	if (version >= PW_DB_SCHEMA_VERSION)
		return SQLITE_OK; /* up to date, or newer (additive): no write lock taken */

	rc = exec_rc(db, "BEGIN IMMEDIATE");
	if (rc != SQLITE_OK)
		return rc;
	/* Re-read under the write lock: another process may have migrated meanwhile. */
	rc = pragma_int(db, "PRAGMA user_version", &version);
	for (int64_t v = version; rc == SQLITE_OK && v < PW_DB_SCHEMA_VERSION; v++)
		rc = exec_rc(db, migrations[v]);
	if (rc == SQLITE_OK && version < PW_DB_SCHEMA_VERSION) {
		char sql[64];
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", PW_DB_SCHEMA_VERSION);
		rc = exec_rc(db, sql);
	}
	if (rc == SQLITE_OK && version == 0) {
		char sql[128];
		snprintf(sql, sizeof(sql),
			 "INSERT OR REPLACE INTO meta(key, value) VALUES ('created_ns', '%lld')",
			 (long long)pw_db_now_ns());
		rc = exec_rc(db, sql);
	}
	if (rc == SQLITE_OK)
		rc = exec_rc(db, "COMMIT");
	if (rc != SQLITE_OK)
		exec_rc(db, "ROLLBACK");
	return rc;
}

/*
 * Contention inside the daemon. The originals store keeps a write transaction open for up to
 * PW_UNDO_ORIG_DEFER_MS so that the rows of a storm of changes commit together; meanwhile every
 * other connection of the process that writes (a switch persisting the mode, the audit
 * writer) would find the database busy and sleep until that batch ends: a switch took up to
 * 100 ms while anything was being changed (2,000 switches beside two writers: 2 minutes
 * instead of 4 s). So a connection that finds the database busy first asks the holder of
 * such a batch to commit it now (the hook, set by the store), then waits as SQLite's own
 * busy timeout would. Another process's batch cannot be asked: that wait stays.
 */
static pthread_mutex_t contention_lock = PTHREAD_MUTEX_INITIALIZER;
static void (*contention_fn)(void *);
static void *contention_arg;

void pw_db_set_contention_hook(void (*fn)(void *), void *arg)
{
	pthread_mutex_lock(&contention_lock);
	contention_fn = fn;
	contention_arg = arg;
	pthread_mutex_unlock(&contention_lock);
}

void pw_db_clear_contention_hook(void *arg)
{
	pthread_mutex_lock(&contention_lock);
	if (contention_arg == arg) {
		contention_fn = NULL;
		contention_arg = NULL;
	}
	pthread_mutex_unlock(&contention_lock);
}

/* The hook runs under contention_lock, so the store it names cannot go meanwhile; it must
 * not block (the store's own lock is only tried). Its own commit, should that ever find the
 * database busy, does not ask again: that would take contention_lock twice. */
static void ask_to_commit(void)
{
	static _Thread_local bool asking;
	if (asking)
		return;
	asking = true;
	pthread_mutex_lock(&contention_lock);
	if (contention_fn)
		contention_fn(contention_arg);
	pthread_mutex_unlock(&contention_lock);
	asking = false;
}

/* SQLite's busy handler: ask, then sleep with the back-off of sqlite3_busy_timeout (1, 2, 5
 * ... 100 ms) until ARG milliseconds have been slept. */
static int busy_wait(void *arg, int count)
{
	static const int delays[] = {1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100};
	const int n = (int)(sizeof(delays) / sizeof(delays[0]));
	int timeout_ms = (int)(intptr_t)arg, slept = 0;
	for (int i = 0; i < count; i++)
		slept += delays[i < n ? i : n - 1];
	if (slept >= timeout_ms)
		return 0;
	ask_to_commit();
	int ms = delays[count < n ? count : n - 1];
	if (ms > timeout_ms - slept)
		ms = timeout_ms - slept;
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	return 1;
}

static void set_busy_wait(sqlite3 *db, int busy_ms)
{
	sqlite3_busy_handler(db, busy_wait, (void *)(intptr_t)busy_ms);
}

/* One attempt to open, configure, check and migrate. Returns the raw SQLite code; *ret is
 * set only on SQLITE_OK. */
static int try_open(const char *path, int busy_ms, unsigned flags, sqlite3 **ret)
{
	_cleanup_(pw_db_closep) sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(path, &db,
				 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
				     SQLITE_OPEN_EXRESCODE,
				 NULL);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_extended_result_codes(db, 1);
	set_busy_wait(db, busy_ms);

	/* journal_mode is the first statement to read the header: a file that is not a
	 * database fails here with SQLITE_NOTADB. */
	rc = exec_rc(db, "PRAGMA journal_mode = WAL");
	if (rc == SQLITE_OK)
		rc = exec_rc(db, "PRAGMA synchronous = NORMAL");
	if (rc == SQLITE_OK)
		rc = quick_check(db, flags & PW_DB_FULL_CHECK);
	if (rc == SQLITE_OK)
		rc = migrate(db);
	if (rc != SQLITE_OK)
		return rc;
	*ret = TAKE_PTR(db);
	return SQLITE_OK;
}

/* Renames PATH+SUFFIX to ASIDE+SUFFIX when it exists. */
static int move_one(const char *path, const char *aside, const char *suffix)
{
	char from[PATH_MAX], to[PATH_MAX];

	if (snprintf(from, sizeof(from), "%s%s", path, suffix) >= (int)sizeof(from) ||
	    snprintf(to, sizeof(to), "%s%s", aside, suffix) >= (int)sizeof(to))
		return -ENAMETOOLONG;
	if (rename(from, to) < 0 && errno != ENOENT)
		return negative_errno();
	return 0;
}

/* Moves PATH (and its -wal and -shm, which must not be replayed into the new file) to a
 * free name PATH.corrupt-TIMESTAMP[-N]. Returns 0 with a malloc'd *ret_aside. */
static int move_aside(const char *path, char **ret_aside)
{
	char stamp[32], aside[PATH_MAX];
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	for (unsigned i = 0; i < 100; i++) {
		int n = i == 0 ? snprintf(aside, sizeof(aside), "%s.corrupt-%s", path, stamp)
			       : snprintf(aside, sizeof(aside), "%s.corrupt-%s-%u", path, stamp, i);
		if (n >= (int)sizeof(aside))
			return -ENAMETOOLONG;
		if (access(aside, F_OK) == 0)
			continue;
		int r = move_one(path, aside, "");
		if (r < 0)
			return r;
		move_one(path, aside, "-wal");
		move_one(path, aside, "-shm");
		char *copy = strdup(aside);
		if (!copy)
			return -ENOMEM;
		*ret_aside = copy;
		return 0;
	}
	return -EEXIST;
}

int pw_db_open(const char *path, int busy_ms, unsigned flags, sqlite3 **ret, char **ret_warning)
{
	sqlite3 *db = NULL;

	if (busy_ms <= 0)
		busy_ms = PW_DB_BUSY_TIMEOUT_MS;
	int r = mkdir_parents(path);
	if (r < 0)
		return r;

	int rc = try_open(path, busy_ms, flags, &db);
	if (rc == SQLITE_OK) {
		if (ret_warning)
			*ret_warning = NULL;
		*ret = db;
		return 0;
	}
	if (!rc_is_corrupt(rc))
		return pw_db_errno(rc);

	_cleanup_free_ char *aside = NULL;
	r = move_aside(path, &aside);
	if (r < 0)
		return r;
	rc = try_open(path, busy_ms, flags, &db);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	if (ret_warning) {
		char *w = NULL;
		if (asprintf(&w,
			     "state database %s was corrupt; moved to %s and rebuilt "
			     "(trust, last modes and the audit log start empty)",
			     path, aside) < 0)
			w = NULL;
		*ret_warning = w;
	}
	*ret = db;
	return 0;
}

int pw_db_open_readonly(const char *path, sqlite3 **ret)
{
	_cleanup_(pw_db_closep) sqlite3 *db = NULL;
	struct stat stbuf;

	if (stat(path, &stbuf) < 0)
		return negative_errno();
	int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	set_busy_wait(db, PW_DB_BUSY_TIMEOUT_MS);

	int64_t version = 0;
	rc = pragma_int(db, "PRAGMA user_version", &version);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	if (version < 1)
		return -EPROTO;
	*ret = TAKE_PTR(db);
	return 0;
}
