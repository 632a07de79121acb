/* SPDX-License-Identifier: MIT */
/* ops_dir.c: directory operations and the ones that change names. */
#pragma once

#include "dircache.h"
#include "req.h"

/* A new name on its way (ops_dir.c): the parent open as PFD (closed by pw_new_entry_done),
 * the token of its kept original, and whether the name was looked at (under hide rules)
 * and existed. */
typedef struct pw_new_entry {
	int pfd;
	pw_dir_ref dir; /* where PFD comes from (dircache.h) */
	int64_t kept;
	bool looked, existed;
} pw_new_entry;
int pw_new_entry_begin(pw_req *r, fuse_ino_t parent_ino, const char *name, pw_op op, bool is_dir,
		       pw_new_entry *ne);
void pw_new_entry_done(pw_new_entry *ne);

/* MKNOD/MKDIR/SYMLINK: check the new name, keep it (absent), make it; entry, or errno. */
void pw_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void pw_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void pw_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
/* LINK: check every known name of INO and the new name, keep the new name; entry, or errno. */
void pw_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
/* UNLINK/RMDIR: check the name, keep what it held (a link, not a copy, where it can); 0. */
void pw_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void pw_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
/* RENAME(2): check both names and a moved directory's tree; keep the move and what it replaces. */
void pw_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		  const char *newname, unsigned int flags);
/* OPENDIR: no check; a handle, or ENOSYS so the kernel keeps listings (root, no allow_other). */
void pw_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* READDIR(PLUS): no check; the entries but hidden names (PLUS: with their attributes). */
void pw_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi);
void pw_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi);
/* RELEASEDIR: closes and frees the handle; always 0. */
void pw_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* FSYNCDIR: no check (durability of what was checked); fsync's errno. */
void pw_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
