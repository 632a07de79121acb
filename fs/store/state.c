/* SPDX-License-Identifier: MIT */
/*
 * The state handle (state.h): trust, last mode per project and the switch history, over one
 * SQLite connection opened through db.c. Each write is one statement (an implicit
 * transaction); the busy timeout absorbs a concurrent writer such as the audit thread.
 */
#include "state.h"

#include <errno.h>
#include <stdlib.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "db.h"
#include "util.h"

struct pw_state {
	sqlite3 *db; /* first: pw_db_handle_open */
};

char *pw_state_default_path(void)
{
	const char *env = getenv("PIWORKFS_STATE_DB");
	char *path = NULL;

	if (env && *env)
		return strdup(env);
	env = getenv("XDG_STATE_HOME");
	if (env && env[0] == '/') {
		if (asprintf(&path, "%s/piworkfs/state.db", env) < 0)
			return NULL;
		return path;
	}
	if (geteuid() == 0)
		return strdup("/var/lib/piworkfs/state.db");

	const char *home = getenv("HOME");
	if (!home || home[0] != '/') {
		struct passwd *pw = getpwuid(geteuid());
		home = pw ? pw->pw_dir : NULL;
	}
	if (!home || home[0] != '/')
		return NULL;
	if (asprintf(&path, "%s/.local/state/piworkfs/state.db", home) < 0)
		return NULL;
	return path;
}

int pw_state_open(const char *path, pw_state **ret, char **ret_warning)
{
	return pw_db_handle_open(path, 0, 0, sizeof(pw_state), (void **)ret, ret_warning);
}

void pw_state_close(pw_state *s)
{
	pw_db_handle_free(s);
}

static int prepare(pw_state *s, const char *sql, sqlite3_stmt **ret)
{
	return pw_db_prepare(s->db, sql, ret);
}

/* Prepares SQL about one plan: PROJECT bound to ?1 and PATH to ?2 (borrowed until the
 * statement is finalized). 0 or -errno. */
static int prepare_plan(pw_state *s, const char *sql, const char *project, const char *path,
			sqlite3_stmt **ret)
{
	int r = pw_db_prepare_text(s->db, sql, project, ret);
	if (r < 0)
		return r;
	sqlite3_bind_text(*ret, 2, path, -1, SQLITE_STATIC);
	return 0;
}

int pw_state_db_last_mode(sqlite3 *db, const char *project, char **ret_mode)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r =
	    pw_db_prepare_text(db, "SELECT last_mode FROM projects WHERE path = ?1", project, &st);
	if (r >= 0)
		r = pw_db_step_row(st);
	if (r <= 0)
		return r < 0 ? r : -ENOENT;
	if (sqlite3_column_type(st, 0) == SQLITE_NULL)
		return -ENOENT; /* known (e.g. trusted) but never mounted */
	char *copy = pw_db_text_dup(st, 0);
	if (!copy)
		return -ENOMEM;
	*ret_mode = copy;
	return 0;
}

int pw_state_db_is_trusted(sqlite3 *db, const char *project)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r =
	    pw_db_prepare_text(db, "SELECT trusted FROM projects WHERE path = ?1", project, &st);
	if (r >= 0)
		r = pw_db_step_row(st);
	return r <= 0 ? r : sqlite3_column_int(st, 0) != 0;
}

int pw_state_get_last_mode(pw_state *s, const char *project, char **ret_mode)
{
	return pw_state_db_last_mode(s->db, project, ret_mode);
}

int pw_state_set_last_mode(pw_state *s, const char *project, const char *mode)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = prepare(s,
			"INSERT INTO projects(path, last_mode, updated_ns) VALUES (?1, ?2, ?3) "
			"ON CONFLICT(path) DO UPDATE SET last_mode = ?2, updated_ns = ?3",
			&st);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, mode, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, pw_db_now_ns());
	return pw_db_step_done(st);
}

