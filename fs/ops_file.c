/* SPDX-License-Identifier: MIT */
/*
 * File operations. Writes are checked when they happen, not only at open: a descriptor
 * opened in `build` cannot write after a switch to `plan`. That is why the writeback cache
 * stays off (the kernel would otherwise acknowledge writes we refuse later); shared
 * writable mmap pages reach us as WRITE requests at writeback time and are checked then
 * (docs/internals/fs.md, "Writes are checked when they happen", says what follows).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "check.h"
#include "devio.h"
#include "entry.h"
#include "fh.h"
#include "inode.h"
#include "undo/undo.h"
#include "ops_dir.h"
#include "ops_file.h"
#include "watch.h"

/* A handle for FD; a handle open for writing counts as one of N's writers (watch.c leaves
 * the data the view writes itself cached). */
static pw_fh *fh_new(pw_fs *fs, int fd, pw_inode *n, int flags)
{
	pw_fh *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->fd = fd;
	h->node = n;
	h->direct = flags & O_DIRECT;
	if ((flags & O_ACCMODE) != O_RDONLY) {
		h->writer = n;
		atomic_fetch_add(&n->open_writers, 1);
	}
	pw_fh_register(fs, h);
	return h;
}

/* Takes H out of the registry and closes its backing file, in that order (pw_fh_dup_for);
 * a close after writing is announced to the watcher first, so its IN_CLOSE_WRITE does not
 * drop the pages the kernel has just written. Then frees H. */
static void fh_close_free(pw_fs *fs, pw_fh *h)
{
	pw_fh_unregister(fs, h);
	int tok = h->writer ? pw_watch_expect_node(fs, h->writer, PW_EXPECT_CLOSED_WRITE) : -1;
	if (close(h->fd) < 0)
		pw_watch_unexpect(fs, tok);
	if (h->writer)
		atomic_fetch_sub(&h->writer->open_writers, 1);
	free(h);
}

static bool wants_write(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
}

static void set_open_flags(struct fuse_file_info *fi, int flags, bool keep)
{
	/* Keep the page cache across opens: external changes invalidate it (watch.c), where
	 * the watcher sees them (KEEP; else each open drops it, and reads the backing file). */
	fi->keep_cache = keep;
	if (flags & O_DIRECT)
		fi->direct_io = 1;
	fi->noflush = 1;
}

void pw_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	PW_REQ(r);
	pw_inode *n = pw_req_begin_node(&r, req, ino);
	if (!n)
		return;
	pw_fs *fs = r.fs;
	if (wants_write(fi->flags)) {
		int err = pw_check_node(&r, pw_opmap_open(fi->flags), n);
		if (err == 0 && (fi->flags & O_TRUNC)) /* the original, before the truncation */
			err = pw_undo_keep_node(&r, n, pw_opmap_open(fi->flags));
		if (err < 0) {
			pw_req_reply_err(&r, -err);
			return;
		}
	}
	int flags = fi->flags & ~(O_CREAT | O_EXCL | O_NOCTTY);
	int fd = pw_open_node(fs, n, flags);
	if (fd < 0) {
		pw_req_reply_err(&r, -fd);
		return;
	}
	if (fi->flags & O_TRUNC)
		pw_undo_keep_touched(fs, n);
	pw_fh *h = fh_new(fs, fd, n, flags);
	if (!h) {
		close(fd);
		pw_req_reply_err(&r, ENOMEM);
		return;
	}
	fi->fh = (uintptr_t)h;
	set_open_flags(fi, fi->flags, pw_watch_node_covered(fs, n));
	pw_req_leave(&r);
	if (fuse_reply_open(req, fi) == -ENOENT) /* interrupted: the kernel dropped it */
		fh_close_free(fs, h);
}

/*
 * Whether the file just made (or opened) as FD has extended attributes, asked through FD:
 * the kernel asks for security.capability before the first write to every inode (devio.c),
 * and `ls -l` for two more, which the "none" mark (ops_xattr.c) then answers from memory
 * instead of resolving the node's name again. Guarded by the epoch as there.
 */
static void learn_xattrs(pw_inode *n, int fd)
{
	unsigned epoch = atomic_load(&n->xattr_epoch);
	if (atomic_load(&n->xattr_state) == PW_XATTR_NONE || flistxattr(fd, NULL, 0) != 0)
		return;
	atomic_store(&n->xattr_state, PW_XATTR_NONE);
	if (atomic_load(&n->xattr_epoch) != epoch)
		atomic_store(&n->xattr_state, PW_XATTR_UNKNOWN);
}

