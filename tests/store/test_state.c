/* SPDX-License-Identifier: MIT */
/*
 * The state database (fs/store/state.h, fs/store/db.h): creation, migration, rebuild of a corrupt
 * file, last mode per project, trust and the switch history. Each test works in its own temporary
 * directory.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/db.h"
#include "store/state.h"
#include "util.h"
#include "tmp_db.h"

static void setup(void)
{
	tmp_db_setup("state", "a/b/state.db");
}

TestSuite(state, .init = setup, .fini = tmp_db_teardown);

static void write_file(const char *path, const void *data, size_t n, off_t at)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, data, n, at), (ssize_t)n);
	close(fd);
}

/* Counts the entries of DIR whose name starts with PREFIX. */
static int count_prefixed(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	cr_assert_not_null(d);
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += startswith(e->d_name, prefix);
	closedir(d);
	return n;
}

Test(state, creates_missing_database_and_directories)
{
	pw_state *s = NULL;
	char *warning = (char *)"unset";

	cr_assert_eq(pw_state_open(dbpath, &s, &warning), 0);
	cr_assert_null(warning);
	pw_state_close(s);

	struct stat st;
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/a/b", tmpdir);
	cr_assert_eq(stat(dir, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0700);
	snprintf(dir, sizeof(dir), "%s/a", tmpdir);
	cr_assert_eq(stat(dir, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0700);

	cr_assert_eq(db_int(dbpath, "PRAGMA user_version"), PW_DB_SCHEMA_VERSION);
	cr_assert_eq(db_int(dbpath, "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
				    "AND name IN ('projects', 'switches', 'audit', 'meta')"),
		     4);
	cr_assert_eq(db_int(dbpath, "SELECT count(*) FROM sqlite_master WHERE type = 'index' "
				    "AND name LIKE 'audit_by_%'"),
		     5);
	cr_assert_eq(db_int(dbpath, "SELECT count(*) FROM meta WHERE key = 'created_ns'"), 1);
}

Test(state, uses_wal_and_reopens_without_migrating_again)
{
	pw_state *s = NULL;

	cr_assert_eq(pw_state_open(dbpath, &s, NULL), 0);
	cr_assert_eq(pw_state_set_last_mode(s, "/p", "build"), 0);
	pw_state_close(s);
	int64_t created = db_int(dbpath, "SELECT value FROM meta WHERE key = 'created_ns'");

	sqlite3 *db = NULL;
	cr_assert_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	sqlite3_stmt *st = NULL;
	cr_assert_eq(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
	cr_assert_str_eq((const char *)sqlite3_column_text(st, 0), "wal");
	sqlite3_finalize(st);
	sqlite3_close(db);

	char *mode = NULL;
	cr_assert_eq(pw_state_open(dbpath, &s, NULL), 0);
	cr_assert_eq(pw_state_get_last_mode(s, "/p", &mode), 0);
	cr_assert_str_eq(mode, "build");
	free(mode);
	pw_state_close(s);
	cr_assert_eq(db_int(dbpath, "SELECT value FROM meta WHERE key = 'created_ns'"), created);
}

Test(state, migrates_an_empty_file)
{
	char cmd[1200];
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/a/b' && : > '%s'", tmpdir, dbpath);
	cr_assert_eq(system(cmd), 0);

	pw_state *s = NULL;
	char *warning = NULL;
	cr_assert_eq(pw_state_open(dbpath, &s, &warning), 0);
	cr_assert_null(warning, "an empty file is a valid empty database: %s", warning);
	pw_state_close(s);
	cr_assert_eq(db_int(dbpath, "PRAGMA user_version"), PW_DB_SCHEMA_VERSION);
}

/* A state database that trusts PROJECT, then SQL run on it over a plain connection (what
 * another program, or a newer piworkfs, would have done to the file). */
static void trusted_then_raw(const char *project, const char *sql)
{
	pw_state *s = NULL;
	cr_assert_eq(pw_state_open(dbpath, &s, NULL), 0);
	cr_assert_eq(pw_state_set_trusted(s, project, true), 0);
	pw_state_close(s);
	db_exec(dbpath, sql);
}

Test(state, newer_schema_is_used_as_is)
{
	pw_state *s = NULL;
	trusted_then_raw("/p", "PRAGMA user_version = 99");

	char *warning = NULL;
	cr_assert_eq(pw_state_open(dbpath, &s, &warning), 0);
	cr_assert_null(warning);
	cr_assert_eq(pw_state_is_trusted(s, "/p"), 1);
	pw_state_close(s);
	cr_assert_eq(db_int(dbpath, "PRAGMA user_version"), 99);
}

Test(state, not_a_database_is_moved_aside_and_rebuilt)
{
	char mk[600];
	snprintf(mk, sizeof(mk), "mkdir -p '%s/a/b'", tmpdir);
	cr_assert_eq(system(mk), 0);
	char junk[8192];
	memset(junk, 'x', sizeof(junk));
	memcpy(junk, "this is not a database\n", 23);
	write_file(dbpath, junk, sizeof(junk), 0);

	pw_state *s = NULL;
	char *warning = NULL;
	cr_assert_eq(pw_state_open(dbpath, &s, &warning), 0);
	cr_assert_not_null(warning);
	cr_assert(strstr(warning, "corrupt"), "%s", warning);
	cr_assert(strstr(warning, ".corrupt-"), "names the moved file: %s", warning);
	cr_assert_null(strchr(warning, '\n'), "one line");
	free(warning);

	/* The new database works and the old bytes were kept. */
	cr_assert_eq(pw_state_set_last_mode(s, "/p", "plan"), 0);
	pw_state_close(s);
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/a/b", tmpdir);
	cr_assert_eq(count_prefixed(dir, "state.db.corrupt-"), 1);
	cr_assert_eq(db_int(dbpath, "SELECT count(*) FROM projects"), 1);
}

Test(state, damaged_page_fails_the_check_and_is_rebuilt)
{
	pw_state *s = NULL;
	cr_assert_eq(pw_state_open(dbpath, &s, NULL), 0);
	for (int i = 0; i < 400; i++) {
		char p[64];
		snprintf(p, sizeof(p), "/project/number/%d/with/a/longish/path", i);
		cr_assert_eq(pw_state_set_last_mode(s, p, "build"), 0);
	}
	pw_state_close(s);
	/* Fold the WAL into the main file, then scribble over pages 3 to 5. */
	db_exec(dbpath, "PRAGMA journal_mode = DELETE");
	int64_t page = db_int(dbpath, "PRAGMA page_size");
	struct stat sb;
	cr_assert_eq(stat(dbpath, &sb), 0);
	cr_assert_gt(sb.st_size, 6 * page, "enough pages to damage");
	char junk[3 * 65536];
	memset(junk, 0xa5, sizeof(junk));
	write_file(dbpath, junk, (size_t)(3 * page), 2 * page);

	char *warning = NULL;
	cr_assert_eq(pw_state_open(dbpath, &s, &warning), 0);
	cr_assert_not_null(warning, "damage must be detected");
	free(warning);
	char *mode = NULL;
	cr_assert_eq(pw_state_get_last_mode(s, "/project/number/1/with/a/longish/path", &mode),
		     -ENOENT);
	pw_state_close(s);
}

/* Returns the page size and the root page of TABLE, after folding the WAL into the file. */
static void page_of(const char *table, int64_t *ret_page_size, int64_t *ret_root)
{
	char sql[128];

	db_exec(dbpath, "PRAGMA journal_mode = DELETE");
	*ret_page_size = db_int(dbpath, "PRAGMA page_size");
	snprintf(sql, sizeof(sql), "SELECT rootpage FROM sqlite_schema WHERE name = '%s'", table);
	*ret_root = db_int(dbpath, sql);
}

Test(state, damaged_audit_table_is_found_by_the_full_check)
{
	pw_state *s = NULL;
	sqlite3 *db = NULL;
	trusted_then_raw("/kept", "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
				  "WHERE i < 2000) INSERT INTO audit(time_ns, project, op, path, "
				  "first_ns, last_ns) SELECT i, '/p', 'create', "
				  "'some/longer/path/' || i, i, i FROM n");
	int64_t page, root;
	page_of("audit", &page, &root);
	char junk[65536];
	memset(junk, 0x5a, sizeof(junk));
	write_file(dbpath, junk, (size_t)page, (root - 1) * page); /* the table's root page */

	/* The everyday open checks the small tables only: fast, and trust survives. */
	char *warning = NULL;
	cr_assert_eq(pw_state_open(dbpath, &s, &warning), 0);
	cr_assert_null(warning);
	cr_assert_eq(pw_state_is_trusted(s, "/kept"), 1);
	pw_state_close(s);

	/* The full check (what the audit writer asks after meeting SQLITE_CORRUPT) rebuilds. */
	cr_assert_eq(pw_db_open(dbpath, 0, PW_DB_FULL_CHECK, &db, &warning), 0);
	cr_assert_not_null(warning);
	free(warning);
	sqlite3_close(db);
	cr_assert_eq(db_int(dbpath, "SELECT count(*) FROM audit"), 0);
}

Test(state, last_mode_per_project)
{
	pw_state *s = NULL;
	char *mode = NULL;

	cr_assert_eq(pw_state_open(dbpath, &s, NULL), 0);
	cr_assert_eq(pw_state_get_last_mode(s, "/a", &mode), -ENOENT);
	cr_assert_null(mode);
	cr_assert_eq(pw_state_set_last_mode(s, "/a", "design"), 0);
	cr_assert_eq(pw_state_set_last_mode(s, "/b", "plan"), 0);
	cr_assert_eq(pw_state_set_last_mode(s, "/a", "build"), 0);
	cr_assert_eq(pw_state_get_last_mode(s, "/a", &mode), 0);
	cr_assert_str_eq(mode, "build");
	free(mode);
	cr_assert_eq(pw_state_get_last_mode(s, "/b", &mode), 0);
	cr_assert_str_eq(mode, "plan");
	free(mode);
	/* Trusting a project never seen does not invent a last mode. */
	cr_assert_eq(pw_state_set_trusted(s, "/c", true), 0);
	mode = NULL;
	cr_assert_eq(pw_state_get_last_mode(s, "/c", &mode), -ENOENT);
	cr_assert_null(mode);
	pw_state_close(s);
}

Test(state, trust_and_revoke)
{
	pw_state *s = NULL;

	cr_assert_eq(pw_state_open(dbpath, &s, NULL), 0);
	cr_assert_eq(pw_state_is_trusted(s, "/p"), 0);
	cr_assert_eq(pw_state_set_last_mode(s, "/p", "design"), 0);
	cr_assert_eq(pw_state_is_trusted(s, "/p"), 0);
	cr_assert_eq(pw_state_set_trusted(s, "/p", true), 0);
	cr_assert_eq(pw_state_is_trusted(s, "/p"), 1);
	cr_assert_eq(pw_state_is_trusted(s, "/p/sub"), 0, "trust is per exact real path");
	cr_assert_eq(pw_state_set_trusted(s, "/p", false), 0);
	cr_assert_eq(pw_state_is_trusted(s, "/p"), 0);
	char *mode = NULL;
	cr_assert_eq(pw_state_get_last_mode(s, "/p", &mode), 0, "trust keeps the last mode");
	cr_assert_str_eq(mode, "design");
	free(mode);
	pw_state_close(s);
}

Test(state, switch_history)
{
	pw_state *s = NULL;

	cr_assert_eq(pw_state_open(dbpath, &s, NULL), 0);
	pw_switch_record r = {
	    .time_ns = 1000,
	    .project = "/p",
	    .mountpoint = "/mnt/v",
	    .from_mode = NULL,
	    .to_mode = "plan",
	    .generation = 1,
	    .pid = 42,
	    .uid = 1000,
	    .comm = "piworkfs",
	    .origin = "mount",
	};
	cr_assert_eq(pw_state_record_switch(s, &r), 0);
	r.time_ns = 2000;
	r.from_mode = "plan";
	r.to_mode = "build";
	r.generation = 2;
	r.origin = "socket";
	cr_assert_eq(pw_state_record_switch(s, &r), 0);
	r.to_mode = NULL;
	cr_assert_eq(pw_state_record_switch(s, &r), -EINVAL);
	pw_state_close(s);

	cr_assert_eq(db_int(dbpath, "SELECT count(*) FROM switches WHERE project = '/p'"), 2);
	cr_assert_eq(db_int(dbpath, "SELECT count(*) FROM switches WHERE from_mode IS NULL "
				    "AND to_mode = 'plan' AND origin = 'mount' AND generation = 1"),
		     1);
	cr_assert_eq(db_int(dbpath, "SELECT generation FROM switches WHERE from_mode = 'plan' "
				    "AND to_mode = 'build' AND pid = 42 AND uid = 1000 AND "
				    "comm = 'piworkfs' AND mountpoint = '/mnt/v' AND "
				    "origin = 'socket' AND time_ns = 2000"),
		     2);
}

/* A granted request (origin "request") keeps the agent's reason and who allowed it, and
 * both read back; a database still at schema 2 (no daemon migrated it yet) reads back
 * without them. */
Test(state, a_granted_request_keeps_its_reason_and_who_answered)
{
	pw_state *s = NULL;
	pw_switch_row *rows = NULL;
	size_t n = 0;

	cr_assert_eq(pw_state_open(dbpath, &s, NULL), 0);
	pw_switch_record r = {
	    .time_ns = 1000,
	    .project = "/p",
	    .from_mode = "plan",
	    .to_mode = "build",
	    .generation = 2,
	    .pid = 7,
	    .uid = 0,
	    .comm = "piworkfs",
	    .origin = "request",
	    .reason = "implement the approved plan",
	    .answered_by = "the terminal of piworkfs run (pid 7)",
	};
	cr_assert_eq(pw_state_record_switch(s, &r), 0);
	pw_state_close(s);
	cr_assert_eq(pw_state_read_switches(dbpath, "/p", 0, 0, 0, &rows, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(rows[0].origin, "request");
	cr_assert_str_eq(rows[0].reason, "implement the approved plan");
	cr_assert_str_eq(rows[0].answered_by, "the terminal of piworkfs run (pid 7)");
	pw_switch_rows_free(rows, n);

	/* Schema 2: the columns are not there. */
	db_exec(dbpath, "ALTER TABLE switches DROP COLUMN reason;"
			"ALTER TABLE switches DROP COLUMN answered_by;"
			"PRAGMA user_version = 2;");
	cr_assert_eq(pw_state_read_switches(dbpath, "/p", 0, 0, 0, &rows, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_null(rows[0].reason);
	cr_assert_null(rows[0].answered_by);
	pw_switch_rows_free(rows, n);
}

/* Schema 8: a request that ended without a switch keeps its outcome, who asked and how it
 * ended; a database at schema 7 is migrated on open and keeps its rows. */
Test(state, an_ended_request_reads_back_and_schema_7_migrates)
{
	pw_state *s = NULL;
	pw_switch_row *rows = NULL;
	size_t n = 0;

	cr_assert_eq(pw_state_open(dbpath, &s, NULL), 0);
	pw_switch_record r = {.time_ns = 1000,
			      .project = "/p",
			      .from_mode = "plan",
			      .to_mode = "build",
			      .origin = "socket"};
	cr_assert_eq(pw_state_record_switch(s, &r), 0);
	pw_state_close(s);
	/* As the release before left it: no columns of schema 8. */
	db_exec(dbpath, "ALTER TABLE switches DROP COLUMN outcome;"
			"ALTER TABLE switches DROP COLUMN plan;"
			"ALTER TABLE switches DROP COLUMN asked_pid;"
			"ALTER TABLE switches DROP COLUMN asked_comm;"
			"ALTER TABLE switches DROP COLUMN how;"
			"PRAGMA user_version = 7;");
	cr_assert_eq(pw_state_read_switches(dbpath, "/p", 0, 0, 0, &rows, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_null(rows[0].outcome);
	pw_switch_rows_free(rows, n);

	cr_assert_eq(pw_state_open(dbpath, &s, NULL), 0);
	cr_assert_eq(db_int(dbpath, "PRAGMA user_version"), PW_DB_SCHEMA_VERSION);
	pw_switch_record d = {.time_ns = 2000,
			      .project = "/p",
			      .from_mode = "plan",
			      .to_mode = "build",
			      .pid = 9,
			      .comm = "piworkfs",
			      .origin = "request",
			      .reason = "implement it",
			      .answered_by = "the terminal of piworkfs run (pid 9)",
			      .outcome = "denied",
			      .asked_pid = 12,
			      .asked_comm = "claude",
			      .how = "Ctrl-C"};
	cr_assert_eq(pw_state_record_switch(s, &d), 0);
	pw_switch_record a = {.time_ns = 3000,
			      .project = "/p",
			      .from_mode = "plan",
			      .to_mode = "plan",
			      .origin = "plan-approve",
			      .plan = "cache"};
	cr_assert_eq(pw_state_record_switch(s, &a), 0);
	pw_state_close(s);
	cr_assert_eq(pw_state_read_switches(dbpath, "/p", 0, 0, 0, &rows, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(rows[0].to_mode, "build");
	cr_assert_null(rows[0].outcome, "the row from before the migration stays as it was");
	cr_assert_str_eq(rows[1].outcome, "denied");
	cr_assert_str_eq(rows[1].how, "Ctrl-C");
	cr_assert_eq(rows[1].asked_pid, 12);
	cr_assert_str_eq(rows[1].asked_comm, "claude");
	cr_assert_str_eq(rows[1].answered_by, "the terminal of piworkfs run (pid 9)");
	cr_assert_null(rows[1].plan);
	cr_assert_str_eq(rows[2].plan, "cache");
	cr_assert_str_eq(rows[2].origin, "plan-approve");
	cr_assert_eq(rows[2].asked_pid, 0);
	pw_switch_rows_free(rows, n);
}

Test(state, default_path)
{
	char *p;

	setenv("PIWORKFS_STATE_DB", "/x/y.db", 1);
	setenv("XDG_STATE_HOME", "/xdg", 1);
	p = pw_state_default_path();
	cr_assert_str_eq(p, "/x/y.db");
	free(p);

	unsetenv("PIWORKFS_STATE_DB");
	p = pw_state_default_path();
	cr_assert_str_eq(p, "/xdg/piworkfs/state.db");
	free(p);

	unsetenv("XDG_STATE_HOME");
	setenv("HOME", "/home/someone", 1);
	p = pw_state_default_path();
	if (geteuid() == 0)
		cr_assert_str_eq(p, "/var/lib/piworkfs/state.db");
	else
		cr_assert_str_eq(p, "/home/someone/.local/state/piworkfs/state.db");
	free(p);
}

Test(state, readonly_open_never_creates)
{
	sqlite3 *db = NULL;

	cr_assert_eq(pw_db_open_readonly(dbpath, &db), -ENOENT);
	cr_assert_null(db);
	struct stat st;
	cr_assert_lt(stat(dbpath, &st), 0);

	pw_state *s = NULL;
	cr_assert_eq(pw_state_open(dbpath, &s, NULL), 0);
	pw_state_close(s);
	cr_assert_eq(pw_db_open_readonly(dbpath, &db), 0);
	cr_assert_neq(sqlite3_exec(db, "DELETE FROM projects", NULL, NULL, NULL), SQLITE_OK,
		      "the connection is read-only");
	sqlite3_close(db);
}
