/* SPDX-License-Identifier: MIT */
/*
 * The originals store (fs/undo/originals.c) shared by several views: retention must never
 * remove a blob that a row names, or will name once a batch or a dead daemon's journal is
 * committed. Two store handles on one database stand for two views; a forked child that
 * exits without committing stands for a daemon killed with SIGKILL; a VFS whose writes to
 * the WAL fail stands for a full disk or an I/O error under a commit. Each test works in its
 * own temporary directory (and process: Criterion forks one per test).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "undo/originals.h"
#include "../lib/testdir.h"

static char tmpdir[256];
static char dbpath[512];
static int project_fd = -1;

static void setup(void)
{
	char project[600];
	testdir_make(tmpdir, sizeof(tmpdir), "pw-test-originals");
	snprintf(dbpath, sizeof(dbpath), "%s/state/state.db", tmpdir);
	snprintf(project, sizeof(project), "%s/project", tmpdir);
	cr_assert_eq(mkdir(project, 0755), 0);
	project_fd = open(project, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(project_fd, 0);
	int fd = openat(project_fd, "f", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	const char text[] = "the same content, kept by two change sets\n";
	cr_assert_eq(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
	close(fd);
}

static void teardown(void)
{
	if (project_fd >= 0)
		close(project_fd);
	project_fd = -1;
	testdir_remove(tmpdir);
}

TestSuite(originals, .init = setup, .fini = teardown);

/* Rows wait for an hour unless committed on purpose: the tests decide when. A statement
 * waits BUSY_MS for another handle's write lock (0: the product's PW_DB_BUSY_TIMEOUT_MS). */
static pw_undo_orig_store *open_store_busy(int busy_ms)
{
	pw_undo_orig_opts o = {
	    .db_path = dbpath, .defer_ns = 3600ll * 1000000000, .busy_ms = busy_ms};
	pw_undo_orig_store *s = NULL;
	cr_assert_eq(pw_undo_orig_store_open(&o, &s), 0);
	return s;
}

static pw_undo_orig_store *open_store(void)
{
	return open_store_busy(0);
}

/* A handle whose statements find another handle's batch holding the write lock and wait the
 * busy timeout out on purpose: a short one, as the wait is not what the test checks (at the
 * product's 2 s, each such wait cost the test 2 s). */
#define SHORT_BUSY_MS 100

static int64_t begin_set(pw_undo_orig_store *s)
{
	int64_t id = 0;
	pw_undo_orig_lock(s);
	cr_assert_eq(
	    pw_undo_orig_changeset_begin(s, "/project", "/view", "checkpoint", NULL, "build", &id),
	    0);
	pw_undo_orig_unlock(s);
	return id;
}

/* Captures "f" with its content (lock held by the caller); its blob's name in HASH. */
static void capture_f(pw_undo_orig_store *s, pw_undo_orig_object *o, char hash[PW_SHA256_HEX])
{
	cr_assert_eq(pw_undo_orig_capture(s, project_fd, "f", PW_UNDO_ORIG_CONTENT, o), 0);
	cr_assert(o->present);
	cr_assert_neq(o->blob[0], '\0', "the content is kept");
	memcpy(hash, o->blob, PW_SHA256_HEX);
}

/* Inserts a row keeping "f" as O; its id in *ID. */
static int insert_f_id(pw_undo_orig_store *s, int64_t cs, const pw_undo_orig_object *o,
		       bool deferred, int64_t *id)
{
	pw_undo_orig_row row = {.changeset = cs,
				.action = PW_UNDO_ORIG_KEEP,
				.path = "f",
				.obj = o,
				.op = "write",
				.mode = "build",
				.pid = getpid()};
	return deferred ? pw_undo_orig_insert_deferred(s, &row, id)
			: pw_undo_orig_insert(s, &row, id);
}

static int insert_f(pw_undo_orig_store *s, int64_t cs, const pw_undo_orig_object *o, bool deferred)
{
	int64_t id = 0;
	return insert_f_id(s, cs, o, deferred, &id);
}

