/* SPDX-License-Identifier: MIT */
/*
 * The inode table: every inode the kernel knows, keyed by (dev, ino) so hard links share
 * one node (the kernel then keeps one inode and link counts never go stale), and the
 * names each node was reached by. A node lives while the kernel holds references
 * (nlookup) or while it is the parent of a known name (children). No descriptors are held.
 */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>

#include "inode.h"
#include "pw_limits.h"
#include "util.h"

static size_t hash_ino(dev_t dev, ino_t ino, size_t size)
{
	uint64_t h = (uint64_t)ino * 0x9E3779B97F4A7C15ull ^ (uint64_t)dev;
	return (size_t)(h ^ (h >> 29)) & (size - 1);
}

int pw_inode_table_init(pw_fs *fs)
{
	fs->nodes = calloc(1, sizeof(*fs->nodes));
	if (!fs->nodes)
		return -ENOMEM;
	if (pthread_rwlock_init(&fs->nodes->tree_lock, NULL) != 0) {
		free(TAKE_PTR(fs->nodes));
		return -ENOMEM;
	}
	fs->nodes->inotify_fd = -1;
	fs->nodes->guard_fd = -1;
	fs->nodes->hsize = 1u << 16;
	fs->nodes->htab = calloc(fs->nodes->hsize, sizeof(*fs->nodes->htab));
	fs->nodes->wtab = calloc(fs->nodes->hsize, sizeof(*fs->nodes->wtab));
	if (!fs->nodes->htab || !fs->nodes->wtab)
		return -ENOMEM;
	fs->nodes->root.is_root = true;
	fs->nodes->root.nlookup = 1;
	fs->nodes->root.wd = -1;
	fs->nodes->root.guard_wd = -1;
	fs->nodes->root.type = S_IFDIR;
	return 0;
}

void pw_inode_set_root(pw_fs *fs, dev_t dev, ino_t ino)
{
	fs->nodes->root.dev = dev;
	fs->nodes->root.ino = ino;
}

void pw_inode_set_inotify(pw_fs *fs, int fd)
{
	fs->nodes->inotify_fd = fd;
}

void pw_inode_set_guard_fd(pw_fs *fs, int fd)
{
	fs->nodes->guard_fd = fd;
}

size_t pw_inode_watch_count(pw_fs *fs)
{
	pthread_rwlock_rdlock(&fs->nodes->tree_lock);
	size_t n = fs->nodes->watched;
	pthread_rwlock_unlock(&fs->nodes->tree_lock);
	return n;
}

size_t pw_inode_count(pw_fs *fs)
{
	pthread_rwlock_rdlock(&fs->nodes->tree_lock);
	size_t n = fs->nodes->hcount;
	pthread_rwlock_unlock(&fs->nodes->tree_lock);
	return n;
}

pw_inode *pw_inode_get(pw_fs *fs, fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return &fs->nodes->root;
	return (pw_inode *)(uintptr_t)ino;
}

fuse_ino_t pw_inode_id(pw_fs *fs, pw_inode *n)
{
	return n == &fs->nodes->root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)n;
}

static int grow_table(pw_fs *fs)
{
	size_t nsize = fs->nodes->hsize * 2;
	pw_inode **nt = calloc(nsize, sizeof(*nt));
	pw_inode **nw = calloc(nsize, sizeof(*nw));
	if (!nt || !nw) {
		free(nt);
		free(nw);
		return -ENOMEM;
	}
	for (size_t i = 0; i < fs->nodes->hsize; i++) {
		pw_inode *n = fs->nodes->htab[i], *next;
		for (; n; n = next) {
			next = n->hnext;
			size_t h = hash_ino(n->dev, n->ino, nsize);
			n->hnext = nt[h];
			nt[h] = n;
		}
		n = fs->nodes->wtab[i];
		for (; n; n = next) {
			next = n->wnext;
			size_t h = (size_t)n->wd & (nsize - 1);
			n->wnext = nw[h];
			nw[h] = n;
		}
	}
	free(fs->nodes->htab);
	free(fs->nodes->wtab);
	fs->nodes->htab = nt;
	fs->nodes->wtab = nw;
	fs->nodes->hsize = nsize;
	return 0;
}

