/* SPDX-License-Identifier: MIT */
/*
 * The changes module itself (fs/undo/changes.c) in a real control server, without FUSE:
 * each call runs on a thread of its own and is answered from the server thread when done,
 * a failure with its code, message and data, a notification not at all, and the person's
 * methods are refused to an agent's socket by the table. A real view (fs/ctl/view.c) and a
 * real server (fs/ctl/server.c) over the harness's never mounted pw_fs (undo_harness.h);
 * the only stand-in is the view's hold on the active policy (the FUSE layer's would
 * invalidate the caches of a kernel that has no mount here), whose policy_installed is the
 * daemon's: pw_undo_policy_changed. Clients talk over the real socket.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctl/server.h"
#include "ctl/view.h"
#include "proto.h"
#include "undo/changes.h"
#include "undo/undo.h"
#include "undo_harness.h"

/* How long a test waits for a reply before calling it a failure (not a speed claim). */
#define DEADLINE_S 60

/* ---- the view's hold on the active policy (the stand-in for the FUSE layer's slot) ------ */

static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static pw_policy *slot_policy;
static uint64_t slot_gen;

static uint64_t slot_set(void *fs_ctx, pw_policy *p)
{
	pthread_mutex_lock(&slot_lock);
	pw_policy *old = slot_policy;
	slot_policy = pw_policy_ref(p);
	uint64_t g = ++slot_gen;
	pthread_mutex_unlock(&slot_lock);
	pw_policy_unref(old);
	return g;
}

static pw_policy *slot_get(void *fs_ctx, uint64_t *ret_gen)
{
	pthread_mutex_lock(&slot_lock);
	pw_policy *p = slot_policy ? pw_policy_ref(slot_policy) : NULL;
	if (ret_gen)
		*ret_gen = slot_gen;
	pthread_mutex_unlock(&slot_lock);
	return p;
}

static void no_stats(void *fs_ctx, pw_fs_stats *ret)
{
	*ret = (pw_fs_stats){0};
}

/* What daemon.c wires: the keep handle follows every policy the view installs. */
static void installed(void *fs_ctx, const pw_policy *p, const char *reason, bool new_set)
{
	pw_undo_policy_changed(pw_fs_undo(fs_ctx), p, reason, new_set);
}

static const pw_view_fs_ops slot_ops = {
    .set_policy = slot_set,
    .get_policy = slot_get,
    .get_stats = no_stats,
    .policy_installed = installed,
};

static pw_view *view;
static pw_ctl_server *srv;

static void setup(void)
{
	signal(SIGPIPE, SIG_IGN);
	uh_setup("changes-server", "build");
	pw_view_opts vo = {.project = W.project,
			   .mountpoint = W.mountpoint,
			   .fs_ops = &slot_ops,
			   .fs_ctx = &W.fs,
			   .owner_uid = getuid(),
			   .bundled_dir = SOURCE_MODES,
			   .initial_mode = "build"};
	cr_assert_eq(pw_view_new(&vo, &view), 0);
	char dir[300];
	snprintf(dir, sizeof(dir), "%s/run", W.tmp);
	const pw_ctl_use use[] = {{&pw_undo_changes_module, &W.fs}};
	pw_ctl_tuning tun = {.idle_timeout_ms = DEADLINE_S * 1000 * 10};
	cr_assert_eq(pw_ctl_server_start(view, dir, &tun, use, 1, &srv), 0);
}

static void teardown(void)
{
	pw_ctl_server_stop(srv);
	pw_view_free(view);
	pw_policy_unref(slot_policy);
	slot_policy = NULL;
	srv = NULL;
	view = NULL;
	uh_teardown();
}

TestSuite(server, .init = setup, .fini = teardown);

/* ---- a raw client ------------------------------------------------------------------------- */

static int connect_to(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0);
	cr_assert_lt(strlen(path), sizeof(sa.sun_path));
	strcpy(sa.sun_path, path);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect %s: %s", path,
		     strerror(errno));
	return fd;
}

static void send_line(int fd, const char *line)
{
	size_t len = strlen(line);
	while (len) {
		ssize_t n = send(fd, line, len, MSG_NOSIGNAL);
		cr_assert_gt(n, 0, "send: %s", strerror(errno));
		line += n;
		len -= (size_t)n;
	}
	cr_assert_eq(send(fd, "\n", 1, MSG_NOSIGNAL), 1);
}

/* The next message on FD, waited for up to the deadline. */
static json_t *read_msg(int fd)
{
	char buf[1 << 16];
	size_t len = 0;
	while (len + 1 < sizeof(buf)) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		cr_assert_eq(poll(&p, 1, DEADLINE_S * 1000), 1, "no reply within the deadline");
		ssize_t n = recv(fd, buf + len, 1, 0);
		cr_assert_eq(n, 1, "the server closed the connection");
		if (buf[len] == '\n')
			break;
		len++;
	}
	buf[len] = '\0';
	json_t *j = json_loads(buf, 0, NULL);
	cr_assert_not_null(j, "a JSON reply: %s", buf);
	return j;
}

/* Calls METHOD with PARAMS (NULL: none) as request ID; the reply. */
static json_t *call(int fd, int id, const char *method, const char *params)
{
	char line[4096];
	snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"%s\"%s%s}", id,
		 method, params ? ",\"params\":" : "", params ? params : "");
	send_line(fd, line);
	json_t *r = read_msg(fd);
	cr_assert_eq(json_integer_value(json_object_get(r, "id")), id, "the reply to call %d", id);
	return r;
}

static json_t *result(json_t *reply)
{
	json_t *res = json_object_get(reply, "result");
	char *text = json_dumps(reply, JSON_COMPACT);
	cr_assert_not_null(res, "a result: %s", text);
	free(text);
	return res;
}

