/* SPDX-License-Identifier: MIT */
/*
 * Calls that take time: the agents' pool and the person's (server.h), bounded, never
 * delaying the person, cancelled at stop. ctl_harness.h: the fixture.
 */
#include "ctl_harness.h"

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

/* Replaces the server with one serving the methods and test.hold, tuned by TUN (NULL: the
 * defaults), with no job holding and hold_release open. */
static void start_hold_server(const pw_ctl_tuning *tun)
{
	static const pw_ctl_use uses[] = {{&pw_ctl_methods_module, NULL}, {&hold_module, NULL}};

	cr_assert_eq(pipe2(hold_release, O_CLOEXEC), 0);
	atomic_store(&holding, 0);
	restart_server_with(tun, uses, ELEMENTSOF(uses));
}

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
	start_hold_server(&(pw_ctl_tuning){.idle_timeout_ms = LONG_IDLE_MS});
	const char *agent_path = add_agent_socket("agent/ctl.sock");
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
	rpc_ok(c, "status", NULL); /* answered after the notifications were handled */
	cr_assert_eq(stats().agent_jobs_refused, refused + 6);
	cr_assert_eq(atomic_load(&holding), 4, "no notification ran beyond the pool");

	/* The person is answered while every agent job still holds, and has a pool of their
	 * own: their bash.check and their own jobs run now. */
	r = rpc(person, "status", NULL);
	cr_assert_eq(
	    json_integer_value(json_object_get(json_object_get(result_of(r), "jobs"), "agent")), 4);
	json_decref(r);
	rpc_ok(person, "mode.set", "{\"mode\":\"build\"}");
	rpc_ok(person, "bash.check", "{\"command\":\"echo hi > src/x.c\"}");
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
	start_hold_server(NULL);
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
