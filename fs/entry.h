/* SPDX-License-Identifier: MIT */
/* entry.c: the entries the view hands the kernel, and how long it may keep them. */
#pragma once

#include "fs_internal.h"

/* E for node N with attributes ST, which the kernel may keep TIMEOUT seconds (the caller's
 * pw_watch_timeout: as long as the watcher sees the changes to N and its directory). */
void pw_fill_entry(pw_fs *fs, struct fuse_entry_param *e, pw_inode *n, const struct stat *st,
		   double timeout);

/* The lifetime of entries the kernel may cache in the directory open at DIRFD (or node DIR):
 * TIMEOUT, or 0 under allow_other when not every user may search it (entry.c). */
double pw_entry_timeout_in(pw_fs *fs, int dirfd, double timeout);
double pw_entry_timeout_of(pw_fs *fs, pw_inode *dir, double timeout);
/* E's entry lifetime, made no longer than T. */
void pw_entry_cap(struct fuse_entry_param *e, double t);
/* Is NAME in DIRFD, of MODE, a special file (FIFO, socket, device) with an access ACL in an
 * allow_other view, whose entries are never cached and whose lookups are checked per caller
 * (the kernel's own check does not see ACLs)? */
bool pw_special_uncached(pw_fs *fs, int dirfd, const char *name, mode_t mode);
bool pw_dir_searchable_by_all(int dirfd);

/* Answers REQ with a negative entry the kernel may keep ENTRY_TIMEOUT seconds. */
void pw_reply_negative(pw_fs *fs, fuse_req_t req, double entry_timeout);
