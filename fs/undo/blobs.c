/* SPDX-License-Identifier: MIT */
/*
 * The contents the store of originals keeps (originals.h has the contract; orig_store.h
 * the store's inside): blobs by SHA-256, xattrs, the cap and the floor, retention.
 *
 * Why O_TMPFILE and linkat: a blob gets its name only once its whole content is written,
 * so no reader, and no daemon restarted after a SIGKILL, can ever see half a blob; a kill
 * in the middle leaves an anonymous file that the filesystem frees by itself. Where
 * O_TMPFILE is not supported the blob is written under a temporary name in DIR/tmp and
 * renamed; leftovers there are removed when the store is opened.
 *
 * Why never a link: a file about to lose its only name (an unlink, a rename over it) was
 * once kept by linking its inode under its hash, which cost no copy. But the inode stays
 * reachable after the change: a descriptor opened before (outside the view, or through the
 * view for reading and reopened for writing through /proc/self/fd), or an open(O_WRONLY)
 * that raced the keep, could write it, and the kept original was gone (issue 35, finding 5).
 * A kept original must not change once the change it precedes is allowed, so every blob is
 * an inode of the store's own: a reflink where the filesystem has them (btrfs, xfs: no
 * copy, no space until one side changes), a copy otherwise. The reflink is hashed after it
 * is made, so the name is that of exactly what is kept.
 */
#include "originals.h"
#include "orig_store.h"
#include "thread.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "copyhash.h"
#include "store/db.h"
#include "pw_limits.h"
#include "util.h"

static int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

/* ---- xattrs ---------------------------------------------------------------------------- */

static void put_u32(char **p, uint32_t v)
{
	memcpy(*p, &v, 4);
	*p += 4;
}

int pw_undo_orig_xattrs_read(int fd, void **ret, size_t *ret_len)
{
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	ssize_t n = listxattr(proc, NULL, 0);
	if (n <= 0) {
		*ret = NULL;
		*ret_len = 0;
		return 0; /* none, or a filesystem without them */
	}
	_cleanup_free_ char *names = malloc((size_t)n);
	if (!names)
		return -ENOMEM;
	n = listxattr(proc, names, (size_t)n);
	if (n < 0)
		return negative_errno();
	size_t cap = 0, len = 0;
	_cleanup_free_ char *out = NULL;
	for (char *name = names; name < names + n; name += strlen(name) + 1) {
		ssize_t v = getxattr(proc, name, NULL, 0);
		if (v < 0)
			continue; /* not ours to read (trusted.*, security.* for some) */
		size_t need = len + 8 + strlen(name) + (size_t)v;
		if (need > cap) {
			size_t ncap = need * 2 + 64;
			char *nout = realloc(out, ncap);
			if (!nout)
				return -ENOMEM;
			out = nout;
			cap = ncap;
		}
		char *p = out + len;
		put_u32(&p, (uint32_t)strlen(name));
		memcpy(p, name, strlen(name));
		p += strlen(name);
		char *vlen = p;
		p += 4;
		v = getxattr(proc, name, p, (size_t)v);
		if (v < 0)
			continue;
		put_u32(&vlen, (uint32_t)v);
		len = (size_t)(p - out) + (size_t)v;
	}
	*ret = len ? TAKE_PTR(out) : NULL;
	*ret_len = len;
	return 0;
}

/* Does the serialized BUF hold attribute NAME? */
static bool xattrs_has(const char *buf, size_t len, const char *name)
{
	size_t off = 0, nl = strlen(name);
	while (off + 8 <= len) {
		uint32_t a, b;
		memcpy(&a, buf + off, 4);
		if (off + 4 + a + 4 > len)
			return false;
		memcpy(&b, buf + off + 4 + a, 4);
		if (a == nl && memcmp(buf + off + 4, name, nl) == 0)
			return true;
		off += 8 + a + b;
	}
	return false;
}

