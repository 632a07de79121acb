/* SPDX-License-Identifier: MIT */
/*
 * Slow work of a call on a thread of its own, and the admission that keeps the person's
 * share of it (jobs.h; server.h, "Slow work of a call", for what methods see).
 *
 * Admission and the job list belong to the server thread: a job is admitted, started and
 * reaped there. The job's thread only runs its function, sets `done` and wakes the
 * server through the host. The counters are also read by the server's stats from any
 * thread, hence their lock. Replies go through the host the server gave (jobs.h): this file
 * calls nothing of the server's.
 */
#include "jobs.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto.h"
#include "pw_limits.h"
#include "util.h"

typedef struct job {
	pw_ctl_jobs *jobs;
	pw_ctl_job_slot slot;
	json_t *id; /* NULL: a notification, never answered */
	pw_ctl_job_fn fn;
	void *arg;
	void (*free_arg)(void *);
	int cancel_fd;
	int r;
	json_t *result;
	pw_ctl_fail fail;
	pthread_t thread;
	atomic_bool done;
	struct job *next;
} job;

struct pw_ctl_jobs {
	pw_ctl_jobs_host host;
	job *list;     /* running or done, not yet reaped (server thread) */
	int cancel[2]; /* a pipe; its write end is closed at free: every job's poll wakes */
	/* The pools: the agents' slots by client (for the per-connection limit), and the
	 * operator side's count. Server thread. */
	uint64_t agent_clients[PW_CTL_AGENT_JOBS_MAX];
	unsigned n_agent, n_operator;

	pthread_mutex_t lock; /* the counters */
	uint64_t started, refused, agent_refused;
};

int pw_ctl_jobs_new(const pw_ctl_jobs_host *host, pw_ctl_jobs **ret)
{
	pw_ctl_jobs *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->host = *host;
	if (pipe2(j->cancel, O_CLOEXEC) < 0) {
		int r = negative_errno();
		free(j);
		return r;
	}
	pthread_mutex_init(&j->lock, NULL);
	*ret = j;
	return 0;
}

static unsigned agent_jobs_of(const pw_ctl_jobs *j, uint64_t client)
{
	unsigned n = 0;
	for (unsigned i = 0; i < j->n_agent; i++)
		n += j->agent_clients[i] == client;
	return n;
}

int pw_ctl_jobs_admit(pw_ctl_jobs *j, uint64_t client, bool restricted, pw_ctl_job_slot *ret)
{
	bool ok = restricted ? j->n_agent < PW_CTL_AGENT_JOBS_MAX &&
				   agent_jobs_of(j, client) < PW_CTL_AGENT_JOBS_PER_CLIENT
			     : j->n_operator < PW_CTL_OPERATOR_JOBS_MAX;

	*ret = (pw_ctl_job_slot){.client = client, .restricted = restricted};
	pthread_mutex_lock(&j->lock);
	if (ok)
		j->started++;
	else if (restricted)
		j->agent_refused++;
	else
		j->refused++;
	if (ok && restricted)
		j->agent_clients[j->n_agent++] = client;
	else if (ok)
		j->n_operator++;
	pthread_mutex_unlock(&j->lock);
	ret->held = ok;
	return ok ? 0 : -EBUSY;
}

void pw_ctl_jobs_release(pw_ctl_jobs *j, pw_ctl_job_slot *slot)
{
	if (!slot->held)
		return;
	slot->held = false;
	pthread_mutex_lock(&j->lock);
	if (!slot->restricted) {
		j->n_operator--;
	} else {
		for (unsigned i = 0; i < j->n_agent; i++)
			if (j->agent_clients[i] == slot->client) {
				j->agent_clients[i] = j->agent_clients[--j->n_agent];
				break;
			}
	}
	pthread_mutex_unlock(&j->lock);
}

