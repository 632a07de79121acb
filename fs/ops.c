/* SPDX-License-Identifier: MIT */
/*
 * Entry and attribute operations. Each handler is thin: it maps its operation to a policy
 * op, asks check.c when it mutates, then passes through to the backing tree with the
 * caller's credentials. Replies follow fuse_lowlevel.h's "Valid replies" for each op.
 */
#include <fcntl.h>
#include <linux/limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/fsuid.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "check.h"
#include "devio.h"
#include "dircache.h"
#include "entry.h"
#include "fh.h"
#include "inode.h"
#include "undo/undo.h"
#include "ops.h"
#include "watch.h"

int pw_stat_node(pw_fs *fs, pw_inode *n, struct stat *st)
{
	if (n->is_root)
		return fstatat(fs->root_fd, "", st, AT_EMPTY_PATH) < 0 ? negative_errno() : 0;
	/* The identity check's own fstat is the answer: the object it read is the node's. */
	_cleanup_close_ int fd = pw_open_node_stat(fs, n, O_PATH, st);
	return fd < 0 ? fd : 0;
}

/* A special file with an access ACL under allow_other (entry.c says why): looked up only for
 * its owner and for callers the backing filesystem lets do what the kernel will not ask. */
static int check_special(pw_fs *fs, int pfd, const char *name, const struct stat *st,
			 bool *ret_uncached)
{
	*ret_uncached = pw_special_uncached(fs, pfd, name, st->st_mode);
	if (!*ret_uncached || st->st_uid == (uid_t)setfsuid(-1))
		return 0;
	int mask = S_ISSOCK(st->st_mode) ? W_OK : R_OK | W_OK;
	if (faccessat(pfd, name, mask, AT_EACCESS | AT_SYMLINK_NOFOLLOW) < 0)
		return errno == EACCES || errno == EPERM ? -EACCES : negative_errno();
	return 0;
}

/* Looks up R's name and answers with an entry (learning the node) or an error. */
int pw_do_lookup(pw_req *r, int dirfd, bool made, struct fuse_entry_param *e, bool *ret_hidden)
{
	pw_fs *fs = r->fs;
	pw_inode *parent = r->parent;
	const char *name = r->name;
	if (ret_hidden)
		*ret_hidden = false;
	_cleanup_(pw_dir_close) pw_dir_ref own = PW_DIR_REF_INIT;
	int pfd = dirfd >= 0 ? dirfd : pw_dir_open(fs, parent, &own);
	if (pfd < 0)
		return pfd;
	pw_object o;
	int got = pw_object_at(pfd, name, AT_SYMLINK_NOFOLLOW, &o);
	if (got < 0)
		return got;
	if (pw_hidden_child(r, S_ISDIR(o.st.st_mode))) {
		if (ret_hidden)
			*ret_hidden = true;
		return -ENOENT;
	}
	bool uncached;
	int err = check_special(fs, pfd, name, &o.st, &uncached);
	if (err < 0)
		return err;
	pw_inode *n = pw_watch_learn(fs, parent, name, &o, made);
	if (!n)
		return -ENOMEM;
	pw_truthful_attr_child(r, &o.st);
	pw_fill_entry(fs, e, n, &o.st, pw_watch_timeout(fs, parent, n));
	pw_entry_cap(e, uncached ? 0 : pw_entry_timeout_in(fs, pfd, e->entry_timeout));
	return 0;
}

