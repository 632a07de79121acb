/* SPDX-License-Identifier: MIT */
/* The open files and directories of the view (fh.h). */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "fh.h"

/*
 * The registry of open handles exists for two rare cases: pw_fh_dup_for (a file unlinked
 * while open) and pw_fh_close_all (unmount). It must cost the common OPEN and RELEASE almost
 * nothing, so it is split into stripes by node: handles of different files take different
 * locks (a grep opening the next file while the previous one is released never waits), and
 * the lookup of a node's handles looks at one stripe only.
 */
static struct pw_fh_stripe *stripe_of(pw_fs *fs, const pw_inode *n)
{
	uintptr_t h = (uintptr_t)n;
	h ^= h >> 12; /* nodes are heap blocks: their low bits say little */
	return &fs->fh->stripes[(h >> 6) % PW_FH_STRIPES];
}

int pw_fh_table_init(pw_fs *fs)
{
	fs->fh = aligned_alloc(_Alignof(struct pw_fh_table), sizeof(struct pw_fh_table));
	if (!fs->fh)
		return -ENOMEM;
	for (size_t i = 0; i < PW_FH_STRIPES; i++) {
		pthread_mutex_init(&fs->fh->stripes[i].lock, NULL);
		fs->fh->stripes[i].head = NULL;
	}
	return 0;
}

void pw_fh_register(pw_fs *fs, pw_fh *h)
{
	struct pw_fh_stripe *st = stripe_of(fs, h->node);
	pthread_mutex_lock(&st->lock);
	h->prev = NULL;
	h->next = st->head;
	if (st->head)
		st->head->prev = h;
	st->head = h;
	pthread_mutex_unlock(&st->lock);
}

void pw_fh_unregister(pw_fs *fs, pw_fh *h)
{
	struct pw_fh_stripe *st = stripe_of(fs, h->node);
	pthread_mutex_lock(&st->lock);
	if (h->prev)
		h->prev->next = h->next;
	else if (st->head == h)
		st->head = h->next;
	if (h->next)
		h->next->prev = h->prev;
	h->prev = h->next = NULL;
	pthread_mutex_unlock(&st->lock);
}

/* The duplicate is made under the stripe's lock, and a handle leaves the registry before its
 * descriptor is closed (pw_op_release), so the number duplicated can never have been reused
 * by another open in between. */
int pw_fh_dup_for(pw_fs *fs, pw_inode *n)
{
	int fd = -ENOENT;
	struct pw_fh_stripe *st = stripe_of(fs, n);
	pthread_mutex_lock(&st->lock);
	for (pw_fh *h = st->head; h; h = h->next) {
		if (h->node == n && h->fd >= 0) {
			fd = fcntl(h->fd, F_DUPFD_CLOEXEC, 0);
			if (fd < 0)
				fd = negative_errno();
			break;
		}
	}
	pthread_mutex_unlock(&st->lock);
	return fd;
}

void pw_fh_close_all(pw_fs *fs)
{
	if (!fs->fh)
		return;
	for (size_t i = 0; i < PW_FH_STRIPES; i++) {
		struct pw_fh_stripe *st = &fs->fh->stripes[i];
		pthread_mutex_lock(&st->lock);
		pw_fh *h = st->head;
		st->head = NULL;
		pthread_mutex_unlock(&st->lock);
		while (h) {
			pw_fh *next = h->next;
			if (h->fd >= 0)
				close(h->fd);
			free(h->buf);
			free(h);
			h = next;
		}
		pthread_mutex_destroy(&st->lock);
	}
	free(TAKE_PTR(fs->fh));
}