pw_inode *pw_inode_find_locked(pw_fs *fs, dev_t dev, ino_t ino)
{
	if (fs->nodes->root.dev == dev && fs->nodes->root.ino == ino)
		return &fs->nodes->root;
	for (pw_inode *n = fs->nodes->htab[hash_ino(dev, ino, fs->nodes->hsize)]; n; n = n->hnext)
		if (n->ino == ino && n->dev == dev)
			return n;
	return NULL;
}

/* Takes N out of the table, or off the orphans' chain. */
static void hash_remove(pw_fs *fs, pw_inode *n)
{
	if (n->orphan) {
		*(n->oprev ? &n->oprev->hnext : &fs->nodes->orphans) = n->hnext;
		if (n->hnext)
			n->hnext->oprev = n->oprev;
		n->orphan = false;
		return;
	}
	pw_inode **p = &fs->nodes->htab[hash_ino(n->dev, n->ino, fs->nodes->hsize)];
	for (; *p; p = &(*p)->hnext)
		if (*p == n) {
			*p = n->hnext;
			fs->nodes->hcount--;
			return;
		}
}

/* N's inode number now names another file: N leaves the table for the orphans' chain with
 * its identity cleared (no backing object verifies as it: pw_open_node answers ESTALE). */
static void orphan_locked(pw_fs *fs, pw_inode *n)
{
	hash_remove(fs, n);
	n->ino = 0;
	n->dev = 0;
	n->orphan = true;
	n->oprev = NULL;
	n->hnext = fs->nodes->orphans;
	if (n->hnext)
		n->hnext->oprev = n;
	fs->nodes->orphans = n;
}

pw_inode *pw_inode_by_wd_locked(pw_fs *fs, int wd)
{
	if (wd < 0)
		return NULL;
	if (fs->nodes->root.wd == wd)
		return &fs->nodes->root;
	for (pw_inode *n = fs->nodes->wtab[(size_t)wd & (fs->nodes->hsize - 1)]; n; n = n->wnext)
		if (n->wd == wd)
			return n;
	return NULL;
}

void pw_inode_set_wd_locked(pw_fs *fs, pw_inode *n, int wd)
{
	/* Without its watch the node is not guarded either: the watch is gone because the
	 * directory was removed (which ended the guard's too) or another node took both. */
	if (wd < 0)
		n->guard_wd = -1;
	if ((n->wd >= 0) != (wd >= 0))
		fs->nodes->watched += wd >= 0 ? 1 : (size_t)-1;
	if (n->is_root) {
		n->wd = wd;
		return;
	}
	if (n->wd >= 0) {
		pw_inode **p = &fs->nodes->wtab[(size_t)n->wd & (fs->nodes->hsize - 1)];
		for (; *p; p = &(*p)->wnext)
			if (*p == n) {
				*p = n->wnext;
				break;
			}
	}
	n->wd = wd;
	if (wd >= 0) {
		size_t h = (size_t)wd & (fs->nodes->hsize - 1);
		n->wnext = fs->nodes->wtab[h];
		fs->nodes->wtab[h] = n;
	}
}

static pw_name *name_new(pw_inode *parent, const char *name)
{
	pw_name *nm = malloc(sizeof(*nm));
	if (!nm)
		return NULL;
	nm->name = strdup(name);
	if (!nm->name) {
		free(nm);
		return NULL;
	}
	nm->parent = parent;
	nm->next = NULL;
	parent->children++;
	return nm;
}

static void maybe_free(pw_fs *fs, pw_inode *n);

/* Frees a name and releases its hold on the parent. */
static void name_free(pw_fs *fs, pw_name *nm)
{
	pw_inode *parent = nm->parent;
	free(nm->name);
	free(nm);
	parent->children--;
	maybe_free(fs, parent);
}

void pw_inode_set_freed_hook(pw_fs *fs, void (*fn)(pw_fs *fs, const pw_inode *n))
{
	pthread_rwlock_wrlock(&fs->nodes->tree_lock);
	fs->nodes->freed = fn;
	pthread_rwlock_unlock(&fs->nodes->tree_lock);
}

