/* SPDX-License-Identifier: MIT */
/*
 * PID namespace descriptions (pidns.h). Two sources agree on a process's place: the NSpid
 * line of /proc/PID/status gives its pid at every level from /proc's namespace inward, and
 * /proc/PID/ns/pid with NS_GET_PARENT gives the namespaces themselves. The walk up must end
 * in the daemon's own namespace after exactly as many steps as NSpid has levels, or the
 * description is refused (-EPROTO) rather than guessed.
 */
#include "pidns.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/nsfs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* The pids of the NSpid line of /proc/PID/status, outermost first. Returns their number
 * (at least 1) or -errno. */
static int read_nspid(pid_t pid, pid_t pids[PW_PIDNS_DEPTH_MAX + 1])
{
	char path[64], buf[8192];
	_cleanup_close_ int fd = -1;
	size_t len = 0;
	ssize_t n = 0;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : negative_errno();
	while (len < sizeof(buf) - 1 && (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	if (n < 0 && len == 0)
		return errno == ESRCH ? -ESRCH : negative_errno();
	buf[len] = '\0';

	const char *line = strstr(buf, "\nNSpid:");
	if (!line)
		return -ENOENT;
	line += strlen("\nNSpid:");
	int count = 0;
	for (;;) {
		while (*line == ' ' || *line == '\t')
			line++;
		if (*line == '\n' || *line == '\0')
			break;
		char *end;
		errno = 0;
		long v = strtol(line, &end, 10);
		if (errno || end == line || v <= 0 || v > INT32_MAX)
			return -EPROTO;
		if (count > PW_PIDNS_DEPTH_MAX)
			return -EPROTO;
		pids[count++] = (pid_t)v;
		line = end;
	}
	return count > 0 ? count : -EPROTO;
}

static int ns_ino(int fd, uint64_t *ret)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return negative_errno();
	*ret = st.st_ino;
	return 0;
}

int pw_pidns_describe(pid_t pid, char *buf, size_t size)
{
	pid_t pids[PW_PIDNS_DEPTH_MAX + 1];
	uint64_t inos[PW_PIDNS_DEPTH_MAX + 1];
	char path[64];
	_cleanup_close_ int fd = -1;
	uint64_t own;
	int n, r;

	if (size == 0)
		return -ENOBUFS;
	buf[0] = '\0';
	if (pid <= 0)
		return -ESRCH;
	n = read_nspid(pid, pids);
	if (n < 0)
		return n;
	if (n == 1)
		return 0; /* in the namespace of /proc, the daemon's own */

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : negative_errno();
	for (int lvl = n - 1; lvl >= 1; lvl--) {
		r = ns_ino(fd, &inos[lvl]);
		if (r < 0)
			return r;
		/* EPERM: the parent is not below the daemon's namespace (or is gone). */
		int parent = ioctl(fd, NS_GET_PARENT);
		if (parent < 0)
			return errno == EPERM ? -EPROTO : negative_errno();
		close(fd);
		fd = parent;
	}
	/* Level 0 must be the daemon's own namespace, the one its pids are numbered in. */
	r = ns_ino(fd, &inos[0]);
	if (r < 0)
		return r;
	struct stat self;
	if (stat("/proc/self/ns/pid", &self) < 0)
		return negative_errno();
	own = self.st_ino;
	if (inos[0] != own)
		return -EPROTO;

	size_t used = 0;
	for (int lvl = 1; lvl < n; lvl++) {
		int w = snprintf(buf + used, size - used, "%s%" PRIu64 ":%d", lvl > 1 ? " " : "",
				 inos[lvl], (int)pids[lvl]);
		if (w < 0 || (size_t)w >= size - used) {
			buf[0] = '\0';
			return -ENOBUFS;
		}
		used += (size_t)w;
	}
	return 0;
}

int pw_pidns_parse(const char *desc, pw_pidns_level *levels, size_t max)
{
	const char *p = desc;
	size_t n = 0;

	if (!p)
		return -EINVAL;
	while (*p) {
		char *end;
		if (n > 0) {
			if (*p != ' ')
				return -EINVAL;
			p++;
		}
		if (*p < '0' || *p > '9')
			return -EINVAL;
		errno = 0;
		unsigned long long ino = strtoull(p, &end, 10);
		if (errno || end == p || *end != ':')
			return -EINVAL;
		p = end + 1;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		long pid = strtol(p, &end, 10);
		if (errno || end == p || pid <= 0 || pid > INT32_MAX)
			return -EINVAL;
		p = end;
		if (n >= max)
			return -E2BIG;
		levels[n++] = (pw_pidns_level){.ino = ino, .pid = (pid_t)pid};
	}
	return (int)n;
}

bool pw_pidns_inside(const char *desc, pid_t outer_pid, size_t ns_level, uint64_t ns_ino,
		     pid_t *ret_pid)
{
	pw_pidns_level levels[PW_PIDNS_DEPTH_MAX];
	int n;

	if (ns_level == 0) {
		*ret_pid = outer_pid;
		return true;
	}
	if (!desc)
		return false;
	n = pw_pidns_parse(desc, levels, ELEMENTSOF(levels));
	if (n < 0 || (size_t)n < ns_level)
		return false;
	/* Namespaces form a tree: the same namespace at that level means the same chain
	 * above it. */
	if (levels[ns_level - 1].ino != ns_ino)
		return false;
	*ret_pid = levels[ns_level - 1].pid;
	return true;
}
