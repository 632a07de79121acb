/* SPDX-License-Identifier: MIT */
/*
 * The sandbox's own terminal (run.h): when `piworkfs run`'s standard input is a terminal,
 * the command gets a pseudo-terminal and we relay between it and the person's terminal,
 * the way ssh -t, script(1) and docker run -t do.
 *
 * Why: the person's terminal is the one channel the sandbox must never hold. A process
 * that has it can push input into it (TIOCSTI), change its modes, or read keystrokes meant
 * for someone else; with a pty of its own, all of that reaches only the pty. And the relay
 * is ours, so what the person types can be withheld from the command (the consent
 * question of run/ask.c reads the real keyboard, which the sandbox cannot type on).
 *
 * Where the pty lives: in the sandbox's own devpts (bwrap --dev mounts a new instance at
 * /dev/pts). The launcher `piworkfs __run-tty` (run/tty.c), the first program inside,
 * opens it there, sends us the master over a socket and, once we have set the person's
 * terminal settings and size on it, makes the slave its controlling terminal in a session
 * of its own (setsid) and executes the command. So the command's terminal is /dev/pts/N
 * inside (tty(1), ps), no terminal of the host's devpts is reachable, and new ptys inside
 * (script, tmux) come from the same private instance. bwrap itself never sees the person's
 * terminal: each standard descriptor that is one is /dev/null for it (stderr a pipe we
 * relay, for bwrap's own errors); otherwise bwrap would bind it at /dev/console. Job
 * control inside works as on any terminal: Ctrl-C, Ctrl-Z and Ctrl-\ are bytes the pty's
 * line discipline turns into signals for the sandbox's foreground process group; bwrap's
 * processes are not in it.
 *
 * The real terminal is in raw mode while the command runs, and restored on every way out:
 * the normal end (pw_run_pty_finish), exit() (atexit), a fatal signal of our own (handlers
 * that restore and re-raise), and a stop (SIGTSTP: restored before we stop, raw again on
 * SIGCONT). Terminating signals sent to us are not fatal: run/exec.c reads them from a
 * signalfd and passes them on, and the command's end brings us here.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"
#include "output.h"
#include "run.h"

#define DRAIN_MS 2000 /* after the command ended: read what it wrote last, this long at most */

/* ---- restoring the real terminal ------------------------------------------------------- */

/* The state to restore, for the atexit and signal handlers: set before raw mode is entered,
 * cleared after the terminal is restored. */
static struct termios saved_termios;
static volatile sig_atomic_t saved_fd = -1;

static void restore_terminal(void)
{
	int fd = saved_fd;

	if (fd >= 0)
		(void)tcsetattr(fd, TCSADRAIN, &saved_termios); /* async-signal-safe */
}

static void on_fatal(int sig)
{
	restore_terminal();
	/* SA_RESETHAND put the default action back: the signal now does what it would have. */
	raise(sig);
}

static void install_restorers(void)
{
	static const int fatal[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTRAP, SIGSYS};
	static bool installed;
	struct sigaction sa = {.sa_handler = on_fatal, .sa_flags = SA_RESETHAND | SA_NODEFER};

	if (installed)
		return;
	installed = true;
	atexit(restore_terminal);
	for (size_t i = 0; i < ELEMENTSOF(fatal); i++)
		sigaction(fatal[i], &sa, NULL);
}

static int enter_raw(pw_run_pty *p)
{
	struct termios raw = p->saved;

	/* Output processing too: the sandbox's pty does its own (ONLCR there). */
	cfmakeraw(&raw);
	saved_termios = p->saved;
	saved_fd = p->term_in;
	if (tcsetattr(p->term_in, TCSADRAIN, &raw) < 0) {
		saved_fd = -1;
		return -errno;
	}
	p->raw = true;
	/* What was typed ahead arrived in canonical mode, where the line discipline stored the
	 * end-of-file key (Ctrl-D) as a NUL; read now, raw, that NUL would reach the command
	 * (echoed there as ^@). Remember how much of it there is: relay_in gives the key back. */
	int pending = 0;
	p->typed_ahead =
	    ioctl(p->term_in, FIONREAD, &pending) == 0 && pending > 0 ? (size_t)pending : 0;
	return 0;
}

