/* SPDX-License-Identifier: MIT */
/*
 * Coherence with long kernel caches. The view asks the kernel to cache entries, attributes,
 * listings and file data for a long time (that is where a FUSE passthrough's speed comes
 * from), so a change made directly to the backing directory, by an editor or a `git
 * checkout` outside the view, must invalidate what the kernel cached. We watch every
 * directory the kernel knows with inotify (watches come and go with the directory nodes,
 * so their number is bounded by the kernel's own inode cache), and turn each event into
 * the matching invalidation on this thread, outside any request handler.
 *
 * Our own operations through the view produce events too. Invalidating after them is
 * harmless but costs (a create storm would invalidate every entry the kernel just made), so
 * operations record what they are about to do (pw_watch_expect) and the matching event is
 * consumed without invalidating. A record is made before the syscall, so its event cannot
 * precede it; withdrawn if the syscall fails; consumed with every other record its event
 * matches (expected); and it expires after a second, so a record whose event never comes (a
 * directory without a watch) cannot hide a later change. A
 * missing record only costs a redundant invalidation. Data written through the view is
 * not invalidated while the view itself holds the file open for writing.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "dircache.h"
#include "entry.h"
#include "inode.h"
#include "resolve.h"
#include "thread.h"
#include "watch.h"
#include "pw_limits.h"
#include "util.h"

#define PW_WATCH_MASK                                                                              \
	(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | IN_ATTRIB |             \
	 IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)

/* Watches are added through /proc/self/fd/N of a descriptor we resolved beneath the root,
 * so the magic link must be followed (no IN_DONT_FOLLOW): it names exactly that directory. */

/*
 * A directory that cannot be watched (the user's inotify watches are all taken:
 * fs.inotify.max_user_watches, or PIWORKFS_MAX_WATCHES) sends no event when it changes, so
 * what the kernel caches about it and the names in it may be kept for a second only
 * (pw_watch_timeout), instead of the view's day. Said once in the log, counted for status.
 */
static void mark_unwatched(pw_fs *fs, pw_inode *n, const char *path, int err)
{
	if (atomic_exchange(&n->unwatched, true))
		return;
	if (atomic_fetch_add(&fs->watcher->unwatched, 1) == 0)
		fprintf(stderr,
			"piworkfs: cannot watch %s (%s%s): changes made outside the view show in "
			"it, and in the directories like it, within a second instead of at once\n",
			*path ? path : ".", strerror(err),
			err == ENOSPC	? ": raise fs.inotify.max_user_watches"
			: err == EMFILE ? ": raise fs.inotify.max_user_instances"
					: "");
}

/*
 * Filesystems whose objects can change without this kernel seeing it: inotify reports only
 * what is done through this machine's VFS, so an edit made on the NFS server, in the host
 * of a VM's shared folder (9p, virtiofs and other FUSE filesystems, vboxsf) or on another
 * node of a cluster filesystem sends no event. Every local filesystem reports every change
 * made on this machine, whatever its type, so the list names the others: their names, for
 * the log. NULL: a local filesystem (or one fstatfs cannot tell, treated as local as before).
 */
static const char *shared_fs_name(int dirfd)
{
	static const struct {
		unsigned long magic;
		const char *name;
	} shared[] = {
	    {0x6969, "nfs"},	    {0x517b, "smb"},	    {0xff534d42, "cifs"},
	    {0xfe534d42, "smb2"},   {0x01021997, "9p"},	    {0x65735546, "fuse"},
	    {0x00c36400, "ceph"},   {0x5346414f, "afs"},    {0x6b414653, "afs"},
	    {0x73757245, "coda"},   {0x7461636f, "ocfs2"},  {0x01161970, "gfs2"},
	    {0x0bd00bd0, "lustre"}, {0x786f4256, "vboxsf"}, {0x20030528, "orangefs"},
	    {0x564c, "ncp"},
	};
	struct statfs sf;
	if (fstatfs(dirfd, &sf) < 0)
		return NULL;
	for (size_t i = 0; i < sizeof(shared) / sizeof(shared[0]); i++)
		if ((unsigned long)sf.f_type == shared[i].magic)
			return shared[i].name;
	return NULL;
}

/* A directory on such a filesystem is watched all the same (changes made on this machine
 * show at once), and its cache lifetimes are a second's, as an unwatched one's. */
