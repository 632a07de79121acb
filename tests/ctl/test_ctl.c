/* SPDX-License-Identifier: MIT */
/*
 * The control plane over raw sockets: a view over a temp project, the control server on a
 * temp socket dir, no FUSE. Every method, the hostile clients (malformed JSON, wrong types,
 * unknown methods, a 100 MiB line, a client that never reads, one that never writes, 300
 * connections, a disconnect mid-request) while a normal client must still be answered;
 * authority (another uid, the agent socket); reload with a broken active mode.
 *
 * No test here asserts on wall-clock time or guesses how long the server thread needs:
 * each waits for a condition (a reply, an EOF, one of the server's own counters) with a
 * generous deadline (DEADLINE_MS), so a loaded machine makes a test slower, never red.
 * The suite's idle timeout is long for the same reason; the tests of the idle timeout
 * restart the server with a short one.
 *
 * Fixture tree (per test, under a fresh /tmp/pwctl-XXXXXX):
 *   proj/                  the project (untrusted)
 *     src/a.c
 *     docs/design/spec.md
 *     .piworkfs/modes/     created by the reload tests (a broken build.md)
 *   global/                the global config dir (empty)
 *   run/                   the socket dir
 *   state.db               state and audit database
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store/audit.h"
#include "ctl/methods.h"
#include "ctl/request.h"
#include "ctl/server.h"
#include "fs.h"
#include "pw_limits.h"
#include "proto.h"
#include "store/state.h"
#include "util.h"
#include "ctl/view.h"

/* ---- TEST DOUBLE of the FUSE layer, handed to the view as its pw_view_fs_ops --------- */
/* The real operations are the pw_fs's (fs/switch.c, with libfuse), wired by fs/daemon.c;
 * this stand-in keeps just the active policy, a generation and what the originals hook
 * was told, so the test can check exactly what the view installed. */
typedef struct fake_fs {
	pthread_mutex_t lock;
	pw_policy *active;
	uint64_t generation;
	unsigned installed;   /* policy_installed calls */
	char last_reason[16]; /* and the last one's reason */
	bool last_new_set;
	/* While set: the mode each generation from log_base on installed (log[g - log_base]). */
	char (*log)[16];
	uint64_t log_base, log_len;
} fake_fs_t;

static uint64_t fake_set_policy(void *ctx, pw_policy *p)
{
	fake_fs_t *fs = ctx;
	pthread_mutex_lock(&fs->lock);
	pw_policy *old = fs->active;
	fs->active = pw_policy_ref(p);
	uint64_t g = ++fs->generation;
	if (fs->log && g - fs->log_base < fs->log_len)
		snprintf(fs->log[g - fs->log_base], sizeof(fs->log[0]), "%s",
			 pw_policy_mode_name(p));
	pthread_mutex_unlock(&fs->lock);
	pw_policy_unref(old);
	return g;
}

static pw_policy *fake_get_policy(void *ctx, uint64_t *ret_generation)
{
	fake_fs_t *fs = ctx;
	pthread_mutex_lock(&fs->lock);
	pw_policy *p = fs->active ? pw_policy_ref(fs->active) : NULL;
	if (ret_generation)
		*ret_generation = fs->generation;
	pthread_mutex_unlock(&fs->lock);
	return p;
}

static void fake_get_stats(void *ctx, pw_fs_stats *ret)
{
	*ret = (pw_fs_stats){.inodes = 7, .denied = 42};
	ret->requests[1] = 30;	/* LOOKUP */
	ret->requests[14] = 12; /* OPEN */
}

static void fake_policy_installed(void *ctx, const pw_policy *p, const char *reason, bool new_set)
{
	fake_fs_t *fs = ctx;
	pthread_mutex_lock(&fs->lock);
	fs->installed++;
	snprintf(fs->last_reason, sizeof(fs->last_reason), "%s", reason);
	fs->last_new_set = new_set;
	pthread_mutex_unlock(&fs->lock);
}

static const pw_view_fs_ops fake_ops = {
    .set_policy = fake_set_policy,
    .get_policy = fake_get_policy,
    .get_stats = fake_get_stats,
    .policy_installed = fake_policy_installed,
};
/* ---- end of the test double ------------------------------------------------------------ */

/* How long a test waits for something the server must do before calling it a failure. */
#define DEADLINE_MS 60000
/* The suite's idle timeout: no client of a test is dropped for being slow on a busy box. */
#define LONG_IDLE_MS 600000u
/* The idle timeout of the tests that check it. */
#define SHORT_IDLE_MS 300u

static char tmp[64], proj[128], mnt[128], global[128], rundir[128], dbpath[128];
static fake_fs_t fake_fs = {.lock = PTHREAD_MUTEX_INITIALIZER};
static pw_state *state;
static pw_audit *audit;
static pw_view *view;
static pw_ctl_server *srv;
static const char *sock;

/* What the daemon serves, but the changes methods, which need the FUSE layer (changes.h). */
static const pw_ctl_use modules[] = {
    {&pw_ctl_methods_module, NULL},
    {&pw_ctl_request_module, NULL},
};

static void writefile(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

static void start_view(const char *initial, bool with_audit)
{
	char path[256];
	strcpy(tmp, "/tmp/pwctl-XXXXXX");
	cr_assert_not_null(mkdtemp(tmp));
	snprintf(proj, sizeof(proj), "%s/proj", tmp);
	snprintf(mnt, sizeof(mnt), "%s/mnt", tmp);
	snprintf(global, sizeof(global), "%s/global", tmp);
	snprintf(rundir, sizeof(rundir), "%s/run", tmp);
	snprintf(dbpath, sizeof(dbpath), "%s/state.db", tmp);
	cr_assert_eq(mkdir(proj, 0755), 0);
	snprintf(path, sizeof(path), "%s/src", proj);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/src/a.c", proj);
	writefile(path, "int x;\n");
	snprintf(path, sizeof(path), "%s/docs", proj);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/docs/design", proj);
	mkdir(path, 0755);
	mkdir(global, 0755);

	cr_assert_eq(pw_state_open(dbpath, &state, NULL), 0);
	if (with_audit) {
		pw_audit_opts ao = {.db_path = dbpath, .project = proj, .mountpoint = mnt};
		cr_assert_eq(pw_audit_start(&ao, &audit, NULL), 0);
	}
	pw_view_opts vo = {
	    .project = proj,
	    .mountpoint = mnt,
	    .fs_ops = &fake_ops,
	    .fs_ctx = &fake_fs,
	    .owner_uid = getuid(),
	    .bundled_dir = SOURCE_MODES,
	    .global_dir = global,
	    .initial_mode = initial,
	    .state = state,
	    .audit = audit,
	};
	cr_assert_eq(pw_view_new(&vo, &view), 0);
	pw_ctl_tuning tun = {.idle_timeout_ms = LONG_IDLE_MS, .denied_per_sec = 10};
	cr_assert_eq(pw_ctl_server_start(view, rundir, &tun, modules, ELEMENTSOF(modules), &srv),
		     0);
	sock = pw_ctl_server_socket_path(srv);
}

/* Replaces the server with one using TUN (the view stays). */
static void restart_server(const pw_ctl_tuning *tun)
{
	pw_ctl_server_stop(srv);
	srv = NULL;
	cr_assert_eq(pw_ctl_server_start(view, rundir, tun, modules, ELEMENTSOF(modules), &srv), 0);
	sock = pw_ctl_server_socket_path(srv);
}

static void stop_view(void)
{
	pw_ctl_server_stop(srv);
	pw_view_free(view);
	pw_audit_stop(audit);
	pw_state_close(state);
	srv = NULL;
	view = NULL;
	audit = NULL;
	state = NULL;
	pw_policy_unref(fake_fs.active);
	fake_fs.active = NULL;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	cr_assert_eq(system(cmd), 0);
}

static void setup(void)
{
	signal(SIGPIPE, SIG_IGN);
	start_view(NULL, false);
}

TestSuite(ctl, .init = setup, .fini = stop_view, .timeout = 120);

/* ---- a tiny raw client ----------------------------------------------------------------- */

static int connect_to(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0);
	strcpy(sa.sun_path, path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -errno;
	}
	/* A deadline, not a speed claim: a reply that never comes fails the read. */
	struct timeval tv = {.tv_sec = DEADLINE_MS / 1000};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static int connect_main(void)
{
	int fd = connect_to(sock);
	cr_assert_geq(fd, 0, "connect: %s", strerror(-fd));
	return fd;
}

static void send_all(int fd, const char *s)
{
	size_t len = strlen(s);
	while (len > 0) {
		ssize_t n = send(fd, s, len, MSG_NOSIGNAL);
		cr_assert_gt(n, 0, "send: %s", strerror(errno));
		s += n;
		len -= n;
	}
}

/* Reads one line (up to 2 MiB) or returns NULL on EOF/timeout/error. Byte at a time is
 * slow but simple and keeps later lines in the socket. */
static char *read_line(int fd)
{
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	for (;;) {
		char c;
		ssize_t n = read(fd, &c, 1);
		if (n < 0 && errno == EINTR)
			continue; /* SIGCHLD: bash.check's worker is a child of this process */
		if (n <= 0) {
			free(buf);
			return NULL;
		}
		if (c == '\n')
			break;
		if (len + 2 > cap)
			buf = realloc(buf, cap *= 2);
		buf[len++] = c;
		if (len > 2 * 1024 * 1024) {
			free(buf);
			return NULL;
		}
	}
	buf[len] = 0;
	return buf;
}

/*
 * A child that must do more than async-signal-safe calls (connect, read a line, parse JSON)
 * is this test binary executed again, never a bare fork: a fork of this multithreaded
 * process (the server's threads run) may only call async-signal-safe functions until it
 * execs, and under AddressSanitizer a forked child can wait for good on an allocator lock
 * another thread held at the fork. The environment is built before the fork; the
 * constructor at the end of this file runs the named child and exits before Criterion.
 */
struct child_env {
	char name[64], path[300], report[32], asan[512], ubsan[512];
	char *envp[6];
	int report_fd;
};

static void child_env(struct child_env *ce, const char *name, const char *path, int report)
{
	const char *asan = getenv("ASAN_OPTIONS"), *ubsan = getenv("UBSAN_OPTIONS");

	snprintf(ce->name, sizeof(ce->name), "PW_CTL_CHILD=%s", name);
	snprintf(ce->path, sizeof(ce->path), "PW_CTL_CHILD_PATH=%s", path);
	snprintf(ce->report, sizeof(ce->report), "PW_CTL_CHILD_REPORT=%d", report);
	snprintf(ce->asan, sizeof(ce->asan), "ASAN_OPTIONS=%s", asan ? asan : "");
	snprintf(ce->ubsan, sizeof(ce->ubsan), "UBSAN_OPTIONS=%s", ubsan ? ubsan : "");
	ce->envp[0] = ce->name;
	ce->envp[1] = ce->path;
	ce->envp[2] = ce->report;
	ce->envp[3] = ce->asan;
	ce->envp[4] = ce->ubsan;
	ce->envp[5] = NULL;
	ce->report_fd = report;
}

/* In the forked child: async-signal-safe calls only, then the exec. The report descriptor
 * (named in CE) stays open across it. Never returns. */
static _Noreturn void exec_child(const struct child_env *ce)
{
	static char *const argv[] = {"test_ctl", NULL};
	if (ce->report_fd >= 0 && fcntl(ce->report_fd, F_SETFD, 0) < 0)
		_exit(6);
	execve("/proc/self/exe", argv, ce->envp);
	_exit(7);
}

static json_t *read_msg(int fd)
{
	char *line = read_line(fd);
	if (!line)
		return NULL;
	json_t *j = json_loads(line, 0, NULL);
	cr_assert_not_null(j, "reply is JSON: %s", line);
	free(line);
	return j;
}

/* Sends a request with id 1 and returns the reply (asserting its jsonrpc and id). */
static json_t *rpc(int fd, const char *method, const char *params)
{
	char line[8192];
	snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"%s\"%s%s}\n",
		 method, params ? ",\"params\":" : "", params ? params : "");
	send_all(fd, line);
	json_t *r = read_msg(fd);
	cr_assert_not_null(r, "reply to %s", method);
	cr_assert_str_eq(json_string_value(json_object_get(r, "jsonrpc")), "2.0");
	cr_assert_eq(json_integer_value(json_object_get(r, "id")), 1);
	return r;
}

