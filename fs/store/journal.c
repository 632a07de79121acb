/* SPDX-License-Identifier: MIT */
/* The originals store's journal of created names' records (journal.h has the why). */
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
#include "util.h"

#define MAGIC 0x314a5750u /* "PWJ1" little-endian */
#define PREFIX "journal."
#define NIL_LEN 0xffffffffu
#define HEAD (4 + 4 + 8) /* magic, payload length, sequence number */
#define RECORD_MAX (4u << 20) /* far above any row: five strings of at most 64 KiB */

/* ---- encoding -------------------------------------------------------------------------- */

typedef struct buf {
	unsigned char *p;
	size_t len, cap;
} buf;

static int put(buf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 512;
		while (cap < b->len + n)
			cap *= 2;
		unsigned char *q = realloc(b->p, cap);
		if (!q)
			return -ENOMEM;
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

static int put_u32(buf *b, uint32_t v) { return put(b, &v, sizeof(v)); }
static int put_u64(buf *b, uint64_t v) { return put(b, &v, sizeof(v)); }

static int put_str(buf *b, const char *s)
{
	if (!s)
		return put_u32(b, NIL_LEN);
	size_t n = strlen(s);
	if (n >= NIL_LEN)
		return -ENAMETOOLONG;
	int r = put_u32(b, (uint32_t)n);
	return r < 0 ? r : put(b, s, n);
}

static uint32_t checksum(uint64_t seq, const unsigned char *payload, size_t n)
{
	return pw_fnv1a32(pw_fnv1a32(PW_FNV1A32_INIT, &seq, sizeof(seq)), payload, n);
}

/* The row's fields, in the order decode() reads them. */
static int encode(buf *b, const pw_orig_row *row, int64_t time_ns)
{
	int r = 0;
	r = r ?: put_u64(b, (uint64_t)row->changeset);
	r = r ?: put_u32(b, (uint32_t)row->action | (uint32_t)row->exchange << 8 |
				    (uint32_t)row->implicit << 9);
	r = r ?: put_u64(b, row->src_dev);
	r = r ?: put_u64(b, row->src_ino);
	r = r ?: put_u64(b, (uint64_t)(int64_t)row->pid);
	r = r ?: put_u64(b, (uint64_t)time_ns);
	r = r ?: put_str(b, row->path);
	r = r ?: put_str(b, row->path2);
	r = r ?: put_str(b, row->op);
	r = r ?: put_str(b, row->comm);
	r = r ?: put_str(b, row->mode);
	return r;
}

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

static bool decode(const unsigned char *p, size_t n, char *strs[5], pw_orig_row *row,
		   int64_t *time_ns)
{
	cursor c = { p, p + n };
	uint64_t cs, dev, ino, pid, t;
	uint32_t flags;
	*row = (pw_orig_row){ 0 };
	if (!get(&c, &cs, 8) || !get(&c, &flags, 4) || !get(&c, &dev, 8) || !get(&c, &ino, 8) ||
	    !get(&c, &pid, 8) || !get(&c, &t, 8))
		return false;
	if ((flags & 0xff) > PW_ORIG_MOVE)
		return false;
	row->changeset = (int64_t)cs;
	row->action = (pw_orig_action)(flags & 0xff);
	row->exchange = flags >> 8 & 1;
	row->implicit = flags >> 9 & 1;
	row->src_dev = dev;
	row->src_ino = ino;
	row->pid = (pid_t)(int64_t)pid;
	*time_ns = (int64_t)t;
	return get_str(&c, &strs[0], &row->path) && row->path &&
	       get_str(&c, &strs[1], &row->path2) && get_str(&c, &strs[2], &row->op) &&
	       get_str(&c, &strs[3], &row->comm) && get_str(&c, &strs[4], &row->mode) &&
	       c.p == c.end;
}

/* ---- the live journal ------------------------------------------------------------------ */

int pw_journal_create(int dir_fd, pw_journal *ret)
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
		int fd = openat(dir_fd, tmp, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
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
		*ret = (pw_journal){ .fd = fd, .name = n, .seq = 0 };
		return 0;
	}
	return -EEXIST;
}

int pw_journal_append(pw_journal *j, const pw_orig_row *row, int64_t time_ns, uint64_t *ret_seq)
{
	buf b = { 0 };
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
	if (r == 0 && b.len - HEAD > RECORD_MAX)
		r = -E2BIG;
	if (r == 0) {
		uint32_t n = (uint32_t)(b.len - HEAD);
		memcpy(b.p + 4, &n, sizeof(n));
		r = put_u32(&b, checksum(seq, b.p + HEAD, n));
	}
	if (r == 0) {
		/* One write: a killed process never leaves half of it (a machine crash may,
		 * which the checksum catches). */
		ssize_t w = write(j->fd, b.p, b.len);
		if (w < 0)
			r = negative_errno();
		else if ((size_t)w != b.len)
			r = -EIO; /* a short write (a full disk): the record is not whole */
	}
	free(b.p);
	if (r < 0)
		return r;
	j->seq = seq;
	*ret_seq = seq;
	return 0;
}

int pw_journal_truncate(pw_journal *j)
{
	return j->fd >= 0 && ftruncate(j->fd, 0) < 0 ? negative_errno() : 0;
}

void pw_journal_close(pw_journal *j, int dir_fd, bool remove)
{
	if (remove && j->name && dir_fd >= 0)
		(void)unlinkat(dir_fd, j->name, 0);
	if (j->fd >= 0)
		close(j->fd);
	free(j->name);
	*j = (pw_journal)PW_JOURNAL_INIT;
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
			  pw_journal_record_fn record, void *data)
{
	size_t off = 0;
	while (n - off >= HEAD + 4) {
		uint32_t magic, len;
		uint64_t seq;
		memcpy(&magic, p + off, 4);
		memcpy(&len, p + off + 4, 4);
		memcpy(&seq, p + off + 8, 8);
		if (magic != MAGIC || len > RECORD_MAX || n - off - HEAD - 4 < len)
			break; /* cut short or damaged: nothing after it is trusted */
		const unsigned char *payload = p + off + HEAD;
		uint32_t sum;
		memcpy(&sum, payload + len, 4);
		if (sum != checksum(seq, payload, len))
			break;
		char *strs[5] = { NULL };
		pw_orig_row row;
		int64_t time_ns;
		bool ok = decode(payload, len, strs, &row, &time_ns);
		int r = ok ? record(data, name, seq, &row, time_ns) : 0;
		for (int i = 0; i < 5; i++)
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
		      pw_journal_record_fn record, int (*end)(void *, const char *, int), void *data)
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

int pw_journal_replay_dead(int dir_fd, int (*begin)(void *data, const char *name),
			   pw_journal_record_fn record,
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
