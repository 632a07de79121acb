/* SPDX-License-Identifier: MIT */
/*
 * Tests of the glob matcher: a table of exact outcomes, compile errors, pathological
 * patterns under a bound on the work counted, and randomized properties (the fast paths agree with
 * the general simulation; match_tree equals "the path or an ancestor matches").
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "glob.h"
#include "pw_limits.h"

enum { FILE_ = 0, DIR_ = 1 };

struct match_case {
	const char *pattern;
	const char *path;
	bool is_dir;
	bool match;
	bool tree; /* expected pw_glob_match_tree */
};

/* Each row: pattern, path, is_dir, pw_glob_match, pw_glob_match_tree. */
static const struct match_case cases[] = {
    /* literals */
    {"a", "a", FILE_, true, true},
    {"a", "b", FILE_, false, false},
    {"a", "ab", FILE_, false, false},
    {"ab", "a", FILE_, false, false},
    {"a/b", "a/b", FILE_, true, true},
    {"a/b", "a/bc", FILE_, false, false},
    {"a/b", "a/b/c", FILE_, false, true},
    {"a", "a/b/c", FILE_, false, true},
    {".git/config", ".git/config", FILE_, true, true},
    /* a slash anchors at the root: a leading one only anchors, repeated ones collapse */
    {"/a/b", "a/b", FILE_, true, true},
    {"//a//b", "a/b", FILE_, true, true},
    {"/a", "b/a", FILE_, false, false},
    /* no slash but a trailing one: a name at any depth, as in gitignore */
    {"a", "b/a", FILE_, true, true},
    {"a", "b/a/c", FILE_, false, true},
    {"*.pem", "sub/b.pem", FILE_, true, true},
    {"*.pem", "a/b/c/d.pem", FILE_, true, true},
    {"*.pem", "a/keys.pem/x", FILE_, false, true},
    {".env", "deep/dir/.env", FILE_, true, true},
    {"secret?", "x/secret1/y", FILE_, false, true},
    {"[ab].c", "d/a.c", FILE_, true, true},
    {"node_modules", "a/node_modules/p/i.js", FILE_, false, true},
    {"\\*", "d/*", FILE_, true, true},
    /* '*' within one segment; dotfiles included */
    {"*", "a", FILE_, true, true},
    {"*", ".env", FILE_, true, true},
    {"*", "a/b", FILE_, true, true},
    {"*.c", "x.c", FILE_, true, true},
    {"*.c", ".c", FILE_, true, true},
    {"*.c", "d/x.c", FILE_, true, true},
    {"*.c", "x.h", FILE_, false, false},
    {"src/*.c", "src/x.c", FILE_, true, true},
    {"src/*.c", "src/a/x.c", FILE_, false, false},
    {"src/*", "src/.hidden", FILE_, true, true},
    {"src/*", "src", DIR_, false, false},
    {"src/*", "src/a/b", FILE_, false, true},
    {".env*", ".env.local", FILE_, true, true},
    {".env*", "a/.env", FILE_, true, true},
    {"a*b", "ab", FILE_, true, true},
    {"a*b", "axxb", FILE_, true, true},
    {"a*b", "ax/b", FILE_, false, false},
    {"a*b", "x/axxb", FILE_, true, true},
    {"a*b*c", "abbbc", FILE_, true, true},
    {"a*b*c", "acb", FILE_, false, false},
    {"a**b", "axyb", FILE_, true, true},
    {"a**b", "ax/yb", FILE_, false, false},
    {"*/*", "a/b", FILE_, true, true},
    {"*/*", "a", DIR_, false, false},
    /* '?' */
    {"?", "a", FILE_, true, true},
    {"?", "ab", FILE_, false, false},
    {"a?c", "abc", FILE_, true, true},
    {"a?c", "a/c", FILE_, false, false},
    {"??", ".x", FILE_, true, true},
    /* '**' at the start, zero segments included */
    {"**/x", "x", FILE_, true, true},
    {"**/x", "a/x", FILE_, true, true},
    {"**/x", "a/b/c/x", FILE_, true, true},
    {"**/x", "ax", FILE_, false, false},
    {"**/x", "x/y", FILE_, false, true},
    {"**/x", "a/x/y/z", FILE_, false, true},
    {"**/.env", "deep/dir/.env", FILE_, true, true},
    {"**/*.pem", "keys/a.pem", FILE_, true, true},
    {"**/*.pem", "a.pem", FILE_, true, true},
    {"**/*.pem", "a.pem/x", FILE_, false, true},
    /* '**' in the middle */
    {"a/**/b", "a/b", FILE_, true, true},
    {"a/**/b", "a/x/b", FILE_, true, true},
    {"a/**/b", "a/x/y/b", FILE_, true, true},
    {"a/**/b", "a/xb", FILE_, false, false},
    {"a/**/b", "ab", FILE_, false, false},
    {"a/**/b", "a/b/c", FILE_, false, true},
    {"a/**/b", "x/a/b", FILE_, false, false},
    {"a/**/b/**/c", "a/b/c", FILE_, true, true},
    {"a/**/b/**/c", "a/1/b/2/3/c", FILE_, true, true},
    {"a/**/**/b", "a/b", FILE_, true, true},
    /* '**' at the end: everything under, not the directory itself */
    {"a/**", "a/b", FILE_, true, true},
    {"a/**", "a/b/c/d", FILE_, true, true},
    {"a/**", "a", DIR_, false, false},
    {"a/**", "ab/c", FILE_, false, false},
    {"docs/design/**", "docs/design/x.md", FILE_, true, true},
    {"docs/design/**", "docs/designs/x.md", FILE_, false, false},
    {"docs/design/**", "docs", DIR_, false, false},
    {".git/hooks/**", ".git/hooks/pre-commit", FILE_, true, true},
    /* '**' alone and other '**' only patterns: everything, the root included */
    {"**", "a", FILE_, true, true},
    {"**", "a/b/c", DIR_, true, true},
    {"**", ".git", DIR_, true, true},
    {"**", "", DIR_, true, true},
    {"**/**", "a/b", FILE_, true, true},
    {"/**", "x", FILE_, true, true},
    {"*", "", DIR_, false, false},
    {"a", "", DIR_, false, false},
    /* classes, ranges, negation */
    {"[abc]", "b", FILE_, true, true},
    {"[abc]", "d", FILE_, false, false},
    {"[a-c]x", "cx", FILE_, true, true},
    {"[a-c]x", "dx", FILE_, false, false},
    {"[!a-c]", "d", FILE_, true, true},
    {"[!a-c]", "b", FILE_, false, false},
    {"[^a-c]", "d", FILE_, true, true},
    {"[^a-c]", "a", FILE_, false, false},
    {"a[/]b", "a/b", FILE_, false, false},
    {"a[!x]b", "a/b", FILE_, false, false},
    {"a[^x]b", "a/b", FILE_, false, false},
    {"[]]", "]", FILE_, true, true},
    {"[]a]", "a", FILE_, true, true},
    {"[!]]", "]", FILE_, false, false},
    {"[!]]", "x", FILE_, true, true},
    {"[a-]", "-", FILE_, true, true},
    {"[-a]", "-", FILE_, true, true},
    {"[0-9][0-9]", "42", FILE_, true, true},
    {"[[:digit:]]x", "7x", FILE_, true, true},
    {"[[:digit:]]x", "ax", FILE_, false, false},
    {"[![:upper:]]", "a", FILE_, true, true},
    {"[![:upper:]]", "A", FILE_, false, false},
    {"[[]", "[", FILE_, true, true},
    {"[\\]]", "]", FILE_, true, true},
    {"[a\\-z]", "-", FILE_, true, true},
    {"[a\\-z]", "b", FILE_, false, false},
    /* escapes */
    {"\\*", "*", FILE_, true, true},
    {"\\*", "a", FILE_, false, false},
    {"\\?", "?", FILE_, true, true},
    {"\\?", "a", FILE_, false, false},
    {"\\[a]", "[a]", FILE_, true, true},
    {"\\[a]", "a", FILE_, false, false},
    {"a\\\\b", "a\\b", FILE_, true, true},
    {"\\a", "a", FILE_, true, true},
    {"\\*\\*/x", "**/x", FILE_, true, true},
    {"\\*\\*/x", "y/x", FILE_, false, false},
    {"a\\/b", "a/b", FILE_, true, true},
    /* trailing '/': directories only; ancestors are directories */
    {"build/", "build", DIR_, true, true},
    {"build/", "build", FILE_, false, false},
    {"build/", "build/x.o", FILE_, false, true},
    {"build/", "src/build", DIR_, true, true},
    {"build/", "src/build/x.o", FILE_, false, true},
    {"**/node_modules/", "a/node_modules", DIR_, true, true},
    {"**/node_modules/", "a/node_modules", FILE_, false, false},
    {"**/node_modules/", "a/node_modules/p/i.js", FILE_, false, true},
    {"*/", "a", DIR_, true, true},
    {"*/", "a", FILE_, false, false},
    {"*/", "a/b", FILE_, false, true},
    {"*/", "a/b", DIR_, true, true},
    {"a/**/", "a/b", FILE_, false, false},
    {"a/**/", "a/b", DIR_, true, true},
    {"a/**/", "a/b/c", FILE_, false, true},
    {"**/", "x", FILE_, false, false},
    {"**/", "x/y", FILE_, false, true},
    /* non-ASCII bytes are plain bytes */
    {"caf\xc3\xa9", "caf\xc3\xa9", FILE_, true, true},
    {"caf?", "caf\xc3\xa9", FILE_, false, false},
    {"caf??", "caf\xc3\xa9", FILE_, true, true},
    {"caf*", "caf\xc3\xa9", FILE_, true, true},
    {"[\xc3][\xa9]", "\xc3\xa9", FILE_, true, true},
    {"[\x80-\xff]", "\xfe", FILE_, true, true},
    {"[!\x80-\xff]", "\xfe", FILE_, false, false},
    {"**/\xe2\x82\xac", "a/\xe2\x82\xac", FILE_, true, true},
};

