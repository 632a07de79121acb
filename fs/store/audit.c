/* SPDX-License-Identifier: MIT */
/*
 * The audit writer (audit.h).
 *
 * Why it is built this way. pw_audit_submit() runs inside FUSE request handlers, so it must
 * cost about as much as a memcpy: no SQLite, no disk, no allocation, no waiting for the
 * writer. Events go into a ring of bytes holding variable-length records (a fixed header
 * followed by the event's strings, NUL-terminated), sized once at start. Producers hold the
 * mutex only to reserve space and copy the record in; when the ring has no room (by event
 * count or by bytes) the event is counted as dropped and the call returns.
 *
 * One writer thread owns the tail. It snapshots the head under the mutex, then reads the
 * records between tail and that head WITHOUT the mutex (producers never write there: that
 * space is not free until the tail moves), writes them to SQLite in one transaction, and
 * only after COMMIT advances the tail. So a batch that cannot be written (the database is
 * locked by another process) stays in the ring and is retried: events wait, and the ring
 * fills and drops only if the lock lasts long enough. After a failed transaction the
 * coalescing cache is reset, since the row ids it remembers were rolled back.
 *
 * Coalescing: a storm of identical denials (same pid, op, errno, mode, path and path2 within
 * PW_AUDIT_WINDOW_NS of the row's first event, measured on the events' own timestamps)
 * becomes one row whose count, first_ns and last_ns are updated at the end of each batch.
 * A small direct-mapped cache remembers the recent rows; a miss only costs an extra row.
 *
 * Counters: submitted = written + dropped + (still queued); coalesced counts the written
 * events that were merged into an existing row.
 */
#include "audit.h"
#include "thread.h"
#include "pidns.h"
#include "procfs.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "db.h"
#include "pw_limits.h"
#include "state.h"
#include "util.h"

#define PW_AUDIT_DEFAULT_CAPACITY 65536u
#define PW_AUDIT_MAX_CAPACITY (1u << 22)
#define PW_AUDIT_DEFAULT_DAYS 30u
#define PW_AUDIT_DEFAULT_ROWS 1000000ull
#define PW_AUDIT_BYTES_PER_EVENT 256u	 /* ring budget per event of capacity */
#define PW_AUDIT_MIN_BYTES (64u * 1024u) /* always room for a few maximal records */
#define PW_AUDIT_MAX_BYTES (256u * 1024u * 1024u)
#define PW_AUDIT_WINDOW_NS 1000000000ll /* coalescing window */
#define PW_AUDIT_RETENTION_PERIOD_NS (600ll * 1000000000ll)
#define PW_AUDIT_STOP_GRACE_NS (5ll * 1000000000ll) /* how long stop waits for a locked db */
#define PW_AUDIT_BUSY_MS 200			    /* the writer's busy timeout per attempt */
#define PW_AUDIT_DELETE_CHUNK 10000
#define CO_SLOTS 1024u

enum { S_MODE, S_PATH, S_PATH2, S_PATTERN, S_FILE, S_COMM, S_PIDNS, S_THREAD, S_COUNT };

/* One queued event. Strings follow the header in this order: mode, path, path2, rule
 * pattern, rule file, process name, PID namespaces, thread name; each NUL-terminated; a
 * NULL string is stored with flag bits (an empty process name means "read it from /proc";
 * an empty thread name, none). */
typedef struct rec_hdr {
	uint32_t size; /* whole record, 8-aligned; 0 marks "wrap to the ring's start" */
	uint16_t flags;
	int16_t rule_kind;
	int64_t time_ns;
	uint64_t generation;
	int32_t op, err, reason, pid;
	uint32_t uid, rule_line, rule_column;
	int16_t rule_layer;
	uint16_t len[S_COUNT];
	char data[];
} rec_hdr;

enum {
	REC_HAS_PATH2 = 1u << 0,
	REC_HAS_RULE = 1u << 1,
};

static const size_t str_caps[S_COUNT] = {
    [S_MODE] = PW_MODE_NAME_MAX,      [S_PATH] = PW_TREE_PATH_MAX - 1, /* the view's paths are kept
									  whole */
    [S_PATH2] = PW_TREE_PATH_MAX - 1, [S_PATTERN] = PW_GLOB_LEN_MAX,	 [S_FILE] = PW_PATH_MAX - 1,
    [S_COMM] = PW_AUDIT_COMM_MAX,     [S_PIDNS] = PW_PIDNS_DESC_MAX - 1, /* longer is never
									    produced; cut, it fails
									    to parse */
    [S_THREAD] = PW_AUDIT_COMM_MAX,
};
_Static_assert(PW_TREE_PATH_MAX - 1 <= UINT16_MAX, "rec_hdr.len must hold a whole path");

