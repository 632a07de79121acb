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

#include "keep.h"
#include "ops_common.h"

void pw_fill_entry(pw_fs *fs, struct fuse_entry_param *e, pw_inode *n, const struct stat *st)
{
	memset(e, 0, sizeof(*e));
	e->ino = pw_inode_id(fs, n);
	e->attr = *st;
	e->attr_timeout = fs->timeout;
	e->entry_timeout = fs->timeout;
}

int pw_stat_node(pw_fs *fs, pw_inode *n, struct stat *st)
{
	if (n->is_root)
		return fstatat(fs->root_fd, "", st, AT_EMPTY_PATH) < 0 ? negative_errno() : 0;
	_cleanup_close_ int fd = pw_open_node(fs, n, O_PATH);
	if (fd < 0)
		return fd;
	return fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ? negative_errno() : 0;
}

void pw_reply_negative(pw_fs *fs, fuse_req_t req, double entry_timeout)
{
	struct fuse_entry_param e = {0};
	e.entry_timeout = entry_timeout;
	fuse_reply_entry(req, &e);
}

/*
 * Under allow_other the kernel checks search permission on a directory only when it asks
 * us to look a name up, which we do with the caller's credentials; an entry cached from
 * one user's lookup would let another user without search permission stat the name (and
 * read a cached symlink). So the entries of a directory that not every user may search
 * (no x for others, or an access ACL) are not cached: each walk through it asks us.
 * Directories that become private later drop their children's entries (watch.c), and a
 * rename into one is left for the watcher to invalidate (ops_dir.c).
 */
bool pw_dir_searchable_by_all(int dirfd)
{
	struct stat st;
	if (fstatat(dirfd, "", &st, AT_EMPTY_PATH) < 0 || !(st.st_mode & S_IXOTH))
		return false;
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", dirfd);
	if (getxattr(proc, "system.posix_acl_access", NULL, 0) >= 0)
		return false;
	return errno == ENODATA || errno == EOPNOTSUPP;
}

double pw_entry_timeout_in(pw_fs *fs, int dirfd)
{
	if (!fs->allow_other)
		return fs->timeout;
	return pw_dir_searchable_by_all(dirfd) ? fs->timeout : 0;
}

double pw_entry_timeout_of(pw_fs *fs, pw_inode *dir)
{
	if (!fs->allow_other)
		return fs->timeout;
	_cleanup_close_ int fd = pw_open_node(fs, dir, O_PATH | O_DIRECTORY);
	return fd >= 0 ? pw_entry_timeout_in(fs, fd) : 0;
}

/*
 * Special files under allow_other. The kernel opens a FIFO or a device node, and connects
 * to a socket, by itself: no OPEN reaches us. So such a view always has the kernel check
 * permission bits (default_permissions, fsmain.c), which keeps one user out of another's
 * private FIFO, socket or device node while stat, chmod, chown, unlink and rename of the
 * name get the backing filesystem's answers (pjdfstest's chmod/00, chown/00, unlink/11,
 * rename/09 and open/06 rows). The lookup itself could not have decided: it does not say
 * whether the caller means to open the file or only to stat it.
 *
 * One case the kernel's check does not cover: a special file with an access ACL. This
 * connection does not give the kernel ACLs (FUSE_POSIX_ACL would also hand it the umask
 * and default ACL inheritance that the backing filesystem does for us now), so it would
 * judge the group class by the ACL's mask and could let in a named user or group the ACL
 * keeps out. Such a file is looked up only for its owner and for callers the backing
 * filesystem lets do everything the kernel will not ask us about (read and write a FIFO
 * or device, write a socket: faccessat with the caller's credentials, ACL included);
 * others get EACCES, and its entries are never cached, so each walk asks again with the
 * walker's credentials. docs/SECURITY.md says what that costs.
 */
static bool is_special(mode_t mode)
{
	return S_ISFIFO(mode) || S_ISSOCK(mode) || S_ISCHR(mode) || S_ISBLK(mode);
}

