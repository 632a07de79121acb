/* SPDX-License-Identifier: MIT */
/*
 * The bash pre-flight (policy/bash/bash.h) against the real bundled modes (SOURCE_MODES) and a
 * fixture tree drawn fresh in a temporary directory for each test:
 *
 *   README.md
 *   Makefile
 *   src/a.c  src/b.c  src/c.h  src/sub/d.c
 *   docs/notes.md
 *   docs/design/spec.md
 *   .git/HEAD  .git/config  .git/hooks/pre-commit
 *   .piworkfs/            (empty)
 *   build/                (empty)
 *   .hidden
 *   link -> /etc          (a symlink out of the project: globs must not follow it)
 *
 * The table gives, per command: the mode, the working directory, the verdict and every
 * target in order, each as STATUS ACCESS ':' PATH with STATUS a(llowed) d(enied)
 * o(utside) u(nknown), ACCESS w(rite) r(ead) x (a command the analysis cannot judge; PATH
 * is then the command), "." for the project root, and "(ERRNO)" after a denied one; a
 * trailing '~' marks a target found by the heuristic token scan.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../lib/fixture_tree.h"
#include "bash/bash.h"
#include "bash/bash_path.h"
#include "pw_limits.h"
#include "mode.h"
#include "policy.h"
#include "util.h"

static char tree[64];
static int tree_fd = -1;
static pw_modeset *modes;

static void setup(void)
{
	snprintf(tree, sizeof(tree), "/tmp/pw-bash-XXXXXX");
	cr_assert_not_null(mkdtemp(tree));
	static const char *const files[] = {"README.md",
					    "readme\n",
					    "Makefile",
					    "all:\n",
					    "src/a.c",
					    "a\n",
					    "src/b.c",
					    "b\n",
					    "src/c.h",
					    "c\n",
					    "src/sub/d.c",
					    "d\n",
					    "docs/notes.md",
					    "n\n",
					    "docs/design/spec.md",
					    "s\n",
					    ".git/HEAD",
					    "ref: refs/heads/main\n",
					    ".git/config",
					    "[core]\n",
					    ".git/hooks/pre-commit",
					    "#!/bin/sh\n",
					    ".hidden",
					    "h\n",
					    NULL};
	fixture_files(tree, files);
	fixture_dir(tree, ".piworkfs", 0755);
	fixture_dir(tree, "build", 0755);
	char l[256];
	snprintf(l, sizeof(l), "%s/link", tree);
	cr_assert_eq(symlink("/etc", l), 0);
	tree_fd = open(tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(tree_fd, 0);

	pw_load_opts o = {.bundled_dir = SOURCE_MODES};
	cr_assert_eq(pw_modeset_load(&o, &modes), 0);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(p);
}

static void teardown(void)
{
	if (tree_fd >= 0)
		close(tree_fd);
	tree_fd = -1;
	pw_modeset_free(modes);
	modes = NULL;
	nftw(tree, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(bash, .init = setup, .fini = teardown);

static pw_bash_result *analyze_in(const char *cmd, size_t len, const char *cwd)
{
	pw_bash_opts o = {.root_fd = tree_fd, .root_path = tree, .cwd = cwd};
	pw_bash_result *r = NULL;
	int k = pw_bash_analyze(cmd, len, &o, &r);
	cr_assert_eq(k, 0, "analyze '%.60s': %d", cmd, k);
	return r;
}

static pw_policy *policy_for(const char *mode)
{
	pw_policy *p = NULL;
	cr_assert_eq(pw_policy_compile(modes, mode, &p), 0, "compile %s", mode);
	return p;
}

/* The table's notation of a result (see the top comment). Returns a malloc'd string. */
static char *repr(const pw_bash_result *r)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);
	cr_assert_not_null(f);
	for (size_t i = 0; i < pw_bash_target_count(r); i++) {
		const pw_bash_target *t = pw_bash_target_get(r, i);
		const char *s = pw_bash_status_name(t->status);
		char a = t->access == PW_BASH_WRITE ? 'w' : t->access == PW_BASH_READ ? 'r' : 'x';
		const char *p = t->kind == PW_BASH_KIND_COMMAND ? t->command
				: t->path[0]			? t->path
								: ".";
		fprintf(f, "%s%c%c:%s", i ? " " : "", s[0], a, p);
		if (t->status == PW_BASH_DENIED && t->decided)
			fprintf(f, "(%s)",
				t->decision.err == EROFS    ? "EROFS"
				: t->decision.err == EACCES ? "EACCES"
				: t->decision.err == ENOENT ? "ENOENT"
							    : "?");
		if (t->heuristic)
			fputc('~', f);
	}
	fclose(f);
	return buf;
}

