/* SPDX-License-Identifier: MIT */
/* inode.c: the table of nodes the kernel knows, and their names (fs_internal.h
 * explains why names and not descriptors). */
#pragma once

#include <pthread.h>
#include <stddef.h>

#include "fs_internal.h"

/* The node table, fs->nodes: inode.c's; other files reach it through the functions below
 * (the tree lock and the root through the inline ones, since every request takes them). */
struct pw_nodes {
	/* Guards the table, every node's names, nlookup and child counts (fs_internal.h). */
	pthread_rwlock_t tree_lock;
	pw_inode root;
	pw_inode **htab;
	size_t hsize, hcount;
	/* The most nodes known since memory was last handed back (under tree_lock). */
	size_t hmark;
	pw_inode **wtab; /* wd -> node, same size as htab */
	/* Nodes out of htab because their inode number went to another file (pw_inode_learn),
	 * chained both ways (hnext, oprev: a checkout outside can orphan thousands, each
	 * forgotten in O(1)) until the kernel forgets them or the table is freed. */
	pw_inode *orphans;
	/* The watcher's inotify descriptor (pw_inode_set_inotify), to drop a freed node's
	 * watch; -1 when there is none. And dircache.c's guard, for its watches. */
	int inotify_fd;
	/* Told of each node about to be freed (the kernel forgot it), under tree_lock held for
	 * writing; NULL: nobody. The undo room's (pw_inode_set_freed_hook): it remembers when
	 * the view last changed the inode, which the node held. A pointer, so the table calls
	 * nothing of the room by name (the room calls the table). */
	void (*freed)(pw_fs *fs, const pw_inode *n);
	int guard_fd;
	/* Nodes with an inotify watch (wd >= 0), under tree_lock (pw_inode_set_wd_locked). */
	size_t watched;
};

/* Makes fs->nodes (0 or -ENOMEM); pw_inode_table_free frees it (accepts none made). */
int pw_inode_table_init(pw_fs *fs);
void pw_inode_table_free(pw_fs *fs);
/* The project root's identity, once opened (fsmain.c). */
void pw_inode_set_root(pw_fs *fs, dev_t dev, ino_t ino);
/* The inotify descriptor watches were added with (watch.c, at start). */
void pw_inode_set_inotify(pw_fs *fs, int fd);
/* Sets the table's freed hook (struct pw_nodes.freed); takes the tree lock. */
void pw_inode_set_freed_hook(pw_fs *fs, void (*fn)(pw_fs *fs, const pw_inode *n));
/* The guard's inotify descriptor (dircache.c, at start; -1 at its end). */
void pw_inode_set_guard_fd(pw_fs *fs, int fd);
/* Nodes the kernel knows now (takes the tree lock), for status. */
size_t pw_inode_count(pw_fs *fs);
/* Nodes with an inotify watch now (takes the tree lock). */
size_t pw_inode_watch_count(pw_fs *fs);

static inline pw_inode *pw_inode_root(pw_fs *fs)
{
	return &fs->nodes->root;
}

/* The tree lock. */
static inline void pw_inode_lock_read(pw_fs *fs)
{
	pthread_rwlock_rdlock(&fs->nodes->tree_lock);
}

static inline void pw_inode_lock_write(pw_fs *fs)
{
	pthread_rwlock_wrlock(&fs->nodes->tree_lock);
}

static inline void pw_inode_unlock(pw_fs *fs)
{
	pthread_rwlock_unlock(&fs->nodes->tree_lock);
}

pw_inode *pw_inode_get(pw_fs *fs, fuse_ino_t ino);
fuse_ino_t pw_inode_id(pw_fs *fs, pw_inode *n);
/* Registers a lookup of NAME in PARENT that found O: finds or creates the node, adds or
 * refreshes its name, and counts one kernel reference. A node with O's inode number is O's
 * only if its type and birth time agree and MADE is false; MADE says the request has just
 * made the object (a create, mkdir, mknod or symlink of a free name), so no node can be it
 * yet. A node that is not O's is of a file since deleted whose number the backing
 * filesystem handed out again: it is orphaned, not given the new name. Returns NULL on
 * ENOMEM. Takes the tree lock. */
pw_inode *pw_inode_learn(pw_fs *fs, pw_inode *parent, const char *name, const pw_object *o,
			 bool made, bool *ret_new_dir);
void pw_inode_forget(pw_fs *fs, pw_inode *n, uint64_t nlookup);
/* FORGET_MULTI: every node of the batch under one lock; then, if the table has halved since
 * its high-water mark, hands the freed memory back to the system. */
void pw_inode_forget_batch(pw_fs *fs, const struct fuse_forget_data *forgets, size_t count);
/* Name bookkeeping after successful mutations (takes the tree lock). */
void pw_inode_unlinked(pw_fs *fs, pw_inode *parent, const char *name, dev_t dev, ino_t ino);
void pw_inode_renamed(pw_fs *fs, pw_inode *oldparent, const char *oldname, pw_inode *newparent,
		      const char *newname, dev_t dev, ino_t ino, bool exchanged, dev_t dev2,
		      ino_t ino2);
pw_inode *pw_inode_find_locked(pw_fs *fs, dev_t dev, ino_t ino);
pw_inode *pw_inode_by_wd_locked(pw_fs *fs, int wd);
/* Records N's watch (a node that loses its watch, -1, loses its guard too: the two are made
 * together, watch.c). */
void pw_inode_set_wd_locked(pw_fs *fs, pw_inode *n, int wd);
/* Calls FN for every node (tree lock held for reading). */
void pw_inode_foreach(pw_fs *fs, void (*fn)(pw_fs *fs, pw_inode *n, void *u), void *u);

/* An extended attribute of N changed (through the view or outside it): the "none" mark
 * (ops_xattr.c) no longer holds. */
void pw_xattr_changed(pw_inode *n);
