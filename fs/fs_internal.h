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
 * Locking: fs->tree_lock (rwlock) guards the inode table, every node's names, nlookup and
 * child counts. Path building takes it for reading; lookup, forget, rename, unlink take it
 * for writing. The active policy pointer is guarded by fs->policy_lock, held only to load
 * the pointer and take a reference.
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
#include "opmap.h" /* FUSE opcode -> policy op: the handlers' ops come from there */
#include "pw_limits.h"
#include "policy.h"
#include "util.h"

#define PW_ALIAS_CHECK_MAX 8
#define PW_FH_STRIPES 32
/* Switches queued behind one attribute pass whose old policies are compared one by one;
 * beyond that the pass visits every node (switch.c). */
#define PW_INVAL_OLDS_MAX 8
/* How long a switch waits for its attribute pass before answering (switch.c). */
#define PW_SWITCH_ATTR_WAIT_MS 2000

struct pw_inode;

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
	mode_t type;              /* S_IFMT bits */
	uint64_t nlookup;         /* kernel references */
	uint64_t children;        /* names whose parent is this node */
	pw_name *names;           /* NULL for the root and for unlinked inodes */
	int wd;                   /* inotify watch (directories), -1 if none */
	atomic_int open_writers;  /* view descriptors open for writing */
	/* PW_XATTR_NONE once the backing object was seen to have no extended attributes at
	 * all; cleared by any xattr change through the view and by IN_ATTRIB from outside. */
	atomic_int xattr_state;
	atomic_uint xattr_epoch;  /* bumped by every change; guards setting PW_XATTR_NONE */
	/* keep.c: the change set whose records cover this inode's original, and when the
	 * view last changed it (CLOCK_REALTIME ns; undo tells changes made outside by it). */
	_Atomic uint64_t kept_cs;
	_Atomic int64_t changed_ns;
	struct pw_inode *hnext;   /* (dev, ino) hash chain */
	struct pw_inode *wnext;   /* wd hash chain */
	bool is_root;
} pw_inode;

enum { PW_XATTR_UNKNOWN = 0, PW_XATTR_NONE = 1 };

/* A name the kernel was told is absent because it is hidden; invalidated on a switch. */
typedef struct pw_hidden_neg {
	fuse_ino_t parent;
	char *name;
	struct pw_hidden_neg *next;
} pw_hidden_neg;

struct pw_fs {
	char *project;    /* real path of the backing directory */
	char *mountpoint;
	int root_fd;      /* O_PATH descriptor of the project root */
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
	struct fuse_session *se;
	/* The INIT request as seen by devio.c: its id, and the flags the kernel offered. */
	_Atomic uint64_t init_unique;
	_Atomic uint32_t init_offered;
	_Atomic uint32_t init_offered2; /* flags2: bits 32..63 */
	/* Requests received, by opcode (devio.c), for status: what the kernel asks of us is
	 * what a workload costs in the view (each one is a round trip). */
	atomic_uint_fast64_t requests[PW_FS_OPCODES];
	/* Notifications (invalidations) written to the kernel (devio.c), for status. */
	atomic_uint_fast64_t notifications;
	/* devio.c: the pipe size in bytes that holds the largest request the INIT reply
	 * allows, once requests may be spliced (0 before INIT, or when they are read); and
	 * how many more requests are spliced since the last large WRITE. */
	_Atomic size_t splice_need;
	atomic_int splice_credit;
	/* devio.c: the largest pipe a worker may make (probed at INIT), and the max_write the
	 * INIT reply carried (0 before it), for status. */
	size_t pipe_max;
	_Atomic uint32_t max_write;
	int splice_policy; /* devio.c: PIWORKFS_SPLICE, set before the session starts */
	/* FUSE over io_uring (uring.c): asked for with -o io_uring; the transport once INIT
	 * accepted it (set before the INIT reply is written, then never changed). */
	bool uring_wanted;
	struct pw_uring *uring;

