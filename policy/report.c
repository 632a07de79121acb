/* SPDX-License-Identifier: MIT */
#include "report.h"

#include <stdio.h>

#include "util.h"

const char *pw_report_errno_name(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return NULL;
	case EACCES:
		return "EACCES";
	case EROFS:
		return "EROFS";
	case ENOENT:
		return "ENOENT";
	case EPERM:
		return "EPERM";
	case EXDEV:
		return "EXDEV";
	case EINVAL:
		return "EINVAL";
	case ENAMETOOLONG:
		return "ENAMETOOLONG";
	default:
		break;
	}
	const char *n = strerrorname_np(err);
	return n ? n : "EUNKNOWN";
}

/* json_object_set_new that tolerates a NULL value from a failed allocation by failing
 * the whole object: returns false so callers can bail out. */
static bool set(json_t *o, const char *key, json_t *v)
{
	return v && json_object_set_new(o, key, v) == 0;
}

json_t *pw_report_str_or_null(const char *s)
{
	json_t *v;

	if (!s)
		return json_null();
	v = json_string(s);
	if (v)
		return v;
	_cleanup_free_ char *copy = strdup(s);
	if (!copy)
		return NULL;
	for (unsigned char *p = (unsigned char *)copy; *p; p++)
		if (*p >= 0x80)
			*p = '?';
	return json_string(copy);
}