void pw_op_lookup(fuse_req_t req, fuse_ino_t parent_ino, const char *name)
{
	PW_REQ(r);
	if (pw_req_begin(&r, req) < 0)
		return;
	pw_fs *fs = r.fs;
	pw_inode *parent = pw_inode_get(fs, parent_ino);
	pw_req_name(&r, parent, name);
	if (strlen(name) > PW_NAME_MAX) {
		pw_req_reply_err(&r, ENAMETOOLONG);
		return;
	}
	if (!pw_name_valid(name)) {
		pw_req_reply_err(&r, ENOENT);
		return;
	}
	struct fuse_entry_param e;
	pw_lookup_gate_enter(fs);
	bool hidden;
	int err = pw_do_lookup(&r, -1, false, &e, &hidden);
	if (err == -ENOENT) {
		/* A hidden name that exists is remembered, so a switch that unhides it can drop
		 * the negative entry the kernel caches now. */
		if (hidden)
			pw_remember_hidden_neg(fs, parent_ino, name);
		double timeout =
		    pw_entry_timeout_of(fs, parent, pw_watch_timeout(fs, parent, NULL));
		pw_req_leave(&r);
		pw_reply_negative(fs, req, timeout);
		pw_lookup_gate_leave(fs);
		return;
	}
	if (err < 0) {
		pw_lookup_gate_leave(fs);
		pw_req_reply_err(&r, -err);
		return;
	}
	pw_req_leave(&r);
	if (fuse_reply_entry(req, &e) == -ENOENT) /* interrupted: no reference taken */
		pw_inode_forget(fs, pw_inode_get(fs, e.ino), 1);
	pw_lookup_gate_leave(fs);
}

void pw_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	pw_fs *fs = fuse_req_userdata(req);
	const struct fuse_forget_data one = {.ino = ino, .nlookup = nlookup};
	pw_inode_forget_batch(fs, &one, 1);
	fuse_reply_none(req);
}

void pw_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	pw_fs *fs = fuse_req_userdata(req);
	pw_inode_forget_batch(fs, forgets, count);
	fuse_reply_none(req);
}

/* The attributes through a descriptor some process holds open on N, or -ENOENT. */
static int stat_open_handle(pw_fs *fs, pw_inode *n, struct stat *st)
{
	int fd = pw_fh_dup_for(fs, n);
	if (fd < 0)
		return -ENOENT;
	int r = fstat(fd, st) < 0 ? negative_errno() : 0;
	close(fd);
	return r;
}

/* Answers GETATTR and SETATTR: with ST (ERR 0), or ERR. -ENOENT for a node that has no name
 * left: fstat(2) of a file unlinked while open comes without a handle, so the attributes
 * come from a descriptor some process holds open on it. */
static void reply_attr(pw_req *r, pw_inode *n, int err, struct stat *st)
{
	if (err == -ENOENT)
		err = stat_open_handle(r->fs, n, st);
	if (err < 0) {
		pw_req_reply_err(r, -err);
		return;
	}
	pw_truthful_attr(r, n, st);
	double timeout = pw_watch_node_timeout(r->fs, n);
	pw_req_leave(r);
	fuse_reply_attr(r->req, st, timeout);
}

void pw_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	PW_REQ(r);
	pw_inode *n = pw_req_begin_node(&r, req, ino);
	if (!n)
		return;
	pw_fs *fs = r.fs;
	struct stat st;
	int err;
	if (fi && fi->fh)
		err = fstat(pw_fh_of(fi)->fd, &st) < 0 ? negative_errno() : 0;
	else
		err = pw_stat_node(fs, n, &st);
	reply_attr(&r, n, err, &st);
}

/* Whether utimensat takes AT_EMPTY_PATH (an O_PATH descriptor's own object): learned at the
 * first use (a kernel without it answers EINVAL where the /proc path works). */
static atomic_bool utimens_empty_path_refused;

/* The times of the object O_PATH descriptor FD names (PROC: its /proc/self/fd path). Through
 * the descriptor itself where the kernel allows it: a walk of the /proc magic link costs as
 * much as the change (9 against 18 µs on this VM). -1 with errno on failure. */
static int utimens_opath(int fd, const char *proc, const struct timespec tv[2])
{
	if (!atomic_load_explicit(&utimens_empty_path_refused, memory_order_relaxed)) {
		int r = utimensat(fd, "", tv, AT_EMPTY_PATH);
		if (r == 0 || errno != EINVAL)
			return r;
		/* EINVAL: bad times, or no AT_EMPTY_PATH here; the /proc path tells which */
		if (utimensat(AT_FDCWD, proc, tv, 0) < 0)
			return -1;
		atomic_store(&utimens_empty_path_refused, true);
		return 0;
	}
	return utimensat(AT_FDCWD, proc, tv, 0);
}