static pw_glob *compile_ok(const char *pattern)
{
	pw_glob *g = NULL;
	const char *err = NULL;
	int r = pw_glob_compile(pattern, &g, &err);

	cr_assert_eq(r, 0, "compile(\"%s\") = %d (%s)", pattern, r, err ? err : "");
	cr_assert_not_null(g);
	return g;
}

Test(glob, table)
{
	cr_assert_geq(sizeof(cases) / sizeof(cases[0]), 80);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct match_case *c = &cases[i];
		pw_glob *g = compile_ok(c->pattern);
		bool m = pw_glob_match(g, c->path, c->is_dir);
		bool t = pw_glob_match_tree(g, c->path, c->is_dir);

		cr_expect_eq(m, c->match, "match(\"%s\", \"%s\", %s) = %d", c->pattern, c->path,
			     c->is_dir ? "dir" : "file", m);
		cr_expect_eq(t, c->tree, "match_tree(\"%s\", \"%s\", %s) = %d", c->pattern, c->path,
			     c->is_dir ? "dir" : "file", t);
		cr_expect_str_eq(pw_glob_pattern(g), c->pattern);
		pw_glob_free(g);
	}
}

/* pw_glob_match_dir_itself: is the directory PATH the `dir` of a pattern `dir/` `**`? */
static const struct {
	const char *pattern, *path;
	bool itself;
} dir_itself_cases[] = {
    {"tests/**", "tests", true},
    {"tests/**", "test", false},
    {"tests/**", "testsx", false},
    {"tests/**", "a/tests", false},
    {"tests/**", "tests/a", false}, /* beneath: pw_glob_match_tree's business */
    {"docs/design/**", "docs/design", true},
    {"docs/design/**", "docs", false},
    {"src/*/gen/**", "src/a/gen", true},
    {"src/*/gen/**", "src/a/b/gen", false},
    {"a/**/b/**", "a/x/y/b", true},
    {"a/**/b/**", "a/b", true},
    {"[ab]/**", "b", true},
    {"**", "", false},
    {"**", "a", false},
    {"a/**/b", "a", false},
    {"tests/*", "tests", false},
    {"tests", "tests", false},
    {"tests/", "tests", false},
};

