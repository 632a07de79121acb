/* SPDX-License-Identifier: MIT */
/*
 * The mode loader: every malformed input's exact diagnostic, BOM/CRLF, limits, layering,
 * trust and tighten-only, protected paths and design token files.
 *
 * Fixtures (tests/fixtures/):
 *   modes-bad/             one file per problem, next to files that must still load
 *   global/                modes/build.md (adds a deny rule for secrets), config.yaml (protected
 *                          deploy and below, design.tokens tokens/colors.json, an unknown key)
 *   project-widening/      .piworkfs/modes/{build,design,plan,lint}.md and config.yaml, each
 *                          trying to widen: loaded untrusted and trusted
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "pw_limits.h"
#include "load_modes.h"
#include "mode.h"
#include "modefile.h"
#include "util.h"
#include "../lib/testdir.h"

#define BAD FIXTURES "/modes-bad/"
#define GLOBAL FIXTURES "/global"
#define PROJECT FIXTURES "/project-widening"
#define PMODES PROJECT "/.piworkfs/modes/"
#define UNTRUSTED "ignored: the project is not trusted (piworkfs trust)"

/* Asserts that the formatted warnings of MS are exactly WANT, in order. */
static void expect_warnings(const pw_modeset *ms, const char *const *want, size_t n)
{
	for (size_t i = 0; i < pw_modeset_warning_count(ms) || i < n; i++) {
		_cleanup_free_ char *got = NULL;

		cr_assert_lt(i, pw_modeset_warning_count(ms), "missing warning: %s", want[i]);
		got = pw_warning_format(pw_modeset_warning(ms, i));
		cr_assert_lt(i, n, "unexpected warning: %s", got);
		cr_expect_str_eq(got, want[i]);
	}
}

static const pw_rule *rule_of(const pw_mode *m, size_t i)
{
	cr_assert_lt(i, m->n_rules);
	return &m->rules[i];
}

/* ---- one file, every problem ------------------------------------------------------- */

Test(loader, malformed_files_exact_messages)
{
	static const char *const want[] = {
	    BAD "Bad_Name.md:2:7: error: name: invalid mode name \"Bad_Name\": use a-z, 0-9 "
		"and '-', not starting with '-', at most 64 bytes",
	    BAD "alias.md:5:9: error: aliases are not supported",
	    BAD "badglob.md:7:7: error: writes.allow[2]: invalid glob \"[abc\": unterminated "
		"character class",
	    BAD "deep.md:3:19: error: nesting deeper than 16 levels",
	    BAD "dupkey.md:5:3: error: writes.deny: duplicate key",
	    BAD "dupkey.md:6:1: error: name: duplicate key",
	    BAD "mismatch.md:2:7: error: name: name \"other\" does not match the file name "
		"\"mismatch.md\"",
	    BAD "nobody.md:3: warning: empty body: an agent gets no instructions in this mode",
	    BAD "nofront.md:1:1: error: missing frontmatter: the file must start with a '---' "
		"line",
	    BAD "notmap.md:2:1: error: the frontmatter must be a mapping of keys, not a list",
	    BAD "nulls.md:6:10: error: writes.deny[0]: expected a glob string, not null",
	    BAD "syntax.md:5:1: error: invalid YAML: while parsing a flow sequence: did not "
		"find expected ',' or ']'",
	    BAD "types.md:4:10: error: writes.allow: expected a list of globs, not a string",
	    BAD "types.md:5:11: error: writes.tokens: expected true or false, not \"1\"",
	    BAD "types.md:6:7: error: hide: expected a list of globs, not a mapping",
	    BAD "types.md:7:10: error: protect: expected true or false, not \"yes\"",
	    BAD "types.md:8:14: error: description: expected a string, not a list",
	    BAD "unknown.md:3:1: warning: colour: unknown key (ignored)",
	    BAD "unknown.md:6:3: warning: writes.mode: unknown key (ignored)",
	    BAD "unterminated.md:1:1: error: unterminated frontmatter: no closing '---' line",
	};
	pw_modeset *ms = load_modes(BAD, NULL, NULL, false);

	expect_warnings(ms, want, ELEMENTSOF(want));
	pw_modeset_free(ms);
}

