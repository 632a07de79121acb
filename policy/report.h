/* SPDX-License-Identifier: MIT */
/*
 * JSON rendering of policy objects, shared by the CLI (--json) and the control socket so
 * both speak the same shapes. Pure: builds jansson values, prints nothing. Keys are added in
 * a fixed order, so a dump with JSON_PRESERVE_ORDER is stable. docs/JSON.md documents every
 * shape; change both together.
 *
 * Every function returns a new reference, or NULL on allocation failure.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "mode.h"
#include "policy.h"

/* The symbolic name of an errno value ("EACCES", "EROFS", ...); NULL for 0. */
const char *pw_report_errno_name(int err);

/* A JSON string of S, or null for NULL. Bytes that are not valid UTF-8 (file names and
 * command lines may hold any byte) become '?', so the output is always valid JSON. */
json_t *pw_report_str_or_null(const char *s);

/* {"kind","pattern","file","line","column","layer"} */
json_t *pw_report_rule(const pw_rule *r);

/* {"severity","file","line","column","key","message","text"}; text is pw_warning_format. */
json_t *pw_report_warning(const pw_warning *w);

/* {"name","description","file","layer","tokens","protect","rules":[rule...]} */
json_t *pw_report_mode(const pw_mode *m);

/* {"modes":[mode...],"protected":[rule...],"tokens":[rule...],"warnings":[warning...]} */
json_t *pw_report_modeset(const pw_modeset *ms);

/* {"mode","description","file","writes_nothing","protect","keep_originals","fail_closed",
 *  "fail_reason","rules":[rule...],"plans_dir","lane":[glob...]}; lane is [] for a view
 *  without one */
json_t *pw_report_policy(const pw_policy *p);

/*
 * The policy pw_report_policy's object O describes, rebuilt: the same rules in the same
 * order, lane and fail state, so that it decides exactly as the policy it came from (the CLI
 * asks a live view for its installed policy this way: cli/project.c). Returns 0 with *ret,
 * -EINVAL with *ret_err (static text) for an object that is no such policy, -ENOMEM.
 */
int pw_report_policy_parse(const json_t *o, pw_policy **ret, const char **ret_err);

/*
 * A decision about PATH (project-relative as the policy saw it; for an outside path, the
 * path as the user gave it):
 *   {"path","op","is_dir","decision","errno","reason","mode","rule","message"}
 * decision is "allowed", "denied" or "outside"; errno is null when allowed; rule is a rule
 * object or null. MODE may be NULL. message is the one-line explanation of
 * pw_report_decision_text.
 */
json_t *pw_report_decision(const char *path, pw_op op, bool is_dir, const pw_decision *d,
			   const char *mode);

/*
 * The explanation of a decision in words, without the path, e.g.
 * "no allow rule matches in mode design" or "mode plan writes nothing". FILE_DISPLAY, when
 * not NULL, replaces the rule's file (the CLI shortens paths). Returns a malloc'd string or
 * NULL on allocation failure.
 */
char *pw_report_decision_text(const pw_decision *d, const char *mode, const char *file_display);

/* pw_report_decision_text and pw_report_decision for a decision of policy P, which they name
 * more precisely: a mode that writes only its plans folder refuses the rest of the project
 * read-only, and says so ("mode plan writes only its plans folder, docs/plans/"), not
 * "writes nothing" beside the plans it allows. */
char *pw_report_decision_text_in(const pw_decision *d, const pw_policy *p,
				 const char *file_display);
json_t *pw_report_decision_in(const char *path, pw_op op, bool is_dir, const pw_decision *d,
			      const pw_policy *p);
