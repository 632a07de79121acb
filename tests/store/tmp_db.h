/* SPDX-License-Identifier: MIT */
/*
 * The fixture of the state database's tests (tests/store): a private temp dir per test,
 * /tmp/pw-test-NAME-XXXXXX, with the database's path in it; the dir goes whole afterwards.
 * A header of static functions, included once by each test file.
 */
#pragma once

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

static char tmpdir[256];
static char dbpath[512];

/* Makes the temp dir for the suite NAME; DB is the database's path inside it. */
static inline void tmp_db_setup(const char *name, const char *db)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/pw-test-%s-XXXXXX", name);
	cr_assert_not_null(mkdtemp(tmpdir));
	snprintf(dbpath, sizeof(dbpath), "%s/%s", tmpdir, db);
}

/* Removes the temp dir and all in it. */
static inline void tmp_db_teardown(void)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	cr_assert_eq(system(cmd), 0);
}
