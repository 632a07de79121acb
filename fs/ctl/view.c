/* SPDX-License-Identifier: MIT */
/*
 * The control-plane state of one view (view.h has the contract).
 *
 * Every change of the active policy follows the same steps under the view's mutex:
 * build the target policy (compile, or fail closed), authorize it for the peer, install it
 * with fs_ops->set_policy (which returns once operations starting afterwards obey it), then
 * persist and record. Persisting is best effort: a state database error never undoes a
 * switch that the filesystem already enforces; it is remembered and shown in status.
 */
#include "view.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frozen.h"
#include "store/audit.h"
#include "store/state.h"
#include "util.h"

#define PW_DEFAULT_MODE "plan"

struct pw_view {
	/* Immutable after pw_view_new. */
	char *project, *mountpoint, *bundled_dir, *global_dir;
	char *state_db; /* where the state database is (status reports it), or NULL */
	char *run_id;	/* a run's own view: its id (view.h); NULL: a bare view */
	pid_t run_pid;
	const pw_view_fs_ops *fs_ops;
	void *fs_ctx;
	uid_t owner;
	pw_rule *lane; /* the view's lane (policy.h, step 8): every mode is compiled with it */
	size_t n_lane;
	pw_state *state;
	pw_audit *audit;
	int64_t started_ns;
	pw_view_info info; /* the fields above, as pw_view_info_of shows them */

	pthread_mutex_t lock; /* guards everything below and every use of state */
	pw_modeset *ms;	      /* the mode files as loaded */
	pw_frozen frozen;     /* the approved plans the installed policy protects (frozen.h) */
	bool trusted;
	char *mode;	   /* the active mode's name */
	char *fail_reason; /* NULL unless failing closed */
	char *state_error; /* last persistence failure, for status */
	uint64_t reloads;

	pw_view_listener listener; /* guarded by lock; called without it */
	void *listener_data;
};

static void set_str(char **slot, char *value)
{
	free(*slot);
	*slot = value;
}

static void note_state_error(pw_view *v, const char *what, int r)
{
	char *msg = NULL;
	if (asprintf(&msg, "state database: %s failed: %s", what, strerror(-r)) < 0)
		msg = NULL;
	set_str(&v->state_error, msg);
}

/* Loads the modeset with the current trust. Caller holds the lock (or owns v alone). */
static int load_modeset(pw_view *v, pw_modeset **ret_ms, bool *ret_trusted)
{
	bool trusted = false;

	if (v->state) {
		int r = pw_state_is_trusted(v->state, v->project);
		if (r < 0)
			note_state_error(v, "reading trust", r);
		trusted = r > 0;
	}
	pw_load_opts o = {
	    .bundled_dir = v->bundled_dir,
	    .global_dir = v->global_dir,
	    .project_dir = v->project,
	    .trusted = trusted,
	};
	int r = pw_modeset_load(&o, ret_ms);
	if (r < 0)
		return r;
	*ret_trusted = trusted;
	return 0;
}

/* The approved plans from the state database (frozen.h): a set that could not be read is
 * kept with its error, which the fail reason of every policy compiled with it shows. Caller
 * holds the lock. 0 or -ENOMEM. */
static int load_frozen(pw_view *v, pw_frozen *ret)
{
	return pw_frozen_load(v->state, v->project, ret);
}

/* Mode NAME of MS with the view's lane and the approved plans F (policy.h). */
static int compile_mode(const pw_view *v, const pw_modeset *ms, const pw_frozen *f,
			const char *name, pw_policy **ret)
{
	pw_policy_extras x = {
	    .lane = v->lane, .n_lane = v->n_lane, .frozen = f->rules, .n_frozen = f->n};

	return pw_policy_compile_extras(ms, name, &x, ret);
}

/*
 * The policy for mode NAME in MS with the approved plans F, never a permissive substitute: a
 * broken file, an unknown name or approved plans that could not be read give a fail-closed
 * policy whose reason says why. Returns 0 with *ret, or -ENOMEM. *ret_fail is the reason
 * (malloc'd) when failing closed, else NULL.
 */
