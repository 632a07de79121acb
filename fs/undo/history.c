/* SPDX-License-Identifier: MIT */
/*
 * The history model (history.h): a project's change sets and rows read back from the store
 * of originals, the scope a call selects (--since, --change-set, --mode, paths, the default
 * of each method), where each recorded object is now, what a change set left at a path and
 * what a change amounts to; and the calls that only read or extend the record:
 * changes.list, checkpoint and changes.prune (docs/PROTOCOL.md has the shapes).
 *
 * The store's lock is held while the rows are read, so the FUSE layer's keeps wait for it
 * (and no call sees a half-kept row).
 */
#include "history.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "binpatch.h"
#include "gitdiff.h"
#include "inode.h"
#include "keep.h"
#include "object.h"
#include "overlap.h"
#include "pending.h"
#include "path.h"
#include "proto.h"
#include "quote.h"
#include "pw_limits.h"
#include "util.h"

/* The -errno a failure of CODE returns, beside the code and message the caller is sent
 * (the caller is answered with those: any negative return of a call is a failure in its fail): any
 * negative return of a handler is a failure in its fail). */
static int code_errno(int code)
{
	switch (code) {
	case PW_RPC_INVALID_PARAMS:
	case PW_RPC_INVALID_PATH:
		return -EINVAL;
	case PW_RPC_REFUSED:
		return -EPERM;
	case PW_RPC_UNAVAILABLE:
		return -EOPNOTSUPP;
	case PW_RPC_BUSY:
		return -EBUSY;
	case PW_RPC_NO_CHANGE:
		return -ENOENT;
	default:
		return -EIO;
	}
}

/* Fills the call's failure with CODE and a message. Returns its -errno (code_errno). */
_printf_(3, 4) int pw_undo_hist_failf(ctx *x, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	free(x->fail->message);
	x->fail->code = code;
	if (vasprintf(&x->fail->message, fmt, ap) < 0)
		x->fail->message = NULL;
	va_end(ap);
	return code_errno(code);
}

void pw_undo_hist_ctx_done(ctx *x)
{
	for (size_t i = 0; i < x->n_rows; i++) {
		crow *r = &x->rows[i];
		free(r->path);
		free(r->path2);
		free(r->op);
		free(r->comm);
		free(r->mode_name);
		free(r->not_kept);
		free(r->thread);
		pw_undo_orig_object_done(&r->o);
	}
	free(x->rows);
	for (size_t i = 0; i < x->n_sets; i++) {
		free(x->sets[i].reason);
		free(x->sets[i].name);
		free(x->sets[i].mode);
		free(x->sets[i].undoes);
		free(x->sets[i].mountpoint);
		free(x->sets[i].run);
	}
	free(x->sets);
	for (size_t i = 0; i < x->n_paths; i++)
		free(x->paths[i]);
	free(x->paths);
	if (x->root >= 0)
		close(x->root);
}

/* Is PATH hidden from the agent asking (as a file or as a directory: either way, since the
 * object may be gone)? Never for the operator. */
bool pw_undo_hist_agent_hidden(const ctx *x, const char *path)
{
	return x->hide && path &&
	       (pw_policy_is_hidden(x->hide, path, false) ||
		pw_policy_is_hidden(x->hide, path, true));
}

