/* SPDX-License-Identifier: MIT */
/* The harness of test_keep.c and test_changes.c (undo_harness.h). */
#include "undo_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "inode.h"
#include "object.h"
#include "proto.h"
#include "req.h"
#include "undo/changes.h"
#include "undo/originals.h"
#include "../lib/testdir.h"

uh_world W;

static int64_t now_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void put(const char *rel, const char *text)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", W.project, rel);
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f, "%s: %s", p, strerror(errno));
	cr_assert_eq(fputs(text, f) >= 0, true);
	cr_assert_eq(fclose(f), 0);
}

static void dir(const char *rel)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", W.project, rel);
	cr_assert_eq(mkdir(p, 0755), 0, "%s: %s", p, strerror(errno));
}

void uh_setup(const char *name, const char *mode)
{
	memset(&W, 0, sizeof(W));
	W.fs.root_fd = -1;
	char base[64];
	snprintf(base, sizeof(base), "pw-test-%s", name);
	testdir_make(W.tmp, sizeof(W.tmp), base);
	snprintf(W.project, sizeof(W.project), "%s/project", W.tmp);
	snprintf(W.state, sizeof(W.state), "%s/state", W.tmp);
	snprintf(W.db, sizeof(W.db), "%s/state.db", W.state);
	snprintf(W.mountpoint, sizeof(W.mountpoint), "%s/view", W.tmp);
	cr_assert_eq(mkdir(W.project, 0755), 0);
	cr_assert_eq(mkdir(W.state, 0700), 0);
	cr_assert_eq(mkdir(W.mountpoint, 0755), 0);
	put("README.md", "# demo\n");
	dir("src");
	put("src/x.c", "int x;\n");
	dir("docs");
	put("docs/arch.md", "one\ntwo\n");
	dir("old");
	put("old/f.txt", "f\n");

	/* The FUSE layer's state the room uses, as pw_fs_new makes it (without a session). */
	W.fs.project = strdup(W.project);
	W.fs.mountpoint = strdup(W.mountpoint);
	W.fs.owner_uid = getuid();
	cr_assert_eq(pw_inode_table_init(&W.fs), 0);
	W.fs.root_fd = open(W.project, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(W.fs.root_fd, 0);
	struct stat st;
	cr_assert_eq(fstat(W.fs.root_fd, &st), 0);
	W.fs.root_dev = st.st_dev;
	pw_inode_set_root(&W.fs, st.st_dev, st.st_ino);

	pw_load_opts lo = {.bundled_dir = SOURCE_MODES};
	cr_assert_eq(pw_modeset_load(&lo, &W.ms), 0);
	W.started_ns = now_ns(CLOCK_REALTIME);
	/* The rows wait for the flusher as in a view (commits are the store's business); the
	 * reads below commit what is deferred first. */
	pw_undo_opts o = {.db_path = W.db, .project = W.project, .mountpoint = W.mountpoint};
	cr_assert_eq(pw_undo_new(&o, &W.k), 0);
	pw_fs_set_undo(&W.fs, W.k);
	uh_mode(mode, "mount", true);
}

void uh_teardown(void)
{
	if (W.fs.nodes)
		pw_fs_set_undo(&W.fs, NULL);
	pw_undo_free(W.k);
	W.k = NULL;
	pw_inode_table_free(&W.fs);
	if (W.fs.root_fd >= 0)
		close(W.fs.root_fd);
	free(W.fs.project);
	free(W.fs.mountpoint);
	pw_modeset_free(W.ms);
	if (W.tmp[0])
		testdir_remove(W.tmp);
	memset(&W, 0, sizeof(W));
}

void uh_mode(const char *mode, const char *reason, bool new_set)
{
	pw_policy *p = NULL;
	cr_assert_eq(pw_policy_compile(W.ms, mode, &p), 0, "mode %s", mode);
	pw_undo_policy_changed(W.k, p, reason, new_set);
	pw_policy_unref(p);
}

/* ---- the view's side ----------------------------------------------------------------------- */

/* PATH's parent's path into DIR and its last component (a pointer into PATH). */
static const char *split(const char *path, char dir[PW_PATH_MAX])
{
	const char *slash = strrchr(path, '/');
	snprintf(dir, PW_PATH_MAX, "%.*s", slash ? (int)(slash - path) : 0, path);
	return slash ? slash + 1 : path;
}

static int open_dir(const char *path)
{
	int fd = pw_openat_beneath(&W.fs, path, O_PATH | O_DIRECTORY, 0);
	cr_assert_geq(fd, 0, "open %s: %s", path, strerror(-fd));
	return fd;
}

/* A lookup of NAME in PARENT (open at PFD), as pw_do_lookup registers one. */
static pw_inode *learn(pw_inode *parent, int pfd, const char *name, bool made)
{
	pw_object o;
	cr_assert_eq(pw_object_at(pfd, name, AT_SYMLINK_NOFOLLOW, &o), 0, "lookup %s", name);
	pw_inode *n = pw_inode_learn(&W.fs, parent, name, &o, made, NULL);
	cr_assert_not_null(n);
	return n;
}

pw_inode *uh_lookup(const char *path)
{
	pw_inode *n = pw_inode_root(&W.fs);
	char walked[PW_PATH_MAX] = "", buf[PW_PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *save = NULL, *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		_cleanup_close_ int pfd = open_dir(walked);
		n = learn(n, pfd, c, false);
		size_t len = strlen(walked);
		snprintf(walked + len, sizeof(walked) - len, "%s%s", len ? "/" : "", c);
	}
	return n;
}

/* A request about NAME in PARENT, as the handlers start one. */
#define NAME_REQ(r, parent, name)                                                                  \
	PW_REQ(r);                                                                                 \
	r.fs = &W.fs;                                                                              \
	pw_req_name(&r, parent, name)

/* Makes PATH as the view's create and mkdir do: the undo record first, then MAKE(PFD, NAME,
 * ARG) (0 or an errno; a failure withdraws the record), then the name learned as made. */
static void make_name(const char *path, pw_op op, int (*make)(int, const char *, const char *),
		      const char *arg)
{
	char d[PW_PATH_MAX];
	const char *name = split(path, d);
	pw_inode *parent = uh_lookup(d);
	_cleanup_close_ int pfd = open_dir(d);
	NAME_REQ(r, parent, name);
	int64_t kept = pw_undo_keep_name(&r, pfd, op);
	cr_assert_geq(kept, 0, "keep the making of %s: %s", path, strerror((int)-kept));
	int e = make(pfd, name, arg);
	if (e)
		pw_undo_keep_failed(&W.fs, kept);
	cr_assert_eq(e, 0, "make %s: %s", path, strerror(e));
	pw_undo_keep_touched(&W.fs, learn(parent, pfd, name, true));
}

static int create_file(int pfd, const char *name, const char *text)
{
	int fd = openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return errno;
	size_t len = strlen(text);
	cr_assert_eq(write(fd, text, len), (ssize_t)len, "write %s", name);
	close(fd);
	return 0;
}

static int make_dir(int pfd, const char *name, const char *unused)
{
	(void)unused;
	return mkdirat(pfd, name, 0755) < 0 ? errno : 0;
}

void uh_create(const char *path, const char *text)
{
	make_name(path, PW_OP_CREATE, create_file, text);
}

int uh_try_write(const char *path, const char *text)
{
	pw_inode *n = uh_lookup(path);
	PW_REQ(r);
	r.fs = &W.fs;
	int e = pw_undo_keep_node(&r, n, PW_OP_OPEN_WRITE);
	if (e < 0)
		return e;
	_cleanup_close_ int fd = pw_openat_beneath(&W.fs, path, O_WRONLY | O_TRUNC, 0);
	cr_assert_geq(fd, 0, "open %s: %s", path, strerror(-fd));
	size_t len = strlen(text);
	cr_assert_eq(write(fd, text, len), (ssize_t)len);
	pw_undo_keep_touched(&W.fs, n);
	return 0;
}

void uh_write(const char *path, const char *text)
{
	int e = uh_try_write(path, text);
	cr_assert_eq(e, 0, "keep before writing %s: %s", path, strerror(-e));
}

void uh_mkdir(const char *path)
{
	make_name(path, PW_OP_MKDIR, make_dir, NULL);
}

static void remove_name(const char *path, bool is_dir)
{
	char d[PW_PATH_MAX];
	const char *name = split(path, d);
	pw_inode *parent = uh_lookup(d);
	(void)uh_lookup(path);
	_cleanup_close_ int pfd = open_dir(d);
	struct stat st;
	cr_assert_eq(fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW), 0);
	NAME_REQ(r, parent, name);
	int64_t kept = pw_undo_keep_name(&r, pfd, is_dir ? PW_OP_RMDIR : PW_OP_UNLINK);
	cr_assert_geq(kept, 0, "keep removal of %s: %s", path, strerror((int)-kept));
	int e = unlinkat(pfd, name, is_dir ? AT_REMOVEDIR : 0) < 0 ? errno : 0;
	if (e)
		pw_undo_keep_failed(&W.fs, kept);
	cr_assert_eq(e, 0, "remove %s: %s", path, strerror(e));
	pw_undo_keep_touched_ino(&W.fs, st.st_dev, st.st_ino);
	pw_inode_unlinked(&W.fs, parent, name, st.st_dev, st.st_ino);
}