/* Turns "\n" in the table's commands into newlines (heredocs). */
static char *unescape_nl(const char *s)
{
	char *out = strdup(s), *p = out;
	for (; *s; s++) {
		if (s[0] == '\\' && s[1] == 'n') {
			*p++ = '\n';
			s++;
		} else {
			*p++ = *s;
		}
	}
	*p = '\0';
	return out;
}

typedef struct row {
	const char *mode, *cwd, *cmd, *verdict, *targets;
} row;

/*
 * The table, test_bash_table.tsv (its head says how it is written): each line's five fields
 * in ROWS (at most ROWS_MAX), pointing into TEXT, which the caller frees. A line with
 * another number of fields fails the test with its line number.
 */
#define ROWS_MAX 1024
static size_t load_rows(const char *path, char **text, row *rows)
{
	FILE *f = fopen(path, "re");
	cr_assert_not_null(f, "%s: %m", path);
	size_t cap = 0, n = 0;
	ssize_t len = getdelim(text, &cap, '\0', f);
	cr_assert_geq(len, 0, "%s: %m", path);
	fclose(f);
	char *rest = *text;
	for (unsigned lineno = 1; rest; lineno++) {
		char *line = strsep(&rest, "\n");
		if (!line[0] || line[0] == '#')
			continue;
		const char *field[5];
		size_t k = 0;
		for (char *tab = line; tab && k < ELEMENTSOF(field);)
			field[k++] = strsep(&tab, "\t");
		cr_assert(k == ELEMENTSOF(field) && !strchr(field[4], '\t'),
			  "%s:%u: not five fields separated by tabs", path, lineno);
		cr_assert_lt(n, ROWS_MAX, "%s: more than %d rows", path, ROWS_MAX);
		rows[n++] = (row){field[0], field[1], field[2], field[3], field[4]};
	}
	return n;
}

static void check_row(size_t idx, const row *t)
{
	_cleanup_free_ char *cmd = unescape_nl(t->cmd);
	pw_policy *p = policy_for(t->mode);
	pw_bash_result *r = analyze_in(cmd, strlen(cmd), t->cwd);
	pw_bash_decide(r, p);
	_cleanup_free_ char *got = repr(r);
	const char *v = pw_bash_status_name(pw_bash_verdict(r));
	if (getenv("PW_BASH_GOLDEN"))
		printf("GOLDEN\t%zu\t%s\t%s\n", idx, v, got);
	else {
		cr_expect_str_eq(v, t->verdict, "[%s] %s: verdict", t->mode, t->cmd);
		cr_expect_str_eq(got, t->targets, "[%s] %s: targets", t->mode, t->cmd);
	}
	pw_bash_result_free(r);
	pw_policy_unref(p);
}

Test(bash, table)
{
	static row rows[ROWS_MAX];
	_cleanup_free_ char *text = NULL;
	size_t n = load_rows(POLICY_TESTS "/test_bash_table.tsv", &text, rows);

	cr_assert_geq(n, 150);
	for (size_t i = 0; i < n; i++)
		check_row(i, &rows[i]);
}

/* ---------- the API's contract ---------- */

static bool has_note(const pw_bash_result *r, const char *note)
{
	for (size_t i = 0; i < pw_bash_target_count(r); i++) {
		const pw_bash_target *t = pw_bash_target_get(r, i);
		if (t->note && strstr(t->note, note))
			return true;
	}
	return false;
}

Test(bash, runtime_supports_the_grammar)
{
	const char *why = NULL;
	cr_assert_eq(pw_bash_check_runtime(&why), 0);
}

