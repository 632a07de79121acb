/* SPDX-License-Identifier: MIT */
/*
 * The fixture of the state database's tests (tests/store): a private temp dir per test,
 * pw-test-NAME-XXXXXX (tests/lib/testdir.h says where), with the database's path in it; the
 * dir goes whole afterwards.
 * And the one number a query gives, read on a connection of its own. A header of static
 * functions, included once by each test file.
 */
#pragma once

#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../lib/testdir.h"

static char tmpdir[256];
static char dbpath[512];

/* Makes the temp dir for the suite NAME; DB is the database's path inside it. */
static inline void tmp_db_setup(const char *name, const char *db)
{
	char base[64];
	snprintf(base, sizeof(base), "pw-test-%s", name);
	testdir_make(tmpdir, sizeof(tmpdir), base);
	snprintf(dbpath, sizeof(dbpath), "%s/%s", tmpdir, db);
}

/* Removes the temp dir and all in it. */
static inline void tmp_db_teardown(void)
{
	testdir_remove(tmpdir);
}

/* The integer the first row of SQL holds in the database at PATH, opened read-only (waiting
 * up to 5 s for another connection's lock). */
/* Runs SQL on the database at PATH over a plain connection of its own (what another
 * program, or another release of piworkfs, would do to the file); it must succeed. */
static inline void db_exec(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK, "%s: %s", sql,
		     sqlite3_errmsg(db));
	sqlite3_close(db);
}

static inline int64_t db_int(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	sqlite3_stmt *st = NULL;
	cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql,
		     sqlite3_errmsg(db));
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
	int64_t v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}
