/* SPDX-License-Identifier: MIT */
/*
 * FUSE over io_uring (-o io_uring): requests and replies through per-CPU queues of ring
 * entries instead of read(2) and writev(2) on /dev/fuse.
 *
 * Why: over /dev/fuse every request is a wake-up of a daemon thread, usually on another
 * CPU than the caller, and the reply a second cross-CPU wake-up. With FUSE over io_uring
 * (kernel 6.14, fuse module parameter enable_uring) the kernel queues a request on the
 * queue of the CPU the caller runs on, and hands it to a thread that registered an entry
 * on that queue; with that thread pinned to the same CPU the request and its reply need no
 * cross-CPU hand-off, and the reply and the fetch of the next request are one system call.
 *
 * How, with libfuse 3.14 (which knows nothing of it; 3.18 does):
 *  - devio.c sees the kernel offer FUSE_OVER_IO_URING in INIT. Before libfuse's INIT reply
 *    goes out it calls pw_uring_prepare(): rings, buffers and threads are made first, so
 *    the flag is only accepted when everything is in place (once the kernel has it, every
 *    request waits for the ring to be ready). After the reply, pw_uring_start() lets the
 *    threads register their entries; when every CPU's queue has one, the kernel switches.
 *    A registration the kernel refuses makes it fall back to /dev/fuse by itself.
 *  - A thread per queue entry (PW_URING_PER_QUEUE per CPU, each pinned to its CPU, each with
 *    its own ring of one entry): a handler that blocks (an fsync) holds one entry, not the
 *    CPU's whole queue, since the kernel never moves a request to another CPU's queue.
 *  - The kernel writes a request as three pieces: the fuse_in_header, the opcode's fixed
 *    argument (op_in), and the rest (names, write data) into the payload buffer. libfuse
 *    wants the /dev/fuse layout, one buffer. The payload buffer has headroom in front, so
 *    the header and op_in are copied in front of the payload and the write data stays
 *    where the kernel put it (no copy of the data).
 *  - libfuse sends the reply through devio.c's writev (or splice_send for read replies);
 *    devio.c hands it here (pw_uring_reply), which copies it into the entry, and the thread
 *    commits it with COMMIT_AND_FETCH once the handler returns. A reply made on another
 *    thread (none of our handlers does, but libfuse allows it) is matched by its unique.
 *  - FORGET, INTERRUPT and notifications still go through /dev/fuse: the kernel sends the
 *    first two there, and takes notifications only there. libfuse's own loop keeps
 *    serving /dev/fuse alongside.
 *
 * The uapi structures of kernel 7.42 are defined here under our own names: Debian 12's
 * <linux/fuse.h> is 7.38.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "transport.h"
#include "uring.h"

#ifdef HAVE_LIBURING
#include <liburing.h>

/* From <linux/fuse.h> 7.42. */
#define PW_FUSE_OVER_IO_URING (1ULL << 41)
#define PW_URING_IN_OUT_HEADER_SZ 128
#define PW_URING_OP_IN_OUT_SZ 128
enum { PW_URING_CMD_REGISTER = 1, PW_URING_CMD_COMMIT_AND_FETCH = 2 };

struct pw_uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;  /* the request's unique: what a commit names */
	uint32_t payload_sz; /* bytes in the payload buffer, both directions */
	uint32_t padding;
	uint64_t reserved;
};

struct pw_uring_req_header {
	char in_out[PW_URING_IN_OUT_HEADER_SZ]; /* fuse_in_header, then fuse_out_header */
	char op_in[PW_URING_OP_IN_OUT_SZ];	/* the opcode's fixed argument */
	struct pw_uring_ent_in_out ring_ent_in_out;
};

/* In the command area of a 128-byte SQE. */
struct pw_uring_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

#define PW_URING_PER_QUEUE 2 /* entries (threads) per CPU queue */
#define HEADROOM 256	     /* in front of the payload: fuse_in_header + op_in */
#define STOP_TAG 1	     /* user_data of the stop eventfd's poll */