void pw_ctl_jobs_counts_get(pw_ctl_jobs *j, pw_ctl_jobs_counts *ret)
{
	pthread_mutex_lock(&j->lock);
	ret->running = j->n_agent + j->n_operator;
	ret->agent_running = j->n_agent;
	ret->started = j->started;
	ret->refused = j->refused + j->agent_refused;
	ret->agent_refused = j->agent_refused;
	pthread_mutex_unlock(&j->lock);
}

static void *job_main(void *arg)
{
	job *jb = arg;
	jb->r = jb->fn(jb->arg, jb->cancel_fd, &jb->result, &jb->fail);
	atomic_store(&jb->done, true);
	jb->jobs->host.wake(jb->jobs->host.ctx);
	return NULL;
}

static void job_free(job *jb)
{
	if (jb->free_arg)
		jb->free_arg(jb->arg);
	json_decref(jb->result);
	json_decref(jb->fail.data);
	free(jb->fail.message);
	json_decref(jb->id);
	free(jb);
}

/* Answers CLIENT's call ID (when a call, not a notification) with CODE and MESSAGE. */
static void refuse(pw_ctl_jobs *j, uint64_t client, json_t *id, int code, const char *message)
{
	if (id)
		j->host.reply_error(j->host.ctx, client, id, code, message, NULL);
}

void pw_ctl_jobs_run(pw_ctl_jobs *j, uint64_t client, bool restricted, json_t *id, pw_ctl_job_fn fn,
		     void *arg, void (*free_arg)(void *))
{
	pw_ctl_job_slot slot;

	if (pw_ctl_jobs_admit(j, client, restricted, &slot) < 0) {
		refuse(j, client, id, PW_RPC_BUSY,
		       restricted
			   ? "busy: the agents' calls that take time are at their limit; try "
			     "again when one is answered"
			   : "busy: other calls that take time are running; try again when they "
			     "are done");
		if (free_arg)
			free_arg(arg);
		return;
	}
	job *jb = calloc(1, sizeof(*jb));
	if (jb)
		*jb = (job){.jobs = j,
			    .slot = slot,
			    .id = id,
			    .fn = fn,
			    .arg = arg,
			    .free_arg = free_arg,
			    .cancel_fd = j->cancel[0]};
	if (!jb || pthread_create(&jb->thread, NULL, job_main, jb) != 0) {
		pw_ctl_jobs_release(j, &slot);
		refuse(j, client, id, PW_RPC_INTERNAL_ERROR, "cannot start the call's thread");
		if (jb) {
			jb->id = NULL; /* given to refuse */
			job_free(jb);
		} else if (free_arg) {
			free_arg(arg);
		}
		return;
	}
	/* Reaped on this thread: never before this returns. */
	jb->next = j->list;
	j->list = jb;
}

void pw_ctl_jobs_reap(pw_ctl_jobs *j)
{
	for (job **pp = &j->list; *pp;) {
		job *jb = *pp;
		if (!atomic_load(&jb->done)) {
			pp = &jb->next;
			continue;
		}
		pthread_join(jb->thread, NULL);
		*pp = jb->next;
		pw_ctl_jobs_release(j, &jb->slot);
		if (jb->id && jb->r == 0)
			j->host.reply(j->host.ctx, jb->slot.client, TAKE_PTR(jb->id),
				      TAKE_PTR(jb->result));
		else if (jb->id)
			j->host.reply_error(j->host.ctx, jb->slot.client, TAKE_PTR(jb->id),
					    jb->fail.code,
					    jb->fail.message ? jb->fail.message : "failed",
					    TAKE_PTR(jb->fail.data));
		job_free(jb);
	}
}

void pw_ctl_jobs_free(pw_ctl_jobs *j)
{
	if (!j)
		return;
	close(j->cancel[1]); /* every job's cancel_fd reads EOF: POLLIN */
	while (j->list) {
		job *jb = j->list;
		j->list = jb->next;
		pthread_join(jb->thread, NULL);
		job_free(jb);
	}
	close(j->cancel[0]);
	pthread_mutex_destroy(&j->lock);
	free(j);
}
