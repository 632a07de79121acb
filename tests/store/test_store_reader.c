/* SPDX-License-Identifier: MIT */
/*
 * The store's read API (fs/store/reader.h) against a database written by state.c and seeded
 * with audit rows: read-only opening, trust, last mode, and the audit query's filters,
 * orders and early stop. Each test works in its own temporary directory.
 */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "glob.h"
#include "store/state.h"
#include "store/reader.h"
#include "util.h"
#include "tmp_db.h"

static void setup(void)
{
	tmp_db_setup("reader", "state.db");
}

TestSuite(reader, .init = setup, .fini = tmp_db_teardown);

/* id: time, project, mode, op, path, path2, errno, pid */
static void seed_audit(void)
{
	pw_state *s = NULL;
	cr_assert_eq(pw_state_open(dbpath, &s, NULL), 0);
	pw_state_close(s);
	sqlite3 *db = NULL;
	cr_assert_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	const char *sql =
	    "INSERT INTO audit(time_ns, project, mode, op, path, path2, errno, pid, first_ns, "
	    "last_ns) VALUES"
	    "(100, '/p', 'plan', 'create', 'src/a.c', NULL, 30, 7, 100, 100),"
	    "(200, '/p', 'build', 'write', 'src/b.c', NULL, 0, 7, 200, 200),"
	    "(300, '/p', 'plan', 'rename', 'docs/x.md', 'src/a.c', 13, 8, 300, 300),"
	    "(400, '/q', 'plan', 'unlink', 'src/a.c', NULL, 30, 9, 400, 400);";
	cr_assert_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
	sqlite3_close(db);
}

typedef struct seen {
	int64_t ids[16];
	size_t n;
	size_t stop_after;
} seen;

static int collect(const pw_audit_row *row, void *userdata)
{
	seen *s = userdata;
	cr_assert_lt(s->n, ELEMENTSOF(s->ids));
	s->ids[s->n++] = row->id;
	return s->stop_after && s->n == s->stop_after ? 1 : 0;
}

static seen query(pw_store_reader *r, const pw_audit_filter *f)
{
	seen s = {0};
	cr_assert_eq(pw_store_audit_query(r, f, collect, &s), 0);
	return s;
}

Test(reader, missing_database)
{
	pw_store_reader *r = NULL;
	cr_assert_eq(pw_store_open_readonly(dbpath, &r), -ENOENT);
	cr_assert_null(r);
	cr_assert(access(dbpath, F_OK) < 0, "a reader never creates the database");
}

static int list_cb(const char *project, int64_t since_ns, void *userdata)
{
	char *buf = userdata;
	strcat(buf, project);
	strcat(buf, since_ns > 0 ? "+;" : "-;");
	return 0;
}

Test(reader, projects)
{
	pw_state *s = NULL;
	cr_assert_eq(pw_state_open(dbpath, &s, NULL), 0);
	cr_assert_eq(pw_state_set_trusted(s, "/b", true), 0);
	cr_assert_eq(pw_state_set_trusted(s, "/a", true), 0);
	cr_assert_eq(pw_state_set_trusted(s, "/c", false), 0);
	cr_assert_eq(pw_state_set_last_mode(s, "/a", "design"), 0);
	pw_state_close(s);

	_cleanup_(pw_store_reader_closep) pw_store_reader *r = NULL;
	cr_assert_eq(pw_store_open_readonly(dbpath, &r), 0);
	cr_assert_eq(pw_store_is_trusted(r, "/a"), 1);
	cr_assert_eq(pw_store_is_trusted(r, "/c"), 0);
	cr_assert_eq(pw_store_is_trusted(r, "/never"), 0);
	char buf[64] = "";
	cr_assert_eq(pw_store_list_trusted(r, list_cb, buf), 0);
	cr_assert_str_eq(buf, "/a+;/b+;");
	_cleanup_free_ char *m = NULL;
	cr_assert_eq(pw_store_last_mode(r, "/a", &m), 0);
	cr_assert_str_eq(m, "design");
	char *none = NULL;
	cr_assert_eq(pw_store_last_mode(r, "/b", &none), -ENOENT);
	cr_assert_null(none);
}

