/* SPDX-License-Identifier: MIT */
/*
 * The session's own /dev/fuse I/O (fuse_session_custom_io), for two things the kernel
 * offers and libfuse 3.14 can neither negotiate nor pass on:
 *
 *  - FUSE_HANDLE_KILLPRIV_V2 (kernel 5.11, protocol 7.33). Without it the kernel sends a
 *    GETXATTR of security.capability before every write() (a whole round trip, ~25 µs
 *    on this VM, doubling the cost of small writes) and kills suid/sgid with a SETATTR
 *    that it issues with the writer's credentials; under allow_other a user who may write
 *    a setuid file but does not own it then gets EIO from write(). With V2 the kernel
 *    asks once per inode and leaves the killing to the server, telling it per write with
 *    FUSE_WRITE_KILL_SUIDGID. We add the flag to libfuse's INIT reply when the kernel
 *    offered it.
 *
 *  - FUSE_WRITE_KILL_SUIDGID itself: libfuse drops a WRITE's write_flags. The read hook
 *    keeps them in a thread-local, because libfuse's worker threads each read one request
 *    and then handle it before reading the next (fuse_loop_mt.c), and splice reading is
 *    off (ops.c), so every request passes through read() here.
 *
 * The read hook also counts requests by opcode, and the write hook notifications, for
 * `piworkfs status`.
 *
 * With -o io_uring the INIT reply also accepts FUSE_OVER_IO_URING when the kernel offers it
 * and uring.c could set up its rings; replies to requests that came through a ring entry
 * then go back into it instead of to /dev/fuse (uring.c has the why and how). Nothing else
 * is changed: the hooks are read(2), writev(2) and splice(2) plus these checks.
 */
#include <errno.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fs_internal.h"

/* The write_flags of the WRITE request this thread is handling, 0 for any other. */
static _Thread_local uint32_t cur_write_flags;

void pw_devio_note_request(pw_fs *fs, const void *buf, size_t len)
{
	cur_write_flags = 0;
	if (len < sizeof(struct fuse_in_header))
		return;
	const struct fuse_in_header *in = buf;
	atomic_fetch_add_explicit(&fs->requests[in->opcode < PW_FS_OPCODES ? in->opcode : 0], 1,
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
		atomic_store(&fs->init_offered, ii.flags);
		/* flags2 counts only with FUSE_INIT_EXT (and a kernel that sends it) */
		if ((ii.flags & FUSE_INIT_EXT) && arglen >= offsetof(struct fuse_init_in, unused))
			atomic_store(&fs->init_offered2, ii.flags2);
		atomic_store(&fs->init_unique, in->unique);
	}
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t r = read(fd, buf, len);
	if (r > 0)
		pw_devio_note_request(userdata, buf, (size_t)r);
	return r;
}

/* With -o io_uring, at INIT: makes the rings when the kernel offers FUSE over io_uring and
 * the reply OUT can say so. Returns whether OUT now accepts it. One log line either way. */
static bool accept_uring(pw_fs *fs, struct fuse_init_out *out, size_t out_len)
{
	uint64_t flag = pw_uring_init_flag();
	if (!pw_uring_available()) {
		fprintf(stderr, "piworkfs: io_uring: built without liburing; serving through "
				"/dev/fuse\n");
		return false;
	}
	if (!(atomic_load(&fs->init_offered2) & (uint32_t)(flag >> 32))) {
		fprintf(stderr, "piworkfs: io_uring: the kernel does not offer FUSE over io_uring "
				"(needs Linux 6.14 and the fuse module parameter enable_uring=Y: "
				"see piworkfs(1)); serving through /dev/fuse\n");
		return false;
	}
	if (out_len < offsetof(struct fuse_init_out, flags2) + sizeof(out->flags2))
		return false;
	/* Every request's payload must fit an entry: the kernel takes the largest of these. */
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t payload = out->max_write;
	if (payload < 8192)
		payload = 8192;
	if ((out->flags & FUSE_MAX_PAGES) && out->max_pages * page > payload)
		payload = out->max_pages * page;
	if (32 * page > payload) /* the kernel's default max_pages */
		payload = 32 * page;
	pw_uring *u;
	int r = pw_uring_prepare(fs, payload, &u);
	if (r < 0) {
		fprintf(stderr, "piworkfs: io_uring: cannot set up the rings (%s); serving through "
				"/dev/fuse\n", strerror(-r));
		return false;
	}
	fs->uring = u;
	out->flags |= FUSE_INIT_EXT;
	out->flags2 |= (uint32_t)(flag >> 32);
	return true;
}

