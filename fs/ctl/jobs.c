/* SPDX-License-Identifier: MIT */
/*
 * Slow work of a call on a thread of its own, and the admission that keeps the person's
 * share of it (server.h, "Slow work of a call"; jobs.h for the server's side).
 *
 * Admission and the job list belong to the server thread: a job is admitted, started and
 * reaped there. The job's thread only runs its function, sets `done` and wakes the
 * server. The counters are also read by pw_ctl_server_get_stats from any thread, hence
 * their lock.
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
#include "util.h"

typedef struct job {
	pw_ctl_server *server;
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
	job *list;     /* running or done, not yet reaped (server thread) */
	int cancel[2]; /* a pipe; its write end is closed at free: every job's poll wakes */
	/* The pools: the agents' slots by client (for the per-connection limit), and the
	 * operator side's count. Server thread. */
	uint64_t agent_clients[PW_CTL_AGENT_JOBS_MAX];
	unsigned n_agent, n_operator;

	pthread_mutex_t lock; /* the counters */
	uint64_t started, refused, agent_refused;
};

int pw_ctl_jobs_new(pw_ctl_jobs **ret)
{
	pw_ctl_jobs *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
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

int pw_ctl_job_admit(pw_ctl_ctx *x, pw_ctl_job_slot *ret)
{
	pw_ctl_jobs *j = pw_ctl_server_jobs(x->server);
	uint64_t client = pw_ctl_client_serial(x->client);
	bool restricted = x->peer->restricted;
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

void pw_ctl_job_release(pw_ctl_server *s, pw_ctl_job_slot *slot)
{
	pw_ctl_jobs *j = pw_ctl_server_jobs(s);
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

void pw_ctl_jobs_stats(pw_ctl_jobs *j, pw_ctl_stats *ret)
{
	pthread_mutex_lock(&j->lock);
	ret->jobs_running = j->n_agent + j->n_operator;
	ret->agent_jobs_running = j->n_agent;
	ret->jobs_started = j->started;
	ret->jobs_refused = j->refused + j->agent_refused;
	ret->agent_jobs_refused = j->agent_refused;
	pthread_mutex_unlock(&j->lock);
}

static void *job_main(void *arg)
{
	job *jb = arg;
	jb->r = jb->fn(jb->arg, jb->cancel_fd, &jb->result, &jb->fail);
	atomic_store(&jb->done, true);
	pw_ctl_server_wake(jb->server);
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

/* Answers ID (when a call, not a notification) with CODE and MESSAGE. */
static void refuse(pw_ctl_ctx *x, json_t *id, int code, const char *message)
{
	if (id)
		pw_ctl_server_reply_error(x->server, pw_ctl_client_serial(x->client), id, code,
					  message, NULL);
}

int pw_ctl_job_run(pw_ctl_ctx *x, pw_ctl_job_fn fn, void *arg, void (*free_arg)(void *))
{
	pw_ctl_jobs *j = pw_ctl_server_jobs(x->server);
	json_t *id = pw_ctl_client_defer(x->client);
	pw_ctl_job_slot slot;

	if (pw_ctl_job_admit(x, &slot) < 0) {
		refuse(x, id, PW_RPC_BUSY,
		       x->peer->restricted
			   ? "busy: the agents' calls that take time are at their limit; try "
			     "again when one is answered"
			   : "busy: other calls that take time are running; try again when they "
			     "are done");
		if (free_arg)
			free_arg(arg);
		return PW_CTL_DEFERRED;
	}
	job *jb = calloc(1, sizeof(*jb));
	if (jb)
		*jb = (job){.server = x->server,
			    .slot = slot,
			    .id = id,
			    .fn = fn,
			    .arg = arg,
			    .free_arg = free_arg,
			    .cancel_fd = j->cancel[0]};
	if (!jb || pthread_create(&jb->thread, NULL, job_main, jb) != 0) {
		pw_ctl_job_release(x->server, &slot);
		refuse(x, id, PW_RPC_INTERNAL_ERROR, "cannot start the call's thread");
		if (jb) {
			jb->id = NULL; /* given to refuse */
			job_free(jb);
		} else if (free_arg) {
			free_arg(arg);
		}
		return PW_CTL_DEFERRED;
	}
	/* Reaped on this thread: never before this returns. */
	jb->next = j->list;
	j->list = jb;
	return PW_CTL_DEFERRED;
}

void pw_ctl_jobs_reap(pw_ctl_server *s, pw_ctl_jobs *j)
{
	for (job **pp = &j->list; *pp;) {
		job *jb = *pp;
		if (!atomic_load(&jb->done)) {
			pp = &jb->next;
			continue;
		}
		pthread_join(jb->thread, NULL);
		*pp = jb->next;
		pw_ctl_job_release(s, &jb->slot);
		if (jb->id && jb->r == 0)
			pw_ctl_server_reply(s, jb->slot.client, TAKE_PTR(jb->id),
					    TAKE_PTR(jb->result));
		else if (jb->id)
			pw_ctl_server_reply_error(s, jb->slot.client, TAKE_PTR(jb->id),
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
