/* SPDX-License-Identifier: MIT */
/* The pager (pager.h). */
#include "pager.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

static pid_t pager_pid;

/* Is there an executable NAME in $PATH? */
static bool on_path(const char *name)
{
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/bin:/bin";
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, ":");
		char full[4096];
		if (n &&
		    snprintf(full, sizeof(full), "%.*s/%s", (int)n, p, name) < (int)sizeof(full) &&
		    access(full, X_OK) == 0)
			return true;
		p += n + (p[n] == ':');
	}
	return false;
}

void pw_pager_start(void)
{
	if (!isatty(STDOUT_FILENO))
		return;
	const char *pager = getenv("PAGER");
	if (!pager && !on_path("less"))
		return; /* no pager to fall back on: better printed than lost in a dead pipe */
	if (!pager)
		pager = "less";
	if (!pager[0] || streq(pager, "cat"))
		return;
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) < 0)
		return;
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return;
	}
	if (pid == 0) {
		dup2(fds[0], STDIN_FILENO);
		if (!getenv("LESS"))
			setenv("LESS", "FRX", 1);
		execl("/bin/sh", "sh", "-c", pager, (char *)NULL);
		_exit(127);
	}
	close(fds[0]);
	dup2(fds[1], STDOUT_FILENO);
	close(fds[1]);
	/* the person quitting the pager early must not kill us with SIGPIPE mid-output */
	signal(SIGPIPE, SIG_IGN);
	pager_pid = pid;
}

void pw_pager_end(void)
{
	if (!pager_pid)
		return;
	fflush(stdout);
	close(STDOUT_FILENO);
	while (waitpid(pager_pid, NULL, 0) < 0 && errno == EINTR)
		;
	pager_pid = 0;
}
