/* SPDX-License-Identifier: MIT */
/*
 * The control socket transport: sockets, clients, framing, and the pw_ctl_modules_dispatch over the
 * method tables of the modules it was started with (ctl/server.h has the contract; ctl/methods.c,
 * ctl/request.c and undo/changes.c the tables, which the daemon hands to
 * pw_ctl_server_start). This file names no module.
 *
 * Why it is built this way: the daemon must keep serving the filesystem whatever a client
 * does, and a mode switch must be answered promptly even while other clients misbehave.
 * So one thread owns every control socket and never blocks on a client (a switch it serves
 * waits for its own work only: the kernel's cached write bits, at most 2 s, fs/switch.c,
 * and the originals store's lock, fs/undo/keep.c): all sockets are non-blocking,
 * one poll() loop waits on the listening sockets, the clients and an eventfd that other
 * threads use to wake it (audit events, view changes, reload requests, new agent sockets,
 * stop). Every resource a client can make us hold is bounded: its input line (PW_MSG_MAX),
 * its pending output (out_max; overflow drops the client), its silence (idle timeout), the
 * number of clients. Requests are handled in arrival order, one line at a time, and the
 * reply is queued before the next line is looked at.
 *
 * Connection limits are per listening socket: the operator's main socket has
 * PW_CLIENTS_MAX slots, each agent socket PW_AGENT_CLIENTS_MAX of its own, and the client
 * table has room for all of them at once. So an agent that keeps its socket full (its
 * subscribers are exempt from the idle timeout) is refused on its own socket and can never
 * take a slot from the person outside: `piworkfs mode plan` always gets in.
 *
 * Denied notifications come from the audit writer thread through a static hub table (so
 * that a callback racing with pw_ctl_server_stop never touches freed memory), are queued in
 * a bounded ring and fanned out here, rate-limited per subscriber by a token bucket.
 *
 * The loop is this file's; what it asks of others is behind server_internal.h: listen.c
 * binds a socket, modules.c holds the modules' tables and hooks and dispatches a call,
 * audience.c decides what an agent client may be told.
 */
#include "server.h"
#include "server_internal.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "store/audit.h"
#include "store/db.h"
#include "pw_limits.h"
#include "pidns.h"
#include "procfs.h"
#include "proto.h"
#include "events.h"
#include "jobs.h"
#include "report.h"
#include "util.h"

#define DEFAULT_IDLE_MS 30000u
#define DEFAULT_DENIED_PER_SEC 50u
#define ACCEPT_BURST 64 /* accepts per loop turn, so clients are served meanwhile */
#define READ_CHUNK 65536

static uint64_t new_serial(pw_ctl_server *s)
{
	uint64_t v;

	pthread_mutex_lock(&s->lock);
	v = ++s->next_serial;
	pthread_mutex_unlock(&s->lock);
	return v;
}

static void wake(pw_ctl_server *s)
{
	uint64_t one = 1;
	ssize_t n = write(s->wake_fd, &one, sizeof(one));
	(void)n; /* EAGAIN: already awake */
}

/* ---- clients --------------------------------------------------------------------------- */

static void client_free(pw_ctl_client *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c->in);
	free(c->out);
	free(c);
}

/* Queues LEN bytes for C. Returns false when C's output bound is exceeded (drop it). */
static bool client_queue(pw_ctl_server *s, pw_ctl_client *c, const char *buf, size_t len)
{
	size_t pending = c->out_len - c->out_off;

	if (pending + len > s->tun.out_max)
		return false;
	if (c->out_off > 0 && c->out_len + len > c->out_cap) {
		memmove(c->out, c->out + c->out_off, pending);
		c->out_len = pending;
		c->out_off = 0;
	}
	if (c->out_len + len > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		while (cap < c->out_len + len)
			cap *= 2;
		char *n = realloc(c->out, cap);
		if (!n)
			return false;
		c->out = n;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, buf, len);
	c->out_len += len;
	return true;
}

/* Serializes and queues MSG (stolen). False: drop the client. */
static bool client_send(pw_ctl_server *s, pw_ctl_client *c, json_t *msg)
{
	_cleanup_free_ char *line = NULL;
	size_t len;
	bool ok;
	int r;

	if (!msg)
		return false;
	r = pw_rpc_serialize(msg, PW_RPC_REPLY_MAX, &line, &len);
	if (r == -E2BIG) {
		json_t *id = json_object_get(msg, "id");
		json_t *err =
		    pw_rpc_error_reply(id, PW_RPC_INTERNAL_ERROR,
				       "reply exceeds PW_RPC_REPLY_MAX; ask for less", NULL);
		json_decref(msg);
		return client_send(s, c, err);
	}
	json_decref(msg);
	if (r < 0)
		return false;
	ok = client_queue(s, c, line, len);
	if (!ok) {
		pthread_mutex_lock(&s->lock);
		s->stats.dropped_slow++;
		pthread_mutex_unlock(&s->lock);
	}
	return ok;
}

