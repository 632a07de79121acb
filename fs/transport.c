/* SPDX-License-Identifier: MIT */
/* What both transports (devio.c, uring.c) do with each request they receive (transport.h). */
#include <linux/fuse.h>
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
