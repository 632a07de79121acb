/* SPDX-License-Identifier: MIT */
/*
 * The audit log writer. The filesystem's hot path calls pw_audit_submit(), which copies
 * the event into a bounded queue and returns at once: it never waits on SQLite or the disk,
 * and when the queue is full the event is counted as dropped. One writer thread drains the
 * queue in batches, one transaction per batch, coalescing repeats (same pid, op, path and
 * errno within a short window become one row with a count).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy.h"

typedef struct pw_audit pw_audit;

typedef struct pw_audit_opts {
	const char *db_path; /* the state database (state.h) */
	const char *project; /* real path of the project */
	const char *mountpoint;
	unsigned queue_capacity; /* 0: default (65536) */
	unsigned retention_days; /* 0: default (30) */
	uint64_t retention_rows; /* 0: default (1,000,000) */
	bool log_allowed;	 /* also record allowed mutations */
} pw_audit_opts;

typedef struct pw_audit_event {
	int64_t time_ns; /* CLOCK_REALTIME; 0: filled in by submit */
	const char *mode;
	uint64_t generation;
	pw_op op;
	const char *path;    /* project-relative */
	const char *path2;   /* second path of link/rename, or NULL */
	int err;	     /* 0 for allowed events */
	const pw_rule *rule; /* deciding rule or NULL; its strings are copied */
	pw_reason reason;
	pid_t pid;
	uid_t uid;
	const char *comm;   /* process name if known at submit time, else NULL: the writer
			     * reads /proc/PID/comm (too late for short-lived processes) */
	const char *thread; /* the asking thread's own name when it is not the program's main
			     * thread (a libuv-worker of node), else NULL; stored as is */
	const char *pidns;  /* the process's PID namespaces below the daemon's, taken at
			     * submit time (pidns.h), or NULL; passed to listeners only (the
			     * agent socket's notifications), not stored */
} pw_audit_event;

/* Starts the writer thread. Returns 0 or -errno; *ret_warning as pw_state_open. */
int pw_audit_start(const pw_audit_opts *opts, pw_audit **ret, char **ret_warning);
/* Flushes what is queued and stops. Accepts NULL. */
void pw_audit_stop(pw_audit *a);

/* Never blocks, never fails: the event is queued or counted as dropped. The process name is
 * read from /proc/PID/comm by the writer thread (best effort), not here. */
void pw_audit_submit(pw_audit *a, const pw_audit_event *ev);

/* Listeners (the control socket's `denied` notifications) get each event from the writer
 * thread; the callback must not block. */
typedef void (*pw_audit_listener)(const pw_audit_event *ev, const char *comm, void *userdata);
void pw_audit_set_listener(pw_audit *a, pw_audit_listener fn, void *userdata);

typedef struct pw_audit_stats {
	uint64_t submitted, written, dropped, coalesced;
} pw_audit_stats;
void pw_audit_get_stats(pw_audit *a, pw_audit_stats *ret);
