/* SPDX-License-Identifier: MIT */
/*
 * The audit writer (fs/store/audit.h): the fields of each row, coalescing of storms, retention by
 * age and by rows, the exact drop count when the queue is full, a database locked by another
 * process, and that a submit never waits for the writer.
 *
 * To hold the writer back, a test takes the database's write lock from another connection
 * (BEGIN EXCLUSIVE): the writer's transactions then fail with SQLITE_BUSY and it retries,
 * leaving its batch in the queue. The lock is released when the test says so, never after
 * a fixed time, and every wait for the writer is a condition with a generous deadline
 * (DEADLINE_US): a loaded machine makes these tests slower, never red.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store/audit.h"
#include "store/db.h"
#include "pw_limits.h"
#include "store/state.h"
#include "util.h"
#include "tmp_db.h"

#define DEADLINE_US (60ll * 1000000)

static void setup(void)
{
	tmp_db_setup("audit", "state.db");
}

TestSuite(audit, .init = setup, .fini = tmp_db_teardown, .timeout = 150);

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void create_db(void)
{
	pw_state *s = NULL;
	cr_assert_eq(pw_state_open(dbpath, &s, NULL), 0);
	pw_state_close(s);
}

static pw_audit *start(unsigned capacity, unsigned days, uint64_t rows)
{
	pw_audit_opts o = {
	    .db_path = dbpath,
	    .project = "/projects/demo",
	    .mountpoint = "/mnt/demo",
	    .queue_capacity = capacity,
	    .retention_days = days,
	    .retention_rows = rows,
	};
	pw_audit *a = NULL;
	char *warning = NULL;
	cr_assert_eq(pw_audit_start(&o, &a, &warning), 0);
	cr_assert_null(warning);
	return a;
}

static int64_t query_int(const char *sql)
{
	return db_int(dbpath, sql);
}

/* Takes the write lock from a second connection; the writer's transactions get BUSY. */
static sqlite3 *lock_db(void)
{
	sqlite3 *db = NULL;
	cr_assert_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
	return db;
}