static bool streq_blob(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

static bool blob_exists(pw_undo_orig_store *s, const char *hash)
{
	char *p = pw_undo_orig_blob_path(s, hash);
	cr_assert_not_null(p);
	bool there = access(p, F_OK) == 0;
	free(p);
	return there;
}

typedef struct naming {
	const char *hash;
	int64_t changeset;
	unsigned rows;
} naming;

static int any_set(const pw_undo_orig_changeset *c, void *u)
{
	(void)c;
	(void)u;
	return 0;
}

static int count_row(const pw_undo_orig_rec *r, void *u)
{
	naming *n = u;
	if (r->changeset == n->changeset && streq_blob(r->o.blob, n->hash))
		n->rows++;
	return 0;
}

/* The committed rows of change set CS that name blob HASH. */
static unsigned rows_naming(pw_undo_orig_store *s, int64_t cs, const char *hash)
{
	naming n = {.hash = hash, .changeset = cs};
	pw_undo_orig_lock(s);
	cr_assert_eq(pw_undo_orig_read(s, "/project", any_set, count_row, &n), 0);
	pw_undo_orig_unlock(s);
	return n.rows;
}

/* Change set 1 keeps "f" and is committed; change set 2 begins. Returns its id. */
static int64_t first_set_keeps_f(pw_undo_orig_store *s, char hash[PW_SHA256_HEX])
{
	int64_t cs1 = begin_set(s);
	pw_undo_orig_object o;
	pw_undo_orig_lock(s);
	capture_f(s, &o, hash);
	cr_assert_eq(insert_f(s, cs1, &o, false), 0);
	pw_undo_orig_object_done(&o);
	pw_undo_orig_unlock(s);
	return begin_set(s);
}

/*
 * View X keeps "f" again in change set 2: its blob exists already (same content). While X's
 * row is not committed yet, view Y prunes change set 1, the only committed row naming the
 * blob. The blob must outlive the prune: X's row will name it.
 */
Test(originals, a_prune_amid_another_views_keep_leaves_its_blob, .timeout = 120)
{
	pw_undo_orig_store *x = open_store(), *y = open_store_busy(SHORT_BUSY_MS);
	char hash[PW_SHA256_HEX], again[PW_SHA256_HEX];
	int64_t cs2 = first_set_keeps_f(x, hash);

	pw_undo_orig_object o;
	pw_undo_orig_lock(x);
	capture_f(x, &o, again);
	cr_assert_str_eq(again, hash);

	/* Y: everything older than a nanosecond goes, change set 2 excepted. Whether it waits
	 * for X and gives up or not, it must not remove what X's row names. (The prunes here
	 * also cap the total at 1 byte, so that they remove change set 1 by size whatever the
	 * real-time clock does: a clock stepped back, as NTP does on a fresh machine, made it
	 * look younger than a nanosecond.) */
	pw_undo_orig_lock(y);
	(void)pw_undo_orig_prune(y, 1, 1, cs2, NULL);
	pw_undo_orig_unlock(y);

	cr_assert_eq(insert_f(x, cs2, &o, true), 0);
	cr_assert_eq(pw_undo_orig_flush(x), 0);
	pw_undo_orig_object_done(&o);
	pw_undo_orig_unlock(x);
	cr_assert(blob_exists(x, hash), "a prune removed the blob a row of change set 2 names");

	/* Now change set 1 goes, and the blob stays: change set 2 names it. */
	uint64_t bytes = 0, blobs = 0;
	pw_undo_orig_lock(y);
	cr_assert_geq(pw_undo_orig_prune(y, 1, 1, cs2, NULL), 1, "change set 1 is removed");
	cr_assert_eq(pw_undo_orig_total(y, &bytes, &blobs), 0);
	pw_undo_orig_unlock(y);
	cr_assert_eq(blobs, 1);
	cr_assert(blob_exists(y, hash));
	cr_assert_eq(rows_naming(y, cs2, hash), 1);

	pw_undo_orig_store_close(y);
	pw_undo_orig_store_close(x);
}

/*
 * A daemon that SIGKILL ends, standing in a process of its own: the test binary executed
 * again (never a bare fork: a fork of this multithreaded process may only call
 * async-signal-safe functions until it execs, and under AddressSanitizer a forked child
 * hung for good on the allocator's lock that another thread held at the fork). The
 * constructor below sees PW_DYING_WORK before Criterion starts, opens the store, runs the
 * named work with the store lock held, writes what it has to say to fd PW_DYING_OUT and
 * exits with no commit and no close.
 */
typedef int (*dying_work)(pw_undo_orig_store *d, const char *arg, char *out, size_t outlen);
static int keeps_f_again(pw_undo_orig_store *d, const char *arg, char *out, size_t outlen);
static int queues_two(pw_undo_orig_store *d, const char *arg, char *out, size_t outlen);
static int keeps_f_and_dies(pw_undo_orig_store *d, const char *arg, char *out, size_t outlen);

static const struct {
	const char *name;
	dying_work fn;
} dying_works[] = {
    {"keeps_f_again", keeps_f_again},
    {"queues_two", queues_two},
    {"keeps_f_and_dies", keeps_f_and_dies},
};

static int run_dying_work(const char *name)
{
	const char *db = getenv("PW_DYING_DB"), *project = getenv("PW_DYING_PROJECT");
	const char *arg = getenv("PW_DYING_ARG"), *out_fd = getenv("PW_DYING_OUT");
	if (!db || !project || !arg || !out_fd)
		return 2;
	snprintf(dbpath, sizeof(dbpath), "%s", db);
	project_fd = open(project, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (project_fd < 0)
		return 2;
	pw_undo_orig_store *d = NULL;
	pw_undo_orig_opts opts = {.db_path = dbpath, .defer_ns = 3600ll * 1000000000};
	if (pw_undo_orig_store_open(&opts, &d) < 0)
		return 2;
	pw_undo_orig_lock(d);
	for (size_t i = 0; i < sizeof(dying_works) / sizeof(dying_works[0]); i++) {
		if (strcmp(dying_works[i].name, name) != 0)
			continue;
		char out[128] = "";
		if (dying_works[i].fn(d, arg, out, sizeof(out)) != 0)
			return 3;
		size_t n = strlen(out);
		return write(atoi(out_fd), out, n) == (ssize_t)n ? 0 : 4;
	}
	return 5;
}

__attribute__((constructor)) static void maybe_a_dying_daemon(void)
{
	const char *name = getenv("PW_DYING_WORK");
	if (name)
		_exit(run_dying_work(name));
}

/* Runs the work NAME with ARG in a daemon that dies; what it wrote in OUT (may be NULL).
 * Fails the test unless the work returned 0. */
static void in_a_daemon_that_dies(const char *name, const char *arg, char *out, size_t outlen)
{
	char project[600], env_work[128], env_db[600], env_project[640], env_arg[256], env_out[64];
	int pipefd[2];
	cr_assert_eq(pipe2(pipefd, O_CLOEXEC), 0);
	snprintf(project, sizeof(project), "%s/project", tmpdir);
	snprintf(env_work, sizeof(env_work), "PW_DYING_WORK=%s", name);
	snprintf(env_db, sizeof(env_db), "PW_DYING_DB=%s", dbpath);
	snprintf(env_project, sizeof(env_project), "PW_DYING_PROJECT=%s", project);
	snprintf(env_arg, sizeof(env_arg), "PW_DYING_ARG=%s", arg);
	snprintf(env_out, sizeof(env_out), "PW_DYING_OUT=%d", pipefd[1]);
	const char *asan = getenv("ASAN_OPTIONS"), *ubsan = getenv("UBSAN_OPTIONS");
	char env_asan[512] = "", env_ubsan[512] = "";
	snprintf(env_asan, sizeof(env_asan), "ASAN_OPTIONS=%s", asan ? asan : "");
	snprintf(env_ubsan, sizeof(env_ubsan), "UBSAN_OPTIONS=%s", ubsan ? ubsan : "");
	char *const envp[] = {env_work, env_db,	  env_project, env_arg,
			      env_out,	env_asan, env_ubsan,   NULL};
	char *const argv[] = {"test_originals", NULL};

	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* Async-signal-safe calls only until the exec; the write end stays open in it. */
		if (fcntl(pipefd[1], F_SETFD, 0) < 0)
			_exit(6);
		execve("/proc/self/exe", argv, envp);
		_exit(7);
	}
	close(pipefd[1]);
	char buf[128];
	size_t got = 0;
	for (;;) {
		ssize_t n = read(pipefd[0], buf + got, sizeof(buf) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == sizeof(buf) - 1)
			break;
	}
	buf[got] = '\0';
	close(pipefd[0]);
	int status = 0;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's status: %d", status);
	if (out && outlen) {
		size_t n = got < outlen - 1 ? got : outlen - 1;
		memcpy(out, buf, n);
		out[n] = '\0';
	}
}

/* The dying daemon of the next test: keeps "f" again (ARG: "CS2 HASH", the change set and
 * the content's hash), its row journaled only. */
static int keeps_f_again(pw_undo_orig_store *d, const char *arg, char *out, size_t outlen)
{
	(void)out;
	(void)outlen;
	long long cs2 = 0;
	char hash[PW_SHA256_HEX + 1] = "";
	if (sscanf(arg, "%lld %64s", &cs2, hash) != 2)
		return -1;
	pw_undo_orig_object o;
	if (pw_undo_orig_capture(d, project_fd, "f", PW_UNDO_ORIG_CONTENT, &o) < 0 || !o.blob[0] ||
	    strcmp(o.blob, hash) != 0)
		return -1;
	return insert_f(d, cs2, &o, true);
}

/*
 * A daemon keeps "f" in change set 2 (its row in its journal only) and is killed before
 * its batch is committed. A live view then prunes change set 1: the dead daemon's row names
 * the blob too, so the blob must stay, and the row must be found.
 */
Test(originals, a_prune_keeps_the_blobs_a_dead_daemons_journal_names, .timeout = 120)
{
	pw_undo_orig_store *y = open_store();
	char hash[PW_SHA256_HEX];
	int64_t cs2 = first_set_keeps_f(y, hash);

	char arg[128];
	snprintf(arg, sizeof(arg), "%lld %s", (long long)cs2, hash);
	in_a_daemon_that_dies("keeps_f_again", arg, NULL, 0);

	pw_undo_orig_lock(y);
	cr_assert_geq(pw_undo_orig_prune(y, 1, 1, cs2, NULL), 1, "change set 1 is removed");
	pw_undo_orig_unlock(y);
	cr_assert(blob_exists(y, hash), "a prune removed a blob a dead daemon's row names");

	/* The dead daemon's row is in the database now, naming the blob. */
	uint64_t bytes = 0, blobs = 0;
	pw_undo_orig_lock(y);
	cr_assert_eq(pw_undo_orig_total(y, &bytes, &blobs), 0);
	pw_undo_orig_unlock(y);
	cr_assert_eq(blobs, 1);
	cr_assert_eq(rows_naming(y, cs2, hash), 1);
	pw_undo_orig_store_close(y);
}

/* ---- queued rows of created names (pw_undo_orig_queue) ----------------------------------- */

/* The row of a name PATH created in change set CS, which names nothing (NONE, empty). */
static pw_undo_orig_row created_row(int64_t cs, const char *path, pw_undo_orig_object *none)
{
	*none = (pw_undo_orig_object){0};
	return (pw_undo_orig_row){.changeset = cs,
				  .action = PW_UNDO_ORIG_KEEP,
				  .path = path,
				  .obj = none,
				  .op = "create",
				  .mode = "build",
				  .pid = getpid()};
}

static int queue_created(pw_undo_orig_store *s, int64_t cs, const char *path, int64_t *id)
{
	pw_undo_orig_object none;
	pw_undo_orig_row row = created_row(cs, path, &none);
	return pw_undo_orig_queue(s, &row, id);
}

typedef struct listing {
	char paths[16][64];
	unsigned n;
} listing;

static int list_row(const pw_undo_orig_rec *r, void *u)
{
	listing *l = u;
	if (l->n < 16)
		snprintf(l->paths[l->n++], sizeof(l->paths[0]), "%s%s", r->o.present ? "kept:" : "",
			 r->path);
	return 0;
}

static void list_rows(pw_undo_orig_store *s, listing *l)
{
	memset(l, 0, sizeof(*l));
	pw_undo_orig_lock(s);
	cr_assert_eq(pw_undo_orig_read(s, "/project", any_set, list_row, l), 0);
	pw_undo_orig_unlock(s);
}

/* Queued rows and rows inserted at once between them are read back in the order of their
 * changes: undo replays them backwards, and a directory must go after what was in it. */
Test(originals, queued_rows_keep_the_order_of_the_changes, .timeout = 60)
{
	pw_undo_orig_store *s = open_store();
	int64_t cs = begin_set(s), a = 0, c = 0;
	pw_undo_orig_object o;
	char hash[PW_SHA256_HEX];

	pw_undo_orig_lock(s);
	cr_assert_eq(queue_created(s, cs, "dir", &a), 0);
	capture_f(s, &o, hash);
	cr_assert_eq(insert_f(s, cs, &o, true), 0);
	pw_undo_orig_object_done(&o);
	cr_assert_eq(queue_created(s, cs, "dir/new", &c), 0);
	pw_undo_orig_unlock(s);

	listing l;
	list_rows(s, &l);
	cr_assert_eq(l.n, 3);
	cr_assert_str_eq(l.paths[0], "dir");
	cr_assert_str_eq(l.paths[1], "kept:f");
	cr_assert_str_eq(l.paths[2], "dir/new");
	pw_undo_orig_store_close(s);
}

/* A change that fails after its keep takes its row back by the token it got, whether the
 * row is still queued or a flush has inserted it since. */
Test(originals, a_queued_rows_token_removes_it_before_and_after_a_flush, .timeout = 60)
{
	pw_undo_orig_store *s = open_store();
	int64_t cs = begin_set(s), a = 0, b = 0, c = 0;

	pw_undo_orig_lock(s);
	cr_assert_eq(queue_created(s, cs, "a", &a), 0);
	cr_assert_eq(queue_created(s, cs, "b", &b), 0);
	cr_assert_gt(a, 0);
	cr_assert_neq(a, b);
	pw_undo_orig_delete(s, b); /* still queued */
	cr_assert_eq(queue_created(s, cs, "c", &c), 0);
	cr_assert_eq(pw_undo_orig_flush(s), 0);
	pw_undo_orig_delete(s, a); /* inserted and committed */
	pw_undo_orig_unlock(s);

	listing l;
	list_rows(s, &l);
	cr_assert_eq(l.n, 1);
	cr_assert_str_eq(l.paths[0], "c");
	pw_undo_orig_store_close(s);
}

/* ARG: the change set. */
static int queues_two(pw_undo_orig_store *d, const char *arg, char *out, size_t outlen)
{
	(void)out;
	(void)outlen;
	int64_t id, cs = strtoll(arg, NULL, 10);
	return queue_created(d, cs, "one", &id) < 0 || queue_created(d, cs, "two", &id) < 0 ? -1
											    : 0;
}

/* A daemon killed with rows still queued loses none: the next start replays its journal. */
Test(originals, queued_rows_of_a_killed_daemon_are_replayed, .timeout = 60)
{
	pw_undo_orig_store *s = open_store();
	int64_t cs = begin_set(s);
	pw_undo_orig_store_close(s);

	char arg[32];
	snprintf(arg, sizeof(arg), "%lld", (long long)cs);
	in_a_daemon_that_dies("queues_two", arg, NULL, 0);

	s = open_store(); /* replays the dead daemon's journal */
	listing l;
	list_rows(s, &l);
	cr_assert_eq(l.n, 2);
	cr_assert_str_eq(l.paths[0], "one");
	cr_assert_str_eq(l.paths[1], "two");
	pw_undo_orig_store_close(s);
}

/* ---- blobs no record names ----------------------------------------------------------- */

/* The dying daemon of the next test: keeps "f" and dies before its row is journaled or
 * committed. It tells the blob's name. */
static int keeps_f_and_dies(pw_undo_orig_store *d, const char *arg, char *out, size_t outlen)
{
	(void)arg;
	pw_undo_orig_object o;
	if (pw_undo_orig_capture(d, project_fd, "f", PW_UNDO_ORIG_CONTENT, &o) < 0 || !o.blob[0])
		return -1;
	snprintf(out, outlen, "%s", o.blob);
	pw_undo_orig_object_done(&o);
	return 0;
}

static nlink_t links_of_f(void)
{
	struct stat st;
	cr_assert_eq(fstatat(project_fd, "f", &st, AT_SYMLINK_NOFOLLOW), 0);
	return st.st_nlink;
}

/*
 * A daemon killed between putting a blob in place and recording it left a blob no row
 * names: the next start's prune removes it. Every blob is an inode of the store's own
 * (never the project's file: originals.c, "Why never a link"), so the project's file keeps
 * its one name throughout.
 */
Test(originals, a_blob_a_killed_daemon_kept_but_never_recorded_is_removed, .timeout = 60)
{
	char hash[PW_SHA256_HEX];
	pw_undo_orig_store *s = open_store(); /* the database exists before the child's */
	pw_undo_orig_store_close(s);
	in_a_daemon_that_dies("keeps_f_and_dies", "", hash, sizeof(hash));
	cr_assert_eq(strlen(hash), PW_SHA256_HEX - 1, "the daemon told its blob: '%s'", hash);
	cr_assert_eq(links_of_f(), 1, "the blob is the store's own inode, not the project's");

	s = open_store();
	cr_assert(blob_exists(s, hash));
	pw_undo_orig_lock(s);
	cr_assert_geq(pw_undo_orig_prune(s, 0, 0, 0, NULL), 0);
	pw_undo_orig_unlock(s);
	cr_assert_not(blob_exists(s, hash), "a blob no record names is removed");
	cr_assert_eq(links_of_f(), 1, "the project's file has its one name again");

	/* A recorded blob stays: keep "f" for real, committed. */
	int64_t cs = begin_set(s);
	pw_undo_orig_object o;
	pw_undo_orig_lock(s);
	cr_assert_eq(pw_undo_orig_capture(s, project_fd, "f", PW_UNDO_ORIG_CONTENT, &o), 0);
	cr_assert_eq(insert_f(s, cs, &o, false), 0);
	cr_assert_geq(pw_undo_orig_prune(s, 0, 0, 0, NULL), 0);
	pw_undo_orig_unlock(s);
	cr_assert(blob_exists(s, o.blob), "a blob its row names is kept");
	pw_undo_orig_object_done(&o);
	pw_undo_orig_store_close(s);
}

/* ---- a batch SQLite rolls back ------------------------------------------------------- */

/*
 * The default VFS, but the WAL's writes fail while WAL_FAILS is set: a commit then fails the
 * way a full disk or an I/O error fails it, and SQLite rolls the whole transaction back. Only
 * the WAL's methods are replaced (xWrite), over the file the default VFS opened.
 */
static atomic_bool wal_fails;
static sqlite3_vfs *real_vfs, failing_vfs;
static const sqlite3_io_methods *real_wal_io;
static sqlite3_io_methods failing_wal_io;

static int failing_wal_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off)
{
	if (atomic_load(&wal_fails))
		return SQLITE_IOERR_WRITE;
	return real_wal_io->xWrite(f, buf, n, off);
}