static void mark_shared(pw_fs *fs, pw_inode *n, const char *path, const char *type)
{
	if (atomic_exchange(&n->shared, true))
		return;
	atomic_store(&n->unwatched, true);
	if (atomic_fetch_add(&fs->watcher->shared, 1) == 0)
		fprintf(stderr,
			"piworkfs: %s is on %s, which does not tell this machine of changes made "
			"elsewhere (the server, the host, another node): those show in the view "
			"within a second instead of at once\n",
			*path ? path : ".", type);
}

/* Whether directory FD (of ST) is on a filesystem that reports every change, as the root
 * is (known since start) or by asking. */
static void note_shared(pw_fs *fs, pw_inode *n, const char *path, int fd, const struct stat *st)
{
	const char *type =
	    st->st_dev == fs->root_dev ? fs->watcher->root_shared : shared_fs_name(fd);
	if (type)
		mark_shared(fs, n, path, type);
}

/* Whether another watch may be added (PIWORKFS_MAX_WATCHES; without one, the count is not
 * asked, and its lock not taken). */
static bool watch_room(pw_fs *fs)
{
	return fs->watcher->max_watches == SIZE_MAX ||
	       pw_inode_watch_count(fs) < fs->watcher->max_watches;
}

/*
 * Without the tree lock: the path is read under it, the directory is opened and watched
 * outside it (an openat2 and an inotify_add_watch that every other request's path would
 * otherwise wait behind), and the watch is recorded under it again. The directory opened must
 * be N's own: a name that leads elsewhere by then (changed outside the view) leaves N
 * unwatched (the parent's watch drops its entry); a watch the kernel refuses marks N
 * (mark_unwatched).
 */
static void watch_dir(pw_fs *fs, pw_inode *n)
{
	if (fs->watcher->inotify_fd < 0) {
		if (fs->watcher->no_inotify) /* not once the watcher has stopped, at unmount */
			mark_unwatched(fs, n, "", ENOSPC);
		return;
	}
	PW_PATH_DECLARE(path);
	pw_inode_lock_read(fs);
	dev_t dev = n->dev;
	ino_t ino = n->ino;
	int r = n->wd < 0 ? pw_node_path_locked(fs, n, &path) : -EEXIST;
	pw_inode_unlock(fs);
	if (r < 0)
		return;
	_cleanup_close_ int fd = pw_openat_beneath(fs, path.s, O_PATH | O_DIRECTORY, 0);
	struct stat st;
	/* A name that no longer leads to N was changed outside the view: the parent's watch
	 * reports it, and the kernel drops N's entry. */
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_dev != dev || st.st_ino != ino)
		return;
	note_shared(fs, n, path.s, fd, &st);
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	int wd = watch_room(fs) ? inotify_add_watch(fs->watcher->inotify_fd, proc, PW_WATCH_MASK)
				: (errno = ENOSPC, -1);
	if (wd < 0) {
		mark_unwatched(fs, n, path.s, errno);
		return;
	}
	if (!atomic_load(&n->shared))
		atomic_store(&n->unwatched, false);
	/* The guard beside the watch (dircache.c): it lets requests keep this directory's
	 * descriptor. A node without one is resolved every time. */
	int gwd = pw_dircache_add_guard(fs, fd);
	pw_inode_lock_write(fs);
	if (n->dev == dev && n->ino == ino) { /* not orphaned by inode reuse meanwhile */
		pw_inode *other = pw_inode_by_wd_locked(fs, wd);
		if (other && other != n) /* the same directory seen as another node */
			pw_inode_set_wd_locked(fs, other, -1);
		pw_inode_set_wd_locked(fs, n, wd);
		n->guard_wd = gwd;
		gwd = -1;
	}
	pw_inode_unlock(fs);
	pw_dircache_drop_guard(fs, gwd);
}

pw_inode *pw_watch_learn(pw_fs *fs, pw_inode *parent, const char *name, const pw_object *o,
			 bool made)
{
	bool new_dir = false;
	pw_inode *n = pw_inode_learn(fs, parent, name, o, made, &new_dir);
	/* The reference just counted keeps N: the kernel cannot forget it before our reply. */
	if (n && new_dir)
		watch_dir(fs, n);
	return n;
}

