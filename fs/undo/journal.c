/* SPDX-License-Identifier: MIT */
/* The originals store's journal of deferred rows' records (journal.h has the why). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "journal.h"
#include "pw_limits.h"
#include "util.h"

#define MAGIC 0x314a5750u /* "PWJ1" little-endian */
#define PREFIX "journal."
#define NIL_LEN 0xffffffffu
#define HEAD (4 + 4 + 8) /* magic, payload length, sequence number */

/* ---- encoding -------------------------------------------------------------------------- */

static int put_u32(pw_bytes *b, uint32_t v)
{
	return pw_bytes_append(b, &v, sizeof(v));
}
static int put_u64(pw_bytes *b, uint64_t v)
{
	return pw_bytes_append(b, &v, sizeof(v));
}

static int put_str(pw_bytes *b, const char *s)
{
	if (!s)
		return put_u32(b, NIL_LEN);
	size_t n = strlen(s);
	if (n >= NIL_LEN)
		return -ENAMETOOLONG;
	int r = put_u32(b, (uint32_t)n);
	return r < 0 ? r : pw_bytes_append(b, s, n);
}

static uint32_t checksum(uint64_t seq, const unsigned char *payload, size_t n)
{
	return pw_fnv1a32(pw_fnv1a32(PW_FNV1A32_INIT, &seq, sizeof(seq)), payload, n);
}

/* Flags beside the action (its low byte). */
#define F_EXCHANGE (1u << 8)
#define F_IMPLICIT (1u << 9)
#define F_OBJECT (1u << 10) /* an object follows the row's strings (encode_object) */
#define F_THREAD (1u << 11) /* the thread's name follows, last (records before it have none) */

/*
 * The object a row holds (what was there), after the row's strings: lstat's fields, then
 * the blob's name, the symlink's target, the xattrs and why content is not kept. Its blob
 * is in place before the record is written (originals.c), so replaying the record loses
 * nothing the row said.
 */
static int encode_object(pw_bytes *b, const pw_undo_orig_object *o)
{
	int r = 0;
	r = r ?: put_u64(b, (uint64_t)o->mode);
	r = r ?: put_u64(b, (uint64_t)o->uid);
	r = r ?: put_u64(b, (uint64_t)o->gid);
	r = r ?: put_u64(b, (uint64_t)o->atime_ns);
	r = r ?: put_u64(b, (uint64_t)o->mtime_ns);
	r = r ?: put_u64(b, (uint64_t)o->ctime_ns);
	r = r ?: put_u64(b, o->size);
	r = r ?: put_u64(b, o->dev);
	r = r ?: put_u64(b, o->ino);
	r = r ?: put_u64(b, o->nlink);
	r = r ?: put_str(b, o->blob[0] ? o->blob : NULL);
	r = r ?: put_str(b, o->target);
	if (r == 0 && o->xattrs_len >= NIL_LEN)
		r = -E2BIG;
	r = r ?: put_u32(b, o->xattrs ? (uint32_t)o->xattrs_len : NIL_LEN);
	r = r ?: (o->xattrs ? pw_bytes_append(b, o->xattrs, o->xattrs_len) : 0);
	r = r ?: put_str(b, o->not_kept);
	return r;
}

/* The row's fields, in the order decode() reads them. */
static int encode(pw_bytes *b, const pw_undo_orig_row *row, int64_t time_ns)
{
	bool object = row->obj && row->obj->present;
	int r = 0;
	r = r ?: put_u64(b, (uint64_t)row->changeset);
	r = r
		?: put_u32(b, (uint32_t)row->action | (row->exchange ? F_EXCHANGE : 0) |
				  (row->implicit ? F_IMPLICIT : 0) | (object ? F_OBJECT : 0) |
				  (row->thread ? F_THREAD : 0));
	r = r ?: put_u64(b, row->src_dev);
	r = r ?: put_u64(b, row->src_ino);
	r = r ?: put_u64(b, (uint64_t)(int64_t)row->pid);
	r = r ?: put_u64(b, (uint64_t)time_ns);
	r = r ?: put_str(b, row->path);
	r = r ?: put_str(b, row->path2);
	r = r ?: put_str(b, row->op);
	r = r ?: put_str(b, row->comm);
	r = r ?: put_str(b, row->mode);
	r = r ?: (object ? encode_object(b, row->obj) : 0);
	r = r ?: (row->thread ? put_str(b, row->thread) : 0);
	return r;
}

