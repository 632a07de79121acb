/* SPDX-License-Identifier: MIT */
/*
 * Directory descriptors kept between requests.
 *
 * Every request about a name (LOOKUP, CREATE, UNLINK, MKDIR, RENAME...) acts in the
 * directory of its parent node, which resolve.c opens from the root by the node's path
 * (openat2, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) and checks to be the node's own object
 * (fstat: device and inode), then closes: three system calls, the most expensive part of a
 * create's LOOKUP and UNLINK and a third of its CREATE. A descriptor kept from one request to
 * the next would save them, but by itself it would follow a directory moved by a process
 * outside the view (out of the project, even) while the view still decides by the old path:
 * containment would rest on when the watcher reads its events.
 *
 * So a kept descriptor is used only when nothing can have changed since it was resolved.
 * A second inotify instance, the guard, watches every directory node the watcher watches,
 * and the root, for exactly the events that change what resolving a directory's path
 * would find: its move (IN_MOVE_SELF, which a directory gets when it or a rename exchange
 * moves it; a move of an ancestor is that ancestor's IN_MOVE_SELF), its removal
 * (IN_DELETE_SELF) and a change of its permissions or owner (IN_ATTRIB), which decide what
 * a walk with the caller's credentials may pass (left out for a daemon that passes every
 * search check: needs_attrib). The creates, writes and removals of a workload make none of
 * these, so the guard's queue stays empty while they run; a directory's IN_ATTRIB watch also
 * reports changes of the files in it (touch, chmod: events with a name), which are drained
 * without giving anything up. Before a
 * request uses a kept descriptor it asks the kernel whether the guard's queue holds
 * anything (FIONREAD: one system call instead of three). The kernel queues those events in
 * the rename, rmdir or chmod itself, before that call returns, so an empty queue means that
 * every such change made before this request began has been seen: what is kept was resolved
 * after it. A non-empty queue is drained on the spot; if it held a directory's own event
 * (or lost events), every kept descriptor is given up (a generation number: a descriptor
 * resolved before the drain no longer matches). A
 * change made after the check races the request exactly as it races resolve.c's open and
 * identity check today: the object acted upon is the one the path led to when checked.
 *
 * Used only where those guarantees hold, else every request resolves as before:
 *  - the backing filesystem reports every change through inotify: a local disk
 *    filesystem or tmpfs (never a network or FUSE filesystem, whose changes made elsewhere
 *    send no events), and only directories on the project root's own device;
 *  - the view watches its tree (not -o no_watch), and the directory and every directory
 *    above it to the root carry a guard (a node whose watch could not be added is
 *    resolved every time; guards stop at PW_DIRCACHE_GUARDS_MAX, so that they never take
 *    from the watcher the inotify watches coherence needs);
 *  - the request runs with the daemon's own credentials: a root daemon serving another
 *    user (allow_other) checks that user's search permission on every directory of the
 *    path, which a descriptor kept from another caller's walk would skip.
 * A directory covered by a mount made after it was resolved is the one exception: the
 * kept descriptor still names the covered directory (inside the project), where resolving
 * the path would reach the mounted one and answer ESTALE.
 *
 * PIWORKFS_NO_DIRCACHE (any value) in the daemon's environment turns the cache off, for
 * measurements that compare the two in one build.
 *
 * The cache holds at most PW_DIRCACHE_SLOTS descriptors (design.md: a bounded number of
 * descriptors whatever the tree's size), four per set of a node's hash, least recently used
 * first out; a slot lent to a request is never reused until it is given back.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "creds.h"
#include "dircache.h"
#include "inode.h"
#include "pw_limits.h"
#include "resolve.h"

/* Moves and removals of a directory; IN_ATTRIB is added where permissions decide (below). */
#define GUARD_MASK (IN_MOVE_SELF | IN_DELETE_SELF | IN_ONLYDIR)
#define PW_DIRCACHE_WAYS 4
#define PW_DIRCACHE_SETS (PW_DIRCACHE_SLOTS / PW_DIRCACHE_WAYS)
#define SLOT_BORROWED -2 /* pw_dir_ref.slot of the root's own descriptor: never closed */