static json_t *result_of(json_t *reply)
{
	json_t *res = json_object_get(reply, "result");
	cr_assert_not_null(res, "expected a result: %s", json_dumps(reply, 0));
	return res;
}

static int error_code(json_t *reply)
{
	json_t *e = json_object_get(reply, "error");
	cr_assert_not_null(e, "expected an error: %s", json_dumps(reply, 0));
	return (int)json_integer_value(json_object_get(e, "code"));
}

static const char *error_message(json_t *reply)
{
	return json_string_value(json_object_get(json_object_get(reply, "error"), "message"));
}

static const char *sget(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static const char *active_mode(void)
{
	pw_policy *p = fake_get_policy(&fake_fs, NULL);
	static char name[64];
	snprintf(name, sizeof(name), "%s", pw_policy_mode_name(p));
	pw_policy_unref(p);
	return name;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Evaluates COND until it holds or DEADLINE_MS passes; yields whether it held. For
 * conditions another thread makes true (the server's counters, the active mode): polling
 * with a short pause is the wait, the deadline only turns a hang into a failure.
 */
#define WAIT_UNTIL(cond)                                                                           \
	({                                                                                         \
		int64_t _t0 = now_ms();                                                            \
		bool _ok;                                                                          \
		while (!(_ok = (cond)) && now_ms() - _t0 < DEADLINE_MS)                            \
			usleep(2000);                                                              \
		_ok;                                                                               \
	})

static pw_ctl_stats stats(void)
{
	pw_ctl_stats st;
	pw_ctl_server_get_stats(srv, &st);
	return st;
}

/* A normal client must still get `status` answered whatever else is going on. */
static void assert_served(int fd)
{
	json_t *r = rpc(fd, "status", NULL);
	cr_assert_not_null(json_object_get(r, "result"), "status: %s", json_dumps(r, 0));
	json_decref(r);
}

/* Waits for FD to be closed by the server: true on EOF or ECONNRESET within the deadline.
 * Lines still queued before the close are skipped. */
static bool wait_closed(int fd)
{
	int64_t t0 = now_ms();
	char buf[4096];

	while (now_ms() - t0 < DEADLINE_MS) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 1000) != 1)
			continue;
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return true;
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return false;
	}
	return false;
}

/*
 * Connects to the main socket and calls METHOD, returning the connection once the call
 * succeeded. Under SHORT_IDLE_MS a loaded machine may let the idle timeout pass between
 * connect and the request reaching the server; that drop is the timeout working, not what
 * the caller tests, so it connects again (until the deadline).
 */
static int connect_and_call(const char *method, const char *params)
{
	char line[1024];
	int64_t t0 = now_ms();

	snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"%s\"%s%s}\n",
		 method, params ? ",\"params\":" : "", params ? params : "");
	while (now_ms() - t0 < DEADLINE_MS) {
		int fd = connect_main();
		if (send(fd, line, strlen(line), MSG_NOSIGNAL) == (ssize_t)strlen(line)) {
			json_t *r = read_msg(fd);
			if (r) {
				result_of(r);
				json_decref(r);
				return fd;
			}
		}
		close(fd);
	}
	cr_assert_fail("%s: every connection was dropped before its reply", method);
	return -1;
}

/* Connects to an agent socket just added (the server thread adopts it on its next turn;
 * until then the kernel already queues connections, so the first try normally works). */
static int connect_agent(const char *path)
{
	int fd = -1;
	cr_assert(WAIT_UNTIL((fd = connect_to(path)) >= 0), "connect %s: %s", path, strerror(-fd));
	return fd;
}

/* ---- socket location and lifecycle ----------------------------------------------------- */

Test(ctl, socket_is_private_and_named_from_mountpoint)
{
	struct stat st;
	char *expect = NULL;
	cr_assert_eq(pw_ctl_socket_path(rundir, mnt, &expect), 0);
	cr_assert_str_eq(expect, sock);
	cr_assert(strstr(sock, "/mnt-"), "%s", sock);
	free(expect);
	cr_assert_eq(stat(rundir, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0700);
	cr_assert_eq(lstat(sock, &st), 0);
	cr_assert(S_ISSOCK(st.st_mode));
	cr_assert_eq(st.st_mode & 0777, 0600);
}

Test(ctl, live_socket_refused_stale_replaced_removed_at_stop)
{
	pw_ctl_server *again = NULL;
	cr_assert_eq(pw_ctl_server_start(view, rundir, NULL, modules, ELEMENTSOF(modules), &again),
		     -EADDRINUSE);
	char keep[256];
	snprintf(keep, sizeof(keep), "%s", sock);
	pw_ctl_server_stop(srv);
	srv = NULL;
	struct stat st;
	cr_assert_eq(lstat(keep, &st), -1, "socket removed at stop");

	/* A stale socket (bound, nobody listening) as a killed daemon leaves it. */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, keep);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	cr_assert_eq(lstat(keep, &st), 0);
	cr_assert_eq(pw_ctl_server_start(view, rundir, NULL, modules, ELEMENTSOF(modules), &srv),
		     0);
	sock = pw_ctl_server_socket_path(srv);
	fd = connect_main();
	json_t *r = rpc(fd, "status", NULL);
	result_of(r);
	json_decref(r);
	close(fd);
}

/* While the server restarts again and again, a second thread connects whenever the socket
 * file is there. Every such connect must succeed: the file appears only once the socket
 * listens. (Bound at its name before listening, it refused for a moment: a client that
 * waits for the file, as `piworkfs mode` after a mount or the tests do, was refused.) */
typedef struct socket_watch {
	const char *path;
	atomic_bool done;
	atomic_uint seen, refused;
	/* Stops begun and ended by the main thread: the stopping server unlinks its name,
	 * then closes, so a connect that found the name just before is refused, rightly. */
	atomic_uint stops_begun, stops_ended;
} socket_watch;

static void *watch_socket(void *arg)
{
	socket_watch *w = arg;
	struct stat st;
	while (!atomic_load(&w->done)) {
		unsigned begun = atomic_load(&w->stops_begun);
		bool steady = atomic_load(&w->stops_ended) == begun;
		if (lstat(w->path, &st) < 0)
			continue;
		int fd = connect_to(w->path);
		if (fd >= 0) {
			atomic_fetch_add(&w->seen, 1);
			close(fd);
		} else if (fd == -ECONNREFUSED && steady && atomic_load(&w->stops_begun) == begun) {
			/* Refused with no stop in progress from before the lstat to the refusal:
			 * the file was a starting or running server's. (Telling a stopped
			 * server's file from the next one's by inode and change time failed: an
			 * inode number is reused at once, and two creations within one clock
			 * tick get the same coarse change time.) */
			atomic_fetch_add(&w->refused, 1);
		}
	}
	return NULL;
}

Test(ctl, a_socket_file_that_exists_accepts, .timeout = 240)
{
	char path[256];
	snprintf(path, sizeof(path), "%s", sock);
	socket_watch w = {.path = path};
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, watch_socket, &w), 0);
	for (int i = 0; i < 300; i++) {
		atomic_fetch_add(&w.stops_begun, 1);
		pw_ctl_server_stop(srv);
		srv = NULL;
		atomic_fetch_add(&w.stops_ended, 1);
		cr_assert_eq(
		    pw_ctl_server_start(view, rundir, NULL, modules, ELEMENTSOF(modules), &srv), 0);
		sock = pw_ctl_server_socket_path(srv);
	}
	/* The watcher connects at least once more, to the server that stays. */
	unsigned before = atomic_load(&w.seen);
	cr_assert(WAIT_UNTIL(atomic_load(&w.seen) > before));
	atomic_store(&w.done, true);
	pthread_join(t, NULL);
	cr_assert_eq(atomic_load(&w.refused), 0,
		     "%u connects refused while the socket file existed", atomic_load(&w.refused));
	/* No temporary name is left beside it. */
	char dir[256];
	snprintf(dir, sizeof(dir), "%.*s", (int)(strrchr(path, '/') - path), path);
	DIR *d = opendir(dir);
	cr_assert_not_null(d);
	unsigned others = 0;
	for (struct dirent *de; (de = readdir(d));)
		others += strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
			  strcmp(de->d_name, strrchr(path, '/') + 1);
	closedir(d);
	cr_assert_eq(others, 0, "%u files beside the socket in %s", others, dir);
}

/* ---- every method ---------------------------------------------------------------------- */

Test(ctl, initial_mode_is_plan_for_a_new_project)
{
	cr_assert_str_eq(active_mode(), "plan");
}

