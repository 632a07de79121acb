/* SPDX-License-Identifier: MIT */
/*
 * The originals store (originals.h has the contract).
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
#include "thread.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/limits.h>
#include <pthread.h>
#include <sqlite3.h>
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
#include "journal.h"
#include "pw_limits.h"
#include "util.h"

#define COPY_CHUNK (1u << 20)

/*
 * A created name's row waiting for the next flush (pw_undo_orig_queue): journaled already, not
 * yet inserted. Its strings are one allocation, PATH first.
 */
typedef struct queued_row {
	uint64_t seq; /* its journal record's: its token is TOKEN_BIT | seq */
	int64_t changeset, time_ns;
	pid_t pid;
	bool implicit;
	char *path, *op, *comm, *mode, *thread;
} queued_row;

/* A queued row's token, in place of a row id until a flush has inserted it. Real ids stay
 * far below (SQLite counts them up from 1). */
#define TOKEN_BIT (INT64_C(1) << 62)

struct pw_undo_orig_store {
	sqlite3 *db;
	char *dir;
	int blobs_fd, tmp_fd;
	dev_t dev; /* of blobs/ */
	uint64_t max_file, max_total;
	uint64_t min_free; /* the free-space floor of blobs/' filesystem; 0: the default */
	int64_t current;   /* the change set begun last: never pruned to make room */
	bool undoing;	   /* it is an undo's: nothing is pruned to make room (room_for) */
	int64_t keep_ns;
	sqlite3_stmt *insert; /* pw_undo_orig_insert's, prepared once: one runs per first change */
	pthread_mutex_t lock;
	/* Deferred rows (pw_undo_orig_insert_deferred), under LOCK: a transaction open since
	 * TXN_SINCE (CLOCK_MONOTONIC) holding TXN_ROWS rows, committed by the flusher thread
	 * once DEFER_NS have passed, or earlier by whatever needs it committed. */
	bool txn, stopping, flusher_started;
	unsigned txn_rows;
	int64_t txn_since, defer_ns;
	pthread_cond_t wake; /* the flusher's: a transaction opened, or the store closes */
	pthread_t flusher;
	/* The journal of deferred rows (journal.h): a killed daemon loses none of them. Without
	 * one (it could not be made), every row is committed at once. */
	int dir_fd;
	pw_undo_journal journal;
	uint64_t journal_committed; /* the last sequence number orig_journals holds */
	/* Rows of created names, in the order of their changes (pw_undo_orig_queue), under LOCK:
	 * the first QUEUE_INSERTED are in the open transaction, the rest wait for the next
	 * flush. RECENT: the row ids the last PW_UNDO_ORIG_RECENT_MAX queued rows got, a ring. */
	queued_row *queue;
	size_t queue_len, queue_cap, queue_inserted;
	struct recent_id {
		uint64_t seq;
		int64_t id;
	} * recent;
	size_t recent_next;
	/* The open batch's deferred rows: their journal records' sequence numbers and ids (so
	 * a lost batch's ids can be followed to the rows that replace them), and the first id
	 * the batch gave, 0 before any. */
	struct batch_id {
		uint64_t seq;
		int64_t id, now; /* NOW: what the id names since a lost batch came back, or 0 */
		bool failed;	 /* pw_undo_orig_delete asked for it before it came back */
	} * batch_ids, *lost;
	size_t batch_n, batch_cap, lost_n;
	int64_t batch_first;
	/* Lost batches (batch_lost): LOST_PENDING while their rows wait in the journal for
	 * batch_recover; LOST, their deferred rows; LOST_RANGES, the ids they gave, which name
	 * no row of this store any more (another daemon sharing it may give them again) but
	 * through LOST; MAX_ID, the highest id this store gave, and ID_FLOOR, the one the last
	 * lost batch left: this store gives none below it again. */
	bool lost_pending;
	struct id_range {
		int64_t lo, hi;
	} * lost_ranges;
	size_t ranges_n;
	int64_t doubtful_upto; /* out of memory for a range: every id up to it is lost's */
	int64_t max_id, id_floor;
};

static int journal_replay(pw_undo_orig_store *s);
static void journal_forget_removed(pw_undo_orig_store *s);
static void batch_lost(pw_undo_orig_store *s);
static int batch_recover(pw_undo_orig_store *s);
static int settle(pw_undo_orig_store *s);
static bool txn_ended(pw_undo_orig_store *s);
static int txn_checked(pw_undo_orig_store *s, int r);
static void batch_note(pw_undo_orig_store *s, uint64_t seq, int64_t id);
static bool id_lost(const pw_undo_orig_store *s, int64_t id);
static struct batch_id *lost_find(pw_undo_orig_store *s, int64_t id, uint64_t seq);