int pw_undo_orig_xattrs_apply(int fd, const void *vbuf, size_t len)
{
	const char *buf = vbuf;
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	ssize_t n = listxattr(proc, NULL, 0);
	if (n > 0) {
		_cleanup_free_ char *names = malloc((size_t)n);
		if (!names)
			return -ENOMEM;
		n = listxattr(proc, names, (size_t)n);
		for (char *name = names; n > 0 && name < names + n; name += strlen(name) + 1)
			if (!xattrs_has(buf, len, name) && startswith(name, "user."))
				(void)removexattr(proc, name);
	}
	size_t off = 0;
	while (off + 8 <= len) {
		uint32_t a, b;
		char name[XATTR_NAME_MAX + 1];
		memcpy(&a, buf + off, 4);
		if (a > XATTR_NAME_MAX || off + 4 + a + 4 > len)
			return -EBADMSG;
		memcpy(&b, buf + off + 4 + a, 4);
		if (off + 8 + a + b > len)
			return -EBADMSG;
		memcpy(name, buf + off + 4, a);
		name[a] = '\0';
		(void)setxattr(proc, name, buf + off + 8 + a, b, 0);
		off += 8 + a + b;
	}
	return 0;
}

/* ---- content --------------------------------------------------------------------------- */

/* A new anonymous file in the store (O_TMPFILE), or a named one in tmp/ (*ret_name). */
static int tmp_blob(pw_undo_orig_store *s, char ret_name[64])
{
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", s->blobs_fd);
	int fd = open(proc, O_TMPFILE | O_RDWR | O_CLOEXEC, 0400);
	if (fd >= 0) {
		ret_name[0] = '\0';
		return fd;
	}
	if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
		return negative_errno();
	static _Atomic unsigned counter;
	snprintf(ret_name, 64, "t%d-%u", (int)getpid(), counter++);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", s->tmp_fd);
	int dfd = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return negative_errno();
	fd = openat(dfd, ret_name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0400);
	int e = errno;
	close(dfd);
	return fd < 0 ? -e : fd;
}