	pthread_rwlock_t tree_lock;
	pw_inode root;
	pw_inode **htab;
	size_t hsize, hcount;
	/* The most nodes known since memory was last handed back (inode.c, under tree_lock). */
	size_t hmark;
	pw_inode **wtab; /* wd -> node, same size as htab */

	pthread_mutex_t policy_lock;
	pw_policy *policy;
	uint64_t generation;
	/* Held for reading by every request that decides visibility and makes the kernel
	 * cache an entry (lookup, readdirplus); a switch that changes hide rules takes it for
	 * writing once after the swap, so every entry decided under the old policy is known
	 * before the entries to invalidate are collected (switch.c). Writer-preferring. */
	pthread_rwlock_t lookup_gate;

	pthread_mutex_t neg_lock;
	pw_hidden_neg *hidden_negs;
	size_t n_hidden_negs;

	struct pw_audit *audit;
	struct pw_keep *keep; /* keep.c: originals before changes; NULL: none kept */
	atomic_uint_fast64_t denied;

	/* Invalidation of attributes after a switch, on a thread of its own (switch.c). */
	pthread_t inval_thread;
	pthread_mutex_t inval_lock;
	pthread_cond_t inval_cond;      /* a job is queued, or stop */
	pthread_cond_t inval_done_cond; /* a pass ended (inval_done_gen moved) */
	/* The pending job: every policy the kernel may have cached attributes under since the
	 * last pass began (a switch queued while another is pending adds its old one), and the
	 * new one; references held. inval_every: too many to compare, visit every node. */
	pw_policy *inval_olds[PW_INVAL_OLDS_MAX], *inval_new;
	size_t inval_n_olds;
	bool inval_every;
	bool inval_stop, inval_started;
	atomic_uint_fast64_t inval_pending;
	uint64_t inval_gen;                     /* generation of inval_new (inval_lock) */
	_Atomic uint64_t inval_done_gen;        /* last generation fully invalidated */

	/* Backing-tree change notifications (watch.c). */
	int inotify_fd;
	pthread_t watch_thread;
	bool watch_started;
	int watch_stop_pipe[2];
	/* Open file and directory handles (ops_file.c), in stripes chosen by node, so that the
	 * OPEN of one file and the RELEASE of another never wait for each other. A daemon stopped
	 * with files still open (SIGTERM) gets no RELEASE for them; pw_fh_close_all frees what is
	 * left at unmount. */
	struct pw_fh_stripe {
		pthread_mutex_t lock;
		struct pw_fh *head;
	} __attribute__((aligned(64))) fh_stripes[PW_FH_STRIPES];
	/* Changes the daemon is about to make itself (watch.c): their inotify events need no
	 * invalidation, since the kernel already knows from our replies. */
	pthread_mutex_t expect_lock;
	struct pw_expect *expects;
	size_t n_expects;
};

typedef struct pw_fs pw_fs;

/* inode.c */
int pw_inode_table_init(pw_fs *fs);
void pw_inode_table_free(pw_fs *fs);
pw_inode *pw_inode_get(pw_fs *fs, fuse_ino_t ino);
fuse_ino_t pw_inode_id(pw_fs *fs, pw_inode *n);
/* Registers a lookup of NAME in PARENT that found ST: finds or creates the node, adds or
 * refreshes its name, and counts one kernel reference. Returns NULL on ENOMEM. Takes the
 * tree lock. */
pw_inode *pw_inode_learn(pw_fs *fs, pw_inode *parent, const char *name, const struct stat *st,
			 bool *ret_new_dir);
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
void pw_inode_set_wd_locked(pw_fs *fs, pw_inode *n, int wd);
/* Calls FN for every node (tree lock held for reading). */
void pw_inode_foreach(pw_fs *fs, void (*fn)(pw_fs *fs, pw_inode *n, void *u), void *u);

/* resolve.c */
/*
 * A project-relative path built from a node's names. A path shorter than PW_PATH_MAX (every
 * ordinary one) is written into the caller's stack buffer, so building it allocates
 * nothing; a longer one, up to PW_TREE_PATH_MAX, goes to the heap. Declare one with
 * PW_PATH_DECLARE(p), read p.s after a successful build; it is freed at scope exit. A
 * pw_path may be built again (the old heap copy is freed first). Never copy one.
 */