/* Heap strings (and the xattrs) one decoded record holds: the row's five, the object's
 * blob, target, xattrs and not_kept, the thread's name. */
#define DECODE_STRS 10

typedef struct cursor {
	const unsigned char *p, *end;
} cursor;

static bool get(cursor *c, void *out, size_t n)
{
	if ((size_t)(c->end - c->p) < n)
		return false;
	memcpy(out, c->p, n);
	c->p += n;
	return true;
}

/* A string of the payload (which has no terminators): copied into *STORE, which the caller
 * frees. A NUL inside is damage. */
static bool get_str(cursor *c, char **store, const char **out)
{
	uint32_t n;
	if (!get(c, &n, sizeof(n)))
		return false;
	if (n == NIL_LEN) {
		*out = NULL;
		return true;
	}
	if ((size_t)(c->end - c->p) < n || memchr(c->p, '\0', n))
		return false;
	char *s = strndup((const char *)c->p, n);
	if (!s)
		return false;
	c->p += n;
	*store = s;
	*out = s;
	return true;
}

/* The object encode_object wrote, into O; its strings and xattrs into STRS (freed by the
 * caller) or O's own blob buffer. */
static bool decode_object(cursor *c, char *strs[DECODE_STRS], pw_undo_orig_object *o)
{
	uint64_t v[10];
	for (size_t i = 0; i < ELEMENTSOF(v); i++)
		if (!get(c, &v[i], 8))
			return false;
	*o = (pw_undo_orig_object){
	    .present = true,
	    .mode = (mode_t)v[0],
	    .uid = (uid_t)v[1],
	    .gid = (gid_t)v[2],
	    .atime_ns = (int64_t)v[3],
	    .mtime_ns = (int64_t)v[4],
	    .ctime_ns = (int64_t)v[5],
	    .size = v[6],
	    .dev = v[7],
	    .ino = v[8],
	    .nlink = v[9],
	};
	const char *blob, *target, *not_kept;
	uint32_t xlen;
	if (!get_str(c, &strs[5], &blob) || (blob && strlen(blob) != PW_SHA256_HEX - 1) ||
	    !get_str(c, &strs[6], &target) || !get(c, &xlen, sizeof(xlen)))
		return false;
	if (blob)
		memcpy(o->blob, blob, PW_SHA256_HEX);
	o->target = (char *)target; /* owned by STRS */
	if (xlen != NIL_LEN) {
		if ((size_t)(c->end - c->p) < xlen || !(strs[7] = malloc(xlen ? xlen : 1)))
			return false;
		memcpy(strs[7], c->p, xlen);
		c->p += xlen;
		o->xattrs = strs[7];
		o->xattrs_len = xlen;
	}
	if (!get_str(c, &strs[8], &not_kept))
		return false;
	/* The row's not_kept is one of the store's constants; any other text is damage. */
	if (not_kept && !streq(not_kept, "too-big") && !streq(not_kept, "unreadable"))
		return false;
	o->not_kept = !not_kept ? NULL : streq(not_kept, "too-big") ? "too-big" : "unreadable";
	return true;
}

static bool decode(const unsigned char *p, size_t n, char *strs[DECODE_STRS], pw_undo_orig_row *row,
		   pw_undo_orig_object *obj, int64_t *time_ns)
{
	cursor c = {p, p + n};
	uint64_t cs, dev, ino, pid, t;
	uint32_t flags;
	*row = (pw_undo_orig_row){0};
	if (!get(&c, &cs, 8) || !get(&c, &flags, 4) || !get(&c, &dev, 8) || !get(&c, &ino, 8) ||
	    !get(&c, &pid, 8) || !get(&c, &t, 8))
		return false;
	if ((flags & 0xff) > PW_UNDO_ORIG_MOVE ||
	    (flags & ~(0xffu | F_EXCHANGE | F_IMPLICIT | F_OBJECT | F_THREAD)))
		return false;
	row->changeset = (int64_t)cs;
	row->action = (pw_undo_orig_action)(flags & 0xff);
	row->exchange = flags & F_EXCHANGE;
	row->implicit = flags & F_IMPLICIT;
	row->src_dev = dev;
	row->src_ino = ino;
	row->pid = (pid_t)(int64_t)pid;
	*time_ns = (int64_t)t;
	if (!get_str(&c, &strs[0], &row->path) || !row->path ||
	    !get_str(&c, &strs[1], &row->path2) || !get_str(&c, &strs[2], &row->op) ||
	    !get_str(&c, &strs[3], &row->comm) || !get_str(&c, &strs[4], &row->mode))
		return false;
	if (flags & F_OBJECT) {
		if (!decode_object(&c, strs, obj))
			return false;
		row->obj = obj;
	}
	if ((flags & F_THREAD) && !get_str(&c, &strs[9], &row->thread))
		return false;
	return c.p == c.end;
}