static int policy_or_fail_closed(const pw_view *v, const pw_modeset *ms, const pw_frozen *f,
				 const char *name, pw_policy **ret, char **ret_fail)
{
	const pw_warning *w = NULL;
	char *why = NULL;
	pw_policy *p = NULL;
	int r;

	if (pw_modeset_mode_broken(ms, name, &w)) {
		_cleanup_free_ char *text = pw_warning_format(w);
		r = asprintf(&why, "mode '%s' is broken: %s", name, text ? text : "(no detail)");
	} else if (f->error && pw_modeset_find(ms, name)) {
		r = asprintf(&why, "%s: every mode fails closed until a reload can apply them",
			     f->error);
	} else {
		r = compile_mode(v, ms, f, name, &p);
		if (r == 0) {
			*ret = p;
			*ret_fail = NULL;
			return 0;
		}
		if (r != -ENOENT)
			return r;
		r = asprintf(&why, "mode '%s' does not exist", name);
	}
	if (r < 0)
		return -ENOMEM;
	p = pw_policy_new_fail_closed(name, why);
	if (!p) {
		free(why);
		return -ENOMEM;
	}
	*ret = p;
	*ret_fail = why;
	return 0;
}

/* Installs P in the FUSE layer and tells the originals store (fs/undo/keep.c) for REASON;
 * NEW_SET starts a new change set. Then waits for the kernel's cached write bits, last: the
 * originals must be kept from the first write P allows. Returns the new generation. */
static uint64_t install(pw_view *v, pw_policy *p, const char *reason, bool new_set)
{
	uint64_t gen = v->fs_ops->set_policy(v->fs_ctx, p);
	if (v->fs_ops->policy_installed)
		v->fs_ops->policy_installed(v->fs_ctx, p, reason, new_set);
	if (v->fs_ops->wait_invalidated)
		v->fs_ops->wait_invalidated(v->fs_ctx, gen);
	return gen;
}

/*
 * Does P allow other writes than the policy in force (a reload after an edit of the mode's
 * file, or after `trust` brought the project's own modes in)? Then the reload starts a
 * change set of its own, recorded under the mode that allows its changes: what the old
 * rules allowed never reads as the new rules' (issue 29). Equal both ways by
 * pw_policy_is_tightening (rule text): a reload that changes nothing starts nothing.
 */
static bool allowance_changed(pw_view *v, const pw_policy *p)
{
	pw_policy *cur = v->fs_ops->get_policy(v->fs_ctx, NULL);
	bool changed = !cur || !pw_policy_is_tightening(cur, p) || !pw_policy_is_tightening(p, cur);
	pw_policy_unref(cur);
	return changed && !pw_policy_writes_nothing(p);
}

static const char *peer_origin(const pw_peer *peer, const char *dflt)
{
	return peer && peer->origin ? peer->origin : dflt;
}

/* Persists and records a switch that is already in force. Caller holds the lock. */
static void record_switch(pw_view *v, const char *from, const char *to, uint64_t gen,
			  const pw_peer *peer, const char *origin, bool persist)
{
	int r;

	if (!v->state)
		return;
	/* A run's mode is its own: the project's last mode is the bare views' to keep. */
	if (persist && !v->run_id) {
		r = pw_state_set_last_mode(v->state, v->project, to);
		if (r < 0)
			note_state_error(v, "saving the last mode", r);
	}
	pw_switch_record rec = {
	    .time_ns = pw_clock_ns(CLOCK_REALTIME),
	    .project = v->project,
	    .mountpoint = v->mountpoint,
	    .from_mode = from,
	    .to_mode = to,
	    .generation = gen,
	    .pid = peer ? peer->pid : getpid(),
	    .uid = peer ? peer->uid : getuid(),
	    .comm = peer && peer->comm[0] ? peer->comm : NULL,
	    .origin = origin,
	    .reason = peer ? peer->reason : NULL,
	    .answered_by = peer ? peer->answered_by : NULL,
	    .plan = peer ? peer->plan : NULL,
	    .asked_pid = peer ? peer->asked_pid : 0,
	    .asked_comm = peer ? peer->asked_comm : NULL,
	};
	r = pw_state_record_switch(v->state, &rec);
	if (r < 0)
		note_state_error(v, "recording the switch", r);
}