typedef struct pw_path {
	char *s;   /* the path: buf, a heap string, or NULL before a successful build */
	char *buf; /* the caller's PW_PATH_MAX bytes */
} pw_path;
void pw_path_done(pw_path *p);
#define PW_PATH_DECLARE(var)                                                                       \
	char var##_buf_[PW_PATH_MAX];                                                              \
	_cleanup_(pw_path_done) pw_path var = {.s = NULL, .buf = var##_buf_}
/* The project-relative path of N (primary name) into RET. Returns 0, -ENOENT (unlinked),
 * -ENAMETOOLONG (PW_TREE_PATH_MAX or more), -ENOMEM. */
int pw_node_path(pw_fs *fs, pw_inode *n, pw_path *ret);
int pw_node_path_locked(pw_fs *fs, pw_inode *n, pw_path *ret);
/* Path of NAME inside PARENT (the _locked form with the tree lock held). */
int pw_child_path(pw_fs *fs, pw_inode *parent, const char *name, pw_path *ret);
int pw_child_path_locked(pw_fs *fs, pw_inode *parent, const char *name, pw_path *ret);
/* Opens N's backing object beneath the root: O_PATH|O_NOFOLLOW when FLAGS is O_PATH, else
 * with FLAGS (never following symlinks). Returns a descriptor or -errno. */
int pw_open_node(pw_fs *fs, pw_inode *n, int flags);
/* Opens PATH (project-relative, normal, shorter than PW_TREE_PATH_MAX) beneath the root,
 * never following a symlink; a path of PATH_MAX bytes or more is resolved in steps. */
int pw_openat_beneath(pw_fs *fs, const char *path, int flags, mode_t mode);
bool pw_name_valid(const char *name);

/* creds.c: act with the caller's credentials when the daemon runs as root. */
typedef struct pw_creds_saved {
	bool changed;
	uid_t fsuid;
	gid_t fsgid;
} pw_creds_saved;
int pw_creds_enter(pw_fs *fs, fuse_req_t req, pw_creds_saved *saved);
void pw_creds_leave(pw_creds_saved *saved);
/* Whether this thread acts with a caller's credentials now; when not, it has the daemon's. */
bool pw_creds_switched(void);

/* check.c: the one decision point and the one denial function: check.h. */

/* ops_xattr.c: an attribute of N changed (through the view or outside it). */
void pw_xattr_changed(pw_inode *n);

/* ops_file.c: the registry of open handles (at start), and closing and freeing every handle
 * never released (after the session ended). */
void pw_fh_table_init(pw_fs *fs);
void pw_fh_close_all(pw_fs *fs);

/* ops*.c */
extern const struct fuse_lowlevel_ops pw_fs_ops;
void pw_fill_entry(pw_fs *fs, struct fuse_entry_param *e, pw_inode *n, const struct stat *st);

/* The lifetime of entries the kernel may cache in the directory open at DIRFD (or node
 * DIR): fs->timeout, or 0 under allow_other when not every user may search it (ops.c). */
double pw_entry_timeout_in(pw_fs *fs, int dirfd);
double pw_entry_timeout_of(pw_fs *fs, pw_inode *dir);
/* Is NAME in DIRFD, of MODE, a special file (FIFO, socket, device) with an access ACL in an
 * allow_other view, whose entries are never cached and whose lookups are checked per caller
 * (the kernel's own check does not see ACLs; ops.c)? */
bool pw_special_uncached(pw_fs *fs, int dirfd, const char *name, mode_t mode);
bool pw_dir_searchable_by_all(int dirfd);

/* devio.c: our own /dev/fuse read/writev, for what libfuse 3.14 cannot negotiate, and
 * requests spliced through a pipe so that write data never passes through our memory. */
int pw_devio_attach(pw_fs *fs);
bool pw_devio_write_kills_suidgid(void);
/* The most data one WRITE can carry: the kernel's default max_pages limit (256 pages) and
 * libfuse's request buffer (256 pages and a header page); a 1 MiB write(2) is one WRITE. */
#define PW_FS_MAX_WRITE (1024 * 1024)
/* The largest pipe an unprivileged process may make by default (pipe-max-size). A spliced
 * request needs one pipe page for its header and fixed argument and one per page of data,
 * so when devio.c's pipes cannot be larger, the view's max_write is a page less than this
 * (a 1 MiB write(2) is then two WRITEs, and its data is still spliced). */
#define PW_DEVIO_PIPE_MAX (1024 * 1024)
#define PW_FS_MAX_WRITE_SMALL_PIPE (PW_DEVIO_PIPE_MAX - 4096)
/* At INIT (ops.c): the max_write to offer, PW_FS_MAX_WRITE when this process may make a pipe
 * that holds such a request (root with CAP_SYS_RESOURCE, or pipe-max-size of 2 MiB or more),
 * else PW_FS_MAX_WRITE_SMALL_PIPE. Remembers the pipe size for devio.c's splicing. */
unsigned pw_devio_choose_max_write(pw_fs *fs);
/* The data of the WRITE this thread is handling when it waits in devio.c's pipe rather than
 * in IN_BUF (a large one): fills RET with a buffer that reads it from the pipe, and returns
 * true. What the handler leaves in the pipe is dropped before the next request. */
bool pw_devio_write_data(const struct fuse_bufvec *in_buf, struct fuse_bufvec *ret);
/* Counts the request in BUF (/dev/fuse layout, LEN bytes) and notes a WRITE's flags for
 * the calling thread, which handles it next (also for requests from the ring). */
void pw_devio_note_request(pw_fs *fs, const void *buf, size_t len);

/* uring.c: FUSE over io_uring. pw_uring_prepare makes the rings, buffers and threads for
 * payloads of PAYLOAD_SZ (before the INIT reply accepts); pw_uring_start lets them register
 * (after it); pw_uring_free stops and frees (accepts NULL). pw_uring_reply and
 * pw_uring_reply_pipe take a reply meant for a ring entry (from writev, or from the pipe
 * of a spliced reply): they return its length, or -ENOENT for a /dev/fuse request's. */
typedef struct pw_uring pw_uring;
int pw_uring_prepare(pw_fs *fs, size_t payload_sz, pw_uring **ret);
void pw_uring_start(pw_uring *u);
void pw_uring_free(pw_uring *u);
ssize_t pw_uring_reply(pw_fs *fs, const struct iovec *iov, int count);
ssize_t pw_uring_reply_pipe(pw_fs *fs, int pipe_fd, size_t len);
bool pw_uring_available(void); /* built with liburing */
uint64_t pw_uring_init_flag(void); /* FUSE_OVER_IO_URING */

/* watch.c */
int pw_watch_start(pw_fs *fs);
void pw_watch_stop(pw_fs *fs);
/* Watches directory N, just learned (the caller's reference keeps it); without the tree lock. */
void pw_watch_dir(pw_fs *fs, pw_inode *n);
void pw_unwatch_dir(pw_fs *fs, pw_inode *n); /* tree lock held for writing */

/* What an operation is about to do to a name on the backing tree; recorded before the
 * syscall (so its event cannot come first) and withdrawn when the syscall fails. */
typedef enum pw_expect_kind {
	PW_EXPECT_NAME_ADDED,
	PW_EXPECT_NAME_REMOVED,
	PW_EXPECT_CLOSED_WRITE, /* the view closes a file it wrote: its pages are current */
} pw_expect_kind;
/* The same, for node N under its primary name (no-op for a node without one). */
int pw_watch_expect_node(pw_fs *fs, pw_inode *n, pw_expect_kind kind);
int pw_watch_expect(pw_fs *fs, pw_inode *parent, const char *name, pw_expect_kind kind);
void pw_watch_unexpect(pw_fs *fs, int token);

/* switch.c */
int pw_inval_start(pw_fs *fs);
void pw_inval_stop(pw_fs *fs);
