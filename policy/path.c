/* SPDX-License-Identifier: MIT */
/*
 * Lexical path normalization.
 *
 * The input is scanned from right to left: a '..' increments a skip count and the next
 * ordinary component to its left is dropped. This resolves '..' exactly as a left-to-right
 * stack would (a '..' left over at the end is one that climbed above the root), but it only
 * ever stores the components that survive, so the limits apply to the result and never to
 * an intermediate state such as "long/../" that a stack would have to hold first.
 * Every component is checked against PW_NAME_MAX, including ones a later '..' removes: the
 * kernel would refuse such a name too. There is no separate cap on the number of components:
 * the length bounds it (each takes at least two bytes with its slash), and the kernel
 * accepts a path of PATH_MAX bytes however many components it has.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "pw_limits.h"
#include "path.h"

static void set_err(const char **ret_err, const char *msg)
{
	if (ret_err)
		*ret_err = msg;
}

static bool is_dot(const char *s, size_t n)
{
	return n == 1 && s[0] == '.';
}

static bool is_dotdot(const char *s, size_t n)
{
	return n == 2 && s[0] == '.' && s[1] == '.';
}

int pw_path_normalize(const char *in, size_t len, char *out, const char **ret_err)
{
	/* The result is assembled at the end of buf, growing leftwards. */
	char buf[PW_PATH_MAX];
	size_t pos = PW_PATH_MAX - 1;
	size_t kept = 0, skip = 0;
	size_t e = len;

	if (len > 0 && memchr(in, '\0', len)) {
		set_err(ret_err, "path contains a NUL byte");
		return -EINVAL;
	}
	buf[pos] = '\0';

	while (e > 0) {
		size_t s, n;

		while (e > 0 && in[e - 1] == '/')
			e--;
		s = e;
		while (s > 0 && in[s - 1] != '/')
			s--;
		n = e - s;
		if (n == 0)
			break;
		if (n > PW_NAME_MAX) {
			set_err(ret_err, "path component longer than PW_NAME_MAX");
			return -ENAMETOOLONG;
		}
		if (is_dot(in + s, n)) {
			/* nothing */
		} else if (is_dotdot(in + s, n)) {
			skip++;
		} else if (skip > 0) {
			skip--;
		} else {
			size_t need = n + (kept > 0 ? 1 : 0);

			if (need > pos) {
				set_err(ret_err, "path longer than PW_PATH_MAX");
				return -ENAMETOOLONG;
			}
			if (kept > 0)
				buf[--pos] = '/';
			pos -= n;
			memcpy(buf + pos, in + s, n);
			kept++;
		}
		e = s;
	}

	if (skip > 0) {
		set_err(ret_err, "path climbs above the project root");
		return -EXDEV;
	}
	memcpy(out, buf + pos, PW_PATH_MAX - pos);
	return 0;
}

int pw_path_is_normal(const char *p)
{
	const char *s = p;

	if (!p)
		return false;
	if (*p == '\0')
		return true;
	if (strnlen(p, PW_TREE_PATH_MAX) >= PW_TREE_PATH_MAX)
		return false;

	for (;;) {
		const char *e = strchrnul(s, '/');
		size_t n = (size_t)(e - s);

		if (n == 0 || n > PW_NAME_MAX || is_dot(s, n) || is_dotdot(s, n))
			return false;
		if (*e == '\0')
			return true;
		s = e + 1;
	}
}

long pw_path_beneath(const char *path, const char *root)
{
	size_t n = strlen(root);
	while (n > 0 && root[n - 1] == '/')
		n--;
	if (path[0] != '/' || root[0] != '/')
		return -EINVAL;
	if (n == 0) /* the root is "/": everything after the first '/' */
		return 1;
	if (strncmp(path, root, n) != 0)
		return -EXDEV;
	if (path[n] == '\0')
		return (long)n;
	if (path[n] == '/')
		return (long)n + 1;
	return -EXDEV;
}

bool pw_relpath_beneath(const char *path, const char *top)
{
	size_t n = strlen(top);
	if (!path)
		return false;
	if (n == 0)
		return true;
	return strncmp(path, top, n) == 0 && (path[n] == '\0' || path[n] == '/');
}