int pw_state_record_switch(pw_state *s, const pw_switch_record *rec)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = prepare(s,
			"INSERT INTO switches(time_ns, project, mountpoint, from_mode, to_mode, "
			"generation, pid, uid, comm, origin, reason, answered_by, outcome, plan, "
			"asked_pid, asked_comm, how) "
			"VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, "
			"?16, ?17)",
			&st);
	if (r < 0)
		return r;
	if (!rec->project || !rec->to_mode)
		return -EINVAL;
	sqlite3_bind_int64(st, 1, rec->time_ns ? rec->time_ns : pw_db_now_ns());
	sqlite3_bind_text(st, 2, rec->project, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, rec->mountpoint, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, rec->from_mode, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, rec->to_mode, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 6, (sqlite3_int64)rec->generation);
	sqlite3_bind_int64(st, 7, rec->pid);
	sqlite3_bind_int64(st, 8, rec->uid);
	sqlite3_bind_text(st, 9, rec->comm, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 10, rec->origin, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 11, rec->reason, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 12, rec->answered_by, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 13, rec->outcome, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 14, rec->plan, -1, SQLITE_STATIC);
	if (rec->asked_pid > 0)
		sqlite3_bind_int64(st, 15, rec->asked_pid);
	sqlite3_bind_text(st, 16, rec->asked_comm, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 17, rec->how, -1, SQLITE_STATIC);
	return pw_db_step_done(st);
}

int pw_state_is_trusted(pw_state *s, const char *project)
{
	return pw_state_db_is_trusted(s->db, project);
}

int pw_state_set_trusted(pw_state *s, const char *project, bool trusted)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = prepare(
	    s,
	    "INSERT INTO projects(path, trusted, trusted_ns, updated_ns) "
	    "VALUES (?1, ?2, ?3, ?3) "
	    "ON CONFLICT(path) DO UPDATE SET trusted = ?2, trusted_ns = ?3, updated_ns = ?3",
	    &st);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, trusted ? 1 : 0);
	sqlite3_bind_int64(st, 3, pw_db_now_ns());
	return pw_db_step_done(st);
}

#define PRUNE_CHUNK 10000

int64_t pw_state_prune_switches(sqlite3 *db, int64_t before_ns)
{
	return pw_db_delete_chunks(db,
				   "DELETE FROM switches WHERE id IN (SELECT id FROM switches "
				   "WHERE time_ns < ?1 LIMIT ?2)",
				   before_ns, PRUNE_CHUNK);
}

/* A switch row's columns, in switch_queries' SELECT order. */
static const pw_db_col switch_cols[] = {
    PW_DB_I64(pw_switch_row, id),	    PW_DB_I64(pw_switch_row, time_ns),
    PW_DB_TEXT(pw_switch_row, project),	    PW_DB_TEXT(pw_switch_row, mountpoint),
    PW_DB_TEXT(pw_switch_row, from_mode),   PW_DB_TEXT(pw_switch_row, to_mode),
    PW_DB_I64(pw_switch_row, generation),   PW_DB_I64(pw_switch_row, pid),
    PW_DB_I64(pw_switch_row, uid),	    PW_DB_TEXT(pw_switch_row, comm),
    PW_DB_TEXT(pw_switch_row, origin),	    PW_DB_TEXT(pw_switch_row, reason),
    PW_DB_TEXT(pw_switch_row, answered_by), PW_DB_TEXT(pw_switch_row, outcome),
    PW_DB_TEXT(pw_switch_row, plan),	    PW_DB_I64(pw_switch_row, asked_pid),
    PW_DB_TEXT(pw_switch_row, asked_comm),  PW_DB_TEXT(pw_switch_row, how),
};

void pw_switch_rows_free(pw_switch_row *rows, size_t n)
{
	pw_db_cols_free(rows, n, sizeof(*rows), switch_cols, ELEMENTSOF(switch_cols));
}

/* Reads every row of ST (R: what preparing it returned; < 0 is that error) into ROWS: 0 with
 * the array in *RET (a pointer to the caller's array pointer) and its length in *RET_N, or
 * -errno with nothing kept. */
static int rows_take(int r, sqlite3_stmt *st, pw_db_rows *rows, void *ret, size_t *ret_n)
{
	if (r >= 0)
		r = pw_db_rows_read(st, rows);
	if (r < 0) {
		pw_db_cols_free(rows->v, rows->n, rows->size, rows->cols, rows->n_cols);
		return r;
	}
	*(void **)ret = rows->v;
	*ret_n = rows->n;
	return 0;
}

/* The columns after origin, newest schema first (db.c's migrations 8 and 3). */
static const char *const switch_queries[] = {
    "reason, answered_by, outcome, plan, asked_pid, asked_comm, how",
    "reason, answered_by, NULL, NULL, NULL, NULL, NULL",
    "NULL, NULL, NULL, NULL, NULL, NULL, NULL",
};

