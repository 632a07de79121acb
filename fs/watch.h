/* SPDX-License-Identifier: MIT */
/* watch.c: the backing tree's changes made outside the view, and the view's own
 * changes it expects (which need no invalidation). */
#pragma once

#include "fs_internal.h"

int pw_watch_start(pw_fs *fs);
void pw_watch_stop(pw_fs *fs);
/* Registers a lookup of NAME in PARENT that found ST (pw_inode_learn) and, for a directory
 * new to the table, watches it (the reference just counted keeps it; without the tree
 * lock). Returns the node, or NULL on ENOMEM. */
pw_inode *pw_watch_learn(pw_fs *fs, pw_inode *parent, const char *name, const struct stat *st);

/* What an operation is about to do to a name on the backing tree; recorded before the
 * syscall (so its event cannot come first) and withdrawn when the syscall fails. */
typedef enum pw_expect_kind {
	PW_EXPECT_NAME_ADDED,
	PW_EXPECT_NAME_REMOVED,
	PW_EXPECT_CLOSED_WRITE, /* the view closes a file it wrote: its pages are current */
	PW_EXPECT_TIMES_SET,	/* a SETATTR of both times: the reply brings the new ones */
} pw_expect_kind;
/* The same, for node N under its primary name (no-op for a node without one). */
int pw_watch_expect_node(pw_fs *fs, pw_inode *n, pw_expect_kind kind);
int pw_watch_expect(pw_fs *fs, pw_inode *parent, const char *name, pw_expect_kind kind);
void pw_watch_unexpect(pw_fs *fs, int token);
