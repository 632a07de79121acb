/* SPDX-License-Identifier: MIT */
/*
 * `piworkfs mount --fuse-fd N PROJECT MOUNTPOINT`: the checks of a FUSE connection that
 * another process opened and mounted, before the daemon serves it. This is the step the
 * pattern of FUSE CSI drivers needs (docs/DEPLOY.md): a privileged component opens
 * /dev/fuse, mounts it (mount(2) with fd=N), and hands the descriptor to an unprivileged
 * server over a Unix socket. The daemon then serves "/dev/fd/N" (libfuse takes that
 * mountpoint to mean "this descriptor is mounted already") and never mounts or unmounts.
 *
 * Nothing here enters MOUNTPOINT: until the daemon answers the kernel's INIT, every access
 * to the mount waits for it, so even a stat(2) of the mountpoint would hang the command.
 * What is known of the mount comes from /proc/self/mountinfo, of the connection from the
 * descriptor itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cli.h"
#include "run.h"
#include "output.h"
#include "path.h"
#include "procfs.h"

/* /dev/fuse: the misc device 10, 229 (Documentation/admin-guide/devices.txt). */
#define FUSE_DEV_MAJOR 10
#define FUSE_DEV_MINOR 229

int pw_mount_fd_parse(const char *arg, int *ret)
{
	char *end = NULL;

	errno = 0;
	long v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < 0 || v > INT_MAX) {
		pw_err("mount", "--fuse-fd: not a file descriptor number: '%s'", arg);
		return PW_EXIT_USAGE;
	}
	*ret = (int)v;
	return PW_EXIT_OK;
}

/* What descriptor FD is, for an error: its /proc/self/fd link ("/tmp/x", "socket:[12]"). */
static void describe_fd(int fd, char *buf, size_t size)
{
	char link[64];

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, buf, size - 1);
	buf[n > 0 ? (size_t)n : 0] = '\0';
	if (n <= 0)
		snprintf(buf, size, "?");
}

/*
 * Is FD a /dev/fuse descriptor whose connection is mounted and not served yet? A mount
 * queues the INIT request at once, so such a descriptor polls readable; one that was never
 * mounted, or whose connection was aborted or unmounted, polls POLLERR (fuse_dev_poll);
 * one that polls neither has had its INIT read, by another server.
 */
int pw_mount_fd_check(int fd)
{
	struct stat st;
	char what[PATH_MAX];
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0) {
		pw_err("mount",
		       "--fuse-fd %d: not an open descriptor (give piworkfs the descriptor "
		       "of the mounted /dev/fuse: inherited, or received over a Unix socket)",
		       fd);
		return PW_EXIT_CONFIG;
	}
	describe_fd(fd, what, sizeof(what));
	if (fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode) || major(st.st_rdev) != FUSE_DEV_MAJOR ||
	    minor(st.st_rdev) != FUSE_DEV_MINOR) {
		pw_err("mount", "--fuse-fd %d is not /dev/fuse (it is %s)", fd, what);
		return PW_EXIT_CONFIG;
	}
	if ((fl & O_ACCMODE) != O_RDWR) {
		pw_err("mount", "--fuse-fd %d: /dev/fuse is not open for reading and writing", fd);
		return PW_EXIT_CONFIG;
	}
	struct pollfd p = {.fd = fd, .events = POLLIN};
	if (poll(&p, 1, 0) < 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL))) {
		pw_err("mount",
		       "--fuse-fd %d: this /dev/fuse is not mounted (or its connection "
		       "was aborted): mount it first, with mount(2) type fuse.piworkfs and "
		       "options fd=N,rootmode=40000,user_id=UID,group_id=GID",
		       fd);
		return PW_EXIT_CONFIG;
	}
	if (!(p.revents & POLLIN)) {
		pw_err("mount",
		       "--fuse-fd %d: its connection is served already (the kernel's INIT "
		       "was read by another process); a connection has one server, from its "
		       "start",
		       fd);
		return PW_EXIT_CONFIG;
	}
	return PW_EXIT_OK;
}

/* ARG made absolute without entering its last component (the mount): the real path of
 * its directory, then its name. Returns an exit status. */
static int resolve_outside(const char *arg, char **ret)
{
	_cleanup_free_ char *copy = strdup(arg);
	if (!copy)
		return PW_EXIT_SYSTEM;
	size_t len = strlen(copy);
	while (len > 1 && copy[len - 1] == '/')
		copy[--len] = '\0';
	char *slash = strrchr(copy, '/');
	const char *dir = slash ? (slash == copy ? "/" : copy) : ".";
	const char *name = slash ? slash + 1 : copy;
	if (slash)
		*slash = '\0';
	if (!*name || streq(name, ".") || streq(name, "..")) {
		pw_err("mount", "mountpoint %s: name the mounted directory itself", arg);
		return PW_EXIT_CONFIG;
	}
	char real[PATH_MAX];
	if (!realpath(dir, real)) {
		pw_err("mount", "mountpoint %s: %s", arg, strerror(errno));
		return PW_EXIT_CONFIG;
	}
	if (asprintf(ret, "%s/%s", streq(real, "/") ? "" : real, name) < 0) {
		*ret = NULL;
		return PW_EXIT_SYSTEM;
	}
	return PW_EXIT_OK;
}

