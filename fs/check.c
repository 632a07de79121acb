/* SPDX-License-Identifier: MIT */
/*
 * The one place the filesystem asks the policy, and the one function every denial passes
 * through (deny()): it counts the denial, queues an audit event (never blocking), and
 * returns the errno the operation fails with.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/audit.h"
#include "check.h"
#include "inode.h"
#include "resolve.h"
#include "pidns.h"
#include "procfs.h"
#include "util.h"

/* The requesting process's name is read now (pw_proc_who_cached): a short-lived process
 * (touch) is gone by the time the audit writer could look (docs/AUDIT.md). */

/*
 * The requesting process's PID namespaces (pidns.h), read now, while it waits for our
 * answer: the agent socket delivers a denial only to subscribers in the same sandbox, which
 * it can no longer tell once the process is gone. Not cached: a recycled pid must never
 * carry another process's namespace. NULL when unknown (then only operator subscribers get
 * the denial: unknown fails closed).
 */
static const char *caller_pidns(pid_t pid)
{
	static _Thread_local char desc[PW_PIDNS_DESC_MAX];
	return pw_pidns_describe(pid, desc, sizeof(desc)) < 0 ? NULL : desc;
}

/* Queues an audit event for a decision; never blocks (audit.h). PATH2 is the other name
 * of a rename or link, or NULL. */
static void record(pw_req *r, pw_op op, const char *path, const char *path2, const pw_decision *d)
{
	uint64_t gen;
	const pw_policy *p = pw_req_policy(r, &gen);
	const struct fuse_ctx *ctx = r->req ? fuse_req_ctx(r->req) : NULL;
	/* A denial names the process by its program and pid (the thread group leader's), not
	 * the thread that asked (a runtime's worker); that thread's name goes beside it, for
	 * `log --json`. */
	const pw_proc_who *who = d->allowed || !ctx ? NULL : pw_proc_who_cached(ctx->pid);
	pw_audit_event ev = {
	    .mode = pw_policy_mode_name(p),
	    .generation = gen,
	    .op = op,
	    .path = path,
	    .path2 = path2,
	    .err = d->err,
	    .rule = d->rule,
	    .reason = d->reason,
	    .pid = who	 ? who->tgid
		   : ctx ? ctx->pid
			 : 0,
	    .uid = ctx ? ctx->uid : 0,
	    .comm = who ? who->program : NULL,
	    .thread = ctx ? pw_proc_who_thread(who, ctx->pid) : NULL,
	    .pidns = d->allowed || !ctx ? NULL : caller_pidns(ctx->pid),
	};
	pw_audit_submit(r->fs->audit, &ev);
}

/* Records an allowed decision when the audit log is configured to keep allowed mutations
 * (the writer drops them otherwise before they cost anything more). */
static void allowed(pw_req *r, pw_op op, const char *path, const char *path2, const pw_decision *d)
{
	if (r->fs->audit)
		record(r, op, path, path2, d);
}

static int deny2(pw_req *r, pw_op op, const char *path, const char *path2, const pw_decision *d)
{
	atomic_fetch_add(&r->fs->denied, 1);
	if (r->fs->audit)
		record(r, op, path, path2, d);
	return -d->err;
}

static int deny(pw_req *r, pw_op op, const char *path, const pw_decision *d)
{
	return deny2(r, op, path, NULL, d);
}

/* The path of NAME in PARENT into TMP, or R's own (built once) when it is R's name. */
static int name_path(pw_req *r, pw_inode *parent, const char *name, pw_path *tmp, const char **ret)
{
	if (pw_req_is_name(r, parent, name))
		return pw_req_path(r, ret);
	int e = pw_child_path(r->fs, parent, name, tmp);
	if (e == 0)
		*ret = tmp->s;
	return e;
}

/*
 * Decides and records under the request's one reference (req.h): a decision points into its
 * policy (d.rule and the mode name are the policy's), so the reference is held until the
 * denial is queued (pw_audit_submit copies the strings) and the reply is sent, and the
 * event carries the mode name and the generation of that same policy.
 */
int pw_check_tree(pw_req *r, pw_inode *parent, const char *name)
{
	PW_PATH_DECLARE(tmp);
	const char *path;
	int e = name_path(r, parent, name, &tmp, &path);
	if (e < 0)
		return e;
	pw_decision d;
	if (!pw_policy_may_write_tree(pw_req_policy(r, NULL), path, &d))
		e = deny(r, PW_OP_RENAME, path, &d);
	return e;
}