static bool send_error(pw_ctl_server *s, pw_ctl_client *c, json_t *id, int code,
		       const char *message, json_t *data)
{
	return client_send(s, c, pw_rpc_error_reply(id, code, message, data));
}

/* ---- the modules: their tables and hooks ---------------------------------------------- */

/* Handles one complete line. False: drop the client now. */
static bool handle_line(pw_ctl_server *s, pw_ctl_client *c, const char *line, size_t len)
{
	pw_rpc_request req;
	pw_rpc_error perr;
	json_t *result = NULL;
	pw_ctl_fail fail = {};
	bool ok;
	int r;

	if (len > 0 && line[len - 1] == '\r') /* tolerate CRLF framing */
		len--;
	r = pw_rpc_parse_request(line, len, &req, &perr);
	if (r == -ENOMEM)
		return false;
	if (r < 0) {
		ok = send_error(s, c, perr.id, perr.code, perr.message, NULL);
		pw_rpc_request_done(&req);
		return ok;
	}
	c->cur_id = req.id;
	c->deferred = false;
	r = pw_ctl_modules_dispatch(s, c, req.method, req.params, &result, &fail);
	c->cur_id = NULL;
	if (r == PW_CTL_DEFERRED) { /* answered later (pw_ctl_server_reply) */
		pw_rpc_request_done(&req);
		return true;
	}
	if (!req.id) { /* a notification: executed, never answered */
		json_decref(result);
		free(fail.message);
		json_decref(fail.data);
		pw_rpc_request_done(&req);
		return true;
	}
	if (r == 0)
		ok = client_send(s, c, pw_rpc_result_reply(req.id, result));
	else
		ok = send_error(s, c, req.id, fail.code, fail.message, fail.data);
	free(fail.message);
	pw_rpc_request_done(&req);
	return ok;
}

/* Reads what is available and handles every complete line. False: drop the client. */
static bool client_read(pw_ctl_server *s, pw_ctl_client *c)
{
	ssize_t n;

	if (!c->in) {
		c->in = malloc(PW_MSG_MAX + 2);
		if (!c->in)
			return false;
	}
	/* Room for one more byte than a message may have: seeing it proves the excess. */
	n = read(c->fd, c->in + c->in_len, PW_MSG_MAX + 1 - c->in_len);
	if (n == 0)
		return false; /* peer closed; a request cut in the middle is simply dropped */
	if (n < 0)
		return errno == EAGAIN || errno == EINTR;
	c->last_ms = pw_clock_ms(CLOCK_MONOTONIC);
	c->in_len += n;

	size_t start = 0;
	for (;;) {
		char *nl = memchr(c->in + start, '\n', c->in_len - start);
		if (!nl)
			break;
		size_t len = nl - (c->in + start);
		if (!handle_line(s, c, c->in + start, len))
			return false;
		start += len + 1;
		if (c->closing)
			return true;
	}
	memmove(c->in, c->in + start, c->in_len - start);
	c->in_len -= start;
	if (c->in_len > PW_MSG_MAX) {
		pthread_mutex_lock(&s->lock);
		s->stats.dropped_large++;
		pthread_mutex_unlock(&s->lock);
		c->closing = true;
		c->in_len = 0;
		return send_error(s, c, NULL, PW_RPC_TOO_LARGE,
				  "message exceeds PW_MSG_MAX (65536) bytes; closing", NULL);
	}
	return true;
}

/* Writes what is pending. False: drop the client. */
static bool client_write(pw_ctl_client *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		c->out_off += n;
		c->last_ms = pw_clock_ms(CLOCK_MONOTONIC);
	}
	c->out_off = c->out_len = 0;
	return true;
}

static void close_owned_sockets(pw_ctl_server *s, uint64_t owner);

static void drop_client(pw_ctl_server *s, size_t i)
{
	listener *l = &s->listeners[s->clients[i]->listener];

	if (!s->clients[i]->peer.restricted)
		close_owned_sockets(s, s->clients[i]->serial);

	l->n_clients--;
	pthread_mutex_lock(&s->lock);
	s->stats.clients--;
	if (l->restricted)
		s->stats.agent_clients--;
	pthread_mutex_unlock(&s->lock);
	client_free(s->clients[i]);
	s->clients[i] = s->clients[--s->n_clients];
	s->clients[s->n_clients] = NULL;
}