#define PW_EXPECT_PROBE 16 /* the slots a record may take: a window from its hash */
#define PW_EXPECT_TTL_NS 1000000000LL

/*
 * The records live in a fixed table, each in the window of PW_EXPECT_PROBE slots that
 * starts at the hash of its (parent, name): adding one and consuming one (for every inotify
 * event of a known directory) look at that window only, not at the whole table, so the lock
 * is held for a few compares whatever the number of changes in flight. A full window makes
 * the record fail (-ENOSPC): the event then simply invalidates.
 */
struct pw_expect {
	fuse_ino_t parent;
	pw_expect_kind kind;
	int64_t deadline;
	char name[PW_NAME_MAX + 1];
};

static size_t expect_window(fuse_ino_t parent, const char *name)
{
	uint32_t h = pw_fnv1a32_str(PW_FNV1A32_INIT ^ (uint32_t)(parent ^ (parent >> 32)), name);
	return (size_t)h & (PW_EXPECT_MAX - 1);
}

int pw_watch_expect(pw_fs *fs, pw_inode *parent, const char *name, pw_expect_kind kind)
{
	if (fs->watcher->inotify_fd < 0)
		return -EBADF;
	if (strlen(name) > PW_NAME_MAX)
		return -ENAMETOOLONG;
	fuse_ino_t pino = pw_inode_id(fs, parent);
	size_t start = expect_window(pino, name);
	int64_t now = pw_clock_ns(CLOCK_MONOTONIC);
	int token = -ENOSPC;
	pthread_mutex_lock(&fs->watcher->expect_lock);
	if (!fs->watcher->expects)
		fs->watcher->expects = calloc(PW_EXPECT_MAX, sizeof(*fs->watcher->expects));
	for (size_t i = 0; fs->watcher->expects && i < PW_EXPECT_PROBE; i++) {
		size_t slot = (start + i) & (PW_EXPECT_MAX - 1);
		struct pw_expect *e = &fs->watcher->expects[slot];
		if (e->deadline > now)
			continue;
		e->parent = pino;
		e->kind = kind;
		e->deadline = now + PW_EXPECT_TTL_NS;
		strcpy(e->name, name);
		token = (int)slot;
		break;
	}
	pthread_mutex_unlock(&fs->watcher->expect_lock);
	return token; /* -ENOSPC when full: the event will simply invalidate */
}

int pw_watch_expect_node(pw_fs *fs, pw_inode *n, pw_expect_kind kind)
{
	char name[PW_NAME_MAX + 1];
	pw_inode *parent = NULL;
	pw_inode_lock_read(fs);
	if (n->names && strlen(n->names->name) <= PW_NAME_MAX) {
		parent = n->names->parent;
		strcpy(name, n->names->name);
	}
	pw_inode_unlock(fs);
	/* The parent stays alive: the caller's handle pins N, and N's name pins its parent. */
	return parent ? pw_watch_expect(fs, parent, name, kind) : -ENOENT;
}

void pw_watch_unexpect(pw_fs *fs, int token)
{
	if (token < 0)
		return;
	pthread_mutex_lock(&fs->watcher->expect_lock);
	fs->watcher->expects[token].deadline = 0;
	pthread_mutex_unlock(&fs->watcher->expect_lock);
}

/*
 * Consumes every live record matching the event; whether there was one. Every one, because
 * an event may stand for several changes: inotify folds an event identical to the last one
 * queued (two utimes), and merge_repeats folds all of a name's events in a batch (two saves).
 * A record left over would outlive its change and pass the next change made outside the view
 * off as the view's own, for up to a second: the kernel would keep the old pages or times
 * for good. A record whose change has not reached inotify yet is consumed too; its event,
 * coming later, then finds none and only costs a redundant invalidation.
 */
static bool expected(pw_fs *fs, fuse_ino_t parent, const char *name, pw_expect_kind kind)
{
	bool found = false;
	size_t start = expect_window(parent, name);
	int64_t now = pw_clock_ns(CLOCK_MONOTONIC);
	pthread_mutex_lock(&fs->watcher->expect_lock);
	for (size_t i = 0; fs->watcher->expects && i < PW_EXPECT_PROBE; i++) {
		struct pw_expect *e = &fs->watcher->expects[(start + i) & (PW_EXPECT_MAX - 1)];
		if (e->deadline > now && e->parent == parent && e->kind == kind &&
		    streq(e->name, name)) {
			e->deadline = 0;
			found = true;
		}
	}
	pthread_mutex_unlock(&fs->watcher->expect_lock);
	return found;
}