/* ---- the live journal ------------------------------------------------------------------ */

int pw_undo_journal_create(int dir_fd, pw_undo_journal *ret)
{
	/* Made under a name replay does not look at, locked, then given its name: a starting
	 * daemon can never take a journal for a dead one's between its creation and its lock. */
	for (int attempt = 0; attempt < 16; attempt++) {
		uint64_t rnd;
		if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
			return -EIO;
		char tmp[64], name[64];
		snprintf(tmp, sizeof(tmp), ".new-journal.%016llx", (unsigned long long)rnd);
		snprintf(name, sizeof(name), PREFIX "%016llx", (unsigned long long)rnd);
		int fd =
		    openat(dir_fd, tmp, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
		if (fd < 0) {
			if (errno == EEXIST)
				continue;
			return negative_errno();
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0 ||
		    renameat2(dir_fd, tmp, dir_fd, name, RENAME_NOREPLACE) < 0) {
			int r = negative_errno();
			(void)unlinkat(dir_fd, tmp, 0);
			close(fd);
			if (r == -EEXIST)
				continue;
			return r;
		}
		char *n = strdup(name);
		if (!n) {
			(void)unlinkat(dir_fd, name, 0);
			close(fd);
			return -ENOMEM;
		}
		*ret = (pw_undo_journal){.fd = fd, .name = n, .seq = 0};
		return 0;
	}
	return -EEXIST;
}

/*
 * A short write (a full disk) left part of a record at the end: it goes, or the replay
 * would stop there and never reach the records appended once space is back. The record is
 * not whole either way: -EIO (the caller commits the row instead).
 */
static int cut_short_write(int fd, size_t written)
{
	struct stat st;
	if (fstat(fd, &st) == 0 && (size_t)st.st_size >= written)
		(void)ftruncate(fd, st.st_size - (off_t)written);
	return -EIO;
}

int pw_undo_journal_append(pw_undo_journal *j, const pw_undo_orig_row *row, int64_t time_ns,
			   uint64_t *ret_seq)
{
	pw_bytes b = {0};
	uint64_t seq = j->seq + 1;
	uint32_t zero = 0;
	int r = 0;
	if (j->fd < 0)
		return -EBADF;
	/* Head first (its length patched in), then the payload, then the checksum. */
	r = r ?: put_u32(&b, MAGIC);
	r = r ?: put_u32(&b, zero);
	r = r ?: put_u64(&b, seq);
	r = r ?: encode(&b, row, time_ns);
	if (r == 0 && b.len - HEAD > PW_UNDO_JOURNAL_RECORD_MAX)
		r = -E2BIG;
	if (r == 0) {
		uint32_t n = (uint32_t)(b.len - HEAD);
		memcpy(b.p + 4, &n, sizeof(n));
		r = put_u32(&b, checksum(seq, (const unsigned char *)b.p + HEAD, n));
	}
	if (r == 0) {
		/* One write: a killed process never leaves half of it (a machine crash may,
		 * which the checksum catches). */
		ssize_t w = write(j->fd, b.p, b.len);
		if (w < 0)
			r = negative_errno();
		else if ((size_t)w != b.len)
			r = cut_short_write(j->fd, (size_t)w);
	}
	free(b.p);
	if (r < 0)
		return r;
	j->seq = seq;
	*ret_seq = seq;
	return 0;
}

int pw_undo_journal_truncate(pw_undo_journal *j)
{
	return j->fd >= 0 && ftruncate(j->fd, 0) < 0 ? negative_errno() : 0;
}

void pw_undo_journal_close(pw_undo_journal *j, int dir_fd, bool remove)
{
	if (remove && j->name && dir_fd >= 0)
		(void)unlinkat(dir_fd, j->name, 0);
	if (j->fd >= 0)
		close(j->fd);
	free(j->name);
	*j = (pw_undo_journal)PW_UNDO_JOURNAL_INIT;
}

/* ---- replay ---------------------------------------------------------------------------- */

static int read_all(int fd, unsigned char **ret, size_t *ret_len)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return negative_errno();
	size_t n = (size_t)st.st_size;
	unsigned char *p = malloc(n ? n : 1);
	if (!p)
		return -ENOMEM;
	size_t got = 0;
	while (got < n) {
		ssize_t r = pread(fd, p + got, n - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	*ret = p;
	*ret_len = got;
	return 0;
}

/* Calls RECORD for each whole record of the journal read into P. */
static int replay_records(const unsigned char *p, size_t n, const char *name,
			  pw_undo_journal_record_fn record, void *data)
{
	size_t off = 0;
	while (n - off >= HEAD + 4) {
		uint32_t magic, len;
		uint64_t seq;
		memcpy(&magic, p + off, 4);
		memcpy(&len, p + off + 4, 4);
		memcpy(&seq, p + off + 8, 8);
		if (magic != MAGIC || len > PW_UNDO_JOURNAL_RECORD_MAX || n - off - HEAD - 4 < len)
			break; /* cut short or damaged: nothing after it is trusted */
		const unsigned char *payload = p + off + HEAD;
		uint32_t sum;
		memcpy(&sum, payload + len, 4);
		if (sum != checksum(seq, payload, len))
			break;
		char *strs[DECODE_STRS] = {NULL};
		pw_undo_orig_row row;
		pw_undo_orig_object obj;
		int64_t time_ns;
		bool ok = decode(payload, len, strs, &row, &obj, &time_ns);
		int r = ok ? record(data, name, seq, &row, time_ns) : 0;
		for (int i = 0; i < DECODE_STRS; i++)
			free(strs[i]);
		if (!ok)
			break;
		if (r < 0)
			return r;
		off += HEAD + len + 4;
	}
	return 0;
}

/* Replays journal NAME if no live process holds it. 1 replayed, 0 skipped, -errno. */
static int replay_one(int dir_fd, const char *name, int (*begin)(void *, const char *),
		      pw_undo_journal_record_fn record, int (*end)(void *, const char *, int),
		      void *data)
{
	int fd = openat(dir_fd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT ? 0 : negative_errno();
	struct stat st;
	/* Held: its daemon lives (or another is replaying it). Unlinked meanwhile: done. */
	if (flock(fd, LOCK_EX | LOCK_NB) < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_nlink == 0) {
		close(fd);
		return 0;
	}
	unsigned char *p = NULL;
	size_t n = 0;
	int r = read_all(fd, &p, &n);
	if (r == 0)
		r = begin(data, name);
	if (r == 0) {
		r = replay_records(p, n, name, record, data);
		r = end(data, name, r);
		if (r == 0)
			(void)unlinkat(dir_fd, name, 0);
	}
	free(p);
	close(fd);
	return r < 0 ? r : 1;
}

int pw_undo_journal_read(const pw_undo_journal *j, pw_undo_journal_record_fn record, void *data)
{
	if (j->fd < 0)
		return -EBADF;
	unsigned char *p = NULL;
	size_t n = 0;
	int r = read_all(j->fd, &p, &n);
	if (r == 0)
		r = replay_records(p, n, j->name, record, data);
	free(p);
	return r;
}

int pw_undo_journal_replay_dead(int dir_fd, int (*begin)(void *data, const char *name),
				pw_undo_journal_record_fn record,
				int (*end)(void *data, const char *name, int r), void *data)
{
	int dfd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		int r = negative_errno();
		if (dfd >= 0)
			close(dfd);
		return r;
	}
	int count = 0, first_error = 0;
	for (struct dirent *de; (de = readdir(d));) {
		if (strncmp(de->d_name, PREFIX, strlen(PREFIX)) != 0)
			continue;
		int r = replay_one(dir_fd, de->d_name, begin, record, end, data);
		if (r > 0)
			count++;
		else if (r < 0 && !first_error)
			first_error = r;
	}
	closedir(d);
	return first_error ? first_error : count;
}

bool pw_undo_journal_others_pending(int dir_fd, const char *own)
{
	int dfd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return true;
	}
	bool pending = false;
	for (struct dirent *de; !pending && (de = readdir(d));) {
		struct stat st;
		if (strncmp(de->d_name, PREFIX, strlen(PREFIX)) != 0 ||
		    (own && strcmp(de->d_name, own) == 0))
			continue;
		if (fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			pending = errno != ENOENT; /* gone: replayed meanwhile */
		else
			pending = st.st_size > 0;
	}
	closedir(d);
	return pending;
}
