/* SPDX-License-Identifier: MIT */
/*
 * A control socket bound safely (server_internal.h): a live one at the path is refused, a
 * stale one replaced, and the path is taken only once the socket listens, so whoever sees
 * it can connect.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "server.h"
#include "server_internal.h"
#include "util.h"

/* Is a server listening at PATH? A stale socket (its daemon was killed) refuses. */
static bool socket_alive(const struct sockaddr_un *sa)
{
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	return connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0;
}

/* A name for a socket to bind before it takes PATH: beside it (link(2) needs the same
 * filesystem), hidden, unique to this process. */
static int temporary_name(const char *path, char *buf, size_t size)
{
	static _Atomic unsigned counter;
	const char *slash = strrchr(path, '/');
	int dir = slash ? (int)(slash - path) : 1;
	int n = snprintf(buf, size, "%.*s/.pw%x-%x", dir, slash ? path : ".", (unsigned)getpid(),
			 counter++);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/*
 * Listens at PATH. The socket is bound under a temporary name, listens, and only then takes
 * PATH (link(2), which fails where PATH exists, so two daemons never share it): whoever
 * sees PATH can connect at once. Bound at PATH directly, a `piworkfs mode` run right after
 * the mount (or a client that waits for the file, as the tests do) could be refused in the
 * moment between bind and listen.
 */
int pw_ctl_listen_at(const char *path, int *ret_fd)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX}, tmp = {.sun_family = AF_UNIX};
	_cleanup_close_ int fd = -1;
	struct stat st;
	mode_t old;
	int r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	/* A temporary name too long for sun_path (a short PATH in a deep directory): bound at
	 * PATH itself then, as before. */
	bool direct = temporary_name(path, tmp.sun_path, sizeof(tmp.sun_path)) < 0;
	if (direct)
		tmp = sa;

	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return -EEXIST; /* never unlink something that is not a socket */
		if (socket_alive(&sa))
			return -EADDRINUSE;
		if (unlink(path) < 0 && errno != ENOENT)
			return negative_errno();
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return negative_errno();
	if (!direct)
		(void)unlink(tmp.sun_path); /* a dead process of this pid's */
	/* Created 0600 from the start: no window where another user could connect. */
	old = umask(0177);
	r = bind(fd, (struct sockaddr *)&tmp, sizeof(tmp));
	umask(old);
	if (r < 0)
		return negative_errno();
	r = listen(fd, 128) < 0 ? negative_errno() : 0;
	if (r == 0 && !direct && link(tmp.sun_path, path) < 0) {
		r = negative_errno();
		/* A filesystem without links for sockets: a rename is atomic too (PATH was free
		 * a moment ago; the loser of a race there would replace the winner's name). */
		if (r != -EEXIST && rename(tmp.sun_path, path) == 0)
			r = 0;
		else if (r == -EEXIST)
			r = -EADDRINUSE;
	}
	if (!direct || r < 0)
		(void)unlink(tmp.sun_path);
	if (r < 0)
		return r;
	*ret_fd = TAKE_FD(fd);
	return 0;
}