typedef struct inval_all {
	struct {
		fuse_ino_t parent, ino;
		char *name;
	} * v;
	size_t n, cap;
	pw_inode *only_parent; /* NULL: every name; else the names in this directory */
} inval_all;

static void collect_node(pw_fs *fs, pw_inode *n, void *u)
{
	inval_all *a = u;
	for (pw_name *nm = n->names; nm; nm = nm->next) {
		if (a->only_parent && nm->parent != a->only_parent)
			continue;
		if (PW_GROW(a->v, a->cap, a->n, 1024) < 0)
			return;
		a->v[a->n].parent = pw_inode_id(fs, nm->parent);
		a->v[a->n].ino = pw_inode_id(fs, n);
		a->v[a->n].name = strdup(nm->name);
		a->n++;
	}
}

/*
 * Events were lost (the inotify queue overflowed under a storm of outside changes): we no
 * longer know what changed, so every name the kernel may have cached is dropped, with every
 * node's attributes and data, and the root's listing. Collected under the tree lock,
 * notified after it is released.
 */
static void invalidate_everything(pw_fs *fs)
{
	inval_all a = {0};
	pw_inode_foreach(fs, collect_node, &a);
	for (size_t i = 0; i < a.n; i++) {
		if (a.v[i].name) {
			fuse_lowlevel_notify_inval_entry(fs->se, a.v[i].parent, a.v[i].name,
							 strlen(a.v[i].name));
			free(a.v[i].name);
		}
		fuse_lowlevel_notify_inval_inode(fs->se, a.v[i].ino, 0, 0);
	}
	free(a.v);
	fuse_lowlevel_notify_inval_inode(fs->se, FUSE_ROOT_ID, 0, 0);
}

/*
 * Under allow_other, a directory that everyone could search and now not everyone can (a
 * chmod, an ACL) must not keep its children's entries cached: the kernel would let a user
 * without search permission reach them (ops.c, pw_entry_timeout_in). Their new lookups
 * get no cache lifetime.
 */
static void drop_children_if_private(pw_fs *fs, pw_inode *dir, const char *dir_path)
{
	_cleanup_close_ int dfd = pw_openat_beneath(fs, dir_path, O_PATH | O_DIRECTORY, 0);
	if (dfd >= 0 && pw_dir_searchable_by_all(dfd))
		return;
	inval_all a = {.only_parent = dir};
	pw_inode_foreach(fs, collect_node, &a);
	for (size_t i = 0; i < a.n; i++) {
		if (a.v[i].name)
			fuse_lowlevel_notify_inval_entry(fs->se, a.v[i].parent, a.v[i].name,
							 strlen(a.v[i].name));
		free(a.v[i].name);
	}
	free(a.v);
}