Test(ctl, status)
{
	int fd = connect_main();
	json_t *r = rpc(fd, "status", NULL), *res = result_of(r);
	cr_assert_str_eq(sget(res, "project"), proj);
	cr_assert_str_eq(sget(res, "mountpoint"), mnt);
	cr_assert_str_eq(sget(res, "mode"), "plan");
	cr_assert_str_eq(sget(res, "socket"), sock);
	cr_assert(json_is_false(json_object_get(res, "fail_closed")));
	cr_assert(json_is_false(json_object_get(res, "trusted")));
	cr_assert_eq(json_integer_value(json_object_get(res, "denied")), 42);
	json_t *rq = json_object_get(res, "requests"), *ops = json_object_get(rq, "ops");
	cr_assert_eq(json_integer_value(json_object_get(rq, "total")), 42);
	cr_assert_eq(json_integer_value(json_object_get(ops, "LOOKUP")), 30);
	cr_assert_eq(json_integer_value(json_object_get(ops, "OPEN")), 12);
	cr_assert_eq(json_object_size(ops), 2, "only opcodes received are listed");
	cr_assert(json_is_array(json_object_get(res, "warnings")));
	cr_assert_geq(json_integer_value(json_object_get(res, "generation")), 1);
	json_decref(r);
	close(fd);
}

Test(ctl, modes_list_and_mode_get)
{
	int fd = connect_main();
	json_t *r = rpc(fd, "modes.list", NULL), *res = result_of(r);
	cr_assert_str_eq(sget(res, "active"), "plan");
	json_t *modes = json_object_get(res, "modes"), *m;
	size_t i;
	bool seen_build = false;
	json_array_foreach(modes, i, m) seen_build |= streq(sget(m, "name"), "build");
	cr_assert(seen_build);
	json_decref(r);

	r = rpc(fd, "mode.get", "{\"body\":true}");
	res = result_of(r);
	cr_assert_str_eq(sget(res, "mode"), "plan");
	cr_assert_not_null(sget(res, "body"));
	cr_assert(json_is_object(json_object_get(res, "policy")));
	json_decref(r);
	close(fd);
}

Test(ctl, mode_set_is_in_force_when_answered_and_persisted)
{
	int fd = connect_main();
	json_t *r = rpc(fd, "mode.set", "{\"mode\":\"build\"}"), *res = result_of(r);
	/* Exactness: the reply comes after the FUSE layer's set_policy returned, and the
	 * originals were told of the switch into a mode that writes (a new change set). */
	cr_assert_str_eq(active_mode(), "build");
	cr_assert_str_eq(fake_fs.last_reason, "switch");
	cr_assert(fake_fs.last_new_set);
	cr_assert_str_eq(sget(res, "mode"), "build");
	cr_assert_str_eq(sget(res, "previous"), "plan");
	uint64_t gen;
	pw_policy_unref(fake_get_policy(&fake_fs, &gen));
	cr_assert_eq((uint64_t)json_integer_value(json_object_get(res, "generation")), gen);
	json_decref(r);

	char *last = NULL;
	cr_assert_eq(pw_state_get_last_mode(state, proj, &last), 0);
	cr_assert_str_eq(last, "build");
	free(last);
	close(fd);
}

/*
 * A reply names one switch: the mode and generation that mode.set, reload and status report
 * belong to the same installed policy, however switches race. Two threads switch through
 * the view directly (other threads than the server's, as any caller of pw_view_switch may
 * be) while a client calls mode.set, reload and status in a loop; the test double logs the
 * mode each generation installed, the switchers' own results must agree with that log, and
 * so must every pair (mode, generation) a reply gives, and mode.set's `previous` must be the
 * mode of the generation before. Bounded by the client's rounds; the switchers run until the
 * client is done (at most SWITCHES_MAX each).
 */
#define RACE_ROUNDS 400
#define SWITCHES_MAX 20000
#define RACE_LOG (2 * SWITCHES_MAX + 2 * RACE_ROUNDS + 16)

typedef struct race_switcher {
	const char *modes[2];
	atomic_bool *stop;
	unsigned switches, failures, disagreements;
} race_switcher;

static char race_log[RACE_LOG][16];

/* The mode the log says generation GEN installed, or NULL outside the logged range. */
static const char *logged_mode(uint64_t gen)
{
	if (gen < fake_fs.log_base || gen - fake_fs.log_base >= RACE_LOG)
		return NULL;
	return race_log[gen - fake_fs.log_base];
}

static void *race_switch(void *arg)
{
	race_switcher *rs = arg;
	pw_peer peer = {.pid = getpid(), .uid = getuid(), .origin = "socket", .comm = "racer"};

	while (!atomic_load(rs->stop) && rs->switches < SWITCHES_MAX) {
		const char *m = rs->modes[rs->switches % 2];
		uint64_t gen = 0;
		if (pw_view_set_mode(view, m, &peer, &gen, NULL) < 0) {
			rs->failures++;
			break;
		}
		/* What the switcher got back is a pair the double saw installed. */
		pthread_mutex_lock(&fake_fs.lock);
		const char *logged = logged_mode(gen);
		if (!logged || !streq(logged, m))
			rs->disagreements++;
		pthread_mutex_unlock(&fake_fs.lock);
		rs->switches++;
	}
	return NULL;
}

/* Whether reply R's (mode, generation) pair is one the log holds; counts it in *checked. */
static bool pair_installed(json_t *r, const char *what, unsigned *checked)
{
	json_t *res = result_of(r);
	const char *mode = sget(res, "mode");
	uint64_t gen = (uint64_t)json_integer_value(json_object_get(res, "generation"));

	pthread_mutex_lock(&fake_fs.lock);
	const char *logged = logged_mode(gen);
	bool ok = mode && logged && streq(logged, mode);
	pthread_mutex_unlock(&fake_fs.lock);
	if (!ok)
		cr_log_warn("%s: mode %s with generation %llu, which installed %s", what,
			    mode ? mode : "(none)", (unsigned long long)gen, logged ? logged : "?");
	(*checked)++;
	return ok;
}

Test(ctl, replies_pair_mode_and_generation_of_one_switch, .timeout = 240)
{
	atomic_bool stop = false;
	race_switcher rs[2] = {
	    {.modes = {"design", "build"}, .stop = &stop},
	    {.modes = {"review", "discuss"}, .stop = &stop},
	};
	pthread_t th[2];
	unsigned bad = 0, checked = 0;

	pthread_mutex_lock(&fake_fs.lock);
	fake_fs.log_base = fake_fs.generation;
	fake_fs.log_len = RACE_LOG;
	snprintf(race_log[0], sizeof(race_log[0]), "%s", pw_policy_mode_name(fake_fs.active));
	fake_fs.log = race_log;
	pthread_mutex_unlock(&fake_fs.lock);

	int fd = connect_main();
	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, race_switch, &rs[i]), 0);
	for (int round = 0; round < RACE_ROUNDS; round++) {
		json_t *r =
		    rpc(fd, "mode.set", round % 2 ? "{\"mode\":\"plan\"}" : "{\"mode\":\"off\"}");
		if (!pair_installed(r, "mode.set", &checked))
			bad++;
		json_t *res = result_of(r);
		uint64_t gen = (uint64_t)json_integer_value(json_object_get(res, "generation"));
		pthread_mutex_lock(&fake_fs.lock);
		const char *before = logged_mode(gen - 1);
		bool prev_ok = before && streq(before, sget(res, "previous"));
		pthread_mutex_unlock(&fake_fs.lock);
		if (!prev_ok) {
			cr_log_warn("mode.set: previous %s, generation %llu - 1 installed %s",
				    sget(res, "previous"), (unsigned long long)gen,
				    before ? before : "?");
			bad++;
		}
		json_decref(r);

		r = rpc(fd, "reload", NULL);
		if (!pair_installed(r, "reload", &checked))
			bad++;
		json_decref(r);
		r = rpc(fd, "status", NULL);
		if (!pair_installed(r, "status", &checked))
			bad++;
		json_decref(r);
	}
	atomic_store(&stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_lock(&fake_fs.lock);
	fake_fs.log = NULL;
	pthread_mutex_unlock(&fake_fs.lock);
	close(fd);

	cr_log_info("%u switches raced %u replies", rs[0].switches + rs[1].switches, checked);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(rs[i].failures, 0, "switcher %d: a switch failed", i);
		cr_assert_gt(rs[i].switches, 0, "switcher %d never switched", i);
		cr_assert_eq(rs[i].disagreements, 0, "switcher %d: results not as installed", i);
	}
	cr_assert_eq(bad, 0, "%u of %u replies paired a mode with another switch's generation", bad,
		     checked);
}

Test(ctl, mode_set_unknown_mode)
{
	int fd = connect_main();
	json_t *r = rpc(fd, "mode.set", "{\"mode\":\"nosuch\"}");
	cr_assert_eq(error_code(r), PW_RPC_UNKNOWN_MODE);
	json_t *data = json_object_get(json_object_get(r, "error"), "data");
	cr_assert(json_array_size(json_object_get(data, "modes")) >= 6);
	cr_assert_str_eq(active_mode(), "plan");
	json_decref(r);
	close(fd);
}

Test(ctl, check_and_allowed)
{
	int fd = connect_main();
	json_t *r = rpc(fd, "check", "{\"paths\":[\"src/a.c\",\"../x\",\"/etc/passwd\"]}");
	json_t *d = json_object_get(result_of(r), "decisions");
	cr_assert_eq(json_array_size(d), 3);
	cr_assert_str_eq(sget(json_array_get(d, 0), "decision"), "denied");
	cr_assert_str_eq(sget(json_array_get(d, 0), "errno"), "EROFS");
	cr_assert_str_eq(sget(json_array_get(d, 1), "decision"), "outside");
	cr_assert_str_eq(sget(json_array_get(d, 2), "decision"), "outside");
	json_decref(r);

	char params[512];
	snprintf(params, sizeof(params),
		 "{\"paths\":[\"%s/src/a.c\",\".git/config\"],"
		 "\"mode\":\"build\"}",
		 mnt);
	r = rpc(fd, "check", params);
	d = json_object_get(result_of(r), "decisions");
	cr_assert_str_eq(sget(json_array_get(d, 0), "decision"), "allowed");
	cr_assert_str_eq(sget(json_array_get(d, 0), "path"), "src/a.c");
	cr_assert_str_eq(sget(json_array_get(d, 1), "decision"), "denied");
	cr_assert_str_eq(sget(json_array_get(d, 1), "reason"), "protected");
	json_decref(r);

	r = rpc(fd, "check", "{\"paths\":[\"x\"],\"op\":\"read\"}");
	d = json_object_get(result_of(r), "decisions");
	cr_assert_str_eq(sget(json_array_get(d, 0), "decision"), "allowed");
	json_decref(r);

	r = rpc(fd, "allowed", "{\"mode\":\"design\"}");
	cr_assert_str_eq(sget(result_of(r), "mode"), "design");
	cr_assert(json_array_size(json_object_get(result_of(r), "rules")) > 0);
	json_decref(r);

	r = rpc(fd, "allowed", "{\"mode\":\"nosuch\"}");
	cr_assert_eq(error_code(r), PW_RPC_UNKNOWN_MODE);
	json_decref(r);
	cr_assert_str_eq(active_mode(), "plan", "asking about another mode changes nothing");
	close(fd);
}

