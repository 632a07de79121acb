/* SPDX-License-Identifier: MIT */
/*
 * Swapping the active policy, and keeping the kernel's caches true to it.
 *
 * The swap itself is a pointer store under a mutex held for a few instructions, with a
 * generation number: an operation takes a reference to whichever policy is current when it
 * starts, so it never sees half a policy and never waits for a switch. When
 * pw_fs_set_policy() returns, every operation that starts afterwards decides with the new
 * policy: writes, opens, access() and lookups are all answered by the daemon, not by a
 * kernel cache, since the writeback cache is off and permissions are not checked by the
 * kernel (no default_permissions).
 *
 * Two caches can still show the old mode, and are invalidated:
 *  - entries (dcache): a name that becomes hidden must stop resolving (and its cached
 *    pages go, for descriptors opened before), and a hidden name the kernel cached as
 *    absent must reappear. This is done before the call returns, for
 *    the nodes and negative entries concerned (bounded by what the kernel knows), and only
 *    when the hide rules differ. Lookups in flight during the swap are waited out first
 *    (fs->lookup_gate), so an entry decided under the old policy cannot slip past.
 *  - attributes (write bits shown by stat): invalidated on a background thread for every
 *    node whose answer changed, since a large tree takes longer than a switch may. The lag
 *    is bounded by the number of known inodes (docs/ARCHITECTURE.md has figures); no
 *    operation's outcome depends on it, only what `ls -l` shows meanwhile.
 * Invalidations run on the control thread or this file's thread, never inside a FUSE
 * request handler (libfuse: that can deadlock).
 */
#include <stdlib.h>
#include <string.h>

#include "fs_internal.h"
#include "util.h"

static bool same_hides(const pw_policy *a, const pw_policy *b)
{
	size_t na = pw_policy_rule_count(a), nb = pw_policy_rule_count(b);
	size_t ha = 0, hb = 0;
	for (size_t i = 0; i < na; i++)
		if (pw_policy_rule(a, i)->kind == PW_RULE_HIDE)
			ha++;
	for (size_t i = 0; i < nb; i++)
		if (pw_policy_rule(b, i)->kind == PW_RULE_HIDE)
			hb++;
	if (ha != hb)
		return false;
	for (size_t i = 0; i < na; i++) {
		const pw_rule *r = pw_policy_rule(a, i);
		if (r->kind != PW_RULE_HIDE)
			continue;
		bool found = false;
		for (size_t j = 0; j < nb && !found; j++) {
			const pw_rule *s = pw_policy_rule(b, j);
			found = s->kind == PW_RULE_HIDE && streq(r->pattern, s->pattern);
		}
		if (!found)
			return false;
	}
	return true;
}

typedef struct inval_ctx {
	const pw_policy *old, *new;
	/* collected under the tree lock, notified after it is released */
	struct {
		fuse_ino_t parent, ino;
		char *name;
	} *items;
	size_t n, cap;
	bool entries; /* collect entries whose visibility changed */
} inval_ctx;

static void collect(inval_ctx *c, fuse_ino_t parent, fuse_ino_t ino, const char *name)
{
	if (c->n == c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 256;
		void *ni = realloc(c->items, ncap * sizeof(*c->items));
		if (!ni)
			return;
		c->items = ni;
		c->cap = ncap;
	}
	c->items[c->n].parent = parent;
	c->items[c->n].ino = ino;
	c->items[c->n].name = name ? strdup(name) : NULL;
	c->n++;
}

static void visit_node(pw_fs *fs, pw_inode *n, void *u)
{
	inval_ctx *c = u;
	PW_PATH_DECLARE(p);
	if (pw_node_path_locked(fs, n, &p) < 0)
		return;
	const char *path = p.s;
	bool dir = S_ISDIR(n->type);
	if (c->entries) {
		bool was = pw_policy_is_hidden(c->old, path, dir);
		bool is = pw_policy_is_hidden(c->new, path, dir);
		if (was != is)
			collect(c, pw_inode_id(fs, n->names->parent), 0, n->names->name);
		/* Its cached pages too: a descriptor held open must not read them (READ,
		 * GETXATTR and LISTXATTR of a hidden node are refused). */
		if (is && !was && !dir)
			collect(c, 0, pw_inode_id(fs, n), NULL);
		if (dir) /* cached listings may include or omit hidden names */
			collect(c, 0, pw_inode_id(fs, n), NULL);
	} else if (pw_policy_may_write(c->old, path, dir) != pw_policy_may_write(c->new, path, dir)) {
		collect(c, 0, pw_inode_id(fs, n), NULL);
	}
}

static void notify_collected(pw_fs *fs, inval_ctx *c, bool attrs_only)
{
	for (size_t i = 0; i < c->n; i++) {
		if (c->items[i].name) {
			fuse_lowlevel_notify_inval_entry(fs->se, c->items[i].parent, c->items[i].name,
							 strlen(c->items[i].name));
			free(c->items[i].name);
		} else {
			/* off < 0: attributes only; 0,0: attributes and cached data (listings) */
			fuse_lowlevel_notify_inval_inode(fs->se, c->items[i].ino, attrs_only ? -1 : 0, 0);
		}
		if (attrs_only)
			atomic_fetch_sub(&fs->inval_pending, 1);
	}
	free(c->items);
	c->items = NULL;
	c->n = c->cap = 0;
}