Test(bash, input_limit)
{
	size_t n = PW_BASH_INPUT_MAX;
	char *big = malloc(n + 1);
	cr_assert_not_null(big);
	/* "touch docs/design/x;" repeated up to exactly 1 MiB, padded with blanks. */
	const char *unit = "touch docs/design/x;";
	size_t u = strlen(unit), i = 0;
	for (; i + u <= n; i += u)
		memcpy(big + i, unit, u);
	memset(big + i, ' ', n - i);
	big[n] = ' ';

	pw_bash_opts o = {.root_fd = tree_fd, .root_path = tree};
	pw_bash_result *r = NULL;
	cr_assert_eq(pw_bash_analyze(big, n + 1, &o, &r), -E2BIG);
	cr_assert_null(r);

	time_t t0 = time(NULL);
	r = analyze_in(big, n, "");
	pw_policy *p = policy_for("design");
	pw_bash_decide(r, p);
	cr_expect_eq(pw_bash_target_count(r), 1, "the same target once");
	cr_expect_eq(pw_bash_verdict(r), PW_BASH_ALLOWED);
	cr_expect_leq(time(NULL) - t0, 30, "linear in the input");
	pw_bash_result_free(r);
	pw_policy_unref(p);
	free(big);
}

Test(bash, nul_byte_and_bad_cwd)
{
	pw_bash_opts o = {.root_fd = tree_fd, .root_path = tree, .cwd = "../x"};
	pw_bash_result *r = NULL;
	cr_expect_eq(pw_bash_analyze("ls\0rm x", 7, &(pw_bash_opts){.root_fd = -1}, &r), -EINVAL);
	cr_expect_eq(pw_bash_analyze("ls", 2, &o, &r), -EINVAL);
	cr_expect_null(r);
}

static char *nested(const char *open, const char *mid, const char *close, size_t depth)
{
	size_t lo = strlen(open), lc = strlen(close), lm = strlen(mid);
	char *s = malloc(depth * (lo + lc) + lm + 1), *p = s;
	for (size_t i = 0; i < depth; i++)
		p = mempcpy(p, open, lo);
	p = mempcpy(p, mid, lm);
	for (size_t i = 0; i < depth; i++)
		p = mempcpy(p, close, lc);
	*p = '\0';
	return s;
}

static void expect_too_deep(const char *open, const char *close)
{
	_cleanup_free_ char *s = nested(open, "rm src/a.c", close, 10000);
	pw_bash_result *r = analyze_in(s, strlen(s), "");
	cr_expect(pw_bash_result_truncated(r) || pw_bash_result_heuristic(r), "%s", open);
	cr_expect_neq(pw_bash_verdict(r), PW_BASH_ALLOWED, "%s", open);
	if (!pw_bash_result_heuristic(r))
		cr_expect(has_note(r, "nesting too deep"), "%s", open);
	pw_bash_result_free(r);
}

Test(bash, deep_nesting_does_not_crash)
{
	expect_too_deep("echo $(", ")");
	expect_too_deep("(", ")");
	expect_too_deep("{ ", "; }");
	expect_too_deep("echo \"$(", ")\"");
	expect_too_deep("if true; then ", "; fi");
	expect_too_deep("cat <(", ")");
}

Test(bash, moderate_nesting_is_followed)
{
	_cleanup_free_ char *s = nested("(", "rm src/a.c", ")", 50);
	pw_bash_result *r = analyze_in(s, strlen(s), "");
	cr_assert_eq(pw_bash_target_count(r), 1);
	cr_expect_str_eq(pw_bash_target_get(r, 0)->path, "src/a.c");
	cr_expect_not(pw_bash_result_truncated(r));
	pw_bash_result_free(r);
}

static pw_bash_result *evals(int n)
{
	char s[1024] = "";
	size_t k = 0;
	for (int i = 0; i < n; i++)
		k += snprintf(s + k, sizeof(s) - k, "eval ");
	k += snprintf(s + k, sizeof(s) - k, "rm src/a.c");
	return analyze_in(s, k, "");
}

