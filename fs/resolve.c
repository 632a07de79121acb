/* SPDX-License-Identifier: MIT */
/*
 * From a node to the backing object, without ever leaving the project: the node's path is
 * built from its names, then opened from the root descriptor with openat2 and
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS (in steps from intermediate
 * directory descriptors when the path is PATH_MAX bytes or longer). A component swapped for a
 * symlink between the kernel's lookup and our syscall makes the open fail with ELOOP
 * instead of following it; a '..' cannot appear (names come from the kernel, one component
 * each, and are checked).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <linux/limits.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "inode.h"
#include "resolve.h"
#include "util.h"

bool pw_name_valid(const char *name)
{
	size_t len = strnlen(name, PW_NAME_MAX + 1);
	if (len == 0 || len > PW_NAME_MAX)
		return false;
	if (strchr(name, '/'))
		return false;
	return !(streq(name, ".") || streq(name, ".."));
}

void pw_path_done(pw_path *p)
{
	if (p->s && p->s != p->buf)
		free(p->s);
	p->s = NULL;
}

/*
 * Builds the path of N, followed by LEAF when not NULL, into RET (tree lock held). Two
 * passes over the chain of primary names: the first measures (and fails early past
 * PW_TREE_PATH_MAX, which also ends a walk that could not end), the second writes right to
 * left straight into the destination, so a path that fits the caller's buffer costs no
 * allocation and no copy.
 */
static int build_locked(pw_inode *n, const char *leaf, pw_path *ret)
{
	pw_path_done(ret);
	size_t len = leaf ? strlen(leaf) : 0;
	bool first = leaf == NULL;
	for (pw_inode *m = n; !m->is_root; m = m->names->parent) {
		if (!m->names)
			return -ENOENT;
		len += strlen(m->names->name) + (first ? 0 : 1);
		first = false;
		if (len >= PW_TREE_PATH_MAX)
			return -ENAMETOOLONG;
	}
	char *dst = len < PW_PATH_MAX ? ret->buf : malloc(len + 1);
	if (!dst)
		return -ENOMEM;
	size_t pos = len;
	dst[pos] = '\0';
	if (leaf) {
		size_t l = strlen(leaf);
		pos -= l;
		memcpy(dst + pos, leaf, l);
	}
	for (pw_inode *m = n; !m->is_root; m = m->names->parent) {
		const char *name = m->names->name;
		size_t l = strlen(name);
		if (pos != len)
			dst[--pos] = '/';
		pos -= l;
		memcpy(dst + pos, name, l);
	}
	ret->s = dst;
	return 0;
}

int pw_node_path_locked(pw_fs *fs, pw_inode *n, pw_path *ret)
{
	return build_locked(n, NULL, ret);
}

int pw_node_path(pw_fs *fs, pw_inode *n, pw_path *ret)
{
	if (n->is_root) {
		pw_path_done(ret);
		ret->buf[0] = '\0';
		ret->s = ret->buf;
		return 0;
	}
	pw_inode_lock_read(fs);
	int r = build_locked(n, NULL, ret);
	pw_inode_unlock(fs);
	return r;
}

int pw_child_path_locked(pw_fs *fs, pw_inode *parent, const char *name, pw_path *ret)
{
	return build_locked(parent, name, ret);
}

int pw_child_path(pw_fs *fs, pw_inode *parent, const char *name, pw_path *ret)
{
	pw_inode_lock_read(fs);
	int r = build_locked(parent, name, ret);
	pw_inode_unlock(fs);
	return r;
}

/*
 * The open flags userspace may pass. The kernel forwards some internal bits in FUSE open
 * requests (__FMODE_EXEC for execve, FMODE_NONOTIFY); openat() would ignore them, but
 * openat2() rejects unknown bits with EINVAL, so they are masked here.
 */
#define PW_OPEN_FLAGS_VALID                                                                        \
	(O_ACCMODE | O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_APPEND | O_NONBLOCK | O_DSYNC |     \
	 O_SYNC | O_DIRECT | O_LARGEFILE | O_DIRECTORY | O_NOFOLLOW | O_NOATIME | O_CLOEXEC |      \
	 O_PATH | O_TMPFILE | FASYNC)

#define PW_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

static int openat2_retry(int dirfd, const char *path, const struct open_how *how)
{
	for (;;) {
		long fd = syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
		if (fd >= 0)
			return (int)fd;
		if (errno == EAGAIN) /* a concurrent rename raced the walk; retry */
			continue;
		return negative_errno();
	}
}

/*
 * A path of PATH_MAX bytes or more, which the kernel refuses in one call, resolved in
 * steps: each step opens the longest run of whole components shorter than PATH_MAX, as an
 * O_PATH directory, from the previous step's descriptor, with the same RESOLVE_* flags, and
 * the last step opens the rest with HOW. Every step is beneath the one before (no '..' in
 * names, no symlinks), so the whole walk stays beneath the root, and each runs with the
 * caller's credentials, so search permission is checked at every level as in one walk.
 * The caller verifies the object's identity as for a short path.
 */
