/* SPDX-License-Identifier: MIT */
/*
 * Compiled policies: decisions of the six bundled modes over a table of paths and every
 * operation, hidden paths, trust as the decisions see it, fail-closed policies, lifetime,
 * and pw_policy_is_tightening.
 *
 * The decision table's tree (nothing needs to exist: decisions are on names):
 *
 *   ""                       the project root
 *   src/main.c
 *   src/theme.css            a declared token file (tokens-global/config.yaml)
 *   tokens/colors.json       a declared token file
 *   docs/readme.md
 *   docs/design/             directory
 *   docs/design/spec.md
 *   .git/config              protected (built-in)
 *   .git/hooks/              protected (built-in), directory
 *   .git/hooks/pre-commit
 *   .git/objects/ab          not protected
 *   .piworkfs/config.yaml    protected (built-in)
 */
#include <criterion/criterion.h>
#include <pthread.h>

#include "load_modes.h"
#include "mode.h"
#include "policy.h"
#include "util.h"

#define TOKENS FIXTURES "/tokens-global"

static pw_policy *compile(const pw_modeset *ms, const char *mode)
{
	pw_policy *p = NULL;

	cr_assert_eq(pw_policy_compile(ms, mode, &p), 0, "compile %s", mode);
	cr_assert_not_null(p);
	return p;
}

/* One expected outcome for every write operation on a path. */
typedef struct expect {
	const char *path;
	bool is_dir;
	bool allowed;
	int err;
	pw_reason reason;
	const char *rule; /* pattern of the deciding rule, NULL for none */
} expect;

#define OK(path, dir, rule)                                                                        \
	{                                                                                          \
		path, dir, true, 0, PW_REASON_ALLOW_RULE, rule                                     \
	}
#define TOKEN(path, rule)                                                                          \
	{                                                                                          \
		path, false, true, 0, PW_REASON_TOKEN, rule                                        \
	}
#define NO(path, dir, err, reason, rule)                                                           \
	{                                                                                          \
		path, dir, false, err, reason, rule                                                \
	}

static const pw_op read_ops[] = {PW_OP_LOOKUP, PW_OP_READ};

static void expect_decision(const pw_policy *p, pw_op op, const expect *e, bool allowed, int err,
			    pw_reason reason, const char *rule)
{
	pw_decision d;
	const char *what = pw_op_name(op);

	memset(&d, 0xa5, sizeof(d));
	pw_policy_decide(p, op, e->path, e->is_dir, &d);
	cr_expect_eq(d.allowed, allowed, "%s %s \"%s\": allowed", pw_policy_mode_name(p), what,
		     e->path);
	cr_expect_eq(d.err, err, "%s %s \"%s\": errno %d, want %d", pw_policy_mode_name(p), what,
		     e->path, d.err, err);
	cr_expect_eq(d.reason, reason, "%s %s \"%s\": reason %s, want %s", pw_policy_mode_name(p),
		     what, e->path, pw_reason_name(d.reason), pw_reason_name(reason));
	if (rule) {
		cr_assert_not_null(d.rule, "%s %s \"%s\": no rule", pw_policy_mode_name(p), what,
				   e->path);
		cr_expect_str_eq(d.rule->pattern, rule, "%s %s \"%s\"", pw_policy_mode_name(p),
				 what, e->path);
	} else
		cr_expect_null(d.rule, "%s %s \"%s\": rule %s", pw_policy_mode_name(p), what,
			       e->path, d.rule ? d.rule->pattern : "");
}

/* Every operation on every row: reads as READ (nothing here is hidden), writes as listed. */
static void check_table(const pw_policy *p, const expect *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const expect *e = &rows[i];

		for (size_t k = 0; k < ELEMENTSOF(read_ops); k++)
			expect_decision(p, read_ops[k], e, true, 0, PW_REASON_READ, NULL);
		for (int op = 0; op < _PW_OP_MAX; op++) {
			if (!pw_op_is_write(op))
				continue;
			expect_decision(p, op, e, e->allowed, e->err, e->reason, e->rule);
		}
		cr_expect_eq(pw_policy_may_write(p, e->path, e->is_dir), e->allowed, "%s \"%s\"",
			     pw_policy_mode_name(p), e->path);
		cr_expect_not(pw_policy_is_hidden(p, e->path, e->is_dir));
	}
}

#define RO(path, dir) NO(path, dir, EROFS, PW_REASON_READ_ONLY, NULL)

static const expect read_only_rows[] = {
    RO("", true),
    RO("src/main.c", false),
    RO("src/theme.css", false),
    RO("tokens/colors.json", false),
    RO("docs/readme.md", false),
    RO("docs/design", true),
    RO("docs/design/spec.md", false),
    RO(".git/config", false),
    RO(".git/hooks", true),
    RO(".git/hooks/pre-commit", false),
    RO(".git/objects/ab", false),
    RO(".piworkfs/config.yaml", false),
};

