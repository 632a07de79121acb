/* SPDX-License-Identifier: MIT */
/*
 * The originals store: what a file was before the view first changed it, kept so the
 * change can be undone (docs/internals/undo.md).
 *
 * Contents live beside the state database, in DIR/blobs/<sha256> (DIR is
 * <state directory>/originals), each distinct content once. A blob is written as an
 * anonymous O_TMPFILE (a reflink of the original when the filesystem can, a copy
 * otherwise), and only then linked under its name: a daemon killed at any moment leaves
 * either a whole blob or none. The records are rows of the state database (migration 2):
 * change sets, and per change set one row per path first changed, in the order the changes
 * happened. A row is written after its blob is in place and before the change it precedes
 * is applied: either committed (pw_undo_orig_insert) or appended to the store's journal
 * (journal.h) and committed with the next batch (pw_undo_orig_insert_deferred), so a killed
 * daemon loses it neither way.
 *
 * Threading: one store is used by one thread at a time; fs/undo/keep.c serializes its callers
 * with its own lock, and the control methods take the same lock (pw_undo_orig_lock). The store's
 * own thread commits deferred rows under that lock.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "store/orig_row.h"

#define PW_UNDO_ORIG_MAX_FILE_DEFAULT (64ull << 20) /* larger files are recorded, not kept */
#define PW_UNDO_ORIG_KEEP_DAYS_DEFAULT 14
#define PW_UNDO_ORIG_MAX_TOTAL_DEFAULT (1ull << 30) /* retention by total size */

typedef struct pw_undo_orig_store pw_undo_orig_store;

typedef struct pw_undo_orig_opts {
	const char *db_path; /* the state database */
	const char *dir;     /* NULL: <directory of db_path>/originals */
	uint64_t max_file;   /* 0: PW_UNDO_ORIG_MAX_FILE_DEFAULT */
	int64_t keep_ns;     /* retention by age; 0: 14 days */
	uint64_t max_total;  /* the cap on the blobs' bytes, held at every keep; 0: 1 GiB */
	uint64_t min_free;   /* free-space floor of the store's filesystem; 0: 5%, <= 1 GiB */
	int64_t defer_ns;    /* how long deferred rows may wait; 0: PW_UNDO_ORIG_DEFER_MS */
	/* How long a statement waits for another connection's write lock (another view's batch)
	 * before it gives up; 0: PW_DB_BUSY_TIMEOUT_MS. The daemon leaves it 0; a test that
	 * waits it out on purpose sets a short one. */
	int busy_ms;
} pw_undo_orig_opts;

int pw_undo_orig_store_open(const pw_undo_orig_opts *o, pw_undo_orig_store **ret);
void pw_undo_orig_store_close(pw_undo_orig_store *s); /* accepts NULL */

void pw_undo_orig_lock(pw_undo_orig_store *s);
void pw_undo_orig_unlock(pw_undo_orig_store *s);
const char *pw_undo_orig_dir(const pw_undo_orig_store *s);
uint64_t pw_undo_orig_max_file(const pw_undo_orig_store *s);

/* The object and row types are store/orig_row.h's. */
#define PW_UNDO_ORIG_CONTENT 1u /* keep a regular file's content too */

/*
 * Captures NAME in DIRFD (NAME "": DIRFD itself, an O_PATH descriptor), never following a
 * symlink. With PW_UNDO_ORIG_CONTENT in FLAGS, a regular file's content is kept in the store
 * (over the size cap: recorded as not kept). The store's cap (max_total) and the floor
 * (min_free) hold at every keep: the oldest change sets but the current go first, and what
 * still does not fit is shared with a blob of the same content or recorded as not kept
 * ("store-full"), never refused. A missing object is captured as !present.
 * Returns 0 or -errno (the store could not keep it: the change must not proceed).
 */
int pw_undo_orig_capture(pw_undo_orig_store *s, int dirfd, const char *name, unsigned flags,
			 pw_undo_orig_object *ret);
void pw_undo_orig_object_done(pw_undo_orig_object *o);

/* Inserts ROW (committed when it returns, with every deferred row before it). Returns 0
 * with its id in *ret_id, or -errno. */
int pw_undo_orig_insert(pw_undo_orig_store *s, const pw_undo_orig_row *row, int64_t *ret_id);

/*
 * Inserts ROW without waiting for a commit: a created name's, or one holding an original
 * whose blob pw_undo_orig_capture has put in place already. Deferred rows
 * go into one open transaction, committed at the latest PW_UNDO_ORIG_DEFER_MS (or the store's
 * defer_ns) after the first
 * of them (a thread of the store does it) or once PW_UNDO_ORIG_DEFER_ROWS are pending, and
 * before anything else is written or read: the next pw_undo_orig_insert commits them with its
 * own row, and pw_undo_orig_read, pw_undo_orig_set_content, pw_undo_orig_changeset_begin,
 * pw_undo_orig_prune and pw_undo_orig_store_close commit them first. So the rows committed are
 * always a prefix of the rows inserted. Each deferred row, with its object, is also appended to the
 * journal (journal.h) before this returns, and the next start replays it: a kill loses none. Any
 * row when the store has no journal, or one the journal cannot take, is committed at once
 * (pw_undo_orig_insert). The id is final.
 */
