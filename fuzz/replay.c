/* SPDX-License-Identifier: MIT */
/*
 * Replays fuzz inputs without a fuzzing engine: every regular file in each directory
 * argument (or each file argument) goes once through LLVMFuzzerTestOneInput, in name
 * order. tests/fuzz/meson.build runs it over tests/fuzz/<parser>/, so each input that
 * once found a bug stays a regression test. Exits non-zero when an argument cannot be
 * read or when no input was found at all (an empty corpus would test nothing).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "util.h"

/* Inputs larger than this are not fuzz seeds; refuse rather than allocate blindly. */
#define REPLAY_INPUT_MAX (4 * 1024 * 1024)

static int read_all(int dirfd, const char *name, uint8_t **ret, size_t *ret_size)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ uint8_t *buf = NULL;
	struct stat st;

	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return negative_errno();
	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (!S_ISREG(st.st_mode))
		return -EISDIR;
	if (st.st_size > REPLAY_INPUT_MAX)
		return -EFBIG;
	/* One spare byte so an empty file still gets a valid pointer. */
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return -ENOMEM;
	ssize_t got = pw_read_upto(fd, buf, (size_t)st.st_size);
	if (got < 0)
		return (int)got;
	*ret = TAKE_PTR(buf);
	*ret_size = (size_t)got;
	return 0;
}

static int run_one(int dirfd, const char *name, const char *label)
{
	_cleanup_free_ uint8_t *data = NULL;
	size_t size = 0;
	int r;

	r = read_all(dirfd, name, &data, &size);
	if (r < 0) {
		fprintf(stderr, "replay: %s: %s\n", label, strerror(-r));
		return r;
	}
	fprintf(stderr, "replay: %s (%zu bytes)\n", label, size);
	LLVMFuzzerTestOneInput(data, size);
	return 0;
}

static void free_namelist(struct dirent **list, int n)
{
	for (int i = 0; i < n; i++)
		free(list[i]);
	free(list);
}

static int select_visible(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

/* Replays DIR's entries; returns how many, or -errno. */
static int run_dir(const char *dir)
{
	_cleanup_close_ int dfd = -1;
	struct dirent **list = NULL;
	int n, count = 0, r = 0;

	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return negative_errno();
	n = scandirat(dfd, ".", &list, select_visible, alphasort);
	if (n < 0)
		return negative_errno();
	for (int i = 0; i < n && r >= 0; i++) {
		char label[4096];

		snprintf(label, sizeof(label), "%s/%s", dir, list[i]->d_name);
		r = run_one(dfd, list[i]->d_name, label);
		count++;
	}
	free_namelist(list, n);
	return r < 0 ? r : count;
}

int main(int argc, char **argv)
{
	int total = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;
		int r;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (S_ISDIR(st.st_mode))
			r = run_dir(argv[i]);
		else
			r = run_one(AT_FDCWD, argv[i], argv[i]) < 0 ? -EIO : 1;
		if (r < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(-r));
			return 1;
		}
		total += r;
	}
	if (total == 0) {
		fprintf(stderr, "replay: no inputs found\n");
		return 1;
	}
	fprintf(stderr, "replay: %d inputs, no crash\n", total);
	return 0;
}
