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

/* {"kind","pattern","file","line","column","layer"} */
json_t *pw_report_rule(const pw_rule *r);

/* {"severity","file","line","column","key","message","text"}; text is pw_warning_format. */
json_t *pw_report_warning(const pw_warning *w);

/* {"name","description","file","layer","tokens","protect","rules":[rule...]} */
json_t *pw_report_mode(const pw_mode *m);

/* {"modes":[mode...],"protected":[rule...],"tokens":[rule...],"warnings":[warning...]} */
json_t *pw_report_modeset(const pw_modeset *ms);

/* {"mode","description","file","writes_nothing","fail_closed","fail_reason",
 *  "rules":[rule...],"plans_dir","lane":[glob...]}; lane is [] for a view without one */
json_t *pw_report_policy(const pw_policy *p);

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
