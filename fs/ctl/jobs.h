/* SPDX-License-Identifier: MIT */
/*
 * Slow work of a call on a thread of its own, and the admission that keeps the person's
 * share of it (server.h, "Slow work of a call", is what methods see). jobs.c knows nothing
 * of the server: the server makes one pw_ctl_jobs when it starts, with a host (below) through
 * which the jobs wake it and answer their calls; it admits and runs jobs for the calls it
 * dispatches (pw_ctl_job_admit, pw_ctl_job_run in server.c), reaps them every loop turn
 * (replies for the jobs done), and frees them when it stops (the jobs still running are
 * cancelled and joined, their clients are not answered).
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "fail.h"

typedef struct pw_ctl_jobs pw_ctl_jobs;

/* One admitted job's place in its pool; released once, on the server thread. */
typedef struct pw_ctl_job_slot {
	uint64_t client;
	bool restricted;
	bool held;
} pw_ctl_job_slot;

/* A job's work, on its own thread: returns 0 with *ret_result, or PW_CTL_FAILED with FAIL
 * filled.
 * CANCEL_FD becomes readable when the server stops: work that waits (a worker process)
 * should poll it and give up. ARG is the job's own (copies of what it needs: never the
 * call's params or the client, which the server thread owns). */
typedef int (*pw_ctl_job_fn)(void *arg, int cancel_fd, json_t **ret_result, pw_ctl_fail *fail);

/* What the jobs need of the server, each called with CTX. wake: any thread (a job is done:
 * a loop turn reaps it). reply, reply_error: the server thread, for CLIENT's call ID (stolen;
 * RESULT and DATA stolen, MESSAGE copied), as pw_ctl_server_reply and
 * pw_ctl_server_reply_error. */
typedef struct pw_ctl_jobs_host {
	void *ctx;
	void (*wake)(void *ctx);
	void (*reply)(void *ctx, uint64_t client, json_t *id, json_t *result);
	void (*reply_error)(void *ctx, uint64_t client, json_t *id, int code, const char *message,
			    json_t *data);
} pw_ctl_jobs_host;

int pw_ctl_jobs_new(const pw_ctl_jobs_host *host, pw_ctl_jobs **ret); /* 0 or -errno */
/* Admits one job of CLIENT (RESTRICTED: through an agent socket). Returns 0 with *RET
 * held, or -EBUSY. Server thread. */
int pw_ctl_jobs_admit(pw_ctl_jobs *jobs, uint64_t client, bool restricted, pw_ctl_job_slot *ret);
/* Gives SLOT back (no-op when not held). Server thread. */
void pw_ctl_jobs_release(pw_ctl_jobs *jobs, pw_ctl_job_slot *slot);
/* Runs FN(ARG) as a job for CLIENT's call ID (stolen; NULL: a notification, never answered):
 * admitted (refused: answered PW_RPC_BUSY), run on a thread, answered when reaped.
 * FREE_ARG(ARG) runs once the job is over, whatever happened. Server thread. */
void pw_ctl_jobs_run(pw_ctl_jobs *jobs, uint64_t client, bool restricted, json_t *id,
		     pw_ctl_job_fn fn, void *arg, void (*free_arg)(void *));
/* Replies for the jobs that are done and gives their slots back. Server thread. */
void pw_ctl_jobs_reap(pw_ctl_jobs *jobs);
/* Cancels and joins every job (not answered), then frees JOBS. Accepts NULL. */
void pw_ctl_jobs_free(pw_ctl_jobs *jobs);

/* The job counters, for the server's stats. Any thread. */
typedef struct pw_ctl_jobs_counts {
	unsigned running, agent_running;
	uint64_t started, refused, agent_refused; /* refused: of both sides */
} pw_ctl_jobs_counts;
void pw_ctl_jobs_counts_get(pw_ctl_jobs *jobs, pw_ctl_jobs_counts *ret);