void pw_op_create(fuse_req_t req, fuse_ino_t parent_ino, const char *name, mode_t mode,
		  struct fuse_file_info *fi)
{
	PW_REQ(r);
	if (pw_req_begin(&r, req) < 0)
		return;
	pw_fs *fs = r.fs;
	/* The new name's steps (ops_dir.c). What the name holds matters to the hide rules
	 * (the originals look for themselves, in pw_undo_keep_name, before anything changes).
	 * Without hide rules the name is not looked at. A name not known to exist is made with
	 * O_EXCL first, which tells whether it was free (and so whether the watcher will see an
	 * IN_CREATE) without a stat of its own, and proves the file new (MADE: a node with its
	 * inode number is of a deleted file, pw_inode_learn). */
	_cleanup_(pw_new_entry_done) pw_new_entry ne;
	int err = pw_new_entry_begin(&r, parent_ino, name, pw_opmap_op(FUSE_CREATE), false, &ne);
	if (err < 0) {
		pw_req_reply_err(&r, -err);
		return;
	}
	bool made = !ne.existed;
	/* Only a name that did not exist makes an IN_CREATE for the watcher to expect. */
	int tok = made ? pw_req_expect(&r, PW_EXPECT_NAME_ADDED) : -1;
	int flags = (fi->flags | O_CREAT | O_NOFOLLOW | O_CLOEXEC) & ~O_NOCTTY;
	int fd = openat(ne.pfd, name, made ? flags | O_EXCL : flags, mode);
	if (fd < 0 && errno == EEXIST && made && !(flags & O_EXCL)) {
		pw_watch_unexpect(fs, tok); /* it was there: no IN_CREATE */
		tok = -1;
		made = false;
		fd = openat(ne.pfd, name, flags, mode);
	}
	if (fd < 0) {
		int e = errno;
		pw_watch_unexpect(fs, tok);
		pw_undo_keep_failed(fs, ne.kept);
		pw_req_reply_err(&r, e);
		return;
	}
	pw_object o;
	err = pw_object_at(fd, "", AT_EMPTY_PATH, &o);
	if (err < 0) {
		err = -err;
		close(fd);
		pw_req_reply_err(&r, err);
		return;
	}
	pw_inode *n = pw_watch_learn(fs, r.parent, name, &o, made);
	pw_fh *h = n ? fh_new(fs, fd, n, fi->flags) : NULL;
	if (!h) {
		close(fd);
		if (n)
			pw_inode_forget(fs, n, 1);
		pw_req_reply_err(&r, ENOMEM);
		return;
	}
	pw_undo_keep_touched(fs, n);
	learn_xattrs(n, fd);
	/* Under the policy that allowed the create (req.h). */
	pw_truthful_attr_child(&r, &o.st);
	struct fuse_entry_param e;
	pw_fill_entry(fs, &e, n, &o.st, pw_watch_timeout(fs, r.parent, n));
	pw_entry_cap(&e, pw_entry_timeout_in(fs, ne.pfd, e.entry_timeout));
	fi->fh = (uintptr_t)h;
	set_open_flags(fi, fi->flags, pw_watch_covers(fs, r.parent));
	pw_req_leave(&r);
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		fh_close_free(fs, h);
		pw_inode_forget(fs, n, 1);
	}
}

/* What the kernel does before a write by a caller without CAP_FSETID, and asks us to do
 * (FUSE_WRITE_KILL_SUIDGID, devio.c): clear setuid, and setgid where group-executable
 * (the rule FUSE_HANDLE_KILLPRIV_V2 states). Done with the daemon's credentials, as the
 * kernel's own kill does not depend on the writer's right to chmod. Best effort: a daemon
 * that is not root and does not own the file fails here, but then its own write is one
 * without CAP_FSETID and the backing filesystem kills the bits itself. File capabilities
 * are removed by the backing filesystem on every write. The watcher sees IN_ATTRIB and
 * refreshes the kernel's copy of the mode. */
static void kill_suidgid(int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	mode_t kill = st.st_mode & S_ISUID;
	if ((st.st_mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP))
		kill |= S_ISGID;
	if (kill)
		(void)fchmod(fd, st.st_mode & 07777 & ~kill);
}

void pw_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	PW_REQ(r);
	pw_req_init(&r, req);
	/* Hidden now, by a switch after the open: the mode in force decides, as for writes
	 * (the switch also dropped the pages the kernel had cached). */
	if (pw_node_hidden(&r, pw_inode_get(r.fs, ino))) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = pw_fh_of(fi)->fd;
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

/* A write to a backing descriptor opened with O_DIRECT, through page-aligned memory: the
 * data is never aligned where it arrives (in libfuse's buffer behind the request header, or
 * in pipe pages the kernel filled from the caller's memory, header first), and the backing
 * filesystem would refuse it with EINVAL. Offsets and sizes are the caller's; an unaligned
 * one gets the backing filesystem's own EINVAL. */
static ssize_t write_direct(int fd, struct fuse_bufvec *in_buf, off_t off)
{
	size_t size = fuse_buf_size(in_buf);
	void *mem = NULL;
	if (posix_memalign(&mem, 4096, size ? size : 1) != 0)
		return -ENOMEM;
	struct fuse_bufvec tmp = FUSE_BUFVEC_INIT(size);
	tmp.buf[0].mem = mem;
	ssize_t res = fuse_buf_copy(&tmp, in_buf, 0);
	if (res >= 0) {
		res = pwrite(fd, mem, (size_t)res, off);
		if (res < 0)
			res = -errno;
	}
	free(mem);
	return res;
}