Test(ctl, bash_check)
{
	int fd = connect_main();
	json_t *r = rpc(fd, "bash.check", "{\"command\":\"echo hi > src/x.c; cat src/a.c\"}");
	json_t *res = result_of(r);
	cr_assert_str_eq(sget(res, "verdict"), "denied");
	cr_assert_str_eq(sget(res, "mode"), "plan");
	json_decref(r);
	r = rpc(fd, "bash.check", "{\"command\":\"echo hi > src/x.c\",\"mode\":\"build\"}");
	cr_assert_str_eq(sget(result_of(r), "verdict"), "allowed");
	json_decref(r);
	r = rpc(fd, "bash.check", "{\"command\":\"ls\",\"cwd\":\"../..\"}");
	cr_assert_eq(error_code(r), PW_RPC_INVALID_PATH);
	json_decref(r);
	close(fd);
}

Test(ctl, subscribe_gets_mode_changed)
{
	pw_ctl_tuning tun = {.idle_timeout_ms = SHORT_IDLE_MS};
	restart_server(&tun);
	int a = connect_and_call("subscribe", "{\"events\":[\"mode.changed\"]}");
	int b = connect_and_call("mode.set", "{\"mode\":\"design\"}");
	int control = connect_main(); /* silent and not subscribed: dropped when idle */
	json_t *n = read_msg(a);
	cr_assert_not_null(n);
	cr_assert_str_eq(sget(n, "method"), "mode.changed");
	cr_assert_null(json_object_get(n, "id"));
	json_t *p = json_object_get(n, "params");
	cr_assert_str_eq(sget(p, "from"), "plan");
	cr_assert_str_eq(sget(p, "to"), "design");
	cr_assert_str_eq(sget(p, "origin"), "socket");
	json_decref(n);
	/* Subscribers are exempt from the idle timeout: once it has closed the silent control
	 * connection (opened after the subscriber's last byte), the subscriber is still there. */
	cr_assert(wait_closed(control), "the idle timeout closes a silent client");
	cr_assert_geq(stats().dropped_idle, 1);
	assert_served(a);
	close(control);
	close(a);
	close(b);
}

Test(ctl, protocol_errors)
{
	int fd = connect_main();
	send_all(fd, "{not json\n");
	json_t *r = read_msg(fd);
	cr_assert_eq(error_code(r), PW_RPC_PARSE_ERROR);
	cr_assert(json_is_null(json_object_get(r, "id")));
	json_decref(r);

	r = rpc(fd, "mode.set", "{\"mode\":5}");
	cr_assert_eq(error_code(r), PW_RPC_INVALID_PARAMS);
	cr_assert(strstr(error_message(r), "params.mode"));
	json_decref(r);

	r = rpc(fd, "check", "{\"paths\":\"a\"}");
	cr_assert_eq(error_code(r), PW_RPC_INVALID_PARAMS);
	json_decref(r);

	r = rpc(fd, "status", "{\"bogus\":1}");
	cr_assert_eq(error_code(r), PW_RPC_INVALID_PARAMS);
	json_decref(r);

	r = rpc(fd, "nosuch.method", NULL);
	cr_assert_eq(error_code(r), PW_RPC_METHOD_NOT_FOUND);
	json_decref(r);

	send_all(fd, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"status\"}]\n");
	r = read_msg(fd);
	cr_assert_eq(error_code(r), PW_RPC_INVALID_REQUEST);
	json_decref(r);

	/* A notification (no id) is executed but not answered: the next line read is the
	 * reply to the following request. */
	send_all(
	    fd, "{\"jsonrpc\":\"2.0\",\"method\":\"mode.set\",\"params\":{\"mode\":\"review\"}}\n");
	r = rpc(fd, "mode.get", NULL);
	cr_assert_str_eq(sget(result_of(r), "mode"), "review");
	json_decref(r);

	/* Two requests in one write, and CRLF framing. */
	send_all(fd, "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"mode.get\"}\r\n"
		     "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"mode.get\"}\n");
	r = read_msg(fd);
	cr_assert_str_eq(sget(r, "id"), "x");
	json_decref(r);
	r = read_msg(fd);
	cr_assert_eq(json_integer_value(json_object_get(r, "id")), 2);
	json_decref(r);
	close(fd);
}

/* ---- hostile clients ------------------------------------------------------------------- */

static void *send_huge_line(void *arg)
{
	int fd = (int)(intptr_t)arg;
	static char chunk[1 << 20];
	memset(chunk, 'a', sizeof(chunk));
	send(fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"", 35, MSG_NOSIGNAL);
	for (int i = 0; i < 100; i++) /* 100 MiB, or until the server closes */
		if (send(fd, chunk, sizeof(chunk), MSG_NOSIGNAL) < 0)
			break;
	return NULL;
}

Test(ctl, huge_line_is_answered_then_closed)
{
	int normal = connect_main(), huge = connect_main();
	pthread_t t;
	pthread_create(&t, NULL, send_huge_line, (void *)(intptr_t)huge);
	json_t *r = read_msg(huge);
	cr_assert_not_null(r, "an error line before the close");
	cr_assert_eq(error_code(r), PW_RPC_TOO_LARGE);
	json_decref(r);
	assert_served(normal);
	pthread_join(t, NULL);
	char c;
	cr_assert_leq(read(huge, &c, 1), 0, "closed after the error");
	close(huge);
	assert_served(normal);
	close(normal);
}