/* Best effort: one error line on a fresh socket we are about to close. */
static void refuse_fd(int fd, int code, const char *message)
{
	_cleanup_free_ char *line = NULL;
	size_t len;
	json_t *msg = pw_rpc_error_reply(NULL, code, message, NULL);

	if (msg && pw_rpc_serialize(msg, PW_MSG_MAX, &line, &len) == 0) {
		ssize_t n = send(fd, line, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		(void)n;
	}
	json_decref(msg);
}

static void accept_clients(pw_ctl_server *s, size_t li)
{
	listener *l = &s->listeners[li];

	for (int i = 0; i < ACCEPT_BURST; i++) {
		struct ucred cred;
		socklen_t len = sizeof(cred);
		pw_ctl_client *c;
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return; /* EAGAIN, or a transient error (EMFILE): retry next turn */
		/* This socket's own limit; the table has room for every socket's (asserted by
		 * PW_CTL_CLIENTS_TOTAL_MAX), so one socket's clients never take another's slots. */
		if (l->n_clients >= l->max_clients || s->n_clients >= PW_CTL_CLIENTS_TOTAL_MAX) {
			pthread_mutex_lock(&s->lock);
			s->stats.refused_busy++;
			if (l->restricted)
				s->stats.refused_busy_agent++;
			pthread_mutex_unlock(&s->lock);
			refuse_fd(fd, PW_RPC_BUSY,
				  l->restricted
				      ? "too many connections on this agent socket "
					"(PW_AGENT_CLIENTS_MAX); try again"
				      : "too many connections (PW_CLIENTS_MAX); try again");
			close(fd);
			continue;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
			close(fd);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			return;
		}
		c->fd = fd;
		c->listener = li;
		c->listener_serial = l->serial;
		c->serial = new_serial(s);
		c->peer.pid = cred.pid;
		c->peer.uid = cred.uid;
		c->peer.gid = cred.gid;
		c->peer.restricted = l->restricted;
		c->needs_target = l->needs_target;
		c->peer.origin = l->restricted ? "agent-socket" : "socket";
		pw_proc_comm(cred.pid, c->peer.comm, sizeof(c->peer.comm));
		if (l->restricted)
			pw_ctl_client_learn_ns(c);
		c->last_ms = c->tokens_ms = pw_clock_ms(CLOCK_MONOTONIC);
		c->tokens = s->tun.denied_per_sec;
		s->clients[s->n_clients++] = c;
		l->n_clients++;
		pthread_mutex_lock(&s->lock);
		s->stats.accepted++;
		s->stats.clients++;
		if (l->restricted)
			s->stats.agent_clients++;
		pthread_mutex_unlock(&s->lock);

		if (pw_view_authorize_peer(s->view, &c->peer) < 0) {
			char msg[128];
			pthread_mutex_lock(&s->lock);
			s->stats.refused_uid++;
			pthread_mutex_unlock(&s->lock);
			snprintf(msg, sizeof(msg),
				 "refused: uid %u is neither the view's owner (uid %u) nor root",
				 (unsigned)cred.uid, (unsigned)pw_view_info_of(s->view)->owner);
			c->closing = true;
			if (!send_error(s, c, NULL, PW_RPC_REFUSED, msg, NULL))
				drop_client(s, s->n_clients - 1);
		}
	}
}

/* ---- notifications --------------------------------------------------------------------- */

/* Queues a notification for the server thread (any thread). Takes PARAMS. PIDNS: the PID
 * namespaces (pidns.h; NULL: unknown) of the process the event names (the denied one, the
 * switcher). */
static void post_event(pw_ctl_server *s, const char *method, json_t *params, bool denied,
		       const char *pidns)
{
	json_t *ev =
	    params ? json_pack("{s:s,s:o,s:s?}", "method", method, "params", params, "pidns", pidns)
		   : NULL;

	pthread_mutex_lock(&s->lock);
	if (denied)
		s->stats.denied_seen++;
	if (!ev || s->n_events >= PW_CTL_EVENTS_MAX) {
		if (denied)
			s->stats.denied_suppressed++;
		json_decref(ev);
		ev = NULL;
	} else {
		s->events[s->n_events++] = ev;
	}
	pthread_mutex_unlock(&s->lock);
	if (ev)
		wake(s);
}

static void fan_out(pw_ctl_server *s)
{
	json_t *events[PW_CTL_EVENTS_MAX];
	size_t n;
	int64_t now = pw_clock_ms(CLOCK_MONOTONIC);

	pthread_mutex_lock(&s->lock);
	n = s->n_events;
	memcpy(events, s->events, n * sizeof(json_t *));
	s->n_events = 0;
	pthread_mutex_unlock(&s->lock);

	for (size_t e = 0; e < n; e++) {
		const char *method = json_string_value(json_object_get(events[e], "method"));
		json_t *params = json_object_get(events[e], "params");
		const char *pidns = json_string_value(json_object_get(events[e], "pidns"));
		/* An overlap goes where denials go (the writer's own sandbox only). */
		bool denied = streq(method, "denied") || streq(method, "overlap");

		/* E.g. a pending request from another mode is stale (ctl/request.h). */
		if (streq(method, "mode.changed"))
			pw_ctl_modules_mode_changed(
			    s, json_string_value(json_object_get(params, "to")));

		for (size_t i = 0; i < s->n_clients;) {
			pw_ctl_client *c = s->clients[i];
			bool want = denied ? c->sub_denied : c->sub_mode;
			pid_t pid = 0;
			json_t *p;

			/* Another sandbox's denial is not this client's to see, nor to be
			 * counted as suppressed for it. */
			if (!want || c->closing ||
			    (denied && !pw_ctl_denial_for(c, params, pidns, &pid))) {
				i++;
				continue;
			}
			if (denied && !pw_ctl_take_token(s, c, now)) {
				c->suppressed++;
				pthread_mutex_lock(&s->lock);
				s->stats.denied_suppressed++;
				pthread_mutex_unlock(&s->lock);
				i++;
				continue;
			}
			p = json_deep_copy(params);
			if (denied && p) {
				json_object_set_new(p, "suppressed", json_integer(c->suppressed));
				c->suppressed = 0;
				if (c->peer.restricted)
					json_object_set_new(p, "pid", json_integer(pid));
			} else if (p) {
				pw_ctl_switcher_for(c, p, pidns);
			}
			if (!client_send(s, c, pw_rpc_notification(method, p))) {
				drop_client(s, i);
				continue;
			}
			i++;
		}
		json_decref(events[e]);
	}
}

static void on_view_change(const char *from, const char *to, uint64_t generation,
			   const pw_peer *peer, void *userdata)
{
	pw_ctl_server *s = userdata;
	char pidns[PW_PIDNS_DESC_MAX];
	json_t *p =
	    pw_ctl_switch_json(&(pw_ctl_switch){.from = from,
						.to = to,
						.generation = (int64_t)generation,
						.pid = peer ? peer->pid : 0,
						.uid = peer ? peer->uid : 0,
						.comm = peer && peer->comm[0] ? peer->comm : NULL,
						.origin = peer ? peer->origin : NULL},
			       NULL);
	/* Where the switcher sits, for the agent subscribers (pw_ctl_switcher_for): taken now,
	 * while it waits for its answer. Unknown (it is gone, or no process asked) tells them
	 * nothing. */
	bool known =
	    peer && peer->pid > 0 && pw_pidns_describe(peer->pid, pidns, sizeof(pidns)) == 0;
	post_event(s, "mode.changed", p, false, known ? pidns : NULL);
}

/* The audit writer may call its listener after pw_audit_set_listener(NULL) returned; the
 * userdata is an index into this table, whose slot the server clears under hub_lock. */
#define HUB_SLOTS 64
static pthread_mutex_t hub_lock = PTHREAD_MUTEX_INITIALIZER;
static pw_ctl_server *hub[HUB_SLOTS];

static void on_audit_event(const pw_audit_event *ev, const char *comm, void *userdata)
{
	intptr_t slot = (intptr_t)userdata;
	json_t *p;

	bool overlap = ev->reason == PW_REASON_OVERLAP; /* fs/overlap.h: told, not refused */
	if (ev->err == 0 && !overlap) /* allowed mutations, when logged, are not "denied" */
		return;
	p = pw_ctl_event_json(&(pw_ctl_event){.time_ns = ev->time_ns,
					      .mode = ev->mode,
					      .generation = (int64_t)ev->generation,
					      .op = pw_op_name(ev->op),
					      .path = ev->path,
					      .path2 = ev->path2,
					      .err = ev->err,
					      .reason = pw_reason_name(ev->reason),
					      .rule = ev->rule ? pw_report_rule(ev->rule) : NULL,
					      .pid = ev->pid,
					      .uid = ev->uid,
					      .comm = comm},
			      NULL);
	pthread_mutex_lock(&hub_lock);
	if (slot >= 0 && slot < HUB_SLOTS && hub[slot])
		post_event(hub[slot], overlap ? "overlap" : "denied", p, !overlap, ev->pidns);
	else
		json_decref(p);
	pthread_mutex_unlock(&hub_lock);
}

static int hub_register(pw_ctl_server *s)
{
	pthread_mutex_lock(&hub_lock);
	for (int i = 0; i < HUB_SLOTS; i++) {
		if (!hub[i]) {
			hub[i] = s;
			pthread_mutex_unlock(&hub_lock);
			return i;
		}
	}
	pthread_mutex_unlock(&hub_lock);
	return -EMFILE;
}

static void hub_unregister(pw_ctl_server *s)
{
	if (s->hub_slot < 0)
		return;
	pthread_mutex_lock(&hub_lock);
	hub[s->hub_slot] = NULL;
	pthread_mutex_unlock(&hub_lock);
	s->hub_slot = -1;
}

/* ---- the loop -------------------------------------------------------------------------- */

/* A free slot of listeners[] (an owned socket gone, none of its clients left), or a new
 * one; PW_CTL_LISTENERS_MAX when full. */
static size_t free_listener_slot(pw_ctl_server *s)
{
	for (size_t i = 1; i < s->n_listeners; i++)
		if (s->listeners[i].fd < 0 && s->listeners[i].n_clients == 0)
			return i;
	return s->n_listeners < PW_CTL_LISTENERS_MAX ? s->n_listeners : PW_CTL_LISTENERS_MAX;
}

static void adopt_pending(pw_ctl_server *s)
{
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n_pending; i++) {
		size_t slot = free_listener_slot(s);
		if (slot < PW_CTL_LISTENERS_MAX) {
			s->listeners[slot] = s->pending[i];
			if (slot == s->n_listeners)
				s->n_listeners++;
		} else {
			close(s->pending[i].fd);
			unlink(s->pending[i].path);
			free(s->pending[i].path);
		}
	}
	s->n_pending = 0;
	pthread_mutex_unlock(&s->lock);
}