/* Synchronous part: entries whose visibility changed, and hidden negative entries. */
static void invalidate_entries(pw_fs *fs, const pw_policy *old, const pw_policy *new)
{
	if (!fs->se || same_hides(old, new))
		return;
	/* Wait out lookups that decided under the old policy: once they have learned their
	 * nodes and replied, the collection below sees them. The kernel orders our entry
	 * invalidations after in-flight lookups in the same directory (parent lock). */
	pthread_rwlock_wrlock(&fs->lookup_gate);
	pthread_rwlock_unlock(&fs->lookup_gate);
	inval_ctx c = {.old = old, .new = new, .entries = true};
	pw_inode_foreach(fs, visit_node, &c);
	collect(&c, 0, FUSE_ROOT_ID, NULL);
	notify_collected(fs, &c, false);

	pthread_mutex_lock(&fs->neg_lock);
	pw_hidden_neg *h = fs->hidden_negs;
	fs->hidden_negs = NULL;
	fs->n_hidden_negs = 0;
	pthread_mutex_unlock(&fs->neg_lock);
	while (h) {
		pw_hidden_neg *next = h->next;
		fuse_lowlevel_notify_inval_entry(fs->se, h->parent, h->name, strlen(h->name));
		free(h->name);
		free(h);
		h = next;
	}
}

static void *inval_main(void *arg)
{
	pw_fs *fs = arg;
	pthread_mutex_lock(&fs->inval_lock);
	for (;;) {
		while (!fs->inval_stop && !fs->inval_new)
			pthread_cond_wait(&fs->inval_cond, &fs->inval_lock);
		if (fs->inval_stop)
			break;
		pw_policy *old = fs->inval_old, *new = fs->inval_new;
		uint64_t gen = fs->inval_gen;
		fs->inval_old = fs->inval_new = NULL;
		pthread_mutex_unlock(&fs->inval_lock);

		inval_ctx c = {.old = old, .new = new};
		pw_inode_foreach(fs, visit_node, &c);
		/* The root is not in the table; like any node, only when its answer changed
		 * (a switch between two modes that write the same sends nothing). */
		visit_node(fs, &fs->root, &c);
		atomic_store(&fs->inval_pending, c.n);
		notify_collected(fs, &c, true);
		pw_policy_unref(old);
		pw_policy_unref(new);
		atomic_store(&fs->inval_done_gen, gen);

		pthread_mutex_lock(&fs->inval_lock);
	}
	pthread_mutex_unlock(&fs->inval_lock);
	return NULL;
}

int pw_inval_start(pw_fs *fs)
{
	pthread_mutex_init(&fs->inval_lock, NULL);
	pthread_cond_init(&fs->inval_cond, NULL);
	int r = pthread_create(&fs->inval_thread, NULL, inval_main, fs);
	if (r)
		return -r;
	fs->inval_started = true;
	return 0;
}

void pw_inval_stop(pw_fs *fs)
{
	if (!fs->inval_started)
		return;
	pthread_mutex_lock(&fs->inval_lock);
	fs->inval_stop = true;
	pthread_cond_signal(&fs->inval_cond);
	pthread_mutex_unlock(&fs->inval_lock);
	pthread_join(fs->inval_thread, NULL);
	pw_policy_unref(fs->inval_old);
	pw_policy_unref(fs->inval_new);
	fs->inval_old = fs->inval_new = NULL;
	fs->inval_started = false;
}

/* Queues the attribute pass; a pending job is merged (old of the first, new of the last). */
static void queue_attr_inval(pw_fs *fs, pw_policy *old, pw_policy *new, uint64_t gen)
{
	if (!fs->inval_started || !fs->se) {
		pw_policy_unref(old);
		atomic_store(&fs->inval_done_gen, gen);
		return;
	}
	pthread_mutex_lock(&fs->inval_lock);
	if (fs->inval_new) {
		pw_policy_unref(fs->inval_new);
		pw_policy_unref(old);
	} else {
		fs->inval_old = old;
	}
	fs->inval_new = pw_policy_ref(new);
	fs->inval_gen = gen;
	pthread_cond_signal(&fs->inval_cond);
	pthread_mutex_unlock(&fs->inval_lock);
}

uint64_t pw_fs_set_policy(pw_fs *fs, pw_policy *p)
{
	pw_policy_ref(p);
	pthread_mutex_lock(&fs->policy_lock);
	pw_policy *old = fs->policy;
	fs->policy = p;
	uint64_t gen = ++fs->generation;
	pthread_mutex_unlock(&fs->policy_lock);
	if (old) {
		/* Our own reference to P for the invalidation: a concurrent switch may drop the
		 * active one meanwhile. */
		pw_policy *mine = pw_policy_ref(p);
		invalidate_entries(fs, old, mine);
		queue_attr_inval(fs, old, mine, gen); /* takes over our reference to old */
		pw_policy_unref(mine);
	}
	return gen;
}

pw_policy *pw_fs_policy(pw_fs *fs, uint64_t *ret_generation)
{
	return pw_fs_policy_get(fs, ret_generation);
}

void pw_fs_get_stats(pw_fs *fs, pw_fs_stats *ret)
{
	pthread_rwlock_rdlock(&fs->tree_lock);
	ret->inodes = fs->hcount;
	pthread_rwlock_unlock(&fs->tree_lock);
	ret->denied = atomic_load(&fs->denied);
	ret->invalidations_pending = atomic_load(&fs->inval_pending);
	ret->invalidations_sent = atomic_load(&fs->notifications);
	ret->invalidated_generation = atomic_load(&fs->inval_done_gen);
	for (unsigned i = 0; i < PW_FS_OPCODES; i++)
		ret->requests[i] = atomic_load_explicit(&fs->requests[i], memory_order_relaxed);
	ret->max_write = atomic_load(&fs->max_write);
}