Test(ctl, client_that_never_reads_is_dropped)
{
	int normal = connect_main(), lazy = connect_main();
	static const char req[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"status\"}\n";
	size_t sent = 0;
	bool dropped = false;
	int sndbuf = 4096;
	setsockopt(lazy, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	fcntl(lazy, F_SETFL, O_NONBLOCK);
	int64_t t0 = now_ms();
	unsigned sends = 0;
	/* Keep asking, never read: the replies pile up in the server until it drops us (its
	 * output bound, not the idle timeout, which is long in this suite). */
	while (now_ms() - t0 < DEADLINE_MS) {
		ssize_t n = send(lazy, req, sizeof(req) - 1, MSG_NOSIGNAL);
		if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
			dropped = true;
			break;
		}
		if (n < 0) {
			struct pollfd p = {.fd = lazy, .events = POLLOUT};
			poll(&p, 1, 50);
		} else {
			sent += n;
		}
		if (++sends % 100 == 0)
			assert_served(normal);
	}
	cr_assert(dropped, "server kept a client that never reads (%zu bytes sent)", sent);
	cr_assert_geq(stats().dropped_slow, 1);
	assert_served(normal);
	close(lazy);
	close(normal);
}

Test(ctl, client_that_never_writes_times_out)
{
	pw_ctl_tuning tun = {.idle_timeout_ms = SHORT_IDLE_MS};
	restart_server(&tun);
	/* The normal client subscribes, so the short idle timeout spares it. */
	int normal = connect_and_call("subscribe", "{\"events\":[\"mode.changed\"]}");
	int idle = connect_main();
	/* Half a request, then silence. The idle timeout runs from the accept: if this thread
	 * was held up longer than it, the server dropped the client already and the send fails
	 * (EPIPE, ECONNRESET), which is the drop this test checks. */
	static const char half[] = "{\"jsonrpc\":\"2.0\",\"id\":1,";
	ssize_t n = send(idle, half, sizeof(half) - 1, MSG_NOSIGNAL);
	cr_assert(n > 0 || errno == EPIPE || errno == ECONNRESET, "send: %s", strerror(errno));
	assert_served(normal);
	cr_assert(wait_closed(idle), "idle client closed");
	cr_assert_geq(stats().dropped_idle, 1);
	assert_served(normal);
	close(idle);
	close(normal);
}

Test(ctl, three_hundred_connections)
{
	enum { N = 300 };
	static const char req[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"status\"}\n";
	int normal = connect_main();
	int fds[N], served = 0, busy = 0;

	assert_served(normal);
	pw_ctl_stats st0 = stats();
	cr_assert_eq(st0.clients, 1);
	for (int i = 0; i < N; i++) {
		fds[i] = connect_to(sock);
		cr_assert_geq(fds[i], 0, "connect %d: %s", i, strerror(-fds[i]));
		/* Each connection asks once, maybe before the server has even accepted it. A
		 * refused one may already be closed: then the request is simply lost. */
		ssize_t n = send(fds[i], req, sizeof(req) - 1, MSG_NOSIGNAL);
		cr_assert(n == (ssize_t)sizeof(req) - 1 || errno == EPIPE || errno == ECONNRESET,
			  "send %d: %s", i, strerror(errno));
		if (i % 50 == 0)
			assert_served(normal);
	}
	assert_served(normal);
	/* The server has taken every connection off its listen backlog: accepted or refused. */
	cr_assert(WAIT_UNTIL(({
			  pw_ctl_stats st = stats();
			  st.accepted - st0.accepted + st.refused_busy - st0.refused_busy == N;
		  })),
		  "the server handled %d connections",
		  (int)(stats().accepted - st0.accepted + stats().refused_busy - st0.refused_busy));
	/* Each one gets exactly one line: its reply if it got a slot (it is served, not just
	 * accepted), or a -32005 error beyond PW_CLIENTS_MAX, and then the close. */
	for (int i = 0; i < N; i++) {
		json_t *r = read_msg(fds[i]);
		cr_assert_not_null(r, "connection %d got no line", i);
		if (json_object_get(r, "result")) {
			served++;
		} else {
			cr_assert_eq(error_code(r), PW_RPC_BUSY, "connection %d", i);
			cr_assert(json_is_null(json_object_get(r, "id")));
			cr_assert(wait_closed(fds[i]), "refused connection %d closed", i);
			busy++;
		}
		json_decref(r);
	}
	cr_assert_eq(served, PW_CLIENTS_MAX - 1, "served %d", served);
	cr_assert_eq(busy, N + 1 - PW_CLIENTS_MAX, "busy %d", busy);
	cr_assert_eq(stats().refused_busy - st0.refused_busy, (uint64_t)busy);
	assert_served(normal);
	for (int i = 0; i < N; i++)
		close(fds[i]);
	/* The slots come back once the server has seen the closes. */
	cr_assert(WAIT_UNTIL(stats().clients == 1), "clients %u", stats().clients);
	int fresh = connect_main();
	assert_served(fresh);
	close(fresh);
	close(normal);
}

Test(ctl, disconnect_mid_request)
{
	int normal = connect_main();
	for (int i = 0; i < 20; i++) {
		int fd = connect_main();
		send_all(fd, i % 2 ? "{\"jsonrpc\":\"2.0\",\"id\":1,\"meth"
				   : "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"mode.set\","
				     "\"params\":{\"mode\":\"design\"}}\n");
		close(fd);
	}
	assert_served(normal);
	/* A request whose client vanished still runs to completion. The server may answer the
	 * normal client before it has accepted the others from the listen backlog (under load
	 * it does), so wait for it, with a deadline. */
	cr_assert(WAIT_UNTIL(streq(active_mode(), "design")), "mode %s", active_mode());
	close(normal);
}

/* ---- authority ------------------------------------------------------------------------- */

/* The child of other_uid_refused, as uid 65534: a switch it asks for is refused, with its
 * uid named, and the connection closed. */
static int other_uid_child(const char *path, int report)
{
	static const char req[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"mode.set\","
				  "\"params\":{\"mode\":\"off\"}}\n";
	char line[512];
	int fd = connect_to(path);

	(void)report;
	if (fd < 0)
		return 11;
	send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL);
	char *l = read_line(fd);
	if (!l)
		return 12;
	snprintf(line, sizeof(line), "%s", l);
	free(l);
	if (!strstr(line, "-32002") || !strstr(line, "uid 65534"))
		return 13;
	char c;
	return read(fd, &c, 1) <= 0 ? 0 : 14; /* EOF, or ECONNRESET: closed */
}

Test(ctl, other_uid_refused)
{
	if (getuid() != 0)
		cr_skip_test("needs root to become another uid");
	/* Let uid 65534 reach the socket, so the server's SO_PEERCRED check is what refuses. */
	chmod(tmp, 0755);
	chmod(rundir, 0711);
	chmod(sock, 0666);
	struct child_env ce;
	child_env(&ce, "other_uid", sock, -1);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(10);
		exec_child(&ce);
	}
	int status;
	waitpid(pid, &status, 0);
	cr_assert(WIFEXITED(status));
	cr_assert_eq(WEXITSTATUS(status), 0, "child status %d", WEXITSTATUS(status));
	cr_assert_str_eq(active_mode(), "plan");
}

Test(ctl, authorize_switch_unit)
{
	pw_peer owner = {.uid = getuid(), .origin = "socket"};
	pw_peer other = {.uid = getuid() + 1000, .origin = "socket"};
	pw_peer agent = {.uid = getuid(), .restricted = true, .origin = "agent-socket"};
	pw_policy *build = NULL, *review = NULL;
	char *why = NULL;

	cr_assert_eq(pw_view_compile(view, "build", &build), 0);
	cr_assert_eq(pw_view_compile(view, "review", &review), 0);
	cr_assert_eq(pw_view_authorize_switch(view, &owner, build, &why), 0);
	cr_assert_null(why);
	if (getuid() != 0) {
		cr_assert_eq(pw_view_authorize_switch(view, &other, review, &why), -EPERM);
		cr_assert_not_null(why);
		free(why);
		why = NULL;
	}
	pw_peer root = {.uid = 0, .origin = "socket"};
	cr_assert_eq(pw_view_authorize_switch(view, &root, build, &why), 0);

	/* Active is plan: build loosens, review does not. */
	cr_assert_eq(pw_view_authorize_switch(view, &agent, build, &why), -EPERM);
	cr_assert_not_null(why);
	cr_assert(strstr(why, "piworkfs mode build"), "%s", why);
	free(why);
	why = NULL;
	cr_assert_eq(pw_view_authorize_switch(view, &agent, review, &why), 0);
	pw_policy_unref(build);
	pw_policy_unref(review);
}

Test(ctl, agent_socket_may_only_tighten)
{
	char agent_path[256];
	snprintf(agent_path, sizeof(agent_path), "%s/agent/ctl.sock", tmp);
	cr_assert_eq(pw_ctl_server_add_agent_socket(srv, agent_path), 0);
	int owner = connect_main();
	int agent = connect_agent(agent_path);

	json_t *r = rpc(agent, "mode.set", "{\"mode\":\"build\"}");
	cr_assert_eq(error_code(r), PW_RPC_REFUSED);
	cr_assert(strstr(error_message(r), "piworkfs mode build"), "%s", error_message(r));
	json_decref(r);
	cr_assert_str_eq(active_mode(), "plan");

	r = rpc(owner, "mode.set", "{\"mode\":\"build\"}");
	result_of(r);
	json_decref(r);
	r = rpc(agent, "mode.set", "{\"mode\":\"plan\"}");
	cr_assert_str_eq(sget(result_of(r), "mode"), "plan");
	json_decref(r);
	cr_assert_str_eq(active_mode(), "plan");
	/* Reads are fine for the agent. */
	r = rpc(agent, "status", NULL);
	result_of(r);
	json_decref(r);
	close(agent);
	close(owner);
	pw_ctl_server_stop(srv);
	srv = NULL;
	struct stat st;
	cr_assert_eq(lstat(agent_path, &st), -1, "agent socket removed at stop");
}

/* A module of the test's own: the server knows methods only from the tables it is given. */
static int echo_data(pw_ctl_ctx *x, json_t **ret)
{
	*ret = json_pack("{s:s}", "data", (const char *)x->data);
	return 0;
}

static int echo_init(pw_ctl_server *s, void *arg, void **ret_data)
{
	*ret_data = "from init";
	return 0;
}

static const pw_ctl_method echo_methods[] = {
    {"test.echo", echo_data, NULL, 0, NULL},
    {"test.person", echo_data, NULL, 0, "refused: the person's only"},
};
static const pw_ctl_module echo_module = {
    .name = "echo", .methods = echo_methods, .n_methods = ELEMENTSOF(echo_methods)};
static const pw_ctl_module echo_module_init = {.name = "echo",
					       .methods = echo_methods,
					       .n_methods = ELEMENTSOF(echo_methods),
					       .init = echo_init};

Test(ctl, dispatch_table_of_modules)
{
	pw_ctl_server_stop(srv);
	srv = NULL;
	/* A name in two tables is refused: one of them would be unreachable. */
	const pw_ctl_use twice[] = {
	    {&pw_ctl_methods_module, NULL}, {&echo_module, "a"}, {&echo_module_init, NULL}};
	cr_assert_eq(pw_ctl_server_start(view, rundir, NULL, twice, ELEMENTSOF(twice), &srv),
		     -EINVAL);
	cr_assert_null(srv);
	const pw_ctl_use uses[] = {{&pw_ctl_methods_module, NULL}, {&echo_module, "the arg"}};
	cr_assert_eq(pw_ctl_server_start(view, rundir, NULL, uses, ELEMENTSOF(uses), &srv), 0);
	sock = pw_ctl_server_socket_path(srv);

	char agent_path[256];
	snprintf(agent_path, sizeof(agent_path), "%s/agent/ctl.sock", tmp);
	cr_assert_eq(pw_ctl_server_add_agent_socket(srv, agent_path), 0);
	int owner = connect_main(), agent = connect_agent(agent_path);
	json_t *r = rpc(owner, "test.echo", NULL);
	cr_assert_str_eq(sget(result_of(r), "data"), "the arg", "without init: the use's arg");
	json_decref(r);
	r = rpc(owner, "test.person", NULL);
	result_of(r);
	json_decref(r);
	r = rpc(agent, "test.echo", NULL);
	result_of(r);
	json_decref(r);
	r = rpc(agent, "test.person", NULL);
	cr_assert_eq(error_code(r), PW_RPC_REFUSED, "the table refuses the agent");
	cr_assert_str_eq(error_message(r), "refused: the person's only");
	json_decref(r);
	/* Not registered here (the request module, the changes module): unknown. */
	r = rpc(owner, "mode.request.list", NULL);
	cr_assert_eq(error_code(r), PW_RPC_METHOD_NOT_FOUND);
	json_decref(r);
	r = rpc(owner, "changes.list", NULL);
	cr_assert_eq(error_code(r), PW_RPC_METHOD_NOT_FOUND);
	json_decref(r);
	close(agent);
	close(owner);
	pw_ctl_server_stop(srv);
	srv = NULL;

	/* With init: the data it made. */
	const pw_ctl_use inited[] = {{&echo_module_init, "the arg"}};
	cr_assert_eq(pw_ctl_server_start(view, rundir, NULL, inited, ELEMENTSOF(inited), &srv), 0);
	sock = pw_ctl_server_socket_path(srv);
	owner = connect_main();
	r = rpc(owner, "test.echo", NULL);
	cr_assert_str_eq(sget(result_of(r), "data"), "from init");
	json_decref(r);
	r = rpc(owner, "status", NULL);
	cr_assert_eq(error_code(r), PW_RPC_METHOD_NOT_FOUND, "only the modules given are served");
	json_decref(r);
	close(owner);
}

/*
 * The person's authority must not depend on the agent's manners: an agent that fills its
 * socket with subscribed connections (exempt from the idle timeout) gets its own limit,
 * PW_AGENT_CLIENTS_MAX, and the operator's socket keeps every one of its slots. Before
 * separate limits, 256 such connections locked `piworkfs mode plan` out (-32005).
 */
Test(ctl, agent_flood_cannot_lock_the_operator_out)
{
	enum { N = PW_CLIENTS_MAX + 16 };
	static const char sub[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"subscribe\"}\n";
	static int fds[N];
	char agent_path[256];
	int subscribed = 0, busy = 0, first = -1;

	snprintf(agent_path, sizeof(agent_path), "%s/agent.sock", tmp);
	cr_assert_eq(pw_ctl_server_add_agent_socket(srv, agent_path), 0);
	int owner = connect_main();
	json_t *r = rpc(owner, "mode.set", "{\"mode\":\"build\"}");
	result_of(r);
	json_decref(r);
	close(owner);

	pw_ctl_stats st0 = stats();
	for (int i = 0; i < N; i++) {
		fds[i] = i == 0 ? connect_agent(agent_path) : connect_to(agent_path);
		cr_assert_geq(fds[i], 0, "connect %d: %s", i, strerror(-fds[i]));
		ssize_t n = send(fds[i], sub, sizeof(sub) - 1, MSG_NOSIGNAL);
		cr_assert(n == (ssize_t)sizeof(sub) - 1 || errno == EPIPE || errno == ECONNRESET,
			  "send %d: %s", i, strerror(errno));
	}
	cr_assert(WAIT_UNTIL(({
			  pw_ctl_stats st = stats();
			  st.accepted - st0.accepted + st.refused_busy - st0.refused_busy == N;
		  })),
		  "the server handled every agent connection");
	for (int i = 0; i < N; i++) {
		json_t *m = read_msg(fds[i]);
		cr_assert_not_null(m, "agent connection %d got no line", i);
		if (json_object_get(m, "result")) {
			subscribed++;
			if (first < 0)
				first = fds[i];
		} else {
			cr_assert_eq(error_code(m), PW_RPC_BUSY, "agent connection %d", i);
			busy++;
		}
		json_decref(m);
	}

	/* The person, from outside, on a fresh connection: the switch goes through. */
	static const char plan[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"mode.set\","
				   "\"params\":{\"mode\":\"plan\"}}\n";
	owner = connect_main();
	(void)!send(owner, plan, sizeof(plan) - 1, MSG_NOSIGNAL); /* a refusal may close first */
	r = read_msg(owner);
	cr_assert_not_null(r, "the operator got no answer");
	cr_assert_not_null(json_object_get(r, "result"), "the operator was refused: %s",
			   json_dumps(r, 0));
	cr_assert_str_eq(sget(result_of(r), "mode"), "plan");
	json_decref(r);
	cr_assert_str_eq(active_mode(), "plan");
	/* Enough for a Pi extension (its subscription, a few requests, a consent request). */
	cr_assert_geq(subscribed, 16);
	cr_assert_eq(subscribed, PW_AGENT_CLIENTS_MAX, "subscribed %d", subscribed);
	cr_assert_eq(busy, N - PW_AGENT_CLIENTS_MAX);
	/* The agent's own connections are still served: a subscriber hears of the switch. */
	json_t *n = read_msg(first);
	cr_assert_not_null(n);
	cr_assert_str_eq(sget(n, "method"), "mode.changed");
	cr_assert_str_eq(sget(json_object_get(n, "params"), "to"), "plan");
	json_decref(n);
	/* And the operator's socket still has room for many more. */
	int more[16];
	for (int i = 0; i < 16; i++) {
		more[i] = connect_main();
		assert_served(more[i]);
	}
	for (int i = 0; i < 16; i++)
		close(more[i]);
	for (int i = 0; i < N; i++)
		close(fds[i]);
	close(owner);
}

/* ---- reload ---------------------------------------------------------------------------- */

static void break_build(bool broken)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/.piworkfs", proj);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/.piworkfs/modes", proj);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/.piworkfs/modes/build.md", proj);
	if (broken)
		writefile(path, "---\nname: build\nwrites: [unclosed\n---\nbody\n");
	else
		unlink(path);
}

Test(ctl, reload_with_broken_active_mode_fails_closed_then_recovers)
{
	int fd = connect_main();
	json_t *r = rpc(fd, "mode.set", "{\"mode\":\"build\"}");
	result_of(r);
	json_decref(r);

	break_build(true);
	r = rpc(fd, "reload", NULL);
	json_t *res = result_of(r);
	cr_assert(json_is_true(json_object_get(res, "fail_closed")));
	cr_assert_not_null(sget(res, "fail_reason"));
	cr_assert_str_eq(sget(res, "mode"), "build");
	json_decref(r);
	pw_policy *p = fake_get_policy(&fake_fs, NULL);
	cr_assert(pw_policy_is_fail_closed(p), "a broken active mode must fail closed");
	pw_policy_unref(p);

	r = rpc(fd, "status", NULL);
	res = result_of(r);
	cr_assert(json_is_true(json_object_get(res, "fail_closed")));
	cr_assert(strstr(sget(res, "fail_reason"), "build.md"), "%s", sget(res, "fail_reason"));
	json_decref(r);

	r = rpc(fd, "check", "{\"paths\":[\"src/a.c\"]}");
	json_t *d = json_array_get(json_object_get(result_of(r), "decisions"), 0);
	cr_assert_str_eq(sget(d, "decision"), "denied");
	json_decref(r);

	/* Switching to the broken mode is refused; the view stays closed. */
	r = rpc(fd, "mode.set", "{\"mode\":\"build\"}");
	cr_assert_eq(error_code(r), PW_RPC_MODE_BROKEN);
	json_decref(r);

	/* Fix and reload: recovered. */
	break_build(false);
	r = rpc(fd, "reload", NULL);
	res = result_of(r);
	cr_assert(json_is_false(json_object_get(res, "fail_closed")));
	json_decref(r);
	cr_assert_str_eq(active_mode(), "build");
	p = fake_get_policy(&fake_fs, NULL);
	cr_assert_not(pw_policy_is_fail_closed(p));
	pw_policy_unref(p);

	/* Break again; `mode plan` recovers too. */
	break_build(true);
	r = rpc(fd, "reload", NULL);
	cr_assert(json_is_true(json_object_get(result_of(r), "fail_closed")));
	json_decref(r);
	r = rpc(fd, "mode.set", "{\"mode\":\"plan\"}");
	result_of(r);
	json_decref(r);
	r = rpc(fd, "status", NULL);
	cr_assert(json_is_false(json_object_get(result_of(r), "fail_closed")));
	cr_assert_str_eq(sget(result_of(r), "mode"), "plan");
	json_decref(r);
	close(fd);
}

Test(ctl, agent_reload_cannot_loosen)
{
	char agent_path[256];
	snprintf(agent_path, sizeof(agent_path), "%s/agent.sock", tmp);
	cr_assert_eq(pw_ctl_server_add_agent_socket(srv, agent_path), 0);
	int fd = connect_main();
	json_t *r = rpc(fd, "mode.set", "{\"mode\":\"build\"}");
	result_of(r);
	json_decref(r);
	break_build(true);
	r = rpc(fd, "reload", NULL);
	json_decref(r);
	break_build(false);
	int agent = connect_agent(agent_path);
	/* Failing closed -> build would loosen: the agent cannot do that by reloading. */
	r = rpc(agent, "reload", NULL);
	cr_assert_eq(error_code(r), PW_RPC_REFUSED);
	json_decref(r);
	pw_policy *p = fake_get_policy(&fake_fs, NULL);
	cr_assert(pw_policy_is_fail_closed(p));
	pw_policy_unref(p);
	close(agent);
	close(fd);
}

Test(ctl, sighup_reload_request)
{
	int fd = connect_main();
	json_t *r = rpc(fd, "status", NULL);
	json_int_t before = json_integer_value(json_object_get(result_of(r), "reloads"));
	json_decref(r);
	pw_ctl_server_request_reload(srv);
	json_int_t after = before;
	cr_assert(WAIT_UNTIL(({
		r = rpc(fd, "status", NULL);
		after = json_integer_value(json_object_get(result_of(r), "reloads"));
		json_decref(r);
		after != before;
	})));
	cr_assert_eq(after, before + 1);
	close(fd);
}

Test(ctl, last_mode_restored_and_explicit_unknown_fails_closed)
{
	int fd = connect_main();
	json_t *r = rpc(fd, "mode.set", "{\"mode\":\"design\"}");
	result_of(r);
	json_decref(r);
	close(fd);

	/* A second view of the same project (as after a remount) restores design. */
	pw_view *v2 = NULL;
	pw_view_opts vo = {.project = proj,
			   .mountpoint = mnt,
			   .fs_ops = &fake_ops,
			   .fs_ctx = &fake_fs,
			   .owner_uid = getuid(),
			   .bundled_dir = SOURCE_MODES,
			   .state = state};
	pw_policy_unref(fake_fs.active);
	fake_fs.active = NULL;
	cr_assert_eq(pw_view_new(&vo, &v2), 0);
	cr_assert_str_eq(active_mode(), "design");
	pw_view_free(v2);

	vo.initial_mode = "nosuch";
	cr_assert_eq(pw_view_new(&vo, &v2), 0);
	pw_policy *p = fake_get_policy(&fake_fs, NULL);
	cr_assert(pw_policy_is_fail_closed(p), "unknown initial mode: fail closed, not permissive");
	pw_policy_unref(p);
	pw_view_status st;
	cr_assert_eq(pw_view_get_status(v2, &st), 0);
	cr_assert_not_null(st.fail_reason);
	pw_view_status_done(&st);
	pw_view_free(v2);
}

/* ---- denied notifications -------------------------------------------------------------- */

Test(ctl_audit, denied_notifications_rate_limited, .timeout = 120)
{
	signal(SIGPIPE, SIG_IGN);
	start_view(NULL, true);
	int fd = connect_main();
	json_t *r = rpc(fd, "subscribe", NULL);
	cr_assert(json_is_true(json_object_get(result_of(r), "audit")));
	json_decref(r);

	int64_t t0 = now_ms();
	for (int i = 0; i < 200; i++) {
		char path[32];
		snprintf(path, sizeof(path), "src/f%d.c", i);
		pw_audit_event ev = {.mode = "plan",
				     .generation = 1,
				     .op = PW_OP_CREATE,
				     .path = path,
				     .err = EROFS,
				     .reason = PW_REASON_READ_ONLY,
				     .pid = getpid(),
				     .uid = getuid()};
		pw_audit_submit(audit, &ev);
	}
	/* Every event reaches the server (200 distinct paths: nothing coalesced), and each is
	 * either sent to the one subscriber or counted as suppressed: wait for that account to
	 * close, reading what arrives meanwhile. */
	int got = 0;
	uint64_t suppressed = 0;
	cr_assert(WAIT_UNTIL(({
			  struct pollfd p = {.fd = fd, .events = POLLIN};
			  while (poll(&p, 1, 10) == 1) {
				  json_t *n = read_msg(fd);
				  cr_assert_not_null(n);
				  cr_assert_str_eq(sget(n, "method"), "denied");
				  json_t *params = json_object_get(n, "params");
				  cr_assert_str_eq(sget(params, "errno"), "EROFS");
				  cr_assert_str_eq(sget(params, "op"), "create");
				  cr_assert(startswith(sget(params, "path"), "src/f"));
				  got++;
				  json_decref(n);
			  }
			  pw_ctl_stats st = stats();
			  suppressed = st.denied_suppressed;
			  st.denied_seen == 200 && got + suppressed == 200;
		  })),
		  "seen %llu, got %d, suppressed %llu", (unsigned long long)stats().denied_seen,
		  got, (unsigned long long)suppressed);
	double elapsed_s = (now_ms() - t0) / 1000.0;
	/* 10/s with a burst of 10: the bucket cannot have given more than that over the whole
	 * time the test took (however slow the machine), and gave at least one. */
	cr_assert_geq(got, 1);
	cr_assert_leq(got, 10 + 10 * elapsed_s + 1, "rate limit: got %d in %.1f s", got, elapsed_s);
	r = rpc(fd, "status", NULL);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(result_of(r), "clients"),
							"denied_suppressed")),
		     (json_int_t)suppressed);
	json_decref(r);
	close(fd);
	stop_view();
}

