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

#include "keep.h"
#include "path.h"
#include "proto.h"
#include "util.h"

#define LIST_MAX 5000          /* entries in one changes.list reply */
#define DIFF_BYTES_MAX (640 * 1024) /* diff text in one reply */
#define PATHS_MAX 256

extern char **environ;

typedef struct crow {
	int64_t id, cs, pid, time_ns;
	bool move, exchange, implicit;
	char *path, *path2, *op, *comm, *mode_name, *not_kept;
	uint64_t src_dev, src_ino;
	pw_orig_object o;
	bool selected;
} crow;

typedef struct cset {
	int64_t id, started_ns;
	char *reason, *name, *mode;
} cset;

typedef struct ctx {
	pw_view *v;
	pw_keep *k;
	pw_fs *fs;
	pw_ctl_fail *fail;
	int root;
	crow *rows;
	size_t n_rows;
	cset *sets;
	size_t n_sets;
	char **paths;
	size_t n_paths;
	pw_policy *hide; /* an agent's request: the active policy, whose hidden paths it never sees */
} ctx;

static _printf_(3, 4) int failf(ctx *x, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = pw_ctl_fail_setv(x->fail, code, fmt, ap);
	va_end(ap);
	return r;
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
		pw_orig_object_done(&r->o);
	}
	free(x->rows);
	for (size_t i = 0; i < x->n_sets; i++) {
		free(x->sets[i].reason);
		free(x->sets[i].name);
		free(x->sets[i].mode);
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
	       (pw_policy_is_hidden(x->hide, path, false) || pw_policy_is_hidden(x->hide, path, true));
}

/* The keep handle, or a failure: this view keeps no originals. */
static int setup(ctx *x, pw_fs *fs, pw_view *v, pw_ctl_fail *fail)
{
	*x = (ctx){ .v = v, .fail = fail, .root = -1 };
	x->fs = fs;
	x->k = pw_fs_keep(x->fs);
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
	json_array_foreach(a, i, item) {
		const char *in = json_string_value(item), *err = NULL, *rel = in;
		const char *roots[] = { pw_view_mountpoint(x->v), pw_view_project(x->v) };
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
	if (!x->n_paths)
		return true;
	for (size_t i = 0; i < x->n_paths; i++)
		if (path_under(r->path, x->paths[i]) || path_under(r->path2, x->paths[i]))
			return true;
	return false;
}

enum scope_default { SCOPE_ALL, SCOPE_LATEST };

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

static int load_set(const pw_orig_changeset *c, void *u)
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
	x->sets[x->n_sets++] = (cset){ .id = c->id, .started_ns = c->started_ns,
				       .reason = dup_or_null(c->reason),
				       .name = dup_or_null(c->name), .mode = dup_or_null(c->mode) };
	if (ls->since && c->name && streq(c->name, ls->since))
		ls->min_cs = c->id;
	return 0;
}

static int load_row(const pw_orig_rec *rec, void *u)
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
		.move = rec->action == PW_ORIG_MOVE,
		.exchange = rec->exchange,
		.implicit = rec->implicit,
		.path = strdup(rec->path),
		.path2 = dup_or_null(rec->path2),
		.op = dup_or_null(rec->op),
		.comm = dup_or_null(rec->comm),
		.mode_name = dup_or_null(rec->mode_name),
		.not_kept = dup_or_null(rec->o.not_kept),
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

/* Loads the project's change sets and rows (oldest first), and marks the rows the
 * params select: --since (a checkpoint's name, or since_ns), --mode, paths. Lock held. */