/* Removes what a killed daemon left in tmp/ (the named fallback of O_TMPFILE). */
static void clean_tmp(int tmp_fd)
{
	int fd = dup(tmp_fd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	for (struct dirent *de; (de = readdir(d));)
		if (de->d_name[0] != '.')
			(void)unlinkat(tmp_fd, de->d_name, 0);
	closedir(d);
}

/* db.c's contention hook: another connection of this daemon (a switch persisting the mode,
 * the audit writer) wants the write lock our batch holds; commit the batch now rather than
 * make it wait for the flusher. Only tried: the caller may hold anything, and if the store is
 * busy its holder commits soon anyway (or the caller's next busy retry asks again). */
static void commit_when_contended(void *arg)
{
	pw_undo_orig_store *s = arg;
	if (pthread_mutex_trylock(&s->lock) != 0)
		return;
	if (s->txn)
		(void)pw_undo_orig_flush(s);
	pthread_mutex_unlock(&s->lock);
}

int pw_undo_orig_store_open(const pw_undo_orig_opts *o, pw_undo_orig_store **ret)
{
	_cleanup_free_ char *dir = NULL, *blobs = NULL, *tmp = NULL;
	pw_undo_orig_store *s;
	int r;

	if (!o || !o->db_path)
		return -EINVAL;
	if (o->dir) {
		dir = strdup(o->dir);
	} else {
		const char *slash = strrchr(o->db_path, '/');
		if (!slash)
			r = asprintf(&dir, "originals");
		else
			r = asprintf(&dir, "%.*s/originals", (int)(slash - o->db_path), o->db_path);
		if (r < 0)
			dir = NULL;
	}
	if (!dir || asprintf(&blobs, "%s/blobs", dir) < 0 || asprintf(&tmp, "%s/tmp", dir) < 0)
		return -ENOMEM;
	r = pw_db_mkdir_p(blobs);
	if (r == 0)
		r = pw_db_mkdir_p(tmp);
	if (r < 0)
		return r;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	pw_cond_init_monotonic(&s->wake);
	s->blobs_fd = s->tmp_fd = s->dir_fd = -1;
	s->journal = (pw_undo_journal)PW_UNDO_JOURNAL_INIT;
	s->dir = TAKE_PTR(dir);
	s->max_file = o->max_file ? o->max_file : PW_UNDO_ORIG_MAX_FILE_DEFAULT;
	s->max_total = o->max_total ? o->max_total : PW_UNDO_ORIG_MAX_TOTAL_DEFAULT;
	s->min_free = o->min_free;
	s->keep_ns =
	    o->keep_ns ? o->keep_ns : (int64_t)PW_UNDO_ORIG_KEEP_DAYS_DEFAULT * 86400 * 1000000000;
	s->defer_ns = o->defer_ns > 0 ? o->defer_ns : (int64_t)PW_UNDO_ORIG_DEFER_MS * 1000000;
	s->blobs_fd = open(blobs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	s->tmp_fd = open(tmp, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct stat bst;
	if (s->blobs_fd < 0 || s->tmp_fd < 0 || fstat(s->blobs_fd, &bst) < 0) {
		r = negative_errno();
		pw_undo_orig_store_close(s);
		return r;
	}
	s->dev = bst.st_dev;
	r = pw_db_open(o->db_path, 0, 0, &s->db, NULL);
	if (r < 0) {
		pw_undo_orig_store_close(s);
		return r;
	}
	int tfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (tfd >= 0) {
		clean_tmp(tfd);
		close(tfd);
	}
	s->dir_fd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dir_fd >= 0) {
		/* A dead daemon's records first; they cannot fail the mount: a journal that
		 * cannot be replayed now stays for the next start. */
		(void)journal_replay(s);
		(void)pw_undo_journal_create(s->dir_fd, &s->journal);
	}
	pw_db_set_contention_hook(commit_when_contended, s);
	*ret = s;
	return 0;
}

void pw_undo_orig_store_close(pw_undo_orig_store *s)
{
	if (!s)
		return;
	pw_db_clear_contention_hook(s);
	if (s->flusher_started) {
		pthread_mutex_lock(&s->lock);
		s->stopping = true;
		pthread_cond_signal(&s->wake);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->flusher, NULL);
	}
	/* A close rolls back what is not committed: the journal then stays for the next start
	 * (a lost batch's rows too, unless they can be committed now). */
	bool committed = s->db && settle(s) == 0 && !s->txn && !s->queue_len;
	pw_undo_journal_close(&s->journal, s->dir_fd, committed);
	if (committed)
		journal_forget_removed(s);
	if (s->dir_fd >= 0)
		close(s->dir_fd);
	sqlite3_finalize(s->insert);
	for (size_t i = 0; i < s->queue_len; i++)
		free(s->queue[i].path);
	free(s->queue);
	free(s->recent);
	free(s->batch_ids);
	free(s->lost);
	free(s->lost_ranges);
	if (s->db)
		sqlite3_close_v2(s->db);
	if (s->blobs_fd >= 0)
		close(s->blobs_fd);
	if (s->tmp_fd >= 0)
		close(s->tmp_fd);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->wake);
	free(s->dir);
	free(s);
}

void pw_undo_orig_lock(pw_undo_orig_store *s)
{
	pthread_mutex_lock(&s->lock);
}

void pw_undo_orig_unlock(pw_undo_orig_store *s)
{
	pthread_mutex_unlock(&s->lock);
}

/* ---- the journal of deferred rows (journal.h) ---------------------------------------- */

/* Records in the open transaction that the journal is committed up to SEQ. */
static int journal_mark_name(sqlite3 *db, const char *name, uint64_t seq)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(db,
				    "INSERT INTO orig_journals(name, seq) VALUES (?1, ?2) "
				    "ON CONFLICT(name) DO UPDATE SET seq = excluded.seq",
				    -1, &st, NULL);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)seq);
	rc = sqlite3_step(st);
	return rc == SQLITE_DONE ? 0 : pw_db_errno(rc);
}

static int journal_mark(pw_undo_orig_store *s, uint64_t seq)
{
	if (!s->journal.name || seq == s->journal_committed)
		return 0;
	return journal_mark_name(s->db, s->journal.name, seq);
}

/* Forgets the marks of journals whose files are gone (replayed, or closed whole). */
static void journal_forget_removed(pw_undo_orig_store *s)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL, *del = NULL;
	if (s->dir_fd < 0 ||
	    sqlite3_prepare_v2(s->db, "SELECT name FROM orig_journals", -1, &st, NULL) !=
		SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "DELETE FROM orig_journals WHERE name = ?1", -1, &del,
			       NULL) != SQLITE_OK)
		return;
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		if (!name || faccessat(s->dir_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0 ||
		    errno != ENOENT)
			continue;
		sqlite3_bind_text(del, 1, name, -1, SQLITE_TRANSIENT);
		(void)sqlite3_step(del);
		sqlite3_reset(del);
	}
}

typedef struct replay_ctx {
	pw_undo_orig_store *s;
	uint64_t skip, last; /* committed before; the last record seen */
} replay_ctx;

static int replay_begin(void *data, const char *name)
{
	replay_ctx *c = data;
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int rc = sqlite3_exec(c->s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	c->skip = c->last = 0;
	if (sqlite3_prepare_v2(c->s->db, "SELECT seq FROM orig_journals WHERE name = ?1", -1, &st,
			       NULL) == SQLITE_OK) {
		sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW)
			c->skip = (uint64_t)sqlite3_column_int64(st, 0);
	}
	c->last = c->skip;
	return 0;
}

static int insert_row(pw_undo_orig_store *s, const pw_undo_orig_row *row, int64_t time_ns,
		      int64_t *ret_id);
static int register_blob(pw_undo_orig_store *s, const char hex[PW_SHA256_HEX], uint64_t size);

/* A journal record's row, inserted again: the blob's own record was in the transaction that
 * never committed (a kill cut it short, or SQLite rolled it back), with the row. */
static int insert_recorded(pw_undo_orig_store *s, const pw_undo_orig_row *row, int64_t time_ns,
			   int64_t *ret_id)
{
	const pw_undo_orig_object *o = row->obj;
	int r = o && o->present && o->blob[0] ? register_blob(s, o->blob, o->size) : 0;
	return r < 0 ? r : insert_row(s, row, time_ns, ret_id);
}

static int replay_record(void *data, const char *name, uint64_t seq, const pw_undo_orig_row *row,
			 int64_t time_ns)
{
	replay_ctx *c = data;
	(void)name;
	if (seq <= c->skip)
		return 0; /* committed before the daemon died */
	int r = insert_recorded(c->s, row, time_ns, NULL);
	if (r == 0)
		c->last = seq;
	return r;
}

static int replay_end(void *data, const char *name, int r)
{
	replay_ctx *c = data;
	if (r == 0 && c->last != c->skip)
		r = journal_mark_name(c->s->db, name, c->last);
	if (r == 0) {
		int rc = sqlite3_exec(c->s->db, "COMMIT", NULL, NULL, NULL);
		r = pw_db_errno(rc);
	}
	if (r < 0 && !sqlite3_get_autocommit(c->s->db))
		(void)sqlite3_exec(c->s->db, "ROLLBACK", NULL, NULL, NULL);
	return r;
}

/* Adds the rows of dead daemons' journals that their transactions did not commit. */
static int journal_replay(pw_undo_orig_store *s)
{
	replay_ctx c = {.s = s};
	int r = pw_undo_journal_replay_dead(s->dir_fd, replay_begin, replay_record, replay_end, &c);
	journal_forget_removed(s);
	return r;
}

/* ---- deferred rows --------------------------------------------------------------------- */

static int drain(pw_undo_orig_store *s);
static void queue_committed(pw_undo_orig_store *s);