typedef struct dir_slot {
	pw_inode *node; /* the node it was resolved for (compared with its identity too) */
	dev_t dev;
	ino_t ino;
	int fd;	       /* -1: empty */
	unsigned refs; /* requests using it now */
	uint64_t gen;  /* the guard generation it was resolved in */
	uint64_t used; /* last use, for the choice of a victim */
} dir_slot;

struct pw_dircache {
	int guard_fd;  /* -1: the cache is off */
	uint32_t mask; /* the guard's events (needs_attrib) */
	/* Odd while the guard is being drained; GEN changes after every drain. A kept
	 * descriptor matches only the generation it was resolved in. */
	atomic_uint seq;
	atomic_uint_fast64_t gen;
	/* Guard watches added and not yet seen to go (IN_IGNORED), at most
	 * PW_DIRCACHE_GUARDS_MAX. */
	atomic_int guards;
	pthread_mutex_t drain_lock;
	pthread_mutex_t lock; /* the slots and TICK */
	uint64_t tick;
	dir_slot slots[PW_DIRCACHE_SLOTS];
	atomic_uint_fast64_t hits, misses, flushes;
};

/* Filesystems whose every change, made by any process on this machine, queues its inotify
 * events in the changing call (there is no other machine to change them). */
static bool reports_every_change(int fd)
{
	struct statfs sf;
	if (fstatfs(fd, &sf) < 0)
		return false;
	switch ((unsigned long)sf.f_type) {
	case EXT4_SUPER_MAGIC: /* ext2, ext3 and ext4 share it */
	case XFS_SUPER_MAGIC:
	case BTRFS_SUPER_MAGIC:
	case TMPFS_MAGIC:
	case F2FS_SUPER_MAGIC:
		return true;
	default:
		return false;
	}
}

/* Whether this process sees the initial user namespace's ids (uid_map "0 0 4294967295"): a
 * capability held in another namespace does not pass checks on files whose owner it does not
 * map, so only there does CAP_DAC_READ_SEARCH pass every search. */
static bool initial_user_ns(void)
{
	FILE *f = fopen("/proc/self/uid_map", "re");
	if (!f)
		return false;
	unsigned long inner = 1, outer = 1, count = 0;
	int n = fscanf(f, "%lu %lu %lu", &inner, &outer, &count);
	bool more = n == 3 && fgetc(f) != EOF && fscanf(f, "%lu", &inner) == 1;
	fclose(f);
	return n == 3 && !more && inner == 0 && outer == 0 && count == 4294967295ul;
}

/*
 * Whether a change of a directory's permissions can change what a request with the daemon's
 * own credentials may reach: not for a daemon whose capabilities pass every search check
 * (CAP_DAC_READ_SEARCH, root's, in the initial user namespace), for whom a walk from the root
 * never stops at one (the directory a request acts in checks its own permissions at each
 * call, kept descriptor or not). Its guard then leaves IN_ATTRIB out, which a directory's
 * watch also gets for every change of a file in it (chmod, touch, tar's times): events that
 * would each make the next request drain the guard. The capabilities are read once: the
 * daemon never drops them while it serves (creds.c changes only the filesystem ids, and a
 * request under switched ids never uses a kept descriptor).
 */
static bool needs_attrib(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {{0}};
	if (syscall(SYS_capget, &h, d) < 0)
		return true;
	bool search =
	    d[CAP_TO_INDEX(CAP_DAC_READ_SEARCH)].effective & CAP_TO_MASK(CAP_DAC_READ_SEARCH);
	return !search || !initial_user_ns();
}

int pw_dircache_start(pw_fs *fs)
{
	struct pw_dircache *dc = calloc(1, sizeof(*dc));
	if (!dc)
		return -ENOMEM;
	dc->guard_fd = -1;
	pthread_mutex_init(&dc->drain_lock, NULL);
	pthread_mutex_init(&dc->lock, NULL);
	for (size_t i = 0; i < PW_DIRCACHE_SLOTS; i++)
		dc->slots[i].fd = -1;
	fs->dircache = dc;
	if (fs->no_watch || getenv("PIWORKFS_NO_DIRCACHE") || !reports_every_change(fs->root_fd))
		return 0;
	dc->mask = GUARD_MASK | (needs_attrib() ? IN_ATTRIB : 0);
	dc->guard_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (dc->guard_fd < 0)
		return 0;
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fs->root_fd);
	int wd = inotify_add_watch(dc->guard_fd, proc, dc->mask);
	if (wd < 0) {
		close(dc->guard_fd);
		dc->guard_fd = -1;
		return 0;
	}
	atomic_store(&dc->guards, 1);
	pw_inode_root(fs)->guard_wd = wd;
	pw_inode_set_guard_fd(fs, dc->guard_fd);
	return 0;
}

