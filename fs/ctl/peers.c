/* SPDX-License-Identifier: MIT */
/* The other live views of a project, told that the approved plans changed (peers.h). */
#include "peers.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "procfs.h"
#include "proto.h"
#include "pw_limits.h"
#include "run_id.h"
#include "sockets.h"
#include "util.h"

/* ---- the calls, all at once ---------------------------------------------------------- */

/*
 * One view's plan.sync in flight. All of them share one deadline and one poll loop, so a
 * view that does not answer costs the approval PW_PLAN_SYNC_WAIT_MS once, however many
 * views there are, and never delays the others' answers.
 */
typedef struct peer_call {
	char *mountpoint, *run;
	char *path; /* its socket, while a full backlog makes us connect again */
	int fd;	    /* -1 once done */
	char *out;  /* the request line, and how much of it is still to send */
	size_t out_len, out_off;
	char *in; /* what the view answered so far */
	size_t in_len;
	json_t *result; /* its answer, once it came */
	int err;	/* 0, or why the call ended without one (-ECONNREFUSED: not serving) */
	char *msg;	/* the view's error message (err -EREMOTE) */
} peer_call;

static int64_t now_ms(void)
{
	return pw_clock_ns(CLOCK_MONOTONIC) / 1000000;
}

static void call_end(peer_call *c, int err)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	if (!c->result && !c->err)
		c->err = err;
}

/* Connects to C's socket without blocking. A socket file that is missing or that no daemon
 * listens on ends the call as not serving; a full backlog leaves it to connect again. */
static void call_connect(peer_call *c)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	if (strlen(c->path) >= sizeof(sa.sun_path))
		return call_end(c, -ECONNREFUSED);
	memcpy(sa.sun_path, c->path, strlen(c->path) + 1);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (c->fd < 0)
		return call_end(c, negative_errno());
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		free(TAKE_PTR(c->path));
		return;
	}
	int e = errno;
	close(c->fd);
	c->fd = -1;
	if (e == EAGAIN)
		return;
	call_end(c, e == ENOENT || e == ECONNREFUSED || e == ENOTSOCK ? -ECONNREFUSED : -e);
}

static bool call_waits_to_connect(const peer_call *c)
{
	return c->path && c->fd < 0 && !c->err && !c->result;
}

/* Sends what is left of the request. */
static void call_send(peer_call *c)
{
	while (c->fd >= 0 && c->out_off < c->out_len) {
		ssize_t k = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (k < 0)
			return call_end(c, errno == ECONNREFUSED || errno == ENOTCONN
					       ? -ECONNREFUSED
					       : negative_errno());
		c->out_off += (size_t)k;
	}
}

/* Reads what the view sent; ends the call at its answer (our id 1), or at its error. */
static void call_recv(peer_call *c)
{
	for (;;) {
		if (c->in_len >= PW_MSG_MAX)
			return call_end(c, -EBADMSG); /* plan.sync's answer is a few fields */
		ssize_t k = recv(c->fd, c->in + c->in_len, PW_MSG_MAX - c->in_len, 0);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (k <= 0)
			return call_end(c, k == 0 ? -EPIPE : negative_errno());
		c->in_len += (size_t)k;
		char *nl;
		while (c->fd >= 0 && (nl = memchr(c->in, '\n', c->in_len))) {
			size_t len = (size_t)(nl - c->in);
			pw_rpc_reply rep;
			int r = pw_rpc_parse_reply(c->in, len, &rep);
			memmove(c->in, nl + 1, c->in_len - len - 1);
			c->in_len -= len + 1;
			if (r < 0)
				return call_end(c, r);
			/* Notifications are not ours (we subscribed to nothing). An error with a
			 * null id is the server refusing the connection. */
			if (rep.kind == PW_RPC_REPLY_RESULT && json_integer_value(rep.id) == 1) {
				c->result = json_incref(rep.result);
				call_end(c, 0);
			} else if (rep.kind != PW_RPC_REPLY_NOTIFICATION) {
				c->msg = strdup(rep.error_message ? rep.error_message
								  : "an unexpected reply");
				call_end(c, -EREMOTE);
			}
			pw_rpc_reply_done(&rep);
		}
	}
}