#define MAX_RECORD_SIZE                                                                            \
	((sizeof(rec_hdr) + PW_MODE_NAME_MAX + 2 * PW_TREE_PATH_MAX + PW_PATH_MAX +                \
	  PW_GLOB_LEN_MAX + 2 * PW_AUDIT_COMM_MAX + PW_PIDNS_DESC_MAX + 7 + 7) &                   \
	 ~7u)

/* A row the coalescing cache remembers. Owned by the writer thread. */
typedef struct co_entry {
	bool valid, dirty;
	bool listed; /* its index is in pw_audit.dirty[] (at most once per batch) */
	uint64_t hash;
	pid_t pid;
	int op, err;
	char *mode, *path, *path2;
	int64_t rowid, first_ns, last_ns;
	uint64_t pending; /* merged events not yet added to the row's count */
} co_entry;

struct pw_audit {
	/* Set at start, read-only afterwards. */
	char *db_path, *project, *mountpoint;
	unsigned cap_events;
	uint64_t cap_bytes;
	int64_t retention_ns;
	uint64_t retention_rows;
	bool log_allowed;
	uint8_t *ring;

	/* Guarded by lock. head/tail are byte positions that only grow (offset = pos %
	 * cap_bytes); the space [tail, head) holds queued records. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t head, tail;
	unsigned count;
	bool writer_waiting, stopping;
	pw_audit_listener listener;
	void *listener_data;
	pw_audit_stats stats;

	/* Writer thread only. */
	pthread_t thread;
	sqlite3 *db;
	sqlite3_stmt *st_insert, *st_update, *st_dropped;
	co_entry co[CO_SLOTS];
	unsigned dirty[CO_SLOTS], n_dirty;
	uint64_t dropped_persisted;
	bool full_check; /* the last failure was corruption: check everything on reopen */
	uint64_t rows_since_retention;
	int64_t next_retention_ns;
};

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* ---- The producer side (hot path). ---- */

/* Reserves NEED contiguous bytes at the head, writing a wrap marker when the record does
 * not fit before the ring's end. Caller holds the lock. Returns the offset, or -ENOBUFS when
 * the ring is full (the event is counted as dropped). */
static int64_t ring_reserve(pw_audit *a, size_t need)
{
	uint64_t used = a->head - a->tail;
	uint64_t off = a->head % a->cap_bytes;
	uint64_t waste = off + need > a->cap_bytes ? a->cap_bytes - off : 0;

	if (used + waste + need > a->cap_bytes)
		return -ENOBUFS;
	if (waste) {
		((rec_hdr *)(a->ring + off))->size = 0; /* waste >= 8: records are 8-aligned */
		a->head += waste;
		off = 0;
	}
	a->head += need;
	return (int64_t)off;
}