typedef struct pw_uring_ent {
	struct pw_uring *u;
	unsigned qid;
	pthread_t thread;
	bool thread_started;
	struct io_uring ring;
	bool ring_ready;
	struct pw_uring_req_header *hdr;
	char *mem;     /* HEADROOM + payload_sz, one mapping */
	char *payload; /* mem + HEADROOM */
	struct iovec iov[2];
	/* The request in the handler: its unique, and whether its reply is in the entry.
	 * Guarded by lock; replied is signalled on cond for a reply made by another thread. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t unique;
	bool busy, replied;
} pw_uring_ent;

struct pw_uring {
	pw_fs *fs;
	int fuse_fd;
	size_t payload_sz;
	unsigned n_ents;
	pw_uring_ent *ents;
	int stop_fd;
	/* 0: wait, 1: register and serve, -1: stop; set under go_lock, signalled on go_cond,
	 * which also carries the threads' reports of their set-up (n_ready, setup_err). */
	pthread_mutex_t go_lock;
	pthread_cond_t go_cond;
	atomic_int go;
	unsigned n_ready;
	int setup_err;
	bool started;		     /* pw_uring_start was called */
	atomic_uint registered;	     /* entries that received a request */
	atomic_uint_fast64_t served; /* requests received through the ring */
	atomic_bool failed_logged;   /* the kernel refused an entry: it serves /dev/fuse */
};

/* The entry whose request this thread is handling, if any. */
static _Thread_local pw_uring_ent *cur_ent;

static void submit_cmd(pw_uring_ent *e, uint32_t cmd, uint64_t commit_id)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);
	/* One entry per ring and at most two SQEs queued (a command and the stop poll): the
	 * ring of four always has room. */
	if (!sqe)
		return;
	memset((char *)sqe, 0, 128); /* a 128-byte SQE: the command area follows */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = e->u->fuse_fd;
	sqe->cmd_op = cmd;
	sqe->user_data = (uintptr_t)e;
	if (cmd == PW_URING_CMD_REGISTER) {
		sqe->addr = (uintptr_t)e->iov;
		sqe->len = 2;
	}
	struct pw_uring_cmd_req *req = (struct pw_uring_cmd_req *)sqe->cmd;
	req->qid = (uint16_t)e->qid;
	req->commit_id = commit_id;
}

/* Puts the request the kernel wrote into E in /dev/fuse layout in front of the payload and
 * returns where it starts, or NULL for a request that does not add up. */
static char *assemble(pw_uring_ent *e, size_t *ret_len)
{
	struct fuse_in_header in;
	memcpy(&in, e->hdr->in_out, sizeof(in));
	size_t payload = e->hdr->ring_ent_in_out.payload_sz;
	if (in.len < sizeof(in) + payload || payload > e->u->payload_sz)
		return NULL;
	size_t op_in = in.len - sizeof(in) - payload;
	if (op_in > PW_URING_OP_IN_OUT_SZ)
		return NULL;
	char *start = e->payload - op_in - sizeof(in);
	memcpy(start, &in, sizeof(in));
	memcpy(start + sizeof(in), e->hdr->op_in, op_in);
	*ret_len = in.len;
	return start;
}

static void handle(pw_uring_ent *e)
{
	size_t len;
	char *buf = assemble(e, &len);
	struct fuse_in_header in;
	memcpy(&in, e->hdr->in_out, sizeof(in));
	pthread_mutex_lock(&e->lock);
	e->unique = in.unique;
	e->busy = true;
	e->replied = false;
	pthread_mutex_unlock(&e->lock);
	if (!buf) {
		struct fuse_out_header oh = {.len = sizeof(oh), .error = -EIO, .unique = in.unique};
		struct iovec iov = {&oh, sizeof(oh)};
		pw_uring_reply(e->u->fs, &iov, 1);
	} else {
		pw_transport_note_request(&e->u->fs->transport, buf, len);
		cur_ent = e;
		struct fuse_buf fb = {.size = len, .mem = buf};
		fuse_session_process_buf(e->u->fs->se, &fb);
		cur_ent = NULL;
	}
	/* The reply normally came on this thread, inside the handler. */
	pthread_mutex_lock(&e->lock);
	while (!e->replied && atomic_load(&e->u->go) >= 0)
		pthread_cond_wait(&e->cond, &e->lock);
	e->busy = false;
	pthread_mutex_unlock(&e->lock);
}