int pw_undo_orig_flush(pw_undo_orig_store *s)
{
	if (txn_ended(s))
		return -EIO; /* lost: its journal has the rows (batch_lost, batch_recover) */
	/* Every queued row into the transaction first: the commit below marks the whole
	 * journal committed. */
	int r0 = drain(s);
	if (r0 < 0)
		return r0;
	if (!s->txn)
		return 0;
	/* The commit says how far the journal is in the database, so a replay after a kill
	 * between this commit and the truncation below adds nothing twice. */
	int r = journal_mark(s, s->journal.seq);
	if (r < 0 && !sqlite3_get_autocommit(s->db))
		return r; /* still open: the next flush tries again */
	int rc = r < 0 ? SQLITE_ERROR : sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
	if (rc != SQLITE_OK && !sqlite3_get_autocommit(s->db))
		return pw_db_errno(rc); /* still open (busy): the next flush tries again */
	if (rc != SQLITE_OK) {
		batch_lost(s); /* SQLite rolled it back */
		return r < 0 ? r : pw_db_errno(rc);
	}
	s->txn = false;
	s->txn_rows = 0;
	s->batch_n = 0;
	s->batch_first = 0;
	queue_committed(s);
	s->journal_committed = s->journal.seq;
	(void)pw_undo_journal_truncate(&s->journal); /* if it fails, the replay skips them all */
	return 0;
}

