/* SPDX-License-Identifier: MIT */
/*
 * `piworkfs run --podman IMAGE`: the command runs in a Podman container instead of the
 * bubblewrap sandbox (run.h, docs/SECURITY.md "In a container"). The view, its agent
 * socket, the consent question and the terminal relay are the run's as always
 * (run/view.c, run/ask.c, run/pty.c); only the command line differs, built here.
 *
 * What reaches the container, and why nothing else of the project does:
 *
 *   the image's own root file system
 *       unlike bwrap, which shows the host around the project, a container starts from
 *       IMAGE: the backing directory, the state database, the operator sockets and the
 *       mode directories are not in it, so there is nothing to cover.
 *   --mount type=bind,src=VIEW,dst=PROJECT
 *       the project's own absolute path shows the view, so the agent's paths agree with
 *       the person's. The bind is made by the OCI runtime as the caller (root for rootful
 *       Podman): the view's FUSE mount admits its mounting user, and that is who binds.
 *   --mount type=bind,src=AGENT,dst=AGENT,ro and PIWORKFS_SOCKET=AGENT
 *       the run's own agent socket, which may only tighten the mode; the only control
 *       socket inside.
 *   --network none (unless a --podman-arg names a network)
 *       no network unless asked: the agent has what the image and the view give it.
 *   --cap-drop ALL, --security-opt no-new-privileges
 *       as under bwrap, the command holds no capability: it can neither unmount the view
 *       nor mount anything, and setuid programs in the image do not give any back.
 *   --user UID:GID (rootful) or --userns keep-id (rootless)
 *       the command writes through the view as the person, as under bwrap.
 *   --init
 *       Podman's catatonit is PID 1 and the command runs below it, as under bwrap's
 *       reaper: a PID 1 ignores every signal it has no handler for.
 *   -i, and -t when the run has a terminal
 *       Podman relays the command's standard input; with a terminal, Podman's own
 *       terminal is the pseudo-terminal our launcher `piworkfs __run-tty` opens on the
 *       host (run/tty.c) and then executes Podman on, which we relay (run/pty.c): the
 *       person's terminal reaches neither Podman nor the container, and the consent
 *       question reads it as under bwrap. Podman relays that pty to the container's own
 *       (conmon allocates it in the container's devpts).
 *
 * Between us and Podman a shell (SUPERVISOR) starts `piworkfs __run-podman-signals`
 * (run/podman_signals.c) and reports its pid on the info descriptor, the way bwrap's
 * --info-fd reports its PID 1, so run/exec.c signals that one's child: a forwarder that
 * turns SIGINT, SIGHUP, SIGQUIT and SIGTERM into `podman kill --signal SIG` of the
 * container (named by its --cidfile). Podman itself is the supervisor's child, never signalled by
 * run/exec.c: its own --sig-proxy is not enough, since Podman 4.3 installs it only after the
 * container started (libpod's StartAndAttach returns first; and never with a terminal), and a
 * signal in that window would end Podman's client without reaching the command. When Podman is
 * gone, however it ended, the supervisor removes the container (`podman rm --force`), so
 * the command never outlives the run and its view, and exits with Podman's status.
 */
#include <errno.h>
#include <linux/limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "ctl/sockets.h"
#include "output.h"
#include "path.h"
#include "run.h"
#include "util.h"

/* Pushes A, X, B, Y, C as one word (X and Y are paths; NULL pieces are empty). */
static int push_joined(pw_run_argv *a, const char *p1, const char *x, const char *p2, const char *y,
		       const char *p3)
{
	_cleanup_free_ char *s = NULL;

	if (asprintf(&s, "%s%s%s%s%s", p1, x, p2 ? p2 : "", y ? y : "", p3 ? p3 : "") < 0)
		return -ENOMEM;
	return pw_run_argv_push(a, s);
}

/* --mount takes comma-separated fields: a path with a comma cannot be said there. */
static int check_mount_path(const char *what, const char *path)
{
	if (!strchr(path, ','))
		return 0;
	pw_err("run", "--podman: the %s %s has a comma, which podman --mount cannot take", what,
	       path);
	return -EINVAL;
}

