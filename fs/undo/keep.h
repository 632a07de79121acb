/* SPDX-License-Identifier: MIT */
/*
 * Inside the undo room: what the changes methods (changes.c) ask of the hooks' side
 * (keep.c), beside the FUSE layer's interface (undo.h). Undo changes the backing tree
 * itself, under the store's lock, and records what it changes in a change set of its own,
 * as the hooks would.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "originals.h"
#include "undo.h"

/* Starts a change set (a checkpoint, NAME may be NULL; or REASON "undo"). */
int pw_undo_keep_begin(pw_undo *k, const char *reason, const char *name, int64_t *ret_id);
int64_t pw_undo_keep_current(pw_undo *k);
const char *pw_undo_keep_project(const pw_undo *k);
const char *pw_undo_keep_mountpoint(const pw_undo *k); /* this view's (its change sets') */
pw_undo_orig_store *pw_undo_keep_store(pw_undo *k);
/* For undo, which changes the backing tree itself: records PATH's original (absent or
 * present, content kept) and its parent's times in the current change set as the FUSE
 * hooks would, under the store lock held by the caller (pw_undo_orig_lock). ROOT_FD is the
 * project root. REMOVES: what is at PATH is about to be removed or replaced; a directory
 * then gets a row of its own after the rows beneath it, as an rmdir through the view does,
 * so that a redo makes it before what goes back into it. */
int pw_undo_keep_path_locked(pw_undo *k, int root_fd, const char *path, const char *op,
			     bool removes);
/* Records the rename FROM -> TO (or their exchange) that undo is about to make, and both
 * parents' times, as pw_undo_keep_rename does for a rename through the view. */
int pw_undo_keep_move_locked(pw_undo *k, int root_fd, const char *from, const char *to,
			     bool exchange);
/* When the view last changed inode DEV:INO (born BIRTH_NS, 0: unknown) after the kernel had
 * it forget its node, or an inode undo changed that the view never knew; 0: not known. */
int64_t pw_undo_keep_forgotten(pw_undo *k, dev_t dev, ino_t ino, int64_t birth_ns);
/* For undo of an unlink of a file that had other names: RET_PATH gets another name of inode
 * DEV:INO in the project than NOT_PATH (a regular file), found in the view's table or by a
 * bounded walk of the backing tree. 0, -ENOENT (none found) or -errno. */
int pw_undo_keep_other_name(pw_undo *k, dev_t dev, ino_t ino, const char *not_path,
			    char ret_path[PW_PATH_MAX]);