int pw_view_new(const pw_view_opts *opts, pw_view **ret)
{
	pw_view *v;
	pw_policy *p = NULL;
	char *fail = NULL;
	_cleanup_free_ char *last = NULL;
	const char *initial;
	int r;

	if (!opts || !opts->project || !opts->mountpoint || !opts->fs_ops ||
	    !opts->fs_ops->set_policy || !opts->fs_ops->get_policy || !opts->fs_ops->get_stats)
		return -EINVAL;
	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	pthread_mutex_init(&v->lock, NULL);
	v->fs_ops = opts->fs_ops;
	v->fs_ctx = opts->fs_ctx;
	v->owner = opts->owner_uid;
	v->state = opts->state;
	v->audit = opts->audit;
	v->started_ns = pw_clock_ns(CLOCK_REALTIME);
	v->project = strdup(opts->project);
	v->mountpoint = strdup(opts->mountpoint);
	v->bundled_dir = pw_dup_or_null(opts->bundled_dir);
	v->global_dir = pw_dup_or_null(opts->global_dir);
	v->state_db = pw_dup_or_null(opts->state_db);
	v->run_id = pw_dup_or_null(opts->run_id);
	v->run_pid = opts->run_id ? opts->run_pid : 0;
	if (!v->project || !v->mountpoint || (opts->bundled_dir && !v->bundled_dir) ||
	    (opts->global_dir && !v->global_dir) || (opts->state_db && !v->state_db) ||
	    (opts->run_id && !v->run_id)) {
		r = -ENOMEM;
		goto fail;
	}
	v->info = (pw_view_info){.project = v->project,
				 .mountpoint = v->mountpoint,
				 .owner = v->owner,
				 .audit = v->audit,
				 .started_ns = v->started_ns,
				 .state_db = v->state_db,
				 .run_id = v->run_id,
				 .run_pid = v->run_pid};
	if (opts->n_lane) {
		r = pw_lane_parse(opts->lane, opts->n_lane, &v->lane, NULL, NULL);
		if (r < 0)
			goto fail;
		v->n_lane = opts->n_lane;
	}

	r = load_modeset(v, &v->ms, &v->trusted);
	if (r == 0)
		r = load_frozen(v, &v->frozen);
	if (r < 0)
		goto fail;

	initial = opts->initial_mode;
	if (!initial && v->state) {
		r = pw_state_get_last_mode(v->state, v->project, &last);
		if (r < 0 && r != -ENOENT)
			note_state_error(v, "reading the last mode", r);
		initial = last;
	}
	if (!initial)
		initial = PW_DEFAULT_MODE;

	r = policy_or_fail_closed(v, v->ms, &v->frozen, initial, &p, &fail);
	if (r < 0)
		goto fail;
	v->mode = strdup(initial);
	if (!v->mode) {
		pw_policy_unref(p);
		free(fail);
		r = -ENOMEM;
		goto fail;
	}
	v->fail_reason = fail;
	uint64_t gen = install(v, p, "mount", true);
	pw_policy_unref(p);
	/* An explicit --mode is remembered; a restored one already is. */
	record_switch(v, NULL, v->mode, gen, NULL, "mount", opts->initial_mode && !fail);
	*ret = v;
	return 0;
fail:
	pw_view_free(v);
	return r;
}

void pw_view_free(pw_view *v)
{
	if (!v)
		return;
	pw_modeset_free(v->ms);
	pw_frozen_done(&v->frozen);
	free(v->project);
	free(v->mountpoint);
	free(v->bundled_dir);
	free(v->state_db);
	free(v->run_id);
	free(v->global_dir);
	free(v->mode);
	free(v->fail_reason);
	free(v->state_error);
	pw_lane_free(v->lane, v->n_lane);
	pthread_mutex_destroy(&v->lock);
	free(v);
}

size_t pw_view_lane_count(const pw_view *v)
{
	return v->n_lane;
}

const char *pw_view_lane_glob(const pw_view *v, size_t i)
{
	return i < v->n_lane ? v->lane[i].pattern : NULL;
}

