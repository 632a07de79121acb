/* SPDX-License-Identifier: MIT */
/* What both transports (devio.c, uring.c) do with each request they receive (transport.h). */
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport.h"

/* The write_flags of the WRITE request this thread is handling, 0 for any other. */
static _Thread_local uint32_t cur_write_flags;

void pw_transport_note_request(struct pw_transport *t, const void *buf, size_t len)
{
	cur_write_flags = 0;
	if (len < sizeof(struct fuse_in_header))
		return;
	const struct fuse_in_header *in = buf;
	atomic_fetch_add_explicit(&t->requests[in->opcode < PW_FS_OPCODES ? in->opcode : 0], 1,
				  memory_order_relaxed);
	const char *arg = (const char *)buf + sizeof(*in);
	size_t arglen = len - sizeof(*in);
	if (in->opcode == FUSE_WRITE && arglen >= offsetof(struct fuse_write_in, lock_owner)) {
		struct fuse_write_in w;
		memcpy(&w, arg, offsetof(struct fuse_write_in, lock_owner));
		cur_write_flags = w.write_flags;
	} else if (in->opcode == FUSE_INIT && arglen >= offsetof(struct fuse_init_in, flags2)) {
		struct fuse_init_in ii = {0};
		memcpy(&ii, arg, arglen < sizeof(ii) ? arglen : sizeof(ii));
		atomic_store(&t->init_offered, ii.flags);
		/* flags2 counts only with FUSE_INIT_EXT (and a kernel that sends it) */
		if ((ii.flags & FUSE_INIT_EXT) && arglen >= offsetof(struct fuse_init_in, unused))
			atomic_store(&t->init_offered2, ii.flags2);
		atomic_store(&t->init_unique, in->unique);
	}
}

bool pw_transport_write_kills_suidgid(void)
{
	return cur_write_flags & FUSE_WRITE_KILL_SUIDGID;
}

void pw_transport_counts(const struct pw_transport *t, pw_fs_stats *ret)
{
	ret->invalidations_sent = atomic_load(&t->notifications);
	for (unsigned i = 0; i < PW_FS_OPCODES; i++)
		ret->requests[i] = atomic_load_explicit(&t->requests[i], memory_order_relaxed);
	ret->max_write = atomic_load(&t->max_write);
}

void pw_transport_read_env(struct pw_transport *t)
{
	const char *sched = getenv("PIWORKFS_WORKER_SCHED");
	t->workers_normal = sched && strcmp(sched, "normal") == 0;
	if (sched && *sched && !t->workers_normal)
		fprintf(stderr, "piworkfs: PIWORKFS_WORKER_SCHED=%s is not normal: ignored\n",
			sched);
}

/*
 * Why SCHED_BATCH: the scheduler never lets a woken SCHED_BATCH thread preempt the one
 * running (its preemption waits for the tick or for that thread to sleep). A request wakes
 * a serving thread from the very call that is about to put its caller to sleep until the
 * answer; as an ordinary thread, the server preempted that caller first, and the two changed
 * places again before either got on. Left to wait, the caller sleeps and the server takes the
 * CPU it leaves. Nothing else changes: the same weight, the same share of the CPU. Measured on
 * this 2-CPU VM in interleaved runs (docs/PERF.md, December 7): over /dev/fuse the daemon's
 * CPU per request 22% lower for grep -r, 16% for rg, 9% for create+delete with 2 processes, no
 * workload slower, and beside two CPU-bound processes (where a server that may not preempt
 * could wait longest) create+delete took 26% less time, not more; over io_uring rg -j1 14%
 * faster, the rest the same or faster.
 *
 * The name, because a thread starts with its creator's: the rings' threads are made by the
 * worker that answers INIT, and would pass for workers in top -H and in the tests.
 * The policy is set either way, for the same reason: a thread inherits it too.
 */
void pw_transport_thread_start(const struct pw_transport *t, const char *name)
{
	(void)pthread_setname_np(pthread_self(), name);
	struct sched_param none = {.sched_priority = 0};
	/* best effort: a seccomp filter or a container's policy may refuse it */
	(void)sched_setscheduler(0, t->workers_normal ? SCHED_OTHER : SCHED_BATCH, &none);
}
