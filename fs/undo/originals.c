/* SPDX-License-Identifier: MIT */
/*
 * The originals store (originals.h has the contract; orig_store.h its inside): opening and
 * closing it, the batch of deferred rows and its journal, queued rows, a lost batch, the
 * change sets, reading back. The contents it keeps are blobs.c's; every SQL statement is
 * store/orig_sql.h's.
 */
#include "originals.h"
#include "orig_store.h"
#include "thread.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/limits.h>
#include <pthread.h>
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
#include "store/orig_sql.h"
#include "journal.h"
#include "pw_limits.h"
#include "util.h"

static void journal_forget_removed(pw_undo_orig_store *s);
static void batch_lost(pw_undo_orig_store *s);
static int batch_recover(pw_undo_orig_store *s);
static bool txn_ended(pw_undo_orig_store *s);
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
	r = pw_store_orig_open(o->db_path, o->busy_ms, &s->sql);
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
		(void)pw_undo_orig_journal_replay(s);
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
	if (s->flusher_started)
		pw_thread_stop(s->flusher, &s->lock, &s->wake, &s->stopping);
	/* A close rolls back what is not committed: the journal then stays for the next start
	 * (a lost batch's rows too, unless they can be committed now). */
	bool committed = s->sql && pw_undo_orig_settle(s) == 0 && !s->txn && !s->queue_len;
	pw_undo_journal_close(&s->journal, s->dir_fd, committed);
	if (committed)
		journal_forget_removed(s);
	if (s->dir_fd >= 0)
		close(s->dir_fd);
	for (size_t i = 0; i < s->queue_len; i++)
		free(s->queue[i].path);
	free(s->queue);
	free(s->recent);
	free(s->batch_ids);
	free(s->lost);
	free(s->lost_ranges);
	pw_store_orig_close(s->sql);
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

static int journal_mark(pw_undo_orig_store *s, uint64_t seq)
{
	if (!s->journal.name || seq == s->journal_committed)
		return 0;
	/* in the open transaction */
	return pw_store_orig_journal_mark(s->sql, s->journal.name, seq);
}