int pw_view_authorize_peer(const pw_view *v, const pw_peer *peer)
{
	if (!peer)
		return -EPERM;
	return peer->uid == 0 || peer->uid == v->owner ? 0 : -EPERM;
}

int pw_view_authorize_switch(pw_view *v, const pw_peer *peer, const pw_policy *target,
			     char **ret_why)
{
	pw_policy *cur;
	bool tighter;
	int r;

	if (pw_view_authorize_peer(v, peer) < 0) {
		if (ret_why &&
		    asprintf(ret_why, "uid %u may not control this view (owned by uid %u)",
			     peer ? (unsigned)peer->uid : 0u, (unsigned)v->owner) < 0)
			*ret_why = NULL;
		return -EPERM;
	}
	if (!peer->restricted)
		return 0;

	cur = v->fs_ops->get_policy(v->fs_ctx, NULL);
	tighter = cur && pw_policy_is_tightening(cur, target);
	if (tighter) {
		pw_policy_unref(cur);
		return 0;
	}
	if (ret_why) {
		const char *to = pw_policy_mode_name(target);
		r = asprintf(
		    ret_why,
		    "refused: switching from mode '%s' to '%s' would allow more writes, and "
		    "an agent may only tighten the mode; ask the person you work for to run "
		    "`piworkfs mode %s` outside the agent",
		    cur ? pw_policy_mode_name(cur) : "?", to, to);
		if (r < 0)
			*ret_why = NULL;
	}
	pw_policy_unref(cur);
	return -EPERM;
}

static _printf_(2, 3) void set_why(char **ret_why, const char *fmt, ...)
{
	va_list ap;

	if (!ret_why)
		return;
	va_start(ap, fmt);
	if (vasprintf(ret_why, fmt, ap) < 0)
		*ret_why = NULL;
	va_end(ap);
}

static void notify(pw_view *v, const char *from, const char *to, uint64_t gen, const pw_peer *peer)
{
	pw_view_listener fn;
	void *data;

	pthread_mutex_lock(&v->lock);
	fn = v->listener;
	data = v->listener_data;
	pthread_mutex_unlock(&v->lock);
	if (fn)
		fn(from, to, gen, peer, data);
}

void pw_view_installed_done(pw_view_installed *in)
{
	if (!in)
		return;
	pw_policy_unref(in->policy);
	free(in->previous);
	*in = (pw_view_installed){};
}

/* Fills *RET (if any) with the policy a switch is about to install and the mode before it;
 * the caller sets the generation once installed. Returns 0 or -ENOMEM (nothing filled). */
static int installed(pw_view_installed *ret, pw_policy *p, const char *previous)
{
	char *prev;

	if (!ret)
		return 0;
	prev = pw_dup_or_null(previous);
	if (previous && !prev)
		return -ENOMEM;
	*ret = (pw_view_installed){.policy = pw_policy_ref(p), .previous = prev};
	return 0;
}

/*
 * The end of a change of the policy in force, the lock let go: R < 0 undoes IN and returns R.
 * Else the listener hears of the install (FROM to TO; no TO: nothing was installed) and *RET
 * (if any) gets IN. Returns 0 then.
 */
static int change_end(pw_view *v, int r, pw_view_installed *in, const char *from, const char *to,
		      uint64_t gen, const pw_peer *peer, pw_view_installed *ret)
{
	if (r < 0) {
		pw_view_installed_done(in);
		return r;
	}
	if (to)
		notify(v, from, to, gen, peer);
	if (ret)
		*ret = *in;
	return 0;
}

/*
 * Installs P, the active mode's policy compiled anew, for REASON (a reload, new plans): with
 * FROZEN the approved plans it protects and *FAIL its fail-closed reason, both taken. IN (if
 * any) is filled as installed() does, with the generation. *RET_MODE gets a copy of the mode's
 * name for the notification, *RET_GEN the generation. Lock held. Returns 0, or -ENOMEM with
 * nothing installed or taken.
 */