Test(loader, broken_file_never_takes_the_others_down)
{
	pw_modeset *ms = load_modes(BAD, NULL, NULL, false);
	const pw_warning *w = NULL;
	static const char *const loaded[] = {"bom-crlf", "good", "nobody", "unknown"};

	cr_assert_eq(pw_modeset_count(ms), ELEMENTSOF(loaded));
	for (size_t i = 0; i < ELEMENTSOF(loaded); i++)
		cr_expect_str_eq(pw_modeset_get(ms, i)->name, loaded[i]);
	cr_expect_null(pw_modeset_find(ms, "syntax"));

	/* Errors make the mode broken (the daemon fails closed); warnings do not. */
	cr_assert(pw_modeset_mode_broken(ms, "syntax", &w));
	cr_expect_eq(w->severity, PW_ERROR);
	cr_expect_eq(w->line, 5);
	cr_expect_eq(w->column, 1);
	cr_expect_null(w->key);
	cr_assert(pw_modeset_mode_broken(ms, "types", &w));
	cr_expect_str_eq(w->key, "writes.allow");
	cr_expect(pw_modeset_mode_broken(ms, "mismatch", NULL));
	cr_expect_not(pw_modeset_mode_broken(ms, "good", NULL));
	cr_expect_not(pw_modeset_mode_broken(ms, "unknown", NULL));
	cr_expect_not(pw_modeset_mode_broken(ms, "nobody", NULL));
	cr_expect_not(pw_modeset_mode_broken(ms, "build", NULL));

	/* The file that warned about unknown keys still loaded its rules. */
	cr_expect_str_eq(rule_of(pw_modeset_find(ms, "unknown"), 0)->pattern, "src/**");
	pw_modeset_free(ms);
}

Test(loader, bom_and_crlf_accepted)
{
	pw_modeset *ms = load_modes(BAD, NULL, NULL, false);
	const pw_mode *m = pw_modeset_find(ms, "bom-crlf");
	const pw_rule *r;

	cr_assert_not_null(m);
	cr_expect_str_eq(m->description, "BOM and CRLF");
	cr_expect_str_eq(m->body, "Line one.\nLine two.\n");
	cr_expect_str_eq(m->file, BAD "bom-crlf.md");
	cr_expect_eq(m->layer, PW_LAYER_BUNDLED);
	cr_expect(m->protect);
	cr_expect_not(m->tokens);
	r = rule_of(m, 0);
	cr_expect_eq(r->kind, PW_RULE_ALLOW);
	cr_expect_str_eq(r->pattern, "docs/**");
	cr_expect_eq(r->line, 6);
	cr_expect_eq(r->column, 7);
	cr_expect_not(pw_modeset_mode_broken(ms, "bom-crlf", NULL));
	pw_modeset_free(ms);
}

/* ---- in-memory parses ---------------------------------------------------------------- */

/* Parses TEXT as FILE; returns the result and the first warning formatted in *ret_msg. */
static int parse(const char *file, const char *text, size_t len, pw_mode_file **ret_mf,
		 char **ret_msg)
{
	pw_warnings w = {0};
	pw_mode_file *mf = NULL;
	int r;

	r = pw_mode_parse(file, text, len, PW_LAYER_GLOBAL, &w, &mf);
	*ret_msg = w.n > 0 ? pw_warning_format(&w.v[0]) : NULL;
	pw_warnings_done(&w);
	if (ret_mf)
		*ret_mf = mf;
	else
		pw_mode_file_free(mf);
	return r;
}

static void expect_error(const char *file, const char *text, const char *want)
{
	_cleanup_free_ char *msg = NULL;

	cr_expect_eq(parse(file, text, strlen(text), NULL, &msg), -EINVAL, "%s", text);
	cr_expect_str_eq(msg ? msg : "(none)", want);
}

Test(parse, missing_name_and_empty_frontmatter)
{
	expect_error("x.md", "---\ndescription: d\n---\nbody\n",
		     "x.md:2:1: error: name: missing required key");
	expect_error("x.md", "---\n---\nbody\n", "x.md:2:1: error: name: missing required key");
	expect_error("x.md", "---\nname:\n---\nbody\n",
		     "x.md:2:6: error: name: expected a string, not null");
}

