/* SPDX-License-Identifier: MIT */
/*
 * The control protocol's methods: a fixed table, each entry with its params schema and its
 * handler. docs/PROTOCOL.md documents every method, param, result and error; change both
 * together. Shapes of rules, modes, policies and decisions come from policy/report.h, so the
 * live answers equal the offline CLI's --json.
 *
 * Handlers run on the control server's thread. They never block on the network; the only
 * slow thing they may do is a reload (reading mode files) or a state database write.
 * bash.check, whose analysis can take seconds, runs as a job (server.h) on a thread of its
 * own.
 */
#include "methods.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/audit.h"
#include "agent_text.h"
#include "bash_worker.h"
#include "agent.h"
#include "server.h"
#include "pw_limits.h"
#include "path.h"
#include "proto.h"
#include "report.h"
#include "util.h"

typedef pw_ctl_ctx call;

static _printf_(3, 4) int fail(call *x, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = pw_ctl_fail_setv(x->fail, code, fmt, ap);
	va_end(ap);
	return r;
}

static int fail_nomem(call *x)
{
	return fail(x, PW_RPC_INTERNAL_ERROR, "out of memory");
}

/* Returns 0 with *ret, or -1 when RESULT is NULL (allocation failed). */
static int done(call *x, json_t *result, json_t **ret)
{
	if (!result)
		return fail_nomem(x);
	*ret = result;
	return 0;
}

static const char *str_param(call *x, const char *key)
{
	return json_string_value(json_object_get(x->params, key));
}

static json_t *mode_names(pw_view *v)
{
	const pw_modeset *ms = pw_view_lock_modeset(v);
	json_t *a = json_array();
	for (size_t i = 0; a && i < pw_modeset_count(ms); i++)
		json_array_append_new(a, json_string(pw_modeset_get(ms, i)->name));
	pw_view_unlock_modeset(v);
	return a;
}

/* The policy a request asks about: params.mode compiled from the view's modes, else the
 * active one. Returns 0 with *ret (a reference), or PW_CTL_FAILED with the failure set. */
static int requested_policy(call *x, pw_policy **ret)
{
	const char *mode = str_param(x, "mode");
	int r;

	if (!mode) {
		*ret = pw_view_policy(x->view, NULL);
		return *ret ? 0 : fail_nomem(x);
	}
	r = pw_view_compile(x->view, mode, ret);
	if (r == -ENOENT) {
		fail(x, PW_RPC_UNKNOWN_MODE, "unknown mode '%s'", mode);
		x->fail->data = json_pack("{s:o}", "modes", mode_names(x->view));
		return PW_CTL_FAILED;
	}
	if (r == -EBADMSG)
		return fail(x, PW_RPC_MODE_BROKEN, "mode '%s' is broken (see status warnings)",
			    mode);
	if (r < 0)
		return fail_nomem(x);
	return 0;
}

/* ---- status ---------------------------------------------------------------------------- */

/* {"total": N, "ops": {"LOOKUP": n, ...}, "max_write": B}: the requests received since
 * mount, by opcode, those received at least once; and the most data one WRITE carries. */
static json_t *requests_json(const pw_fs_stats *fst)
{
	json_t *ops = json_object();
	uint64_t total = 0;
	for (unsigned op = 0; ops && op < PW_FS_OPCODES; op++) {
		if (!fst->requests[op])
			continue;
		total += fst->requests[op];
		const char *name = pw_fs_opcode_name(op);
		json_object_set_new(ops, name ? name : "OTHER",
				    json_integer((json_int_t)fst->requests[op]));
	}
	return json_pack("{s:I,s:o,s:I}", "total", (json_int_t)total, "ops",
			 ops ? ops : json_object(), "max_write", (json_int_t)fst->max_write);
}

/* {"name": "io_uring" or "/dev/fuse", "ring_requests": N}: how the kernel's requests reach
 * the daemon, and how many came through FUSE over io_uring's rings. */
static json_t *transport_json(const pw_fs_stats *fst)
{
	return json_pack("{s:s,s:I}", "name", fst->transport, "ring_requests",
			 (json_int_t)fst->ring_requests);
}

/* {"enabled": b, "hits": N, "misses": N, "flushes": N}: parent directories served from
 * descriptors kept between requests, resolved from the root, and the times every kept one
 * was given up (fs/dircache.c). */
static json_t *dircache_json(const pw_fs_stats *fst)
{
	return json_pack("{s:b,s:I,s:I,s:I}", "enabled", fst->dircache_enabled, "hits",
			 (json_int_t)fst->dircache_hits, "misses", (json_int_t)fst->dircache_misses,
			 "flushes", (json_int_t)fst->dircache_flushes);
}

/* {"enabled": b, "watched": N, "unwatched": N, "shared": N}: whether the view watches its
 * tree for changes made outside it, the directories watched now, those that could not be
 * since mount, and those on filesystems that do not report changes made elsewhere (NFS,
 * 9p, FUSE: fs/watch.c; changes in both kinds show within a second, not at once). */
static json_t *watch_json(const pw_fs_stats *fst)
{
	return json_pack("{s:b,s:I,s:I,s:I}", "enabled", fst->watching, "watched",
			 (json_int_t)fst->watched_dirs, "unwatched",
			 (json_int_t)fst->unwatched_dirs, "shared", (json_int_t)fst->shared_dirs);
}

