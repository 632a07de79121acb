/* SPDX-License-Identifier: MIT */
/*
 * Compiled policies and decisions (policy.h has the decision order).
 *
 * A policy is built once and never changes, so any number of threads may decide with it
 * without locks; only its reference count moves, atomically. It owns copies of every rule it
 * applies (the modeset can be freed or reloaded while FUSE workers still hold the policy).
 * The rules are stored grouped by kind in decision order (hide, protected, deny, allow,
 * token), so a decision is a few linear scans and the first match of a group decides.
 * Rules that cannot apply are left out at compile time: protected rules in a protect:false
 * mode and token rules in a mode without writes.tokens.
 */
#include <errno.h>

#include "mode.h"
#include "policy.h"
#include "ref.h"
#include "util.h"

enum {
	GROUP_HIDE,
	GROUP_PROTECTED,
	GROUP_DENY,
	GROUP_ALLOW,
	GROUP_TOKEN,
	GROUP_PLANS, /* the plans folder, in a mode with writes.plans */
	_GROUP_MAX,
};

struct pw_policy {
	pw_refcount refcount;
	char *mode, *description, *body, *source;
	char *fail_reason;   /* non-NULL: fail-closed */
	bool protect;	     /* the mode's protect key (protected rules are left out when false) */
	bool keep_originals; /* the mode's keep_originals key */
	pw_rule *rules;
	size_t n_rules;
	size_t group_start[_GROUP_MAX + 1]; /* rules of group g: [start[g], start[g + 1]) */
	pw_rule *lane; /* the view's lane (step 8), kept apart from the mode's rules: it is no
			* rule of the mode, and the rule lists `allowed` shows stay the mode's */
	size_t n_lane;
};

static const char *const op_names[_PW_OP_MAX] = {
    [PW_OP_LOOKUP] = "lookup",
    [PW_OP_READ] = "read",
    [PW_OP_CREATE] = "create",
    [PW_OP_MKNOD] = "mknod",
    [PW_OP_MKDIR] = "mkdir",
    [PW_OP_SYMLINK] = "symlink",
    [PW_OP_LINK] = "link",
    [PW_OP_UNLINK] = "unlink",
    [PW_OP_RMDIR] = "rmdir",
    [PW_OP_RENAME] = "rename",
    [PW_OP_OPEN_WRITE] = "open-write",
    [PW_OP_WRITE] = "write",
    [PW_OP_TRUNCATE] = "truncate",
    [PW_OP_CHMOD] = "chmod",
    [PW_OP_CHOWN] = "chown",
    [PW_OP_UTIMENS] = "utimens",
    [PW_OP_SETXATTR] = "setxattr",
    [PW_OP_REMOVEXATTR] = "removexattr",
    [PW_OP_FALLOCATE] = "fallocate",
    [PW_OP_COPY_RANGE] = "copy-range",
    [PW_OP_ACCESS_WRITE] = "access-write",
};

const char *pw_op_name(pw_op op)
{
	return PW_NAME_OF(op_names, op, "unknown");
}

int pw_op_from_name(const char *name)
{
	return PW_NAME_INDEX(op_names, name);
}

bool pw_op_is_write(pw_op op)
{
	return op != PW_OP_LOOKUP && op != PW_OP_READ;
}

static const char *const reason_names[] = {
    [PW_REASON_READ] = "read",
    [PW_REASON_ALLOW_RULE] = "allow-rule",
    [PW_REASON_TOKEN] = "token",
    [PW_REASON_HIDDEN] = "hidden",
    [PW_REASON_READ_ONLY] = "read-only",
    [PW_REASON_PROTECTED] = "protected",
    [PW_REASON_DENY_RULE] = "deny-rule",
    [PW_REASON_NO_ALLOW] = "no-allow",
    [PW_REASON_FAIL_CLOSED] = "fail-closed",
    [PW_REASON_OUTSIDE] = "outside",
    [PW_REASON_HARDLINK] = "hard-link",
    [PW_REASON_LANE] = "outside-lane",
    [PW_REASON_OVERLAP] = "overlap",
};

const char *pw_reason_name(pw_reason r)
{
	return PW_NAME_OF(reason_names, r, "unknown");
}