Test(parse, name_charset_and_length)
{
	char name[PW_MODE_NAME_MAX + 2], text[256], want[512];

	expect_error("-x.md", "---\nname: -x\n---\nbody\n",
		     "-x.md:2:7: error: name: invalid mode name \"-x\": use a-z, 0-9 and '-', not "
		     "starting with '-', at most 64 bytes");
	memset(name, 'a', PW_MODE_NAME_MAX + 1);
	name[PW_MODE_NAME_MAX + 1] = '\0';
	snprintf(text, sizeof(text), "---\nname: %s\n---\nbody\n", name);
	snprintf(want, sizeof(want),
		 "%s.md:2:7: error: name: invalid mode name \"%s\": use a-z, 0-9 and '-', not "
		 "starting with '-', at most 64 bytes",
		 name, name);
	expect_error(strcat(strcpy((char[128]){0}, name), ".md"), text, want);

	/* Exactly at the limit, with digits and dashes: fine. */
	name[PW_MODE_NAME_MAX] = '\0';
	name[0] = '9';
	name[5] = '-';
	snprintf(text, sizeof(text), "---\nname: %s\n---\nbody\n", name);
	{
		_cleanup_free_ char *msg = NULL;
		char file[128];
		pw_mode_file *mf = NULL;

		snprintf(file, sizeof(file), "dir/%s.md", name);
		cr_expect_eq(parse(file, text, strlen(text), &mf, &msg), 0);
		cr_expect_null(msg);
		cr_expect_str_eq(mf->mode.name, name);
		pw_mode_file_free(mf);
	}
}

Test(parse, booleans_and_defaults)
{
	static const char text[] =
	    "---\nname: m\nwrites:\n  tokens: True\nprotect: FALSE\n---\nb\n";
	_cleanup_free_ char *msg = NULL;
	pw_mode_file *mf = NULL;

	cr_assert_eq(parse("m.md", text, strlen(text), &mf, &msg), 0);
	cr_expect(mf->mode.tokens);
	cr_expect_not(mf->mode.protect);
	cr_expect_str_eq(mf->mode.description, "");
	cr_expect_eq(mf->mode.n_rules, 0);
	cr_expect_eq(mf->tokens_key.line, 4);
	cr_expect_eq(mf->protect_key.line, 5);
	pw_mode_file_free(mf);

	expect_error("m.md", "---\nname: m\nprotect: \"true\"\n---\nb\n",
		     "m.md:3:10: error: protect: expected true or false, not \"true\"");
	expect_error("m.md", "---\nname: m\nprotect: [true]\n---\nb\n",
		     "m.md:3:10: error: protect: expected true or false, not a list");
}

Test(parse, rule_items_and_limits)
{
	expect_error("m.md", "---\nname: m\nhide: [a, [b]]\n---\nb\n",
		     "m.md:3:11: error: hide[1]: expected a glob string, not a list");
	expect_error(
	    "m.md", "---\nname: m\nwrites: [a]\n---\nb\n",
	    "m.md:3:9: error: writes: expected a mapping of allow, deny, tokens and plans, not a "
	    "list");
	expect_error("m.md", "---\nname: m\nwrites: {deny: [\"\"]}\n---\nb\n",
		     "m.md:3:17: error: writes.deny[0]: invalid glob \"\": empty pattern");
	expect_error("m.md", "---\nname: m\n? [a]\n: b\n---\nb\n",
		     "m.md:3:3: error: mapping keys must be strings");
	expect_error("m.md", "---\nname: \"m\\0\"\n---\nb\n",
		     "m.md:2:7: error: a string holds a NUL byte");
	expect_error("m.md", "---\nname: m\n...\nfoo: 1\n---\nb\n",
		     "m.md:4:1: error: invalid YAML: did not find expected <document start>");

	/* PW_RULES_MAX rules load; one more is an error naming the limit. */
	for (int extra = 0; extra <= 1; extra++) {
		size_t n = PW_RULES_MAX + extra, cap = 64 + n * 16, len;
		_cleanup_free_ char *text = malloc(cap), *msg = NULL;
		pw_mode_file *mf = NULL;
		int r;

		len = (size_t)snprintf(text, cap, "---\nname: m\nwrites:\n  deny:\n");
		for (size_t i = 0; i < n; i++)
			len += (size_t)snprintf(text + len, cap - len, "    - d%zu\n", i);
		len += (size_t)snprintf(text + len, cap - len, "---\nbody\n");
		r = parse("m.md", text, len, &mf, &msg);
		if (extra) {
			cr_expect_eq(r, -EINVAL);
			cr_expect_str_eq(msg, "m.md:5:5: error: writes.deny: too many rules: 513 "
					      "(limit 512)");
		} else {
			cr_expect_eq(r, 0);
			cr_expect_eq(mf->mode.n_rules, PW_RULES_MAX);
			pw_mode_file_free(mf);
		}
	}
}

