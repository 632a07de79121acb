/* SPDX-License-Identifier: MIT */
/*
 * The request object (req.h): what a FUSE request's helpers share instead of working it
 * out again, one policy reference and one path build per request.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "req.h"

int pw_policy_slot_init(pw_fs *fs, pw_policy *initial)
{
	struct pw_policy_slot *s = calloc(1, sizeof(*s));
	if (!s) {
		pw_policy_unref(initial);
		return -ENOMEM;
	}
	pthread_mutex_init(&s->policy_lock, NULL);
	pthread_mutex_init(&s->neg_lock, NULL);
	pthread_rwlockattr_t ga;
	pthread_rwlockattr_init(&ga);
	pthread_rwlockattr_setkind_np(&ga, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&s->lookup_gate, &ga);
	pthread_rwlockattr_destroy(&ga);
	s->policy = initial;
	fs->slot = s;
	return 0;
}

void pw_policy_slot_free(pw_fs *fs)
{
	struct pw_policy_slot *s = TAKE_PTR(fs->slot);
	if (!s)
		return;
	pw_policy_unref(s->policy);
	while (s->hidden_negs) {
		pw_hidden_neg *n = s->hidden_negs->next;
		free(s->hidden_negs->name);
		free(s->hidden_negs);
		s->hidden_negs = n;
	}
	pthread_rwlock_destroy(&s->lookup_gate);
	pthread_mutex_destroy(&s->neg_lock);
	pthread_mutex_destroy(&s->policy_lock);
	free(s);
}

pw_policy *pw_fs_policy_get(pw_fs *fs, uint64_t *ret_gen)
{
	pthread_mutex_lock(&fs->slot->policy_lock);
	pw_policy *p = pw_policy_ref(fs->slot->policy);
	if (ret_gen)
		*ret_gen = fs->slot->generation;
	pthread_mutex_unlock(&fs->slot->policy_lock);
	return p;
}

pw_policy *pw_policy_slot_swap(pw_fs *fs, pw_policy *p, uint64_t *ret_gen)
{
	pthread_mutex_lock(&fs->slot->policy_lock);
	pw_policy *old = fs->slot->policy;
	fs->slot->policy = p;
	*ret_gen = ++fs->slot->generation;
	pthread_mutex_unlock(&fs->slot->policy_lock);
	return old;
}

void pw_remember_hidden_neg(pw_fs *fs, fuse_ino_t parent, const char *name)
{
	pthread_mutex_lock(&fs->slot->neg_lock);
	for (pw_hidden_neg *h = fs->slot->hidden_negs; h; h = h->next)
		if (h->parent == parent && streq(h->name, name)) {
			pthread_mutex_unlock(&fs->slot->neg_lock);
			return;
		}
	if (fs->slot->n_hidden_negs < 65536) {
		pw_hidden_neg *h = malloc(sizeof(*h));
		if (h && (h->name = strdup(name))) {
			h->parent = parent;
			h->next = fs->slot->hidden_negs;
			fs->slot->hidden_negs = h;
			fs->slot->n_hidden_negs++;
		} else {
			free(h);
		}
	}
	pthread_mutex_unlock(&fs->slot->neg_lock);
}

pw_hidden_neg *pw_policy_slot_take_negs(pw_fs *fs)
{
	pthread_mutex_lock(&fs->slot->neg_lock);
	pw_hidden_neg *h = fs->slot->hidden_negs;
	fs->slot->hidden_negs = NULL;
	fs->slot->n_hidden_negs = 0;
	pthread_mutex_unlock(&fs->slot->neg_lock);
	return h;
}

static void req_start(pw_req *r, fuse_req_t req)
{
	r->req = req;
	r->fs = req ? fuse_req_userdata(req) : NULL;
	r->in_creds = false;
	r->policy = NULL;
	r->gen = 0;
	r->parent = NULL;
	r->name = NULL;
	r->path_built = false;
	r->path_err = 0;
}

int pw_req_enter(pw_req *r)
{
	int cr = pw_creds_enter(r->fs, r->req, &r->creds);
	if (cr < 0) {
		fuse_reply_err(r->req, -cr);
		return cr;
	}
	r->in_creds = true;
	return 0;
}

int pw_req_begin(pw_req *r, fuse_req_t req)
{
	req_start(r, req);
	return pw_req_enter(r);
}

void pw_req_init(pw_req *r, fuse_req_t req)
{
	req_start(r, req);
}

void pw_req_leave(pw_req *r)
{
	if (r->in_creds) {
		pw_creds_leave(&r->creds);
		r->in_creds = false;
	}
}

void pw_req_reply_err(pw_req *r, int err)
{
	pw_req_leave(r);
	fuse_reply_err(r->req, err);
}

void pw_req_done(pw_req *r)
{
	pw_req_leave(r);
	if (r->policy) {
		pw_policy_unref(r->policy);
		r->policy = NULL;
	}
	pw_path_done(&r->path);
}

const pw_policy *pw_req_policy(pw_req *r, uint64_t *ret_gen)
{
	if (!r->policy)
		r->policy = pw_fs_policy_get(r->fs, &r->gen);
	if (ret_gen)
		*ret_gen = r->gen;
	return r->policy;
}

void pw_req_name(pw_req *r, pw_inode *parent, const char *name)
{
	r->parent = parent;
	r->name = name;
	r->path_built = false;
	r->path_err = 0;
	pw_path_done(&r->path);
}

int pw_req_path(pw_req *r, const char **ret)
{
	if (!r->path_built) {
		r->path_err = pw_child_path(r->fs, r->parent, r->name, &r->path);
		r->path_built = true;
	}
	if (r->path_err == 0)
		*ret = r->path.s;
	return r->path_err;
}

/* The parent's path is the name's path less "/NAME" (or less NAME at the root): the
 * snapshot of the same build, so both are read under one look at the tree. */
int pw_req_parent_path(pw_req *r, pw_path *ret)
{
	const char *path;
	int e = pw_req_path(r, &path);
	if (e < 0)
		return e;
	size_t len = strlen(path), nl = strlen(r->name);
	size_t plen = len > nl ? len - nl - 1 : 0;
	pw_path_done(ret);
	char *dst = plen < PW_PATH_MAX ? ret->buf : malloc(plen + 1);
	if (!dst)
		return -ENOMEM;
	memcpy(dst, path, plen);
	dst[plen] = '\0';
	ret->s = dst;
	return 0;
}

bool pw_req_is_name(const pw_req *r, const pw_inode *parent, const char *name)
{
	return r->parent == parent && r->name && (r->name == name || streq(r->name, name));
}

int pw_req_expect(pw_req *r, pw_expect_kind kind)
{
	return pw_watch_expect(r->fs, r->parent, r->name, kind);
}
