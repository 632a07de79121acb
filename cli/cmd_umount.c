/* SPDX-License-Identifier: MIT */
/*
 * `piworkfs umount`: unmounts a view (fusermount3 -u, or lazily with --lazy), says who keeps
 * it busy when it is, and waits for its daemon to exit (mount.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <pwd.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cli.h"
#include "ctl/run_id.h"
#include "client/ctl_client.h"
#include "ctl/sockets.h"
#include "daemon.h"
#include "fs.h"
#include "modefile.h"
#include "mount.h"
#include "run/run.h"
#include "options.h"
#include "output.h"
#include "path.h"
#include "policy.h"
#include "project.h"

#define UMOUNT_USAGE                                                                               \
	"Usage: piworkfs umount [OPTIONS] MOUNTPOINT\n"                                            \
	"\n"                                                                                       \
	"Unmounts a view and returns once its daemon has exited (plain `fusermount3 -u\n"          \
	"MOUNTPOINT` works too, but returns before the daemon is gone).\n"                         \
	"\n"                                                                                       \
	"Options:\n"                                                                               \
	"  -z, --lazy   detach now, finish when the view is no longer busy\n"                      \
	"      --json   print the result as JSON\n"                                                \
	"  -h, --help   show this help\n"                                                          \
	"\n"                                                                                       \
	"Examples:\n"                                                                              \
	"  piworkfs umount ~/proj.view\n"                                                          \
	"\n"                                                                                       \
	"Exit status: 0 unmounted; 2 usage error; 3 no such MOUNTPOINT; 4 not a piworkfs view;\n"  \
	"5 the unmount failed (busy: try --lazy).\n"

static int umount_done(const char *mp, bool json)
{
	if (json)
		return pw_print_json(json_pack("{s:s,s:b}", "mountpoint", mp, "unmounted", 1)) < 0
			   ? PW_EXIT_SYSTEM
			   : PW_EXIT_OK;
	return PW_EXIT_OK;
}

/*
 * Runs fusermount3 -u [-z] MP with its stderr captured, so that a failure is one message of
 * ours rather than its line and ours. Returns 0, -EBUSY, or -EIO with its message in WHY.
 */
static int run_fusermount_u(const char *mp, bool lazy, char *why, size_t size)
{
	int fds[2];
	size_t len = 0;
	ssize_t n;
	int status;

	why[0] = '\0';
	if (pipe2(fds, O_CLOEXEC) < 0)
		return negative_errno();
	pid_t child = fork();
	if (child < 0) {
		close(fds[0]);
		close(fds[1]);
		return negative_errno();
	}
	if (child == 0) {
		dup2(fds[1], 2);
		if (lazy)
			execlp("fusermount3", "fusermount3", "-u", "-z", mp, (char *)NULL);
		else
			execlp("fusermount3", "fusermount3", "-u", mp, (char *)NULL);
		dprintf(2, "cannot run fusermount3: %s\n", strerror(errno));
		_exit(127);
	}
	close(fds[1]);
	while (len + 1 < size && (n = read(fds[0], why + len, size - len - 1)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		len += (size_t)n;
	}
	close(fds[0]);
	why[len] = '\0';
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	why[strcspn(why, "\n")] = '\0';
	/* "fusermount3: failed to unmount /x: Device or resource busy": keep the reason. */
	const char *colon = strrchr(why, ':');
	if (strstr(why, strerror(EBUSY)))
		return -EBUSY;
	if (colon && startswith(why, "fusermount3: "))
		memmove(why, colon + 2, strlen(colon + 2) + 1);
	return -EIO;
}

/* Does the link /proc/PID/NAME point at MP or under it? */
static bool link_under(const char *pid, const char *name, const char *mp)
{
	char path[PATH_MAX], target[PATH_MAX];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%s/%s", pid, name);
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return false;
	target[n] = '\0';
	return pw_path_beneath(target, mp) >= 0;
}

/* Does process PID use something under MP: its working directory, root or an open file? */
static bool process_holds(const char *pid, const char *mp)
{
	char fddir[300];
	bool held = link_under(pid, "cwd", mp) || link_under(pid, "root", mp);

	snprintf(fddir, sizeof(fddir), "/proc/%s/fd", pid);
	DIR *d = held ? NULL : opendir(fddir);
	struct dirent *e;
	while (d && !held && (e = readdir(d))) {
		char name[300];
		if (e->d_name[0] == '.')
			continue;
		snprintf(name, sizeof(name), "fd/%s", e->d_name);
		held = link_under(pid, name, mp);
	}
	if (d)
		closedir(d);
	return held;
}

/* "bash (pid 12), vim (pid 34)": the processes we can see that hold MP (as fuser -m
 * would name them), at most as many as fit in BUF. */
static void list_holders(const char *mp, char *buf, size_t size)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	size_t len = 0, shown = 0, more = 0;
	pid_t self = getpid();

	buf[0] = '\0';
	while (d && (e = readdir(d))) {
		char comm[64] = "?", path[300];
		if (e->d_name[0] < '1' || e->d_name[0] > '9' || atoi(e->d_name) == self ||
		    !process_holds(e->d_name, mp))
			continue;
		if (shown >= 6 || len + 80 >= size) {
			more++;
			continue;
		}
		snprintf(path, sizeof(path), "/proc/%s/comm", e->d_name);
		FILE *f = fopen(path, "re");
		if (f) {
			if (fgets(comm, sizeof(comm), f))
				comm[strcspn(comm, "\n")] = '\0';
			fclose(f);
		}
		len += (size_t)snprintf(buf + len, size - len, "%s%s (pid %s)", shown ? ", " : "",
					comm, e->d_name);
		shown++;
	}
	if (d)
		closedir(d);
	if (more && len + 32 < size)
		snprintf(buf + len, size - len, " and %zu more", more);
}