static int failing_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
	(void)vfs;
	int rc = real_vfs->xOpen(real_vfs, name, f, flags, out);
	if (rc != SQLITE_OK || !(flags & SQLITE_OPEN_WAL) || !f->pMethods)
		return rc;
	if (!real_wal_io) {
		real_wal_io = f->pMethods;
		failing_wal_io = *real_wal_io;
		failing_wal_io.xWrite = failing_wal_write;
	}
	if (f->pMethods == real_wal_io)
		f->pMethods = &failing_wal_io;
	return rc;
}

static void install_failing_vfs(void)
{
	if (real_vfs)
		return; /* once per process (Criterion forks one per test, unless told not to) */
	real_vfs = sqlite3_vfs_find(NULL);
	cr_assert_not_null(real_vfs);
	failing_vfs = *real_vfs;
	failing_vfs.zName = "pw-test-failing";
	failing_vfs.xOpen = failing_open;
	cr_assert_eq(sqlite3_vfs_register(&failing_vfs, 1), SQLITE_OK);
}

/* Rows kept, queued and deferred, then a commit that fails: SQLite rolls the batch back. */
static void a_batch_is_rolled_back(pw_undo_orig_store *s, int64_t cs, char hash[PW_SHA256_HEX],
				   int64_t *kept_id)
{
	int64_t id;
	pw_undo_orig_object o;
	cr_assert_eq(queue_created(s, cs, "made", &id), 0);
	capture_f(s, &o, hash);
	cr_assert_eq(insert_f_id(s, cs, &o, true, kept_id), 0);
	pw_undo_orig_object_done(&o);
	cr_assert_eq(queue_created(s, cs, "later", &id), 0);
	atomic_store(&wal_fails, true);
	cr_assert_lt(pw_undo_orig_flush(s), 0, "the commit fails");
}

