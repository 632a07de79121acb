/* SPDX-License-Identifier: MIT */
/*
 * The inside of the store of originals, shared by its two files: originals.c (opening and
 * closing, the batch of deferred rows and its journal, queued rows, a lost batch, change
 * sets, reading back) and blobs.c (the contents kept as blobs, xattrs, the cap and the
 * free-space floor, retention). Nothing outside the store includes it: originals.h is the
 * store's face.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "journal.h"
#include "store/orig_sql.h"

/* originals.h's (C11 allows the typedef twice): this header does not include the face, so
 * that the face and the inside include one way. */
typedef struct pw_undo_orig_store pw_undo_orig_store;

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
	pw_store_orig *sql; /* the connection and its statements (store/orig_sql.h) */
	char *dir;
	int blobs_fd, tmp_fd;
	dev_t dev; /* of blobs/ */
	uint64_t max_file, max_total;
	uint64_t min_free; /* the free-space floor of blobs/' filesystem; 0: the default */
	int64_t current;   /* the change set begun last: never pruned to make room */
	bool undoing;	   /* it is an undo's: nothing is pruned to make room (room_for) */
	int64_t keep_ns;
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

/* The functions of one file the other calls; the store's lock is held for each. */

/* Opens the batch's transaction (BEGIN IMMEDIATE) unless open, after a lost batch's
 * recovery, and starts the flusher. 0 or -errno. */
int pw_undo_orig_txn_open(pw_undo_orig_store *s);
/* R, after noting a batch SQLite rolled back when the statement that returned R failed. */
int pw_undo_orig_txn_checked(pw_undo_orig_store *s, int r);
/* Every row so far committed, a lost batch's included. 0 or -errno. */
int pw_undo_orig_settle(pw_undo_orig_store *s);
/* Adds the rows of dead daemons' journals that their transactions did not commit. */
int pw_undo_orig_journal_replay(pw_undo_orig_store *s);
/* Whether blobs no committed row names may be removed now (under the write lock). */
bool pw_undo_orig_may_remove_blobs(pw_undo_orig_store *s);
/* Records blob HEX of SIZE bytes. 0 or -EIO. */
int pw_undo_orig_register_blob(pw_undo_orig_store *s, const char hex[PW_SHA256_HEX], uint64_t size);