/* Runs every call until each has ended or the deadline passed (then: -ETIMEDOUT), or
 * CANCEL_FD became readable (-ECANCELED). */
static void calls_run(peer_call *calls, size_t n, int cancel_fd)
{
	int64_t end = now_ms() + PW_PLAN_SYNC_WAIT_MS;

	for (;;) {
		struct pollfd p[PW_PLAN_PEERS_MAX + 1];
		size_t idx[PW_PLAN_PEERS_MAX], k = 0;
		int64_t left = end - now_ms();
		bool retry = false;

		for (size_t i = 0; i < n; i++) {
			if (call_waits_to_connect(&calls[i])) {
				if (left <= 0)
					call_end(&calls[i], -ETIMEDOUT);
				else
					call_connect(&calls[i]);
				retry = retry || call_waits_to_connect(&calls[i]);
			}
			if (calls[i].fd < 0)
				continue;
			p[k] = (struct pollfd){
			    .fd = calls[i].fd,
			    .events = calls[i].out_off < calls[i].out_len ? POLLOUT : POLLIN};
			idx[k++] = i;
		}
		if (k == 0 && !retry)
			return;
		int why = left <= 0 ? -ETIMEDOUT : 0;
		if (!why) {
			int wait = retry ? 10 : left > 1000 ? 1000 : (int)left;
			p[k] = (struct pollfd){.fd = cancel_fd, .events = POLLIN};
			int r = poll(p, k + (cancel_fd >= 0), wait);
			if (r < 0 && errno != EINTR)
				why = negative_errno();
			else if (cancel_fd >= 0 && r > 0 && p[k].revents)
				why = -ECANCELED;
		}
		for (size_t i = 0; why && i < n; i++)
			if (call_waits_to_connect(&calls[i]))
				call_end(&calls[i], why);
		for (size_t j = 0; j < k; j++) {
			peer_call *c = &calls[idx[j]];
			if (why)
				call_end(c, why);
			else if (p[j].revents & POLLOUT)
				call_send(c);
			else if (p[j].revents & (POLLIN | POLLHUP | POLLERR))
				call_recv(c);
		}
	}
}

static void call_done(peer_call *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->mountpoint);
	free(c->run);
	free(c->path);
	free(c->out);
	free(c->in);
	free(c->msg);
	json_decref(c->result);
}

/* ---- the views ----------------------------------------------------------------------- */

/* The user_id= of a FUSE mount's superblock options, or -1. */
static long mount_uid(const char *super)
{
	const char *u = super ? strstr(super, "user_id=") : NULL;

	while (u && u != super && u[-1] != ',')
		u = strstr(u + 1, "user_id=");
	return u ? strtol(u + 8, NULL, 10) : -1;
}

static bool is_peer(pw_view *v, const pw_mountinfo *m)
{
	return streq_ptr(m->fstype, "fuse.piworkfs") &&
	       streq_ptr(m->source, pw_view_info_of(v)->project) &&
	       !streq_ptr(m->mountpoint, pw_view_info_of(v)->mountpoint) &&
	       mount_uid(m->super_opts) == (long)pw_view_info_of(v)->owner;
}

/* Reads plan.sync's answer RES into an outcome and its reason (*ret_reason malloc'd or
 * NULL). */
static const char *outcome_of(const json_t *res, char **ret_reason)
{
	const char *why = json_string_value(json_object_get(res, "fail_reason"));

	if (json_is_false(json_object_get(res, "synced"))) {
		const char *db = json_string_value(json_object_get(res, "state_db"));
		*ret_reason = pw_dup_or_null(db);
		return "other-database";
	}
	if (json_is_true(json_object_get(res, "fail_closed"))) {
		*ret_reason = strdup(why ? why : "it fails closed");
		return "fails-closed";
	}
	if (json_is_false(json_object_get(res, "protects"))) {
		const char *mode = json_string_value(json_object_get(res, "mode"));
		if (asprintf(ret_reason, "mode %s protects nothing", mode ? mode : "?") < 0)
			*ret_reason = NULL;
		return "unprotected";
	}
	return "frozen";
}

