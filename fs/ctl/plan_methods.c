/* SPDX-License-Identifier: MIT */
/*
 * The plan methods (plan_methods.h). Each call reads what it reports afresh: the plan files from the
 * backing directory, approval and progress from the state database. Nothing is cached, so a
 * plan edited in the view, outside it, or in another mount of the project is never shown
 * stale; the files are small (PW_PLAN_FILE_MAX) and the folder holds a handful.
 *
 * Status, as shown: a plan the database does not hold as approved is a "draft"; an approved
 * one is "approved" until a task is done, "in_progress" while some are, "done" when all are.
 * The active plan is the most recently approved one that is not done.
 */
#include "plan_methods.h"
#include "plan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pw_limits.h"
#include "proto.h"
#include "store/sha256.h"
#include "store/state.h"
#include "util.h"

typedef pw_ctl_ctx call;

/* ---- the backing files ----------------------------------------------------------------- */

static int open_beneath(int root, const char *path, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, root, path, &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

static int open_root(pw_view *v)
{
	int fd = open(pw_view_project(v), O_PATH | O_DIRECTORY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

/* Reads at most PW_PLAN_FILE_MAX bytes of PATH; *ret_total is the file's size. */
static int read_plan(int root, const char *path, char **ret, size_t *ret_len, size_t *ret_total)
{
	_cleanup_close_ int fd = open_beneath(root, path, O_RDONLY | O_NOFOLLOW, 0);
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	size_t n = 0;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	buf = malloc(PW_PLAN_FILE_MAX + 1);
	if (!buf)
		return -ENOMEM;
	while (n < PW_PLAN_FILE_MAX) {
		ssize_t k = read(fd, buf + n, PW_PLAN_FILE_MAX - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			break;
		n += (size_t)k;
	}
	buf[n] = '\0';
	*ret = TAKE_PTR(buf);
	*ret_len = n;
	*ret_total = (size_t)st.st_size > n ? (size_t)st.st_size : n;
	return 0;
}

static void hash_hex(const char *buf, size_t len, char out[PW_SHA256_HEX])
{
	pw_sha256 c;
	uint8_t d[PW_SHA256_LEN];

	pw_sha256_init(&c);
	pw_sha256_update(&c, buf, len);
	pw_sha256_final(&c, d);
	pw_sha256_hex(d, out);
}

/*
 * Replaces PATH with TEXT the way an editor saves: a temporary file beside it (same owner
 * and permissions), written, synced, renamed over it. The daemon writes the backing
 * directory, not the view, so an approved plan's protection does not stop it; the watcher
 * tells the kernel the file changed.
 */
static int replace_file(int root, const char *path, const char *text)
{
	_cleanup_free_ char *dir = strdup(path), *tmp = NULL;
	_cleanup_close_ int dfd = -1, fd = -1, old = -1;
	const char *base = strrchr(path, '/');
	size_t len = strlen(text);
	struct stat st;
	int r = 0;

	if (!dir || !base)
		return -ENOMEM;
	dir[base - path] = '\0';
	base++;
	dfd = open_beneath(root, dir, O_RDONLY | O_DIRECTORY, 0);
	if (dfd < 0)
		return dfd;
	old = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (old < 0 || fstat(old, &st) < 0)
		return -errno;
	if (asprintf(&tmp, ".%s.piworkfs-%d", base, (int)getpid()) < 0)
		return -ENOMEM;
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	/* The owner's, where the daemon may set it (root); else the daemon's own, as ever. */
	if (fchown(fd, st.st_uid, st.st_gid) < 0 && errno != EPERM)
		r = -errno;
	if (r == 0 && fchmod(fd, st.st_mode & 07777) < 0)
		r = -errno;
	for (size_t off = 0; r == 0 && off < len;) {
		ssize_t k = write(fd, text + off, len - off);
		if (k < 0 && errno != EINTR)
			r = -errno;
		else if (k > 0)
			off += (size_t)k;
	}
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && renameat(dfd, tmp, dfd, base) < 0)
		r = -errno;
	if (r < 0)
		unlinkat(dfd, tmp, 0);
	return r;
}

/* ---- one plan, as shown -------------------------------------------------------------- */

typedef struct plan_info {
	char *name, *path;
	pw_plan *doc;       /* NULL when the file cannot be read */
	int read_err;       /* why not (-errno) */
	char hash[PW_SHA256_HEX]; /* of the file as it is now */
	pw_plan_record rec; /* what the database holds (rec.path NULL: nothing) */
	pw_task_record *done;
	size_t n_done;
} plan_info;

static void plan_info_done(plan_info *p)
{
	free(p->name);
	free(p->path);
	pw_plan_free(p->doc);
	free(p->rec.path);
	free(p->rec.status);
	free(p->rec.hash);
	free(p->rec.approved_by);
	pw_task_records_free(p->done, p->n_done);
	*p = (plan_info){ 0 };
}

static bool is_approved(const plan_info *p)
{
	return streq_ptr(p->rec.status, "approved");
}

/* Is task N (1-based) marked done? */
static const pw_task_record *task_done(const plan_info *p, int64_t n)
{
	for (size_t i = 0; i < p->n_done; i++)
		if (p->done[i].task == n)
			return &p->done[i];
	return NULL;
}

static size_t tasks_total(const plan_info *p)
{
	return p->doc ? p->doc->n_tasks : 0;
}

static size_t tasks_done(const plan_info *p)
{
	size_t n = 0;

	for (size_t i = 1; i <= tasks_total(p); i++)
		n += task_done(p, (int64_t)i) != NULL;
	return n;
}

/* The first task not done (1-based), 0 when none is left. */
static size_t next_task(const plan_info *p)
{
	for (size_t i = 1; i <= tasks_total(p); i++)
		if (!task_done(p, (int64_t)i))
			return i;
	return 0;
}

static const char *shown_status(const plan_info *p)
{
	size_t done = tasks_done(p), total = tasks_total(p);

	if (!is_approved(p))
		return "draft";
	if (total > 0 && done == total)
		return "done";
	return done > 0 ? "in_progress" : "approved";
}

/* Fills P for the plan file PATH (NAME its stem): the file, and what STATE holds. */
static int plan_info_load(pw_view *v, int root, const char *path, const char *name,
			  const pw_plan_record *rec, plan_info *p)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, total = 0;
	pw_state *st;
	int r;

	*p = (plan_info){ .name = strdup(name), .path = strdup(path) };
	if (!p->name || !p->path)
		return -ENOMEM;
	if (rec) {
		p->rec.path = strdup(rec->path);
		p->rec.status = rec->status ? strdup(rec->status) : NULL;
		p->rec.hash = rec->hash ? strdup(rec->hash) : NULL;
		p->rec.approved_by = rec->approved_by ? strdup(rec->approved_by) : NULL;
		p->rec.approved_ns = rec->approved_ns;
		p->rec.updated_ns = rec->updated_ns;
	}
	r = read_plan(root, path, &buf, &len, &total);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		p->read_err = r;
	else {
		hash_hex(buf, len, p->hash);
		r = pw_plan_parse(buf, len, total, &p->doc);
		if (r < 0)
			return r;
	}
	st = pw_view_lock_state(v);
	r = st ? pw_state_plan_tasks(st, pw_view_project(v), path, &p->done, &p->n_done) : 0;
	pw_view_unlock_state(v);
	return r;
}

/* ---- every plan ---------------------------------------------------------------------- */

typedef struct plan_set {
	char *dir;
	plan_info *v;
	size_t n, cap;
} plan_set;

static void plan_set_done(plan_set *s)
{
	for (size_t i = 0; i < s->n; i++)
		plan_info_done(&s->v[i]);
	free(s->v);
	free(s->dir);
	*s = (plan_set){ 0 };
}

static char *plans_dir(pw_view *v)
{
	const pw_modeset *ms = pw_view_lock_modeset(v);
	char *d = strdup(pw_modeset_plans_dir(ms));

	pw_view_unlock_modeset(v);
	return d;
}

static int cmp_info(const void *a, const void *b)
{
	return strcmp(((const plan_info *)a)->name, ((const plan_info *)b)->name);
}

static bool set_has(const plan_set *s, const char *path)
{
	for (size_t i = 0; i < s->n; i++)
		if (streq(s->v[i].path, path))
			return true;
	return false;
}

static const pw_plan_record *record_of(const pw_plan_record *recs, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (streq(recs[i].path, path))
			return &recs[i];
	return NULL;
}

static int set_add(pw_view *v, int root, plan_set *s, const char *path,
		   const pw_plan_record *recs, size_t n_recs)
{
	_cleanup_free_ char *p = NULL, *name = NULL;
	int r;

	if (set_has(s, path) || s->n >= PW_PLANS_MAX)
		return 0;
	/* A plan the database knows from another folder (`plans:` changed since) keeps its
	 * path, so that it can still be shown and reopened. */
	const char *dir_end = strrchr(path, '/');
	_cleanup_free_ char *dir = dir_end ? strndup(path, (size_t)(dir_end - path)) : NULL;
	if (!dir)
		return dir_end ? -ENOMEM : 0;
	r = pw_plan_path(dir, path, &p, &name);
	if (r < 0)
		return r == -ENOMEM ? r : 0;
	if (PW_GROW(s->v, s->cap, s->n, 8) < 0)
		return -ENOMEM;
	r = plan_info_load(v, root, p, name, record_of(recs, n_recs, p), &s->v[s->n]);
	s->n++;
	return r;
}

/* Every plan: the folder's NAME.md files, and those the database knows whose file is gone. */
static int plan_set_load(pw_view *v, plan_set *s)
{
	_cleanup_close_ int root = open_root(v);
	pw_plan_record *recs = NULL;
	size_t n_recs = 0;
	pw_state *st;
	DIR *d = NULL;
	int r = 0, dfd;

	*s = (plan_set){ .dir = plans_dir(v) };
	if (!s->dir)
		return -ENOMEM;
	if (root < 0)
		return root;
	st = pw_view_lock_state(v);
	if (st)
		r = pw_state_plans(st, pw_view_project(v), &recs, &n_recs);
	pw_view_unlock_state(v);
	if (r < 0)
		return r;
	dfd = open_beneath(root, s->dir, O_RDONLY | O_DIRECTORY, 0);
	if (dfd >= 0)
		d = fdopendir(dfd);
	for (struct dirent *e; d && r >= 0 && (e = readdir(d));) {
		_cleanup_free_ char *path = NULL;

		if (asprintf(&path, "%s/%s", s->dir, e->d_name) < 0)
			r = -ENOMEM;
		else if (pw_plan_is_plan_path(s->dir, path))
			r = set_add(v, root, s, path, recs, n_recs);
	}
	if (d)
		closedir(d);
	else if (dfd >= 0)
		close(dfd);
	for (size_t i = 0; r >= 0 && i < n_recs; i++)
		r = set_add(v, root, s, recs[i].path, recs, n_recs);
	pw_plan_records_free(recs, n_recs);
	if (r >= 0 && s->n > 1)
		qsort(s->v, s->n, sizeof(*s->v), cmp_info);
	return r;
}

/* The most recently approved plan that is not done, or NULL. */
static const plan_info *active_plan(const plan_set *s)
{
	const plan_info *best = NULL;

	for (size_t i = 0; i < s->n; i++) {
		const plan_info *p = &s->v[i];
		if (is_approved(p) && !streq(shown_status(p), "done") &&
		    (!best || p->rec.approved_ns > best->rec.approved_ns))
			best = p;
	}
	return best;
}

static const plan_info *find_plan(const plan_set *s, const char *name)
{
	_cleanup_free_ char *path = NULL, *stem = NULL;

	if (pw_plan_path(s->dir, name, &path, &stem) < 0)
		return NULL;
	for (size_t i = 0; i < s->n; i++)
		if (streq(s->v[i].path, path) || streq(s->v[i].path, name))
			return &s->v[i];
	/* By name alone: a plan of another folder, when no plan of this one has that name. */
	for (size_t i = 0; i < s->n; i++)
		if (streq(s->v[i].name, stem))
			return &s->v[i];
	return NULL;
}

/* ---- JSON ----------------------------------------------------------------------------- */

static json_t *problems_json(const plan_info *p)
{
	json_t *a = json_array();

	if (!a)
		return NULL;
	if (p->read_err)
		json_array_append_new(a, json_sprintf("cannot read the file: %s",
						      strerror(-p->read_err)));
	for (size_t i = 0; p->doc && i < p->doc->n_problems; i++)
		json_array_append_new(a, json_string(p->doc->problems[i]));
	if (is_approved(p) && !p->read_err && !streq_ptr(p->rec.hash, p->hash))
		json_array_append_new(a, json_string("the file changed since it was approved "
						     "(outside the view, or in mode off): its "
						     "content hash differs from the approved one"));
	return a;
}

static json_t *next_json(const plan_info *p)
{
	size_t n = next_task(p);

	if (!is_approved(p) || n == 0)
		return json_null();
	return json_pack("{s:I,s:s}", "task", (json_int_t)n, "text", p->doc->tasks[n - 1].text);
}

/*
 * One line for an agent's per-turn announcement, byte-stable while nothing changes:
 * `plan NAME: D/T done; next: N. TEXT` (or `; all tasks done`).
 */
static json_t *plan_line(const plan_info *p)
{
	size_t n = next_task(p);

	if (n == 0)
		return json_sprintf("plan %s: %zu/%zu done; all tasks done", p->name,
				    tasks_done(p), tasks_total(p));
	return json_sprintf("plan %s: %zu/%zu done; next: %zu. %s", p->name, tasks_done(p),
			    tasks_total(p), n, p->doc->tasks[n - 1].text);
}

static json_t *summary_json(const plan_info *p)
{
	return json_pack("{s:s,s:s,s:s?,s:s,s:I,s:I,s:s?,s:I,s:o,s:o}", "name", p->name, "path",
			 p->path, "title", p->doc ? p->doc->title : NULL, "status",
			 shown_status(p), "done", (json_int_t)tasks_done(p), "total",
			 (json_int_t)tasks_total(p), "updated", p->doc ? p->doc->updated : NULL,
			 "approved_ns", (json_int_t)p->rec.approved_ns, "next", next_json(p),
			 "problems", problems_json(p));
}

static json_t *tasks_json(const plan_info *p)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < tasks_total(p); i++) {
		const pw_task_record *t = task_done(p, (int64_t)i + 1);

		json_array_append_new(
			a, json_pack("{s:I,s:s,s:I,s:b,s:I,s:s?,s:I,s:s?}", "task", (json_int_t)i + 1,
				     "text", p->doc->tasks[i].text, "line",
				     (json_int_t)p->doc->tasks[i].line, "done", t != NULL, "done_ns",
				     (json_int_t)(t ? t->done_ns : 0), "done_by",
				     t ? t->done_by : NULL, "changeset",
				     (json_int_t)(t ? t->changeset : 0), "note", t ? t->note : NULL));
	}
	return a;
}