int pw_state_read_switches(const char *path, const char *project, int64_t since_ns,
			   int64_t after_id, size_t limit, pw_switch_row **ret, size_t *ret_n)
{
	_cleanup_(pw_db_closep) sqlite3 *db = NULL;
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r, rc;

	r = pw_db_open_readonly(path, &db);
	if (r == -EPROTO)
		r = -ENOENT;
	if (r < 0)
		return r;
	/* Newest first, so LIMIT keeps the last ones; reversed below. A database no daemon
	 * has migrated yet (read-only here: never migrated) lacks the newer columns: the first
	 * query its schema has is used, NULL in their place. */
	rc = SQLITE_ERROR;
	for (size_t i = 0; i < ELEMENTSOF(switch_queries) && rc != SQLITE_OK; i++) {
		char sql[768];
		snprintf(sql, sizeof(sql),
			 "SELECT id, time_ns, project, mountpoint, from_mode, to_mode, "
			 "generation, pid, uid, comm, origin, %s FROM switches "
			 "WHERE (?1 IS NULL OR project = ?1) AND time_ns >= ?2 AND id > ?3 "
			 "ORDER BY time_ns DESC, id DESC",
			 switch_queries[i]);
		rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	}
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, since_ns);
	sqlite3_bind_int64(st, 3, after_id);
	pw_db_rows rows = {.size = sizeof(pw_switch_row),
			   .limit = limit,
			   .cols = switch_cols,
			   .n_cols = ELEMENTSOF(switch_cols)};
	pw_switch_row *v;
	size_t n;
	r = rows_take(0, st, &rows, &v, &n);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n / 2; i++) {
		pw_switch_row t = v[i];
		v[i] = v[n - 1 - i];
		v[n - 1 - i] = t;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

/* ---- plans ---------------------------------------------------------------------------- */

static const pw_db_col plan_cols[] = {
    PW_DB_TEXT(pw_plan_record, path),	     PW_DB_TEXT(pw_plan_record, status),
    PW_DB_TEXT(pw_plan_record, hash),	     PW_DB_I64(pw_plan_record, approved_ns),
    PW_DB_TEXT(pw_plan_record, approved_by), PW_DB_I64(pw_plan_record, updated_ns),
};

void pw_plan_records_free(pw_plan_record *v, size_t n)
{
	pw_db_cols_free(v, n, sizeof(*v), plan_cols, ELEMENTSOF(plan_cols));
}

int pw_state_plans(pw_state *s, const char *project, pw_plan_record **ret, size_t *ret_n)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	pw_db_rows rows = {
	    .size = sizeof(pw_plan_record), .cols = plan_cols, .n_cols = ELEMENTSOF(plan_cols)};
	int r =
	    pw_db_prepare_text(s->db,
			       "SELECT path, status, hash, approved_ns, approved_by, updated_ns "
			       "FROM plans WHERE project = ?1 ORDER BY path",
			       project, &st);

	return rows_take(r, st, &rows, ret, ret_n);
}

int pw_state_plan_approve(pw_state *s, const char *project, const char *path, const char *hash,
			  const char *by)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r =
	    prepare_plan(s,
			 "INSERT INTO plans(project, path, status, hash, approved_ns, approved_by, "
			 "updated_ns) VALUES (?1, ?2, 'approved', ?3, ?4, ?5, ?4) "
			 "ON CONFLICT(project, path) DO UPDATE SET status = 'approved', hash = ?3, "
			 "approved_ns = ?4, approved_by = ?5, updated_ns = ?4",
			 project, path, &st);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 3, hash, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, pw_db_now_ns());
	sqlite3_bind_text(st, 5, by, -1, SQLITE_STATIC);
	return pw_db_step_done(st);
}

int pw_state_plan_reopen(pw_state *s, const char *project, const char *path)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = prepare_plan(s,
			     "UPDATE plans SET status = 'draft', hash = NULL, approved_ns = NULL, "
			     "approved_by = NULL, updated_ns = ?3 "
			     "WHERE project = ?1 AND path = ?2 AND status = 'approved'",
			     project, path, &st);
	if (r < 0)
		return r;
	sqlite3_bind_int64(st, 3, pw_db_now_ns());
	r = pw_db_step_done(st);
	if (r == 0 && sqlite3_changes(s->db) == 0)
		return -ENOENT;
	return r;
}

