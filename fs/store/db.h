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
#include <stdint.h>

#define PW_DB_SCHEMA_VERSION 8
#define PW_DB_BUSY_TIMEOUT_MS 2000

enum {
	PW_DB_FULL_CHECK = 1u << 0, /* quick_check every table, the audit log included */
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
