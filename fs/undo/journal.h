/* SPDX-License-Identifier: MIT */
/*
 * The originals store's journal: the records of deferred rows (pw_undo_orig_insert_deferred),
 * of created names and of kept originals alike, between the moment the change is applied
 * and the moment their batch is committed to the database.
 *
 * Why: a commit per changed file (a few pages of WAL each, and a checkpoint with an fsync
 * every few hundred) was most of what keeping cost a `git checkout` or a `make clean`, so
 * rows are committed in batches a moment later. But a daemon killed in that moment must not
 * lose a record: undo would leave a new name behind, or lose an original whose blob is in
 * place but unnamed by any row. So each such
 * record is first appended to a journal file with one write(2) (no fsync: the page cache
 * outlives the process), and the batch's commit also records, in the database table
 * orig_journals, the sequence number of the last record it holds. A daemon that starts
 * replays every journal whose owner is gone, from the record after the committed one.
 *
 * Each daemon has a journal of its own (several views share one store), named
 * journal.XXXXXX in the store's directory and held with an exclusive flock for as long as
 * the daemon lives: a journal no process holds belongs to a dead daemon.
 *
 * Records: "PWJ1", u32 payload length, u64 sequence number, the payload (the row's fields,
 * then its object's when a flag says so), u32 FNV-1a of sequence and payload. A record cut short or
 * damaged (a machine crash mid write) ends the replay of that journal: what follows it was written
 * later still.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "store/orig_row.h"

typedef struct pw_undo_journal {
	int fd;
	char *name;   /* journal.XXXXXX, in the store's directory */
	uint64_t seq; /* of the last record appended (never reset by a truncation) */
} pw_undo_journal;

#define PW_UNDO_JOURNAL_INIT                                                                       \
	{                                                                                          \
		.fd = -1                                                                           \
	}

/* Creates and locks a new journal in DIR_FD. 0 or -errno. */
int pw_undo_journal_create(int dir_fd, pw_undo_journal *ret);
/* Appends ROW (names, ids, who, and the object it holds when present: lstat's fields, the
 * blob's name, a symlink's target, xattrs) with one write. Returns 0 with its sequence
 * number in *ret_seq, or -errno (-E2BIG: too large for a record; commit it instead). */
int pw_undo_journal_append(pw_undo_journal *j, const pw_undo_orig_row *row, int64_t time_ns,
			   uint64_t *ret_seq);
/* Drops every record: they are committed. 0 or -errno. */
int pw_undo_journal_truncate(pw_undo_journal *j);
/* Closes J; with REMOVE, its file goes first (everything in it is committed). */
void pw_undo_journal_close(pw_undo_journal *j, int dir_fd, bool remove);

/* One record of a journal. ROW's strings live until the callback returns. */
typedef int (*pw_undo_journal_record_fn)(void *data, const char *name, uint64_t seq,
					 const pw_undo_orig_row *row, int64_t time_ns);
/* Calls RECORD for each whole record of J, in order, as a replay does (originals.c reads
 * back the records of a batch SQLite rolled back). 0, or the first error RECORD returned. */
int pw_undo_journal_read(const pw_undo_journal *j, pw_undo_journal_record_fn record, void *data);

/*
 * For every journal in DIR_FD that no process holds: locks it, calls BEGIN(DATA, NAME),
 * then RECORD for each whole record in order, then END(DATA, NAME, R) with R the first
 * error (or 0); when END returns 0 the file is removed. A journal being replayed by
 * another daemon is skipped. Returns the number of journals replayed, or -errno.
 */
int pw_undo_journal_replay_dead(int dir_fd, int (*begin)(void *data, const char *name),
				pw_undo_journal_record_fn record,
				int (*end)(void *data, const char *name, int r), void *data);

/*
 * Whether a journal in DIR_FD other than OWN (NULL: none is ours) holds records: a dead
 * daemon's not replayed yet, or a live one's between its commit and its truncation. A
 * prune asks it under the database's write lock before it removes blobs no row names: a
 * record in such a journal may name one (its row was never committed, the blob was in
 * place first). True also when the directory cannot be read: unknown keeps the blob.
 */
bool pw_undo_journal_others_pending(int dir_fd, const char *own);
