/* SPDX-License-Identifier: MIT */
/*
 * The inodes the view changed whose nodes the kernel then had it forget (a FORGET, or
 * entries the watcher invalidated), each with the time the view last changed it. Undo
 * tells a change made outside the view from the view's own by comparing an inode's ctime
 * with that time (changes.c), which lives in the node (node.h) while the kernel knows the
 * inode; without this, a file the view wrote whose node was forgotten since would read as
 * changed outside, and undo and redo would refuse it.
 *
 * Bounded: two generations of at most PW_UNDO_FORGOTTEN_MAX entries each; when the newer
 * is full the older is dropped. Its own lock: notes come from the node table's free (its
 * write lock held) and from undo, lookups from undo.
 */
#pragma once

#include <stdint.h>

typedef struct pw_undo_forgotten pw_undo_forgotten;

int pw_undo_forgotten_new(pw_undo_forgotten **ret);
void pw_undo_forgotten_free(pw_undo_forgotten *f); /* accepts NULL */

/* Inode DEV:INO born BIRTH_NS (0: unknown) was last changed by the view at CHANGED_NS. */
void pw_undo_forgotten_note(pw_undo_forgotten *f, uint64_t dev, uint64_t ino, int64_t birth_ns,
			    int64_t changed_ns);

/* When the view last changed DEV:INO (born BIRTH_NS), or 0 when it is not remembered. */
int64_t pw_undo_forgotten_get(pw_undo_forgotten *f, uint64_t dev, uint64_t ino, int64_t birth_ns);