/* ---- construction ------------------------------------------------------------------ */

static void policy_free(pw_policy *p)
{
	free(p->mode);
	free(p->description);
	free(p->body);
	free(p->source);
	free(p->fail_reason);
	pw_rules_free(p->rules, p->n_rules);
	pw_lane_free(p->lane, p->n_lane);
	free(p);
}

static void policy_freep(pw_policy **p)
{
	if (*p)
		policy_free(*p);
}

static pw_policy *policy_alloc(const char *mode, const char *description, const char *body,
			       const char *source)
{
	_cleanup_(policy_freep) pw_policy *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	atomic_init(&p->refcount, 1);
	p->protect = true;
	p->mode = strdup(mode ? mode : "");
	p->description = strdup(description ? description : "");
	p->body = strdup(body ? body : "");
	p->source = strdup(source ? source : "");
	if (!p->mode || !p->description || !p->body || !p->source)
		return NULL;
	return TAKE_PTR(p);
}

static int policy_add_group(pw_policy *p, int group, const pw_rule *v, size_t n, pw_rule_kind kind)
{
	for (size_t i = 0; i < n; i++) {
		int r;

		if (v[i].kind != kind)
			continue;
		r = pw_rules_append_copy(&p->rules, &p->n_rules, &v[i]);
		if (r < 0)
			return r;
	}
	p->group_start[group + 1] = p->n_rules;
	return 0;
}

static int policy_add_rules(pw_policy *p, const pw_modeset *ms, const pw_mode *m,
			    const pw_policy_extras *x)
{
	int r;

	r = policy_add_group(p, GROUP_HIDE, m->rules, m->n_rules, PW_RULE_HIDE);
	if (r < 0)
		return r;
	for (size_t i = 0; m->protect && i < pw_modeset_protected_count(ms); i++) {
		r = pw_rules_append_copy(&p->rules, &p->n_rules, pw_modeset_protected(ms, i));
		if (r < 0)
			return r;
	}
	for (size_t i = 0; m->protect && i < x->n_frozen; i++) {
		if (x->frozen[i].kind != PW_RULE_PROTECTED)
			return -EINVAL;
		r = pw_rules_append_copy(&p->rules, &p->n_rules, &x->frozen[i]);
		if (r < 0)
			return r;
	}
	p->group_start[GROUP_PROTECTED + 1] = p->n_rules;
	r = policy_add_group(p, GROUP_DENY, m->rules, m->n_rules, PW_RULE_DENY);
	if (r < 0)
		return r;
	r = policy_add_group(p, GROUP_ALLOW, m->rules, m->n_rules, PW_RULE_ALLOW);
	if (r < 0)
		return r;
	for (size_t i = 0; m->tokens && i < pw_modeset_token_count(ms); i++) {
		r = pw_rules_append_copy(&p->rules, &p->n_rules, pw_modeset_token(ms, i));
		if (r < 0)
			return r;
	}
	p->group_start[GROUP_TOKEN + 1] = p->n_rules;
	if (m->plans) {
		r = pw_rules_append_copy(&p->rules, &p->n_rules, pw_modeset_plans_rule(ms));
		if (r < 0)
			return r;
	}
	p->group_start[GROUP_PLANS + 1] = p->n_rules;
	return 0;
}

int pw_policy_compile(const pw_modeset *ms, const char *mode, pw_policy **ret)
{
	return pw_policy_compile_lane(ms, mode, NULL, 0, ret);
}

int pw_policy_compile_lane(const pw_modeset *ms, const char *mode, const pw_rule *lane, size_t n,
			   pw_policy **ret)
{
	pw_policy_extras x = {.lane = lane, .n_lane = n};

	return pw_policy_compile_extras(ms, mode, &x, ret);
}