Test(glob, dir_itself)
{
	for (size_t i = 0; i < sizeof(dir_itself_cases) / sizeof(dir_itself_cases[0]); i++) {
		pw_glob *g = compile_ok(dir_itself_cases[i].pattern);

		cr_expect_eq(pw_glob_match_dir_itself(g, dir_itself_cases[i].path),
			     dir_itself_cases[i].itself, "dir_itself(\"%s\", \"%s\")",
			     dir_itself_cases[i].pattern, dir_itself_cases[i].path);
		pw_glob_free(g);
	}
}

struct error_case {
	const char *pattern;
	int ret;
};

static const struct error_case errors[] = {
    {"", -EINVAL},	{"/", -EINVAL},	    {"///", -EINVAL},	     {"[", -EINVAL},
    {"[abc", -EINVAL},	{"a/[b", -EINVAL},  {"[]", -EINVAL},	     {"[!]", -EINVAL},
    {"[a-", -EINVAL},	{"[z-a]", -EINVAL}, {"[[:nope:]]", -EINVAL}, {"\\", -EINVAL},
    {"abc\\", -EINVAL}, {"[a\\", -EINVAL},
};

Test(glob, compile_errors)
{
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
		pw_glob *g = (pw_glob *)0x1;
		const char *err = NULL;
		int r = pw_glob_compile(errors[i].pattern, &g, &err);

		cr_expect_eq(r, errors[i].ret, "compile(\"%s\") = %d", errors[i].pattern, r);
		cr_expect_not_null(err, "no message for \"%s\"", errors[i].pattern);
		cr_expect_eq(g, (pw_glob *)0x1, "ret written on failure for \"%s\"",
			     errors[i].pattern);
	}
}