static int reinstall(pw_view *v, pw_policy *p, const char *reason, pw_frozen *frozen, char **fail,
		     pw_view_installed *in, char **ret_mode, uint64_t *ret_gen)
{
	_cleanup_free_ char *mode = strdup(v->mode);
	uint64_t gen;

	if (!mode || installed(in, p, v->mode) < 0)
		return -ENOMEM;
	gen = install(v, p, reason, allowance_changed(v, p));
	if (in)
		in->generation = gen;
	pw_frozen_done(&v->frozen);
	v->frozen = *frozen;
	*frozen = (pw_frozen){0};
	set_str(&v->fail_reason, TAKE_PTR(*fail));
	*ret_mode = TAKE_PTR(mode);
	*ret_gen = gen;
	return 0;
}

int pw_view_set_mode(pw_view *v, const char *name, const pw_peer *peer, uint64_t *ret_generation,
		     char **ret_why)
{
	pw_view_installed in;
	int r = pw_view_switch(v, name, peer, ret_generation ? &in : NULL, ret_why);

	if (r == 0 && ret_generation) {
		*ret_generation = in.generation;
		pw_view_installed_done(&in);
	}
	return r;
}

/*
 * A switch to the mode already in force changes nothing: no install, no new generation, no
 * change set of originals, no switch record, no mode.changed. A new change set is the
 * person's to start (`checkpoint`); were this a re-install, anyone allowed a same-mode
 * switch (the agent socket: it is no loosening) could start one, and with a capped store
 * push the change set holding its own deletions out at the next prune. Fills *RET (if any)
 * with the policy in force, its generation, and the same mode as the previous one. Caller
 * holds the lock. Returns 0 or -ENOMEM.
 */
static int same_mode(pw_view *v, pw_view_installed *ret)
{
	uint64_t gen = 0;
	pw_policy *cur;
	int r;

	if (!ret)
		return 0;
	cur = v->fs_ops->get_policy(v->fs_ctx, &gen);
	if (!cur)
		return -ENOMEM;
	r = installed(ret, cur, v->mode);
	pw_policy_unref(cur);
	if (r == 0)
		ret->generation = gen;
	return r;
}

int pw_view_switch(pw_view *v, const char *name, const pw_peer *peer, pw_view_installed *ret,
		   char **ret_why)
{
	pw_view_installed in = {};
	_cleanup_free_ char *from = NULL, *to = NULL, *new_mode = NULL, *fail = NULL;
	const pw_warning *w = NULL;
	pw_policy *p = NULL;
	uint64_t gen = 0;
	int r;

	if (!name || !name[0])
		return -EINVAL;
	to = strdup(name);
	if (!to)
		return -ENOMEM;

	pthread_mutex_lock(&v->lock);
	if (pw_view_authorize_peer(v, peer) < 0) {
		r = pw_view_authorize_switch(v, peer, NULL, ret_why);
		goto out;
	}
	if (pw_modeset_mode_broken(v->ms, name, &w)) {
		_cleanup_free_ char *text = pw_warning_format(w);
		set_why(ret_why, "mode '%s' is broken: %s", name, text ? text : "(no detail)");
		r = -EBADMSG;
		goto out;
	}
	if (!pw_modeset_find(v->ms, name)) {
		set_why(ret_why, "unknown mode '%s'", name);
		r = -ENOENT;
		goto out;
	}
	/* Approved plans that could not be read: the switch happens, into the mode failing
	 * closed (policy_or_fail_closed), as at mount. */
	r = policy_or_fail_closed(v, v->ms, &v->frozen, name, &p, &fail);
	if (r < 0)
		goto out;
	r = pw_view_authorize_switch(v, peer, p, ret_why);
	if (r < 0)
		goto out;
	if (streq_ptr(v->mode, name) && !v->fail_reason && !fail) {
		r = same_mode(v, ret ? &in : NULL);
		goto out_same;
	}

	new_mode = strdup(name);
	/* Allocated before the install, so that a switch in force is always reported. */
	if (!new_mode || installed(ret ? &in : NULL, p, v->mode) < 0) {
		r = -ENOMEM;
		goto out;
	}
	/* A switch into a mode that writes starts a change set of originals. */
	gen = install(v, p, "switch", !pw_policy_writes_nothing(p));
	in.generation = gen;
	from = TAKE_PTR(v->mode);
	v->mode = TAKE_PTR(new_mode);
	set_str(&v->fail_reason, TAKE_PTR(fail));
	record_switch(v, from, name, gen, peer, peer_origin(peer, "socket"), true);
	r = 0;
out:
	pthread_mutex_unlock(&v->lock);
	pw_policy_unref(p);
	return change_end(v, r, &in, from, to, gen, peer, ret);
out_same:
	pthread_mutex_unlock(&v->lock);
	pw_policy_unref(p);
	if (r < 0)
		return r;
	if (ret)
		*ret = in;
	return 0;
}