int pw_policy_compile_extras(const pw_modeset *ms, const char *mode, const pw_policy_extras *x,
			     pw_policy **ret)
{
	static const pw_policy_extras none;
	_cleanup_(policy_freep) pw_policy *p = NULL;
	const pw_mode *m;
	int r;

	if (!x)
		x = &none;

	m = pw_modeset_find(ms, mode);
	if (!m)
		return -ENOENT;
	p = policy_alloc(m->name, m->description, m->body, m->file);
	if (!p)
		return -ENOMEM;
	p->protect = m->protect;
	p->keep_originals = m->keep_originals;
	r = policy_add_rules(p, ms, m, x);
	if (r < 0)
		return r;
	for (size_t i = 0; i < x->n_lane; i++) {
		r = pw_rules_append_copy(&p->lane, &p->n_lane, &x->lane[i]);
		if (r < 0)
			return r;
	}
	*ret = TAKE_PTR(p);
	return 0;
}

size_t pw_policy_lane_count(const pw_policy *p)
{
	return p->n_lane;
}

const pw_rule *pw_policy_lane_rule(const pw_policy *p, size_t i)
{
	return i < p->n_lane ? &p->lane[i] : NULL;
}

/* The group a rule of KIND joins, in decision order; -EINVAL for a kind no policy holds. */
static int group_of(pw_rule_kind kind)
{
	switch (kind) {
	case PW_RULE_HIDE:
		return GROUP_HIDE;
	case PW_RULE_PROTECTED:
		return GROUP_PROTECTED;
	case PW_RULE_DENY:
		return GROUP_DENY;
	case PW_RULE_ALLOW:
		return GROUP_ALLOW;
	case PW_RULE_TOKEN:
		return GROUP_TOKEN;
	case PW_RULE_LANE:
		break;
	}
	return -EINVAL;
}

int pw_policy_assemble(const pw_policy_parts *x, pw_policy **ret)
{
	_cleanup_(policy_freep) pw_policy *p = NULL;
	size_t n = x->n_rules;
	int g = GROUP_HIDE, r;

	p = policy_alloc(x->mode, x->description, "", x->source);
	if (!p)
		return -ENOMEM;
	p->protect = x->protect;
	p->keep_originals = x->keep_originals;
	if (x->fail_reason) {
		p->fail_reason = strdup(x->fail_reason);
		if (!p->fail_reason)
			return -ENOMEM;
		*ret = TAKE_PTR(p);
		return 0;
	}
	if (x->plans && (n == 0 || x->rules[n - 1].kind != PW_RULE_ALLOW))
		return -EINVAL;
	if (x->plans)
		n--;
	for (size_t i = 0; i < n; i++) {
		int k = group_of(x->rules[i].kind);
		if (k < g) /* out of order, or a lane rule */
			return -EINVAL;
		for (; g < k; g++)
			p->group_start[g + 1] = p->n_rules;
		r = pw_rules_append_copy(&p->rules, &p->n_rules, &x->rules[i]);
		if (r < 0)
			return r;
	}
	for (; g < GROUP_PLANS; g++)
		p->group_start[g + 1] = p->n_rules;
	if (x->plans) {
		r = pw_rules_append_copy(&p->rules, &p->n_rules, &x->rules[n]);
		if (r < 0)
			return r;
	}
	p->group_start[GROUP_PLANS + 1] = p->n_rules;
	for (size_t i = 0; i < x->n_lane; i++) {
		if (x->lane[i].kind != PW_RULE_LANE)
			return -EINVAL;
		r = pw_rules_append_copy(&p->lane, &p->n_lane, &x->lane[i]);
		if (r < 0)
			return r;
	}
	*ret = TAKE_PTR(p);
	return 0;
}

pw_policy *pw_policy_new_fail_closed(const char *mode, const char *why)
{
	_cleanup_(policy_freep) pw_policy *p = NULL;

	p = policy_alloc(mode, "", "", "");
	if (!p)
		return NULL;
	p->fail_reason = strdup(why ? why : "the mode is broken");
	if (!p->fail_reason)
		return NULL;
	return TAKE_PTR(p);
}

pw_policy *pw_policy_ref(pw_policy *p)
{
	if (p)
		pw_ref_take(&p->refcount);
	return p;
}

void pw_policy_unref(pw_policy *p)
{
	if (p && pw_ref_drop(&p->refcount))
		policy_free(p);
}

/* ---- decisions --------------------------------------------------------------------- */

static const pw_rule *group_match(const pw_policy *p, int group, const char *path, bool is_dir)
{
	for (size_t i = p->group_start[group]; i < p->group_start[group + 1]; i++)
		if (pw_glob_match_tree(p->rules[i].glob, path, is_dir))
			return &p->rules[i];
	return NULL;
}

