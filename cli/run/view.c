/* SPDX-License-Identifier: MIT */
/*
 * The view `piworkfs run` works through (run.h): always one of the run's own, so that its
 * mode is the run's alone (docs/internals/fs.md, "A view per run"). `piworkfs mount --run
 * ID` (this same program, so the daemon is the one the person would start) mounts it at
 * DIR/run-ID/view, where DIR is the control socket directory: a 0700 directory the sandbox
 * never sees, so the mountpoint is not a second way in. It starts in the run's mode (the
 * --mode given, else the mode of the project's live bare view around the caller's
 * directory, else of any, else the project's last mode) and no switch of it is
 * remembered as the project's last mode. The agent socket comes from its daemon
 * (`agent.open`, fs/ctl/agent.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <poll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "client/ctl_client.h"
#include "ctl/sockets.h"
#include "output.h"
#include "path.h"
#include "proto.h"
#include "run.h"
#include "ctl/run_id.h"

#define CTL_TIMEOUT_MS 10000
#define UMOUNT_TRIES 50 /* 50 x 100 ms while the view is busy, then a lazy unmount */
#define DAEMON_EXIT_MS 10000

char *pw_run_unview_path(const char *path, char **ret_root)
{
	pw_ctl_mount *m = NULL;
	size_t n = 0, best;
	char *out = NULL;

	if (pw_ctl_list_mounts(&m, &n) < 0)
		return NULL;
	best = pw_ctl_mount_around(m, n, path, true);
	if (best != SIZE_MAX) {
		const char *rest =
		    streq(m[best].mountpoint, "/") ? path : path + strlen(m[best].mountpoint);
		if (asprintf(&out, "%s%s", m[best].source, rest) < 0)
			out = NULL;
		if (out && ret_root) {
			*ret_root = strdup(m[best].source);
			if (!*ret_root) {
				free(out);
				out = NULL;
			}
		}
	}
	pw_ctl_mounts_free(m, n);
	return out;
}

/* Calls METHOD on SOCKET. Returns 0 with *ret_result, or an exit status after printing the
 * daemon's refusal or the transport error. */
static int call(const char *socket, const char *method, json_t *params, json_t **ret_result)
{
	_cleanup_free_ char *msg = NULL;
	pw_ctl_conn *c = NULL;
	int r, code = 0;

	r = pw_ctl_connect(socket, CTL_TIMEOUT_MS, &c);
	if (r < 0) {
		json_decref(params);
		pw_err("run", "cannot reach the view's daemon at %s: %s", socket, strerror(-r));
		return PW_EXIT_NO_VIEW;
	}
	r = pw_ctl_call(c, method, params, ret_result, &code, &msg);
	pw_ctl_close(c);
	if (r == -EREMOTE) {
		pw_err("run", "%s: %s", method, msg ? msg : "refused by the daemon");
		if (code == PW_RPC_METHOD_NOT_FOUND)
			return PW_EXIT_SYSTEM; /* a daemon built without agent.open */
		return code == PW_RPC_UNKNOWN_MODE ? PW_EXIT_CONFIG : PW_EXIT_DENIED;
	}
	if (r < 0) {
		pw_err("run", "%s: %s", method, strerror(-r));
		return PW_EXIT_SYSTEM;
	}
	return PW_EXIT_OK;
}

/* The live bare view of PROJECT whose daemon answers (another run's own view is none):
 * the one containing CWD, else the first. Returns 0, or -ENOENT. */
