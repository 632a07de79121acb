/* SPDX-License-Identifier: MIT */
/*
 * A policy read back from its JSON (pw_report_policy_parse): what the CLI builds from a live
 * view's `allowed` answer must decide exactly as the view's own policy, so that `check`,
 * `why`, `check-bash` and `allowed` say what the filesystem does (issue 44, item 1). Every
 * bundled mode and a hiding one, with the extras a view compiles in (an approved plan, a
 * lane) and without, and a fail-closed policy, decide every path of a small tree for every
 * write operation the same way after the round trip. And what plan mode's refusals say.
 */
#include <criterion/criterion.h>
#include <errno.h>

#include "load_modes.h"
#include "names_tree.h"
#include "mode.h"
#include "policy.h"
#include "report.h"
#include "util.h"

static const char *const modes[] = {"plan",  "discuss", "review", "design",
				    "build", "off",	"secret"};

static pw_modeset *load(void)
{
	return load_modes(SOURCE_MODES, FIXTURES "/tokens-global", NULL, true);
}

/* P through its JSON and back. */
static pw_policy *round_trip(const pw_policy *p)
{
	json_t *j = pw_report_policy(p);
	const char *err = NULL;
	pw_policy *q = NULL;

	cr_assert_not_null(j);
	cr_assert_eq(pw_report_policy_parse(j, &q, &err), 0, "%s: %s", pw_policy_mode_name(p),
		     err ? err : "?");
	json_decref(j);
	return q;
}

static void assert_same_decisions(const pw_policy *p, const pw_policy *q)
{
	const char *mode = pw_policy_mode_name(p);

	cr_assert_str_eq(pw_policy_mode_name(q), mode);
	cr_assert_eq(pw_policy_writes_nothing(q), pw_policy_writes_nothing(p), "%s", mode);
	cr_assert_eq(pw_policy_writes_everything(q), pw_policy_writes_everything(p), "%s", mode);
	cr_assert_eq(pw_policy_is_fail_closed(q), pw_policy_is_fail_closed(p), "%s", mode);
	cr_assert_eq(pw_policy_protects(q), pw_policy_protects(p), "%s", mode);
	cr_assert_eq(pw_policy_rule_count(q), pw_policy_rule_count(p), "%s", mode);
	cr_assert_eq(pw_policy_lane_count(q), pw_policy_lane_count(p), "%s", mode);
	for (size_t i = 0; i < ELEMENTSOF(tree); i++) {
		for (int op = 0; op < _PW_OP_MAX; op++) {
			pw_decision a, b;
			pw_policy_decide(p, (pw_op)op, tree[i].path, tree[i].is_dir, &a);
			pw_policy_decide(q, (pw_op)op, tree[i].path, tree[i].is_dir, &b);
			cr_expect(
			    a.allowed == b.allowed && a.err == b.err && a.reason == b.reason &&
				(a.rule == NULL) == (b.rule == NULL) &&
				(!a.rule || streq(a.rule->pattern, b.rule->pattern)),
			    "%s: %s %s: %s/%d/%s against %s/%d/%s", mode, pw_op_name((pw_op)op),
			    tree[i].path, a.allowed ? "allowed" : "denied", a.err,
			    pw_reason_name(a.reason), b.allowed ? "allowed" : "denied", b.err,
			    pw_reason_name(b.reason));
			pw_policy_decide_new_name(p, (pw_op)op, tree[i].path, tree[i].is_dir, &a);
			pw_policy_decide_new_name(q, (pw_op)op, tree[i].path, tree[i].is_dir, &b);
			cr_expect(a.allowed == b.allowed && a.err == b.err && a.reason == b.reason,
				  "%s: new name %s %s", mode, pw_op_name((pw_op)op), tree[i].path);
		}
		pw_decision a, b;
		cr_expect_eq(pw_policy_may_write_tree(p, tree[i].path, &a),
			     pw_policy_may_write_tree(q, tree[i].path, &b), "%s: tree %s", mode,
			     tree[i].path);
	}
}

Test(policy_json, every_mode_decides_the_same_after_the_round_trip)
{
	pw_modeset *ms = load();
	pw_load_opts oh = {.bundled_dir = FIXTURES "/modes-hide"};
	pw_modeset *hide = NULL;
	pw_rule frozen = {0}, *lane = NULL;
	const char *globs[] = {"docs/**", "tokens/*"};

	cr_assert_eq(pw_modeset_load(&oh, &hide), 0);
	cr_assert_eq(pw_modeset_freeze_rule("docs/plans/x.md", &frozen), 0);
	cr_assert_eq(pw_lane_parse(globs, 2, &lane, NULL, NULL), 0);
	for (size_t m = 0; m < ELEMENTSOF(modes); m++) {
		const pw_modeset *from = pw_modeset_find(ms, modes[m]) ? ms : hide;
		pw_policy_extras variants[] = {
		    {0},
		    {.frozen = &frozen, .n_frozen = 1},
		    {.frozen = &frozen, .n_frozen = 1, .lane = lane, .n_lane = 2},
		};
		cr_assert_not_null(pw_modeset_find(from, modes[m]), "%s", modes[m]);
		for (size_t v = 0; v < ELEMENTSOF(variants); v++) {
			pw_policy *p = NULL, *q;
			cr_assert_eq(pw_policy_compile_extras(from, modes[m], &variants[v], &p), 0);
			q = round_trip(p);
			assert_same_decisions(p, q);
			pw_policy_unref(p);
			pw_policy_unref(q);
		}
	}
	pw_policy *closed = pw_policy_new_fail_closed("build", "the plans could not be read");
	pw_policy *q = round_trip(closed);
	assert_same_decisions(closed, q);
	cr_assert_str_eq(pw_policy_fail_reason(q), "the plans could not be read");
	pw_policy_unref(closed);
	pw_policy_unref(q);
	pw_lane_free(lane, 2);
	pw_rule_done(&frozen);
	pw_modeset_free(hide);
	pw_modeset_free(ms);
}