static int ring_init(pw_uring_ent *e)
{
	/* Task work (the kernel's delivery of a request) runs when this thread waits for
	 * completions, not as an interrupt of whatever it does; a plain ring on a kernel
	 * without these flags. Made on the thread that uses it: with SINGLE_ISSUER the ring
	 * belongs to the thread that creates it. */
	struct io_uring_params p = {.flags = IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER |
					     IORING_SETUP_DEFER_TASKRUN};
	int r = io_uring_queue_init_params(4, &e->ring, &p);
	if (r == -EINVAL) {
		p = (struct io_uring_params){.flags = IORING_SETUP_SQE128};
		r = io_uring_queue_init_params(4, &e->ring, &p);
	}
	if (r == 0)
		e->ring_ready = true;
	return r;
}

static void *ent_main(void *arg)
{
	pw_uring_ent *e = arg;
	pw_uring *u = e->u;

	/* Serve the CPU whose queue this is, on that CPU: no hand-off to another one. */
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(e->qid, &set);
	(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	pw_transport_thread_start(&u->fs->transport, "pw-ring");
	int r = ring_init(e);

	pthread_mutex_lock(&u->go_lock);
	u->n_ready++;
	if (r < 0 && !u->setup_err)
		u->setup_err = r;
	pthread_cond_broadcast(&u->go_cond);
	while (atomic_load(&u->go) == 0)
		pthread_cond_wait(&u->go_cond, &u->go_lock);
	int go = atomic_load(&u->go);
	pthread_mutex_unlock(&u->go_lock);
	if (go < 0 || r < 0)
		return NULL;

	struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);
	io_uring_prep_poll_add(sqe, u->stop_fd, POLLIN);
	sqe->user_data = STOP_TAG;
	submit_cmd(e, PW_URING_CMD_REGISTER, 0);
	bool registered = false;
	for (;;) {
		struct io_uring_cqe *cqe;
		int w = io_uring_submit_and_wait(&e->ring, 1);
		if (w < 0 && w != -EINTR)
			break;
		if (io_uring_peek_cqe(&e->ring, &cqe) < 0)
			continue;
		uint64_t tag = cqe->user_data;
		int res = cqe->res;
		io_uring_cqe_seen(&e->ring, cqe);
		if (tag == STOP_TAG)
			break;
		if (res < 0) {
			/* At unmount the kernel ends every entry with ENOTCONN. A refused
			 * registration has already made it fall back to /dev/fuse. */
			if (!registered && res != -ENOTCONN &&
			    !atomic_exchange(&u->failed_logged, true))
				fprintf(stderr,
					"piworkfs: io_uring: the kernel refused the ring (%s); "
					"serving through /dev/fuse\n",
					strerror(-res));
			break;
		}
		/* A registration completes only with the entry's first request. */
		if (!registered) {
			registered = true;
			atomic_fetch_add(&u->registered, 1);
		}
		if (atomic_fetch_add(&u->served, 1) == 0)
			fprintf(stderr,
				"piworkfs: io_uring: requests arrive through the ring (%u "
				"entries, %u per CPU)\n",
				u->n_ents, PW_URING_PER_QUEUE);
		handle(e);
		submit_cmd(e, PW_URING_CMD_COMMIT_AND_FETCH, e->unique);
	}
	return NULL;
}

static void ent_free(pw_uring_ent *e)
{
	if (e->ring_ready)
		io_uring_queue_exit(&e->ring);
	if (e->mem)
		munmap(e->mem, HEADROOM + e->u->payload_sz);
	if (e->hdr)
		munmap(e->hdr, sizeof(*e->hdr));
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->cond);
}