/* Commits a transaction of deferred rows once it is DEFER_NS old. */
static void *flusher_main(void *arg)
{
	pw_undo_orig_store *s = arg;
	pthread_mutex_lock(&s->lock);
	while (!s->stopping) {
		if (!s->txn && !s->queue_len) {
			pthread_cond_wait(&s->wake, &s->lock);
			continue;
		}
		int64_t due = s->txn_since + s->defer_ns;
		if (pw_clock_ns(CLOCK_MONOTONIC) >= due) {
			if (pw_undo_orig_flush(s) < 0) /* busy past the timeout: again in a while */
				s->txn_since = pw_clock_ns(CLOCK_MONOTONIC);
			continue;
		}
		struct timespec ts = {.tv_sec = due / 1000000000, .tv_nsec = due % 1000000000};
		pthread_cond_timedwait(&s->wake, &s->lock, &ts);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* Opens the transaction deferred rows go into, and starts the flusher that ends it (here,
 * on the first deferred row, not at open: the daemon forks after it opens the store). */
static int start_flusher(pw_undo_orig_store *s)
{
	if (!s->flusher_started) {
		if (pthread_create(&s->flusher, NULL, flusher_main, s) != 0)
			return -EAGAIN; /* the caller commits the row itself */
		s->flusher_started = true;
	}
	return 0;
}

static int txn_open(pw_undo_orig_store *s)
{
	(void)txn_ended(s);
	if (s->txn)
		return 0;
	int r = batch_recover(s);
	if (r == 0)
		r = start_flusher(s);
	if (r < 0)
		return r;
	/* IMMEDIATE: the write lock from the start, which hold_for_blob relies on (a deferred
	 * BEGIN would take it only at the first write). */
	int rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	s->txn = true;
	s->txn_rows = 0;
	s->batch_n = 0;
	s->batch_first = 0;
	if (!s->queue_len) /* else the batch began with its first queued row */
		s->txn_since = pw_clock_ns(CLOCK_MONOTONIC);
	pthread_cond_signal(&s->wake);
	return 0;
}

const char *pw_undo_orig_dir(const pw_undo_orig_store *s)
{
	return s->dir;
}

uint64_t pw_undo_orig_max_file(const pw_undo_orig_store *s)
{
	return s->max_file;
}

char *pw_undo_orig_blob_path(const pw_undo_orig_store *s, const char *hash)
{
	char *p = NULL;
	if (asprintf(&p, "%s/blobs/%s", s->dir, hash) < 0)
		return NULL;
	return p;
}

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
 * Records the blob HEX.
 *
 * Nothing here is fsync'd, and that is deliberate. A killed daemon loses nothing the page
 * cache holds; only a machine crash could, and the rows that name the blobs are not synced
 * at each commit either (the database's synchronous=NORMAL), so syncing the blobs alone
 * would buy little, at a journal commit per kept file (measured: `git checkout` of a
 * branch 4.9 times slower with it, 1.0 without). What a machine crash can do instead, leave
 * a row whose blob came back empty or short, a restore catches: it hashes the blob first
 * and refuses one that does not match its name (ctl_changes.c).
 */
static int register_blob(pw_undo_orig_store *s, const char hex[PW_SHA256_HEX], uint64_t size)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(s->db,
			       "INSERT OR IGNORE INTO orig_blobs(hash, size) VALUES (?1, ?2)", -1,
			       &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)size);
	return sqlite3_step(st) == SQLITE_DONE ? 0 : -EIO;
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
	return txn_open(s);
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
		r = txn_checked(s, register_blob(s, hex, size));
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
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(s->db, "SELECT coalesce(sum(size), 0) FROM orig_blobs", -1, &st,
			       NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW)
		return UINT64_MAX; /* unknown: fail closed, nothing more is kept */
	return (uint64_t)sqlite3_column_int64(st, 0);
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
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM orig_blobs WHERE hash = ?1", -1, &st, NULL) !=
	    SQLITE_OK)
		return false;
	sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
	struct stat bst;
	return sqlite3_step(st) == SQLITE_ROW && fstatat(s->blobs_fd, hex, &bst, 0) == 0;
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

/* ---- rows ------------------------------------------------------------------------------ */

static int insert_row(pw_undo_orig_store *s, const pw_undo_orig_row *row, int64_t time_ns,
		      int64_t *ret_id)
{
	const pw_undo_orig_object *o = row->obj;
	int rc =
	    s->insert
		? SQLITE_OK
		: sqlite3_prepare_v2(
		      s->db,
		      "INSERT INTO orig_rows(changeset, action, path, path2, exchange, implicit, "
		      "src_dev, src_ino, present, mode, uid, gid, atime_ns, mtime_ns, ctime_ns, "
		      "size, "
		      "dev, ino, nlink, blob, target, xattrs, not_kept, op, pid, comm, mode_name, "
		      "time_ns, thread, id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
		      "?12, "
		      "?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, "
		      "?28, ?30, "
		      /* NULL (SQLite's next) but above ?29, the floor a lost batch left
		       * (batch_lost): its ids are never given again by this store. In the
		       * statement, so no other daemon's insert can come between the look and the
		       * insert. */
		      "CASE WHEN ?29 IS NOT NULL AND "
		      "(SELECT coalesce(max(id), 0) FROM orig_rows) < ?29 THEN ?29 + 1 END)",
		      -1, &s->insert, NULL);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	sqlite3_stmt *st = s->insert;
	if (s->id_floor)
		sqlite3_bind_int64(st, 29, s->id_floor);
	sqlite3_bind_int64(st, 1, row->changeset);
	sqlite3_bind_text(st, 2, row->action == PW_UNDO_ORIG_MOVE ? "move" : "keep", -1,
			  SQLITE_STATIC);
	sqlite3_bind_text(st, 3, row->path, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, row->path2, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 5, row->exchange);
	sqlite3_bind_int(st, 6, row->implicit);
	sqlite3_bind_int64(st, 7, (sqlite3_int64)row->src_dev);
	sqlite3_bind_int64(st, 8, (sqlite3_int64)row->src_ino);
	sqlite3_bind_int(st, 9, o && o->present);
	if (o && o->present) {
		sqlite3_bind_int64(st, 10, o->mode);
		sqlite3_bind_int64(st, 11, o->uid);
		sqlite3_bind_int64(st, 12, o->gid);
		sqlite3_bind_int64(st, 13, o->atime_ns);
		sqlite3_bind_int64(st, 14, o->mtime_ns);
		sqlite3_bind_int64(st, 15, o->ctime_ns);
		sqlite3_bind_int64(st, 16, (sqlite3_int64)o->size);
		sqlite3_bind_int64(st, 17, (sqlite3_int64)o->dev);
		sqlite3_bind_int64(st, 18, (sqlite3_int64)o->ino);
		sqlite3_bind_int64(st, 19, (sqlite3_int64)o->nlink);
		if (o->blob[0])
			sqlite3_bind_text(st, 20, o->blob, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 21, o->target, -1, SQLITE_STATIC);
		if (o->xattrs_len)
			sqlite3_bind_blob(st, 22, o->xattrs, (int)o->xattrs_len, SQLITE_STATIC);
		sqlite3_bind_text(st, 23, o->not_kept, -1, SQLITE_STATIC);
	}
	sqlite3_bind_text(st, 24, row->op, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 25, row->pid);
	sqlite3_bind_text(st, 26, row->comm, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 27, row->mode, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 28, time_ns ? time_ns : pw_db_now_ns());
	sqlite3_bind_text(st, 30, row->thread, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	/* The bound strings are the caller's: let go of them, ready for the next row. */
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE)
		return pw_db_errno(rc);
	int64_t id = sqlite3_last_insert_rowid(s->db);
	if (id > s->max_id)
		s->max_id = id;
	if (s->txn && !s->batch_first)
		s->batch_first = id;
	if (ret_id)
		*ret_id = id;
	return 0;
}

/* A failed statement can end the transaction (SQLite rolls back on some errors: a full
 * disk, an I/O error): the batch is lost then. */
static int txn_checked(pw_undo_orig_store *s, int r)
{
	if (r < 0 && s->txn && sqlite3_get_autocommit(s->db))
		batch_lost(s);
	return r;
}

/*
 * The row pw_undo_orig_insert added to a batch it could not commit is rolled back, alone: its
 * change will not happen, so it must never be committed later. The batch's other rows are
 * journaled and their changes made; they stay for the next flush. Should even that fail,
 * the whole transaction goes, and the batch with it (batch_lost: the journal has its rows).
 */
static void take_row_back(pw_undo_orig_store *s)
{
	if (pw_db_exec(s->db, "ROLLBACK TO one_row") == 0 &&
	    pw_db_exec(s->db, "RELEASE one_row") == 0)
		return;
	if (!sqlite3_get_autocommit(s->db))
		(void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	batch_lost(s);
}

int pw_undo_orig_insert(pw_undo_orig_store *s, const pw_undo_orig_row *row, int64_t *ret_id)
{
	(void)txn_ended(s);
	int r = batch_recover(s);
	if (r == 0)
		r = drain(s); /* the rows of earlier changes go first */
	if (r < 0)
		return r;
	/* In a batch, the row alone can be taken back (below): the batch's rows stay. */
	if (s->txn && (r = txn_checked(s, pw_db_exec(s->db, "SAVEPOINT one_row"))) < 0)
		return r;
	r = txn_checked(s, insert_row(s, row, 0, ret_id));
	/* The deferred rows before it are committed with it, in one transaction: what is
	 * committed is always every row up to some point, never a later row without an
	 * earlier one. */
	if (r == 0 && s->txn)
		r = pw_undo_orig_flush(s);
	if (r < 0 && s->txn)
		take_row_back(s);
	return r;
}

int pw_undo_orig_insert_deferred(pw_undo_orig_store *s, const pw_undo_orig_row *row,
				 int64_t *ret_id)
{
	/* Without a journal, no deferring. A row that holds an object fits the journal too:
	 * its blob is in place already (pw_undo_orig_capture), and the record names it. */
	if (s->journal.fd < 0 || txn_open(s) < 0)
		return pw_undo_orig_insert(s, row, ret_id);
	int r = drain(s); /* the rows of earlier changes go first */
	if (r < 0)
		return r;
	int64_t now = pw_db_now_ns(), id = 0;
	r = txn_checked(s, insert_row(s, row, now, &id));
	if (r < 0)
		return r;
	*ret_id = id;
	uint64_t seq;
	/* In the journal before the change is applied: a kill after it loses nothing. If
	 * the journal cannot take it, the row is committed now instead. */
	if (pw_undo_journal_append(&s->journal, row, now, &seq) < 0)
		return pw_undo_orig_flush(s);
	batch_note(s, seq, id);
	if (++s->txn_rows + s->queue_len >= PW_UNDO_ORIG_DEFER_ROWS)
		(void)pw_undo_orig_flush(s); /* if busy, the flusher tries again */
	return 0;
}

/* ---- queued rows (pw_undo_orig_queue) ------------------------------------------------------- */

static void recent_put(pw_undo_orig_store *s, uint64_t seq, int64_t id)
{
	if (!s->recent && !(s->recent = calloc(PW_UNDO_ORIG_RECENT_MAX, sizeof(*s->recent))))
		return; /* out of memory: a late delete of this row finds nothing */
	s->recent[s->recent_next++ % PW_UNDO_ORIG_RECENT_MAX] =
	    (struct recent_id){.seq = seq, .id = id};
}

/* The row id behind ID: itself, or a token's once a flush inserted its row; 0 if unknown.
 * Queued rows are drained first. */
static int64_t resolve(pw_undo_orig_store *s, int64_t id)
{
	if (!(id & TOKEN_BIT)) {
		if (!id_lost(s, id))
			return id;
		const struct batch_id *b = lost_find(s, id, 0);
		return b ? b->now : 0;
	}
	uint64_t seq = (uint64_t)(id & ~TOKEN_BIT);
	for (size_t i = 0; s->recent && i < PW_UNDO_ORIG_RECENT_MAX && i < s->recent_next; i++) {
		size_t slot = (s->recent_next - 1 - i) % PW_UNDO_ORIG_RECENT_MAX;
		const struct recent_id *r = &s->recent[slot];
		if (r->seq == seq)
			return r->id;
	}
	return 0;
}

/* Inserts the queued rows not in the transaction yet, opening it if need be. */
static int drain(pw_undo_orig_store *s)
{
	if (s->queue_inserted == s->queue_len)
		return 0;
	int r = txn_open(s);
	if (r < 0)
		return r;
	pw_undo_orig_object none = {0};
	for (; s->queue_inserted < s->queue_len; s->queue_inserted++) {
		const queued_row *q = &s->queue[s->queue_inserted];
		pw_undo_orig_row row = {.changeset = q->changeset,
					.action = PW_UNDO_ORIG_KEEP,
					.path = q->path,
					.implicit = q->implicit,
					.obj = &none,
					.op = q->op,
					.comm = q->comm,
					.mode = q->mode,
					.pid = q->pid,
					.thread = q->thread};
		int64_t id = 0;
		r = txn_checked(s, insert_row(s, &row, q->time_ns, &id));
		if (r < 0)
			return r; /* rolled back or still in, counted; lost, the queue went
				     (batch_lost) */
		recent_put(s, q->seq, id);
	}
	return 0;
}

/* The transaction holding the first QUEUE_INSERTED rows is committed: they leave. */
static void queue_committed(pw_undo_orig_store *s)
{
	if (!s->queue_inserted)
		return;
	for (size_t i = 0; i < s->queue_inserted; i++)
		free(s->queue[i].path);
	memmove(s->queue, s->queue + s->queue_inserted,
		(s->queue_len - s->queue_inserted) * sizeof(*s->queue));
	s->queue_len -= s->queue_inserted;
	s->queue_inserted = 0;
}

/* ROW's strings, copied into one allocation. */
static bool queued_strings(queued_row *q, const pw_undo_orig_row *row)
{
	const char *src[5] = {row->path, row->op ? row->op : "", row->comm ? row->comm : "",
			      row->mode ? row->mode : "", row->thread ? row->thread : ""};
	size_t len[5], total = 0;
	for (int i = 0; i < 5; i++)
		total += (len[i] = strlen(src[i])) + 1;
	char *p = malloc(total);
	if (!p)
		return false;
	char **dst[5] = {&q->path, &q->op, &q->comm, &q->mode, &q->thread};
	for (int i = 0; i < 5; i++) {
		memcpy(p, src[i], len[i] + 1);
		*dst[i] = p;
		p += len[i] + 1;
	}
	/* NULL stays NULL in the row (the columns are NULL, not ""). */
	if (!row->op)
		q->op = NULL;
	if (!row->comm)
		q->comm = NULL;
	if (!row->mode)
		q->mode = NULL;
	if (!row->thread)
		q->thread = NULL;
	return true;
}

int pw_undo_orig_queue_try(pw_undo_orig_store *s, const pw_undo_orig_row *row, int64_t *ret_id)
{
	if (s->journal.fd < 0 || row->action != PW_UNDO_ORIG_KEEP ||
	    (row->obj && row->obj->present) || !s->flusher_started || s->lost_pending)
		return -EAGAIN; /* a lost batch's replay first: pw_undo_orig_queue's slow path does
				   it */
	if (s->queue_len == s->queue_cap) {
		size_t cap = s->queue_cap ? 2 * s->queue_cap : 256;
		queued_row *q = realloc(s->queue, cap * sizeof(*q));
		if (!q)
			return -EAGAIN;
		s->queue = q;
		s->queue_cap = cap;
	}
	queued_row *q = &s->queue[s->queue_len];
	*q = (queued_row){.changeset = row->changeset,
			  .pid = row->pid,
			  .implicit = row->implicit,
			  .time_ns = pw_db_now_ns()};
	if (!queued_strings(q, row))
		return -EAGAIN;
	/* In the journal before the change is applied, as every deferred row: a kill after it
	 * loses nothing (the replay inserts it). */
	if (pw_undo_journal_append(&s->journal, row, q->time_ns, &q->seq) < 0) {
		free(q->path);
		return -EAGAIN;
	}
	if (!s->txn && !s->queue_len) {
		s->txn_since = pw_clock_ns(CLOCK_MONOTONIC);
		pthread_cond_signal(&s->wake);
	}
	s->queue_len++;
	*ret_id = TOKEN_BIT | (int64_t)q->seq;
	/* A full batch is the flusher's to commit, now: nothing here may write the database
	 * (the caller's credentials may be in force, pw_undo_orig_queue_try's promise). */
	if (s->txn_rows + s->queue_len >= PW_UNDO_ORIG_DEFER_ROWS) {
		s->txn_since = INT64_MIN / 2;
		pthread_cond_signal(&s->wake);
	}
	return 0;
}

int pw_undo_orig_queue(pw_undo_orig_store *s, const pw_undo_orig_row *row, int64_t *ret_id)
{
	if (start_flusher(s) == 0 && pw_undo_orig_queue_try(s, row, ret_id) == 0)
		return 0;
	return pw_undo_orig_insert_deferred(s, row, ret_id);
}

/* ---- a lost batch ---------------------------------------------------------------------- */

/* A deferred row of the open batch, journaled as record SEQ: remembered until the commit. */
static void batch_note(pw_undo_orig_store *s, uint64_t seq, int64_t id)
{
	if (s->batch_n == s->batch_cap) {
		size_t cap = s->batch_cap ? 2 * s->batch_cap : 256;
		struct batch_id *b = realloc(s->batch_ids, cap * sizeof(*b));
		if (!b)
			return; /* then its id names nothing after a loss (resolve: 0) */
		s->batch_ids = b;
		s->batch_cap = cap;
	}
	s->batch_ids[s->batch_n++] = (struct batch_id){.seq = seq, .id = id};
}

/*
 * The batch's transaction ended without its commit: SQLite rolled it back on an error (a
 * full disk, an I/O error), or pw_undo_orig_insert had to. Every row it held, deferred or
 * queued, and every row still queued, is in the journal past the mark the database holds,
 * and its change may be made already: none may be lost. They are read back from the
 * journal and committed by batch_recover, and until then nothing else is written, read or
 * pruned (a change that asks meanwhile is refused: a full disk fails it anyway), so the rows
 * keep the order of their changes, which undo replays backwards. A daemon that dies before
 * leaves them in its journal for the next start. The ids the batch gave name no row now,
 * and SQLite would give them again, to this store or to another daemon sharing the
 * database, while a caller may still hold one (a keep's row, for pw_undo_orig_set_content or a
 * failed change's pw_undo_orig_delete): this store gives none of them again (insert_row's
 * floor), and resolve follows each to the row that replaces it. Lock held.
 */
static void batch_lost(pw_undo_orig_store *s)
{
	s->txn = false;
	s->txn_rows = 0;
	if (s->max_id > s->id_floor)
		s->id_floor = s->max_id;
	if (s->batch_first) {
		struct id_range *r =
		    realloc(s->lost_ranges, (s->ranges_n + 1) * sizeof(*s->lost_ranges));
		if (r) {
			s->lost_ranges = r;
			s->lost_ranges[s->ranges_n++] =
			    (struct id_range){s->batch_first, s->max_id};
		} else {
			s->doubtful_upto =
			    s->max_id; /* out of memory: every id so far is in doubt */
		}
	}
	struct batch_id *l = realloc(s->lost, (s->lost_n + s->batch_n + 1) * sizeof(*l));
	if (l) {
		s->lost = l;
		memcpy(s->lost + s->lost_n, s->batch_ids, s->batch_n * sizeof(*l));
		s->lost_n += s->batch_n;
	}
	s->batch_n = 0;
	s->batch_first = 0;
	/* The ids the batch gave queued rows: gone with it (batch_recover gives the new). */
	for (size_t i = 0; s->recent && i < PW_UNDO_ORIG_RECENT_MAX; i++)
		if (s->recent[i].seq > s->journal_committed)
			s->recent[i] = (struct recent_id){0};
	for (size_t i = 0; i < s->queue_len; i++)
		free(s->queue[i].path);
	s->queue_len = s->queue_inserted = 0;
	if (s->journal.fd >= 0 && s->journal.seq != s->journal_committed)
		s->lost_pending = true;
}

/* Whether the batch SQLite rolled back unseen is lost (an error answered with a rollback
 * where the caller did not check for one): then batch_lost, and true. */
static bool txn_ended(pw_undo_orig_store *s)
{
	if (!s->txn || !sqlite3_get_autocommit(s->db))
		return false;
	batch_lost(s);
	return true;
}

/* Whether ID is one a lost batch gave (it names no row of ours but through LOST). */
static bool id_lost(const pw_undo_orig_store *s, int64_t id)
{
	if (id <= s->doubtful_upto)
		return true;
	for (size_t i = 0; i < s->ranges_n; i++)
		if (id >= s->lost_ranges[i].lo && id <= s->lost_ranges[i].hi)
			return true;
	return false;
}

static struct batch_id *lost_find(pw_undo_orig_store *s, int64_t id, uint64_t seq)
{
	for (size_t i = 0; i < s->lost_n; i++)
		if (id ? s->lost[i].id == id : s->lost[i].seq == seq)
			return &s->lost[i];
	return NULL;
}

typedef struct recovery {
	pw_undo_orig_store *s;
	struct recovered {
		uint64_t seq;
		int64_t id;
	} * ids;
	size_t n;
} recovery;

/* One record of the lost batch's journal: its row again (and its blob's record). */
static int recover_record(void *data, const char *name, uint64_t seq, const pw_undo_orig_row *row,
			  int64_t time_ns)
{
	recovery *c = data;
	(void)name;
	if (seq <= c->s->journal_committed)
		return 0;
	struct recovered *ids = realloc(c->ids, (c->n + 1) * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	c->ids = ids;
	int64_t id = 0;
	int r = insert_recorded(c->s, row, time_ns, &id);
	if (r == 0)
		c->ids[c->n++] = (struct recovered){seq, id};
	return r;
}

static void delete_row(pw_undo_orig_store *s, int64_t id);

/* The rows a lost batch took are committed again: each old id (and token) now names its. */
static void recovered(pw_undo_orig_store *s, const recovery *c)
{
	for (size_t i = 0; i < c->n; i++) {
		struct batch_id *b = lost_find(s, 0, c->ids[i].seq);
		if (!b) {
			recent_put(s, c->ids[i].seq, c->ids[i].id); /* a queued row's token */
			continue;
		}
		b->now = c->ids[i].id;
		if (b->failed) /* its change failed meanwhile: its row goes, as it would have */
			delete_row(s, b->now);
	}
}

/*
 * Commits the rows of a lost batch (batch_lost) again, read back from the journal, in one
 * transaction marked, as every batch's, with the journal's last sequence number. 0 once
 * they are committed (or nothing was lost), else -errno: nothing else may be written yet.
 */
static int batch_recover(pw_undo_orig_store *s)
{
	if (!s->lost_pending)
		return 0;
	recovery c = {.s = s};
	int r = pw_db_exec(s->db, "BEGIN IMMEDIATE");
	if (r < 0)
		return r;
	r = pw_undo_journal_read(&s->journal, recover_record, &c);
	if (r == 0)
		r = journal_mark(s, s->journal.seq);
	if (r == 0)
		r = pw_db_exec(s->db, "COMMIT");
	if (r < 0) {
		if (!sqlite3_get_autocommit(s->db))
			(void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		free(c.ids);
		return r;
	}
	s->lost_pending = false;
	s->journal_committed = s->journal.seq;
	(void)pw_undo_journal_truncate(&s->journal); /* if it fails, the replay skips them all */
	recovered(s, &c);
	free(c.ids);
	return 0;
}

/* Every row so far committed, a lost batch's included: before a read (undo must see all of
 * a change set's rows, or refuse), a prune, a new change set. 0 or -errno. */
static int settle(pw_undo_orig_store *s)
{
	int r = pw_undo_orig_flush(s);
	return r < 0 ? r : batch_recover(s);
}

/*
 * Whether blobs no committed row names may be removed now. Under the write lock: no live
 * daemon's batch is open then (each holds the lock from before it links a blob until it
 * commits, hold_for_blob), so a record that names such a blob can only be in a journal not
 * replayed: a dead daemon's, or a live one's just after its commit. Then not now.
 */
static bool may_remove_blobs(pw_undo_orig_store *s)
{
	return s->dir_fd >= 0 && !pw_undo_journal_others_pending(s->dir_fd, s->journal.name);
}

/* Removes blob HASH (file and record) when no row references it. No batch is open. */
static void drop_unreferenced(pw_undo_orig_store *s, const char *hash)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	if (strlen(hash) != PW_SHA256_HEX - 1 || strchr(hash, '/'))
		return;
	/* The look and the removal in one write transaction: another view that links this
	 * content meanwhile holds the lock until its row is committed (hold_for_blob). */
	if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return; /* busy: the blob waits for the next prune */
	bool drop = may_remove_blobs(s) &&
		    sqlite3_prepare_v2(s->db, "SELECT 1 FROM orig_rows WHERE blob = ?1 LIMIT 1", -1,
				       &st, NULL) == SQLITE_OK;
	if (drop) {
		sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
		drop = sqlite3_step(st) == SQLITE_DONE; /* referenced (or unknown): keep it */
		sqlite3_finalize(st);
		st = NULL;
	}
	if (drop && sqlite3_prepare_v2(s->db, "DELETE FROM orig_blobs WHERE hash = ?1", -1, &st,
				       NULL) == SQLITE_OK) {
		sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_DONE)
			(void)unlinkat(s->blobs_fd, hash, 0);
	}
	if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		(void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

void pw_undo_orig_delete(pw_undo_orig_store *s, int64_t id)
{
	/* Committed on its own: a blob file removed below must never outlive, in a crash, a
	 * transaction that would bring its row back. */
	if (settle(s) < 0) {
		/* A lost batch's row not back yet: it goes when it comes back (recovered). */
		struct batch_id *b = id_lost(s, id) ? lost_find(s, id, 0) : NULL;
		if (b && !b->now)
			b->failed = true;
		return;
	}
	if ((id = resolve(s, id)))
		delete_row(s, id);
}

/* Deletes row ID (committed, no batch open) and its blob when no other row names it. */
static void delete_row(pw_undo_orig_store *s, int64_t id)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	char hash[PW_SHA256_HEX] = "";
	if (sqlite3_prepare_v2(s->db, "SELECT blob FROM orig_rows WHERE id = ?1", -1, &st, NULL) ==
	    SQLITE_OK) {
		sqlite3_bind_int64(st, 1, id);
		if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
			snprintf(hash, sizeof(hash), "%s",
				 (const char *)sqlite3_column_text(st, 0));
		sqlite3_finalize(st);
	}
	st = NULL;
	if (sqlite3_prepare_v2(s->db, "DELETE FROM orig_rows WHERE id = ?1", -1, &st, NULL) !=
	    SQLITE_OK)
		return;
	sqlite3_bind_int64(st, 1, id);
	(void)sqlite3_step(st);
	/* A change that failed leaves no blob of its own behind: one kept by a link would
	 * still be a second name of the file the change did not remove after all. */
	if (hash[0])
		drop_unreferenced(s, hash);
}

/*
 * A switch storm is cheap for the store (issue 27): the change set begun last by a mount
 * or a switch, with no name and no row, goes when the next begins, so a storm of switches
 * without changes leaves nothing behind. A checkpoint's or an undo's stays: the person
 * asked for it, and `changes` shows it. Its rows are committed (settle) before this.
 */
static void drop_if_empty(pw_undo_orig_store *s, int64_t id)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	if (!id ||
	    sqlite3_prepare_v2(s->db,
			       "DELETE FROM orig_changesets WHERE id = ?1 AND name IS NULL AND "
			       "reason IN ('mount', 'switch') AND NOT EXISTS "
			       "(SELECT 1 FROM orig_rows WHERE changeset = ?1)",
			       -1, &st, NULL) != SQLITE_OK)
		return;
	sqlite3_bind_int64(st, 1, id);
	(void)sqlite3_step(st);
}

int pw_undo_orig_changeset_begin(pw_undo_orig_store *s, const char *project, const char *mountpoint,
				 const char *reason, const char *name, const char *mode,
				 int64_t *ret_id)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int rc = settle(s); /* the rows of the set it ends go first */
	if (rc < 0)
		return rc;
	drop_if_empty(s, s->current);
	rc = sqlite3_prepare_v2(s->db,
				"INSERT INTO orig_changesets(project, mountpoint, started_ns, "
				"reason, name, mode) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
				-1, &st, NULL);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, mountpoint, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, pw_db_now_ns());
	sqlite3_bind_text(st, 4, reason, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 6, mode, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		return pw_db_errno(rc);
	*ret_id = sqlite3_last_insert_rowid(s->db);
	s->current = *ret_id;
	s->undoing = reason && (streq(reason, "undo") || streq(reason, "redo"));
	return 0;
}

/* UPDATE orig_changesets SET COLUMN = the text or integer value WHERE id = ID. */
static int changeset_update(pw_undo_orig_store *s, const char *sql, const char *text_v,
			    int64_t int_v, int64_t id)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = settle(s);
	if (r < 0)
		return r;
	int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	if (text_v)
		sqlite3_bind_text(st, 1, text_v, -1, SQLITE_STATIC);
	else
		sqlite3_bind_int64(st, 1, int_v);
	sqlite3_bind_int64(st, 2, id);
	rc = sqlite3_step(st);
	return rc == SQLITE_DONE ? 0 : pw_db_errno(rc);
}