Test(parse, every_prefix_is_handled)
{
	/* Truncations of a valid file must each either load or fail with an error. */
	static const char text[] =
	    "\xef\xbb\xbf---\r\nname: m\r\nwrites:\r\n  allow: [\"a/**\"]\r\n"
	    "  deny: [b]\r\nhide: [c]\r\n---\r\nbody\r\n";

	for (size_t len = 0; len <= sizeof(text) - 1; len++) {
		_cleanup_free_ char *msg = NULL;
		pw_mode_file *mf = NULL;
		int r = parse("m.md", text, len, &mf, &msg);

		cr_expect(r == 0 || r == -EINVAL);
		if (r == -EINVAL)
			cr_expect_not_null(msg, "prefix %zu rejected silently", len);
		if (r == 0)
			cr_expect_str_eq(mf->mode.name, "m");
		pw_mode_file_free(mf);
	}
}

/* ---- files on disk: limits ----------------------------------------------------------- */

static char *make_dir(void)
{
	char *d = malloc(4096);

	cr_assert_not_null(d);
	testdir_make(d, 4096, "pw-test-mode");
	return d;
}

static void write_file(const char *dir, const char *name, const char *text, size_t len)
{
	_cleanup_free_ char *path = NULL;
	_cleanup_close_ int fd = -1;

	cr_assert_geq(asprintf(&path, "%s/%s", dir, name), 0);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, len), (ssize_t)len);
}

static void remove_dir(const char *dir)
{
	testdir_remove(dir);
}

Test(files, size_cap)
{
	_cleanup_free_ char *dir = make_dir(), *big = malloc(PW_MODE_FILE_MAX + 1), *want = NULL;
	static const char head[] = "---\nname: big\n---\n";
	pw_modeset *ms;

	memset(big, 'x', PW_MODE_FILE_MAX + 1);
	memcpy(big, head, strlen(head));
	write_file(dir, "big.md", big, PW_MODE_FILE_MAX + 1);
	write_file(dir, "fits.md", big,
		   PW_MODE_FILE_MAX); /* name "big": a mismatch, not a size error */
	ms = load_modes(dir, NULL, NULL, false);
	cr_assert_eq(pw_modeset_warning_count(ms), 2);
	cr_assert_geq(asprintf(&want, "%s/big.md: error: file too large (limit 262144 bytes)", dir),
		      0);
	{
		_cleanup_free_ char *got = pw_warning_format(pw_modeset_warning(ms, 0));
		_cleanup_free_ char *got2 = pw_warning_format(pw_modeset_warning(ms, 1));

		cr_expect_str_eq(got, want);
		cr_expect(strstr(got2, "fits.md:2:7: error: name: name \"big\" does not match"));
	}
	cr_expect(pw_modeset_mode_broken(ms, "big", NULL));
	pw_modeset_free(ms);
	remove_dir(dir);
}

Test(files, modes_per_layer_cap)
{
	_cleanup_free_ char *dir = make_dir(), *want = NULL, *got = NULL;
	pw_modeset *ms;

	for (int i = 0; i <= PW_MODES_MAX; i++) {
		char name[32], text[64];

		snprintf(name, sizeof(name), "m%03d.md", i);
		snprintf(text, sizeof(text), "---\nname: m%03d\n---\nbody\n", i);
		write_file(dir, name, text, strlen(text));
	}
	ms = load_modes(dir, NULL, NULL, false);
	cr_expect_eq(pw_modeset_count(ms), PW_MODES_MAX);
	cr_assert_eq(pw_modeset_warning_count(ms), 1);
	got = pw_warning_format(pw_modeset_warning(ms, 0));
	cr_assert_geq(asprintf(&want,
			       "%s/m064.md: error: too many modes in one directory (limit 64); "
			       "skipped",
			       dir),
		      0);
	cr_expect_str_eq(got, want);
	cr_expect(pw_modeset_mode_broken(ms, "m064", NULL));
	pw_modeset_free(ms);
	remove_dir(dir);
}