static void do_reload(pw_ctl_server *s)
{
	pw_peer peer = {.pid = getpid(), .uid = geteuid(), .origin = "signal"};
	_cleanup_free_ char *why = NULL;

	snprintf(peer.comm, sizeof(peer.comm), "SIGHUP");
	(void)pw_view_reload(s->view, &peer, NULL, &why);
}

static bool owns_socket(const pw_ctl_server *s, uint64_t client);

static void expire_clients(pw_ctl_server *s, int64_t now)
{
	for (size_t i = 0; i < s->n_clients;) {
		pw_ctl_client *c = s->clients[i];
		bool waiting_out = c->out_len > c->out_off;
		/* Subscribers may stay silent, but not stop reading what we send them. So may
		 * the owner of an agent socket (agent.open "own": a run without a terminal
		 * subscribes to nothing): dropping it would close the socket under its agent. */
		bool exempt = (c->sub_mode || c->sub_denied || c->sub_request || c->n_deferred ||
			       owns_socket(s, c->serial)) &&
			      !waiting_out;

		if (!exempt && now - c->last_ms >= (int64_t)s->tun.idle_timeout_ms) {
			pthread_mutex_lock(&s->lock);
			s->stats.dropped_idle++;
			pthread_mutex_unlock(&s->lock);
			drop_client(s, i);
			continue;
		}
		i++;
	}
}

