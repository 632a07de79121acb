/* SPDX-License-Identifier: MIT */
/*
 * Extended attributes, passed through where the backing filesystem supports them. The
 * node is opened O_PATH and addressed as /proc/self/fd/N, since the f*xattr calls do not
 * accept O_PATH descriptors; the magic link names exactly the object we resolved.
 *
 * Why a cache: `ls -l` asks for two attributes of every file (security.selinux and
 * system.posix_acl_access), and a FUSE filesystem can only stop the kernel asking by
 * dropping xattr support altogether. Most files have no attributes at all, so we remember
 * that per inode (one listxattr) and answer ENODATA from memory afterwards. The mark is
 * cleared by setxattr/removexattr through the view and by IN_ATTRIB events from outside
 * (watch.c), which is what any attribute change made directly to the backing tree sends.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/xattr.h>

#include "check.h"
#include "inode.h"
#include "undo/undo.h"
#include "ops_xattr.h"

/* Opens node INO O_PATH into *RET_FD and names it in PROC: 0, or -errno after answering R's
 * request with it. */
static int open_proc(pw_req *r, fuse_ino_t ino, int *ret_fd, char proc[64])
{
	int fd = pw_open_node(r->fs, pw_inode_get(r->fs, ino), O_PATH);
	if (fd < 0) {
		pw_req_reply_err(r, -fd);
		return fd;
	}
	snprintf(proc, 64, "/proc/self/fd/%d", fd);
	*ret_fd = fd;
	return 0;
}

/* The buffer for an answer of SIZE bytes (none for a size query): 0, or -ENOMEM after
 * answering R's request with it. */
static int reply_buffer(pw_req *r, size_t size, char **ret)
{
	*ret = size ? malloc(size) : NULL;
	if (size && !*ret) {
		pw_req_reply_err(r, ENOMEM);
		return -ENOMEM;
	}
	return 0;
}

/* Marks N as having no attributes, unless a change was recorded since EPOCH was read. */
static void mark_no_xattrs(pw_inode *n, unsigned epoch)
{
	atomic_store(&n->xattr_state, PW_XATTR_NONE);
	if (atomic_load(&n->xattr_epoch) != epoch)
		atomic_store(&n->xattr_state, PW_XATTR_UNKNOWN);
}

/* Answers R's request with LEN bytes of BUF, the size alone for a SIZE 0 query, or the errno
 * of a call that answered LEN < 0 (read before the credentials are left). */
static void reply_sized(pw_req *r, size_t size, ssize_t len, const char *buf)
{
	int saved = errno;
	pw_req_leave(r);
	if (len < 0)
		fuse_reply_err(r->req, saved);
	else if (size == 0)
		fuse_reply_xattr(r->req, (size_t)len);
	else
		fuse_reply_buf(r->req, buf, (size_t)len);
}

void pw_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	PW_REQ(r);
	pw_req_init(&r, req);
	pw_fs *fs = r.fs;
	pw_inode *n = pw_inode_get(fs, ino);
	if (pw_node_hidden(&r, n)) { /* through a descriptor held open */
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (atomic_load(&n->xattr_state) == PW_XATTR_NONE) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	if (pw_req_enter(&r) < 0)
		return;
	_cleanup_close_ int fd = -1;
	char proc[64];
	if (open_proc(&r, ino, &fd, proc) < 0)
		return;
	unsigned epoch = atomic_load(&n->xattr_epoch);
	ssize_t total = listxattr(proc, NULL, 0);
	if (total == 0) {
		mark_no_xattrs(n, epoch);
		pw_req_reply_err(&r, ENODATA);
		return;
	}
	_cleanup_free_ char *buf = NULL;
	if (reply_buffer(&r, size, &buf) < 0)
		return;
	reply_sized(&r, size, getxattr(proc, name, buf, size), buf);
}

void pw_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	PW_REQ(r);
	_cleanup_close_ int fd = -1;
	char proc[64];
	_cleanup_free_ char *buf = NULL;
	if (!pw_req_begin_node(&r, req, ino) || open_proc(&r, ino, &fd, proc) < 0 ||
	    reply_buffer(&r, size, &buf) < 0)
		return;
	reply_sized(&r, size, listxattr(proc, buf, size), buf);
}

/* SETXATTR and REMOVEXATTR (OPCODE): one write of the node, checked and kept alike; the
 * cache's mark is cleared around the call, as a change from outside would. */
static void change_xattr(fuse_req_t req, fuse_ino_t ino, unsigned opcode, const char *name,
			 const char *value, size_t size, int flags)
{
	PW_REQ(r);
	if (pw_req_begin(&r, req) < 0)
		return;
	pw_fs *fs = r.fs;
	int err = pw_check_node(&r, pw_opmap_op(opcode), pw_inode_get(fs, ino));
	if (err == 0)
		err = pw_undo_keep_node(&r, pw_inode_get(fs, ino), pw_opmap_op(opcode));
	if (err < 0) {
		pw_req_reply_err(&r, -err);
		return;
	}
	_cleanup_close_ int fd = -1;
	char proc[64];
	if (open_proc(&r, ino, &fd, proc) < 0)
		return;
	pw_xattr_changed(pw_inode_get(fs, ino));
	if (opcode == FUSE_SETXATTR)
		err = setxattr(proc, name, value, size, flags) < 0 ? errno : 0;
	else
		err = removexattr(proc, name) < 0 ? errno : 0;
	pw_xattr_changed(pw_inode_get(fs, ino));
	if (!err)
		pw_undo_keep_touched(fs, pw_inode_get(fs, ino));
	if (err) {
		pw_req_reply_err(&r, err);
		return;
	}
	pw_req_leave(&r);
	fuse_reply_err(req, 0);
}

void pw_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		    size_t size, int flags)
{
	change_xattr(req, ino, FUSE_SETXATTR, name, value, size, flags);
}

void pw_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	change_xattr(req, ino, FUSE_REMOVEXATTR, name, NULL, 0, 0);
}
