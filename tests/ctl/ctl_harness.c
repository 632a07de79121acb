/* SPDX-License-Identifier: MIT */
/*
 * The harness of test_ctl (ctl_harness.h says what it holds).
 */
#include "ctl_harness.h"
#include "../lib/fixture_tree.h"
#include "../lib/testdir.h"

/* ---- TEST DOUBLE of the FUSE layer, handed to the view as its pw_view_fs_ops --------- */

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

pw_policy *fake_get_policy(void *ctx, uint64_t *ret_generation)
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

const pw_view_fs_ops fake_ops = {
    .set_policy = fake_set_policy,
    .get_policy = fake_get_policy,
    .get_stats = fake_get_stats,
    .policy_installed = fake_policy_installed,
};
/* ---- end of the test double ------------------------------------------------------------ */

char tmp[64], proj[128], mnt[128], global[128], rundir[128], dbpath[128];
fake_fs_t fake_fs = {.lock = PTHREAD_MUTEX_INITIALIZER};
pw_state *state;
pw_audit *audit;
pw_view *view;
pw_ctl_server *srv;
const char *sock;

/* What the daemon serves, but the changes methods, which need the FUSE layer (changes.h). */
const pw_ctl_use modules[N_MODULES] = {
    {&pw_ctl_methods_module, NULL},
    {&pw_ctl_request_module, NULL},
};