void pw_dircache_free(pw_fs *fs)
{
	struct pw_dircache *dc = TAKE_PTR(fs->dircache);
	if (!dc)
		return;
	for (size_t i = 0; i < PW_DIRCACHE_SLOTS; i++)
		if (dc->slots[i].fd >= 0)
			close(dc->slots[i].fd);
	if (dc->guard_fd >= 0) {
		if (fs->nodes)
			pw_inode_set_guard_fd(fs, -1);
		close(dc->guard_fd);
	}
	pthread_mutex_destroy(&dc->lock);
	pthread_mutex_destroy(&dc->drain_lock);
	free(dc);
}

int pw_dircache_add_guard(pw_fs *fs, int fd)
{
	struct pw_dircache *dc = fs->dircache;
	if (!dc || dc->guard_fd < 0)
		return -1;
	/* A cap, so that the guard never takes from the watcher what coherence needs. */
	if (atomic_fetch_add(&dc->guards, 1) >= PW_DIRCACHE_GUARDS_MAX) {
		atomic_fetch_sub(&dc->guards, 1);
		return -1;
	}
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	int wd = inotify_add_watch(dc->guard_fd, proc, dc->mask);
	if (wd < 0)
		atomic_fetch_sub(&dc->guards, 1);
	return wd < 0 ? -1 : wd;
}

/* The guard's watches, counted in its fdinfo: after events were lost (an overflow), the
 * IN_IGNORED that kept the count may have been among them. */
static int count_guards(int guard_fd)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", guard_fd);
	FILE *f = fopen(path, "re");
	if (!f)
		return PW_DIRCACHE_GUARDS_MAX; /* unknown: add none */
	int n = 0;
	while (fgets(line, sizeof(line), f))
		n += strncmp(line, "inotify wd:", 11) == 0;
	fclose(f);
	return n;
}

void pw_dircache_drop_guard(pw_fs *fs, int wd)
{
	struct pw_dircache *dc = fs->dircache;
	if (dc && dc->guard_fd >= 0 && wd >= 0)
		inotify_rm_watch(dc->guard_fd, wd);
}

/* Closes the idle descriptors of an older generation than GEN (their directories may be
 * gone: nothing should keep them). Lock held; the descriptors are returned in CLOSE_FDS. */
static size_t drop_stale_locked(struct pw_dircache *dc, uint64_t gen, int *close_fds)
{
	size_t n = 0;
	for (size_t i = 0; i < PW_DIRCACHE_SLOTS; i++) {
		dir_slot *s = &dc->slots[i];
		if (s->fd >= 0 && s->refs == 0 && s->gen != gen) {
			close_fds[n++] = s->fd;
			s->fd = -1;
			s->node = NULL;
		}
	}
	return n;
}

/* The guard had events: reads them all and, if one was about a directory itself (no name:
 * its move, removal or permission change, a watch gone) or events were lost, starts a new
 * generation, so that no descriptor kept before is used again. Readers that checked the queue
 * while this ran see SEQ change. */