/* A node freed stops being watched and guarded (watch.c adds both; the table holds them). */
static void unwatch_locked(pw_fs *fs, pw_inode *n)
{
	inotify_rm_watch(fs->nodes->inotify_fd, n->wd);
	if (n->guard_wd >= 0 && fs->nodes->guard_fd >= 0)
		inotify_rm_watch(fs->nodes->guard_fd, n->guard_wd);
	pw_inode_set_wd_locked(fs, n, -1);
}

/*
 * Frees N if nothing holds it, then its parents in turn. Iterative over the primary chain
 * so a deep tree forgotten at once does not recurse deeply; alias parents recurse once.
 * The primary parent stays pinned (one more child) while the aliases' parents are freed:
 * two names in one directory, or an alias parent whose chain reaches it, would free it
 * under the loop that goes on with it.
 */
static void maybe_free(pw_fs *fs, pw_inode *n)
{
	while (n && !n->is_root && n->nlookup == 0 && n->children == 0) {
		pw_inode *next_parent = NULL;
		if (fs->nodes->freed)
			fs->nodes->freed(fs, n);
		hash_remove(fs, n);
		if (n->wd >= 0)
			unwatch_locked(fs, n);
		pw_name *nm = n->names;
		while (nm) {
			pw_name *next = nm->next;
			pw_inode *parent = nm->parent;
			free(nm->name);
			free(nm);
			if (!next_parent) {
				next_parent = parent; /* its count stays up: pinned */
			} else {
				parent->children--;
				maybe_free(fs, parent);
			}
			nm = next;
		}
		free(n);
		if (next_parent)
			next_parent->children--;
		n = next_parent;
	}
}

static pw_name **find_name(pw_inode *n, pw_inode *parent, const char *name)
{
	for (pw_name **p = &n->names; *p; p = &(*p)->next)
		if ((*p)->parent == parent && streq((*p)->name, name))
			return p;
	return NULL;
}

static size_t count_names(pw_inode *n)
{
	size_t c = 0;
	for (pw_name *nm = n->names; nm; nm = nm->next)
		c++;
	return c;
}

/* Records that N is reachable as NAME in PARENT. A directory or a single-link file has one
 * name, so the newest lookup replaces the old one (it was renamed behind our back); a
 * multi-link file gains an alias. */
static int add_name(pw_fs *fs, pw_inode *n, pw_inode *parent, const char *name, nlink_t nlink)
{
	pw_name **existing = find_name(n, parent, name);
	if (existing) {
		if (existing != &n->names) { /* make it primary: it was just seen to exist */
			pw_name *nm = *existing;
			*existing = nm->next;
			nm->next = n->names;
			n->names = nm;
		}
		return 0;
	}
	pw_name *nm = name_new(parent, name);
	if (!nm)
		return -ENOMEM;
	pw_name *drop = NULL;
	if (S_ISDIR(n->type) || nlink <= 1) {
		drop = n->names; /* all old names are gone */
		n->names = NULL;
	} else if (count_names(n) >= PW_ALIASES_MAX) {
		pw_name **last = &n->names; /* drop the oldest alias */
		while ((*last)->next)
			last = &(*last)->next;
		drop = *last;
		*last = NULL;
	}
	nm->next = n->names;
	n->names = nm;
	while (drop) {
		pw_name *next = drop->next;
		name_free(fs, drop);
		drop = next;
	}
	return 0;
}

/* Whether N can be the object O (same number already): its type and birth agree. */
static bool is_object(const pw_inode *n, const pw_object *o)
{
	return n->type == (o->st.st_mode & S_IFMT) && pw_birth_matches(n->birth_ns, o->birth_ns);
}