void pw_audit_submit(pw_audit *a, const pw_audit_event *ev)
{
	const char *strs[S_COUNT];
	size_t lens[S_COUNT];

	if (!a || !ev)
		return;
	/* An overlapping write (fs/overlap.h) is recorded like a denial: the person wants it. */
	if (ev->err == 0 && !a->log_allowed && ev->reason != PW_REASON_OVERLAP)
		return;

	strs[S_MODE] = ev->mode;
	strs[S_PATH] = ev->path;
	strs[S_PATH2] = ev->path2;
	strs[S_PATTERN] = ev->rule ? ev->rule->pattern : NULL;
	strs[S_FILE] = ev->rule ? ev->rule->file : NULL;
	strs[S_COMM] = ev->comm;
	strs[S_PIDNS] = ev->pidns;
	strs[S_THREAD] = ev->thread;
	size_t need = sizeof(rec_hdr);
	for (unsigned i = 0; i < S_COUNT; i++) {
		lens[i] = strs[i] ? strnlen(strs[i], str_caps[i]) : 0; /* longer: truncated */
		need += lens[i] + 1;
	}
	need = align8(need);
	int64_t time_ns = ev->time_ns ? ev->time_ns : pw_db_now_ns();

	pthread_mutex_lock(&a->lock);
	a->stats.submitted++;
	int64_t off = a->count < a->cap_events ? ring_reserve(a, need) : -ENOBUFS;
	if (off < 0) {
		a->stats.dropped++;
		pthread_mutex_unlock(&a->lock);
		return;
	}
	rec_hdr *h = (rec_hdr *)(a->ring + off);
	*h = (rec_hdr){
	    .size = (uint32_t)need,
	    .flags = (ev->path2 ? REC_HAS_PATH2 : 0) | (ev->rule ? REC_HAS_RULE : 0),
	    .rule_kind = ev->rule ? (int16_t)ev->rule->kind : -1,
	    .time_ns = time_ns,
	    .generation = ev->generation,
	    .op = ev->op,
	    .err = ev->err,
	    .reason = ev->reason,
	    .pid = ev->pid,
	    .uid = ev->uid,
	    .rule_line = ev->rule ? ev->rule->line : 0,
	    .rule_column = ev->rule ? ev->rule->column : 0,
	    .rule_layer = ev->rule ? (int16_t)ev->rule->layer : -1,
	};
	char *p = h->data;
	for (unsigned i = 0; i < S_COUNT; i++) {
		h->len[i] = (uint16_t)lens[i];
		if (lens[i])
			memcpy(p, strs[i], lens[i]);
		p[lens[i]] = '\0';
		p += lens[i] + 1;
	}
	a->count++;
	bool wake = a->writer_waiting;
	pthread_mutex_unlock(&a->lock);
	if (wake)
		pthread_cond_signal(&a->cond);
}

/* ---- Reading records back (writer thread). ---- */

typedef struct rec_view {
	const rec_hdr *h;
	const char *s[S_COUNT]; /* NULL for absent path2 / rule strings */
} rec_view;

static void rec_view_init(const rec_hdr *h, rec_view *v)
{
	const char *p = h->data;

	v->h = h;
	for (unsigned i = 0; i < S_COUNT; i++) {
		v->s[i] = p;
		p += h->len[i] + 1;
	}
	if (!(h->flags & REC_HAS_PATH2))
		v->s[S_PATH2] = NULL;
	if (!(h->flags & REC_HAS_RULE))
		v->s[S_PATTERN] = v->s[S_FILE] = NULL;
}

/* Collects up to PW_AUDIT_BATCH_MAX records from *POS up to END (a head snapshot).
 * Returns how many; *POS moves past them. */
static unsigned ring_collect(pw_audit *a, uint64_t *pos, uint64_t end, rec_view *out)
{
	unsigned n = 0;

	while (*pos < end && n < PW_AUDIT_BATCH_MAX) {
		uint64_t off = *pos % a->cap_bytes;
		const rec_hdr *h = (const rec_hdr *)(a->ring + off);
		if (h->size == 0) {
			*pos += a->cap_bytes - off;
			continue;
		}
		rec_view_init(h, &out[n++]);
		*pos += h->size;
	}
	return n;
}

/* ---- SQLite side (writer thread). ---- */

static void co_reset(pw_audit *a)
{
	for (unsigned i = 0; i < CO_SLOTS; i++) {
		co_entry *e = &a->co[i];
		free(e->mode);
		free(e->path);
		free(e->path2);
		*e = (co_entry){0};
	}
	a->n_dirty = 0;
}

static void db_close(pw_audit *a)
{
	sqlite3_finalize(a->st_insert);
	sqlite3_finalize(a->st_update);
	sqlite3_finalize(a->st_dropped);
	a->st_insert = a->st_update = a->st_dropped = NULL;
	sqlite3_close_v2(a->db);
	a->db = NULL;
	co_reset(a);
}