/* Whether journal NAME's file is gone from the store's directory (S's). */
static bool journal_gone(const char *name, void *u)
{
	pw_undo_orig_store *s = u;
	return faccessat(s->dir_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
}

/* Forgets the marks of journals whose files are gone (replayed, or closed whole). */
static void journal_forget_removed(pw_undo_orig_store *s)
{
	if (s->dir_fd >= 0)
		pw_store_orig_journal_forget(s->sql, journal_gone, s);
}

typedef struct replay_ctx {
	pw_undo_orig_store *s;
	uint64_t skip, last; /* committed before; the last record seen */
} replay_ctx;

static int replay_begin(void *data, const char *name)
{
	replay_ctx *c = data;
	int r = pw_store_orig_begin(c->s->sql);
	if (r < 0)
		return r;
	c->skip = c->last = pw_store_orig_journal_seq(c->s->sql, name);
	return 0;
}

static int insert_row(pw_undo_orig_store *s, const pw_undo_orig_row *row, int64_t time_ns,
		      int64_t *ret_id);

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
int pw_undo_orig_register_blob(pw_undo_orig_store *s, const char hex[PW_SHA256_HEX], uint64_t size)
{
	return pw_store_orig_blob_add(s->sql, hex, size);
}

/* A journal record's row, inserted again: the blob's own record was in the transaction that
 * never committed (a kill cut it short, or SQLite rolled it back), with the row. */
static int insert_recorded(pw_undo_orig_store *s, const pw_undo_orig_row *row, int64_t time_ns,
			   int64_t *ret_id)
{
	const pw_undo_orig_object *o = row->obj;
	int r = o && o->present && o->blob[0] ? pw_undo_orig_register_blob(s, o->blob, o->size) : 0;
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
		r = pw_store_orig_journal_mark(c->s->sql, name, c->last);
	if (r == 0)
		r = pw_store_orig_commit(c->s->sql);
	if (r < 0)
		pw_store_orig_rollback(c->s->sql);
	return r;
}

/* Adds the rows of dead daemons' journals that their transactions did not commit. */
int pw_undo_orig_journal_replay(pw_undo_orig_store *s)
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
	if (r < 0 && pw_store_orig_in_txn(s->sql))
		return r; /* still open: the next flush tries again */
	int rc = r < 0 ? r : pw_store_orig_commit(s->sql);
	if (rc < 0 && pw_store_orig_in_txn(s->sql))
		return rc; /* still open (busy): the next flush tries again */
	if (rc < 0) {
		batch_lost(s); /* SQLite rolled it back */
		return rc;
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

int pw_undo_orig_txn_open(pw_undo_orig_store *s)
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
	r = pw_store_orig_begin(s->sql);
	if (r < 0)
		return r;
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

/* ---- rows ------------------------------------------------------------------------------ */

static int insert_row(pw_undo_orig_store *s, const pw_undo_orig_row *row, int64_t time_ns,
		      int64_t *ret_id)
{
	int64_t id;
	int r = pw_store_orig_row_add(s->sql, row, time_ns, s->id_floor, &id);
	if (r < 0)
		return r;
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
int pw_undo_orig_txn_checked(pw_undo_orig_store *s, int r)
{
	if (r < 0 && s->txn && !pw_store_orig_in_txn(s->sql))
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
	if (pw_store_orig_savepoint_undo(s->sql) == 0)
		return;
	pw_store_orig_rollback(s->sql);
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
	if (s->txn && (r = pw_undo_orig_txn_checked(s, pw_store_orig_savepoint(s->sql))) < 0)
		return r;
	r = pw_undo_orig_txn_checked(s, insert_row(s, row, 0, ret_id));
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
	if (s->journal.fd < 0 || pw_undo_orig_txn_open(s) < 0)
		return pw_undo_orig_insert(s, row, ret_id);
	int r = drain(s); /* the rows of earlier changes go first */
	if (r < 0)
		return r;
	int64_t now = pw_db_now_ns(), id = 0;
	r = pw_undo_orig_txn_checked(s, insert_row(s, row, now, &id));
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
	int r = pw_undo_orig_txn_open(s);
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
		r = pw_undo_orig_txn_checked(s, insert_row(s, &row, q->time_ns, &id));
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
	if (!s->txn || pw_store_orig_in_txn(s->sql))
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
	int r = pw_store_orig_begin(s->sql);
	if (r < 0)
		return r;
	r = pw_undo_journal_read(&s->journal, recover_record, &c);
	if (r == 0)
		r = journal_mark(s, s->journal.seq);
	if (r == 0)
		r = pw_store_orig_commit(s->sql);
	if (r < 0) {
		pw_store_orig_rollback(s->sql);
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
int pw_undo_orig_settle(pw_undo_orig_store *s)
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
bool pw_undo_orig_may_remove_blobs(pw_undo_orig_store *s)
{
	return s->dir_fd >= 0 && !pw_undo_journal_others_pending(s->dir_fd, s->journal.name);
}

/* Removes blob HASH (file and record) when no row references it. No batch is open. */
static void drop_unreferenced(pw_undo_orig_store *s, const char *hash)
{
	if (strlen(hash) != PW_SHA256_HEX - 1 || strchr(hash, '/'))
		return;
	/* The look and the removal in one write transaction: another view that links this
	 * content meanwhile holds the lock until its row is committed (hold_for_blob). */
	if (pw_store_orig_begin(s->sql) < 0)
		return; /* busy: the blob waits for the next prune */
	/* referenced (or unknown): kept */
	bool drop =
	    pw_undo_orig_may_remove_blobs(s) && pw_store_orig_blob_unreferenced(s->sql, hash);
	if (drop && pw_store_orig_blob_forget(s->sql, hash))
		(void)unlinkat(s->blobs_fd, hash, 0);
	if (pw_store_orig_commit(s->sql) < 0)
		pw_store_orig_rollback(s->sql);
}

void pw_undo_orig_delete(pw_undo_orig_store *s, int64_t id)
{
	/* Committed on its own: a blob file removed below must never outlive, in a crash, a
	 * transaction that would bring its row back. */
	if (pw_undo_orig_settle(s) < 0) {
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
	char hash[PW_SHA256_HEX];
	pw_store_orig_row_blob(s->sql, id, hash);
	if (!pw_store_orig_row_delete(s->sql, id))
		return;
	/* A change that failed leaves no blob of its own behind: one kept by a link would
	 * still be a second name of the file the change did not remove after all. */
	if (hash[0])
		drop_unreferenced(s, hash);
}

/*
 * A switch storm is cheap for the store (issue 27): the change set begun last by a mount
 * or a switch, with no name and no row, goes when the next begins, so a storm of switches
 * without changes leaves nothing behind. A checkpoint's or an undo's stays: the person
 * asked for it, and `changes` shows it. Its rows are committed (pw_undo_orig_settle) before this.
 */
static void drop_if_empty(pw_undo_orig_store *s, int64_t id)
{
	if (id)
		pw_store_orig_changeset_drop_if_empty(s->sql, id);
}

int pw_undo_orig_changeset_begin(pw_undo_orig_store *s, const char *project, const char *mountpoint,
				 const char *reason, const char *name, const char *mode,
				 int64_t *ret_id)
{
	int rc = pw_undo_orig_settle(s); /* the rows of the set it ends go first */
	if (rc < 0)
		return rc;
	drop_if_empty(s, s->current);
	rc = pw_store_orig_changeset_add(s->sql, project, mountpoint, reason, name, mode, ret_id);
	if (rc < 0)
		return rc;
	s->current = *ret_id;
	s->undoing = reason && (streq(reason, "undo") || streq(reason, "redo"));
	return 0;
}

int pw_undo_orig_changeset_set_undoes(pw_undo_orig_store *s, int64_t id, const char *undoes)
{
	int r = pw_undo_orig_settle(s);
	return r < 0 ? r : pw_store_orig_changeset_set_undoes(s->sql, id, undoes);
}

int pw_undo_orig_changeset_set_redone(pw_undo_orig_store *s, int64_t id, int64_t by)
{
	int r = pw_undo_orig_settle(s);
	return r < 0 ? r : pw_store_orig_changeset_set_redone(s->sql, id, by);
}

int pw_undo_orig_set_content(pw_undo_orig_store *s, int64_t id, const pw_undo_orig_object *o)
{
	int r = drain(s);
	if (r < 0)
		return r;
	if (!(id = resolve(s, id)))
		return -ENOENT;
	r = pw_store_orig_row_set_content(s->sql, id, o);
	if (r == -ENOENT)
		return r; /* no such row: the change that asks must not go on unkept */
	if (r < 0)
		return pw_undo_orig_txn_checked(s, r);
	/* Committed now, with the rows before it and the blob's record (in the transaction
	 * since hold_for_blob): not journaled, so it must not wait for the batch. */
	return pw_undo_orig_flush(s);
}

/* ---- reading back ---------------------------------------------------------------------- */

int pw_undo_orig_read(pw_undo_orig_store *s, const char *project,
		      int (*set_fn)(const pw_undo_orig_changeset *c, void *u),
		      int (*row_fn)(const pw_undo_orig_rec *r, void *u), void *u)
{
	int r = pw_undo_orig_settle(s); /* what is read is what is committed */
	if (r < 0)
		return r;
	r = pw_store_orig_read_sets(s->sql, project, set_fn, u);
	return r < 0 ? r : pw_store_orig_read_rows(s->sql, project, row_fn, u);
}