static void unlock_db(sqlite3 *db)
{
	cr_assert_eq(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

/* Waits until everything submitted is written or dropped; returns the final stats. */
static pw_audit_stats drained(pw_audit *a)
{
	pw_audit_stats st;
	int64_t t0 = mono_us();
	while (mono_us() - t0 < DEADLINE_US) {
		pw_audit_get_stats(a, &st);
		if (st.written + st.dropped == st.submitted)
			return st;
		usleep(2000);
	}
	cr_assert_fail("writer did not drain: submitted %llu written %llu dropped %llu",
		       (unsigned long long)st.submitted, (unsigned long long)st.written,
		       (unsigned long long)st.dropped);
	return st;
}

/* Drains A (as drained) and stops it; returns the stats it drained to. */
static pw_audit_stats stopped_drained(pw_audit *a)
{
	pw_audit_stats st = drained(a);
	pw_audit_stop(a);
	return st;
}

static pw_audit_event denial(pw_op op, const char *path, int64_t t)
{
	return (pw_audit_event){
	    .time_ns = t,
	    .mode = "plan",
	    .generation = 3,
	    .op = op,
	    .path = path,
	    .err = EROFS,
	    .reason = PW_REASON_READ_ONLY,
	    .pid = getpid(),
	    .uid = getuid(),
	};
}

/* Submits N denials of OP, of f0 .. fN-1, at T0 + i. */
static void submit_many(pw_audit *a, pw_op op, int n, int64_t t0)
{
	for (int i = 0; i < n; i++) {
		char p[16];
		snprintf(p, sizeof(p), "f%d", i);
		pw_audit_event ev = denial(op, p, t0 + i);
		pw_audit_submit(a, &ev);
	}
}

static void own_comm(char *buf, size_t n)
{
	FILE *f = fopen("/proc/self/comm", "re");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(buf, (int)n, f));
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
}

Test(audit, rows_carry_every_field)
{
	pw_audit *a = start(0, 0, 0);
	pw_rule deny = {
	    .kind = PW_RULE_DENY,
	    .pattern = (char *)"src/secret/**",
	    .file = (char *)"/home/u/.config/piworkfs/modes/build.md",
	    .line = 7,
	    .column = 5,
	    .layer = PW_LAYER_GLOBAL,
	};
	int64_t t = now_ns();
	pw_audit_event ev = denial(PW_OP_CREATE, "docs/new.md", t);
	pw_audit_submit(a, &ev);
	ev = denial(PW_OP_RENAME, "a.txt", t + 1);
	ev.path2 = "b.txt";
	pw_audit_submit(a, &ev);
	ev = denial(PW_OP_UNLINK, "src/secret/key", t + 2);
	ev.mode = "build";
	ev.err = EACCES;
	ev.reason = PW_REASON_DENY_RULE;
	ev.rule = &deny;
	ev.generation = 9;
	ev.pid = 1; /* init: a process name we did not write */
	pw_audit_submit(a, &ev);
	ev = denial(PW_OP_SETXATTR, "x", 0); /* time filled in by submit */
	pw_audit_submit(a, &ev);
	pw_audit_stats st = stopped_drained(a);
	cr_assert_eq(st.submitted, 4);
	cr_assert_eq(st.written, 4);
	cr_assert_eq(st.dropped, 0);

	char comm[32], sql[1024];
	own_comm(comm, sizeof(comm));
	cr_assert_eq(query_int("SELECT count(*) FROM audit"), 4);
	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM audit WHERE op = 'create' AND path = 'docs/new.md' AND "
		 "path2 IS NULL AND errno = %d AND mode = 'plan' AND generation = 3 AND "
		 "reason = 'read-only' AND rule_pattern IS NULL AND pid = %d AND uid = %d AND "
		 "comm = '%s' AND count = 1 AND time_ns = %lld AND first_ns = time_ns AND "
		 "last_ns = time_ns AND project = '/projects/demo' AND mountpoint = '/mnt/demo'",
		 EROFS, (int)getpid(), (int)getuid(), comm, (long long)t);
	cr_assert_eq(query_int(sql), 1, "%s", sql);
	cr_assert_eq(query_int("SELECT count(*) FROM audit WHERE op = 'rename' AND path = 'a.txt' "
			       "AND path2 = 'b.txt'"),
		     1);
	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM audit WHERE op = 'unlink' AND errno = %d AND mode = 'build' "
		 "AND generation = 9 AND reason = 'deny-rule' AND rule_kind = 'deny' AND "
		 "rule_pattern = 'src/secret/**' AND "
		 "rule_file = '/home/u/.config/piworkfs/modes/build.md' AND rule_line = 7 AND "
		 "pid = 1 AND comm IS NOT NULL AND comm != '%s'",
		 EACCES, comm);
	cr_assert_eq(query_int(sql), 1, "%s", sql);
	int64_t filled = query_int("SELECT time_ns FROM audit WHERE op = 'setxattr'");
	cr_assert_geq(filled, t);
	cr_assert_lt(filled, now_ns());
}

/* A denial's thread name (check.c: the asking thread, when not the program's main one) is
 * stored beside its program (cut as the program's name is, at 16 bytes); none is NULL. */
Test(audit, rows_carry_the_thread_name)
{
	static const struct {
		const char *path, *comm, *thread; /* NULL: not given */
	} denials[] = {
	    {"by-worker", "node", "libuv-worker"},
	    {"by-main", "node", NULL},
	    {"long-name", NULL, "0123456789abcdefXYZ"},
	};
	pw_audit *a = start(0, 0, 0);
	int64_t t = now_ns();
	for (size_t i = 0; i < ELEMENTSOF(denials); i++) {
		pw_audit_event ev = denial(PW_OP_CREATE, denials[i].path, t + (int64_t)i);
		ev.comm = denials[i].comm;
		ev.thread = denials[i].thread;
		pw_audit_submit(a, &ev);
	}
	stopped_drained(a);
	cr_assert_eq(query_int("SELECT count(*) FROM audit WHERE path = 'by-worker' AND "
			       "comm = 'node' AND thread = 'libuv-worker'"),
		     1);
	cr_assert_eq(query_int("SELECT count(*) FROM audit WHERE path = 'by-main' AND "
			       "comm = 'node' AND thread IS NULL"),
		     1);
	cr_assert_eq(query_int("SELECT length(thread) FROM audit WHERE path = 'long-name'"), 16);
}