/* C's outcome (peers.h), appended to ARR. */
static int outcome_json(const peer_call *c, json_t *arr)
{
	_cleanup_free_ char *reason = NULL;
	const char *outcome;

	if (c->result) {
		outcome = outcome_of(c->result, &reason);
	} else if (c->err == -ECONNREFUSED) {
		outcome = "not-serving";
	} else {
		outcome = "no-answer";
		reason = strdup(c->err == -EREMOTE && c->msg ? c->msg
				: c->err == -ETIMEDOUT	     ? "it did not answer in time"
							     : strerror(-c->err));
	}
	return json_array_append_new(arr, json_pack("{s:s,s:s?,s:s,s:s?}", "mountpoint",
						    c->mountpoint, "run", c->run, "outcome",
						    outcome, "reason", reason)) < 0
		   ? -ENOMEM
		   : 0;
}

/* Makes the call to the view at M's socket in SOCKET_DIR: its request, its connection. */
static int call_start(pw_view *v, const char *socket_dir, const pw_mountinfo *m, peer_call *c)
{
	json_t *id = json_integer(1), *req;
	int r;

	*c = (peer_call){.fd = -1,
			 .mountpoint = strdup(m->mountpoint),
			 .run = pw_ctl_run_of_mountpoint(m->mountpoint),
			 .in = malloc(PW_MSG_MAX)};
	req = id ? pw_rpc_request_new(id, "plan.sync",
				      json_pack("{s:s*}", "state_db", pw_view_info_of(v)->state_db))
		 : NULL;
	json_decref(id);
	r = req && c->mountpoint && c->in ? pw_rpc_serialize(req, PW_MSG_MAX, &c->out, &c->out_len)
					  : -ENOMEM;
	json_decref(req);
	if (r < 0)
		return r;
	r = pw_ctl_socket_path(socket_dir, m->mountpoint, &c->path);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		call_end(c, -ECONNREFUSED);
	else
		call_connect(c);
	return 0;
}

/* Views that could not be told at all, as one outcome without a mountpoint: "no-answer",
 * since any of them may still write the plan. */
static int unreached(json_t *arr, const char *why)
{
	return json_array_append_new(arr, json_pack("{s:n,s:n,s:s,s:s}", "mountpoint", "run",
						    "outcome", "no-answer", "reason", why)) < 0
		   ? -ENOMEM
		   : 0;
}

json_t *pw_ctl_peers_sync(pw_view *v, const char *socket_dir, int cancel_fd)
{
	peer_call calls[PW_PLAN_PEERS_MAX];
	pw_mountinfo *m = NULL;
	size_t n = 0, nc = 0, more = 0;
	json_t *arr = json_array();
	int r;

	if (!arr)
		return NULL;
	r = pw_mountinfo_read(PW_MOUNTINFO_LINES_MAX, &m, &n);
	if (r < 0) {
		r = unreached(arr, "the mount table could not be read, so the other views of the "
				   "project are unknown");
		return r < 0 ? (json_decref(arr), NULL) : arr;
	}
	for (size_t i = 0; i < n && r == 0; i++) {
		bool seen = false;
		if (!is_peer(v, &m[i]))
			continue;
		for (size_t j = 0; j < nc && !seen; j++)
			seen = streq(calls[j].mountpoint, m[i].mountpoint);
		if (seen)
			continue;
		if (nc == PW_PLAN_PEERS_MAX)
			more++;
		else
			r = call_start(v, socket_dir, &m[i], &calls[nc++]);
	}
	pw_mountinfo_free(m, n);
	if (r == 0 && more > 0) {
		char why[128];
		snprintf(why, sizeof(why),
			 "%zu more views of the project were not told (at most %d "
			 "are)",
			 more, PW_PLAN_PEERS_MAX);
		r = unreached(arr, why);
	}
	if (r == 0)
		calls_run(calls, nc, cancel_fd);
	for (size_t i = 0; i < nc; i++) {
		if (r == 0)
			r = outcome_json(&calls[i], arr);
		call_done(&calls[i]);
	}
	if (r < 0) {
		json_decref(arr);
		return NULL;
	}
	return arr;
}

bool pw_ctl_peers_unconfirmed(const json_t *arr)
{
	size_t i;
	const json_t *o;

	json_array_foreach(arr, i,
			   o) if (streq_ptr(json_string_value(json_object_get(o, "outcome")),
					    "no-answer")) return true;
	return false;
}
