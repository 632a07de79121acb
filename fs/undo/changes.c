/* SPDX-License-Identifier: MIT */
/*
 * The control methods over the originals (changes.h): changes.list, changes.diff,
 * changes.undo, changes.prune and checkpoint, as a module of the control server. The only
 * file of the undo room that knows the server: it runs each call on a thread of its own,
 * hands the work (history.c, diff.c, restore.c) what it needs of the view and the caller
 * (pw_undo_call) and answers with their result or their pw_undo_fail.
 */
#include "changes.h"
#include "ctl/run_id.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "history.h"
#include "proto.h"
#include "pw_limits.h"
#include "util.h"

/* ---- the table ------------------------------------------------------------------------- */

static const pw_rpc_param changes_params[] = {
    {"since", PW_RPC_T_STRING, false, 256},
    {"since_ns", PW_RPC_T_INT, false, 0},
    {"mode", PW_RPC_T_STRING, false, PW_MODE_NAME_MAX},
    {"paths", PW_RPC_T_STRING_ARRAY, false, PW_UNDO_PATHS_MAX},
    {"change_set", PW_RPC_T_INT, false, 0},
    {"every", PW_RPC_T_BOOL, false, 0},
    {"stat", PW_RPC_T_BOOL, false, 0},
    {"all", PW_RPC_T_BOOL, false, 0},
    {"dry_run", PW_RPC_T_BOOL, false, 0},
    {"force", PW_RPC_T_BOOL, false, 0},
    {"redo", PW_RPC_T_BOOL, false, 0},
    {"pinned", PW_RPC_T_BOOL, false, 0},
};

static const pw_rpc_param checkpoint_params[] = {
    {"name", PW_RPC_T_STRING, false, 256},
};

static const pw_rpc_param prune_params[] = {
    {"keep_s", PW_RPC_T_INT, false, 0},
    {"max_bytes", PW_RPC_T_INT, false, 0},
};

/* ---- the calls -------------------------------------------------------------------------
 *
 * Each call's work takes a pw_undo_call: what it needs of the view (its project, mountpoint,
 * start) and of the caller (an agent's socket, and then the policy whose hidden paths the
 * agent never sees), so nothing past this file knows the server or the view.
 */

typedef int (*undo_fn)(const pw_undo_call *call, json_t *params, json_t **ret, pw_undo_fail *fail);

static int call_with(undo_fn fn, pw_fs *fs, pw_view *v, const pw_peer *peer, json_t *params,
		     json_t **ret, pw_undo_fail *fail)
{
	pw_undo_call call = {.fs = fs,
			     .project = pw_view_project(v),
			     .mountpoint = pw_view_mountpoint(v),
			     .started_ns = pw_view_started_ns(v),
			     .restricted = peer->restricted,
			     .hide = peer->restricted ? pw_view_policy(v, NULL) : NULL,
			     .run_of = pw_ctl_run_of_mountpoint};
	int r = fn(&call, params, ret, fail);
	pw_policy_unref(call.hide);
	return r;
}

/* ---- off the server thread ------------------------------------------------------------
 *
 * An undo of a large change set, a diff of many files (a `diff -u` child each) or a long
 * history to load can take seconds, and they wait for the store's lock, which a first
 * change through the view holds across its copy. On the server thread that would stall
 * every other client (`status`, `mode`, a switch, the agent's requests) as long. So each
 * call runs on a thread of its own, with copies of what it needs (params, the peer), and
 * replies from the server thread when done: the thread wakes the server, whose tick
 * reaps it. The server admits them (server.h, "Slow work of a call": the agents' pool and
 * the person's own; beyond it PW_RPC_BUSY at once), a notification included: it runs as a
 * job too, bounded alike, and is not answered. The store's lock orders them with each
 * other and with the FUSE layer, as before.
 */

typedef struct job {
	pw_ctl_server *server;
	uint64_t client;
	json_t *id; /* the deferred call's; set on the server thread after the start */
	undo_fn fn;
	pw_fs *fs;
	pw_view *view;
	pw_peer peer;	/* a copy: the client may be gone when the job ends */
	json_t *params; /* a deep copy: jansson's objects are not for two threads */
	int r;
	json_t *result;
	pw_undo_fail fail;
	pw_ctl_job_slot slot; /* its place in the server's admission */
	pthread_t thread;
	atomic_bool done;
	struct job *next;
} job;

typedef struct changes_mod {
	pw_fs *fs;
	job *jobs; /* running or done, not yet reaped (server thread only) */
	size_t n_jobs;
} changes_mod;

static void *job_main(void *arg)
{
	job *j = arg;
	j->r = call_with(j->fn, j->fs, j->view, &j->peer, j->params, &j->result, &j->fail);
	atomic_store(&j->done, true);
	pw_ctl_server_wake(j->server);
	return NULL;
}