/* The keep handle, or a failure: this view keeps no originals. */
int pw_undo_hist_setup(ctx *x, const pw_undo_call *call, pw_undo_fail *fail, const char *refused)
{
	*x = (ctx){.call = call, .fail = fail, .root = -1, .hide = call->hide};
	if (refused && call->restricted)
		return pw_undo_hist_failf(x, PW_RPC_REFUSED, "%s", refused);
	x->fs = call->fs;
	x->k = pw_fs_undo(x->fs);
	if (!x->k)
		return pw_undo_hist_failf(
		    x, PW_RPC_UNAVAILABLE,
		    "this view keeps no originals (mounted with --no-originals, or "
		    "without a state database)");
	x->root = open(call->project, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (x->root < 0)
		return pw_undo_hist_failf(x, PW_RPC_INTERNAL_ERROR, "cannot open the project: %s",
					  strerror(errno));
	return 0;
}

/* Maps the params' paths (relative to the project, or absolute under the mountpoint or
 * the project) to normalized project paths. */
static int load_paths(ctx *x, json_t *params)
{
	json_t *a = json_object_get(params, "paths"), *item;
	size_t i;
	if (!a)
		return 0;
	x->paths = calloc(json_array_size(a) + 1, sizeof(char *));
	if (!x->paths)
		return pw_undo_hist_failf(x, PW_RPC_INTERNAL_ERROR, "out of memory");
	json_array_foreach(a, i, item)
	{
		const char *in = json_string_value(item), *err = NULL, *rel = in;
		const char *roots[] = {x->call->mountpoint, x->call->project};
		char out[PW_PATH_MAX];
		if (in[0] == '/') {
			rel = NULL;
			for (size_t j = 0; j < ELEMENTSOF(roots) && !rel; j++) {
				long off = pw_path_beneath(in, roots[j]);
				if (off < 0)
					continue;
				rel = in + off; /* normalized with its leading '/', as given */
				if (rel > in && rel[-1] == '/')
					rel--;
			}
			if (!rel)
				return pw_undo_hist_failf(x, PW_RPC_INVALID_PATH,
							  "params.paths[%zu]: outside the project",
							  i);
		}
		int r = pw_path_normalize(rel, strlen(rel), out, &err);
		if (r < 0)
			return pw_undo_hist_failf(x, PW_RPC_INVALID_PATH, "params.paths[%zu]: %s",
						  i, err ? err : strerror(-r));
		x->paths[x->n_paths] = strdup(out);
		if (!x->paths[x->n_paths++])
			return pw_undo_hist_failf(x, PW_RPC_INTERNAL_ERROR, "out of memory");
	}
	return 0;
}

bool pw_undo_hist_path_under(const char *path, const char *top)
{
	return pw_relpath_beneath(path, top);
}

static bool path_selected(ctx *x, const crow *r)
{
	if (!x->n_paths || r->now_selected)
		return true;
	for (size_t i = 0; i < x->n_paths; i++)
		if (pw_undo_hist_path_under(r->path, x->paths[i]) ||
		    pw_undo_hist_path_under(r->path2, x->paths[i]))
			return true;
	return false;
}

typedef struct load_state {
	ctx *x;
	size_t cap_sets, cap_rows;
	const char *since;
	int64_t min_cs;
} load_state;

static int load_set(const pw_undo_orig_changeset *c, void *u)
{
	load_state *ls = u;
	ctx *x = ls->x;
	if (PW_GROW(x->sets, ls->cap_sets, x->n_sets, 16) < 0)
		return -ENOMEM;
	x->sets[x->n_sets++] =
	    (cset){.id = c->id,
		   .started_ns = c->started_ns,
		   .reason = pw_dup_or_null(c->reason),
		   .name = pw_dup_or_null(c->name),
		   .mode = pw_dup_or_null(c->mode),
		   .undoes = pw_dup_or_null(c->undoes),
		   .redone_by = c->redone_by,
		   .mountpoint = pw_dup_or_null(c->mountpoint),
		   .run = x->call->run_of ? x->call->run_of(c->mountpoint) : NULL};
	if (ls->since && c->name && streq(c->name, ls->since))
		ls->min_cs = c->id;
	return 0;
}

static int load_row(const pw_undo_orig_rec *rec, void *u)
{
	load_state *ls = u;
	ctx *x = ls->x;
	if (PW_GROW(x->rows, ls->cap_rows, x->n_rows, 64) < 0)
		return -ENOMEM;
	crow *r = &x->rows[x->n_rows++];
	*r = (crow){
	    .id = rec->id,
	    .cs = rec->changeset,
	    .pid = rec->pid,
	    .time_ns = rec->time_ns,
	    .move = rec->action == PW_UNDO_ORIG_MOVE,
	    .exchange = rec->exchange,
	    .implicit = rec->implicit,
	    .path = strdup(rec->path),
	    .path2 = pw_dup_or_null(rec->path2),
	    .op = pw_dup_or_null(rec->op),
	    .comm = pw_dup_or_null(rec->comm),
	    .mode_name = pw_dup_or_null(rec->mode_name),
	    .not_kept = pw_dup_or_null(rec->o.not_kept),
	    .thread = pw_dup_or_null(rec->thread),
	    .src_dev = rec->src_dev,
	    .src_ino = rec->src_ino,
	    .o = rec->o,
	};
	/* The object's buffers are the store's until the callback returns. */
	r->o.not_kept = NULL;
	r->o.target = pw_dup_or_null(rec->o.target);
	r->o.xattrs = NULL;
	r->o.xattrs_len = 0;
	if (rec->o.xattrs_len && (r->o.xattrs = malloc(rec->o.xattrs_len))) {
		memcpy(r->o.xattrs, rec->o.xattrs, rec->o.xattrs_len);
		r->o.xattrs_len = rec->o.xattrs_len;
	}
	return r->path ? 0 : -ENOMEM;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static const cset *set_by_id(const ctx *x, int64_t id)
{
	for (size_t lo = 0, hi = x->n_sets; lo < hi;) {
		size_t mid = lo + (hi - lo) / 2;
		if (x->sets[mid].id == id)
			return &x->sets[mid];
		if (x->sets[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

bool pw_undo_hist_undo_reason(const char *reason)
{
	return streq_ptr(reason, "undo") || streq_ptr(reason, "redo");
}

/* Marks the rows an undo put back (and no redo reversed since) covered, and the rows undo
 * and redo recorded as theirs. */
static int mark_undone(ctx *x)
{
	int64_t *ids = NULL;
	size_t n = 0, cap = 0;
	for (size_t i = 0; i < x->n_sets; i++) {
		const cset *c = &x->sets[i];
		if (!streq_ptr(c->reason, "undo") || c->redone_by || !c->undoes)
			continue;
		json_t *a = json_loads(c->undoes, 0, NULL), *item;
		size_t k;
		json_array_foreach(a, k, item)
		{
			if (PW_GROW(ids, cap, n, 64) < 0) {
				json_decref(a);
				free(ids);
				return -ENOMEM;
			}
			ids[n++] = json_integer_value(item);
		}
		json_decref(a);
	}
	if (n)
		qsort(ids, n, sizeof(*ids), cmp_i64);
	for (size_t i = 0; i < x->n_rows; i++) {
		crow *r = &x->rows[i];
		const cset *c = set_by_id(x, r->cs);
		r->from_undo = c && pw_undo_hist_undo_reason(c->reason);
		r->covered = n && bsearch(&r->id, ids, n, sizeof(*ids), cmp_i64);
	}
	free(ids);
	return 0;
}

/* May a default-scoped undo take row R? */
static bool undoable(const crow *r)
{
	return !r->covered && !r->from_undo;
}

/* A path asked for takes the rows of what is there now, whatever names it had: `diff
 * src/app.c` shows the edit made to it as src/main.c before the rename. */
static void mark_now_selected(ctx *x)
{
	for (size_t i = 0; x->n_paths && i < x->n_rows; i++) {
		crow *r = &x->rows[i];
		char cur[PW_PATH_MAX];
		pw_undo_hist_current_path(x, i, r->move ? r->path2 : r->path, cur);
		for (size_t p = 0; p < x->n_paths && !r->now_selected; p++)
			r->now_selected = pw_undo_hist_path_under(cur, x->paths[p]);
	}
}

/* The first change set since this view was mounted: its mount's, or (a view that began to
 * keep originals later, the mount's set pruned) the first begun since its daemon started. */
static int64_t mounted_at(const ctx *x)
{
	const char *mp = pw_undo_keep_mountpoint(x->k);
	for (size_t i = x->n_sets; i-- > 0;)
		if (streq_ptr(x->sets[i].reason, "mount") && streq_ptr(x->sets[i].mountpoint, mp))
			return x->sets[i].id;
	for (size_t i = 0; i < x->n_sets; i++)
		if (x->sets[i].started_ns >= x->call->started_ns)
			return x->sets[i].id;
	return 0;
}

/* Loads the project's change sets and rows (oldest first), and marks the rows the
 * params select: --since (a checkpoint's name, or since_ns), --mode, paths. Lock held. */
int pw_undo_hist_load(ctx *x, json_t *params, enum scope_default dflt)
{
	const char *since = json_string_value(json_object_get(params, "since"));
	json_t *since_ns_j = json_object_get(params, "since_ns");
	const char *mode = json_string_value(json_object_get(params, "mode"));
	int64_t since_ns = since_ns_j ? json_integer_value(since_ns_j) : 0;
	json_t *one_j = json_object_get(params, "change_set");
	/* the CLI's second call: the change set its dry run chose by default, taken the same way */
	bool pinned = json_is_true(json_object_get(params, "pinned"));
	int64_t one = one_j ? json_integer_value(one_j) : 0;

	int lr = load_paths(x, params);
	if (lr < 0)
		return lr;
	load_state ls = {.x = x, .since = since};
	int q = pw_undo_orig_read(pw_undo_keep_store(x->k), pw_undo_keep_project(x->k), load_set,
				  load_row, &ls);
	if (q < 0)
		return pw_undo_hist_failf(x, PW_RPC_INTERNAL_ERROR, "state database: %s",
					  strerror(-q));
	if (mark_undone(x) < 0)
		return pw_undo_hist_failf(x, PW_RPC_INTERNAL_ERROR, "out of memory");
	mark_now_selected(x);
	int64_t min_cs = ls.min_cs;
	if (since && !min_cs)
		return pw_undo_hist_failf(x, PW_RPC_INVALID_PARAMS, "no checkpoint named '%s'",
					  since);

	x->end_cs = INT64_MAX;
	if (one_j) {
		bool known = false;
		for (size_t i = 0; i < x->n_sets && !known; i++)
			known = x->sets[i].id == one;
		if (!known)
			return pw_undo_hist_failf(x, PW_RPC_INVALID_PARAMS, "no change set %lld",
						  (long long)one);
		min_cs = one;
		x->end_cs = one;
	}
	if (json_is_true(json_object_get(params, "every")))
		dflt = SCOPE_ALL;
	/* The default scope of diff and undo: the latest change set with a change (for
	 * undo, one not undone yet; that change set only). */
	bool by_default = !one_j && !since && !since_ns_j;
	if (by_default && dflt == SCOPE_MOUNT) {
		min_cs = mounted_at(x);
	} else if (by_default && dflt != SCOPE_ALL) {
		for (size_t i = x->n_rows; i-- > 0;)
			if (!x->rows[i].implicit && path_selected(x, &x->rows[i]) &&
			    (dflt != SCOPE_UNDO || undoable(&x->rows[i]))) {
				min_cs = x->rows[i].cs;
				break;
			}
		if (!min_cs)
			min_cs = INT64_MAX;
		if (dflt == SCOPE_UNDO)
			x->end_cs = min_cs;
	}
	x->min_cs = min_cs;
	for (size_t i = 0; i < x->n_rows; i++) {
		crow *r = &x->rows[i];
		r->selected = r->cs >= min_cs && r->cs <= x->end_cs && r->time_ns >= since_ns &&
			      (!mode || streq_ptr(r->mode_name, mode)) && path_selected(x, r) &&
			      !pw_undo_hist_agent_hidden(x, r->path) &&
			      !pw_undo_hist_agent_hidden(x, r->path2);
		/* An undo chosen by --since or by default never puts back again what an undo
		 * put back, nor what an undo or redo did: that would redo (piworkfs redo
		 * does). --change-set N takes what it names. */
		if (dflt == SCOPE_UNDO && (!one_j || pinned) && !undoable(r))
			r->selected = false;
	}
	return 0;
}

/* diff and undo of PATHS: each must have a change in scope, or the request fails naming
 * the first that has none. */
int pw_undo_hist_check_paths_changed(ctx *x, bool undo)
{
	for (size_t p = 0; p < x->n_paths; p++) {
		bool any = false;
		for (size_t i = 0; i < x->n_rows && !any; i++) {
			const crow *r = &x->rows[i];
			any = r->selected && !r->implicit &&
			      (pw_undo_hist_path_under(r->path, x->paths[p]) ||
			       pw_undo_hist_path_under(r->path2, x->paths[p]));
		}
		if (any)
			continue;
		_cleanup_free_ char *q = pw_quote(x->paths[p][0] ? x->paths[p] : ".");
		return pw_undo_hist_failf(x, PW_RPC_NO_CHANGE,
					  undo ? "%s: no recorded change left to undo"
					       : "%s: no recorded change",
					  q ? q : "?");
	}
	return 0;
}

/* Where the object recorded at PATH by row I is now: PATH carried through the renames
 * recorded after it. OUT holds PW_PATH_MAX bytes. */
void pw_undo_hist_current_path(ctx *x, size_t i, const char *path, char *out)
{
	snprintf(out, PW_PATH_MAX, "%s", path);
	for (size_t j = i + 1; j < x->n_rows; j++) {
		const crow *m = &x->rows[j];
		if (!m->move || !m->path2)
			continue;
		char buf[PW_PATH_MAX];
		if (pw_undo_hist_path_under(out, m->path) && m->path[0]) {
			snprintf(buf, sizeof(buf), "%s%s", m->path2, out + strlen(m->path));
			snprintf(out, PW_PATH_MAX, "%s", buf);
		} else if (m->exchange && pw_undo_hist_path_under(out, m->path2) && m->path2[0]) {
			snprintf(buf, sizeof(buf), "%s%s", m->path, out + strlen(m->path2));
			snprintf(out, PW_PATH_MAX, "%s", buf);
		}
	}
}

/* Opens PATH beneath the project (never following a symlink); "" is the root. */
int pw_undo_hist_open_beneath(ctx *x, const char *path, int flags)
{
	if (!path[0])
		return openat(x->root, ".",
			      (flags & ~O_PATH) ? flags | O_CLOEXEC
						: O_PATH | O_DIRECTORY | O_CLOEXEC);
	return pw_openat_beneath(x->fs, path, flags, 0);
}

int pw_undo_hist_stat_beneath(ctx *x, const char *path, struct stat *st)
{
	_cleanup_close_ int fd = pw_undo_hist_open_beneath(x, path, O_PATH);
	if (fd < 0)
		return fd;
	return fstat(fd, st) < 0 ? negative_errno() : 0;
}

int pw_undo_hist_hash_file(int fd, char hex[PW_SHA256_HEX])
{
	_cleanup_free_ char *buf = malloc(1 << 20);
	if (!buf)
		return -ENOMEM;
	pw_sha256 c;
	pw_sha256_init(&c);
	for (;;) {
		ssize_t n = read(fd, buf, 1 << 20);
		if (n < 0)
			return negative_errno();
		if (n == 0)
			break;
		pw_sha256_update(&c, buf, (size_t)n);
	}
	uint8_t d[PW_SHA256_LEN];
	pw_sha256_final(&c, d);
	pw_sha256_hex(d, hex);
	return 0;
}

/* Carries P (a path, PW_PATH_MAX bytes) through the rename M, if it moves P. */
void pw_undo_hist_follow_move(const crow *m, char *p)
{
	char buf[PW_PATH_MAX];
	if (!m->move || !m->path2)
		return;
	if (m->path[0] && pw_undo_hist_path_under(p, m->path)) {
		snprintf(buf, sizeof(buf), "%s%s", m->path2, p + strlen(m->path));
		snprintf(p, PW_PATH_MAX, "%s", buf);
	} else if (m->exchange && m->path2[0] && pw_undo_hist_path_under(p, m->path2)) {
		snprintf(buf, sizeof(buf), "%s%s", m->path, p + strlen(m->path2));
		snprintf(p, PW_PATH_MAX, "%s", buf);
	}
}

static bool content_recorded(const pw_undo_orig_object *o)
{
	return !o->present || !S_ISREG(o->mode) || o->blob[0] || o->not_kept;
}

/* What the change sets up to END_CS left at PATH, recorded by row I: see above. */
void pw_undo_hist_after_of(ctx *x, size_t i, const char *path, int64_t end_cs, after *a)
{
	*a = (after){0};
	snprintf(a->path, sizeof(a->path), "%s", path);
	size_t j = i + 1;
	for (; j < x->n_rows && x->rows[j].cs <= end_cs; j++)
		pw_undo_hist_follow_move(&x->rows[j], a->path);
	char p[PW_PATH_MAX];
	snprintf(p, sizeof(p), "%s", a->path);
	for (; j < x->n_rows; j++) {
		const crow *m = &x->rows[j];
		const pw_undo_orig_object *o = NULL;
		if (!m->move && streq(m->path, p))
			o = &m->o;
		else if (m->move && m->o.present && streq_ptr(m->path2, p))
			o = &m->o; /* renamed over: the row holds what the name lost */
		if (o) {
			if (!a->meta)
				a->meta = o;
			if (content_recorded(o)) {
				a->content = o;
				break;
			}
			continue;
		}
		pw_undo_hist_follow_move(m, p);
	}
	snprintf(a->live, sizeof(a->live), "%s", p);
}

void pw_undo_hist_state_done(state *s)
{
	free(s->xattrs_owned);
	if (s->fd >= 0)
		close(s->fd);
}

void pw_undo_hist_state_of(ctx *x, const after *a, state *s)
{
	*s = (state){.fd = -1};
	if (!a->content || !a->meta)
		s->fd = pw_undo_hist_open_beneath(x, a->live, O_PATH);
	if (a->meta) {
		const pw_undo_orig_object *o = a->meta;
		s->exists = o->present;
		s->st.st_mode = o->mode;
		s->st.st_uid = o->uid;
		s->st.st_gid = o->gid;
		s->st.st_size = (off_t)o->size;
		s->st.st_mtim = (struct timespec){.tv_sec = o->mtime_ns / 1000000000,
						  .tv_nsec = o->mtime_ns % 1000000000};
		snprintf(s->target, sizeof(s->target), "%s", o->target ? o->target : "");
		s->xattrs = o->xattrs;
		s->xattrs_len = o->xattrs_len;
		if (a->content && a->content->blob[0])
			s->blob = a->content->blob;
		if (a->content && a->content->present && S_ISREG(a->content->mode))
			s->st.st_size = (off_t)a->content->size;
		return;
	}
	s->exists = s->fd >= 0 && fstat(s->fd, &s->st) == 0;
	if (!s->exists)
		return;
	if (S_ISLNK(s->st.st_mode)) {
		ssize_t n = readlinkat(s->fd, "", s->target, sizeof(s->target) - 1);
		s->target[n > 0 ? n : 0] = '\0';
	} else {
		size_t len = 0;
		if (pw_undo_orig_xattrs_read(s->fd, &s->xattrs_owned, &len) == 0) {
			s->xattrs = s->xattrs_owned;
			s->xattrs_len = len;
		}
	}
}

/* Does the content S describes differ from the original's blob HEX? */
static bool content_differs(const state *s, const char *hex)
{
	if (s->blob)
		return !streq(s->blob, hex);
	if (s->fd < 0)
		return false;
	char proc[64], cur[PW_SHA256_HEX];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", s->fd);
	_cleanup_close_ int rfd = open(proc, O_RDONLY | O_CLOEXEC);
	return rfd >= 0 && pw_undo_hist_hash_file(rfd, cur) == 0 && !streq(cur, hex);
}

/* What the change of row R amounts to, A being what its change set left: "created",
 * "deleted", "modified", "metadata", or NULL when nothing differs. */
const char *pw_undo_hist_classify(ctx *x, const crow *r, const after *a)
{
	_cleanup_(pw_undo_hist_state_done) state s;
	pw_undo_hist_state_of(x, a, &s);
	const struct stat *st = &s.st;
	const pw_undo_orig_object *o = &r->o;

	if (!o->present)
		return s.exists ? "created" : NULL;
	if (!s.exists)
		return "deleted";
	if ((st->st_mode & S_IFMT) != (o->mode & S_IFMT))
		return "modified";
	int64_t mtime = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	if (S_ISREG(st->st_mode)) {
		if ((uint64_t)st->st_size != o->size)
			return "modified";
		if (o->blob[0] ? content_differs(&s, o->blob) : mtime != o->mtime_ns)
			return "modified";
	} else if (S_ISLNK(st->st_mode) && !streq_ptr(s.target, o->target ? o->target : "")) {
		return "modified";
	}
	bool xattrs_differ = !S_ISLNK(st->st_mode) &&
			     (s.xattrs_len != o->xattrs_len ||
			      (o->xattrs_len && memcmp(s.xattrs, o->xattrs, o->xattrs_len)));
	bool meta = (st->st_mode & 07777) != (o->mode & 07777) || st->st_uid != o->uid ||
		    st->st_gid != o->gid || xattrs_differ;
	if (!S_ISDIR(st->st_mode) && mtime != o->mtime_ns)
		meta = true;
	return meta ? "metadata" : NULL;
}

/* A new file renamed over a kept original (an editor's or sed's save): the change reads
 * as the original's, at the destination. Row I is the new file's: the first rename of its
 * name in the change set lands on a name whose original was kept. */
bool pw_undo_hist_saved_over(ctx *x, size_t i, const char *cur)
{
	const crow *r = &x->rows[i];
	(void)cur;
	if (r->o.present || r->move)
		return false;
	for (size_t j = i + 1; j < x->n_rows && x->rows[j].cs == r->cs; j++) {
		const crow *m = &x->rows[j];
		if (m->move && streq(m->path, r->path))
			return m->o.present && !m->exchange;
	}
	return false;
}

/* A rename of a file made in the same change set (the temporary of a save). */
bool pw_undo_hist_temp_move(ctx *x, size_t i)
{
	const crow *m = &x->rows[i];
	for (size_t j = 0; j < i; j++) {
		const crow *r = &x->rows[j];
		if (!r->move && !r->o.present && r->cs == m->cs && streq(r->path, m->path))
			return true;
	}
	return false;
}

/* Is the name row I (a rename) moved away made again later in its change set? */
static bool remade_later(const ctx *x, size_t i)
{
	const crow *m = &x->rows[i];
	for (size_t j = i + 1; j < x->n_rows && x->rows[j].cs == m->cs; j++) {
		const crow *r = &x->rows[j];
		if (!r->move && !r->o.present && streq(r->path, m->path))
			return true;
	}
	return false;
}

/* Was the object at row I's path (a name made) renamed away earlier in its change set? */
static bool moved_away_before(const ctx *x, size_t i)
{
	const crow *r = &x->rows[i];
	bool away = false;
	for (size_t j = i; j-- > 0 && x->rows[j].cs == r->cs;) {
		const crow *m = &x->rows[j];
		if (m->move && !m->exchange && streq(m->path, r->path))
			away = true;
		else if (away && ((!m->move && !m->o.present && streq(m->path, r->path)) ||
				  (m->move && streq_ptr(m->path2, r->path))))
			return false; /* what went away came in the set: the name was free before */
	}
	return away;
}

/* Is row I (a free name kept before a rename onto it: undo's record) the target of a
 * rename later in its change set, whose object then stays? (Renamed away again, the name
 * holds something made anew: that is the row's own change.) */
static bool renamed_onto_later(const ctx *x, size_t i)
{
	const crow *r = &x->rows[i];
	bool onto = false;
	for (size_t j = i + 1; j < x->n_rows && x->rows[j].cs == r->cs; j++) {
		const crow *m = &x->rows[j];
		if (m->move && !m->exchange && !m->o.present && streq_ptr(m->path2, r->path))
			onto = true;
		else if (onto && m->move && streq(m->path, r->path))
			return false;
	}
	return onto;
}

static bool object_gone(ctx *x, const after *a)
{
	_cleanup_(pw_undo_hist_state_done) state now;
	pw_undo_hist_state_of(x, a, &now);
	return !now.exists;
}

/* Did row I's object reach its path by a rename earlier in its change set, and is it gone
 * at the set's end? Then the rename's line tells it (deleted at its old name). */
static bool moved_onto_then_gone(ctx *x, size_t i, const after *a)
{
	const crow *r = &x->rows[i];
	for (size_t j = i; j-- > 0 && x->rows[j].cs == r->cs;) {
		const crow *m = &x->rows[j];
		if (m->move && !m->exchange && streq_ptr(m->path2, r->path))
			return object_gone(x, a);
	}
	return false;
}

static json_t *row_json(const crow *r, const char *kind, const char *cur)
{
	json_t *o = json_pack("{s:s,s:s,s:s?,s:I,s:s?,s:I,s:s?}", "path", r->path, "kind", kind,
			      "op", r->op, "pid", (json_int_t)r->pid, "comm", r->comm, "time_ns",
			      (json_int_t)r->time_ns, "mode", r->mode_name);
	if (!o)
		return NULL;
	if (r->move) {
		json_object_set_new(o, "to", json_string(r->path2));
		if (r->exchange)
			json_object_set_new(o, "exchange", json_true());
	} else if (cur && !streq(cur, r->path)) {
		json_object_set_new(o, "now", json_string(cur));
	}
	if (r->not_kept)
		json_object_set_new(o, "not_kept", json_string(r->not_kept));
	if (r->thread) /* the thread that asked, when not the program (comm) itself */
		json_object_set_new(o, "thread", json_string(r->thread));
	return o;
}

int pw_undo_hist_done(ctx *x, json_t *o, json_t **ret)
{
	if (!o)
		return pw_undo_hist_failf(x, PW_RPC_INTERNAL_ERROR, "out of memory");
	*ret = o;
	return 0;
}

/* Appends change set C's changes to CHANGES, newest first, as the person meant them (net
 * effect per path; the rows stay exact). *SHOWN counts them up to PW_UNDO_LIST_MAX. */
void pw_undo_hist_set_listing(ctx *x, const cset *c, json_t *changes, size_t *shown,
			      bool *truncated, bool with_row)
{
	for (size_t i = x->n_rows; i-- > 0;) {
		const crow *rw = &x->rows[i];
		if (rw->cs != c->id || !rw->selected || rw->implicit)
			continue;
		if (*shown >= PW_UNDO_LIST_MAX) {
			*truncated = true;
			break;
		}
		after aft;
		const char *kind = "renamed";
		if (rw->move && rw->o.present) {
			/* what the destination held, replaced */
			pw_undo_hist_after_of(x, i, rw->path2, rw->cs, &aft);
			const char *k2 = pw_undo_hist_agent_hidden(x, aft.path)
					     ? NULL
					     : pw_undo_hist_classify(x, rw, &aft);
			if (k2) {
				json_t *e = row_json(rw, k2, aft.path);
				if (e) {
					json_object_set_new(e, "path", json_string(rw->path2));
					json_object_del(e, "to");
					if (!streq(aft.path, rw->path2))
						json_object_set_new(e, "now",
								    json_string(aft.path));
					if (with_row)
						json_object_set_new(e, "row",
								    json_integer((json_int_t)i));
				}
				json_array_append_new(changes, e);
				(*shown)++;
			}
		}
		if (rw->move && pw_undo_hist_temp_move(x, i))
			continue;
		bool moved_gone = false;
		if (rw->move && !rw->exchange && !rw->o.present) {
			/* renamed, then removed within the set: the rename is no net change;
			 * the name it left is deleted, or replaced when made again */
			pw_undo_hist_after_of(x, i, rw->path2, rw->cs, &aft);
			_cleanup_(pw_undo_hist_state_done) state now;
			pw_undo_hist_state_of(x, &aft, &now);
			if (!now.exists) {
				if (remade_later(x, i))
					continue;
				moved_gone = true;
				kind = "deleted";
			}
		}
		if (!rw->move) {
			pw_undo_hist_after_of(x, i, rw->path, rw->cs, &aft);
			if (pw_undo_hist_saved_over(x, i, aft.path) ||
			    pw_undo_hist_agent_hidden(x, aft.path))
				continue;
			if (rw->o.present ? moved_onto_then_gone(x, i, &aft)
					  : renamed_onto_later(x, i))
				continue; /* told by the rename's own line */
			kind = pw_undo_hist_classify(x, rw, &aft);
			if (!kind)
				continue;
			if (streq(kind, "created") && moved_away_before(x, i))
				kind = "modified"; /* its object renamed away, a new one made */
		}
		json_t *e = row_json(rw, kind, rw->move ? NULL : aft.path);
		if (e && moved_gone)
			json_object_del(e, "to");
		if (e && with_row)
			json_object_set_new(e, "row", json_integer((json_int_t)i));
		json_array_append_new(changes, e);
		(*shown)++;
	}
}

int pw_undo_hist_read(ctx *x, const pw_undo_call *call, pw_undo_fail *fail, json_t *params,
		      uint64_t *ret_bytes, uint64_t *ret_blobs)
{
	int r = pw_undo_hist_setup(x, call, fail, NULL);
	if (r < 0)
		return r;
	pw_undo_orig_store *s = pw_undo_keep_store(x->k);
	pw_undo_orig_lock(s);
	r = pw_undo_hist_load(x, params, SCOPE_MOUNT);
	if (ret_bytes)
		(void)pw_undo_orig_total(s, ret_bytes, ret_blobs);
	pw_undo_orig_unlock(s);
	return r;
}

/* When the I-th change set ended: the next one of its view began (INT64_MAX: none yet). */
static int64_t set_end_ns(const ctx *x, size_t i)
{
	for (size_t j = i + 1; j < x->n_sets; j++)
		if (streq_ptr(x->sets[j].mountpoint, x->sets[i].mountpoint))
			return x->sets[j].started_ns;
	return INT64_MAX;
}

int pw_undo_changes_list(const pw_undo_call *call, json_t *params, json_t **ret, pw_undo_fail *fail)
{
	_cleanup_(pw_undo_hist_ctx_done) ctx x = {.root = -1};
	uint64_t bytes = 0, blobs = 0;
	int r = pw_undo_hist_read(&x, call, fail, params, &bytes, &blobs);
	if (r < 0)
		return r;
	pw_undo_orig_store *s = pw_undo_keep_store(x.k);
	json_t *sets = json_array();
	size_t shown = 0;
	bool truncated = false;
	for (size_t si = x.n_sets; sets && si-- > 0;) {
		const cset *c = &x.sets[si];
		if (c->id > x.end_cs || c->id < x.min_cs)
			continue; /* out of scope (--change-set N: that one only) */
		json_t *changes = json_array();
		if (changes)
			pw_undo_hist_set_listing(&x, c, changes, &shown, &truncated, false);
		if (!changes)
			break;
		/* what other views changed too: recorded, and live ones for the current set */
		pw_overlap_mark_recorded(pw_undo_overlap(x.k), changes, c->mountpoint,
					 c->started_ns, set_end_ns(&x, si));
		if (c->id == pw_undo_keep_current(x.k))
			pw_overlap_mark(pw_undo_overlap(x.k), changes);
		if (!json_array_size(changes) && !c->name && c->id != pw_undo_keep_current(x.k)) {
			json_decref(changes);
			continue;
		}
		json_array_append_new(
		    sets,
		    json_pack("{s:I,s:I,s:s?,s:s?,s:s?,s:s?,s:s?,s:b,s:o}", "id", (json_int_t)c->id,
			      "started_ns", (json_int_t)c->started_ns, "reason", c->reason, "name",
			      c->name, "mode", c->mode, "mountpoint", c->mountpoint, "run", c->run,
			      "current", c->id == pw_undo_keep_current(x.k), "changes", changes));
	}
	/* The store's totals move with de-duplication (content already kept adds no blob and
	 * no bytes), so they would confirm an agent's guess of hidden content: the person's
	 * side only. */
	json_t *store = call->restricted
			    ? json_pack("{s:s}", "dir", pw_undo_orig_dir(s))
			    : json_pack("{s:s,s:I,s:I}", "dir", pw_undo_orig_dir(s), "bytes",
					(json_int_t)bytes, "blobs", (json_int_t)blobs);
	json_t *o = json_pack("{s:o,s:I,s:s,s:b,s:o}", "changesets", sets ? sets : json_array(),
			      "current", (json_int_t)pw_undo_keep_current(x.k), "mountpoint",
			      pw_undo_keep_mountpoint(x.k), "truncated", truncated, "store",
			      store ? store : json_object());
	return pw_undo_hist_done(&x, o, ret);
}

/* ---- checkpoint, prune ----------------------------------------------------------------- */

int pw_undo_changes_checkpoint(const pw_undo_call *call, json_t *params, json_t **ret,
			       pw_undo_fail *fail)
{
	_cleanup_(pw_undo_hist_ctx_done) ctx x = {.root = -1};
	int sr = pw_undo_hist_setup(&x, call, fail, PW_UNDO_REFUSED_CHECKPOINT);
	if (sr < 0)
		return sr;
	const char *name = json_string_value(json_object_get(params, "name"));
	int64_t id;
	int r = pw_undo_keep_begin(x.k, "checkpoint", name, &id);
	if (r < 0)
		return pw_undo_hist_failf(&x, PW_RPC_INTERNAL_ERROR, "checkpoint: %s",
					  strerror(-r));
	return pw_undo_hist_done(
	    &x, json_pack("{s:I,s:s?}", "changeset", (json_int_t)id, "name", name), ret);
}

int pw_undo_changes_prune(const pw_undo_call *call, json_t *params, json_t **ret,
			  pw_undo_fail *fail)
{
	_cleanup_(pw_undo_hist_ctx_done) ctx x = {.root = -1};
	int sr = pw_undo_hist_setup(&x, call, fail, PW_UNDO_REFUSED_PRUNE);
	if (sr < 0)
		return sr;
	json_t *age = json_object_get(params, "keep_s"),
	       *size = json_object_get(params, "max_bytes");
	pw_undo_orig_store *s = pw_undo_keep_store(x.k);
	uint64_t freed = 0, bytes = 0, blobs = 0;
	pw_undo_orig_lock(s);
	/* 0 means "nothing kept" here; the store reads 0 as its default, so ask for 1. */
	int64_t keep_ns = age ? (int64_t)json_integer_value(age) * 1000000000 : 0;
	uint64_t max = size ? (uint64_t)json_integer_value(size) : 0;
	if (age && keep_ns <= 0)
		keep_ns = 1;
	if (size && !max)
		max = 1;
	int r = pw_undo_orig_prune(s, keep_ns, max, pw_undo_keep_current(x.k), &freed);
	(void)pw_undo_orig_total(s, &bytes, &blobs);
	pw_undo_orig_unlock(s);
	if (r < 0)
		return pw_undo_hist_failf(&x, PW_RPC_INTERNAL_ERROR, "prune: %s", strerror(-r));
	return pw_undo_hist_done(&x,
				 json_pack("{s:i,s:I,s:I,s:I}", "removed", r, "freed",
					   (json_int_t)freed, "bytes", (json_int_t)bytes, "blobs",
					   (json_int_t)blobs),
				 ret);
}