static int find_live(const char *project, const char *cwd, char **ret_mountpoint, char **ret_socket)
{
	pw_ctl_mount *m = NULL;
	size_t n = 0;
	int r;

	r = pw_ctl_list_mounts(&m, &n);
	if (r < 0)
		return r;
	r = -ENOENT;
	for (int pass = 0; pass < 2 && r == -ENOENT; pass++)
		for (size_t i = 0; i < n && r == -ENOENT; i++) {
			_cleanup_free_ char *sock = NULL;
			pw_ctl_conn *c = NULL;

			_cleanup_free_ char *run = pw_ctl_run_of_mountpoint(m[i].mountpoint);

			if (!streq_ptr(m[i].source, project) || run)
				continue;
			if (pass == 0 && !(cwd && pw_path_beneath(cwd, m[i].mountpoint) >= 0))
				continue;
			if (pw_ctl_socket_path(NULL, m[i].mountpoint, &sock) < 0)
				continue;
			if (pw_ctl_connect(sock, CTL_TIMEOUT_MS, &c) < 0)
				continue; /* a stale mount, or one with another --socket-dir */
			pw_ctl_close(c);
			*ret_mountpoint = strdup(m[i].mountpoint);
			*ret_socket = TAKE_PTR(sock);
			if (!*ret_mountpoint) {
				free(*ret_socket);
				r = -ENOMEM;
			} else {
				r = 0;
			}
		}
	pw_ctl_mounts_free(m, n);
	return r;
}

/* Runs this program with ARGV, its stdout captured into OUT (SIZE bytes, NUL-terminated),
 * stderr kept. Returns its exit status, or PW_EXIT_SYSTEM when it could not run. */
static int run_self(char *const *argv, char *out, size_t size)
{
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	size_t got = 0;
	int status, pipefd[2];
	pid_t pid;

	if (len <= 0) {
		pw_err("run", "cannot find this program (/proc/self/exe): %s", strerror(errno));
		return PW_EXIT_SYSTEM;
	}
	exe[len] = '\0';
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return PW_EXIT_SYSTEM;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		pw_err("run", "fork: %s", strerror(errno));
		close(pipefd[0]);
		close(pipefd[1]);
		return PW_EXIT_SYSTEM;
	}
	if (pid == 0) {
		dup2(pipefd[1], STDOUT_FILENO);
		execv(exe, argv);
		_exit(127);
	}
	close(pipefd[1]);
	/* The daemon it forks gets /dev/null as stdout, so EOF comes when mount returns. */
	for (;;) {
		ssize_t n = read(pipefd[0], out + got, size - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got + 1 == size)
			break;
	}
	out[got] = '\0';
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return PW_EXIT_SYSTEM;
	if (WIFEXITED(status))
		return WEXITSTATUS(status) == 127 ? PW_EXIT_SYSTEM : WEXITSTATUS(status);
	return PW_EXIT_SYSTEM;
}

/* Mounts PROJECT at a fresh DIR/run-ID/view in MODE (NULL: the project's last mode), as
 * run ID's own view, with STATE_DB (NULL: the default) and the lane LANE (N_LANE globs). */
static int mount_private(const char *project, const char *mode, const char *state_db,
			 const char *const *lane, size_t n_lane, pw_run_view *v)
{
	_cleanup_free_ char *dir = NULL, *tmpl = NULL, *mp = NULL;
	char *argv[13 + 2 * PW_LANE_MAX], out[4096];
	json_t *j;
	size_t k = 0;
	int r;

	r = pw_ctl_default_dir(&dir);
	if (r < 0) {
		pw_err("run", "no directory for control sockets: set XDG_RUNTIME_DIR");
		return PW_EXIT_CONFIG;
	}
	r = pw_ctl_private_dir(dir);
	if (r < 0) {
		pw_err("run", "cannot create %s: %s", dir, strerror(-r));
		return PW_EXIT_SYSTEM;
	}
	if (asprintf(&tmpl, "%s/run-XXXXXX", dir) < 0)
		return PW_EXIT_SYSTEM;
	if (!mkdtemp(tmpl)) {
		pw_err("run", "cannot create a private directory in %s: %s", dir, strerror(errno));
		return PW_EXIT_SYSTEM;
	}
	v->private_dir = TAKE_PTR(tmpl);
	v->run_id = strdup(strrchr(v->private_dir, '/') + strlen("/run-"));
	if (!v->run_id || asprintf(&mp, "%s/view", v->private_dir) < 0)
		return PW_EXIT_SYSTEM;
	if (mkdir(mp, 0700) < 0) {
		pw_err("run", "cannot create %s: %s", mp, strerror(errno));
		return PW_EXIT_SYSTEM;
	}

	argv[k++] = (char *)"piworkfs";
	argv[k++] = (char *)"mount";
	argv[k++] = (char *)"--json";
	for (size_t i = 0; i < n_lane && i < PW_LANE_MAX; i++) {
		argv[k++] = (char *)"--only";
		argv[k++] = (char *)lane[i];
	}
	argv[k++] = (char *)"--run";
	argv[k++] = v->run_id;
	if (mode) {
		argv[k++] = (char *)"--mode";
		argv[k++] = (char *)mode;
	}
	if (state_db) {
		argv[k++] = (char *)"--state-db";
		argv[k++] = (char *)state_db;
	}
	argv[k++] = (char *)"--";
	argv[k++] = (char *)project;
	argv[k++] = mp;
	argv[k] = NULL;
	r = run_self(argv, out, sizeof(out));
	if (r != PW_EXIT_OK) {
		rmdir(mp);
		return r; /* `piworkfs mount` said why */
	}
	v->mounted = true;
	/* Watch the daemon, so that closing waits until it removed its sockets. */
	j = json_loads(out, 0, NULL);
	if (json_integer_value(json_object_get(j, "pid")) > 0)
		v->daemon_fd = (int)syscall(
		    SYS_pidfd_open, (pid_t)json_integer_value(json_object_get(j, "pid")), 0);
	json_decref(j);
	v->mountpoint = TAKE_PTR(mp);
	r = pw_ctl_socket_path(NULL, v->mountpoint, &v->socket);
	if (r < 0) {
		pw_err("run", "the view's control socket: %s", strerror(-r));
		return PW_EXIT_SYSTEM;
	}
	return PW_EXIT_OK;
}

