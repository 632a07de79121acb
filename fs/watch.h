/* SPDX-License-Identifier: MIT */
/* watch.c: the backing tree's changes made outside the view, and the view's own
 * changes it expects (which need no invalidation). */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "fs_internal.h"

/* The watcher, fs->watcher: watch.c's. */
typedef struct pw_watcher {
	/* Backing-tree change notifications: the inotify descriptor (-1: none, -o no_watch or
	 * stopped), the thread that reads it, and the pipe that stops it. */
	int inotify_fd;
	pthread_t watch_thread;
	bool watch_started;
	int watch_stop_pipe[2];
	/* Changes the daemon is about to make itself: their inotify events need no
	 * invalidation, since the kernel already knows from our replies. */
	pthread_mutex_t expect_lock;
	struct pw_expect *expects;	/* a ring of PW_EXPECT_MAX, made at the first */
	struct timespec batch;		/* how long events accumulate before a read (watch.c) */
	size_t max_watches;		/* PIWORKFS_MAX_WATCHES (SIZE_MAX: no cap of its own) */
	bool no_inotify;		/* watching, but without inotify (watch.c) */
	atomic_uint_fast64_t unwatched; /* directories that could not be watched, for status */
	/* directories on a filesystem that changes without telling this machine (NFS, 9p,
	 * FUSE...), for status; and the root's filesystem when it is one (its name) */
	atomic_uint_fast64_t shared;
	const char *root_shared;
} pw_watcher;

/* Makes fs->watcher and, unless the view has no_watch, starts watching. 0 or -errno (a
 * failure leaves what it made for pw_watch_stop and pw_watch_free). */
int pw_watch_start(pw_fs *fs);
/* Stops the thread and closes the descriptors; later expectations are no-ops (the session
 * may still answer requests while it unmounts). Accepts no watcher made. */
void pw_watch_stop(pw_fs *fs);
/* Frees fs->watcher, after the session is gone. Accepts none made. */
void pw_watch_free(pw_fs *fs);
/* Registers a lookup of NAME in PARENT that found O (pw_inode_learn, MADE as there) and,
 * for a directory new to the table, watches it (the reference just counted keeps it; without
 * the tree lock). Returns the node, or NULL on ENOMEM. */
pw_inode *pw_watch_learn(pw_fs *fs, pw_inode *parent, const char *name, const pw_object *o,
			 bool made);

/*
 * How long the kernel may keep what it learns about the names in directory DIR: entries,
 * attributes, and for N (a name in DIR, or NULL) what N itself holds. The view's timeout
 * (a day by default) where the watcher sees every change (DIR watched, and N too if N is a
 * directory; or a view that does not watch at all, -o no_watch, which asked for its
 * timeouts); else PW_UNWATCHED_TIMEOUT_S: a directory that could not be watched
 * (mark_unwatched) sends no event, so a change outside the view must show when the
 * kernel asks again.
 */
double pw_watch_timeout(pw_fs *fs, pw_inode *dir, pw_inode *n);
/* The same for node N under its primary name (takes the tree lock). */
double pw_watch_node_timeout(pw_fs *fs, pw_inode *n);
/* Whether the watcher sees every change to DIR's names. */
bool pw_watch_covers(pw_fs *fs, pw_inode *dir);
/* Whether it sees every change to N (its directory, and N if a directory): what decides
 * whether the kernel may keep N's pages or listing from one open to the next. */
bool pw_watch_node_covered(pw_fs *fs, pw_inode *n);

/* What an operation is about to do to a name on the backing tree; recorded before the
 * syscall (so its event cannot come first) and withdrawn when the syscall fails. */
typedef enum pw_expect_kind {
	PW_EXPECT_NAME_ADDED,
	PW_EXPECT_NAME_REMOVED,
	PW_EXPECT_CLOSED_WRITE, /* the view closes a file it wrote: its pages are current */
	PW_EXPECT_TIMES_SET,	/* a SETATTR of both times: the reply brings the new ones */
} pw_expect_kind;
/* The same, for node N under its primary name (no-op for a node without one). */
int pw_watch_expect_node(pw_fs *fs, pw_inode *n, pw_expect_kind kind);
/* Records that an operation is about to do KIND to NAME under PARENT. Returns a token (>= 0)
 * for pw_watch_unexpect, or -errno when nothing was recorded (no watcher, the name too long,
 * no room): the event then simply invalidates, and pw_watch_unexpect ignores the token. */
int pw_watch_expect(pw_fs *fs, pw_inode *parent, const char *name, pw_expect_kind kind);
void pw_watch_unexpect(pw_fs *fs, int token);