/*
 * The allow and token steps: a rule matching the path or an ancestor, else, for a
 * directory, a rule `dir/` `**` of which it is the dir (so that "tests/" "**" lets `mkdir
 * tests` through). Only rules that grant writes reach that far: a deny, hide or protected
 * rule `dir/` `**` covers what is beneath dir, as in gitignore, and dir itself stays
 * decided by the other rules (moving it is guarded by pw_policy_may_write_tree).
 */
static const pw_rule *group_match_granting(const pw_policy *p, int group, const char *path,
					   bool is_dir)
{
	const pw_rule *rule = group_match(p, group, path, is_dir);

	if (rule || !is_dir)
		return rule;
	for (size_t i = p->group_start[group]; i < p->group_start[group + 1]; i++)
		if (pw_glob_match_dir_itself(p->rules[i].glob, path))
			return &p->rules[i];
	return NULL;
}

static bool group_empty(const pw_policy *p, int group)
{
	return p->group_start[group] == p->group_start[group + 1];
}

bool pw_policy_writes_nothing(const pw_policy *p)
{
	return p->fail_reason || (group_empty(p, GROUP_ALLOW) && group_empty(p, GROUP_TOKEN) &&
				  group_empty(p, GROUP_PLANS));
}

const pw_rule *pw_policy_plans_rule(const pw_policy *p)
{
	return group_empty(p, GROUP_PLANS) ? NULL : &p->rules[p->group_start[GROUP_PLANS]];
}

bool pw_policy_writes_only_plans(const pw_policy *p)
{
	return !p->fail_reason && !group_empty(p, GROUP_PLANS) && group_empty(p, GROUP_ALLOW) &&
	       group_empty(p, GROUP_TOKEN);
}

/*
 * A mode whose only writable place is its plans folder (plan) keeps the project read-only:
 * a write outside the folder answers EROFS, protected and denied paths included, exactly as
 * before plans existed. The folder is the mode's work product, not a part of the project it
 * may change, so the errno keeps telling tools "this view is read-only" (design.md §4: EROFS
 * where the mode writes nothing of the project); inside it, an approved plan (a protected
 * rule) answers EACCES like any protected path.
 */
static bool writes_only_plans(const pw_policy *p)
{
	return group_empty(p, GROUP_ALLOW) && group_empty(p, GROUP_TOKEN);
}

static void decided(pw_decision *ret, bool allowed, int err, pw_reason reason, const pw_rule *rule)
{
	*ret = (pw_decision){.allowed = allowed, .err = err, .reason = reason, .rule = rule};
}

/* The hide step. The project root itself is never hidden: hiding it would hide the view. */
static const pw_rule *hidden_by(const pw_policy *p, const char *path, bool is_dir)
{
	if (path[0] == '\0')
		return NULL;
	return group_match(p, GROUP_HIDE, path, is_dir);
}

/* Step 8: does a lane glob reach PATH (as an allow rule would: group_match_granting)? */
static bool in_lane(const pw_policy *p, const char *path, bool is_dir)
{
	for (size_t i = 0; i < p->n_lane; i++)
		if (pw_glob_match_tree(p->lane[i].glob, path, is_dir) ||
		    (is_dir && pw_glob_match_dir_itself(p->lane[i].glob, path)))
			return true;
	return false;
}

/* Step 8: a write allowed by the mode, outside the view's lane, is refused. Only ever
 * turns an allowed write into a refusal (tighten-only). */
static void narrow_to_lane(const pw_policy *p, const char *path, bool is_dir, pw_decision *ret)
{
	if (ret->allowed && p->n_lane && !in_lane(p, path, is_dir))
		decided(ret, false, EACCES, PW_REASON_LANE, NULL);
}