pw_inode *pw_inode_learn(pw_fs *fs, pw_inode *parent, const char *name, const pw_object *o,
			 bool made, bool *ret_new_dir)
{
	const struct stat *st = &o->st;
	pthread_rwlock_wrlock(&fs->nodes->tree_lock);
	pw_inode *n = pw_inode_find_locked(fs, st->st_dev, st->st_ino);
	if (n == &fs->nodes->root) {
		/* The root reached by a name (a bind mount loop); never rename the root. */
		n->nlookup++;
		pthread_rwlock_unlock(&fs->nodes->tree_lock);
		return n;
	}
	if (n && (made || !is_object(n, o))) {
		/* The inode number was reused (another kind of file, another birth, or the
		 * object just made): orphan the old node. It keeps its names, so a name the kernel
		 * still caches for it is decided as that name and answers ESTALE once it reaches
		 * the backing (pw_open_node), and the kernel looks the name up again. Given the new
		 * name instead (as a rename), that stale name would lead to the new file, and a
		 * write through it would be decided under the new file's name. */
		orphan_locked(fs, n);
		n = NULL;
	}
	bool created = false;
	if (!n) {
		if (fs->nodes->hcount * 2 > fs->nodes->hsize && grow_table(fs) < 0) {
			pthread_rwlock_unlock(&fs->nodes->tree_lock);
			return NULL;
		}
		n = calloc(1, sizeof(*n));
		if (!n) {
			pthread_rwlock_unlock(&fs->nodes->tree_lock);
			return NULL;
		}
		n->dev = st->st_dev;
		n->ino = st->st_ino;
		n->type = st->st_mode & S_IFMT;
		n->birth_ns = o->birth_ns;
		n->wd = -1;
		n->guard_wd = -1;
		size_t h = hash_ino(n->dev, n->ino, fs->nodes->hsize);
		n->hnext = fs->nodes->htab[h];
		fs->nodes->htab[h] = n;
		if (++fs->nodes->hcount > fs->nodes->hmark)
			fs->nodes->hmark = fs->nodes->hcount;
		created = true;
	} else if (!n->birth_ns) {
		n->birth_ns = o->birth_ns; /* first seen through a stat without it */
	}
	if (add_name(fs, n, parent, name, st->st_nlink) < 0 && created) {
		hash_remove(fs, n);
		free(n);
		pthread_rwlock_unlock(&fs->nodes->tree_lock);
		return NULL;
	}
	n->nlookup++;
	if (ret_new_dir)
		*ret_new_dir = created && S_ISDIR(n->type);
	pthread_rwlock_unlock(&fs->nodes->tree_lock);
	return n;
}

/*
 * After the kernel forgot much of what it knew (drop_caches, memory pressure), glibc keeps
 * the freed nodes in its arenas: only a free top of a heap goes back by itself. Each time
 * the table has shrunk to half its high-water mark (and by enough to matter), whole free
 * pages are handed back, so the resident size follows what the kernel knows. Halving makes
 * it rare (a logarithmic number of times per storm) and the last one comes near the storm's
 * end whatever its size, which a count of forgets could not promise.
 */
#define PW_TRIM_MIN_NODES 4096

/* The kernel dropped NLOOKUP of its references to N. Lock held for writing. */
static void forget_locked(pw_fs *fs, pw_inode *n, uint64_t nlookup)
{
	if (n->is_root)
		return;
	n->nlookup = nlookup > n->nlookup ? 0 : n->nlookup - nlookup;
	maybe_free(fs, n);
}

/* Whether the table has halved since the last trim (a new mark then). Lock held. */
static bool trim_due_locked(pw_fs *fs)
{
	if (fs->nodes->hmark - fs->nodes->hcount < PW_TRIM_MIN_NODES ||
	    fs->nodes->hcount > fs->nodes->hmark / 2)
		return false;
	fs->nodes->hmark = fs->nodes->hcount;
	return true;
}

static void forget_end(pw_fs *fs)
{
	bool trim = trim_due_locked(fs);
	pthread_rwlock_unlock(&fs->nodes->tree_lock);
	if (trim)
		malloc_trim(0); /* outside the lock: it walks every arena */
}

void pw_inode_forget(pw_fs *fs, pw_inode *n, uint64_t nlookup)
{
	pthread_rwlock_wrlock(&fs->nodes->tree_lock);
	forget_locked(fs, n, nlookup);
	forget_end(fs);
}

void pw_inode_forget_batch(pw_fs *fs, const struct fuse_forget_data *forgets, size_t count)
{
	pthread_rwlock_wrlock(&fs->nodes->tree_lock);
	for (size_t i = 0; i < count; i++)
		forget_locked(fs, pw_inode_get(fs, forgets[i].ino), forgets[i].nlookup);
	forget_end(fs);
}