Test(glob, length_cap)
{
	char pattern[PW_GLOB_LEN_MAX + 2];
	pw_glob *g = NULL;
	const char *err = NULL;

	memset(pattern, 'a', PW_GLOB_LEN_MAX);
	pattern[PW_GLOB_LEN_MAX] = '\0';
	cr_assert_eq(pw_glob_compile(pattern, &g, NULL), 0);
	cr_assert(pw_glob_match(g, pattern, false));
	pw_glob_free(g);

	pattern[PW_GLOB_LEN_MAX] = 'a';
	pattern[PW_GLOB_LEN_MAX + 1] = '\0';
	g = NULL;
	cr_assert_eq(pw_glob_compile(pattern, &g, &err), -ENAMETOOLONG);
	cr_assert_null(g);
	cr_assert_not_null(err);
	pw_glob_free(NULL);
}

/* ---- pathological patterns ---- */

/*
 * The promise is bounded work, so that is what these tests measure: the matcher counts what
 * it examines (pw_glob_match_counted: bytes read times live NFA states, plus the bytes a fast
 * path compares), which no machine load changes. A backtracking matcher would need
 * exponentially more on these inputs; the NFA needs at most one visit per (byte, state)
 * pair, plus a pass of the literal prefix.
 */
static uint64_t work_bound(const char *pattern, const char *path)
{
	return (uint64_t)(strlen(path) + 2) * (strlen(pattern) + 2) * 2;
}

/* Compiles PATTERN, checks both matches against PATH and the work each took. */
static void bounded(const char *pattern, const char *path, bool is_dir, bool expect_match,
		    bool expect_tree)
{
	pw_glob *g = compile_ok(pattern);
	uint64_t bound = work_bound(pattern, path), work = 0;

	cr_assert_eq(pw_glob_match_counted(g, path, is_dir, false, &work), expect_match,
		     "match (pattern %zu bytes)", strlen(pattern));
	cr_assert_leq(work, bound, "match: work %llu > bound %llu", (unsigned long long)work,
		      (unsigned long long)bound);
	cr_assert_eq(pw_glob_match(g, path, is_dir), expect_match);
	cr_assert_eq(pw_glob_match_counted(g, path, is_dir, true, &work), expect_tree,
		     "tree (pattern %zu bytes)", strlen(pattern));
	cr_assert_leq(work, bound, "tree: work %llu > bound %llu", (unsigned long long)work,
		      (unsigned long long)bound);
	cr_assert_eq(pw_glob_match_tree(g, path, is_dir), expect_tree);
	pw_glob_free(g);
}

static void bounded_both(const char *pattern, const char *path, bool is_dir, bool expect)
{
	bounded(pattern, path, is_dir, expect, expect);
}