Test(files, bad_config_fails_every_mode_closed)
{
	_cleanup_free_ char *dir = make_dir(), *want = NULL, *got = NULL, *why = NULL;
	static const char cfg[] = "protected: [\"secrets/[x\", \"*.pem\"]\n";
	const pw_warning *w = NULL;
	pw_modeset *ms;

	/* One bad glob: the file is skipped whole, so "*.pem" is not applied either. That
	 * must not leave a.pem writable: every mode is broken, so a view fails closed. */
	write_file(dir, "config.yaml", cfg, strlen(cfg));
	ms = load_modes(SOURCE_MODES, dir, NULL, false);
	/* One problem, listed once: the error itself says what it costs. */
	cr_assert_eq(pw_modeset_warning_count(ms), 1);
	got = pw_warning_format(pw_modeset_warning(ms, 0));
	cr_assert_geq(
	    asprintf(&want,
		     "%s/config.yaml:1:13: error: protected[0]: invalid glob "
		     "\"secrets/[x\": unterminated character class"
		     "; so none of the file's rules apply: every mode fails closed (nothing is "
		     "writable) until it is fixed and reloaded",
		     dir),
	    0);
	cr_expect_str_eq(got, want);
	cr_expect_eq(pw_modeset_protected_count(ms), 3); /* the defaults only */
	for (size_t i = 0; i < pw_modeset_count(ms); i++) {
		const char *name = pw_modeset_get(ms, i)->name;

		cr_expect(pw_modeset_mode_broken(ms, name, &w), "%s", name);
	}
	cr_expect(pw_modeset_mode_broken(ms, "nosuch", NULL));
	cr_assert(pw_modeset_mode_broken(ms, "build", &w));
	why = pw_warning_format(w);
	free(want);
	cr_assert_geq(asprintf(&want,
			       "%s/config.yaml:1:13: error: protected[0]: invalid glob "
			       "\"secrets/[x\": unterminated character class; so none of the "
			       "file's rules apply: every mode fails closed (nothing is "
			       "writable) until it is fixed and reloaded",
			       dir),
		      0);
	cr_expect_str_eq(why, want);
	pw_modeset_free(ms);

	/* Fixed and reloaded: nothing is broken, and both rules apply. */
	{
		static const char fixed[] = "protected: [\"secrets/x\", \"*.pem\"]\n";

		write_file(dir, "config.yaml", fixed, strlen(fixed));
	}
	ms = load_modes(SOURCE_MODES, dir, NULL, false);
	cr_expect_eq(pw_modeset_warning_count(ms), 0);
	cr_expect_not(pw_modeset_mode_broken(ms, "build", NULL));
	cr_expect_eq(pw_modeset_protected_count(ms), 5);
	pw_modeset_free(ms);
	remove_dir(dir);
}

Test(files, a_misspelt_key_is_an_error_with_a_hint)
{
	_cleanup_free_ char *dir = make_dir(), *cfgdir = make_dir();
	static const struct {
		const char *text, *want;
	} cases[] = {
	    {"---\nname: m\nwrites:\n  alow: [src/**]\n---\nb\n",
	     "m.md:4:3: error: writes.alow: unknown key; did you mean 'allow'?"},
	    {"---\nname: m\nwrites:\n  allow: [\"**\"]\n  dney: [secrets/**]\n---\nb\n",
	     "m.md:5:3: error: writes.dney: unknown key; did you mean 'deny'?"},
	    {"---\nname: m\nhid: [.env]\n---\nb\n",
	     "m.md:3:1: error: hid: unknown key; did you mean 'hide'?"},
	    {"---\nname: m\nprotects: false\n---\nb\n",
	     "m.md:3:1: error: protects: unknown key; did you mean 'protect'?"},
	};
	static const char cfg[] = "protcted: [\"*.pem\"]\n";
	_cleanup_free_ char *got = NULL, *want = NULL;
	pw_modeset *ms;

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		pw_warnings w = {0};
		pw_mode_file *mf = NULL;
		_cleanup_free_ char *text = NULL;

		cr_expect_eq(pw_mode_parse("m.md", cases[i].text, strlen(cases[i].text),
					   PW_LAYER_GLOBAL, &w, &mf),
			     -EINVAL, "%s", cases[i].want);
		cr_assert_geq(w.n, 1);
		text = pw_warning_format(&w.v[0]);
		cr_expect_str_eq(text, cases[i].want);
		pw_warnings_done(&w);
	}
	/* In config.yaml too; the file is skipped, so every mode fails closed. */
	write_file(cfgdir, "config.yaml", cfg, strlen(cfg));
	ms = load_modes(SOURCE_MODES, cfgdir, NULL, false);
	got = pw_warning_format(pw_modeset_warning(ms, 0));
	cr_assert_geq(
	    asprintf(&want,
		     "%s/config.yaml:1:1: error: protcted: unknown key; did you "
		     "mean 'protected'?"
		     "; so none of the file's rules apply: every mode fails closed (nothing is "
		     "writable) until it is fixed and reloaded",
		     cfgdir),
	    0);
	cr_expect_str_eq(got, want);
	cr_expect(pw_modeset_mode_broken(ms, "build", NULL));
	pw_modeset_free(ms);
	remove_dir(dir);
	remove_dir(cfgdir);
}