void uh_unlink(const char *path)
{
	remove_name(path, false);
}

void uh_rmdir(const char *path)
{
	remove_name(path, true);
}

void uh_rename(const char *from, const char *to)
{
	char fd_[PW_PATH_MAX], td[PW_PATH_MAX];
	const char *name = split(from, fd_), *newname = split(to, td);
	pw_inode *parent = uh_lookup(fd_), *np = uh_lookup(td);
	(void)uh_lookup(from);
	_cleanup_close_ int pfd = open_dir(fd_);
	_cleanup_close_ int npfd = open_dir(td);
	struct stat src, dst;
	cr_assert_eq(fstatat(pfd, name, &src, AT_SYMLINK_NOFOLLOW), 0);
	bool have_dst = fstatat(npfd, newname, &dst, AT_SYMLINK_NOFOLLOW) == 0;
	NAME_REQ(r, parent, name);
	int64_t kept = pw_undo_keep_rename(&r, pfd, np, npfd, newname, 0);
	cr_assert_geq(kept, 0, "keep rename %s: %s", from, strerror((int)-kept));
	int e = renameat(pfd, name, npfd, newname) < 0 ? errno : 0;
	if (e)
		pw_undo_keep_failed(&W.fs, kept);
	cr_assert_eq(e, 0, "rename %s -> %s: %s", from, to, strerror(e));
	pw_undo_keep_touched_ino(&W.fs, src.st_dev, src.st_ino);
	if (have_dst)
		pw_undo_keep_touched_ino(&W.fs, dst.st_dev, dst.st_ino);
	pw_inode_renamed(&W.fs, parent, name, np, newname, src.st_dev, src.st_ino, false,
			 have_dst ? dst.st_dev : 0, have_dst ? dst.st_ino : 0);
}