/* A warning for status: N, then ONE or MANY as N says, then WHAT. None for N 0. */
static void warn_count(json_t *o, uint64_t n, const char *one, const char *many, const char *what)
{
	if (!o || !n)
		return;
	char msg[300];
	snprintf(msg, sizeof(msg), "%llu %s %s", (unsigned long long)n, n == 1 ? one : many, what);
	json_array_append_new(json_object_get(o, "warnings"), json_string(msg));
}

/* Directories whose changes may go unseen: status says what that costs, and the fix. */
static void unwatched_status(json_t *o, const pw_fs_stats *fst)
{
	warn_count(
	    o, fst->unwatched_dirs, "directory", "directories",
	    "could not be watched (inotify watches used up: raise "
	    "fs.inotify.max_user_watches): changes made outside the view show there within a "
	    "second instead of at once");
	warn_count(o, fst->shared_dirs, "directory is", "directories are",
		   "on a filesystem that does not report changes made elsewhere (NFS, 9p, "
		   "FUSE...): such changes show in the view within a second instead of at once");
}

/* {"sent": N, "pending": n, "generation": G}: cache invalidations sent to the kernel since
 * mount, those of the last switch still queued, and the generation whose attribute
 * invalidations have all been sent. */
static json_t *invalidations_json(const pw_fs_stats *fst)
{
	return json_pack("{s:I,s:I,s:I}", "sent", (json_int_t)fst->invalidations_sent, "pending",
			 (json_int_t)fst->invalidations_pending, "generation",
			 (json_int_t)fst->invalidated_generation);
}

/* {"running": n, "agent": n, "started": N, "refused": N, "agent_refused": N}: the calls
 * that take time (server.h): running now (of which for agents), admitted since start, and
 * refused at their pool's limit. */
static json_t *jobs_json(const pw_ctl_stats *cst)
{
	return json_pack("{s:i,s:i,s:I,s:I,s:I}", "running", (int)cst->jobs_running, "agent",
			 (int)cst->agent_jobs_running, "started", (json_int_t)cst->jobs_started,
			 "refused", (json_int_t)cst->jobs_refused, "agent_refused",
			 (json_int_t)cst->agent_jobs_refused);
}

/* The originals store is full (issue 27): status says undo is incomplete, and since when. */
static void store_full_status(json_t *o, const pw_fs_stats *fst)
{
	uint64_t n = fst->store_not_kept;
	int64_t since = fst->store_full_since_ns;
	if (!o || !n)
		return;
	json_object_set_new(
	    o, "store_full",
	    json_pack("{s:I,s:I}", "not_kept", (json_int_t)n, "since_ns", (json_int_t)since));
	char msg[200];
	snprintf(msg, sizeof(msg),
		 "undo is incomplete: the originals store is full, %llu change(s) of this change "
		 "set not kept (piworkfs changes lists them)",
		 (unsigned long long)n);
	json_array_append_new(json_object_get(o, "warnings"), json_string(msg));
}

/* The view's lane (`mount --only`): [] without one. */
static json_t *lane_json(const pw_view *v)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < pw_view_lane_count(v); i++)
		json_array_append_new(a, json_string(pw_view_lane_glob(v, i)));
	return a ? a : json_array();
}

/* A run's own view: {"id", "pid"} of the run it serves; a bare view: null. */
static json_t *run_json(const pw_view *v)
{
	if (!pw_view_info_of(v)->run_id)
		return json_null();
	return json_pack("{s:s,s:i}", "id", pw_view_info_of(v)->run_id, "pid",
			 (int)pw_view_info_of(v)->run_pid);
}

static int m_status(call *x, json_t **ret)
{
	pw_view_status st;
	pw_fs_stats fst = {};
	pw_ctl_stats cst;
	json_t *o, *w, *audit = json_null();

	if (pw_view_get_status(x->view, &st) < 0)
		return fail_nomem(x);
	pw_view_fs_stats(x->view, &fst);
	pw_ctl_server_get_stats(x->server, &cst);
	int64_t now_ns = pw_clock_ns(CLOCK_REALTIME);
	int64_t started = pw_view_info_of(x->view)->started_ns;

	w = json_array();
	for (size_t i = 0; w && i < st.n_warnings; i++)
		json_array_append_new(w, json_string(st.warnings[i]));
	if (pw_view_info_of(x->view)->audit) {
		pw_audit_stats as;
		pw_audit_get_stats(pw_view_info_of(x->view)->audit, &as);
		audit = json_pack("{s:I,s:I,s:I,s:I}", "submitted", (json_int_t)as.submitted,
				  "written", (json_int_t)as.written, "dropped",
				  (json_int_t)as.dropped, "coalesced", (json_int_t)as.coalesced);
	}
	o = json_pack(
	    "{s:s,s:s,s:s,s:I,s:b,s:s?,s:b,s:s,s:i,s:i,s:I,s:I,s:o,s:I,s:I,s:I,s:o,"
	    "s:{s:i,s:I,s:I,s:I,s:I},s:o,s:s?}",
	    "project", pw_view_info_of(x->view)->project, "mountpoint",
	    pw_view_info_of(x->view)->mountpoint, "mode", st.mode, "generation",
	    (json_int_t)st.generation, "fail_closed", st.fail_reason != NULL, "fail_reason",
	    st.fail_reason, "trusted", st.trusted, "socket", pw_ctl_server_socket_path(x->server),
	    "pid", (int)getpid(), "owner_uid", (int)pw_view_info_of(x->view)->owner, "started_ns",
	    (json_int_t)started, "uptime_s", (json_int_t)((now_ns - started) / 1000000000),
	    "warnings", w ? w : json_array(), "reloads", (json_int_t)st.reloads, "denied",
	    (json_int_t)fst.denied, "inodes", (json_int_t)fst.inodes, "audit", audit, "clients",
	    "connected", (int)cst.clients, "accepted", (json_int_t)cst.accepted, "refused",
	    (json_int_t)(cst.refused_busy + cst.refused_uid), "dropped",
	    (json_int_t)(cst.dropped_slow + cst.dropped_idle + cst.dropped_large),
	    "denied_suppressed", (json_int_t)cst.denied_suppressed, "requests", requests_json(&fst),
	    "state_db", pw_view_info_of(x->view)->state_db);
	if (o)
		json_object_set_new(o, "run", run_json(x->view));
	if (o)
		json_object_set_new(o, "invalidations", invalidations_json(&fst));
	if (o)
		json_object_set_new(o, "jobs", jobs_json(&cst));
	if (o)
		json_object_set_new(o, "lane", lane_json(x->view));
	if (o && fst.transport)
		json_object_set_new(o, "transport", transport_json(&fst));
	if (o)
		json_object_set_new(o, "dircache", dircache_json(&fst));
	if (o)
		json_object_set_new(o, "watch", watch_json(&fst));
	store_full_status(o, &fst);
	unwatched_status(o, &fst);
	pw_view_status_done(&st);
	return done(x, o, ret);
}