/* The facts of the mount at MP from mountinfo (the topmost one there), into RET. Returns
 * an exit status. */
static int read_mount(const char *mp, const char *project, pw_mount_fd_facts *ret)
{
	pw_mountinfo *m = NULL;
	size_t n = 0;
	const pw_mountinfo *at = NULL;
	int r = pw_mountinfo_read(SIZE_MAX, &m, &n);

	if (r < 0) {
		pw_err("mount", "cannot read /proc/self/mountinfo: %s", strerror(-r));
		return PW_EXIT_SYSTEM;
	}
	for (size_t i = 0; i < n; i++)
		if (streq(m[i].mountpoint, mp))
			at = &m[i];
	if (!at) {
		pw_err("mount",
		       "mountpoint %s is not mounted: with --fuse-fd, name where the "
		       "descriptor is mounted",
		       mp);
		r = PW_EXIT_CONFIG;
	} else if (!streq(at->fstype, "fuse.piworkfs")) {
		/* status, umount and the commands run inside the view find views by that type. */
		pw_err("mount",
		       "mountpoint %s is a %s mount, not fuse.piworkfs: mount the "
		       "descriptor with type fuse.piworkfs",
		       mp, at->fstype);
		r = PW_EXIT_CONFIG;
	} else if (!at->source || !streq(at->source, project)) {
		/* The source names the project to every command that finds the view. */
		pw_err("mount",
		       "the mount at %s names %s as its source, not the project %s: give "
		       "mount(2) the project's path as its source",
		       mp, at->source ? at->source : "nothing", project);
		r = PW_EXIT_CONFIG;
	} else {
		ret->allow_other = pw_opts_has(at->super_opts, "allow_other");
		ret->default_permissions = pw_opts_has(at->super_opts, "default_permissions");
		r = PW_EXIT_OK;
	}
	pw_mountinfo_free(m, n);
	return r;
}

int pw_mount_fd_mountpoint(const char *arg, const char *project, pw_mount_fd_facts *ret)
{
	int r = resolve_outside(arg, &ret->mountpoint);
	if (r)
		return r;
	if (pw_path_beneath(ret->mountpoint, project) >= 0 ||
	    pw_path_beneath(project, ret->mountpoint) >= 0) {
		pw_err("mount", "mountpoint %s and the project %s are inside one another",
		       ret->mountpoint, project);
		return PW_EXIT_CONFIG;
	}
	r = read_mount(ret->mountpoint, project, ret);
	if (r)
		return r;
	/* Under allow_other the view relies on the kernel's permission check (fsmain.c,
	 * kernel_checks; docs/SECURITY.md): a mount without it would let every user open
	 * everyone's FIFOs and sockets. */
	if (ret->allow_other && !ret->default_permissions) {
		pw_err("mount",
		       "the mount at %s has allow_other without default_permissions: mount "
		       "it with both (the view needs the kernel's permission check when "
		       "several users share it)",
		       ret->mountpoint);
		return PW_EXIT_CONFIG;
	}
	return PW_EXIT_OK;
}

int pw_mount_fd_check_options(const char *fuse_opts)
{
	_cleanup_free_ char *copy = fuse_opts ? strdup(fuse_opts) : NULL;
	char *save = NULL;

	if (fuse_opts && !copy)
		return PW_EXIT_SYSTEM;
	for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (streq(tok, "io_uring") || streq(tok, "no_io_uring"))
			continue;
		pw_err("mount",
		       "-o %s is an option of the mount, and with --fuse-fd the mount is "
		       "made already: give it to mount(2) where the descriptor is mounted",
		       tok);
		return PW_EXIT_USAGE;
	}
	return PW_EXIT_OK;
}

int pw_mount_fd_take(int fd)
{
	/* Above the standard streams (a detached daemon puts /dev/null on them), and closed
	 * at exec: a program the view runs (bash workers) must not hold the connection, which
	 * would keep it alive and let it answer the kernel in the view's place. */
	int own = fcntl(fd, F_DUPFD_CLOEXEC, 3);

	if (own < 0) {
		int r = -errno;
		pw_err("mount", "--fuse-fd %d: %s", fd, strerror(-r));
		return r;
	}
	if (fd > 2)
		close(fd);
	return own;
}
