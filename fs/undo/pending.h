/* SPDX-License-Identifier: MIT */
/*
 * What an undo comes back to once every row is replayed (changes.c): the directories whose
 * times it sets last, the restored files it makes hard links again. Each is remembered by
 * path when its row is replayed, and the rows replayed after it (older changes) may rename
 * it again: a directory renamed by the agent is renamed back after its contents went back
 * in. So each path is carried along the renames the replay makes afterwards, and dropped
 * when a later row replaces what is there. Paths only: nothing here touches the tree.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "store/orig_row.h"

typedef struct pw_undo_pending {
	char *path;		      /* NULL: dropped (replaced since, or out of memory) */
	const pw_undo_orig_object *o; /* the row's object, alive as long as the undo */
	/* A new file the undo made there (not the kept inode, whatever its number): its
	 * device and inode, else 0. */
	uint64_t made_dev, made_ino;
} pw_undo_pending;

typedef struct pw_undo_pendings {
	pw_undo_pending *v;
	size_t n, cap;
} pw_undo_pendings;

/* Remembers PATH with its row's object O (MADE, or NULL: the new file the undo made there).
 * 0 or -ENOMEM. */
int pw_undo_pending_push(pw_undo_pendings *l, const char *path, const pw_undo_orig_object *o,
			 const struct stat *made);

/* The replay puts back at PATH (and, BENEATH, beneath it) what was there before: what was
 * remembered there no longer describes what ends there. */
void pw_undo_pending_drop(pw_undo_pendings *l, const char *path, bool beneath);

/* The replay renames TO back to FROM (or exchanges them again): what is remembered beneath
 * one follows its object to the other; what is beneath FROM, which the rename replaces, is
 * dropped. */
void pw_undo_pending_moved(pw_undo_pendings *l, const char *from, const char *to, bool exchange);

void pw_undo_pending_done(pw_undo_pendings *l);