/* Where the container starts: the caller's place in the project, else the project's root
 * (the view is bound at the project's own path). */
static char *container_cwd(const pw_run_view *v, const char *cwd)
{
	_cleanup_free_ char *unviewed = pw_run_unview_path(cwd, NULL);
	const char *c = unviewed ? unviewed : cwd;

	return strdup(pw_path_beneath(c, v->project) >= 0 ? c : v->project);
}

/* Did the person choose a network with --podman-arg? */
static bool network_chosen(const pw_run_podman_opts *o)
{
	for (size_t i = 0; i < o->n_args; i++)
		if (strncmp(o->args[i], "--network", 9) == 0 ||
		    strncmp(o->args[i], "--net=", 6) == 0 || streq(o->args[i], "--net"))
			return true;
	return false;
}

/* The supervisor (see above): $1 the cidfile, $2 this program, the rest Podman's command
 * line. It reports the forwarder's pid before Podman starts. */
#define SUPERVISOR                                                                                 \
	"cid=$1; exe=$2; shift 2\n"                                                                \
	"\"$exe\" " PW_RUN_PODMAN_SIGNALS_COMMAND " \"$cid\" </dev/null >/dev/null 2>&1 3>&- &\n"  \
	"spid=$!\n"                                                                                \
	"printf '{\"child-pid\": %d}' $spid >&3; exec 3>&-\n"                                      \
	"\"$@\"\n"                                                                                 \
	"status=$?\n"                                                                              \
	"kill $spid 2>/dev/null\n"                                                                 \
	"podman rm --force --ignore --time 0 --cidfile \"$cid\" >/dev/null 2>&1\n"                 \
	"rm -f \"$cid\"\n"                                                                         \
	"exit $status"

/* Where Podman writes the container's id: a file of this run in our private socket
 * directory (0700), which must not exist yet. Returns it malloc'd, or NULL (printed). */
static char *cidfile_path(void)
{
	_cleanup_free_ char *dir = NULL;
	char *path = NULL;

	if (pw_ctl_default_dir(&dir) < 0 || pw_ctl_private_dir(dir) < 0) {
		pw_err("run", "--podman: no private directory for the container's id file (set "
			      "XDG_RUNTIME_DIR)");
		return NULL;
	}
	if (asprintf(&path, "%s/podman-%d.cid", dir, (int)getpid()) < 0) {
		pw_err("run", "out of memory");
		return NULL;
	}
	if (unlink(path) < 0 && errno != ENOENT) {
		pw_err("run", "--podman: cannot remove the stale %s: %s", path, strerror(errno));
		free(path);
		return NULL;
	}
	return path;
}

/* This very program (for the launcher and the forwarder, which run on the host). */
static int self_exe(char exe[PATH_MAX])
{
	ssize_t len = readlink("/proc/self/exe", exe, PATH_MAX - 1);

	if (len <= 0) {
		pw_err("run", "cannot find this program (/proc/self/exe): %s", strerror(errno));
		return -EIO;
	}
	exe[len] = '\0';
	return 0;
}

/* `piworkfs __run-tty FD STDFDS`: on the host, before Podman (see above). The shell in
 * front keeps FD open too, harmlessly: the master comes over it once, and the shell ends
 * with Podman. */
static int push_tty_launcher(pw_run_argv *a, const char *exe)
{
	char fd[16], std_fds[4];
	int r;

	snprintf(fd, sizeof(fd), "%d", PW_RUN_TTY_FD);
	pw_run_pty_std_fds(std_fds);
	r = pw_run_argv_push(a, exe);
	if (r == 0)
		r = pw_run_argv_push(a, PW_RUN_TTY_COMMAND);
	if (r == 0)
		r = pw_run_argv_push(a, fd);
	return r < 0 ? r : pw_run_argv_push(a, std_fds);
}

/* The launcher goes after the shell, as its child: it starts a session of its own
 * (setsid), which the leader of a process group (run/exec.c makes the shell one) may not. */
