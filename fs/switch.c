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
 *    (the lookup gate, req.h), so an entry decided under the old policy cannot slip past.
 *  - attributes (write bits shown by stat): invalidated for every node whose answer
 *    changed, by a pass on a thread of its own, which the control plane waits for with
 *    pw_fs_wait_invalidated() before it answers the switch, up to PW_SWITCH_ATTR_WAIT_MS: a
 *    tree so large that the pass takes longer goes on in the background rather than hold
 *    the control socket (status shows the generation not yet invalidated). No operation's
 *    outcome depends on this pass, only what `ls -l` shows.
 *    Switches that queue while a pass is pending are merged into one pass that compares the
 *    new policy with every policy since the last pass began: the kernel may have cached
 *    attributes under any of them (a plan -> build -> design sequence merged as plan ->
 *    design would leave build's write bits on src/).
 * Invalidations run on the control thread or this file's thread, never inside a FUSE
 * request handler (libfuse: that can deadlock).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inode.h"
#include "thread.h"
#include "req.h"
#include "switch.h"
#include "undo/undo.h"
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
	/* attribute pass: the policies the kernel may have cached attributes under */
	pw_policy *const *olds;
	size_t n_olds;
	bool every; /* visit every node (too many switches merged to compare) */
	/* collected under the tree lock, notified after it is released */
	struct {
		fuse_ino_t parent, ino;
		char *name;
	} * items;
	size_t n, cap;
	bool entries; /* collect entries whose visibility changed */
} inval_ctx;

static void collect(inval_ctx *c, fuse_ino_t parent, fuse_ino_t ino, const char *name)
{
	if (PW_GROW(c->items, c->cap, c->n, 256) < 0)
		return;
	c->items[c->n].parent = parent;
	c->items[c->n].ino = ino;
	c->items[c->n].name = pw_dup_or_null(name);
	c->n++;
}

/* Whether PATH's write answer under the new policy differs from its answer under any
 * policy the kernel may have cached its attributes under. */
static bool write_answer_changed(const inval_ctx *c, const char *path, bool dir)
{
	if (c->every)
		return true;
	bool now = pw_policy_may_write(c->new, path, dir);
	for (size_t i = 0; i < c->n_olds; i++)
		if (pw_policy_may_write(c->olds[i], path, dir) != now)
			return true;
	return false;
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
	} else if (write_answer_changed(c, path, dir)) {
		collect(c, 0, pw_inode_id(fs, n), NULL);
	}
}