/* Does NAME in DIRFD carry an access ACL? Unknown (any other error) counts as yes. */
static bool has_access_acl(int dirfd, const char *name)
{
	char proc[PATH_MAX];
	int n = snprintf(proc, sizeof(proc), "/proc/self/fd/%d/%s", dirfd, name);
	if (n < 0 || (size_t)n >= sizeof(proc))
		return true;
	if (lgetxattr(proc, "system.posix_acl_access", NULL, 0) >= 0)
		return true;
	return errno != ENODATA && errno != EOPNOTSUPP;
}

bool pw_special_uncached(pw_fs *fs, int dirfd, const char *name, mode_t mode)
{
	return fs->allow_other && is_special(mode) && has_access_acl(dirfd, name);
}

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
int pw_do_lookup(pw_req *r, int dirfd, struct fuse_entry_param *e, bool *ret_hidden)
{
	pw_fs *fs = r->fs;
	pw_inode *parent = r->parent;
	const char *name = r->name;
	if (ret_hidden)
		*ret_hidden = false;
	_cleanup_close_ int own = dirfd >= 0 ? -1 : pw_open_node(fs, parent, O_PATH);
	if (dirfd < 0 && own < 0)
		return own;
	int pfd = dirfd >= 0 ? dirfd : own;
	struct stat st;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return negative_errno();
	if (pw_hidden_child(r, S_ISDIR(st.st_mode))) {
		if (ret_hidden)
			*ret_hidden = true;
		return -ENOENT;
	}
	bool uncached;
	int err = check_special(fs, pfd, name, &st, &uncached);
	if (err < 0)
		return err;
	pw_inode *n = pw_inode_learn(fs, parent, name, &st, NULL);
	if (!n)
		return -ENOMEM;
	pw_truthful_attr_child(r, &st);
	pw_fill_entry(fs, e, n, &st);
	e->entry_timeout = uncached ? 0 : pw_entry_timeout_in(fs, pfd);
	return 0;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent_ino, const char *name)
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
	pthread_rwlock_rdlock(&fs->lookup_gate);
	bool hidden;
	int err = pw_do_lookup(&r, -1, &e, &hidden);
	if (err == -ENOENT) {
		/* A hidden name that exists is remembered, so a switch that unhides it can drop
		 * the negative entry the kernel caches now. */
		if (hidden)
			pw_remember_hidden_neg(fs, parent_ino, name);
		double timeout = pw_entry_timeout_of(fs, parent);
		pw_req_leave(&r);
		pw_reply_negative(fs, req, timeout);
		pthread_rwlock_unlock(&fs->lookup_gate);
		return;
	}
	if (err < 0) {
		pthread_rwlock_unlock(&fs->lookup_gate);
		pw_req_reply_err(&r, -err);
		return;
	}
	pw_req_leave(&r);
	if (fuse_reply_entry(req, &e) == -ENOENT) /* interrupted: no reference taken */
		pw_inode_forget(fs, pw_inode_get(fs, e.ino), 1);
	pthread_rwlock_unlock(&fs->lookup_gate);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	pw_fs *fs = fuse_req_userdata(req);
	const struct fuse_forget_data one = {.ino = ino, .nlookup = nlookup};
	pw_inode_forget_batch(fs, &one, 1);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
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

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	PW_REQ(r);
	if (pw_req_begin(&r, req) < 0)
		return;
	pw_fs *fs = r.fs;
	pw_inode *n = pw_inode_get(fs, ino);
	if (pw_node_hidden(&r, n)) {
		pw_req_reply_err(&r, ENOENT);
		return;
	}
	struct stat st;
	int err;
	if (fi && fi->fh)
		err = fstat(pw_fh_of(fi)->fd, &st) < 0 ? negative_errno() : 0;
	else
		err = pw_stat_node(fs, n, &st);
	if (err == -ENOENT) /* fstat(2) of a file unlinked while open comes without a handle */
		err = stat_open_handle(fs, n, &st);
	if (err < 0) {
		pw_req_reply_err(&r, -err);
		return;
	}
	pw_truthful_attr(&r, n, &st);
	pw_req_leave(&r);
	fuse_reply_attr(req, &st, fs->timeout);
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
		int r = opath ? utimensat(AT_FDCWD, proc, tv, 0) : futimens(fd, tv);
		if (r < 0)
			return negative_errno();
	}
	return 0;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
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
	if (valid) {
		int err = pw_check_node(&r, pw_opmap_setattr((unsigned)valid), n);
		if (err == 0)
			err = pw_keep_node(&r, n, pw_opmap_setattr((unsigned)valid));
		if (err < 0) {
			pw_req_reply_err(&r, -err);
			return;
		}
		_cleanup_close_ int pfd = -1;
		int fd;
		bool opath = false;
		if (fi && fi->fh) {
			fd = pw_fh_of(fi)->fd;
		} else {
			pfd = pw_open_node(fs, n, O_PATH);
			opath = pfd >= 0;
			if (pfd == -ENOENT) /* fchmod(2) and the like on a file unlinked while open */
				pfd = pw_fh_dup_for(fs, n);
			if (pfd < 0) {
				pw_req_reply_err(&r, -pfd);
				return;
			}
			fd = pfd;
		}
		err = apply_setattr(fd, opath, attr, valid);
		if (err < 0) {
			pw_req_reply_err(&r, -err);
			return;
		}
		pw_keep_touched(fs, n);
	}
	struct stat st;
	int err = (fi && fi->fh) ? (fstat(pw_fh_of(fi)->fd, &st) < 0 ? negative_errno() : 0)
			       : pw_stat_node(fs, n, &st);
	if (err == -ENOENT)
		err = stat_open_handle(fs, n, &st);
	if (err < 0) {
		pw_req_reply_err(&r, -err);
		return;
	}
	pw_truthful_attr(&r, n, &st);
	pw_req_leave(&r);
	fuse_reply_attr(req, &st, fs->timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
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

static void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
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

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	pw_fs *fs = fuse_req_userdata(req);
	struct statvfs sv;
	if (fstatvfs(fs->root_fd, &sv) < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	fuse_reply_statfs(req, &sv);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	pw_fs *fs = userdata;
	fs->no_opendir = (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) && fs->is_root_daemon &&
			 !fs->allow_other;
	/* Large writes (1 MiB, or a page less where devio.c could not splice a request that
	 * large), splice for read replies, readdirplus, parallel directory operations, cached
	 * symlinks; no writeback cache (writes must reach us to be checked when they happen).
	 * libfuse's own splice for requests stays off: it needs a pipe larger than
	 * pipe-max-size; devio.c splices them itself. */
	conn->max_write = pw_devio_choose_max_write(fs);
	conn->max_readahead = 1024 * 1024;
	unsigned want = FUSE_CAP_SPLICE_WRITE |
			FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_PARALLEL_DIROPS |
			FUSE_CAP_CACHE_SYMLINKS | FUSE_CAP_ASYNC_READ |
			FUSE_CAP_ASYNC_DIO | FUSE_CAP_EXPLICIT_INVAL_DATA;
	conn->want |= conn->capable & want;
	conn->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_AUTO_INVAL_DATA |
				  FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_MOVE);
	conn->time_gran = 1;
}

const struct fuse_lowlevel_ops pw_fs_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.access = op_access,
	.statfs = op_statfs,
	.mknod = pw_op_mknod,
	.mkdir = pw_op_mkdir,
	.symlink = pw_op_symlink,
	.link = pw_op_link,
	.unlink = pw_op_unlink,
	.rmdir = pw_op_rmdir,
	.rename = pw_op_rename,
	.opendir = pw_op_opendir,
	.readdir = pw_op_readdir,
	.readdirplus = pw_op_readdirplus,
	.releasedir = pw_op_releasedir,
	.fsyncdir = pw_op_fsyncdir,
	.create = pw_op_create,
	.open = pw_op_open,
	.read = pw_op_read,
	.write_buf = pw_op_write_buf,
	.release = pw_op_release,
	.fsync = pw_op_fsync,
	.fallocate = pw_op_fallocate,
	.copy_file_range = pw_op_copy_file_range,
	.lseek = pw_op_lseek,
	.setxattr = pw_op_setxattr,
	.getxattr = pw_op_getxattr,
	.listxattr = pw_op_listxattr,
	.removexattr = pw_op_removexattr,
};