/*
 * A commit fails (a full disk) and SQLite rolls the batch back: its rows were journaled and
 * their changes made, so none may be lost. Once the database takes writes again, every row
 * is there, in the order of the changes, before the rows of later changes; a restart adds
 * none twice; the kept content's blob stays.
 */
Test(originals, the_rows_of_a_batch_sqlite_rolls_back_are_not_lost, .timeout = 60)
{
	install_failing_vfs();
	pw_undo_orig_store *s = open_store();
	int64_t cs = begin_set(s), id;
	char hash[PW_SHA256_HEX];

	pw_undo_orig_lock(s);
	a_batch_is_rolled_back(s, cs, hash, &id);
	atomic_store(&wal_fails, false);
	cr_assert_eq(queue_created(s, cs, "after", &id), 0);
	cr_assert_eq(pw_undo_orig_flush(s), 0);
	pw_undo_orig_unlock(s);

	const char *want[] = {"made", "kept:f", "later", "after"};
	for (int round = 0; round < 2; round++) {
		listing l;
		list_rows(s, &l);
		cr_assert_eq(l.n, 4, "%u rows (round %d)", l.n, round);
		for (unsigned i = 0; i < 4; i++)
			cr_assert_str_eq(l.paths[i], want[i], "row %u (round %d)", i, round);
		cr_assert(blob_exists(s, hash));
		pw_undo_orig_store_close(s);
		s = open_store(); /* a restart replays what is left: nothing */
	}
	pw_undo_orig_store_close(s);
}