static int open_agent_socket(pw_run_view *v)
{
	/* A socket of this run's own, so that the agent's requests to switch reach this run
	 * and no other (run/ask.c). */
	int r = pw_run_ask_open(v->socket, &v->agent_socket);

	if (r == -EREMOTE)
		return PW_EXIT_SYSTEM; /* printed */
	if (r < 0) {
		pw_err("run", "cannot open the sandbox's agent socket at %s: %s", v->socket,
		       strerror(-r));
		return r == -ENOENT || r == -ECONNREFUSED ? PW_EXIT_NO_VIEW : PW_EXIT_SYSTEM;
	}
	return PW_EXIT_OK;
}

/* Where the run's daemon keeps its state database (audit log, trust, last modes), which
 * may be elsewhere than ours (the bare view's `mount --state-db`): the sandbox hides it.
 * A daemon that does not say could keep it anywhere, so the run fails closed. */
static int ask_state_db(pw_run_view *v)
{
	json_t *res = NULL, *db;
	int r = call(v->socket, "status", NULL, &res);

	if (r != PW_EXIT_OK)
		return r;
	db = json_object_get(res, "state_db");
	if (json_is_string(db) && json_string_value(db)[0] == '/') {
		v->state_db = strdup(json_string_value(db));
		r = v->state_db ? PW_EXIT_OK : PW_EXIT_SYSTEM;
	} else if (!json_is_null(db)) {
		pw_err("run", "the run's daemon does not say where its state database is (another "
			      "piworkfs program than this one?)");
		r = PW_EXIT_SYSTEM;
	}
	json_decref(res);
	return r;
}

/* The view's mode now (malloc'd), or NULL. */
static char *get_mode(const pw_run_view *v)
{
	json_t *res = NULL;
	char *mode = NULL;

	if (pw_ctl_call_socket(v->socket, "mode.get", NULL, &res, NULL, NULL) == 0 &&
	    json_string_value(json_object_get(res, "mode")))
		mode = strdup(json_string_value(json_object_get(res, "mode")));
	json_decref(res);
	return mode;
}

/* What a run takes from the project's live bare view (the one around CWD first): its mode
 * when the run has no --mode, so that `run` in a view works as the person sees it, and
 * its state database, so that the project's audit log and originals stay in one place
 * (`log` and `changes` there say which run did what). Both NULL when no bare view is
 * live: the project's last mode, the default database. */
