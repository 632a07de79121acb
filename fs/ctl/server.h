/* SPDX-License-Identifier: MIT */
/*
 * The control socket server of one view: JSON-RPC 2.0, one message per line, over a UNIX
 * stream socket (docs/PROTOCOL.md is the reference).
 *
 * It runs on its own thread, never on FUSE workers: one poll loop over non-blocking
 * sockets. A hostile client cannot hurt the daemon or other clients: each line is capped at
 * PW_MSG_MAX (longer: an error response, then close), each client's pending output is
 * bounded (a client that never reads is dropped), a client that sends nothing for the idle
 * timeout is dropped (subscribers excepted), and beyond a socket's connection limit new
 * connections to it are accepted and closed at once. Each socket has its own limit:
 * PW_CLIENTS_MAX for the main (operator) socket, PW_AGENT_CLIENTS_MAX for each agent
 * socket, so agents can never take the operator's slots.
 *
 * Authority: SO_PEERCRED on every connection; only the mounting uid or root is served
 * (others get one error line and are closed). Connections through an agent socket
 * (pw_ctl_server_add_agent_socket) are "restricted": they may only tighten the mode, and
 * their `denied` notifications are those of processes in their own PID namespace or below
 * it (pidns.h), with pids as seen there.
 *
 * Socket location: DIR/NAME where DIR is $XDG_RUNTIME_DIR/piworkfs (root without
 * XDG_RUNTIME_DIR: /run/piworkfs), a 0700 directory, and NAME is derived from the
 * mountpoint alone (pw_ctl_socket_path), so a client finds it from the mountpoint.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "view.h"

typedef struct pw_ctl_server pw_ctl_server;

/* Tuning knobs; zero fields take the defaults. Tests shorten the timeouts. */
typedef struct pw_ctl_tuning {
	unsigned idle_timeout_ms;  /* drop a client silent this long (default 30000) */
	size_t out_max;            /* bytes of pending output per client (default 1 MiB) */
	unsigned denied_per_sec;   /* `denied` notifications per subscriber per second (50) */
} pw_ctl_tuning;

/*
 * The default socket directory (malloc'd): $XDG_RUNTIME_DIR/piworkfs, or /run/piworkfs for
 * root without XDG_RUNTIME_DIR. Returns 0, or -ENOENT when neither applies.
 */
int pw_ctl_default_dir(char **ret);

/*
 * Makes DIR (and its missing parents) a private directory: created 0700, and refused with
 * -EPERM when it exists but is not a directory owned by us (it is then chmod'ed to 0700 if
 * anyone else had access). Returns 0 or -errno. Shared with `piworkfs run`.
 */
int pw_ctl_private_dir(const char *dir);

/*
 * The socket path for MOUNTPOINT (an absolute path) in DIR (NULL: the default dir):
 * DIR/<sanitized basename, at most 24 bytes>-<16 hex digits of a 64-bit FNV-1a hash of the
 * mountpoint>.sock. Returns 0 with a malloc'd *ret, -ENOENT (no default dir),
 * -ENAMETOOLONG (does not fit sun_path), -ENOMEM.
 */
int pw_ctl_socket_path(const char *dir, const char *mountpoint, char **ret);

/*
 * Creates DIR (0700, parents as needed), binds the view's socket (0600; a stale socket whose
 * connect fails is unlinked and replaced; a live one answers -EADDRINUSE), registers the
 * audit listener and the view listener, and starts the server thread. SOCKET_DIR NULL: the
 * default dir. TUNING may be NULL. Returns 0 with *ret, or -errno.
 */
int pw_ctl_server_start(pw_view *view, const char *socket_dir, const pw_ctl_tuning *tuning,
			pw_ctl_server **ret);

/*
 * Adds a listening socket at PATH whose clients are restricted (may only tighten). The
 * socket is created 0600 (stale one replaced as above). Thread-safe, callable after start.
 * Returns 0 or -errno.
 */
int pw_ctl_server_add_agent_socket(pw_ctl_server *s, const char *path);

/* The main socket's path (owned by the server). */
const char *pw_ctl_server_socket_path(const pw_ctl_server *s);

/*
 * Asks the server thread to reload the view (origin "signal"). Async-signal-safe: the
 * daemon's SIGHUP handler calls it.
 */
void pw_ctl_server_request_reload(pw_ctl_server *s);