void writefile(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

void start_view(const char *initial, bool with_audit)
{
	testdir_make(tmp, sizeof(tmp), "pwctl");
	snprintf(proj, sizeof(proj), "%s/proj", tmp);
	snprintf(mnt, sizeof(mnt), "%s/mnt", tmp);
	snprintf(global, sizeof(global), "%s/global", tmp);
	snprintf(rundir, sizeof(rundir), "%s/run", tmp);
	snprintf(dbpath, sizeof(dbpath), "%s/state.db", tmp);
	fixture_dir(tmp, "proj", 0755);
	fixture_files(proj, (const char *const[]){"src/a.c", "int x;\n", NULL});
	fixture_dir(proj, "docs", 0755);
	fixture_dir(proj, "docs/design", 0755);
	fixture_dir(tmp, "global", 0755);

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

void restart_server_with(const pw_ctl_tuning *tun, const pw_ctl_use *uses, size_t n)
{
	pw_ctl_server_stop(srv);
	srv = NULL;
	cr_assert_eq(pw_ctl_server_start(view, rundir, tun, uses, n, &srv), 0);
	sock = pw_ctl_server_socket_path(srv);
}

/* Replaces the server with one using TUN (the view stays). */
void restart_server(const pw_ctl_tuning *tun)
{
	restart_server_with(tun, modules, ELEMENTSOF(modules));
}

void stop_view(void)
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
	testdir_remove(tmp);
}

void setup(void)
{
	signal(SIGPIPE, SIG_IGN);
	start_view(NULL, false);
}

/* ---- a tiny raw client ----------------------------------------------------------------- */

int connect_to(const char *path)
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

int connect_main(void)
{
	int fd = connect_to(sock);
	cr_assert_geq(fd, 0, "connect: %s", strerror(-fd));
	return fd;
}

void send_all(int fd, const char *s)
{
	size_t len = strlen(s);
	while (len > 0) {
		ssize_t n = send(fd, s, len, MSG_NOSIGNAL);
		cr_assert_gt(n, 0, "send: %s", strerror(errno));
		s += n;
		len -= n;
	}
}

/* recv(2), again after a signal (SIGCHLD: bash.check's worker is a child of this process). */
static ssize_t recv_retry(int fd, char *buf, size_t len, int flags)
{
	ssize_t n;
	do
		n = recv(fd, buf, len, flags);
	while (n < 0 && errno == EINTR);
	return n;
}

/* Reads one line (up to 2 MiB) from socket FD, or returns NULL on EOF/timeout/error. What
 * follows the line stays in the socket: each chunk is peeked at first, and only up to the
 * newline taken (reading a byte at a time did the same at a system call per byte, a sixth of
 * the unit suite's time). */
char *read_line(int fd)
{
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	static _Thread_local char chunk[64 * 1024];
	for (;;) {
		ssize_t n = recv_retry(fd, chunk, sizeof(chunk), MSG_PEEK);
		if (n <= 0)
			break;
		char *nl = memchr(chunk, '\n', (size_t)n);
		size_t take = nl ? (size_t)(nl - chunk) + 1 : (size_t)n;
		if (recv_retry(fd, chunk, take, 0) != (ssize_t)take)
			break;
		size_t data = nl ? take - 1 : take;
		if (len + data + 1 > 2 * 1024 * 1024)
			break;
		while (len + data + 1 > cap)
			buf = realloc(buf, cap *= 2);
		memcpy(buf + len, chunk, data);
		len += data;
		if (nl) {
			buf[len] = 0;
			return buf;
		}
	}
	free(buf);
	return NULL;
}

/*
 * A child that must do more than async-signal-safe calls (connect, read a line, parse JSON)
 * is this test binary executed again, never a bare fork: a fork of this multithreaded
 * process (the server's threads run) may only call async-signal-safe functions until it
 * execs, and under AddressSanitizer a forked child can wait for good on an allocator lock
 * another thread held at the fork. The environment is built before the fork; the
 * constructor at the end of this file runs the named child and exits before Criterion.
 */

void child_env(struct child_env *ce, const char *name, const char *path, int report)
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
_Noreturn void exec_child(const struct child_env *ce)
{
	static char *const argv[] = {"test_ctl", NULL};
	if (ce->report_fd >= 0 && fcntl(ce->report_fd, F_SETFD, 0) < 0)
		_exit(6);
	execve("/proc/self/exe", argv, ce->envp);
	_exit(7);
}

pid_t start_inside(const char *name, const char *agent_path, FILE **ret_in, char *ready,
		   size_t size)
{
	int pfd[2];
	cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
	struct child_env ce;
	child_env(&ce, name, agent_path, pfd[1]);
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
	cr_assert_not_null(fgets(ready, (int)size, in), "the %s inside never got ready", name);
	cr_assert(startswith(ready, "ready "), "%s: %s", name, ready);
	*ret_in = in;
	return helper;
}

void finish_inside(pid_t helper, FILE *in, char *heard, size_t size, const char *who)
{
	char line[4096];
	int status;

	heard[0] = '\0';
	while (fgets(line, sizeof(line), in))
		strncat(heard, line, size - strlen(heard) - 1);
	fclose(in);
	cr_assert_eq(waitpid(helper, &status, 0), helper);
	cr_assert(WIFEXITED(status));
	cr_assert_eq(WEXITSTATUS(status), 0, "%s inside: status %d; heard:\n%s", who,
		     WEXITSTATUS(status), heard);
}

int subscribe_inside(const char *agent_path, const char *events, int *ret_fd)
{
	char sub[256];
	int fd;

	snprintf(sub, sizeof(sub),
		 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"subscribe\","
		 "\"params\":{\"events\":%s}}\n",
		 events);
	fd = connect_to(agent_path);
	if (fd < 0 || send(fd, sub, strlen(sub), MSG_NOSIGNAL) != (ssize_t)strlen(sub))
		return 11;
	char *l = read_line(fd);
	bool ok = l && strstr(l, "\"result\"");
	free(l);
	if (!ok)
		return 12;
	*ret_fd = fd;
	return 0;
}

json_t *read_notification(int fd)
{
	char *l = read_line(fd);
	if (!l)
		return NULL;
	json_t *j = json_loads(l, 0, NULL);
	free(l);
	return j;
}

json_t *read_msg(int fd)
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
json_t *rpc(int fd, const char *method, const char *params)
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

json_t *result_of(json_t *reply)
{
	json_t *res = json_object_get(reply, "result");
	cr_assert_not_null(res, "expected a result: %s", json_dumps(reply, 0));
	return res;
}

void rpc_ok(int fd, const char *method, const char *params)
{
	json_t *r = rpc(fd, method, params);
	result_of(r);
	json_decref(r);
}

int error_code(json_t *reply)
{
	json_t *e = json_object_get(reply, "error");
	cr_assert_not_null(e, "expected an error: %s", json_dumps(reply, 0));
	return (int)json_integer_value(json_object_get(e, "code"));
}

const char *error_message(json_t *reply)
{
	return json_string_value(json_object_get(json_object_get(reply, "error"), "message"));
}

const char *sget(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

const char *active_mode(void)
{
	pw_policy *p = fake_get_policy(&fake_fs, NULL);
	static char name[64];
	snprintf(name, sizeof(name), "%s", pw_policy_mode_name(p));
	pw_policy_unref(p);
	return name;
}

int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

pw_ctl_stats stats(void)
{
	pw_ctl_stats st;
	pw_ctl_server_get_stats(srv, &st);
	return st;
}

/* A normal client must still get `status` answered whatever else is going on. */
void assert_served(int fd)
{
	json_t *r = rpc(fd, "status", NULL);
	cr_assert_not_null(json_object_get(r, "result"), "status: %s", json_dumps(r, 0));
	json_decref(r);
}

/* Waits for FD to be closed by the server: true on EOF or ECONNRESET within the deadline.
 * Lines still queued before the close are skipped. */
bool wait_closed(int fd)
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
int connect_and_call(const char *method, const char *params)
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
const char *add_agent_socket(const char *name)
{
	static char path[256];

	snprintf(path, sizeof(path), "%s/%s", tmp, name);
	cr_assert_eq(pw_ctl_server_add_agent_socket(srv, path), 0, "agent socket %s", path);
	return path;
}

int connect_agent(const char *path)
{
	int fd = -1;
	cr_assert(WAIT_UNTIL((fd = connect_to(path)) >= 0), "connect %s: %s", path, strerror(-fd));
	return fd;
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
