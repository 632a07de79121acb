/* SPDX-License-Identifier: MIT */
/*
 * `piworkfs run`: the sandboxed launcher (docs/SECURITY.md says what it contains and what it
 * does not). Between cmd_run.c (options, the sequence) and its parts:
 *
 *   run/view.c     the view the sandbox works through: the run's own, in the run's mode;
 *                  the agent socket; unmount at the end
 *   run/sandbox.c  the bubblewrap command line: the host, the view over every path of the
 *                  project, covered daemon directories, the agent socket
 *   run/exec.c     start bubblewrap, forward signals, wait, report the exit status
 *   run/pty.c      the sandbox's own pseudo-terminal, relayed to the person's terminal
 *   run/ask.c      the run's own agent socket, and the person's answer when the agent asks
 *                  to switch (a question on the real terminal)
 *   run/podman.c   `run --podman IMAGE`: the podman command line that runs the command in
 *                  a container instead of the bubblewrap sandbox
 *   run/mount_fd.c `mount --fuse-fd N`: the checks of a FUSE connection another process
 *                  (a container engine, a CSI driver) opened and mounted for the view
 *   run/node.c     a Node.js program (Pi 1.6.0) whose package.json wants a newer Node than
 *                  the one that would run it: what to say if it fails
 *
 * These are program code: they print their own one-line errors ("piworkfs: run: ...") and
 * return an exit status (cli.h) or -errno where the comment says so.
 */
#pragma once

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <termios.h>

/* The launcher's commands that run's own processes call (main.c's dispatch table): the
 * pty relay's helper inside the sandbox and podman's signal forwarder. */
int cmd_run_tty(int argc, char **argv);
int cmd_run_podman_signals(int argc, char **argv);

/* The view a run works through. Strings are malloc'd; release with pw_run_view_done(). */
typedef struct pw_run_view {
	char *project;	    /* real path of the backing project directory */
	char *mountpoint;   /* real path of the view's mountpoint */
	char *socket;	    /* the view's operator socket */
	char *agent_socket; /* its agent socket (restricted: may only tighten) */
	char *state_db;	    /* where its daemon keeps the state database (status), or NULL */
	char *private_dir;  /* the 0700 directory holding our mountpoint, DIR/run-ID */
	char *run_id;	    /* ID (run_id.h) */
	char *mode;	    /* the mode the run starts in */
	bool mounted;	    /* mounted (until unmounted at the end) */
	int daemon_fd;	    /* pidfd of its daemon, else -1 */
} pw_run_view;

/*
 * Mounts the run's own view of PROJECT (a real path) in a private directory under the
 * socket directory, DIR/run-ID/view (run_id.h), in MODE; NULL: the mode of the project's
 * live bare view (with several, the one containing CWD, else the first that answers),
 * else the project's last mode. The view's modes are the run's alone: no other view's
 * mode changes with them, and none is remembered as the project's last mode. Then opens
 * the view's agent socket. With a lane (LANE, N_LANE > 0 globs of `run --only`) the view is
 * mounted with it (`mount --only`). Returns an exit status; on PW_EXIT_OK *ret is filled.
 */
int pw_run_view_open(const char *project, const char *cwd, const char *mode,
		     const char *const *lane, size_t n_lane, pw_run_view *ret);

/* Unmounts the view (retrying while it is busy, then lazily) and removes the private
 * directory. Returns 0, or -errno
 * when the view could not be unmounted. */
int pw_run_view_close(pw_run_view *v);
void pw_run_view_done(pw_run_view *v);

/* If PATH (a real path) lies in a live piworkfs view, the same place in its project:
 * returns a malloc'd path, or NULL (not in a view, or no memory). When RET_ROOT is not
 * NULL and a path is returned, *ret_root is the view's project (malloc'd). */
char *pw_run_unview_path(const char *path, char **ret_root);

typedef struct pw_run_sandbox_opts {
	const pw_run_view *view;
	const char *cwd; /* real path of the caller's working directory */
	bool ro_host;	 /* bind the host read-only */
	char **shares;	 /* --share PATH..., writable even with ro_host */
	size_t n_shares;
	int info_fd;		  /* bwrap --info-fd */
	char **command;		  /* COMMAND ARGS..., NULL-terminated */
	const char *mode_dirs[2]; /* global and bundled mode dirs: read-only inside (or NULL) */
} pw_run_sandbox_opts;

/* A NULL-terminated argument vector (bwrap ...). */
typedef struct pw_run_argv {
	char **v;
	size_t n, cap;
} pw_run_argv;