/* Hashes FD from its start. */
static int hash_fd(int fd, pw_sha256 *c, char *buf)
{
	for (off_t off = 0;;) {
		ssize_t n = pread(fd, buf, COPY_CHUNK, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (n == 0)
			return 0;
		pw_sha256_update(c, buf, (size_t)n);
		off += n;
	}
}

/*
 * Takes the database's write lock, in the batch's transaction (opened now if need be), before
 * a blob is put in place under its name. Until the row that names it is committed, in that
 * same transaction, no prune (of this daemon or of another sharing the store) can find the
 * blob named by no row and remove it: a prune holds the write lock from its look for such
 * blobs to its commit. One that ran before has either not seen this content, or removed
 * it whole (file and record), and the link below makes it anew. Taken after the copy, not
 * before it: a large file's copy must not keep every other writer waiting.
 */
static int hold_for_blob(pw_undo_orig_store *s)
{
	return pw_undo_orig_txn_open(s);
}

/* Keeps the content of SRC (open for reading) as a blob; its hash in HEX. */
static int keep_content(pw_undo_orig_store *s, int src, uint64_t size, char hex[PW_SHA256_HEX])
{
	char tmpname[64];
	_cleanup_close_ int t = tmp_blob(s, tmpname);
	if (t < 0)
		return t;
	pw_sha256 c;
	pw_sha256_init(&c);
	int r;
	/* A reflink shares the extents (free on btrfs, xfs); the clone is then hashed, so the
	 * digest is that of exactly what is kept even if the original changes meanwhile. */
	if (ioctl(t, FICLONE, src) == 0) {
		_cleanup_free_ char *buf = malloc(COPY_CHUNK);
		r = buf ? hash_fd(t, &c, buf) : -ENOMEM;
	} else {
		r = pw_undo_copy_hash(src, t, size, &c);
	}
	uint8_t d[PW_SHA256_LEN];
	pw_sha256_final(&c, d);
	pw_sha256_hex(d, hex);
	if (r == 0)
		r = hold_for_blob(s);
	if (r == 0) {
		if (tmpname[0]) {
			char proc[64];
			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", s->tmp_fd);
			_cleanup_close_ int dfd = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", s->blobs_fd);
			_cleanup_close_ int bfd = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
			if (dfd < 0 || bfd < 0 || renameat(dfd, tmpname, bfd, hex) < 0)
				r = negative_errno();
			if (dfd >= 0)
				(void)unlinkat(dfd, tmpname, 0);
		} else {
			char proc[64];
			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", t);
			if (linkat(AT_FDCWD, proc, s->blobs_fd, hex, AT_SYMLINK_FOLLOW) < 0 &&
			    errno != EEXIST)
				r = negative_errno();
		}
	} else if (tmpname[0]) {
		char proc[64];
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", s->tmp_fd);
		(void)unlinkat(AT_FDCWD, proc, 0); /* best effort */
	}
	if (r == 0)
		r = pw_undo_orig_txn_checked(s, pw_undo_orig_register_blob(s, hex, size));
	return r;
}

/* ---- the cap and the floor (issue 27) ---------------------------------------------------- */

/*
 * The cap holds at every moment, not only at a prune: before a blob is made, the store's
 * bytes plus the new blob's must fit under max_total, and the filesystem must keep its
 * free-space floor. Counted on the blobs' records (orig_blobs), the store's own account.
 */
static uint64_t stored_bytes(pw_undo_orig_store *s)
{
	return pw_store_orig_blob_bytes(s->sql); /* unknown: UINT64_MAX, nothing more is kept */
}

/* The default floor: 5% of the filesystem, at most 1 GiB. */
#define FLOOR_PERCENT 5

/* Whether SIZE more bytes leave blobs/' filesystem above its floor. */
static bool above_floor(pw_undo_orig_store *s, uint64_t size)
{
	struct statvfs v;
	if (fstatvfs(s->blobs_fd, &v) < 0)
		return false;
	uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize;
	uint64_t floor = s->min_free;
	if (!floor) {
		floor = (uint64_t)v.f_blocks * v.f_frsize / 100 * FLOOR_PERCENT;
		if (floor > PW_UNDO_ORIG_FLOOR_MAX)
			floor = PW_UNDO_ORIG_FLOOR_MAX;
	}
	return avail >= floor && avail - floor >= size;
}

static bool fits(pw_undo_orig_store *s, uint64_t size)
{
	uint64_t have = stored_bytes(s);
	return size <= s->max_total && have <= s->max_total - size && above_floor(s, size);
}

/*
 * Whether a blob of SIZE bytes may be made now: it fits, or it fits once the oldest change
 * sets that may go are gone (every one but the current: what the change set being recorded
 * needs is never dropped). During an undo nothing is dropped: the change sets it restores
 * from are older than its own. Lock held.
 */
static bool room_for(pw_undo_orig_store *s, uint64_t size)
{
	if (fits(s, size))
		return true;
	if (size >= s->max_total || s->undoing)
		return false;
	(void)pw_undo_orig_prune(s, 0, s->max_total - size, s->current, NULL);
	return fits(s, size);
}

/* Whether blob HEX is recorded and in place. */
static bool blob_kept(pw_undo_orig_store *s, const char hex[PW_SHA256_HEX])
{
	struct stat bst;
	return pw_store_orig_blob_recorded(s->sql, hex) && fstatat(s->blobs_fd, hex, &bst, 0) == 0;
}

/*
 * No room for RFD's content: when the store holds the same content already it is shared
 * (a storm of identical rewrites at the cap costs nothing more), else O is recorded as
 * not kept, "store-full", like a file over the per-file cap. The change still proceeds:
 * a full store never blocks or fails a write. 0 or -errno.
 */
static int share_or_not_kept(pw_undo_orig_store *s, int rfd, pw_undo_orig_object *o)
{
	_cleanup_free_ char *buf = malloc(COPY_CHUNK);
	if (!buf)
		return -ENOMEM;
	pw_sha256 c;
	pw_sha256_init(&c);
	int r = hash_fd(rfd, &c, buf);
	if (r < 0)
		return r;
	uint8_t d[PW_SHA256_LEN];
	char hex[PW_SHA256_HEX];
	pw_sha256_final(&c, d);
	pw_sha256_hex(d, hex);
	r = hold_for_blob(s); /* no prune may take it between the look and the row */
	if (r < 0)
		return r;
	if (blob_kept(s, hex))
		memcpy(o->blob, hex, PW_SHA256_HEX);
	else
		o->not_kept = "store-full";
	return 0;
}

int pw_undo_orig_capture(pw_undo_orig_store *s, int dirfd, const char *name, unsigned flags,
			 pw_undo_orig_object *ret)
{
	bool content = flags & PW_UNDO_ORIG_CONTENT;
	pw_undo_orig_object o = {0};
	_cleanup_close_ int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (name[0] == '\0') {
		close(fd);
		fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	}
	if (fd < 0) {
		if (errno == ENOENT) {
			*ret = o;
			return 0;
		}
		return negative_errno();
	}
	struct stat st;
	if (fstat(fd, &st) < 0)
		return negative_errno();
	o.present = true;
	o.mode = st.st_mode;
	o.uid = st.st_uid;
	o.gid = st.st_gid;
	o.atime_ns = ts_ns(&st.st_atim);
	o.mtime_ns = ts_ns(&st.st_mtim);
	o.ctime_ns = ts_ns(&st.st_ctim);
	o.size = (uint64_t)st.st_size;
	o.dev = st.st_dev;
	o.ino = st.st_ino;
	o.nlink = st.st_nlink;
	int r = 0;
	if (S_ISLNK(st.st_mode)) {
		char buf[PATH_MAX + 1];
		ssize_t n = readlinkat(fd, "", buf, sizeof(buf) - 1);
		if (n < 0)
			return negative_errno();
		buf[n] = '\0';
		o.target = strdup(buf);
		if (!o.target)
			return -ENOMEM;
	} else {
		r = pw_undo_orig_xattrs_read(fd, &o.xattrs, &o.xattrs_len);
		if (r < 0) {
			pw_undo_orig_object_done(&o);
			return r;
		}
	}
	if (content && S_ISREG(st.st_mode)) {
		if ((uint64_t)st.st_size > s->max_file) {
			o.not_kept = "too-big";
		} else {
			char proc[64];
			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
			/* the magic link leads to the object FD names (no O_NOFOLLOW: that
			 * would refuse the link itself) */
			_cleanup_close_ int rfd = open(proc, O_RDONLY | O_CLOEXEC);
			if (rfd < 0 && (errno == EACCES || errno == EPERM)) {
				o.not_kept = "unreadable";
			} else if (rfd < 0) {
				r = negative_errno();
			} else {
				/* Always a blob of its own (a reflink or a copy), never the
				 * project's inode: see "Why never a link" above. Only within
				 * the cap and above the floor (room_for), or when the same
				 * content is kept already (shared). */
				if (room_for(s, o.size))
					r = keep_content(s, rfd, o.size, o.blob);
				else
					r = share_or_not_kept(s, rfd, &o);
				/* The original's own times: reading it may have moved its atime. */
				struct timespec tv[2] = {st.st_atim, {.tv_nsec = UTIME_OMIT}};
				(void)futimens(rfd, tv);
			}
		}
	}
	if (r < 0) {
		pw_undo_orig_object_done(&o);
		return r;
	}
	*ret = o;
	return 0;
}

void pw_undo_orig_object_done(pw_undo_orig_object *o)
{
	free(o->target);
	free(o->xattrs);
	o->target = NULL;
	o->xattrs = NULL;
}

/* ---- retention ------------------------------------------------------------------------- */

int pw_undo_orig_total(pw_undo_orig_store *s, uint64_t *ret_bytes, uint64_t *ret_blobs)
{
	return pw_store_orig_total(s->sql, ret_bytes, ret_blobs);
}

/* Whether NAME has the shape of a blob's name (its content's SHA-256 in hex). */
static bool blob_name(const char *name)
{
	if (strlen(name) != PW_SHA256_HEX - 1)
		return false;
	for (const char *c = name; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
			return false;
	return true;
}

/*
 * Removes the blob files that have no record: a daemon killed after it put a blob in place
 * and before its batch (or journal) took the record. Under the write lock, with every
 * journal replayed (pw_undo_orig_may_remove_blobs): a live daemon holds the lock from before it
 * links a blob until the record is committed (hold_for_blob), so no such file is anybody's yet. Not
 * only space: a file about to be removed is kept by a link (link_content), and the kill may come
 * before the removal, leaving the project's file with a second name in the store; its nlink then
 * says 2, and a write in place would change the "kept" content. Adds the bytes freed to FREED.
 */
static void drop_unrecorded(pw_undo_orig_store *s, uint64_t *freed)
{
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", s->blobs_fd);
	DIR *d = opendir(proc);
	if (!d)
		return;
	for (struct dirent *de; (de = readdir(d));) {
		if (!blob_name(de->d_name))
			continue; /* not the store's: left alone */
		if (!pw_store_orig_blob_unrecorded(s->sql, de->d_name))
			continue; /* recorded, or unknown: kept */
		struct stat bst;
		if (fstatat(dirfd(d), de->d_name, &bst, AT_SYMLINK_NOFOLLOW) == 0 &&
		    unlinkat(dirfd(d), de->d_name, 0) == 0)
			*freed += (uint64_t)bst.st_size;
	}
	closedir(d);
}

typedef struct unreferenced_ctx {
	pw_undo_orig_store *s;
	uint64_t *freed;
} unreferenced_ctx;

/* Removes blob HASH's file, which no row references; its SIZE freed. */
static void remove_unreferenced(const char *hash, uint64_t size, void *u)
{
	unreferenced_ctx *c = u;
	if (strlen(hash) != PW_SHA256_HEX - 1 || strchr(hash, '/'))
		return;
	*c->freed += size;
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", c->s->blobs_fd);
	_cleanup_close_ int dfd = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0)
		(void)unlinkat(dfd, hash, 0);
}

int pw_undo_orig_prune(pw_undo_orig_store *s, int64_t keep_ns, uint64_t max_total, int64_t protect,
		       uint64_t *ret_bytes)
{
	if (!keep_ns)
		keep_ns = s->keep_ns;
	if (!max_total)
		max_total = s->max_total;
	int r =
	    pw_undo_orig_settle(s); /* a lost batch's rows too: a change set they belong to stays */
	if (r < 0)
		return r;
	/* A dead daemon's rows first: they may name blobs that older rows name too. */
	(void)pw_undo_orig_journal_replay(s);
	int64_t limit = pw_db_now_ns() - keep_ns;
	int removed = 0;
	for (;;) {
		int64_t started = 0, id = pw_store_orig_changeset_oldest(s->sql, protect, &started);
		if (!id)
			break;
		if (started >= limit && pw_store_orig_referenced_bytes(s->sql) <= max_total)
			break;
		r = pw_store_orig_changeset_drop(s->sql, id);
		if (r < 0)
			break;
		removed++;
	}
	/* Blobs no row references: the row goes first, then the file, so a crash in between
	 * leaves at worst an unnamed file for the next prune... never a row without its blob.
	 * Under the write lock: another view sharing the store may hold rows not committed
	 * yet (deferred, in its journal) whose blobs are in place; its open transaction holds
	 * the lock, so this waits for their commit and sees them. */
	uint64_t freed = 0;
	bool locked = pw_store_orig_begin(s->sql) == 0;
	if (locked && !pw_undo_orig_may_remove_blobs(s)) {
		pw_store_orig_rollback(s->sql);
		locked = false;
	}
	if (!locked) {
		if (ret_bytes)
			*ret_bytes = 0;
		/* busy, or a journal not replayed: the unreferenced blobs wait for the next prune
		 */
		return r < 0 ? r : removed;
	}
	unreferenced_ctx uc = {.s = s, .freed = &freed};
	pw_store_orig_unreferenced(s->sql, remove_unreferenced, &uc);
	pw_store_orig_forget_unreferenced(s->sql);
	drop_unrecorded(s, &freed);
	if (pw_store_orig_commit(s->sql) < 0)
		pw_store_orig_rollback(s->sql);
	if (ret_bytes)
		*ret_bytes = freed;
	return r < 0 ? r : removed;
}