Test(files, unknown_config_key_breaks_nothing)
{
	_cleanup_free_ char *dir = make_dir();
	static const char cfg[] = "protected: [\"*.pem\"]\ncolour: blue\n";
	pw_modeset *ms;

	write_file(dir, "config.yaml", cfg, strlen(cfg));
	ms = load_modes(SOURCE_MODES, dir, NULL, false);
	cr_assert_eq(pw_modeset_warning_count(ms), 1);
	cr_expect_eq(pw_modeset_warning(ms, 0)->severity, PW_WARNING);
	cr_expect_not(pw_modeset_mode_broken(ms, "build", NULL));
	cr_expect_eq(pw_modeset_protected_count(ms), 4);
	pw_modeset_free(ms);
	remove_dir(dir);
}

/* ---- layers, trust, protected paths, tokens ------------------------------------------- */

Test(layers, defaults)
{
	static const char *const want[] = {".git/hooks", ".git/config", "/.piworkfs"};
	pw_modeset *ms = load_modes(NULL, NULL, NULL, false);

	cr_expect_eq(pw_modeset_count(ms), 0);
	cr_expect_eq(pw_modeset_warning_count(ms), 0);
	cr_assert_eq(pw_modeset_protected_count(ms), 3);
	for (size_t i = 0; i < 3; i++) {
		const pw_rule *r = pw_modeset_protected(ms, i);

		cr_expect_str_eq(r->pattern, want[i]);
		cr_expect_str_eq(r->file, "(built-in)");
		cr_expect_eq(r->layer, PW_LAYER_DEFAULT);
		cr_expect_eq(r->kind, PW_RULE_PROTECTED);
	}
	cr_expect_eq(pw_modeset_token_count(ms), 0);
	pw_modeset_free(ms);
}

Test(layers, bundled_modes_load_clean)
{
	static const char *const names[] = {"build", "design", "discuss", "off", "plan", "review"};
	pw_modeset *ms = load_modes(SOURCE_MODES, NULL, NULL, false);

	cr_assert_eq(pw_modeset_warning_count(ms), 0);
	cr_assert_eq(pw_modeset_count(ms), 6);
	for (size_t i = 0; i < 6; i++) {
		const pw_mode *m = pw_modeset_get(ms, i);

		cr_expect_str_eq(m->name, names[i]);
		cr_expect_eq(m->layer, PW_LAYER_BUNDLED);
		cr_expect_gt(strlen(m->description), 10);
		cr_expect(strstr(m->body, "piworkfs mode"), "%s body names the switch", m->name);
		cr_expect_eq(m->protect, !streq(m->name, "off"));
		cr_expect_eq(m->tokens, streq(m->name, "design"));
	}
	pw_modeset_free(ms);
}

Test(layers, global_overrides_bundled)
{
	static const char *const want[] = {GLOBAL "/config.yaml:6:1: warning: colour: unknown key "
						  "(ignored)"};
	pw_modeset *ms = load_modes(SOURCE_MODES, GLOBAL, NULL, false);
	const pw_mode *build = pw_modeset_find(ms, "build"), *design;

	expect_warnings(ms, want, ELEMENTSOF(want));
	cr_assert_not_null(build);
	cr_expect_eq(build->layer, PW_LAYER_GLOBAL);
	cr_expect_str_eq(build->file, GLOBAL "/modes/build.md");
	cr_expect_str_eq(build->description, "Build, but never touch secrets");
	cr_assert_eq(build->n_rules, 2);
	cr_expect_str_eq(rule_of(build, 1)->pattern, "secrets/**");
	cr_expect_eq(rule_of(build, 1)->kind, PW_RULE_DENY);
	design = pw_modeset_find(ms, "design");
	cr_expect_eq(design->layer, PW_LAYER_BUNDLED);
	cr_expect_eq(pw_modeset_count(ms), 6);

	cr_assert_eq(pw_modeset_protected_count(ms), 4);
	cr_expect_str_eq(pw_modeset_protected(ms, 3)->pattern, "deploy/**");
	cr_expect_eq(pw_modeset_protected(ms, 3)->layer, PW_LAYER_GLOBAL);
	cr_expect_eq(pw_modeset_protected(ms, 3)->line, 2);
	cr_assert_eq(pw_modeset_token_count(ms), 1);
	cr_expect_str_eq(pw_modeset_token(ms, 0)->pattern, "tokens/colors.json");
	cr_expect_eq(pw_modeset_token(ms, 0)->kind, PW_RULE_TOKEN);
	pw_modeset_free(ms);
}

