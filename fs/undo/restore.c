/* SPDX-License-Identifier: MIT */
/*
 * changes.undo: putting back what the view changed (history.h holds the record it reads).
 *
 * Undo replays the rows of the chosen change sets backwards (keep.h says why that is
 * enough): a kept path gets its original back (content in place, so hard links stay
 * linked; then owner, mode, xattrs and times), a path that was new is removed, a rename is
 * reversed. Directories get their times last, once every name inside them is back. Before
 * anything is touched, every path is checked for changes made outside the view since the
 * view last changed it; one such path refuses the whole undo unless forced. The undo runs
 * in a change set of its own, recorded like any other, so it can be undone in turn.
 *
 * The store's lock is held while rows are read and while an undo runs, so the FUSE layer's
 * keeps wait for it (and an undo sees no half-kept row).
 */
#include "history.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "binpatch.h"
#include "gitdiff.h"
#include "inode.h"
#include "keep.h"
#include "object.h"
#include "overlap.h"
#include "pending.h"
#include "path.h"
#include "proto.h"
#include "quote.h"
#include "pw_limits.h"
#include "util.h"

/* ---- undo ------------------------------------------------------------------------------ */

/* Opens PATH's parent beneath the project; *ret_name points into PATH. */
static int open_parent(ctx *x, const char *path, const char **ret_name)
{
	const char *slash = strrchr(path, '/');
	char dir[PW_PATH_MAX];
	if (!slash) {
		*ret_name = path;
		return openat(x->root, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	}
	/* A parent longer than the buffer is refused: cut, it would name another directory. */
	if ((size_t)(slash - path) >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	*ret_name = slash + 1;
	return pw_openat_beneath(x->fs, dir, O_PATH | O_DIRECTORY, 0);
}

/* Does blob HASH still hold the content it is named after? A file kept by a link
 * (originals.c) can have been written since by a process that held it open: -EBADMSG, and
 * nothing is restored from it. */
static int verify_blob(pw_undo_orig_store *s, const char *hash)
{
	_cleanup_free_ char *path = pw_undo_orig_blob_path(s, hash);
	_cleanup_close_ int b = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (b < 0)
		return path ? negative_errno() : -ENOMEM;
	char hex[PW_SHA256_HEX];
	int r = pw_undo_hist_hash_file(b, hex);
	if (r < 0)
		return r;
	return streq(hex, hash) ? 0 : -EBADMSG;
}

/* Copies blob HASH into FD (from offset 0; FD is empty). */
static int fill_from_blob(pw_undo_orig_store *s, const char *hash, int fd)
{
	_cleanup_free_ char *path = pw_undo_orig_blob_path(s, hash);
	_cleanup_close_ int b = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (b < 0)
		return path ? negative_errno() : -ENOMEM;
	if (ioctl(fd, FICLONE, b) == 0)
		return 0;
	char buf[65536];
	for (;;) {
		ssize_t n = read(b, buf, sizeof(buf));
		if (n < 0)
			return negative_errno();
		if (n == 0)
			return 0;
		for (ssize_t w = 0; w < n;) {
			ssize_t k = write(fd, buf + w, (size_t)(n - w));
			if (k < 0)
				return negative_errno();
			w += k;
		}
	}
}

static struct timespec ts_of(int64_t ns)
{
	return (struct timespec){.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
}

/* Owner, mode, xattrs (and times, unless a directory: those come last) of O on FD. */
static int apply_meta(int fd, const pw_undo_orig_object *o, bool times)
{
	int r = 0;
	if (fchownat(fd, "", o->uid, o->gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 &&
	    errno != EPERM)
		r = negative_errno();
	if (!S_ISLNK(o->mode)) {
		char proc[64];
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		if (chmod(proc, o->mode & 07777) < 0 && !r)
			r = negative_errno();
		pw_undo_orig_xattrs_apply(fd, o->xattrs, o->xattrs_len);
	}
	if (times) {
		struct timespec tv[2] = {ts_of(o->atime_ns), ts_of(o->mtime_ns)};
		if (utimensat(fd, "", tv, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 && !r)
			r = negative_errno();
	}
	return r;
}

typedef struct undo_run {
	ctx *x;
	bool force, dry;
	json_t *actions, *failed;
	pw_undo_pendings dirs;	/* directories whose times are set last */
	pw_undo_pendings links; /* files restored from a blob whose inode had other names */
} undo_run;

static void note_fail(undo_run *u, const char *path, const char *what, int r)
{
	json_array_append_new(
	    u->failed, json_pack("{s:s,s:s,s:s}", "path", path, "action", what, "error",
				 r == -EBADMSG	 ? "the kept original was changed after it was "
						   "kept (a process still wrote to it)"
				 : r == -ENODATA ? "its content was not kept (too big, unreadable, "
						   "or the store was full): not restored"
						 : strerror(-r)));
}

static int undo_remove(undo_run *u, const char *path);

/* The names in directory PATH (a NULL-ended malloc'd array of malloc'd strings), or NULL. */
static char **list_dir(ctx *x, const char *path)
{
	int fd = pw_undo_hist_open_beneath(x, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	for (struct dirent *de; (de = readdir(d));) {
		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		if (PW_GROW(names, cap, n + 1, 16) < 0 || !(names[n] = strdup(de->d_name)))
			break;
		names[++n] = NULL;
	}
	closedir(d);
	return names;
}

/* rm -rf of the directory PATH (--force: something the view did not make is in it), each
 * name recorded before it goes, as the view records an rm -r, so a redo puts it back. */
static int remove_tree(undo_run *u, const char *path)
{
	ctx *x = u->x;
	char **names = list_dir(x, path);
	int r = 0;
	for (size_t i = 0; names && names[i]; i++) {
		_cleanup_free_ char *child = NULL;
		if (asprintf(&child, "%s/%s", path, names[i]) < 0) {
			r = -ENOMEM;
			break;
		}
		int q = pw_undo_keep_path_locked(x->k, x->root, child, "undo", true);
		if (q == 0)
			q = undo_remove(u, child);
		if (q < 0 && !r)
			r = q;
	}
	for (size_t i = 0; names && names[i]; i++)
		free(names[i]);
	free(names);
	if (r < 0)
		return r;
	r = pw_undo_keep_path_locked(x->k, x->root, path, "undo", true);
	const char *name;
	_cleanup_close_ int pfd = r < 0 ? -1 : open_parent(x, path, &name);
	if (r == 0 && pfd < 0)
		r = pfd;
	if (r == 0 && unlinkat(pfd, name, AT_REMOVEDIR) < 0)
		r = negative_errno();
	return r;
}

/* Removes whatever is at PATH. */
static int undo_remove(undo_run *u, const char *path)
{
	const char *name;
	_cleanup_close_ int pfd = open_parent(u->x, path, &name);
	if (pfd < 0)
		return pfd == -ENOENT || pfd == -ENOTDIR ? 0 : pfd; /* nothing there */
	struct stat st;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : negative_errno();
	if (unlinkat(pfd, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) == 0) {
		if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) /* its other names' ctime */
			pw_undo_keep_touched_ino(u->x->fs, st.st_dev, st.st_ino);
		return 0;
	}
	if (errno == ENOTEMPTY && u->force)
		return remove_tree(u, path);
	return negative_errno();
}

static void act(undo_run *u, const char *what, const char *path, const char *path2);
static void stamp(ctx *x, const char *path);

/* Makes NAME in PFD (PATH) a name of the file open at OFD (another name of it: OTHER),
 * replacing what is there. The inode's state is recorded under OTHER first: what follows
 * changes it (content, metadata), and a redo puts it back. */
static int link_over(undo_run *u, int pfd, const char *name, const char *path, int ofd,
		     const char *other)
{
	ctx *x = u->x;
	int r = pw_undo_keep_path_locked(x->k, x->root, other, "undo", false);
	if (r < 0)
		return r;
	char tmp[64], proc[64];
	snprintf(tmp, sizeof(tmp), ".piworkfs-relink-%d", (int)getpid());
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", ofd);
	(void)unlinkat(pfd, tmp, 0);
	if (linkat(AT_FDCWD, proc, pfd, tmp, AT_SYMLINK_FOLLOW) < 0)
		return negative_errno();
	if (renameat(pfd, tmp, pfd, name) < 0) {
		r = negative_errno();
		(void)unlinkat(pfd, tmp, 0);
		return r;
	}
	act(u, "relink", path, other);
	return 0;
}

/* Opens OTHER when it holds the content HEX (an original whose blob is HEX). */
static int open_same_content(ctx *x, const char *other, const char *hex)
{
	char got[PW_SHA256_HEX];
	int fd = pw_undo_hist_open_beneath(x, other, O_RDONLY);
	if (fd >= 0 && (pw_undo_hist_hash_file(fd, got) < 0 || !streq(got, hex)))
		fd = (close(fd), -ESTALE);
	return fd;
}

/* Do entries I and J of the restored files name one kept inode? */
static bool same_kept(const undo_run *u, size_t i, size_t j)
{
	const pw_undo_pending *a = &u->links.v[i], *b = &u->links.v[j];
	return i != j && a->path && b->path && !streq(a->path, b->path) && a->o->dev == b->o->dev &&
	       a->o->ino == b->o->ino;
}

/* Does the restored file J hold its kept inode itself (restored in place: it survived)? A
 * file the undo made can have the kept inode's number (freed, and given again), never the
 * inode. */
static bool holds_kept(undo_run *u, size_t j)
{
	const pw_undo_pending *l = &u->links.v[j];
	struct stat st;
	return !l->made_ino && pw_undo_hist_stat_beneath(u->x, l->path, &st) == 0 &&
	       (uint64_t)st.st_dev == l->o->dev && (uint64_t)st.st_ino == l->o->ino;
}

/* Is PATH a file this undo made (not linked to another inode since)? */
static bool made_here(undo_run *u, const char *path)
{
	struct stat st;
	if (pw_undo_hist_stat_beneath(u->x, path, &st) < 0)
		return false;
	for (size_t j = 0; j < u->links.n; j++)
		if (u->links.v[j].made_ino == (uint64_t)st.st_ino &&
		    u->links.v[j].made_dev == (uint64_t)st.st_dev)
			return true;
	return false;
}

/*
 * What the I-th restored file (links.v[I], a name of an inode with others when it was kept)
 * is to be a hard link of, open in *RET_FD with its name in OTHER:
 * - the kept inode, when this undo restored it in place under another name: it holds what
 *   it held where the undo's scope began, which is what every name of it held;
 * - else the kept inode under another name the project still has, when it holds this row's
 *   content (unchanged since);
 * - else the restored file of the oldest row that kept it (the last in the replay's order),
 *   so the names restored are links of one another again.
 * Returns whether there is one.
 */
static bool relink_target(undo_run *u, size_t i, char other[PW_PATH_MAX], int *ret_fd)
{
	ctx *x = u->x;
	const pw_undo_pending *l = &u->links.v[i];
	for (size_t j = 0; j < u->links.n; j++)
		if (same_kept(u, i, j) && holds_kept(u, j)) {
			snprintf(other, PW_PATH_MAX, "%s", u->links.v[j].path);
			*ret_fd = pw_undo_hist_open_beneath(x, other, O_RDONLY);
			return *ret_fd >= 0;
		}
	if (pw_undo_keep_other_name(x->k, (dev_t)l->o->dev, (ino_t)l->o->ino, l->path, other) ==
		0 &&
	    !made_here(u, other)) {
		*ret_fd = open_same_content(x, other, l->o->blob);
		if (*ret_fd >= 0)
			return true;
	}
	for (size_t j = u->links.n; j-- > 0;)
		if (same_kept(u, i, j)) {
			if (j < i)
				return false; /* I is the oldest: the others link to it */
			snprintf(other, PW_PATH_MAX, "%s", u->links.v[j].path);
			*ret_fd = pw_undo_hist_open_beneath(x, other, O_RDONLY);
			return *ret_fd >= 0;
		}
	return false;
}

/* Makes the I-th restored file a hard link again, as it was (relink_target), or leaves the
 * restored copy. Run after every row, so the other names' restores have happened whatever
 * the order. */
static void undo_relink(undo_run *u, size_t i)
{
	ctx *x = u->x;
	const pw_undo_pending *l = &u->links.v[i];
	bool partner = false; /* the last name of an inode with others can say nlink 1 */
	for (size_t j = 0; j < u->links.n && !partner; j++)
		partner = same_kept(u, i, j);
	struct stat st;
	if (!l->path || (l->o->nlink <= 1 && !partner) ||
	    pw_undo_hist_stat_beneath(x, l->path, &st) < 0 || !S_ISREG(st.st_mode) ||
	    holds_kept(u, i))
		return; /* never linked, gone again, or the same inode already */
	char other[PW_PATH_MAX];
	_cleanup_close_ int ofd = -1;
	if (!relink_target(u, i, other, &ofd))
		return;
	struct stat ost;
	if (fstat(ofd, &ost) < 0 || !S_ISREG(ost.st_mode) ||
	    (ost.st_dev == st.st_dev && ost.st_ino == st.st_ino))
		return; /* linked already */
	/* The inode at OTHER takes this name's metadata (relinks_meta). */
	const char *name;
	_cleanup_close_ int pfd = open_parent(x, l->path, &name);
	if (pfd >= 0 && link_over(u, pfd, name, l->path, ofd, other) == 0)
		stamp(x, l->path);
}

/* Once linked again, names of one inode share its owner, mode, xattrs and times: those of
 * the oldest row that kept it, whose name may be gone again (a link the change set made,
 * removed last). The restored files are in the replay's order, newest row first. */
static void relinks_meta(undo_run *u)
{
	for (size_t i = 0; i < u->links.n; i++) {
		const pw_undo_pending *l = &u->links.v[i];
		const pw_undo_orig_object *oldest = l->o;
		for (size_t j = u->links.n; j-- > i;)
			if (u->links.v[j].o->dev == l->o->dev &&
			    u->links.v[j].o->ino == l->o->ino) {
				oldest = u->links.v[j].o;
				break;
			}
		_cleanup_close_ int fd =
		    l->path ? pw_undo_hist_open_beneath(u->x, l->path, O_PATH) : -1;
		struct stat st;
		if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
			(void)apply_meta(fd, oldest, true);
			stamp(u->x, l->path);
		}
	}
}

/* Is OP one that changes a name (the row keeps what the name held), not the object itself? */
static bool name_op(const char *op)
{
	static const char *const names[] = {"create", "mknod", "mkdir",	 "symlink", "link",
					    "unlink", "rmdir", "rename", "dir"};
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (streq_ptr(op, names[i]))
			return true;
	return false;
}

/* Did the change sets undone change the inode O kept itself (its content or metadata,
 * through any of its names: a row of it kept before such a change, or undo's own)? */
static bool changed_in_scope(const ctx *x, const pw_undo_orig_object *o)
{
	for (size_t i = 0; i < x->n_rows; i++) {
		const crow *r = &x->rows[i];
		if (r->selected && !r->move && r->o.present && r->o.dev == o->dev &&
		    r->o.ino == o->ino && !name_op(r->op))
			return true;
	}
	return false;
}

/* Did the view change the inode O kept after the change sets undone (a row of a later one
 * keeps it, or moves it)? Then its content now is that later change's, not the undo's to
 * put back. */
static bool kept_after_scope(const ctx *x, const pw_undo_orig_object *o)
{
	int64_t last = 0;
	for (size_t i = 0; i < x->n_rows; i++)
		if (x->rows[i].selected && x->rows[i].cs > last)
			last = x->rows[i].cs;
	for (size_t i = 0; i < x->n_rows; i++) {
		const crow *r = &x->rows[i];
		if (r->selected || r->cs <= last)
			continue;
		if ((r->o.present && r->o.dev == o->dev && r->o.ino == o->ino) ||
		    (r->move && r->src_dev == o->dev && r->src_ino == o->ino))
			return true;
	}
	return false;
}

/*
 * O, to be put back at PATH (NAME in PFD), was a name of an inode with others. When that
 * inode is still in the project under another name, PATH becomes its name again at once,
 * rather than a copy, and it gets O's content and metadata back for all its names, as they
 * were then (the rows replayed after this one, older changes, go further back). When it no
 * longer holds O's content, only if the change sets undone changed it (changed_in_scope)
 * and no later one did (kept_after_scope): changed by anything else since, a copy is what
 * PATH held. Returns 1 when linked, 0 when not (the caller makes a copy),
 * or -errno.
 */
static int link_to_kept(undo_run *u, int pfd, const char *name, const char *path,
			const pw_undo_orig_object *o)
{
	ctx *x = u->x;
	char other[PW_PATH_MAX];
	if (pw_undo_keep_other_name(x->k, (dev_t)o->dev, (ino_t)o->ino, path, other) < 0 ||
	    made_here(u, other))
		return 0;
	_cleanup_close_ int ofd = open_same_content(x, other, o->blob);
	bool refill = ofd == -ESTALE && changed_in_scope(x, o) && !kept_after_scope(x, o);
	if (refill)
		ofd = pw_undo_hist_open_beneath(x, other, O_RDONLY);
	if (ofd < 0)
		return 0;
	int r = link_over(u, pfd, name, path, ofd, other);
	if (r == 0 && refill) {
		_cleanup_close_ int wfd =
		    openat(pfd, name, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
		r = wfd < 0 ? negative_errno()
			    : fill_from_blob(pw_undo_keep_store(x->k), o->blob, wfd);
	}
	if (r == 0)
		r = apply_meta(ofd, o, true);
	return r < 0 ? r : 1;
}

/* Puts O back at PATH. */
static int undo_restore(undo_run *u, const char *path, const crow *rw)
{
	const pw_undo_orig_object *o = &rw->o;
	pw_undo_orig_store *s = pw_undo_keep_store(u->x->k);
	const char *name;
	if (!path[0]) { /* the root itself: metadata only */
		_cleanup_close_ int fd = openat(u->x->root, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
		int r = fd < 0 ? negative_errno() : apply_meta(fd, o, false);
		int q = pw_undo_pending_push(&u->dirs, path, o, NULL);
		return r < 0 ? r : q;
	}
	_cleanup_close_ int pfd = open_parent(u->x, path, &name);
	if (pfd < 0)
		return pfd;
	struct stat st;
	bool exists = fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
	int r = 0;
	/* A file with other names that is not the one kept (a link made over the name since)
	 * is another file: filled in place, it would change under its other names too. */
	bool other_file = exists && S_ISREG(st.st_mode) && st.st_nlink > 1 &&
			  ((uint64_t)st.st_dev != o->dev || (uint64_t)st.st_ino != o->ino);
	if (exists && ((st.st_mode & S_IFMT) != (o->mode & S_IFMT) || other_file)) {
		r = undo_remove(u, path);
		if (r < 0)
			return r;
		exists = false;
	}
	if (S_ISREG(o->mode)) {
		if (!o->blob[0])
			return -ENODATA; /* too big, unreadable or the store full: never kept */
		r = verify_blob(s, o->blob);
		if (r < 0)
			return r;
		bool kept_here =
		    exists && (uint64_t)st.st_dev == o->dev && (uint64_t)st.st_ino == o->ino;
		if (o->nlink > 1 && !kept_here) {
			r = link_to_kept(u, pfd, name, path, o);
			if (r != 0)
				return r < 0 ? r : pw_undo_pending_push(&u->links, path, o, NULL);
		}
		_cleanup_close_ int fd = openat(pfd, name,
						O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC |
						    (exists ? 0 : O_CREAT | O_EXCL),
						0600);
		if (fd < 0)
			return negative_errno();
		r = fill_from_blob(s, o->blob, fd);
		if (r == 0)
			r = apply_meta(fd, o, true);
		struct stat made;
		if (r == 0 && fstat(fd, &made) < 0)
			r = negative_errno();
		if (r == 0) /* a name to link again, or one the others link to */
			r = pw_undo_pending_push(&u->links, path, o, kept_here ? NULL : &made);
		return r;
	}
	if (S_ISLNK(o->mode)) {
		if (exists) {
			char buf[PATH_MAX + 1];
			ssize_t n = readlinkat(pfd, name, buf, sizeof(buf) - 1);
			if (n < 0 || (buf[n] = '\0', !streq_ptr(buf, o->target))) {
				if (unlinkat(pfd, name, 0) < 0)
					return negative_errno();
				exists = false;
			}
		}
		if (!exists && symlinkat(o->target ? o->target : "", pfd, name) < 0)
			return negative_errno();
		_cleanup_close_ int fd = openat(pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		return fd < 0 ? negative_errno() : apply_meta(fd, o, true);
	}
	if (S_ISDIR(o->mode)) {
		if (!exists && mkdirat(pfd, name, 0700) < 0)
			return negative_errno();
		_cleanup_close_ int fd =
		    openat(pfd, name, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
		r = fd < 0 ? negative_errno() : apply_meta(fd, o, false);
		int q = pw_undo_pending_push(&u->dirs, path, o, NULL);
		return r < 0 ? r : q;
	}
	if (!exists && mknodat(pfd, name, o->mode, 0) < 0)
		return negative_errno();
	_cleanup_close_ int fd = openat(pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? negative_errno() : apply_meta(fd, o, true);
}

/* Is the object at PATH gone (no such name, or its directory replaced by a file)? Any
 * other failure to look is not an answer: the caller acts, and reports what that gives. */
static bool gone(ctx *x, const char *path)
{
	const char *name;
	struct stat st;
	_cleanup_close_ int pfd = open_parent(x, path, &name);
	int r = pfd < 0 ? pfd : fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	return r == -ENOENT || r == -ENOTDIR;
}

/* Reverses the rename FROM -> TO (or exchanges them again). */
static int undo_move(undo_run *u, const crow *rw)
{
	const char *fname, *tname;
	_cleanup_close_ int fp = open_parent(u->x, rw->path, &fname);
	_cleanup_close_ int tp = open_parent(u->x, rw->path2, &tname);
	if (tp == -ENOTDIR) /* its directory replaced by a file since: the object is gone */
		return -ENOENT;
	if (fp < 0)
		return fp;
	if (tp < 0)
		return tp;
	if (renameat2(tp, tname, fp, fname, rw->exchange ? RENAME_EXCHANGE : 0) < 0)
		return negative_errno();
	return 0;
}

static void act(undo_run *u, const char *what, const char *path, const char *path2)
{
	json_t *a = json_pack("{s:s,s:s}", "action", what, "path", path);
	if (a && path2)
		json_object_set_new(a, "to", json_string(path2));
	json_array_append_new(u->actions, a);
}

/* A file's ctime comes from the kernel's coarse clock, which may step past the time of the
 * row written just before the change: a tick's slack. */
static int64_t coarse_tick(void)
{
	static int64_t tick;
	if (!tick) {
		struct timespec res;
		tick = clock_getres(CLOCK_REALTIME_COARSE, &res) == 0
			   ? (int64_t)res.tv_sec * 1000000000 + res.tv_nsec
			   : 10000000;
	}
	return tick;
}

/* Since when the object of row RW is the view's: the row's time, but for a row of an undo,
 * which writes the backing tree itself (inodes the view never learns), the end of the
 * undo's change set (the start of the next one; none yet: the undo still runs). */
static int64_t view_since(const ctx *x, const crow *rw)
{
	for (size_t i = 0; i < x->n_sets; i++) {
		if (x->sets[i].id != rw->cs || !pw_undo_hist_undo_reason(x->sets[i].reason))
			continue;
		return i + 1 < x->n_sets ? x->sets[i + 1].started_ns : INT64_MAX;
	}
	return rw->time_ns;
}

/*
 * The last time the record says the view changed the object row I recorded at PATH: the
 * row's own (view_since), or a later row's that renamed it (an exchange, whose other side
 * the record does not name) or kept it again at its path then, with a tick's slack
 * (coarse_tick).
 */
static int64_t view_last_change(const ctx *x, size_t i, const char *path)
{
	int64_t tick = coarse_tick();
	int64_t last = view_since(x, &x->rows[i]);
	char p[PW_PATH_MAX];
	snprintf(p, sizeof(p), "%s", path);
	for (size_t j = i + 1; j < x->n_rows; j++) {
		const crow *m = &x->rows[j];
		bool touches = m->move ? pw_undo_hist_path_under(p, m->path) ||
					     (m->exchange && pw_undo_hist_path_under(p, m->path2))
				       : streq(m->path, p);
		if (touches && view_since(x, m) > last)
			last = view_since(x, m);
		pw_undo_hist_follow_move(m, p);
	}
	return last > INT64_MAX - tick ? INT64_MAX : last + tick;
}

/* Was the object ST last changed by a rename a selected row recorded (one through the view,
 * which the kernel may have had the view forget since: an exchange invalidates both names;
 * a name a link made, then exchanged, leads to it)? Its ctime is then that rename's: a later
 * one is a later change, or another file that was handed the inode number since. */
static bool moved_by_view(const ctx *x, const struct stat *st)
{
	int64_t last = 0;
	for (size_t i = 0; i < x->n_rows; i++) {
		const crow *m = &x->rows[i];
		if (m->selected && m->move && m->src_dev == (uint64_t)st->st_dev &&
		    m->src_ino == (uint64_t)st->st_ino && view_since(x, m) > last)
			last = view_since(x, m);
	}
	int64_t ctime = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
	return last && (last > INT64_MAX - coarse_tick() || ctime <= last + coarse_tick());
}

/* Was the object now at CUR changed outside the view after the view last changed it (row
 * RW)? An inode the view changed carries the time of its last change. An inode the view
 * does not know at all, and not the original's own (the view may have forgotten an inode
 * it wrote in place), was put there from outside (a `sed -i` or an editor's save on the
 * backing copy renames a new file over it) when it changed after this daemon started and
 * after the row: what the view itself made since the start it knows, unless the kernel
 * had it forget the node since (then this errs on the side of a conflict, which --force
 * overrides). */
static bool changed_outside(ctx *x, size_t i, const char *cur)
{
	const crow *rw = &x->rows[i];
	_cleanup_close_ int fd = pw_undo_hist_open_beneath(x, cur, O_PATH);
	pw_object ob;
	if (fd < 0 || pw_object_at(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, &ob) < 0 ||
	    S_ISDIR(ob.st.st_mode))
		return false;
	const struct stat st = ob.st;
	pw_inode_lock_read(x->fs);
	pw_inode *n = pw_inode_find_locked(x->fs, st.st_dev, st.st_ino);
	int64_t last = n ? atomic_load(&n->undo.changed_ns) : 0;
	pw_inode_unlock(x->fs);
	int64_t ctime = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
	bool same = rw->move ? st.st_dev == rw->src_dev && st.st_ino == rw->src_ino
			     : rw->o.present && st.st_dev == rw->o.dev && st.st_ino == rw->o.ino;
	if (!n && (same || moved_by_view(x, &st)))
		return false; /* the object the row names (moved, or changed in place): unknown */
	int64_t forgot = n ? 0 : pw_undo_keep_forgotten(x->k, st.st_dev, st.st_ino, ob.birth_ns);
	if (forgot) /* the view changed it, then the kernel had it forget the node */
		return ctime > forgot;
	if (!n)
		return ctime > x->call->started_ns &&
		       ctime > view_last_change(x, i, rw->move ? rw->path2 : rw->path);
	return last && ctime > last;
}

/* The undo changed PATH as the view would have: later changes outside are told apart
 * from it (changed_outside). */
static void stamp(ctx *x, const char *path)
{
	struct stat st;
	if (pw_undo_hist_stat_beneath(x, path, &st) == 0)
		pw_undo_keep_touched_ino(x->fs, st.st_dev, st.st_ino);
}

static void one_row(undo_run *u, const crow *rw)
{
	ctx *x = u->x;
	pw_undo *k = x->k;
	int r;
	if (rw->move) {
		act(u, rw->exchange ? "exchange" : "move-back", rw->path2, rw->path);
		if (u->dry)
			return;
		pw_undo_pending_moved(&u->links, rw->path, rw->path2, rw->exchange);
		pw_undo_pending_moved(&u->dirs, rw->path, rw->path2, rw->exchange);
		/* The object gone since (removed, or its directory replaced by a file): no
		 * move, and none recorded, or a redo would move back what was never moved. */
		r = gone(x, rw->path2) ? -ENOENT : 0;
		if (r == 0 && !rw->exchange) /* at the old name now: the move back replaces it */
			(void)pw_undo_keep_path_locked(k, x->root, rw->path, "undo", true);
		if (r == 0)
			(void)pw_undo_keep_move_locked(k, x->root, rw->path2, rw->path,
						       rw->exchange);
		if (r == 0)
			r = undo_move(u, rw);
		if (r < 0 && r != -ENOENT) {
			note_fail(u, rw->path2, "move-back", r);
		} else {
			stamp(x, rw->path);
			/* An exchange moved the other object too (its ctime is now): a redo
			 * must not take that for a change from outside. */
			if (rw->exchange && r == 0)
				stamp(x, rw->path2);
		}
		if (rw->o.present) {
			(void)pw_undo_keep_path_locked(k, x->root, rw->path2, "undo",
						       !S_ISDIR(rw->o.mode));
			r = undo_restore(u, rw->path2, rw);
			if (r < 0)
				note_fail(u, rw->path2, "restore", r);
			else
				stamp(x, rw->path2);
		}
		return;
	}
	if (!rw->implicit)
		act(u, rw->o.present ? "restore" : "remove", rw->path, NULL);
	if (u->dry)
		return;
	pw_undo_pending_drop(&u->links, rw->path, false);
	if (!rw->o.present || !S_ISDIR(rw->o.mode)) /* no directory is left there */
		pw_undo_pending_drop(&u->dirs, rw->path, true);
	/* A directory there goes unless the row puts a directory back. */
	r = pw_undo_keep_path_locked(k, x->root, rw->path, "undo",
				     !rw->o.present || !S_ISDIR(rw->o.mode));
	if (r < 0) {
		note_fail(u, rw->path, "keep", r);
		return;
	}
	r = rw->o.present ? undo_restore(u, rw->path, rw) : undo_remove(u, rw->path);
	if (r < 0)
		note_fail(u, rw->path, rw->o.present ? "restore" : "remove", r);
	else
		stamp(u->x, rw->path);
}

/* redo: selects the rows of the latest undo no redo reversed yet (putting them back puts
 * back what that undo took away). */
static int select_redo(ctx *x, int64_t *ret_undo)
{
	const cset *u = NULL;
	for (size_t i = x->n_sets; i-- > 0 && !u;)
		if (streq_ptr(x->sets[i].reason, "undo") && !x->sets[i].redone_by &&
		    x->sets[i].undoes)
			u = &x->sets[i];
	if (!u)
		return pw_undo_hist_failf(x, PW_RPC_NO_CHANGE,
					  "nothing to redo: no undo left that a redo has "
					  "not reversed");
	for (size_t i = 0; i < x->n_rows; i++)
		x->rows[i].selected = x->rows[i].cs == u->id;
	*ret_undo = u->id;
	return 0;
}

/* The change sets whose rows the undo takes (oldest first): a JSON array. */
static json_t *sets_undone(const ctx *x)
{
	json_t *a = json_array();
	int64_t last = 0;
	for (size_t i = 0; a && i < x->n_rows; i++) {
		const crow *r = &x->rows[i];
		if (!r->selected || r->cs == last)
			continue;
		bool seen = false;
		size_t k;
		json_t *item;
		json_array_foreach(a, k, item) seen = seen || json_integer_value(item) == r->cs;
		if (!seen)
			json_array_append_new(a, json_integer(r->cs));
		last = r->cs;
	}
	return a ? a : json_array();
}

/* Records in the store which rows the undo (or redo) change set UNDO_CS put back, and for a
 * redo, which undo it reversed: the next undo steps back past them, redo finds the undo
 * to reverse. Lock held. Best effort: the files are back either way. */
static void note_undone(ctx *x, int64_t undo_cs, int64_t redo_of)
{
	pw_undo_orig_store *s = pw_undo_keep_store(x->k);
	json_t *ids = json_array();
	for (size_t i = 0; ids && i < x->n_rows; i++)
		if (x->rows[i].selected)
			json_array_append_new(ids, json_integer(x->rows[i].id));
	_cleanup_free_ char *text = ids ? json_dumps(ids, JSON_COMPACT) : NULL;
	json_decref(ids);
	if (text)
		(void)pw_undo_orig_changeset_set_undoes(s, undo_cs, text);
	if (redo_of)
		(void)pw_undo_orig_changeset_set_redone(s, redo_of, undo_cs);
}

/*
 * What the undo does, one line per path, as the person meant the changes (the rows stay
 * exact underneath): "restore P" (P's original comes back over what is there), "recreate
 * P" (P is gone: made again), "remove P" (made by the change set), "rename back B -> A".
 * A temporary renamed over a file is that file's restore; a name made and removed again
 * within the change set is nothing. Read before the undo runs, from the tree as it is, and
 * in the order the undo acts: the latest change first (a file goes before the directory the
 * change set made for it; a deleted directory comes back before what was in it).
 */
static json_t *undo_summary(ctx *x)
{
	json_t *out = json_array(), *at = json_object();
	size_t shown = 0;
	bool truncated = false;
	for (size_t si = 0; out && at && si < x->n_sets; si++) {
		json_t *changes = json_array(), *e;
		if (!changes)
			break;
		pw_undo_hist_set_listing(x, &x->sets[si], changes, &shown, &truncated, true);
		for (size_t k = json_array_size(changes); k-- > 0;) { /* oldest first */
			e = json_array_get(changes, k);
			size_t i = (size_t)json_integer_value(json_object_get(e, "row"));
			const char *kind = json_string_value(json_object_get(e, "kind"));
			const char *path = json_string_value(json_object_get(e, "path"));
			const char *to = json_string_value(json_object_get(e, "to"));
			char cur[PW_PATH_MAX];
			struct stat st;
			const char *verb, *target = path, *from = NULL;
			pw_undo_hist_current_path(x, i, to ? to : path, cur);
			bool exists = pw_undo_hist_stat_beneath(x, cur, &st) == 0;
			if (streq_ptr(kind, "created")) {
				if (!exists)
					continue;
				verb = "remove", target = cur;
			} else if (to || !streq(cur, path)) {
				if (!exists)
					continue; /* gone since: nothing to rename back */
				verb = "rename back", from = cur;
			} else {
				verb = exists ? "restore" : "recreate";
			}
			json_t *prev = json_object_get(at, target);
			if (prev && !from)
				continue; /* the earliest change of a path holds what comes back */
			json_t *a = json_pack("{s:s,s:s}", "action", verb, "path", target);
			if (a && from)
				json_object_set_new(a, "from", json_string(from));
			if (prev) { /* a rename back of a path restored too: one line */
				json_object_update(prev, a);
				json_decref(a);
				continue;
			}
			json_object_set(at, target, a);
			json_array_append_new(out, a);
		}
		json_decref(changes);
	}
	json_decref(at);
	if (!out)
		return json_array();
	json_t *acting = json_array(); /* built oldest first (the earliest change of a path
					* holds what comes back): the undo acts newest first */
	for (size_t k = json_array_size(out); acting && k-- > 0;)
		json_array_append(acting, json_array_get(out, k));
	json_decref(out);
	return acting ? acting : json_array();
}

/* Whether the call selected any row to act on. An undo that finds nothing starts no change
 * set: an empty "undo" set would be the one the next redo reverses, and it would do nothing. */
static bool any_selected(const ctx *x)
{
	for (size_t i = 0; i < x->n_rows; i++)
		if (x->rows[i].selected)
			return true;
	return false;
}

int pw_undo_changes_undo(const pw_undo_call *call, json_t *params, json_t **ret, pw_undo_fail *fail)
{
	_cleanup_(pw_undo_hist_ctx_done) ctx x = {.root = -1};
	int sr = pw_undo_hist_setup(&x, call, fail, PW_UNDO_REFUSED_UNDO);
	if (sr < 0)
		return sr;
	bool all = json_is_true(json_object_get(params, "all"));
	bool redo = json_is_true(json_object_get(params, "redo"));
	if (!all && !redo && !json_array_size(json_object_get(params, "paths")))
		return pw_undo_hist_failf(&x, PW_RPC_INVALID_PARAMS,
					  "name the paths to undo, or all");
	undo_run u = {.x = &x,
		      .force = json_is_true(json_object_get(params, "force")),
		      .dry = json_is_true(json_object_get(params, "dry_run")),
		      .actions = json_array(),
		      .failed = json_array()};
	json_t *conflicts = json_array();
	json_t *refreshed = json_array(); /* git's caches changed outside: no conflict */
	pw_undo_orig_store *s = pw_undo_keep_store(x.k);
	int64_t undo_cs = 0;
	pw_undo_orig_lock(s);
	int r = pw_undo_hist_load(&x, params, SCOPE_UNDO);
	int64_t redo_of = 0;
	if (r == 0)
		r = redo ? select_redo(&x, &redo_of) : pw_undo_hist_check_paths_changed(&x, true);
	json_t *summary = r == 0 ? undo_summary(&x) : NULL;
	/* Changed outside the view since: refused unless forced. */
	for (size_t i = 0; r == 0 && i < x.n_rows; i++) {
		const crow *rw = &x.rows[i];
		if (!rw->selected || rw->implicit)
			continue;
		char cur[PW_PATH_MAX];
		pw_undo_hist_current_path(&x, i, rw->move ? rw->path2 : rw->path, cur);
		if (!changed_outside(&x, i, cur))
			continue;
		/* git rewrites its index when the person only reads (`git status`): put back
		 * as recorded, said apart, never a conflict */
		json_array_append_new(pw_git_is_cache(cur) ? refreshed : conflicts,
				      json_string(cur));
	}
	bool refuse = json_array_size(conflicts) && !u.force;
	bool acts = !u.dry && !refuse && any_selected(&x);
	pw_undo_orig_unlock(s);
	if (r < 0)
		goto out;
	if (acts) {
		r = pw_undo_keep_begin(x.k, redo ? "redo" : "undo", NULL, &undo_cs);
		if (r < 0) {
			r = pw_undo_hist_failf(&x, PW_RPC_INTERNAL_ERROR,
					       "cannot start a change set: %s", strerror(-r));
			goto out;
		}
	}
	pw_undo_orig_lock(s);
	for (size_t i = x.n_rows; !refuse && i-- > 0;)
		if (x.rows[i].selected)
			one_row(&u, &x.rows[i]);
	for (size_t i = 0; i < u.links.n; i++)
		undo_relink(&u, i);
	relinks_meta(&u);
	/* Directories' times last (in the order met: the earliest row's wins). */
	for (size_t i = 0; i < u.dirs.n; i++) {
		const pw_undo_pending *d = &u.dirs.v[i];
		_cleanup_close_ int fd =
		    d->path ? pw_undo_hist_open_beneath(&x, d->path, O_PATH) : -1;
		struct timespec tv[2] = {ts_of(d->o->atime_ns), ts_of(d->o->mtime_ns)};
		if (fd >= 0)
			(void)utimensat(fd, "", tv, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
	}
	if (acts)
		note_undone(&x, undo_cs, redo_of);
	pw_undo_orig_unlock(s);
	if (acts)
		(void)pw_undo_keep_begin(x.k, redo ? "after-redo" : "after-undo", NULL, NULL);
	if (refuse) {
		char names[2048] = "";
		size_t i, used = 0;
		json_t *item;
		json_array_foreach(conflicts, i, item)
		{
			_cleanup_free_ char *q = pw_quote(json_string_value(item));
			int n = snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "",
					 q ? q : "?");
			if (n < 0 || (size_t)n >= sizeof(names) - used) {
				snprintf(names + used, sizeof(names) - used, ", ...");
				break;
			}
			used += (size_t)n;
		}
		r = pw_undo_hist_failf(
		    &x, PW_RPC_REFUSED,
		    "refused: changed outside the view since the view changed it: %s "
		    "(--force to undo anyway)",
		    names);
		fail->data = json_pack("{s:O}", "conflicts", conflicts);
		goto out;
	}
	*ret = json_pack("{s:b,s:O,s:O,s:O,s:O,s:I,s:o}", "dry_run", u.dry, "actions", u.actions,
			 "failed", u.failed, "conflicts", conflicts, "refreshed", refreshed,
			 "changeset", (json_int_t)undo_cs, "undoes", sets_undone(&x));
	if (*ret && summary)
		json_object_set(*ret, "summary", summary);
	if (*ret && redo_of)
		json_object_set_new(*ret, "redo_of", json_integer(redo_of));
	r = *ret ? 0 : pw_undo_hist_failf(&x, PW_RPC_INTERNAL_ERROR, "out of memory");
out:
	pw_undo_pending_done(&u.dirs);
	pw_undo_pending_done(&u.links);
	json_decref(u.actions);
	json_decref(u.failed);
	json_decref(conflicts);
	json_decref(refreshed);
	json_decref(summary);
	return r < 0 ? r : 0;
}