Test(audit, allowed_events_only_when_asked)
{
	pw_audit *a = start(0, 0, 0);
	pw_audit_event ev = denial(PW_OP_WRITE, "ok.txt", 0);
	ev.err = 0;
	ev.reason = PW_REASON_ALLOW_RULE;
	pw_audit_submit(a, &ev);
	pw_audit_stats st = stopped_drained(a);
	cr_assert_eq(st.submitted, 0, "an allowed event is ignored without log_allowed");

	pw_audit_opts o = {.db_path = dbpath, .project = "/p", .log_allowed = true};
	cr_assert_eq(pw_audit_start(&o, &a, NULL), 0);
	pw_audit_submit(a, &ev);
	stopped_drained(a);
	cr_assert_eq(query_int("SELECT count(*) FROM audit WHERE errno = 0 AND op = 'write' AND "
			       "reason = 'allow-rule'"),
		     1);
}

Test(audit, long_strings_are_truncated_not_dropped)
{
	/* A path deeper than PATH_MAX (the view serves them) is kept whole; one past the
	 * view's own limit is truncated to it. */
	static char path[2 * PW_TREE_PATH_MAX];
	memset(path, 'a', 3 * PW_PATH_MAX - 1);
	pw_audit *a = start(0, 0, 0);
	pw_audit_event ev = denial(PW_OP_CREATE, path, 0);
	pw_audit_submit(a, &ev);
	memset(path, 'b', sizeof(path) - 1);
	ev = denial(PW_OP_UNLINK, path, 0);
	pw_audit_submit(a, &ev);
	stopped_drained(a);
	cr_assert_eq(query_int("SELECT length(path) FROM audit WHERE op = 'create'"),
		     3 * PW_PATH_MAX - 1);
	cr_assert_eq(query_int("SELECT length(path) FROM audit WHERE op = 'unlink'"),
		     PW_TREE_PATH_MAX - 1);
}

Test(audit, storm_coalesces_into_one_row)
{
	pw_audit *a = start(0, 0, 0);
	int64_t t0 = now_ns();
	for (int i = 0; i < 10000; i++) {
		pw_audit_event ev = denial(PW_OP_OPEN_WRITE, "src/main.c", t0 + i * 50000);
		pw_audit_submit(a, &ev);
	}
	pw_audit_stats st = stopped_drained(a);
	cr_assert_eq(st.written, 10000);
	cr_assert_eq(st.coalesced, 9999);
	cr_assert_eq(st.dropped, 0);
	cr_assert_eq(query_int("SELECT count(*) FROM audit"), 1);
	cr_assert_eq(query_int("SELECT count FROM audit"), 10000);
	cr_assert_eq(query_int("SELECT first_ns FROM audit"), t0);
	cr_assert_eq(query_int("SELECT time_ns FROM audit"), t0);
	cr_assert_eq(query_int("SELECT last_ns FROM audit"), t0 + 9999 * 50000);
}

Test(audit, coalescing_keys_and_window)
{
	pw_audit *a = start(0, 0, 0);
	int64_t t0 = now_ns() - 10ll * 1000000000;
	pw_audit_event ev;

	for (int i = 0; i < 3; i++) { /* same key, 3 windows: 3 rows */
		ev = denial(PW_OP_WRITE, "f", t0 + i * 1500000000ll);
		pw_audit_submit(a, &ev);
		pw_audit_submit(a, &ev);
	}
	ev = denial(PW_OP_WRITE, "g", t0); /* other path */
	pw_audit_submit(a, &ev);
	ev = denial(PW_OP_TRUNCATE, "f", t0); /* other op */
	pw_audit_submit(a, &ev);
	ev = denial(PW_OP_WRITE, "f", t0); /* other pid */
	ev.pid = 1;
	pw_audit_submit(a, &ev);
	ev = denial(PW_OP_WRITE, "f", t0); /* other errno */
	ev.err = EACCES;
	pw_audit_submit(a, &ev);
	ev = denial(PW_OP_RENAME, "f", t0); /* path2 differs */
	ev.path2 = "x";
	pw_audit_submit(a, &ev);
	ev.path2 = "y";
	pw_audit_submit(a, &ev);
	pw_audit_stats st = stopped_drained(a);
	cr_assert_eq(st.written, 12);
	cr_assert_eq(st.coalesced, 3);
	cr_assert_eq(query_int("SELECT count(*) FROM audit"), 9);
	cr_assert_eq(query_int("SELECT sum(count) FROM audit"), 12);
	cr_assert_eq(query_int("SELECT count(*) FROM audit WHERE path = 'f' AND op = 'write' "
			       "AND errno = 30 AND pid != 1 AND count = 2"),
		     3);
}