void uh_outside_write(const char *path, const char *text)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", W.project, path);
	struct stat st;
	cr_assert_eq(stat(p, &st), 0);
	pw_inode_lock_read(&W.fs);
	pw_inode *n = pw_inode_find_locked(&W.fs, st.st_dev, st.st_ino);
	int64_t view_ns = n ? atomic_load(&n->undo.changed_ns) : 0;
	pw_inode_unlock(&W.fs);
	/* The file's ctime comes from the coarse clock: the write counts as later than the
	 * view's once its ctime says so. Written again until it does (a bounded wait). */
	int64_t t0 = now_ns(CLOCK_MONOTONIC), ctime = 0;
	do {
		FILE *f = fopen(p, "w");
		cr_assert_not_null(f);
		fputs(text, f);
		cr_assert_eq(fclose(f), 0);
		cr_assert_eq(stat(p, &st), 0);
		ctime = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
	} while (ctime <= view_ns && now_ns(CLOCK_MONOTONIC) - t0 < 60ll * 1000000000);
	cr_assert_gt(ctime, view_ns, "the outside write's ctime never passed the view's change");
}

char *uh_read(const char *path)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", W.project, path);
	FILE *f = fopen(p, "r");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	cr_assert_not_null(m);
	int c;
	while ((c = fgetc(f)) != EOF)
		fputc(c, m);
	fclose(f);
	fclose(m);
	return buf;
}

bool uh_exists(const char *path)
{
	char p[512];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", W.project, path);
	return lstat(p, &st) == 0;
}

/* ---- the store as recorded ----------------------------------------------------------------- */

typedef struct read_state {
	uh_row *rows;
	uh_set *sets;
	size_t n, max;
} read_state;

