/* SPDX-License-Identifier: MIT */
/*
 * Where a view's control sockets live (sockets.h): the directory, private to its user, and
 * the socket's name derived from the mountpoint alone, so that the daemon and every client
 * (the CLI, `piworkfs run`) agree on it without asking anyone.
 */
#include "sockets.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "store/db.h"
#include "util.h"

int pw_ctl_default_dir(char **ret)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char *d;

	if (xdg && xdg[0] == '/') {
		if (asprintf(&d, "%s/piworkfs", xdg) < 0)
			return -ENOMEM;
	} else if (geteuid() == 0) {
		d = strdup("/run/piworkfs");
		if (!d)
			return -ENOMEM;
	} else {
		return pw_ctl_fallback_dir(ret);
	}
	*ret = d;
	return 0;
}

int pw_ctl_dir_or_default(const char *dir, char **ret)
{
	char *d;

	if (!dir)
		return pw_ctl_default_dir(ret);
	d = strdup(dir);
	if (!d)
		return -ENOMEM;
	*ret = d;
	return 0;
}

/* A user without XDG_RUNTIME_DIR (su -, cron, ssh without a login session) gets a private
 * directory in /tmp named by uid, as tmux does: fixed, so the daemon and every client agree
 * on it whatever their environment; pw_ctl_private_dir refuses it unless it is a real
 * directory of ours (the sticky /tmp keeps others from replacing it later). */
int pw_ctl_fallback_dir(char **ret)
{
	return asprintf(ret, "/tmp/piworkfs-%u", (unsigned)geteuid()) < 0 ? -ENOMEM : 0;
}

int pw_ctl_socket_path(const char *dir_or_null, const char *mountpoint, char **ret)
{
	_cleanup_free_ char *dir = NULL;
	char base[25];
	const char *b;
	size_t n = 0;
	char *path;
	int r;

	if (!mountpoint || mountpoint[0] != '/')
		return -EINVAL;
	r = pw_ctl_dir_or_default(dir_or_null, &dir);
	if (r < 0)
		return r;
	b = strrchr(mountpoint, '/');
	b = b && b[1] ? b + 1 : "root";
	for (; *b && n < sizeof(base) - 1; b++) {
		char c = *b;
		base[n++] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
				    (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'
				? c
				: '_';
	}
	base[n] = 0;
	if (asprintf(&path, "%s/%s-%016llx.sock", dir, base,
		     (unsigned long long)pw_fnv1a64_str(PW_FNV1A64_INIT, mountpoint)) < 0)
		return -ENOMEM;
	if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		free(path);
		return -ENAMETOOLONG;
	}
	*ret = path;
	return 0;
}

/* Creates DIR and its parents; DIR itself must end up a 0700 directory we own. */
int pw_ctl_private_dir(const char *dir)
{
	struct stat st;
	int r = pw_db_mkdir_p(dir);

	if (r < 0)
		return r;
	if (lstat(dir, &st) < 0)
		return negative_errno();
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return -EPERM;
	if ((st.st_mode & 077) && chmod(dir, 0700) < 0)
		return negative_errno();
	return 0;
}

/* Sets *RET_MSG from FMT and returns ERR (-ENOMEM when the message cannot be made). */
_printf_(3, 4) static int refuse(char **ret_msg, int err, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(ret_msg, fmt, ap);
	va_end(ap);
	if (n < 0) {
		*ret_msg = NULL;
		return -ENOMEM;
	}
	return err;
}

int pw_ctl_agent_socket_check(const char *path, const char *operator_dir, char **ret_msg)
{
	_cleanup_free_ char *dir = NULL;
	const char *slash = path ? strrchr(path, '/') : NULL;
	struct stat a, b, st;

	*ret_msg = NULL;
	if (!path || path[0] != '/' || !slash[1])
		return refuse(ret_msg, -EINVAL, "--agent-socket %s: not an absolute path of a file",
			      path ? path : "");
	if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return refuse(ret_msg, -ENAMETOOLONG,
			      "--agent-socket %s: too long for a UNIX socket (at most %zu bytes)",
			      path, sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
	dir = slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
	if (!dir)
		return -ENOMEM;
	if (stat(dir, &a) == 0 && !S_ISDIR(a.st_mode))
		return refuse(ret_msg, -ENOTDIR, "--agent-socket %s: %s is not a directory", path,
			      dir);
	if (stat(dir, &a) == 0 && operator_dir && stat(operator_dir, &b) == 0 &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		return refuse(ret_msg, -EINVAL,
			      "--agent-socket %s: in the control socket's directory %s; whatever "
			      "shows the agent its socket there shows it the operator socket too: "
			      "give it a directory of its own",
			      path, dir);
	if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
		return refuse(ret_msg, -EEXIST, "--agent-socket %s: exists and is not a socket",
			      path);
	return 0;
}
