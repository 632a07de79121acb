/* SPDX-License-Identifier: MIT */
/*
 * Internals of the FUSE layer.
 *
 * Why names and not descriptors: libfuse's passthrough_ll keeps one O_PATH descriptor per
 * inode the kernel knows, which runs into the open-file hard limit (20,000 here) on real
 * projects. We keep, per inode, the name(s) it was looked up by (parent node + component)
 * and resolve a path from the project root's descriptor on demand with openat2
 * (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): the daemon never follows a symlink, never
 * leaves the project, and holds a bounded number of descriptors whatever the tree's size.
 * The same names give the policy its project-relative paths.
 *
 * Locking: the tree lock (inode.h, pw_inode_lock_read/_write) guards the inode table, every
 * node's names, nlookup and child counts. Path building takes it for reading; lookup,
 * forget, rename, unlink take it for writing. The active policy pointer is guarded by
 * its slot's lock (req.h), held only to load the pointer and take a reference.
 */
#pragma once

#define FUSE_USE_VERSION 314

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "fs.h"
#include "object.h"
#include "opmap.h" /* FUSE opcode -> policy op: the handlers' ops come from there */
#include "pw_limits.h"
#include "policy.h"
#include "transport.h" /* pw_fs.transport */
#include "undo/node.h" /* pw_inode.undo */
#include "util.h"

struct pw_inode;
struct pw_nodes;
struct pw_policy_slot;
struct pw_watcher;
struct pw_fh_table;
struct pw_inval_pass;
struct pw_dircache;

/* One name of an inode: (parent, component). The first name is the primary one used to
 * reach the inode on the backing tree; hard links looked up through other names add
 * aliases, and a write must be allowed under every name known. */
typedef struct pw_name {
	struct pw_inode *parent;
	char *name;
	struct pw_name *next;
} pw_name;

typedef struct pw_inode {
	dev_t dev;
	ino_t ino;
	mode_t type;	   /* S_IFMT bits */
	int64_t birth_ns;  /* the backing object's birth time, 0 if unknown (base/object.h) */
	uint64_t nlookup;  /* kernel references */
	uint64_t children; /* names whose parent is this node */
	pw_name *names;	   /* NULL for the root and for unlinked inodes */
	int wd;		   /* inotify watch (directories), -1 if none */
	int guard_wd;	   /* dircache.c's guard watch (directories), -1 if none */
	/* A directory the watcher could not watch (watch.c): no change in it sends an event,
	 * so the kernel keeps what concerns it for a second at most (pw_watch_timeout). */
	atomic_bool unwatched;
	atomic_bool shared;	 /* and on a filesystem that changes without telling (watch.c) */
	atomic_int open_writers; /* view descriptors open for writing */
	/* PW_XATTR_NONE once the backing object was seen to have no extended attributes at
	 * all; cleared by any xattr change through the view and by IN_ATTRIB from outside. */
	atomic_int xattr_state;
	atomic_uint xattr_epoch; /* bumped by every change; guards setting PW_XATTR_NONE */
	pw_undo_node undo;	 /* the undo room's (undo/node.h) */
	struct pw_inode *hnext;	 /* (dev, ino) hash chain, or the orphans' (then oprev too) */
	struct pw_inode *oprev;
	struct pw_inode *wnext; /* wd hash chain */
	bool is_root;
	bool orphan; /* on pw_nodes.orphans, identity cleared (inode.c) */
} pw_inode;

enum { PW_XATTR_UNKNOWN = 0, PW_XATTR_NONE = 1 };

struct pw_fs {
	char *project; /* real path of the backing directory */
	char *mountpoint;
	int root_fd; /* O_PATH descriptor of the project root */
	dev_t root_dev;
	double timeout;
	uid_t owner_uid;
	bool is_root_daemon; /* euid 0: act with each caller's credentials */
	bool no_watch;
	bool allow_other;
	bool default_permissions; /* the kernel checks permission bits: -o default_permissions,
				   * always under allow_other (fsmain.c) */
	/* Decline OPENDIR (the kernel then caches listings with no open/release round trip)
	 * when every caller passes opendir's permission check anyway: a root daemon without
	 * allow_other serves only root. Set in init. */
	bool no_opendir;
	/* The session serves a descriptor another process mounted (mount --fuse-fd). */
	bool passed_fd;
	/* The device of the view's superblock, from mountinfo once mounted (0:0: not known):
	 * what tells our mount at the mountpoint from one mounted there after it (fsmain.c). */
	unsigned mount_maj, mount_min;
	struct fuse_session *se;
	/* How requests arrive and replies leave (transport.h: devio.c, uring.c, transport.c). */
	struct pw_transport transport;

	struct pw_nodes *nodes; /* the node table (inode.h): inode.c's */

	/* The active policy, its generation, the lookup gate, the hidden negatives (req.h):
	 * req.c's. */
	struct pw_policy_slot *slot;

	struct pw_audit *audit;
	struct pw_undo *undo; /* the undo room (undo/undo.h): originals kept; NULL: none */
	atomic_uint_fast64_t denied;

	/* The attribute pass after a switch (switch.h): switch.c's. */
	struct pw_inval_pass *inval;

	/* Backing-tree change notifications and the changes the daemon expects (watch.h):
	 * watch.c's. */
	struct pw_watcher *watcher;
	/* Open file and directory handles (fh.h): fh.c's. */
	struct pw_fh_table *fh;
	/* Directory descriptors kept between requests while that is safe (dircache.h):
	 * dircache.c's. */
	struct pw_dircache *dircache;
};

typedef struct pw_fs pw_fs;

/*
 * What each C file of fs/ offers is declared in its own header (inode.h, resolve.h, creds.h,
 * req.h, check.h, entry.h, fh.h, watch.h, switch.h, devio.h, uring.h, transport.h,
 * undo/undo.h, optable.h, ops*.h); this one holds the types they share.
 */