static void *server_main(void *userdata)
{
	pw_ctl_server *s = userdata;
	struct pollfd pfd[1 + PW_CTL_LISTENERS_MAX + PW_CTL_CLIENTS_TOTAL_MAX];
	sigset_t all;

	/* Signals go to the daemon's other threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);

	while (!atomic_load(&s->stop)) {
		size_t n = 0, nl, nc;
		int64_t now;

		/* Requests that expire, blocked waits that end, calls done on other threads:
		 * their replies are queued before the poll set is built below (POLLOUT), hence
		 * this order. */
		pw_ctl_jobs_reap(s->jobs);
		int64_t due = pw_ctl_modules_tick(s, pw_clock_ms(CLOCK_MONOTONIC));
		pfd[n++] = (struct pollfd){.fd = s->wake_fd, .events = POLLIN};
		for (size_t i = 0; i < s->n_listeners; i++)
			pfd[n++] = (struct pollfd){.fd = s->listeners[i].fd, .events = POLLIN};
		nl = s->n_listeners;
		for (size_t i = 0; i < s->n_clients; i++) {
			pw_ctl_client *c = s->clients[i];
			short ev = c->closing ? 0 : POLLIN;
			if (c->out_len > c->out_off)
				ev |= POLLOUT;
			pfd[n++] = (struct pollfd){.fd = c->fd, .events = ev};
		}
		nc = s->n_clients;

		int timeout = s->n_clients ? (int)(s->tun.idle_timeout_ms / 4 + 1) : -1;
		if (timeout > 1000)
			timeout = 1000;
		if (due >= 0 && (timeout < 0 || due < timeout))
			timeout = (int)due;
		if (poll(pfd, n, timeout) < 0 && errno != EINTR)
			break;

		if (pfd[0].revents & POLLIN) {
			uint64_t v;
			ssize_t r = read(s->wake_fd, &v, sizeof(v));
			(void)r;
		}
		if (atomic_exchange(&s->reload, false))
			do_reload(s);

		/* Clients first (in reverse, as drop_client moves the last one into the gap),
		 * so that a burst of connections cannot starve connected clients. */
		for (size_t k = nc; k-- > 0;) {
			pw_ctl_client *c = s->clients[k];
			short re = pfd[1 + nl + k].revents;
			bool ok = true;

			if (re & (POLLIN | POLLHUP | POLLERR)) {
				if (!c->closing)
					ok = client_read(s, c);
				else if (re & (POLLHUP | POLLERR))
					ok = false;
			}
			if (ok && c->out_len > c->out_off)
				ok = client_write(c);
			if (ok && c->closing && c->out_len == c->out_off)
				ok = false;
			if (!ok)
				drop_client(s, k);
		}
		for (size_t i = 0; i < nl; i++)
			if (pfd[1 + i].revents & POLLIN)
				accept_clients(s, i);

		fan_out(s);
		/* Flush what the fan-out queued, now rather than a poll turn later. */
		for (size_t k = s->n_clients; k-- > 0;) {
			pw_ctl_client *c = s->clients[k];
			if (c->out_len > c->out_off && !client_write(c))
				drop_client(s, k);
		}
		adopt_pending(s);
		now = pw_clock_ms(CLOCK_MONOTONIC);
		expire_clients(s, now);
	}
	return NULL;
}

