/* SPDX-License-Identifier: MIT */
/*
 * The entries the view hands the kernel: their attributes and how long the kernel may keep
 * them. Shared by every handler that answers with an entry (lookup, create, the new names,
 * readdirplus) and by the watcher, which drops entries of directories that became private.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "dircache.h"
#include "entry.h"
#include "inode.h"
#include "resolve.h"

void pw_fill_entry(pw_fs *fs, struct fuse_entry_param *e, pw_inode *n, const struct stat *st,
		   double timeout)
{
	memset(e, 0, sizeof(*e));
	e->ino = pw_inode_id(fs, n);
	e->attr = *st;
	e->attr_timeout = timeout;
	e->entry_timeout = timeout;
}

void pw_entry_cap(struct fuse_entry_param *e, double t)
{
	if (e->entry_timeout > t)
		e->entry_timeout = t;
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

double pw_entry_timeout_in(pw_fs *fs, int dirfd, double timeout)
{
	if (!fs->allow_other)
		return timeout;
	return pw_dir_searchable_by_all(dirfd) ? timeout : 0;
}

double pw_entry_timeout_of(pw_fs *fs, pw_inode *dir, double timeout)
{
	if (!fs->allow_other)
		return timeout;
	_cleanup_(pw_dir_close) pw_dir_ref d = PW_DIR_REF_INIT;
	int fd = pw_dir_open(fs, dir, &d);
	return fd >= 0 ? pw_entry_timeout_in(fs, fd, timeout) : 0;
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
