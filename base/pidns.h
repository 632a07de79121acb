/* SPDX-License-Identifier: MIT */
/*
 * Where a process sits in the tree of PID namespaces, seen from the daemon's own: so that
 * the `denied` notifications an agent socket delivers carry only the denials of processes
 * inside that agent's sandbox (`piworkfs run` gives it its own PID namespace), with the
 * pids as the agent sees them (docs/PROTOCOL.md, `subscribe`).
 *
 * A process's description lists, for each PID namespace below the daemon's that contains
 * it, outermost first, the namespace's inode number (nsfs) and the process's pid in it:
 * "INO:PID INO:PID ...". A process in the daemon's own namespace has the empty description.
 * The pid in the daemon's namespace is not part of it (the caller has it already).
 *
 * It must be taken while the process exists (a short-lived process is gone by the time a
 * notification is sent): the daemon takes it when it records the denial, while the process
 * waits for the answer to its request.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pw_limits.h"

typedef struct pw_pidns_level {
	uint64_t ino; /* the namespace's inode number */
	pid_t pid;    /* the process's pid in it */
} pw_pidns_level;

/*
 * Writes PID's description (above) into BUF (SIZE bytes, PW_PIDNS_DESC_MAX suffice).
 * PID is a pid in the daemon's namespace. Reads /proc/PID/status (its NSpid line) and,
 * for a process below the daemon's namespace, /proc/PID/ns/pid and its parents
 * (NS_GET_PARENT). Returns 0, or -errno: -ESRCH (no such process), -ENOENT (no NSpid line:
 * a kernel before 4.1), -EPROTO (the two views disagree), -ENOBUFS (SIZE too small).
 */
int pw_pidns_describe(pid_t pid, char *buf, size_t size);

/*
 * Parses a description into at most MAX levels (outermost first). Returns the number of
 * levels (0 for ""), or -EINVAL (malformed) or -E2BIG (more than MAX).
 */
int pw_pidns_parse(const char *desc, pw_pidns_level *levels, size_t max);

/*
 * Whether a process with description DESC (NULL: unknown) lies in namespace NS_INO at level
 * NS_LEVEL (the innermost level of a subscriber's description; level 0 is the daemon's own
 * namespace, which holds every process, and then NS_INO is ignored) or in one below it.
 * On true, *ret_pid is its pid as seen there (OUTER_PID, its pid in the daemon's namespace,
 * at level 0). An unknown or malformed DESC is never inside a namespace below the daemon's.
 */
bool pw_pidns_inside(const char *desc, pid_t outer_pid, size_t ns_level, uint64_t ns_ino,
		     pid_t *ret_pid);
