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
 * XDG_RUNTIME_DIR: /run/piworkfs, others /tmp/piworkfs-UID), a 0700 directory, and NAME is derived
 * from the mountpoint alone (pw_ctl_socket_path), so a client finds it from the mountpoint.
 */
#pragma once

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fail.h"
#include "jobs.h" /* pw_ctl_job_slot, pw_ctl_job_fn */
#include "proto.h"
#include "sockets.h"
#include "pw_limits.h"
#include "util.h"
#include "view.h"

typedef struct pw_ctl_server pw_ctl_server;
typedef struct pw_ctl_client pw_ctl_client;
typedef struct pw_ctl_module pw_ctl_module;

/* Tuning knobs; zero fields take the defaults. Tests shorten the timeouts. */
typedef struct pw_ctl_tuning {
	unsigned idle_timeout_ms; /* drop a client silent this long (default 30000) */
	size_t out_max;		  /* bytes of pending output per client (default 1 MiB) */
	unsigned denied_per_sec;  /* `denied` notifications per subscriber per second (50) */
} pw_ctl_tuning;

/* A module the server serves, and the argument its init gets (see "for methods" below). */
typedef struct pw_ctl_use {
	const pw_ctl_module *module;
	void *arg;
} pw_ctl_use;

/*
 * Creates DIR (0700, parents as needed), binds the view's socket (0600; a stale socket whose
 * connect fails is unlinked and replaced; a live one answers -EADDRINUSE), registers the
 * audit listener and the view listener, initializes the N_MODULES MODULES (the methods it
 * serves; a method no module has is "method not found") and starts the server thread.
 * SOCKET_DIR NULL: the default dir. TUNING may be NULL. Returns 0 with *ret, or -errno
 * (-EINVAL: no view, or a method name in two modules).
 */
int pw_ctl_server_start(pw_view *view, const char *socket_dir, const pw_ctl_tuning *tuning,
			const pw_ctl_use *modules, size_t n_modules, pw_ctl_server **ret);

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

/* ---- for methods: the dispatch table and the client API ---------------------------------
 *
 * The server (transport, authority, notifications) knows methods only as the tables of the
 * modules it was started with; it names no module. A module (ctl/methods.c: the view's
 * methods; ctl/request.c: asking to switch; undo/changes.c: the originals, which the daemon
 * registers with its pw_fs) knows only the declarations below, never another module.
 */

/* A method's failure, pw_ctl_fail, and PW_CTL_FAILED, what a handler (or a job) returns
 * when it filled one: fail.h. */

/* Fills F with CODE and a formatted message (none if out of memory). Returns
 * PW_CTL_FAILED, what a handler returns for a failure: `return pw_ctl_fail_set(f, ...)`. */
_printf_(3, 4) int pw_ctl_fail_set(pw_ctl_fail *f, int code, const char *fmt, ...);
_printf_(3, 0) int pw_ctl_fail_setv(pw_ctl_fail *f, int code, const char *fmt, va_list ap);

/* One call, on the server thread. PARAMS passed the method's params check. */
typedef struct pw_ctl_ctx {
	pw_ctl_server *server;
	pw_ctl_client *client;
	pw_view *view;
	const pw_peer *peer;
	json_t *params;
	pw_ctl_fail *fail;
	void *data; /* the module's: what its init made, else its pw_ctl_use.arg */
} pw_ctl_ctx;

/* Returns 0 with *ret_result (a new reference), PW_CTL_FAILED with x->fail filled, or
 * PW_CTL_DEFERRED (below). Never blocks on the network. */
typedef int (*pw_ctl_handler)(pw_ctl_ctx *x, json_t **ret_result);

typedef struct pw_ctl_method {
	const char *name;
	pw_ctl_handler fn;
	const pw_rpc_param *params; /* checked before FN runs (pw_rpc_params_check) */
	size_t n_params;
	/* NULL: agent sockets may call it (the handler applies any finer rule, such as only
	 * tightening). Else the person's only: the server refuses a restricted peer with
	 * PW_RPC_REFUSED and this message before FN runs. */
	const char *agent_refusal;
} pw_ctl_method;

/* What a module's tick returns when nothing of it is due later (not an error). */
#define PW_CTL_NO_DEADLINE ((int64_t)-1)

/* Every hook is optional and runs on the server thread, but init and fini, which run in
 * pw_ctl_server_start and pw_ctl_server_stop (fini before any client is freed). */
struct pw_ctl_module {
	const char *name;
	const pw_ctl_method *methods;
	size_t n_methods;
	int (*init)(pw_ctl_server *s, void *arg, void **ret_data); /* 0 or -errno */
	void (*fini)(pw_ctl_server *s, void *data);
	/* Each loop turn: work due by NOW_MS (CLOCK_MONOTONIC); returns the milliseconds until
	 * the next deadline, or PW_CTL_NO_DEADLINE for none. */
	int64_t (*tick)(pw_ctl_server *s, void *data, int64_t now_ms);
	/* The active mode changed to TO (any origin), before subscribers are told. */
	void (*mode_changed)(pw_ctl_server *s, void *data, const char *to);
	/* Agent socket LISTENER (its serial) closed. */
	void (*listener_gone)(pw_ctl_server *s, void *data, uint64_t listener);
};

pw_view *pw_ctl_server_view(pw_ctl_server *s);
const pw_peer *pw_ctl_client_peer(const pw_ctl_client *c);
/* Subscribes C to notifications (mode.changed, denied). */
void pw_ctl_client_subscribe(pw_ctl_client *c, bool mode_changed, bool denied);