static const expect design_rows[] = {
    NO("", true, EACCES, PW_REASON_NO_ALLOW, NULL),
    NO("src/main.c", false, EACCES, PW_REASON_NO_ALLOW, NULL),
    TOKEN("src/theme.css", "src/theme.css"),
    TOKEN("tokens/colors.json", "tokens/colors.json"),
    NO("tokens/other.json", false, EACCES, PW_REASON_NO_ALLOW, NULL),
    NO("docs/readme.md", false, EACCES, PW_REASON_NO_ALLOW, NULL),
    NO("docs", true, EACCES, PW_REASON_NO_ALLOW, NULL),
    OK("docs/design", true, "docs/design/"),
    NO("docs/design", false, EACCES, PW_REASON_NO_ALLOW, NULL),
    OK("docs/design/spec.md", false, "docs/design/**"),
    OK("docs/design/ui/flows", true, "docs/design/**"),
    NO("docs/designs/x.md", false, EACCES, PW_REASON_NO_ALLOW, NULL),
    NO(".git/config", false, EACCES, PW_REASON_PROTECTED, ".git/config"),
    NO(".git/hooks", true, EACCES, PW_REASON_PROTECTED, ".git/hooks"),
    NO(".git/hooks/pre-commit", false, EACCES, PW_REASON_PROTECTED, ".git/hooks"),
    NO(".git/objects/ab", false, EACCES, PW_REASON_NO_ALLOW, NULL),
    NO(".piworkfs/config.yaml", false, EACCES, PW_REASON_PROTECTED, "/.piworkfs"),
};

static const expect build_rows[] = {
    OK("", true, "**"),
    OK("src/main.c", false, "**"),
    OK("src/theme.css", false, "**"),
    OK("tokens/colors.json", false, "**"),
    OK("docs/readme.md", false, "**"),
    OK("docs/design", true, "**"),
    OK("docs/design/spec.md", false, "**"),
    NO(".git/config", false, EACCES, PW_REASON_PROTECTED, ".git/config"),
    NO(".git/hooks", true, EACCES, PW_REASON_PROTECTED, ".git/hooks"),
    NO(".git/hooks/pre-commit", false, EACCES, PW_REASON_PROTECTED, ".git/hooks"),
    OK(".git/objects/ab", false, "**"),
    OK(".git", true, "**"),
    NO(".piworkfs", true, EACCES, PW_REASON_PROTECTED, "/.piworkfs"),
    NO(".piworkfs/config.yaml", false, EACCES, PW_REASON_PROTECTED, "/.piworkfs"),
    OK(".piworkfsx", false, "**"),
};

static const expect off_rows[] = {
    OK("", true, "**"),
    OK("src/main.c", false, "**"),
    OK("src/theme.css", false, "**"),
    OK("docs/design/spec.md", false, "**"),
    OK(".git/config", false, "**"),
    OK(".git/hooks", true, "**"),
    OK(".git/hooks/pre-commit", false, "**"),
    OK(".piworkfs/config.yaml", false, "**"),
};

Test(bundled, decision_table)
{
	pw_modeset *ms = load_modes(SOURCE_MODES, TOKENS, NULL, false);
	static const char *const ro[] = {"discuss", "plan", "review"};

	cr_assert_eq(pw_modeset_warning_count(ms), 0);
	for (size_t i = 0; i < ELEMENTSOF(ro); i++) {
		pw_policy *p = compile(ms, ro[i]);

		/* plan writes its plans folder and nothing else: the rest answers EROFS as in
		 * the modes that write nothing. */
		cr_expect(pw_policy_writes_nothing(p) == !streq(ro[i], "plan"));
		check_table(p, read_only_rows, ELEMENTSOF(read_only_rows));
		pw_policy_unref(p);
	}
	{
		pw_policy *p = compile(ms, "design");

		cr_expect_not(pw_policy_writes_nothing(p));
		check_table(p, design_rows, ELEMENTSOF(design_rows));
		pw_policy_unref(p);
	}
	{
		pw_policy *p = compile(ms, "build");

		check_table(p, build_rows, ELEMENTSOF(build_rows));
		cr_expect(pw_policy_protects(p));
		pw_policy_unref(p);
	}
	{
		/* plan: the plans folder and nothing else (approved plans: see plans_freeze). */
		static const expect plan_rows[] = {
		    OK("docs/plans/x.md", false, "/docs/plans/**"),
		    OK("docs/plans", true, "/docs/plans/**"),
		    OK("docs/plans/notes/a.txt", false, "/docs/plans/**"),
		    RO("docs/x.md", false),
		    RO("src/a.c", false),
		    RO("a/docs/plans/x.md", false),
		    RO(".git/config", false),
		};
		pw_policy *p = compile(ms, "plan");
		pw_decision d;

		check_table(p, plan_rows, ELEMENTSOF(plan_rows));
		/* The way to the folder may be made in a project that has none. */
		pw_policy_decide_new_name(p, PW_OP_MKDIR, "docs", true, &d);
		cr_expect(d.allowed);
		pw_policy_decide_new_name(p, PW_OP_MKDIR, "doc", true, &d);
		cr_expect_eq(d.err, EROFS);
		pw_policy_decide_new_name(p, PW_OP_MKDIR, "docs/plan", true, &d);
		cr_expect_eq(d.err, EROFS);
		pw_policy_decide_new_name(p, PW_OP_MKDIR, "docs/other", true, &d);
		cr_expect_eq(d.err, EROFS);
		pw_policy_decide_new_name(p, PW_OP_CREATE, "docs", false, &d);
		cr_expect_eq(d.err, EROFS);
		pw_policy_decide(p, PW_OP_RMDIR, "docs", true, &d);
		cr_expect_eq(d.err, EROFS);
		pw_policy_decide(p, PW_OP_CHMOD, "docs", true, &d);
		cr_expect_eq(d.err, EROFS);
		pw_policy_unref(p);
	}
	{
		pw_policy *p = compile(ms, "off");

		check_table(p, off_rows, ELEMENTSOF(off_rows));
		cr_expect_not(pw_policy_protects(p));
		pw_policy_unref(p);
	}
	pw_modeset_free(ms);
}