Test(trust, untrusted_project_only_tightens)
{
	static const char *const want[] = {
	    GLOBAL "/config.yaml:6:1: warning: colour: unknown key (ignored)",
	    PMODES "build.md:5:3: warning: writes.allow: " UNTRUSTED,
	    PMODES "build.md:7:1: warning: protect: " UNTRUSTED,
	    PMODES "design.md:5:3: warning: writes.allow: " UNTRUSTED,
	    PMODES "lint.md:5:3: warning: writes.allow: " UNTRUSTED,
	    PMODES "plan.md:4:3: warning: writes.tokens: " UNTRUSTED,
	    PROJECT "/.piworkfs/config.yaml:3:3: warning: design.tokens: " UNTRUSTED,
	};
	pw_modeset *ms = load_modes(SOURCE_MODES, GLOBAL, PROJECT, false);
	const pw_mode *m;

	expect_warnings(ms, want, ELEMENTSOF(want));
	for (size_t i = 0; i < pw_modeset_warning_count(ms); i++)
		cr_expect_eq(pw_modeset_warning(ms, i)->severity, PW_WARNING);

	/* build: the global mode, protect still true, the project's deny added. */
	m = pw_modeset_find(ms, "build");
	cr_expect_eq(m->layer, PW_LAYER_GLOBAL);
	cr_expect(m->protect);
	cr_assert_eq(m->n_rules, 3);
	cr_expect_str_eq(rule_of(m, 0)->pattern, "**");
	cr_expect_str_eq(rule_of(m, 2)->pattern, "generated/**");
	cr_expect_eq(rule_of(m, 2)->layer, PW_LAYER_PROJECT);
	cr_expect_str_eq(rule_of(m, 2)->file, PMODES "build.md");

	/* design: the bundled allow rules only, plus the project's deny and hide. */
	m = pw_modeset_find(ms, "design");
	cr_expect_eq(m->layer, PW_LAYER_BUNDLED);
	cr_expect(strstr(m->body, "Mode: design"));
	cr_assert_eq(m->n_rules, 4);
	for (size_t i = 0; i < m->n_rules; i++)
		cr_expect_str_neq(rule_of(m, i)->pattern, "src/**");
	cr_expect_eq(rule_of(m, 2)->kind, PW_RULE_DENY);
	cr_expect_eq(rule_of(m, 3)->kind, PW_RULE_HIDE);
	cr_expect_str_eq(rule_of(m, 3)->pattern, "secret.txt");

	/* plan: tokens stay off. lint: a new mode that writes nothing. */
	cr_expect_not(pw_modeset_find(ms, "plan")->tokens);
	m = pw_modeset_find(ms, "lint");
	cr_assert_not_null(m);
	cr_expect_eq(m->layer, PW_LAYER_PROJECT);
	cr_assert_eq(m->n_rules, 1);
	cr_expect_eq(rule_of(m, 0)->kind, PW_RULE_DENY);
	cr_expect_not(m->tokens);
	cr_expect(m->protect);

	/* A project may add protected paths even untrusted; its token files are ignored. */
	cr_assert_eq(pw_modeset_protected_count(ms), 5);
	cr_expect_str_eq(pw_modeset_protected(ms, 4)->pattern, "release/**");
	cr_assert_eq(pw_modeset_token_count(ms), 1);
	cr_expect_str_eq(pw_modeset_token(ms, 0)->pattern, "tokens/colors.json");
	pw_modeset_free(ms);
}

Test(trust, trusted_project_has_full_authority)
{
	static const char *const want[] = {
	    GLOBAL "/config.yaml:6:1: warning: colour: unknown key (ignored)",
	};
	pw_modeset *ms = load_modes(SOURCE_MODES, GLOBAL, PROJECT, true);
	const pw_mode *m;

	expect_warnings(ms, want, ELEMENTSOF(want));
	m = pw_modeset_find(ms, "build");
	cr_expect_eq(m->layer, PW_LAYER_PROJECT);
	cr_expect_not(m->protect);
	cr_assert_eq(m->n_rules, 2); /* replaced: the global deny rule is gone */
	cr_expect_str_eq(rule_of(m, 1)->pattern, "generated/**");
	m = pw_modeset_find(ms, "design");
	cr_expect_eq(m->layer, PW_LAYER_PROJECT);
	cr_expect_str_eq(rule_of(m, 0)->pattern, "src/**");
	cr_expect_eq(rule_of(m, 0)->kind, PW_RULE_ALLOW);
	cr_expect_not(m->tokens);
	cr_expect(pw_modeset_find(ms, "plan")->tokens);
	m = pw_modeset_find(ms, "lint");
	cr_assert_eq(m->n_rules, 2);
	cr_expect_eq(rule_of(m, 0)->kind, PW_RULE_ALLOW);

	/* Protected paths: every layer's, none removed. Tokens: global and project. */
	cr_assert_eq(pw_modeset_protected_count(ms), 5);
	cr_expect_str_eq(pw_modeset_protected(ms, 0)->pattern, ".git/hooks");
	cr_expect_str_eq(pw_modeset_protected(ms, 2)->pattern, "/.piworkfs");
	cr_expect_str_eq(pw_modeset_protected(ms, 3)->pattern, "deploy/**");
	cr_expect_str_eq(pw_modeset_protected(ms, 4)->pattern, "release/**");
	cr_assert_eq(pw_modeset_token_count(ms), 2);
	cr_expect_str_eq(pw_modeset_token(ms, 1)->pattern, "theme.css");
	cr_expect_eq(pw_modeset_token(ms, 1)->layer, PW_LAYER_PROJECT);
	pw_modeset_free(ms);
}