/* ---- lifecycle ------------------------------------------------------------------------- */

/* The jobs' host (jobs.h): how a job wakes the server and answers its call. */
static void jobs_wake(void *ctx)
{
	pw_ctl_server_wake(ctx);
}

static void jobs_reply(void *ctx, uint64_t client, json_t *id, json_t *result)
{
	pw_ctl_server_reply(ctx, client, id, result);
}

static void jobs_reply_error(void *ctx, uint64_t client, json_t *id, int code, const char *message,
			     json_t *data)
{
	pw_ctl_server_reply_error(ctx, client, id, code, message, data);
}

int pw_ctl_server_start(pw_view *view, const char *socket_dir, const pw_ctl_tuning *tuning,
			const pw_ctl_use *modules, size_t n_modules, pw_ctl_server **ret)
{
	_cleanup_free_ char *dir = NULL;
	pw_ctl_server *s;
	int r, fd;

	if (!view)
		return -EINVAL;
	r = pw_ctl_dir_or_default(socket_dir, &dir);
	if (r < 0)
		return r;
	r = pw_ctl_private_dir(dir);
	if (r < 0)
		return r;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	s->view = view;
	s->hub_slot = -1;
	s->wake_fd = -1;
	const pw_ctl_jobs_host host = {
	    .ctx = s, .wake = jobs_wake, .reply = jobs_reply, .reply_error = jobs_reply_error};
	r = pw_ctl_jobs_new(&host, &s->jobs);
	if (r < 0)
		goto fail;
	r = pw_ctl_modules_init(s, modules, n_modules);
	if (r < 0)
		goto fail;
	if (tuning)
		s->tun = *tuning;
	if (!s->tun.idle_timeout_ms)
		s->tun.idle_timeout_ms = DEFAULT_IDLE_MS;
	if (!s->tun.out_max)
		s->tun.out_max = PW_CTL_OUT_DEFAULT_MAX;
	if (s->tun.out_max < PW_RPC_REPLY_MAX + 1)
		s->tun.out_max = PW_RPC_REPLY_MAX + 1; /* room for at least one full reply */
	if (!s->tun.denied_per_sec)
		s->tun.denied_per_sec = DEFAULT_DENIED_PER_SEC;

	r = pw_ctl_socket_path(dir, pw_view_info_of(view)->mountpoint, &s->socket_path);
	if (r < 0)
		goto fail;
	s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->wake_fd < 0) {
		r = negative_errno();
		goto fail;
	}
	r = pw_ctl_listen_at(s->socket_path, &fd);
	if (r < 0)
		goto fail;
	s->listeners[0] =
	    (listener){.fd = fd, .path = strdup(s->socket_path), .max_clients = PW_CLIENTS_MAX};
	s->n_listeners = 1;
	if (!s->listeners[0].path) {
		r = -ENOMEM;
		goto fail;
	}

	pw_view_set_listener(view, on_view_change, s);
	if (pw_view_info_of(view)->audit) {
		r = hub_register(s);
		if (r < 0)
			goto fail;
		s->hub_slot = r;
		pw_audit_set_listener(pw_view_info_of(view)->audit, on_audit_event,
				      (void *)(intptr_t)r);
	}
	r = -pthread_create(&s->thread, NULL, server_main, s);
	if (r < 0)
		goto fail;
	s->thread_started = true;
	*ret = s;
	return 0;
fail:
	pw_ctl_server_stop(s);
	return r;
}

static int add_agent_socket(pw_ctl_server *s, const char *path, uint64_t owner, bool needs_target);

int pw_ctl_server_add_agent_socket(pw_ctl_server *s, const char *path)
{
	return add_agent_socket(s, path, 0, false);
}

int pw_ctl_server_add_owned_agent_socket(pw_ctl_server *s, const char *path, uint64_t owner)
{
	return add_agent_socket(s, path, owner, false);
}

int pw_ctl_server_add_typed_agent_socket(pw_ctl_server *s, const char *path)
{
	return add_agent_socket(s, path, 0, true);
}