Test(bundled, deciding_rule_carries_its_origin)
{
	pw_modeset *ms = load_modes(SOURCE_MODES, TOKENS, NULL, false);
	pw_policy *p = compile(ms, "design");
	static const char *const rules[] = {".git/hooks",     ".git/config",  "/.piworkfs",
					    "docs/design/**", "docs/design/", "tokens/colors.json",
					    "src/theme.css"};
	pw_decision d;

	pw_policy_decide(p, PW_OP_CREATE, "docs/design/a.md", false, &d);
	cr_assert_not_null(d.rule);
	cr_expect_str_eq(d.rule->file, SOURCE_MODES "/design.md");
	cr_expect_eq(d.rule->line, 6);
	cr_expect_eq(d.rule->column, 7);
	cr_expect_eq(d.rule->layer, PW_LAYER_BUNDLED);
	cr_expect_eq(d.rule->kind, PW_RULE_ALLOW);

	pw_policy_decide(p, PW_OP_WRITE, "tokens/colors.json", false, &d);
	cr_expect_str_eq(d.rule->file, TOKENS "/config.yaml");
	cr_expect_eq(d.rule->line, 2);
	cr_expect_eq(d.rule->kind, PW_RULE_TOKEN);

	pw_policy_decide(p, PW_OP_UNLINK, ".git/config", false, &d);
	cr_expect_str_eq(d.rule->file, "(built-in)");
	cr_expect_eq(d.rule->layer, PW_LAYER_DEFAULT);

	/* Every rule the policy applies, in decision order. */
	cr_assert_eq(pw_policy_rule_count(p), ELEMENTSOF(rules));
	for (size_t i = 0; i < ELEMENTSOF(rules); i++)
		cr_expect_str_eq(pw_policy_rule(p, i)->pattern, rules[i]);
	cr_expect_null(pw_policy_rule(p, ELEMENTSOF(rules)));

	cr_expect_str_eq(pw_policy_mode_name(p), "design");
	cr_expect_str_eq(pw_policy_source(p), SOURCE_MODES "/design.md");
	cr_expect_str_eq(pw_policy_description(p),
			 "Write design documents and design tokens; the rest is read-only");
	cr_expect(strstr(pw_policy_body(p), "piworkfs mode build"));
	cr_expect_not(pw_policy_is_fail_closed(p));
	cr_expect_null(pw_policy_fail_reason(p));
	pw_policy_unref(p);
	pw_modeset_free(ms);
}

Test(bundled, off_applies_no_protected_rules_and_design_without_tokens)
{
	pw_modeset *ms = load_modes(SOURCE_MODES, NULL, NULL, false);
	pw_policy *off = compile(ms, "off"), *design = compile(ms, "design");
	pw_decision d;

	cr_assert_eq(pw_policy_rule_count(off), 1);
	cr_expect_str_eq(pw_policy_rule(off, 0)->pattern, "**");
	/* No token files declared: design still writes docs/design. */
	cr_expect_not(pw_policy_writes_nothing(design));
	pw_policy_decide(design, PW_OP_WRITE, "tokens/colors.json", false, &d);
	cr_expect_eq(d.err, EACCES);
	cr_expect_eq(d.reason, PW_REASON_NO_ALLOW);
	pw_policy_unref(off);
	pw_policy_unref(design);
	pw_modeset_free(ms);
}

Test(compile, unknown_mode)
{
	pw_modeset *ms = load_modes(SOURCE_MODES, NULL, NULL, false);
	pw_policy *p = NULL;

	cr_expect_eq(pw_policy_compile(ms, "nope", &p), -ENOENT);
	cr_expect_null(p);
	pw_modeset_free(ms);
}

/* ---- hidden paths -------------------------------------------------------------------- */