static json_t *detail_json(const plan_info *p)
{
	json_t *o = summary_json(p);

	if (o && json_object_update_missing_new(
			 o, json_pack("{s:s?,s:s?,s:s?,s:s?,s:s?,s:s?,s:s,s:o}", "created",
				      p->doc ? p->doc->created : NULL, "approved",
				      p->doc ? p->doc->approved : NULL, "approved_by",
				      p->rec.approved_by, "hash", p->rec.hash, "file_hash",
				      p->read_err ? NULL : p->hash, "file_status",
				      p->doc ? p->doc->status : NULL, "tasks_from",
				      pw_plan_tasks_from_name(p->doc ? p->doc->tasks_from
								     : PW_PLAN_TASKS_NONE),
				      "tasks", tasks_json(p))) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *status_json(const plan_set *s)
{
	const plan_info *a = active_plan(s);

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
	_cleanup_(plan_set_done) plan_set s = { 0 };
	const plan_info *a;
	pw_state *st;

	if (plan_set_load(v, &s) < 0)
		return;
	a = active_plan(&s);
	if (!a || next_task(a) == 0)
		return;
	st = pw_view_lock_state(v);
	if (st)
		(void)pw_state_plan_note_changeset(st, pw_view_project(v), a->path,
						   (int64_t)next_task(a), a->rec.approved_ns);
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
static json_t *changesets_json(pw_view *v, const plan_info *p)
{
	int64_t *cs = NULL;
	size_t n = 0;
	pw_state *st = pw_view_lock_state(v);
	int r = st ? pw_state_plan_changesets(st, pw_view_project(v), p->path, &cs, &n) : 0;
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

static int load_or_fail(call *x, plan_set *s)
{
	int r = plan_set_load(x->view, s);

	return r < 0 ? fail_errno(x, r, "reading the plans") : 0;
}

/* The plan a call names (params.name), or -1 with the failure set. */
static int named_plan(call *x, const plan_set *s, const plan_info **ret)
{
	const char *name = json_string_value(json_object_get(x->params, "name"));
	const plan_info *p = name ? find_plan(s, name) : active_plan(s);

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
	_cleanup_(plan_set_done) plan_set s = { 0 };
	const plan_info *a;
	json_t *arr;

	if (load_or_fail(x, &s) < 0)
		return -1;
	arr = json_array();
	for (size_t i = 0; arr && i < s.n; i++)
		json_array_append_new(arr, summary_json(&s.v[i]));
	a = active_plan(&s);
	return reply(x, json_pack("{s:s,s:o,s:s?}", "plans_dir", s.dir, "plans", arr, "active",
				  a ? a->name : NULL), ret);
}

static int m_show(call *x, json_t **ret)
{
	_cleanup_(plan_set_done) plan_set s = { 0 };
	const plan_info *p;
	json_t *o;

	if (load_or_fail(x, &s) < 0 || named_plan(x, &s, &p) < 0)
		return -1;
	o = detail_json(p);
	if (o && json_object_set_new(o, "changesets", changesets_json(x->view, p)) < 0) {
		json_decref(o);
		o = NULL;
	}
	return reply(x, o, ret);
}

static int m_status(call *x, json_t **ret)
{
	_cleanup_(plan_set_done) plan_set s = { 0 };

	if (load_or_fail(x, &s) < 0)
		return -1;
	return reply(x, status_json(&s), ret);
}

/* plan.done's answer: plan.status, with "plan" and "line" those of the plan just marked
 * (its last task done, it is no longer the active one). */
static json_t *done_json(call *x, const char *name)
{
	_cleanup_(plan_set_done) plan_set s = { 0 };
	const plan_info *p;
	json_t *o;

	if (plan_set_load(x->view, &s) < 0 || !(p = find_plan(&s, name)))
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
	_cleanup_(plan_set_done) plan_set s = { 0 };
	_cleanup_free_ char *by = who(x->peer);
	json_int_t n = json_integer_value(json_object_get(x->params, "task"));
	const char *note = json_string_value(json_object_get(x->params, "note"));
	const plan_info *p;
	pw_state *st;
	int r;

	if (!by)
		return pw_ctl_fail_set(x->fail, PW_RPC_INTERNAL_ERROR, "out of memory");
	if (load_or_fail(x, &s) < 0 || named_plan(x, &s, &p) < 0)
		return -1;
	if (!is_approved(p))
		return pw_ctl_fail_set(x->fail, PW_RPC_REFUSED,
				       "plan '%s' is a draft: tasks are marked on an approved plan "
				       "(the person runs `piworkfs plan approve %s`)",
				       p->name, p->name);
	if (n < 1 || (size_t)n > tasks_total(p))
		return pw_ctl_fail_set(x->fail, PW_RPC_INVALID_PARAMS,
				       "plan '%s' has tasks 1 to %zu, not %lld", p->name,
				       tasks_total(p), (long long)n);
	/* A change set started since the last record (a checkpoint) did this task's work. */
	note_in_progress(x->view);
	st = pw_view_lock_state(x->view);
	r = st ? pw_state_plan_task_done(st, pw_view_project(x->view), p->path, n,
					 p->doc->tasks[n - 1].text, by,
					 pw_state_current_changeset(st, pw_view_project(x->view)),
					 note)
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

int pw_ctl_plan_approve(pw_view *v, const pw_peer *peer, const char *name, char **ret_why)
{
	_cleanup_(plan_set_done) plan_set s = { 0 };
	_cleanup_free_ char *by = who(peer), *text = NULL, *why = NULL, *buf = NULL;
	_cleanup_close_ int root = -1;
	char now[32], today[16], hash[PW_SHA256_HEX];
	size_t len, total;
	const plan_info *p;
	pw_state *st;
	int r;

	if (!by)
		return approve_fail(ret_why, PW_RPC_INTERNAL_ERROR, "out of memory");
	r = plan_set_load(v, &s);
	if (r < 0)
		return approve_fail(ret_why, PW_RPC_UNAVAILABLE, "reading the plans: %s",
				    strerror(-r));
	p = find_plan(&s, name);
	if (!p)
		return approve_fail(ret_why, PW_RPC_INVALID_PARAMS,
				    "no plan '%s' in %s/ (piworkfs plan list)", name, s.dir);
	if (is_approved(p))
		return approve_fail(ret_why, PW_RPC_INVALID_PARAMS, "plan '%s' is already approved",
				    p->name);
	if (p->read_err || !p->doc || p->doc->n_problems > 0)
		return approve_fail(ret_why, PW_RPC_INVALID_PARAMS,
				    "plan '%s' cannot be approved until it is fixed: %s", p->name,
				    p->read_err ? strerror(-p->read_err) : p->doc->problems[0]);
	root = open_root(v);
	if (root >= 0)
		r = read_plan(root, p->path, &buf, &len, &total);
	if (root < 0 || r < 0)
		return approve_fail(ret_why, PW_RPC_UNAVAILABLE, "reading the plan: %s",
				    strerror(root < 0 ? -root : -r));
	utc_now(now, today);
	r = pw_plan_set_fields(buf, len, "approved", now, today, &text);
	if (r < 0)
		return approve_fail(ret_why, PW_RPC_INTERNAL_ERROR, "writing the frontmatter: %s",
				    strerror(-r));
	hash_hex(text, strlen(text), hash);
	/* Frozen first, then written: from the reload on, no process can change the file
	 * through the view, so the text hashed is the text that stays. */
	st = pw_view_lock_state(v);
	r = st ? pw_state_plan_approve(st, pw_view_project(v), p->path, hash, by) : -ENOSYS;
	pw_view_unlock_state(v);
	if (r < 0)
		return approve_fail(ret_why, PW_RPC_UNAVAILABLE, "recording the approval: %s",
				    strerror(-r));
	r = pw_view_reload(v, peer, NULL, &why);
	if (r == 0)
		r = replace_file(root, p->path, text);
	if (r < 0) {
		st = pw_view_lock_state(v);
		pw_state_plan_reopen(st, pw_view_project(v), p->path);
		pw_view_unlock_state(v);
		pw_view_reload(v, peer, NULL, NULL);
		return approve_fail(ret_why, PW_RPC_INTERNAL_ERROR, "approval failed: %s",
				    why ? why : strerror(-r));
	}
	note_in_progress(v);
	return 0;
}

static int m_approve(call *x, json_t **ret)
{
	_cleanup_(plan_set_done) plan_set s = { 0 };
	_cleanup_free_ char *why = NULL;
	const char *name = json_string_value(json_object_get(x->params, "name"));
	const plan_info *p;
	int code = pw_ctl_plan_approve(x->view, x->peer, name, &why);

	if (code != 0)
		return pw_ctl_fail_set(x->fail, code, "%s", why ? why : "approval failed");
	if (load_or_fail(x, &s) < 0 || named_plan(x, &s, &p) < 0)
		return -1;
	return reply(x, detail_json(p), ret);
}

static int m_reopen(call *x, json_t **ret)
{
	_cleanup_(plan_set_done) plan_set s = { 0 };
	_cleanup_free_ char *text = NULL, *why = NULL, *buf = NULL;
	_cleanup_close_ int root = -1;
	char today[16];
	size_t len, total;
	const plan_info *p;
	pw_state *st;
	int r;

	if (load_or_fail(x, &s) < 0 || named_plan(x, &s, &p) < 0)
		return -1;
	if (!is_approved(p))
		return pw_ctl_fail_set(x->fail, PW_RPC_INVALID_PARAMS,
				       "plan '%s' is not approved (it is a draft already)", p->name);
	root = open_root(x->view);
	if (root < 0)
		return fail_errno(x, root, "opening the project");
	/* The frontmatter says draft again, written while the plan is still frozen. A file
	 * that cannot be read or has no frontmatter is reopened all the same. */
	utc_now(NULL, today);
	if (read_plan(root, p->path, &buf, &len, &total) == 0 &&
	    pw_plan_set_fields(buf, len, "draft", NULL, today, &text) == 0) {
		r = replace_file(root, p->path, text);
		if (r < 0)
			return fail_errno(x, r, "writing the frontmatter");
	}
	st = pw_view_lock_state(x->view);
	r = st ? pw_state_plan_reopen(st, pw_view_project(x->view), p->path) : -ENOSYS;
	pw_view_unlock_state(x->view);
	if (r < 0)
		return fail_errno(x, r, "recording the reopening");
	r = pw_view_reload(x->view, x->peer, NULL, &why);
	if (r < 0)
		return pw_ctl_fail_set(x->fail, PW_RPC_INTERNAL_ERROR, "reload failed: %s",
				       why ? why : strerror(-r));
	plan_set_done(&s);
	if (load_or_fail(x, &s) < 0 || named_plan(x, &s, &p) < 0)
		return -1;
	return reply(x, detail_json(p), ret);
}

/* ---- the table ------------------------------------------------------------------------ */

static const pw_rpc_param name_params[] = {
	{ "name", PW_RPC_T_STRING, false, PW_PATH_MAX },
};

static const pw_rpc_param name_required[] = {
	{ "name", PW_RPC_T_STRING, true, PW_PATH_MAX },
};

static const pw_rpc_param done_params[] = {
	{ "task", PW_RPC_T_INT, true, 0 },
	{ "name", PW_RPC_T_STRING, false, PW_PATH_MAX },
	{ "note", PW_RPC_T_STRING, false, 1000 },
};

static const pw_ctl_method methods[] = {
	{ "plan.list", m_list, NULL, 0, NULL },
	{ "plan.show", m_show, name_params, ELEMENTSOF(name_params), NULL },
	{ "plan.status", m_status, NULL, 0, NULL },
	{ "plan.done", m_done, done_params, ELEMENTSOF(done_params), NULL },
	{ "plan.approve", m_approve, name_required, ELEMENTSOF(name_required),
	  "refused: only the person approves a plan, from outside the agent (piworkfs plan "
	  "approve NAME)" },
	{ "plan.reopen", m_reopen, name_required, ELEMENTSOF(name_required),
	  "refused: only the person reopens an approved plan, from outside the agent "
	  "(piworkfs plan reopen NAME)" },
};

const pw_ctl_module pw_ctl_plan_module = {
	.name = "plan",
	.methods = methods,
	.n_methods = ELEMENTSOF(methods),
	.init = plan_init,
	.mode_changed = plan_mode_changed,
};