/* Stops the thread, closes every client, unlinks every socket it created, unregisters the
 * listeners. Accepts NULL. Call before pw_view_free(). */
void pw_ctl_server_stop(pw_ctl_server *s);

/*
 * Between ctl/server.c (transport) and ctl/methods.c (the method table). Not for other
 * callers.
 */
typedef struct pw_ctl_client pw_ctl_client;

/* A method's failure: CODE (proto.h), a malloc'd MESSAGE, optional DATA (owned). */
typedef struct pw_ctl_fail {
	int code;
	char *message;
	json_t *data;
} pw_ctl_fail;

/*
 * Runs METHOD for client C (on the server thread). Returns 0 with *ret_result (a new
 * reference), or -1 with *ret_fail filled. Never blocks on the network.
 */
int pw_ctl_dispatch(pw_ctl_server *s, pw_ctl_client *c, const char *method, json_t *params,
		    json_t **ret_result, pw_ctl_fail *ret_fail);

pw_view *pw_ctl_server_view(pw_ctl_server *s);
const pw_peer *pw_ctl_client_peer(const pw_ctl_client *c);
/* Subscribes C to notifications (mode.changed, denied). */
void pw_ctl_client_subscribe(pw_ctl_client *c, bool mode_changed, bool denied);

/*
 * For ctl/request.c (asking to switch) and agent.open. All on the server thread.
 *
 * Every connection and every socket has a serial number, never reused while the daemon
 * runs, so a request can name its requester and the socket it came through after either
 * is gone. A handler may defer its reply: pw_ctl_client_defer() takes the call's id and
 * the handler returns PW_CTL_DEFERRED; pw_ctl_server_reply() sends the result later (to
 * nobody if the client went away). A client waiting for a deferred reply is not idle.
 */
#define PW_CTL_DEFERRED 1
uint64_t pw_ctl_client_serial(const pw_ctl_client *c);
uint64_t pw_ctl_client_listener_serial(const pw_ctl_client *c);
json_t *pw_ctl_client_defer(pw_ctl_client *c); /* new reference; NULL: a notification */
void pw_ctl_server_reply(pw_ctl_server *s, uint64_t client, json_t *id, json_t *result);
/* A notification for one client (PARAMS stolen; dropped if the client is gone). */
void pw_ctl_server_notify(pw_ctl_server *s, uint64_t client, const char *method,
			  json_t *params);
/* A notification for the operator side of agent socket LISTENER: the client that owns it
 * (agent.open {"own": true}) when it subscribed to mode.request; for a socket nobody owns,
 * every operator client subscribed to mode.request that owns no socket (a run shows only
 * its own sandbox's requests). PARAMS stolen. */
size_t pw_ctl_server_notify_operators(pw_ctl_server *s, uint64_t listener, const char *method,
				      json_t *params); /* returns how many clients it reached */
void pw_ctl_client_subscribe_requests(pw_ctl_client *c);
struct pw_ctl_requests *pw_ctl_server_requests(pw_ctl_server *s);

/*
 * An agent socket owned by operator client OWNER (its serial): closed and unlinked, its
 * clients dropped, when that client goes. Path as pw_ctl_server_add_agent_socket. Returns 0
 * or -errno.
 */
int pw_ctl_server_add_owned_agent_socket(pw_ctl_server *s, const char *path, uint64_t owner);

/*
 * The server's counters, a consistent snapshot taken under its lock: tests wait on them
 * (a connection the server has accepted or refused, a client it has dropped), so each is
 * updated at the moment the server thread acts, never estimated.
 */
typedef struct pw_ctl_stats {
	unsigned clients;           /* connected now (accepted and not yet dropped) */
	unsigned agent_clients;     /* of which through agent sockets */
	uint64_t accepted;          /* connections accepted (including ones then refused_uid) */
	uint64_t refused_busy;      /* connections closed at once: no slot left on their socket */
	uint64_t refused_busy_agent; /* of which on agent sockets */
	uint64_t refused_uid, dropped_slow, dropped_idle, dropped_large;
	uint64_t denied_seen;       /* denied events received from the audit writer */
	uint64_t denied_suppressed; /* notifications not sent (rate limit, full queue) */
} pw_ctl_stats;
void pw_ctl_server_get_stats(pw_ctl_server *s, pw_ctl_stats *ret);
