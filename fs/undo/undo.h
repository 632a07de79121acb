/* SPDX-License-Identifier: MIT */
/*
 * Undo's interface to the FUSE layer (docs/ARCHITECTURE.md, "fs/undo/"): all that
 * fs/ops*.c, switch.c and daemon.c know of the room fs/undo/. Like the control plane's
 * pw_view_fs_ops, it is narrow on purpose: the store of originals, its journal and the
 * change sets (originals.h, journal.h, keep.h) stay inside the room, so a change there
 * does not reach the handlers.
 *
 * Before the first change of a path through the view in the current change set, the
 * handler calls one of the hooks below, after the policy allowed the change and right
 * before the syscall; the hook returns once the original is in the store, its content in
 * place and its row in the store's journal (committed with the next batch), or fails, and
 * then the change must not proceed. A new name has no original, and removing, renaming or
 * writing what the change set made keeps nothing more. But a name a link made names a file
 * that may have been there before: the first change through it keeps that file's original
 * under its other names (pw_undo_keep_node).
 *
 * What is recorded, in the order the changes happen:
 *   - content and metadata changes (write, truncate, setattr, xattrs, fallocate,
 *     copy_file_range): the object as it was (pw_undo_keep_node);
 *   - a name made or removed (create, mknod, mkdir, symlink, link, unlink, rmdir): the
 *     object as it was at that name, absent for a new one, and the parent directory's
 *     times (pw_undo_keep_name);
 *   - a rename: the move itself, and what the destination held (pw_undo_keep_rename).
 * Undo replays the rows backwards, which reverses renames of whole trees without copying
 * them. One row per path per change set, and one per inode for content (a file changed
 * through two names is kept once); a rename forgets the paths beneath both names, since
 * other objects live there afterwards.
 *
 * Never on the path of a read, and cheap after the first change: the inode remembers the
 * change set that covers it (pw_undo_node.kept_cs, node.h), so later writes test one atomic.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy.h"
#include "req.h"

typedef struct pw_undo pw_undo;

typedef struct pw_undo_opts {
	const char *db_path; /* the state database; the store goes beside it */
	const char *project, *mountpoint;
	uint64_t max_file;  /* 0: default */
	int64_t keep_ns;    /* retention by age, 0: default */
	uint64_t max_total; /* retention by size, 0: default */
	uint64_t min_free;  /* free-space floor of the store, 0: default */
	int64_t defer_ns;   /* how long the journal may hold rows, 0: default */
} pw_undo_opts;

/* ---- the room's life (daemon.c) --------------------------------------------------------- */

int pw_undo_new(const pw_undo_opts *o, pw_undo **ret);
void pw_undo_free(pw_undo *k); /* accepts NULL */
/* Hands K to FS (NULL: nothing kept): the hooks below find it there. */
void pw_fs_set_undo(pw_fs *fs, pw_undo *k);
pw_undo *pw_fs_undo(pw_fs *fs);

/*
 * The active policy changed (the view's policy_installed, wired by daemon.c, calls this
 * after every install; K may be NULL: nothing kept). Keeping follows the
 * mode's keep_originals and stops in a mode that writes nothing; a new change set starts
 * when NEW_SET (mount, a switch into a mode that writes). REASON names it.
 */
void pw_undo_policy_changed(pw_undo *k, const pw_policy *p, const char *reason, bool new_set);

/* How many rows of the current change set the full store could not keep ("store-full",
 * issue 27), and when the first was recorded (*RET_SINCE_NS, realtime): undo is incomplete
 * from then on. 0 when everything is kept. For status (switch.c). */
uint64_t pw_undo_store_full(pw_undo *k, int64_t *ret_since_ns); /* K may be NULL */

/* Overlapping writes (fs/overlap.h): O is told of every path first recorded in the current
 * change set. Set once, before the view serves; K and O may be NULL. */
struct pw_overlap;
void pw_undo_set_overlap(pw_undo *k, struct pw_overlap *o);
struct pw_overlap *pw_undo_overlap(pw_undo *k);

/* ---- hooks (fs/ops*.c) ------------------------------------------------------------------ */

/* Before changing N's content or metadata with OP for request R. 0, or -errno: do not
 * change it. */
int pw_undo_keep_node(pw_req *r, pw_inode *n, pw_op op);
/* Before making or removing R's name (its parent open as PFD); its path and its parent's
 * come from R's one build. Returns a token (>= 0) for pw_undo_keep_failed, or -errno. */
int64_t pw_undo_keep_name(pw_req *r, int pfd, pw_op op);
/* Before renaming R's name (parent open as PFD) to NEWNAME in NP (open as NPFD). */
int64_t pw_undo_keep_rename(pw_req *r, int pfd, pw_inode *np, int npfd, const char *newname,
			    unsigned flags);
/* The change the token's row precedes failed: the row goes. */
void pw_undo_keep_failed(pw_fs *fs, int64_t token);
/* After a change through the view succeeded: N (may be NULL) was changed now. Undo tells
 * later changes made outside the view by comparing ctime with this. */
void pw_undo_keep_touched(pw_fs *fs, pw_inode *n);
void pw_undo_keep_touched_ino(pw_fs *fs, dev_t dev, ino_t ino);
