/* SPDX-License-Identifier: MIT */
/*
 * The state database's schema and how a connection to it is opened. Shared by state.c (the
 * daemon's and the CLI's state handle), audit.c (the writer thread's own connection) and
 * the CLI's read-only readers (log, why).
 *
 * Opening read-write creates the parent directory (0700) and the file, switches to WAL,
 * sets a busy timeout, and brings the schema to PW_DB_SCHEMA_VERSION by running the missing
 * migrations (PRAGMA user_version counts the ones applied), each in its own IMMEDIATE
 * transaction so that two processes opening at once migrate once. A file that is not a
 * database, or fails PRAGMA quick_check, is renamed to PATH.corrupt-YYYYMMDDTHHMMSS (its
 * -wal and -shm with it) and a fresh database is created in its place: corruption is never a
 * failure to open, only a warning.
 *
 * The check on open covers the schema and the small tables (meta, projects, switches) so that
 * opening stays fast with a large audit log (a full quick_check of a million rows takes most
 * of a second); PW_DB_FULL_CHECK checks every table, for a connection that met
 * SQLITE_CORRUPT while running. A database whose user_version is newer than ours is used
 * as is (migrations are additive: columns and tables are only ever added).
 */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PW_DB_SCHEMA_VERSION 8
/* How long a connection waits for another's write lock before it gives up with -EBUSY: the
 * product's default. An opener may pass its own (pw_db_open's BUSY_MS): a test that waits
 * the timeout out on purpose passes a short one. */
#define PW_DB_BUSY_TIMEOUT_MS 2000

enum {
	PW_DB_FULL_CHECK = 1u << 0, /* quick_check every table, the audit log included */
	PW_DB_READONLY = 1u << 1,   /* pw_db_handle_open: open as pw_db_open_readonly */
};

/* Opens PATH read-write as described above. *ret_warning (when not NULL) receives a malloc'd
 * one-line message after a rebuild, NULL otherwise. BUSY_MS is the connection's busy timeout
 * (0: PW_DB_BUSY_TIMEOUT_MS); FLAGS are PW_DB_* bits. Returns 0, -EBUSY when another process
 * holds the database locked past the timeout, or another -errno. */
int pw_db_open(const char *path, int busy_ms, unsigned flags, sqlite3 **ret, char **ret_warning);

/* Opens PATH read-only, for readers that must never create or migrate anything. Returns 0,
 * -ENOENT when the file does not exist, -EPROTO when it holds no piworkfs schema yet, or
 * another -errno. */
int pw_db_open_readonly(const char *path, sqlite3 **ret);

/* A connection of this process that finds the database busy first calls FN(ARG), which may
 * end a transaction it can end at once and must not block (db.c: the originals' batch), then
 * waits out its busy timeout. One hook per process; clearing takes only ARG's own. */
void pw_db_set_contention_hook(void (*fn)(void *), void *arg);
void pw_db_clear_contention_hook(void *arg);

/* Creates DIR and every missing directory above it with mode 0700 (existing ones are left
 * alone): the state directory and what lives in it. Returns 0 or a negative errno. */
int pw_db_mkdir_p(const char *dir);

/* sqlite3_close_v2 that accepts NULL, for _cleanup_(pw_db_closep). */
void pw_db_closep(sqlite3 **db);

/* A prepared statement that finalizes itself (sqlite3_finalize accepts NULL). */
static inline void pw_db_finalizep(sqlite3_stmt **st)
{
	sqlite3_finalize(*st);
}
#define _cleanup_stmt_ __attribute__((cleanup(pw_db_finalizep)))

/* Maps an SQLite result code to a negative errno (-EBUSY, -ENOMEM, -EIO, ...). */
int pw_db_errno(int rc);

/* CLOCK_REALTIME in nanoseconds. */
int64_t pw_db_now_ns(void);

/* Runs SQL that returns no rows. Returns 0 or -errno. */
int pw_db_exec(sqlite3 *db, const char *sql);

