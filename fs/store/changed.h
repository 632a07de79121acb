/* SPDX-License-Identifier: MIT */
/*
 * What the other views of a project changed, read from the state database (the originals'
 * tables, orig_changesets and orig_rows, and the overlaps the audit log recorded) over a
 * read-only connection of its own: the queries of fs/overlap.c, so that every SQL
 * statement lives in fs/store/.
 *
 * A pw_store_changed is one thread's at a time (the caller's lock); each call runs a
 * prepared statement and hands every row to a callback, whose strings are valid only during
 * the call.
 */
#pragma once

#include <stdint.h>

typedef struct pw_store_changed pw_store_changed;

/* Opens DB_PATH read-only (pw_db_open_readonly) for PROJECT, as the view at MOUNTPOINT.
 * Returns 0, or -ENOENT, -EPROTO (no schema, or a statement that does not prepare) or
 * another -errno. */
int pw_store_changed_open(const char *db_path, const char *project, const char *mountpoint,
			  pw_store_changed **ret);
void pw_store_changed_free(pw_store_changed *c);

/* FN(MOUNTPOINT, CHANGESET, U) for the latest change set of every other view of the project
 * that has one. */
void pw_store_changed_sets(pw_store_changed *c,
			   void (*fn)(const char *mountpoint, int64_t changeset, void *u), void *u);

/* FN(ID, PATH, PATH2, U) for each explicit row of CHANGESET after AFTER_ID, in order (PATH2
 * NULL but for a rename). */
void pw_store_changed_rows(pw_store_changed *c, int64_t changeset, int64_t after_id,
			   void (*fn)(int64_t id, const char *path, const char *path2, void *u),
			   void *u);

/* FN(TIME_NS, WRITER, PATH, FIRST, U) for each overlap the audit log recorded in the project
 * with FROM_NS <= TIME_NS < TO_NS, in order: WRITER's view changed PATH while FIRST's
 * change set had changed it. */
void pw_store_changed_overlaps(pw_store_changed *c, int64_t from_ns, int64_t to_ns,
			       void (*fn)(int64_t time_ns, const char *writer, const char *path,
					  const char *first, void *u),
			       void *u);

/* The change set the view at MOUNTPOINT had at T (its latest begun by then), 0 if none. */
int64_t pw_store_changed_set_at(pw_store_changed *c, const char *mountpoint, int64_t t);
