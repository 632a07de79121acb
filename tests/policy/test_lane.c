/* SPDX-License-Identifier: MIT */
/*
 * Lanes (`mount --only`, `run --only`; policy.h, step 8): a lane narrows the writable set of
 * every mode and never widens one. Each bundled mode is compiled with a lane and every path
 * of a small tree is decided: a write is allowed exactly when the mode alone allows it and
 * a lane glob reaches it; everything else keeps the mode's own answer, or, where only the
 * lane refuses, EACCES with reason outside-lane.
 */
#include <criterion/criterion.h>

#include "load_modes.h"
#include "names_tree.h"
#include "mode.h"
#include "policy.h"
#include "report.h"
#include "util.h"

#define TOKENS FIXTURES "/tokens-global"

static pw_modeset *load_bundled(void)
{
	return load_modes(SOURCE_MODES, TOKENS, NULL, false);
}

static void parse_lane(const char *const *globs, size_t n, pw_rule **ret)
{
	cr_assert_eq(pw_lane_parse(globs, n, ret, NULL, NULL), 0);
}

static const char *const modes[] = {"plan", "discuss", "review", "design", "build", "off"};

static const pw_op write_ops[] = {PW_OP_CREATE, PW_OP_WRITE,	PW_OP_UNLINK, PW_OP_RENAME,
				  PW_OP_MKDIR,	PW_OP_TRUNCATE, PW_OP_CHMOD,  PW_OP_SETXATTR};

/* Does LANE (the tests' lane: src/a/ and the design docs) reach PATH? */
static bool in_test_lane(const char *path)
{
	return startswith(path, "src/a/") || streq(path, "src/a") ||
	       startswith(path, "docs/design/") || streq(path, "docs/design");
}

Test(lane, narrows_every_mode_and_never_widens_one)
{
	static const char *const globs[] = {"src/a/**", "docs/design"};
	pw_modeset *ms = load_bundled();
	pw_rule *lane = NULL;

	parse_lane(globs, 2, &lane);
	for (size_t m = 0; m < ELEMENTSOF(modes); m++) {
		pw_policy *plain = NULL, *laned = NULL;

		cr_assert_eq(pw_policy_compile(ms, modes[m], &plain), 0, "%s", modes[m]);
		cr_assert_eq(pw_policy_compile_lane(ms, modes[m], lane, 2, &laned), 0);
		for (size_t i = 0; i < ELEMENTSOF(tree); i++) {
			for (size_t k = 0; k < ELEMENTSOF(write_ops); k++) {
				pw_decision a, b;
				pw_op op = write_ops[k];
				const char *path = tree[i].path;
				bool dir = tree[i].is_dir;

				if (op == PW_OP_MKDIR && !dir)
					continue;
				pw_policy_decide(plain, op, path, dir, &a);
				pw_policy_decide(laned, op, path, dir, &b);
				if (!a.allowed) {
					/* Never widened, and the mode's own reason stands. */
					cr_expect(!b.allowed, "%s: lane widened %s %s", modes[m],
						  pw_op_name(op), path);
					cr_expect_eq(b.reason, a.reason,
						     "%s %s %s: reason %s, want %s", modes[m],
						     pw_op_name(op), path, pw_reason_name(b.reason),
						     pw_reason_name(a.reason));
				} else if (in_test_lane(path)) {
					cr_expect(b.allowed, "%s: %s %s inside the lane refused",
						  modes[m], pw_op_name(op), path);
				} else {
					cr_expect(!b.allowed, "%s: %s %s outside the lane allowed",
						  modes[m], pw_op_name(op), path);
					cr_expect_eq(b.err, EACCES);
					cr_expect_eq(b.reason, PW_REASON_LANE, "%s %s: reason %s",
						     modes[m], path, pw_reason_name(b.reason));
				}
				/* A new name is narrowed the same way. */
				pw_policy_decide_new_name(laned, op, path, dir, &b);
				if (!a.allowed || !in_test_lane(path))
					cr_expect(!b.allowed, "%s: new name %s %s allowed",
						  modes[m], pw_op_name(op), path);
			}
			cr_expect(!pw_policy_writes_everything(laned), "%s", modes[m]);
		}
		/* Reads are never narrowed. */
		pw_decision d;
		pw_policy_decide(laned, PW_OP_READ, "src/main.c", false, &d);
		cr_expect(d.allowed);
		pw_policy_unref(plain);
		pw_policy_unref(laned);
	}
	pw_lane_free(lane, 2);
	pw_modeset_free(ms);
}

