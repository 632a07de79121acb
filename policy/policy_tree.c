/* SPDX-License-Identifier: MIT */
/*
 * May a whole directory tree change its name? Renaming directory D moves everything
 * beneath it; if a deny or protected rule covers something under D (say D is `.git` and
 * `.git/hooks` is protected), the move would carry that content out from under the rule.
 * So a directory may move only when no enforced deny or protected rule can match beneath
 * it. Hide rules count too (moving a tree would reveal its hidden content under a new
 * name), and the same test applies to the destination of a directory move (moving a tree
 * to `vendor` when everything under `vendor` is denied would put content under the rule). "Can
 * match" is decided segment by segment and errs on the side of "yes".
 *
 * A pattern without a slash (glob.h: a name at any depth, such as `*.pem` or `.env`) never
 * stops a move: whether it matches a path beneath the directory depends on the names below
 * it, which the move keeps, and on the directory's own name and ancestors, which the
 * decisions on both names (the source and the new name) already checked.
 */
#include <fnmatch.h>
#include <string.h>

#include "pw_limits.h"
#include "policy.h"
#include "util.h"

static bool has_meta(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (strchr("*?[\\", s[i]))
			return true;
	return false;
}

/* Next segment of *P (no leading '/'); returns its length and advances *P past it. */
static size_t next_segment(const char **p, const char **ret_seg)
{
	while (**p == '/')
		(*p)++;
	const char *s = *p;
	size_t len = strcspn(s, "/");
	*p += len;
	*ret_seg = s;
	return len;
}

/* Could PATTERN match some path strictly beneath DIR ("" is the root)? */
static bool could_match_beneath(const char *pattern, const char *dir)
{
	const char *pp = pattern, *dp = dir;
	for (;;) {
		const char *dseg, *pseg;
		size_t dlen = next_segment(&dp, &dseg);
		size_t plen = next_segment(&pp, &pseg);
		if (dlen == 0)
			return plen > 0; /* the pattern goes deeper than DIR */
		if (plen == 0)
			return false; /* the pattern stops above DIR: it covers DIR itself */
		if (plen == 2 && pseg[0] == '*' && pseg[1] == '*')
			return true;
		if (plen >= PW_NAME_MAX || dlen >= PW_NAME_MAX)
			return true;
		if (has_meta(pseg, plen)) {
			char ps[PW_NAME_MAX + 1], ds[PW_NAME_MAX + 1];
			memcpy(ps, pseg, plen);
			ps[plen] = '\0';
			memcpy(ds, dseg, dlen);
			ds[dlen] = '\0';
			if (fnmatch(ps, ds, 0) == FNM_NOMATCH)
				return false;
		} else if (plen != dlen || memcmp(pseg, dseg, plen) != 0) {
			return false;
		}
	}
}

bool pw_policy_writes_everything(const pw_policy *p)
{
	if (pw_policy_is_fail_closed(p) || pw_policy_writes_nothing(p) ||
	    pw_policy_lane_count(p) > 0)
		return false;
	bool all = false;
	size_t n = pw_policy_rule_count(p);
	for (size_t i = 0; i < n; i++) {
		const pw_rule *r = pw_policy_rule(p, i);
		if (r->kind == PW_RULE_DENY || r->kind == PW_RULE_HIDE ||
		    (r->kind == PW_RULE_PROTECTED && pw_policy_protects(p)))
			return false;
		if (r->kind == PW_RULE_ALLOW && streq(r->pattern, "**"))
			all = true;
	}
	return all;
}

bool pw_policy_may_write_tree(const pw_policy *p, const char *dir, pw_decision *ret)
{
	pw_policy_decide(p, PW_OP_RENAME, dir, true, ret);
	if (!ret->allowed)
		return false;
	size_t n = pw_policy_rule_count(p);
	for (size_t i = 0; i < n; i++) {
		const pw_rule *r = pw_policy_rule(p, i);
		bool enforced = r->kind == PW_RULE_DENY || r->kind == PW_RULE_HIDE ||
				(r->kind == PW_RULE_PROTECTED && pw_policy_protects(p));
		if (!enforced || pw_glob_is_basename(r->glob) ||
		    !could_match_beneath(r->pattern, dir))
			continue;
		pw_reason why = r->kind == PW_RULE_DENY	  ? PW_REASON_DENY_RULE
				: r->kind == PW_RULE_HIDE ? PW_REASON_HIDDEN
							  : PW_REASON_PROTECTED;
		*ret = (pw_decision){.allowed = false, .err = EACCES, .reason = why, .rule = r};
		return false;
	}
	return true;
}