int pw_undo_orig_changeset_set_undoes(pw_undo_orig_store *s, int64_t id, const char *undoes)
{
	return changeset_update(s, "UPDATE orig_changesets SET undoes = ?1 WHERE id = ?2", undoes,
				0, id);
}

int pw_undo_orig_changeset_set_redone(pw_undo_orig_store *s, int64_t id, int64_t by)
{
	return changeset_update(s, "UPDATE orig_changesets SET redone_by = ?1 WHERE id = ?2", NULL,
				by, id);
}

int pw_undo_orig_set_content(pw_undo_orig_store *s, int64_t id, const pw_undo_orig_object *o)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = drain(s);
	if (r < 0)
		return r;
	if (!(id = resolve(s, id)))
		return -ENOENT;
	int rc = sqlite3_prepare_v2(s->db,
				    "UPDATE orig_rows SET blob = ?1, not_kept = ?2, size = ?3 "
				    "WHERE id = ?4",
				    -1, &st, NULL);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	if (o->blob[0])
		sqlite3_bind_text(st, 1, o->blob, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, o->not_kept, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)o->size);
	sqlite3_bind_int64(st, 4, id);
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		return txn_checked(s, pw_db_errno(rc));
	if (sqlite3_changes(s->db) == 0)
		return -ENOENT; /* no such row: the change that asks must not go on unkept */
	/* Committed now, with the rows before it and the blob's record (in the transaction
	 * since hold_for_blob): not journaled, so it must not wait for the batch. */
	return pw_undo_orig_flush(s);
}

