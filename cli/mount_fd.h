/* SPDX-License-Identifier: MIT */
/*
 * `piworkfs mount --fuse-fd N`: checks of a FUSE connection another process opened and
 * mounted (mount_fd.c has the why). Each returns an exit status (PW_EXIT_*), after a
 * one-line error.
 */
#pragma once

#include <stdbool.h>

/* N of --fuse-fd N: a non-negative number (PW_EXIT_USAGE otherwise). */
int pw_mount_fd_parse(const char *arg, int *ret);

/* FD is open, is /dev/fuse for reading and writing, is mounted, and its INIT is unread. */
int pw_mount_fd_check(int fd);

/* The mount at MOUNTPOINT, as mountinfo shows it. */
typedef struct pw_mount_fd_facts {
	char *mountpoint;		       /* absolute (malloc'd, the caller frees) */
	bool allow_other, default_permissions; /* the mount's own options */
} pw_mount_fd_facts;

/* ARG is a fuse.piworkfs mount of PROJECT (its source), found without entering it, apart
 * from the project, and not allow_other without default_permissions. */
int pw_mount_fd_mountpoint(const char *arg, const char *project, pw_mount_fd_facts *ret);

/* -o's FUSE options with --fuse-fd: only io_uring and no_io_uring (the rest are the
 * mount's, made already). */
int pw_mount_fd_check_options(const char *fuse_opts);

/* FD moved above the standard streams, close-on-exec; the original is closed unless it is
 * one of them. Returns the new descriptor, or -1 after an error message. */
int pw_mount_fd_take(int fd);