/* The typed-ahead bytes (see enter_raw) as they were typed: the NUL marks of Ctrl-D become
 * the end-of-file key again. (A NUL typed as such before raw mode is marked alike.) */
static void restore_typed_ahead(pw_run_pty *p, char *buf, size_t n)
{
	cc_t eof = p->saved.c_cc[VEOF];

	for (size_t i = 0; i < n && p->typed_ahead > 0; i++, p->typed_ahead--)
		if (buf[i] == '\0' && eof != _POSIX_VDISABLE && (p->saved.c_lflag & ICANON))
			buf[i] = (char)eof;
}

static void leave_raw(pw_run_pty *p)
{
	if (!p->raw)
		return;
	restore_terminal();
	saved_fd = -1;
	p->raw = false;
}

/* ---- set-up ---------------------------------------------------------------------------- */

bool pw_run_pty_wanted(void)
{
	return isatty(STDIN_FILENO);
}

void pw_run_pty_std_fds(char out[4])
{
	size_t n = 0;

	for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; fd++)
		if (fd == STDIN_FILENO || isatty(fd))
			out[n++] = (char)('0' + fd);
	out[n] = '\0';
}

/* The descriptor we draw on: stdout when it is a terminal, else stderr, else stdin (a
 * terminal opened read-write by the shell, as terminals are). */
static int pick_term_out(void)
{
	if (isatty(STDOUT_FILENO))
		return STDOUT_FILENO;
	if (isatty(STDERR_FILENO))
		return STDERR_FILENO;
	return STDIN_FILENO;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int pw_run_pty_open(pw_run_pty *ret)
{
	pw_run_pty p = {.master = -1,
			.sock = -1,
			.sock_child = -1,
			.err_r = -1,
			.err_w = -1,
			.term_in = STDIN_FILENO};
	int sv[2], ep[2], r;

	if (tcgetattr(STDIN_FILENO, &p.saved) < 0)
		return -errno;
	p.term_out = pick_term_out();
	pw_run_pty_std_fds(p.std_fds);
	/* Datagrams: the master comes as one message, an error of the launcher as another. */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	if (pipe2(ep, O_CLOEXEC) < 0) {
		r = -errno;
		close(sv[0]);
		close(sv[1]);
		return r;
	}
	p.sock = sv[0];
	p.sock_child = sv[1];
	p.err_r = ep[0];
	p.err_w = ep[1];
	r = fcntl(p.err_r, F_GETFL);
	if (r >= 0)
		(void)fcntl(p.err_r, F_SETFL, r | O_NONBLOCK);
	*ret = p;
	return 0;
}

void pw_run_pty_child(const pw_run_pty *p)
{
	/* Every standard descriptor that is a terminal gets a stand-in: the person's terminal
	 * never enters the sandbox, and bwrap binds no terminal at /dev/console. The launcher
	 * puts the sandbox's pty there. Redirected ones (a file, a pipe) stay as they are. */
	int null = open("/dev/null", O_RDWR);

	if (null < 0)
		_exit(PW_EXIT_SYSTEM);
	for (const char *d = p->std_fds; *d; d++) {
		int fd = *d - '0';
		if (dup2(fd == STDERR_FILENO ? p->err_w : null, fd) < 0)
			_exit(PW_EXIT_SYSTEM);
	}
	if (null > STDERR_FILENO)
		close(null);
}

int pw_run_pty_start(pw_run_pty *p)
{
	close_fd(&p->sock_child);
	close_fd(&p->err_w);
	install_restorers();
	return 0;
}

/* The launcher's master: the person's settings and size on it, raw mode here, then the
 * byte that lets the command start. */
static void attach_master(pw_run_pty *p, int master)
{
	struct winsize ws;
	char go = 'G';
	int fl = fcntl(master, F_GETFL);

	(void)fcntl(master, F_SETFD, FD_CLOEXEC);
	if (fl < 0 || fcntl(master, F_SETFL, fl | O_NONBLOCK) < 0) {
		pw_err("run", "the sandbox's pty: %s", strerror(errno));
		close(master);
		close_fd(&p->sock); /* the launcher reads EOF and gives up */
		return;
	}
	/* Termios requests on a master act on its slave. */
	(void)tcsetattr(master, TCSANOW, &p->saved);
	if (ioctl(p->term_in, TIOCGWINSZ, &ws) == 0 || ioctl(p->term_out, TIOCGWINSZ, &ws) == 0)
		(void)ioctl(master, TIOCSWINSZ, &ws);
	p->master = master;
	int r = enter_raw(p);
	if (r < 0) /* without raw mode the relay still works */
		pw_err("run", "cannot put the terminal in raw mode: %s", strerror(-r));
	(void)!send(p->sock, &go, 1, MSG_NOSIGNAL);
	close_fd(&p->sock);
}

/* What the launcher sends: the master, or why it could not make one. */
static void receive_master(pw_run_pty *p)
{
	char buf[256], cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf) - 1};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	ssize_t n = recvmsg(p->sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	int fd = -1;

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); n >= 0 && c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
	if (fd >= 0 && isatty(fd)) {
		attach_master(p, fd);
		return;
	}
	if (fd >= 0)
		close(fd);
	if (n > 0) {
		buf[n] = '\0';
		pw_err("run", "%s", buf);
	}
	close_fd(&p->sock); /* EOF: bwrap ended before the launcher ran */
}