/* What is no policy is refused, never guessed at. */
Test(policy_json, malformed_answers_are_refused)
{
	static const char *const bad[] = {
	    "[]",
	    "{\"rules\":[]}",
	    "{\"mode\":\"m\"}",
	    "{\"mode\":\"m\",\"rules\":[{\"kind\":\"allow\",\"layer\":\"bundled\"}]}",
	    "{\"mode\":\"m\",\"rules\":[{\"kind\":\"nope\",\"pattern\":\"a\",\"layer\":\"bundled\"}"
	    "]}",
	    "{\"mode\":\"m\",\"rules\":[{\"kind\":\"allow\",\"pattern\":\"[\",\"layer\":"
	    "\"bundled\"}]}",
	    /* Out of decision order: an allow before a protected rule. */
	    "{\"mode\":\"m\",\"rules\":[{\"kind\":\"allow\",\"pattern\":\"**\",\"layer\":"
	    "\"bundled\"},"
	    "{\"kind\":\"protected\",\"pattern\":\"/x\",\"layer\":\"default\"}]}",
	    /* A lane rule among the mode's. */
	    "{\"mode\":\"m\",\"rules\":[{\"kind\":\"lane\",\"pattern\":\"a\",\"layer\":\"lane\"}]}",
	    "{\"mode\":\"m\",\"rules\":[],\"lane\":[1]}",
	    "{\"mode\":\"m\",\"rules\":[],\"protect\":\"yes\"}",
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		json_t *j = json_loads(bad[i], 0, NULL);
		pw_policy *p = NULL;
		const char *err = NULL;

		cr_assert_not_null(j, "%s", bad[i]);
		cr_expect_eq(pw_report_policy_parse(j, &p, &err), -EINVAL, "%s", bad[i]);
		cr_expect_null(p, "%s", bad[i]);
		cr_expect_not_null(err, "%s", bad[i]);
		json_decref(j);
	}
}

/* Plan mode writes its plans folder: its refusals say so, not "writes nothing"; an approved
 * plan is named as one. */
Test(policy_json, what_refusals_say)
{
	pw_modeset *ms = load();
	pw_rule frozen = {0};
	pw_policy *plan = NULL, *review = NULL, *build = NULL;
	pw_policy_extras x = {.frozen = &frozen, .n_frozen = 1};
	pw_decision d;

	cr_assert_eq(pw_modeset_freeze_rule("docs/plans/x.md", &frozen), 0);
	cr_assert_eq(pw_policy_compile_extras(ms, "plan", &x, &plan), 0);
	cr_assert_eq(pw_policy_compile_extras(ms, "review", &x, &review), 0);
	cr_assert_eq(pw_policy_compile_extras(ms, "build", &x, &build), 0);
	cr_assert(pw_policy_writes_only_plans(plan));
	cr_assert_not(pw_policy_writes_only_plans(review));
	cr_assert_not(pw_policy_writes_only_plans(build));

	pw_policy_decide(plan, PW_OP_WRITE, "src/main.c", false, &d);
	_cleanup_free_ char *t1 = pw_report_decision_text_in(&d, plan, NULL);
	cr_expect_str_eq(t1, "mode plan writes only its plans folder, docs/plans/");
	pw_policy_decide(review, PW_OP_WRITE, "src/main.c", false, &d);
	_cleanup_free_ char *t2 = pw_report_decision_text_in(&d, review, NULL);
	cr_expect_str_eq(t2, "mode review writes nothing");
	pw_policy_decide(build, PW_OP_WRITE, "docs/plans/x.md", false, &d);
	_cleanup_free_ char *t3 = pw_report_decision_text_in(&d, build, NULL);
	cr_expect_str_eq(t3,
			 "approved plan docs/plans/x.md, read-only until the person reopens it");
	pw_policy_decide(plan, PW_OP_WRITE, "docs/plans/x.md", false, &d);
	_cleanup_free_ char *t4 = pw_report_decision_text_in(&d, plan, NULL);
	cr_expect_str_eq(t4,
			 "approved plan docs/plans/x.md, read-only until the person reopens it");
	json_t *j = pw_report_decision_in(
	    "src/main.c", PW_OP_WRITE, false,
	    &(pw_decision){.err = EROFS, .reason = PW_REASON_READ_ONLY}, plan);
	cr_expect_str_eq(json_string_value(json_object_get(j, "message")),
			 "mode plan writes only its plans folder, docs/plans/");
	json_decref(j);
	pw_policy_unref(plan);
	pw_policy_unref(review);
	pw_policy_unref(build);
	pw_rule_done(&frozen);
	pw_modeset_free(ms);
}
