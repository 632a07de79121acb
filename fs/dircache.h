/* SPDX-License-Identifier: MIT */
/* dircache.c: directory descriptors kept between requests, used only while no directory
 * of the tree can have moved since they were resolved. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "fs_internal.h"

/* A directory opened for one request (pw_dir_open): FD is valid until pw_dir_close. */
typedef struct pw_dir_ref {
	pw_fs *fs;
	int fd;	  /* O_PATH descriptor of the directory, or -1 */
	int slot; /* the cache slot it is lent from; -1: the request owns FD; -2: the root's */
} pw_dir_ref;
#define PW_DIR_REF_INIT                                                                            \
	{                                                                                          \
		.fs = NULL, .fd = -1, .slot = -1                                                   \
	}

/* Makes fs->dircache, and turns the cache on when the project's filesystem reports every
 * local change through inotify (a local disk filesystem or tmpfs: dircache.c) and the view
 * watches its tree. 0 or -ENOMEM; a cache that cannot be had leaves the view as it was. */
int pw_dircache_start(pw_fs *fs);
/* Closes every kept descriptor and the guard; frees fs->dircache (accepts none made). */
void pw_dircache_free(pw_fs *fs);
/* A directory node has just been resolved as FD (beneath the root, its identity checked:
 * watch.c, beside its watch): puts a guard on it, so that its move, removal or change of
 * permissions is seen before any kept descriptor is used again. Returns the guard's watch,
 * for the node's guard_wd (inode.c removes it with the node), or -1 (then that directory and
 * those below it are resolved every time). */
int pw_dircache_add_guard(pw_fs *fs, int fd);
/* Removes guard watch WD again (the node it was for changed meanwhile). */
void pw_dircache_drop_guard(pw_fs *fs, int wd);
/* Opens directory node N (O_PATH) for this request, as pw_open_node(fs, N, O_PATH) does:
 * the same object, checked the same way, or a kept descriptor of it while that is known to
 * be equivalent. Returns the descriptor (also in RET->fd) or -errno. */
int pw_dir_open(pw_fs *fs, pw_inode *n, pw_dir_ref *ret);
/* Gives the descriptor back (closes it when the request owned it). Idempotent. */
void pw_dir_close(pw_dir_ref *r);
