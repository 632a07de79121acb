/* SPDX-License-Identifier: MIT */
/* ops_xattr.c: extended attributes. */
#pragma once

#include "fs_internal.h"

/* SETXATTR/REMOVEXATTR: checked and kept; the "no xattrs" mark reset; 0, or errno. */
void pw_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		    size_t size, int flags);
/* GETXATTR/LISTXATTR: no check; ENOENT if hidden; no syscall for a node without xattrs. */
void pw_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void pw_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void pw_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
