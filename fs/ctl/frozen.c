/* SPDX-License-Identifier: MIT */
/* The approved plans of a project as protected rules (frozen.h). */
#include "frozen.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modeset.h"
#include "store/state.h"
#include "util.h"

void pw_frozen_done(pw_frozen *f)
{
	if (!f)
		return;
	pw_rules_free(f->rules, f->n);
	free(f->error);
	*f = (pw_frozen){0};
}

/* Gives F the error WHY (formatted), dropping its rules: a set with an error freezes
 * nothing by rule, since the view fails closed as a whole. -ENOMEM when even the message
 * cannot be made. */
_printf_(2, 3) static int set_error(pw_frozen *f, const char *fmt, ...)
{
	va_list ap;
	char *why = NULL;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&why, fmt, ap);
	va_end(ap);
	if (r < 0)
		return -ENOMEM;
	pw_frozen_done(f);
	f->error = why;
	return 0;
}

int pw_frozen_load(struct pw_state *state, const char *project, pw_frozen *ret)
{
	pw_plan_record *plans = NULL;
	pw_frozen f = {0};
	size_t n = 0;
	int r;

	if (!state) {
		*ret = f;
		return 0;
	}
	r = pw_state_plans(state, project, &plans, &n);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		r = set_error(&f,
			      "the approved plans could not be read from the state database (%s)",
			      strerror(-r));
		goto out;
	}
	f.rules = calloc(n ? n : 1, sizeof(*f.rules));
	if (!f.rules) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n && !f.error; i++) {
		if (!streq_ptr(plans[i].status, "approved"))
			continue;
		r = pw_modeset_freeze_rule(plans[i].path, &f.rules[f.n]);
		if (r == -ENOMEM)
			goto out;
		if (r < 0)
			r = set_error(&f,
				      "the approved plan '%s' cannot be protected: its path is not "
				      "a plain project path",
				      plans[i].path);
		else
			f.n++;
		if (r < 0)
			goto out;
	}
	r = 0;
out:
	pw_plan_records_free(plans, n);
	if (r < 0) {
		pw_frozen_done(&f);
		return r;
	}
	*ret = f;
	return 0;
}

bool pw_frozen_equal(const pw_frozen *a, const pw_frozen *b)
{
	if (a->n != b->n || !streq_ptr(a->error, b->error))
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (!streq(a->rules[i].pattern, b->rules[i].pattern))
			return false;
	return true;
}
