/* SPDX-License-Identifier: MIT */
/*
 * `piworkfs __run-podman-signals CIDFILE`: the signal forwarder of `run --podman`
 * (run/podman.c). It runs on the host, started by the supervisor shell in front of Podman,
 * which reports this process's pid to run/exec.c as bwrap reports its PID 1; run/exec.c
 * then signals this process's child, which turns SIGINT, SIGHUP, SIGQUIT and SIGTERM into
 * `podman kill --signal N --cidfile CIDFILE`.
 *
 * Why a program and not a shell trap: the supervisor starts it in the background, and a
 * shell's background job ignores SIGINT and SIGQUIT in a way its traps cannot undo; here
 * the dispositions are reset. Why a child: run/exec.c signals the children of the pid it
 * was told, never that pid (bwrap's reaper). The child dies with this process
 * (PR_SET_PDEATHSIG), which the supervisor kills once Podman is gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "run.h"
#include "util.h"

static const int forwarded_sigs[] = {SIGINT, SIGHUP, SIGQUIT, SIGTERM};

/* podman kill --signal SIG --cidfile CIDFILE, quietly; waits for it. */
static void kill_container(const char *cidfile, int sig)
{
	char num[16];
	pid_t pid;

	snprintf(num, sizeof(num), "%d", sig);
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (null >= 0) {
			dup2(null, STDOUT_FILENO);
			dup2(null, STDERR_FILENO);
		}
		execlp("podman", "podman", "kill", "--signal", num, "--cidfile", cidfile,
		       (char *)NULL);
		_exit(127);
	}
	while (pid > 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

static _Noreturn void forward_loop(const char *cidfile, pid_t parent)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigset_t set;
	int sig;

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(0);
	sigemptyset(&set);
	for (size_t i = 0; i < ELEMENTSOF(forwarded_sigs); i++) {
		sigaction(forwarded_sigs[i], &dfl, NULL); /* undo a background job's SIG_IGN */
		sigaddset(&set, forwarded_sigs[i]);
	}
	for (;;)
		if (sigwait(&set, &sig) == 0)
			kill_container(cidfile, sig);
}

int cmd_run_podman_signals(int argc, char **argv)
{
	sigset_t set;
	pid_t parent = getpid(), child;

	if (argc != 2)
		return PW_EXIT_USAGE;
	/* Blocked before the fork, so a signal that comes at once waits for sigwait. */
	sigemptyset(&set);
	for (size_t i = 0; i < ELEMENTSOF(forwarded_sigs); i++)
		sigaddset(&set, forwarded_sigs[i]);
	sigprocmask(SIG_BLOCK, &set, NULL);
	child = fork();
	if (child < 0)
		return PW_EXIT_SYSTEM;
	if (child == 0)
		forward_loop(argv[1], parent);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
		;
	return PW_EXIT_OK;
}
