/* SPDX-License-Identifier: MIT */
/*
 * `piworkfs __run-tty FD STDFDS COMMAND...`: the first program inside the sandbox of
 * `piworkfs run` when the run has a terminal (run.h, run/pty.c). It gives COMMAND a
 * pseudo-terminal of the sandbox's own devpts and hands its master to `run` outside.
 *
 * Why inside: bwrap --dev mounts a devpts instance of the sandbox's own at /dev/pts. A pty
 * allocated there is named /dev/pts/N inside (tty(1), ttyname(3), ps), is the only terminal
 * the sandbox can name, and new ptys (script, tmux, ssh -t) come from the same instance.
 * A pty opened outside would live in the host's devpts, which the sandbox must not see (it
 * holds every terminal of the host): bwrap then bound it at /dev/console, the only name it
 * could give it.
 *
 * The steps, each before COMMAND runs, so that COMMAND never holds FD or the master:
 *   1. open /dev/ptmx (the sandbox's) and the slave;
 *   2. send the master over FD (a socket to `run`, SCM_RIGHTS), then wait for one byte:
 *      `run` has set the person's terminal settings and size on it and relays it;
 *   3. setsid(), the slave as controlling terminal (TIOCSCTTY), the slave on each standard
 *      descriptor named in STDFDS ("0", "01", "012": those that were the person's terminal);
 *   4. exec COMMAND.
 * A failure is told to `run` over FD as text (our stderr may not reach the person yet).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"
#include "run.h"
#include "util.h"

/* Tells `run` why the terminal could not be set up, then exits. */
static _Noreturn _printf_(2, 3) void fail(int sock, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n > 0)
		(void)!send(sock, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1,
			    MSG_NOSIGNAL);
	_exit(PW_EXIT_SYSTEM);
}

static int send_fd(int sock, int fd)
{
	char byte = 'M', cbuf[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &mh, MSG_NOSIGNAL) == 1 ? 0 : -errno;
}

int cmd_run_tty(int argc, char **argv)
{
	char name[128], ack;
	int sock, master, slave;
	ssize_t n;

	if (argc < 4 || argv[1][0] < '0' || argv[1][0] > '9')
		return PW_EXIT_USAGE;
	sock = atoi(argv[1]);
	if (fcntl(sock, F_SETFD, FD_CLOEXEC) < 0)
		return PW_EXIT_USAGE;
	master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0)
		fail(sock, "cannot open the sandbox's /dev/ptmx: %s", strerror(errno));
	if (grantpt(master) < 0 || unlockpt(master) < 0 ||
	    ptsname_r(master, name, sizeof(name)) != 0)
		fail(sock, "cannot set up the sandbox's pty: %s", strerror(errno));
	slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (slave < 0)
		fail(sock, "cannot open %s: %s", name, strerror(errno));
	if (send_fd(sock, master) < 0)
		_exit(PW_EXIT_SYSTEM); /* `run` is gone */
	close(master);
	do
		n = read(sock, &ack, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1)
		_exit(PW_EXIT_SYSTEM); /* `run` is gone, or gave up on the terminal */
	if (setsid() < 0)
		fail(sock, "setsid: %s", strerror(errno));
	if (ioctl(slave, TIOCSCTTY, 0) < 0)
		fail(sock, "cannot make %s the controlling terminal: %s", name, strerror(errno));
	for (const char *d = argv[2]; *d; d++)
		if (*d >= '0' && *d <= '2' && dup2(slave, *d - '0') < 0)
			fail(sock, "dup2: %s", strerror(errno));
	if (slave > STDERR_FILENO)
		close(slave);
	close(sock);
	execvp(argv[3], argv + 3);
	fprintf(stderr, "piworkfs: run: cannot run %s: %s\n", argv[3], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
