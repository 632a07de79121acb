/* SPDX-License-Identifier: MIT */
/*
 * Plan files: the plan mode's work product (README "Plans"). Pure: text in, facts out.
 *
 * A plan is one Markdown file NAME.md directly in the plans folder (docs/plans by default,
 * `plans:` in config.yaml; mode.h), with YAML frontmatter:
 *
 *   ---
 *   title: Cache the parsed config
 *   status: draft                  # draft | approved (in_progress and done are progress)
 *   created: 2026-12-02
 *   updated: 2026-12-02
 *   approved: 2026-12-02T19:40:00Z # written by `piworkfs plan approve`
 *   ---
 *   ...
 *   ## Tasks
 *   - [ ] Add the cache
 *   - [ ] Invalidate it on reload
 *
 * Its tasks are the top-level (unindented) unchecked items `- [ ] text` (`*` or `+` for
 * `-` too) of the first section whose heading is "Tasks" (any level, any case), down to the
 * next heading of the same or a higher level; when no such section holds one, the last
 * checklist of the body (a run of top-level list items with at least one unchecked item,
 * ended by a heading or an unindented line that is no list item). Checked items `- [x]` are
 * not tasks: the plan's progress is kept by the daemon (fs/store/state.h), never in the file.
 * Fenced code blocks are skipped.
 *
 * Parsing never fails on bad input: a missing or broken frontmatter, a missing title, an
 * unknown status, a file over PW_PLAN_FILE_MAX bytes or with more than PW_PLAN_TASKS_MAX
 * tasks is listed in `problems` (and such a plan cannot be approved).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "pw_limits.h"

typedef enum pw_plan_tasks_from {
	PW_PLAN_TASKS_NONE,	 /* the plan has no task */
	PW_PLAN_TASKS_SECTION,	 /* the "Tasks" section */
	PW_PLAN_TASKS_CHECKLIST, /* the body's last checklist */
} pw_plan_tasks_from;

typedef struct pw_plan_task {
	unsigned line; /* 1-based, in the file */
	char *text;
} pw_plan_task;

typedef struct pw_plan {
	char *title, *status, *created, *updated, *approved; /* NULL when absent */
	pw_plan_task *tasks;
	size_t n_tasks;
	pw_plan_tasks_from tasks_from;
	char **problems; /* one line each: "line 3: ..." */
	size_t n_problems;
} pw_plan;

/* Parses LEN bytes of a plan file (TOTAL: the file's real size, for the size bound). Returns
 * 0 with *ret, or -ENOMEM. Bad input becomes problems. */
int pw_plan_parse(const char *buf, size_t len, size_t total, pw_plan **ret);
void pw_plan_free(pw_plan *p); /* accepts NULL */
static inline void pw_plan_freep(pw_plan **p)
{
	pw_plan_free(*p);
}
#define _cleanup_plan_ __attribute__((cleanup(pw_plan_freep)))

/* "section", "checklist" or "none". */
const char *pw_plan_tasks_from_name(pw_plan_tasks_from f);

/*
 * BUF with its frontmatter's `status:` set to STATUS and `approved:` to APPROVED (NULL:
 * the line is removed) and `updated:` to UPDATED (NULL: left alone); missing keys are added
 * before the closing '---'. Everything else stays byte for byte. Returns 0 with a malloc'd
 * NUL-terminated *ret, -EBADMSG when BUF has no frontmatter, -ENOMEM.
 */
int pw_plan_set_fields(const char *buf, size_t len, const char *status, const char *approved,
		       const char *updated, char **ret);

/* A plan's name: [A-Za-z0-9][A-Za-z0-9._-]*, at most PW_PLAN_NAME_MAX bytes, no "..". */
bool pw_plan_name_is_valid(const char *name);

/*
 * The project-relative path of plan NAME in PLANS_DIR: NAME may be the stem ("cache"), the
 * file name ("cache.md") or its project path ("docs/plans/cache.md"). Returns 0 with a
 * malloc'd *ret_path (and, when ret_name is not NULL, the stem in *ret_name), -EINVAL for a
 * name that is no plan's, -ENOMEM.
 */
int pw_plan_path(const char *plans_dir, const char *name, char **ret_path, char **ret_name);

/* Is PATH (project-relative, normal) a plan file of PLANS_DIR: DIR/NAME.md with a valid
 * NAME? */
bool pw_plan_is_plan_path(const char *plans_dir, const char *path);
