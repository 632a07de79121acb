/* SPDX-License-Identifier: MIT */
/*
 * The SQL of the store of originals (fs/undo/originals.c): every statement on its tables
 * (orig_changesets, orig_rows, orig_blobs, orig_journals; migrations 2 and on, db.c), behind
 * a name, so that every SQL statement lives in fs/store/. The store decides what to write
 * and when (its batch, its journal, its lock); this file only says it in SQL.
 *
 * A pw_store_orig is one connection (pw_db_open) and the statements prepared once on it;
 * its caller serializes the calls (the store's lock). Functions that can fail return 0 or
 * -errno (pw_db_errno of SQLite's code); queries that answer with a number or a bool say
 * what a failure reads as, always the safe side for the caller.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "orig_row.h"

typedef struct pw_store_orig pw_store_orig;

/* Opens the state database at PATH read-write (pw_db_open) with a busy timeout of BUSY_MS
 * (0: PW_DB_BUSY_TIMEOUT_MS). */
int pw_store_orig_open(const char *path, int busy_ms, pw_store_orig **ret);
void pw_store_orig_close(pw_store_orig *q);

/* ---- transactions ---- */

/* BEGIN IMMEDIATE: the write lock from the start. */
int pw_store_orig_begin(pw_store_orig *q);
int pw_store_orig_commit(pw_store_orig *q);
/* ROLLBACK, when a transaction is open. */
void pw_store_orig_rollback(pw_store_orig *q);
/* Whether a transaction is open (SQLite may end one on an error: a full disk, an I/O error). */
bool pw_store_orig_in_txn(pw_store_orig *q);
/* A savepoint for one row within the batch, and taking that row back: 0 or -errno. */
int pw_store_orig_savepoint(pw_store_orig *q);
int pw_store_orig_savepoint_undo(pw_store_orig *q);

/* ---- the journals' marks (orig_journals) ---- */

/* Records that journal NAME is committed up to SEQ. */
int pw_store_orig_journal_mark(pw_store_orig *q, const char *name, uint64_t seq);
/* The sequence number journal NAME is committed up to, 0 when none is recorded. */
uint64_t pw_store_orig_journal_seq(pw_store_orig *q, const char *name);
/* Forgets the mark of each journal GONE(NAME, U) says is gone. */
void pw_store_orig_journal_forget(pw_store_orig *q, bool (*gone)(const char *name, void *u),
				  void *u);

/* ---- blobs (orig_blobs) ---- */

/* Records blob HEX of SIZE bytes (once: a second record of it is a no-op). 0 or -EIO. */
int pw_store_orig_blob_add(pw_store_orig *q, const char *hex, uint64_t size);
/* Whether blob HASH is recorded (false when unknown). */
bool pw_store_orig_blob_recorded(pw_store_orig *q, const char *hash);
/* Whether blob HASH is certainly not recorded (false when recorded or unknown). */
bool pw_store_orig_blob_unrecorded(pw_store_orig *q, const char *hash);
/* Whether no row names blob HASH (false when one does, or unknown). */
bool pw_store_orig_blob_unreferenced(pw_store_orig *q, const char *hash);
/* Deletes the record of blob HASH: whether the statement ran. */
bool pw_store_orig_blob_forget(pw_store_orig *q, const char *hash);
/* The recorded blobs' bytes, UINT64_MAX when unknown. */
uint64_t pw_store_orig_blob_bytes(pw_store_orig *q);
/* The bytes of the blobs some row references, 0 when unknown. */
uint64_t pw_store_orig_referenced_bytes(pw_store_orig *q);
/* The recorded blobs' bytes and count (RET_BLOBS may be NULL). */
int pw_store_orig_total(pw_store_orig *q, uint64_t *ret_bytes, uint64_t *ret_blobs);
/* FN(HASH, SIZE, U) for each blob no row references; then their records go
 * (pw_store_orig_forget_unreferenced). */
void pw_store_orig_unreferenced(pw_store_orig *q,
				void (*fn)(const char *hash, uint64_t size, void *u), void *u);
void pw_store_orig_forget_unreferenced(pw_store_orig *q);

/* ---- rows (orig_rows) ---- */

/* Inserts ROW at TIME_NS (0: now), with an id above ID_FLOOR when that is not 0 (the
 * highest a lost batch gave: never given again). 0 with *RET_ID, or -errno. */
int pw_store_orig_row_add(pw_store_orig *q, const pw_undo_orig_row *row, int64_t time_ns,
			  int64_t id_floor, int64_t *ret_id);
/* Sets row ID's content (O's blob, not_kept and size): 0, -ENOENT when there is no such
 * row, or -errno. */
int pw_store_orig_row_set_content(pw_store_orig *q, int64_t id, const pw_undo_orig_object *o);
/* Row ID's blob into HASH ("" when none or unknown). */
void pw_store_orig_row_blob(pw_store_orig *q, int64_t id, char hash[PW_SHA256_HEX]);
/* Deletes row ID: whether the statement could be prepared (it then ran). */
bool pw_store_orig_row_delete(pw_store_orig *q, int64_t id);

/* ---- change sets (orig_changesets) ---- */

/* Adds a change set started now. 0 with *RET_ID, or -errno. */
int pw_store_orig_changeset_add(pw_store_orig *q, const char *project, const char *mountpoint,
				const char *reason, const char *name, const char *mode,
				int64_t *ret_id);
/* Deletes change set ID if it is a mount's or a switch's, unnamed and without rows. */
void pw_store_orig_changeset_drop_if_empty(pw_store_orig *q, int64_t id);
/* Deletes change set ID and its rows. */
int pw_store_orig_changeset_drop(pw_store_orig *q, int64_t id);
int pw_store_orig_changeset_set_undoes(pw_store_orig *q, int64_t id, const char *undoes);
int pw_store_orig_changeset_set_redone(pw_store_orig *q, int64_t id, int64_t by);
/* The oldest change set but PROTECT, with when it started, or 0. */
int64_t pw_store_orig_changeset_oldest(pw_store_orig *q, int64_t protect, int64_t *ret_started);

/* ---- reading back ---- */

/* FN for each of PROJECT's change sets (oldest first), then for each of their rows (in the
 * order of their changes); the strings are borrowed for the call. A negative return of FN
 * stops and is returned. */
int pw_store_orig_read_sets(pw_store_orig *q, const char *project,
			    int (*fn)(const pw_undo_orig_changeset *c, void *u), void *u);
int pw_store_orig_read_rows(pw_store_orig *q, const char *project,
			    int (*fn)(const pw_undo_orig_rec *r, void *u), void *u);