Test(glob, work_is_counted)
{
	/* The count is real: a simulation reads every byte, a fast path compares them. */
	pw_glob *nfa = compile_ok("a*b*c"), *fast = compile_ok("src/*.c");
	uint64_t work = 0;

	cr_assert(pw_glob_match_counted(nfa, "axxbyyc", false, false, &work));
	cr_expect_geq(work, 7);
	cr_assert(pw_glob_match_counted(fast, "src/main.c", false, false, &work));
	cr_expect_geq(work, 10);
	pw_glob_free(nfa);
	pw_glob_free(fast);
}

static char *repeat(const char *unit, size_t times, const char *tail)
{
	size_t u = strlen(unit), t = strlen(tail);
	char *s = malloc(u * times + t + 1);

	cr_assert_not_null(s);
	for (size_t i = 0; i < times; i++)
		memcpy(s + i * u, unit, u);
	memcpy(s + u * times, tail, t + 1);
	return s;
}

Test(glob, pathological_star_question)
{
	/* "*?" up to the length cap against a long name: matches, and one byte short does not. */
	char *pattern = repeat("*?", PW_GLOB_LEN_MAX / 2, "");
	char *path = repeat("a", PW_PATH_MAX - 1, "");
	char *short_path = repeat("a", PW_GLOB_LEN_MAX / 2 - 1, "");
	char *with_slash = repeat("a", 3000, "/b");

	bounded_both(pattern, path, false, true);
	bounded_both(pattern, short_path, false, false);
	/* No match, but the tree match checks the ancestor of 3000 bytes: it matches. */
	bounded(pattern, with_slash, false, false, true);
	free(pattern);
	free(path);
	free(short_path);
	free(with_slash);
}

Test(glob, pathological_stars_then_b)
{
	/* "a*a*...*b" against a long run of 'a's: the classic backtracking blow-up. */
	char *pattern = repeat("a*", PW_GLOB_LEN_MAX / 2 - 1, "b");
	char *path = repeat("a", PW_PATH_MAX - 1, "");
	char *path_b = repeat("a", PW_PATH_MAX - 2, "b");

	bounded_both(pattern, path, false, false);
	bounded_both(pattern, path_b, false, true);
	free(pattern);
	free(path);
	free(path_b);
}

Test(glob, pathological_deep_dstar)
{
	/* "**" "/" repeated up to the cap then "a", against a path of depth 1024. */
	char *pattern = repeat("**/", (PW_GLOB_LEN_MAX - 1) / 3, "a");
	char *deep_a = repeat("x/", PW_PATH_DEPTH_MAX - 1, "a");
	char *deep_b = repeat("x/", PW_PATH_DEPTH_MAX - 1, "b");
	char *deep_a_below = repeat("x/", PW_PATH_DEPTH_MAX - 2, "a/b");

	bounded_both(pattern, deep_a, false, true);
	bounded_both(pattern, deep_b, false, false);
	bounded(pattern, deep_a_below, false, false, true);
	free(pattern);
	free(deep_a);
	free(deep_b);
	free(deep_a_below);
}

Test(glob, pathological_name_at_any_depth)
{
	/* A pattern without a slash is tried on every name of the path: each byte is still read
	 * once per tree match, so a deep path of long names stays within the same bound. */
	char *pattern = repeat("*a", (PW_GLOB_LEN_MAX - 1) / 2, "b");
	char *deep = repeat("aaaaaaa/", (PW_PATH_MAX - 16) / 8, "aaaaaaa");
	char *deep_b = repeat("aaaaaaa/", (PW_PATH_MAX - 16) / 8, "aaaaaab");

	bounded_both(pattern, deep, false, false);
	bounded_both(pattern, deep_b, false, false); /* 511 'a's needed, 6 given */
	free(pattern);
	pattern = repeat("*a", 3, "b");
	bounded(pattern, deep_b, false, true, true);
	bounded(pattern, deep, false, false, false);
	free(pattern);
	free(deep);
	free(deep_b);
}