static int add_agent_socket(pw_ctl_server *s, const char *path, uint64_t owner, bool needs_target)
{
	_cleanup_free_ char *dir = NULL;
	char *slash;
	int fd, r;

	if (!s || !path || path[0] != '/')
		return -EINVAL;
	dir = strdup(path);
	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (slash != dir) {
		*slash = 0;
		/* A directory the person named (mount --agent-socket: a pod's volume, shared with
		 * the agent's container) is made when missing but never chmod'ed: it may be /tmp
		 * or a volume's root. The socket itself is 0600 either way. */
		r = needs_target ? pw_db_mkdir_p(dir) : pw_ctl_private_dir(dir);
		if (r < 0)
			return r;
	}
	r = pw_ctl_listen_at(path, &fd);
	if (r < 0)
		return r;
	pthread_mutex_lock(&s->lock);
	if (s->n_pending + s->n_listeners >= PW_CTL_LISTENERS_MAX) {
		pthread_mutex_unlock(&s->lock);
		close(fd);
		unlink(path);
		return -EMFILE;
	}
	s->pending[s->n_pending] = (listener){.fd = fd,
					      .path = strdup(path),
					      .restricted = true,
					      .serial = ++s->next_serial,
					      .owner = owner,
					      .needs_target = needs_target,
					      .max_clients = PW_AGENT_CLIENTS_MAX};
	if (!s->pending[s->n_pending].path) {
		pthread_mutex_unlock(&s->lock);
		close(fd);
		unlink(path);
		return -ENOMEM;
	}
	s->n_pending++;
	pthread_mutex_unlock(&s->lock);
	wake(s);
	return 0;
}

const char *pw_ctl_server_socket_path(const pw_ctl_server *s)
{
	return s->socket_path;
}

void pw_ctl_server_request_reload(pw_ctl_server *s)
{
	if (!s)
		return;
	atomic_store(&s->reload, true);
	wake(s);
}