static void inherit_from_live(const char *project, const char *cwd, char **ret_mode,
			      char **ret_state_db)
{
	_cleanup_free_ char *mp = NULL, *sock = NULL;
	json_t *res = NULL;
	const char *mode, *db;

	*ret_mode = *ret_state_db = NULL;
	if (find_live(project, cwd, &mp, &sock) < 0 ||
	    pw_ctl_call_socket(sock, "status", NULL, &res, NULL, NULL) < 0)
		return;
	mode = json_string_value(json_object_get(res, "mode"));
	db = json_string_value(json_object_get(res, "state_db"));
	*ret_mode = mode ? strdup(mode) : NULL;
	*ret_state_db = db && db[0] == '/' ? strdup(db) : NULL;
	json_decref(res);
}

int pw_run_view_open(const char *project, const char *cwd, const char *mode,
		     const char *const *lane, size_t n_lane, pw_run_view *ret)
{
	pw_run_view v = {.daemon_fd = -1};
	_cleanup_free_ char *live_mode = NULL, *live_db = NULL;
	int r;

	v.project = strdup(project);
	if (!v.project)
		return PW_EXIT_SYSTEM;
	inherit_from_live(project, cwd, &live_mode, &live_db);
	r = mount_private(project, mode ? mode : live_mode, live_db, lane, n_lane, &v);
	if (r == PW_EXIT_OK) {
		v.mode = get_mode(&v);
		r = open_agent_socket(&v);
	}
	if (r == PW_EXIT_OK)
		r = ask_state_db(&v);
	if (r != PW_EXIT_OK) {
		(void)pw_run_view_close(&v);
		pw_run_view_done(&v);
		return r;
	}
	*ret = v;
	return PW_EXIT_OK;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Runs fusermount3 -u [-z] MP quietly. Returns its exit status (or 127). */
static int fusermount_u(const char *mp, bool lazy)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return 127;
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (null >= 0)
			dup2(null, STDERR_FILENO);
		if (lazy)
			execlp("fusermount3", "fusermount3", "-u", "-z", mp, (char *)NULL);
		else
			execlp("fusermount3", "fusermount3", "-u", mp, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return 127;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 127;
}

int pw_run_view_close(pw_run_view *v)
{
	int r = 0;

	pw_run_ask_close(); /* the daemon removes the run's agent socket */

	if (v->mounted && v->mountpoint) {
		/* The sandbox's processes are gone (its PID namespace died with the command), but
		 * the kernel may still be releasing their files: retry while busy. */
		int i;
		for (i = 0; i < UMOUNT_TRIES && fusermount_u(v->mountpoint, false) != 0; i++)
			sleep_ms(100);
		if (i == UMOUNT_TRIES && fusermount_u(v->mountpoint, true) != 0) {
			pw_err("run", "could not unmount the view at %s (piworkfs umount %s)",
			       v->mountpoint, v->mountpoint);
			r = -EBUSY;
		}
		v->mounted = false;
		/* The daemon exits once unmounted; wait for it, so its sockets are gone when
		 * `piworkfs run` returns. A copy of the view in a mount namespace made while it
		 * was mounted (another run's sandbox) would keep it serving: unmounted without
		 * -z, nothing here used it, so it is told to end (as `piworkfs umount` does). */
		if (i < UMOUNT_TRIES && v->daemon_fd >= 0)
			(void)syscall(SYS_pidfd_send_signal, v->daemon_fd, SIGTERM, NULL, 0);
		if (r == 0 && v->daemon_fd >= 0) {
			struct pollfd pfd = {.fd = v->daemon_fd, .events = POLLIN};
			while (poll(&pfd, 1, DAEMON_EXIT_MS) < 0 && errno == EINTR)
				;
		}
	}
	if (v->private_dir && r == 0) {
		if (v->mountpoint)
			rmdir(v->mountpoint);
		else {
			_cleanup_free_ char *mp = NULL;
			if (asprintf(&mp, "%s/view", v->private_dir) >= 0)
				rmdir(mp);
		}
		rmdir(v->private_dir);
	}
	return r;
}

void pw_run_view_done(pw_run_view *v)
{
	free(v->project);
	free(v->mountpoint);
	free(v->socket);
	free(v->agent_socket);
	free(v->state_db);
	free(v->private_dir);
	free(v->mode);
	free(v->run_id);
	if (v->daemon_fd >= 0)
		close(v->daemon_fd);
	*v = (pw_run_view){.daemon_fd = -1};
}
