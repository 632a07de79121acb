/* SPDX-License-Identifier: MIT */
/*
 * The control methods over the originals (changes.h): changes.list, changes.diff,
 * changes.undo, changes.prune and checkpoint, as a module of the control server. The only
 * file of the undo room that knows the server: it runs each call as one of the server's
 * jobs (a thread of its own, ctl/jobs.c), hands the work (history.c, diff.c, restore.c) what it
 * needs of the view and the caller (pw_undo_call) and answers with their result or their
 * pw_undo_fail.
 */
#include "changes.h"
#include "ctl/run_id.h"

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
			     .project = pw_view_info_of(v)->project,
			     .mountpoint = pw_view_info_of(v)->mountpoint,
			     .started_ns = pw_view_info_of(v)->started_ns,
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
 * call is a job of the server's (server.h, "Slow work of a call": admitted to the agents'
 * pool or the person's own, beyond it PW_RPC_BUSY at once; a notification runs as a job
 * too, bounded alike, and is not answered), with copies of what it needs (params, the
 * peer). The store's lock orders the jobs with each other and with the FUSE layer.
 */

typedef struct undo_job {
	undo_fn fn;
	pw_fs *fs;
	pw_view *view;
	pw_peer peer;	/* a copy: the client may be gone when the job ends */
	json_t *params; /* a deep copy: jansson's objects are not for two threads */
} undo_job;

static void undo_job_free(void *arg)
{
	undo_job *j = arg;

	if (j)
		json_decref(j->params);
	free(j);
}

/* The job's thread (pw_ctl_job_fn): the work, its failure handed over as the server's. The
 * work is not cancelled when the server stops: it ends under the store's lock, then joins. */
static int undo_job_main(void *arg, int cancel_fd, json_t **ret_result, pw_ctl_fail *fail)
{
	undo_job *j = arg;
	pw_undo_fail f = {0};
	int r = call_with(j->fn, j->fs, j->view, &j->peer, j->params, ret_result, &f);

	(void)cancel_fd;
	*fail = (pw_ctl_fail){.code = f.code, .message = f.message, .data = f.data};
	return r;
}

/* Runs FN for the call C as a job; the module's data is the daemon's pw_fs. */
static int run_job(pw_ctl_ctx *c, undo_fn fn, json_t **ret)
{
	undo_job *j = calloc(1, sizeof(*j));

	(void)ret;
	if (j) {
		*j = (undo_job){.fn = fn, .fs = c->data, .view = c->view, .peer = *c->peer};
		j->peer.reason = j->peer.answered_by = NULL;
		j->params = c->params ? json_deep_copy(c->params) : NULL;
	}
	if (!j || (c->params && !j->params)) {
		undo_job_free(j);
		return pw_ctl_fail_set(c->fail, PW_RPC_INTERNAL_ERROR, "out of memory");
	}
	return pw_ctl_job_run(c, undo_job_main, j, undo_job_free);
}

/* The table's handlers. */
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
};