static void drain(struct pw_dircache *dc)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	pthread_mutex_lock(&dc->drain_lock);
	atomic_fetch_add(&dc->seq, 1);
	bool lost = false, moved = false;
	for (ssize_t len; (len = read(dc->guard_fd, buf, sizeof(buf))) > 0;) {
		for (char *p = buf; p < buf + len;) {
			const struct inotify_event *ev = (const void *)p;
			if (ev->mask & IN_IGNORED)
				atomic_fetch_sub(&dc->guards, 1); /* a watch gone */
			lost |= (ev->mask & IN_Q_OVERFLOW) != 0;
			/* An event with a name is about a file in the directory (IN_ATTRIB of a
			 * chmod or touch there): it changes no directory's path or permissions. */
			moved |= ev->len == 0;
			p += sizeof(*ev) + ev->len;
		}
	}
	if (lost)
		atomic_store(&dc->guards, count_guards(dc->guard_fd));
	uint64_t gen = atomic_load(&dc->gen);
	if (moved || lost)
		gen = atomic_fetch_add(&dc->gen, 1) + 1;
	atomic_fetch_add(&dc->seq, 1);
	pthread_mutex_unlock(&dc->drain_lock);
	if (!moved && !lost)
		return;
	atomic_fetch_add_explicit(&dc->flushes, 1, memory_order_relaxed);
	int fds[PW_DIRCACHE_SLOTS];
	pthread_mutex_lock(&dc->lock);
	size_t n = drop_stale_locked(dc, gen, fds);
	pthread_mutex_unlock(&dc->lock);
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
}

/*
 * Whether a descriptor kept in generation *RET_GEN may be used now: the guard's queue is
 * empty and no drain ran while it was asked. A queue with events is drained here; one that
 * held a directory's move, removal or permission change started a new generation, and the
 * request then resolves its directory as usual.
 */
static bool quiet(struct pw_dircache *dc, uint64_t *ret_gen)
{
	/* Twice at most: a drain that found only events about files in the directories (no
	 * new generation) leaves what is kept usable at once. */
	for (int attempt = 0; attempt < 2; attempt++) {
		unsigned s1 = atomic_load(&dc->seq);
		if (s1 & 1)
			return false;
		int queued = 0;
		if (ioctl(dc->guard_fd, FIONREAD, &queued) < 0)
			return false;
		if (queued > 0) {
			drain(dc);
			continue;
		}
		*ret_gen = atomic_load(&dc->gen);
		return atomic_load(&dc->seq) == s1;
	}
	return false;
}

static size_t set_of(const pw_inode *n)
{
	uintptr_t h = (uintptr_t)n;
	h ^= h >> 17;
	h *= 0x9E3779B97F4A7C15ull;
	return (size_t)(h >> 40) & (PW_DIRCACHE_SETS - 1);
}

/* The kept descriptor of N (identity DEV, INO) of generation GEN, lent (RET_SLOT), or -1. */
static int take(struct pw_dircache *dc, pw_inode *n, dev_t dev, ino_t ino, uint64_t gen,
		int *ret_slot)
{
	dir_slot *set = &dc->slots[set_of(n) * PW_DIRCACHE_WAYS];
	int fd = -1;
	pthread_mutex_lock(&dc->lock);
	for (int i = 0; i < PW_DIRCACHE_WAYS; i++) {
		dir_slot *s = &set[i];
		if (s->fd >= 0 && s->node == n && s->dev == dev && s->ino == ino && s->gen == gen) {
			s->refs++;
			s->used = ++dc->tick;
			fd = s->fd;
			*ret_slot = (int)(s - dc->slots);
			break;
		}
	}
	pthread_mutex_unlock(&dc->lock);
	return fd;
}

/* Keeps FD (N's, resolved in generation GEN) in N's set, lent to the caller at once
 * (RET_SLOT); a set whose slots are all lent keeps nothing (RET_SLOT stays -1, the caller
 * closes FD). */
static void keep(struct pw_dircache *dc, pw_inode *n, dev_t dev, ino_t ino, int fd, uint64_t gen,
		 int *ret_slot)
{
	dir_slot *set = &dc->slots[set_of(n) * PW_DIRCACHE_WAYS];
	dir_slot *victim = NULL;
	int old = -1;
	pthread_mutex_lock(&dc->lock);
	for (int i = 0; i < PW_DIRCACHE_WAYS; i++) {
		dir_slot *s = &set[i];
		if (s->refs)
			continue;
		if (s->fd < 0 || s->node == n) { /* empty, or N's own of an older generation */
			victim = s;
			break;
		}
		if (!victim || s->used < victim->used)
			victim = s;
	}
	if (victim) {
		old = victim->fd;
		*victim = (dir_slot){.node = n,
				     .dev = dev,
				     .ino = ino,
				     .fd = fd,
				     .refs = 1,
				     .gen = gen,
				     .used = ++dc->tick};
		*ret_slot = (int)(victim - dc->slots);
	}
	pthread_mutex_unlock(&dc->lock);
	if (old >= 0)
		close(old);
}

