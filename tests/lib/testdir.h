/* SPDX-License-Identifier: MIT */
/*
 * A C test's private scratch directory: made fresh for each test, removed whole after it.
 *
 * Where: under $PW_TEST_TMPDIR when set, else /dev/shm when it is a writable tmpfs, else
 * /tmp. A tmpfs because the unit tests open fresh SQLite databases by the hundred (a state
 * database per test: WAL, migrations, checkpoints), and on a disk their fsyncs were a third
 * of the suite's time; what these tests check is the store's logic, and the mount tests run
 * on the disk. Removed without a shell: a fork and exec of `rm -rf` per test was another
 * tenth.
 */
#pragma once

#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

static inline const char *testdir_base(void)
{
	const char *env = getenv("PW_TEST_TMPDIR");
	if (env && *env)
		return env;
	struct statfs sf;
	if (statfs("/dev/shm", &sf) == 0 && sf.f_type == TMPFS_MAGIC &&
	    access("/dev/shm", W_OK | X_OK) == 0)
		return "/dev/shm";
	return "/tmp";
}

/* Makes BUF (SIZE bytes) a fresh directory named NAME-XXXXXX there; asserts. */
static inline void testdir_make(char *buf, size_t size, const char *name)
{
	int n = snprintf(buf, size, "%s/%s-XXXXXX", testdir_base(), name);
	cr_assert(n > 0 && (size_t)n < size, "scratch dir name too long: %s", name);
	cr_assert_not_null(mkdtemp(buf), "mkdtemp %s: %s", buf, strerror(errno));
}

/* Tests make read-only directories (a project's private folder, the undo room's state):
 * each is made searchable and writable by its owner before what it holds is removed. */
static inline int testdir_open_up(const char *path, const struct stat *st, int type,
				  struct FTW *ftw)
{
	(void)ftw;
	if (type == FTW_D || type == FTW_DNR)
		(void)chmod(path, (st->st_mode & 07777) | S_IRWXU);
	return 0;
}

static inline int testdir_unlink(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return (type == FTW_DP ? rmdir(path) : unlink(path)) == 0 ? 0 : errno;
}

/* Removes DIR and everything in it (never following a symlink, never leaving its
 * filesystem); asserts. */
static inline void testdir_remove(const char *dir)
{
	(void)nftw(dir, testdir_open_up, 16, FTW_PHYS | FTW_MOUNT);
	int r = nftw(dir, testdir_unlink, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	cr_assert_eq(r, 0, "removing %s: %s", dir, strerror(r > 0 ? r : errno));
}