/* ---- modes ----------------------------------------------------------------------------- */

static int m_modes_list(call *x, json_t **ret)
{
	pw_policy *p = pw_view_policy(x->view, NULL);
	const pw_modeset *ms = pw_view_lock_modeset(x->view);
	json_t *o = pw_report_modeset(ms);
	pw_view_unlock_modeset(x->view);

	if (o && p)
		json_object_set_new(o, "active", json_string(pw_policy_mode_name(p)));
	pw_policy_unref(p);
	return done(x, o, ret);
}

/* {"mode","generation","fail_closed","fail_reason","description","body","policy"} */
static json_t *mode_info(pw_policy *p, uint64_t gen, bool body)
{
	return json_pack("{s:s,s:I,s:b,s:s?,s:s?,s:s?,s:o}", "mode", pw_policy_mode_name(p),
			 "generation", (json_int_t)gen, "fail_closed", pw_policy_is_fail_closed(p),
			 "fail_reason", pw_policy_fail_reason(p), "description",
			 pw_policy_description(p), "body", body ? pw_policy_body(p) : NULL,
			 "policy", pw_report_policy(p));
}

static const pw_rpc_param mode_get_params[] = {
    {"body", PW_RPC_T_BOOL, false, 0},
};

static int m_mode_get(call *x, json_t **ret)
{
	uint64_t gen;
	pw_policy *p = pw_view_policy(x->view, &gen);
	json_t *body = json_object_get(x->params, "body");
	json_t *o;

	if (!p)
		return fail_nomem(x);
	o = mode_info(p, gen, json_is_true(body));
	pw_policy_unref(p);
	return done(x, o, ret);
}

static const pw_rpc_param mode_set_params[] = {
    {"mode", PW_RPC_T_STRING, true, PW_MODE_NAME_MAX},
};

static int m_mode_set(call *x, json_t **ret)
{
	const char *name = str_param(x, "mode");
	_cleanup_free_ char *why = NULL;
	pw_policy *before = pw_view_policy(x->view, NULL);
	pw_view_installed in;
	json_t *o;
	int r;

	r = pw_view_switch(x->view, name, x->peer, &in, &why);
	if (r < 0) {
		const char *prev = before ? pw_policy_mode_name(before) : "?";
		switch (r) {
		case -ENOENT:
			fail(x, PW_RPC_UNKNOWN_MODE, "unknown mode '%s'", name);
			/* Everything the client says in its one line: no second call. */
			x->fail->data =
			    json_pack("{s:o,s:s,s:s}", "modes", mode_names(x->view), "active", prev,
				      "project", pw_view_info_of(x->view)->project);
			break;
		case -EBADMSG:
			fail(x, PW_RPC_MODE_BROKEN, "%s", why ? why : "the mode's file is broken");
			break;
		case -EPERM:
			fail(x, PW_RPC_REFUSED, "%s", why ? why : "refused");
			x->fail->data = json_pack("{s:s,s:s,s:b}", "active", prev, "requested",
						  name, "restricted", x->peer->restricted);
			break;
		default:
			fail(x, PW_RPC_INTERNAL_ERROR, "switch failed: %s", strerror(-r));
		}
		pw_policy_unref(before);
		return PW_CTL_FAILED;
	}
	/* pw_view_switch returned after the FUSE layer installed it: the switch is in force.
	 * The reply describes that switch (its policy, generation and the mode it replaced),
	 * not whatever another switch installed since. */
	o = mode_info(in.policy, in.generation, false);
	if (o)
		json_object_set_new(o, "previous", json_string(in.previous));
	pw_view_installed_done(&in);
	pw_policy_unref(before);
	return done(x, o, ret);
}

/* ---- check, allowed -------------------------------------------------------------------- */

/* Maps a path as a client gives it (project-relative, or absolute under the mountpoint or
 * the project) to a normalized project path. Returns 0, -EXDEV (outside), or -errno with
 * *ret_err. */