Test(glob, pathological_mixed)
{
	/* "**" "/" "*a*a*...": segments of stars under a deep "**". */
	char *pattern = repeat("*a", 300, "/**/*b");
	char *head = repeat("a", 2000, "");
	char *tail_a = repeat("/a", 999, "");
	char *tail_ab = repeat("/a", 999, "b");
	char *no = malloc(strlen(head) + strlen(tail_a) + 1);
	char *yes = malloc(strlen(head) + strlen(tail_ab) + 1);

	cr_assert(no && yes);
	strcpy(stpcpy(no, head), tail_a);
	strcpy(stpcpy(yes, head), tail_ab);
	bounded_both(pattern, no, false, false);
	bounded_both(pattern, yes, false, true);
	free(pattern);
	free(head);
	free(tail_a);
	free(tail_ab);
	free(no);
	free(yes);
}

/* ---- randomized properties ---- */

static const char *const pieces[] = {"a", "b", "/", "*", "?", "**", "[ab]", "[!a]", "a", "b"};

static void random_pattern(char *buf, size_t cap, unsigned *seed)
{
	size_t n = 1 + (size_t)rand_r(seed) % 7, len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		const char *p = pieces[(size_t)rand_r(seed) % (sizeof(pieces) / sizeof(pieces[0]))];

		if (len + strlen(p) + 1 >= cap)
			break;
		strcpy(buf + len, p);
		len += strlen(p);
	}
	if (strspn(buf, "/") == len)
		strcpy(buf, "a");
}

/* A normalized path of 1..4 segments of 1..3 bytes from {a,b}. */
static void random_path(char *buf, unsigned *seed)
{
	size_t segs = 1 + (size_t)rand_r(seed) % 4, len = 0;

	for (size_t s = 0; s < segs; s++) {
		size_t w = 1 + (size_t)rand_r(seed) % 3;

		if (s)
			buf[len++] = '/';
		for (size_t i = 0; i < w; i++)
			buf[len++] = "ab"[rand_r(seed) & 1];
	}
	buf[len] = '\0';
}

/* Replaces every literal 'a' with "[a]": same language, but no fast path applies. */
static void defeat_fast_paths(const char *in, char *out)
{
	size_t len = 0;
	int in_class = 0;

	for (; *in; in++) {
		if (*in == '[')
			in_class = 1;
		if (*in == 'a' && !in_class) {
			memcpy(out + len, "[a]", 3);
			len += 3;
		} else {
			out[len++] = *in;
		}
		if (*in == ']')
			in_class = 0;
	}
	out[len] = '\0';
}

Test(glob, random_fast_paths_agree_with_simulation)
{
	unsigned seed = 12345;

	for (int iter = 0; iter < 20000; iter++) {
		char pattern[64], slow[256], path[32];
		pw_glob *g, *h;
		bool is_dir;

		random_pattern(pattern, sizeof(pattern), &seed);
		random_path(path, &seed);
		is_dir = rand_r(&seed) & 1;
		defeat_fast_paths(pattern, slow);
		g = compile_ok(pattern);
		h = compile_ok(slow);
		cr_assert_eq(pw_glob_match(g, path, is_dir), pw_glob_match(h, path, is_dir),
			     "match(\"%s\" vs \"%s\", \"%s\")", pattern, slow, path);
		cr_assert_eq(pw_glob_match_tree(g, path, is_dir),
			     pw_glob_match_tree(h, path, is_dir), "tree(\"%s\" vs \"%s\", \"%s\")",
			     pattern, slow, path);
		pw_glob_free(g);
		pw_glob_free(h);
	}
}

Test(glob, random_tree_is_self_or_ancestor)
{
	unsigned seed = 777;

	for (int iter = 0; iter < 20000; iter++) {
		char pattern[64], path[32], anc[32];
		pw_glob *g;
		bool is_dir, expect;

		random_pattern(pattern, sizeof(pattern), &seed);
		random_path(path, &seed);
		is_dir = rand_r(&seed) & 1;
		g = compile_ok(pattern);
		expect = pw_glob_match(g, path, is_dir);
		for (size_t k = 0; path[k] && !expect; k++) {
			if (path[k] != '/')
				continue;
			memcpy(anc, path, k);
			anc[k] = '\0';
			expect = pw_glob_match(g, anc, true);
		}
		cr_assert_eq(pw_glob_match_tree(g, path, is_dir), expect,
			     "tree(\"%s\", \"%s\", %d)", pattern, path, is_dir);
		pw_glob_free(g);
	}
}
