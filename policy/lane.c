/* SPDX-License-Identifier: MIT */
/*
 * The lane of a view (policy.h, step 8): `--only` globs compiled as lane rules, with the
 * mode files' glob syntax and errors. The decisions that use them are in policy.c.
 */
#include <errno.h>

#include "modefile.h"
#include "policy.h"
#include "util.h"

void pw_lane_free(pw_rule *lane, size_t n)
{
	pw_rules_free(lane, n);
}

int pw_lane_parse(const char *const *globs, size_t n, pw_rule **ret, size_t *ret_bad,
		  const char **ret_err)
{
	pw_rule *lane;

	if (n > PW_LANE_MAX)
		return -E2BIG;
	lane = calloc(n ? n : 1, sizeof(*lane));
	if (!lane)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const char *err = NULL;
		int r = pw_rule_init(&lane[i], PW_RULE_LANE, globs[i], "(--only)", 0, 0,
				     PW_LAYER_LANE, &err);
		if (r < 0) {
			pw_lane_free(lane, i);
			if (ret_bad)
				*ret_bad = i;
			if (ret_err)
				*ret_err = err ? err : "invalid glob";
			return r;
		}
	}
	*ret = lane;
	return 0;
}