static int open_in_steps(pw_fs *fs, const char *path, const struct open_how *how)
{
	const struct open_how dir_how = {
	    .flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
	    .resolve = PW_RESOLVE,
	};
	_cleanup_close_ int dirfd = -1;
	char step[PATH_MAX];
	for (;;) {
		size_t len = strlen(path);
		if (len < PATH_MAX)
			return openat2_retry(dirfd < 0 ? fs->root_fd : dirfd, path, how);
		/* the last '/' among the first PATH_MAX - 1 bytes ends this step */
		size_t cut = PATH_MAX - 1;
		while (cut > 0 && path[cut] != '/')
			cut--;
		if (cut == 0) /* names are at most NAME_MAX: cannot happen */
			return -ENAMETOOLONG;
		memcpy(step, path, cut);
		step[cut] = '\0';
		int fd = openat2_retry(dirfd < 0 ? fs->root_fd : dirfd, step, &dir_how);
		if (fd < 0)
			return fd;
		closep(&dirfd);
		dirfd = fd;
		path += cut + 1;
	}
}

int pw_openat_beneath(pw_fs *fs, const char *path, int flags, mode_t mode)
{
	flags &= PW_OPEN_FLAGS_VALID;
	struct open_how how = {
	    .flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
	    .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
	    .resolve = PW_RESOLVE,
	};
	if (!*path)
		path = ".";
	if (_unlikely_(strnlen(path, PATH_MAX) == PATH_MAX))
		return open_in_steps(fs, path, &how);
	return openat2_retry(fs->root_fd, path, &how);
}

/*
 * The node's name may point at another object by now: the backing tree can change under
 * us (a file replaced, a directory exchanged with a symlink by RENAME_EXCHANGE). Acting on
 * that object would answer for the wrong inode (the kernel then marks the node bad) or write
 * where the policy never looked, so the object opened must be the node's own: same device,
 * same inode number. Otherwise the name is stale and the request answers ESTALE.
 */
static int verify_identity(dev_t dev, ino_t ino, int fd, struct stat *st)
{
	if (fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		return negative_errno();
	if (st->st_ino != ino || st->st_dev != dev)
		return -ESTALE;
	return 0;
}

/* Whether the descriptor's status flags must be set to FLAGS after the open with O_NONBLOCK:
 * for a regular file O_NONBLOCK changes nothing Linux does with it (no read or write of a
 * regular file blocks on it, and the open already happened), so only O_APPEND, O_DIRECT and
 * O_NOATIME need setting there; any other object gets the caller's blocking mode back. One
 * fcntl less per open of a file, the commonest request of a read workload. */
static bool needs_setfl(int flags, mode_t type)
{
	if (flags & (O_NONBLOCK | O_PATH))
		return false;
	return type != S_IFREG || (flags & (O_APPEND | O_DIRECT | O_NOATIME));
}

/* O_TRUNC, applied once the object is verified. Linux truncates on O_RDONLY|O_TRUNC too
 * (given write permission), which a read-only descriptor cannot do: that case truncates
 * through the descriptor's /proc path, with the same permission check. */
static int truncate_verified(int fd, int flags)
{
	if ((flags & O_ACCMODE) != O_RDONLY)
		return ftruncate(fd, 0) < 0 ? negative_errno() : 0;
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return truncate(proc, 0) < 0 ? negative_errno() : 0;
}

int pw_open_node(pw_fs *fs, pw_inode *n, int flags)
{
	if (n->is_root && (flags & O_PATH)) {
		int fd = fcntl(fs->root_fd, F_DUPFD_CLOEXEC, 3);
		return fd < 0 ? negative_errno() : fd;
	}
	struct stat st;
	return pw_open_node_stat(fs, n, flags, &st);
}

int pw_open_node_stat(pw_fs *fs, pw_inode *n, int flags, struct stat *ret_st)
{
	if (n->is_root && (flags & O_PATH)) {
		int fd = fcntl(fs->root_fd, F_DUPFD_CLOEXEC, 3);
		if (fd < 0)
			return negative_errno();
		if (fstat(fd, ret_st) < 0) {
			int e = negative_errno();
			close(fd);
			return e;
		}
		return fd;
	}
	/* Path and identity are read together under the tree lock (a node orphaned by inode
	 * reuse has its identity cleared there). */
	PW_PATH_DECLARE(path);
	pw_inode_lock_read(fs);
	dev_t dev = n->dev;
	ino_t ino = n->ino;
	int r = n->is_root ? 0 : pw_node_path_locked(fs, n, &path);
	pw_inode_unlock(fs);
	if (r < 0)
		return r;
	if (n->is_root) {
		int fd = pw_openat_beneath(fs, "", flags, 0);
		if (fd >= 0 && fstat(fd, ret_st) < 0) {
			int e = negative_errno();
			close(fd);
			return e;
		}
		return fd;
	}
	/* Open with O_NONBLOCK, so a FIFO swapped in for the node's name cannot block this
	 * worker, and without O_TRUNC, so nothing changes before the object is verified to be
	 * the node's own. Then restore the caller's blocking mode and truncate. */
	int oflags = (flags & O_PATH) ? flags : (flags & ~O_TRUNC) | O_NONBLOCK | O_NOCTTY;
	int fd = pw_openat_beneath(fs, path.s, oflags, 0);
	if (fd < 0)
		return fd;
	r = verify_identity(dev, ino, fd, ret_st);
	/* F_SETFL sets only these bits; we know each one's wanted value from FLAGS. A regular
	 * file keeps O_NONBLOCK (needs_setfl). */
	if (r == 0 && needs_setfl(flags, ret_st->st_mode & S_IFMT) &&
	    fcntl(fd, F_SETFL, flags & (O_APPEND | O_DIRECT | O_NOATIME)) < 0)
		r = negative_errno();
	if (r == 0 && (flags & O_TRUNC))
		r = truncate_verified(fd, flags);
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}
