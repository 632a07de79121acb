/* SPDX-License-Identifier: MIT */
/*
 * Starting bubblewrap and standing in for the terminal (run.h).
 *
 * The command runs in a new session (bwrap --new-session, so it cannot push input into the
 * caller's terminal with TIOCSTI), and bwrap's outer process runs in a process group of its
 * own: bwrap dies on SIGINT, and with --die-with-parent that would SIGKILL the command. So
 * the terminal's signals reach only us (we are in the caller's foreground job), and we pass
 * them on, the way the terminal would have:
 *
 *   SIGINT, SIGQUIT, SIGHUP, SIGWINCH  to every process of the sandbox (its PID 1, bwrap's
 *                                      reaper, excepted), like a terminal's process group
 *   SIGTERM                            to the command only, like kill(1)
 *   SIGTSTP                            SIGSTOP to every process of the sandbox, then we stop
 *   SIGCONT                            to every process of the sandbox
 *
 * The sandbox's processes are found from its PID 1 (bwrap --info-fd reports its PID here),
 * through /proc/PID/task/TID/children. Before that report arrives, a terminating signal
 * goes to bwrap itself.
 *
 * When our standard input is a terminal, the command gets a pseudo-terminal of its own
 * (run/pty.c) and this loop relays it too. The terminal's keys then reach the command as
 * bytes its own terminal turns into signals, so only signals sent to us are forwarded,
 * and a window resize is set on the pty instead of forwarded.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "output.h"
#include "run.h"
#include "pw_limits.h"

#define CHILD_INFO_FD 3
#define CHILD_HIGH_FD 10 /* above every descriptor the child places */

static const int forwarded[] = {SIGINT,	 SIGQUIT, SIGHUP,  SIGWINCH,
				SIGTERM, SIGTSTP, SIGCONT, SIGCHLD};

static void close_from(int lowfd)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, (unsigned)lowfd, ~0U, 0) == 0)
		return;
#endif
	DIR *d = opendir("/proc/self/fd");
	if (!d) {
		for (int fd = lowfd; fd < 65536; fd++)
			close(fd);
		return;
	}
	int dfd = dirfd(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		int fd = atoi(e->d_name);
		if (e->d_name[0] != '.' && fd >= lowfd && fd != dfd)
			close(fd);
	}
	closedir(d);
}

/* In the child: bwrap with a clean signal state, its own process group, and no file
 * descriptor of ours beyond stdio and the info pipe (an inherited descriptor of the
 * backing directory would be a way around the view). Never returns. */
static _Noreturn void exec_bwrap(char **argv, const sigset_t *oldmask, int info_w,
				 const pw_run_pty *pty)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};

	for (size_t i = 0; i < ELEMENTSOF(forwarded); i++)
		sigaction(forwarded[i], &dfl, NULL);
	sigprocmask(SIG_SETMASK, oldmask, NULL);
	setpgid(0, 0);
	if (pty)
		pw_run_pty_child(pty);
	/* The info pipe at 3, the launcher's socket at 4 (run/tty.c): by way of descriptors
	 * above both, since either may be where the other goes. */
	int info = fcntl(info_w, F_DUPFD, CHILD_HIGH_FD);
	int sock = pty ? fcntl(pty->sock_child, F_DUPFD, CHILD_HIGH_FD) : -1;
	if (info < 0 || (pty && sock < 0) || dup2(info, CHILD_INFO_FD) < 0 ||
	    (pty && dup2(sock, PW_RUN_TTY_FD) < 0))
		_exit(PW_EXIT_SYSTEM);
	close_from((pty ? PW_RUN_TTY_FD : CHILD_INFO_FD) + 1);
	execvp(argv[0], argv);
	fprintf(stderr, "piworkfs: run: cannot run %s: %s (scripts/setup installs bubblewrap)\n",
		argv[0], strerror(errno));
	_exit(PW_EXIT_SYSTEM);
}

/* ---- the sandbox's processes ----------------------------------------------------------- */

/* Appends the children of PID (every thread's) to OUT. */
static void children_of(pid_t pid, pid_t *out, size_t *n)
{
	char path[64];
	DIR *d;
	struct dirent *e;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return;
	while ((e = readdir(d)) && *n < PW_RUN_PROCS_MAX) {
		char cpath[96];
		FILE *f;
		long c;

		if (e->d_name[0] == '.')
			continue;
		snprintf(cpath, sizeof(cpath), "/proc/%d/task/%.16s/children", (int)pid, e->d_name);
		f = fopen(cpath, "re");
		if (!f)
			continue;
		while (*n < PW_RUN_PROCS_MAX && fscanf(f, "%ld", &c) == 1)
			out[(*n)++] = (pid_t)c;
		fclose(f);
	}
	closedir(d);
}

/* Every descendant of INIT, breadth first (so the command, INIT's first child, comes
 * first). Returns how many were written to OUT (PW_RUN_PROCS_MAX entries). */
static size_t sandbox_procs(pid_t init, pid_t *out)
{
	size_t n = 0;

	children_of(init, out, &n);
	for (size_t i = 0; i < n; i++)
		children_of(out[i], out, &n);
	return n;
}

static void signal_sandbox(pid_t init, int sig, bool command_only)
{
	static pid_t procs[PW_RUN_PROCS_MAX];
	size_t n = sandbox_procs(init, procs);

	if (command_only && n > 1)
		n = 1;
	for (size_t i = 0; i < n; i++)
		kill(procs[i], sig);
}

/* ---- waiting ----------------------------------------------------------------------------- */