static void job_free(job *j)
{
	json_decref(j->params);
	json_decref(j->result);
	json_decref(j->fail.data);
	free(j->fail.message);
	json_decref(j->id);
	free(j);
}

/* Runs FN for the call C on a thread of its own; a notification (no id) too, unanswered. */
static int run_job(pw_ctl_ctx *c, undo_fn fn, json_t **ret)
{
	changes_mod *m = c->data;
	json_t *id = pw_ctl_client_defer(c->client);
	uint64_t client = pw_ctl_client_serial(c->client);
	pw_ctl_job_slot slot;
	(void)ret;
	if (pw_ctl_job_admit(c, &slot) < 0) {
		if (id)
			pw_ctl_server_reply_error(c->server, client, id, PW_RPC_BUSY,
						  "busy: other calls that take time are running; "
						  "try again when they are done",
						  NULL);
		return PW_CTL_DEFERRED;
	}
	job *j = calloc(1, sizeof(*j));
	if (j) {
		*j = (job){.server = c->server,
			   .client = client,
			   .id = id,
			   .fn = fn,
			   .fs = m->fs,
			   .view = c->view,
			   .peer = *c->peer,
			   .slot = slot};
		j->peer.reason = j->peer.answered_by = NULL;
		j->params = c->params ? json_deep_copy(c->params) : NULL;
	}
	if (!j || (c->params && !j->params) || pthread_create(&j->thread, NULL, job_main, j) != 0) {
		if (j) {
			j->id = NULL;
			job_free(j);
		}
		pw_ctl_job_release(c->server, &slot);
		if (id)
			pw_ctl_server_reply_error(c->server, client, id, PW_RPC_INTERNAL_ERROR,
						  "cannot start the call's thread", NULL);
		return PW_CTL_DEFERRED;
	}
	/* Reaped by the tick, on this thread: never before this returns. */
	j->next = m->jobs;
	m->jobs = j;
	m->n_jobs++;
	return PW_CTL_DEFERRED;
}

/* Replies for the jobs that are done. */
static int64_t changes_tick(pw_ctl_server *s, void *data, int64_t now_ms)
{
	changes_mod *m = data;
	for (job **pp = &m->jobs; *pp;) {
		job *j = *pp;
		if (!atomic_load(&j->done)) {
			pp = &j->next;
			continue;
		}
		pthread_join(j->thread, NULL);
		*pp = j->next;
		m->n_jobs--;
		pw_ctl_job_release(s, &j->slot);
		if (j->id && j->r == 0) /* a notification (no id) is not answered */
			pw_ctl_server_reply(s, j->client, TAKE_PTR(j->id), TAKE_PTR(j->result));
		else if (j->id)
			pw_ctl_server_reply_error(s, j->client, TAKE_PTR(j->id), j->fail.code,
						  j->fail.message ? j->fail.message : "failed",
						  TAKE_PTR(j->fail.data));
		job_free(j);
	}
	return -1; /* no deadline (not an error: the tick's "none"); a job that ends wakes the
		    * server */
}

static int changes_init(pw_ctl_server *s, void *arg, void **ret_data)
{
	changes_mod *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->fs = arg;
	*ret_data = m;
	return 0;
}

/* The server is stopping: the jobs finish (their clients are not answered). */
static void changes_fini(pw_ctl_server *s, void *data)
{
	changes_mod *m = data;
	if (!m)
		return;
	while (m->jobs) {
		job *j = m->jobs;
		m->jobs = j->next;
		pthread_join(j->thread, NULL);
		job_free(j);
	}
	free(m);
}

/* The table's handlers: the module's data is a changes_mod over the daemon's pw_fs. */
#define HANDLER(name)                                                                              \
	static int m_##name(pw_ctl_ctx *c, json_t **ret)                                           \
	{                                                                                          \
		return run_job(c, pw_undo_changes_##name, ret);                                    \
	}
HANDLER(list)
HANDLER(diff)
HANDLER(undo)
HANDLER(prune)
HANDLER(checkpoint)
#undef HANDLER

static const pw_ctl_method methods[] = {
    {"changes.list", m_list, changes_params, ELEMENTSOF(changes_params), NULL},
    {"changes.diff", m_diff, changes_params, ELEMENTSOF(changes_params), NULL},
    {"changes.undo", m_undo, changes_params, ELEMENTSOF(changes_params), PW_UNDO_REFUSED_UNDO},
    {"changes.prune", m_prune, prune_params, ELEMENTSOF(prune_params), PW_UNDO_REFUSED_PRUNE},
    {"checkpoint", m_checkpoint, checkpoint_params, ELEMENTSOF(checkpoint_params),
     PW_UNDO_REFUSED_CHECKPOINT},
};

const pw_ctl_module pw_undo_changes_module = {
    .name = "changes",
    .methods = methods,
    .n_methods = ELEMENTSOF(methods),
    .init = changes_init,
    .fini = changes_fini,
    .tick = changes_tick,
};