static int load(ctx *x, json_t *params, enum scope_default dflt)
{
	const char *since = json_string_value(json_object_get(params, "since"));
	json_t *since_ns_j = json_object_get(params, "since_ns");
	const char *mode = json_string_value(json_object_get(params, "mode"));
	int64_t since_ns = since_ns_j ? json_integer_value(since_ns_j) : 0;

	if (load_paths(x, params) < 0)
		return -1;
	load_state ls = { .x = x, .since = since };
	int q = pw_orig_read(pw_keep_store(x->k), pw_keep_project(x->k), load_set, load_row, &ls);
	if (q < 0)
		return failf(x, PW_RPC_INTERNAL_ERROR, "state database: %s", strerror(-q));
	int64_t min_cs = ls.min_cs;
	if (since && !min_cs)
		return failf(x, PW_RPC_INVALID_PARAMS, "no checkpoint named '%s'", since);

	/* The default scope of diff and undo: the latest change set with a change. */
	if (!since && !since_ns_j && dflt == SCOPE_LATEST) {
		for (size_t i = x->n_rows; i-- > 0;)
			if (!x->rows[i].implicit && path_selected(x, &x->rows[i])) {
				min_cs = x->rows[i].cs;
				break;
			}
		if (!min_cs)
			min_cs = INT64_MAX;
	}
	for (size_t i = 0; i < x->n_rows; i++) {
		crow *r = &x->rows[i];
		r->selected = r->cs >= min_cs && r->time_ns >= since_ns &&
			      (!mode || streq_ptr(r->mode_name, mode)) && path_selected(x, r) &&
			      !agent_hidden(x, r->path) && !agent_hidden(x, r->path2);
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
		return openat(x->root, ".", (flags & ~O_PATH) ? flags | O_CLOEXEC
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

static bool xattrs_equal(ctx *x, int fd, const pw_orig_object *o)
{
	void *cur = NULL;
	size_t len = 0;
	if (pw_orig_xattrs_read(fd, &cur, &len) < 0)
		return true;
	bool eq = len == o->xattrs_len && (!len || memcmp(cur, o->xattrs, len) == 0);
	free(cur);
	return eq;
}

/* What the change of row I amounts to now: "created", "deleted", "modified", "metadata",
 * or NULL when nothing differs. CUR is where the object is now. */
static const char *classify(ctx *x, const crow *r, const char *cur)
{
	struct stat st;
	_cleanup_close_ int fd = open_beneath(x, cur, O_PATH);
	bool exists = fd >= 0 && fstat(fd, &st) == 0;
	const pw_orig_object *o = &r->o;

	if (!o->present)
		return exists ? "created" : NULL;
	if (!exists)
		return "deleted";
	if ((st.st_mode & S_IFMT) != (o->mode & S_IFMT))
		return "modified";
	if (S_ISREG(st.st_mode)) {
		if ((uint64_t)st.st_size != o->size)
			return "modified";
		if (o->blob[0]) {
			char proc[64], hex[PW_SHA256_HEX];
			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
			_cleanup_close_ int rfd = open(proc, O_RDONLY | O_CLOEXEC);
			if (rfd >= 0 && hash_file(rfd, hex) == 0 && !streq(hex, o->blob))
				return "modified";
		} else if ((int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec !=
			   o->mtime_ns) {
			return "modified";
		}
	} else if (S_ISLNK(st.st_mode)) {
		char buf[PATH_MAX + 1];
		ssize_t n = readlinkat(fd, "", buf, sizeof(buf) - 1);
		if (n >= 0) {
			buf[n] = '\0';
			if (!streq_ptr(buf, o->target))
				return "modified";
		}
	}
	bool meta = (st.st_mode & 07777) != (o->mode & 07777) || st.st_uid != o->uid ||
		    st.st_gid != o->gid || (!S_ISLNK(st.st_mode) && !xattrs_equal(x, fd, o));
	if (!S_ISDIR(st.st_mode) &&
	    (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec != o->mtime_ns)
		meta = true;
	return meta ? "metadata" : NULL;
}

/* A new file renamed over a kept original (an editor's or sed's save): the change reads
 * as the original's, at the destination. Row I is the new file's, CUR where it is now. */
static bool saved_over(ctx *x, size_t i, const char *cur)
{
	const crow *r = &x->rows[i];
	if (r->o.present || r->move || streq(cur, r->path))
		return false;
	for (size_t j = i + 1; j < x->n_rows; j++) {
		const crow *m = &x->rows[j];
		if (m->move && m->o.present && m->cs == r->cs && streq_ptr(m->path2, cur))
			return true;
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
	return o;
}

static int done(ctx *x, json_t *o, json_t **ret)
{
	if (!o)
		return failf(x, PW_RPC_INTERNAL_ERROR, "out of memory");
	*ret = o;
	return 0;
}

static int changes_list(pw_fs *fs, pw_view *v, const pw_peer *peer, json_t *params,
			json_t **ret, pw_ctl_fail *fail)
{
	_cleanup_(ctx_done) ctx x = { .root = -1 };
	if (setup(&x, fs, v, fail) < 0)
		return -1;
	if (peer->restricted)
		x.hide = pw_view_policy(v, NULL);
	pw_orig_store *s = pw_keep_store(x.k);
	pw_orig_lock(s);
	int r = load(&x, params, SCOPE_ALL);
	uint64_t bytes = 0, blobs = 0;
	(void)pw_orig_total(s, &bytes, &blobs);
	pw_orig_unlock(s);
	if (r < 0)
		return -1;
	json_t *sets = json_array();
	size_t shown = 0;
	bool truncated = false;
	for (size_t si = x.n_sets; sets && si-- > 0;) {
		const cset *c = &x.sets[si];
		json_t *changes = json_array();
		/* newest first within the set too */
		for (size_t i = x.n_rows; changes && i-- > 0;) {
			const crow *rw = &x.rows[i];
			if (rw->cs != c->id || !rw->selected || rw->implicit)
				continue;
			if (shown >= LIST_MAX) {
				truncated = true;
				break;
			}
			char cur[PW_PATH_MAX];
			const char *kind = "renamed";
			if (rw->move && rw->o.present) {
				/* what the destination held, replaced */
				current_path(&x, i, rw->path2, cur);
				const char *k2 = agent_hidden(&x, cur) ? NULL : classify(&x, rw, cur);
				if (k2) {
					json_t *e = row_json(rw, k2, cur);
					if (e) {
						json_object_set_new(e, "path", json_string(rw->path2));
						json_object_del(e, "to");
					}
					json_array_append_new(changes, e);
					shown++;
				}
			}
			if (rw->move && temp_move(&x, i))
				continue;
			if (!rw->move) {
				current_path(&x, i, rw->path, cur);
				if (saved_over(&x, i, cur) || agent_hidden(&x, cur))
					continue;
				kind = classify(&x, rw, cur);
				if (!kind)
					continue;
			}
			json_array_append_new(changes, row_json(rw, kind, rw->move ? NULL : cur));
			shown++;
		}
		if (!changes)
			break;
		if (!json_array_size(changes) && !c->name && c->id != pw_keep_current(x.k)) {
			json_decref(changes);
			continue;
		}
		json_array_append_new(
			sets, json_pack("{s:I,s:I,s:s?,s:s?,s:s?,s:b,s:o}", "id", (json_int_t)c->id,
					"started_ns", (json_int_t)c->started_ns, "reason", c->reason,
					"name", c->name, "mode", c->mode, "current",
					c->id == pw_keep_current(x.k), "changes", changes));
	}
	json_t *o = json_pack("{s:o,s:I,s:b,s:{s:s,s:I,s:I}}", "changesets",
			      sets ? sets : json_array(), "current",
			      (json_int_t)pw_keep_current(x.k), "truncated", truncated, "store",
			      "dir", pw_orig_dir(s), "bytes", (json_int_t)bytes, "blobs",
			      (json_int_t)blobs);
	return done(&x, o, ret);
}

/* ---- diff ------------------------------------------------------------------------------ */

/* Runs `diff -u` on A and B (paths; "/dev/null" for none) labelled LA and LB, appending
 * its output to *OUT (up to LIMIT bytes). Returns diff's status (0 same, 1 differ). */
static int run_diff(const char *a, int bfd, const char *la, const char *lb, char **out,
		    size_t *len, size_t limit, bool *ret_truncated)
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
	char *argv[] = { (char *)"diff", (char *)"-u", (char *)"--label", (char *)la,
			 (char *)"--label", (char *)lb, (char *)a, (char *)b, NULL };
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

static bool looks_binary(int fd)
{
	char buf[8192];
	ssize_t n = pread(fd, buf, sizeof(buf), 0);
	return n > 0 && memchr(buf, 0, (size_t)n) != NULL;
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

static int changes_diff(pw_fs *fs, pw_view *v, const pw_peer *peer, json_t *params,
			json_t **ret, pw_ctl_fail *fail)
{
	_cleanup_(ctx_done) ctx x = { .root = -1 };
	if (setup(&x, fs, v, fail) < 0)
		return -1;
	if (peer->restricted)
		x.hide = pw_view_policy(v, NULL);
	pw_orig_store *s = pw_keep_store(x.k);
	bool stat_only = json_is_true(json_object_get(params, "stat"));
	pw_orig_lock(s);
	int r = load(&x, params, SCOPE_LATEST);
	pw_orig_unlock(s);
	if (r < 0)
		return -1;
	json_t *files = json_array();
	size_t total = 0;
	bool truncated = false;
	/* The earliest row of each path in scope holds its original. */
	for (size_t i = 0; files && i < x.n_rows; i++) {
		crow *rw = &x.rows[i];
		if (!rw->selected || rw->implicit || (rw->move && !rw->o.present))
			continue;
		/* the path whose original this row holds */
		const char *opath = rw->move ? rw->path2 : rw->path;
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++)
			seen = x.rows[j].selected && !x.rows[j].implicit &&
			       streq_ptr(x.rows[j].move ? (x.rows[j].o.present ? x.rows[j].path2
										: NULL)
							: x.rows[j].path,
					 opath);
		if (seen)
			continue;
		char cur[PW_PATH_MAX];
		current_path(&x, i, opath, cur);
		if (saved_over(&x, i, cur) || agent_hidden(&x, cur))
			continue;
		const char *kind = classify(&x, rw, cur);
		if (!kind)
			continue;
		bool orig_reg = rw->o.present && S_ISREG(rw->o.mode);
		/* O_NONBLOCK: a FIFO put where a file was would hold the open until a writer
		 * came; only a regular file's content is read. */
		_cleanup_close_ int cfd = open_beneath(&x, cur, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
		struct stat cst;
		bool cur_reg = cfd >= 0 && fstat(cfd, &cst) == 0 && S_ISREG(cst.st_mode);
		json_t *f = json_pack("{s:s,s:s}", "path", cur, "kind", kind);
		if (!f)
			break;
		if (!streq(cur, opath))
			json_object_set_new(f, "was", json_string(opath));
		if ((orig_reg || cur_reg) && !streq(kind, "metadata")) {
			_cleanup_free_ char *blob = orig_reg && rw->o.blob[0]
							    ? pw_orig_blob_path(s, rw->o.blob)
							    : NULL;
			_cleanup_close_ int bfd = blob ? open(blob, O_RDONLY | O_CLOEXEC) : -1;
			if (orig_reg && !blob) {
				json_object_set_new(f, "not_kept",
						    json_string(rw->not_kept ? rw->not_kept : "missing"));
			} else if ((bfd >= 0 && looks_binary(bfd)) || (cur_reg && looks_binary(cfd))) {
				json_object_set_new(f, "binary", json_true());
				json_object_set_new(
					f, "diff",
					json_sprintf("Binary files a/%s and b/%s differ\n",
						     opath, cur));
			} else {
				char la[PW_PATH_MAX + 8], lb[PW_PATH_MAX + 8];
				snprintf(la, sizeof(la), "a/%s", opath);
				snprintf(lb, sizeof(lb), "b/%s", cur);
				_cleanup_free_ char *out = NULL;
				size_t len = 0;
				run_diff(blob ? blob : "/dev/null", cur_reg ? cfd : -1, la,
					 lb, &out, &len, DIFF_BYTES_MAX - total, &truncated);
				json_int_t add = 0, del = 0;
				count_lines(out, &add, &del);
				json_object_set_new(f, "added", json_integer(add));
				json_object_set_new(f, "removed", json_integer(del));
				if (!stat_only && out) {
					total += len;
					json_object_set_new(f, "diff", json_string(out));
				}
			}
		}
		json_array_append_new(files, f);
	}
	return done(&x, json_pack("{s:o,s:b}", "files", files ? files : json_array(), "truncated",
				  truncated),
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
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	*ret_name = slash + 1;
	return pw_openat_beneath(x->fs, dir, O_PATH | O_DIRECTORY, 0);
}

/* rm -rf of NAME in DIRFD (no symlink followed). */
static int remove_tree(int dirfd, const char *name)
{
	if (unlinkat(dirfd, name, 0) == 0)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return negative_errno();
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return negative_errno();
	}
	int r = 0;
	for (struct dirent *de; (de = readdir(d));) {
		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		int q = remove_tree(fd, de->d_name);
		if (q < 0 && !r)
			r = q;
	}
	closedir(d);
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && !r)
		r = negative_errno();
	return r;
}

/* Does blob HASH still hold the content it is named after? A file kept by a link
 * (originals.c) can have been written since by a process that held it open: -EBADMSG, and
 * nothing is restored from it. */
static int verify_blob(pw_orig_store *s, const char *hash)
{
	_cleanup_free_ char *path = pw_orig_blob_path(s, hash);
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
static int fill_from_blob(pw_orig_store *s, const char *hash, int fd)
{
	_cleanup_free_ char *path = pw_orig_blob_path(s, hash);
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
	return (struct timespec){ .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
}

/* Owner, mode, xattrs (and times, unless a directory: those come last) of O on FD. */
static int apply_meta(int fd, const pw_orig_object *o, bool times)
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
		pw_orig_xattrs_apply(fd, o->xattrs, o->xattrs_len);
	}
	if (times) {
		struct timespec tv[2] = { ts_of(o->atime_ns), ts_of(o->mtime_ns) };
		if (utimensat(fd, "", tv, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 && !r)
			r = negative_errno();
	}
	return r;
}

typedef struct dir_times {
	char *path;
	int64_t atime_ns, mtime_ns;
} dir_times;

/* A file restored from its blob whose inode had other names when it was kept. */
typedef struct relink {
	char *path;
	const pw_orig_object *o; /* the row's, alive as long as the run */
} relink;

typedef struct undo_run {
	ctx *x;
	bool force, dry;
	json_t *actions, *failed;
	dir_times *dirs;
	size_t n_dirs, cap_dirs;
	relink *links;
	size_t n_links, cap_links;
} undo_run;

static void note_fail(undo_run *u, const char *path, const char *what, int r)
{
	json_array_append_new(u->failed,
			      json_pack("{s:s,s:s,s:s}", "path", path, "action", what, "error",
					r == -EBADMSG ? "the kept original was changed after it was "
							"kept (a process still wrote to it)"
					: r == -ENODATA ? "its content was not kept (too big, unreadable, "
							  "or the store was full): not restored"
						      : strerror(-r)));
}

/* Removes whatever is at PATH. */
static int undo_remove(undo_run *u, const char *path)
{
	const char *name;
	_cleanup_close_ int pfd = open_parent(u->x, path, &name);
	if (pfd < 0)
		return pfd == -ENOENT ? 0 : pfd;
	struct stat st;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : negative_errno();
	if (unlinkat(pfd, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) == 0)
		return 0;
	if (errno == ENOTEMPTY && u->force)
		return remove_tree(pfd, name);
	return negative_errno();
}

/* Remembers directory PATH's times, set once every name inside it is back. */
static int push_dir(undo_run *u, const char *path, const pw_orig_object *o)
{
	if (PW_GROW(u->dirs, u->cap_dirs, u->n_dirs, 16) < 0)
		return -ENOMEM;
	char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	u->dirs[u->n_dirs++] = (dir_times){ copy, o->atime_ns, o->mtime_ns };
	return 0;
}

static void act(undo_run *u, const char *what, const char *path, const char *path2);
static void stamp(ctx *x, const char *path);

/* Remembers that PATH, restored from a blob, was one name of an inode with others. */
static int push_relink(undo_run *u, const char *path, const pw_orig_object *o)
{
	if (PW_GROW(u->links, u->cap_links, u->n_links, 8) < 0)
		return -ENOMEM;
	char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	u->links[u->n_links++] = (relink){ copy, o };
	return 0;
}

/*
 * The row replayed now puts back what PATH (and, BENEATH, what is beneath it) held before
 * the rows replayed so far: a relink they asked for there no longer describes what ends
 * there. (A path can have several rows, e.g. a file renamed over, then written: the oldest
 * one's object is the one undo leaves.) A directory's own row touches only the directory:
 * what lies beneath is put back by rows of its own.
 */
static void relinks_drop(undo_run *u, const char *path, bool beneath)
{
	size_t j = 0;
	for (size_t i = 0; i < u->n_links; i++) {
		const char *p = u->links[i].path;
		if (!p || (beneath ? pw_relpath_beneath(p, path) : streq(p, path)))
			free(u->links[i].path);
		else
			u->links[j++] = u->links[i];
	}
	u->n_links = j;
}

/* The row moves TO back to FROM (or exchanges them again): the relinks asked for beneath
 * one follow their objects to the other; those beneath FROM, which the move replaces, go. */
static void relinks_moved(undo_run *u, const char *from, const char *to, bool exchange)
{
	if (!exchange)
		relinks_drop(u, from, true);
	for (size_t i = 0; i < u->n_links; i++) {
		relink *l = &u->links[i];
		const char *a, *b;
		if (!l->path)
			continue;
		if (pw_relpath_beneath(l->path, to))
			a = to, b = from;
		else if (exchange && pw_relpath_beneath(l->path, from))
			a = from, b = to;
		else
			continue;
		size_t len = strlen(b) + strlen(l->path + strlen(a)) + 1;
		char *moved = malloc(len);
		if (moved)
			snprintf(moved, len, "%s%s", b, l->path + strlen(a));
		free(l->path);
		/* Out of memory: NULL, the relink is skipped (the restored copy stays one). */
		l->path = moved;
	}
}

/*
 * Makes the restored file at L->path a hard link again, as it was: to the inode it shared,
 * when that inode still has another name in the project and holds the original content
 * (unchanged since, or restored by this undo). Otherwise the restored copy stays. Run
 * after every row, so the other name's own restore has happened whatever the order.
 */
static void undo_relink(undo_run *u, const relink *l)
{
	ctx *x = u->x;
	struct stat st;
	if (!l->path || stat_beneath(x, l->path, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (st.st_dev == l->o->dev && st.st_ino == l->o->ino))
		return; /* gone again, or the same inode already */
	char other[PW_PATH_MAX], hex[PW_SHA256_HEX];
	if (pw_keep_other_name(x->k, (dev_t)l->o->dev, (ino_t)l->o->ino, l->path, other) < 0)
		return;
	_cleanup_close_ int ofd = open_beneath(x, other, O_RDONLY);
	if (ofd < 0 || hash_file(ofd, hex) < 0 || !streq(hex, l->o->blob))
		return; /* changed since: an independent copy is what the original was then */
	const char *name;
	_cleanup_close_ int pfd = open_parent(x, l->path, &name);
	if (pfd < 0)
		return;
	char tmp[64], proc[64];
	snprintf(tmp, sizeof(tmp), ".piworkfs-relink-%d", (int)getpid());
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", ofd);
	(void)unlinkat(pfd, tmp, 0);
	if (linkat(AT_FDCWD, proc, pfd, tmp, AT_SYMLINK_FOLLOW) < 0)
		return;
	if (renameat(pfd, tmp, pfd, name) < 0) {
		(void)unlinkat(pfd, tmp, 0);
		return;
	}
	act(u, "relink", l->path, other);
	stamp(x, l->path);
}

/* Puts O back at PATH. */
static int undo_restore(undo_run *u, const char *path, const crow *rw)
{
	const pw_orig_object *o = &rw->o;
	pw_orig_store *s = pw_keep_store(u->x->k);
	const char *name;
	if (!path[0]) { /* the root itself: metadata only */
		_cleanup_close_ int fd = openat(u->x->root, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
		int r = fd < 0 ? negative_errno() : apply_meta(fd, o, false);
		int q = push_dir(u, path, o);
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
		_cleanup_close_ int fd = openat(pfd, name,
						O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC |
							(exists ? 0 : O_CREAT | O_EXCL),
						0600);
		if (fd < 0)
			return negative_errno();
		r = fill_from_blob(s, o->blob, fd);
		if (r == 0)
			r = apply_meta(fd, o, true);
		if (r == 0 && o->nlink > 1)
			r = push_relink(u, path, o);
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
		_cleanup_close_ int fd = openat(pfd, name, O_PATH | O_NOFOLLOW | O_DIRECTORY |
								  O_CLOEXEC);
		r = fd < 0 ? negative_errno() : apply_meta(fd, o, false);
		int q = push_dir(u, path, o);
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

/* Was the object now at CUR changed outside the view after the view last changed it? */
static bool changed_outside(ctx *x, const char *cur)
{
	struct stat st;
	if (stat_beneath(x, cur, &st) < 0 || S_ISDIR(st.st_mode))
		return false;
	pthread_rwlock_rdlock(&x->fs->tree_lock);
	pw_inode *n = pw_inode_find_locked(x->fs, st.st_dev, st.st_ino);
	int64_t last = n ? atomic_load(&n->changed_ns) : 0;
	pthread_rwlock_unlock(&x->fs->tree_lock);
	int64_t ctime = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
	return last && ctime > last;
}

/* The undo changed PATH as the view would have: later changes outside are told apart
 * from it (changed_outside). */
static void stamp(ctx *x, const char *path)
{
	struct stat st;
	if (stat_beneath(x, path, &st) == 0)
		pw_keep_touched_ino(x->fs, st.st_dev, st.st_ino);
}

static void one_row(undo_run *u, const crow *rw)
{
	ctx *x = u->x;
	pw_keep *k = x->k;
	int r;
	if (rw->move) {
		act(u, rw->exchange ? "exchange" : "move-back", rw->path2, rw->path);
		if (u->dry)
			return;
		relinks_moved(u, rw->path, rw->path2, rw->exchange);
		if (!rw->exchange)
			(void)pw_keep_path_locked(k, x->root, rw->path, "undo");
		(void)pw_keep_move_locked(k, x->root, rw->path2, rw->path);
		r = undo_move(u, rw);
		if (r < 0 && r != -ENOENT)
			note_fail(u, rw->path2, "move-back", r);
		else
			stamp(x, rw->path);
		if (rw->o.present) {
			(void)pw_keep_path_locked(k, x->root, rw->path2, "undo");
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
	relinks_drop(u, rw->path, false);
	r = pw_keep_path_locked(k, x->root, rw->path, "undo");
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

static int changes_undo(pw_fs *fs, pw_view *v, const pw_peer *peer, json_t *params,
			json_t **ret, pw_ctl_fail *fail)
{
	_cleanup_(ctx_done) ctx x = { .root = -1 };
	if (peer->restricted) {
		fail->code = PW_RPC_REFUSED;
		fail->message = strdup("refused: an agent may list and diff changes but never undo "
				       "them; ask the person you work for to run `piworkfs undo`");
		return -1;
	}
	if (setup(&x, fs, v, fail) < 0)
		return -1;
	bool all = json_is_true(json_object_get(params, "all"));
	if (!all && !json_array_size(json_object_get(params, "paths")))
		return failf(&x, PW_RPC_INVALID_PARAMS, "name the paths to undo, or all");
	undo_run u = { .x = &x, .force = json_is_true(json_object_get(params, "force")),
		       .dry = json_is_true(json_object_get(params, "dry_run")),
		       .actions = json_array(), .failed = json_array() };
	json_t *conflicts = json_array();
	pw_orig_store *s = pw_keep_store(x.k);
	int64_t undo_cs = 0;
	pw_orig_lock(s);
	int r = load(&x, params, SCOPE_LATEST);
	/* Changed outside the view since: refused unless forced. */
	for (size_t i = 0; r == 0 && i < x.n_rows; i++) {
		const crow *rw = &x.rows[i];
		if (!rw->selected || rw->implicit)
			continue;
		char cur[PW_PATH_MAX];
		current_path(&x, i, rw->move ? rw->path2 : rw->path, cur);
		if (changed_outside(&x, cur))
			json_array_append_new(conflicts, json_string(cur));
	}
	bool refuse = json_array_size(conflicts) && !u.force;
	pw_orig_unlock(s);
	if (r < 0)
		goto out;
	if (!u.dry && !refuse) {
		r = pw_keep_begin(x.k, "undo", NULL, &undo_cs);
		if (r < 0) {
			r = failf(&x, PW_RPC_INTERNAL_ERROR, "cannot start a change set: %s",
				  strerror(-r));
			goto out;
		}
	}
	pw_orig_lock(s);
	for (size_t i = x.n_rows; !refuse && i-- > 0;)
		if (x.rows[i].selected)
			one_row(&u, &x.rows[i]);
	for (size_t i = 0; i < u.n_links; i++)
		undo_relink(&u, &u.links[i]);
	/* Directories' times last (in the order met: the earliest row's wins). */
	for (size_t i = 0; i < u.n_dirs; i++) {
		_cleanup_close_ int fd = open_beneath(&x, u.dirs[i].path, O_PATH);
		struct timespec tv[2] = { ts_of(u.dirs[i].atime_ns), ts_of(u.dirs[i].mtime_ns) };
		if (fd >= 0)
			(void)utimensat(fd, "", tv, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
	}
	pw_orig_unlock(s);
	if (!u.dry && !refuse)
		(void)pw_keep_begin(x.k, "after-undo", NULL, NULL);
	if (refuse) {
		char names[2048] = "";
		size_t i, used = 0;
		json_t *item;
		json_array_foreach(conflicts, i, item) {
			int n = snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "",
					 json_string_value(item));
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
	*ret = json_pack("{s:b,s:O,s:O,s:O,s:I}", "dry_run", u.dry, "actions", u.actions, "failed",
			 u.failed, "conflicts", conflicts, "changeset", (json_int_t)undo_cs);
	r = *ret ? 0 : failf(&x, PW_RPC_INTERNAL_ERROR, "out of memory");
out:
	for (size_t i = 0; i < u.n_dirs; i++)
		free(u.dirs[i].path);
	free(u.dirs);
	for (size_t i = 0; i < u.n_links; i++)
		free(u.links[i].path);
	free(u.links);
	json_decref(u.actions);
	json_decref(u.failed);
	json_decref(conflicts);
	return r < 0 ? -1 : 0;
}

/* ---- checkpoint, prune ----------------------------------------------------------------- */

static int changes_checkpoint(pw_fs *fs, pw_view *v, const pw_peer *peer, json_t *params,
			      json_t **ret, pw_ctl_fail *fail)
{
	_cleanup_(ctx_done) ctx x = { .root = -1 };
	if (peer->restricted) {
		fail->code = PW_RPC_REFUSED;
		fail->message = strdup("refused: only the person may start a checkpoint");
		return -1;
	}
	if (setup(&x, fs, v, fail) < 0)
		return -1;
	const char *name = json_string_value(json_object_get(params, "name"));
	int64_t id;
	int r = pw_keep_begin(x.k, "checkpoint", name, &id);
	if (r < 0)
		return failf(&x, PW_RPC_INTERNAL_ERROR, "checkpoint: %s", strerror(-r));
	return done(&x, json_pack("{s:I,s:s?}", "changeset", (json_int_t)id, "name", name), ret);
}

static int changes_prune(pw_fs *fs, pw_view *v, const pw_peer *peer, json_t *params,
			 json_t **ret, pw_ctl_fail *fail)
{
	_cleanup_(ctx_done) ctx x = { .root = -1 };
	if (peer->restricted) {
		fail->code = PW_RPC_REFUSED;
		fail->message = strdup("refused: an agent may not prune the originals");
		return -1;
	}
	if (setup(&x, fs, v, fail) < 0)
		return -1;
	json_t *age = json_object_get(params, "keep_s"), *size = json_object_get(params, "max_bytes");
	pw_orig_store *s = pw_keep_store(x.k);
	uint64_t freed = 0, bytes = 0, blobs = 0;
	pw_orig_lock(s);
	/* 0 means "nothing kept" here; the store reads 0 as its default, so ask for 1. */
	int64_t keep_ns = age ? (int64_t)json_integer_value(age) * 1000000000 : 0;
	uint64_t max = size ? (uint64_t)json_integer_value(size) : 0;
	if (age && keep_ns <= 0)
		keep_ns = 1;
	if (size && !max)
		max = 1;
	int r = pw_orig_prune(s, keep_ns, max, pw_keep_current(x.k), &freed);
	(void)pw_orig_total(s, &bytes, &blobs);
	pw_orig_unlock(s);
	if (r < 0)
		return failf(&x, PW_RPC_INTERNAL_ERROR, "prune: %s", strerror(-r));
	return done(&x,
		    json_pack("{s:i,s:I,s:I,s:I}", "removed", r, "freed", (json_int_t)freed,
			      "bytes", (json_int_t)bytes, "blobs", (json_int_t)blobs),
		    ret);
}

/* ---- the table ------------------------------------------------------------------------- */

static const pw_rpc_param changes_params[] = {
	{ "since", PW_RPC_T_STRING, false, 256 },
	{ "since_ns", PW_RPC_T_INT, false, 0 },
	{ "mode", PW_RPC_T_STRING, false, PW_MODE_NAME_MAX },
	{ "paths", PW_RPC_T_STRING_ARRAY, false, PATHS_MAX },
	{ "stat", PW_RPC_T_BOOL, false, 0 },
	{ "all", PW_RPC_T_BOOL, false, 0 },
	{ "dry_run", PW_RPC_T_BOOL, false, 0 },
	{ "force", PW_RPC_T_BOOL, false, 0 },
};

static const pw_rpc_param checkpoint_params[] = {
	{ "name", PW_RPC_T_STRING, false, 256 },
};

static const pw_rpc_param prune_params[] = {
	{ "keep_s", PW_RPC_T_INT, false, 0 },
	{ "max_bytes", PW_RPC_T_INT, false, 0 },
};

/* ---- off the server thread ------------------------------------------------------------
 *
 * An undo of a large change set, a diff of many files (a `diff -u` child each) or a long
 * history to load can take seconds, and they wait for the store's lock, which a first
 * change through the view holds across its copy. On the server thread that would stall
 * every other client (`status`, `mode`, a switch, the agent's requests) as long. So each
 * call runs on a thread of its own, with copies of what it needs (params, the peer), and
 * replies from the server thread when done: the thread wakes the server, whose tick
 * reaps it. At most JOBS_MAX run at once (more are answered PW_RPC_BUSY at once). The
 * store's lock orders them with each other and with the FUSE layer, as before.
 */

#define JOBS_MAX 4

typedef int (*changes_fn)(pw_fs *fs, pw_view *v, const pw_peer *peer, json_t *params,
			  json_t **ret, pw_ctl_fail *fail);

typedef struct job {
	pw_ctl_server *server;
	uint64_t client;
	json_t *id;     /* the deferred call's; set on the server thread after the start */
	changes_fn fn;
	pw_fs *fs;
	pw_view *view;
	pw_peer peer;   /* a copy: the client may be gone when the job ends */
	json_t *params; /* a deep copy: jansson's objects are not for two threads */
	int r;
	json_t *result;
	pw_ctl_fail fail;
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

/* Runs FN for the call C on a thread of its own, or here for a notification (no reply). */
static int run_job(pw_ctl_ctx *c, changes_fn fn, json_t **ret)
{
	changes_mod *m = c->data;
	json_t *id = pw_ctl_client_defer(c->client);
	if (!id) /* a notification: executed, never answered */
		return fn(m->fs, c->view, c->peer, c->params, ret, c->fail);
	uint64_t client = pw_ctl_client_serial(c->client);
	if (m->n_jobs >= JOBS_MAX) {
		pw_ctl_server_reply_error(c->server, client, id, PW_RPC_BUSY,
					  "busy: other calls over the originals are running; try "
					  "again when they are done",
					  NULL);
		return PW_CTL_DEFERRED;
	}
	job *j = calloc(1, sizeof(*j));
	if (j) {
		*j = (job){ .server = c->server, .client = client, .id = id, .fn = fn,
			    .fs = m->fs, .view = c->view, .peer = *c->peer };
		j->peer.reason = j->peer.answered_by = NULL;
		j->params = c->params ? json_deep_copy(c->params) : NULL;
	}
	if (!j || (c->params && !j->params) ||
	    pthread_create(&j->thread, NULL, job_main, j) != 0) {
		if (j) {
			j->id = NULL;
			job_free(j);
		}
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
		if (j->r == 0)
			pw_ctl_server_reply(s, j->client, TAKE_PTR(j->id), TAKE_PTR(j->result));
		else
			pw_ctl_server_reply_error(s, j->client, TAKE_PTR(j->id), j->fail.code,
						  j->fail.message ? j->fail.message : "failed",
						  TAKE_PTR(j->fail.data));
		job_free(j);
	}
	return -1; /* a job that ends wakes the server */
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
	static int m_##name(pw_ctl_ctx *c, json_t **ret)                                         \
	{                                                                                          \
		return run_job(c, changes_##name, ret);                                           \
	}
HANDLER(list)
HANDLER(diff)
HANDLER(undo)
HANDLER(prune)
HANDLER(checkpoint)
#undef HANDLER

static const pw_ctl_method methods[] = {
	{ "changes.list", m_list, changes_params, ELEMENTSOF(changes_params), NULL },
	{ "changes.diff", m_diff, changes_params, ELEMENTSOF(changes_params), NULL },
	{ "changes.undo", m_undo, changes_params, ELEMENTSOF(changes_params),
	  "refused: an agent may list and diff changes but never undo them; ask the person you "
	  "work for to run `piworkfs undo`" },
	{ "changes.prune", m_prune, prune_params, ELEMENTSOF(prune_params),
	  "refused: an agent may not prune the originals" },
	{ "checkpoint", m_checkpoint, checkpoint_params, ELEMENTSOF(checkpoint_params),
	  "refused: only the person may start a checkpoint" },
};

const pw_ctl_module pw_changes_module = {
	.name = "changes",
	.methods = methods,
	.n_methods = ELEMENTSOF(methods),
	.init = changes_init,
	.fini = changes_fini,
	.tick = changes_tick,
};
