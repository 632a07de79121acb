/* SPDX-License-Identifier: MIT */
/*
 * The plans of a view: files and records together (plan_set.h).
 */
#include "plan_set.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pw_limits.h"
#include "util.h"

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

int pw_plans_open_root(pw_view *v)
{
	int fd = open(pw_view_info_of(v)->project, O_PATH | O_DIRECTORY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

/* Reads at most PW_PLAN_FILE_MAX bytes of PATH; *ret_total is the file's size. */
int pw_plans_read(int root, const char *path, char **ret, size_t *ret_len, size_t *ret_total)
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

void pw_plans_hash(const char *buf, size_t len, char out[PW_SHA256_HEX])
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
int pw_plans_replace_file(int root, const char *path, const char *text)
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

static void plan_info_done(pw_plan_info *p)
{
	free(p->name);
	free(p->path);
	pw_plan_free(p->doc);
	free(p->rec.path);
	free(p->rec.status);
	free(p->rec.hash);
	free(p->rec.approved_by);
	pw_task_records_free(p->done, p->n_done);
	*p = (pw_plan_info){0};
}

bool pw_plan_info_approved(const pw_plan_info *p)
{
	return streq_ptr(p->rec.status, "approved");
}

/* Is task N (1-based) marked done? */
const pw_task_record *pw_plan_info_task_done(const pw_plan_info *p, int64_t n)
{
	for (size_t i = 0; i < p->n_done; i++)
		if (p->done[i].task == n)
			return &p->done[i];
	return NULL;
}

size_t pw_plan_info_total(const pw_plan_info *p)
{
	return p->doc ? p->doc->n_tasks : 0;
}

size_t pw_plan_info_done_count(const pw_plan_info *p)
{
	size_t n = 0;

	for (size_t i = 1; i <= pw_plan_info_total(p); i++)
		n += pw_plan_info_task_done(p, (int64_t)i) != NULL;
	return n;
}

/* The first task not done (1-based), 0 when none is left. */
size_t pw_plan_info_next(const pw_plan_info *p)
{
	for (size_t i = 1; i <= pw_plan_info_total(p); i++)
		if (!pw_plan_info_task_done(p, (int64_t)i))
			return i;
	return 0;
}

const char *pw_plan_info_status(const pw_plan_info *p)
{
	size_t done = pw_plan_info_done_count(p), total = pw_plan_info_total(p);

	if (!pw_plan_info_approved(p))
		return "draft";
	if (total > 0 && done == total)
		return "done";
	return done > 0 ? "in_progress" : "approved";
}

/* Fills P for the plan file PATH (NAME its stem): the file, and what STATE holds. */
static int plan_info_load(pw_view *v, int root, const char *path, const char *name,
			  const pw_plan_record *rec, pw_plan_info *p)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, total = 0;
	pw_state *st;
	int r;

	*p = (pw_plan_info){.name = strdup(name), .path = strdup(path)};
	if (!p->name || !p->path)
		return -ENOMEM;
	if (rec) {
		p->rec.path = strdup(rec->path);
		p->rec.status = pw_dup_or_null(rec->status);
		p->rec.hash = pw_dup_or_null(rec->hash);
		p->rec.approved_by = pw_dup_or_null(rec->approved_by);
		p->rec.approved_ns = rec->approved_ns;
		p->rec.updated_ns = rec->updated_ns;
	}
	r = pw_plans_read(root, path, &buf, &len, &total);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		p->read_err = r;
	else {
		pw_plans_hash(buf, len, p->hash);
		r = pw_plan_parse(buf, len, total, &p->doc);
		if (r < 0)
			return r;
	}
	st = pw_view_lock_state(v);
	r = st ? pw_state_plan_tasks(st, pw_view_info_of(v)->project, path, &p->done, &p->n_done)
	       : 0;
	pw_view_unlock_state(v);
	return r;
}

/* ---- every plan ---------------------------------------------------------------------- */

void pw_plan_set_done(pw_plan_set *s)
{
	PW_FREE_ARRAY(s->v, s->n, plan_info_done);
	free(s->dir);
	*s = (pw_plan_set){0};
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
	return strcmp(((const pw_plan_info *)a)->name, ((const pw_plan_info *)b)->name);
}

static bool set_has(const pw_plan_set *s, const char *path)
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

static int set_add(pw_view *v, int root, pw_plan_set *s, const char *path,
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
int pw_plan_set_load(pw_view *v, pw_plan_set *s)
{
	_cleanup_close_ int root = pw_plans_open_root(v);
	pw_plan_record *recs = NULL;
	size_t n_recs = 0;
	pw_state *st;
	DIR *d = NULL;
	int r = 0, dfd;

	*s = (pw_plan_set){.dir = plans_dir(v)};
	if (!s->dir)
		return -ENOMEM;
	if (root < 0)
		return root;
	st = pw_view_lock_state(v);
	if (st)
		r = pw_state_plans(st, pw_view_info_of(v)->project, &recs, &n_recs);
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
const pw_plan_info *pw_plan_set_active(const pw_plan_set *s)
{
	const pw_plan_info *best = NULL;

	for (size_t i = 0; i < s->n; i++) {
		const pw_plan_info *p = &s->v[i];
		if (pw_plan_info_approved(p) && !streq(pw_plan_info_status(p), "done") &&
		    (!best || p->rec.approved_ns > best->rec.approved_ns))
			best = p;
	}
	return best;
}

const pw_plan_info *pw_plan_set_find(const pw_plan_set *s, const char *name)
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
