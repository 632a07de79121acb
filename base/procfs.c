/* SPDX-License-Identifier: MIT */
/*
 * /proc readers (procfs.h), shared by the daemon (audit, denials, the control socket's
 * peers, originals) and the CLI (finding live views, the sandbox's bind aliases).
 */
#include "procfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

int pw_proc_comm(pid_t pid, char *buf, size_t size)
{
	char path[32];

	if (size == 0)
		return -EINVAL;
	buf[0] = '\0';
	if (pid <= 0)
		return -ESRCH;
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return negative_errno();
	ssize_t n = read(fd, buf, size - 1);
	if (n < 0) {
		int r = negative_errno();
		buf[0] = '\0';
		return r;
	}
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

const char *pw_proc_comm_cached(pid_t pid)
{
	static _Thread_local pid_t cached_pid;
	static _Thread_local char cached[PW_COMM_MAX + 1];
	if (pid <= 0)
		return NULL;
	if (pid == cached_pid)
		return cached;
	if (pw_proc_comm(pid, cached, sizeof(cached)) < 0 || !cached[0]) {
		cached_pid = 0; /* CACHED no longer holds the name of the pid it held */
		return NULL;
	}
	cached_pid = pid;
	return cached;
}

/* The Tgid of thread TID, from /proc/TID/status (readable for any thread id, listed in
 * /proc or not). */
static int proc_tgid(pid_t tid, pid_t *ret)
{
	char path[40], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return negative_errno();
	ssize_t n = read(fd, buf, sizeof(buf) - 1); /* Tgid is the fourth line */
	if (n < 0)
		return negative_errno();
	buf[n] = '\0';
	const char *t = strstr(buf, "\nTgid:");
	long v = t ? strtol(t + 7, NULL, 10) : 0;
	if (v <= 0)
		return -EIO;
	*ret = (pid_t)v;
	return 0;
}

int pw_proc_who_of(pid_t tid, pw_proc_who *ret)
{
	*ret = (pw_proc_who){0};
	if (tid <= 0)
		return -ESRCH;
	int r = pw_proc_comm(tid, ret->thread, sizeof(ret->thread));
	if (r < 0)
		return r;
	pid_t tgid = tid;
	if (proc_tgid(tid, &tgid) < 0)
		tgid = tid; /* unknown: the thread stands for its process */
	ret->tgid = tgid;
	if (tgid == tid || pw_proc_comm(tgid, ret->program, sizeof(ret->program)) < 0 ||
	    !ret->program[0])
		snprintf(ret->program, sizeof(ret->program), "%s", ret->thread);
	return 0;
}

const pw_proc_who *pw_proc_who_cached(pid_t tid)
{
	static _Thread_local pid_t cached_tid;
	static _Thread_local pw_proc_who cached;
	if (tid <= 0)
		return NULL;
	if (tid == cached_tid)
		return &cached;
	if (pw_proc_who_of(tid, &cached) < 0 || !cached.thread[0]) {
		cached_tid = 0;
		return NULL;
	}
	cached_tid = tid;
	return &cached;
}

const char *pw_proc_who_thread(const pw_proc_who *w, pid_t tid)
{
	if (!w || !w->thread[0])
		return NULL;
	return w->tgid != tid || strcmp(w->thread, w->program) != 0 ? w->thread : NULL;
}

/* Undoes mountinfo's octal escapes (\040 for a space, \011, \012, \134) in place. */
static void unescape(char *s)
{
	char *w = s;

	for (char *r = s; *r;) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 4;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
}

static void entry_done(pw_mountinfo *e)
{
	free(e->root);
	free(e->mountpoint);
	free(e->fstype);
	free(e->source);
	free(e->super_opts);
}

void pw_mountinfo_free(pw_mountinfo *m, size_t n)
{
	PW_FREE_ARRAY(m, n, entry_done);
}

static char *dup_unescaped(char *s)
{
	if (!s)
		return NULL;
	unescape(s);
	return strdup(s);
}

/* Parses LINE (modified): ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE
 * SOURCE SUPER. Returns 1 with *ret filled, 0 for a line that does not parse, -ENOMEM. */
static int parse_line(char *line, pw_mountinfo *ret)
{
	char *save = NULL, *f[6] = {0}, *tok;
	unsigned maj, min;
	size_t i = 0;

	for (tok = strtok_r(line, " \n", &save); tok && i < ELEMENTSOF(f);
	     tok = strtok_r(NULL, " \n", &save))
		f[i++] = tok;
	if (i < ELEMENTSOF(f) || sscanf(f[2], "%u:%u", &maj, &min) != 2)
		return 0;
	while (tok && !streq(tok, "-"))
		tok = strtok_r(NULL, " \n", &save);
	char *fstype = tok ? strtok_r(NULL, " \n", &save) : NULL;
	char *source = fstype ? strtok_r(NULL, " \n", &save) : NULL;
	char *super = source ? strtok_r(NULL, " \n", &save) : NULL;
	if (!fstype)
		return 0;
	*ret = (pw_mountinfo){
	    .maj = maj,
	    .min = min,
	    .root = dup_unescaped(f[3]),
	    .mountpoint = dup_unescaped(f[4]),
	    .fstype = dup_unescaped(fstype),
	    .source = dup_unescaped(source),
	    .super_opts = pw_dup_or_null(super),
	};
	if (!ret->root || !ret->mountpoint || !ret->fstype || (source && !ret->source) ||
	    (super && !ret->super_opts)) {
		entry_done(ret);
		return -ENOMEM;
	}
	return 1;
}

int pw_mountinfo_read(size_t max, pw_mountinfo **ret, size_t *ret_n)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
	_cleanup_free_ char *line = NULL;
	size_t cap = 0, n = 0, alloc = 0;
	pw_mountinfo *m = NULL;

	if (!f)
		return negative_errno();
	while (n < max && getline(&line, &cap, f) > 0) {
		if (n == alloc) {
			size_t c = alloc ? alloc * 2 : 64;
			pw_mountinfo *nm = reallocarray(m, c, sizeof(*m));
			if (!nm) {
				pw_mountinfo_free(m, n);
				return -ENOMEM;
			}
			m = nm;
			alloc = c;
		}
		int r = parse_line(line, &m[n]);
		if (r < 0) {
			pw_mountinfo_free(m, n);
			return r;
		}
		n += (size_t)r;
	}
	*ret = m;
	*ret_n = n;
	return 0;
}