Test(hidden, hide_rules_answer_enoent_for_every_op)
{
	pw_modeset *ms = load_modes(FIXTURES "/modes-hide", NULL, NULL, false);
	pw_policy *p = compile(ms, "secret");
	static const expect hidden[] = {
	    NO(".env", false, ENOENT, PW_REASON_HIDDEN, ".env"),
	    NO("secrets", true, ENOENT, PW_REASON_HIDDEN, "secrets/"),
	    NO("secrets/db/password", false, ENOENT, PW_REASON_HIDDEN, "secrets/"),
	    NO("id.key", false, ENOENT, PW_REASON_HIDDEN, "**/*.key"),
	    NO("a/b/c.key", false, ENOENT, PW_REASON_HIDDEN, "**/*.key"),
	};
	static const expect visible[] = {
	    OK("", true, "**"),
	    OK(".envrc", false, "**"),
	    OK("secrets", false, "**"), /* "secrets/" names directories only */
	    OK("src/.env.example", false, "**"),
	    NO("vendor/lib.c", false, EACCES, PW_REASON_DENY_RULE, "vendor/**"),
	    NO(".git/config", false, EACCES, PW_REASON_PROTECTED, ".git/config"),
	};

	cr_expect(pw_policy_has_hide_rules(p));
	for (size_t i = 0; i < ELEMENTSOF(hidden); i++) {
		const expect *e = &hidden[i];

		for (int op = 0; op < _PW_OP_MAX; op++)
			expect_decision(p, op, e, false, ENOENT, PW_REASON_HIDDEN, e->rule);
		cr_expect(pw_policy_is_hidden(p, e->path, e->is_dir), "%s", e->path);
		cr_expect_not(pw_policy_may_write(p, e->path, e->is_dir), "%s", e->path);
	}
	check_table(p, visible, ELEMENTSOF(visible));
	pw_policy_unref(p);
	pw_modeset_free(ms);
}

Test(hidden, a_new_name_is_refused_by_the_write_rules_before_the_hide_rules)
{
	pw_modeset *ms = load_modes(FIXTURES "/modes-hide", NULL, NULL, false);
	pw_policy *p = compile(ms, "secret");
	pw_decision d;

	/* Hidden and refused by a deny rule: the refusal a free name would get. */
	pw_policy_decide_new_name(p, PW_OP_CREATE, "vendor/a.key", false, &d);
	cr_expect_not(d.allowed);
	cr_expect_eq(d.err, EACCES);
	cr_expect_eq(d.reason, PW_REASON_DENY_RULE);
	pw_policy_decide_new_name(p, PW_OP_CREATE, "vendor/free.c", false, &d);
	cr_expect_eq(d.err, EACCES);
	cr_expect_eq(d.reason, PW_REASON_DENY_RULE);
	/* Hidden where writes are allowed: the name is taken, invisibly. */
	pw_policy_decide_new_name(p, PW_OP_MKDIR, ".env", false, &d);
	cr_expect_not(d.allowed);
	cr_expect_eq(d.err, ENOENT);
	cr_expect_eq(d.reason, PW_REASON_HIDDEN);
	/* Not hidden, or not a write: as pw_policy_decide. */
	pw_policy_decide_new_name(p, PW_OP_CREATE, "src/new.c", false, &d);
	cr_expect(d.allowed);
	pw_policy_decide_new_name(p, PW_OP_READ, "vendor/a.key", false, &d);
	cr_expect_eq(d.err, ENOENT);
	pw_policy_unref(p);
	pw_modeset_free(ms);
}

Test(hidden, root_is_never_hidden_and_bundled_modes_hide_nothing)
{
	pw_modeset *ms = load_modes(SOURCE_MODES, NULL, NULL, false);

	for (size_t i = 0; i < pw_modeset_count(ms); i++) {
		pw_policy *p = compile(ms, pw_modeset_get(ms, i)->name);

		cr_expect_not(pw_policy_has_hide_rules(p));
		cr_expect_not(pw_policy_is_hidden(p, "", true));
		pw_policy_unref(p);
	}
	pw_modeset_free(ms);
}

/* ---- trust, as decisions ------------------------------------------------------------- */

static void check_one(const pw_policy *p, const expect *e)
{
	expect_decision(p, PW_OP_CREATE, e, e->allowed, e->err, e->reason, e->rule);
}

Test(trust, untrusted_project_decisions)
{
	pw_modeset *ms =
	    load_modes(SOURCE_MODES, FIXTURES "/global", FIXTURES "/project-widening", false);
	pw_policy *design = compile(ms, "design"), *build = compile(ms, "build");
	pw_policy *lint = compile(ms, "lint"), *plan = compile(ms, "plan");
	static const expect design_rows2[] = {
	    NO("secret.txt", false, ENOENT, PW_REASON_HIDDEN, "secret.txt"),
	    NO("src/a.c", false, EACCES, PW_REASON_NO_ALLOW, NULL),
	    NO("docs/design/drafts/x.md", false, EACCES, PW_REASON_DENY_RULE,
	       "docs/design/drafts/**"),
	    OK("docs/design/x.md", false, "docs/design/**"),
	    TOKEN("tokens/colors.json", "tokens/colors.json"),
	    NO("theme.css", false, EACCES, PW_REASON_NO_ALLOW, NULL),
	};
	static const expect build_rows2[] = {
	    NO(".git/config", false, EACCES, PW_REASON_PROTECTED, ".git/config"),
	    NO("release/v1.tar", false, EACCES, PW_REASON_PROTECTED, "release/**"),
	    NO("deploy/prod.yaml", false, EACCES, PW_REASON_PROTECTED, "deploy/**"),
	    NO("generated/x.c", false, EACCES, PW_REASON_DENY_RULE, "generated/**"),
	    NO("secrets/k", false, EACCES, PW_REASON_DENY_RULE, "secrets/**"),
	    OK("src/a.c", false, "**"),
	};

	for (size_t i = 0; i < ELEMENTSOF(design_rows2); i++)
		check_one(design, &design_rows2[i]);
	for (size_t i = 0; i < ELEMENTSOF(build_rows2); i++)
		check_one(build, &build_rows2[i]);
	cr_expect(pw_policy_writes_nothing(lint));
	check_one(lint, &(expect)RO("src/a.c", false));
	cr_expect_not(pw_policy_writes_nothing(plan)); /* its plans folder */
	check_one(plan, &(expect)RO("src/a.c", false));
	pw_policy_unref(design);
	pw_policy_unref(build);
	pw_policy_unref(lint);
	pw_policy_unref(plan);
	pw_modeset_free(ms);
}

