/* SPDX-License-Identifier: MIT */
/*
 * What `piworkfs mount` (cmd_mount.c) and `piworkfs umount` (cmd_umount.c) share: mount's
 * -o options (mount_options.c) and the view and daemon at a mountpoint.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "daemon.h"

/* How long umount (and a mount at the same place) waits for a daemon to exit. */
#define DAEMON_EXIT_MS 10000

/* ---- mount_options.c ---- */

/* A number WHAT names, from S: 0 with *ret, or -EINVAL after saying why. */
int pw_mount_parse_number(const char *what, const char *s, double *ret);

/* A size: bytes, or with a binary suffix K, M, G, T (64M). Greater than zero. */
int pw_mount_parse_size(const char *what, const char *s, unsigned long long *ret);

/* An age: seconds, or with a suffix s, m, h, d, w (14d). Greater than zero. */
int pw_mount_parse_age(const char *what, const char *s, long long *ret);

/* The view's option ID (options.h) when its value is a number, a size or an age
 * (--timeout, --originals-*): reads VALUE into O. Returns an exit status (PW_EXIT_USAGE after
 * saying why), or PW_EXIT_GO_ON when ID is not one of them. */
int pw_mount_number_option(pw_daemon_opts *o, int id, const char *value);

/*
 * Splits -o OPTS (modified in place: O keeps pointers into it) into the view's own options,
 * applied to O, fstab's, dropped, and the FUSE options, left in *RET_FUSE (malloc'd,
 * comma-separated). Returns an exit status.
 */
int pw_mount_split_options(char *opts, pw_daemon_opts *o, char **ret_fuse);

/* Checks that every option of OPTS (comma-separated) is a FUSE option we pass on, naming a
 * near miss for one that is not. Returns an exit status. */
int pw_mount_check_fuse_options(const char *opts);

/* Removes "nonempty" from the -o list (the check is ours), noting whether it was there. */
char *pw_mount_strip_nonempty(const char *opts, bool *ret_nonempty, bool *ret_allow_other);

/* ---- cmd_mount.c ---- */

/* Detaches a dead FUSE mount (its daemon was killed: every access answers ENOTCONN). */
int pw_mount_detach_stale(const char *mp);

/* Is PATH the mountpoint of a live piworkfs view? Returns its source (project) or NULL. */
char *pw_mount_live_view_at(const char *path);

/* The pid of the daemon answering on SOCKET, or 0. */
pid_t pw_mount_daemon_pid(const char *socket);

/* Waits up to TIMEOUT_MS for the process of pidfd FD to end. Returns 0 when it has,
 * -ETIMEDOUT, or -errno. */
int pw_mount_wait_pidfd(int fd, int timeout_ms);