/*
 * The steps every query of the store takes, written once. Each returns 0 (or what it says) or
 * -errno; a text bound is borrowed until the statement is finalized.
 */

/* Prepares SQL on DB into *ret. */
int pw_db_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **ret);

/* Prepares SQL with TEXT bound to ?1 (NULL binds NULL). */
int pw_db_prepare_text(sqlite3 *db, const char *sql, const char *text, sqlite3_stmt **ret);

/* Steps a statement that returns no rows. */
int pw_db_step_done(sqlite3_stmt *st);

/* Steps a statement once: 1 at a row, 0 when it has none, or -errno. */
int pw_db_step_row(sqlite3_stmt *st);

/* Steps ST through its rows, calling FN(ST, U) at each: an answer other than 0 stops the
 * walk, a negative one is returned, a positive one ends it with 0. */
int pw_db_each(sqlite3_stmt *st, int (*fn)(sqlite3_stmt *st, void *u), void *u);

/* Runs a DELETE of SQL, ?1 bound to ARG and ?2 to CHUNK (the most rows it deletes). Returns
 * the number deleted or -errno. */
int64_t pw_db_delete_once(sqlite3 *db, const char *sql, int64_t arg, int64_t chunk);

/* Repeats that DELETE until a chunk comes back short, each chunk its own implicit transaction
 * so that a large cleanup never holds the write lock for long. Returns the number deleted or
 * -errno. */
int64_t pw_db_delete_chunks(sqlite3 *db, const char *sql, int64_t arg, int64_t chunk);

/*
 * A handle of the store (state.c's, reader.c's, orig_sql.c's) is a struct whose first member
 * is its connection. pw_db_handle_open opens PATH as pw_db_open does (BUSY_MS, RET_WARNING
 * and FLAGS as there), or with PW_DB_READONLY as pw_db_open_readonly does (with BUSY_MS as its
 * busy timeout when above 0), into a new zeroed handle of SIZE bytes. pw_db_handle_free closes
 * the connection and frees the handle (NULL is fine).
 */
int pw_db_handle_open(const char *path, int busy_ms, unsigned flags, size_t size, void **ret,
		      char **ret_warning);
void pw_db_handle_free(void *h);

/* Does the database hold table NAME? 1, 0, or -errno. */
int pw_db_has_table(sqlite3 *db, const char *name);

/* A malloc'd copy of text column COL, or NULL for NULL (or when memory runs out). */
char *pw_db_text_dup(sqlite3_stmt *st, int col);

/*
 * How a row's columns land in a struct, one entry a column in the SELECT's order: an integer
 * (int64_t) or a text (a malloc'd copy, NULL for NULL) at a member's offset. The one reader
 * and the one free of the records state.c hands out (switches, plans, tasks).
 */
typedef struct pw_db_col {
	bool text;
	size_t offset;
} pw_db_col;
#define PW_DB_I64(type, member)                                                                    \
	{                                                                                          \
		false, offsetof(type, member)                                                      \
	}
#define PW_DB_TEXT(type, member)                                                                   \
	{                                                                                          \
		true, offsetof(type, member)                                                       \
	}

/* Frees the texts COLS (N_COLS of them) name in each of the N elements of SIZE bytes at V,
 * then V. NULL is fine. */
void pw_db_cols_free(void *v, size_t n, size_t size, const pw_db_col *cols, size_t n_cols);

/* Rows read into a growing array of elements of SIZE bytes by COLS, at most LIMIT (0: all):
 * the caller's accumulator for pw_db_rows_read, which owns V (and what its elements hold) in
 * every case (pw_db_cols_free frees it). */
typedef struct pw_db_rows {
	void *v;
	size_t n, cap, size, limit;
	const pw_db_col *cols;
	size_t n_cols;
} pw_db_rows;

/* Steps ST, reading each row into the next element of ROWS by its COLS. 0, or -errno (-ENOMEM:
 * a text not copied; a row read is counted either way, so the free sees it). */
int pw_db_rows_read(sqlite3_stmt *st, pw_db_rows *rows);