static void handle_event(pw_fs *fs, const struct inotify_event *ev)
{
	uint32_t mask = ev->mask;
	if (mask & IN_Q_OVERFLOW) {
		invalidate_everything(fs);
		return;
	}
	if (mask & IN_IGNORED) {
		/* The watch is gone (directory deleted, or removed by us): forget its number,
		 * which the kernel may hand out again. */
		pw_inode_lock_write(fs);
		pw_inode *gone = pw_inode_by_wd_locked(fs, ev->wd);
		if (gone)
			pw_inode_set_wd_locked(fs, gone, -1);
		pw_inode_unlock(fs);
		return;
	}
	/* Copy what we need under the lock: the node may be forgotten right after. */
	PW_PATH_DECLARE(dpath);
	pw_inode_lock_read(fs);
	pw_inode *dir = pw_inode_by_wd_locked(fs, ev->wd);
	fuse_ino_t dir_ino = dir ? pw_inode_id(fs, dir) : 0;
	bool have_path = dir && pw_node_path_locked(fs, dir, &dpath) == 0;
	const char *dir_path = dpath.s;
	pw_inode_unlock(fs);
	if (!dir_ino)
		return;
	if (ev->len == 0) { /* about the directory itself */
		if (mask & IN_ATTRIB) {
			pw_inode_lock_read(fs);
			pw_inode *d = pw_inode_by_wd_locked(fs, ev->wd);
			if (d)
				pw_xattr_changed(d);
			pw_inode_unlock(fs);
			if (fs->allow_other && have_path)
				drop_children_if_private(fs, dir, dir_path);
		}
		fuse_lowlevel_notify_inval_inode(fs->se, dir_ino, -1, 0);
		return;
	}
	const char *name = ev->name;
	/* Name changes the daemon made itself need nothing: the kernel knows the entry from our
	 * reply. MASK may merge several events of this name (watch_main), so each kind present
	 * must have been expected. */
	bool added = mask & (IN_CREATE | IN_MOVED_TO), removed = mask & (IN_DELETE | IN_MOVED_FROM);
	bool own_add = added && expected(fs, dir_ino, name, PW_EXPECT_NAME_ADDED);
	bool own_remove = removed && expected(fs, dir_ino, name, PW_EXPECT_NAME_REMOVED);
	if ((added && !own_add) || (removed && !own_remove)) {
		/* The name appeared or went: drop the (possibly negative) entry and the listing. */
		fuse_lowlevel_notify_inval_entry(fs->se, dir_ino, name, strlen(name));
		fuse_lowlevel_notify_inval_inode(fs->se, dir_ino, 0, 0);
	} else if (added || removed) {
		mask &= ~(uint32_t)(IN_CREATE | IN_MOVED_TO);
	}
	/* The view's own close of a file it wrote: the kernel wrote those pages itself. */
	if ((mask & IN_CLOSE_WRITE) && expected(fs, dir_ino, name, PW_EXPECT_CLOSED_WRITE))
		mask &= ~(uint32_t)(IN_CLOSE_WRITE | IN_MODIFY);
	/* The view's own SETATTR of both times (utime, touch): the kernel took the new
	 * attributes from our reply, and times change no extended attribute. */
	if ((mask & IN_ATTRIB) && expected(fs, dir_ino, name, PW_EXPECT_TIMES_SET))
		mask &= ~(uint32_t)IN_ATTRIB;
	if (have_path &&
	    (mask & (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CREATE | IN_MOVED_TO))) {
		/* Content or attributes changed: find the node by its inode number. */
		_cleanup_close_ int dfd = pw_openat_beneath(fs, dir_path, O_PATH | O_DIRECTORY, 0);
		struct stat st;
		if (dfd < 0 || fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return;
		pw_inode_lock_read(fs);
		pw_inode *n = pw_inode_find_locked(fs, st.st_dev, st.st_ino);
		fuse_ino_t ino = n ? pw_inode_id(fs, n) : 0;
		if (n && (mask & IN_ATTRIB))
			pw_xattr_changed(n);
		/* Written through the view: the kernel wrote those pages itself and updates
		 * size and times from our replies; only outside writers need invalidation. */
		bool own = n && (mask & (IN_MODIFY | IN_ATTRIB)) == IN_MODIFY &&
			   atomic_load(&n->open_writers) > 0;
		pw_inode_unlock(fs);
		if (ino && !own)
			fuse_lowlevel_notify_inval_inode(
			    fs->se, ino, (mask & (IN_MODIFY | IN_CLOSE_WRITE)) ? 0 : -1, 0);
	}
}

#define PW_WATCH_BATCH_NS (5 * 1000 * 1000)
#define PW_MERGE_SLOTS 1024u

/*
 * Folds repeated events of one (watch, name) in a buffer into the first: masks are OR-ed
 * and the repeats zeroed. Handling is idempotent (invalidations), so one pass per name with
 * the union of what happened is equivalent, and a write storm costs one lookup. Queue
 * overflow and watch removal are never folded.
 */
static void merge_repeats(char *buf, size_t len)
{
	struct inotify_event *slots[PW_MERGE_SLOTS] = {0};
	for (char *p = buf; p < buf + len;) {
		struct inotify_event *ev = (struct inotify_event *)p;
		p += sizeof(*ev) + ev->len;
		if (ev->mask & (IN_Q_OVERFLOW | IN_IGNORED))
			continue;
		uint32_t h =
		    pw_fnv1a32_str(PW_FNV1A32_INIT ^ (uint32_t)ev->wd, ev->len ? ev->name : "");
		for (uint32_t i = 0; i < 8; i++) {
			struct inotify_event **slot = &slots[(h + i) & (PW_MERGE_SLOTS - 1)];
			if (!*slot) {
				*slot = ev;
				break;
			}
			struct inotify_event *first = *slot;
			if (first->wd == ev->wd && first->len == ev->len &&
			    (!ev->len || streq(first->name, ev->name))) {
				first->mask |= ev->mask;
				ev->mask = 0;
				break;
			}
		}
	}
}

static void *watch_main(void *arg)
{
	pw_fs *fs = arg;
	char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct pollfd pfd[2] = {
	    {.fd = fs->watcher->inotify_fd, .events = POLLIN},
	    {.fd = fs->watcher->watch_stop_pipe[0], .events = POLLIN},
	};
	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[1].revents)
			break;
		/* Let a burst accumulate: a writer outside the view (or a peer filesystem on the
		 * same tree) sends one IN_MODIFY per write(2), and handling each alone costs
		 * syscalls per event. A few milliseconds is nothing against the one second in
		 * which outside changes must show. The wait ends early when the view stops, so
		 * an unmount never waits out a batch (PIWORKFS_WATCH_BATCH_MS may be seconds). */
		if (ppoll(&pfd[1], 1, &fs->watcher->batch, NULL) > 0)
			break;
		ssize_t len = read(fs->watcher->inotify_fd, buf, sizeof(buf));
		if (len <= 0) {
			if (len < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			break;
		}
		merge_repeats(buf, (size_t)len);
		for (char *p = buf; p < buf + len;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			if (ev->mask)
				handle_event(fs, ev);
			p += sizeof(*ev) + ev->len;
		}
	}
	return NULL;
}