/* Applies the attribute changes of a SETATTR through FD (O_PATH or open). */
static int apply_setattr(int fd, bool opath, struct stat *attr, int valid)
{
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (valid & FUSE_SET_ATTR_MODE) {
		if ((opath ? chmod(proc, attr->st_mode) : fchmod(fd, attr->st_mode)) < 0)
			return negative_errno();
	}
	if (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		uid_t uid = (valid & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
		gid_t gid = (valid & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;
		if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
			return negative_errno();
	}
	if (valid & FUSE_SET_ATTR_SIZE) {
		int r;
		if (opath) {
			_cleanup_close_ int wfd = open(proc, O_WRONLY | O_CLOEXEC);
			r = wfd < 0 ? -1 : ftruncate(wfd, attr->st_size);
		} else {
			r = ftruncate(fd, attr->st_size);
		}
		if (r < 0)
			return negative_errno();
	}
	if (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
		struct timespec tv[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_nsec = UTIME_OMIT}};
		if (valid & FUSE_SET_ATTR_ATIME_NOW)
			tv[0].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_ATIME)
			tv[0] = attr->st_atim;
		if (valid & FUSE_SET_ATTR_MTIME_NOW)
			tv[1].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_MTIME)
			tv[1] = attr->st_mtim;
		int r = opath ? utimens_opath(fd, proc, tv) : futimens(fd, tv);
		if (r < 0)
			return negative_errno();
	}
	return 0;
}

/*
 * Whether a SETATTR's VALID sets both times and nothing else: the one change of times whose
 * inotify echo is IN_ATTRIB (utime(2), touch), which needs no invalidation (watch.c). With one
 * time only, the kernel reports IN_MODIFY (mtime; tar x's futimens, whose close the watcher
 * expects anyway) or IN_ACCESS (atime, not watched), so no record is made that no event would
 * consume; a mode or owner change may change extended attributes (an ACL,
 * security.capability), which the watcher's handling of its IN_ATTRIB forgets.
 */
static bool sets_both_times_only(int valid)
{
	const int times = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
			  FUSE_SET_ATTR_MTIME_NOW;
	return !(valid & ~times) && (valid & FUSE_SET_ATTR_ATIME) && (valid & FUSE_SET_ATTR_MTIME);
}

/*
 * The descriptor a SETATTR works through: the open handle when the kernel sent one (only
 * ftruncate(2) does), else the node opened once as O_PATH (*RET_OPATH), which the check, the
 * change and the reply's attributes then share instead of each resolving the node's path
 * again; a file unlinked while open (fchmod(2) and the like) through a duplicate of an open
 * handle. Returns the descriptor (*RET_OWN: the caller closes it) or -errno.
 */
static int setattr_fd(pw_fs *fs, pw_inode *n, struct fuse_file_info *fi, bool *ret_opath,
		      bool *ret_own, struct stat *ret_st)
{
	*ret_opath = *ret_own = false;
	if (fi && fi->fh)
		return pw_fh_of(fi)->fd;
	int fd = pw_open_node_stat(fs, n, O_PATH, ret_st);
	*ret_opath = fd >= 0;
	if (fd == -ENOENT)
		fd = pw_fh_dup_for(fs, n);
	*ret_own = fd >= 0;
	return fd;
}

void pw_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
		   struct fuse_file_info *fi)
{
	PW_REQ(r);
	if (pw_req_begin(&r, req) < 0)
		return;
	pw_fs *fs = r.fs;
	pw_inode *n = pw_inode_get(fs, ino);
	valid &= FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_SIZE |
		 FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
		 FUSE_SET_ATTR_MTIME_NOW;
	bool opath, own;
	struct stat resolved;
	int fd = setattr_fd(fs, n, fi, &opath, &own, &resolved);
	/* closes the descriptor setattr_fd opened for this call, on every way out */
	_cleanup_close_ _unused_ int owned = own ? fd : -1;
	int err;
	if (valid) {
		/* The policy's answer comes first, as when the node is resolved after it: a
		 * refusal reads the same whether or not the node could be opened. The link count
		 * is the one the node's identity check has just read. */
		pw_op op = pw_opmap_setattr((unsigned)valid);
		err = opath ? pw_check_node_nlink(&r, op, n, (long)resolved.st_nlink)
			    : pw_check_node_ex(&r, op, n, fd, NULL);
		if (err == 0)
			err = fd < 0 ? fd
				     : pw_undo_keep_node(&r, n, pw_opmap_setattr((unsigned)valid));
		int tok = err == 0 && sets_both_times_only(valid)
			      ? pw_watch_expect_node(fs, n, PW_EXPECT_TIMES_SET)
			      : -1;
		if (err == 0)
			err = apply_setattr(fd, opath, attr, valid);
		if (err < 0) {
			pw_watch_unexpect(fs, tok);
			pw_req_reply_err(&r, -err);
			return;
		}
		pw_undo_keep_touched(fs, n);
	}
	struct stat st;
	err = fd < 0 ? fd : (fstat(fd, &st) < 0 ? negative_errno() : 0);
	reply_attr(&r, n, err, &st);
}

