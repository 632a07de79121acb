/* SPDX-License-Identifier: MIT */
/* Tests of pw_path_normalize and pw_path_is_normal: a table of exact outcomes plus limits. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "pw_limits.h"
#include "path.h"

struct norm_case {
	const char *in;
	int ret;
	const char *out;
};

static const struct norm_case norm_cases[] = {
    {"", 0, ""},
    {"/", 0, ""},
    {"//", 0, ""},
    {".", 0, ""},
    {"./", 0, ""},
    {"/./.", 0, ""},
    {"a", 0, "a"},
    {"/a", 0, "a"},
    {"a/", 0, "a"},
    {"a//b", 0, "a/b"},
    {"///a///b///", 0, "a/b"},
    {"a/./b/.", 0, "a/b"},
    {"a/b/..", 0, "a"},
    {"a/b/../c", 0, "a/c"},
    {"a/../b/../c", 0, "c"},
    {"a/..", 0, ""},
    {"a/b/../../c/d/..", 0, "c"},
    {"/a/../", 0, ""},
    {"..", -EXDEV, NULL},
    {"/..", -EXDEV, NULL},
    {"../a", -EXDEV, NULL},
    {"a/../..", -EXDEV, NULL},
    {"a/../../b", -EXDEV, NULL},
    {"a/b/../../../c/d", -EXDEV, NULL},
    {"./..", -EXDEV, NULL},
    {"...", 0, "..."},
    {"a/.../b", 0, "a/.../b"},
    {".hidden/..x/x..", 0, ".hidden/..x/x.."},
    {"a/.b/..c", 0, "a/.b/..c"},
    {"\xc3\xa9t\xc3\xa9/caf\xc3\xa9", 0, "\xc3\xa9t\xc3\xa9/caf\xc3\xa9"},
};

Test(path, table)
{
	for (size_t i = 0; i < sizeof(norm_cases) / sizeof(norm_cases[0]); i++) {
		const struct norm_case *c = &norm_cases[i];
		char out[PW_PATH_MAX];
		const char *err = NULL;
		int r;

		strcpy(out, "untouched");
		r = pw_path_normalize(c->in, strlen(c->in), out, &err);
		cr_assert_eq(r, c->ret, "normalize(\"%s\") = %d, want %d", c->in, r, c->ret);
		if (r == 0) {
			cr_assert_str_eq(out, c->out, "normalize(\"%s\")", c->in);
			cr_assert(pw_path_is_normal(out), "\"%s\" should be normal", out);
		} else {
			cr_assert_not_null(err, "no message for \"%s\"", c->in);
			cr_assert_str_eq(out, "untouched", "out written on failure for \"%s\"",
					 c->in);
		}
	}
}

Test(path, embedded_nul)
{
	char out[PW_PATH_MAX];
	const char *err = NULL;

	cr_assert_eq(pw_path_normalize("a\0b", 3, out, &err), -EINVAL);
	cr_assert_not_null(err);
	/* Bytes past LEN are not looked at. */
	cr_assert_eq(pw_path_normalize("ab\0c", 2, out, NULL), 0);
	cr_assert_str_eq(out, "ab");
	cr_assert_eq(pw_path_normalize("a/b/", 1, out, NULL), 0);
	cr_assert_str_eq(out, "a");
	cr_assert_eq(pw_path_normalize("\0", 1, out, NULL), -EINVAL);
}

Test(path, in_place)
{
	char buf[PW_PATH_MAX] = "/x/./y/../z//";

	cr_assert_eq(pw_path_normalize(buf, strlen(buf), buf, NULL), 0);
	cr_assert_str_eq(buf, "x/z");
}

Test(path, name_max)
{
	char in[PW_NAME_MAX + 8], out[PW_PATH_MAX];
	const char *err = NULL;

	memset(in, 'n', PW_NAME_MAX);
	cr_assert_eq(pw_path_normalize(in, PW_NAME_MAX, out, NULL), 0);
	cr_assert_eq(strlen(out), PW_NAME_MAX);
	memset(in, 'n', PW_NAME_MAX + 1);
	cr_assert_eq(pw_path_normalize(in, PW_NAME_MAX + 1, out, &err), -ENAMETOOLONG);
	cr_assert_not_null(err);
	/* Checked even when a later '..' would remove the component. */
	memcpy(in + PW_NAME_MAX + 1, "/..", 3);
	cr_assert_eq(pw_path_normalize(in, PW_NAME_MAX + 4, out, NULL), -ENAMETOOLONG);
}

/* Builds N components "c/c/.../c" of width W into buf, returns the length. */
static size_t build(char *buf, size_t n, size_t w)
{
	size_t len = 0;

	for (size_t i = 0; i < n; i++) {
		if (i)
			buf[len++] = '/';
		memset(buf + len, 'c', w);
		len += w;
	}
	buf[len] = '\0';
	return len;
}

