/* SPDX-License-Identifier: MIT */
/*
 * The control server's jobs (server.h, "Slow work of a call"): the server's side. The
 * server makes one pw_ctl_jobs when it starts, reaps it every loop turn (replies for the
 * jobs done), and frees it when it stops (the jobs still running are cancelled and joined,
 * their clients are not answered).
 */
#pragma once

#include "server.h"

typedef struct pw_ctl_jobs pw_ctl_jobs;

int pw_ctl_jobs_new(pw_ctl_jobs **ret); /* 0 or -errno */
/* Replies for the jobs that are done and gives their slots back. Server thread. */
void pw_ctl_jobs_reap(pw_ctl_server *s, pw_ctl_jobs *jobs);
/* Cancels and joins every job (not answered), then frees JOBS. Accepts NULL. */
void pw_ctl_jobs_free(pw_ctl_jobs *jobs);
/* Fills the job counters of RET. Any thread. */
void pw_ctl_jobs_stats(pw_ctl_jobs *jobs, pw_ctl_stats *ret);

/* The server's jobs (server.c). */
pw_ctl_jobs *pw_ctl_server_jobs(pw_ctl_server *s);