/* ---- formatting and names ------------------------------------------------------------ */

Test(format, warning_parts)
{
	pw_warning w = {.severity = PW_ERROR,
			.file = "f.md",
			.line = 3,
			.column = 4,
			.key = "writes.allow[2]",
			.message = "bad"};
	_cleanup_free_ char *a = pw_warning_format(&w), *b = NULL, *c = NULL, *d = NULL;

	cr_expect_str_eq(a, "f.md:3:4: error: writes.allow[2]: bad");
	w.column = 0;
	w.severity = PW_WARNING;
	b = pw_warning_format(&w);
	cr_expect_str_eq(b, "f.md:3: warning: writes.allow[2]: bad");
	w.line = 0;
	w.key = NULL;
	c = pw_warning_format(&w);
	cr_expect_str_eq(c, "f.md: warning: bad");
	w.line = 7;
	w.column = 1;
	d = pw_warning_format(&w);
	cr_expect_str_eq(d, "f.md:7:1: warning: bad");
}

Test(format, names)
{
	cr_expect_str_eq(pw_layer_name(PW_LAYER_BUNDLED), "bundled");
	cr_expect_str_eq(pw_layer_name(PW_LAYER_GLOBAL), "global");
	cr_expect_str_eq(pw_layer_name(PW_LAYER_PROJECT), "project");
	cr_expect_str_eq(pw_layer_name(PW_LAYER_DEFAULT), "default");
	cr_expect_str_eq(pw_rule_kind_name(PW_RULE_ALLOW), "allow");
	cr_expect_str_eq(pw_rule_kind_name(PW_RULE_DENY), "deny");
	cr_expect_str_eq(pw_rule_kind_name(PW_RULE_HIDE), "hide");
	cr_expect_str_eq(pw_rule_kind_name(PW_RULE_PROTECTED), "protected");
	cr_expect_str_eq(pw_rule_kind_name(PW_RULE_TOKEN), "token");
}

/* The names of layers and rule kinds are what `--json` says and what a policy read back
 * (report.c) parses: each value has its own, and reads back as itself. */
Test(names, layers_and_rule_kinds_read_back)
{
	static const pw_layer layers[] = {PW_LAYER_BUNDLED, PW_LAYER_GLOBAL, PW_LAYER_PROJECT,
					  PW_LAYER_DEFAULT, PW_LAYER_LANE};
	static const pw_rule_kind kinds[] = {PW_RULE_ALLOW,	PW_RULE_DENY,  PW_RULE_HIDE,
					     PW_RULE_PROTECTED, PW_RULE_TOKEN, PW_RULE_LANE};
	for (size_t i = 0; i < ELEMENTSOF(layers); i++) {
		cr_expect_str_neq(pw_layer_name(layers[i]), "unknown");
		cr_expect_eq(pw_layer_from_name(pw_layer_name(layers[i])), (int)layers[i]);
	}
	for (size_t i = 0; i < ELEMENTSOF(kinds); i++) {
		cr_expect_str_neq(pw_rule_kind_name(kinds[i]), "unknown");
		cr_expect_eq(pw_rule_kind_from_name(pw_rule_kind_name(kinds[i])), (int)kinds[i]);
	}
	cr_expect_str_eq(pw_layer_name((pw_layer)99), "unknown");
	cr_expect_eq(pw_layer_from_name("unknown"), -EINVAL);
	cr_expect_eq(pw_rule_kind_from_name(NULL), -EINVAL);
}