int pw_view_reload(pw_view *v, const pw_peer *peer, pw_view_installed *ret, char **ret_why)
{
	pw_view_installed in = {};
	_cleanup_(pw_frozen_done) pw_frozen frozen = {0};
	pw_modeset *ms = NULL;
	pw_policy *p = NULL;
	_cleanup_free_ char *fail = NULL;
	_cleanup_free_ char *mode = NULL;
	bool trusted = false;
	uint64_t gen = 0;
	int r;

	pthread_mutex_lock(&v->lock);
	if (peer && pw_view_authorize_peer(v, peer) < 0) {
		r = pw_view_authorize_switch(v, peer, NULL, ret_why);
		goto out;
	}
	r = load_modeset(v, &ms, &trusted);
	if (r == 0)
		r = load_frozen(v, &frozen);
	if (r < 0)
		goto out;
	r = policy_or_fail_closed(v, ms, &frozen, v->mode, &p, &fail);
	if (r < 0)
		goto out;
	if (peer) {
		r = pw_view_authorize_switch(v, peer, p, ret_why);
		if (r < 0)
			goto out;
	}
	r = reinstall(v, p, "reload", &frozen, &fail, ret ? &in : NULL, &mode, &gen);
	if (r < 0)
		goto out;
	pw_modeset_free(v->ms);
	v->ms = TAKE_PTR(ms);
	v->trusted = trusted;
	v->reloads++;
	record_switch(v, v->mode, v->mode, gen, peer, peer_origin(peer, "reload"), false);
	r = 0;
out:
	pthread_mutex_unlock(&v->lock);
	pw_modeset_free(ms);
	pw_policy_unref(p);
	return change_end(v, r, &in, mode, mode, gen, peer, ret);
}

int pw_view_sync_plans(pw_view *v, const pw_peer *peer, pw_view_installed *ret, char **ret_why)
{
	pw_view_installed in = {};
	_cleanup_(pw_frozen_done) pw_frozen frozen = {0};
	_cleanup_free_ char *mode = NULL;
	pw_policy *p = NULL;
	_cleanup_free_ char *fail = NULL;
	uint64_t gen = 0;
	bool changed;
	int r;

	pthread_mutex_lock(&v->lock);
	if (peer && pw_view_authorize_peer(v, peer) < 0) {
		r = pw_view_authorize_switch(v, peer, NULL, ret_why);
		goto out;
	}
	r = load_frozen(v, &frozen);
	if (r < 0)
		goto out;
	/* The same plans, read as before, and the policy in force was compiled with them:
	 * nothing to install. A view that fails closed for another reason (a broken mode
	 * file) stays so: only a reload or a switch is about that. */
	changed = !pw_frozen_equal(&frozen, &v->frozen);
	if (!changed) {
		r = same_mode(v, ret ? &in : NULL);
		goto out;
	}
	r = policy_or_fail_closed(v, v->ms, &frozen, v->mode, &p, &fail);
	if (r < 0)
		goto out;
	r = reinstall(v, p, "plans", &frozen, &fail, ret ? &in : NULL, &mode, &gen);
	if (r < 0)
		goto out;
	/* No switch is recorded: the mode stays. The view asked to approve or reopen a plan
	 * records that decision (PEER names the plan) in the switch history, once; the other
	 * views of the project install it without a row of their own. */
	if (peer && peer->plan)
		record_switch(v, v->mode, v->mode, gen, peer, peer_origin(peer, "plans"), false);
	r = 0;
out:
	pthread_mutex_unlock(&v->lock);
	pw_policy_unref(p);
	return change_end(v, r, &in, mode, mode, gen, peer, ret);
}

