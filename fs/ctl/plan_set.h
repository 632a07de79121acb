/* SPDX-License-Identifier: MIT */
/*
 * The plans of a view as the plan methods show them (ctl/plan_methods.c): each plan file of
 * the folder, read from the backing directory beneath the project root without following
 * symlinks and parsed (policy/plan.h), with what the state database holds for it (approval,
 * the tasks done). Read afresh on every call: nothing is cached, so a plan edited in the view,
 * outside it or in another mount of the project is never shown stale.
 *
 * Status, as shown: a plan the database does not hold as approved is a "draft"; an approved
 * one is "approved" until a task is done, "in_progress" while some are, "done" when all are.
 * The active plan is the most recently approved one that is not done. Internal to fs/ctl/.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plan.h"
#include "store/sha256.h"
#include "store/state.h"
#include "view.h"

typedef struct pw_plan_info {
	char *name, *path;
	pw_plan *doc;		  /* NULL when the file cannot be read */
	int read_err;		  /* why not (-errno) */
	char hash[PW_SHA256_HEX]; /* of the file as it is now */
	pw_plan_record rec;	  /* what the database holds (rec.path NULL: nothing) */
	pw_task_record *done;
	size_t n_done;
} pw_plan_info;

typedef struct pw_plan_set {
	char *dir;
	pw_plan_info *v;
	size_t n, cap;
} pw_plan_set;

/* Every plan: the folder's NAME.md files, and those the database knows (whose file may be
 * gone, or in a folder `plans:` moved away from), sorted by name. 0 or -errno. */
int pw_plan_set_load(pw_view *v, pw_plan_set *s);
void pw_plan_set_done(pw_plan_set *s);
/* The most recently approved plan that is not done, or NULL. */
const pw_plan_info *pw_plan_set_active(const pw_plan_set *s);
/* The plan NAME names (its stem, file name or project path), or NULL. */
const pw_plan_info *pw_plan_set_find(const pw_plan_set *s, const char *name);

bool pw_plan_info_approved(const pw_plan_info *p);
/* Task N (1-based) as marked done, or NULL. */
const pw_task_record *pw_plan_info_task_done(const pw_plan_info *p, int64_t n);
size_t pw_plan_info_total(const pw_plan_info *p);
size_t pw_plan_info_done_count(const pw_plan_info *p);
/* The first task not done (1-based), 0 when none is left. */
size_t pw_plan_info_next(const pw_plan_info *p);
const char *pw_plan_info_status(const pw_plan_info *p); /* draft, approved, in_progress, done */

/* The backing files. The project root as an O_PATH descriptor, or -errno. */
int pw_plans_open_root(pw_view *v);
/* Reads at most PW_PLAN_FILE_MAX bytes of PATH beneath ROOT (NUL-terminated); *ret_total is
 * the file's size. 0 or -errno (-EINVAL: not a regular file). */
int pw_plans_read(int root, const char *path, char **ret, size_t *ret_len, size_t *ret_total);
void pw_plans_hash(const char *buf, size_t len, char out[PW_SHA256_HEX]);
/*
 * Replaces PATH with TEXT the way an editor saves: a temporary file beside it (same owner
 * and permissions), written, synced, renamed over it. The daemon writes the backing
 * directory, not the view, so an approved plan's protection does not stop it; the watcher
 * tells the kernel the file changed. 0 or -errno.
 */
int pw_plans_replace_file(int root, const char *path, const char *text);