static int read_set(const pw_undo_orig_changeset *c, void *u)
{
	read_state *rs = u;
	if (rs->sets && rs->n < rs->max) {
		uh_set *s = &rs->sets[rs->n];
		*s = (uh_set){.id = c->id};
		snprintf(s->reason, sizeof(s->reason), "%s", c->reason ? c->reason : "");
		snprintf(s->name, sizeof(s->name), "%s", c->name ? c->name : "");
		snprintf(s->mode, sizeof(s->mode), "%s", c->mode ? c->mode : "");
	}
	if (rs->sets)
		rs->n++;
	return 0;
}

static int read_row(const pw_undo_orig_rec *r, void *u)
{
	read_state *rs = u;
	if (rs->rows && rs->n < rs->max) {
		uh_row *o = &rs->rows[rs->n];
		*o = (uh_row){.id = r->id,
			      .cs = r->changeset,
			      .move = r->action == PW_UNDO_ORIG_MOVE,
			      .exchange = r->exchange,
			      .implicit = r->implicit,
			      .present = r->o.present,
			      .mode = r->o.mode,
			      .src_ino = r->src_ino};
		snprintf(o->path, sizeof(o->path), "%s", r->path);
		snprintf(o->path2, sizeof(o->path2), "%s", r->path2 ? r->path2 : "");
		snprintf(o->op, sizeof(o->op), "%s", r->op ? r->op : "");
		memcpy(o->blob, r->o.blob, PW_SHA256_HEX);
	}
	if (rs->rows)
		rs->n++;
	return 0;
}

static size_t read_store(read_state *rs)
{
	pw_undo_orig_store *s = pw_undo_keep_store(W.k);
	pw_undo_orig_lock(s);
	int r = pw_undo_orig_read(s, W.project, read_set, read_row, rs);
	pw_undo_orig_unlock(s);
	cr_assert_eq(r, 0, "read the store: %s", strerror(-r));
	cr_assert_leq(rs->n, rs->max, "more records than the test reads");
	return rs->n;
}

size_t uh_rows(uh_row *out, size_t max)
{
	return read_store(&(read_state){.rows = out, .max = max});
}

size_t uh_sets(uh_set *out, size_t max)
{
	return read_store(&(read_state){.sets = out, .max = max});
}

const uh_row *uh_row_at(const uh_row *rows, size_t n, int64_t cs, const char *path)
{
	const uh_row *found = NULL;
	for (size_t i = 0; i < n; i++)
		if (rows[i].cs == cs && !rows[i].implicit && !strcmp(rows[i].path, path)) {
			cr_assert_null(found, "two rows of change set %lld at %s", (long long)cs,
				       path);
			found = &rows[i];
		}
	return found;
}

char *uh_blob(const char *hash)
{
	char *p = pw_undo_orig_blob_path(pw_undo_keep_store(W.k), hash);
	cr_assert_not_null(p);
	FILE *f = fopen(p, "r");
	cr_assert_not_null(f, "blob %s", p);
	free(p);
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	int c;
	while ((c = fgetc(f)) != EOF)
		fputc(c, m);
	fclose(f);
	fclose(m);
	return buf;
}

/* ---- the methods --------------------------------------------------------------------------- */

pw_undo_call uh_call(bool restricted)
{
	return (pw_undo_call){.fs = &W.fs,
			      .project = W.project,
			      .mountpoint = W.mountpoint,
			      .started_ns = W.started_ns,
			      .restricted = restricted};
}

typedef int (*call_fn)(const pw_undo_call *call, json_t *params, json_t **ret, pw_undo_fail *fail);

/* The function behind each of the module's methods (changes.c's HANDLER lines). */
static call_fn fn_of(const char *method)
{
	static const struct {
		const char *name;
		call_fn fn;
	} fns[] = {{"changes.list", pw_undo_changes_list},
		   {"changes.diff", pw_undo_changes_diff},
		   {"changes.undo", pw_undo_changes_undo},
		   {"changes.prune", pw_undo_changes_prune},
		   {"checkpoint", pw_undo_changes_checkpoint}};
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		if (!strcmp(fns[i].name, method))
			return fns[i].fn;
	return NULL;
}

static void fail_with(uh_reply *out, int code, const char *message)
{
	out->code = code;
	snprintf(out->message, sizeof(out->message), "%s", message ? message : "");
}

