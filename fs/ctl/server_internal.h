/* SPDX-License-Identifier: MIT */
/*
 * The control server's inside, shared by its files and no one else: the server, its
 * clients and listening sockets (server.c owns them and runs the loop), and what the loop
 * asks of listen.c (binding a socket), modules.c (the modules' tables and hooks) and
 * audience.c (what an agent client may be told). server.h is the face, and the types this
 * header uses are its: include it after server.h (it does not include server.h itself, so
 * that server.c, which includes both, and this header are no include circle).
 */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "jobs.h"
#include "pidns.h"
#include "pw_limits.h"

struct pw_ctl_client {
	int fd;
	size_t listener; /* index in listeners[] of the socket it came through */
	pw_peer peer;
	char *in;
	size_t in_len;
	char *out;
	size_t out_len, out_off, out_cap;
	int64_t last_ms; /* last progress (a byte read or written) */
	bool closing;	 /* stop reading; close once the output is flushed */
	bool sub_mode, sub_denied;
	bool sub_request;	  /* operator: mode.request notifications (ctl/request.h) */
	uint64_t serial;	  /* never reused (pw_ctl_client_serial) */
	uint64_t listener_serial; /* the socket it came through */
	json_t *cur_id;		  /* the id of the call being dispatched (borrowed) */
	bool deferred;		  /* its handler deferred the reply */
	bool needs_target;	  /* came through a socket of mount --agent-socket */
	unsigned n_deferred;	  /* replies owed to it: not idle meanwhile */
	/* Agent sockets: the client's PID namespace (pidns.h), taken at connect; a `denied`
	 * notification reaches it only for a process in that namespace or below, submitted
	 * after it connected (a namespace's inode number may be reused once it is gone). */
	bool ns_known;	 /* false: none reaches it (fail closed) */
	size_t ns_level; /* 0: the daemon's own namespace (every process is below it) */
	uint64_t ns_ino;
	int64_t since_ns; /* CLOCK_REALTIME at connect */
	double tokens;	  /* denied notifications this client may still get */
	int64_t tokens_ms;
	uint64_t suppressed;
};

typedef struct listener {
	int fd; /* -1: a free slot (an owned socket whose owner went) */
	char *path;
	bool restricted;
	uint64_t serial; /* never reused */
	uint64_t owner;	 /* the operator client owning it (0: none; the view's shared one) */
	bool
	    needs_target; /* approving its requests takes the target typed (mount --agent-socket) */
	size_t n_clients, max_clients; /* connected through this socket now; its limit */
} listener;

struct pw_ctl_server {
	pw_view *view;
	pw_ctl_tuning tun;
	pthread_t thread;
	bool thread_started;
	int wake_fd; /* eventfd */
	atomic_bool stop, reload;
	int hub_slot;

	/* Server thread only. */
	listener listeners[PW_CTL_LISTENERS_MAX];
	size_t n_listeners;
	pw_ctl_client *clients[PW_CTL_CLIENTS_TOTAL_MAX];
	size_t n_clients;

	pthread_mutex_t lock;		   /* guards the fields below */
	json_t *events[PW_CTL_EVENTS_MAX]; /* queued notifications: {"method":..,"params":..} */
	size_t n_events;
	listener pending[PW_CTL_LISTENERS_MAX]; /* agent sockets to adopt */
	size_t n_pending;
	pw_ctl_stats stats;
	char *socket_path;
	uint64_t next_serial; /* clients and listeners (under the lock) */

	/* The modules' tables and state: set in start, read-only after it. */
	struct {
		const pw_ctl_module *m;
		void *data;
		bool inited;
	} modules[PW_CTL_MODULES_MAX];
	size_t n_modules;

	pw_ctl_jobs *jobs; /* slow work of calls, off this thread (jobs.h) */
};

/* ---- listen.c ---- */

/*
 * Listens at PATH. The socket is bound under a temporary name, listens, and only then takes
 * PATH (link(2), which fails where PATH exists, so two daemons never share it): whoever
 * sees PATH can connect at once. Bound at PATH directly, a `piworkfs mode` run right after
 * the mount (or a client that waits for the file, as the tests do) could be refused in the
 * moment between bind and listen.
 */
int pw_ctl_listen_at(const char *path, int *ret_fd);

/* ---- modules.c ---- */

/* Checks the tables of USES (N at most PW_CTL_MODULES_MAX; no method name in two) and runs
 * each init in order. Returns 0, -E2BIG, -EINVAL, or an init's -errno (the modules inited so
 * far are S's, for pw_ctl_modules_fini). */
int pw_ctl_modules_init(pw_ctl_server *s, const pw_ctl_use *uses, size_t n);

/* Runs the finis of the inited modules, last first. */
void pw_ctl_modules_fini(pw_ctl_server *s);

/* Runs every tick; returns the nearest deadline in ms, or PW_CTL_NO_DEADLINE. */
int64_t pw_ctl_modules_tick(pw_ctl_server *s, int64_t now_ms);

/* Tells every module the active mode is TO now. */
void pw_ctl_modules_mode_changed(pw_ctl_server *s, const char *to);

/* Tells every module agent socket SERIAL closed. */
void pw_ctl_modules_listener_gone(pw_ctl_server *s, uint64_t serial);

/*
 * Runs METHOD for client C: finds it in the modules' tables, refuses an agent what is the
 * person's only, checks the params, then calls the handler. Returns 0 with *ret_result,
 * PW_CTL_FAILED with *ret_fail filled, or PW_CTL_DEFERRED.
 */
int pw_ctl_modules_dispatch(pw_ctl_server *s, pw_ctl_client *c, const char *name, json_t *params,
			    json_t **ret_result, pw_ctl_fail *ret_fail);

/* ---- audience.c ---- */

/* An agent client's PID namespace, from its pid (alive: it is connected). */
void pw_ctl_client_learn_ns(pw_ctl_client *c);

/*
 * Whether denial PARAMS (with the process's PID namespaces PIDNS) is for client C: every
 * denial is for an operator client; an agent client gets those of processes in its own
 * sandbox, submitted since it connected, with *ret_pid the pid as seen inside.
 */
bool pw_ctl_denial_for(const pw_ctl_client *c, json_t *params, const char *pidns, pid_t *ret_pid);

/*
 * What an agent client C may learn of who made a switch (mode.changed PARAMS; PIDNS: the
 * switcher's PID namespaces, NULL when unknown): of a process in its own sandbox, its pid
 * as seen there, its uid and name; of anyone else (the person's terminal, a signal, the
 * daemon itself, another sandbox, a process gone before it could be placed) only the origin.
 * An operator client learns everything, unchanged.
 */
void pw_ctl_switcher_for(const pw_ctl_client *c, json_t *params, const char *pidns);

/* Whether C may get one more denied notification now (NOW: CLOCK_MONOTONIC ms): a bucket
 * of S's denied_per_sec tokens, refilled at that rate. */
bool pw_ctl_take_token(pw_ctl_server *s, pw_ctl_client *c, int64_t now);