int cmd_umount(int argc, char **argv)
{
	_cleanup_opts_ pw_opts po = {0};
	bool lazy = false, json = false;
	const pw_opt_bind binds[] = {{'z', .flag = &lazy}, {PW_OPT_JSON, .flag = &json}, {0}};
	int r = pw_opts_parse(&po, "umount", argc, argv,
			      &(pw_opts_use){.usage = UMOUNT_USAGE, .binds = binds});

	if (r != PW_EXIT_GO_ON)
		return r;
	if (po.n_operands != 1) {
		pw_err("umount", "expected one MOUNTPOINT, got %d (see 'piworkfs umount --help')",
		       po.n_operands);
		return PW_EXIT_USAGE;
	}
	const char *arg = po.operands[0];
	struct stat st;
	if (stat(arg, &st) < 0 && errno == ENOTCONN) {
		r = pw_mount_detach_stale(arg);
		if (r < 0) {
			pw_err("umount", "%s: %s", arg, strerror(-r));
			return PW_EXIT_SYSTEM;
		}
		return umount_done(arg, json);
	}
	char real[PATH_MAX];
	if (!realpath(arg, real)) {
		pw_err("umount", "%s: %s", arg, strerror(errno));
		return PW_EXIT_CONFIG;
	}
	_cleanup_free_ char *live = pw_mount_live_view_at(real);
	if (!live) {
		pw_err("umount", "%s is not a piworkfs view", real);
		return PW_EXIT_NO_VIEW;
	}
	/* The daemon, to end and wait for once the view is unmounted (held by a pidfd from
	 * now on, so that a pid used again later is never signalled). */
	_cleanup_free_ char *sock = NULL;
	pid_t pid = pw_ctl_view_socket(real, -1, &sock) == 0 ? pw_mount_daemon_pid(sock) : 0;
	_cleanup_close_ int pidfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
	char why[512];
	r = run_fusermount_u(real, lazy, why, sizeof(why));
	if (r == -EBUSY) {
		char holders[512];
		list_holders(real, holders, sizeof(holders));
		pw_err("umount", "%s is busy%s%s: close %s, or detach it now with --lazy", real,
		       holders[0] ? ": in use by " : "", holders,
		       holders[0] ? "them" : "what uses it");
		return PW_EXIT_SYSTEM;
	}
	if (r < 0) {
		pw_err("umount", "cannot unmount %s: %s", real, why[0] ? why : strerror(-r));
		return PW_EXIT_SYSTEM;
	}
	/*
	 * Return once the daemon is gone, with its control socket: a mount at the same place
	 * right after must not find the old one still there. The unmount ends the view in this
	 * mount namespace only: a copy of the mount in another one (a sandbox, `unshare -m`, a
	 * service with private mounts, each made while the view was mounted) keeps the
	 * kernel's connection, and the daemon serving it, until that namespace ends, which
	 * may be never. Unmounted without --lazy, the view had no user here, so the daemon is
	 * told to end now (SIGTERM, its way out): the copies then answer ENOTCONN,
	 * as a view whose daemon is gone does. A lazy unmount ends the daemon only when the
	 * view is no longer busy: no signal and no wait then.
	 */
	if (pidfd >= 0 && !lazy)
		(void)syscall(SYS_pidfd_send_signal, pidfd, SIGTERM, NULL, 0);
	if (pidfd >= 0 && !lazy && pw_mount_wait_pidfd(pidfd, DAEMON_EXIT_MS) == -ETIMEDOUT) {
		pw_err("umount", "unmounted %s, but its daemon (pid %d) has not exited after %d s",
		       real, (int)pid, DAEMON_EXIT_MS / 1000);
		return PW_EXIT_SYSTEM;
	}
	return umount_done(real, json);
}