void pw_op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in_buf, off_t off,
		     struct fuse_file_info *fi)
{
	PW_REQ(r);
	pw_req_init(&r, req); /* the daemon's credentials: the caller's descriptor writes */
	pw_fs *fs = r.fs;
	pw_inode *n = pw_inode_get(fs, ino);
	/* The mode in force now decides, whatever it was at open. */
	int err = pw_check_node_ex(&r, pw_opmap_op(FUSE_WRITE), n, pw_fh_of(fi)->fd, NULL);
	if (err == 0) /* the original, before the first change (cheap afterwards) */
		err = pw_undo_keep_node(&r, n, pw_opmap_op(FUSE_WRITE));
	if (err < 0) {
		fuse_reply_err(req, -err);
		return;
	}
	if (pw_transport_write_kills_suidgid())
		kill_suidgid(pw_fh_of(fi)->fd);
	/* A large write's data waits in devio.c's pipe, not in IN_BUF: spliced into the
	 * backing file, it is copied once, from the pages the caller's write filled into the
	 * backing file's pages, never through our memory. A small one is in IN_BUF. */
	struct fuse_bufvec piped;
	if (pw_devio_write_data(in_buf, &piped))
		in_buf = &piped;
	ssize_t res;
	if (pw_fh_of(fi)->direct) {
		res = write_direct(pw_fh_of(fi)->fd, in_buf, off);
	} else {
		struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in_buf));
		out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
		out.buf[0].fd = pw_fh_of(fi)->fd;
		out.buf[0].pos = off;
		res = fuse_buf_copy(&out, in_buf, FUSE_BUF_SPLICE_MOVE);
	}
	if (res < 0) {
		fuse_reply_err(req, (int)-res);
	} else {
		pw_undo_keep_touched(fs, n);
		fuse_reply_write(req, (size_t)res);
	}
}

/* Asynchronous for the caller (close(2) does not wait for it), but one per file opened: no
 * allocation, no lock another file's requests take, no other thread woken. */
void pw_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fh_close_free(fuse_req_userdata(req), pw_fh_of(fi));
	fuse_reply_err(req, 0);
}

void pw_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	int fd = pw_fh_of(fi)->fd;
	int r = datasync ? fdatasync(fd) : fsync(fd);
	fuse_reply_err(req, r < 0 ? errno : 0);
}

void pw_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
		     struct fuse_file_info *fi)
{
	/* With the caller's credentials: the backing filesystem then kills suid/sgid exactly
	 * as it would for the caller (the kernel leaves that to us, see devio.c). */
	PW_REQ(r);
	if (pw_req_begin(&r, req) < 0)
		return;
	pw_fs *fs = r.fs;
	int err = pw_check_node_ex(&r, pw_opmap_op(FUSE_FALLOCATE), pw_inode_get(fs, ino),
				   pw_fh_of(fi)->fd, NULL);
	if (err == 0)
		err = pw_undo_keep_node(&r, pw_inode_get(fs, ino), pw_opmap_op(FUSE_FALLOCATE));
	if (err < 0) {
		pw_req_reply_err(&r, -err);
		return;
	}
	if (fallocate(pw_fh_of(fi)->fd, mode, offset, length) < 0) {
		pw_req_reply_err(&r, errno);
		return;
	}
	pw_undo_keep_touched(fs, pw_inode_get(fs, ino));
	pw_req_leave(&r);
	fuse_reply_err(req, 0);
}

void pw_op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			   struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			   struct fuse_file_info *fi_out, size_t len, int flags)
{
	PW_REQ(r); /* the caller's credentials, as in fallocate */
	if (pw_req_begin(&r, req) < 0)
		return;
	pw_fs *fs = r.fs;
	pw_op op = pw_opmap_op(FUSE_COPY_FILE_RANGE);
	int err = pw_check_node_ex(&r, op, pw_inode_get(fs, ino_out), pw_fh_of(fi_out)->fd, NULL);
	if (err == 0)
		err = pw_undo_keep_node(&r, pw_inode_get(fs, ino_out), op);
	if (err < 0) {
		pw_req_reply_err(&r, -err);
		return;
	}
	loff_t in = off_in, out = off_out;
	ssize_t res = copy_file_range(pw_fh_of(fi_in)->fd, &in, pw_fh_of(fi_out)->fd, &out, len,
				      (unsigned)flags);
	if (res < 0) {
		pw_req_reply_err(&r, errno);
		return;
	}
	pw_undo_keep_touched(fs, pw_inode_get(fs, ino_out));
	pw_req_leave(&r);
	fuse_reply_write(req, (size_t)res);
}

void pw_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	off_t res = lseek(pw_fh_of(fi)->fd, off, whence);
	if (res < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_lseek(req, res);
}
