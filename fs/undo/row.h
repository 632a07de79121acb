/* SPDX-License-Identifier: MIT */
/*
 * The records of the store of originals: an object as it was and a row of a change set.
 * Shared by the store (originals.h), which writes them to the database, and its journal
 * (journal.h), which writes them to a file first; a header of its own so that neither of
 * the two includes the other.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "store/sha256.h"

/* An object as it was: the fields of lstat, the content's blob, a symlink's target and
 * the extended attributes. */
typedef struct pw_undo_orig_object {
	bool present;
	mode_t mode; /* st_mode, type bits included */
	uid_t uid;
	gid_t gid;
	int64_t atime_ns, mtime_ns, ctime_ns;
	uint64_t size, dev, ino, nlink;
	char blob[PW_SHA256_HEX]; /* "" when the content is not kept */
	char *target;		  /* symlinks */
	void *xattrs;		  /* [u32 name length][name][u32 value length][value]... */
	size_t xattrs_len;
	const char *not_kept; /* why a regular file's content is missing: "too-big",
			       * "unreadable", "store-full" (the cap or the floor) */
} pw_undo_orig_object;

typedef enum pw_undo_orig_action {
	PW_UNDO_ORIG_KEEP, /* PATH was OBJ before the change set changed it (!present: created) */
	PW_UNDO_ORIG_MOVE, /* PATH was renamed to PATH2; OBJ is what PATH2 held and lost, if kept */
} pw_undo_orig_action;

typedef struct pw_undo_orig_row {
	int64_t changeset;
	pw_undo_orig_action action;
	const char *path, *path2;
	bool exchange;		   /* MOVE with RENAME_EXCHANGE */
	bool implicit;		   /* a parent directory, kept for its times only */
	uint64_t src_dev, src_ino; /* MOVE: the object moved */
	const pw_undo_orig_object *obj;
	const char *op, *comm, *mode;
	const char *thread; /* the asking thread's name when not the program's (comm), or NULL */
	pid_t pid;
} pw_undo_orig_row;
