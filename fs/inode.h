/* SPDX-License-Identifier: MIT */
/* inode.c: the table of nodes the kernel knows, and their names (fs_internal.h
 * explains why names and not descriptors). */
#pragma once

#include "fs_internal.h"

int pw_inode_table_init(pw_fs *fs);
void pw_inode_table_free(pw_fs *fs);
pw_inode *pw_inode_get(pw_fs *fs, fuse_ino_t ino);
fuse_ino_t pw_inode_id(pw_fs *fs, pw_inode *n);
/* Registers a lookup of NAME in PARENT that found ST: finds or creates the node, adds or
 * refreshes its name, and counts one kernel reference. Returns NULL on ENOMEM. Takes the
 * tree lock. */
pw_inode *pw_inode_learn(pw_fs *fs, pw_inode *parent, const char *name, const struct stat *st,
			 bool *ret_new_dir);
void pw_inode_forget(pw_fs *fs, pw_inode *n, uint64_t nlookup);
/* FORGET_MULTI: every node of the batch under one lock; then, if the table has halved since
 * its high-water mark, hands the freed memory back to the system. */
void pw_inode_forget_batch(pw_fs *fs, const struct fuse_forget_data *forgets, size_t count);
/* Name bookkeeping after successful mutations (takes the tree lock). */
void pw_inode_unlinked(pw_fs *fs, pw_inode *parent, const char *name, dev_t dev, ino_t ino);
void pw_inode_renamed(pw_fs *fs, pw_inode *oldparent, const char *oldname, pw_inode *newparent,
		      const char *newname, dev_t dev, ino_t ino, bool exchanged, dev_t dev2,
		      ino_t ino2);
pw_inode *pw_inode_find_locked(pw_fs *fs, dev_t dev, ino_t ino);
pw_inode *pw_inode_by_wd_locked(pw_fs *fs, int wd);
void pw_inode_set_wd_locked(pw_fs *fs, pw_inode *n, int wd);
/* Calls FN for every node (tree lock held for reading). */
void pw_inode_foreach(pw_fs *fs, void (*fn)(pw_fs *fs, pw_inode *n, void *u), void *u);

/* An extended attribute of N changed (through the view or outside it): the "none" mark
 * (ops_xattr.c) no longer holds. */
void pw_xattr_changed(pw_inode *n);