/*
 * The id a rolled-back row had may still be held (a keep's row, for pw_undo_orig_set_content or
 * a failed change's pw_undo_orig_delete): it follows the row that replaces it, and a later row
 * never gets it.
 */
Test(originals, an_id_a_rolled_back_batch_gave_follows_its_row, .timeout = 60)
{
	install_failing_vfs();
	pw_undo_orig_store *s = open_store();
	int64_t cs = begin_set(s), lost = 0, later = 0;
	char hash[PW_SHA256_HEX];
	pw_undo_orig_object o;

	pw_undo_orig_lock(s);
	a_batch_is_rolled_back(s, cs, hash, &lost);
	atomic_store(&wal_fails, false);
	capture_f(s, &o, hash);
	cr_assert_eq(insert_f_id(s, cs, &o, true, &later), 0);
	cr_assert_neq(later, lost, "a later row got the rolled-back row's id");
	cr_assert_eq(pw_undo_orig_set_content(s, lost, &o), 0, "the old id names the row again");
	pw_undo_orig_object_done(&o);
	pw_undo_orig_delete(s, lost); /* its change failed: its row goes, not the later one */
	cr_assert_eq(pw_undo_orig_flush(s), 0);
	pw_undo_orig_unlock(s);

	listing l;
	list_rows(s, &l);
	cr_assert_eq(l.n, 3, "%u rows", l.n);
	cr_assert_str_eq(l.paths[0], "made");
	cr_assert_str_eq(l.paths[1], "later");
	cr_assert_str_eq(l.paths[2], "kept:f", "the later row is still there");
	pw_undo_orig_store_close(s);
}