/* Operations that make a new name: see pw_policy_decide_new_name. */
static bool makes_name(pw_op op)
{
	return op == PW_OP_CREATE || op == PW_OP_MKNOD || op == PW_OP_MKDIR ||
	       op == PW_OP_SYMLINK || op == PW_OP_LINK;
}

int pw_check_child(pw_req *r, pw_op op, bool is_dir)
{
	const char *path;
	int e = pw_req_path(r, &path);
	if (e < 0)
		return e;
	const pw_policy *p = pw_req_policy(r, NULL);
	pw_decision d;
	if (makes_name(op))
		pw_policy_decide_new_name(p, op, path, is_dir, &d);
	else
		pw_policy_decide(p, op, path, is_dir, &d);
	if (!d.allowed)
		return deny(r, op, path, &d);
	allowed(r, op, path, NULL, &d);
	return 0;
}

int pw_check_two(pw_req *r, pw_op op, pw_inode *np, const char *newname, bool is_dir)
{
	PW_PATH_DECLARE(tmp);
	const char *path, *path2;
	int e = pw_req_path(r, &path);
	if (e == 0)
		e = name_path(r, np, newname, &tmp, &path2);
	if (e < 0)
		return e;
	const pw_policy *p = pw_req_policy(r, NULL);
	pw_decision d;
	pw_policy_decide(p, op, path, is_dir, &d);
	if (d.allowed) /* the new name: as for a create */
		pw_policy_decide_new_name(p, op, path2, is_dir, &d);
	if (!d.allowed)
		return deny2(r, op, path, path2, &d);
	allowed(r, op, path, path2, &d);
	return 0;
}

/* The paths of a node's names (pw_check_node_ex), each in its own stack buffer unless
 * longer than PW_PATH_MAX. */
typedef struct alias_paths {
	char bufs[PW_ALIAS_CHECK_MAX][PW_PATH_MAX];
	pw_path p[PW_ALIAS_CHECK_MAX];
} alias_paths;

static void alias_paths_done(alias_paths *a)
{
	for (size_t i = 0; i < PW_ALIAS_CHECK_MAX; i++)
		pw_path_done(&a->p[i]);
}

/* The link count of N's backing object, through FD when given. Returns >= 0 or -errno. */
static long link_count(pw_fs *fs, pw_inode *n, int fd)
{
	struct stat st;
	if (fd >= 0)
		return fstat(fd, &st) < 0 ? negative_errno() : (long)st.st_nlink;
	_cleanup_close_ int own = pw_open_node(fs, n, O_PATH);
	if (own < 0)
		return own;
	return fstat(own, &st) < 0 ? negative_errno() : (long)st.st_nlink;
}

/*
 * A mutation of a node must be allowed under every name it has. The names the view knows
 * are checked one by one; a regular file with more links than known names has names
 * elsewhere (made outside the view, or never looked up), which could be read-only or
 * protected, or outside the project: it may be written only where the policy allows every
 * path. A file with no name left at all (unlinked but open) is reachable by no path and
 * is refused only by a mode that writes nothing.
 */
static int check_node(pw_req *r, pw_op op, pw_inode *n, int fd, long known_nlink,
		      const char *path2);

int pw_check_node_ex(pw_req *r, pw_op op, pw_inode *n, int fd, const char *path2)
{
	return check_node(r, op, n, fd, -1, path2);
}

int pw_check_node_nlink(pw_req *r, pw_op op, pw_inode *n, long nlink)
{
	return check_node(r, op, n, -1, nlink, NULL);
}

