/* SPDX-License-Identifier: MIT */
/* git's diff format for changes.diff (gitdiff.h). */
#include "gitdiff.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "quote.h"
#include "util.h"

unsigned pw_git_mode(mode_t m)
{
	if (S_ISLNK(m))
		return 0120000;
	if (S_ISDIR(m))
		return 0040000;
	if (S_ISREG(m))
		return m & S_IXUSR ? 0100755 : 0100644;
	return 0;
}

char *pw_git_label(const char *prefix, const char *path)
{
	if (!path)
		return strdup("/dev/null");
	_cleanup_free_ char *raw = NULL;
	if (asprintf(&raw, "%s%s", prefix, path) < 0)
		return NULL;
	return pw_quote(raw);
}

/* Appends the printf'd text to *BUF (a malloc'd string or NULL); false when out of memory. */
static _printf_(2, 3) bool append(char **buf, const char *fmt, ...)
{
	va_list ap;
	char *more = NULL;
	va_start(ap, fmt);
	int n = vasprintf(&more, fmt, ap);
	va_end(ap);
	if (n < 0)
		return false;
	size_t old = *buf ? strlen(*buf) : 0;
	char *b = realloc(*buf, old + (size_t)n + 1);
	if (!b) {
		free(more);
		return false;
	}
	memcpy(b + old, more, (size_t)n + 1);
	free(more);
	*buf = b;
	return true;
}

char *pw_git_header(const pw_git_side *a, const pw_git_side *b, unsigned similarity)
{
	/* git names both sides by a path even for a new or deleted file */
	const char *pa = a->path ? a->path : b->path, *pb = b->path ? b->path : a->path;
	_cleanup_free_ char *la = pw_git_label("a/", pa), *lb = pw_git_label("b/", pb);
	_cleanup_free_ char *qa = pw_quote(pa), *qb = pw_quote(pb);
	char *h = NULL;
	if (!la || !lb || !qa || !qb || !append(&h, "diff --git %s %s\n", la, lb))
		goto oom;
	if (!a->path) {
		if (!append(&h, "new file mode %06o\n", b->mode))
			goto oom;
	} else if (!b->path) {
		if (!append(&h, "deleted file mode %06o\n", a->mode))
			goto oom;
	} else {
		if (a->mode != b->mode &&
		    !append(&h, "old mode %06o\nnew mode %06o\n", a->mode, b->mode))
			goto oom;
		if (!streq(a->path, b->path) &&
		    !append(&h, "similarity index %u%%\nrename from %s\nrename to %s\n", similarity,
			    qa, qb))
			goto oom;
	}
	return h;
oom:
	free(h);
	return NULL;
}

char *pw_git_symlink_hunk(const pw_git_side *a, const char *ta, const pw_git_side *b,
			  const char *tb)
{
	_cleanup_free_ char *la = pw_git_label("a/", ta ? a->path : NULL);
	_cleanup_free_ char *lb = pw_git_label("b/", tb ? b->path : NULL);
	char *h = NULL;
	if (!la || !lb ||
	    !append(&h, "--- %s\n+++ %s\n@@ -%s +%s @@\n", la, lb, ta ? "1" : "0,0",
		    tb ? "1" : "0,0"))
		goto oom;
	if (ta && !append(&h, "-%s\n\\ No newline at end of file\n", ta))
		goto oom;
	if (tb && !append(&h, "+%s\n\\ No newline at end of file\n", tb))
		goto oom;
	return h;
oom:
	free(h);
	return NULL;
}

bool pw_git_is_cache(const char *path)
{
	/* the git directory: the last ".git" component (a nested repository's own) */
	const char *g = NULL;
	for (const char *p = path; p && *p; p = strchr(p, '/') ? strchr(p, '/') + 1 : NULL)
		if (!strncmp(p, ".git/", 5))
			g = p + 5;
	if (!g)
		return false;
	if (streq(g, "index"))
		return true;
	size_t n = strlen(g);
	bool in_sub = !strncmp(g, "worktrees/", 10) || !strncmp(g, "modules/", 8);
	return in_sub && n > 6 && streq(g + n - 6, "/index") && !strstr(g, "/refs/") &&
	       !strstr(g, "/logs/");
}