void pw_ctl_server_stop(pw_ctl_server *s)
{
	if (!s)
		return;
	if (s->thread_started) {
		atomic_store(&s->stop, true);
		wake(s);
		pthread_join(s->thread, NULL);
	}
	/* Before the modules' fini: a job may use what a module made. */
	pw_ctl_jobs_free(TAKE_PTR(s->jobs));
	if (pw_view_info_of(s->view)->audit && s->hub_slot >= 0)
		pw_audit_set_listener(pw_view_info_of(s->view)->audit, NULL, NULL);
	hub_unregister(s);
	pw_view_set_listener(s->view, NULL, NULL);
	pw_ctl_modules_fini(s);
	for (size_t i = 0; i < s->n_clients; i++)
		client_free(s->clients[i]);
	adopt_pending(s);
	for (size_t i = 0; i < s->n_listeners; i++) {
		if (s->listeners[i].fd < 0)
			continue;
		/* The name goes first: a client that still finds it connects, then reads EOF,
		 * never a refusal from a file nobody listens at (pw_ctl_listen_at, the other end).
		 */
		if (s->listeners[i].path)
			unlink(s->listeners[i].path);
		close(s->listeners[i].fd);
		free(s->listeners[i].path);
	}
	for (size_t i = 0; i < s->n_events; i++)
		json_decref(s->events[i]);
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	free(s->socket_path);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* ---- for methods ----------------------------------------------------------------------- */

pw_view *pw_ctl_server_view(pw_ctl_server *s)
{
	return s->view;
}

const pw_peer *pw_ctl_client_peer(const pw_ctl_client *c)
{
	return &c->peer;
}

void pw_ctl_client_subscribe(pw_ctl_client *c, bool mode_changed, bool denied)
{
	c->sub_mode = mode_changed;
	c->sub_denied = denied;
}

/* ---- for asking to switch (ctl/request.c) and agent.open ------------------------------- */

static pw_ctl_client *client_by_serial(pw_ctl_server *s, uint64_t serial, size_t *ret_i)
{
	for (size_t i = 0; i < s->n_clients; i++)
		if (s->clients[i]->serial == serial) {
			*ret_i = i;
			return s->clients[i];
		}
	return NULL;
}

/* The owner went: its sockets close at once (nothing new can connect), their clients are
 * dropped at the next loop turn (the loops over clients are running), and a request made
 * through them can no longer be answered by its run. */
static void close_owned_sockets(pw_ctl_server *s, uint64_t owner)
{
	for (size_t li = 1; li < s->n_listeners; li++) {
		listener *l = &s->listeners[li];
		if (l->fd < 0 || l->owner != owner)
			continue;
		unlink(l->path); /* before the close, as at stop */
		close(l->fd);
		free(l->path);
		l->path = NULL;
		l->fd = -1;
		for (size_t i = 0; i < s->n_clients; i++)
			if (s->clients[i]->listener == li)
				s->clients[i]->closing = true;
		pw_ctl_modules_listener_gone(s, l->serial);
	}
}

uint64_t pw_ctl_client_serial(const pw_ctl_client *c)
{
	return c->serial;
}

uint64_t pw_ctl_client_listener_serial(const pw_ctl_client *c)
{
	return c->listener_serial;
}

bool pw_ctl_client_needs_target(const pw_ctl_client *c)
{
	return c->needs_target;
}

json_t *pw_ctl_client_defer(pw_ctl_client *c)
{
	if (!c->cur_id)
		return NULL;
	c->deferred = true;
	c->n_deferred++;
	return json_incref(c->cur_id);
}

void pw_ctl_server_reply(pw_ctl_server *s, uint64_t client, json_t *id, json_t *result)
{
	size_t i;
	pw_ctl_client *c = client_by_serial(s, client, &i);

	if (c && c->n_deferred)
		c->n_deferred--;
	if (c && !c->closing && result) {
		if (!client_send(s, c, pw_rpc_result_reply(id, result)))
			c->closing = true; /* dropped at the next loop turn */
	} else {
		json_decref(result);
	}
	json_decref(id);
}

void pw_ctl_server_reply_error(pw_ctl_server *s, uint64_t client, json_t *id, int code,
			       const char *message, json_t *data)
{
	size_t i;
	pw_ctl_client *c = client_by_serial(s, client, &i);

	if (c && c->n_deferred)
		c->n_deferred--;
	if (c && !c->closing) {
		if (!send_error(s, c, id, code, message, data))
			c->closing = true;
	} else {
		json_decref(data);
	}
	json_decref(id);
}

void pw_ctl_server_wake(pw_ctl_server *s)
{
	wake(s);
}

void pw_ctl_server_notify(pw_ctl_server *s, uint64_t client, const char *method, json_t *params)
{
	size_t i;
	pw_ctl_client *c = client_by_serial(s, client, &i);

	if (c && !c->closing && params) {
		if (!client_send(s, c, pw_rpc_notification(method, params)))
			c->closing = true;
	} else {
		json_decref(params);
	}
}

static bool owns_socket(const pw_ctl_server *s, uint64_t client)
{
	for (size_t li = 1; li < s->n_listeners; li++)
		if (s->listeners[li].fd >= 0 && s->listeners[li].owner == client)
			return true;
	return false;
}

size_t pw_ctl_server_notify_operators(pw_ctl_server *s, uint64_t listener_serial,
				      const char *method, json_t *params)
{
	uint64_t owner = 0;
	size_t reached = 0;

	for (size_t li = 0; li < s->n_listeners; li++)
		if (s->listeners[li].fd >= 0 && s->listeners[li].serial == listener_serial)
			owner = s->listeners[li].owner;
	for (size_t i = 0; params && i < s->n_clients; i++) {
		pw_ctl_client *c = s->clients[i];
		if (c->peer.restricted || !c->sub_request || c->closing)
			continue;
		/* A run sees its own sandbox's requests, and only those. */
		if (owner ? c->serial != owner : owns_socket(s, c->serial))
			continue;
		if (!client_send(s, c, pw_rpc_notification(method, json_deep_copy(params))))
			c->closing = true;
		else
			reached++;
	}
	json_decref(params);
	return reached;
}

void pw_ctl_client_subscribe_requests(pw_ctl_client *c)
{
	c->sub_request = true;
}

void pw_ctl_server_get_stats(pw_ctl_server *s, pw_ctl_stats *ret)
{
	pthread_mutex_lock(&s->lock);
	*ret = s->stats;
	pthread_mutex_unlock(&s->lock);
	if (s->jobs) {
		pw_ctl_jobs_counts n;
		pw_ctl_jobs_counts_get(s->jobs, &n);
		ret->jobs_running = n.running;
		ret->agent_jobs_running = n.agent_running;
		ret->jobs_started = n.started;
		ret->jobs_refused = n.refused;
		ret->agent_jobs_refused = n.agent_refused;
	}
}

/* Slow work of a call (server.h): the jobs are jobs.c's, the call's client and authority
 * the server's. */
int pw_ctl_job_admit(pw_ctl_ctx *x, pw_ctl_job_slot *ret)
{
	return pw_ctl_jobs_admit(x->server->jobs, pw_ctl_client_serial(x->client),
				 x->peer->restricted, ret);
}

void pw_ctl_job_release(pw_ctl_server *s, pw_ctl_job_slot *slot)
{
	pw_ctl_jobs_release(s->jobs, slot);
}

int pw_ctl_job_run(pw_ctl_ctx *x, pw_ctl_job_fn fn, void *arg, void (*free_arg)(void *))
{
	json_t *id = pw_ctl_client_defer(x->client);
	pw_ctl_jobs_run(x->server->jobs, pw_ctl_client_serial(x->client), x->peer->restricted, id,
			fn, arg, free_arg);
	return PW_CTL_DEFERRED;
}