Test(trust, trusted_project_decisions)
{
	pw_modeset *ms =
	    load_modes(SOURCE_MODES, FIXTURES "/global", FIXTURES "/project-widening", true);
	pw_policy *build = compile(ms, "build"), *lint = compile(ms, "lint");
	pw_policy *plan = compile(ms, "plan"), *design = compile(ms, "design");
	static const expect rows[] = {
	    OK(".git/config", false, "**"), /* protect: false, from a trusted project */
	    OK("release/v1.tar", false, "**"),
	    NO("generated/x.c", false, EACCES, PW_REASON_DENY_RULE, "generated/**"),
	};

	for (size_t i = 0; i < ELEMENTSOF(rows); i++)
		check_one(build, &rows[i]);
	check_one(lint, &(expect)OK("src/a.c", false, "src/**"));
	check_one(lint,
		  &(expect)NO("src/gen/a.c", false, EACCES, PW_REASON_DENY_RULE, "src/gen/**"));
	/* plan with writes.tokens: true writes the token files only; protected paths hold. */
	cr_expect_not(pw_policy_writes_nothing(plan));
	check_one(plan, &(expect)TOKEN("theme.css", "theme.css"));
	check_one(plan, &(expect)NO("src/a.c", false, EACCES, PW_REASON_NO_ALLOW, NULL));
	check_one(plan, &(expect)NO(".piworkfs/config.yaml", false, EACCES, PW_REASON_PROTECTED,
				    "/.piworkfs"));
	check_one(design, &(expect)OK("src/a.c", false, "src/**"));
	check_one(design, &(expect)NO("docs/design/x.md", false, EACCES, PW_REASON_NO_ALLOW, NULL));
	pw_policy_unref(build);
	pw_policy_unref(lint);
	pw_policy_unref(plan);
	pw_policy_unref(design);
	pw_modeset_free(ms);
}

/* ---- gitignore's glob semantics, as decisions ----------------------------------------- */

#define GLOBS FIXTURES "/globs-global"

/*
 * globs-global: config.yaml protects "*.pem" and declares the token "theme.css"; the mode
 * globs allows "tests/" "**" and "/top.txt", denies "*.log" and "gen/", hides ".env".
 * A pattern without a slash names a file at any depth; "tests/" "**" lets `tests` itself be
 * made as a directory. Deny beats allow, protected beats both.
 */
Test(globs, patterns_without_a_slash_match_at_any_depth)
{
	pw_modeset *ms = load_modes(SOURCE_MODES, GLOBS, NULL, false);
	pw_policy *globs = compile(ms, "globs"), *build = compile(ms, "build");
	pw_policy *design = compile(ms, "design");
	static const expect globs_rows[] = {
	    OK("tests", true, "tests/**"),
	    NO("tests", false, EACCES, PW_REASON_NO_ALLOW, NULL),
	    OK("tests/a/b.c", false, "tests/**"),
	    NO("lib/tests", true, EACCES, PW_REASON_NO_ALLOW, NULL),
	    NO("lib/tests/a.c", false, EACCES, PW_REASON_NO_ALLOW, NULL),
	    NO("tests/sub/b.pem", false, EACCES, PW_REASON_PROTECTED, "*.pem"),
	    NO("tests/keys.pem/x", false, EACCES, PW_REASON_PROTECTED, "*.pem"),
	    NO("tests/x.log", false, EACCES, PW_REASON_DENY_RULE, "*.log"),
	    NO("tests/a/b/x.log", false, EACCES, PW_REASON_DENY_RULE, "*.log"),
	    NO("tests/gen", true, EACCES, PW_REASON_DENY_RULE, "gen/"),
	    NO("tests/gen/x.c", false, EACCES, PW_REASON_DENY_RULE, "gen/"),
	    OK("tests/gen", false, "tests/**"), /* "gen/" names directories only */
	    OK("top.txt", false, "/top.txt"),
	};
	static const expect build_rows3[] = {
	    NO("a.pem", false, EACCES, PW_REASON_PROTECTED, "*.pem"),
	    NO("sub/b.pem", false, EACCES, PW_REASON_PROTECTED, "*.pem"),
	    NO("a/b/c/d.pem", false, EACCES, PW_REASON_PROTECTED, "*.pem"),
	    OK("a/b/pem", false, "**"),
	    OK("sub/.piworkfs/x", false, "**"), /* the built-in /.piworkfs is anchored */
	};
	pw_decision d;

	check_table(globs, globs_rows, ELEMENTSOF(globs_rows));
	pw_policy_decide(globs, PW_OP_CREATE, "lib/top.txt", false, &d);
	cr_expect_eq(d.reason, PW_REASON_NO_ALLOW, "an anchored pattern matches at the root only");
	check_table(build, build_rows3, ELEMENTSOF(build_rows3));
	check_one(design, &(expect)TOKEN("web/theme.css", "theme.css"));
	check_one(design, &(expect)TOKEN("theme.css", "theme.css"));

	/* Hidden at any depth, for every operation. */
	for (size_t i = 0; i < 3; i++) {
		static const char *const hidden[] = {".env", "tests/.env", "a/b/.env/c"};

		cr_expect(pw_policy_is_hidden(globs, hidden[i], false), "%s", hidden[i]);
		pw_policy_decide(globs, PW_OP_READ, hidden[i], false, &d);
		cr_expect_eq(d.err, ENOENT, "%s", hidden[i]);
	}
	cr_expect_not(pw_policy_is_hidden(globs, "tests/.envrc", false));

	/* Moving a directory: a name rule moves with the names, so it does not pin the tree;
	 * a directory that such a rule matches is itself refused. */
	cr_expect(pw_policy_may_write_tree(build, "src", &d));
	cr_expect_not(pw_policy_may_write_tree(build, "a/keys.pem", &d));
	cr_expect_eq(d.reason, PW_REASON_PROTECTED);
	cr_expect(pw_policy_may_write_tree(globs, "tests/a", &d));
	cr_expect_not(pw_policy_may_write_tree(globs, "tests/gen", &d));
	pw_policy_unref(globs);
	pw_policy_unref(build);
	pw_policy_unref(design);
	pw_modeset_free(ms);
}

