/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for policy/glob.c. The input is "pattern" NUL-or-newline "path". Besides
 * looking for crashes, leaks and undefined behaviour, it checks two properties and aborts
 * when they fail:
 *   - the fast paths agree with the general simulation: wrapping every alphanumeric byte
 *     in a class ("a" -> "[a]") names the same set of paths but defeats every fast path;
 *   - pw_glob_match_tree on a normalized path equals matching the path or one of its
 *     ancestor directories.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "glob.h"
#include "pw_limits.h"
#include "path.h"
#include "util.h"

/* Copies DATA[0..N) into a fresh NUL-terminated string, cut at any embedded NUL. */
static char *dup_str(const uint8_t *data, size_t n)
{
	char *s = malloc(n + 1);

	if (!s)
		return NULL;
	memcpy(s, data, n);
	s[n] = '\0';
	return s;
}

/* Builds the slow equivalent of PATTERN, or NULL when the rewrite is not obviously exact. */
static char *slow_variant(const char *pattern)
{
	size_t len = strlen(pattern), n = 0;
	char *out;

	if (strpbrk(pattern, "[\\"))
		return NULL;
	out = malloc(3 * len + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		char c = pattern[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
			out[n++] = '[';
			out[n++] = c;
			out[n++] = ']';
		} else {
			out[n++] = c;
		}
	}
	out[n] = '\0';
	return out;
}

static void check_slow_variant(const pw_glob *g, const char *pattern, const char *path)
{
	_cleanup_free_ char *slow = slow_variant(pattern);
	pw_glob *h = NULL;

	if (!slow || pw_glob_compile(slow, &h, NULL) < 0)
		return;
	for (int d = 0; d < 2; d++) {
		if (pw_glob_match(g, path, d) != pw_glob_match(h, path, d))
			abort();
		if (pw_glob_match_tree(g, path, d) != pw_glob_match_tree(h, path, d))
			abort();
	}
	pw_glob_free(h);
}

static void check_tree(const pw_glob *g, const char *path)
{
	_cleanup_free_ char *anc = NULL;
	size_t len = strlen(path);

	if (!pw_path_is_normal(path))
		return;
	anc = malloc(len + 1);
	if (!anc)
		return;
	for (int d = 0; d < 2; d++) {
		bool expect = pw_glob_match(g, path, d);

		for (size_t k = 0; k < len && !expect; k++) {
			if (path[k] != '/')
				continue;
			memcpy(anc, path, k);
			anc[k] = '\0';
			expect = pw_glob_match(g, anc, true);
		}
		if (pw_glob_match_tree(g, path, d) != expect)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *pattern = NULL, *path = NULL;
	const uint8_t *sep;
	size_t plen;
	pw_glob *g = NULL;
	const char *err = NULL;

	/* Longer inputs add nothing the caps do not already reject. */
	if (size > 2 * PW_PATH_MAX)
		return 0;
	sep = memchr(data, '\0', size);
	{
		const uint8_t *nl = memchr(data, '\n', size);

		if (!sep || (nl && nl < sep))
			sep = nl;
	}
	plen = sep ? (size_t)(sep - data) : size;
	pattern = dup_str(data, plen);
	path = sep ? dup_str(sep + 1, size - plen - 1) : dup_str((const uint8_t *)"", 0);
	if (!pattern || !path)
		return 0;

	if (pw_glob_compile(pattern, &g, &err) < 0) {
		if (!err)
			abort(); /* every failure carries a message */
		return 0;
	}
	if (strcmp(pw_glob_pattern(g), pattern) != 0)
		abort();
	for (int d = 0; d < 2; d++) {
		(void)pw_glob_match(g, path, d);
		(void)pw_glob_match_tree(g, path, d);
	}
	check_slow_variant(g, pattern, path);
	check_tree(g, path);
	pw_glob_free(g);
	return 0;
}