void pw_run_argv_done(pw_run_argv *a);
/* Appends a copy of S (and keeps the vector NULL-terminated). Returns 0 or -ENOMEM. */
int pw_run_argv_push(pw_run_argv *a, const char *s);
/* Appends copies of the NULL-terminated WORDS. Returns 0 or -ENOMEM. */
int pw_run_argv_push_all(pw_run_argv *a, const char *const *words);
/*
 * The end of a builder's run of pushes, R its outcome: on 0 moves A to *RET (A is left empty)
 * and returns 0; on -errno frees A, says "out of memory" for -ENOMEM (a builder reports any
 * other error where it arises) and returns R.
 */
int pw_run_argv_finish(pw_run_argv *a, int r, pw_run_argv *ret);

/*
 * Builds the bwrap command line. Returns 0, or -errno with a one-line reason printed.
 */
int pw_run_sandbox_argv(const pw_run_sandbox_opts *o, pw_run_argv *ret);

/* `run --podman IMAGE` (run/podman.c): the command in a Podman container over the view. */
typedef struct pw_run_podman_opts {
	const pw_run_view *view;
	const char *cwd;   /* real path of the caller's working directory */
	const char *image; /* IMAGE, as podman names it */
	char **args;	   /* --podman-arg ARG...: podman run options, after ours */
	size_t n_args;
	char **command; /* COMMAND ARGS..., NULL-terminated */
} pw_run_podman_opts;

/*
 * Builds the command line that runs the command in a container: on the host a shell that
 * reports its pid on descriptor 3 (as bwrap's --info-fd; the launcher `__run-tty` before it
 * when the run has a terminal), then `podman run ... IMAGE COMMAND...`. pw_run_exec runs it
 * as it runs bwrap. Returns 0, or -errno with a one-line reason printed.
 */
int pw_run_podman_argv(const pw_run_podman_opts *o, pw_run_argv *ret);
/* The forwarder of signals to the container, on the host (run/podman_signals.c). */
#define PW_RUN_PODMAN_SIGNALS_COMMAND "__run-podman-signals"

/*
 * Runs ARGV (bwrap; argv[0] searched in PATH) in its own process group with no file
 * descriptors beyond 0, 1, 2 and INFO_FD_CHILD (the write end of a pipe handed to bwrap as
 * --info-fd), forwards SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGTSTP and SIGCONT to
 * the sandboxed command and waits. Returns the command's exit status (bwrap passes it on;
 * a command killed by signal N: 128 + N), or PW_EXIT_SYSTEM when bwrap could not start.
 */
int pw_run_exec(char **argv, int info_fd_read, int info_fd_child);

/*
 * COMMAND (as the sandbox runs it: argv[0] found on PATH) is a Node.js program whose
 * package.json declares `engines.node` ">=VERSION", and the node its first line names is
 * older: a malloc'd sentence saying so and what to install, which `run` prints should the
 * command fail (Pi 1.6.0 on Debian 12's Node 20 dies with an unexplained SyntaxError).
 * NULL otherwise, or when anything of it cannot be told (run/node.c).
 */
char *pw_run_node_too_old(char *const *command);

/*
 * The sandbox's pseudo-terminal (run/pty.c). When `run`'s standard input is a terminal,
 * the command gets a pty of its own, allocated inside the sandbox's devpts by the launcher
 * `piworkfs __run-tty` (run/tty.c), which sends us its master; we relay between it and the
 * person's terminal, which is in raw mode meanwhile and never enters the sandbox. The hooks
 * let a caller see the person's keystrokes and the command's output before they are
 * relayed (NULL: relay).
 */
typedef struct pw_run_pty pw_run_pty;
struct pw_run_pty {
	int master;	      /* ours, non-blocking; -1: not received (yet) */
	int sock;	      /* ours: the launcher sends the master here; -1 once done */
	int sock_child;	      /* the launcher's end, until bwrap has it */
	int err_r, err_w;     /* bwrap's stderr while it is the person's terminal's stand-in */
	char std_fds[4];      /* the standard descriptors that are the person's terminal: "012" */
	int term_in;	      /* the person's terminal: read (stdin) */
	int term_out;	      /* ... and drawn on (stdout, else stderr, else stdin) */
	struct termios saved; /* its settings before raw mode */
	bool raw, in_eof, out_gone, out_done;
	size_t typed_ahead; /* bytes typed before raw mode, not yet read (run/pty.c) */
	char in_buf[4096];  /* keystrokes waiting for the sandbox's terminal */
	size_t in_len;
	void (*on_input)(pw_run_pty *p, const char *buf, size_t n);
	void (*on_output)(pw_run_pty *p, const char *buf, size_t n);
	void (*on_resize)(pw_run_pty *p);
	void *userdata;
};

