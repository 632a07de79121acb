/* SPDX-License-Identifier: MIT */
/*
 * The records of the store of originals: an object as it was, a row of a change set, and
 * both as read back. Shared by the undo room's store (fs/undo/originals.h) and its journal
 * (journal.h), which writes them to a file first, and by the SQL that writes them to the
 * database and reads them back (orig_sql.h): the schema's own types, so they live in
 * fs/store/ with it.
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

/* A change set as recorded. */
typedef struct pw_undo_orig_changeset {
	int64_t id, started_ns;
	const char *reason, *name, *mode; /* NULL when not set */
	const char *mountpoint;		  /* the view's that started it, or NULL */
	const char *undoes;		  /* an undo's or redo's: JSON [row id, ...], or NULL */
	int64_t redone_by;		  /* an undo's: the redo change set that reversed it */
} pw_undo_orig_changeset;

/* A row as recorded (pw_undo_orig_row's fields, and when). */
typedef struct pw_undo_orig_rec {
	int64_t id, changeset, pid, time_ns;
	pw_undo_orig_action action;
	bool exchange, implicit;
	const char *path, *path2, *op, *comm, *mode_name; /* path never NULL */
	const char *thread;				  /* NULL: not recorded */
	uint64_t src_dev, src_ino;
	pw_undo_orig_object o; /* o.target, o.xattrs and o.not_kept are borrowed too */
} pw_undo_orig_rec;
