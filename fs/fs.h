/* SPDX-License-Identifier: MIT */
/*
 * The FUSE layer: a passthrough of one project directory that asks the active policy
 * before every mutation. Owned by the daemon (daemon.c), which hands the control plane
 * (ctl/view.c) pw_fs_set_policy, pw_fs_policy and pw_fs_get_stats as a pw_view_fs_ops.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy.h"

typedef struct pw_fs pw_fs;
struct pw_audit;

typedef struct pw_fs_opts {
	const char *project;	/* absolute, resolved path of the backing directory */
	const char *mountpoint; /* absolute path */
	bool foreground;
	bool debug;
	bool allow_other;
	double cache_timeout;  /* entry/attr timeout in seconds (kept correct by invalidation) */
	bool no_watch;	       /* disable backing-tree change notifications (tests' control) */
	const char *fuse_opts; /* extra -o options, comma separated */
	/* Serve FUSE_FD, a /dev/fuse mounted at MOUNTPOINT by another process: libfuse is given
	 * "/dev/fd/N" to mean exactly that, so the session neither mounts nor unmounts. */
	bool use_fuse_fd;
	int fuse_fd;
} pw_fs_opts;

/*
 * Swaps the active policy (takes a new reference to P). When it returns, every operation
 * that starts afterwards decides with P; entries whose visibility changed are invalidated
 * before it returns, cached attributes (write bits) whose answer changed by a pass on a
 * thread of its own. Returns the new generation number. Thread-safe; never blocks FUSE
 * workers.
 */
uint64_t pw_fs_set_policy(pw_fs *fs, pw_policy *p);

/* Waits until the attribute pass of generation GEN has sent its invalidations, for at most
 * PW_SWITCH_ATTR_WAIT_MS (a larger tree's pass then finishes in the background). Called
 * before a switch is answered, after what must happen at once (fs/ctl/view.c install). */
void pw_fs_wait_invalidated(pw_fs *fs, uint64_t gen);

/* The active policy (a new reference; release with pw_policy_unref) and its generation. */
pw_policy *pw_fs_policy(pw_fs *fs, uint64_t *ret_generation);

/* Counters for status. */
#define PW_FS_OPCODES 64 /* FUSE opcodes counted one by one; larger ones count as 0 */
typedef struct pw_fs_stats {
	uint64_t inodes; /* inodes the kernel knows */
	uint64_t denied; /* denied operations since mount */
	uint64_t invalidations_pending;
	/* Cache invalidations sent to the kernel since mount (devio.c; every notification
	 * passes there), and the policy generation whose attribute invalidations have all
	 * been sent (switch.c): a switch to generation G is fully announced once
	 * invalidated_generation >= G. */
	uint64_t invalidations_sent;
	uint64_t invalidated_generation;
	uint64_t requests[PW_FS_OPCODES]; /* FUSE requests received since mount, by opcode */
	uint32_t max_write; /* the most data one WRITE carries (the INIT reply's); 0 before */
	/* Rows of the current change set the full originals store could not keep, and since
	 * when (realtime ns): undo is incomplete (undo/undo.h, pw_undo_store_full). */
	uint64_t store_not_kept;
	int64_t store_full_since_ns;
	/* How requests reach the daemon (pw_fs_transport_stats): "io_uring" once the INIT
	 * reply accepted FUSE over io_uring and the kernel took the rings, else "/dev/fuse";
	 * and the requests that came through the rings (the rest came through /dev/fuse:
	 * FORGET and INTERRUPT always do). */
	const char *transport;
	uint64_t ring_requests;
	/* Directory descriptors kept between requests (dircache.c): whether the view may
	 * keep them, parent directories served from them and resolved from the root, and how
	 * often all were given up (a directory moved, was removed or changed permissions). */
	bool dircache_enabled;
	uint64_t dircache_hits, dircache_misses, dircache_flushes;
	/* The watcher (watch.c): whether the view watches its tree, the directories watched
	 * now, those that could not be watched since mount, and those on filesystems that do
	 * not report changes made elsewhere (in both, changes show within
	 * PW_UNWATCHED_TIMEOUT_S instead of at once). */
	bool watching;
	uint64_t watched_dirs, unwatched_dirs;
	uint64_t shared_dirs; /* on filesystems that change without telling (NFS, 9p, FUSE) */
} pw_fs_stats;
void pw_fs_get_stats(pw_fs *fs, pw_fs_stats *ret);
/* The watcher's part of them (watch.c). */
void pw_fs_watch_stats(pw_fs *fs, pw_fs_stats *ret);
void pw_fs_transport_stats(pw_fs *fs, pw_fs_stats *ret); /* the transport's fields */
void pw_fs_dircache_stats(pw_fs *fs, pw_fs_stats *ret);	 /* the dircache_ fields */

/*
 * FUSE over io_uring, for `mount` (fsmain.c, cli/cmd_mount.c). Whether this kernel and
 * build let a view have it: 0 when they do; else -EOPNOTSUPP with a one-line sentence in
 * WHY that says what stands in the way, what it costs and how to lift it for good (the fuse
 * module parameter enable_uring; piworkfs never changes it). Reads /sys and /proc only.
 */
int pw_fs_uring_probe(char *why, size_t size);
/* -o io_uring requires the transport, -o no_io_uring refuses it, neither takes it where
 * the kernel allows (PIWORKFS_IO_URING=1 or =0 in the environment stand for the options). */
typedef enum { PW_URING_AUTO, PW_URING_REQUIRE, PW_URING_REFUSE } pw_uring_choice;
pw_uring_choice pw_fs_uring_choice(const char *fuse_opts);
/* The protocol's name of request opcode OP ("LOOKUP"), or NULL for one we do not name. */
const char *pw_fs_opcode_name(unsigned op);

/*
 * Lifecycle, used by the daemon (daemon.c). pw_fs_new opens the project root, creates the
 * FUSE session and mounts it (mountpoint checks are the caller's); the view serves a
 * fail-closed policy until pw_fs_set_policy installs the real one. On failure *ret_err gets
 * a malloc'd one-line message. pw_fs_loop serves requests on several threads until
 * unmounted or pw_fs_exit; pw_fs_free unmounts (not a passed descriptor's mount: that is
 * its maker's) and frees.
 */
int pw_fs_new(const pw_fs_opts *opts, pw_fs **ret, char **ret_err);
void pw_fs_set_audit(pw_fs *fs, struct pw_audit *audit);
int pw_fs_loop(pw_fs *fs);
void pw_fs_exit(pw_fs *fs); /* async-signal-safe */
void pw_fs_free(pw_fs *fs); /* accepts NULL */