/* Steps 3 to 7 of the decision order, for a write. */
static void decide_write(const pw_policy *p, const char *path, bool is_dir, pw_decision *ret)
{
	const pw_rule *rule;

	if (p->fail_reason)
		return decided(ret, false, EROFS, PW_REASON_FAIL_CLOSED, NULL);
	if (pw_policy_writes_nothing(p))
		return decided(ret, false, EROFS, PW_REASON_READ_ONLY, NULL);
	if (writes_only_plans(p) && !group_match_granting(p, GROUP_PLANS, path, is_dir))
		return decided(ret, false, EROFS, PW_REASON_READ_ONLY, NULL);
	rule = group_match(p, GROUP_PROTECTED, path, is_dir);
	if (rule)
		return decided(ret, false, EACCES, PW_REASON_PROTECTED, rule);
	rule = group_match(p, GROUP_DENY, path, is_dir);
	if (rule)
		return decided(ret, false, EACCES, PW_REASON_DENY_RULE, rule);
	rule = group_match_granting(p, GROUP_ALLOW, path, is_dir);
	if (rule)
		return decided(ret, true, 0, PW_REASON_ALLOW_RULE, rule);
	rule = group_match_granting(p, GROUP_TOKEN, path, is_dir);
	if (rule)
		return decided(ret, true, 0, PW_REASON_TOKEN, rule);
	rule = group_match_granting(p, GROUP_PLANS, path, is_dir);
	if (rule)
		return decided(ret, true, 0, PW_REASON_ALLOW_RULE, rule);
	decided(ret, false, EACCES, PW_REASON_NO_ALLOW, NULL);
}

/*
 * Is PATH a directory on the way to the plans folder ("docs" for "/docs/plans/" "**")? A
 * mode that writes plans may make it (mkdir, and nothing else), so that plan mode can start
 * the folder in a project that has none; the folder itself is granted by its rule.
 */
static const pw_rule *plans_parent(const pw_policy *p, pw_op op, const char *path, bool is_dir)
{
	const pw_rule *r = pw_policy_plans_rule(p);
	size_t n = strlen(path), m;

	if (!r || op != PW_OP_MKDIR || !is_dir || n == 0 || p->fail_reason)
		return NULL;
	m = strlen(r->pattern); /* "/DIR/" "**": DIR is r->pattern + 1, m - 4 bytes */
	if (m < 4 || n >= m - 4 || strncmp(r->pattern + 1, path, n) != 0 ||
	    r->pattern[1 + n] != '/')
		return NULL;
	return r;
}

void pw_policy_decide(const pw_policy *p, pw_op op, const char *path, bool is_dir, pw_decision *ret)
{
	const pw_rule *rule = hidden_by(p, path, is_dir);

	if (rule)
		return decided(ret, false, ENOENT, PW_REASON_HIDDEN, rule);
	if (!pw_op_is_write(op))
		return decided(ret, true, 0, PW_REASON_READ, NULL);
	decide_write(p, path, is_dir, ret);
	if (!ret->allowed && ret->reason != PW_REASON_PROTECTED &&
	    ret->reason != PW_REASON_DENY_RULE && (rule = plans_parent(p, op, path, is_dir)))
		decided(ret, true, 0, PW_REASON_ALLOW_RULE, rule);
	narrow_to_lane(p, path, is_dir, ret);
}

void pw_policy_decide_new_name(const pw_policy *p, pw_op op, const char *path, bool is_dir,
			       pw_decision *ret)
{
	const pw_rule *rule = hidden_by(p, path, is_dir);

	if (!rule || !pw_op_is_write(op))
		return pw_policy_decide(p, op, path, is_dir, ret);
	decide_write(p, path, is_dir, ret);
	narrow_to_lane(p, path, is_dir, ret);
	if (ret->allowed)
		decided(ret, false, ENOENT, PW_REASON_HIDDEN, rule);
}

bool pw_policy_is_hidden(const pw_policy *p, const char *path, bool is_dir)
{
	return hidden_by(p, path, is_dir) != NULL;
}

bool pw_policy_may_write(const pw_policy *p, const char *path, bool is_dir)
{
	pw_decision d;

	if (pw_policy_writes_nothing(p))
		return false;
	pw_policy_decide(p, PW_OP_WRITE, path, is_dir, &d);
	return d.allowed;
}

bool pw_policy_has_hide_rules(const pw_policy *p)
{
	return !group_empty(p, GROUP_HIDE);
}

bool pw_policy_protects(const pw_policy *p)
{
	return p->protect;
}