typedef struct waiter {
	pid_t bwrap;
	pid_t init;	 /* the sandbox's PID 1 as we see it; 0 until bwrap reports it */
	pw_run_pty *pty; /* NULL: no pty */
	int info_fd;	 /* -1 once read */
	char info[PW_RUN_INFO_MAX];
	size_t info_len;
} waiter;

static void read_info(waiter *w)
{
	ssize_t n = read(w->info_fd, w->info + w->info_len, sizeof(w->info) - 1 - w->info_len);

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n > 0)
		w->info_len += (size_t)n;
	w->info[w->info_len] = '\0';
	json_t *j = json_loads(w->info, 0, NULL);
	if (j) {
		json_int_t pid = json_integer_value(json_object_get(j, "child-pid"));
		if (pid > 0)
			w->init = (pid_t)pid;
		json_decref(j);
	}
	if (j || n <= 0 || w->info_len + 1 >= sizeof(w->info)) {
		close(w->info_fd);
		w->info_fd = -1;
	}
}

static void forward(waiter *w, int sig)
{
	if (!w->init) {
		/* The sandbox is not set up yet: stop it from starting. */
		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT)
			kill(w->bwrap, SIGKILL);
		return;
	}
	switch (sig) {
	case SIGTERM:
		signal_sandbox(w->init, sig, true);
		break;
	case SIGWINCH:
		if (w->pty)
			pw_run_pty_resize(w->pty);
		else
			signal_sandbox(w->init, sig, false);
		break;
	case SIGTSTP:
		signal_sandbox(w->init, SIGSTOP, false);
		if (w->pty)
			pw_run_pty_suspend(w->pty);
		kill(getpid(), SIGSTOP); /* like the job the caller's shell thinks we are */
		break;
	case SIGCONT:
		if (w->pty)
			pw_run_pty_resume(w->pty);
		signal_sandbox(w->init, sig, false);
		break;
	default:
		signal_sandbox(w->init, sig, false);
		break;
	}
}

/* Reaps bwrap when it exited. Returns true with *ret_status set. */
static bool reap(waiter *w, int *ret_status)
{
	int status;
	pid_t p = waitpid(w->bwrap, &status, WNOHANG);

	if (p != w->bwrap)
		return false;
	if (WIFEXITED(status))
		*ret_status = WEXITSTATUS(status);
	else if (WIFSIGNALED(status))
		*ret_status = 128 + WTERMSIG(status);
	else
		return false;
	return true;
}

int pw_run_exec(char **argv, int info_fd_read, int info_fd_child)
{
	_cleanup_close_ int sfd = -1;
	sigset_t mask, old;
	waiter w = {.info_fd = info_fd_read};
	pw_run_pty pty = {.master = -1, .sock = -1, .sock_child = -1, .err_r = -1, .err_w = -1};
	int status = PW_EXIT_SYSTEM, r;
	bool asking = false;

	/* The launcher inside waits for the pty's master to be taken when we promised a pty
	 * (run/sandbox.c): without one, the run cannot start, so fail closed. */
	if (pw_run_pty_wanted()) {
		r = pw_run_pty_open(&pty);
		if (r < 0) {
			pw_err("run", "cannot open a pseudo-terminal for the command: %s",
			       strerror(-r));
			close(info_fd_read);
			close(info_fd_child);
			return PW_EXIT_SYSTEM;
		}
		w.pty = &pty;
	}

	sigemptyset(&mask);
	for (size_t i = 0; i < ELEMENTSOF(forwarded); i++)
		sigaddset(&mask, forwarded[i]);
	if (sigprocmask(SIG_BLOCK, &mask, &old) < 0)
		return PW_EXIT_SYSTEM;
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		pw_err("run", "signalfd: %s", strerror(errno));
		sigprocmask(SIG_SETMASK, &old, NULL);
		return PW_EXIT_SYSTEM;
	}
	fflush(NULL);
	w.bwrap = fork();
	if (w.bwrap < 0) {
		pw_err("run", "fork: %s", strerror(errno));
		sigprocmask(SIG_SETMASK, &old, NULL);
		pw_run_pty_finish(&pty);
		return PW_EXIT_SYSTEM;
	}
	if (w.bwrap == 0)
		exec_bwrap(argv, &old, info_fd_child, w.pty);
	close(info_fd_child);
	if (w.pty)
		(void)pw_run_pty_start(w.pty);

	for (;;) {
		struct pollfd pfd[3 + PW_RUN_PTY_POLLFDS] = {
		    {.fd = sfd, .events = POLLIN},
		    {.fd = w.info_fd, .events = POLLIN},
		    {.fd = pw_run_ask_fd(), .events = POLLIN}};
		struct signalfd_siginfo si;
		size_t n = 3, n_pty = 0;

		if (reap(&w, &status))
			break;
		if (w.pty && !w.pty->out_done)
			n_pty = pw_run_pty_pollfds(w.pty, pfd + n);
		if (poll(pfd, n + n_pty, -1) < 0 && errno != EINTR)
			break;
		if (w.info_fd >= 0 && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)))
			read_info(&w);
		if (pfd[2].revents)
			pw_run_ask_events();
		if (n_pty)
			pw_run_pty_events(w.pty, pfd + n, n_pty);
		if (w.pty && w.pty->master >= 0 && !asking) {
			pw_run_ask_attach(w.pty); /* the question needs the relay's hooks */
			asking = true;
		}
		while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			if ((int)si.ssi_signo != SIGCHLD)
				forward(&w, (int)si.ssi_signo);
	}
	if (w.info_fd >= 0)
		close(w.info_fd);
	pw_run_ask_finish();
	pw_run_pty_finish(&pty);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return status;
}
