/* SPDX-License-Identifier: MIT */
/*
 * The plan methods (plan_methods.h) over the plans of the view (plan_set.h): their JSON,
 * the task in progress of each change set, and approval. The files are small
 * (PW_PLAN_FILE_MAX) and the folder holds a handful, so each call reads them afresh.
 */
#include "plan_methods.h"
#include "peers.h"
#include "plan.h"
#include "plan_set.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pw_limits.h"
#include "proto.h"
#include "run_id.h"
#include "store/state.h"
#include "util.h"

typedef pw_ctl_ctx call;

/* ---- JSON ----------------------------------------------------------------------------- */

static json_t *problems_json(const pw_plan_info *p)
{
	json_t *a = json_array();

	if (!a)
		return NULL;
	if (p->read_err)
		json_array_append_new(
		    a, json_sprintf("cannot read the file: %s", strerror(-p->read_err)));
	for (size_t i = 0; p->doc && i < p->doc->n_problems; i++)
		json_array_append_new(a, json_string(p->doc->problems[i]));
	if (pw_plan_info_approved(p) && !p->read_err && !streq_ptr(p->rec.hash, p->hash))
		json_array_append_new(a, json_string("the file changed since it was approved "
						     "(outside the view, or in mode off): its "
						     "content hash differs from the approved one"));
	return a;
}

static json_t *next_json(const pw_plan_info *p)
{
	size_t n = pw_plan_info_next(p);

	if (!pw_plan_info_approved(p) || n == 0)
		return json_null();
	return json_pack("{s:I,s:s}", "task", (json_int_t)n, "text", p->doc->tasks[n - 1].text);
}

/*
 * One line for an agent's per-turn announcement, byte-stable while nothing changes:
 * `plan NAME: D/T done; next: N. TEXT` (or `; all tasks done`).
 */
static json_t *plan_line(const pw_plan_info *p)
{
	size_t n = pw_plan_info_next(p);

	if (n == 0)
		return json_sprintf("plan %s: %zu/%zu done; all tasks done", p->name,
				    pw_plan_info_done_count(p), pw_plan_info_total(p));
	return json_sprintf("plan %s: %zu/%zu done; next: %zu. %s", p->name,
			    pw_plan_info_done_count(p), pw_plan_info_total(p), n,
			    p->doc->tasks[n - 1].text);
}

static json_t *summary_json(const pw_plan_info *p)
{
	return json_pack(
	    "{s:s,s:s,s:s?,s:s,s:I,s:I,s:s?,s:I,s:o,s:o}", "name", p->name, "path", p->path,
	    "title", p->doc ? p->doc->title : NULL, "status", pw_plan_info_status(p), "done",
	    (json_int_t)pw_plan_info_done_count(p), "total", (json_int_t)pw_plan_info_total(p),
	    "updated", p->doc ? p->doc->updated : NULL, "approved_ns",
	    (json_int_t)p->rec.approved_ns, "next", next_json(p), "problems", problems_json(p));
}

static json_t *tasks_json(const pw_plan_info *p)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < pw_plan_info_total(p); i++) {
		const pw_task_record *t = pw_plan_info_task_done(p, (int64_t)i + 1);

		json_array_append_new(
		    a, json_pack("{s:I,s:s,s:I,s:b,s:I,s:s?,s:I,s:s?}", "task", (json_int_t)i + 1,
				 "text", p->doc->tasks[i].text, "line",
				 (json_int_t)p->doc->tasks[i].line, "done", t != NULL, "done_ns",
				 (json_int_t)(t ? t->done_ns : 0), "done_by", t ? t->done_by : NULL,
				 "changeset", (json_int_t)(t ? t->changeset : 0), "note",
				 t ? t->note : NULL));
	}
	return a;
}