/* ---- fail-closed, lifetime ----------------------------------------------------------- */

Test(fail_closed, every_write_is_erofs)
{
	pw_policy *p = pw_policy_new_fail_closed("build", "build.md:3:1: error: invalid YAML");
	static const expect rows[] = {
	    NO("src/main.c", false, EROFS, PW_REASON_FAIL_CLOSED, NULL),
	    NO("", true, EROFS, PW_REASON_FAIL_CLOSED, NULL),
	    NO(".git/config", false, EROFS, PW_REASON_FAIL_CLOSED, NULL),
	};

	cr_assert_not_null(p);
	check_table(p, rows, ELEMENTSOF(rows));
	cr_expect(pw_policy_is_fail_closed(p));
	cr_expect(pw_policy_writes_nothing(p));
	cr_expect_str_eq(pw_policy_fail_reason(p), "build.md:3:1: error: invalid YAML");
	cr_expect_str_eq(pw_policy_mode_name(p), "build");
	cr_expect_eq(pw_policy_rule_count(p), 0);
	cr_expect_not(pw_policy_has_hide_rules(p));
	pw_policy_unref(p);
}

Test(lifetime, policy_outlives_modeset)
{
	pw_modeset *ms = load_modes(SOURCE_MODES, TOKENS, NULL, false);
	pw_policy *p = compile(ms, "design");
	pw_decision d;

	pw_modeset_free(ms);
	pw_policy_decide(p, PW_OP_WRITE, "tokens/colors.json", false, &d);
	cr_expect(d.allowed);
	cr_expect_str_eq(d.rule->pattern, "tokens/colors.json");
	cr_expect_str_eq(d.rule->file, TOKENS "/config.yaml");
	cr_expect_str_eq(pw_policy_body(p) + strlen(pw_policy_body(p)) - 1, "\n");
	cr_expect_eq(pw_policy_ref(p), p);
	pw_policy_unref(p);
	pw_policy_decide(p, PW_OP_WRITE, "docs/design/a", false, &d);
	cr_expect(d.allowed);
	pw_policy_unref(p);
	pw_policy_unref(NULL);
	cr_expect_null(pw_policy_ref(NULL));
}

/* A switch compiles no glob: every policy of a mode takes references to the globs the mode
 * files compiled at load, and they outlive the mode set (issue 30, style habit 5). */
Test(lifetime, policies_share_the_mode_files_globs)
{
	pw_modeset *ms = load_modes(SOURCE_MODES, TOKENS, NULL, false);
	pw_policy *a = compile(ms, "design"), *b = compile(ms, "design");

	cr_assert_eq(pw_policy_rule_count(a), pw_policy_rule_count(b));
	for (size_t i = 0; i < pw_policy_rule_count(a); i++)
		cr_expect_eq(pw_policy_rule(a, i)->glob, pw_policy_rule(b, i)->glob,
			     "rule %zu (%s) compiled again", i, pw_policy_rule(a, i)->pattern);
	pw_modeset_free(ms);
	pw_policy_unref(a);
	pw_decision d;
	pw_policy_decide(b, PW_OP_CREATE, "docs/design/a.md", false, &d);
	cr_expect(d.allowed, "the shared glob outlives the mode set and the other policy");
	pw_policy_decide(b, PW_OP_CREATE, "src/a.c", false, &d);
	cr_expect_not(d.allowed);
	pw_policy_unref(b);
}

static void *hammer(void *arg)
{
	pw_policy *p = arg;

	for (int i = 0; i < 20000; i++) {
		pw_policy *q = pw_policy_ref(p);
		pw_decision d;

		pw_policy_decide(q, PW_OP_CREATE, "src/a.c", false, &d);
		if (!d.allowed)
			return (void *)1;
		pw_policy_unref(q);
	}
	pw_policy_unref(p);
	return NULL;
}

