/* SPDX-License-Identifier: MIT */
/*
 * The notifications: denied events rate-limited and, on an agent socket, only those of its
 * own sandbox; who switched, as an agent socket's subscriber learns it. ctl_harness.h: the
 * fixture.
 */
#include "ctl_harness.h"

/* ---- denied notifications -------------------------------------------------------------- */

/* The denial of a create of PATH by PID (of this user) in plan, read-only, as the FUSE layer
 * submits it. */
static pw_audit_event plan_denial(const char *path, pid_t pid)
{
	return (pw_audit_event){.mode = "plan",
				.generation = 1,
				.op = PW_OP_CREATE,
				.path = path,
				.err = EROFS,
				.reason = PW_REASON_READ_ONLY,
				.pid = pid,
				.uid = getuid()};
}

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
		pw_audit_event ev = plan_denial(path, getpid());
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
int inside_subscriber(const char *agent_path, int report)
{
	struct stat st;
	char line[4096];
	int fd, k;

	if (stat("/proc/self/ns/pid", &st) < 0) /* /proc is the parent's: our outer pid */
		return 10;
	k = subscribe_inside(agent_path, "[\"denied\"]", &fd);
	if (k)
		return k;
	snprintf(line, sizeof(line), "ready %llu\n", (unsigned long long)st.st_ino);
	if (write(report, line, strlen(line)) < 0)
		return 13;
	/* Every notification until the last event, each as "PATH PID". */
	for (;;) {
		json_t *n = read_notification(fd);
		if (!n)
			return 14;
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
	const char *agent_path = add_agent_socket("agent.sock");
	close(connect_agent(agent_path)); /* adopted */
	int op = connect_main();
	rpc_ok(op, "subscribe", "{\"events\":[\"denied\"]}");

	FILE *in;
	char line[4096];
	unsigned long long ino = 0;
	pid_t helper = start_inside("subscriber", agent_path, &in, line, sizeof(line));
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
		pw_audit_event ev = plan_denial(evs[i].path, evs[i].pid);
		ev.pidns = evs[i].pidns;
		pw_audit_submit(audit, &ev);
	}

	/* What the subscriber inside heard, in order. */
	char heard[1024];
	finish_inside(helper, in, heard, sizeof(heard), "subscriber");
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
int inside_switch_watcher(const char *agent_path, int report)
{
	static const char set[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"mode.set\","
				  "\"params\":{\"mode\":\"plan\"}}\n";
	char line[512], self[32] = "", *l;
	int fd, sw, k;

	/* /proc is the parent's: /proc/self names our pid outside. */
	if (readlink("/proc/self", self, sizeof(self) - 1) < 0)
		return 10;
	k = subscribe_inside(agent_path, "[\"mode.changed\"]", &fd);
	if (k)
		return k;
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
		json_t *msg = read_notification(fd);
		if (!msg)
			return 16;
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
	const char *agent_path = add_agent_socket("agent.sock");
	close(connect_agent(agent_path)); /* adopted */
	int watch = connect_main(), sw = connect_main();
	rpc_ok(watch, "subscribe", "{\"events\":[\"mode.changed\"]}");

	FILE *in;
	char line[512];
	long outer = 0;
	pid_t helper = start_inside("switch_watcher", agent_path, &in, line, sizeof(line));
	cr_assert_eq(sscanf(line, "ready %ld", &outer), 1, "%s", line);

	/* The person switches from outside; the watcher then switches from inside. */
	rpc_ok(sw, "mode.set", "{\"mode\":\"build\"}");
	char heard[1024];
	finish_inside(helper, in, heard, sizeof(heard), "watcher");
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