static int error_code(json_t *reply)
{
	return (int)json_integer_value(json_object_get(json_object_get(reply, "error"), "code"));
}

static const char *error_message(json_t *reply)
{
	return json_string_value(json_object_get(json_object_get(reply, "error"), "message"));
}

static bool has_checkpoint(json_t *list, const char *name)
{
	size_t i;
	json_t *s;
	json_array_foreach(json_object_get(list, "changesets"), i, s)
	{
		const char *n = json_string_value(json_object_get(s, "name"));
		if (n && !strcmp(n, name))
			return true;
	}
	return false;
}

/* ---- the tests ---------------------------------------------------------------------------- */

Test(server, a_call_runs_off_the_server_thread_and_is_answered_when_done)
{
	int fd = connect_to(pw_ctl_server_socket_path(srv));
	json_t *r = call(fd, 1, "checkpoint", "{\"name\":\"c\"}");
	cr_assert_gt(json_integer_value(json_object_get(result(r), "changeset")), 0);
	json_decref(r);
	uh_write("README.md", "changed\n");
	r = call(fd, 2, "changes.list", NULL);
	char *kinds = uh_kinds(result(r));
	cr_assert_str_eq(kinds, "modified README.md\n");
	free(kinds);
	json_decref(r);
	r = call(fd, 3, "changes.diff", "{\"stat\":true}");
	cr_assert_eq(json_array_size(json_object_get(result(r), "files")), 1);
	json_decref(r);
	r = call(fd, 4, "changes.undo", "{\"all\":true}");
	char *summary = uh_summary(result(r));
	cr_assert_str_eq(summary, "restore README.md\n");
	free(summary);
	json_decref(r);
	char *back = uh_read("README.md");
	cr_assert_str_eq(back, "# demo\n");
	free(back);
	close(fd);
}

Test(server, a_failed_call_is_answered_with_its_code_message_and_data)
{
	int fd = connect_to(pw_ctl_server_socket_path(srv));
	json_decref(call(fd, 1, "checkpoint", NULL));
	uh_write("README.md", "through the view\n");
	uh_outside_write("README.md", "outside\n");
	json_t *r = call(fd, 2, "changes.undo", "{\"all\":true}");
	cr_assert_eq(error_code(r), PW_RPC_REFUSED);
	cr_assert_str_eq(error_message(r), "refused: changed outside the view since the view "
					   "changed it: README.md (--force to undo anyway)");
	json_t *c =
	    json_object_get(json_object_get(json_object_get(r, "error"), "data"), "conflicts");
	cr_assert_eq(json_array_size(c), 1);
	cr_assert_str_eq(json_string_value(json_array_get(c, 0)), "README.md");
	json_decref(r);
	r = call(fd, 3, "changes.diff", "{\"change_set\":\"1\"}");
	cr_assert_eq(error_code(r), PW_RPC_INVALID_PARAMS, "the table's check, before the job");
	json_decref(r);
	char *back = uh_read("README.md");
	cr_assert_str_eq(back, "outside\n");
	free(back);
	close(fd);
}

static pw_ctl_stats stats(void)
{
	pw_ctl_stats st;
	pw_ctl_server_get_stats(srv, &st);
	return st;
}

Test(server, a_notification_runs_and_is_not_answered)
{
	int fd = connect_to(pw_ctl_server_socket_path(srv));
	send_line(fd,
		  "{\"jsonrpc\":\"2.0\",\"method\":\"checkpoint\",\"params\":{\"name\":\"q\"}}");
	/* Its job ran and was reaped (the server thread answers a job in the turn that reaps
	 * it): a wait for the server's counters, with a deadline that turns a hang into a
	 * failure. */
	time_t t0 = time(NULL);
	pw_ctl_stats st;
	while (((st = stats()).jobs_started < 1 || st.jobs_running) && time(NULL) - t0 < DEADLINE_S)
		usleep(2000);
	cr_assert_eq(st.jobs_started, 1, "the notification ran as a job");
	cr_assert_eq(st.jobs_running, 0, "and ended within the deadline");
	/* so an answer to it would come before the next call's: the first reply read is the
	 * call's own (call() checks its id) */
	json_t *r = call(fd, 2, "changes.list", NULL);
	cr_assert(has_checkpoint(result(r), "q"), "the notification's checkpoint was made");
	json_decref(r);
	close(fd);
}

Test(server, an_agents_socket_is_refused_the_persons_methods)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/agent.sock", W.tmp);
	cr_assert_eq(pw_ctl_server_add_agent_socket(srv, path), 0);
	json_decref(uh_ok("checkpoint", NULL));
	uh_write("README.md", "changed\n");
	int fd = connect_to(path);
	json_t *r = call(fd, 1, "changes.undo", "{\"all\":true}");
	cr_assert_eq(error_code(r), PW_RPC_REFUSED);
	cr_assert_str_eq(error_message(r), PW_UNDO_REFUSED_UNDO);
	json_decref(r);
	r = call(fd, 2, "checkpoint", NULL);
	cr_assert_str_eq(error_message(r), PW_UNDO_REFUSED_CHECKPOINT);
	json_decref(r);
	r = call(fd, 3, "changes.prune", NULL);
	cr_assert_str_eq(error_message(r), PW_UNDO_REFUSED_PRUNE);
	json_decref(r);
	r = call(fd, 4, "changes.list", NULL);
	char *kinds = uh_kinds(result(r));
	cr_assert_str_eq(kinds, "modified README.md\n", "an agent may list");
	free(kinds);
	json_decref(r);
	char *back = uh_read("README.md");
	cr_assert_str_eq(back, "changed\n");
	free(back);
	close(fd);
}