/* ---- reading back ---------------------------------------------------------------------- */

static const char *text(sqlite3_stmt *st, int i)
{
	return (const char *)sqlite3_column_text(st, i);
}

static int read_sets(pw_undo_orig_store *s, const char *project,
		     int (*fn)(const pw_undo_orig_changeset *c, void *u), void *u)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(s->db,
				    "SELECT id, started_ns, reason, name, mode, undoes, redone_by, "
				    "mountpoint FROM orig_changesets "
				    "WHERE project = ?1 ORDER BY id",
				    -1, &st, NULL);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		pw_undo_orig_changeset c = {
		    .id = sqlite3_column_int64(st, 0),
		    .started_ns = sqlite3_column_int64(st, 1),
		    .reason = text(st, 2),
		    .name = text(st, 3),
		    .mode = text(st, 4),
		    .undoes = text(st, 5),
		    .redone_by = sqlite3_column_int64(st, 6),
		    .mountpoint = text(st, 7),
		};
		int r = fn(&c, u);
		if (r < 0)
			return r;
	}
	return rc == SQLITE_DONE ? 0 : pw_db_errno(rc);
}

static int read_rows(pw_undo_orig_store *s, const char *project,
		     int (*fn)(const pw_undo_orig_rec *r, void *u), void *u)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(
	    s->db,
	    "SELECT r.id, r.changeset, r.action, r.path, r.path2, r.exchange, r.implicit, "
	    "r.src_dev, r.src_ino, r.present, r.mode, r.uid, r.gid, r.atime_ns, r.mtime_ns, "
	    "r.size, r.blob, r.target, r.xattrs, r.not_kept, r.op, r.pid, r.comm, "
	    "r.mode_name, r.time_ns, r.ctime_ns, r.ino, r.dev, r.nlink, r.thread FROM orig_rows "
	    "r JOIN "
	    "orig_changesets c ON c.id = r.changeset WHERE c.project = ?1 ORDER BY r.id",
	    -1, &st, NULL);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *action = text(st, 2), *path = text(st, 3), *blob = text(st, 16);
		pw_undo_orig_rec r = {
		    .id = sqlite3_column_int64(st, 0),
		    .changeset = sqlite3_column_int64(st, 1),
		    .action =
			action && streq(action, "move") ? PW_UNDO_ORIG_MOVE : PW_UNDO_ORIG_KEEP,
		    .path = path ? path : "",
		    .path2 = text(st, 4),
		    .exchange = sqlite3_column_int(st, 5),
		    .implicit = sqlite3_column_int(st, 6),
		    .src_dev = (uint64_t)sqlite3_column_int64(st, 7),
		    .src_ino = (uint64_t)sqlite3_column_int64(st, 8),
		    .op = text(st, 20),
		    .pid = sqlite3_column_int64(st, 21),
		    .comm = text(st, 22),
		    .thread = text(st, 29),
		    .mode_name = text(st, 23),
		    .time_ns = sqlite3_column_int64(st, 24),
		};
		pw_undo_orig_object *o = &r.o;
		o->present = sqlite3_column_int(st, 9);
		o->mode = (mode_t)sqlite3_column_int64(st, 10);
		o->uid = (uid_t)sqlite3_column_int64(st, 11);
		o->gid = (gid_t)sqlite3_column_int64(st, 12);
		o->atime_ns = sqlite3_column_int64(st, 13);
		o->mtime_ns = sqlite3_column_int64(st, 14);
		o->size = (uint64_t)sqlite3_column_int64(st, 15);
		snprintf(o->blob, sizeof(o->blob), "%s", blob ? blob : "");
		o->target = (char *)text(st, 17);
		int xl = sqlite3_column_bytes(st, 18);
		o->xattrs = xl > 0 ? (void *)sqlite3_column_blob(st, 18) : NULL;
		o->xattrs_len = o->xattrs ? (size_t)xl : 0;
		o->not_kept = text(st, 19);
		o->ctime_ns = sqlite3_column_int64(st, 25);
		o->ino = (uint64_t)sqlite3_column_int64(st, 26);
		o->dev = (uint64_t)sqlite3_column_int64(st, 27);
		o->nlink = (uint64_t)sqlite3_column_int64(st, 28);
		int q = fn(&r, u);
		if (q < 0)
			return q;
	}
	return rc == SQLITE_DONE ? 0 : pw_db_errno(rc);
}