json_t *pw_report_rule(const pw_rule *r)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (!set(o, "kind", pw_report_str_or_null(pw_rule_kind_name(r->kind))) ||
	    !set(o, "pattern", pw_report_str_or_null(r->pattern)) ||
	    !set(o, "file", pw_report_str_or_null(r->file)) ||
	    !set(o, "line", json_integer(r->line)) || !set(o, "column", json_integer(r->column)) ||
	    !set(o, "layer", pw_report_str_or_null(pw_layer_name(r->layer)))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *pw_report_warning(const pw_warning *w)
{
	_cleanup_free_ char *text = pw_warning_format(w);
	json_t *o = json_object();

	if (!o || !text) {
		json_decref(o);
		return NULL;
	}
	if (!set(o, "severity",
		 pw_report_str_or_null(w->severity == PW_ERROR ? "error" : "warning")) ||
	    !set(o, "file", pw_report_str_or_null(w->file)) ||
	    !set(o, "line", json_integer(w->line)) || !set(o, "column", json_integer(w->column)) ||
	    !set(o, "key", pw_report_str_or_null(w->key)) ||
	    !set(o, "message", pw_report_str_or_null(w->message)) ||
	    !set(o, "text", pw_report_str_or_null(text))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* Appends every element produced by GET(ctx, i) for i < n; false on allocation failure. */
static json_t *rule_array(size_t n, const pw_rule *(*get)(const void *, size_t), const void *ctx)
{
	json_t *a = json_array();

	if (!a)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (json_array_append_new(a, pw_report_rule(get(ctx, i))) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static const pw_rule *mode_rule(const void *ctx, size_t i)
{
	return &((const pw_mode *)ctx)->rules[i];
}

json_t *pw_report_mode(const pw_mode *m)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (!set(o, "name", pw_report_str_or_null(m->name)) ||
	    !set(o, "description", pw_report_str_or_null(m->description)) ||
	    !set(o, "file", pw_report_str_or_null(m->file)) ||
	    !set(o, "layer", pw_report_str_or_null(pw_layer_name(m->layer))) ||
	    !set(o, "tokens", json_boolean(m->tokens)) ||
	    !set(o, "protect", json_boolean(m->protect)) ||
	    !set(o, "rules", rule_array(m->n_rules, mode_rule, m))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static const pw_rule *ms_protected(const void *ctx, size_t i)
{
	return pw_modeset_protected(ctx, i);
}

static const pw_rule *ms_token(const void *ctx, size_t i)
{
	return pw_modeset_token(ctx, i);
}

json_t *pw_report_modeset(const pw_modeset *ms)
{
	json_t *o = json_object(), *modes = json_array(), *warnings;

	/* Each array is attached first and filled afterwards, so O owns everything and one
	 * decref cleans up on any failure (json_object_set_new consumes its value even when
	 * it fails). */
	if (!o || !set(o, "modes", modes))
		goto fail;
	for (size_t i = 0; i < pw_modeset_count(ms); i++)
		if (json_array_append_new(modes, pw_report_mode(pw_modeset_get(ms, i))) < 0)
			goto fail;
	if (!set(o, "protected", rule_array(pw_modeset_protected_count(ms), ms_protected, ms)) ||
	    !set(o, "tokens", rule_array(pw_modeset_token_count(ms), ms_token, ms)))
		goto fail;
	warnings = json_array();
	if (!set(o, "warnings", warnings))
		goto fail;
	for (size_t i = 0; i < pw_modeset_warning_count(ms); i++) {
		json_t *w = pw_report_warning(pw_modeset_warning(ms, i));
		const char *mode = pw_modeset_warning_mode(ms, i);
		/* The mode it is about: `mode` shows the ignored keys of the mode it shows. */
		if (json_array_append_new(warnings, w) < 0 ||
		    json_object_set_new(w, "mode", mode ? json_string(mode) : json_null()) < 0)
			goto fail;
	}
	return o;
fail:
	if (!o)
		json_decref(modes);
	json_decref(o);
	return NULL;
}

static const pw_rule *policy_rule(const void *ctx, size_t i)
{
	return pw_policy_rule(ctx, i);
}

/* The lane's globs, in order ([] without a lane). */
static json_t *lane_globs(const pw_policy *p)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < pw_policy_lane_count(p); i++)
		if (json_array_append_new(
			a, pw_report_str_or_null(pw_policy_lane_rule(p, i)->pattern)) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

/* The plans folder a mode with writes.plans writes: "docs/plans" from "/docs/plans/" "**". */
static json_t *plans_dir(const pw_policy *p)
{
	const pw_rule *r = pw_policy_plans_rule(p);
	size_t n = r ? strlen(r->pattern) : 0;

	if (!r || n < 4)
		return json_null();
	return json_stringn(r->pattern + 1, n - 4);
}

json_t *pw_report_policy(const pw_policy *p)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (!set(o, "mode", pw_report_str_or_null(pw_policy_mode_name(p))) ||
	    !set(o, "description", pw_report_str_or_null(pw_policy_description(p))) ||
	    !set(o, "file", pw_report_str_or_null(pw_policy_source(p))) ||
	    !set(o, "writes_nothing", json_boolean(pw_policy_writes_nothing(p))) ||
	    !set(o, "protect", json_boolean(pw_policy_protects(p))) ||
	    !set(o, "keep_originals", json_boolean(pw_policy_keeps_originals(p))) ||
	    !set(o, "fail_closed", json_boolean(pw_policy_is_fail_closed(p))) ||
	    !set(o, "fail_reason", pw_report_str_or_null(pw_policy_fail_reason(p))) ||
	    !set(o, "rules", rule_array(pw_policy_rule_count(p), policy_rule, p)) ||
	    !set(o, "plans_dir", plans_dir(p)) || !set(o, "lane", lane_globs(p))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ---- a policy read back ---------------------------------------------------------------- */

/* The rules of the array A (pw_report_rule's objects), in order. Returns 0, -EINVAL with
 * *ret_err, -ENOMEM. */
static int rules_parse(const json_t *a, pw_rule **ret, size_t *ret_n, const char **ret_err)
{
	size_t n = json_array_size(a), i;
	pw_rule *v = calloc(n ? n : 1, sizeof(*v));
	const json_t *o;
	int r = 0;

	if (!v)
		return -ENOMEM;
	json_array_foreach(a, i, o)
	{
		const char *pattern = json_string_value(json_object_get(o, "pattern"));
		const char *file = json_string_value(json_object_get(o, "file"));
		json_int_t line = json_integer_value(json_object_get(o, "line"));
		json_int_t column = json_integer_value(json_object_get(o, "column"));
		int kind = pw_rule_kind_from_name(json_string_value(json_object_get(o, "kind")));
		int layer = pw_layer_from_name(json_string_value(json_object_get(o, "layer")));
		const char *err = NULL;

		if (!pattern || kind < 0 || layer < 0 || line < 0 || column < 0 ||
		    line > UINT32_MAX || column > UINT32_MAX) {
			*ret_err = "a rule without a pattern, kind or layer";
			r = -EINVAL;
		} else {
			r = pw_rule_init(&v[i], (pw_rule_kind)kind, pattern, file ? file : "",
					 (unsigned)line, (unsigned)column, (pw_layer)layer, &err);
			if (r < 0 && r != -ENOMEM) {
				*ret_err = err ? err : "a rule's glob does not compile";
				r = -EINVAL;
			}
		}
		if (r < 0) {
			pw_rules_free(v, i);
			return r;
		}
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

int pw_report_policy_parse(const json_t *o, pw_policy **ret, const char **ret_err)
{
	const char *mode = json_string_value(json_object_get(o, "mode"));
	const json_t *rules = json_object_get(o, "rules"), *lane = json_object_get(o, "lane");
	const json_t *protect = json_object_get(o, "protect");
	const json_t *keep = json_object_get(o, "keep_originals");
	const char *globs[PW_LANE_MAX], *err = "not a policy";
	pw_rule *rv = NULL, *lv = NULL;
	size_t nr = 0, nl = json_array_size(lane), i;
	const json_t *g;
	int r;

	if (!json_is_object(o) || !mode || !json_is_array(rules) ||
	    (protect && !json_is_boolean(protect)) || (keep && !json_is_boolean(keep)) ||
	    (lane && !json_is_array(lane)) || nl > PW_LANE_MAX) {
		*ret_err = err;
		return -EINVAL;
	}
	json_array_foreach(lane, i, g)
	{
		globs[i] = json_string_value(g);
		if (!globs[i]) {
			*ret_err = "a lane glob that is not a string";
			return -EINVAL;
		}
	}
	r = rules_parse(rules, &rv, &nr, ret_err);
	if (r < 0)
		return r;
	r = nl ? pw_lane_parse(globs, nl, &lv, NULL, &err) : 0;
	if (r < 0) {
		pw_rules_free(rv, nr);
		*ret_err = err ? err : "a lane glob does not compile";
		return r == -ENOMEM ? r : -EINVAL;
	}
	pw_policy_parts parts = {
	    .mode = mode,
	    .description = json_string_value(json_object_get(o, "description")),
	    .source = json_string_value(json_object_get(o, "file")),
	    .fail_reason = json_is_true(json_object_get(o, "fail_closed"))
			       ? (json_string_value(json_object_get(o, "fail_reason"))
				      ?: "the view fails closed")
			       : NULL,
	    /* Absent (a daemon from before they were shown): the defaults of a mode. */
	    .protect = !json_is_false(protect),
	    .keep_originals = !json_is_false(keep),
	    .rules = rv,
	    .n_rules = nr,
	    .plans = json_is_string(json_object_get(o, "plans_dir")),
	    .lane = lv,
	    .n_lane = nl,
	};
	r = pw_policy_assemble(&parts, ret);
	pw_rules_free(rv, nr);
	pw_lane_free(lv, nl);
	if (r == -EINVAL)
		*ret_err = "its rules are not in decision order";
	return r;
}

static bool rule_is_builtin(const pw_rule *r)
{
	return r->layer == PW_LAYER_DEFAULT || !r->file || r->file[0] == '(';
}

/* "PATTERN — FILE:LINE" or "PATTERN (built-in)". */
static char *rule_where(const pw_rule *r, const char *file_display)
{
	char *s = NULL;
	int n;

	if (rule_is_builtin(r))
		n = asprintf(&s, "%s (built-in)", r->pattern);
	else
		n = asprintf(&s, "%s \u2014 %s:%u", r->pattern,
			     file_display ? file_display : r->file, r->line);
	return n < 0 ? NULL : s;
}

/* A decision's text around one name: BEFORE, the name, AFTER. */
typedef struct around {
	const char *before, *after;
} around;

/* Per reason: the text around the deciding rule's place (RULE, used when the decision has a
 * rule), and around the mode's name (MODE). A reason without a row is "denied in mode M". */
static const struct {
	around rule, mode;
} reason_texts[] = {
    [PW_REASON_ALLOW_RULE] = {{"allow ", ""}, {"allowed in mode ", ""}},
    [PW_REASON_TOKEN] = {{"design token file ", ""}, {"a design token file of mode ", ""}},
    [PW_REASON_HIDDEN] = {{"hidden by hide ", ""}, {"hidden in mode ", ""}},
    [PW_REASON_READ_ONLY] = {{NULL, NULL}, {"mode ", " writes nothing"}},
    [PW_REASON_PROTECTED] = {{"protected path ", ""}, {NULL, NULL}},
    [PW_REASON_DENY_RULE] = {{"deny ", ""}, {"denied by a deny rule of mode ", ""}},
    [PW_REASON_NO_ALLOW] = {{NULL, NULL}, {"no allow rule matches in mode ", ""}},
    [PW_REASON_FAIL_CLOSED] = {{NULL, NULL}, {"mode ", " failed to load, so nothing is writable"}},
    [PW_REASON_LANE] = {{NULL, NULL},
			{"outside the view's lane (--only); mode ", " allows it elsewhere"}},
    [PW_REASON_OVERLAP] = {{NULL, NULL},
			   {"allowed in mode ", "; another live view of the project changed it "
						"in its current change set"}},
    [PW_REASON_HARDLINK] = {{NULL, NULL},
			    {"the file has hard links whose names the view has not seen; mode ",
			     " writes such files only where it allows every path"}},
};

char *pw_report_decision_text(const pw_decision *d, const char *mode, const char *file_display)
{
	_cleanup_free_ char *where = NULL;
	const char *m = mode ? mode : "?";
	char *s = NULL;

	if (d->rule) {
		where = rule_where(d->rule, file_display);
		if (!where)
			return NULL;
	}
	if (d->reason == PW_REASON_READ)
		return strdup("reads are allowed");
	if (d->reason == PW_REASON_OUTSIDE)
		return strdup("the path leaves the project");
	if (d->reason == PW_REASON_PROTECTED && d->rule &&
	    streq_ptr(d->rule->file, PW_FROZEN_RULE_FILE))
		return asprintf(&s, "approved plan %s, read-only until the person reopens it",
				d->rule->pattern[0] == '/' ? d->rule->pattern + 1
							   : d->rule->pattern) < 0
			   ? NULL
			   : s;
	if (d->reason == PW_REASON_PROTECTED && !where)
		return strdup("protected path (writable only in mode off)");
	around t = {"denied in mode ", ""};
	const char *name = m;
	if ((size_t)d->reason < ELEMENTSOF(reason_texts) && where &&
	    reason_texts[d->reason].rule.before) {
		t = reason_texts[d->reason].rule;
		name = where;
	} else if ((size_t)d->reason < ELEMENTSOF(reason_texts) &&
		   reason_texts[d->reason].mode.before) {
		t = reason_texts[d->reason].mode;
	}
	return asprintf(&s, "%s%s%s", t.before, name, t.after) < 0 ? NULL : s;
}

/* The plans folder of P's plans rule ("docs/plans" from "/docs/plans/" "**"), malloc'd, or
 * NULL. */
static char *plans_folder(const pw_policy *p)
{
	const pw_rule *r = pw_policy_plans_rule(p);
	size_t n = r ? strlen(r->pattern) : 0;

	return r && n >= 4 ? strndup(r->pattern + 1, n - 4) : NULL;
}

char *pw_report_decision_text_in(const pw_decision *d, const pw_policy *p, const char *file_display)
{
	_cleanup_free_ char *folder = NULL;
	char *s = NULL;

	/* A mode that writes only its plans folder (plan) refuses the rest of the project as a
	 * read-only view would (EROFS), but "writes nothing" beside a plan it allows is false. */
	if (!d->allowed && d->reason == PW_REASON_READ_ONLY && pw_policy_writes_only_plans(p) &&
	    (folder = plans_folder(p)))
		return asprintf(&s, "mode %s writes only its plans folder, %s/",
				pw_policy_mode_name(p), folder) < 0
			   ? NULL
			   : s;
	return pw_report_decision_text(d, pw_policy_mode_name(p), file_display);
}

static const char *decision_word(const pw_decision *d)
{
	if (d->allowed)
		return "allowed";
	return d->reason == PW_REASON_OUTSIDE ? "outside" : "denied";
}

/* The decision object with TEXT for its message. */
static json_t *decision_json(const char *path, pw_op op, bool is_dir, const pw_decision *d,
			     const char *mode, const char *text)
{
	json_t *o = json_object();

	if (!o || !text) {
		json_decref(o);
		return NULL;
	}
	if (!set(o, "path", pw_report_str_or_null(path)) ||
	    !set(o, "op", pw_report_str_or_null(pw_op_name(op))) ||
	    !set(o, "is_dir", json_boolean(is_dir)) ||
	    !set(o, "decision", pw_report_str_or_null(decision_word(d))) ||
	    !set(o, "errno",
		 pw_report_str_or_null(d->allowed ? NULL : pw_report_errno_name(d->err))) ||
	    !set(o, "reason", pw_report_str_or_null(pw_reason_name(d->reason))) ||
	    !set(o, "mode", pw_report_str_or_null(mode)) ||
	    !set(o, "rule", d->rule ? pw_report_rule(d->rule) : json_null()) ||
	    !set(o, "message", pw_report_str_or_null(text))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *pw_report_decision(const char *path, pw_op op, bool is_dir, const pw_decision *d,
			   const char *mode)
{
	_cleanup_free_ char *text = pw_report_decision_text(d, mode, NULL);

	return text ? decision_json(path, op, is_dir, d, mode, text) : NULL;
}

json_t *pw_report_decision_in(const char *path, pw_op op, bool is_dir, const pw_decision *d,
			      const pw_policy *p)
{
	_cleanup_free_ char *text = pw_report_decision_text_in(d, p, NULL);

	return text ? decision_json(path, op, is_dir, d, pw_policy_mode_name(p), text) : NULL;
}