static int db_prepare(pw_audit *a)
{
	static const char insert_sql[] =
	    "INSERT INTO audit(time_ns, project, mountpoint, mode, generation, op, path, "
	    "path2, errno, reason, rule_kind, rule_pattern, rule_file, rule_line, pid, uid, "
	    "comm, thread, count, first_ns, last_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
	    "?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, 1, ?1, ?1)";
	static const char update_sql[] =
	    "UPDATE audit SET count = count + ?2, time_ns = min(time_ns, ?3), "
	    "first_ns = min(first_ns, ?3), last_ns = max(last_ns, ?4) WHERE id = ?1";
	static const char dropped_sql[] =
	    "INSERT INTO meta(key, value) VALUES ('audit_dropped', ?1) "
	    "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + ?1";
	int rc = sqlite3_prepare_v3(a->db, insert_sql, -1, SQLITE_PREPARE_PERSISTENT, &a->st_insert,
				    NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v3(a->db, update_sql, -1, SQLITE_PREPARE_PERSISTENT,
					&a->st_update, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v3(a->db, dropped_sql, -1, SQLITE_PREPARE_PERSISTENT,
					&a->st_dropped, NULL);
	return pw_db_errno(rc);
}

/* Opens the writer's connection when it has none. Returns 0 or -errno (-EBUSY: locked). */
static int db_ensure(pw_audit *a, char **ret_warning)
{
	if (a->db)
		return 0;
	int r = pw_db_open(a->db_path, PW_AUDIT_BUSY_MS, a->full_check ? PW_DB_FULL_CHECK : 0,
			   &a->db, ret_warning);
	if (r < 0)
		return r;
	a->full_check = false;
	r = db_prepare(a);
	if (r < 0)
		db_close(a);
	return r;
}

static int step_reset(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : pw_db_errno(rc);
}

static uint64_t rec_hash(const rec_view *v)
{
	uint64_t h = PW_FNV1A64_INIT;
	int32_t k[3] = {v->h->pid, v->h->op, v->h->err};

	h = pw_fnv1a64(h, k, sizeof(k));
	for (unsigned i = S_MODE; i <= S_PATH2; i++)
		h = v->s[i] ? pw_fnv1a64(h, v->s[i], v->h->len[i] + 1) : pw_fnv1a64(h, "\xff", 1);
	return h;
}

static bool co_matches(const co_entry *e, const rec_view *v, uint64_t hash)
{
	int64_t d = v->h->time_ns - e->first_ns;

	return e->valid && e->hash == hash && e->pid == v->h->pid && e->op == v->h->op &&
	       e->err == v->h->err && d < PW_AUDIT_WINDOW_NS && d > -PW_AUDIT_WINDOW_NS &&
	       streq(e->mode, v->s[S_MODE]) && streq(e->path, v->s[S_PATH]) &&
	       streq_ptr(e->path2, v->s[S_PATH2]);
}

static int co_flush_entry(pw_audit *a, co_entry *e)
{
	if (!e->dirty)
		return 0;
	sqlite3_bind_int64(a->st_update, 1, e->rowid);
	sqlite3_bind_int64(a->st_update, 2, (sqlite3_int64)e->pending);
	sqlite3_bind_int64(a->st_update, 3, e->first_ns);
	sqlite3_bind_int64(a->st_update, 4, e->last_ns);
	int r = step_reset(a->st_update);
	if (r < 0)
		return r;
	e->pending = 0;
	e->dirty = false;
	return 0;
}

static int co_flush_all(pw_audit *a)
{
	for (unsigned i = 0; i < a->n_dirty; i++) {
		co_entry *e = &a->co[a->dirty[i]];
		int r = co_flush_entry(a, e);
		if (r < 0)
			return r;
		e->listed = false;
	}
	a->n_dirty = 0;
	return 0;
}

static const char *name_or_null(const char *s)
{
	return s && *s ? s : NULL;
}

static int insert_row(pw_audit *a, const rec_view *v, const char *comm, int64_t *ret_rowid)
{
	const rec_hdr *h = v->h;
	sqlite3_stmt *st = a->st_insert;

	sqlite3_bind_int64(st, 1, h->time_ns);
	sqlite3_bind_text(st, 2, a->project, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, a->mountpoint, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, name_or_null(v->s[S_MODE]), -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, (sqlite3_int64)h->generation);
	const char *op = h->op >= 0 && h->op < _PW_OP_MAX ? pw_op_name(h->op) : NULL;
	sqlite3_bind_text(st, 6, op ? op : "unknown", -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 7, v->s[S_PATH], -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 8, v->s[S_PATH2], -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 9, h->err);
	sqlite3_bind_text(st, 10, pw_reason_name(h->reason), -1, SQLITE_STATIC);
	if (h->flags & REC_HAS_RULE) {
		sqlite3_bind_text(st, 11, pw_rule_kind_name(h->rule_kind), -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 12, v->s[S_PATTERN], -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 13, name_or_null(v->s[S_FILE]), -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 14, h->rule_line);
	}
	sqlite3_bind_int64(st, 15, h->pid);
	sqlite3_bind_int64(st, 16, h->uid);
	sqlite3_bind_text(st, 17, name_or_null(comm), -1, SQLITE_STATIC);
	/* A coalesced row keeps the thread of its first event (the key is the process). */
	sqlite3_bind_text(st, 18, name_or_null(v->s[S_THREAD]), -1, SQLITE_STATIC);
	int r = step_reset(st);
	if (r < 0)
		return r;
	*ret_rowid = sqlite3_last_insert_rowid(a->db);
	return 0;
}

/* Remembers the row just inserted for V in its cache slot (replacing what was there). */
static int co_remember(pw_audit *a, co_entry *e, const rec_view *v, uint64_t hash, int64_t rowid)
{
	int r = co_flush_entry(a, e); /* the evicted row keeps its merged count */
	if (r < 0)
		return r;
	bool listed = e->listed;
	free(e->mode);
	free(e->path);
	free(e->path2);
	*e = (co_entry){
	    .valid = true,
	    .hash = hash,
	    .pid = v->h->pid,
	    .op = v->h->op,
	    .err = v->h->err,
	    .mode = strdup(v->s[S_MODE]),
	    .path = strdup(v->s[S_PATH]),
	    .path2 = pw_dup_or_null(v->s[S_PATH2]),
	    .rowid = rowid,
	    .first_ns = v->h->time_ns,
	    .last_ns = v->h->time_ns,
	    .listed = listed,
	};
	if (!e->mode || !e->path || (v->s[S_PATH2] && !e->path2))
		e->valid = false; /* out of memory: just don't coalesce onto this row */
	return 0;
}

/* Per-batch cache of process names, so a storm reads /proc once per pid. */
typedef struct comm_cache {
	pid_t pid[8];
	char name[8][PW_AUDIT_COMM_MAX + 1];
	unsigned n;
} comm_cache;

static const char *comm_lookup(comm_cache *c, pid_t pid)
{
	for (unsigned i = 0; i < c->n && i < ELEMENTSOF(c->pid); i++)
		if (c->pid[i] == pid)
			return c->name[i];
	unsigned slot = c->n++ % ELEMENTSOF(c->pid);
	c->pid[slot] = pid;
	pw_proc_comm(pid, c->name[slot], sizeof(c->name[slot]));
	return c->name[slot];
}

/* What one batch did, applied to the counters and listeners only after COMMIT. comm[i]
 * points into cc. */
typedef struct batch_out {
	bool new_row[PW_AUDIT_BATCH_MAX];
	const char *comm[PW_AUDIT_BATCH_MAX];
	comm_cache cc;
	unsigned rows, merged;
} batch_out;

static int write_batch_txn(pw_audit *a, const rec_view *v, unsigned n, uint64_t dropped_delta,
			   batch_out *out)
{
	comm_cache *cc = &out->cc;

	out->rows = out->merged = 0;
	cc->n = 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t hash = rec_hash(&v[i]);
		co_entry *e = &a->co[hash & (CO_SLOTS - 1)];
		/* The name captured at submit time, else /proc now (the process may be gone). */
		out->comm[i] = v[i].h->len[S_COMM] ? v[i].s[S_COMM] : comm_lookup(cc, v[i].h->pid);
		if (co_matches(e, &v[i], hash)) {
			e->dirty = true;
			if (!e->listed) {
				e->listed = true;
				a->dirty[a->n_dirty++] = (unsigned)(e - a->co);
			}
			e->pending++;
			if (v[i].h->time_ns < e->first_ns)
				e->first_ns = v[i].h->time_ns;
			if (v[i].h->time_ns > e->last_ns)
				e->last_ns = v[i].h->time_ns;
			out->new_row[i] = false;
			out->merged++;
			continue;
		}
		int64_t rowid;
		int r = insert_row(a, &v[i], out->comm[i], &rowid);
		if (r < 0)
			return r;
		r = co_remember(a, e, &v[i], hash, rowid);
		if (r < 0)
			return r;
		out->new_row[i] = true;
		out->rows++;
	}
	int r = co_flush_all(a);
	if (r < 0)
		return r;
	if (dropped_delta) {
		sqlite3_bind_int64(a->st_dropped, 1, (sqlite3_int64)dropped_delta);
		r = step_reset(a->st_dropped);
	}
	return r;
}

/* Writes N records in one transaction. Returns 0 or -errno (-EBUSY: locked, retry). */
static int write_batch(pw_audit *a, const rec_view *v, unsigned n, uint64_t dropped_delta,
		       batch_out *out)
{
	int r = db_ensure(a, NULL);
	if (r < 0)
		return r;
	r = pw_db_exec(a->db, "BEGIN IMMEDIATE");
	if (r < 0)
		return r;
	r = write_batch_txn(a, v, n, dropped_delta, out);
	if (r >= 0)
		r = pw_db_exec(a->db, "COMMIT");
	if (r < 0) {
		pw_db_exec(a->db, "ROLLBACK");
		co_reset(a); /* its row ids and pending counts belonged to the rolled-back txn */
		return r;
	}
	a->dropped_persisted += dropped_delta;
	return 0;
}

static int64_t count_rows(sqlite3 *db)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int r = pw_db_prepare(db, "SELECT count(*) FROM audit", &st);
	if (r < 0)
		return -EIO;
	r = pw_db_step_row(st);
	return r > 0 ? sqlite3_column_int64(st, 0) : r < 0 ? r : -EIO;
}

