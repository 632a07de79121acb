/* SPDX-License-Identifier: MIT */
/*
 * changes.list, changes.diff, changes.undo, changes.prune and checkpoint: what the view
 * changed, and putting it back (changes.h; docs/PROTOCOL.md has the shapes).
 *
 * Undo replays the rows of the chosen change sets backwards (keep.h says why that is
 * enough): a kept path gets its original back (content in place, so hard links stay
 * linked; then owner, mode, xattrs and times), a path that was new is removed, a rename is
 * reversed. Directories get their times last, once every name inside them is back. Before
 * anything is touched, every path is checked for changes made outside the view since the
 * view last changed it; one such path refuses the whole undo unless forced. The undo runs
 * in a change set of its own, recorded like any other, so it can be undone in turn.
 *
 * These run on the control thread; the store's lock is held while rows are read and while
 * an undo runs, so the FUSE layer's keeps wait for it (and an undo sees no half-kept row).
 */
#include "changes.h"
#include "ctl/run_id.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
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

extern char **environ;

typedef struct crow {
	int64_t id, cs, pid, time_ns;
	bool move, exchange, implicit;
	char *path, *path2, *op, *comm, *mode_name, *not_kept, *thread;
	uint64_t src_dev, src_ino;
	pw_undo_orig_object o;
	bool selected;
	bool covered;	   /* put back by an undo that no redo reversed */
	bool now_selected; /* where its object is now lies under a path asked for */
	bool from_undo;	   /* recorded by an undo or a redo */
} crow;

typedef struct cset {
	int64_t id, started_ns, redone_by;
	char *reason, *name, *mode, *undoes;
	char *mountpoint; /* the view's that started it */
	char *run;	  /* the run whose own view started it (run_id.h), or NULL */
} cset;

typedef struct ctx {
	pw_view *v;
	pw_undo *k;
	pw_fs *fs;
	pw_ctl_fail *fail;
	int root;
	crow *rows;
	size_t n_rows;
	cset *sets;
	size_t n_sets;
	char **paths;
	size_t n_paths;
	pw_policy
	    *hide; /* an agent's request: the active policy, whose hidden paths it never sees */
	int64_t min_cs; /* the first change set in scope */
	int64_t end_cs; /* the last change set in scope (INT64_MAX: up to the tree as it is) */
} ctx;

/* The -errno a failure of CODE returns, beside the code and message the caller is sent
 * (the server sends those: any negative return of a handler is a failure in its fail). */
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
static _printf_(3, 4) int failf(ctx *x, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	(void)pw_ctl_fail_setv(x->fail, code, fmt, ap);
	va_end(ap);
	return code_errno(code);
}

static void ctx_done(ctx *x)
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
	pw_policy_unref(x->hide);
}

/* Is PATH hidden from the agent asking (as a file or as a directory: either way, since the
 * object may be gone)? Never for the operator. */
static bool agent_hidden(const ctx *x, const char *path)
{
	return x->hide && path &&
	       (pw_policy_is_hidden(x->hide, path, false) ||
		pw_policy_is_hidden(x->hide, path, true));
}