/* Whether N and every directory above it carry a guard and lie on the root's device (tree
 * lock held): only then does the guard see every move that changes N's path. */
static bool chain_guarded_locked(pw_fs *fs, const pw_inode *n)
{
	for (const pw_inode *m = n; !m->is_root; m = m->names->parent)
		if (!m->names || m->guard_wd < 0 || m->dev != fs->root_dev)
			return false;
	return pw_inode_root(fs)->guard_wd >= 0;
}

int pw_dir_open(pw_fs *fs, pw_inode *n, pw_dir_ref *ret)
{
	*ret = (pw_dir_ref)PW_DIR_REF_INIT;
	ret->fs = fs;
	if (n->is_root) { /* the root's own descriptor: always its object */
		ret->fd = fs->root_fd;
		ret->slot = SLOT_BORROWED;
		return ret->fd;
	}
	struct pw_dircache *dc = fs->dircache;
	bool usable = dc && dc->guard_fd >= 0 && !pw_creds_switched();
	uint64_t gen = 0;
	dev_t dev = 0;
	ino_t ino = 0;
	if (usable) {
		/* A directory whose chain has no guard (on another device than the root's, such
		 * as a filesystem mounted inside the project, or past the guards' cap) is never
		 * kept: it spares the guard's system call. Checked again after the resolution. */
		pw_inode_lock_read(fs);
		dev = n->dev;
		ino = n->ino;
		usable = chain_guarded_locked(fs, n);
		pw_inode_unlock(fs);
	}
	if (usable && quiet(dc, &gen)) {
		int fd = take(dc, n, dev, ino, gen, &ret->slot);
		if (fd >= 0) {
			atomic_fetch_add_explicit(&dc->hits, 1, memory_order_relaxed);
			ret->fd = fd;
			return fd;
		}
	}
	/* Resolved from the root, as always. The generation is read first: a drain that
	 * starts after this leaves what is resolved now unused. */
	if (usable)
		gen = atomic_load(&dc->gen);
	struct stat st;
	int fd = pw_open_node_stat(fs, n, O_PATH, &st);
	if (fd < 0)
		return fd;
	ret->fd = fd;
	if (!usable)
		return fd;
	atomic_fetch_add_explicit(&dc->misses, 1, memory_order_relaxed);
	pw_inode_lock_read(fs);
	bool guarded = S_ISDIR(st.st_mode) && chain_guarded_locked(fs, n);
	pw_inode_unlock(fs);
	if (guarded)
		keep(dc, n, st.st_dev, st.st_ino, fd, gen, &ret->slot);
	return fd;
}

void pw_dir_close(pw_dir_ref *r)
{
	if (r->fd < 0)
		return;
	if (r->slot == SLOT_BORROWED) {
		/* the root's: not ours to close */
	} else if (r->slot < 0) {
		close(r->fd);
	} else {
		struct pw_dircache *dc = r->fs->dircache;
		int stale = -1;
		pthread_mutex_lock(&dc->lock);
		dir_slot *s = &dc->slots[r->slot];
		s->refs--;
		if (s->refs == 0 && s->gen != atomic_load(&dc->gen)) {
			stale = s->fd;
			s->fd = -1;
			s->node = NULL;
		}
		pthread_mutex_unlock(&dc->lock);
		if (stale >= 0)
			close(stale);
	}
	r->fd = -1;
	r->slot = -1;
}

void pw_fs_dircache_stats(pw_fs *fs, pw_fs_stats *ret)
{
	struct pw_dircache *dc = fs->dircache;
	if (!dc)
		return;
	ret->dircache_enabled = dc->guard_fd >= 0;
	ret->dircache_hits = atomic_load(&dc->hits);
	ret->dircache_misses = atomic_load(&dc->misses);
	ret->dircache_flushes = atomic_load(&dc->flushes);
}