Test(bash, nested_shells_are_capped)
{
	pw_bash_result *r = evals(5);
	cr_assert_eq(pw_bash_target_count(r), 1);
	cr_expect_str_eq(pw_bash_target_get(r, 0)->path, "src/a.c");
	pw_bash_result_free(r);

	r = evals(20);
	cr_expect(has_note(r, "nesting too deep"));
	cr_expect_eq(pw_bash_verdict(r), PW_BASH_UNKNOWN);
	pw_bash_result_free(r);

	const char *sh = "sh -c \"sh -c 'rm src/b.c'\"";
	r = analyze_in(sh, strlen(sh), "");
	cr_assert_eq(pw_bash_target_count(r), 1);
	cr_expect_str_eq(pw_bash_target_get(r, 0)->path, "src/b.c");
	pw_bash_result_free(r);
}

Test(bash, exponential_functions_are_bounded)
{
	/* f0 calls f1 twice, f1 calls f2 twice, ...: 2^40 calls if followed naively. */
	char s[8192] = "";
	size_t k = 0;
	for (int i = 0; i < 40; i++)
		k += snprintf(s + k, sizeof(s) - k, "f%d() { f%d; f%d; }; ", i, i + 1, i + 1);
	k += snprintf(s + k, sizeof(s) - k, "f40() { touch docs/design/x; }; f0");
	time_t t0 = time(NULL);
	pw_bash_result *r = analyze_in(s, k, "");
	cr_expect_leq(time(NULL) - t0, 10);
	cr_expect_neq(pw_bash_verdict(r), PW_BASH_ALLOWED, "some calls are not followed");
	pw_bash_result_free(r);
}

Test(bash, variable_doubling_is_bounded)
{
	char s[8192] = "X=aaaaaaaaaaaaaaaa; ";
	size_t k = strlen(s);
	for (int i = 0; i < 64; i++)
		k += snprintf(s + k, sizeof(s) - k, "X=$X$X; ");
	k += snprintf(s + k, sizeof(s) - k, "touch $X");
	pw_bash_result *r = analyze_in(s, k, "");
	cr_expect_eq(pw_bash_verdict(r), PW_BASH_UNKNOWN);
	pw_bash_result_free(r);
}

Test(bash, for_loops_nested_are_bounded)
{
	char s[8192] = "";
	size_t k = 0;
	for (int i = 0; i < 30; i++)
		k += snprintf(s + k, sizeof(s) - k, "for v%d in a b c d e f g h; do ", i);
	k += snprintf(s + k, sizeof(s) - k, "touch docs/design/$v0");
	for (int i = 0; i < 30; i++)
		k += snprintf(s + k, sizeof(s) - k, "; done");
	time_t t0 = time(NULL);
	pw_bash_result *r = analyze_in(s, k, "");
	cr_expect_leq(time(NULL) - t0, 10);
	cr_expect(pw_bash_result_truncated(r));
	cr_expect_eq(pw_bash_verdict(r), PW_BASH_UNKNOWN);
	pw_bash_result_free(r);
}

Test(bash, targets_are_capped)
{
	size_t n = PW_BASH_TARGETS_MAX + 100, k = 0;
	char *s = malloc(n * 24);
	for (size_t i = 0; i < n; i++)
		k += sprintf(s + k, "touch docs/design/%zu;", i);
	pw_bash_result *r = analyze_in(s, k, "");
	cr_expect_leq(pw_bash_target_count(r), PW_BASH_TARGETS_MAX);
	cr_expect(pw_bash_result_truncated(r));
	cr_expect(has_note(r, "too many targets"));
	cr_expect_eq(pw_bash_verdict(r), PW_BASH_UNKNOWN);
	pw_bash_result_free(r);
	free(s);
}

Test(bash, brace_expansion_is_capped)
{
	const char *s = "touch docs/design/{a,b,c,d}{a,b,c,d}{a,b,c,d}{a,b,c,d}";
	pw_bash_result *r = analyze_in(s, strlen(s), "");
	cr_expect(has_note(r, "brace expansion is too large"));
	cr_expect_eq(pw_bash_verdict(r), PW_BASH_UNKNOWN);
	pw_bash_result_free(r);
}