Test(audit, storm_across_batches_still_one_row)
{
	/* The first event is written alone; the rest arrive in later batches and update the
	 * same row. */
	pw_audit *a = start(0, 0, 0);
	int64_t t0 = now_ns();
	pw_audit_event ev = denial(PW_OP_MKDIR, "d", t0);
	pw_audit_submit(a, &ev);
	drained(a);
	for (int i = 1; i < 100; i++) {
		ev.time_ns = t0 + i * 1000000;
		pw_audit_submit(a, &ev);
		if (i % 10 == 0)
			drained(a);
	}
	stopped_drained(a);
	cr_assert_eq(query_int("SELECT count(*) FROM audit"), 1);
	cr_assert_eq(query_int("SELECT count FROM audit"), 100);
	cr_assert_eq(query_int("SELECT last_ns - first_ns FROM audit"), 99 * 1000000);
}

Test(audit, retention_by_days)
{
	pw_audit *a = start(0, 30, 0);
	int64_t day = 86400ll * 1000000000ll, now = now_ns();
	const int64_t ages[] = {40, 31, 29, 1, 0};
	for (size_t i = 0; i < ELEMENTSOF(ages); i++) {
		char p[16];
		snprintf(p, sizeof(p), "f%zu", i);
		pw_audit_event ev = denial(PW_OP_CREATE, p, now - ages[i] * day);
		pw_audit_submit(a, &ev);
	}
	stopped_drained(a); /* retention also runs when stopping */
	cr_assert_eq(query_int("SELECT count(*) FROM audit"), 3);
	cr_assert_eq(query_int("SELECT count(*) FROM audit WHERE path IN ('f0', 'f1')"), 0);
}

Test(audit, retention_by_days_on_start_and_for_switches)
{
	pw_state *s = NULL;
	cr_assert_eq(pw_state_open(dbpath, &s, NULL), 0);
	int64_t day = 86400ll * 1000000000ll, now = now_ns();
	pw_switch_record r = {.time_ns = now - 10 * day, .project = "/p", .to_mode = "plan"};
	cr_assert_eq(pw_state_record_switch(s, &r), 0);
	r.time_ns = now - 2 * day;
	cr_assert_eq(pw_state_record_switch(s, &r), 0);
	pw_state_close(s);

	/* The writer applies retention as it starts: wait for it (stop would apply it too,
	 * which is why the wait comes first). */
	pw_audit *a = start(0, 5, 0);
	int64_t t0 = mono_us();
	while (query_int("SELECT count(*) FROM switches") != 1 && mono_us() - t0 < DEADLINE_US)
		usleep(2000);
	cr_assert_eq(query_int("SELECT count(*) FROM switches"), 1, "retention at start");
	pw_audit_stop(a);
	cr_assert_eq(query_int("SELECT count(*) FROM switches"), 1);
}

Test(audit, retention_by_rows_keeps_the_newest)
{
	pw_audit *a = start(0, 0, 10);
	int64_t t0 = now_ns() - 1000ll * 1000000000;
	for (int i = 0; i < 50; i++) {
		char p[16];
		snprintf(p, sizeof(p), "f%02d", i);
		pw_audit_event ev = denial(PW_OP_CREATE, p, t0 + i * 2000000000ll);
		pw_audit_submit(a, &ev);
	}
	stopped_drained(a);
	cr_assert_eq(query_int("SELECT count(*) FROM audit"), 10);
	cr_assert_eq(query_int("SELECT count(*) FROM audit WHERE path >= 'f40'"), 10);
}

Test(audit, full_queue_counts_exact_drops)
{
	create_db();
	sqlite3 *lock = lock_db();
	pw_audit *a = start(8, 0, 0);
	int64_t t0 = now_ns();
	submit_many(a, PW_OP_CREATE, 100, t0);
	pw_audit_stats st;
	pw_audit_get_stats(a, &st);
	cr_assert_eq(st.submitted, 100);
	cr_assert_eq(st.dropped, 92);
	cr_assert_eq(st.written, 0); /* the writer is retrying, not draining */
	unlock_db(lock);
	st = stopped_drained(a);
	cr_assert_eq(st.written, 8);
	cr_assert_eq(st.dropped, 92);
	cr_assert_eq(query_int("SELECT count(*) FROM audit"), 8);
	cr_assert_eq(query_int("SELECT count(*) FROM audit WHERE path IN ('f0','f1','f2','f3',"
			       "'f4','f5','f6','f7')"),
		     8, "the first events are kept, later ones dropped");
	cr_assert_eq(query_int("SELECT value FROM meta WHERE key = 'audit_dropped'"), 92);
}