/* A row that names nothing: another view's, at PATH. Its id in *ID. */
static void other_view_inserts(pw_undo_orig_store *y, int64_t cs, const char *path, int64_t *id)
{
	pw_undo_orig_object none;
	pw_undo_orig_row row = created_row(cs, path, &none);
	pw_undo_orig_lock(y);
	cr_assert_eq(pw_undo_orig_insert(y, &row, id), 0);
	pw_undo_orig_unlock(y);
}

/* View X keeps "f" in a batch SQLite rolls back; the id it got in *LOST. */
static void x_loses_a_batch(pw_undo_orig_store *x, int64_t cs, int64_t *lost)
{
	char hash[PW_SHA256_HEX];
	pw_undo_orig_object o;
	pw_undo_orig_lock(x);
	capture_f(x, &o, hash);
	cr_assert_eq(insert_f_id(x, cs, &o, true, lost), 0);
	pw_undo_orig_object_done(&o);
	atomic_store(&wal_fails, true);
	cr_assert_lt(pw_undo_orig_flush(x), 0, "the commit fails");
	pw_undo_orig_unlock(x);
}

/*
 * Another view sharing the store gets the ids a lost batch gave (SQLite's next): a failed
 * change's delete by such an id takes back the lost batch's row, never the other view's,
 * whether it comes before the row is back (WHILE_FAILING) or after.
 */