static int ent_init(pw_uring *u, pw_uring_ent *e, unsigned qid)
{
	e->u = u;
	e->qid = qid;
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->cond, NULL);
	e->hdr =
	    mmap(NULL, sizeof(*e->hdr), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	e->mem = mmap(NULL, HEADROOM + u->payload_sz, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (e->hdr == MAP_FAILED || e->mem == MAP_FAILED) {
		e->hdr = e->hdr == MAP_FAILED ? NULL : e->hdr;
		e->mem = e->mem == MAP_FAILED ? NULL : e->mem;
		return -ENOMEM;
	}
	e->payload = e->mem + HEADROOM;
	e->iov[0] = (struct iovec){e->hdr, sizeof(*e->hdr)};
	e->iov[1] = (struct iovec){e->payload, u->payload_sz};
	return 0;
}

void pw_uring_free(pw_uring *u)
{
	if (!u)
		return;
	pthread_mutex_lock(&u->go_lock);
	atomic_store(&u->go, -1);
	pthread_cond_broadcast(&u->go_cond);
	pthread_mutex_unlock(&u->go_lock);
	if (u->stop_fd >= 0) {
		uint64_t one = 1;
		(void)!write(u->stop_fd, &one, sizeof(one));
	}
	for (unsigned i = 0; i < u->n_ents; i++) {
		pw_uring_ent *e = &u->ents[i];
		pthread_mutex_lock(&e->lock);
		pthread_cond_broadcast(&e->cond);
		pthread_mutex_unlock(&e->lock);
		if (e->thread_started)
			pthread_join(e->thread, NULL);
	}
	if (u->started)
		fprintf(stderr, "piworkfs: io_uring: %llu requests came through the ring\n",
			(unsigned long long)atomic_load(&u->served));
	for (unsigned i = 0; i < u->n_ents; i++)
		ent_free(&u->ents[i]);
	free(u->ents);
	if (u->stop_fd >= 0)
		close(u->stop_fd);
	pthread_mutex_destroy(&u->go_lock);
	pthread_cond_destroy(&u->go_cond);
	free(u);
}

/* The kernel makes one queue per possible CPU (num_possible_cpus(), which may count more
 * than are present or online) and uses the ring only once each has an entry. */
static long possible_cpus(void)
{
	FILE *f = fopen("/sys/devices/system/cpu/possible", "re");
	long n = 0;
	if (f) {
		long a, b;
		int c;
		while (fscanf(f, "%ld", &a) == 1) {
			b = a;
			c = fgetc(f);
			if (c == '-') {
				if (fscanf(f, "%ld", &b) != 1)
					break;
				c = fgetc(f);
			}
			n += b - a + 1;
			if (c != ',')
				break;
		}
		fclose(f);
	}
	return n > 0 ? n : sysconf(_SC_NPROCESSORS_CONF);
}

int pw_uring_prepare(pw_fs *fs, size_t payload_sz, pw_uring **ret)
{
	long ncpu = possible_cpus();
	if (ncpu < 1 || ncpu > 1024)
		return -EINVAL;
	pw_uring *u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->fs = fs;
	u->fuse_fd = fuse_session_fd(fs->se);
	u->payload_sz = payload_sz;
	u->stop_fd = -1;
	pthread_mutex_init(&u->go_lock, NULL);
	pthread_cond_init(&u->go_cond, NULL);
	int r = -ENOMEM;
	u->ents = calloc((size_t)ncpu * PW_URING_PER_QUEUE, sizeof(*u->ents));
	if (!u->ents)
		goto fail;
	u->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (u->stop_fd < 0) {
		r = -errno;
		goto fail;
	}
	for (unsigned i = 0; i < (unsigned)ncpu * PW_URING_PER_QUEUE; i++) {
		u->n_ents = i + 1;
		r = ent_init(u, &u->ents[i], i / PW_URING_PER_QUEUE);
		if (r < 0)
			goto fail;
	}
	unsigned started = 0;
	for (unsigned i = 0; i < u->n_ents; i++) {
		r = -pthread_create(&u->ents[i].thread, NULL, ent_main, &u->ents[i]);
		if (r < 0)
			break;
		u->ents[i].thread_started = true;
		started++;
	}
	/* Every thread reports whether its ring could be made (io_uring may be disabled
	 * by kernel.io_uring_disabled, or lack a flag): only then may INIT accept. */
	pthread_mutex_lock(&u->go_lock);
	while (u->n_ready < started)
		pthread_cond_wait(&u->go_cond, &u->go_lock);
	if (r == 0)
		r = u->setup_err;
	pthread_mutex_unlock(&u->go_lock);
	if (r < 0)
		goto fail;
	*ret = u;
	return 0;
fail:
	pw_uring_free(u);
	return r;
}

void pw_uring_start(pw_uring *u)
{
	pthread_mutex_lock(&u->go_lock);
	atomic_store(&u->go, 1);
	u->started = true;
	pthread_cond_broadcast(&u->go_cond);
	pthread_mutex_unlock(&u->go_lock);
}

/* The entry waiting for the reply to UNIQUE: this thread's, or (rarely) another's. */
static pw_uring_ent *ent_for(pw_uring *u, uint64_t unique)
{
	if (cur_ent && cur_ent->unique == unique)
		return cur_ent;
	for (unsigned i = 0; i < u->n_ents; i++) {
		pw_uring_ent *e = &u->ents[i];
		pthread_mutex_lock(&e->lock);
		bool match = e->busy && !e->replied && e->unique == unique;
		pthread_mutex_unlock(&e->lock);
		if (match)
			return e;
	}
	return NULL;
}

static void replied(pw_uring_ent *e, size_t payload)
{
	e->hdr->ring_ent_in_out.payload_sz = (uint32_t)payload;
	pthread_mutex_lock(&e->lock);
	e->replied = true;
	pthread_cond_signal(&e->cond);
	pthread_mutex_unlock(&e->lock);
}

ssize_t pw_uring_reply(pw_fs *fs, const struct iovec *iov, int count)
{
	if (count < 1 || iov[0].iov_len < sizeof(struct fuse_out_header))
		return -ENOENT;
	struct fuse_out_header oh;
	memcpy(&oh, iov[0].iov_base, sizeof(oh));
	pw_uring *u = fs->transport.uring;
	if (!oh.unique || (!cur_ent && !atomic_load(&u->registered)))
		return -ENOENT; /* a notification, or no ring in use */
	pw_uring_ent *e = ent_for(u, oh.unique);
	if (!e)
		return -ENOENT; /* not a ring request: /dev/fuse's */
	size_t total = iov[0].iov_len, off = 0;
	for (int i = 1; i < count; i++) {
		if (off + iov[i].iov_len > e->u->payload_sz) {
			/* Cannot be: max_write bounds every reply. Fail the request instead. */
			oh.error = -EIO;
			oh.len = sizeof(oh);
			off = 0;
			break;
		}
		memcpy(e->payload + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
		total += iov[i].iov_len;
	}
	memcpy(e->hdr->in_out, &oh, sizeof(oh));
	replied(e, off);
	return (ssize_t)total;
}

ssize_t pw_uring_reply_pipe(pw_fs *fs, int pipe_fd, size_t len)
{
	pw_uring_ent *e = cur_ent;
	if (!e || !e->busy || e->replied || len < sizeof(struct fuse_out_header) ||
	    len - sizeof(struct fuse_out_header) > e->u->payload_sz)
		return -ENOENT;
	(void)fs;
	struct fuse_out_header oh;
	size_t got = 0;
	while (got < len) {
		char *dst = got < sizeof(oh) ? (char *)&oh + got : e->payload + got - sizeof(oh);
		size_t want = got < sizeof(oh) ? sizeof(oh) - got : len - got;
		ssize_t n = read(pipe_fd, dst, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		got += (size_t)n;
	}
	if (oh.unique != e->unique)
		return -ENOENT;
	memcpy(e->hdr->in_out, &oh, sizeof(oh));
	replied(e, len - sizeof(oh));
	return (ssize_t)len;
}

bool pw_uring_available(void)
{
	return true;
}

/* kernel.io_uring_disabled=1 lets only members of io_uring_group (and CAP_SYS_ADMIN) make
 * rings: try one. */
static bool uring_ring_allowed(void)
{
	struct io_uring ring;
	if (io_uring_queue_init(1, &ring, 0) < 0)
		return false;
	io_uring_queue_exit(&ring);
	return true;
}

static bool uring_refused(pw_uring *u)
{
	return atomic_load(&u->failed_logged);
}

static uint64_t uring_served(pw_uring *u)
{
	return atomic_load(&u->served);
}

uint64_t pw_uring_init_flag(void)
{
	return PW_FUSE_OVER_IO_URING;
}

#else /* !HAVE_LIBURING: built without liburing, -o io_uring falls back with a log line */

int pw_uring_prepare(pw_fs *fs, size_t payload_sz, pw_uring **ret)
{
	return -EOPNOTSUPP;
}
void pw_uring_start(pw_uring *u)
{
}
void pw_uring_free(pw_uring *u)
{
}
ssize_t pw_uring_reply(pw_fs *fs, const struct iovec *iov, int count)
{
	return -ENOENT;
}
ssize_t pw_uring_reply_pipe(pw_fs *fs, int pipe_fd, size_t len)
{
	return -ENOENT;
}
bool pw_uring_available(void)
{
	return false;
}
uint64_t pw_uring_init_flag(void)
{
	return 1ULL << 41;
}
static bool uring_ring_allowed(void)
{
	return false;
}
static bool uring_refused(pw_uring *u)
{
	return true;
}
static uint64_t uring_served(pw_uring *u)
{
	return 0;
}
#endif

/* ---- whether a view can have it (both builds) ------------------------------------------ */

#define URING_PARAM "/sys/module/fuse/parameters/enable_uring"

/* The first byte of PATH, or 0 when it cannot be read. */
static char read_flag(const char *path)
{
	char c = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (read(fd, &c, 1) != 1)
			c = 0;
		close(fd);
	}
	return c;
}

/* How to turn the parameter on for good: a modprobe.d line for a fuse module, the kernel
 * command line for a fuse built in (no initstate: modprobe never reads its options). */
static const char *for_good(void)
{
	return access("/sys/module/fuse/initstate", F_OK) == 0
		   ? "add 'options fuse enable_uring=1' to /etc/modprobe.d/fuse.conf"
		   : "add fuse.enable_uring=1 to the kernel command line";
}

int pw_fs_uring_probe(char *why, size_t size)
{
	if (!pw_uring_available()) {
		snprintf(why, size,
			 "this piworkfs was built without liburing, so without FUSE over "
			 "io_uring (rebuild with liburing-dev installed)");
		return -EOPNOTSUPP;
	}
	char param = read_flag(URING_PARAM);
	if (!param) {
		struct utsname u;
		snprintf(why, size,
			 "kernel %s has no FUSE over io_uring (Linux 6.14 and later, "
			 "with %s)",
			 uname(&u) == 0 ? u.release : "?", URING_PARAM);
		return -EOPNOTSUPP;
	}
	if (param != 'Y' && param != '1') {
		snprintf(
		    why, size,
		    "FUSE over io_uring is off in the kernel (%s is N), and each request over "
		    "/dev/fuse costs about twice as much (ls -lR, grep -r, tar x: 2x slower); "
		    "to turn it on for good, as root, %s; for the next mounts now: echo 1 > %s",
		    URING_PARAM, for_good(), URING_PARAM);
		return -EOPNOTSUPP;
	}
	char disabled = read_flag("/proc/sys/kernel/io_uring_disabled");
	if (disabled == '2' || (disabled == '1' && !uring_ring_allowed())) {
		snprintf(why, size,
			 "io_uring is disabled for this process "
			 "(/proc/sys/kernel/io_uring_disabled is %c)",
			 disabled);
		return -EOPNOTSUPP;
	}
	return 0;
}

void pw_fs_transport_stats(pw_fs *fs, pw_fs_stats *ret)
{
	pw_uring *u = fs->transport.uring;
	bool ring = u && !uring_refused(u);
	ret->transport = ring ? "io_uring" : "/dev/fuse";
	ret->ring_requests = u ? uring_served(u) : 0;
	pw_transport_counts(&fs->transport, ret);
}
