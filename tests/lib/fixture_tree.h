/* SPDX-License-Identifier: MIT */
/*
 * Drawing a C test's fixture tree below ROOT, each step asserted (Criterion): the file REL
 * with TEXT, the directory REL with exactly MODE (whatever the umask), or a table of files.
 * The Python tests' counterpart is harness.write_tree.
 */
#pragma once

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static inline void fixture_put(const char *root, const char *rel, const char *text)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	FILE *f = fopen(p, "we");
	cr_assert_not_null(f, "create %s", p);
	cr_assert_geq(fputs(text, f), 0, "write %s", p);
	cr_assert_eq(fclose(f), 0, "close %s", p);
}

static inline void fixture_dir(const char *root, const char *rel, mode_t mode)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	cr_assert_eq(mkdir(p, mode), 0, "mkdir %s", p);
	cr_assert_eq(chmod(p, mode), 0, "chmod %s", p);
}

/* Writes FILES, a NULL-terminated list of PATH, TEXT pairs, below ROOT; the directories on
 * the way that are missing are made 0755. */
static inline void fixture_files(const char *root, const char *const *files)
{
	for (size_t i = 0; files[i]; i += 2) {
		char p[512];
		snprintf(p, sizeof(p), "%s/%s", root, files[i]);
		for (char *slash = strchr(p + strlen(root) + 1, '/'); slash;
		     slash = strchr(slash + 1, '/')) {
			*slash = '\0';
			cr_assert(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s: %m", p);
			*slash = '/';
		}
		fixture_put(root, files[i], files[i + 1]);
	}
}