/* Applies retention: rows older than retention_ns (audit and switch history), then the
 * oldest audit rows beyond retention_rows. Each chunk is its own implicit transaction so a
 * large first cleanup never holds the write lock for long. Returns 0 or -errno. */
static int retention_run(pw_audit *a)
{
	int r = db_ensure(a, NULL);
	if (r < 0)
		return r;
	int64_t cutoff = pw_db_now_ns() - a->retention_ns;
	int64_t deleted = pw_db_delete_chunks(a->db,
					      "DELETE FROM audit WHERE id IN (SELECT id FROM audit "
					      "WHERE time_ns < ?1 LIMIT ?2)",
					      cutoff, PW_AUDIT_DELETE_CHUNK);
	if (deleted < 0)
		return (int)deleted;
	/* The switch history ages with the log; its SQL is state.c's, which owns the table. */
	int64_t d2 = pw_state_prune_switches(a->db, cutoff);
	if (d2 < 0)
		return (int)d2;
	int64_t rows = count_rows(a->db);
	if (rows < 0)
		return (int)rows;
	if ((uint64_t)rows > a->retention_rows) {
		/* ?1 is the excess; a chunk deletes the oldest min(excess, chunk) rows. */
		int64_t excess = rows - (int64_t)a->retention_rows;
		while (excess > 0) {
			int64_t d =
			    pw_db_delete_once(a->db,
					      "DELETE FROM audit WHERE id IN (SELECT id FROM "
					      "audit ORDER BY time_ns, id LIMIT min(?1, ?2))",
					      excess, PW_AUDIT_DELETE_CHUNK);
			if (d < 0)
				return (int)d;
			if (d == 0)
				break;
			excess -= d;
			deleted += d;
		}
	}
	if (deleted > 0)
		co_reset(a); /* cached rows may be gone */
	a->rows_since_retention = 0;
	a->next_retention_ns = pw_clock_ns(CLOCK_MONOTONIC) + PW_AUDIT_RETENTION_PERIOD_NS;
	return 0;
}