void pw_op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	PW_REQ(r);
	if (pw_req_begin(&r, req) < 0)
		return;
	pw_fs *fs = r.fs;
	_cleanup_close_ int fd = pw_open_node(fs, pw_inode_get(fs, ino), O_PATH);
	if (fd < 0) {
		pw_req_reply_err(&r, -fd);
		return;
	}
	char buf[PATH_MAX + 1];
	ssize_t len = readlinkat(fd, "", buf, sizeof(buf));
	if (len < 0) {
		pw_req_reply_err(&r, errno);
		return;
	}
	if (len == sizeof(buf)) {
		pw_req_reply_err(&r, ENAMETOOLONG);
		return;
	}
	buf[len] = '\0';
	pw_req_leave(&r);
	fuse_reply_readlink(req, buf);
}

void pw_op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	PW_REQ(r);
	if (pw_req_begin(&r, req) < 0)
		return;
	pw_fs *fs = r.fs;
	pw_inode *n = pw_inode_get(fs, ino);
	if (mask & W_OK) {
		/* A query, not an attempt: decided without an audit event. */
		PW_PATH_DECLARE(path);
		const pw_policy *p = pw_req_policy(&r, NULL);
		pw_decision d = {.allowed = true};
		if (pw_node_path(fs, n, &path) == 0)
			pw_policy_decide(p, pw_opmap_op(FUSE_ACCESS), path.s, S_ISDIR(n->type), &d);
		else if (pw_policy_writes_nothing(p))
			d = (pw_decision){.allowed = false, .err = EROFS};
		if (!d.allowed) {
			pw_req_reply_err(&r, d.err);
			return;
		}
	}
	_cleanup_close_ int fd = pw_open_node(fs, n, O_PATH);
	if (fd < 0) {
		pw_req_reply_err(&r, -fd);
		return;
	}
	if (faccessat(fd, "", mask, AT_EMPTY_PATH | AT_EACCESS) < 0) {
		pw_req_reply_err(&r, errno);
		return;
	}
	pw_req_leave(&r);
	fuse_reply_err(req, 0);
}

void pw_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	pw_fs *fs = fuse_req_userdata(req);
	struct statvfs sv;
	if (fstatvfs(fs->root_fd, &sv) < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	fuse_reply_statfs(req, &sv);
}

void pw_op_init(void *userdata, struct fuse_conn_info *conn)
{
	pw_fs *fs = userdata;
	fs->no_opendir =
	    (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) && fs->is_root_daemon && !fs->allow_other;
	/* Large writes (1 MiB, or a page less where devio.c could not splice a request that
	 * large), splice for read replies, readdirplus, parallel directory operations, cached
	 * symlinks; no writeback cache (writes must reach us to be checked when they happen).
	 * libfuse's own splice for requests stays off: it needs a pipe larger than
	 * pipe-max-size; devio.c splices them itself. */
	conn->max_write = pw_devio_choose_max_write(fs);
	conn->max_readahead = 1024 * 1024;
	unsigned want = FUSE_CAP_SPLICE_WRITE | FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO |
			FUSE_CAP_PARALLEL_DIROPS | FUSE_CAP_CACHE_SYMLINKS | FUSE_CAP_ASYNC_READ |
			FUSE_CAP_ASYNC_DIO | FUSE_CAP_EXPLICIT_INVAL_DATA;
	conn->want |= conn->capable & want;
	conn->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_AUTO_INVAL_DATA |
				  FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_MOVE);
	conn->time_gran = 1;
}