/* bwrap's own messages (its stderr stood in for the person's terminal), shown on our
 * stderr: with CR before LF once the terminal is raw. */
static bool relay_bwrap_err(pw_run_pty *p)
{
	char buf[4096];
	ssize_t n = read(p->err_r, buf, sizeof(buf));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return false;
	if (n <= 0) {
		close_fd(&p->err_r);
		return false;
	}
	for (ssize_t i = 0, from = 0; i <= n; i++) {
		if (i < n && !(buf[i] == '\n' && p->raw))
			continue;
		(void)!write(STDERR_FILENO, buf + from, (size_t)(i - from));
		if (i < n)
			(void)!write(STDERR_FILENO, "\r\n", 2);
		from = i + 1;
	}
	/* Whatever bwrap's processes write here passes the consent bar's hook as the pty's
	 * output does: a question open on the bottom rows is drawn again over it. */
	if (p->on_output)
		p->on_output(p, buf, 0);
	return true;
}

/* ---- relaying -------------------------------------------------------------------------- */

/* Writes all of BUF to the person's terminal (a blocking descriptor we do not own, so it
 * is never made non-blocking). A terminal that is gone drops the output. */
static void term_write(pw_run_pty *p, const char *buf, size_t n)
{
	while (n > 0 && !p->out_gone) {
		ssize_t w = write(p->term_out, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			p->out_gone = true;
			return;
		}
		buf += w;
		n -= (size_t)w;
	}
}

void pw_run_pty_write_term(pw_run_pty *p, const char *buf, size_t n)
{
	term_write(p, buf, n);
}

/* Queues keystrokes for the sandbox's terminal. The queue is bounded: while it is full,
 * the person's terminal is not read (poll asks for it only when there is room). */
void pw_run_pty_to_sandbox(pw_run_pty *p, const char *buf, size_t n)
{
	size_t room = sizeof(p->in_buf) - p->in_len;

	if (n > room)
		n = room;
	memcpy(p->in_buf + p->in_len, buf, n);
	p->in_len += n;
}

size_t pw_run_pty_pollfds(const pw_run_pty *p, struct pollfd *pfd)
{
	size_t n = 0;

	if (p->sock >= 0)
		pfd[n++] = (struct pollfd){.fd = p->sock, .events = POLLIN};
	if (p->err_r >= 0)
		pfd[n++] = (struct pollfd){.fd = p->err_r, .events = POLLIN};
	if (p->master < 0)
		return n;
	pfd[n++] =
	    (struct pollfd){.fd = p->master, .events = (short)(POLLIN | (p->in_len ? POLLOUT : 0))};
	if (!p->in_eof && p->in_len < sizeof(p->in_buf))
		pfd[n++] = (struct pollfd){.fd = p->term_in, .events = POLLIN};
	return n;
}

