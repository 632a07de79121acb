/* SPDX-License-Identifier: MIT */
/* ops_file.c: file operations. */
#pragma once

#include "fs_internal.h"

/* CREATE: check the new name, keep it, create and open; entry and handle, or errno. */
void pw_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		  struct fuse_file_info *fi);
/* OPEN: ENOENT if hidden; write flags checked (O_TRUNC: kept first); a page-caching handle. */
void pw_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* READ: no check, but ENOENT for a node hidden since it was opened; the data (spliced). */
void pw_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
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
void pw_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi);
