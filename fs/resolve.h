/* SPDX-License-Identifier: MIT */
/* resolve.c: from a node to its project path and its backing object, never leaving
 * the project. */
#pragma once

#include "fs_internal.h"

/*
 * A project-relative path built from a node's names. A path shorter than PW_PATH_MAX (every
 * ordinary one) is written into the caller's stack buffer, so building it allocates
 * nothing; a longer one, up to PW_TREE_PATH_MAX, goes to the heap. Declare one with
 * PW_PATH_DECLARE(p), read p.s after a successful build; it is freed at scope exit. A
 * pw_path may be built again (the old heap copy is freed first). Never copy one.
 */
typedef struct pw_path {
	char *s;   /* the path: buf, a heap string, or NULL before a successful build */
	char *buf; /* the caller's PW_PATH_MAX bytes */
} pw_path;
void pw_path_done(pw_path *p);
#define PW_PATH_DECLARE(var)                                                                       \
	char var##_buf_[PW_PATH_MAX];                                                              \
	_cleanup_(pw_path_done) pw_path var = {.s = NULL, .buf = var##_buf_}
/* The project-relative path of N (primary name) into RET. Returns 0, -ENOENT (unlinked),
 * -ENAMETOOLONG (PW_TREE_PATH_MAX or more), -ENOMEM. */
int pw_node_path(pw_fs *fs, pw_inode *n, pw_path *ret);
int pw_node_path_locked(pw_fs *fs, pw_inode *n, pw_path *ret);
/* Path of NAME inside PARENT (the _locked form with the tree lock held). */
int pw_child_path(pw_fs *fs, pw_inode *parent, const char *name, pw_path *ret);
int pw_child_path_locked(pw_fs *fs, pw_inode *parent, const char *name, pw_path *ret);
/* Opens N's backing object beneath the root: O_PATH|O_NOFOLLOW when FLAGS is O_PATH, else
 * with FLAGS (never following symlinks). Returns a descriptor or -errno. */
int pw_open_node(pw_fs *fs, pw_inode *n, int flags);
/* The same, with the object's attributes as the identity check read them in *RET_ST (of the
 * root too). */
int pw_open_node_stat(pw_fs *fs, pw_inode *n, int flags, struct stat *ret_st);
/* Opens PATH (project-relative, normal, shorter than PW_TREE_PATH_MAX) beneath the root,
 * never following a symlink; a path of PATH_MAX bytes or more is resolved in steps. */
int pw_openat_beneath(pw_fs *fs, const char *path, int flags, mode_t mode);
bool pw_name_valid(const char *name);