const pw_view_info *pw_view_info_of(const pw_view *v)
{
	return &v->info;
}

pw_policy *pw_view_policy(pw_view *v, uint64_t *ret_generation)
{
	return v->fs_ops->get_policy(v->fs_ctx, ret_generation);
}

void pw_view_fs_stats(pw_view *v, pw_fs_stats *ret)
{
	v->fs_ops->get_stats(v->fs_ctx, ret);
}

void pw_view_status_done(pw_view_status *st)
{
	if (!st)
		return;
	free(st->mode);
	free(st->fail_reason);
	for (size_t i = 0; i < st->n_warnings; i++)
		free(st->warnings[i]);
	free(st->warnings);
	memset(st, 0, sizeof(*st));
}

int pw_view_get_status(pw_view *v, pw_view_status *ret)
{
	pw_view_status st = {};
	size_t n;
	pw_policy *p;
	int r = -ENOMEM;

	pthread_mutex_lock(&v->lock);
	n = pw_modeset_warning_count(v->ms) + (v->state_error ? 1 : 0);
	st.mode = strdup(v->mode);
	st.fail_reason = pw_dup_or_null(v->fail_reason);
	st.trusted = v->trusted;
	st.reloads = v->reloads;
	st.warnings = calloc(n ? n : 1, sizeof(char *));
	if (!st.mode || (v->fail_reason && !st.fail_reason) || !st.warnings)
		goto out;
	for (size_t i = 0; i < pw_modeset_warning_count(v->ms); i++) {
		st.warnings[st.n_warnings] = pw_warning_format(pw_modeset_warning(v->ms, i));
		if (!st.warnings[st.n_warnings])
			goto out;
		st.n_warnings++;
	}
	if (v->state_error) {
		st.warnings[st.n_warnings] = strdup(v->state_error);
		if (!st.warnings[st.n_warnings])
			goto out;
		st.n_warnings++;
	}
	/* Under the lock, as every install is: the generation of the policy of v->mode, not of
	 * a switch that raced in after we let go. */
	p = v->fs_ops->get_policy(v->fs_ctx, &st.generation);
	pw_policy_unref(p);
	r = 0;
out:
	pthread_mutex_unlock(&v->lock);
	if (r < 0) {
		pw_view_status_done(&st);
		return r;
	}
	*ret = st;
	return 0;
}

const pw_modeset *pw_view_lock_modeset(pw_view *v)
{
	pthread_mutex_lock(&v->lock);
	return v->ms;
}

void pw_view_unlock_modeset(pw_view *v)
{
	pthread_mutex_unlock(&v->lock);
}

int pw_view_compile(pw_view *v, const char *name, pw_policy **ret)
{
	_cleanup_free_ char *fail = NULL;
	int r;

	pthread_mutex_lock(&v->lock);
	if (streq_ptr(v->mode, name)) {
		/* The active mode: the very policy the filesystem decides with. */
		*ret = v->fs_ops->get_policy(v->fs_ctx, NULL);
		r = *ret ? 0 : -ENOMEM;
	} else if (pw_modeset_mode_broken(v->ms, name, NULL)) {
		r = -EBADMSG;
	} else if (!pw_modeset_find(v->ms, name)) {
		r = -ENOENT;
	} else {
		r = policy_or_fail_closed(v, v->ms, &v->frozen, name, ret, &fail);
	}
	pthread_mutex_unlock(&v->lock);
	return r;
}

struct pw_state *pw_view_lock_state(pw_view *v)
{
	pthread_mutex_lock(&v->lock);
	return v->state;
}

void pw_view_unlock_state(pw_view *v)
{
	pthread_mutex_unlock(&v->lock);
}

void pw_view_set_listener(pw_view *v, pw_view_listener fn, void *userdata)
{
	pthread_mutex_lock(&v->lock);
	v->listener = fn;
	v->listener_data = userdata;
	pthread_mutex_unlock(&v->lock);
}
