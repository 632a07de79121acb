/* SPDX-License-Identifier: MIT */
/* Shared by the ops*.c handlers: request prologue/epilogue and the file handle. */
#pragma once

#include "fs_internal.h"
#include "util.h"

/* Every handler runs with the caller's credentials (creds.c) between BEGIN and LEAVE. */
#define PW_REQ_BEGIN(req)                                                                          \
	pw_fs *fs = fuse_req_userdata(req);                                                        \
	pw_creds_saved _creds;                                                                     \
	do {                                                                                       \
		int _cr = pw_creds_enter(fs, (req), &_creds);                                      \
		if (_cr < 0) {                                                                     \
			fuse_reply_err((req), -_cr);                                               \
			return;                                                                    \
		}                                                                                  \
	} while (0)
#define PW_CREDS_LEAVE() pw_creds_leave(&_creds)
#define PW_REPLY_ERR(req, e)                                                                       \
	do {                                                                                       \
		int _e = (e);                                                                      \
		pw_creds_leave(&_creds);                                                           \
		fuse_reply_err((req), _e);                                                         \
		return;                                                                            \
	} while (0)

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
/* Looks up NAME in PARENT into *E, learning the node. Returns 0, -errno, or
 * PW_LOOKUP_HIDDEN when the name exists but the policy hides it. */
#define PW_LOOKUP_HIDDEN (-100000)
int pw_do_lookup(pw_fs *fs, pw_inode *parent, const char *name, struct fuse_entry_param *e);

void pw_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void pw_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void pw_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void pw_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void pw_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void pw_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void pw_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		  const char *newname, unsigned int flags);
void pw_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void pw_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi);
void pw_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi);
void pw_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void pw_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void pw_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		  struct fuse_file_info *fi);
void pw_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void pw_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi);
void pw_op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in_buf, off_t off,
		     struct fuse_file_info *fi);
void pw_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void pw_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void pw_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
		     struct fuse_file_info *fi);
void pw_op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			   struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			   struct fuse_file_info *fi_out, size_t len, int flags);
void pw_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		 struct fuse_file_info *fi);
void pw_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		    size_t size, int flags);
void pw_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void pw_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void pw_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