int pw_undo_orig_insert_deferred(pw_undo_orig_store *s, const pw_undo_orig_row *row,
				 int64_t *ret_id);

/*
 * Like pw_undo_orig_insert_deferred, for the row of a created name (no object): journaled now,
 * and inserted by the next flush rather than here, so a request that makes a name does no
 * SQL (the flusher thread does it, with the commit). The rows' order is kept: anything that
 * inserts, reads or commits inserts the queued rows first. *RET_ID is a token, not a row id
 * (pw_undo_orig_delete and pw_undo_orig_set_content take either). Any other row, or when the
 * journal cannot be used, goes through pw_undo_orig_insert_deferred. Lock held.
 */
int pw_undo_orig_queue(pw_undo_orig_store *s, const pw_undo_orig_row *row, int64_t *ret_id);

/*
 * pw_undo_orig_queue without its fall-backs: queues ROW or returns -EAGAIN (no journal, the
 * flusher not started yet, a row that holds an object, out of memory, the journal refused
 * the record), and never opens, makes or writes anything but the journal's descriptor, so
 * the caller's credentials may stay in force (keep.c's fast path for a name being made).
 * Lock held.
 */
int pw_undo_orig_queue_try(pw_undo_orig_store *s, const pw_undo_orig_row *row, int64_t *ret_id);
#define PW_UNDO_ORIG_DEFER_MS 100
#define PW_UNDO_ORIG_DEFER_ROWS 4096
/* Commits the deferred rows now. Lock held. 0 or -errno (still pending: tried again). */
int pw_undo_orig_flush(pw_undo_orig_store *s);
/* Row ID, recorded without content (metadata only), gets O's content (a regular file's blob,
 * or why it is not kept). 0 or -errno. */
int pw_undo_orig_set_content(pw_undo_orig_store *s, int64_t id, const pw_undo_orig_object *o);
/* Deletes a row whose change failed, and its blob when no other row references it. */
void pw_undo_orig_delete(pw_undo_orig_store *s, int64_t id);

/* Starts a change set. REASON: mount, switch, checkpoint, undo. Returns 0 with *ret_id. */
int pw_undo_orig_changeset_begin(pw_undo_orig_store *s, const char *project, const char *mountpoint,
				 const char *reason, const char *name, const char *mode,
				 int64_t *ret_id);

/* ---- reading back (fs/undo/changes.c) ---- */

/* Records that change set ID (an undo or a redo) put back the rows UNDOES (JSON text). */
int pw_undo_orig_changeset_set_undoes(pw_undo_orig_store *s, int64_t id, const char *undoes);
/* Records that the undo change set ID was reversed by the redo change set BY. */
int pw_undo_orig_changeset_set_redone(pw_undo_orig_store *s, int64_t id, int64_t by);

/*
 * Reads PROJECT's change sets (oldest first) into SET_FN, then their rows (in the order
 * recorded) into ROW_FN, after committing any deferred rows. Every string and buffer is
 * valid only during the call: copy what you keep. A callback returning < 0 stops the read
 * and is returned. Lock held. Returns 0, a callback's value, or -errno.
 */
int pw_undo_orig_read(pw_undo_orig_store *s, const char *project,
		      int (*set_fn)(const pw_undo_orig_changeset *c, void *u),
		      int (*row_fn)(const pw_undo_orig_rec *r, void *u), void *u);

/* The blob's path (malloc'd). */
char *pw_undo_orig_blob_path(const pw_undo_orig_store *s, const char *hash);

/* Removes change sets older than KEEP_NS, then the oldest while the blobs referenced
 * exceed MAX_TOTAL bytes, never change set PROTECT (the open one), then every blob no row
 * references. 0 for either limit: the store's default. Returns the number of change sets
 * removed, or -errno; *ret_bytes gets the blob bytes freed. */
int pw_undo_orig_prune(pw_undo_orig_store *s, int64_t keep_ns, uint64_t max_total, int64_t protect,
		       uint64_t *ret_bytes);

/* The bytes of every blob. */
int pw_undo_orig_total(pw_undo_orig_store *s, uint64_t *ret_bytes, uint64_t *ret_blobs);

/* Restores the xattrs serialized in BUF on the object open at FD (O_PATH is fine): removes
 * the ones not in BUF, sets the others. Attributes the caller may not set are skipped. */
int pw_undo_orig_xattrs_apply(int fd, const void *buf, size_t len);
/* The serialized xattrs of the object open at FD. */
int pw_undo_orig_xattrs_read(int fd, void **ret, size_t *ret_len);
