/* SPDX-License-Identifier: MIT */
/*
 * The daemon of one view: state database, audit writer, FUSE session, control plane and
 * control socket, wired together and torn down in order. `piworkfs mount` forks, and the
 * child runs pw_daemon_run(), which reports on READY_FD when the view answers ("ok\n") or
 * why it could not start ("error: ...\n"), then serves until unmounted or signalled.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

typedef struct pw_daemon_opts {
	const char *project;	/* real path */
	const char *mountpoint; /* absolute path */
	const char *mode;	/* NULL: last mode of the project, else plan */
	const char *run_id;	/* `mount --run ID`: a run's own view (pw_view_opts.run_id) */
	pid_t run_pid;		/* the run's pid, with run_id */
	bool foreground;	/* log to stderr rather than syslog */
	bool debug;
	bool allow_other;
	bool no_watch;
	double cache_timeout;
	const char *fuse_opts;
	/* Serve descriptor FUSE_FD, a /dev/fuse connection that another process opened and
	 * mounted at MOUNTPOINT (`mount --fuse-fd`): the daemon never mounts nor unmounts it. */
	bool use_fuse_fd;
	int fuse_fd;
	const char *bundled_dir, *global_dir;
	const char *socket_dir; /* NULL: default */
	/* `mount --agent-socket PATH`: an agent socket of the view's own at PATH, for an agent
	 * in another container (ctl/agent.h, pw_ctl_agent_open_at); NULL: none. */
	const char *agent_socket;
	const char *state_db; /* NULL: default */
	unsigned audit_queue; /* 0: default */
	bool no_audit;	      /* record no audit events (benchmarks compare with it) */
	bool log_allowed;     /* also record allowed mutations */
	bool no_originals;    /* keep no originals before changes (undo impossible) */
	unsigned long long originals_max_file;	/* size cap of a kept original; 0: default */
	long long originals_keep_s;		/* retention by age, seconds; 0: default */
	unsigned long long originals_max_total; /* retention by size, bytes; 0: default */
	unsigned long long originals_min_free;	/* free-space floor, bytes; 0: default */
	const char *const *lane; /* --only globs: the view's lane (policy.h); n_lane 0: none */
	size_t n_lane;
} pw_daemon_opts;

int pw_daemon_run(const pw_daemon_opts *o, int ready_fd);

/*
 * Checks, before anything is mounted, that the control socket can be made: its directory
 * (o->socket_dir or the default) exists or is created as a private directory of ours, and
 * the socket's path fits; and that o->agent_socket, if any, is a usable path outside that
 * directory (pw_ctl_agent_socket_check). Returns 0, or -errno with *ret_msg (malloc'd, may be NULL)
 * saying what is wrong and what to do. `piworkfs mount` calls it in the foreground too.
 */
int pw_daemon_check_socket(const pw_daemon_opts *o, char **ret_msg);
