/* SPDX-License-Identifier: MIT */
/*
 * The state handle (state.h): trust, last mode per project and the switch history, over one
 * SQLite connection opened through db.c. Each write is one statement (an implicit
 * transaction); the busy timeout absorbs a concurrent writer such as the audit thread.
 */
#include "state.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "db.h"
#include "util.h"

struct pw_state {
	sqlite3 *db;
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
	_cleanup_free_ pw_state *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	int r = pw_db_open(path, 0, 0, &s->db, ret_warning);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(s);
	return 0;
}

void pw_state_close(pw_state *s)
{
	if (!s)
		return;
	sqlite3_close_v2(s->db);
	free(s);
}

static void finalizep(sqlite3_stmt **st)
{
	sqlite3_finalize(*st); /* accepts NULL */
}
#define _cleanup_stmt_ _cleanup_(finalizep)

static int prepare(pw_state *s, const char *sql, sqlite3_stmt **ret)
{
	return pw_db_errno(sqlite3_prepare_v2(s->db, sql, -1, ret, NULL));
}

/* Steps a statement that returns no rows. */
static int step_done(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	return rc == SQLITE_DONE ? 0 : pw_db_errno(rc);
}

int pw_state_get_last_mode(pw_state *s, const char *project, char **ret_mode)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = prepare(s, "SELECT last_mode FROM projects WHERE path = ?1", &st);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return -ENOENT;
	if (rc != SQLITE_ROW)
		return pw_db_errno(rc);
	const char *mode = (const char *)sqlite3_column_text(st, 0);
	if (!mode)
		return -ENOENT; /* known (e.g. trusted) but never mounted */
	char *copy = strdup(mode);
	if (!copy)
		return -ENOMEM;
	*ret_mode = copy;
	return 0;
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
	return step_done(st);
}

int pw_state_record_switch(pw_state *s, const pw_switch_record *rec)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = prepare(s,
			"INSERT INTO switches(time_ns, project, mountpoint, from_mode, to_mode, "
			"generation, pid, uid, comm, origin) "
			"VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
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
	return step_done(st);
}

int pw_state_is_trusted(pw_state *s, const char *project)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = prepare(s, "SELECT trusted FROM projects WHERE path = ?1", &st);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW)
		return pw_db_errno(rc);
	return sqlite3_column_int(st, 0) != 0;
}

int pw_state_set_trusted(pw_state *s, const char *project, bool trusted)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = prepare(s,
			"INSERT INTO projects(path, trusted, trusted_ns, updated_ns) "
			"VALUES (?1, ?2, ?3, ?3) "
			"ON CONFLICT(path) DO UPDATE SET trusted = ?2, trusted_ns = ?3, updated_ns = ?3",
			&st);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, trusted ? 1 : 0);
	sqlite3_bind_int64(st, 3, pw_db_now_ns());
	return step_done(st);
}
