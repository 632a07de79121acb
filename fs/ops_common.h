/* SPDX-License-Identifier: MIT */
/* Shared by the ops*.c handlers: request prologue/epilogue and the file handle. */
#pragma once

#include "check.h"
#include "util.h"

/* Every handler starts a request (req.h: pw_req_begin, the caller's credentials) and answers
 * through it. */

/* A new name on its way (ops_dir.c): the parent open as PFD (closed by pw_new_entry_done),
 * the token of its kept original, and whether the name was looked at (under hide rules)
 * and existed. */
typedef struct pw_new_entry {
	int pfd;
	int64_t kept;
	bool looked, existed;
} pw_new_entry;
int pw_new_entry_begin(pw_req *r, fuse_ino_t parent_ino, const char *name, pw_op op,
		       bool is_dir, pw_new_entry *ne);
void pw_new_entry_done(pw_new_entry *ne);

/* An open file or directory of the view. */
typedef struct pw_fh {
	struct pw_fh *prev, *next; /* fs->handles: freed at unmount if never released */
	int fd;
	pw_inode *node;   /* the node opened (the kernel keeps it while the handle lives) */
	pw_inode *writer; /* files open for writing: the node whose writers this counts */
	bool direct;      /* the backing descriptor has O_DIRECT (writes need aligned memory) */
	/* directories: getdents64 buffer state */
	off_t dir_pos;
	size_t buf_len, buf_off;
	char *buf;
} pw_fh;

/* Links H into, or out of, the list of open handles (ops_file.c). */
void pw_fh_register(pw_fs *fs, pw_fh *h);
void pw_fh_unregister(pw_fs *fs, pw_fh *h);
/* A duplicate of a descriptor open on N (close it), or -ENOENT: what a process's open
 * handle still reaches when no name does, e.g. a file unlinked or replaced while open. */
int pw_fh_dup_for(pw_fs *fs, pw_inode *n);

static inline pw_fh *pw_fh_of(struct fuse_file_info *fi)
{
	return (pw_fh *)(uintptr_t)fi->fh;
}

int pw_stat_node(pw_fs *fs, pw_inode *n, struct stat *st);
void pw_reply_negative(pw_fs *fs, fuse_req_t req, double entry_timeout);
/* Looks up R's name (its parent open at DIRFD, or -1 to open it) into *E, learning the
 * node, under R's policy. Returns 0 or -errno. A name that exists but the policy hides is
 * absent: -ENOENT, with *RET_HIDDEN (may be NULL) set, so a lookup can remember the
 * negative entry it caches for the switch that unhides the name; *RET_HIDDEN is false for
 * every other outcome. (An out-parameter, not a sentinel errno: every result is a real
 * errno or 0.) */
int pw_do_lookup(pw_req *r, int dirfd, struct fuse_entry_param *e, bool *ret_hidden);

/*
 * The handlers, one line each: what they check (the policy op comes from opmap.h), what they
 * keep (keep.h), and their replies. Every change runs with the caller's credentials (BEGIN),
 * is checked before its syscall and kept right before it; a hidden name is absent (ENOENT).
 * New names are decided by the write rules first, then a hidden existing name is ENOENT.
 * Errors are the backing filesystem's errno unless said otherwise. ops.c's own, static:
 *   INIT: negotiates the kernel's features; never the writeback cache (writes are checked).
 *   LOOKUP: no check; an entry, or ENOENT for a hidden name (negative entries cached).
 *   FORGET(_MULTI): drops the kernel's references; frees a node at zero.
 *   GETATTR: no check; ENOENT if hidden; attributes with the write bits the mode allows.
 *   SETATTR: checked as the op of pw_opmap_setattr and kept; the new attributes.
 *   READLINK: no check; the target as stored (never followed by the daemon).
 *   ACCESS: W_OK decided by the mode (EROFS/EACCES), the rest by the backing filesystem.
 *   STATFS: no check; the backing filesystem's.
 */
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
/* CREATE: check the new name, keep it, create and open; entry and handle, or errno. */
void pw_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		  struct fuse_file_info *fi);
/* OPEN: ENOENT if hidden; write flags checked (O_TRUNC: kept first); a page-caching handle. */
void pw_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* READ: no check, but ENOENT for a node hidden since it was opened; the data (spliced). */
void pw_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi);
/* WRITE: checked under the mode in force now, kept at the first change, suid killed; count. */
void pw_op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in_buf, off_t off,
		     struct fuse_file_info *fi);
/* RELEASE: closes and frees the handle (writer counts drop); always 0. */
void pw_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* FSYNC: no check; fsync's errno. */
void pw_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
/* FALLOCATE: checked and kept like a write, caller's credentials; 0, or errno. */
void pw_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
		     struct fuse_file_info *fi);
/* COPY_FILE_RANGE: the destination checked and kept like a write; the count, or errno. */
void pw_op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			   struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			   struct fuse_file_info *fi_out, size_t len, int flags);
/* LSEEK: no check; the offset (SEEK_DATA/SEEK_HOLE of the backing file), or errno. */
void pw_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		 struct fuse_file_info *fi);
/* SETXATTR/REMOVEXATTR: checked and kept; the "no xattrs" mark reset; 0, or errno. */
void pw_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		    size_t size, int flags);
/* GETXATTR/LISTXATTR: no check; ENOENT if hidden; no syscall for a node without xattrs. */
void pw_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void pw_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void pw_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
