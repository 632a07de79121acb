/* SPDX-License-Identifier: MIT */
/* Tests of policy/report.c: the JSON shapes of docs/JSON.md (keys and their order) and the
 * decision explanations that `piworkfs check` prints. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "report.h"
#include "util.h"

static char *dump(json_t *j)
{
	cr_assert_not_null(j);
	char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(j);
	cr_assert_not_null(s);
	return s;
}

static pw_rule allow_rule = {
    .kind = PW_RULE_ALLOW,
    .pattern = "docs/design/**",
    .file = "/m/design.md",
    .line = 6,
    .column = 7,
    .layer = PW_LAYER_BUNDLED,
};

static pw_rule builtin_rule = {
    .kind = PW_RULE_PROTECTED,
    .pattern = ".git/config",
    .file = "(built-in)",
    .layer = PW_LAYER_DEFAULT,
};

Test(report, errno_names)
{
	cr_assert_null(pw_report_errno_name(0));
	cr_assert_str_eq(pw_report_errno_name(EACCES), "EACCES");
	cr_assert_str_eq(pw_report_errno_name(-EROFS), "EROFS");
	cr_assert_str_eq(pw_report_errno_name(ENOENT), "ENOENT");
	cr_assert_str_eq(pw_report_errno_name(EXDEV), "EXDEV");
	cr_assert_str_eq(pw_report_errno_name(EBUSY), "EBUSY");
}

Test(report, rule_shape)
{
	_cleanup_free_ char *s = dump(pw_report_rule(&allow_rule));
	cr_assert_str_eq(s, "{\"kind\":\"allow\",\"pattern\":\"docs/design/**\","
			    "\"file\":\"/m/design.md\",\"line\":6,\"column\":7,"
			    "\"layer\":\"bundled\"}");
}

Test(report, allowed_decision)
{
	pw_decision d = {.allowed = true, .reason = PW_REASON_ALLOW_RULE, .rule = &allow_rule};
	_cleanup_free_ char *s =
	    dump(pw_report_decision("docs/design/a.md", PW_OP_WRITE, false, &d, "design"));
	cr_assert_str_eq(s, "{\"path\":\"docs/design/a.md\",\"op\":\"write\",\"is_dir\":false,"
			    "\"decision\":\"allowed\",\"errno\":null,\"reason\":\"allow-rule\","
			    "\"mode\":\"design\",\"rule\":{\"kind\":\"allow\","
			    "\"pattern\":\"docs/design/**\",\"file\":\"/m/design.md\",\"line\":6,"
			    "\"column\":7,\"layer\":\"bundled\"},"
			    "\"message\":\"allow docs/design/** \u2014 /m/design.md:6\"}");
}

Test(report, denied_and_outside_decisions)
{
	pw_decision d = {.err = EACCES, .reason = PW_REASON_NO_ALLOW};
	_cleanup_free_ char *s =
	    dump(pw_report_decision("src/main.c", PW_OP_WRITE, false, &d, "design"));
	cr_assert_str_eq(s, "{\"path\":\"src/main.c\",\"op\":\"write\",\"is_dir\":false,"
			    "\"decision\":\"denied\",\"errno\":\"EACCES\",\"reason\":\"no-allow\","
			    "\"mode\":\"design\",\"rule\":null,"
			    "\"message\":\"no allow rule matches in mode design\"}");

	pw_decision o = {.err = EXDEV, .reason = PW_REASON_OUTSIDE};
	_cleanup_free_ char *t = dump(pw_report_decision("../x", PW_OP_READ, true, &o, NULL));
	cr_assert_str_eq(t, "{\"path\":\"../x\",\"op\":\"read\",\"is_dir\":true,"
			    "\"decision\":\"outside\",\"errno\":\"EXDEV\",\"reason\":\"outside\","
			    "\"mode\":null,\"rule\":null,"
			    "\"message\":\"the path leaves the project\"}");
}

Test(report, invalid_utf8_stays_valid_json)
{
	pw_decision d = {.err = EROFS, .reason = PW_REASON_READ_ONLY};
	_cleanup_free_ char *s = dump(pw_report_decision("a\xff"
							 "b",
							 PW_OP_WRITE, false, &d, "plan"));
	cr_assert(strstr(s, "\"path\":\"a?b\""), "%s", s);
}

/* The one string-or-null of the JSON shapes (report.c, the bash pre-flight's answer). */
Test(report, str_or_null)
{
	json_t *n = pw_report_str_or_null(NULL);
	cr_expect(json_is_null(n));
	json_decref(n);
	json_t *s = pw_report_str_or_null("src/a.c");
	cr_expect_str_eq(json_string_value(s), "src/a.c");
	json_decref(s);
	json_t *bad = pw_report_str_or_null("caf\xe9 \xc3\xa9");
	cr_expect_str_eq(json_string_value(bad), "caf? ??",
			 "every byte of 0x80 and up becomes '?'");
	json_decref(bad);
}