/* The child of database_locked_by_another_process, executed again (the constructor below):
 * holds an exclusive lock on DB until the parent has checked that nothing got written. */
static int locker_main(const char *db_path, int ready, int release)
{
	sqlite3 *db = NULL;
	char x;

	if (sqlite3_open(db_path, &db) != SQLITE_OK ||
	    sqlite3_exec(db, "BEGIN EXCLUSIVE", NULL, NULL, NULL) != SQLITE_OK)
		return 1;
	if (write(ready, "x", 1) != 1)
		return 1;
	if (read(release, &x, 1) != 1)
		return 1;
	return sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK ? 0 : 1;
}

__attribute__((constructor)) static void maybe_the_locker(void)
{
	const char *db = getenv("PW_AUDIT_LOCKER"), *ready = getenv("PW_AUDIT_LOCKER_READY");
	const char *release = getenv("PW_AUDIT_LOCKER_RELEASE");

	if (db)
		_exit(ready && release ? locker_main(db, atoi(ready), atoi(release)) : 2);
}

Test(audit, database_locked_by_another_process)
{
	create_db();
	int ready[2], release[2];
	cr_assert_eq(pipe2(ready, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(release, O_CLOEXEC), 0);
	/* The lock holder is this binary executed again (locker_main), never a bare fork: a
	 * forked child of this multithreaded process may only make async-signal-safe calls,
	 * and under AddressSanitizer sqlite3_open in one can wait for good on an allocator
	 * lock another thread held at the fork. */
	char e_db[600], e_ready[48], e_release[48], e_asan[512], e_ubsan[512];
	const char *asan = getenv("ASAN_OPTIONS"), *ubsan = getenv("UBSAN_OPTIONS");
	snprintf(e_db, sizeof(e_db), "PW_AUDIT_LOCKER=%s", dbpath);
	snprintf(e_ready, sizeof(e_ready), "PW_AUDIT_LOCKER_READY=%d", ready[1]);
	snprintf(e_release, sizeof(e_release), "PW_AUDIT_LOCKER_RELEASE=%d", release[0]);
	snprintf(e_asan, sizeof(e_asan), "ASAN_OPTIONS=%s", asan ? asan : "");
	snprintf(e_ubsan, sizeof(e_ubsan), "UBSAN_OPTIONS=%s", ubsan ? ubsan : "");
	char *const envp[] = {e_db, e_ready, e_release, e_asan, e_ubsan, NULL};
	char *const argv[] = {"test_audit", NULL};
	pid_t child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		close(release[1]);
		if (fcntl(ready[1], F_SETFD, 0) < 0 || fcntl(release[0], F_SETFD, 0) < 0)
			_exit(6);
		execve("/proc/self/exe", argv, envp);
		_exit(7);
	}
	close(ready[1]);
	close(release[0]);
	char c;
	cr_assert_eq(read(ready[0], &c, 1), 1);
	close(ready[0]);

	pw_audit *a = start(0, 0, 0);
	int64_t t0 = now_ns();
	submit_many(a, PW_OP_UNLINK, 1000, t0);
	pw_audit_stats st;
	pw_audit_get_stats(a, &st);
	cr_assert_eq(st.written, 0,
		     "nothing can be written while the other process holds the lock");
	cr_assert_eq(st.dropped, 0);
	cr_assert_eq(write(release[1], "x", 1), 1);
	close(release[1]);

	int status;
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	st = stopped_drained(a);
	cr_assert_eq(st.written, 1000);
	cr_assert_eq(st.dropped, 0);
	cr_assert_eq(query_int("SELECT count(*) FROM audit"), 1000);
}