/*
 * PIWORKFS_WATCH_BATCH_MS (1 to 60000) in the daemon's environment: how long events may
 * accumulate before the watcher reads them, instead of PW_WATCH_BATCH_NS. A knob for tests,
 * like PIWORKFS_SPLICE: a long batch keeps the kernel's entries of a directory changed
 * outside the view cached long enough for a request to reach the daemon through them, so
 * that what the daemon does with a stale name (dircache.c) is tested deterministically.
 */
static struct timespec batch_time(void)
{
	const char *env = getenv("PIWORKFS_WATCH_BATCH_MS");
	long long ns = PW_WATCH_BATCH_NS;
	if (env && *env) {
		char *end;
		long long ms = strtoll(env, &end, 10);
		if (*end || ms < 1 || ms > 60000)
			fprintf(stderr,
				"piworkfs: PIWORKFS_WATCH_BATCH_MS=%s ignored: wants 1 to "
				"60000\n",
				env);
		else
			ns = ms * 1000000;
	}
	return (struct timespec){.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
}

/*
 * PIWORKFS_MAX_WATCHES (a count) in the daemon's environment: the most inotify watches the
 * view adds, so that it leaves the rest of the user's budget to other programs (an editor,
 * a build's watcher, other views); directories past it are kept coherent by short cache
 * lifetimes instead (mark_unwatched). 0: no inotify at all, every directory so kept. Unset:
 * as many as the kernel grants.
 */
static size_t max_watches(void)
{
	const char *env = getenv("PIWORKFS_MAX_WATCHES");
	if (!env || !*env)
		return SIZE_MAX;
	char *end;
	long long n = strtoll(env, &end, 10);
	if (*end || n < 0) {
		fprintf(stderr, "piworkfs: PIWORKFS_MAX_WATCHES=%s ignored: wants a count\n", env);
		return SIZE_MAX;
	}
	return (size_t)n;
}

/*
 * A view without inotify (PIWORKFS_MAX_WATCHES=0, or the user's inotify instances all taken:
 * fs.inotify.max_user_instances, two per view and more per editor) still mounts, and keeps
 * every directory as an unwatched one: changes made outside it show within a second.
 */
static int without_inotify(pw_fs *fs, int err)
{
	fs->watcher->no_inotify = true;
	mark_unwatched(fs, pw_inode_root(fs), "", err);
	return 0;
}

/* Whether every directory was watched so far (or the view watches none, by choice): then
 * nothing needs looking up. mark_unwatched sets a node's flag before it counts it, and a
 * directory is marked while it is learned, before the kernel can ask about its names. */
static bool all_covered(pw_fs *fs)
{
	return fs->no_watch || (atomic_load(&fs->watcher->unwatched) == 0 &&
				atomic_load(&fs->watcher->shared) == 0);
}

bool pw_watch_covers(pw_fs *fs, pw_inode *dir)
{
	return all_covered(fs) || !atomic_load(&dir->unwatched);
}

static double timeout_if(pw_fs *fs, bool covered)
{
	return covered || fs->timeout < PW_UNWATCHED_TIMEOUT_S ? fs->timeout
							       : PW_UNWATCHED_TIMEOUT_S;
}

double pw_watch_timeout(pw_fs *fs, pw_inode *dir, pw_inode *n)
{
	return timeout_if(fs, pw_watch_covers(fs, dir) && (!n || pw_watch_covers(fs, n)));
}

bool pw_watch_node_covered(pw_fs *fs, pw_inode *n)
{
	if (all_covered(fs))
		return true;
	pw_inode_lock_read(fs);
	pw_inode *parent = n->names ? n->names->parent : NULL;
	bool covered = pw_watch_covers(fs, n) && (!parent || pw_watch_covers(fs, parent));
	pw_inode_unlock(fs);
	return covered;
}

double pw_watch_node_timeout(pw_fs *fs, pw_inode *n)
{
	return timeout_if(fs, pw_watch_node_covered(fs, n));
}

void pw_fs_watch_stats(pw_fs *fs, pw_fs_stats *ret)
{
	if (!fs->watcher)
		return;
	ret->watching = !fs->no_watch;
	ret->watched_dirs = pw_inode_watch_count(fs);
	ret->unwatched_dirs = atomic_load(&fs->watcher->unwatched);
	ret->shared_dirs = atomic_load(&fs->watcher->shared);
}

int pw_watch_start(pw_fs *fs)
{
	pw_watcher *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->batch = batch_time();
	w->max_watches = max_watches();
	w->inotify_fd = -1;
	w->watch_stop_pipe[0] = w->watch_stop_pipe[1] = -1;
	pthread_mutex_init(&w->expect_lock, NULL);
	fs->watcher = w;
	if (fs->no_watch)
		return 0;
	if (w->max_watches == 0)
		return without_inotify(fs, ENOSPC);
	fs->watcher->inotify_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (fs->watcher->inotify_fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOMEM))
		return without_inotify(fs, errno);
	if (fs->watcher->inotify_fd < 0)
		return negative_errno();
	pw_inode_set_inotify(fs, fs->watcher->inotify_fd);
	if (pipe2(fs->watcher->watch_stop_pipe, O_CLOEXEC) < 0)
		return negative_errno();
	fs->watcher->root_shared = shared_fs_name(fs->root_fd);
	if (fs->watcher->root_shared)
		mark_shared(fs, pw_inode_root(fs), "", fs->watcher->root_shared);
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fs->root_fd);
	int wd = inotify_add_watch(fs->watcher->inotify_fd, proc, PW_WATCH_MASK);
	if (wd >= 0) {
		pw_inode_lock_write(fs);
		pw_inode_set_wd_locked(fs, pw_inode_root(fs), wd);
		pw_inode_unlock(fs);
	} else {
		mark_unwatched(fs, pw_inode_root(fs), "", errno);
	}
	return pw_thread_start(&fs->watcher->watch_thread, watch_main, fs,
			       &fs->watcher->watch_started);
}

void pw_watch_stop(pw_fs *fs)
{
	if (!fs->watcher)
		return;
	if (fs->watcher->watch_started) {
		(void)!write(fs->watcher->watch_stop_pipe[1], "x", 1);
		pthread_join(fs->watcher->watch_thread, NULL);
		fs->watcher->watch_started = false;
	}
	for (int i = 0; i < 2; i++)
		if (fs->watcher->watch_stop_pipe[i] >= 0)
			close(fs->watcher->watch_stop_pipe[i]);
	if (fs->watcher->inotify_fd >= 0) {
		pw_inode_set_inotify(fs, -1); /* set at start, so the table exists */
		close(fs->watcher->inotify_fd);
	}
	fs->watcher->inotify_fd = -1;
	free(fs->watcher->expects);
	fs->watcher->expects = NULL;
}

void pw_watch_free(pw_fs *fs)
{
	pw_watcher *w = TAKE_PTR(fs->watcher);
	if (!w)
		return;
	pthread_mutex_destroy(&w->expect_lock);
	free(w);
}
