/* SPDX-License-Identifier: MIT */
/*
 * changes.diff: git's diff of the changes in scope (history.h), from each original's blob
 * to what its change set left, with `diff -u` run as a child per file, git's headers
 * (gitdiff.h) and a binary patch (binpatch.h) where no JSON string carries the content.
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

extern char **environ;

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
	int fd = pw_undo_hist_open_beneath(x, a->live, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
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
		    !pw_undo_hist_path_under(out, m->path2))
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

int pw_undo_changes_diff(const pw_undo_call *call, json_t *params, json_t **ret, pw_undo_fail *fail)
{
	_cleanup_(pw_undo_hist_ctx_done) ctx x = {.root = -1};
	bool stat_only = json_is_true(json_object_get(params, "stat"));
	int r = pw_undo_hist_read(&x, call, fail, params, NULL, NULL);
	/* The agent gets an empty diff instead: an error would read the same for a hidden
	 * path, but its tools expect none. */
	if (r == 0 && !x.hide)
		r = pw_undo_hist_check_paths_changed(&x, false);
	if (r < 0)
		return r;
	pw_undo_orig_store *s = pw_undo_keep_store(x.k);
	/* Where each row's original was when the scope began. */
	char(*origins)[PW_PATH_MAX] = calloc(x.n_rows + 1, sizeof(*origins));
	if (!origins)
		return pw_undo_hist_failf(&x, PW_RPC_INTERNAL_ERROR, "out of memory");
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
		pw_undo_hist_after_of(&x, i, opath, x.end_cs, &aft);
		if (pw_undo_hist_saved_over(&x, i, aft.path) ||
		    pw_undo_hist_agent_hidden(&x, aft.path) ||
		    pw_undo_hist_agent_hidden(&x, origins[i]))
			continue;
		const char *kind = pw_undo_hist_classify(&x, rw, &aft);
		_cleanup_(pw_undo_hist_state_done) state now;
		pw_undo_hist_state_of(&x, &aft, &now);
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
		if (!rw->selected || !rw->move || rw->exchange || pw_undo_hist_temp_move(&x, i))
			continue;
		char origin[PW_PATH_MAX];
		origin_path(&x, i, rw->path, origin);
		after aft;
		pw_undo_hist_after_of(&x, i, rw->path2, x.end_cs, &aft);
		if (files_have(files, aft.path, origin) ||
		    pw_undo_hist_agent_hidden(&x, aft.path) ||
		    pw_undo_hist_agent_hidden(&x, origin) ||
		    pw_undo_hist_saved_over(&x, i, aft.path))
			continue;
		_cleanup_(pw_undo_hist_state_done) state now;
		pw_undo_hist_state_of(&x, &aft, &now);
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
	return pw_undo_hist_done(
	    &x,
	    json_pack("{s:o,s:b}", "files", files ? files : json_array(), "truncated", d.truncated),
	    ret);
}