Test(bash, parse_errors_are_heuristic_and_never_allowed)
{
	static const char *const cmds[] = {"echo x > docs/design/a )",
					   "touch docs/design/a; fi; )",
					   "echo 'unterminated",
					   "(((",
					   "cat <<< ",
					   "echo ( x"};
	pw_policy *p = policy_for("design");
	for (size_t i = 0; i < ELEMENTSOF(cmds); i++) {
		pw_bash_result *r = analyze_in(cmds[i], strlen(cmds[i]), "");
		pw_bash_decide(r, p);
		cr_expect(pw_bash_result_heuristic(r), "%s", cmds[i]);
		cr_expect_neq(pw_bash_verdict(r), PW_BASH_ALLOWED, "%s", cmds[i]);
		for (size_t j = 0; j < pw_bash_target_count(r); j++)
			cr_expect(pw_bash_target_get(r, j)->heuristic, "%s", cmds[i]);
		pw_bash_result_free(r);
	}
	pw_policy_unref(p);
}

Test(bash, pathological_globs)
{
	/* Matching is linear: "*?" repeated to the longest name, against every name. */
	size_t n = 240;
	char *s = malloc(n + 32);
	strcpy(s, "rm src/");
	for (size_t i = 0; i < n; i += 2)
		memcpy(s + 7 + i, "*?", 2);
	strcpy(s + 7 + n, "b");
	time_t t0 = time(NULL);
	pw_bash_result *r = analyze_in(s, strlen(s), "");
	cr_expect_leq(time(NULL) - t0, 10);
	pw_bash_result_free(r);
	free(s);

	char name[256], pat[256];
	memset(name, 'a', 200);
	name[200] = '\0';
	for (int i = 0; i < 100; i += 2)
		memcpy(pat + i, "a*", 2);
	strcpy(pat + 100, "b");
	cr_expect_not(bw_segment_match(pat, name));
	cr_expect(bw_segment_match("*.c", "a.c"));
	cr_expect_not(bw_segment_match("*.c", ".a.c"), "a leading dot is not matched by *");
	cr_expect(bw_segment_match(".*", ".a"));
	cr_expect(bw_segment_match("[!b]?[a-c]", "xyb"));
	cr_expect_not(bw_segment_match("[!b]?[a-c]", "byb"));
	cr_expect(bw_segment_match("\\*", "*"));
	cr_expect_not(bw_segment_match("\\*", "a"));
	cr_expect(bw_segment_match("[", "["), "a malformed class is literal");
}

Test(bash, json_shape)
{
	const char *cmd = "sed -i s/a/b/ src/a.c; ./run";
	pw_bash_result *r = analyze_in(cmd, strlen(cmd), "");
	pw_policy *p = policy_for("design");
	pw_bash_decide(r, p);
	json_t *j = pw_bash_result_json(r);
	cr_assert_not_null(j);
	cr_expect_str_eq(json_string_value(json_object_get(j, "verdict")), "denied");
	cr_expect(json_is_false(json_object_get(j, "heuristic")));
	json_t *ts = json_object_get(j, "targets");
	cr_assert_eq(json_array_size(ts), 2);
	json_t *t0 = json_array_get(ts, 0);
	cr_expect_str_eq(json_string_value(json_object_get(t0, "command")), "sed -i");
	cr_expect_str_eq(json_string_value(json_object_get(t0, "path")), "src/a.c");
	cr_expect_str_eq(json_string_value(json_object_get(t0, "status")), "denied");
	cr_expect_str_eq(json_string_value(json_object_get(t0, "errno")), "EACCES");
	cr_expect_str_eq(json_string_value(json_object_get(t0, "reason")),
			 pw_reason_name(PW_REASON_NO_ALLOW));
	json_t *t1 = json_array_get(ts, 1);
	cr_expect_str_eq(json_string_value(json_object_get(t1, "kind")), "command");
	cr_expect(json_is_null(json_object_get(t1, "path")));
	cr_expect_str_eq(json_string_value(json_object_get(t1, "status")), "unknown");
	json_decref(j);
	pw_bash_result_free(r);
	pw_policy_unref(p);
}