static int check_node(pw_req *r, pw_op op, pw_inode *n, int fd, long known_nlink, const char *path2)
{
	pw_fs *fs = r->fs;
	_cleanup_(alias_paths_done) alias_paths a;
	for (size_t i = 0; i < PW_ALIAS_CHECK_MAX; i++)
		a.p[i] = (pw_path){.s = NULL, .buf = a.bufs[i]};
	const char *paths[PW_ALIAS_CHECK_MAX];
	size_t count = 0;
	bool is_dir = S_ISDIR(n->type), truncated = false;
	pw_inode_lock_read(fs);
	if (n->is_root) {
		paths[0] = "";
		count = 1;
	} else {
		for (const pw_name *nm = n->names; nm; nm = nm->next) {
			if (count == PW_ALIAS_CHECK_MAX) {
				truncated = true;
				break;
			}
			if (pw_child_path_locked(fs, nm->parent, nm->name, &a.p[count]) == 0) {
				paths[count] = a.p[count].s;
				count++;
			}
		}
	}
	pw_inode_unlock(fs);

	const pw_policy *p = pw_req_policy(r, NULL);
	int e = 0;
	pw_decision d;
	for (size_t i = 0; i < count && e == 0; i++) {
		pw_policy_decide(p, op, paths[i], is_dir, &d);
		if (!d.allowed)
			e = deny2(r, op, paths[i], path2, &d);
	}
	if (e == 0 && S_ISREG(n->type) && !pw_policy_writes_everything(p)) {
		long nlink = known_nlink >= 0 ? known_nlink : link_count(fs, n, fd);
		if (nlink < 0 && count > 0) {
			e = (int)nlink;
		} else if ((nlink > 0 && (size_t)nlink > count) || truncated ||
			   (nlink <= 0 && count == 0 && pw_policy_writes_nothing(p))) {
			pw_policy_decide(p, op, count ? paths[0] : "", is_dir, &d);
			if (d.allowed || d.reason != PW_REASON_READ_ONLY)
				d = (pw_decision){.allowed = false,
						  .err =
						      pw_policy_writes_nothing(p) ? EROFS : EACCES,
						  .reason = PW_REASON_HARDLINK};
			e = deny2(r, op, count ? paths[0] : "(unlinked file)", path2, &d);
		}
	}
	if (e == 0 && count > 0)
		allowed(r, op, paths[0], path2, &(pw_decision){.allowed = true});
	return e;
}

int pw_check_node(pw_req *r, pw_op op, pw_inode *n)
{
	return pw_check_node_ex(r, op, n, -1, NULL);
}

bool pw_req_hides(pw_req *r)
{
	return pw_policy_has_hide_rules(pw_req_policy(r, NULL));
}

bool pw_node_hidden(pw_req *r, pw_inode *n)
{
	const pw_policy *p = pw_req_policy(r, NULL);
	if (!pw_policy_has_hide_rules(p) || n->is_root)
		return false;
	/* A node that cannot be named is treated as hidden (fails closed), except one no
	 * longer in the tree (unlinked while open), which no rule can name either. */
	PW_PATH_DECLARE(path);
	int e = pw_node_path(r->fs, n, &path);
	return e == 0 ? pw_policy_is_hidden(p, path.s, S_ISDIR(n->type)) : e != -ENOENT;
}

pw_inode *pw_req_begin_node(pw_req *r, fuse_req_t req, fuse_ino_t ino)
{
	if (pw_req_begin(r, req) < 0)
		return NULL;
	pw_inode *n = pw_inode_get(r->fs, ino);
	if (pw_node_hidden(r, n)) {
		pw_req_reply_err(r, ENOENT);
		return NULL;
	}
	return n;
}

bool pw_hidden_name(pw_req *r, pw_inode *parent, const char *name, bool is_dir)
{
	const pw_policy *p = pw_req_policy(r, NULL);
	if (!pw_policy_has_hide_rules(p))
		return false;
	/* a name that cannot be named is treated as hidden: it fails closed */
	PW_PATH_DECLARE(tmp);
	const char *path;
	return name_path(r, parent, name, &tmp, &path) < 0 || pw_policy_is_hidden(p, path, is_dir);
}

bool pw_hidden_child(pw_req *r, bool is_dir)
{
	return pw_hidden_name(r, r->parent, r->name, is_dir);
}

