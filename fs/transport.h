/* SPDX-License-Identifier: MIT */
/*
 * The transport: how requests reach the daemon and replies leave it. Two files carry them,
 * devio.c (our own /dev/fuse read, writev and splice; devio.h) and uring.c (FUSE over
 * io_uring; uring.h); this one, transport.c, is what both do with every request they
 * receive: count it by opcode, remember what INIT offered, and keep a WRITE's flags for the
 * thread that handles it. struct pw_fs embeds the transport's state (pw_fs.transport);
 * only those three files touch its fields.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs.h" /* PW_FS_OPCODES, pw_fs_stats */

struct pw_uring;

struct pw_transport {
	/* The INIT request as the receiving side saw it: its id, and the flags the kernel
	 * offered. */
	_Atomic uint64_t init_unique;
	_Atomic uint32_t init_offered;
	_Atomic uint32_t init_offered2; /* flags2: bits 32..63 */
	/* Requests received, by opcode, for status: what the kernel asks of us is what a
	 * workload costs in the view (each one is a round trip). */
	atomic_uint_fast64_t requests[PW_FS_OPCODES];
	/* Notifications (invalidations) written to the kernel (devio.c), for status. */
	atomic_uint_fast64_t notifications;
	/* devio.c: the pipe size in bytes that holds the largest request the INIT reply
	 * allows, once requests may be spliced (0 before INIT, or when they are read); and
	 * how many more requests are spliced since the last large WRITE. */
	_Atomic size_t splice_need;
	atomic_int splice_credit;
	/* devio.c: the largest pipe a worker may make (probed at INIT), and the max_write the
	 * INIT reply carried (0 before it), for status. */
	size_t pipe_max;
	_Atomic uint32_t max_write;
	int splice_policy;   /* devio.c: PIWORKFS_SPLICE, set before the session starts */
	bool workers_normal; /* transport.c: PIWORKFS_WORKER_SCHED=normal, likewise */
	/* FUSE over io_uring (uring.c): asked for with -o io_uring (pw_devio_attach); the
	 * transport once INIT accepted it (set before the INIT reply is written, then never
	 * changed; freed by pw_devio_detach). */
	bool uring_wanted;
	struct pw_uring *uring;
};

/* Counts the request in BUF (/dev/fuse layout, LEN bytes), notes INIT's offer, and notes a
 * WRITE's flags for the calling thread, which handles it next (requests from /dev/fuse and
 * from the ring alike). */
void pw_transport_note_request(struct pw_transport *t, const void *buf, size_t len);
/* Whether the WRITE this thread is handling asks the server to kill suid/sgid
 * (FUSE_WRITE_KILL_SUIDGID, with FUSE_HANDLE_KILLPRIV_V2: devio.c). */
bool pw_transport_write_kills_suidgid(void);
/* The transport's counters for status: requests by opcode, notifications sent, max_write. */
void pw_transport_counts(const struct pw_transport *t, pw_fs_stats *ret);
/* Reads the daemon's environment for the serving threads' scheduling
 * (PIWORKFS_WORKER_SCHED=normal: ordinary threads, for measurements); before any thread serves. */
void pw_transport_read_env(struct pw_transport *t);
/* Called by a thread that serves requests (a libfuse worker, "pw-fuse"; a ring's thread,
 * "pw-ring") before its first: names it NAME and puts it under SCHED_BATCH (transport.c says
 * why), or SCHED_OTHER with PIWORKFS_WORKER_SCHED=normal. */
void pw_transport_thread_start(const struct pw_transport *t, const char *name);
