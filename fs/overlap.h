/* SPDX-License-Identifier: MIT */
/*
 * Overlapping writes: when this view changes a path that another live view of the same
 * project changed in its current change set (two runs, or two mounts of one project), the
 * writer is told. The write itself is not refused: two agents may have good reasons to
 * touch one file, but neither should overwrite the other's work without a word.
 *
 * What each view changed is in the shared originals store: the rows of its change sets
 * (store/originals.h; one row per path per change set), in the state database every view
 * of a project shares. The current change set of another view is its mountpoint's latest
 * change set; it is live while a piworkfs view is mounted there (/proc/self/mountinfo).
 *
 * Cost: the FUSE layer calls pw_overlap_note() only where the originals store records the
 * first change of a path in the current change set (fs/keep.c), and it only queues the
 * path. A thread of this file does the rest with its own read-only connection to the
 * database, outside the store's lock: it follows the other views' current change sets
 * incrementally (rows after the last id it read), so each check is a lookup in memory. A
 * row another view has not committed yet (the store commits in batches, PW_UNDO_ORIG_DEFER_MS)
 * is caught by one second look a moment later.
 *
 * On an overlap the thread submits an audit event (reason PW_REASON_OVERLAP, errno 0, path2
 * the other view's mountpoint), which the audit log records whether or not allowed writes
 * are logged and which the control server sends as the `overlap` notification to the
 * subscribers of `denied` (the agent socket's, filtered by sandbox as denials are).
 */
#pragma once

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

struct pw_audit;

typedef struct pw_overlap pw_overlap;

typedef struct pw_overlap_opts {
	const char *db_path;	/* the state database the views of the project share */
	const char *project;	/* real path of the project */
	const char *mountpoint; /* ours (other views are those at other mountpoints) */
	struct pw_audit *audit; /* where overlaps are reported; NULL: nowhere (lookups only) */
} pw_overlap_opts;

/* Starts the checking thread. Returns 0 with *ret, or -errno (no database: -ENOENT). */
int pw_overlap_new(const pw_overlap_opts *o, pw_overlap **ret);
void pw_overlap_free(pw_overlap *o); /* accepts NULL; stops the thread */

/*
 * The FUSE layer's hook: PATH (project-relative) was changed for the first time in this
 * view's current change set, by PID in MODE. Queues it and returns; never fails (a full
 * queue drops the check). O may be NULL.
 */
void pw_overlap_note(pw_overlap *o, const char *path, pid_t pid, const char *mode);

/*
 * The other live views of the project whose current change set changed PATH, as a JSON
 * array of {"mountpoint", "changeset"} ([] when none; NULL on allocation failure). Reads
 * the database now (the `changes` listing marks such paths).
 */
json_t *pw_overlap_lookup(pw_overlap *o, const char *path);

/* Adds to "also_changed_by" (made [] where missing) of each object of CHANGES, the current
 * change set's listing (fs/undo/changes.c), the live views pw_overlap_lookup names for its
 * "path", and its "to" for a rename: {"mountpoint", "changeset", "run" (a run's view)}.
 * O may be NULL: nothing is set. */
void pw_overlap_mark(pw_overlap *o, json_t *changes);

/*
 * The same from history, for a change set of any view: the overlaps the audit log recorded
 * (report() above, in whichever view wrote second) between FROM_NS and TO_NS, the change
 * set's life, in which the view at MOUNTPOINT was either side. Each marks the changes of
 * CHANGES at its path with the other view and the change set it had then. So a listing
 * says "also changed by" for both writers, after either view is gone, and for a change set
 * that is no longer current. Every change of CHANGES has "also_changed_by" afterwards ([]
 * when none).
 */
void pw_overlap_mark_recorded(pw_overlap *o, json_t *changes, const char *mountpoint,
			      int64_t from_ns, int64_t to_ns);