static json_t *detail_json(const pw_plan_info *p)
{
	json_t *o = summary_json(p);

	if (o &&
	    json_object_update_missing_new(
		o,
		json_pack("{s:s?,s:s?,s:s?,s:s?,s:s?,s:s?,s:s,s:o}", "created",
			  p->doc ? p->doc->created : NULL, "approved",
			  p->doc ? p->doc->approved : NULL, "approved_by", p->rec.approved_by,
			  "hash", p->rec.hash, "file_hash", p->read_err ? NULL : p->hash,
			  "file_status", p->doc ? p->doc->status : NULL, "tasks_from",
			  pw_plan_tasks_from_name(p->doc ? p->doc->tasks_from : PW_PLAN_TASKS_NONE),
			  "tasks", tasks_json(p))) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *status_json(const pw_plan_set *s)
{
	const pw_plan_info *a = pw_plan_set_active(s);

	if (!a)
		return json_pack("{s:s,s:n,s:n}", "plans_dir", s->dir, "active", "line");
	return json_pack("{s:s,s:o,s:o}", "plans_dir", s->dir, "active", summary_json(a), "line",
			 plan_line(a));
}

/* ---- the task in progress of each change set ----------------------------------------- */

/*
 * Records, for the newest change set, the active plan's task in progress (state.h): called
 * when a change set may have started (the daemon's start, a switch) and when the task in
 * progress moves (approval, a task done; the change set then keeps the task it started
 * with). Best effort: the record is for `changes --plan`, never for enforcement.
 */
static void note_in_progress(pw_view *v)
{
	_cleanup_(pw_plan_set_done) pw_plan_set s = {0};
	const pw_plan_info *a;
	pw_state *st;

	if (pw_plan_set_load(v, &s) < 0)
		return;
	a = pw_plan_set_active(&s);
	if (!a || pw_plan_info_next(a) == 0)
		return;
	st = pw_view_lock_state(v);
	if (st)
		(void)pw_state_plan_note_changeset(st, pw_view_info_of(v)->project, a->path,
						   (int64_t)pw_plan_info_next(a),
						   a->rec.approved_ns);
	pw_view_unlock_state(v);
}

static int plan_init(pw_ctl_server *s, void *arg, void **ret_data)
{
	note_in_progress(pw_ctl_server_view(s));
	*ret_data = arg;
	return 0;
}

static void plan_mode_changed(pw_ctl_server *s, void *data, const char *to)
{
	note_in_progress(pw_ctl_server_view(s));
}

/* The change sets recorded for P: [{"changeset", "task"}], oldest first. */
static json_t *changesets_json(pw_view *v, const pw_plan_info *p)
{
	int64_t *cs = NULL;
	size_t n = 0;
	pw_state *st = pw_view_lock_state(v);
	int r =
	    st ? pw_state_plan_changesets(st, pw_view_info_of(v)->project, p->path, &cs, &n) : 0;
	json_t *a;

	pw_view_unlock_state(v);
	a = json_array();
	for (size_t i = 0; a && r >= 0 && i < n; i++)
		json_array_append_new(a, json_pack("{s:I,s:I}", "changeset", (json_int_t)cs[2 * i],
						   "task", (json_int_t)cs[2 * i + 1]));
	free(cs);
	return a;
}

/* ---- methods -------------------------------------------------------------------------- */

static int fail_errno(call *x, int r, const char *what)
{
	return pw_ctl_fail_set(x->fail, r == -ENOMEM ? PW_RPC_INTERNAL_ERROR : PW_RPC_UNAVAILABLE,
			       "%s: %s", what, strerror(-r));
}

static int reply(call *x, json_t *o, json_t **ret)
{
	if (!o)
		return pw_ctl_fail_set(x->fail, PW_RPC_INTERNAL_ERROR, "out of memory");
	*ret = o;
	return 0;
}

static int load_or_fail(call *x, pw_plan_set *s)
{
	int r = pw_plan_set_load(x->view, s);

	return r < 0 ? fail_errno(x, r, "reading the plans") : 0;
}

/* The plan a call names (params.name), or PW_CTL_FAILED with the failure set. */
static int named_plan(call *x, const pw_plan_set *s, const pw_plan_info **ret)
{
	const char *name = json_string_value(json_object_get(x->params, "name"));
	const pw_plan_info *p = name ? pw_plan_set_find(s, name) : pw_plan_set_active(s);

	if (!p && name)
		return pw_ctl_fail_set(x->fail, PW_RPC_INVALID_PARAMS,
				       "no plan '%s' in %s/ (piworkfs plan list)", name, s->dir);
	if (!p)
		return pw_ctl_fail_set(x->fail, PW_RPC_INVALID_PARAMS,
				       "no approved plan is in progress; name one");
	*ret = p;
	return 0;
}

static int m_list(call *x, json_t **ret)
{
	_cleanup_(pw_plan_set_done) pw_plan_set s = {0};
	const pw_plan_info *a;
	json_t *arr;

	if (load_or_fail(x, &s) < 0)
		return PW_CTL_FAILED;
	arr = json_array();
	for (size_t i = 0; arr && i < s.n; i++)
		json_array_append_new(arr, summary_json(&s.v[i]));
	a = pw_plan_set_active(&s);
	return reply(x,
		     json_pack("{s:s,s:o,s:s?}", "plans_dir", s.dir, "plans", arr, "active",
			       a ? a->name : NULL),
		     ret);
}

static int m_show(call *x, json_t **ret)
{
	_cleanup_(pw_plan_set_done) pw_plan_set s = {0};
	const pw_plan_info *p;
	json_t *o;

	if (load_or_fail(x, &s) < 0 || named_plan(x, &s, &p) < 0)
		return PW_CTL_FAILED;
	o = detail_json(p);
	if (o && json_object_set_new(o, "changesets", changesets_json(x->view, p)) < 0) {
		json_decref(o);
		o = NULL;
	}
	return reply(x, o, ret);
}

static int m_status(call *x, json_t **ret)
{
	_cleanup_(pw_plan_set_done) pw_plan_set s = {0};

	if (load_or_fail(x, &s) < 0)
		return PW_CTL_FAILED;
	return reply(x, status_json(&s), ret);
}

/* plan.done's answer: plan.status, with "plan" and "line" those of the plan just marked
 * (its last task done, it is no longer the active one). */
static json_t *done_json(call *x, const char *name)
{
	_cleanup_(pw_plan_set_done) pw_plan_set s = {0};
	const pw_plan_info *p;
	json_t *o;

	if (pw_plan_set_load(x->view, &s) < 0 || !(p = pw_plan_set_find(&s, name)))
		return NULL;
	o = status_json(&s);
	if (o && (json_object_set_new(o, "plan", summary_json(p)) < 0 ||
		  json_object_set_new(o, "line", plan_line(p)) < 0)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* "agent (pid 12, pi)" or "person (pid 9, piworkfs)": who marked or approved. */
static char *who(const pw_peer *peer)
{
	char *s = NULL;
	int r;

	if (peer->answered_by)
		r = asprintf(&s, "person, granting the agent's request (%s)", peer->answered_by);
	else
		r = asprintf(&s, "%s (pid %d, %s)", peer->restricted ? "agent" : "person",
			     (int)peer->pid, peer->comm[0] ? peer->comm : "?");
	return r < 0 ? NULL : s;
}

static int m_done(call *x, json_t **ret)
{
	_cleanup_(pw_plan_set_done) pw_plan_set s = {0};
	_cleanup_free_ char *by = who(x->peer);
	json_int_t n = json_integer_value(json_object_get(x->params, "task"));
	const char *note = json_string_value(json_object_get(x->params, "note"));
	const pw_plan_info *p;
	pw_state *st;
	int r;

	if (!by)
		return pw_ctl_fail_set(x->fail, PW_RPC_INTERNAL_ERROR, "out of memory");
	if (load_or_fail(x, &s) < 0)
		return PW_CTL_FAILED;
	/* Nothing in progress to mark is a refusal, as a draft's task is: the plan is not
	 * approved yet (or every task is done), not a plan or task that does not exist. */
	if (!json_object_get(x->params, "name") && !pw_plan_set_active(&s))
		return pw_ctl_fail_set(
		    x->fail, PW_RPC_REFUSED,
		    "no approved plan is in progress: tasks are marked on an "
		    "approved plan (piworkfs plan list; the person runs `piworkfs "
		    "plan approve NAME`)");
	if (named_plan(x, &s, &p) < 0)
		return PW_CTL_FAILED;
	if (!pw_plan_info_approved(p))
		return pw_ctl_fail_set(x->fail, PW_RPC_REFUSED,
				       "plan '%s' is a draft: tasks are marked on an approved plan "
				       "(the person runs `piworkfs plan approve %s`)",
				       p->name, p->name);
	if (n < 1 || (size_t)n > pw_plan_info_total(p))
		return pw_ctl_fail_set(x->fail, PW_RPC_INVALID_PARAMS,
				       "plan '%s' has tasks 1 to %zu, not %lld", p->name,
				       pw_plan_info_total(p), (long long)n);
	/* A change set started since the last record (a checkpoint) did this task's work. */
	note_in_progress(x->view);
	st = pw_view_lock_state(x->view);
	r = st ? pw_state_plan_task_done(
		     st, pw_view_info_of(x->view)->project, p->path, n, p->doc->tasks[n - 1].text,
		     by, pw_state_current_changeset(st, pw_view_info_of(x->view)->project), note)
	       : -ENOSYS;
	pw_view_unlock_state(x->view);
	if (r == -EEXIST)
		return pw_ctl_fail_set(x->fail, PW_RPC_INVALID_PARAMS,
				       "task %lld of plan '%s' is already done", (long long)n,
				       p->name);
	if (r < 0)
		return fail_errno(x, r, "recording the task");
	return reply(x, done_json(x, p->name), ret);
}

/* Now, in UTC: *NOW as 2026-12-02T19:40:00Z, *TODAY as 2026-12-02. */
static void utc_now(char now[32], char today[16])
{
	time_t t = time(NULL);
	struct tm tm;

	gmtime_r(&t, &tm);
	if (now)
		strftime(now, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
	strftime(today, 16, "%Y-%m-%d", &tm);
}

_printf_(3, 4) static int approve_fail(char **ret_why, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (ret_why && vasprintf(ret_why, fmt, ap) < 0)
		*ret_why = NULL;
	va_end(ap);
	return code;
}

/* PEER as the switch history records a decision on a plan: an approval or a reopening of
 * plan NAME (not a "plan -> plan" switch), or a plain reload. An approval the agent asked for
 * stays a granted request (origin "request"), with its plan. */
static const pw_peer *as_event(const pw_peer *peer, const char *origin, const char *name,
			       pw_peer *ret)
{
	*ret = *peer;
	if (!streq(origin, "plan-approve") || !streq_ptr(peer->origin, "request"))
		ret->origin = origin;
	ret->plan = name;
	return ret;
}

/* ---- every view of the project -------------------------------------------------------- */

/* The directory of this daemon's control sockets, where the other views of the project have
 * theirs (peers.h). malloc'd, or NULL. */
static char *socket_dir(pw_ctl_server *s)
{
	_cleanup_free_ char *path = strdup(pw_ctl_server_socket_path(s));

	return path ? strdup(dirname(path)) : NULL;
}

/* This view's own outcome, as peers.h describes the others': the policy it installed. */
static json_t *own_outcome(pw_view *v, const pw_policy *p)
{
	_cleanup_free_ char *run = pw_ctl_run_of_mountpoint(pw_view_info_of(v)->mountpoint);
	_cleanup_free_ char *why = NULL;
	const char *outcome = "frozen";

	if (p && pw_policy_is_fail_closed(p)) {
		outcome = "fails-closed";
		why = strdup(pw_policy_fail_reason(p));
	} else if (p && !pw_policy_protects(p)) {
		outcome = "unprotected";
		if (asprintf(&why, "mode %s protects nothing", pw_policy_mode_name(p)) < 0)
			why = NULL;
	}
	return json_pack("{s:s,s:s?,s:s,s:s?,s:b}", "mountpoint", pw_view_info_of(v)->mountpoint,
			 "run", run, "outcome", outcome, "reason", why, "self", true);
}

/*
 * Installs the approved plans the database now holds in this view, then in every other live
 * view of the project (peers.h), each before this returns. Returns 0 with the outcome of
 * each view in *ret_views (this one first), or -errno with *ret_why when this view could not
 * install them (nothing was changed in it).
 */
static int sync_everywhere(pw_ctl_server *s, const pw_peer *peer, int cancel_fd, json_t **ret_views,
			   char **ret_why)
{
	pw_view *v = pw_ctl_server_view(s);
	_cleanup_free_ char *dir = socket_dir(s);
	pw_view_installed in = {0};
	json_t *views, *peers;
	int r = dir ? pw_view_sync_plans(v, peer, &in, ret_why) : -ENOMEM;

	if (r < 0)
		return r;
	views = json_array();
	if (!views || json_array_append_new(views, own_outcome(v, in.policy)) < 0) {
		json_decref(views);
		pw_view_installed_done(&in);
		return -ENOMEM;
	}
	pw_view_installed_done(&in);
	peers = pw_ctl_peers_sync(v, dir, cancel_fd);
	if (!peers || json_array_extend(views, peers) < 0) {
		json_decref(peers);
		json_decref(views);
		return -ENOMEM;
	}
	json_decref(peers);
	*ret_views = views;
	return 0;
}

/* Makes PATH a draft again in the database and every view: an approval that failed after it
 * was recorded. Best effort: the caller reports the failure it met first. */
static void unapprove(pw_ctl_server *s, const pw_peer *peer, const char *path, int cancel_fd)
{
	pw_view *v = pw_ctl_server_view(s);
	json_t *views = NULL;
	pw_state *st = pw_view_lock_state(v);

	if (st)
		pw_state_plan_reopen(st, pw_view_info_of(v)->project, path);
	pw_view_unlock_state(v);
	if (sync_everywhere(s, peer, cancel_fd, &views, NULL) == 0)
		json_decref(views);
}

int pw_ctl_plan_approve(pw_ctl_server *s, const pw_peer *peer, const char *name, int cancel_fd,
			char **ret_why, json_t **ret_views)
{
	_cleanup_(pw_plan_set_done) pw_plan_set set = {0};
	_cleanup_free_ char *by = who(peer), *text = NULL, *why = NULL, *buf = NULL;
	_cleanup_close_ int root = -1;
	pw_view *v = pw_ctl_server_view(s);
	char now[32], today[16], hash[PW_SHA256_HEX];
	size_t len, total;
	const pw_plan_info *p;
	json_t *views = NULL;
	pw_peer event;
	pw_state *st;
	int r;

	if (!by)
		return approve_fail(ret_why, PW_RPC_INTERNAL_ERROR, "out of memory");
	r = pw_plan_set_load(v, &set);
	if (r < 0)
		return approve_fail(ret_why, PW_RPC_UNAVAILABLE, "reading the plans: %s",
				    strerror(-r));
	p = pw_plan_set_find(&set, name);
	if (!p)
		return approve_fail(ret_why, PW_RPC_INVALID_PARAMS,
				    "no plan '%s' in %s/ (piworkfs plan list)", name, set.dir);
	if (pw_plan_info_approved(p))
		return approve_fail(ret_why, PW_RPC_INVALID_PARAMS, "plan '%s' is already approved",
				    p->name);
	if (p->read_err || !p->doc || p->doc->n_problems > 0)
		return approve_fail(ret_why, PW_RPC_INVALID_PARAMS,
				    "plan '%s' cannot be approved until it is fixed: %s", p->name,
				    p->read_err ? strerror(-p->read_err) : p->doc->problems[0]);
	root = pw_plans_open_root(v);
	if (root >= 0)
		r = pw_plans_read(root, p->path, &buf, &len, &total);
	if (root < 0 || r < 0)
		return approve_fail(ret_why, PW_RPC_UNAVAILABLE, "reading the plan: %s",
				    strerror(root < 0 ? -root : -r));
	utc_now(now, today);
	r = pw_plan_set_fields(buf, len, "approved", now, today, &text);
	if (r < 0)
		return approve_fail(ret_why, PW_RPC_INTERNAL_ERROR, "writing the frontmatter: %s",
				    strerror(-r));
	pw_plans_hash(text, strlen(text), hash);
	/* Frozen first, in every live view of the project, then written: from then on no
	 * process can change the file through any view, so the text hashed is the text that
	 * stays. */
	st = pw_view_lock_state(v);
	r = st ? pw_state_plan_approve(st, pw_view_info_of(v)->project, p->path, hash, by)
	       : -ENOSYS;
	pw_view_unlock_state(v);
	if (r < 0)
		return approve_fail(ret_why, PW_RPC_UNAVAILABLE, "recording the approval: %s",
				    strerror(-r));
	r = sync_everywhere(s, as_event(peer, "plan-approve", p->name, &event), cancel_fd, &views,
			    &why);
	if (r == 0)
		r = pw_plans_replace_file(root, p->path, text);
	if (r < 0) {
		json_decref(views);
		unapprove(s, peer, p->path, cancel_fd);
		return approve_fail(ret_why, PW_RPC_INTERNAL_ERROR, "approval failed: %s",
				    why ? why : strerror(-r));
	}
	note_in_progress(v);
	if (ret_views)
		*ret_views = views;
	else
		json_decref(views);
	return 0;
}

/* plan.approve and plan.reopen run as jobs (server.h): they wait for every other view of the
 * project, whose server threads may be waiting for ours meanwhile. */
typedef struct plan_job {
	pw_ctl_server *server;
	pw_peer peer;
	char *name;
} plan_job;

static void plan_job_free(void *arg)
{
	plan_job *j = arg;

	if (j)
		free(j->name);
	free(j);
}

static int plan_job_start(call *x, pw_ctl_job_fn fn)
{
	plan_job *j = calloc(1, sizeof(*j));
	const char *name = json_string_value(json_object_get(x->params, "name"));

	if (!j || !(j->name = strdup(name))) {
		free(j);
		return pw_ctl_fail_set(x->fail, PW_RPC_INTERNAL_ERROR, "out of memory");
	}
	j->server = x->server;
	/* The peer's strings are static or the call's: only what outlives the call is kept. */
	j->peer = *x->peer;
	j->peer.reason = NULL;
	j->peer.answered_by = NULL;
	return pw_ctl_job_run(x, fn, j, plan_job_free);
}

/* plan.approve's and plan.reopen's answer: the plan as plan.show shows it, and "views". */
static int answer_with_views(pw_view *v, const char *name, json_t *views, json_t **ret,
			     pw_ctl_fail *f)
{
	_cleanup_(pw_plan_set_done) pw_plan_set set = {0};
	const pw_plan_info *p;
	json_t *o;
	int r = pw_plan_set_load(v, &set);

	if (r < 0 || !(p = pw_plan_set_find(&set, name))) {
		json_decref(views);
		return pw_ctl_fail_set(f, PW_RPC_UNAVAILABLE, "reading the plans: %s",
				       strerror(r < 0 ? -r : ENOENT));
	}
	o = detail_json(p);
	if (!o || json_object_set_new(o, "views", views) < 0) {
		json_decref(o);
		return pw_ctl_fail_set(f, PW_RPC_INTERNAL_ERROR, "out of memory");
	}
	*ret = o;
	return 0;
}

static int approve_job(void *arg, int cancel_fd, json_t **ret, pw_ctl_fail *f)
{
	plan_job *j = arg;
	_cleanup_free_ char *why = NULL;
	json_t *views = NULL;
	int code = pw_ctl_plan_approve(j->server, &j->peer, j->name, cancel_fd, &why, &views);

	if (code != 0)
		return pw_ctl_fail_set(f, code, "%s", why ? why : "approval failed");
	return answer_with_views(pw_ctl_server_view(j->server), j->name, views, ret, f);
}

static int m_approve(call *x, json_t **ret)
{
	return plan_job_start(x, approve_job);
}

static int reopen_job(void *arg, int cancel_fd, json_t **ret, pw_ctl_fail *f)
{
	plan_job *j = arg;
	pw_view *v = pw_ctl_server_view(j->server);
	_cleanup_(pw_plan_set_done) pw_plan_set set = {0};
	_cleanup_free_ char *text = NULL, *why = NULL, *buf = NULL;
	_cleanup_close_ int root = -1;
	char today[16];
	size_t len, total;
	const pw_plan_info *p;
	json_t *views = NULL;
	pw_peer event;
	pw_state *st;
	int r = pw_plan_set_load(v, &set);

	if (r < 0)
		return pw_ctl_fail_set(f, PW_RPC_UNAVAILABLE, "reading the plans: %s",
				       strerror(-r));
	p = pw_plan_set_find(&set, j->name);
	if (!p)
		return pw_ctl_fail_set(f, PW_RPC_INVALID_PARAMS,
				       "no plan '%s' in %s/ (piworkfs plan list)", j->name,
				       set.dir);
	if (!pw_plan_info_approved(p))
		return pw_ctl_fail_set(f, PW_RPC_INVALID_PARAMS,
				       "plan '%s' is not approved (it is a draft already)",
				       p->name);
	root = pw_plans_open_root(v);
	if (root < 0)
		return pw_ctl_fail_set(f, PW_RPC_UNAVAILABLE, "opening the project: %s",
				       strerror(-root));
	/* The frontmatter says draft again, written while the plan is still frozen. A file
	 * that cannot be read or has no frontmatter is reopened all the same. */
	utc_now(NULL, today);
	if (pw_plans_read(root, p->path, &buf, &len, &total) == 0 &&
	    pw_plan_set_fields(buf, len, "draft", NULL, today, &text) == 0) {
		r = pw_plans_replace_file(root, p->path, text);
		if (r < 0)
			return pw_ctl_fail_set(f, PW_RPC_UNAVAILABLE, "writing the frontmatter: %s",
					       strerror(-r));
	}
	st = pw_view_lock_state(v);
	r = st ? pw_state_plan_reopen(st, pw_view_info_of(v)->project, p->path) : -ENOSYS;
	pw_view_unlock_state(v);
	if (r < 0)
		return pw_ctl_fail_set(f, PW_RPC_UNAVAILABLE, "recording the reopening: %s",
				       strerror(-r));
	r = sync_everywhere(j->server, as_event(&j->peer, "plan-reopen", p->name, &event),
			    cancel_fd, &views, &why);
	if (r < 0)
		return pw_ctl_fail_set(f, PW_RPC_INTERNAL_ERROR, "reload failed: %s",
				       why ? why : strerror(-r));
	return answer_with_views(v, j->name, views, ret, f);
}

static int m_reopen(call *x, json_t **ret)
{
	return plan_job_start(x, reopen_job);
}

/* plan.sync: another view of the project (peers.h) says the approved plans changed. */
static bool same_database(const char *a, const char *b)
{
	struct stat sa, sb;

	if (!a || !b)
		return a == b;
	if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
		return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	return streq(a, b);
}

static int m_sync(call *x, json_t **ret)
{
	const char *db = json_string_value(json_object_get(x->params, "state_db"));
	const char *own = pw_view_info_of(x->view)->state_db;
	_cleanup_free_ char *why = NULL;
	pw_view_installed in;
	int r;

	if (json_object_get(x->params, "state_db") && !same_database(db, own))
		return reply(x, json_pack("{s:b,s:s?}", "synced", false, "state_db", own), ret);
	r = pw_view_sync_plans(x->view, x->peer, &in, &why);
	if (r == -EPERM)
		return pw_ctl_fail_set(x->fail, PW_RPC_REFUSED, "%s", why ? why : "refused");
	if (r < 0)
		return fail_errno(x, r, "installing the approved plans");
	json_t *o =
	    json_pack("{s:b,s:s,s:I,s:b,s:s?,s:b}", "synced", true, "mode",
		      pw_policy_mode_name(in.policy), "generation", (json_int_t)in.generation,
		      "fail_closed", pw_policy_is_fail_closed(in.policy), "fail_reason",
		      pw_policy_fail_reason(in.policy), "protects", pw_policy_protects(in.policy));
	pw_view_installed_done(&in);
	return reply(x, o, ret);
}

/* ---- the table ------------------------------------------------------------------------ */

static const pw_rpc_param name_params[] = {
    {"name", PW_RPC_T_STRING, false, PW_PATH_MAX},
};

static const pw_rpc_param name_required[] = {
    {"name", PW_RPC_T_STRING, true, PW_PATH_MAX},
};

static const pw_rpc_param sync_params[] = {
    {"state_db", PW_RPC_T_STRING, false, PW_PATH_MAX},
};

static const pw_rpc_param done_params[] = {
    {"task", PW_RPC_T_INT, true, 0},
    {"name", PW_RPC_T_STRING, false, PW_PATH_MAX},
    {"note", PW_RPC_T_STRING, false, 1000},
};

static const pw_ctl_method methods[] = {
    {"plan.list", m_list, NULL, 0, NULL},
    {"plan.show", m_show, name_params, ELEMENTSOF(name_params), NULL},
    {"plan.status", m_status, NULL, 0, NULL},
    {"plan.done", m_done, done_params, ELEMENTSOF(done_params), NULL},
    {"plan.approve", m_approve, name_required, ELEMENTSOF(name_required),
     "refused: only the person approves a plan, from outside the agent (piworkfs plan "
     "approve NAME)"},
    {"plan.reopen", m_reopen, name_required, ELEMENTSOF(name_required),
     "refused: only the person reopens an approved plan, from outside the agent "
     "(piworkfs plan reopen NAME)"},
    {"plan.sync", m_sync, sync_params, ELEMENTSOF(sync_params),
     "refused: plan.sync is for the views of the project, outside the agent"},
};

const pw_ctl_module pw_ctl_plan_module = {
    .name = "plan",
    .methods = methods,
    .n_methods = ELEMENTSOF(methods),
    .init = plan_init,
    .mode_changed = plan_mode_changed,
};