bool pw_hidden_existing(pw_req *r, int pfd)
{
	struct stat st;
	if (fstatat(pfd, r->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	return pw_hidden_child(r, S_ISDIR(st.st_mode));
}

static void strip_write_bits(struct stat *st)
{
	st->st_mode &= ~(mode_t)(S_IWUSR | S_IWGRP | S_IWOTH);
}

/*
 * A directory's link count counts its subdirectories (each one's '..'), so a hidden
 * subdirectory would still show: `stat` would tell that a directory holds more than it
 * lists. The count is lowered by the subdirectories of DIRPATH the policy hides (or whose
 * path cannot be named, which listings leave out too), listed afresh through a descriptor
 * of the directory ST describes. A directory with no subdirectory at all (2) or one whose
 * filesystem does not count them (1) needs nothing. When the directory cannot be listed
 * (no read permission, or its name now leads elsewhere) the count becomes 1, what a
 * filesystem that does not count subdirectories reports: it then tells nothing.
 */
static void hide_subdir_links(pw_fs *fs, const pw_policy *p, const char *dirpath, struct stat *st)
{
	int fd = pw_openat_beneath(fs, dirpath, O_RDONLY | O_DIRECTORY, 0);
	struct stat own;
	if (fd >= 0 &&
	    (fstat(fd, &own) < 0 || own.st_dev != st->st_dev || own.st_ino != st->st_ino)) {
		close(fd);
		fd = -1;
	}
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		st->st_nlink = 1;
		return;
	}
	nlink_t hidden = 0;
	for (struct dirent *de; (errno = 0, de = readdir(d));) {
		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		bool is_dir = de->d_type == DT_DIR;
		if (de->d_type == DT_UNKNOWN) {
			struct stat cst;
			is_dir = fstatat(dirfd(d), de->d_name, &cst, AT_SYMLINK_NOFOLLOW) == 0 &&
				 S_ISDIR(cst.st_mode);
		}
		if (!is_dir)
			continue;
		char path[PW_PATH_MAX];
		int n = dirpath[0] ? snprintf(path, sizeof(path), "%s/%s", dirpath, de->d_name)
				   : snprintf(path, sizeof(path), "%s", de->d_name);
		if (n < 0 || (size_t)n >= sizeof(path) || pw_policy_is_hidden(p, path, true))
			hidden++;
	}
	if (errno != 0)
		st->st_nlink = 1;
	else
		st->st_nlink = st->st_nlink - hidden >= 2 ? st->st_nlink - hidden : 2;
	closedir(d);
}

/* Does ST's link count need hide_subdir_links under P? */
static bool counts_hidden_subdirs(const pw_policy *p, const struct stat *st)
{
	return S_ISDIR(st->st_mode) && st->st_nlink > 2 && pw_policy_has_hide_rules(p);
}

/*
 * Are the mode's denials shown as missing write bits? Not when the kernel checks permission
 * bits itself (default_permissions, always under allow_other: fsmain.c). It would refuse a
 * write to a stripped file with EACCES before the daemon hears of it, where a read-only mode
 * answers EROFS, and that denial would never reach the audit log; and a directory the mode
 * denies while it allows some new names in it (a rule such as `src/x-*`) would refuse those
 * names too. So there the kernel sees the backing file's own bits, its check is the backing
 * filesystem's, and every write it lets through gets the policy's answer. What is given up,
 * stat and access(W_OK) showing the mode, is the kernel's to give: with default_permissions
 * it answers access() itself and never asks us.
 */
static bool strips_write_bits(const pw_fs *fs)
{
	return !fs->default_permissions;
}

void pw_truthful_attr(pw_req *r, pw_inode *n, struct stat *st)
{
	pw_fs *fs = r->fs;
	const pw_policy *p = pw_req_policy(r, NULL);
	bool strip = strips_write_bits(fs);
	bool nothing = pw_policy_writes_nothing(p), links = counts_hidden_subdirs(p, st);
	if (strip && nothing)
		strip_write_bits(st);
	if ((strip && !nothing) || links) {
		/* A file no longer in the tree (unlinked while open: no path, -ENOENT) may be
		 * written as pw_check_node_ex decides, so its bits stay; any other failure to
		 * name it fails closed. */
		PW_PATH_DECLARE(path);
		int e = pw_node_path(fs, n, &path);
		if (strip && ((e < 0 && e != -ENOENT) ||
			      (e == 0 && !pw_policy_may_write(p, path.s, S_ISDIR(st->st_mode)))))
			strip_write_bits(st);
		if (links && e == 0)
			hide_subdir_links(fs, p, path.s, st);
		else if (links)
			st->st_nlink = 1; /* unnamed: its subdirectories cannot be judged */
	}
}

void pw_truthful_attr_child(pw_req *r, struct stat *st)
{
	const pw_policy *p = pw_req_policy(r, NULL);
	bool strip = strips_write_bits(r->fs);
	bool nothing = pw_policy_writes_nothing(p), links = counts_hidden_subdirs(p, st);
	if (strip && nothing)
		strip_write_bits(st);
	if ((strip && !nothing) || links) {
		const char *path = NULL;
		int e = pw_req_path(r, &path);
		if (strip && (e < 0 || !pw_policy_may_write(p, path, S_ISDIR(st->st_mode))))
			strip_write_bits(st);
		if (links && e == 0)
			hide_subdir_links(r->fs, p, path, st);
		else if (links)
			st->st_nlink = 1;
	}
}