int pw_undo_orig_read(pw_undo_orig_store *s, const char *project,
		      int (*set_fn)(const pw_undo_orig_changeset *c, void *u),
		      int (*row_fn)(const pw_undo_orig_rec *r, void *u), void *u)
{
	int r = settle(s); /* what is read is what is committed */
	if (r < 0)
		return r;
	r = read_sets(s, project, set_fn, u);
	return r < 0 ? r : read_rows(s, project, row_fn, u);
}

/* ---- retention ------------------------------------------------------------------------- */

int pw_undo_orig_total(pw_undo_orig_store *s, uint64_t *ret_bytes, uint64_t *ret_blobs)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(
	    s->db, "SELECT coalesce(sum(size), 0), count(*) FROM orig_blobs", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return pw_db_errno(rc);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW)
		return pw_db_errno(rc);
	*ret_bytes = (uint64_t)sqlite3_column_int64(st, 0);
	if (ret_blobs)
		*ret_blobs = (uint64_t)sqlite3_column_int64(st, 1);
	return 0;
}

static int drop_changeset(pw_undo_orig_store *s, int64_t id)
{
	char sql[160];
	snprintf(sql, sizeof(sql),
		 "DELETE FROM orig_rows WHERE changeset = %lld;"
		 "DELETE FROM orig_changesets WHERE id = %lld;",
		 (long long)id, (long long)id);
	return pw_db_exec(s->db, sql);
}