static void notify_collected(pw_fs *fs, inval_ctx *c, bool attrs_only)
{
	for (size_t i = 0; i < c->n; i++) {
		if (c->items[i].name) {
			fuse_lowlevel_notify_inval_entry(
			    fs->se, c->items[i].parent, c->items[i].name, strlen(c->items[i].name));
			free(c->items[i].name);
		} else {
			/* off < 0: attributes only; 0,0: attributes and cached data (listings) */
			fuse_lowlevel_notify_inval_inode(fs->se, c->items[i].ino,
							 attrs_only ? -1 : 0, 0);
		}
		if (attrs_only)
			atomic_fetch_sub(&fs->inval->pending, 1);
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
	pw_lookup_gate_pass(fs);
	inval_ctx c = {.old = old, .new = new, .entries = true};
	pw_inode_foreach(fs, visit_node, &c);
	collect(&c, 0, FUSE_ROOT_ID, NULL);
	notify_collected(fs, &c, false);

	pw_hidden_neg *h = pw_policy_slot_take_negs(fs);
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
	pthread_mutex_lock(&fs->inval->lock);
	for (;;) {
		while (!fs->inval->stop && !fs->inval->new_policy)
			pthread_cond_wait(&fs->inval->cond, &fs->inval->lock);
		if (fs->inval->stop)
			break;
		pw_policy *olds[PW_INVAL_OLDS_MAX], *new = fs->inval->new_policy;
		size_t n_olds = fs->inval->n_olds;
		memcpy(olds, fs->inval->olds, n_olds * sizeof(*olds));
		bool every = fs->inval->every;
		uint64_t gen = fs->inval->gen;
		fs->inval->new_policy = NULL;
		fs->inval->n_olds = 0;
		fs->inval->every = false;
		pthread_mutex_unlock(&fs->inval->lock);

		inval_ctx c = {.new = new, .olds = olds, .n_olds = n_olds, .every = every};
		pw_inode_foreach(fs, visit_node, &c);
		/* The root is not in the table; like any node, only when its answer changed
		 * (a switch between two modes that write the same sends nothing). */
		visit_node(fs, pw_inode_root(fs), &c);
		atomic_store(&fs->inval->pending, c.n);
		notify_collected(fs, &c, true);
		for (size_t i = 0; i < n_olds; i++)
			pw_policy_unref(olds[i]);
		pw_policy_unref(new);

		pthread_mutex_lock(&fs->inval->lock);
		atomic_store(&fs->inval->done_gen, gen);
		pthread_cond_broadcast(&fs->inval->done_cond);
	}
	pthread_mutex_unlock(&fs->inval->lock);
	return NULL;
}

int pw_inval_init(pw_fs *fs)
{
	struct pw_inval_pass *v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	pthread_mutex_init(&v->lock, NULL);
	pthread_cond_init(&v->cond, NULL);
	pw_cond_init_monotonic(&v->done_cond); /* switch_waits_for_pass's deadline */
	fs->inval = v;
	return 0;
}

void pw_inval_free(pw_fs *fs)
{
	struct pw_inval_pass *v = TAKE_PTR(fs->inval);
	if (!v)
		return;
	pthread_cond_destroy(&v->done_cond);
	pthread_cond_destroy(&v->cond);
	pthread_mutex_destroy(&v->lock);
	free(v);
}

int pw_inval_start(pw_fs *fs)
{
	return pw_thread_start(&fs->inval->thread, inval_main, fs, &fs->inval->started);
}

void pw_inval_stop(pw_fs *fs)
{
	if (!fs->inval || !fs->inval->started)
		return;
	pthread_mutex_lock(&fs->inval->lock);
	fs->inval->stop = true;
	pthread_cond_signal(&fs->inval->cond);
	pthread_cond_broadcast(&fs->inval->done_cond);
	pthread_mutex_unlock(&fs->inval->lock);
	pthread_join(fs->inval->thread, NULL);
	for (size_t i = 0; i < fs->inval->n_olds; i++)
		pw_policy_unref(fs->inval->olds[i]);
	pw_policy_unref(fs->inval->new_policy);
	fs->inval->n_olds = 0;
	fs->inval->new_policy = NULL;
	fs->inval->started = false;
}

/* Queues the attribute pass from OLD (our reference is taken over) to NEW. A pending job
 * is merged: OLD joins the policies it compares with (the pending NEW was in force, so the
 * kernel may have cached attributes under it), NEW replaces its target. Callers are
 * serialized (every install goes through the view's lock), so generations queue in order. */
static void queue_attr_inval(pw_fs *fs, pw_policy *old, pw_policy *new, uint64_t gen)
{
	if (!fs->inval->started || !fs->se) {
		pw_policy_unref(old);
		atomic_store(&fs->inval->done_gen, gen);
		return;
	}
	pthread_mutex_lock(&fs->inval->lock);
	if (fs->inval->n_olds < PW_INVAL_OLDS_MAX) {
		fs->inval->olds[fs->inval->n_olds++] = old;
	} else {
		pw_policy_unref(old);
		fs->inval->every = true;
	}
	pw_policy_unref(fs->inval->new_policy);
	fs->inval->new_policy = pw_policy_ref(new);
	fs->inval->gen = gen;
	pthread_cond_signal(&fs->inval->cond);
	pthread_mutex_unlock(&fs->inval->lock);
}

void pw_fs_wait_invalidated(pw_fs *fs, uint64_t gen)
{
	if (!fs->inval->started)
		return; /* no session: nothing was queued (queue_attr_inval) */
	int64_t until = pw_clock_ns(CLOCK_MONOTONIC) + (int64_t)PW_SWITCH_ATTR_WAIT_MS * 1000000;
	struct timespec ts = {.tv_sec = until / 1000000000, .tv_nsec = until % 1000000000};
	pthread_mutex_lock(&fs->inval->lock);
	while (atomic_load(&fs->inval->done_gen) < gen && !fs->inval->stop)
		if (pthread_cond_timedwait(&fs->inval->done_cond, &fs->inval->lock, &ts) ==
		    ETIMEDOUT)
			break;
	pthread_mutex_unlock(&fs->inval->lock);
}

uint64_t pw_fs_set_policy(pw_fs *fs, pw_policy *p)
{
	pw_policy_ref(p);
	uint64_t gen;
	pw_policy *old = pw_policy_slot_swap(fs, p, &gen);
	if (old) {
		/* Our own reference to P for the invalidation: a concurrent switch may drop the
		 * active one meanwhile. */
		pw_policy *mine = pw_policy_ref(p);
		invalidate_entries(fs, old, mine);
		queue_attr_inval(fs, old, mine, gen); /* takes over our reference to old */
		pw_policy_unref(mine);
	} else {
		atomic_store(&fs->inval->done_gen, gen); /* the first policy: nothing was cached */
	}
	return gen;
}

pw_policy *pw_fs_policy(pw_fs *fs, uint64_t *ret_generation)
{
	return pw_fs_policy_get(fs, ret_generation);
}

void pw_fs_get_stats(pw_fs *fs, pw_fs_stats *ret)
{
	ret->inodes = pw_inode_count(fs);
	ret->denied = atomic_load(&fs->denied);
	ret->invalidations_pending = atomic_load(&fs->inval->pending);
	ret->invalidated_generation = atomic_load(&fs->inval->done_gen);
	ret->store_not_kept = pw_undo_store_full(fs->undo, &ret->store_full_since_ns);
}