struct text_case {
	pw_reason reason;
	int err;
	const pw_rule *rule;
	const char *text;
};

Test(report, decision_texts)
{
	const struct text_case cases[] = {
	    {PW_REASON_READ, 0, NULL, "reads are allowed"},
	    {PW_REASON_ALLOW_RULE, 0, &allow_rule, "allow docs/design/** \u2014 /m/design.md:6"},
	    {PW_REASON_READ_ONLY, EROFS, NULL, "mode m writes nothing"},
	    {PW_REASON_PROTECTED, EACCES, &builtin_rule, "protected path .git/config (built-in)"},
	    {PW_REASON_DENY_RULE, EACCES, &allow_rule, "deny docs/design/** \u2014 /m/design.md:6"},
	    {PW_REASON_HIDDEN, ENOENT, &allow_rule,
	     "hidden by hide docs/design/** \u2014 /m/design.md:6"},
	    {PW_REASON_NO_ALLOW, EACCES, NULL, "no allow rule matches in mode m"},
	    {PW_REASON_FAIL_CLOSED, EROFS, NULL, "mode m failed to load, so nothing is writable"},
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		pw_decision d = {.allowed = cases[i].err == 0,
				 .err = cases[i].err,
				 .reason = cases[i].reason,
				 .rule = cases[i].rule};
		_cleanup_free_ char *t = pw_report_decision_text(&d, "m", NULL);
		cr_assert_str_eq(t, cases[i].text, "case %zu", i);
	}
	/* The CLI replaces the rule's file with a shorter display form. */
	pw_decision d = {.allowed = true, .reason = PW_REASON_ALLOW_RULE, .rule = &allow_rule};
	_cleanup_free_ char *t = pw_report_decision_text(&d, "m", "modes/design.md");
	cr_assert_str_eq(t, "allow docs/design/** \u2014 modes/design.md:6");
}

Test(report, warning_shape)
{
	pw_warning w = {.severity = PW_ERROR,
			.file = "/p/x.md",
			.line = 5,
			.column = 3,
			.key = "writes.allow",
			.message = "bad"};
	json_t *j = pw_report_warning(&w);
	cr_assert_not_null(j);
	const char *keys[] = {"severity", "file", "line", "column", "key", "message", "text"};
	size_t i = 0;
	const char *k;
	json_t *v;
	json_object_foreach(j, k, v)
	{
		cr_assert(i < ELEMENTSOF(keys));
		cr_assert_str_eq(k, keys[i++]);
	}
	cr_assert_eq(i, ELEMENTSOF(keys));
	cr_assert_str_eq(json_string_value(json_object_get(j, "severity")), "error");
	const char *text = json_string_value(json_object_get(j, "text"));
	cr_assert(strstr(text, "/p/x.md:5:3") && strstr(text, "writes.allow") &&
		      strstr(text, "bad"),
		  "%s", text);
	json_decref(j);
}
