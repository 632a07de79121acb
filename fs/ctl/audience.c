/* SPDX-License-Identifier: MIT */
/*
 * What an agent client of the control server may be told (server_internal.h): its sandbox,
 * the PID namespace learned when it connects; the denials of processes in it only; of a
 * switch, who made it only when that process is in it; and denied notifications at a
 * bounded rate (a token bucket). An operator client is told everything.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "server.h"
#include "server_internal.h"
#include "util.h"

/* An agent client's PID namespace, from its pid (alive: it is connected). */
void pw_ctl_client_learn_ns(pw_ctl_client *c)
{
	char desc[PW_PIDNS_DESC_MAX];
	pw_pidns_level levels[PW_PIDNS_DEPTH_MAX];
	int n;

	c->since_ns = pw_clock_ns(CLOCK_REALTIME);
	if (pw_pidns_describe(c->peer.pid, desc, sizeof(desc)) < 0)
		return;
	n = pw_pidns_parse(desc, levels, ELEMENTSOF(levels));
	if (n < 0)
		return;
	c->ns_level = (size_t)n;
	c->ns_ino = n > 0 ? levels[n - 1].ino : 0;
	c->ns_known = true;
}

/*
 * Whether denial PARAMS (with the process's PID namespaces PIDNS) is for client C: every
 * denial is for an operator client; an agent client gets those of processes in its own
 * sandbox, submitted since it connected, with *ret_pid the pid as seen inside.
 */
bool pw_ctl_denial_for(const pw_ctl_client *c, json_t *params, const char *pidns, pid_t *ret_pid)
{
	pid_t pid = (pid_t)json_integer_value(json_object_get(params, "pid"));

	*ret_pid = pid;
	if (!c->peer.restricted)
		return true;
	if (!c->ns_known)
		return false;
	if (json_integer_value(json_object_get(params, "time_ns")) < c->since_ns)
		return false;
	return pw_pidns_inside(pidns, pid, c->ns_level, c->ns_ino, ret_pid);
}

/*
 * What an agent client C may learn of who made a switch (mode.changed PARAMS; PIDNS: the
 * switcher's PID namespaces, NULL when unknown): of a process in its own sandbox, its pid
 * as seen there, its uid and name; of anyone else (the person's terminal, a signal, the
 * daemon itself, another sandbox, a process gone before it could be placed) only the origin.
 * An operator client learns everything, unchanged.
 */
void pw_ctl_switcher_for(const pw_ctl_client *c, json_t *params, const char *pidns)
{
	pid_t outer = (pid_t)json_integer_value(json_object_get(params, "pid")), pid;

	if (!c->peer.restricted)
		return;
	if (c->ns_known && outer > 0 &&
	    pw_pidns_inside(pidns, outer, c->ns_level, c->ns_ino, &pid)) {
		json_object_set_new(params, "pid", json_integer(pid));
		return;
	}
	json_object_del(params, "pid");
	json_object_del(params, "uid");
	json_object_del(params, "comm");
}

bool pw_ctl_take_token(pw_ctl_server *s, pw_ctl_client *c, int64_t now)
{
	double rate = s->tun.denied_per_sec;

	c->tokens += (now - c->tokens_ms) * rate / 1000.0;
	if (c->tokens > rate)
		c->tokens = rate;
	c->tokens_ms = now;
	if (c->tokens < 1.0)
		return false;
	c->tokens -= 1.0;
	return true;
}
