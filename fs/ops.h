/* SPDX-License-Identifier: MIT */
/* ops.c: entry and attribute operations, and the lookup every new name's reply shares. */
#pragma once

#include "req.h"

int pw_stat_node(pw_fs *fs, pw_inode *n, struct stat *st);
/* Looks up R's name (its parent open at DIRFD, or -1 to open it) into *E, learning the
 * node, under R's policy. Returns 0 or -errno. A name that exists but the policy hides is
 * absent: -ENOENT, with *RET_HIDDEN (may be NULL) set, so a lookup can remember the
 * negative entry it caches for the switch that unhides the name; *RET_HIDDEN is false for
 * every other outcome. (An out-parameter, not a sentinel errno: every result is a real
 * errno or 0.) MADE: the request has just made the name's object (pw_inode_learn). */
int pw_do_lookup(pw_req *r, int dirfd, bool made, struct fuse_entry_param *e, bool *ret_hidden);

/* The handlers (optable.h says what each checks and answers). */
void pw_op_init(void *userdata, struct fuse_conn_info *conn);
void pw_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void pw_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void pw_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void pw_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void pw_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
		   struct fuse_file_info *fi);
void pw_op_readlink(fuse_req_t req, fuse_ino_t ino);
void pw_op_access(fuse_req_t req, fuse_ino_t ino, int mask);
void pw_op_statfs(fuse_req_t req, fuse_ino_t ino);