/* Reads what the sandbox wrote and shows it. Returns false once the pty has no writer
 * left (EIO) or failed. */
static bool relay_out(pw_run_pty *p)
{
	char buf[16384];

	for (int rounds = 0; rounds < 16; rounds++) {
		ssize_t n = read(p->master, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return true;
		if (n <= 0)
			return false;
		if (p->on_output)
			p->on_output(p, buf, (size_t)n);
		else
			term_write(p, buf, (size_t)n);
	}
	return true;
}

static void relay_in(pw_run_pty *p)
{
	char buf[1024];
	size_t room = sizeof(p->in_buf) - p->in_len;
	ssize_t n = read(p->term_in, buf, room < sizeof(buf) ? room : sizeof(buf));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		p->in_eof = true; /* the person's terminal is gone (hang-up) */
		return;
	}
	restore_typed_ahead(p, buf, (size_t)n);
	if (p->on_input)
		p->on_input(p, buf, (size_t)n);
	else
		pw_run_pty_to_sandbox(p, buf, (size_t)n);
}

static void flush_in(pw_run_pty *p)
{
	while (p->in_len > 0) {
		ssize_t w = write(p->master, p->in_buf, p->in_len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return;
		if (w <= 0) {
			p->in_len = 0; /* nobody reads the pty any more */
			return;
		}
		memmove(p->in_buf, p->in_buf + w, p->in_len - (size_t)w);
		p->in_len -= (size_t)w;
	}
}

void pw_run_pty_events(pw_run_pty *p, const struct pollfd *pfd, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!pfd[i].revents)
			continue;
		if (pfd[i].fd == p->sock) {
			receive_master(p);
		} else if (pfd[i].fd == p->err_r) {
			(void)relay_bwrap_err(p);
		} else if (pfd[i].fd == p->master) {
			if ((pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) && !relay_out(p))
				p->out_done = true;
			if (pfd[i].revents & POLLOUT)
				flush_in(p);
		} else if (pfd[i].fd == p->term_in) {
			relay_in(p);
			flush_in(p);
		}
	}
}

void pw_run_pty_resize(pw_run_pty *p)
{
	struct winsize ws;

	if (p->master < 0)
		return;
	/* The kernel sends SIGWINCH to the pty's foreground process group when it changes. */
	if (ioctl(p->term_in, TIOCGWINSZ, &ws) == 0 || ioctl(p->term_out, TIOCGWINSZ, &ws) == 0)
		(void)ioctl(p->master, TIOCSWINSZ, &ws);
	if (p->on_resize)
		p->on_resize(p);
}

void pw_run_pty_suspend(pw_run_pty *p)
{
	leave_raw(p);
}

void pw_run_pty_resume(pw_run_pty *p)
{
	if (p->master < 0 || p->raw)
		return;
	/* The person may have changed the terminal's settings or size while we were stopped. */
	if (tcgetattr(p->term_in, &p->saved) == 0)
		(void)enter_raw(p);
	pw_run_pty_resize(p);
}

void pw_run_pty_finish(pw_run_pty *p)
{
	/* bwrap has ended: its last words are in the pipe (a bounded read: a writer could be
	 * left in the sandbox). */
	for (int i = 0; i < 64 && p->err_r >= 0 && relay_bwrap_err(p); i++)
		;
	close_fd(&p->err_r);
	close_fd(&p->sock);
	close_fd(&p->sock_child);
	close_fd(&p->err_w);
	if (p->master < 0)
		return;
	/* The sandbox is gone, but its last output may still be in the pty: read it until no
	 * writer is left (EIO), within DRAIN_MS. */
	for (int waited = 0; !p->out_done && waited < DRAIN_MS; waited += 100) {
		struct pollfd pfd = {.fd = p->master, .events = POLLIN};
		int r = poll(&pfd, 1, 100);
		if (r < 0 && errno != EINTR)
			break;
		if (r > 0 && !relay_out(p))
			break;
	}
	leave_raw(p);
	close(p->master);
	p->master = -1;
}
