/* SPDX-License-Identifier: MIT */
/*
 * The control plane's authority: another uid, the agent socket that may only tighten, the
 * dispatch table of modules, an agent's flood against the person, and reload (a broken
 * active mode fails closed, an agent cannot loosen by reloading). ctl_harness.h: the fixture.
 */
#include "ctl_harness.h"

/* ---- authority ------------------------------------------------------------------------- */

/* The child of other_uid_refused, as uid 65534: a switch it asks for is refused, with its
 * uid named, and the connection closed. */
int other_uid_child(const char *path, int report)
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
	const char *agent_path = add_agent_socket("agent/ctl.sock");
	int owner = connect_main();
	int agent = connect_agent(agent_path);

	json_t *r = rpc(agent, "mode.set", "{\"mode\":\"build\"}");
	cr_assert_eq(error_code(r), PW_RPC_REFUSED);
	cr_assert(strstr(error_message(r), "piworkfs mode build"), "%s", error_message(r));
	json_decref(r);
	cr_assert_str_eq(active_mode(), "plan");

	rpc_ok(owner, "mode.set", "{\"mode\":\"build\"}");
	r = rpc(agent, "mode.set", "{\"mode\":\"plan\"}");
	cr_assert_str_eq(sget(result_of(r), "mode"), "plan");
	json_decref(r);
	cr_assert_str_eq(active_mode(), "plan");
	/* Reads are fine for the agent. */
	rpc_ok(agent, "status", NULL);
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

	const char *agent_path = add_agent_socket("agent/ctl.sock");
	int owner = connect_main(), agent = connect_agent(agent_path);
	json_t *r = rpc(owner, "test.echo", NULL);
	cr_assert_str_eq(sget(result_of(r), "data"), "the arg", "without init: the use's arg");
	json_decref(r);
	rpc_ok(owner, "test.person", NULL);
	rpc_ok(agent, "test.echo", NULL);
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
	int subscribed = 0, busy = 0, first = -1;

	const char *agent_path = add_agent_socket("agent.sock");
	int owner = connect_main();
	rpc_ok(owner, "mode.set", "{\"mode\":\"build\"}");
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
	json_t *r = read_msg(owner);
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
	rpc_ok(fd, "mode.set", "{\"mode\":\"build\"}");

	break_build(true);
	json_t *r = rpc(fd, "reload", NULL);
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
	rpc_ok(fd, "mode.set", "{\"mode\":\"plan\"}");
	r = rpc(fd, "status", NULL);
	cr_assert(json_is_false(json_object_get(result_of(r), "fail_closed")));
	cr_assert_str_eq(sget(result_of(r), "mode"), "plan");
	json_decref(r);
	close(fd);
}

Test(ctl, agent_reload_cannot_loosen)
{
	const char *agent_path = add_agent_socket("agent.sock");
	int fd = connect_main();
	rpc_ok(fd, "mode.set", "{\"mode\":\"build\"}");
	break_build(true);
	json_t *r = rpc(fd, "reload", NULL);
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
	rpc_ok(fd, "mode.set", "{\"mode\":\"design\"}");
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