/* The launcher inside the sandbox (run/tty.c) and the descriptor of its socket there. */
#define PW_RUN_TTY_COMMAND "__run-tty"
#define PW_RUN_TTY_FD 4
/* Whether the run gets a pty: its standard input is a terminal. */
bool pw_run_pty_wanted(void);
/* The standard descriptors that are a terminal, as the launcher takes them ("0", "01", ...;
 * stdin always when a pty is wanted). */
void pw_run_pty_std_fds(char out[4]);
/* Prepares the pty: the person's terminal's settings, the launcher's socket, bwrap's
 * stand-in stderr. Returns 0 or -errno. */
int pw_run_pty_open(pw_run_pty *ret);
/* In the child before exec: /dev/null or the stand-in pipe on each standard descriptor that
 * is the person's terminal (bwrap must not see it: it would bind it into the sandbox), and
 * the launcher's socket at PW_RUN_TTY_FD. Exits on failure. */
void pw_run_pty_child(const pw_run_pty *p);
/* In the parent after fork: closes the child's ends, installs the restorers (atexit, fatal
 * signals). Raw mode starts when the master arrives. Returns 0 or -errno (printed). */
int pw_run_pty_start(pw_run_pty *p);
/* The descriptors to poll (at most 4 written to PFD), and handling their events. */
#define PW_RUN_PTY_POLLFDS 4
size_t pw_run_pty_pollfds(const pw_run_pty *p, struct pollfd *pfd);
void pw_run_pty_events(pw_run_pty *p, const struct pollfd *pfd, size_t n);
/* For hooks: pass keystrokes on to the sandbox (bounded queue), draw on the terminal. */
void pw_run_pty_to_sandbox(pw_run_pty *p, const char *buf, size_t n);
void pw_run_pty_write_term(pw_run_pty *p, const char *buf, size_t n);
/* SIGWINCH: the person's terminal's size to the pty (the kernel signals the sandbox). */
void pw_run_pty_resize(pw_run_pty *p);
/* SIGTSTP / SIGCONT: the person's terminal back to its settings while we are stopped. */
void pw_run_pty_suspend(pw_run_pty *p);
void pw_run_pty_resume(pw_run_pty *p);
/* The command ended: shows its last output, restores the terminal, closes the pty. */
void pw_run_pty_finish(pw_run_pty *p);

/*
 * The run's operator connection (run/ask.c; one per process). pw_run_ask_open connects to
 * the view's operator SOCKET, opens an agent socket owned by this connection (gone when it
 * closes) and, when the run will have a terminal, subscribes to the sandbox's requests to
 * switch. Returns 0 with *ret_agent_socket (malloc'd), or -errno / -EREMOTE (printed).
 * pw_run_ask_attach hooks the question into the relay; pw_run_ask_fd is the descriptor to
 * poll (-1: none) and pw_run_ask_events handles what it brings.
 */
int pw_run_ask_open(const char *socket, char **ret_agent_socket);
void pw_run_ask_attach(pw_run_pty *pty);
int pw_run_ask_fd(void);
void pw_run_ask_events(void);
void pw_run_ask_finish(void);
void pw_run_ask_close(void);

/* ---- run/mount_fd.c: `piworkfs mount --fuse-fd N` -------------------------------------- */
/* Each returns an exit status (PW_EXIT_*), after a one-line error. */

/* N of --fuse-fd N: a non-negative number (PW_EXIT_USAGE otherwise). */
int pw_mount_fd_parse(const char *arg, int *ret);

/* FD is open, is /dev/fuse for reading and writing, is mounted, and its INIT is unread. */
int pw_mount_fd_check(int fd);

/* The mount at MOUNTPOINT, as mountinfo shows it. */
typedef struct pw_mount_fd_facts {
	char *mountpoint;		       /* absolute (malloc'd, the caller frees) */
	bool allow_other, default_permissions; /* the mount's own options */
} pw_mount_fd_facts;

/* ARG is a fuse.piworkfs mount of PROJECT (its source), found without entering it, apart
 * from the project, and not allow_other without default_permissions. */
int pw_mount_fd_mountpoint(const char *arg, const char *project, pw_mount_fd_facts *ret);

/* -o's FUSE options with --fuse-fd: only io_uring and no_io_uring (the rest are the
 * mount's, made already). */
int pw_mount_fd_check_options(const char *fuse_opts);

/* FD moved above the standard streams, close-on-exec; the original is closed unless it is
 * one of them. Returns the new descriptor, or -errno after an error message. */
int pw_mount_fd_take(int fd);
