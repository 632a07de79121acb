/* SPDX-License-Identifier: MIT */
/*
 * The one place the filesystem asks the policy, and the one function every denial passes
 * through (deny()): it counts the denial, queues an audit event (never blocking), and
 * returns the errno the operation fails with.
 */
#include <string.h>
#include <sys/stat.h>

#include "audit.h"
#include "fs_internal.h"
#include "util.h"

pw_policy *pw_fs_policy_get(pw_fs *fs, uint64_t *ret_gen)
{
	pthread_mutex_lock(&fs->policy_lock);
	pw_policy *p = pw_policy_ref(fs->policy);
	if (ret_gen)
		*ret_gen = fs->generation;
	pthread_mutex_unlock(&fs->policy_lock);
	return p;
}

/* Queues an audit event for a decision; never blocks (audit.h). */
static void record(pw_fs *fs, fuse_req_t req, const pw_policy *p, uint64_t gen, pw_op op,
		   const char *path, const pw_decision *d)
{
	const struct fuse_ctx *ctx = req ? fuse_req_ctx(req) : NULL;
	pw_audit_event ev = {
		.mode = pw_policy_mode_name(p),
		.generation = gen,
		.op = op,
		.path = path,
		.err = d->err,
		.rule = d->rule,
		.reason = d->reason,
		.pid = ctx ? ctx->pid : 0,
		.uid = ctx ? ctx->uid : 0,
	};
	pw_audit_submit(fs->audit, &ev);
}

static int deny(pw_fs *fs, fuse_req_t req, const pw_policy *p, uint64_t gen, pw_op op,
		const char *path, const pw_decision *d)
{
	atomic_fetch_add(&fs->denied, 1);
	if (fs->audit)
		record(fs, req, p, gen, op, path, d);
	return -d->err;
}

int pw_check_denied(pw_fs *fs, fuse_req_t req, pw_op op, const char *path, const pw_decision *d,
		    uint64_t gen)
{
	pw_policy *p = pw_fs_policy_get(fs, NULL);
	int r = deny(fs, req, p, gen, op, path, d);
	pw_policy_unref(p);
	return r;
}

static int decide_path(pw_fs *fs, fuse_req_t req, const pw_policy *p, uint64_t gen, pw_op op,
		       const char *path, bool is_dir)
{
	pw_decision d;
	pw_policy_decide(p, op, path, is_dir, &d);
	if (d.allowed) {
		/* Recorded only when the audit log is configured to keep allowed mutations; the
		 * writer drops them otherwise before they cost anything more. */
		if (fs->audit)
			record(fs, req, p, gen, op, path, &d);
		return 0;
	}
	return deny(fs, req, p, gen, op, path, &d);
}

int pw_check_child(pw_fs *fs, fuse_req_t req, pw_op op, pw_inode *parent, const char *name,
		   bool is_dir)
{
	char path[PW_PATH_MAX];
	int r = pw_path_child(fs, parent, name, path);
	if (r < 0)
		return r;
	uint64_t gen;
	pw_policy *p = pw_fs_policy_get(fs, &gen);
	r = decide_path(fs, req, p, gen, op, path, is_dir);
	pw_policy_unref(p);
	return r;
}

/* A node may have several names (hard links seen through several paths): a mutation must
 * be allowed under every one, so a writable name cannot change a read-only file's data. */
int pw_check_node(pw_fs *fs, fuse_req_t req, pw_op op, pw_inode *n)
{
	char paths[PW_ALIAS_CHECK_MAX][PW_PATH_MAX];
	size_t count = 0;
	bool is_dir = S_ISDIR(n->type);
	pthread_rwlock_rdlock(&fs->tree_lock);
	if (n->is_root) {
		paths[0][0] = '\0';
		count = 1;
	} else {
		for (pw_name *nm = n->names; nm && count < PW_ALIAS_CHECK_MAX; nm = nm->next) {
			pw_name *saved = n->names;
			n->names = nm; /* build the path through this name */
			int r = pw_path_of_locked(fs, n, paths[count]);
			n->names = saved;
			if (r == 0)
				count++;
		}
	}
	pthread_rwlock_unlock(&fs->tree_lock);
	uint64_t gen;
	pw_policy *p = pw_fs_policy_get(fs, &gen);
	int r = 0;
	if (count == 0 && pw_policy_writes_nothing(p)) {
		/* Unlinked but still open (a temp file): no path to judge, but a mode that writes
		 * nothing refuses every write. Other modes allow it: the data is reachable by no
		 * name in the project. */
		pw_decision d;
		pw_policy_decide(p, op, "", true, &d);
		r = deny(fs, req, p, gen, op, "(unlinked file)", &d);
	}
	for (size_t i = 0; i < count && r == 0; i++)
		r = decide_path(fs, req, p, gen, op, paths[i], is_dir);
	pw_policy_unref(p);
	return r;
}

bool pw_hidden_child(pw_fs *fs, pw_inode *parent, const char *name, bool is_dir)
{
	pw_policy *p = pw_fs_policy_get(fs, NULL);
	bool hidden = false;
	if (pw_policy_has_hide_rules(p)) {
		char path[PW_PATH_MAX];
		if (pw_path_child(fs, parent, name, path) == 0)
			hidden = pw_policy_is_hidden(p, path, is_dir);
	}
	pw_policy_unref(p);
	return hidden;
}

bool pw_hidden_existing(pw_fs *fs, pw_inode *parent, int pfd, const char *name)
{
	struct stat st;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	return pw_hidden_child(fs, parent, name, S_ISDIR(st.st_mode));
}

void pw_remember_hidden_neg(pw_fs *fs, fuse_ino_t parent, const char *name)
{
	pthread_mutex_lock(&fs->neg_lock);
	for (pw_hidden_neg *h = fs->hidden_negs; h; h = h->next)
		if (h->parent == parent && streq(h->name, name)) {
			pthread_mutex_unlock(&fs->neg_lock);
			return;
		}
	if (fs->n_hidden_negs < 65536) {
		pw_hidden_neg *h = malloc(sizeof(*h));
		if (h && (h->name = strdup(name))) {
			h->parent = parent;
			h->next = fs->hidden_negs;
			fs->hidden_negs = h;
			fs->n_hidden_negs++;
		} else {
			free(h);
		}
	}
	pthread_mutex_unlock(&fs->neg_lock);
}

static void strip_write_bits(struct stat *st)
{
	st->st_mode &= ~(mode_t)(S_IWUSR | S_IWGRP | S_IWOTH);
}

void pw_truthful_attr(pw_fs *fs, pw_inode *n, struct stat *st)
{
	pw_policy *p = pw_fs_policy_get(fs, NULL);
	if (pw_policy_writes_nothing(p)) {
		strip_write_bits(st);
	} else {
		char path[PW_PATH_MAX];
		if (pw_path_of(fs, n, path) < 0 || !pw_policy_may_write(p, path, S_ISDIR(st->st_mode)))
			strip_write_bits(st);
	}
	pw_policy_unref(p);
}

void pw_truthful_attr_child(pw_fs *fs, pw_inode *parent, const char *name, struct stat *st)
{
	pw_policy *p = pw_fs_policy_get(fs, NULL);
	if (pw_policy_writes_nothing(p)) {
		strip_write_bits(st);
	} else {
		char path[PW_PATH_MAX];
		if (pw_path_child(fs, parent, name, path) < 0 ||
		    !pw_policy_may_write(p, path, S_ISDIR(st->st_mode)))
			strip_write_bits(st);
	}
	pw_policy_unref(p);
}