/*
 * For asking to switch (ctl/request.c) and agent.open. All on the server thread.
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
/* The same with an error (DATA stolen; MESSAGE copied). */
void pw_ctl_server_reply_error(pw_ctl_server *s, uint64_t client, json_t *id, int code,
			       const char *message, json_t *data);
/* Wakes the server thread for a loop turn (its modules' ticks). Any thread: a module's
 * worker thread calls it when its work is done, for the tick to reply. */
void pw_ctl_server_wake(pw_ctl_server *s);
/* A notification for one client (PARAMS stolen; dropped if the client is gone). */
void pw_ctl_server_notify(pw_ctl_server *s, uint64_t client, const char *method, json_t *params);
/* A notification for the operator side of agent socket LISTENER: the client that owns it
 * (agent.open {"own": true}) when it subscribed to mode.request; for a socket nobody owns,
 * every operator client subscribed to mode.request that owns no socket (a run shows only
 * its own sandbox's requests). PARAMS stolen. */
size_t pw_ctl_server_notify_operators(pw_ctl_server *s, uint64_t listener, const char *method,
				      json_t *params); /* returns how many clients it reached */
void pw_ctl_client_subscribe_requests(pw_ctl_client *c);

/*
 * An agent socket owned by operator client OWNER (its serial): closed and unlinked, its
 * clients dropped, when that client goes. Path as pw_ctl_server_add_agent_socket. Returns 0
 * or -errno.
 */
int pw_ctl_server_add_owned_agent_socket(pw_ctl_server *s, const char *path, uint64_t owner);

/*
 * An agent socket for an agent that no run's terminal serves (`mount --agent-socket`: the
 * agent container of a pod): owned by nobody, like the shared one, and its requests to
 * loosen may be allowed only with their target typed, as run's consent bar asks
 * (mode.request.answer's "target", ctl/request.h). Path as pw_ctl_server_add_agent_socket.
 * Returns 0 or -errno.
 */
int pw_ctl_server_add_typed_agent_socket(pw_ctl_server *s, const char *path);
/* Whether C came through such a socket. */
bool pw_ctl_client_needs_target(const pw_ctl_client *c);

/*
 * Slow work of a call, off the server thread (ctl/jobs.c): a bash analysis, a diff of many
 * files, an undo. On the server thread it would stall every other client for as long, and
 * an agent could then keep the person from being answered at all (docs/SECURITY.md,
 * "Review round four"). Each such call runs on a thread of its own and is answered from
 * the server thread when done.
 *
 * Admission keeps the person's capacity the person's: agents (every agent socket
 * together) may have PW_CTL_AGENT_JOBS_MAX jobs at once, one agent connection at most
 * PW_CTL_AGENT_JOBS_PER_CLIENT; the operator side has PW_CTL_OPERATOR_JOBS_MAX of its own,
 * which no agent can take. Beyond a limit the call is answered PW_RPC_BUSY at once. A
 * notification (a call without an id) is admitted and bounded the same way, run, and never
 * answered: it cannot bypass the limits.
 */

/* One admitted job's place in its pool (pw_ctl_job_slot) and a job's work (pw_ctl_job_fn):
 * jobs.h. The server runs the jobs (jobs.c) and answers them: the calls below are the
 * server's, over the call X is dispatching. */

/* Admits one job for the call X is dispatching. Returns 0 with *RET held, or -EBUSY (the
 * caller answers PW_RPC_BUSY). Server thread only. */
int pw_ctl_job_admit(pw_ctl_ctx *x, pw_ctl_job_slot *ret);
/* Gives SLOT back (no-op when not held). Server thread only. */
void pw_ctl_job_release(pw_ctl_server *s, pw_ctl_job_slot *slot);

/*
 * Runs FN(ARG) as a job for the call X is dispatching: admitted (refused: answered
 * PW_RPC_BUSY), deferred, run on a thread, answered when done (a notification: not
 * answered). FREE_ARG(ARG) runs once the job is over, whatever happened (also when it
 * never started). Returns PW_CTL_DEFERRED, what the handler returns.
 */
int pw_ctl_job_run(pw_ctl_ctx *x, pw_ctl_job_fn fn, void *arg, void (*free_arg)(void *));

/*
 * The server's counters, a consistent snapshot taken under its lock: tests wait on them
 * (a connection the server has accepted or refused, a client it has dropped), so each is
 * updated at the moment the server thread acts, never estimated.
 */
typedef struct pw_ctl_stats {
	unsigned clients;	     /* connected now (accepted and not yet dropped) */
	unsigned agent_clients;	     /* of which through agent sockets */
	uint64_t accepted;	     /* connections accepted (including ones then refused_uid) */
	uint64_t refused_busy;	     /* connections closed at once: no slot left on their socket */
	uint64_t refused_busy_agent; /* of which on agent sockets */
	uint64_t refused_uid, dropped_slow, dropped_idle, dropped_large;
	uint64_t denied_seen;	    /* denied events received from the audit writer */
	uint64_t denied_suppressed; /* notifications not sent (rate limit, full queue) */
	/* Jobs (above): running now, of which for agents; admitted since start; refused. */
	unsigned jobs_running, agent_jobs_running;
	uint64_t jobs_started, jobs_refused, agent_jobs_refused;
} pw_ctl_stats;
void pw_ctl_server_get_stats(pw_ctl_server *s, pw_ctl_stats *ret);