static bool retention_due(pw_audit *a)
{
	uint64_t threshold = a->retention_rows / 10;

	if (threshold > PW_AUDIT_DELETE_CHUNK)
		threshold = PW_AUDIT_DELETE_CHUNK;
	if (threshold == 0)
		threshold = 1;
	return pw_clock_ns(CLOCK_MONOTONIC) >= a->next_retention_ns ||
	       a->rows_since_retention >= threshold;
}

/* Retention when due; a locked database postpones it by 10 s. */
static void retention_maybe(pw_audit *a, bool force)
{
	if (!force && !retention_due(a))
		return;
	if (retention_run(a) < 0)
		a->next_retention_ns = pw_clock_ns(CLOCK_MONOTONIC) + 10ll * 1000000000;
}

static void sleep_ns(int64_t ns)
{
	struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Calls the listener for each event that produced a row. Strings still live in the ring. */
static void notify(pw_audit_listener fn, void *ud, const rec_view *v, unsigned n,
		   const batch_out *out)
{
	for (unsigned i = 0; fn && i < n; i++) {
		if (!out->new_row[i])
			continue; /* a coalesced repeat */
		const rec_hdr *h = v[i].h;
		pw_rule rule = {
		    .kind = (pw_rule_kind)h->rule_kind,
		    .pattern = (char *)v[i].s[S_PATTERN],
		    .file = (char *)v[i].s[S_FILE],
		    .line = h->rule_line,
		    .column = h->rule_column,
		    .layer = (pw_layer)h->rule_layer,
		};
		pw_audit_event ev = {
		    .time_ns = h->time_ns,
		    .mode = v[i].s[S_MODE],
		    .generation = h->generation,
		    .op = (pw_op)h->op,
		    .path = v[i].s[S_PATH],
		    .path2 = v[i].s[S_PATH2],
		    .err = h->err,
		    .rule = (h->flags & REC_HAS_RULE) ? &rule : NULL,
		    .reason = (pw_reason)h->reason,
		    .pid = h->pid,
		    .uid = h->uid,
		    .pidns = h->len[S_PIDNS] ? v[i].s[S_PIDNS] : NULL,
		    .thread = h->len[S_THREAD] ? v[i].s[S_THREAD] : NULL,
		};
		fn(&ev, out->comm[i], ud);
	}
}

/* Writes one batch, retrying while the database is locked. Gives up (counting the batch as
 * dropped) only when stopping past the grace period, or after repeated hard errors. */
static void drain_batch(pw_audit *a, rec_view *v, unsigned n, uint64_t end_pos, batch_out *out)
{
	int64_t give_up_at = 0;
	unsigned hard_failures = 0;
	bool ok = false;

	for (;;) {
		pthread_mutex_lock(&a->lock);
		uint64_t dropped_delta = a->stats.dropped - a->dropped_persisted;
		bool stopping = a->stopping;
		pthread_mutex_unlock(&a->lock);

		int r = write_batch(a, v, n, dropped_delta, out);
		if (r >= 0) {
			ok = true;
			break;
		}
		if (r != -EBUSY && ++hard_failures >= 5)
			break;
		if (r != -EBUSY) {
			/* Reopen: the file may have been replaced; a corrupt audit table is found
			 * by the full check and the database rebuilt. */
			db_close(a);
			a->full_check = r == -EBADMSG;
		}
		if (stopping) {
			if (!give_up_at)
				give_up_at = pw_clock_ns(CLOCK_MONOTONIC) + PW_AUDIT_STOP_GRACE_NS;
			else if (pw_clock_ns(CLOCK_MONOTONIC) >= give_up_at)
				break;
		}
		sleep_ns(20 * 1000000ll);
	}

	pthread_mutex_lock(&a->lock);
	pw_audit_listener fn = a->listener;
	void *ud = a->listener_data;
	pthread_mutex_unlock(&a->lock);
	if (ok)
		notify(fn, ud, v, n, out);

	pthread_mutex_lock(&a->lock);
	a->tail = end_pos;
	a->count -= n;
	if (ok) {
		a->stats.written += n;
		a->stats.coalesced += out->merged;
	} else {
		a->stats.dropped += n;
	}
	pthread_mutex_unlock(&a->lock);
	if (ok)
		a->rows_since_retention += out->rows;
}

/* Waits until records are queued, stop is asked, or the next retention is due. Returns the
 * head snapshot; *ret_stopping tells whether stop was asked. */
static uint64_t wait_for_work(pw_audit *a, bool *ret_stopping)
{
	pthread_mutex_lock(&a->lock);
	while (a->count == 0 && !a->stopping) {
		int64_t wait_ns = a->next_retention_ns - pw_clock_ns(CLOCK_MONOTONIC);
		if (wait_ns <= 0)
			break;
		int64_t until = pw_clock_ns(CLOCK_MONOTONIC) + wait_ns;
		struct timespec ts = {.tv_sec = until / 1000000000, .tv_nsec = until % 1000000000};
		a->writer_waiting = true;
		pthread_cond_timedwait(&a->cond, &a->lock, &ts);
		a->writer_waiting = false;
	}
	uint64_t head = a->head;
	*ret_stopping = a->stopping;
	pthread_mutex_unlock(&a->lock);
	return head;
}

typedef struct writer_bufs {
	rec_view v[PW_AUDIT_BATCH_MAX];
	batch_out out;
} writer_bufs;

static void *writer_main(void *arg)
{
	pw_audit *a = arg;
	_cleanup_free_ writer_bufs *b = malloc(sizeof(*b));

	if (!b)
		abort(); /* allocated before the thread can be useful; nothing to degrade to */
	retention_maybe(a, true);
	for (;;) {
		bool stopping;
		uint64_t head = wait_for_work(a, &stopping);
		uint64_t pos = a->tail; /* only this thread moves tail */
		while (pos < head) {
			unsigned n = ring_collect(a, &pos, head, b->v);
			if (n == 0) { /* only a wrap marker before head */
				pthread_mutex_lock(&a->lock);
				a->tail = pos;
				pthread_mutex_unlock(&a->lock);
				continue;
			}
			drain_batch(a, b->v, n, pos, &b->out);
		}
		/* Drops counted after the last batch read its delta (or with no batch at all,
		 * when the queue was full from the start) are written on their own, so the
		 * total in the database matches the counter. */
		pthread_mutex_lock(&a->lock);
		bool drops_pending = a->stats.dropped > a->dropped_persisted;
		uint64_t tail = a->tail;
		pthread_mutex_unlock(&a->lock);
		if (drops_pending)
			drain_batch(a, b->v, 0, tail, &b->out);
		retention_maybe(a, false);
		if (stopping) {
			pthread_mutex_lock(&a->lock);
			bool empty = a->count == 0;
			pthread_mutex_unlock(&a->lock);
			if (empty)
				break;
		}
	}
	retention_maybe(a, true);
	return NULL;
}

/* ---- Lifecycle. ---- */

static void audit_free(pw_audit *a)
{
	if (!a)
		return;
	db_close(a);
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->lock);
	free(a->ring);
	free(a->db_path);
	free(a->project);
	free(a->mountpoint);
	free(a);
}