Test(lane, the_lane_outlives_its_rules_and_shows_in_the_policy_json)
{
	static const char *const globs[] = {"src/a/**"};
	pw_modeset *ms = load_bundled();
	pw_rule *lane = NULL;
	pw_policy *p = NULL;

	parse_lane(globs, 1, &lane);
	cr_assert_eq(pw_policy_compile_lane(ms, "build", lane, 1, &p), 0);
	pw_lane_free(lane, 1);
	pw_modeset_free(ms);
	cr_assert_eq(pw_policy_lane_count(p), 1);
	cr_expect_str_eq(pw_policy_lane_rule(p, 0)->pattern, "src/a/**");
	cr_expect(pw_policy_may_write(p, "src/a/x.c", false));
	cr_expect(!pw_policy_may_write(p, "src/b.c", false));
	/* A directory outside the lane cannot move as a whole, nor one into which the lane
	 * only reaches deeper. */
	pw_decision d;
	cr_expect(!pw_policy_may_write_tree(p, "src", &d));
	cr_expect(pw_policy_may_write_tree(p, "src/a/sub", &d));

	json_t *j = pw_report_policy(p);
	json_t *l = json_object_get(j, "lane");
	cr_assert(json_is_array(l));
	cr_expect_eq(json_array_size(l), 1);
	cr_expect_str_eq(json_string_value(json_array_get(l, 0)), "src/a/**");
	json_decref(j);
	pw_policy_unref(p);
}

Test(lane, no_lane_is_an_empty_array_and_decides_as_before)
{
	pw_modeset *ms = load_bundled();
	pw_policy *p = NULL;

	cr_assert_eq(pw_policy_compile_lane(ms, "build", NULL, 0, &p), 0);
	cr_expect(pw_policy_may_write(p, "src/b.c", false));
	json_t *j = pw_report_policy(p);
	cr_expect_eq(json_array_size(json_object_get(j, "lane")), 0);
	json_decref(j);
	pw_policy_unref(p);
	pw_modeset_free(ms);
}

Test(lane, bad_globs_are_refused_with_their_index)
{
	static const char *const globs[] = {"src/**", ""};
	static const char *many[PW_LANE_MAX + 1];
	pw_rule *lane = NULL;
	const char *err = NULL;
	size_t bad = 99;

	cr_expect_eq(pw_lane_parse(globs, 2, &lane, &bad, &err), -EINVAL);
	cr_expect_eq(bad, 1);
	cr_expect_not_null(err);
	for (size_t i = 0; i <= PW_LANE_MAX; i++)
		many[i] = "src";
	cr_expect_eq(pw_lane_parse(many, PW_LANE_MAX + 1, &lane, NULL, NULL), -E2BIG);
}

Test(lane, a_switch_that_drops_or_widens_the_lane_is_no_tightening)
{
	static const char *const wide[] = {"src/**", "docs/**"}, *const narrow[] = {"src/**"};
	pw_modeset *ms = load_bundled();
	pw_rule *lw = NULL, *ln = NULL;
	pw_policy *bw = NULL, *bn = NULL, *b = NULL;

	parse_lane(wide, 2, &lw);
	parse_lane(narrow, 1, &ln);
	cr_assert_eq(pw_policy_compile_lane(ms, "build", lw, 2, &bw), 0);
	cr_assert_eq(pw_policy_compile_lane(ms, "build", ln, 1, &bn), 0);
	cr_assert_eq(pw_policy_compile(ms, "build", &b), 0);
	cr_expect(pw_policy_is_tightening(bw, bn));
	cr_expect(pw_policy_is_tightening(b, bn));
	cr_expect(!pw_policy_is_tightening(bn, bw));
	cr_expect(!pw_policy_is_tightening(bn, b));
	cr_expect(pw_policy_is_tightening(bn, bn));
	pw_policy_unref(bw);
	pw_policy_unref(bn);
	pw_policy_unref(b);
	pw_lane_free(lw, 2);
	pw_lane_free(ln, 1);
	pw_modeset_free(ms);
}

Test(lane, reason_and_text)
{
	pw_decision d = {.allowed = false, .err = EACCES, .reason = PW_REASON_LANE};
	char *t = pw_report_decision_text(&d, "build", NULL);

	cr_expect_str_eq(pw_reason_name(PW_REASON_LANE), "outside-lane");
	cr_expect_str_eq(t, "outside the view's lane (--only); mode build allows it elsewhere");
	free(t);
	cr_expect_str_eq(pw_rule_kind_name(PW_RULE_LANE), "lane");
}