uh_reply uh_rpc_line(const char *line, bool restricted)
{
	uh_reply out = {0};
	pw_rpc_request req = {0};
	pw_rpc_error err = {0};
	int r = pw_rpc_parse_request(line, strlen(line), &req, &err);
	cr_assert_neq(r, -ENOMEM);
	if (r < 0) {
		fail_with(&out, err.code, err.message);
		pw_rpc_request_done(&req);
		return out;
	}
	const pw_ctl_method *m = NULL;
	for (size_t i = 0; i < pw_undo_changes_module.n_methods; i++)
		if (!strcmp(pw_undo_changes_module.methods[i].name, req.method))
			m = &pw_undo_changes_module.methods[i];
	char *msg = NULL;
	if (!m) {
		fail_with(&out, PW_RPC_METHOD_NOT_FOUND, "method not found");
	} else if (m->agent_refusal && restricted) {
		fail_with(&out, PW_RPC_REFUSED, m->agent_refusal);
	} else if (pw_rpc_params_check(req.params, m->params, m->n_params, &msg) < 0) {
		fail_with(&out, PW_RPC_INVALID_PARAMS, msg);
	} else {
		call_fn fn = fn_of(m->name);
		cr_assert_not_null(fn, "%s: no function known for the module's method", m->name);
		pw_undo_call call = uh_call(restricted);
		pw_undo_fail fail = {0};
		if (fn(&call, req.params, &out.result, &fail) < 0) {
			cr_assert_null(out.result, "a failure with a result");
			cr_assert_neq(fail.code, 0, "a failure without a code");
			fail_with(&out, fail.code, fail.message);
			out.data = fail.data;
		} else {
			cr_assert_not_null(out.result, "a success without a result");
			cr_assert_null(fail.message, "a success with a failure's message");
		}
		free(fail.message);
	}
	free(msg);
	pw_rpc_request_done(&req);
	return out;
}

uh_reply uh_rpc(const char *method, const char *params)
{
	char line[4096];
	snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"%s\"%s%s}", method,
		 params ? ",\"params\":" : "", params ? params : "");
	return uh_rpc_line(line, false);
}

json_t *uh_ok(const char *method, const char *params)
{
	uh_reply r = uh_rpc(method, params);
	cr_assert_eq(r.code, 0, "%s %s: %d %s", method, params ? params : "", r.code, r.message);
	json_decref(r.data);
	return r.result;
}

void uh_reply_done(uh_reply *r)
{
	json_decref(r->result);
	json_decref(r->data);
	*r = (uh_reply){0};
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* LINES (N of them, each malloc'd) sorted, joined with '\n' after each; frees them. */
static char *join_sorted(char **lines, size_t n)
{
	qsort(lines, n, sizeof(*lines), cmp_str);
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	for (size_t i = 0; i < n; i++) {
		fprintf(m, "%s\n", lines[i]);
		free(lines[i]);
	}
	fclose(m);
	return buf;
}

char *uh_kinds(json_t *res)
{
	char *lines[256];
	size_t n = 0, i, j;
	json_t *s, *c;
	json_array_foreach(json_object_get(res, "changesets"), i, s)
	{
		json_array_foreach(json_object_get(s, "changes"), j, c)
		{
			const char *kind = json_string_value(json_object_get(c, "kind"));
			const char *path = json_string_value(json_object_get(c, "path"));
			const char *to = json_string_value(json_object_get(c, "to"));
			cr_assert_lt(n, 256);
			cr_assert_geq(asprintf(&lines[n++], "%s %s%s%s", kind, path,
					       to ? " -> " : "", to ? to : ""),
				      0);
		}
	}
	return join_sorted(lines, n);
}

char *uh_summary(json_t *res)
{
	char *buf = NULL;
	size_t len = 0, i;
	FILE *m = open_memstream(&buf, &len);
	json_t *a;
	json_array_foreach(json_object_get(res, "summary"), i, a)
	{
		const char *from = json_string_value(json_object_get(a, "from"));
		fprintf(m, "%s %s%s%s\n", json_string_value(json_object_get(a, "action")),
			from ? from : "", from ? " -> " : "",
			json_string_value(json_object_get(a, "path")));
	}
	fclose(m);
	return buf;
}