Test(bash, without_tree_access_globs_are_patterns)
{
	pw_bash_opts o = {.root_fd = -1, .root_path = NULL, .cwd = "src"};
	pw_bash_result *r = NULL;
	const char *cmd = "rm *.c; touch /abs";
	cr_assert_eq(pw_bash_analyze(cmd, strlen(cmd), &o, &r), 0);
	cr_assert_eq(pw_bash_target_count(r), 2);
	cr_expect_eq(pw_bash_target_get(r, 0)->kind, PW_BASH_KIND_PATTERN);
	cr_expect_str_eq(pw_bash_target_get(r, 0)->path, "src/*.c");
	cr_expect_eq(pw_bash_target_get(r, 1)->status, PW_BASH_OUTSIDE);
	pw_bash_result_free(r);
}

Test(bash, absolute_paths_inside_the_root)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "touch %s/docs/design/x %s/../x %s", tree, tree, tree);
	pw_bash_result *r = analyze_in(cmd, strlen(cmd), "");
	cr_assert_eq(pw_bash_target_count(r), 3);
	cr_expect_str_eq(pw_bash_target_get(r, 0)->path, "docs/design/x");
	cr_expect_eq(pw_bash_target_get(r, 1)->status, PW_BASH_OUTSIDE);
	cr_expect_str_eq(pw_bash_target_get(r, 2)->path, "");
	pw_bash_result_free(r);
}

Test(bash, results_are_independent)
{
	/* Two results from the same input are independent objects with equal contents. */
	const char *cmd = "cp src/*.c docs/design/";
	pw_bash_result *a = analyze_in(cmd, strlen(cmd), "");
	pw_bash_result *b = analyze_in(cmd, strlen(cmd), "");
	_cleanup_free_ char *ra = repr(a);
	_cleanup_free_ char *rb = repr(b);
	cr_expect_str_eq(ra, rb);
	pw_bash_result_free(a);
	pw_bash_result_free(b);
}

/* The caller's hide predicate (pw_bash_opts.hidden): here src/sub/ and .hidden. */
static bool hide_some(const char *path, bool is_dir, void *arg)
{
	(void)arg;
	return streq(path, ".hidden") || (is_dir && streq(path, "src/sub")) ||
	       strncmp(path, "src/sub/", 8) == 0;
}

static char *paths_of(const char *cmd, bool hiding)
{
	pw_bash_opts o = {
	    .root_fd = tree_fd, .root_path = tree, .cwd = "", .hidden = hiding ? hide_some : NULL};
	pw_bash_result *r = NULL;
	cr_assert_eq(pw_bash_analyze(cmd, strlen(cmd), &o, &r), 0);
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);
	for (size_t i = 0; i < pw_bash_target_count(r); i++) {
		const pw_bash_target *t = pw_bash_target_get(r, i);
		fprintf(f, "%s%s%s", i ? " " : "", t->path ? t->path : "?", t->is_dir ? "/" : "");
	}
	fclose(f);
	pw_bash_result_free(r);
	return buf;
}

/* A hidden name is absent to the analysis: globs neither match nor descend into it, and a
 * stat of it finds nothing, so it reads exactly as a missing name. */
Test(bash, hidden_names_read_as_absent)
{
	char *s = paths_of("rm src/*", false);
	cr_expect_str_eq(s, "src/a.c src/b.c src/c.h src/sub/");
	free(s);
	s = paths_of("rm src/*", true);
	cr_expect_str_eq(s, "src/a.c src/b.c src/c.h");
	free(s);
	s = paths_of("rm src/*/*.c", true);
	cr_expect_str_eq(s, "src/*/*.c", "matches nothing, like a missing directory");
	free(s);
	s = paths_of("rm .h*", true);
	cr_expect_str_eq(s, ".h*");
	free(s);
	s = paths_of("rm src/sub", true);
	char *missing = paths_of("rm src/nosuch", true);
	cr_expect_str_eq(s, "src/sub");
	cr_expect_str_eq(missing, "src/nosuch", "is_dir false for both");
	free(s);
	free(missing);
}
