/* SPDX-License-Identifier: MIT */
/*
 * `piworkfs run`: the sandboxed launcher (docs/SECURITY.md says what it contains and what it
 * does not). Between cmd_run.c (options, the sequence) and its parts:
 *
 *   run_view.c     the view the sandbox works through: reuse the live one of the project or
 *                  mount a private one; the agent socket; unmount at the end
 *   run_sandbox.c  the bubblewrap command line: the host, the view over every path of the
 *                  project, covered daemon directories, the agent socket
 *   run_exec.c     start bubblewrap, forward signals, wait, report the exit status
 *
 * These are program code: they print their own one-line errors ("piworkfs: run: ...") and
 * return an exit status (cli.h) or -errno where the comment says so.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The view a run works through. Strings are malloc'd; release with pw_run_view_done(). */
typedef struct pw_run_view {
	char *project;      /* real path of the backing project directory */
	char *mountpoint;   /* real path of the view's mountpoint */
	char *socket;       /* the view's operator socket */
	char *agent_socket; /* its agent socket (restricted: may only tighten) */
	char *state_db;     /* where its daemon keeps the state database (status), or NULL */
	char *private_dir;  /* the 0700 directory holding our mountpoint; NULL when reused */
	bool mounted;       /* we mounted it: unmount when the command is done */
	int daemon_fd;      /* pidfd of its daemon when we mounted it, else -1 */
} pw_run_view;

/*
 * Finds the live view of PROJECT (a real path) or mounts one in a private directory under
 * the socket directory, in MODE (NULL: a reused view keeps its mode; a new one restores the
 * project's last). On a reused view, MODE is switched with the operator's full authority.
 * Then opens the view's agent socket. Returns an exit status; on PW_EXIT_OK *ret is filled.
 */
int pw_run_view_open(const char *project, const char *mode, pw_run_view *ret);

/* Unmounts the view when we mounted it (retrying while it is busy, then lazily) and removes
 * the private directory. Returns 0, or -errno when the view could not be unmounted. */
int pw_run_view_close(pw_run_view *v);
void pw_run_view_done(pw_run_view *v);

/* If PATH (a real path) lies in a live piworkfs view, the same place in its project:
 * returns a malloc'd path, or NULL (not in a view, or no memory). When RET_ROOT is not
 * NULL and a path is returned, *ret_root is the view's project (malloc'd). */
char *pw_run_unview_path(const char *path, char **ret_root);

typedef struct pw_run_sandbox_opts {
	const pw_run_view *view;
	const char *cwd;     /* real path of the caller's working directory */
	bool ro_host;        /* bind the host read-only */
	char **shares;       /* --share PATH..., writable even with ro_host */
	size_t n_shares;
	int info_fd;         /* bwrap --info-fd */
	char **command;      /* COMMAND ARGS..., NULL-terminated */
	const char *mode_dirs[2]; /* global and bundled mode dirs: read-only inside (or NULL) */
} pw_run_sandbox_opts;

/* A NULL-terminated argument vector (bwrap ...). */
typedef struct pw_run_argv {
	char **v;
	size_t n, cap;
} pw_run_argv;

void pw_run_argv_done(pw_run_argv *a);

/*
 * Builds the bwrap command line. Returns 0, or -errno with a one-line reason printed.
 */
int pw_run_sandbox_argv(const pw_run_sandbox_opts *o, pw_run_argv *ret);

/*
 * Runs ARGV (bwrap; argv[0] searched in PATH) in its own process group with no file
 * descriptors beyond 0, 1, 2 and INFO_FD_CHILD (the write end of a pipe handed to bwrap as
 * --info-fd), forwards SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGTSTP and SIGCONT to
 * the sandboxed command and waits. Returns the command's exit status (bwrap passes it on;
 * a command killed by signal N: 128 + N), or PW_EXIT_SYSTEM when bwrap could not start.
 */
int pw_run_exec(char **argv, int info_fd_read, int info_fd_child);