/* The keep handle, or a failure: this view keeps no originals. */
static int setup(ctx *x, pw_fs *fs, pw_view *v, pw_ctl_fail *fail)
{
	*x = (ctx){.v = v, .fail = fail, .root = -1};
	x->fs = fs;
	x->k = pw_fs_undo(x->fs);
	if (!x->k)
		return failf(x, PW_RPC_UNAVAILABLE,
			     "this view keeps no originals (mounted with --no-originals, or "
			     "without a state database)");
	x->root = open(pw_view_project(v), O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (x->root < 0)
		return failf(x, PW_RPC_INTERNAL_ERROR, "cannot open the project: %s",
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
		return failf(x, PW_RPC_INTERNAL_ERROR, "out of memory");
	json_array_foreach(a, i, item)
	{
		const char *in = json_string_value(item), *err = NULL, *rel = in;
		const char *roots[] = {pw_view_mountpoint(x->v), pw_view_project(x->v)};
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
				return failf(x, PW_RPC_INVALID_PATH,
					     "params.paths[%zu]: outside the project", i);
		}
		int r = pw_path_normalize(rel, strlen(rel), out, &err);
		if (r < 0)
			return failf(x, PW_RPC_INVALID_PATH, "params.paths[%zu]: %s", i,
				     err ? err : strerror(-r));
		x->paths[x->n_paths] = strdup(out);
		if (!x->paths[x->n_paths++])
			return failf(x, PW_RPC_INTERNAL_ERROR, "out of memory");
	}
	return 0;
}

static bool path_under(const char *path, const char *top)
{
	return pw_relpath_beneath(path, top);
}

static bool path_selected(ctx *x, const crow *r)
{
	if (!x->n_paths || r->now_selected)
		return true;
	for (size_t i = 0; i < x->n_paths; i++)
		if (path_under(r->path, x->paths[i]) || path_under(r->path2, x->paths[i]))
			return true;
	return false;
}

/* SCOPE_UNDO: the latest change set with a change not undone yet (an undo's or a redo's
 * own changes are never chosen by default): a repeated undo steps further back. */
/* SCOPE_MOUNT: since the view asked was last mounted, whichever views (runs) made the change
 * sets since (the default of changes and diff alike). */
enum scope_default { SCOPE_ALL, SCOPE_MOUNT, SCOPE_LATEST, SCOPE_UNDO };

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
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
	if (x->n_sets == ls->cap_sets) {
		size_t cap = ls->cap_sets ? ls->cap_sets * 2 : 16;
		cset *n = realloc(x->sets, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		x->sets = n;
		ls->cap_sets = cap;
	}
	x->sets[x->n_sets++] = (cset){.id = c->id,
				      .started_ns = c->started_ns,
				      .reason = dup_or_null(c->reason),
				      .name = dup_or_null(c->name),
				      .mode = dup_or_null(c->mode),
				      .undoes = dup_or_null(c->undoes),
				      .redone_by = c->redone_by,
				      .mountpoint = dup_or_null(c->mountpoint),
				      .run = pw_ctl_run_of_mountpoint(c->mountpoint)};
	if (ls->since && c->name && streq(c->name, ls->since))
		ls->min_cs = c->id;
	return 0;
}

static int load_row(const pw_undo_orig_rec *rec, void *u)
{
	load_state *ls = u;
	ctx *x = ls->x;
	if (x->n_rows == ls->cap_rows) {
		size_t cap = ls->cap_rows ? ls->cap_rows * 2 : 64;
		crow *n = realloc(x->rows, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		x->rows = n;
		ls->cap_rows = cap;
	}
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
	    .path2 = dup_or_null(rec->path2),
	    .op = dup_or_null(rec->op),
	    .comm = dup_or_null(rec->comm),
	    .mode_name = dup_or_null(rec->mode_name),
	    .not_kept = dup_or_null(rec->o.not_kept),
	    .thread = dup_or_null(rec->thread),
	    .src_dev = rec->src_dev,
	    .src_ino = rec->src_ino,
	    .o = rec->o,
	};
	/* The object's buffers are the store's until the callback returns. */
	r->o.not_kept = NULL;
	r->o.target = dup_or_null(rec->o.target);
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

static bool undo_reason(const char *reason)
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
		r->from_undo = c && undo_reason(c->reason);
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

static void current_path(ctx *x, size_t i, const char *path, char *out);

/* A path asked for takes the rows of what is there now, whatever names it had: `diff
 * src/app.c` shows the edit made to it as src/main.c before the rename. */
static void mark_now_selected(ctx *x)
{
	for (size_t i = 0; x->n_paths && i < x->n_rows; i++) {
		crow *r = &x->rows[i];
		char cur[PW_PATH_MAX];
		current_path(x, i, r->move ? r->path2 : r->path, cur);
		for (size_t p = 0; p < x->n_paths && !r->now_selected; p++)
			r->now_selected = path_under(cur, x->paths[p]);
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
		if (x->sets[i].started_ns >= pw_view_started_ns(x->v))
			return x->sets[i].id;
	return 0;
}

/* Loads the project's change sets and rows (oldest first), and marks the rows the
 * params select: --since (a checkpoint's name, or since_ns), --mode, paths. Lock held. */
static int load(ctx *x, json_t *params, enum scope_default dflt)
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
		return failf(x, PW_RPC_INTERNAL_ERROR, "state database: %s", strerror(-q));
	if (mark_undone(x) < 0)
		return failf(x, PW_RPC_INTERNAL_ERROR, "out of memory");
	mark_now_selected(x);
	int64_t min_cs = ls.min_cs;
	if (since && !min_cs)
		return failf(x, PW_RPC_INVALID_PARAMS, "no checkpoint named '%s'", since);

	x->end_cs = INT64_MAX;
	if (one_j) {
		bool known = false;
		for (size_t i = 0; i < x->n_sets && !known; i++)
			known = x->sets[i].id == one;
		if (!known)
			return failf(x, PW_RPC_INVALID_PARAMS, "no change set %lld",
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
			      !agent_hidden(x, r->path) && !agent_hidden(x, r->path2);
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
static int check_paths_changed(ctx *x, bool undo)
{
	for (size_t p = 0; p < x->n_paths; p++) {
		bool any = false;
		for (size_t i = 0; i < x->n_rows && !any; i++) {
			const crow *r = &x->rows[i];
			any =
			    r->selected && !r->implicit &&
			    (path_under(r->path, x->paths[p]) || path_under(r->path2, x->paths[p]));
		}
		if (any)
			continue;
		_cleanup_free_ char *q = pw_quote(x->paths[p][0] ? x->paths[p] : ".");
		return failf(x, PW_RPC_NO_CHANGE,
			     undo ? "%s: no recorded change left to undo"
				  : "%s: no recorded change",
			     q ? q : "?");
	}
	return 0;
}

/* Where the object recorded at PATH by row I is now: PATH carried through the renames
 * recorded after it. OUT holds PW_PATH_MAX bytes. */
static void current_path(ctx *x, size_t i, const char *path, char *out)
{
	snprintf(out, PW_PATH_MAX, "%s", path);
	for (size_t j = i + 1; j < x->n_rows; j++) {
		const crow *m = &x->rows[j];
		if (!m->move || !m->path2)
			continue;
		char buf[PW_PATH_MAX];
		if (path_under(out, m->path) && m->path[0]) {
			snprintf(buf, sizeof(buf), "%s%s", m->path2, out + strlen(m->path));
			snprintf(out, PW_PATH_MAX, "%s", buf);
		} else if (m->exchange && path_under(out, m->path2) && m->path2[0]) {
			snprintf(buf, sizeof(buf), "%s%s", m->path, out + strlen(m->path2));
			snprintf(out, PW_PATH_MAX, "%s", buf);
		}
	}
}

/* Opens PATH beneath the project (never following a symlink); "" is the root. */
static int open_beneath(ctx *x, const char *path, int flags)
{
	if (!path[0])
		return openat(x->root, ".",
			      (flags & ~O_PATH) ? flags | O_CLOEXEC
						: O_PATH | O_DIRECTORY | O_CLOEXEC);
	return pw_openat_beneath(x->fs, path, flags, 0);
}

static int stat_beneath(ctx *x, const char *path, struct stat *st)
{
	_cleanup_close_ int fd = open_beneath(x, path, O_PATH);
	if (fd < 0)
		return fd;
	return fstat(fd, st) < 0 ? negative_errno() : 0;
}

static int hash_file(int fd, char hex[PW_SHA256_HEX])
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

/*
 * ---- what a change set left ---------------------------------------------------------------
 *
 * A change set reads the same whatever came after it: what it left at a path is taken from
 * the record, never from the tree once a later change set has touched that path. Every
 * change through the view records the object before changing it, so the first row of a
 * later change set at that path (followed through the later renames) holds exactly what
 * the change set left there: its metadata, and its content when that row kept it. A row
 * kept for metadata only (a chmod) means that change set did not write the content: it is
 * taken from the next row that kept it, or from the tree. Only a path no later change set
 * touched (always so in the open change set) is read from the tree.
 */
typedef struct after {
	const pw_undo_orig_object *meta; /* the object as left, from a later row; NULL: the tree */
	const pw_undo_orig_object *content; /* its content's record (a blob); NULL: the tree */
	char path[PW_PATH_MAX];		    /* where the change set left it (the tree: where now) */
	char live[PW_PATH_MAX];		    /* where the tree holds what is read from it */
} after;

/* Carries P (a path, PW_PATH_MAX bytes) through the rename M, if it moves P. */
static void follow_move(const crow *m, char *p)
{
	char buf[PW_PATH_MAX];
	if (!m->move || !m->path2)
		return;
	if (m->path[0] && path_under(p, m->path)) {
		snprintf(buf, sizeof(buf), "%s%s", m->path2, p + strlen(m->path));
		snprintf(p, PW_PATH_MAX, "%s", buf);
	} else if (m->exchange && m->path2[0] && path_under(p, m->path2)) {
		snprintf(buf, sizeof(buf), "%s%s", m->path, p + strlen(m->path2));
		snprintf(p, PW_PATH_MAX, "%s", buf);
	}
}

static bool content_recorded(const pw_undo_orig_object *o)
{
	return !o->present || !S_ISREG(o->mode) || o->blob[0] || o->not_kept;
}

/* What the change sets up to END_CS left at PATH, recorded by row I: see above. */
static void after_of(ctx *x, size_t i, const char *path, int64_t end_cs, after *a)
{
	*a = (after){0};
	snprintf(a->path, sizeof(a->path), "%s", path);
	size_t j = i + 1;
	for (; j < x->n_rows && x->rows[j].cs <= end_cs; j++)
		follow_move(&x->rows[j], a->path);
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
		follow_move(m, p);
	}
	snprintf(a->live, sizeof(a->live), "%s", p);
}

/* The object A describes, its fields as pw_undo_orig_object's; the tree's read through FD. */
typedef struct state {
	bool exists;
	struct stat st;
	char target[PATH_MAX + 1];
	void *xattrs_owned;
	const void *xattrs;
	size_t xattrs_len;
	const char *blob; /* the content's hash when recorded, else NULL */
	int fd;		  /* O_PATH on the tree's object when anything is read from it, or -1 */
} state;

static void state_done(state *s)
{
	free(s->xattrs_owned);
	if (s->fd >= 0)
		close(s->fd);
}

static void state_of(ctx *x, const after *a, state *s)
{
	*s = (state){.fd = -1};
	if (!a->content || !a->meta)
		s->fd = open_beneath(x, a->live, O_PATH);
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
	return rfd >= 0 && hash_file(rfd, cur) == 0 && !streq(cur, hex);
}

/* What the change of row R amounts to, A being what its change set left: "created",
 * "deleted", "modified", "metadata", or NULL when nothing differs. */
static const char *classify(ctx *x, const crow *r, const after *a)
{
	_cleanup_(state_done) state s;
	state_of(x, a, &s);
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
static bool saved_over(ctx *x, size_t i, const char *cur)
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
static bool temp_move(ctx *x, size_t i)
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
	_cleanup_(state_done) state now;
	state_of(x, a, &now);
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

static int done(ctx *x, json_t *o, json_t **ret)
{
	if (!o)
		return failf(x, PW_RPC_INTERNAL_ERROR, "out of memory");
	*ret = o;
	return 0;
}

/* Appends change set C's changes to CHANGES, newest first, as the person meant them (net
 * effect per path; the rows stay exact). *SHOWN counts them up to PW_UNDO_LIST_MAX. */
static void set_listing(ctx *x, const cset *c, json_t *changes, size_t *shown, bool *truncated,
			bool with_row)
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
			after_of(x, i, rw->path2, rw->cs, &aft);
			const char *k2 = agent_hidden(x, aft.path) ? NULL : classify(x, rw, &aft);
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
		if (rw->move && temp_move(x, i))
			continue;
		bool moved_gone = false;
		if (rw->move && !rw->exchange && !rw->o.present) {
			/* renamed, then removed within the set: the rename is no net change;
			 * the name it left is deleted, or replaced when made again */
			after_of(x, i, rw->path2, rw->cs, &aft);
			_cleanup_(state_done) state now;
			state_of(x, &aft, &now);
			if (!now.exists) {
				if (remade_later(x, i))
					continue;
				moved_gone = true;
				kind = "deleted";
			}
		}
		if (!rw->move) {
			after_of(x, i, rw->path, rw->cs, &aft);
			if (saved_over(x, i, aft.path) || agent_hidden(x, aft.path))
				continue;
			if (rw->o.present ? moved_onto_then_gone(x, i, &aft)
					  : renamed_onto_later(x, i))
				continue; /* told by the rename's own line */
			kind = classify(x, rw, &aft);
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

/* When the I-th change set ended: the next one of its view began (INT64_MAX: none yet). */
static int64_t set_end_ns(const ctx *x, size_t i)
{
	for (size_t j = i + 1; j < x->n_sets; j++)
		if (streq_ptr(x->sets[j].mountpoint, x->sets[i].mountpoint))
			return x->sets[j].started_ns;
	return INT64_MAX;
}

static int changes_list(pw_fs *fs, pw_view *v, const pw_peer *peer, json_t *params, json_t **ret,
			pw_ctl_fail *fail)
{
	_cleanup_(ctx_done) ctx x = {.root = -1};
	int sr = setup(&x, fs, v, fail);
	if (sr < 0)
		return sr;
	if (peer->restricted)
		x.hide = pw_view_policy(v, NULL);
	pw_undo_orig_store *s = pw_undo_keep_store(x.k);
	pw_undo_orig_lock(s);
	int r = load(&x, params, SCOPE_MOUNT);
	uint64_t bytes = 0, blobs = 0;
	(void)pw_undo_orig_total(s, &bytes, &blobs);
	pw_undo_orig_unlock(s);
	if (r < 0)
		return r;
	json_t *sets = json_array();
	size_t shown = 0;
	bool truncated = false;
	for (size_t si = x.n_sets; sets && si-- > 0;) {
		const cset *c = &x.sets[si];
		if (c->id > x.end_cs || c->id < x.min_cs)
			continue; /* out of scope (--change-set N: that one only) */
		json_t *changes = json_array();
		if (changes)
			set_listing(&x, c, changes, &shown, &truncated, false);
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
	json_t *store = peer->restricted
			    ? json_pack("{s:s}", "dir", pw_undo_orig_dir(s))
			    : json_pack("{s:s,s:I,s:I}", "dir", pw_undo_orig_dir(s), "bytes",
					(json_int_t)bytes, "blobs", (json_int_t)blobs);
	json_t *o = json_pack("{s:o,s:I,s:s,s:b,s:o}", "changesets", sets ? sets : json_array(),
			      "current", (json_int_t)pw_undo_keep_current(x.k), "mountpoint",
			      pw_undo_keep_mountpoint(x.k), "truncated", truncated, "store",
			      store ? store : json_object());
	return done(&x, o, ret);
}

/* ---- diff ------------------------------------------------------------------------------ */

/* Runs `diff -u` on A and B (paths; "/dev/null" for none) labelled LA and LB, appending
 * its output to *OUT (up to LIMIT bytes). Returns diff's status (0 same, 1 differ). */
static int run_diff(const char *a, int bfd, const char *la, const char *lb, char **out, size_t *len,
		    size_t limit, bool *ret_truncated)
{
	/* The current file goes to diff as its descriptor 3 (opened beneath the project, so
	 * no symlink is followed on the way), the original by its path in the store. */
	const char *b = bfd >= 0 ? "/dev/fd/3" : "/dev/null";
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return negative_errno();
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (bfd >= 0)
		posix_spawn_file_actions_adddup2(&fa, bfd, 3);
	char *argv[] = {(char *)"diff", (char *)"-u",	   (char *)"--label",
			(char *)la,	(char *)"--label", (char *)lb,
			(char *)a,	(char *)b,	   NULL};
	pid_t pid;
	int r = posix_spawnp(&pid, "diff", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (r != 0) {
		close(pipefd[0]);
		return -r;
	}
	char buf[16384];
	for (;;) {
		ssize_t n = read(pipefd[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		size_t take = (size_t)n;
		if (*len + take > limit) {
			take = limit > *len ? limit - *len : 0;
			*ret_truncated = true;
		}
		if (take) {
			char *nb = realloc(*out, *len + take + 1);
			if (nb) {
				memcpy(nb + *len, buf, take);
				*len += take;
				nb[*len] = '\0';
				*out = nb;
			}
		}
	}
	close(pipefd[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -EIO;
}

static void count_lines(const char *d, json_int_t *add, json_int_t *del)
{
	for (const char *p = d; p && *p;) {
		const char *nl = strchr(p, '\n');
		if (p[0] == '+' && strncmp(p, "+++ ", 4))
			(*add)++;
		else if (p[0] == '-' && strncmp(p, "--- ", 4))
			(*del)++;
		p = nl ? nl + 1 : NULL;
	}
}

/* Opens the content A describes for reading (a blob, or the tree's file), with *RET_REG
 * telling whether it is a regular file's; -ENOENT when there is none to read, or -errno. */
static int open_after(ctx *x, pw_undo_orig_store *s, const after *a, bool *ret_reg)
{
	*ret_reg = false;
	if (a->meta && (!a->meta->present || !S_ISREG(a->meta->mode)))
		return -ENOENT;
	if (a->content) {
		if (!a->content->blob[0])
			return -ENOENT;
		_cleanup_free_ char *blob = pw_undo_orig_blob_path(s, a->content->blob);
		if (!blob)
			return -ENOMEM;
		int fd = open(blob, O_RDONLY | O_CLOEXEC);
		*ret_reg = fd >= 0;
		return fd >= 0 ? fd : -errno;
	}
	/* O_NONBLOCK: a FIFO put where a file was would hold the open until a writer came;
	 * only a regular file's content is read. */
	int fd = open_beneath(x, a->live, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
	struct stat st;
	*ret_reg = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	return fd;
}

/* The path the object at PATH (row I's) had where the scope began: PATH carried back
 * through the selected renames before row I. OUT holds PW_PATH_MAX bytes. */
static void origin_path(const ctx *x, size_t i, const char *path, char *out)
{
	snprintf(out, PW_PATH_MAX, "%s", path);
	for (size_t j = i; j-- > 0;) {
		const crow *m = &x->rows[j];
		if (!m->selected || !m->move || !m->path2 || m->exchange || !m->path2[0] ||
		    !path_under(out, m->path2))
			continue;
		char buf[PW_PATH_MAX];
		snprintf(buf, sizeof(buf), "%s%s", m->path, out + strlen(m->path2));
		snprintf(out, PW_PATH_MAX, "%s", buf);
	}
}

static size_t count_newlines(int fd)
{
	char buf[65536];
	size_t n = 0;
	for (off_t off = 0;;) {
		ssize_t k = pread(fd, buf, sizeof(buf), off);
		if (k <= 0)
			return n;
		for (ssize_t i = 0; i < k; i++)
			n += buf[i] == '\n';
		off += k;
	}
}

/* What one file of a diff is built from. */
typedef struct diff_file {
	const crow *rw;
	const char *origin; /* the path the original had */
	const after *aft;   /* what the scope left */
	const state *now;   /* its fields */
	int bfd, cfd;	    /* the original's content, what was left (-1: none) */
	const char *blob;   /* the original's blob path */
} diff_file;

typedef struct diff_out {
	char *text;
	size_t len, total, limit;
	bool truncated;
	bool binary; /* a binary patch (binpatch.h) */
	json_int_t added, removed;
} diff_out;

static void out_add(diff_out *d, const char *t)
{
	if (!t)
		return;
	size_t n = strlen(t);
	if (d->total + n > d->limit) {
		d->truncated = true;
		return;
	}
	char *b = realloc(d->text, d->len + n + 1);
	if (!b)
		return;
	memcpy(b + d->len, t, n + 1);
	d->text = b;
	d->len += n;
	d->total += n;
}

/* The hunk of a file created (ADD) or deleted, whose content is read from FD: every line
 * added or removed, as diff -u writes it, without a diff(1) process per file (a build's
 * thousand new files). An empty file has no hunk, as in git. */
static void one_sided_hunk(int fd, const char *la, const char *lb, bool add, diff_out *d)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_size == 0)
		return;
	size_t room = d->limit > d->total ? d->limit - d->total : 0;
	if ((uint64_t)st.st_size * 2 + 64 + strlen(la) + strlen(lb) > room) {
		d->truncated = true;
		return;
	}
	size_t size = (size_t)st.st_size;
	_cleanup_free_ char *buf = malloc(size + 1);
	if (!buf || pread(fd, buf, size, 0) != (ssize_t)size)
		return;
	size_t lines = 0;
	for (size_t i = 0; i < size; i++)
		lines += buf[i] == '\n';
	bool last_nl = buf[size - 1] == '\n';
	if (!last_nl)
		lines++;
	/* header, one sign per line, the content, a "no newline" note */
	size_t cap = strlen(la) + strlen(lb) + 64 + 2 * lines + size + 64;
	_cleanup_free_ char *out = malloc(cap);
	if (!out)
		return;
	char range[32];
	snprintf(range, sizeof(range), lines == 1 ? "1" : "1,%zu", lines);
	int n = snprintf(out, cap, "--- %s\n+++ %s\n@@ -%s +%s @@\n", la, lb, add ? "0,0" : range,
			 add ? range : "0,0");
	size_t w = n > 0 ? (size_t)n : 0;
	char sign = add ? '+' : '-';
	for (size_t i = 0; i < size;) {
		const char *nl = memchr(buf + i, '\n', size - i);
		size_t len = nl ? (size_t)(nl - (buf + i)) : size - i;
		out[w++] = sign;
		memcpy(out + w, buf + i, len);
		w += len;
		out[w++] = '\n';
		i += len + 1;
	}
	out[w] = '\0';
	if (!last_nl) {
		const char *note = "\\ No newline at end of file\n";
		memcpy(out + w, note, strlen(note) + 1);
	}
	if (add)
		d->added += (json_int_t)lines;
	else
		d->removed += (json_int_t)lines;
	out_add(d, out);
}

/* The content hunks from side A to side B (regular files or symbolic links). */
static void content_hunks(const diff_file *f, const pw_git_side *a, const pw_git_side *b,
			  diff_out *d)
{
	const pw_undo_orig_object *o = &f->rw->o;
	bool a_lnk = a->path && S_ISLNK(o->mode), b_lnk = b->path && S_ISLNK(f->now->st.st_mode);
	if (a_lnk || b_lnk) {
		const char *ta = a_lnk ? (o->target ? o->target : "") : NULL;
		const char *tb = b_lnk ? f->now->target : NULL;
		if (ta && tb && streq(ta, tb))
			return;
		_cleanup_free_ char *h = pw_git_symlink_hunk(a, ta, b, tb);
		count_lines(h, &d->added, &d->removed);
		out_add(d, h);
		return;
	}
	_cleanup_free_ char *la = pw_git_label("a/", a->path), *lb = pw_git_label("b/", b->path);
	if (!la || !lb)
		return;
	int bfd = a->path ? f->bfd : -1, cfd = b->path ? f->cfd : -1;
	if ((bfd >= 0 && pw_git_needs_binary(bfd)) || (cfd >= 0 && pw_git_needs_binary(cfd))) {
		bool too_big;
		_cleanup_free_ char *t = pw_git_binary_patch(
		    bfd, cfd, a->path && b->path && a->mode == b->mode ? a->mode : 0,
		    d->limit > d->total ? d->limit - d->total : 0, &too_big);
		d->binary = true;
		d->truncated = d->truncated || too_big;
		out_add(d, t);
		return;
	}
	if ((bfd < 0) != (cfd < 0)) { /* created or deleted: no diff(1) to run */
		one_sided_hunk(bfd >= 0 ? bfd : cfd, la, lb, cfd >= 0, d);
		return;
	}
	_cleanup_free_ char *out = NULL;
	size_t len = 0;
	bool trunc = false;
	run_diff(bfd >= 0 ? f->blob : "/dev/null", cfd, la, lb, &out, &len,
		 d->limit > d->total ? d->limit - d->total : 0, &trunc);
	d->truncated = d->truncated || trunc;
	count_lines(out, &d->added, &d->removed);
	out_add(d, out);
}

/* git's similarity of a renamed file, from the lines kept. */
static unsigned similarity(const diff_file *f, json_int_t removed, json_int_t added)
{
	size_t la = f->bfd >= 0 ? count_newlines(f->bfd) : 0;
	size_t lb = f->cfd >= 0 ? count_newlines(f->cfd) : 0;
	size_t most = la > lb ? la : lb;
	if (!removed && !added)
		return 100;
	size_t kept = la > (size_t)removed ? la - (size_t)removed : 0;
	return most ? (unsigned)(kept * 100 / most) : 100;
}

/* The git text of F: one patch, or two when the type changed (a delete and a create, as
 * git shows them). Nothing for what git cannot show (a directory, a FIFO). */
static void git_text(const diff_file *f, bool content, diff_out *d)
{
	const pw_undo_orig_object *o = &f->rw->o;
	pw_git_side a = {o->present ? f->origin : NULL, o->present ? pw_git_mode(o->mode) : 0};
	pw_git_side b = {f->now->exists ? f->aft->path : NULL,
			 f->now->exists ? pw_git_mode(f->now->st.st_mode) : 0};
	if ((a.path && (!a.mode || a.mode == 0040000)) ||
	    (b.path && (!b.mode || b.mode == 0040000)))
		return;
	if (a.path && b.path && (a.mode & 0170000) != (b.mode & 0170000)) {
		pw_git_side none = {NULL, 0};
		_cleanup_free_ char *h1 = pw_git_header(&a, &none, 0);
		out_add(d, h1);
		if (content)
			content_hunks(f, &a, &none, d);
		_cleanup_free_ char *h2 = pw_git_header(&none, &b, 0);
		out_add(d, h2);
		if (content)
			content_hunks(f, &none, &b, d);
		return;
	}
	/* The hunks first, for the counts a rename's similarity is made of. */
	diff_out hunks = {.limit = d->limit, .total = d->total};
	if (content)
		content_hunks(f, &a, &b, &hunks);
	bool renamed = a.path && b.path && !streq(a.path, b.path);
	_cleanup_free_ char *h =
	    pw_git_header(&a, &b, renamed ? similarity(f, hunks.removed, hunks.added) : 0);
	if (a.path && b.path && a.mode == b.mode && streq(a.path, b.path) && !hunks.text)
		h = (free(h), NULL); /* owner, times or xattrs only: git shows nothing */
	out_add(d, h);
	out_add(d, hunks.text);
	d->added += hunks.added;
	d->removed += hunks.removed;
	d->truncated = d->truncated || hunks.truncated;
	d->binary = d->binary || hunks.binary;
	free(hunks.text);
}

static int cmp_file_path(const void *a, const void *b)
{
	const char *pa = json_string_value(json_object_get(*(json_t *const *)a, "path"));
	const char *pb = json_string_value(json_object_get(*(json_t *const *)b, "path"));
	return strcmp(pa ? pa : "", pb ? pb : "");
}

/* FILES in git's order (by path). */
static json_t *sorted_files(json_t *files)
{
	size_t n = json_array_size(files);
	json_t **v = calloc(n + 1, sizeof(*v)), *out = json_array();
	if (!v || !out) {
		free(v);
		json_decref(out);
		return files;
	}
	for (size_t i = 0; i < n; i++)
		v[i] = json_array_get(files, i);
	qsort(v, n, sizeof(*v), cmp_file_path);
	for (size_t i = 0; i < n; i++)
		json_array_append(out, v[i]);
	free(v);
	json_decref(files);
	return out;
}

/* Is there an entry in FILES at PATH, or one whose original was at WAS? */
static bool files_have(json_t *files, const char *path, const char *was)
{
	size_t i;
	json_t *f;
	json_array_foreach(files, i, f)
	{
		const char *p = json_string_value(json_object_get(f, "path"));
		const char *w = json_string_value(json_object_get(f, "was"));
		if (streq_ptr(p, path) || streq_ptr(w ? w : p, was))
			return true;
	}
	return false;
}

/* One file's entry: F's kind, paths, counts and (unless STAT_ONLY) git text. */
static json_t *file_entry(ctx *x, const diff_file *f, const char *kind, bool stat_only, diff_out *d)
{
	json_t *e = json_pack("{s:s,s:s}", "path", f->aft->path, "kind", kind);
	if (!e)
		return NULL;
	if (!streq(f->aft->path, f->origin))
		json_object_set_new(e, "was", json_string(f->origin));
	const pw_undo_orig_object *o = &f->rw->o;
	bool orig_reg = o->present && S_ISREG(o->mode);
	if (orig_reg && !o->blob[0]) {
		json_object_set_new(e, "not_kept",
				    json_string(f->rw->not_kept ? f->rw->not_kept : "missing"));
		return e;
	}
	diff_out one = {.limit = d->limit, .total = d->total};
	git_text(f, true, &one);
	if (one.binary)
		json_object_set_new(e, "binary", json_true());
	/* false: git's format has nothing for it (a directory; owner, times or xattrs only) */
	json_object_set_new(e, "patch", json_boolean(one.text && one.text[0]));
	json_object_set_new(e, "added", json_integer(one.added));
	json_object_set_new(e, "removed", json_integer(one.removed));
	if (!stat_only && one.text) {
		d->total = one.total;
		json_object_set_new(e, "diff", json_string(one.text));
	}
	d->truncated = d->truncated || one.truncated;
	free(one.text);
	(void)x;
	return e;
}

static int changes_diff(pw_fs *fs, pw_view *v, const pw_peer *peer, json_t *params, json_t **ret,
			pw_ctl_fail *fail)
{
	_cleanup_(ctx_done) ctx x = {.root = -1};
	int sr = setup(&x, fs, v, fail);
	if (sr < 0)
		return sr;
	if (peer->restricted)
		x.hide = pw_view_policy(v, NULL);
	pw_undo_orig_store *s = pw_undo_keep_store(x.k);
	bool stat_only = json_is_true(json_object_get(params, "stat"));
	pw_undo_orig_lock(s);
	int r = load(&x, params, SCOPE_MOUNT);
	pw_undo_orig_unlock(s);
	/* The agent gets an empty diff instead: an error would read the same for a hidden
	 * path, but its tools expect none. */
	if (r == 0 && !x.hide)
		r = check_paths_changed(&x, false);
	if (r < 0)
		return r;
	/* Where each row's original was when the scope began. */
	char(*origins)[PW_PATH_MAX] = calloc(x.n_rows + 1, sizeof(*origins));
	if (!origins)
		return failf(&x, PW_RPC_INTERNAL_ERROR, "out of memory");
	for (size_t i = 0; i < x.n_rows; i++) {
		const crow *rw = &x.rows[i];
		if (!rw->selected)
			continue; /* only the scope's rows are read back */
		if (rw->move)
			origin_path(&x, i, rw->o.present ? rw->path2 : rw->path, origins[i]);
		else
			origin_path(&x, i, rw->path, origins[i]);
	}
	json_t *files = json_array();
	diff_out d = {.limit = PW_UNDO_DIFF_BYTES_MAX};
	/* The earliest row of each original in scope holds it. */
	for (size_t i = 0; files && i < x.n_rows; i++) {
		crow *rw = &x.rows[i];
		if (!rw->selected || rw->implicit || (rw->move && !rw->o.present))
			continue;
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++) {
			const crow *q = &x.rows[j];
			seen = q->selected && !q->implicit && (!q->move || q->o.present) &&
			       streq(origins[j], origins[i]);
		}
		if (seen)
			continue;
		const char *opath = rw->move ? rw->path2 : rw->path;
		after aft;
		after_of(&x, i, opath, x.end_cs, &aft);
		if (saved_over(&x, i, aft.path) || agent_hidden(&x, aft.path) ||
		    agent_hidden(&x, origins[i]))
			continue;
		const char *kind = classify(&x, rw, &aft);
		_cleanup_(state_done) state now;
		state_of(&x, &aft, &now);
		if (!kind && rw->o.present && now.exists && !streq(aft.path, origins[i]))
			kind = "renamed";
		if (!kind)
			continue;
		bool cur_reg = false;
		_cleanup_close_ int cfd = open_after(&x, s, &aft, &cur_reg);
		_cleanup_free_ char *blob = rw->o.present && S_ISREG(rw->o.mode) && rw->o.blob[0]
						? pw_undo_orig_blob_path(s, rw->o.blob)
						: NULL;
		_cleanup_close_ int bfd = blob ? open(blob, O_RDONLY | O_CLOEXEC) : -1;
		diff_file f = {.rw = rw,
			       .origin = origins[i],
			       .aft = &aft,
			       .now = &now,
			       .bfd = bfd,
			       .cfd = cur_reg ? cfd : -1,
			       .blob = blob};
		json_t *e = file_entry(&x, &f, kind, stat_only, &d);
		if (e)
			json_array_append_new(files, e);
	}
	/* Renames with no change of content: the move rows alone tell of them. */
	for (size_t i = 0; files && i < x.n_rows; i++) {
		crow *rw = &x.rows[i];
		if (!rw->selected || !rw->move || rw->exchange || temp_move(&x, i))
			continue;
		char origin[PW_PATH_MAX];
		origin_path(&x, i, rw->path, origin);
		after aft;
		after_of(&x, i, rw->path2, x.end_cs, &aft);
		if (files_have(files, aft.path, origin) || agent_hidden(&x, aft.path) ||
		    agent_hidden(&x, origin) || saved_over(&x, i, aft.path))
			continue;
		_cleanup_(state_done) state now;
		state_of(&x, &aft, &now);
		if (!now.exists)
			continue;
		json_t *e = json_pack("{s:s,s:s,s:s,s:i,s:i}", "path", aft.path, "kind", "renamed",
				      "was", origin, "added", 0, "removed", 0);
		unsigned gm = pw_git_mode(now.st.st_mode);
		if (e)
			json_object_set_new(e, "patch", json_boolean(gm && gm != 0040000));
		if (e && !stat_only && gm && gm != 0040000) {
			pw_git_side a = {origin, gm}, b = {aft.path, gm};
			_cleanup_free_ char *h = pw_git_header(&a, &b, 100);
			if (h)
				json_object_set_new(e, "diff", json_string(h));
		}
		if (e)
			json_array_append_new(files, e);
	}
	free(origins);
	files = files ? sorted_files(files) : NULL;
	return done(
	    &x,
	    json_pack("{s:o,s:b}", "files", files ? files : json_array(), "truncated", d.truncated),
	    ret);
}

/* ---- undo ------------------------------------------------------------------------------ */

/* Opens PATH's parent beneath the project; *ret_name points into PATH. */
static int open_parent(ctx *x, const char *path, const char **ret_name)
{
	const char *slash = strrchr(path, '/');
	char dir[PW_PATH_MAX];
	if (!slash) {
		*ret_name = path;
		return openat(x->root, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	}
	/* A parent longer than the buffer is refused: cut, it would name another directory. */
	if ((size_t)(slash - path) >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	*ret_name = slash + 1;
	return pw_openat_beneath(x->fs, dir, O_PATH | O_DIRECTORY, 0);
}

/* Does blob HASH still hold the content it is named after? A file kept by a link
 * (originals.c) can have been written since by a process that held it open: -EBADMSG, and
 * nothing is restored from it. */
static int verify_blob(pw_undo_orig_store *s, const char *hash)
{
	_cleanup_free_ char *path = pw_undo_orig_blob_path(s, hash);
	_cleanup_close_ int b = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (b < 0)
		return path ? negative_errno() : -ENOMEM;
	char hex[PW_SHA256_HEX];
	int r = hash_file(b, hex);
	if (r < 0)
		return r;
	return streq(hex, hash) ? 0 : -EBADMSG;
}

/* Copies blob HASH into FD (from offset 0; FD is empty). */
static int fill_from_blob(pw_undo_orig_store *s, const char *hash, int fd)
{
	_cleanup_free_ char *path = pw_undo_orig_blob_path(s, hash);
	_cleanup_close_ int b = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (b < 0)
		return path ? negative_errno() : -ENOMEM;
	if (ioctl(fd, FICLONE, b) == 0)
		return 0;
	char buf[65536];
	for (;;) {
		ssize_t n = read(b, buf, sizeof(buf));
		if (n < 0)
			return negative_errno();
		if (n == 0)
			return 0;
		for (ssize_t w = 0; w < n;) {
			ssize_t k = write(fd, buf + w, (size_t)(n - w));
			if (k < 0)
				return negative_errno();
			w += k;
		}
	}
}

static struct timespec ts_of(int64_t ns)
{
	return (struct timespec){.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
}

/* Owner, mode, xattrs (and times, unless a directory: those come last) of O on FD. */
static int apply_meta(int fd, const pw_undo_orig_object *o, bool times)
{
	int r = 0;
	if (fchownat(fd, "", o->uid, o->gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 &&
	    errno != EPERM)
		r = negative_errno();
	if (!S_ISLNK(o->mode)) {
		char proc[64];
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		if (chmod(proc, o->mode & 07777) < 0 && !r)
			r = negative_errno();
		pw_undo_orig_xattrs_apply(fd, o->xattrs, o->xattrs_len);
	}
	if (times) {
		struct timespec tv[2] = {ts_of(o->atime_ns), ts_of(o->mtime_ns)};
		if (utimensat(fd, "", tv, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 && !r)
			r = negative_errno();
	}
	return r;
}

typedef struct undo_run {
	ctx *x;
	bool force, dry;
	json_t *actions, *failed;
	pw_undo_pendings dirs;	/* directories whose times are set last */
	pw_undo_pendings links; /* files restored from a blob whose inode had other names */
} undo_run;

static void note_fail(undo_run *u, const char *path, const char *what, int r)
{
	json_array_append_new(
	    u->failed, json_pack("{s:s,s:s,s:s}", "path", path, "action", what, "error",
				 r == -EBADMSG	 ? "the kept original was changed after it was "
						   "kept (a process still wrote to it)"
				 : r == -ENODATA ? "its content was not kept (too big, unreadable, "
						   "or the store was full): not restored"
						 : strerror(-r)));
}

static int undo_remove(undo_run *u, const char *path);

/* The names in directory PATH (a NULL-ended malloc'd array of malloc'd strings), or NULL. */
static char **list_dir(ctx *x, const char *path)
{
	int fd = open_beneath(x, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	for (struct dirent *de; (de = readdir(d));) {
		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		if (PW_GROW(names, cap, n + 1, 16) < 0 || !(names[n] = strdup(de->d_name)))
			break;
		names[++n] = NULL;
	}
	closedir(d);
	return names;
}

/* rm -rf of the directory PATH (--force: something the view did not make is in it), each
 * name recorded before it goes, as the view records an rm -r, so a redo puts it back. */
static int remove_tree(undo_run *u, const char *path)
{
	ctx *x = u->x;
	char **names = list_dir(x, path);
	int r = 0;
	for (size_t i = 0; names && names[i]; i++) {
		_cleanup_free_ char *child = NULL;
		if (asprintf(&child, "%s/%s", path, names[i]) < 0) {
			r = -ENOMEM;
			break;
		}
		int q = pw_undo_keep_path_locked(x->k, x->root, child, "undo", true);
		if (q == 0)
			q = undo_remove(u, child);
		if (q < 0 && !r)
			r = q;
	}
	for (size_t i = 0; names && names[i]; i++)
		free(names[i]);
	free(names);
	if (r < 0)
		return r;
	r = pw_undo_keep_path_locked(x->k, x->root, path, "undo", true);
	const char *name;
	_cleanup_close_ int pfd = r < 0 ? -1 : open_parent(x, path, &name);
	if (r == 0 && pfd < 0)
		r = pfd;
	if (r == 0 && unlinkat(pfd, name, AT_REMOVEDIR) < 0)
		r = negative_errno();
	return r;
}

/* Removes whatever is at PATH. */
static int undo_remove(undo_run *u, const char *path)
{
	const char *name;
	_cleanup_close_ int pfd = open_parent(u->x, path, &name);
	if (pfd < 0)
		return pfd == -ENOENT || pfd == -ENOTDIR ? 0 : pfd; /* nothing there */
	struct stat st;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : negative_errno();
	if (unlinkat(pfd, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) == 0) {
		if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) /* its other names' ctime */
			pw_undo_keep_touched_ino(u->x->fs, st.st_dev, st.st_ino);
		return 0;
	}
	if (errno == ENOTEMPTY && u->force)
		return remove_tree(u, path);
	return negative_errno();
}

static void act(undo_run *u, const char *what, const char *path, const char *path2);
static void stamp(ctx *x, const char *path);

/* Makes NAME in PFD (PATH) a name of the file open at OFD (another name of it: OTHER),
 * replacing what is there. The inode's state is recorded under OTHER first: what follows
 * changes it (content, metadata), and a redo puts it back. */
static int link_over(undo_run *u, int pfd, const char *name, const char *path, int ofd,
		     const char *other)
{
	ctx *x = u->x;
	int r = pw_undo_keep_path_locked(x->k, x->root, other, "undo", false);
	if (r < 0)
		return r;
	char tmp[64], proc[64];
	snprintf(tmp, sizeof(tmp), ".piworkfs-relink-%d", (int)getpid());
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", ofd);
	(void)unlinkat(pfd, tmp, 0);
	if (linkat(AT_FDCWD, proc, pfd, tmp, AT_SYMLINK_FOLLOW) < 0)
		return negative_errno();
	if (renameat(pfd, tmp, pfd, name) < 0) {
		r = negative_errno();
		(void)unlinkat(pfd, tmp, 0);
		return r;
	}
	act(u, "relink", path, other);
	return 0;
}

/* Opens OTHER when it holds the content HEX (an original whose blob is HEX). */
static int open_same_content(ctx *x, const char *other, const char *hex)
{
	char got[PW_SHA256_HEX];
	int fd = open_beneath(x, other, O_RDONLY);
	if (fd >= 0 && (hash_file(fd, got) < 0 || !streq(got, hex)))
		fd = (close(fd), -ESTALE);
	return fd;
}

/* Do entries I and J of the restored files name one kept inode? */
static bool same_kept(const undo_run *u, size_t i, size_t j)
{
	const pw_undo_pending *a = &u->links.v[i], *b = &u->links.v[j];
	return i != j && a->path && b->path && !streq(a->path, b->path) && a->o->dev == b->o->dev &&
	       a->o->ino == b->o->ino;
}

/* Does the restored file J hold its kept inode itself (restored in place: it survived)? A
 * file the undo made can have the kept inode's number (freed, and given again), never the
 * inode. */
static bool holds_kept(undo_run *u, size_t j)
{
	const pw_undo_pending *l = &u->links.v[j];
	struct stat st;
	return !l->made_ino && stat_beneath(u->x, l->path, &st) == 0 &&
	       (uint64_t)st.st_dev == l->o->dev && (uint64_t)st.st_ino == l->o->ino;
}

/* Is PATH a file this undo made (not linked to another inode since)? */
static bool made_here(undo_run *u, const char *path)
{
	struct stat st;
	if (stat_beneath(u->x, path, &st) < 0)
		return false;
	for (size_t j = 0; j < u->links.n; j++)
		if (u->links.v[j].made_ino == (uint64_t)st.st_ino &&
		    u->links.v[j].made_dev == (uint64_t)st.st_dev)
			return true;
	return false;
}

/*
 * What the I-th restored file (links.v[I], a name of an inode with others when it was kept)
 * is to be a hard link of, open in *RET_FD with its name in OTHER:
 * - the kept inode, when this undo restored it in place under another name: it holds what
 *   it held where the undo's scope began, which is what every name of it held;
 * - else the kept inode under another name the project still has, when it holds this row's
 *   content (unchanged since);
 * - else the restored file of the oldest row that kept it (the last in the replay's order),
 *   so the names restored are links of one another again.
 * Returns whether there is one.
 */
static bool relink_target(undo_run *u, size_t i, char other[PW_PATH_MAX], int *ret_fd)
{
	ctx *x = u->x;
	const pw_undo_pending *l = &u->links.v[i];
	for (size_t j = 0; j < u->links.n; j++)
		if (same_kept(u, i, j) && holds_kept(u, j)) {
			snprintf(other, PW_PATH_MAX, "%s", u->links.v[j].path);
			*ret_fd = open_beneath(x, other, O_RDONLY);
			return *ret_fd >= 0;
		}
	if (pw_undo_keep_other_name(x->k, (dev_t)l->o->dev, (ino_t)l->o->ino, l->path, other) ==
		0 &&
	    !made_here(u, other)) {
		*ret_fd = open_same_content(x, other, l->o->blob);
		if (*ret_fd >= 0)
			return true;
	}
	for (size_t j = u->links.n; j-- > 0;)
		if (same_kept(u, i, j)) {
			if (j < i)
				return false; /* I is the oldest: the others link to it */
			snprintf(other, PW_PATH_MAX, "%s", u->links.v[j].path);
			*ret_fd = open_beneath(x, other, O_RDONLY);
			return *ret_fd >= 0;
		}
	return false;
}

/* Makes the I-th restored file a hard link again, as it was (relink_target), or leaves the
 * restored copy. Run after every row, so the other names' restores have happened whatever
 * the order. */
static void undo_relink(undo_run *u, size_t i)
{
	ctx *x = u->x;
	const pw_undo_pending *l = &u->links.v[i];
	bool partner = false; /* the last name of an inode with others can say nlink 1 */
	for (size_t j = 0; j < u->links.n && !partner; j++)
		partner = same_kept(u, i, j);
	struct stat st;
	if (!l->path || (l->o->nlink <= 1 && !partner) || stat_beneath(x, l->path, &st) < 0 ||
	    !S_ISREG(st.st_mode) || holds_kept(u, i))
		return; /* never linked, gone again, or the same inode already */
	char other[PW_PATH_MAX];
	_cleanup_close_ int ofd = -1;
	if (!relink_target(u, i, other, &ofd))
		return;
	struct stat ost;
	if (fstat(ofd, &ost) < 0 || !S_ISREG(ost.st_mode) ||
	    (ost.st_dev == st.st_dev && ost.st_ino == st.st_ino))
		return; /* linked already */
	/* The inode at OTHER takes this name's metadata (relinks_meta). */
	const char *name;
	_cleanup_close_ int pfd = open_parent(x, l->path, &name);
	if (pfd >= 0 && link_over(u, pfd, name, l->path, ofd, other) == 0)
		stamp(x, l->path);
}

/* Once linked again, names of one inode share its owner, mode, xattrs and times: those of
 * the oldest row that kept it, whose name may be gone again (a link the change set made,
 * removed last). The restored files are in the replay's order, newest row first. */
static void relinks_meta(undo_run *u)
{
	for (size_t i = 0; i < u->links.n; i++) {
		const pw_undo_pending *l = &u->links.v[i];
		const pw_undo_orig_object *oldest = l->o;
		for (size_t j = u->links.n; j-- > i;)
			if (u->links.v[j].o->dev == l->o->dev &&
			    u->links.v[j].o->ino == l->o->ino) {
				oldest = u->links.v[j].o;
				break;
			}
		_cleanup_close_ int fd = l->path ? open_beneath(u->x, l->path, O_PATH) : -1;
		struct stat st;
		if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
			(void)apply_meta(fd, oldest, true);
			stamp(u->x, l->path);
		}
	}
}

/* Is OP one that changes a name (the row keeps what the name held), not the object itself? */
static bool name_op(const char *op)
{
	static const char *const names[] = {"create", "mknod", "mkdir",	 "symlink", "link",
					    "unlink", "rmdir", "rename", "dir"};
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (streq_ptr(op, names[i]))
			return true;
	return false;
}

/* Did the change sets undone change the inode O kept itself (its content or metadata,
 * through any of its names: a row of it kept before such a change, or undo's own)? */
static bool changed_in_scope(const ctx *x, const pw_undo_orig_object *o)
{
	for (size_t i = 0; i < x->n_rows; i++) {
		const crow *r = &x->rows[i];
		if (r->selected && !r->move && r->o.present && r->o.dev == o->dev &&
		    r->o.ino == o->ino && !name_op(r->op))
			return true;
	}
	return false;
}

/* Did the view change the inode O kept after the change sets undone (a row of a later one
 * keeps it, or moves it)? Then its content now is that later change's, not the undo's to
 * put back. */
static bool kept_after_scope(const ctx *x, const pw_undo_orig_object *o)
{
	int64_t last = 0;
	for (size_t i = 0; i < x->n_rows; i++)
		if (x->rows[i].selected && x->rows[i].cs > last)
			last = x->rows[i].cs;
	for (size_t i = 0; i < x->n_rows; i++) {
		const crow *r = &x->rows[i];
		if (r->selected || r->cs <= last)
			continue;
		if ((r->o.present && r->o.dev == o->dev && r->o.ino == o->ino) ||
		    (r->move && r->src_dev == o->dev && r->src_ino == o->ino))
			return true;
	}
	return false;
}

/*
 * O, to be put back at PATH (NAME in PFD), was a name of an inode with others. When that
 * inode is still in the project under another name, PATH becomes its name again at once,
 * rather than a copy, and it gets O's content and metadata back for all its names, as they
 * were then (the rows replayed after this one, older changes, go further back). When it no
 * longer holds O's content, only if the change sets undone changed it (changed_in_scope)
 * and no later one did (kept_after_scope): changed by anything else since, a copy is what
 * PATH held. Returns 1 when linked, 0 when not (the caller makes a copy),
 * or -errno.
 */
static int link_to_kept(undo_run *u, int pfd, const char *name, const char *path,
			const pw_undo_orig_object *o)
{
	ctx *x = u->x;
	char other[PW_PATH_MAX];
	if (pw_undo_keep_other_name(x->k, (dev_t)o->dev, (ino_t)o->ino, path, other) < 0 ||
	    made_here(u, other))
		return 0;
	_cleanup_close_ int ofd = open_same_content(x, other, o->blob);
	bool refill = ofd == -ESTALE && changed_in_scope(x, o) && !kept_after_scope(x, o);
	if (refill)
		ofd = open_beneath(x, other, O_RDONLY);
	if (ofd < 0)
		return 0;
	int r = link_over(u, pfd, name, path, ofd, other);
	if (r == 0 && refill) {
		_cleanup_close_ int wfd =
		    openat(pfd, name, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
		r = wfd < 0 ? negative_errno()
			    : fill_from_blob(pw_undo_keep_store(x->k), o->blob, wfd);
	}
	if (r == 0)
		r = apply_meta(ofd, o, true);
	return r < 0 ? r : 1;
}

/* Puts O back at PATH. */
static int undo_restore(undo_run *u, const char *path, const crow *rw)
{
	const pw_undo_orig_object *o = &rw->o;
	pw_undo_orig_store *s = pw_undo_keep_store(u->x->k);
	const char *name;
	if (!path[0]) { /* the root itself: metadata only */
		_cleanup_close_ int fd = openat(u->x->root, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
		int r = fd < 0 ? negative_errno() : apply_meta(fd, o, false);
		int q = pw_undo_pending_push(&u->dirs, path, o, NULL);
		return r < 0 ? r : q;
	}
	_cleanup_close_ int pfd = open_parent(u->x, path, &name);
	if (pfd < 0)
		return pfd;
	struct stat st;
	bool exists = fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
	int r = 0;
	/* A file with other names that is not the one kept (a link made over the name since)
	 * is another file: filled in place, it would change under its other names too. */
	bool other_file = exists && S_ISREG(st.st_mode) && st.st_nlink > 1 &&
			  ((uint64_t)st.st_dev != o->dev || (uint64_t)st.st_ino != o->ino);
	if (exists && ((st.st_mode & S_IFMT) != (o->mode & S_IFMT) || other_file)) {
		r = undo_remove(u, path);
		if (r < 0)
			return r;
		exists = false;
	}
	if (S_ISREG(o->mode)) {
		if (!o->blob[0])
			return -ENODATA; /* too big, unreadable or the store full: never kept */
		r = verify_blob(s, o->blob);
		if (r < 0)
			return r;
		bool kept_here =
		    exists && (uint64_t)st.st_dev == o->dev && (uint64_t)st.st_ino == o->ino;
		if (o->nlink > 1 && !kept_here) {
			r = link_to_kept(u, pfd, name, path, o);
			if (r != 0)
				return r < 0 ? r : pw_undo_pending_push(&u->links, path, o, NULL);
		}
		_cleanup_close_ int fd = openat(pfd, name,
						O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC |
						    (exists ? 0 : O_CREAT | O_EXCL),
						0600);
		if (fd < 0)
			return negative_errno();
		r = fill_from_blob(s, o->blob, fd);
		if (r == 0)
			r = apply_meta(fd, o, true);
		struct stat made;
		if (r == 0 && fstat(fd, &made) < 0)
			r = negative_errno();
		if (r == 0) /* a name to link again, or one the others link to */
			r = pw_undo_pending_push(&u->links, path, o, kept_here ? NULL : &made);
		return r;
	}
	if (S_ISLNK(o->mode)) {
		if (exists) {
			char buf[PATH_MAX + 1];
			ssize_t n = readlinkat(pfd, name, buf, sizeof(buf) - 1);
			if (n < 0 || (buf[n] = '\0', !streq_ptr(buf, o->target))) {
				if (unlinkat(pfd, name, 0) < 0)
					return negative_errno();
				exists = false;
			}
		}
		if (!exists && symlinkat(o->target ? o->target : "", pfd, name) < 0)
			return negative_errno();
		_cleanup_close_ int fd = openat(pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		return fd < 0 ? negative_errno() : apply_meta(fd, o, true);
	}
	if (S_ISDIR(o->mode)) {
		if (!exists && mkdirat(pfd, name, 0700) < 0)
			return negative_errno();
		_cleanup_close_ int fd =
		    openat(pfd, name, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
		r = fd < 0 ? negative_errno() : apply_meta(fd, o, false);
		int q = pw_undo_pending_push(&u->dirs, path, o, NULL);
		return r < 0 ? r : q;
	}
	if (!exists && mknodat(pfd, name, o->mode, 0) < 0)
		return negative_errno();
	_cleanup_close_ int fd = openat(pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? negative_errno() : apply_meta(fd, o, true);
}

/* Reverses the rename FROM -> TO (or exchanges them again). */
static int undo_move(undo_run *u, const crow *rw)
{
	const char *fname, *tname;
	_cleanup_close_ int fp = open_parent(u->x, rw->path, &fname);
	_cleanup_close_ int tp = open_parent(u->x, rw->path2, &tname);
	if (tp == -ENOTDIR) /* its directory replaced by a file since: the object is gone */
		return -ENOENT;
	if (fp < 0)
		return fp;
	if (tp < 0)
		return tp;
	if (renameat2(tp, tname, fp, fname, rw->exchange ? RENAME_EXCHANGE : 0) < 0)
		return negative_errno();
	return 0;
}

static void act(undo_run *u, const char *what, const char *path, const char *path2)
{
	json_t *a = json_pack("{s:s,s:s}", "action", what, "path", path);
	if (a && path2)
		json_object_set_new(a, "to", json_string(path2));
	json_array_append_new(u->actions, a);
}

/* A file's ctime comes from the kernel's coarse clock, which may step past the time of the
 * row written just before the change: a tick's slack. */
static int64_t coarse_tick(void)
{
	static int64_t tick;
	if (!tick) {
		struct timespec res;
		tick = clock_getres(CLOCK_REALTIME_COARSE, &res) == 0
			   ? (int64_t)res.tv_sec * 1000000000 + res.tv_nsec
			   : 10000000;
	}
	return tick;
}

/* Since when the object of row RW is the view's: the row's time, but for a row of an undo,
 * which writes the backing tree itself (inodes the view never learns), the end of the
 * undo's change set (the start of the next one; none yet: the undo still runs). */
static int64_t view_since(const ctx *x, const crow *rw)
{
	for (size_t i = 0; i < x->n_sets; i++) {
		if (x->sets[i].id != rw->cs || !undo_reason(x->sets[i].reason))
			continue;
		return i + 1 < x->n_sets ? x->sets[i + 1].started_ns : INT64_MAX;
	}
	return rw->time_ns;
}

/*
 * The last time the record says the view changed the object row I recorded at PATH: the
 * row's own (view_since), or a later row's that renamed it (an exchange, whose other side
 * the record does not name) or kept it again at its path then, with a tick's slack
 * (coarse_tick).
 */
static int64_t view_last_change(const ctx *x, size_t i, const char *path)
{
	int64_t tick = coarse_tick();
	int64_t last = view_since(x, &x->rows[i]);
	char p[PW_PATH_MAX];
	snprintf(p, sizeof(p), "%s", path);
	for (size_t j = i + 1; j < x->n_rows; j++) {
		const crow *m = &x->rows[j];
		bool touches =
		    m->move ? path_under(p, m->path) || (m->exchange && path_under(p, m->path2))
			    : streq(m->path, p);
		if (touches && view_since(x, m) > last)
			last = view_since(x, m);
		follow_move(m, p);
	}
	return last > INT64_MAX - tick ? INT64_MAX : last + tick;
}

/* Was the object ST last changed by a rename a selected row recorded (one through the view,
 * which the kernel may have had the view forget since: an exchange invalidates both names;
 * a name a link made, then exchanged, leads to it)? Its ctime is then that rename's: a later
 * one is a later change, or another file that was handed the inode number since. */
static bool moved_by_view(const ctx *x, const struct stat *st)
{
	int64_t last = 0;
	for (size_t i = 0; i < x->n_rows; i++) {
		const crow *m = &x->rows[i];
		if (m->selected && m->move && m->src_dev == (uint64_t)st->st_dev &&
		    m->src_ino == (uint64_t)st->st_ino && view_since(x, m) > last)
			last = view_since(x, m);
	}
	int64_t ctime = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
	return last && (last > INT64_MAX - coarse_tick() || ctime <= last + coarse_tick());
}

/* Was the object now at CUR changed outside the view after the view last changed it (row
 * RW)? An inode the view changed carries the time of its last change. An inode the view
 * does not know at all, and not the original's own (the view may have forgotten an inode
 * it wrote in place), was put there from outside (a `sed -i` or an editor's save on the
 * backing copy renames a new file over it) when it changed after this daemon started and
 * after the row: what the view itself made since the start it knows, unless the kernel
 * had it forget the node since (then this errs on the side of a conflict, which --force
 * overrides). */
static bool changed_outside(ctx *x, size_t i, const char *cur)
{
	const crow *rw = &x->rows[i];
	_cleanup_close_ int fd = open_beneath(x, cur, O_PATH);
	pw_object ob;
	if (fd < 0 || pw_object_at(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, &ob) < 0 ||
	    S_ISDIR(ob.st.st_mode))
		return false;
	const struct stat st = ob.st;
	pw_inode_lock_read(x->fs);
	pw_inode *n = pw_inode_find_locked(x->fs, st.st_dev, st.st_ino);
	int64_t last = n ? atomic_load(&n->undo.changed_ns) : 0;
	pw_inode_unlock(x->fs);
	int64_t ctime = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
	bool same = rw->move ? st.st_dev == rw->src_dev && st.st_ino == rw->src_ino
			     : rw->o.present && st.st_dev == rw->o.dev && st.st_ino == rw->o.ino;
	if (!n && (same || moved_by_view(x, &st)))
		return false; /* the object the row names (moved, or changed in place): unknown */
	int64_t forgot = n ? 0 : pw_undo_keep_forgotten(x->k, st.st_dev, st.st_ino, ob.birth_ns);
	if (forgot) /* the view changed it, then the kernel had it forget the node */
		return ctime > forgot;
	if (!n)
		return ctime > pw_view_started_ns(x->v) &&
		       ctime > view_last_change(x, i, rw->move ? rw->path2 : rw->path);
	return last && ctime > last;
}

/* The undo changed PATH as the view would have: later changes outside are told apart
 * from it (changed_outside). */
static void stamp(ctx *x, const char *path)
{
	struct stat st;
	if (stat_beneath(x, path, &st) == 0)
		pw_undo_keep_touched_ino(x->fs, st.st_dev, st.st_ino);
}

static void one_row(undo_run *u, const crow *rw)
{
	ctx *x = u->x;
	pw_undo *k = x->k;
	int r;
	if (rw->move) {
		act(u, rw->exchange ? "exchange" : "move-back", rw->path2, rw->path);
		if (u->dry)
			return;
		pw_undo_pending_moved(&u->links, rw->path, rw->path2, rw->exchange);
		pw_undo_pending_moved(&u->dirs, rw->path, rw->path2, rw->exchange);
		if (!rw->exchange) /* what is at the old name now: the move back replaces it */
			(void)pw_undo_keep_path_locked(k, x->root, rw->path, "undo", true);
		(void)pw_undo_keep_move_locked(k, x->root, rw->path2, rw->path, rw->exchange);
		r = undo_move(u, rw);
		if (r < 0 && r != -ENOENT)
			note_fail(u, rw->path2, "move-back", r);
		else
			stamp(x, rw->path);
		if (rw->o.present) {
			(void)pw_undo_keep_path_locked(k, x->root, rw->path2, "undo",
						       !S_ISDIR(rw->o.mode));
			r = undo_restore(u, rw->path2, rw);
			if (r < 0)
				note_fail(u, rw->path2, "restore", r);
			else
				stamp(x, rw->path2);
		}
		return;
	}
	if (!rw->implicit)
		act(u, rw->o.present ? "restore" : "remove", rw->path, NULL);
	if (u->dry)
		return;
	pw_undo_pending_drop(&u->links, rw->path, false);
	if (!rw->o.present || !S_ISDIR(rw->o.mode)) /* no directory is left there */
		pw_undo_pending_drop(&u->dirs, rw->path, true);
	/* A directory there goes unless the row puts a directory back. */
	r = pw_undo_keep_path_locked(k, x->root, rw->path, "undo",
				     !rw->o.present || !S_ISDIR(rw->o.mode));
	if (r < 0) {
		note_fail(u, rw->path, "keep", r);
		return;
	}
	r = rw->o.present ? undo_restore(u, rw->path, rw) : undo_remove(u, rw->path);
	if (r < 0)
		note_fail(u, rw->path, rw->o.present ? "restore" : "remove", r);
	else
		stamp(u->x, rw->path);
}

/* redo: selects the rows of the latest undo no redo reversed yet (putting them back puts
 * back what that undo took away). */
static int select_redo(ctx *x, int64_t *ret_undo)
{
	const cset *u = NULL;
	for (size_t i = x->n_sets; i-- > 0 && !u;)
		if (streq_ptr(x->sets[i].reason, "undo") && !x->sets[i].redone_by &&
		    x->sets[i].undoes)
			u = &x->sets[i];
	if (!u)
		return failf(x, PW_RPC_NO_CHANGE,
			     "nothing to redo: no undo left that a redo has "
			     "not reversed");
	for (size_t i = 0; i < x->n_rows; i++)
		x->rows[i].selected = x->rows[i].cs == u->id;
	*ret_undo = u->id;
	return 0;
}

/* The change sets whose rows the undo takes (oldest first): a JSON array. */
static json_t *sets_undone(const ctx *x)
{
	json_t *a = json_array();
	int64_t last = 0;
	for (size_t i = 0; a && i < x->n_rows; i++) {
		const crow *r = &x->rows[i];
		if (!r->selected || r->cs == last)
			continue;
		bool seen = false;
		size_t k;
		json_t *item;
		json_array_foreach(a, k, item) seen = seen || json_integer_value(item) == r->cs;
		if (!seen)
			json_array_append_new(a, json_integer(r->cs));
		last = r->cs;
	}
	return a ? a : json_array();
}

/* Records in the store which rows the undo (or redo) change set UNDO_CS put back, and for a
 * redo, which undo it reversed: the next undo steps back past them, redo finds the undo
 * to reverse. Lock held. Best effort: the files are back either way. */
static void note_undone(ctx *x, int64_t undo_cs, int64_t redo_of)
{
	pw_undo_orig_store *s = pw_undo_keep_store(x->k);
	json_t *ids = json_array();
	for (size_t i = 0; ids && i < x->n_rows; i++)
		if (x->rows[i].selected)
			json_array_append_new(ids, json_integer(x->rows[i].id));
	_cleanup_free_ char *text = ids ? json_dumps(ids, JSON_COMPACT) : NULL;
	json_decref(ids);
	if (text)
		(void)pw_undo_orig_changeset_set_undoes(s, undo_cs, text);
	if (redo_of)
		(void)pw_undo_orig_changeset_set_redone(s, redo_of, undo_cs);
}

/*
 * What the undo does, one line per path, as the person meant the changes (the rows stay
 * exact underneath): "restore P" (P's original comes back over what is there), "recreate
 * P" (P is gone: made again), "remove P" (made by the change set), "rename back B -> A".
 * A temporary renamed over a file is that file's restore; a name made and removed again
 * within the change set is nothing. Read before the undo runs, from the tree as it is, and
 * in the order the undo acts: the latest change first (a file goes before the directory the
 * change set made for it; a deleted directory comes back before what was in it).
 */
static json_t *undo_summary(ctx *x)
{
	json_t *out = json_array(), *at = json_object();
	size_t shown = 0;
	bool truncated = false;
	for (size_t si = 0; out && at && si < x->n_sets; si++) {
		json_t *changes = json_array(), *e;
		if (!changes)
			break;
		set_listing(x, &x->sets[si], changes, &shown, &truncated, true);
		for (size_t k = json_array_size(changes); k-- > 0;) { /* oldest first */
			e = json_array_get(changes, k);
			size_t i = (size_t)json_integer_value(json_object_get(e, "row"));
			const char *kind = json_string_value(json_object_get(e, "kind"));
			const char *path = json_string_value(json_object_get(e, "path"));
			const char *to = json_string_value(json_object_get(e, "to"));
			char cur[PW_PATH_MAX];
			struct stat st;
			const char *verb, *target = path, *from = NULL;
			current_path(x, i, to ? to : path, cur);
			bool exists = stat_beneath(x, cur, &st) == 0;
			if (streq_ptr(kind, "created")) {
				if (!exists)
					continue;
				verb = "remove", target = cur;
			} else if (to || !streq(cur, path)) {
				if (!exists)
					continue; /* gone since: nothing to rename back */
				verb = "rename back", from = cur;
			} else {
				verb = exists ? "restore" : "recreate";
			}
			json_t *prev = json_object_get(at, target);
			if (prev && !from)
				continue; /* the earliest change of a path holds what comes back */
			json_t *a = json_pack("{s:s,s:s}", "action", verb, "path", target);
			if (a && from)
				json_object_set_new(a, "from", json_string(from));
			if (prev) { /* a rename back of a path restored too: one line */
				json_object_update(prev, a);
				json_decref(a);
				continue;
			}
			json_object_set(at, target, a);
			json_array_append_new(out, a);
		}
		json_decref(changes);
	}
	json_decref(at);
	if (!out)
		return json_array();
	json_t *acting = json_array(); /* built oldest first (the earliest change of a path
					* holds what comes back): the undo acts newest first */
	for (size_t k = json_array_size(out); acting && k-- > 0;)
		json_array_append(acting, json_array_get(out, k));
	json_decref(out);
	return acting ? acting : json_array();
}

static int changes_undo(pw_fs *fs, pw_view *v, const pw_peer *peer, json_t *params, json_t **ret,
			pw_ctl_fail *fail)
{
	_cleanup_(ctx_done) ctx x = {.root = -1};
	if (peer->restricted) {
		fail->code = PW_RPC_REFUSED;
		fail->message = strdup("refused: an agent may list and diff changes but never undo "
				       "them; ask the person you work for to run `piworkfs undo`");
		return -EPERM;
	}
	int sr = setup(&x, fs, v, fail);
	if (sr < 0)
		return sr;
	bool all = json_is_true(json_object_get(params, "all"));
	bool redo = json_is_true(json_object_get(params, "redo"));
	if (!all && !redo && !json_array_size(json_object_get(params, "paths")))
		return failf(&x, PW_RPC_INVALID_PARAMS, "name the paths to undo, or all");
	undo_run u = {.x = &x,
		      .force = json_is_true(json_object_get(params, "force")),
		      .dry = json_is_true(json_object_get(params, "dry_run")),
		      .actions = json_array(),
		      .failed = json_array()};
	json_t *conflicts = json_array();
	json_t *refreshed = json_array(); /* git's caches changed outside: no conflict */
	pw_undo_orig_store *s = pw_undo_keep_store(x.k);
	int64_t undo_cs = 0;
	pw_undo_orig_lock(s);
	int r = load(&x, params, SCOPE_UNDO);
	int64_t redo_of = 0;
	if (r == 0)
		r = redo ? select_redo(&x, &redo_of) : check_paths_changed(&x, true);
	json_t *summary = r == 0 ? undo_summary(&x) : NULL;
	/* Changed outside the view since: refused unless forced. */
	for (size_t i = 0; r == 0 && i < x.n_rows; i++) {
		const crow *rw = &x.rows[i];
		if (!rw->selected || rw->implicit)
			continue;
		char cur[PW_PATH_MAX];
		current_path(&x, i, rw->move ? rw->path2 : rw->path, cur);
		if (!changed_outside(&x, i, cur))
			continue;
		/* git rewrites its index when the person only reads (`git status`): put back
		 * as recorded, said apart, never a conflict */
		json_array_append_new(pw_git_is_cache(cur) ? refreshed : conflicts,
				      json_string(cur));
	}
	bool refuse = json_array_size(conflicts) && !u.force;
	pw_undo_orig_unlock(s);
	if (r < 0)
		goto out;
	if (!u.dry && !refuse) {
		r = pw_undo_keep_begin(x.k, redo ? "redo" : "undo", NULL, &undo_cs);
		if (r < 0) {
			r = failf(&x, PW_RPC_INTERNAL_ERROR, "cannot start a change set: %s",
				  strerror(-r));
			goto out;
		}
	}
	pw_undo_orig_lock(s);
	for (size_t i = x.n_rows; !refuse && i-- > 0;)
		if (x.rows[i].selected)
			one_row(&u, &x.rows[i]);
	for (size_t i = 0; i < u.links.n; i++)
		undo_relink(&u, i);
	relinks_meta(&u);
	/* Directories' times last (in the order met: the earliest row's wins). */
	for (size_t i = 0; i < u.dirs.n; i++) {
		const pw_undo_pending *d = &u.dirs.v[i];
		_cleanup_close_ int fd = d->path ? open_beneath(&x, d->path, O_PATH) : -1;
		struct timespec tv[2] = {ts_of(d->o->atime_ns), ts_of(d->o->mtime_ns)};
		if (fd >= 0)
			(void)utimensat(fd, "", tv, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
	}
	if (!u.dry && !refuse)
		note_undone(&x, undo_cs, redo_of);
	pw_undo_orig_unlock(s);
	if (!u.dry && !refuse)
		(void)pw_undo_keep_begin(x.k, redo ? "after-redo" : "after-undo", NULL, NULL);
	if (refuse) {
		char names[2048] = "";
		size_t i, used = 0;
		json_t *item;
		json_array_foreach(conflicts, i, item)
		{
			_cleanup_free_ char *q = pw_quote(json_string_value(item));
			int n = snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "",
					 q ? q : "?");
			if (n < 0 || (size_t)n >= sizeof(names) - used) {
				snprintf(names + used, sizeof(names) - used, ", ...");
				break;
			}
			used += (size_t)n;
		}
		r = failf(&x, PW_RPC_REFUSED,
			  "refused: changed outside the view since the view changed it: %s "
			  "(--force to undo anyway)",
			  names);
		fail->data = json_pack("{s:O}", "conflicts", conflicts);
		goto out;
	}
	*ret = json_pack("{s:b,s:O,s:O,s:O,s:O,s:I,s:o}", "dry_run", u.dry, "actions", u.actions,
			 "failed", u.failed, "conflicts", conflicts, "refreshed", refreshed,
			 "changeset", (json_int_t)undo_cs, "undoes", sets_undone(&x));
	if (*ret && summary)
		json_object_set(*ret, "summary", summary);
	if (*ret && redo_of)
		json_object_set_new(*ret, "redo_of", json_integer(redo_of));
	r = *ret ? 0 : failf(&x, PW_RPC_INTERNAL_ERROR, "out of memory");
out:
	pw_undo_pending_done(&u.dirs);
	pw_undo_pending_done(&u.links);
	json_decref(u.actions);
	json_decref(u.failed);
	json_decref(conflicts);
	json_decref(refreshed);
	json_decref(summary);
	return r < 0 ? -1 : 0;
}

/* ---- checkpoint, prune ----------------------------------------------------------------- */

static int changes_checkpoint(pw_fs *fs, pw_view *v, const pw_peer *peer, json_t *params,
			      json_t **ret, pw_ctl_fail *fail)
{
	_cleanup_(ctx_done) ctx x = {.root = -1};
	if (peer->restricted) {
		fail->code = PW_RPC_REFUSED;
		fail->message = strdup("refused: only the person may start a checkpoint");
		return -EPERM;
	}
	int sr = setup(&x, fs, v, fail);
	if (sr < 0)
		return sr;
	const char *name = json_string_value(json_object_get(params, "name"));
	int64_t id;
	int r = pw_undo_keep_begin(x.k, "checkpoint", name, &id);
	if (r < 0)
		return failf(&x, PW_RPC_INTERNAL_ERROR, "checkpoint: %s", strerror(-r));
	return done(&x, json_pack("{s:I,s:s?}", "changeset", (json_int_t)id, "name", name), ret);
}

static int changes_prune(pw_fs *fs, pw_view *v, const pw_peer *peer, json_t *params, json_t **ret,
			 pw_ctl_fail *fail)
{
	_cleanup_(ctx_done) ctx x = {.root = -1};
	if (peer->restricted) {
		fail->code = PW_RPC_REFUSED;
		fail->message = strdup("refused: an agent may not prune the originals");
		return -EPERM;
	}
	int sr = setup(&x, fs, v, fail);
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
		return failf(&x, PW_RPC_INTERNAL_ERROR, "prune: %s", strerror(-r));
	return done(&x,
		    json_pack("{s:i,s:I,s:I,s:I}", "removed", r, "freed", (json_int_t)freed,
			      "bytes", (json_int_t)bytes, "blobs", (json_int_t)blobs),
		    ret);
}

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

typedef int (*changes_fn)(pw_fs *fs, pw_view *v, const pw_peer *peer, json_t *params, json_t **ret,
			  pw_ctl_fail *fail);

typedef struct job {
	pw_ctl_server *server;
	uint64_t client;
	json_t *id; /* the deferred call's; set on the server thread after the start */
	changes_fn fn;
	pw_fs *fs;
	pw_view *view;
	pw_peer peer;	/* a copy: the client may be gone when the job ends */
	json_t *params; /* a deep copy: jansson's objects are not for two threads */
	int r;
	json_t *result;
	pw_ctl_fail fail;
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
	j->r = j->fn(j->fs, j->view, &j->peer, j->params, &j->result, &j->fail);
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
static int run_job(pw_ctl_ctx *c, changes_fn fn, json_t **ret)
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
		return run_job(c, changes_##name, ret);                                            \
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
    {"changes.undo", m_undo, changes_params, ELEMENTSOF(changes_params),
     "refused: an agent may list and diff changes but never undo them; ask the person you "
     "work for to run `piworkfs undo`"},
    {"changes.prune", m_prune, prune_params, ELEMENTSOF(prune_params),
     "refused: an agent may not prune the originals"},
    {"checkpoint", m_checkpoint, checkpoint_params, ELEMENTSOF(checkpoint_params),
     "refused: only the person may start a checkpoint"},
};

const pw_ctl_module pw_undo_changes_module = {
    .name = "changes",
    .methods = methods,
    .n_methods = ELEMENTSOF(methods),
    .init = changes_init,
    .fini = changes_fini,
    .tick = changes_tick,
};