static int push_prefix(pw_run_argv *a, bool tty, const char *cidfile)
{
	char exe[PATH_MAX];
	int r = self_exe(exe);

	if (r == 0)
		r = pw_run_argv_push(a, "/bin/sh");
	if (r == 0)
		r = pw_run_argv_push(a, "-c");
	if (r == 0)
		r = pw_run_argv_push(a, SUPERVISOR);
	if (r == 0)
		r = pw_run_argv_push(a, "piworkfs-run-podman");
	if (r == 0)
		r = pw_run_argv_push(a, cidfile);
	if (r == 0)
		r = pw_run_argv_push(a, exe);
	if (r == 0 && tty)
		r = push_tty_launcher(a, exe);
	return r;
}

/* Who the command is inside: the person, as under bwrap. */
static int push_user(pw_run_argv *a)
{
	char ids[64];

	if (geteuid() != 0)
		/* rootless: the person's uid maps to itself */
		return pw_run_argv_push(a, "--userns=keep-id");
	snprintf(ids, sizeof(ids), "--user=%u:%u", (unsigned)getuid(), (unsigned)getgid());
	return pw_run_argv_push(a, ids);
}

int pw_run_podman_argv(const pw_run_podman_opts *o, pw_run_argv *ret)
{
	const pw_run_view *v = o->view;
	_cleanup_free_ char *cwd = container_cwd(v, o->cwd), *cidfile = NULL;
	bool tty = pw_run_pty_wanted();
	pw_run_argv a = {0};
	int r;

	if (!cwd)
		return -ENOMEM;
	r = check_mount_path("view", v->mountpoint);
	if (r == 0)
		r = check_mount_path("project", v->project);
	if (r == 0)
		r = check_mount_path("agent socket", v->agent_socket);
	if (r < 0)
		return r;
	cidfile = cidfile_path();
	if (!cidfile)
		return -EINVAL; /* printed */
	r = push_prefix(&a, tty, cidfile);
	/* --pull=never: an image that is not here is an error, not a fetch */
	if (r == 0)
		r = pw_run_argv_push_all(
		    &a, (const char *const[]){"podman", "run", "--rm", "--pull=never", NULL});
	if (r == 0)
		r = push_joined(&a, "--cidfile=", cidfile, NULL, NULL, NULL);
	/* --sig-proxy=false: the forwarder does it (see above). --init: an init as PID 1
	 * (Podman's catatonit), the command below it as under bwrap: a PID 1 without a handler
	 * ignores SIGINT and SIGTERM, so it would not end on them. */
	if (r == 0)
		r = pw_run_argv_push_all(
		    &a, (const char *const[]){"--sig-proxy=false", "--init", "-i", NULL});
	if (r == 0 && tty)
		r = pw_run_argv_push(&a, "-t");
	if (r == 0 && !network_chosen(o))
		r = pw_run_argv_push(&a, "--network=none");
	if (r == 0)
		r = pw_run_argv_push_all(
		    &a, (const char *const[]){"--cap-drop=ALL", "--security-opt=no-new-privileges",
					      NULL});
	if (r == 0)
		r = push_user(&a);
	if (r == 0)
		r = push_joined(&a, "--mount=type=bind,src=", v->mountpoint, ",dst=", v->project,
				NULL);
	if (r == 0)
		r = push_joined(&a, "--mount=type=bind,src=", v->agent_socket,
				",dst=", v->agent_socket, ",ro");
	if (r == 0)
		r = push_joined(&a, "--env=PIWORKFS_SOCKET=", v->agent_socket, NULL, NULL, NULL);
	if (r == 0)
		r = push_joined(&a, "--workdir=", cwd, NULL, NULL, NULL);
	for (size_t i = 0; r == 0 && i < o->n_args; i++)
		r = pw_run_argv_push(&a, o->args[i]);
	if (r == 0)
		r = pw_run_argv_push_all(&a, (const char *const[]){"--", o->image, NULL});
	if (r == 0)
		r = pw_run_argv_push_all(&a, (const char *const *)o->command);
	return pw_run_argv_finish(&a, r, ret);
}