bool pw_policy_keeps_originals(const pw_policy *p)
{
	return p->keep_originals;
}

bool pw_policy_is_fail_closed(const pw_policy *p)
{
	return p->fail_reason != NULL;
}

const char *pw_policy_fail_reason(const pw_policy *p)
{
	return p->fail_reason;
}

const char *pw_policy_mode_name(const pw_policy *p)
{
	return p->mode;
}

const char *pw_policy_description(const pw_policy *p)
{
	return p->description;
}

const char *pw_policy_body(const pw_policy *p)
{
	return p->body;
}

const char *pw_policy_source(const pw_policy *p)
{
	return p->source;
}

size_t pw_policy_rule_count(const pw_policy *p)
{
	return p->n_rules;
}

const pw_rule *pw_policy_rule(const pw_policy *p, size_t i)
{
	return i < p->n_rules ? &p->rules[i] : NULL;
}

/* ---- tightening -------------------------------------------------------------------- */

/*
 * Set relations are decided on pattern text: two rules are the same when their patterns are
 * identical. That is sound (equal text, equal glob) but incomplete: "src/[ab]" and "src/[ba]"
 * match the same paths and still count as different, which can only make a
 * switch look like a loosening, the safe error. The one semantic step taken: an allow pattern "**"
 * covers any other allow or token rule.
 */
static bool group_has_pattern(const pw_policy *p, int group, const char *pattern)
{
	for (size_t i = p->group_start[group]; i < p->group_start[group + 1]; i++)
		if (streq(p->rules[i].pattern, pattern))
			return true;
	return false;
}

/* Every rule of A's group GA has its pattern in B's group GB. */
static bool group_subset(const pw_policy *a, int ga, const pw_policy *b, int gb)
{
	for (size_t i = a->group_start[ga]; i < a->group_start[ga + 1]; i++)
		if (!group_has_pattern(b, gb, a->rules[i].pattern))
			return false;
	return true;
}

/* Is every path that a rule of TO's group G lets through let through by FROM's allow or
 * token rules? */
static bool writable_covered(const pw_policy *from, const pw_policy *to, int g)
{
	if (group_has_pattern(from, GROUP_ALLOW, "**"))
		return true;
	for (size_t i = to->group_start[g]; i < to->group_start[g + 1]; i++) {
		const char *pat = to->rules[i].pattern;

		if (!group_has_pattern(from, GROUP_ALLOW, pat) &&
		    !group_has_pattern(from, GROUP_TOKEN, pat) &&
		    !group_has_pattern(from, GROUP_PLANS, pat))
			return false;
	}
	return true;
}

/* Is TO's lane no wider than FROM's: FROM has none, or every glob of TO's is one of
 * FROM's (on pattern text, as above)? A lane dropped is a loosening. */
static bool lane_narrowed(const pw_policy *from, const pw_policy *to)
{
	if (!from->n_lane)
		return true;
	if (!to->n_lane)
		return false;
	for (size_t i = 0; i < to->n_lane; i++) {
		bool found = false;
		for (size_t j = 0; j < from->n_lane && !found; j++)
			found = streq(to->lane[i].pattern, from->lane[j].pattern);
		if (!found)
			return false;
	}
	return true;
}

bool pw_policy_is_tightening(const pw_policy *from, const pw_policy *to)
{
	/* Hiding less reveals files: never a tightening. A fail-closed policy hides nothing. */
	if (!group_subset(from, GROUP_HIDE, to, GROUP_HIDE))
		return false;
	if (pw_policy_writes_nothing(to))
		return true;
	if (pw_policy_writes_nothing(from))
		return false;
	/* Writing on without keeping originals takes undo away: never a tightening. */
	if (pw_policy_keeps_originals(from) && !pw_policy_keeps_originals(to))
		return false;
	if (!lane_narrowed(from, to))
		return false;
	return writable_covered(from, to, GROUP_ALLOW) && writable_covered(from, to, GROUP_TOKEN) &&
	       writable_covered(from, to, GROUP_PLANS) &&
	       group_subset(from, GROUP_DENY, to, GROUP_DENY) &&
	       group_subset(from, GROUP_PROTECTED, to, GROUP_PROTECTED);
}