Test(lifetime, refcount_is_thread_safe)
{
	pw_modeset *ms = load_modes(SOURCE_MODES, NULL, NULL, false);
	pw_policy *p = compile(ms, "build");
	pthread_t t[4];

	pw_modeset_free(ms);
	for (size_t i = 0; i < ELEMENTSOF(t); i++)
		cr_assert_eq(pthread_create(&t[i], NULL, hammer, pw_policy_ref(p)), 0);
	for (size_t i = 0; i < ELEMENTSOF(t); i++) {
		void *r;

		cr_assert_eq(pthread_join(t[i], &r), 0);
		cr_expect_null(r);
	}
	cr_expect(pw_policy_may_write(p, "src/a.c", false));
	pw_policy_unref(p); /* the last reference: freed here (ASan checks) */
}

/* ---- names --------------------------------------------------------------------------- */

Test(names, ops_and_reasons)
{
	static const char *const reasons[] = {"read",	     "allow-rule", "token",	"hidden",
					      "read-only",   "protected",  "deny-rule", "no-allow",
					      "fail-closed", "outside"};

	for (int op = 0; op < _PW_OP_MAX; op++) {
		cr_expect_eq(pw_op_from_name(pw_op_name(op)), op, "%s", pw_op_name(op));
		cr_expect_eq(pw_op_is_write(op), op != PW_OP_LOOKUP && op != PW_OP_READ);
	}
	cr_expect_str_eq(pw_op_name(PW_OP_CREATE), "create");
	cr_expect_str_eq(pw_op_name(PW_OP_RENAME), "rename");
	cr_expect_str_eq(pw_op_name(PW_OP_OPEN_WRITE), "open-write");
	cr_expect_str_eq(pw_op_name(PW_OP_ACCESS_WRITE), "access-write");
	cr_expect_eq(pw_op_from_name("bogus"), -EINVAL);
	cr_expect_eq(pw_op_from_name(""), -EINVAL);
	for (size_t r = 0; r < ELEMENTSOF(reasons); r++)
		cr_expect_str_eq(pw_reason_name(r), reasons[r]);
}

/* ---- is_tightening ------------------------------------------------------------------- */

static bool tightening(const pw_modeset *ms, const char *from, const char *to)
{
	pw_policy *f = compile(ms, from), *t = compile(ms, to);
	bool r = pw_policy_is_tightening(f, t);

	pw_policy_unref(f);
	pw_policy_unref(t);
	return r;
}

Test(tightening, every_bundled_pair)
{
	/* names in modeset order: build design discuss off plan review. want[from][to]. */
	static const char *const names[] = {"build", "design", "discuss", "off", "plan", "review"};
	static const bool want[6][6] = {
	    /* to:      build  design discuss off    plan   review */
	    /* build */ {true, true, true, false, true, true},
	    /* design*/ {false, true, true, false, false, true},
	    /* discuss*/ {false, false, true, false, false, true},
	    /* off */ {true, true, true, true, true, true},
	    /* plan */ {false, false, true, false, true, true},
	    /* review */ {false, false, true, false, false, true},
	};
	pw_modeset *ms = load_modes(SOURCE_MODES, TOKENS, NULL, false);

	for (size_t i = 0; i < 6; i++)
		for (size_t j = 0; j < 6; j++)
			cr_expect_eq(tightening(ms, names[i], names[j]), want[i][j], "%s -> %s",
				     names[i], names[j]);
	pw_modeset_free(ms);
}

Test(tightening, custom_modes)
{
	static const struct {
		const char *from, *to;
		bool want;
	} cases[] = {
	    {"a", "a", true},
	    {"a", "a-reordered", true}, /* same rules, other order */
	    {"a-reordered", "a", true},
	    {"a", "a-more-deny", true},	 /* more denied */
	    {"a-more-deny", "a", false}, /* a deny rule dropped */
	    {"a", "a-hide", true},	 /* more hidden */
	    {"a-hide", "a", false},	 /* unhiding reveals files */
	    {"b", "a", true},		 /* fewer allow rules */
	    {"a", "b", false},		 /* an allow rule added */
	    {"a", "c", false},		 /* a different allow rule */
	    {"a", "ro-hide", true},	 /* writes nothing, hides more */
	    {"a-hide", "ro-hide", true},
	    {"a-hide", "discuss", false}, /* writes nothing, but unhides .env */
	    {"ro-hide", "a-hide", false}, /* starts writing */
	    {"a", "tokens-only", false},  /* token files were not writable in a */
	    {"design", "tokens-only", true},
	    {"tokens-only", "design", false},
	    {"build", "a", true}, /* a narrower allow, more denied */
	    {"a", "build", false},
	    {"open", "a", true},      /* covered by "**", deny kept, protection added */
	    {"open", "build", false}, /* build drops open's deny rule */
	    {"build", "open", false}, /* protection removed */
	    {"off", "open", true},
	    {"open", "off", false},
	    {"a", "a-no-originals", false}, /* the same writes, no undo */
	    {"a-no-originals", "a", true},
	    {"a-no-originals", "ro-hide", true},
	};
	pw_modeset *custom = load_modes(FIXTURES "/modes-tighten", TOKENS, NULL, false);
	pw_modeset *bundled = load_modes(SOURCE_MODES, TOKENS, NULL, false);

	cr_assert_eq(pw_modeset_warning_count(custom), 0);
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		const pw_modeset *fm = pw_modeset_find(custom, cases[i].from) ? custom : bundled;
		const pw_modeset *tm = pw_modeset_find(custom, cases[i].to) ? custom : bundled;
		pw_policy *f = compile(fm, cases[i].from), *t = compile(tm, cases[i].to);

		cr_expect_eq(pw_policy_is_tightening(f, t), cases[i].want, "%s -> %s",
			     cases[i].from, cases[i].to);
		pw_policy_unref(f);
		pw_policy_unref(t);
	}
	pw_modeset_free(custom);
	pw_modeset_free(bundled);
}