static int map_path(pw_view *v, const char *in, char *out, const char **ret_err)
{
	const char *roots[] = {pw_view_info_of(v)->mountpoint, pw_view_info_of(v)->project};

	if (in[0] == '/') {
		for (size_t i = 0; i < ELEMENTSOF(roots); i++) {
			long off = pw_path_beneath(in, roots[i]);
			if (off < 0)
				continue;
			const char *rest = in + off; /* normalized with its leading '/', as given */
			if (rest > in && rest[-1] == '/')
				rest--;
			return pw_path_normalize(rest, strlen(rest), out, ret_err);
		}
		return -EXDEV;
	}
	return pw_path_normalize(in, strlen(in), out, ret_err);
}

/* Is PATH a directory in the backing tree (no symlink followed)? DFLT when it is missing,
 * or hidden by HIDE (an agent's view: a hidden name reads as a missing one). */
static bool backing_is_dir(pw_view *v, const pw_policy *hide, const char *path, bool dflt)
{
	_cleanup_close_ int root = -1;
	struct stat st;

	if (!path[0])
		return true;
	root = open(pw_view_info_of(v)->project, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0 || fstatat(root, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return dflt;
	if (pw_bash_hidden_path(hide, path, S_ISDIR(st.st_mode)))
		return dflt;
	return S_ISDIR(st.st_mode);
}

/* What an agent may not see: the view's active policy (a reference), whose hidden names
 * its answers treat as absent. NULL for the person. */
static pw_policy *agent_hide(call *x)
{
	return x->peer->restricted ? pw_view_policy(x->view, NULL) : NULL;
}

static const pw_rpc_param check_params[] = {
    {"paths", PW_RPC_T_STRING_ARRAY, true, PW_CHECK_PATHS_MAX},
    {"op", PW_RPC_T_STRING, false, 32},
    {"mode", PW_RPC_T_STRING, false, PW_MODE_NAME_MAX},
    {"dir", PW_RPC_T_BOOL, false, 0},
};

static int m_check(call *x, json_t **ret)
{
	const char *opname = str_param(x, "op");
	json_t *dir = json_object_get(x->params, "dir");
	json_t *paths = json_object_get(x->params, "paths"), *item, *out;
	pw_policy *p = NULL;
	uint64_t gen = 0;
	size_t i;
	int op = PW_OP_WRITE;
	_cleanup_policy_ pw_policy *hide = agent_hide(x);

	if (x->peer->restricted && !hide)
		return fail_nomem(x);
	if (opname) {
		op = streq(opname, "write") ? PW_OP_WRITE : pw_op_from_name(opname);
		if (op < 0)
			return fail(x, PW_RPC_INVALID_PARAMS, "params.op: unknown operation '%s'",
				    opname);
	}
	if (str_param(x, "mode")) {
		if (requested_policy(x, &p) < 0)
			return PW_CTL_FAILED;
	} else {
		p = pw_view_policy(x->view, &gen);
		if (!p)
			return fail_nomem(x);
	}
	out = json_array();
	json_array_foreach(paths, i, item)
	{
		const char *in = json_string_value(item), *err = NULL;
		char rel[PW_PATH_MAX];
		size_t len = strlen(in);
		bool slash = len > 0 && in[len - 1] == '/', is_dir;
		pw_decision d;
		int r = map_path(x->view, in, rel, &err);

		if (r == -EXDEV) {
			d = (pw_decision){.err = EXDEV, .reason = PW_REASON_OUTSIDE};
			json_array_append_new(out, pw_report_decision_in(in, op, slash, &d, p));
			continue;
		}
		if (r < 0) {
			json_decref(out);
			pw_policy_unref(p);
			return fail(x, PW_RPC_INVALID_PATH, "params.paths[%zu]: %s", i,
				    err ? err : strerror(-r));
		}
		is_dir = dir ? json_is_true(dir) : backing_is_dir(x->view, hide, rel, slash);
		pw_policy_decide(p, op, rel, is_dir, &d);
		json_array_append_new(out,
				      pw_report_decision_in(rel[0] ? rel : ".", op, is_dir, &d, p));
	}
	json_t *o = json_pack("{s:s,s:I,s:o}", "mode", pw_policy_mode_name(p), "generation",
			      (json_int_t)gen, "decisions", out);
	pw_policy_unref(p);
	return done(x, o, ret);
}

static const pw_rpc_param allowed_params[] = {
    {"mode", PW_RPC_T_STRING, false, PW_MODE_NAME_MAX},
};

static int m_allowed(call *x, json_t **ret)
{
	pw_policy *p;
	json_t *o;

	if (requested_policy(x, &p) < 0)
		return PW_CTL_FAILED;
	o = pw_report_policy(p);
	pw_policy_unref(p);
	return done(x, o, ret);
}

/* ---- reload, subscribe ----------------------------------------------------------------- */

static int m_reload(call *x, json_t **ret)
{
	_cleanup_free_ char *why = NULL;
	pw_peer peer = *x->peer;
	pw_view_installed in;
	pw_view_status st;
	json_t *w, *o;
	int r;

	if (!peer.restricted)
		peer.origin = "reload";
	r = pw_view_reload(x->view, &peer, &in, &why);
	if (r == -EPERM)
		return fail(x, PW_RPC_REFUSED, "%s", why ? why : "refused");
	if (r < 0)
		return fail(x, PW_RPC_INTERNAL_ERROR, "reload failed: %s", strerror(-r));
	if (pw_view_get_status(x->view, &st) < 0) {
		pw_view_installed_done(&in);
		return fail_nomem(x);
	}
	/* Mode, generation and fail state of the policy this reload installed; the warnings
	 * are the modeset's now. */
	w = json_array();
	for (size_t i = 0; w && i < st.n_warnings; i++)
		json_array_append_new(w, json_string(st.warnings[i]));
	o = json_pack("{s:s,s:I,s:b,s:s?,s:o}", "mode", pw_policy_mode_name(in.policy),
		      "generation", (json_int_t)in.generation, "fail_closed",
		      pw_policy_is_fail_closed(in.policy), "fail_reason",
		      pw_policy_fail_reason(in.policy), "warnings", w ? w : json_array());
	pw_view_status_done(&st);
	pw_view_installed_done(&in);
	return done(x, o, ret);
}

static const pw_rpc_param subscribe_params[] = {
    {"events", PW_RPC_T_STRING_ARRAY, false, 8},
};

static int m_subscribe(call *x, json_t **ret)
{
	json_t *events = json_object_get(x->params, "events"), *item;
	bool mode = !events, denied = !events, request = false;
	size_t i;

	json_array_foreach(events, i, item)
	{
		const char *e = json_string_value(item);
		if (streq(e, "mode.changed"))
			mode = true;
		else if (streq(e, "denied"))
			denied = true;
		else if (streq(e, "mode.request"))
			request = true;
		else
			return fail(x, PW_RPC_INVALID_PARAMS,
				    "params.events[%zu]: unknown event (mode.changed, denied, "
				    "mode.request)",
				    i);
	}
	/* The person's questions are for the person's side only. */
	if (request && x->peer->restricted)
		return fail(x, PW_RPC_REFUSED,
			    "refused: mode.request notifications are for the person, outside the "
			    "agent");
	pw_ctl_client_subscribe(x->client, mode, denied);
	if (request)
		pw_ctl_client_subscribe_requests(x->client);
	json_t *a = json_array();
	if (a && mode)
		json_array_append_new(a, json_string("mode.changed"));
	if (a && denied)
		json_array_append_new(a, json_string("denied"));
	if (a && request)
		json_array_append_new(a, json_string("mode.request"));
	return done(x,
		    json_pack("{s:o,s:b}", "events", a ? a : json_array(), "audit",
			      pw_view_info_of(x->view)->audit != NULL),
		    ret);
}

/* ---- bash.check ------------------------------------------------------------------------ */

static const pw_rpc_param bash_params[] = {
    {"command", PW_RPC_T_STRING, true, PW_MSG_MAX},
    {"cwd", PW_RPC_T_STRING, false, PW_PATH_MAX},
    {"mode", PW_RPC_T_STRING, false, PW_MODE_NAME_MAX},
};

/* One bash.check, as its job holds it: copies of everything it needs, since it runs on a
 * thread of its own after the call's dispatch returned. */
typedef struct bash_call {
	char *command;
	size_t len;
	char cwd[PW_PATH_MAX];
	int root;	       /* the project, O_PATH */
	const char *root_path; /* the view's mountpoint: the view outlives the server */
	pw_policy *policy;     /* the mode asked about */
	pw_policy *hide;       /* an agent's: the active policy, whose hidden names it never sees */
} bash_call;

static void bash_call_free(void *arg)
{
	bash_call *b = arg;
	if (!b)
		return;
	free(b->command);
	if (b->root >= 0)
		close(b->root);
	pw_policy_unref(b->policy);
	pw_policy_unref(b->hide);
	free(b);
}

/* The job: the analysis runs in a worker process without privileges (bash_worker.h); this
 * thread waits for it and relays the verdict. */
static int bash_job(void *arg, int cancel_fd, json_t **ret, pw_ctl_fail *f)
{
	bash_call *b = arg;
	json_t *o = NULL;
	pw_bash_job job = {
	    .command = b->command,
	    .len = b->len,
	    .cwd = b->cwd,
	    .root_fd = b->root,
	    .root_path = b->root_path,
	    .policy = b->policy,
	    .hide = b->hide,
	};
	int r = pw_bash_worker_run_cancellable(&job, cancel_fd, &o);
	if (r == -ENOMEM)
		return pw_ctl_fail_set(f, PW_RPC_INTERNAL_ERROR, "out of memory");
	if (r == -E2BIG || r == -EINVAL)
		return pw_ctl_fail_set(f, PW_RPC_INVALID_PARAMS, "bash analysis failed: %s",
				       strerror(-r));
	if (r < 0)
		return pw_ctl_fail_set(f, PW_RPC_UNAVAILABLE, "bash analysis failed: %s",
				       r == -ENOTSUP	 ? strerror(-r)
				       : r == -ETIMEDOUT ? "the analysis took too long"
				       : r == -ECANCELED ? "the view's daemon is stopping"
							 : "the analysis worker failed");
	json_object_set_new(o, "mode", json_string(pw_policy_mode_name(b->policy)));
	*ret = o;
	return 0;
}

/* Checks the call and gathers what the job needs here, on the server thread (cheap); the
 * analysis itself is a job (server.h), so no bash.check ever holds up another client. */
static int m_bash_check(call *x, json_t **ret)
{
	json_t *cmd = json_object_get(x->params, "command");
	const char *cwd_in = str_param(x, "cwd"), *err = NULL;
	bash_call *b;
	int r;

	(void)ret;
	b = calloc(1, sizeof(*b));
	if (!b)
		return fail_nomem(x);
	b->root = -1;
	if (cwd_in) {
		r = map_path(x->view, cwd_in, b->cwd, &err);
		if (r < 0) {
			bash_call_free(b);
			return fail(x, PW_RPC_INVALID_PATH, "params.cwd: %s",
				    r == -EXDEV ? "outside the project"
				    : err	? err
						: strerror(-r));
		}
	}
	if (requested_policy(x, &b->policy) < 0) {
		bash_call_free(b);
		return PW_CTL_FAILED;
	}
	b->hide = agent_hide(x);
	b->len = json_string_length(cmd);
	b->command = malloc(b->len + 1);
	if (!b->command || (x->peer->restricted && !b->hide)) {
		bash_call_free(b);
		return fail_nomem(x);
	}
	memcpy(b->command, json_string_value(cmd), b->len + 1);
	b->root_path = pw_view_info_of(x->view)->mountpoint;
	b->root = open(pw_view_info_of(x->view)->project, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (b->root < 0) {
		r = -errno;
		bash_call_free(b);
		return fail(x, PW_RPC_UNAVAILABLE,
			    "bash analysis failed: cannot open the project: %s", strerror(-r));
	}
	return pw_ctl_job_run(x, bash_job, b, bash_call_free);
}

/* ---- text.*: what an agent reads (policy/agent_text.h) ---------------------------------- */

/* The Pi extension asks for its texts here rather than building them, so that every
 * integration prints the same bytes from one source (docs/ARCHITECTURE.md, "Texts written
 * once"). The methods only format: they decide nothing and change nothing, so an agent
 * socket may call them. What a client passes in (a refusal's rule, a plan's progress) only
 * shapes the words its own agent reads. */

/* Has the originals store failed to keep a change of the current change set (issue 27)? */
static bool store_is_full(call *x)
{
	pw_fs_stats fst = {};

	pw_view_fs_stats(x->view, &fst);
	return fst.store_not_kept > 0;
}

static const pw_rpc_param text_mode_params[] = {
    {"mode", PW_RPC_T_STRING, false, PW_MODE_NAME_MAX},
    {"from", PW_RPC_T_STRING, false, PW_MODE_NAME_MAX},
    {"store_full", PW_RPC_T_BOOL, false, 0},
    {"plan", PW_RPC_T_OBJECT, false, 0},
};

/* The texts of policy P (generation GEN, or null for a mode asked by name): its announcement
 * (with the plan line), mode section, writable set and, with FROM, the switch
 * announcement. */
static json_t *mode_texts(call *x, pw_policy *p, json_t *gen)
{
	const char *from = str_param(x, "from"), *mode = pw_policy_mode_name(p);
	const char *body = pw_policy_body(p);
	json_t *plan = json_object_get(x->params, "plan"), *pol = pw_report_policy(p), *o = NULL;
	bool full = json_is_true(json_object_get(x->params, "store_full")) && store_is_full(x);
	_cleanup_free_ char *ann = NULL, *sys = NULL, *w = NULL, *sw = NULL;

	if (pol) {
		_cleanup_free_ char *a = pw_text_announcement(pol, full);
		_cleanup_free_ char *s =
		    from ? pw_text_switch_announcement(pol, body, from, full) : NULL;
		ann = a ? pw_text_with_plan(a, plan) : NULL;
		sw = s ? pw_text_with_plan(s, plan) : NULL;
		sys = pw_text_system_section(mode, body);
		w = pw_text_writable(pol);
	}
	if (ann && sys && w && (!from || sw))
		o = json_pack("{s:s,s:O,s:b,s:s,s:s,s:s}", "mode", mode, "generation", gen,
			      "fail_closed", pw_policy_is_fail_closed(p), "announcement", ann,
			      "system", sys, "writable", w);
	if (o && sw)
		json_object_set_new(o, "switch", json_string(sw));
	json_decref(pol);
	return o;
}

static int m_text_mode(call *x, json_t **ret)
{
	_cleanup_policy_ pw_policy *p = NULL;
	uint64_t gen = 0;
	json_t *g, *o;

	if (str_param(x, "mode")) {
		if (requested_policy(x, &p) < 0)
			return PW_CTL_FAILED;
		g = json_null();
	} else {
		p = pw_view_policy(x->view, &gen);
		if (!p)
			return fail_nomem(x);
		g = json_integer((json_int_t)gen);
	}
	o = g ? mode_texts(x, p, g) : NULL;
	json_decref(g);
	return done(x, o, ret);
}

/* What one call explains refusals with: the view's modes, narrowest first, compiled when
 * first needed, and each mode's writable set. */
typedef struct explainer {
	call *x;
	pw_policy *active;   /* the active policy: a refusal naming no mode is its */
	pw_policy *hide;     /* an agent's view hides what the active policy hides */
	json_t *ranked;	     /* mode names (pw_text_rank_modes) */
	pw_policy **modes;   /* their policies, NULL until compiled */
	bool *broken;	     /* ... or known not to compile */
	json_t *writable;    /* mode name -> its writable set in words */
	const char *project; /* the project, to show rule files relative to it */
	const char *agent;   /* who reads the lines */
	pw_text_ask ask;
} explainer;

static void explainer_done(explainer *e)
{
	for (size_t i = 0; e->modes && i < json_array_size(e->ranked); i++)
		pw_policy_unref(e->modes[i]);
	free(e->modes);
	free(e->broken);
	json_decref(e->ranked);
	json_decref(e->writable);
	pw_policy_unref(e->hide);
	pw_policy_unref(e->active);
}

/* params.ask: 0 with *RET (default: words), or PW_CTL_FAILED. */
static int ask_param(call *x, pw_text_ask *ret)
{
	const char *ask = str_param(x, "ask");

	*ret = PW_TEXT_ASK_WORDS;
	if (ask && pw_text_ask_from_name(ask, ret) < 0)
		return fail(x, PW_RPC_INVALID_PARAMS,
			    "params.ask: expected \"words\", \"command\" or \"tool\"");
	return 0;
}

static int explainer_init(call *x, explainer *e)
{
	const pw_modeset *ms;
	json_t *set;
	size_t n;

	*e = (explainer){
	    .x = x, .project = pw_view_info_of(x->view)->project, .agent = str_param(x, "agent")};
	if (ask_param(x, &e->ask) < 0)
		return PW_CTL_FAILED;
	ms = pw_view_lock_modeset(x->view);
	set = pw_report_modeset(ms);
	pw_view_unlock_modeset(x->view);
	e->ranked = set ? pw_text_rank_modes(json_object_get(set, "modes")) : NULL;
	json_decref(set);
	n = json_array_size(e->ranked);
	e->modes = calloc(n ? n : 1, sizeof(*e->modes));
	e->broken = calloc(n ? n : 1, sizeof(*e->broken));
	e->writable = json_object();
	e->hide = agent_hide(x);
	e->active = pw_view_policy(x->view, NULL);
	if (!e->ranked || !e->modes || !e->broken || !e->writable || !e->active ||
	    (x->peer->restricted && !e->hide)) {
		explainer_done(e);
		return fail_nomem(x);
	}
	return 0;
}

/* The policy of the I-th ranked mode, or NULL when it cannot be compiled (that mode is
 * skipped, as a `check` of it would fail). */
static pw_policy *ranked_policy(explainer *e, size_t i)
{
	if (!e->modes[i] && !e->broken[i] &&
	    pw_view_compile(e->x->view, json_string_value(json_array_get(e->ranked, i)),
			    &e->modes[i]) < 0)
		e->broken[i] = true;
	return e->modes[i];
}

/* The narrowest mode other than CURRENT that allows OP on PATH (as `check` decides it for
 * the caller), or NULL: none, or PATH cannot be normalized. */
static const char *narrowest_mode(explainer *e, const char *path, const char *opname,
				  const char *current)
{
	int op = opname && !streq(opname, "write") ? pw_op_from_name(opname) : PW_OP_WRITE;
	char rel[PW_PATH_MAX];
	const char *err = NULL;
	size_t len = path ? strlen(path) : 0;
	bool is_dir;

	if (!len || map_path(e->x->view, path, rel, &err) < 0)
		return NULL;
	if (op < 0)
		op = PW_OP_WRITE;
	is_dir = backing_is_dir(e->x->view, e->hide, rel, path[len - 1] == '/');
	for (size_t i = 0; i < json_array_size(e->ranked); i++) {
		const char *name = json_string_value(json_array_get(e->ranked, i));
		pw_policy *p;
		pw_decision d;
		if (streq_ptr(name, current) || !(p = ranked_policy(e, i)))
			continue;
		pw_policy_decide(p, op, rel, is_dir, &d);
		if (d.allowed)
			return name;
	}
	return NULL;
}

/* What MODE writes, in words (the active policy's for the active mode, which may be failing
 * closed; "?" for a mode that cannot be compiled); owned by E. */
static const char *writable_of(explainer *e, const char *mode)
{
	json_t *known = json_object_get(e->writable, mode), *pol = NULL;
	pw_policy *p = NULL;
	char *w = NULL;

	if (known)
		return json_string_value(known);
	if (streq(mode, pw_policy_mode_name(e->active)))
		p = pw_policy_ref(e->active);
	else if (pw_view_compile(e->x->view, mode, &p) < 0)
		p = NULL;
	if (p && (pol = pw_report_policy(p)))
		w = pw_text_writable(pol);
	json_object_set_new(e->writable, mode, json_string(w ? w : "?"));
	free(w);
	json_decref(pol);
	pw_policy_unref(p);
	return json_string_value(json_object_get(e->writable, mode));
}

/* The line for refusal R; its mode (the active one when it names none) decides what is
 * writable and which modes are looser. */
static char *refusal_line(explainer *e, json_t *r)
{
	const char *mode = json_string_value(json_object_get(r, "mode"));
	const char *reason = json_string_value(json_object_get(r, "reason"));
	const char *hint = NULL;

	if (!mode)
		mode = pw_policy_mode_name(e->active);
	if (!streq_ptr(reason, "hidden"))
		hint = narrowest_mode(e, json_string_value(json_object_get(r, "path")),
				      json_string_value(json_object_get(r, "op")), mode);
	return pw_text_refusal_line(r, writable_of(e, mode), hint, e->project, e->agent, e->ask);
}

/* Appends the lines of REFUSALS to LINES; false without memory. */
static bool refusal_lines(explainer *e, json_t *refusals, json_t *lines)
{
	size_t i;
	json_t *r;

	json_array_foreach(refusals, i, r)
	{
		char *line = refusal_line(e, r);
		if (!line || json_array_append_new(lines, json_string(line)) < 0) {
			free(line);
			return false;
		}
		free(line);
	}
	return true;
}

static const pw_rpc_param text_refusals_params[] = {
    {"refusals", PW_RPC_T_OBJECT_ARRAY, true, PW_TEXT_REFUSALS_MAX},
    {"agent", PW_RPC_T_STRING, false, PW_TEXT_AGENT_MAX},
    {"ask", PW_RPC_T_STRING, false, 16},
    {"more", PW_RPC_T_INT, false, 0},
};

static int m_text_refusals(call *x, json_t **ret)
{
	json_int_t more = json_integer_value(json_object_get(x->params, "more"));
	json_t *lines = json_array();
	explainer e;

	if (!lines || explainer_init(x, &e) < 0) {
		json_decref(lines);
		return lines ? PW_CTL_FAILED : fail_nomem(x);
	}
	bool ok = refusal_lines(&e, json_object_get(x->params, "refusals"), lines);
	if (ok && more > 0) {
		char *m = pw_text_more_line((size_t)more, e.agent);
		ok = m && json_array_append_new(lines, json_string(m)) == 0;
		free(m);
	}
	explainer_done(&e);
	if (!ok) {
		json_decref(lines);
		return fail_nomem(x);
	}
	return done(x, json_pack("{s:o}", "lines", lines), ret);
}

static const pw_rpc_param text_bash_params[] = {
    {"check", PW_RPC_T_OBJECT, true, 0},
    {"agent", PW_RPC_T_STRING, false, PW_TEXT_AGENT_MAX},
    {"ask", PW_RPC_T_STRING, false, 16},
};

/* {"block", "warn"} for the certain refusals CERTAIN of a command checked in MODE. */
static json_t *bash_texts(explainer *e, json_t *certain, const char *mode)
{
	json_t *refusals = json_array(), *lines = json_array(), *t, *o = NULL;
	_cleanup_free_ char *block = NULL, *warn = NULL;
	size_t i;

	json_array_foreach(certain, i, t)
	    json_array_append_new(refusals, pw_text_target_refusal(t, mode));
	if (refusals && lines && json_array_size(refusals) == json_array_size(certain) &&
	    refusal_lines(e, refusals, lines)) {
		block = pw_text_bash_block(mode, lines);
		warn = pw_text_bash_warn(certain, mode);
	}
	if (block && warn)
		o = json_pack("{s:s,s:s}", "block", block, "warn", warn);
	json_decref(refusals);
	json_decref(lines);
	return o;
}

static int m_text_bash(call *x, json_t **ret)
{
	json_t *check = json_object_get(x->params, "check"), *certain, *o;
	const char *mode = json_string_value(json_object_get(check, "mode"));
	pw_text_ask ask;
	explainer e;

	if (ask_param(x, &ask) < 0)
		return PW_CTL_FAILED;
	if (json_array_size(json_object_get(check, "targets")) > PW_TEXT_TARGETS_MAX)
		return fail(x, PW_RPC_INVALID_PARAMS, "params.check.targets: more than %d items",
			    PW_TEXT_TARGETS_MAX);
	certain = pw_text_certain_refusals(check);
	if (!certain)
		return fail_nomem(x);
	if (!json_array_size(certain)) {
		json_decref(certain);
		return done(x, json_pack("{s:n,s:n}", "block", "warn"), ret);
	}
	if (explainer_init(x, &e) < 0) {
		json_decref(certain);
		return PW_CTL_FAILED;
	}
	o = bash_texts(&e, certain, mode ? mode : pw_policy_mode_name(e.active));
	explainer_done(&e);
	json_decref(certain);
	return done(x, o, ret);
}

static const pw_rpc_param text_overlap_params[] = {
    {"path", PW_RPC_T_STRING, true, PW_PATH_MAX},
    {"views", PW_RPC_T_OBJECT_ARRAY, true, PW_TEXT_VIEWS_MAX},
};

static int m_text_overlap(call *x, json_t **ret)
{
	_cleanup_free_ char *t =
	    pw_text_overlap_line(str_param(x, "path"), json_object_get(x->params, "views"));

	return done(x, t ? json_pack("{s:s}", "text", t) : NULL, ret);
}

/* ---- agent.open (fs/ctl/agent.c) ------------------------------------------------------- */

static const pw_rpc_param agent_open_params[] = {
    {"own", PW_RPC_T_BOOL, false, 0},
};

static int m_agent_open(call *x, json_t **ret)
{
	if (json_is_true(json_object_get(x->params, "own")))
		return pw_ctl_agent_open_own(x->server, x->client, ret, x->fail);
	return pw_ctl_agent_open(x->server, x->peer, ret, x->fail);
}

/* ---- the table ------------------------------------------------------------------------- */

#define M(n, f, spec)                                                                              \
	{                                                                                          \
		n, f, spec, ELEMENTSOF(spec), NULL                                                 \
	}
#define M0(n, f)                                                                                   \
	{                                                                                          \
		n, f, NULL, 0, NULL                                                                \
	}
static const pw_ctl_method methods[] = {
    M0("status", m_status),
    M0("modes.list", m_modes_list),
    M("mode.get", m_mode_get, mode_get_params),
    M("mode.set", m_mode_set, mode_set_params),
    M("check", m_check, check_params),
    M("allowed", m_allowed, allowed_params),
    M0("reload", m_reload),
    M("subscribe", m_subscribe, subscribe_params),
    {"agent.open", m_agent_open, agent_open_params, ELEMENTSOF(agent_open_params),
     "refused: an agent may not open agent sockets; only the person outside the agent "
     "can (piworkfs run does)"},
    M("bash.check", m_bash_check, bash_params),
    M("text.mode", m_text_mode, text_mode_params),
    M("text.refusals", m_text_refusals, text_refusals_params),
    M("text.bash", m_text_bash, text_bash_params),
    M("text.overlap", m_text_overlap, text_overlap_params),
};

const pw_ctl_module pw_ctl_methods_module = {
    .name = "view",
    .methods = methods,
    .n_methods = ELEMENTSOF(methods),
};
