/* SPDX-License-Identifier: MIT */
/*
 * From a node to the backing object, without ever leaving the project: the node's path is
 * built from its names, then opened from the root descriptor with openat2 and
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS. A component swapped for a
 * symlink between the kernel's lookup and our syscall makes the open fail with ELOOP
 * instead of following it; a '..' cannot appear (names come from the kernel, one component
 * each, and are checked).
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fs_internal.h"
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

int pw_path_of_locked(pw_fs *fs, pw_inode *n, char *buf)
{
	/* Build right to left into the end of a scratch buffer, then move to the front. */
	char tmp[PW_PATH_MAX];
	size_t pos = sizeof(tmp) - 1;
	tmp[pos] = '\0';
	unsigned depth = 0;
	while (!n->is_root) {
		if (!n->names)
			return -ENOENT;
		const char *name = n->names->name;
		size_t len = strlen(name);
		if (pos < len + 1 || ++depth > PW_PATH_DEPTH_MAX)
			return -ENAMETOOLONG;
		if (pos != sizeof(tmp) - 1)
			tmp[--pos] = '/';
		pos -= len;
		memcpy(tmp + pos, name, len);
		n = n->names->parent;
	}
	memmove(buf, tmp + pos, sizeof(tmp) - pos);
	return 0;
}

int pw_path_of(pw_fs *fs, pw_inode *n, char *buf)
{
	if (n->is_root) {
		buf[0] = '\0';
		return 0;
	}
	pthread_rwlock_rdlock(&fs->tree_lock);
	int r = pw_path_of_locked(fs, n, buf);
	pthread_rwlock_unlock(&fs->tree_lock);
	return r;
}

int pw_path_child(pw_fs *fs, pw_inode *parent, const char *name, char *buf)
{
	int r = pw_path_of(fs, parent, buf);
	if (r < 0)
		return r;
	size_t plen = strlen(buf), nlen = strlen(name);
	if (plen + 1 + nlen + 1 > PW_PATH_MAX)
		return -ENAMETOOLONG;
	if (plen)
		buf[plen++] = '/';
	memcpy(buf + plen, name, nlen + 1);
	return 0;
}

/*
 * The open flags userspace may pass. The kernel forwards some internal bits in FUSE open
 * requests (__FMODE_EXEC for execve, FMODE_NONOTIFY); openat() would ignore them, but
 * openat2() rejects unknown bits with EINVAL, so they are masked here.
 */
#define PW_OPEN_FLAGS_VALID                                                                        \
	(O_ACCMODE | O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_APPEND | O_NONBLOCK | O_DSYNC |     \
	 O_SYNC | O_DIRECT | O_LARGEFILE | O_DIRECTORY | O_NOFOLLOW | O_NOATIME | O_CLOEXEC |       \
	 O_PATH | O_TMPFILE | FASYNC)

int pw_openat_beneath(pw_fs *fs, const char *path, int flags, mode_t mode)
{
	flags &= PW_OPEN_FLAGS_VALID;
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
		.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	if (!*path)
		path = ".";
	for (;;) {
		long fd = syscall(SYS_openat2, fs->root_fd, path, &how, sizeof(how));
		if (fd >= 0)
			return (int)fd;
		if (errno == EAGAIN) /* a concurrent rename raced the walk; retry */
			continue;
		return negative_errno();
	}
}

/*
 * The node's name may point at another object by now: the backing tree can change under
 * us (a file replaced, a directory exchanged with a symlink by RENAME_EXCHANGE). Acting on
 * that object would answer for the wrong inode (the kernel then marks the node bad) or write
 * where the policy never looked, so the object opened must be the node's own: same device,
 * same inode number. Otherwise the name is stale and the request answers ESTALE.
 */
static int verify_identity(dev_t dev, ino_t ino, int fd)
{
	struct stat st;
	if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		return negative_errno();
	if (st.st_ino != ino || st.st_dev != dev)
		return -ESTALE;
	return 0;
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
	/* Path and identity are read together under the tree lock (a node orphaned by inode
	 * reuse has its identity cleared there). */
	char path[PW_PATH_MAX];
	pthread_rwlock_rdlock(&fs->tree_lock);
	dev_t dev = n->dev;
	ino_t ino = n->ino;
	int r = n->is_root ? (path[0] = '\0', 0) : pw_path_of_locked(fs, n, path);
	pthread_rwlock_unlock(&fs->tree_lock);
	if (r < 0)
		return r;
	if (n->is_root)
		return pw_openat_beneath(fs, path, flags, 0);
	/* Open with O_NONBLOCK, so a FIFO swapped in for the node's name cannot block this
	 * worker, and without O_TRUNC, so nothing changes before the object is verified to be
	 * the node's own. Then restore the caller's blocking mode and truncate. */
	int oflags = (flags & O_PATH) ? flags : (flags & ~O_TRUNC) | O_NONBLOCK | O_NOCTTY;
	int fd = pw_openat_beneath(fs, path, oflags, 0);
	if (fd < 0)
		return fd;
	r = verify_identity(dev, ino, fd);
	/* F_SETFL sets only these bits; we know each one's wanted value from FLAGS. */
	if (r == 0 && !(flags & (O_NONBLOCK | O_PATH)) &&
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