int pw_audit_start(const pw_audit_opts *opts, pw_audit **ret, char **ret_warning)
{
	if (!opts || !opts->db_path || !opts->project)
		return -EINVAL;
	pw_audit *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	pthread_mutex_init(&a->lock, NULL);
	int r = pw_cond_init_monotonic(&a->cond);
	if (r < 0) {
		pthread_mutex_destroy(&a->lock);
		free(a);
		return r;
	}

	a->cap_events = opts->queue_capacity ? opts->queue_capacity : PW_AUDIT_DEFAULT_CAPACITY;
	if (a->cap_events > PW_AUDIT_MAX_CAPACITY)
		a->cap_events = PW_AUDIT_MAX_CAPACITY;
	uint64_t bytes = (uint64_t)a->cap_events * PW_AUDIT_BYTES_PER_EVENT;
	if (bytes < PW_AUDIT_MIN_BYTES)
		bytes = PW_AUDIT_MIN_BYTES;
	if (bytes < 4 * MAX_RECORD_SIZE)
		bytes = 4 * MAX_RECORD_SIZE;
	if (bytes > PW_AUDIT_MAX_BYTES)
		bytes = PW_AUDIT_MAX_BYTES;
	a->cap_bytes = align8(bytes);
	unsigned days = opts->retention_days ? opts->retention_days : PW_AUDIT_DEFAULT_DAYS;
	a->retention_ns = (int64_t)days * 86400ll * 1000000000ll;
	a->retention_rows = opts->retention_rows ? opts->retention_rows : PW_AUDIT_DEFAULT_ROWS;
	a->log_allowed = opts->log_allowed;
	a->ring = malloc(a->cap_bytes);
	a->db_path = strdup(opts->db_path);
	a->project = strdup(opts->project);
	a->mountpoint = pw_dup_or_null(opts->mountpoint);
	if (!a->ring || !a->db_path || !a->project || (opts->mountpoint && !a->mountpoint)) {
		audit_free(a);
		return -ENOMEM;
	}

	/* Open now so that a rebuild's warning reaches the caller; a database locked by
	 * another process is not an error: the writer opens it when the lock goes. */
	char *warning = NULL;
	r = db_ensure(a, &warning);
	if (r < 0 && r != -EBUSY) {
		audit_free(a);
		return r;
	}

	/* The writer takes no signals: they belong to the daemon's main thread. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = -pthread_create(&a->thread, NULL, writer_main, a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		free(warning);
		audit_free(a);
		return r;
	}
	if (ret_warning)
		*ret_warning = warning;
	else
		free(warning);
	*ret = a;
	return 0;
}

void pw_audit_stop(pw_audit *a)
{
	if (!a)
		return;
	pw_thread_stop(a->thread, &a->lock, &a->cond, &a->stopping);
	audit_free(a);
}

void pw_audit_set_listener(pw_audit *a, pw_audit_listener fn, void *userdata)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	a->listener = fn;
	a->listener_data = userdata;
	pthread_mutex_unlock(&a->lock);
}

void pw_audit_get_stats(pw_audit *a, pw_audit_stats *ret)
{
	if (!a) {
		*ret = (pw_audit_stats){0};
		return;
	}
	pthread_mutex_lock(&a->lock);
	*ret = a->stats;
	pthread_mutex_unlock(&a->lock);
}