Test(reader, audit_filters)
{
	seed_audit();
	_cleanup_(pw_store_reader_closep) pw_store_reader *r = NULL;
	cr_assert_eq(pw_store_open_readonly(dbpath, &r), 0);

	seen s = query(r, &(pw_audit_filter){.after_id = -1});
	cr_assert_eq(s.n, 4);
	cr_assert_eq(s.ids[0], 4, "newest first");
	cr_assert_eq(s.ids[3], 1);

	s = query(r, &(pw_audit_filter){.after_id = 2});
	cr_assert_eq(s.n, 2);
	cr_assert_eq(s.ids[0], 3, "after an id: oldest first");

	s = query(r, &(pw_audit_filter){.denied = true, .project = "/p", .after_id = -1});
	cr_assert_eq(s.n, 2);
	s = query(r, &(pw_audit_filter){.mode = "build", .after_id = -1});
	cr_assert(s.n == 1 && s.ids[0] == 2);
	s = query(r, &(pw_audit_filter){.path_eq = "src/a.c", .after_id = -1});
	cr_assert_eq(s.n, 3, "path or path2");
	s = query(r, &(pw_audit_filter){.has_pid = true, .pid = 7, .after_id = -1});
	cr_assert_eq(s.n, 2);
	s = query(r, &(pw_audit_filter){.has_since = true, .since_ns = 300, .after_id = -1});
	cr_assert_eq(s.n, 2);

	pw_glob *g = NULL;
	cr_assert_eq(pw_glob_compile("docs/**", &g, NULL), 0);
	s = query(r, &(pw_audit_filter){.path_glob = g, .after_id = -1});
	cr_assert(s.n == 1 && s.ids[0] == 3);
	pw_glob_free(g);

	seen stop = {.stop_after = 2};
	cr_assert_eq(pw_store_audit_query(r, &(pw_audit_filter){.after_id = -1}, collect, &stop),
		     0);
	cr_assert_eq(stop.n, 2, "the callback stops the walk");

	int64_t max = 0;
	cr_assert_eq(pw_store_audit_max_id(r, &max), 0);
	cr_assert_eq(max, 4);
}

static int keep_thread(const pw_audit_row *row, void *userdata)
{
	char *out = userdata;
	snprintf(out, 32, "%s", row->thread ? row->thread : "(null)");
	return 1;
}

/* A row's thread name (schema 7) reads back; a database no daemon has brought to schema 7
 * (read-only here: never migrated) still reads, with no thread. */
Test(reader, audit_thread_and_a_store_before_schema_7)
{
	seed_audit();
	sqlite3 *db = NULL;
	cr_assert_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "UPDATE audit SET thread = 'libuv-worker' WHERE id = 4", NULL,
				  NULL, NULL),
		     SQLITE_OK, "%s", sqlite3_errmsg(db));
	sqlite3_close(db);
	char thread[32] = "";
	pw_store_reader *r = NULL;
	cr_assert_eq(pw_store_open_readonly(dbpath, &r), 0);
	cr_assert_eq(
	    pw_store_audit_query(r, &(pw_audit_filter){.after_id = -1}, keep_thread, thread), 0);
	cr_assert_str_eq(thread, "libuv-worker");
	pw_store_reader_close(r);

	cr_assert_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db,
				  "ALTER TABLE audit DROP COLUMN thread; "
				  "PRAGMA user_version = 6;",
				  NULL, NULL, NULL),
		     SQLITE_OK, "%s", sqlite3_errmsg(db));
	sqlite3_close(db);
	cr_assert_eq(pw_store_open_readonly(dbpath, &r), 0);
	seen s = query(r, &(pw_audit_filter){.after_id = -1});
	cr_assert_eq(s.n, 4);
	cr_assert_eq(
	    pw_store_audit_query(r, &(pw_audit_filter){.after_id = -1}, keep_thread, thread), 0);
	cr_assert_str_eq(thread, "(null)");
	pw_store_reader_close(r);
}