static void drop_name_locked(pw_fs *fs, pw_inode *n, pw_inode *parent, const char *name)
{
	pw_name **p = find_name(n, parent, name);
	if (!p)
		return;
	pw_name *nm = *p;
	*p = nm->next;
	/* the parent is still referenced by the caller's request; free cannot cascade to it
	 * while nlookup > 0 */
	name_free(fs, nm);
}

void pw_inode_unlinked(pw_fs *fs, pw_inode *parent, const char *name, dev_t dev, ino_t ino)
{
	pthread_rwlock_wrlock(&fs->nodes->tree_lock);
	pw_inode *n = pw_inode_find_locked(fs, dev, ino);
	if (n && n != &fs->nodes->root) {
		drop_name_locked(fs, n, parent, name);
		maybe_free(fs, n);
	}
	pthread_rwlock_unlock(&fs->nodes->tree_lock);
}

/* Moves N's name (op, oname) to (np, nname). */
static void move_name_locked(pw_fs *fs, pw_inode *n, pw_inode *op, const char *oname, pw_inode *np,
			     const char *nname)
{
	pw_name **p = find_name(n, op, oname);
	char *copy = strdup(nname);
	if (!p || !copy) {
		free(copy);
		/* unknown name: forget all names so the next lookup re-learns them */
		if (p)
			drop_name_locked(fs, n, op, oname);
		return;
	}
	pw_name *nm = *p;
	free(nm->name);
	nm->name = copy;
	if (nm->parent != np) {
		np->children++;
		pw_inode *oldp = nm->parent;
		nm->parent = np;
		oldp->children--;
		maybe_free(fs, oldp);
	}
}

void pw_inode_renamed(pw_fs *fs, pw_inode *oldparent, const char *oldname, pw_inode *newparent,
		      const char *newname, dev_t dev, ino_t ino, bool exchanged, dev_t dev2,
		      ino_t ino2)
{
	pthread_rwlock_wrlock(&fs->nodes->tree_lock);
	pw_inode *n = pw_inode_find_locked(fs, dev, ino);
	pw_inode *t = ino2 ? pw_inode_find_locked(fs, dev2, ino2) : NULL;
	if (t == &fs->nodes->root)
		t = NULL;
	if (t && t != n) {
		if (exchanged)
			move_name_locked(fs, t, newparent, newname, oldparent, oldname);
		else
			drop_name_locked(fs, t, newparent, newname);
	}
	if (n && n != &fs->nodes->root)
		move_name_locked(fs, n, oldparent, oldname, newparent, newname);
	if (t && t != n && !exchanged)
		maybe_free(fs, t);
	pthread_rwlock_unlock(&fs->nodes->tree_lock);
}

void pw_inode_foreach(pw_fs *fs, void (*fn)(pw_fs *fs, pw_inode *n, void *u), void *u)
{
	pthread_rwlock_rdlock(&fs->nodes->tree_lock);
	for (size_t i = 0; i < fs->nodes->hsize; i++)
		for (pw_inode *n = fs->nodes->htab[i]; n; n = n->hnext)
			fn(fs, n, u);
	pthread_rwlock_unlock(&fs->nodes->tree_lock);
}

/* Frees the nodes chained from N through hnext, with their names (the table's end). */
static void free_chain(pw_inode *n)
{
	for (pw_inode *next; n; n = next) {
		next = n->hnext;
		for (pw_name *nm = n->names, *nx; nm; nm = nx) {
			nx = nm->next;
			free(nm->name);
			free(nm);
		}
		free(n);
	}
}

void pw_inode_table_free(pw_fs *fs)
{
	if (!fs->nodes)
		return;
	for (size_t i = 0; fs->nodes->htab && i < fs->nodes->hsize; i++)
		free_chain(fs->nodes->htab[i]);
	free_chain(fs->nodes->orphans);
	free(fs->nodes->htab);
	free(fs->nodes->wtab);
	pthread_rwlock_destroy(&fs->nodes->tree_lock);
	free(TAKE_PTR(fs->nodes));
}

void pw_xattr_changed(pw_inode *n)
{
	atomic_fetch_add(&n->xattr_epoch, 1);
	atomic_store(&n->xattr_state, PW_XATTR_UNKNOWN);
}
