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
 * question of run_ask.c reads the real keyboard, which the sandbox cannot type on).
 *
 * How the command gets its controlling terminal: bwrap --new-session gives the sandbox's
 * PID 1 a session without one; the command starts through `setsid --ctty` (run_sandbox.c),
 * which makes it the leader of a session of its own and its stdin, the pty's slave, that
 * session's controlling terminal. Job control inside works as on any terminal: Ctrl-C,
 * Ctrl-Z and Ctrl-\ are bytes the pty's line discipline turns into signals for the
 * sandbox's foreground process group; bwrap's processes are not in it.
 *
 * The real terminal is in raw mode while the command runs, and restored on every way out:
 * the normal end (pw_run_pty_finish), exit() (atexit), a fatal signal of our own (handlers
 * that restore and re-raise), and a stop (SIGTSTP: restored before we stop, raw again on
 * SIGCONT). Terminating signals sent to us are not fatal: run_exec.c reads them from a
 * signalfd and passes them on, and the command's end brings us here.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
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
	static const int fatal[] = { SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTRAP, SIGSYS };
	static bool installed;
	struct sigaction sa = { .sa_handler = on_fatal, .sa_flags = SA_RESETHAND | SA_NODEFER };

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
	return 0;
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
	return isatty(STDIN_FILENO) && access(PW_RUN_SETSID, X_OK) == 0;
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

int pw_run_pty_open(pw_run_pty *ret)
{
	pw_run_pty p = { .master = -1, .slave = -1, .term_in = STDIN_FILENO };
	struct winsize ws;
	char name[128];
	int r;

	if (tcgetattr(STDIN_FILENO, &p.saved) < 0)
		return -errno;
	p.term_out = pick_term_out();
	p.master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (p.master < 0)
		return -errno;
	if (grantpt(p.master) < 0 || unlockpt(p.master) < 0 ||
	    ptsname_r(p.master, name, sizeof(name)) != 0) {
		r = -errno;
		goto fail;
	}
	p.slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (p.slave < 0) {
		r = -errno;
		goto fail;
	}
	/* The sandbox's terminal starts as the person's is set (erase key, UTF-8, ...), at
	 * the same size. */
	(void)tcsetattr(p.slave, TCSANOW, &p.saved);
	if (ioctl(p.term_in, TIOCGWINSZ, &ws) == 0 || ioctl(p.term_out, TIOCGWINSZ, &ws) == 0)
		(void)ioctl(p.master, TIOCSWINSZ, &ws);
	r = fcntl(p.master, F_GETFL);
	if (r < 0 || fcntl(p.master, F_SETFL, r | O_NONBLOCK) < 0) {
		r = -errno;
		goto fail;
	}
	*ret = p;
	return 0;
fail:
	if (p.slave >= 0)
		close(p.slave);
	close(p.master);
	return r;
}

void pw_run_pty_child(const pw_run_pty *p)
{
	/* Every standard descriptor that is a terminal becomes the pty: the person's terminal
	 * never enters the sandbox. Redirected ones (a file, a pipe) stay as they are. */
	for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; fd++)
		if (fd == STDIN_FILENO || isatty(fd))
			if (dup2(p->slave, fd) < 0)
				_exit(PW_EXIT_SYSTEM);
}

int pw_run_pty_start(pw_run_pty *p)
{
	int r;

	close(p->slave);
	p->slave = -1;
	install_restorers();
	r = enter_raw(p);
	if (r < 0)
		pw_err("run", "cannot put the terminal in raw mode: %s", strerror(-r));
	return r;
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

	if (p->master < 0)
		return 0;
	pfd[n++] = (struct pollfd){ .fd = p->master,
				    .events = (short)(POLLIN | (p->in_len ? POLLOUT : 0)) };
	if (!p->in_eof && p->in_len < sizeof(p->in_buf))
		pfd[n++] = (struct pollfd){ .fd = p->term_in, .events = POLLIN };
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
		if (pfd[i].fd == p->master) {
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
	if (p->master < 0)
		return;
	/* The sandbox is gone, but its last output may still be in the pty: read it until no
	 * writer is left (EIO), within DRAIN_MS. */
	for (int waited = 0; !p->out_done && waited < DRAIN_MS; waited += 100) {
		struct pollfd pfd = { .fd = p->master, .events = POLLIN };
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