static void a_lost_id_never_names_another_views_row(bool while_failing)
{
	install_failing_vfs();
	pw_undo_orig_store *x = open_store(), *y = open_store();
	int64_t cs = begin_set(x), lost = 0, other = 0;

	x_loses_a_batch(x, cs, &lost);
	if (while_failing) {
		pw_undo_orig_lock(x);
		pw_undo_orig_delete(x, lost); /* cannot be done yet: done once the row is back */
		pw_undo_orig_unlock(x);
	}
	atomic_store(&wal_fails, false);
	other_view_inserts(y, cs, "other", &other);
	cr_assert_eq(other, lost, "SQLite gave the other view the lost id (this test's case)");
	if (!while_failing) {
		pw_undo_orig_lock(x);
		pw_undo_orig_delete(x, lost);
		pw_undo_orig_unlock(x);
	}

	listing l;
	list_rows(x, &l);
	cr_assert_eq(l.n, 1, "%u rows", l.n);
	cr_assert_str_eq(l.paths[0], "other", "the other view's row stays, the failed one goes");
	pw_undo_orig_store_close(y);
	pw_undo_orig_store_close(x);
}

Test(originals, a_lost_id_deleted_later_never_names_another_views_row, .timeout = 60)
{
	a_lost_id_never_names_another_views_row(false);
}

Test(originals, a_lost_id_deleted_at_once_never_names_another_views_row, .timeout = 60)
{
	a_lost_id_never_names_another_views_row(true);
}

/*
 * While the database cannot take the rolled-back rows back, nothing else is written: a
 * later row first would change their order, which undo replays backwards. The change that
 * asks is refused (a full disk fails it anyway), and so is a read: undo must see every row
 * of a change set. A store closed then keeps them for the next start.
 */
