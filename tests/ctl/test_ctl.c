/* SPDX-License-Identifier: MIT */
/*
 * The control plane over raw sockets: a view over a temp project, the control server on a
 * temp socket dir, no FUSE. Every method, the hostile clients (malformed JSON, wrong types,
 * unknown methods, a 100 MiB line, a client that never reads, one that never writes, 300
 * connections, a disconnect mid-request) while a normal client must still be answered.
 * Authority and reload are test_ctl_authority.c's, the notifications test_ctl_notify.c's,
 * the calls that take time test_ctl_jobs.c's; the harness they share, ctl_harness.h.
 *
 * No test here asserts on wall-clock time or guesses how long the server thread needs:
 * each waits for a condition (a reply, an EOF, one of the server's own counters) with a
 * generous deadline (DEADLINE_MS), so a loaded machine makes a test slower, never red.
 * The suite's idle timeout is long for the same reason; the tests of the idle timeout
 * restart the server with a short one.
 *
 * Fixture tree (per test, under a fresh pwctl-XXXXXX: tests/lib/testdir.h says where):
 *   proj/                  the project (untrusted)
 *     src/a.c
 *     docs/design/spec.md
 *     .piworkfs/modes/     created by the reload tests (a broken build.md)
 *   global/                the global config dir (empty)
 *   run/                   the socket dir
 *   state.db               state and audit database
 */
#include "ctl_harness.h"

TestSuite(ctl, .init = setup, .fini = stop_view, .timeout = 120);

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
	rpc_ok(fd, "status", NULL);
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
 * client is done (at most SWITCHES_MAX each). 120 rounds: each meets thousands of switches,
 * and 400 made this test most of the unit suite's wall time (10 s of a round on a loaded
 * 2-CPU machine), which a `meson test --suite unit --repeat 3` under a time limit ran out of.
 */
#define RACE_ROUNDS 120
#define SWITCHES_MAX 20000
#define RACE_LOG (2 * SWITCHES_MAX + 2 * RACE_ROUNDS + 16)

typedef struct race_switcher {
	const char *modes[2];
	atomic_bool *stop;
	unsigned switches, failures, disagreements;
} race_switcher;

static char race_log[RACE_LOG][16];

/* The switchers of the running race test, static so that its fini can stop them: a failed
 * assertion ends the test body at once, and the suite's fini frees the view they switch. */
static atomic_bool race_stop;
static pthread_t race_threads[2];
static int race_started;

static void stop_racers(void)
{
	atomic_store(&race_stop, true);
	while (race_started > 0)
		pthread_join(race_threads[--race_started], NULL);
	pthread_mutex_lock(&fake_fs.lock);
	fake_fs.log = NULL;
	pthread_mutex_unlock(&fake_fs.lock);
}

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

Test(ctl, replies_pair_mode_and_generation_of_one_switch, .timeout = 240, .fini = stop_racers)
{
	static race_switcher rs[2] = {
	    {.modes = {"design", "build"}, .stop = &race_stop},
	    {.modes = {"review", "discuss"}, .stop = &race_stop},
	};
	unsigned bad = 0, checked = 0;

	pthread_mutex_lock(&fake_fs.lock);
	fake_fs.log_base = fake_fs.generation;
	fake_fs.log_len = RACE_LOG;
	snprintf(race_log[0], sizeof(race_log[0]), "%s", pw_policy_mode_name(fake_fs.active));
	fake_fs.log = race_log;
	pthread_mutex_unlock(&fake_fs.lock);

	int fd = connect_main();
	for (; race_started < 2; race_started++)
		cr_assert_eq(pthread_create(&race_threads[race_started], NULL, race_switch,
					    &rs[race_started]),
			     0);
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
	stop_racers();
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

/* Restarts the server with the short idle timeout; returns a connection subscribed to
 * mode.changed, which that timeout spares (subscribers are exempt). */
static int subscriber_under_short_idle(void)
{
	pw_ctl_tuning tun = {.idle_timeout_ms = SHORT_IDLE_MS};
	restart_server(&tun);
	return connect_and_call("subscribe", "{\"events\":[\"mode.changed\"]}");
}

/* SILENT is closed by the idle timeout (WHAT in the failure), which the server counts, while
 * SUBSCRIBER is still served. */
static void assert_dropped_idle(int silent, int subscriber, const char *what)
{
	cr_assert(wait_closed(silent), "%s", what);
	cr_assert_geq(stats().dropped_idle, 1);
	assert_served(subscriber);
}

Test(ctl, subscribe_gets_mode_changed)
{
	int a = subscriber_under_short_idle();
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
	assert_dropped_idle(control, a, "the idle timeout closes a silent client");
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
	/* The normal client subscribes, so the short idle timeout spares it. */
	int normal = subscriber_under_short_idle();
	int idle = connect_main();
	/* Half a request, then silence. The idle timeout runs from the accept: if this thread
	 * was held up longer than it, the server dropped the client already and the send fails
	 * (EPIPE, ECONNRESET), which is the drop this test checks. */
	static const char half[] = "{\"jsonrpc\":\"2.0\",\"id\":1,";
	ssize_t n = send(idle, half, sizeof(half) - 1, MSG_NOSIGNAL);
	cr_assert(n > 0 || errno == EPIPE || errno == ECONNRESET, "send: %s", strerror(errno));
	assert_served(normal);
	assert_dropped_idle(idle, normal, "idle client closed");
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
