/* SPDX-License-Identifier: MIT */
/* The inodes the view changed and then forgot (forgotten.h). */
#include "forgotten.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "object.h"
#include "pw_limits.h"
#include "util.h"

#define BUCKETS 16384u

typedef struct entry {
	uint64_t dev, ino;
	int64_t birth_ns, changed_ns;
	struct entry *next;
} entry;

typedef struct generation {
	entry *b[BUCKETS];
	size_t n;
} generation;

struct pw_undo_forgotten {
	pthread_mutex_t lock;
	generation *now, *old; /* lookups try both; notes go to NOW */
};

static size_t bucket(uint64_t dev, uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ull) ^ dev) % BUCKETS;
}

static void generation_free(generation *g)
{
	for (size_t i = 0; g && i < BUCKETS; i++)
		while (g->b[i]) {
			entry *e = g->b[i];
			g->b[i] = e->next;
			free(e);
		}
	free(g);
}

static entry *find(generation *g, uint64_t dev, uint64_t ino, int64_t birth_ns)
{
	for (entry *e = g ? g->b[bucket(dev, ino)] : NULL; e; e = e->next)
		if (e->dev == dev && e->ino == ino && pw_birth_matches(e->birth_ns, birth_ns))
			return e;
	return NULL;
}

int pw_undo_forgotten_new(pw_undo_forgotten **ret)
{
	pw_undo_forgotten *f = calloc(1, sizeof(*f));
	if (!f || !(f->now = calloc(1, sizeof(*f->now)))) {
		free(f);
		return -ENOMEM;
	}
	pthread_mutex_init(&f->lock, NULL);
	*ret = f;
	return 0;
}

void pw_undo_forgotten_free(pw_undo_forgotten *f)
{
	if (!f)
		return;
	generation_free(f->now);
	generation_free(f->old);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

void pw_undo_forgotten_note(pw_undo_forgotten *f, uint64_t dev, uint64_t ino, int64_t birth_ns,
			    int64_t changed_ns)
{
	if (!f || !changed_ns)
		return;
	pthread_mutex_lock(&f->lock);
	entry *e = find(f->now, dev, ino, birth_ns);
	if (!e && f->now->n >= PW_UNDO_FORGOTTEN_MAX) {
		generation *fresh = calloc(1, sizeof(*fresh));
		if (fresh) { /* out of memory: the newer generation takes no more */
			generation_free(f->old);
			f->old = f->now;
			f->now = fresh;
		}
	}
	if (!e && f->now->n < PW_UNDO_FORGOTTEN_MAX && (e = calloc(1, sizeof(*e)))) {
		size_t b = bucket(dev, ino);
		*e = (entry){.dev = dev, .ino = ino, .birth_ns = birth_ns, .next = f->now->b[b]};
		f->now->b[b] = e;
		f->now->n++;
	}
	if (e && changed_ns > e->changed_ns)
		e->changed_ns = changed_ns;
	pthread_mutex_unlock(&f->lock);
}

int64_t pw_undo_forgotten_get(pw_undo_forgotten *f, uint64_t dev, uint64_t ino, int64_t birth_ns)
{
	if (!f)
		return 0;
	pthread_mutex_lock(&f->lock);
	entry *a = find(f->now, dev, ino, birth_ns), *b = find(f->old, dev, ino, birth_ns);
	int64_t ta = a ? a->changed_ns : 0, tb = b ? b->changed_ns : 0;
	int64_t t = ta > tb ? ta : tb;
	pthread_mutex_unlock(&f->lock);
	return t;
}
