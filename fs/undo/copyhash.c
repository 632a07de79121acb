/* SPDX-License-Identifier: MIT */
/*
 * Copying a file while hashing what is copied: the content of an original is kept under its
 * SHA-256 (originals.c), and the digest must be that of exactly the bytes written, even if
 * the source changes meanwhile, so both are made from the same buffer.
 *
 * The hash costs more than the copy (about 0.9 s per GiB with SHA-NI on the 2-core VM,
 * against some 0.5 s for the copy), and the change that waits for the keep is the caller's
 * request. A large file is therefore copied and hashed in two threads, a chunk apart: while
 * a helper thread hashes chunk k, this one writes it out and reads chunk k+1 into the other
 * buffer. The time is then about the hash's alone instead of the sum. Small files, the
 * common case, are done in one thread, with no thread to start.
 */
#include "copyhash.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "util.h"

#define CHUNK (1u << 20)
/* From this size on, two threads: below it a thread's start costs more than it saves. */
#define PIPELINE_FROM (16u << 20)

/* Reads up to LEN bytes at OFF; the count, 0 at the end, or -errno. */
static ssize_t read_chunk(int fd, char *buf, size_t len, off_t off)
{
	for (;;) {
		ssize_t n = pread(fd, buf, len, off);
		if (n >= 0 || errno != EINTR)
			return n < 0 ? negative_errno() : n;
	}
}

static int write_all(int fd, const char *buf, size_t len, off_t off)
{
	for (size_t w = 0; w < len;) {
		ssize_t k = pwrite(fd, buf + w, len - w, off + (off_t)w);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		w += (size_t)k;
	}
	return 0;
}

/* One thread: read, hash, write, chunk by chunk. */
static int copy_hash_serial(int src, int dst, pw_sha256 *c, char *buf)
{
	for (off_t off = 0;;) {
		ssize_t n = read_chunk(src, buf, CHUNK, off);
		if (n <= 0)
			return (int)n;
		pw_sha256_update(c, buf, (size_t)n);
		int r = write_all(dst, buf, (size_t)n, off);
		if (r < 0)
			return r;
		off += n;
	}
}

/* Two buffers handed between the copier (this thread) and the hasher: LEN[i] > 0 means
 * buffer I holds a chunk to hash, 0 that it is free; a chunk is hashed in the order it was
 * read, so the digest is that of the file. */
typedef struct pipeline {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char *buf[2];
	size_t len[2];
	bool done; /* the copier has handed over its last chunk (or failed) */
	pw_sha256 *c;
} pipeline;

static void *hasher_main(void *arg)
{
	pipeline *p = arg;
	/* A thread starts with its creator's name, here a FUSE worker's (pw-fuse), which top -H
	 * and the tests take for a worker: this one says what it is. */
	(void)pthread_setname_np(pthread_self(), "pw-hash");
	for (unsigned i = 0;; i ^= 1) {
		pthread_mutex_lock(&p->lock);
		while (p->len[i] == 0 && !p->done)
			pthread_cond_wait(&p->cond, &p->lock);
		size_t len = p->len[i];
		pthread_mutex_unlock(&p->lock);
		if (len == 0)
			return NULL; /* done, and nothing left in order */
		pw_sha256_update(p->c, p->buf[i], len);
		pthread_mutex_lock(&p->lock);
		p->len[i] = 0;
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
	}
}

/* Waits until buffer I is free (the hasher has finished with it). */
static void wait_free(pipeline *p, unsigned i)
{
	pthread_mutex_lock(&p->lock);
	while (p->len[i] != 0)
		pthread_cond_wait(&p->cond, &p->lock);
	pthread_mutex_unlock(&p->lock);
}

static void hand_over(pipeline *p, unsigned i, size_t len, bool done)
{
	pthread_mutex_lock(&p->lock);
	p->len[i] = len;
	p->done = done;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

/* The copier's side: reads chunk k+1 and writes it out while the hasher hashes chunk k.
 * Hands over an empty chunk with DONE at the end or on an error, after which the hasher
 * ends once every chunk before it is hashed. */
static int copy_pipelined(pipeline *p, int src, int dst)
{
	off_t off = 0;
	for (unsigned i = 0;; i ^= 1) {
		wait_free(p, i);
		ssize_t n = read_chunk(src, p->buf[i], CHUNK, off);
		int r = n > 0 ? write_all(dst, p->buf[i], (size_t)n, off) : (int)n;
		if (n <= 0 || r < 0) {
			hand_over(p, i, 0, true);
			return r;
		}
		hand_over(p, i, (size_t)n, false);
		off += n;
	}
}

int pw_undo_copy_hash(int src, int dst, uint64_t size, pw_sha256 *c)
{
	_cleanup_free_ char *buf = malloc(2 * (size_t)CHUNK);
	if (!buf)
		return -ENOMEM;
	if (size < PIPELINE_FROM)
		return copy_hash_serial(src, dst, c, buf);
	pipeline p = {.buf = {buf, buf + CHUNK}, .c = c};
	pthread_mutex_init(&p.lock, NULL);
	pthread_cond_init(&p.cond, NULL);
	pthread_t t;
	int r;
	if (pthread_create(&t, NULL, hasher_main, &p) != 0) {
		r = copy_hash_serial(src, dst, c, buf);
	} else {
		r = copy_pipelined(&p, src, dst);
		pthread_join(t, NULL);
	}
	pthread_cond_destroy(&p.cond);
	pthread_mutex_destroy(&p.lock);
	return r;
}