/* The INIT reply, with HANDLE_KILLPRIV_V2 added when the kernel offered it, and FUSE over
 * io_uring when asked for and possible. OUT must hold the copy that replaces iov[1] for the
 * duration of the write. */
static bool patch_init_reply(pw_fs *fs, struct iovec *iov, int count, struct fuse_init_out *out)
{
	uint64_t unique = atomic_load(&fs->init_unique);
	if (!unique || count < 2 || iov[0].iov_len < sizeof(struct fuse_out_header))
		return false;
	const struct fuse_out_header *oh = iov[0].iov_base;
	if (oh->unique != unique)
		return false;
	atomic_store(&fs->init_unique, 0);
	if (oh->error != 0 || iov[1].iov_len < offsetof(struct fuse_init_out, max_background) ||
	    iov[1].iov_len > sizeof(*out))
		return false;
	bool killpriv = atomic_load(&fs->init_offered) & FUSE_HANDLE_KILLPRIV_V2;
	if (!killpriv && !fs->uring_wanted)
		return false;
	memcpy(out, iov[1].iov_base, iov[1].iov_len);
	if (killpriv)
		out->flags |= FUSE_HANDLE_KILLPRIV_V2;
	if (fs->uring_wanted)
		accept_uring(fs, out, iov[1].iov_len);
	iov[1].iov_base = out;
	return true;
}

/* A message with unique 0 is a notification (its error field is the notify code): the
 * cache invalidations of switches and of changes outside the view. Counted for status,
 * so that tests can hold a switch to the invalidations it needs. */
static void note_reply(pw_fs *fs, const struct iovec *iov, int count, ssize_t written)
{
	if (written <= 0 || count < 1 || iov[0].iov_len < sizeof(struct fuse_out_header))
		return;
	const struct fuse_out_header *oh = iov[0].iov_base;
	if (oh->unique == 0)
		atomic_fetch_add_explicit(&fs->notifications, 1, memory_order_relaxed);
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	pw_fs *fs = userdata;
	if (fs->uring) {
		ssize_t n = pw_uring_reply(fs, iov, count);
		if (n != -ENOENT) {
			if (n >= 0)
				return n;
			errno = (int)-n;
			return -1;
		}
	}
	struct fuse_init_out out;
	void *orig = count >= 2 ? iov[1].iov_base : NULL;
	pw_uring *before = fs->uring;
	bool patched = patch_init_reply(fs, iov, count, &out);
	ssize_t r = writev(fd, iov, count);
	if (patched)
		iov[1].iov_base = orig;
	if (fs->uring && !before) {
		/* The kernel has the INIT reply: the threads may register their entries. */
		if (r >= 0)
			pw_uring_start(fs->uring);
	}
	note_reply(fs, iov, count, r);
	return r;
}

static ssize_t io_splice_send(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
			      unsigned int flags, void *userdata)
{
	pw_fs *fs = userdata;
	if (fs->uring) {
		/* A spliced read reply (header and data in the pipe) to a ring request. */
		ssize_t n = pw_uring_reply_pipe(fs, fdin, len);
		if (n != -ENOENT) {
			if (n >= 0)
				return n;
			errno = (int)-n;
			return -1;
		}
	}
	return splice(fdin, offin, fdout, offout, len, flags);
}

int pw_devio_attach(pw_fs *fs)
{
	static const struct fuse_custom_io io = {
		.read = io_read,
		.writev = io_writev,
		.splice_send = io_splice_send,
	};
	return fuse_session_custom_io(fs->se, &io, fuse_session_fd(fs->se));
}

bool pw_devio_write_kills_suidgid(void)
{
	return cur_write_flags & FUSE_WRITE_KILL_SUIDGID;
}