Test(originals, nothing_is_written_before_the_rolled_back_rows_are_back, .timeout = 60)
{
	install_failing_vfs();
	pw_undo_orig_store *s = open_store();
	int64_t cs = begin_set(s), id;
	char hash[PW_SHA256_HEX];
	pw_undo_orig_object o;

	pw_undo_orig_lock(s);
	a_batch_is_rolled_back(s, cs, hash, &id);
	cr_assert_lt(pw_undo_orig_capture(s, project_fd, "f", PW_UNDO_ORIG_CONTENT, &o), 0,
		     "keeping content is refused");
	pw_undo_orig_object none = {0};
	cr_assert_lt(insert_f(s, cs, &none, true), 0, "a deferred row is refused");
	cr_assert_lt(insert_f(s, cs, &none, false), 0, "a committed row is refused");
	cr_assert_lt(queue_created(s, cs, "refused", &id), 0, "a queued row is refused");
	listing l = {.n = 0};
	cr_assert_lt(pw_undo_orig_read(s, "/project", any_set, list_row, &l), 0,
		     "a read (undo's) is refused rather than missing the rows");
	pw_undo_orig_unlock(s);
	pw_undo_orig_store_close(s);

	atomic_store(&wal_fails, false);
	s = open_store();
	list_rows(s, &l);
	cr_assert_eq(l.n, 3, "%u rows", l.n);
	cr_assert_str_eq(l.paths[0], "made");
	cr_assert_str_eq(l.paths[1], "kept:f");
	cr_assert_str_eq(l.paths[2], "later");
	pw_undo_orig_store_close(s);
}

/* ---- the cap at every keep (issue 27) ------------------------------------------------- */

static void write_f(const char *text)
{
	int fd = openat(project_fd, "f", O_WRONLY | O_TRUNC | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static uint64_t total_bytes(pw_undo_orig_store *s)
{
	uint64_t bytes = 0;
	pw_undo_orig_lock(s);
	cr_assert_eq(pw_undo_orig_total(s, &bytes, NULL), 0);
	pw_undo_orig_unlock(s);
	return bytes;
}

/*
 * A 100-byte cap: the oldest change set goes to make room for a new original; an original
 * the current change set cannot fit is recorded as not kept ("store-full"), the capture
 * still succeeds (the change goes on); the same content again is shared, at no cost.
 */
Test(originals, the_cap_holds_at_every_capture, .timeout = 60)
{
	pw_undo_orig_opts oo = {
	    .db_path = dbpath, .defer_ns = 3600ll * 1000000000, .max_total = 100};
	pw_undo_orig_store *s = NULL;
	cr_assert_eq(pw_undo_orig_store_open(&oo, &s), 0);
	pw_undo_orig_object o;
	char a[PW_SHA256_HEX];

	write_f("first content, sixty bytes long............................\n");
	int64_t cs1 = begin_set(s);
	pw_undo_orig_lock(s);
	cr_assert_eq(pw_undo_orig_capture(s, project_fd, "f", PW_UNDO_ORIG_CONTENT, &o), 0);
	cr_assert(o.blob[0] && !o.not_kept);
	memcpy(a, o.blob, sizeof(a));
	cr_assert_eq(insert_f(s, cs1, &o, false), 0);
	pw_undo_orig_object_done(&o);
	pw_undo_orig_unlock(s);

	/* The same content in a new change set: shared, one blob. */
	int64_t cs2 = begin_set(s);
	pw_undo_orig_lock(s);
	cr_assert_eq(pw_undo_orig_capture(s, project_fd, "f", PW_UNDO_ORIG_CONTENT, &o), 0);
	cr_assert(streq_blob(o.blob, a));
	cr_assert_eq(insert_f(s, cs2, &o, false), 0);
	pw_undo_orig_object_done(&o);
	pw_undo_orig_unlock(s);
	cr_assert_eq(total_bytes(s), 60);

	/* New content, 60 bytes more: over the cap, and cs1 going frees nothing (cs2 shares
	 * its blob), cs2 is current: not kept, the capture still succeeds. */
	write_f("second content, also sixty bytes long......................\n");
	pw_undo_orig_lock(s);
	cr_assert_eq(pw_undo_orig_capture(s, project_fd, "f", PW_UNDO_ORIG_CONTENT, &o), 0);
	cr_assert_eq(o.blob[0], '\0');
	cr_assert_str_eq(o.not_kept, "store-full");
	pw_undo_orig_object_done(&o);
	pw_undo_orig_unlock(s);
	cr_assert_leq(total_bytes(s), 100);

	/* A new change set: cs1 and cs2 may go now, and the new content is kept. */
	begin_set(s);
	pw_undo_orig_lock(s);
	cr_assert_eq(pw_undo_orig_capture(s, project_fd, "f", PW_UNDO_ORIG_CONTENT, &o), 0);
	cr_assert(o.blob[0] && !o.not_kept, "the oldest change sets made room");
	pw_undo_orig_object_done(&o);
	pw_undo_orig_unlock(s);
	cr_assert_leq(total_bytes(s), 100);
	cr_assert_not(blob_exists(s, a), "the oldest change sets' blob went");
	pw_undo_orig_store_close(s);
}