Test(audit, submit_never_waits_for_the_writer)
{
	/* The database stays locked until every submit has returned: a submit that waited
	 * for the writer (or for SQLite) would never return, and the suite's timeout would
	 * fail the test. How fast a submit is belongs in the benchmark, not here. */
	enum { N = 20000 };
	static char path[128];

	create_db();
	sqlite3 *lock = lock_db();
	pw_audit *a = start(N, 0, 0);
	memset(path, 'p', 100); /* ~200-byte records: within the ring's 256 bytes per event */
	int64_t t0 = now_ns();
	for (int i = 0; i < N; i++) {
		snprintf(path + 100, 16, "/%d", i);
		pw_audit_event ev = denial(PW_OP_WRITE, path, t0 + i);
		pw_audit_submit(a, &ev);
	}
	pw_audit_stats st;
	pw_audit_get_stats(a, &st);
	cr_assert_eq(st.submitted, N);
	cr_assert_eq(st.written, 0, "the writer was blocked throughout");
	cr_assert_eq(st.dropped, 0, "every event queued, none dropped");
	unlock_db(lock);
	st = stopped_drained(a);
	cr_assert_eq(st.written, N);
	cr_assert_eq(query_int("SELECT count(*) FROM audit"), N);
}

typedef struct seen {
	int calls;
	char path[64], comm[32];
	int err;
	char rule[64];
} seen;

static void listener(const pw_audit_event *ev, const char *comm, void *ud)
{
	seen *s = ud;
	s->calls++;
	snprintf(s->path, sizeof(s->path), "%s", ev->path);
	snprintf(s->comm, sizeof(s->comm), "%s", comm ? comm : "");
	snprintf(s->rule, sizeof(s->rule), "%s", ev->rule ? ev->rule->pattern : "");
	s->err = ev->err;
}

Test(audit, listener_sees_each_new_row)
{
	static seen s;
	pw_audit *a = start(0, 0, 0);
	pw_audit_set_listener(a, listener, &s);
	pw_rule r = {.kind = PW_RULE_PROTECTED,
		     .pattern = (char *)".git/hooks/**",
		     .file = (char *)"(built-in)",
		     .layer = PW_LAYER_DEFAULT};
	int64_t t0 = now_ns();
	for (int i = 0; i < 50; i++) {
		pw_audit_event ev = denial(PW_OP_CREATE, ".git/hooks/pre-commit", t0 + i);
		ev.err = EACCES;
		ev.rule = &r;
		pw_audit_submit(a, &ev);
	}
	stopped_drained(a);
	cr_assert_eq(s.calls, 1, "coalesced repeats are not reported again");
	cr_assert_str_eq(s.path, ".git/hooks/pre-commit");
	cr_assert_str_eq(s.rule, ".git/hooks/**");
	cr_assert_eq(s.err, EACCES);
	char comm[32];
	own_comm(comm, sizeof(comm));
	cr_assert_str_eq(s.comm, comm);
}

Test(audit, stop_flushes_and_accepts_null)
{
	pw_audit_stop(NULL);
	pw_audit_submit(NULL, NULL);
	pw_audit *a = start(0, 0, 0);
	int64_t t0 = now_ns();
	submit_many(a, PW_OP_CHMOD, 500, t0);
	pw_audit_stop(a); /* no drained(): stop itself must flush */
	cr_assert_eq(query_int("SELECT count(*) FROM audit"), 500);
}

Test(audit, ring_wraps_many_times)
{
	/* A small ring (64 KiB minimum) and 5,000 events of ~1 KiB: the ring wraps about 80 times,
	 * and every event still arrives intact. */
	static char path[1100];
	pw_audit *a = start(64, 0, 0);
	int64_t t0 = now_ns();
	unsigned long long kept = 0;
	for (int i = 0; i < 5000; i++) {
		memset(path, 'a' + i % 26, 1000);
		snprintf(path + 1000, 32, "/%d", i);
		pw_audit_event ev = denial(PW_OP_CREATE, path, t0 + i);
		pw_audit_submit(a, &ev);
		if (i % 32 == 31)
			drained(a);
	}
	pw_audit_stats st = drained(a);
	kept = st.written;
	pw_audit_stop(a);
	cr_assert_eq(st.submitted, 5000);
	cr_assert_eq(query_int("SELECT count(*) FROM audit"), (int64_t)kept);
	cr_assert_eq(query_int("SELECT count(*) FROM audit WHERE length(path) < 1002 OR "
			       "substr(path, 1, 1) != substr(path, 1000, 1)"),
		     0, "no record was torn");
}