/* The oldest change set other than PROTECT, or 0. */
static int64_t oldest(pw_undo_orig_store *s, int64_t protect, int64_t *ret_started)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(s->db,
			       "SELECT id, started_ns FROM orig_changesets WHERE id != ?1 "
			       "ORDER BY id LIMIT 1",
			       -1, &st, NULL) != SQLITE_OK)
		return 0;
	sqlite3_bind_int64(st, 1, protect);
	if (sqlite3_step(st) != SQLITE_ROW)
		return 0;
	*ret_started = sqlite3_column_int64(st, 1);
	return sqlite3_column_int64(st, 0);
}

/* Bytes of the blobs still referenced by some row. */
static uint64_t referenced_bytes(pw_undo_orig_store *s)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(s->db,
			       "SELECT coalesce(sum(size), 0) FROM orig_blobs WHERE hash IN "
			       "(SELECT blob FROM orig_rows WHERE blob IS NOT NULL)",
			       -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW)
		return 0;
	return (uint64_t)sqlite3_column_int64(st, 0);
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
 * journal replayed (may_remove_blobs): a live daemon holds the lock from before it links a
 * blob until the record is committed (hold_for_blob), so no such file is anybody's yet.
 * Not only space: a file about to be removed is kept by a link (link_content), and the kill
 * may come before the removal, leaving the project's file with a second name in the store;
 * its nlink then says 2, and a write in place would change the "kept" content. Adds the
 * bytes freed to FREED.
 */
static void drop_unrecorded(pw_undo_orig_store *s, uint64_t *freed)
{
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", s->blobs_fd);
	DIR *d = opendir(proc);
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	if (!d)
		return;
	if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM orig_blobs WHERE hash = ?1", -1, &st, NULL) !=
	    SQLITE_OK) {
		closedir(d);
		return;
	}
	for (struct dirent *de; (de = readdir(d));) {
		if (!blob_name(de->d_name))
			continue; /* not the store's: left alone */
		sqlite3_bind_text(st, 1, de->d_name, -1, SQLITE_TRANSIENT);
		int rc = sqlite3_step(st);
		sqlite3_reset(st);
		if (rc != SQLITE_DONE)
			continue; /* recorded, or unknown: kept */
		struct stat bst;
		if (fstatat(dirfd(d), de->d_name, &bst, AT_SYMLINK_NOFOLLOW) == 0 &&
		    unlinkat(dirfd(d), de->d_name, 0) == 0)
			*freed += (uint64_t)bst.st_size;
	}
	closedir(d);
}

int pw_undo_orig_prune(pw_undo_orig_store *s, int64_t keep_ns, uint64_t max_total, int64_t protect,
		       uint64_t *ret_bytes)
{
	if (!keep_ns)
		keep_ns = s->keep_ns;
	if (!max_total)
		max_total = s->max_total;
	int r = settle(s); /* a lost batch's rows too: a change set they belong to stays */
	if (r < 0)
		return r;
	/* A dead daemon's rows first: they may name blobs that older rows name too. */
	(void)journal_replay(s);
	int64_t limit = pw_db_now_ns() - keep_ns;
	int removed = 0;
	for (;;) {
		int64_t started = 0, id = oldest(s, protect, &started);
		if (!id)
			break;
		if (started >= limit && referenced_bytes(s) <= max_total)
			break;
		r = drop_changeset(s, id);
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
	bool locked = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK;
	if (locked && !may_remove_blobs(s)) {
		(void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		locked = false;
	}
	if (!locked) {
		if (ret_bytes)
			*ret_bytes = 0;
		/* busy, or a journal not replayed: the unreferenced blobs wait for the next prune
		 */
		return r < 0 ? r : removed;
	}
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(s->db,
			       "SELECT hash, size FROM orig_blobs WHERE hash NOT IN "
			       "(SELECT blob FROM orig_rows WHERE blob IS NOT NULL)",
			       -1, &st, NULL) == SQLITE_OK) {
		while (sqlite3_step(st) == SQLITE_ROW) {
			const char *hash = (const char *)sqlite3_column_text(st, 0);
			if (!hash || strlen(hash) != PW_SHA256_HEX - 1 || strchr(hash, '/'))
				continue;
			freed += (uint64_t)sqlite3_column_int64(st, 1);
			char proc[64];
			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", s->blobs_fd);
			_cleanup_close_ int dfd = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
			if (dfd >= 0)
				(void)unlinkat(dfd, hash, 0);
		}
	}
	sqlite3_finalize(st);
	st = NULL;
	(void)pw_db_exec(s->db, "DELETE FROM orig_blobs WHERE hash NOT IN "
				"(SELECT blob FROM orig_rows WHERE blob IS NOT NULL)");
	drop_unrecorded(s, &freed);
	if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		(void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	if (ret_bytes)
		*ret_bytes = freed;
	return r < 0 ? r : removed;
}
