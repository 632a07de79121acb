/* SPDX-License-Identifier: MIT */
/*
 * What the daemon and the CLI read from /proc, parsed once: a process's name and the mount
 * table. (policy/ stays pure: nothing under it reads /proc.)
 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "pw_limits.h"

/* The name of process PID (/proc/PID/comm without its newline, cut to SIZE - 1 bytes) in
 * BUF. Returns 0, or -errno with BUF "" (-ESRCH for a PID <= 0). */
int pw_proc_comm(pid_t pid, char *buf, size_t size);

/* The name of process PID, from a one-entry cache per thread: a storm of requests from one
 * process (a build creating thousands of files) reads /proc once, not three system calls
 * per request. Best effort: a recycled pid, or one that has exec'd since, can show the
 * previous name until another pid asks; the name is a hint for a reader of the log or of
 * `changes`, never an identity. NULL when unknown. Valid on this thread until its next
 * call. */
const char *pw_proc_comm_cached(pid_t pid);

/* Who a request came from, by program: the kernel names the thread that asked (FUSE's pid
 * is a thread id), and a thread's name is often a runtime's worker (libuv-worker, a JIT
 * thread), not the program (node, pi, bash). */
typedef struct pw_proc_who {
	pid_t tgid;		       /* the thread group leader: the process */
	char program[PW_COMM_MAX + 1]; /* the leader's name (/proc/TGID/comm) */
	char thread[PW_COMM_MAX + 1];  /* the asking thread's own name */
} pw_proc_who;

/* Fills *RET for thread TID: its Tgid (/proc/TID/status), the leader's name and its own.
 * Returns 0, or -errno (-ESRCH for a TID <= 0) with *RET zeroed. */
int pw_proc_who_of(pid_t tid, pw_proc_who *ret);

/* pw_proc_who_of through a one-entry cache per thread (as pw_proc_comm_cached, with the
 * same caveats). NULL when unknown. Valid on this thread until its next call. */
const pw_proc_who *pw_proc_who_cached(pid_t tid);

/* The name W's thread TID goes by beside its program, for `--json`: W->thread when TID is
 * not the program's main thread or is named otherwise, else NULL (the program says it). */
const char *pw_proc_who_thread(const pw_proc_who *w, pid_t tid);

/* One line of /proc/self/mountinfo, its paths unescaped (\040 a space, ...). */
typedef struct pw_mountinfo {
	unsigned maj, min;
	char *root;	  /* the directory of the filesystem the mount shows */
	char *mountpoint; /* where */
	char *fstype;	  /* "fuse.piworkfs", ... */
	char *source;	  /* NULL when the line has none */
	char *super_opts; /* the superblock's options ("rw,user_id=1000,..."), NULL when none */
} pw_mountinfo;

/* The mounts of /proc/self/mountinfo in file order, at most MAX of them (the rest is not
 * read). Lines that do not parse are skipped. Returns 0 with a malloc'd array (free with
 * pw_mountinfo_free), or -errno. */
int pw_mountinfo_read(size_t max, pw_mountinfo **ret, size_t *ret_n);
void pw_mountinfo_free(pw_mountinfo *m, size_t n); /* accepts NULL */