Test(path, path_max)
{
	static char in[4 * PW_PATH_MAX], out[PW_PATH_MAX];
	size_t len;

	/* 16 components of 255 bytes + 15 slashes = 4095 = PW_PATH_MAX - 1: fits. */
	len = build(in, 16, 255);
	cr_assert_eq(len, PW_PATH_MAX - 1);
	cr_assert_eq(pw_path_normalize(in, len, out, NULL), 0);
	cr_assert_eq(strlen(out), PW_PATH_MAX - 1);
	cr_assert(pw_path_is_normal(out));

	/* One more byte does not. */
	memcpy(in + len, "/x", 3);
	cr_assert_eq(pw_path_normalize(in, len + 2, out, NULL), -ENAMETOOLONG);

	/* The limit applies to the result, not the input: a long detour that '..' undoes. */
	len = build(in, 20, 255);
	for (int i = 0; i < 10; i++) {
		memcpy(in + len, "/..", 3);
		len += 3;
	}
	in[len] = '\0';
	cr_assert_gt(len, PW_PATH_MAX);
	cr_assert_eq(pw_path_normalize(in, len, out, NULL), 0);
	cr_assert_eq(strlen(out), 10 * 255 + 9);
}

Test(path, depth_is_bounded_by_length_only)
{
	static char in[4 * PW_PATH_MAX], out[PW_PATH_MAX];
	size_t len;

	/* 2048 one-byte components = 4095 bytes, the most the kernel takes in one path: fits,
	 * however many components that is. */
	len = build(in, PW_PATH_MAX / 2, 1);
	cr_assert_eq(len, PW_PATH_MAX - 1);
	cr_assert_eq(pw_path_normalize(in, len, out, NULL), 0);
	cr_assert_str_eq(out, in);
	cr_assert(pw_path_is_normal(out));
	len = build(in, PW_PATH_MAX / 2 + 1, 1);
	cr_assert_eq(pw_path_normalize(in, len, out, NULL), -ENAMETOOLONG);
}

/* The view's own paths (built from names, fs/) are normal up to PW_TREE_PATH_MAX. */
Test(path, is_normal_up_to_the_tree_limit)
{
	static char in[PW_TREE_PATH_MAX + 2];
	size_t len = build(in, PW_TREE_PATH_MAX / 2, 1); /* PW_TREE_PATH_MAX - 1 bytes */

	cr_assert_eq(len, PW_TREE_PATH_MAX - 1);
	cr_assert(pw_path_is_normal(in));
	len = build(in, 20, 255); /* longer than PATH_MAX */
	cr_assert_gt(len, PW_PATH_MAX);
	cr_assert(pw_path_is_normal(in));
	len = build(in, PW_TREE_PATH_MAX / 2 + 1, 1); /* PW_TREE_PATH_MAX + 1 bytes */
	cr_assert_not(pw_path_is_normal(in));
}

Test(path, is_normal)
{
	static char long_name[PW_NAME_MAX + 2];

	cr_assert(pw_path_is_normal(""));
	cr_assert(pw_path_is_normal("a"));
	cr_assert(pw_path_is_normal("a/b/c"));
	cr_assert(pw_path_is_normal(".git/hooks"));
	cr_assert(pw_path_is_normal("a/..b/...c"));
	cr_assert_not(pw_path_is_normal(NULL));
	cr_assert_not(pw_path_is_normal("/"));
	cr_assert_not(pw_path_is_normal("/a"));
	cr_assert_not(pw_path_is_normal("a/"));
	cr_assert_not(pw_path_is_normal("a//b"));
	cr_assert_not(pw_path_is_normal("."));
	cr_assert_not(pw_path_is_normal(".."));
	cr_assert_not(pw_path_is_normal("a/./b"));
	cr_assert_not(pw_path_is_normal("a/../b"));
	cr_assert_not(pw_path_is_normal("a/.."));
	memset(long_name, 'x', PW_NAME_MAX + 1);
	cr_assert_not(pw_path_is_normal(long_name));
	long_name[PW_NAME_MAX] = '\0';
	cr_assert(pw_path_is_normal(long_name));
}

Test(path, beneath)
{
	static const struct {
		const char *path, *root;
		long off;
	} t[] = {
	    {"/a/b", "/a/b", 4},    {"/a/b/c", "/a/b", 5},
	    {"/a/b/c", "/a/b/", 5}, {"/a/bc", "/a/b", -EXDEV},
	    {"/a", "/a/b", -EXDEV}, {"/x", "/", 1},
	    {"/", "/", 1},	    {"/", "//", 1},
	    {"a/b", "/a", -EINVAL}, {"/a/b", "a", -EINVAL},
	    {"/a//b", "/a", 3},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		cr_assert_eq(pw_path_beneath(t[i].path, t[i].root), t[i].off, "%s under %s",
			     t[i].path, t[i].root);
}

Test(path, relpath_beneath)
{
	static const struct {
		const char *path, *root;
		bool beneath;
		const char *why;
	} t[] = {
	    {"a/b", "a/b", true, ""},
	    {"a/b/c", "a/b", true, ""},
	    {"a/b", "", true, "the root is above every path"},
	    {"", "", true, ""},
	    {"a/bc", "a/b", false, ""},
	    {"a", "a/b", false, ""},
	    {"b/a", "a", false, ""},
	    {"", "a", false, ""},
	    {NULL, "", false, "a NULL path is beneath nothing"},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		cr_assert_eq(pw_relpath_beneath(t[i].path, t[i].root), t[i].beneath,
			     "%s under \"%s\" %s", t[i].path ? t[i].path : "NULL", t[i].root,
			     t[i].why);
}
