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
 *    has them kept in a thread-local (transport.c, for the ring's requests too), because libfuse's
 * worker threads each receive one request and then handle it before receiving the next
 * (fuse_loop_mt.c).
 *
 * And it receives requests with splice(2), so that a WRITE's data goes from the pages the
 * caller's write filled into the backing file without passing through the daemon's memory.
 * libfuse 3.14's own splice receive cannot be used: it splices into a pipe of 1 MiB and a
 * page whatever max_write is, and a pipe above /proc/sys/fs/pipe-max-size (1 MiB by default)
 * needs CAP_SYS_RESOURCE, so on a default system it falls back to read() for good. Instead
 * the read hook splices each request into a pipe of its own (per thread, large enough for a
 * WRITE's header page and one page per page of data) and reads from it into libfuse's
 * buffer: a small request whole, a large WRITE only its header and fixed argument (the 80
 * bytes libfuse reads; the view implements write_buf, so libfuse never looks at the data).
 * The WRITE handler then takes the data from the pipe (pw_devio_write_data) and splices it
 * into the backing file. The header is still read, so the counts and the write_flags stay
 * exact. Until INIT is answered, and in a thread whose
 * pipe cannot be made that large, requests are read as before.
 *
 * max_write follows the pipe (pw_devio_choose_max_write, at INIT): 1 MiB, one WRITE per MiB
 * as the kernel allows, when the daemon may make a pipe of 257 pages (2 MiB once rounded:
 * root with CAP_SYS_RESOURCE, or pipe-max-size raised); else 1 MiB less a page, so that a
 * request fits a pipe of the default pipe-max-size and large writes are still spliced: one
 * more round trip per MiB against a copy of each MiB saved.
 *
 * The read hook also has requests counted by opcode (transport.c), and the write hook counts
 * notifications, for `piworkfs status`.
 *
 * With -o io_uring the INIT reply also accepts FUSE_OVER_IO_URING when the kernel offers it
 * and uring.c could set up its rings; replies to requests that came through a ring entry
 * then go back into it instead of to /dev/fuse (uring.c has the why and how). Nothing else
 * is changed: the hooks are read(2) or splice(2), writev(2) and splice(2) plus these checks.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "devio.h"
#include "transport.h"
#include "uring.h"

/*
 * Receiving with splice. Per worker thread, a pipe: each request is spliced from the device
 * into it. Made at the thread's first request after INIT, freed when the thread ends
 * (libfuse's workers come and go): a pthread key, since a _Thread_local has no destructor.
 */
typedef struct devio_thread {
	int fd[2];	    /* the pipe; -1 when there is none */
	size_t size;	    /* its capacity in bytes, 0 until made large enough */
	bool refused;	    /* the pipe cannot be made large enough: this thread reads */
	bool pending;	    /* the current request is a WRITE whose data waits in the pipe */
	size_t pending_len; /* and its length */
} devio_thread;

static pthread_key_t devio_key;
static pthread_once_t devio_once = PTHREAD_ONCE_INIT;
static bool devio_key_ok;

static void devio_pipe_close(devio_thread *t)
{
	for (int i = 0; i < 2; i++) {
		if (t->fd[i] >= 0)
			close(t->fd[i]);
		t->fd[i] = -1;
	}
	t->size = 0;
}

static void devio_thread_free(void *p)
{
	devio_thread *t = p;
	if (!t)
		return;
	devio_pipe_close(t);
	free(t);
}

static void devio_key_make(void)
{
	devio_key_ok = pthread_key_create(&devio_key, devio_thread_free) == 0;
}

/* The calling thread's state, made on first use when CREATE; NULL without memory. */
static devio_thread *devio_thread_get(bool create)
{
	if (pthread_once(&devio_once, devio_key_make) != 0 || !devio_key_ok)
		return NULL;
	devio_thread *t = pthread_getspecific(devio_key);
	if (t || !create)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->fd[0] = t->fd[1] = -1;
	if (pthread_setspecific(devio_key, t) != 0) {
		free(t);
		return NULL;
	}
	return t;
}

/* Makes T's pipe hold NEED bytes (a whole number of pages: the kernel needs one pipe slot
 * per page of a request). Returns false when it cannot: a pipe larger than
 * /proc/sys/fs/pipe-max-size needs CAP_SYS_RESOURCE, and a daemon that is not root may run
 * into the per-user pipe limits. Such a thread reads. */
static bool devio_pipe_ready(devio_thread *t, size_t need)
{
	if (t->size >= need)
		return true;
	if (t->refused)
		return false;
	if (t->fd[0] < 0 && pipe2(t->fd, O_CLOEXEC | O_NONBLOCK) < 0) {
		t->fd[0] = t->fd[1] = -1;
		t->refused = true;
		return false;
	}
	int r = fcntl(t->fd[0], F_SETPIPE_SZ, need > INT_MAX ? INT_MAX : (int)need);
	if (r < 0 || (size_t)r < need) {
		devio_pipe_close(t);
		t->refused = true;
		return false;
	}
	t->size = (size_t)r;
	return true;
}

/* Before the next request: empties T's pipe of what the last WRITE's handler left in it (all
 * of its data when the write was refused) by making a new pipe, which costs less than
 * reading it out; the common case, a handler that took everything, costs one ioctl. */
static void devio_drop_pending(devio_thread *t)
{
	if (!t->pending)
		return;
	t->pending = false;
	int left = 0;
	if (ioctl(t->fd[0], FIONREAD, &left) == 0 && left == 0)
		return;
	size_t need = t->size;
	devio_pipe_close(t);
	(void)devio_pipe_ready(t, need);
}

/* LEN bytes from FD: 0, or -errno (-EIO when the pipe ends first). */
static int read_all(int fd, char *buf, size_t len)
{
	ssize_t n = pw_read_upto(fd, buf, len);
	if (n < 0)
		return (int)n;
	return (size_t)n < len ? -EIO : 0;
}

/* The fixed part of a WRITE: what is read into libfuse's buffer of a large one. */
#define WRITE_HEAD (sizeof(struct fuse_in_header) + sizeof(struct fuse_write_in))
/* Requests up to this size are read whole: below a page of data, a pipe saves nothing. */
#define READ_WHOLE (WRITE_HEAD + 4096)
/*
 * When to splice. A spliced request costs the daemon more than a read one when its data is
 * small (on this VM 1.5 µs more CPU for a GETXATTR: the kernel allocates a page per pipe slot
 * and an array of 256 slots per call, and the request is read out of the pipe in a second
 * call), and saves a copy of the data when it is large. A thread cannot know which comes
 * next, so the view splices while writes are streaming: a WRITE of STREAM_WRITE bytes or more
 * gives every thread SPLICE_CREDIT requests' worth of splicing, which each other request
 * received through the pipe uses up. A stream of large writes thus stays spliced (its first
 * WRITEs are read, by the threads already waiting in read()), and a workload without them
 * costs what it did before.
 */
#define STREAM_WRITE (64 * 1024)
#define SPLICE_CREDIT 64
/* PIWORKFS_SPLICE=always in the daemon's environment splices every request after INIT, =never
 * none: for tests, which must reach each path whatever the threads happen to be waiting in,
 * and for measurements. */
enum { SPLICE_AUTO, SPLICE_ALWAYS, SPLICE_NEVER };

static bool is_stream_write(const void *buf, size_t len)
{
	const struct fuse_in_header *ih = buf;
	return len >= sizeof(*ih) && ih->opcode == FUSE_WRITE &&
	       ih->len >= WRITE_HEAD + STREAM_WRITE;
}

/*
 * One request, spliced from IN into T's pipe, then read into BUF (LEN bytes, libfuse's
 * buffer): all of it, but for a large WRITE, whose data stays in the pipe for the handler
 * (pw_devio_write_data) and of which BUF holds only the fixed part; libfuse passes that part
 * on and never reads the rest of its buffer, as the view implements write_buf. Returns the
 * request's length, or -1 with errno: as splice(2) from the device set it, or EIO when the
 * request arrived and could not be passed on, which ends the session (it cannot be put back,
 * and a view that drops requests would leave their callers waiting forever).
 */
static ssize_t receive_spliced(pw_fs *fs, devio_thread *t, int in, char *buf, size_t len)
{
	ssize_t n = splice(in, NULL, t->fd[1], NULL, t->size, 0);
	if (n <= 0)
		return n;
	int r = -EIO;
	if ((size_t)n > len || (size_t)n < sizeof(struct fuse_in_header))
		goto fail;
	size_t head = (size_t)n <= READ_WHOLE ? (size_t)n : WRITE_HEAD;
	r = read_all(t->fd[0], buf, head);
	if (r < 0)
		goto fail;
	const struct fuse_in_header *ih = (const void *)buf;
	if (head < (size_t)n && ih->opcode != FUSE_WRITE) {
		head = (size_t)n; /* a large request of another kind (SETXATTR): read whole */
		r = read_all(t->fd[0], buf + WRITE_HEAD, (size_t)n - WRITE_HEAD);
		if (r < 0)
			goto fail;
	}
	t->pending = head < (size_t)n;
	t->pending_len = (size_t)n - head;
	if (fs->transport.splice_policy != SPLICE_AUTO)
		; /* no credit to keep */
	else if (is_stream_write(buf, head))
		atomic_store_explicit(&fs->transport.splice_credit, SPLICE_CREDIT,
				      memory_order_relaxed);
	else
		atomic_fetch_sub_explicit(&fs->transport.splice_credit, 1, memory_order_relaxed);
	pw_transport_note_request(&fs->transport, buf, head);
	return n;
fail:
	fprintf(stderr, "piworkfs: cannot receive a request through the pipe: %s\n", strerror(-r));
	errno = EIO;
	return -1;
}

/* A libfuse worker at its first request (transport.c's pw_transport_thread_start). */
static void worker_start(const pw_fs *fs)
{
	static _Thread_local bool started;
	if (started)
		return;
	started = true;
	pw_transport_thread_start(&fs->transport, "pw-fuse");
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	pw_fs *fs = userdata;
	worker_start(fs);
	size_t need = atomic_load_explicit(&fs->transport.splice_need, memory_order_relaxed);
	if (need) {
		devio_thread *t = devio_thread_get(true);
		if (t)
			devio_drop_pending(t);
		if (t &&
		    (fs->transport.splice_policy == SPLICE_ALWAYS ||
		     atomic_load_explicit(&fs->transport.splice_credit, memory_order_relaxed) >
			 0) &&
		    devio_pipe_ready(t, need))
			return receive_spliced(fs, t, fd, buf, len);
	}
	ssize_t r = read(fd, buf, len);
	if (r <= 0)
		return r;
	if (need && is_stream_write(buf, (size_t)r))
		atomic_store_explicit(&fs->transport.splice_credit, SPLICE_CREDIT,
				      memory_order_relaxed);
	pw_transport_note_request(&fs->transport, buf, (size_t)r);
	return r;
}

bool pw_devio_write_data(const struct fuse_bufvec *in_buf, struct fuse_bufvec *ret)
{
	devio_thread *t = devio_thread_get(false);
	if (!t || !t->pending || in_buf->count != 1 || in_buf->idx != 0 || in_buf->off != 0 ||
	    (in_buf->buf[0].flags & FUSE_BUF_IS_FD) || in_buf->buf[0].size != t->pending_len)
		return false;
	*ret = (struct fuse_bufvec)FUSE_BUFVEC_INIT(t->pending_len);
	ret->buf[0].flags = FUSE_BUF_IS_FD;
	ret->buf[0].fd = t->fd[0];
	return true;
}

/* The pipe bytes a spliced request of up to MAX_WRITE bytes of data needs: a page for the
 * header and fixed argument, one per page of data (the kernel puts a WRITE's pages into the
 * pipe as they are, one slot each). */
static size_t pipe_need(size_t max_write, size_t page)
{
	return ((max_write + page - 1) / page + 1) * page;
}

/* Whether this process may make a pipe of NEED bytes: tried on a pipe of its own, since
 * both pipe-max-size and CAP_SYS_RESOURCE (which lifts it) decide. Returns its size, or 0. */
static size_t probe_pipe(size_t need)
{
	int fd[2];
	if (pipe2(fd, O_CLOEXEC) < 0)
		return 0;
	int r = fcntl(fd[0], F_SETPIPE_SZ, (int)need);
	close(fd[0]);
	close(fd[1]);
	return r > 0 && (size_t)r >= need ? (size_t)r : 0;
}

unsigned pw_devio_choose_max_write(pw_fs *fs)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t big = probe_pipe(pipe_need(PW_FS_MAX_WRITE, page));
	fs->transport.pipe_max = big ? big : PW_DEVIO_PIPE_MAX;
	return big ? PW_FS_MAX_WRITE : PW_FS_MAX_WRITE_SMALL_PIPE;
}

/* The INIT reply (OUT, LEN bytes) is going out: splice requests from now on when the largest
 * request it allows fits the largest pipe the workers may make (pipe_max: every request must fit
 * in one splice, one that does not would fail with EIO in the kernel). */
static void enable_splice(pw_fs *fs, const struct fuse_init_out *out, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t largest = out->max_write;
	if (len >= offsetof(struct fuse_init_out, max_pages) + sizeof(out->max_pages) &&
	    (out->flags & FUSE_MAX_PAGES) && (size_t)out->max_pages * page > largest)
		largest = (size_t)out->max_pages * page;
	size_t need = pipe_need(largest, page);
	if (fs->transport.splice_policy == SPLICE_NEVER)
		return;
	if (need <= (fs->transport.pipe_max ? fs->transport.pipe_max : PW_DEVIO_PIPE_MAX))
		atomic_store(&fs->transport.splice_need, need);
	else
		fprintf(stderr,
			"piworkfs: max_write %u is too large for splicing requests; "
			"reading them\n",
			out->max_write);
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
	if (!(atomic_load(&fs->transport.init_offered2) & (uint32_t)(flag >> 32))) {
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
		fprintf(stderr,
			"piworkfs: io_uring: cannot set up the rings (%s); serving through "
			"/dev/fuse\n",
			strerror(-r));
		return false;
	}
	fs->transport.uring = u;
	out->flags |= FUSE_INIT_EXT;
	out->flags2 |= (uint32_t)(flag >> 32);
	return true;
}

/* The INIT reply, with HANDLE_KILLPRIV_V2 added when the kernel offered it, and FUSE over
 * io_uring when asked for and possible; what it allows decides whether requests are spliced.
 * OUT must hold the copy that replaces iov[1] for the duration of the write. */
static bool patch_init_reply(pw_fs *fs, struct iovec *iov, int count, struct fuse_init_out *out)
{
	uint64_t unique = atomic_load(&fs->transport.init_unique);
	if (!unique || count < 2 || iov[0].iov_len < sizeof(struct fuse_out_header))
		return false;
	const struct fuse_out_header *oh = iov[0].iov_base;
	if (oh->unique != unique)
		return false;
	atomic_store(&fs->transport.init_unique, 0);
	if (oh->error != 0 || iov[1].iov_len < offsetof(struct fuse_init_out, max_background) ||
	    iov[1].iov_len > sizeof(*out))
		return false;
	memcpy(out, iov[1].iov_base, iov[1].iov_len);
	atomic_store(&fs->transport.max_write, out->max_write);
	enable_splice(fs, out, iov[1].iov_len);
	bool killpriv = atomic_load(&fs->transport.init_offered) & FUSE_HANDLE_KILLPRIV_V2;
	if (!killpriv && !fs->transport.uring_wanted)
		return false;
	if (killpriv)
		out->flags |= FUSE_HANDLE_KILLPRIV_V2;
	if (fs->transport.uring_wanted)
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
		atomic_fetch_add_explicit(&fs->transport.notifications, 1, memory_order_relaxed);
}

/* A ring's answer N (bytes, or -errno) as libfuse's I/O callbacks answer, as writev(2) and
 * splice(2) do: N, or -1 with errno. */
static ssize_t as_syscall(ssize_t n)
{
	if (n >= 0)
		return n;
	errno = (int)-n;
	return -1;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	pw_fs *fs = userdata;
	if (fs->transport.uring) {
		ssize_t n = pw_uring_reply(fs, iov, count);
		if (n != -ENOENT)
			return as_syscall(n);
	}
	struct fuse_init_out out;
	void *orig = count >= 2 ? iov[1].iov_base : NULL;
	pw_uring *before = fs->transport.uring;
	bool patched = patch_init_reply(fs, iov, count, &out);
	ssize_t r = writev(fd, iov, count);
	if (patched)
		iov[1].iov_base = orig;
	if (fs->transport.uring && !before) {
		/* The kernel has the INIT reply: the threads may register their entries. */
		if (r >= 0)
			pw_uring_start(fs->transport.uring);
	}
	note_reply(fs, iov, count, r);
	return r;
}

static ssize_t io_splice_send(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
			      unsigned int flags, void *userdata)
{
	pw_fs *fs = userdata;
	if (fs->transport.uring) {
		/* A spliced read reply (header and data in the pipe) to a ring request. */
		ssize_t n = pw_uring_reply_pipe(fs, fdin, len);
		if (n != -ENOENT)
			return as_syscall(n);
	}
	return splice(fdin, offin, fdout, offout, len, flags);
}

int pw_devio_attach(pw_fs *fs, bool uring_wanted)
{
	fs->transport.uring_wanted = uring_wanted;
	const char *splice_env = getenv("PIWORKFS_SPLICE");
	if (splice_env && strcmp(splice_env, "always") == 0)
		fs->transport.splice_policy = SPLICE_ALWAYS;
	else if (splice_env && strcmp(splice_env, "never") == 0)
		fs->transport.splice_policy = SPLICE_NEVER;
	else if (splice_env && *splice_env)
		fprintf(stderr,
			"piworkfs: PIWORKFS_SPLICE=%s is neither always nor never; "
			"splicing requests while large writes stream\n",
			splice_env);
	pw_transport_read_env(&fs->transport);
	/* libfuse's contract for these, as for read(2) and writev(2): -1 with errno, not -errno
	 * (it tests the result against -1 and reads errno). */
	static const struct fuse_custom_io io = {
	    .read = io_read,
	    .writev = io_writev,
	    .splice_send = io_splice_send,
	};
	return fuse_session_custom_io(fs->se, &io, fuse_session_fd(fs->se));
}

void pw_devio_detach(pw_fs *fs)
{
	pw_uring_free(fs->transport.uring);
	fs->transport.uring = NULL;
}