/*
 * An agent socket's subscriber hears only of denials of processes in its own sandbox (its
 * PID namespace, or one below it), with pids as seen inside; an operator subscriber hears
 * of all of them, unchanged. The subscriber here lives in a new PID namespace (as under
 * `piworkfs run`); the events carry the namespaces pw_pidns_describe would have recorded.
 */
static int inside_subscriber(const char *agent_path, int report)
{
	static const char sub[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"subscribe\","
				  "\"params\":{\"events\":[\"denied\"]}}\n";
	struct stat st;
	char line[4096];
	int fd;

	if (stat("/proc/self/ns/pid", &st) < 0) /* /proc is the parent's: our outer pid */
		return 10;
	fd = connect_to(agent_path);
	if (fd < 0 || send(fd, sub, sizeof(sub) - 1, MSG_NOSIGNAL) != (ssize_t)sizeof(sub) - 1)
		return 11;
	char *l = read_line(fd);
	if (!l || !strstr(l, "\"result\""))
		return 12;
	free(l);
	snprintf(line, sizeof(line), "ready %llu\n", (unsigned long long)st.st_ino);
	if (write(report, line, strlen(line)) < 0)
		return 13;
	/* Every notification until the last event, each as "PATH PID". */
	for (;;) {
		l = read_line(fd);
		if (!l)
			return 14;
		json_t *n = json_loads(l, 0, NULL);
		free(l);
		json_t *p = json_object_get(n, "params");
		const char *path = json_string_value(json_object_get(p, "path"));
		if (!path)
			return 15;
		snprintf(line, sizeof(line), "%s %lld\n", path,
			 (long long)json_integer_value(json_object_get(p, "pid")));
		bool last = streq(path, "src/zz-last.c");
		json_decref(n);
		if (write(report, line, strlen(line)) < 0)
			return 16;
		if (last)
			return 0;
	}
}

Test(ctl_audit, agent_denials_are_those_of_its_own_sandbox, .timeout = 120)
{
	if (getuid() != 0)
		cr_skip_test("needs root to make a PID namespace");
	signal(SIGPIPE, SIG_IGN);
	start_view(NULL, true);
	char agent_path[256];
	snprintf(agent_path, sizeof(agent_path), "%s/agent.sock", tmp);
	cr_assert_eq(pw_ctl_server_add_agent_socket(srv, agent_path), 0);
	close(connect_agent(agent_path)); /* adopted */
	int op = connect_main();
	json_t *r = rpc(op, "subscribe", "{\"events\":[\"denied\"]}");
	result_of(r);
	json_decref(r);

	int pfd[2];
	cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
	struct child_env ce;
	child_env(&ce, "subscriber", agent_path, pfd[1]);
	pid_t helper = fork();
	cr_assert_geq(helper, 0);
	if (helper == 0) {
		/* The helper makes the namespace; its child is the sandbox's first process. */
		close(pfd[0]);
		if (unshare(CLONE_NEWPID) < 0)
			_exit(20);
		pid_t c = fork();
		if (c < 0)
			_exit(21);
		if (c == 0)
			exec_child(&ce);
		int status;
		if (waitpid(c, &status, 0) != c || !WIFEXITED(status))
			_exit(22);
		_exit(WEXITSTATUS(status));
	}
	close(pfd[1]);
	FILE *in = fdopen(pfd[0], "r");
	cr_assert_not_null(in);
	char line[4096];
	unsigned long long ino = 0;
	cr_assert_not_null(fgets(line, sizeof(line), in), "the subscriber inside never got ready");
	cr_assert_eq(sscanf(line, "ready %llu", &ino), 1, "%s", line);

	char inside[64], deeper[96], other[64], last[64];
	snprintf(inside, sizeof(inside), "%llu:5", ino);
	snprintf(deeper, sizeof(deeper), "%llu:6 4026599999:2", ino);
	snprintf(other, sizeof(other), "%llu:7", ino + 1);
	snprintf(last, sizeof(last), "%llu:9", ino);
	struct {
		const char *path, *pidns;
		pid_t pid;
	} evs[] = {
	    {"src/outside.c", NULL, 1000},  /* the daemon's namespace: the person's shell */
	    {"src/other.c", other, 1001},   /* another sandbox */
	    {"src/inside.c", inside, 1002}, /* this sandbox: pid 5 inside */
	    {"src/deeper.c", deeper, 1003}, /* a namespace below it: pid 6 in this one */
	    {"src/broken.c", "garbage", 1004}, {"src/zz-last.c", last, 1005},
	};
	for (size_t i = 0; i < ELEMENTSOF(evs); i++) {
		pw_audit_event ev = {.mode = "plan",
				     .generation = 1,
				     .op = PW_OP_CREATE,
				     .path = evs[i].path,
				     .err = EROFS,
				     .reason = PW_REASON_READ_ONLY,
				     .pid = evs[i].pid,
				     .uid = getuid(),
				     .pidns = evs[i].pidns};
		pw_audit_submit(audit, &ev);
	}

	/* What the subscriber inside heard, in order. */
	char heard[1024] = "";
	while (fgets(line, sizeof(line), in))
		strncat(heard, line, sizeof(heard) - strlen(heard) - 1);
	fclose(in);
	int status;
	cr_assert_eq(waitpid(helper, &status, 0), helper);
	cr_assert(WIFEXITED(status));
	cr_assert_eq(WEXITSTATUS(status), 0, "subscriber inside: status %d; heard:\n%s",
		     WEXITSTATUS(status), heard);
	cr_assert_str_eq(heard, "src/inside.c 5\nsrc/deeper.c 6\nsrc/zz-last.c 9\n");

	/* The operator heard of everything, pids as the daemon sees them. */
	for (size_t i = 0; i < ELEMENTSOF(evs); i++) {
		json_t *n = read_msg(op);
		cr_assert_not_null(n, "operator notification %zu", i);
		json_t *p = json_object_get(n, "params");
		cr_assert_str_eq(sget(p, "path"), evs[i].path);
		cr_assert_eq(json_integer_value(json_object_get(p, "pid")), evs[i].pid);
		cr_assert_null(json_object_get(p, "pidns"), "internal, not sent");
		json_decref(n);
	}
	close(op);
	stop_view();
}

/* ---- who switched, as an agent socket's subscriber learns it --------------------------- */

/* FIELD of notification params P as text: its value, or "-" when absent. */
static void field_text(json_t *p, const char *field, char *buf, size_t size)
{
	json_t *v = json_object_get(p, field);
	if (!v)
		snprintf(buf, size, "-");
	else if (json_is_integer(v))
		snprintf(buf, size, "%lld", (long long)json_integer_value(v));
	else
		snprintf(buf, size, "%s", json_is_string(v) ? json_string_value(v) : "?");
}

/*
 * The sandbox's process: subscribes to mode.changed through the agent socket, reports
 * "ready OUTER_PID", then reports the switch made outside and the one it makes itself
 * (build -> plan, a tightening, through a second connection), each as "TO ORIGIN PID UID
 * COMM" ("-" for a field left out).
 */
static int inside_switch_watcher(const char *agent_path, int report)
{
	static const char sub[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"subscribe\","
				  "\"params\":{\"events\":[\"mode.changed\"]}}\n";
	static const char set[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"mode.set\","
				  "\"params\":{\"mode\":\"plan\"}}\n";
	char line[512], self[32] = "";
	int fd, sw;

	/* /proc is the parent's: /proc/self names our pid outside. */
	if (readlink("/proc/self", self, sizeof(self) - 1) < 0)
		return 10;
	fd = connect_to(agent_path);
	if (fd < 0 || send(fd, sub, sizeof(sub) - 1, MSG_NOSIGNAL) != (ssize_t)sizeof(sub) - 1)
		return 11;
	char *l = read_line(fd);
	if (!l || !strstr(l, "\"result\""))
		return 12;
	free(l);
	snprintf(line, sizeof(line), "ready %s\n", self);
	if (write(report, line, strlen(line)) < 0)
		return 13;
	for (int n = 0; n < 2; n++) {
		if (n == 1) {
			sw = connect_to(agent_path);
			if (sw < 0 || send(sw, set, sizeof(set) - 1, MSG_NOSIGNAL) !=
					  (ssize_t)sizeof(set) - 1)
				return 14;
			l = read_line(sw);
			if (!l || !strstr(l, "\"result\""))
				return 15;
			free(l);
		}
		l = read_line(fd);
		if (!l)
			return 16;
		json_t *msg = json_loads(l, 0, NULL);
		free(l);
		json_t *p = json_object_get(msg, "params");
		char f[5][64];
		const char *names[] = {"to", "origin", "pid", "uid", "comm"};
		for (int i = 0; i < 5; i++)
			field_text(p, names[i], f[i], sizeof(f[i]));
		json_decref(msg);
		snprintf(line, sizeof(line), "%s %s %s %s %s\n", f[0], f[1], f[2], f[3], f[4]);
		if (write(report, line, strlen(line)) < 0)
			return 17;
	}
	return 0;
}

/*
 * A restricted subscriber learns who switched only when the switcher is in its own sandbox
 * (pid as seen there); of a switch made outside it learns the origin, never the pid, uid or
 * name of the person's process. The operator subscriber learns everything, unchanged. The
 * watcher lives in a new PID namespace, as under `piworkfs run`.
 */
Test(ctl, agent_subscriber_learns_only_its_own_sandbox_switchers)
{
	if (getuid() != 0)
		cr_skip_test("needs root to make a PID namespace");
	char agent_path[256];
	snprintf(agent_path, sizeof(agent_path), "%s/agent.sock", tmp);
	cr_assert_eq(pw_ctl_server_add_agent_socket(srv, agent_path), 0);
	close(connect_agent(agent_path)); /* adopted */
	int watch = connect_main(), sw = connect_main();
	json_t *r = rpc(watch, "subscribe", "{\"events\":[\"mode.changed\"]}");
	result_of(r);
	json_decref(r);

	int pfd[2];
	cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
	struct child_env ce;
	child_env(&ce, "switch_watcher", agent_path, pfd[1]);
	pid_t helper = fork();
	cr_assert_geq(helper, 0);
	if (helper == 0) {
		/* The helper makes the namespace; its child is the sandbox's first process. */
		close(pfd[0]);
		if (unshare(CLONE_NEWPID) < 0)
			_exit(20);
		pid_t c = fork();
		if (c < 0)
			_exit(21);
		if (c == 0)
			exec_child(&ce);
		int status;
		if (waitpid(c, &status, 0) != c || !WIFEXITED(status))
			_exit(22);
		_exit(WEXITSTATUS(status));
	}
	close(pfd[1]);
	FILE *in = fdopen(pfd[0], "r");
	cr_assert_not_null(in);
	char line[512];
	long outer = 0;
	cr_assert_not_null(fgets(line, sizeof(line), in), "the watcher inside never got ready");
	cr_assert_eq(sscanf(line, "ready %ld", &outer), 1, "%s", line);

	/* The person switches from outside; the watcher then switches from inside. */
	r = rpc(sw, "mode.set", "{\"mode\":\"build\"}");
	result_of(r);
	json_decref(r);
	char heard[1024] = "";
	while (fgets(line, sizeof(line), in))
		strncat(heard, line, sizeof(heard) - strlen(heard) - 1);
	fclose(in);
	int status;
	cr_assert_eq(waitpid(helper, &status, 0), helper);
	cr_assert(WIFEXITED(status));
	cr_assert_eq(WEXITSTATUS(status), 0, "watcher inside: status %d; heard:\n%s",
		     WEXITSTATUS(status), heard);
	char *second = strchr(heard, '\n');
	cr_assert_not_null(second, "%s", heard);
	*second++ = '\0';
	cr_assert_str_eq(heard, "build socket - - -", "outside switcher hidden from the agent");
	char expect[128];
	snprintf(expect, sizeof(expect), "plan agent-socket 1 %u ", (unsigned)getuid());
	cr_assert(startswith(second, expect), "the agent's own switch, pid as seen inside: %s",
		  second);
	cr_assert_neq(second[strlen(expect)], '-', "and its name: %s", second);

	/* The operator heard both, with pids, uids and names as the daemon sees them. */
	json_t *n = read_msg(watch);
	cr_assert_not_null(n);
	json_t *p = json_object_get(n, "params");
	cr_assert_str_eq(sget(p, "to"), "build");
	cr_assert_eq(json_integer_value(json_object_get(p, "pid")), getpid());
	cr_assert_eq(json_integer_value(json_object_get(p, "uid")), getuid());
	cr_assert_not_null(sget(p, "comm"));
	json_decref(n);
	n = read_msg(watch);
	cr_assert_not_null(n);
	p = json_object_get(n, "params");
	cr_assert_str_eq(sget(p, "to"), "plan");
	cr_assert_eq(json_integer_value(json_object_get(p, "pid")), outer);
	cr_assert_str_eq(sget(p, "origin"), "agent-socket");
	json_decref(n);
	close(watch);
	close(sw);
}

/* ---- calls that take time: the agents' pool and the person's (server.h) ----------------
 *
 * A module of the test's own whose one method is a job that holds until the test lets it
 * go: while a job holds, it is provably still running, so what the person is answered
 * meanwhile was not queued behind it (no timing involved).
 */
static int hold_release[2] = {-1, -1}; /* closing the write end lets every job go */
static atomic_int holding;

static int hold_job(void *arg, int cancel_fd, json_t **ret, pw_ctl_fail *f)
{
	(void)arg;
	(void)f;
	atomic_fetch_add(&holding, 1);
	struct pollfd p[2] = {{.fd = hold_release[0], .events = POLLIN},
			      {.fd = cancel_fd, .events = POLLIN}};
	while (poll(p, 2, -1) < 0 && errno == EINTR)
		;
	atomic_fetch_sub(&holding, 1);
	*ret = json_pack("{s:b}", "held", true);
	return 0;
}

static int m_hold(pw_ctl_ctx *x, json_t **ret)
{
	(void)ret;
	return pw_ctl_job_run(x, hold_job, NULL, NULL);
}

static const pw_ctl_method hold_methods[] = {{"test.hold", m_hold, NULL, 0, NULL}};
static const pw_ctl_module hold_module = {
    .name = "hold", .methods = hold_methods, .n_methods = ELEMENTSOF(hold_methods)};

/* Sends a call (ID > 0) or a notification (ID 0) without waiting for its answer. */
static void send_call(int fd, const char *method, const char *params, int id)
{
	char line[4096], idpart[32] = "";
	if (id)
		snprintf(idpart, sizeof(idpart), ",\"id\":%d", id);
	snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\"%s,\"method\":\"%s\"%s%s}\n", idpart,
		 method, params ? ",\"params\":" : "", params ? params : "");
	send_all(fd, line);
}

/* Reads messages until the reply to ID. */
static json_t *reply_to(int fd, int id)
{
	for (;;) {
		json_t *m = read_msg(fd);
		cr_assert_not_null(m, "no reply to id %d", id);
		if (json_integer_value(json_object_get(m, "id")) == id)
			return m;
		json_decref(m);
	}
}

Test(ctl, agent_jobs_are_bounded_and_never_delay_the_person, .timeout = 240)
{
	pw_ctl_server_stop(srv);
	srv = NULL;
	cr_assert_eq(pipe2(hold_release, O_CLOEXEC), 0);
	atomic_store(&holding, 0);
	const pw_ctl_use uses[] = {{&pw_ctl_methods_module, NULL}, {&hold_module, NULL}};
	pw_ctl_tuning tun = {.idle_timeout_ms = LONG_IDLE_MS};
	cr_assert_eq(pw_ctl_server_start(view, rundir, &tun, uses, ELEMENTSOF(uses), &srv), 0);
	sock = pw_ctl_server_socket_path(srv);
	char agent_path[256];
	snprintf(agent_path, sizeof(agent_path), "%s/agent/ctl.sock", tmp);
	cr_assert_eq(pw_ctl_server_add_agent_socket(srv, agent_path), 0);
	int a = connect_agent(agent_path), b = connect_agent(agent_path);
	int c = connect_agent(agent_path), person = connect_main();

	/* Per connection: two at once, the third answered busy at once. */
	for (int id = 1; id <= 3; id++)
		send_call(a, "test.hold", NULL, id);
	json_t *r = reply_to(a, 3);
	cr_assert_eq(error_code(r), PW_RPC_BUSY);
	json_decref(r);
	cr_assert(WAIT_UNTIL(atomic_load(&holding) == 2));
	for (int id = 1; id <= 3; id++)
		send_call(b, "test.hold", NULL, id);
	r = reply_to(b, 3);
	cr_assert_eq(error_code(r), PW_RPC_BUSY);
	json_decref(r);
	cr_assert(WAIT_UNTIL(atomic_load(&holding) == 4));
	cr_assert_eq(stats().agent_jobs_running, PW_CTL_AGENT_JOBS_MAX);

	/* The agents' pool is full: another agent connection is busy for every call that
	 * takes time (bash.check included), and its notifications are dropped, not run. */
	r = rpc(c, "bash.check", "{\"command\":\"ls\"}");
	cr_assert_eq(error_code(r), PW_RPC_BUSY);
	json_decref(r);
	uint64_t refused = stats().agent_jobs_refused;
	for (int i = 0; i < 3; i++) {
		send_call(c, "test.hold", NULL, 0);
		send_call(c, "bash.check", "{\"command\":\"ls\"}", 0);
	}
	r = rpc(c, "status", NULL); /* answered after the notifications were handled */
	result_of(r);
	json_decref(r);
	cr_assert_eq(stats().agent_jobs_refused, refused + 6);
	cr_assert_eq(atomic_load(&holding), 4, "no notification ran beyond the pool");

	/* The person is answered while every agent job still holds, and has a pool of their
	 * own: their bash.check and their own jobs run now. */
	r = rpc(person, "status", NULL);
	cr_assert_eq(
	    json_integer_value(json_object_get(json_object_get(result_of(r), "jobs"), "agent")), 4);
	json_decref(r);
	r = rpc(person, "mode.set", "{\"mode\":\"build\"}");
	result_of(r);
	json_decref(r);
	r = rpc(person, "bash.check", "{\"command\":\"echo hi > src/x.c\"}");
	result_of(r);
	json_decref(r);
	send_call(person, "test.hold", NULL, 7);
	cr_assert(WAIT_UNTIL(atomic_load(&holding) == 5));
	cr_assert_eq(atomic_load(&holding), 5, "the agents' jobs still held throughout");

	/* Let go: every held call is answered. */
	close(hold_release[1]);
	hold_release[1] = -1;
	for (int k = 0; k < 2; k++) { /* in either order: match them by id */
		int fds[] = {a, b};
		for (size_t i = 0; i < ELEMENTSOF(fds); i++) {
			r = read_msg(fds[i]);
			cr_assert_not_null(r);
			json_int_t id = json_integer_value(json_object_get(r, "id"));
			cr_assert(id == 1 || id == 2, "reply to id %lld", (long long)id);
			cr_assert(json_is_true(json_object_get(result_of(r), "held")));
			json_decref(r);
		}
	}
	r = reply_to(person, 7);
	result_of(r);
	json_decref(r);
	cr_assert(WAIT_UNTIL(stats().jobs_running == 0));
	close(a);
	close(b);
	close(c);
	close(person);
	close(hold_release[0]);
	hold_release[0] = -1;
}

/* A stopping server lets go of the jobs still running (a bash worker is killed): the
 * daemon's unmount never waits for an agent's analysis. */
Test(ctl, stopping_cancels_running_jobs, .timeout = 240)
{
	pw_ctl_server_stop(srv);
	srv = NULL;
	cr_assert_eq(pipe2(hold_release, O_CLOEXEC), 0);
	atomic_store(&holding, 0);
	const pw_ctl_use uses[] = {{&pw_ctl_methods_module, NULL}, {&hold_module, NULL}};
	cr_assert_eq(pw_ctl_server_start(view, rundir, NULL, uses, ELEMENTSOF(uses), &srv), 0);
	sock = pw_ctl_server_socket_path(srv);
	int fd = connect_main();
	send_call(fd, "test.hold", NULL, 1);
	cr_assert(WAIT_UNTIL(atomic_load(&holding) == 1));
	pw_ctl_server_stop(srv); /* returns: the job saw its cancel_fd */
	srv = NULL;
	cr_assert_eq(atomic_load(&holding), 0);
	close(fd);
	close(hold_release[1]);
	close(hold_release[0]);
	hold_release[0] = hold_release[1] = -1;
}

/* ---- children executed again (child_env, exec_child) ----------------------------------- */

__attribute__((constructor)) static void maybe_a_child(void)
{
	static const struct {
		const char *name;
		int (*fn)(const char *path, int report);
	} children[] = {
	    {"other_uid", other_uid_child},
	    {"subscriber", inside_subscriber},
	    {"switch_watcher", inside_switch_watcher},
	};
	const char *name = getenv("PW_CTL_CHILD"), *path = getenv("PW_CTL_CHILD_PATH");
	const char *report = getenv("PW_CTL_CHILD_REPORT");

	if (!name)
		return;
	if (!path || !report)
		_exit(2);
	for (size_t i = 0; i < sizeof(children) / sizeof(children[0]); i++)
		if (streq(children[i].name, name))
			_exit(children[i].fn(path, atoi(report)));
	_exit(3);
}