static const pw_db_col task_cols[] = {
    PW_DB_I64(pw_task_record, task),	  PW_DB_TEXT(pw_task_record, text),
    PW_DB_I64(pw_task_record, done_ns),	  PW_DB_TEXT(pw_task_record, done_by),
    PW_DB_I64(pw_task_record, changeset), PW_DB_TEXT(pw_task_record, note),
};

void pw_task_records_free(pw_task_record *v, size_t n)
{
	pw_db_cols_free(v, n, sizeof(*v), task_cols, ELEMENTSOF(task_cols));
}

int pw_state_plan_tasks(pw_state *s, const char *project, const char *path, pw_task_record **ret,
			size_t *ret_n)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	pw_db_rows rows = {
	    .size = sizeof(pw_task_record), .cols = task_cols, .n_cols = ELEMENTSOF(task_cols)};
	int r = prepare_plan(s,
			     "SELECT task, text, done_ns, done_by, changeset, note FROM plan_tasks "
			     "WHERE project = ?1 AND path = ?2 ORDER BY task",
			     project, path, &st);

	return rows_take(r, st, &rows, ret, ret_n);
}

int pw_state_plan_task_done(pw_state *s, const char *project, const char *path, int64_t task,
			    const char *text, const char *by, int64_t changeset, const char *note)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = prepare_plan(s,
			     "INSERT INTO plan_tasks(project, path, task, text, done_ns, done_by, "
			     "changeset, note) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
			     "ON CONFLICT(project, path, task) DO NOTHING",
			     project, path, &st);
	if (r < 0)
		return r;
	sqlite3_bind_int64(st, 3, task);
	sqlite3_bind_text(st, 4, text, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, pw_db_now_ns());
	sqlite3_bind_text(st, 6, by, -1, SQLITE_STATIC);
	if (changeset > 0)
		sqlite3_bind_int64(st, 7, changeset);
	else
		sqlite3_bind_null(st, 7);
	sqlite3_bind_text(st, 8, note, -1, SQLITE_STATIC);
	r = pw_db_step_done(st);
	if (r == 0 && sqlite3_changes(s->db) == 0)
		return -EEXIST;
	return r;
}

int64_t pw_state_current_changeset(pw_state *s, const char *project)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;

	if (pw_db_prepare_text(s->db, "SELECT max(id) FROM orig_changesets WHERE project = ?1",
			       project, &st) < 0)
		return 0;
	return pw_db_step_row(st) > 0 ? sqlite3_column_int64(st, 0) : 0;
}

int pw_state_plan_note_changeset(pw_state *s, const char *project, const char *path, int64_t task,
				 int64_t since_ns)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int64_t cs = pw_state_current_changeset(s, project);
	int r;

	if (cs <= 0)
		return 0;
	r = prepare(s,
		    "INSERT INTO plan_changesets(changeset, project, path, task) "
		    "SELECT ?1, ?2, ?3, ?4 FROM orig_changesets WHERE id = ?1 AND started_ns >= ?5 "
		    "ON CONFLICT(changeset) DO NOTHING",
		    &st);
	if (r < 0)
		return r;
	sqlite3_bind_int64(st, 1, cs);
	sqlite3_bind_text(st, 2, project, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, path, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, task);
	sqlite3_bind_int64(st, 5, since_ns);
	return pw_db_step_done(st);
}

/* A row of plan_changesets: the change set and its task, side by side in the answer. */
typedef struct changeset_pair {
	int64_t changeset, task;
} changeset_pair;

static const pw_db_col changeset_cols[] = {
    PW_DB_I64(changeset_pair, changeset),
    PW_DB_I64(changeset_pair, task),
};

int pw_state_plan_changesets(pw_state *s, const char *project, const char *path, int64_t **ret,
			     size_t *ret_n)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	pw_db_rows rows = {.size = sizeof(changeset_pair),
			   .cols = changeset_cols,
			   .n_cols = ELEMENTSOF(changeset_cols)};
	int r = prepare_plan(s,
			     "SELECT changeset, task FROM plan_changesets WHERE project = ?1 AND "
			     "path = ?2 ORDER BY changeset",
			     project, path, &st);

	return rows_take(r, st, &rows, ret, ret_n);
}