Test(tightening, fail_closed)
{
	pw_modeset *ms = load_modes(SOURCE_MODES, NULL, NULL, false);
	pw_modeset *hide = load_modes(FIXTURES "/modes-hide", NULL, NULL, false);
	pw_policy *fc = pw_policy_new_fail_closed("build", "broken");
	pw_policy *build = compile(ms, "build"), *plan = compile(ms, "plan");
	pw_policy *secret = compile(hide, "secret");

	cr_expect(pw_policy_is_tightening(build, fc));
	cr_expect(pw_policy_is_tightening(plan, fc));
	cr_expect_not(pw_policy_is_tightening(secret, fc)); /* would unhide */
	cr_expect_not(pw_policy_is_tightening(fc, build));
	cr_expect_not(pw_policy_is_tightening(fc, plan)); /* plan writes its plans folder */
	cr_expect(pw_policy_is_tightening(fc, fc));
	cr_expect(pw_policy_is_tightening(build, secret)); /* same allow, more deny and hide */
	cr_expect_not(pw_policy_is_tightening(secret, build));
	pw_policy_unref(fc);
	pw_policy_unref(build);
	pw_policy_unref(plan);
	pw_policy_unref(secret);
	pw_modeset_free(ms);
	pw_modeset_free(hide);
}

/* An approved plan is a protected path: refused in every mode that protects, written in off. */
Test(plans, freeze)
{
	pw_modeset *ms = load_modes(SOURCE_MODES, NULL, NULL, false);
	pw_policy *plan, *build, *off, *build_before;
	pw_rule frozen = {0}, bad = {0};

	build_before = compile(ms, "build");
	cr_assert_eq(pw_modeset_freeze_rule("docs/plans/x.md", &frozen), 0);
	cr_expect_str_eq(frozen.file, "(approved plan)");
	cr_expect_eq(pw_modeset_freeze_rule("docs/plans/*.md", &bad), -EINVAL);
	cr_expect_eq(pw_modeset_freeze_rule("docs/../x.md", &bad), -EINVAL);
	pw_policy_extras x = {.frozen = &frozen, .n_frozen = 1};
	cr_assert_eq(pw_policy_compile_extras(ms, "plan", &x, &plan), 0);
	cr_assert_eq(pw_policy_compile_extras(ms, "build", &x, &build), 0);
	cr_assert_eq(pw_policy_compile_extras(ms, "off", &x, &off), 0);
	/* Only protected rules freeze: anything else would loosen a mode through this door. */
	pw_rule allow = {0};
	pw_policy *none = NULL;
	cr_assert_eq(pw_rule_init(&allow, PW_RULE_ALLOW, "**", "x", 0, 0, PW_LAYER_DEFAULT, NULL),
		     0);
	x = (pw_policy_extras){.frozen = &allow, .n_frozen = 1};
	cr_expect_eq(pw_policy_compile_extras(ms, "plan", &x, &none), -EINVAL);
	cr_expect_null(none);
	pw_rule_done(&allow);
	pw_rule_done(&frozen);
	check_one(plan, &(expect)NO("docs/plans/x.md", false, EACCES, PW_REASON_PROTECTED,
				    "/docs/plans/x.md"));
	check_one(plan, &(expect)OK("docs/plans/y.md", false, "/docs/plans/**"));
	check_one(build, &(expect)NO("docs/plans/x.md", false, EACCES, PW_REASON_PROTECTED,
				     "/docs/plans/x.md"));
	check_one(build, &(expect)OK("docs/plans/y.md", false, "**"));
	check_one(off, &(expect)OK("docs/plans/x.md", false, "**"));
	/* Renaming the folder would carry the plan out from under its rule. */
	cr_expect_not(pw_policy_may_write_tree(build, "docs/plans", &(pw_decision){0}));
	cr_expect_not(pw_policy_may_write_tree(build, "docs", &(pw_decision){0}));
	/* Approving tightens; reopening (the plan's rule gone) loosens. */
	cr_expect(pw_policy_is_tightening(build_before, build));
	cr_expect_not(pw_policy_is_tightening(build, build_before));
	pw_policy_unref(plan);
	pw_policy_unref(build);
	pw_policy_unref(off);
	pw_policy_unref(build_before);
	pw_modeset_free(ms);
}
