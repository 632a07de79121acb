/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "ctl/changes.h"
#include "ctl/methods.h"
#include "ctl/plan_methods.h"
#include "ctl/request.h"
#include "ctl/server.h"
#include "ctl/view.h"
#include "daemon.h"
#include "fs.h"
#include "keep.h"
#include "store/audit.h"
#include "store/state.h"
#include "util.h"

static bool log_to_stderr;
static pw_fs *signal_fs;
static pw_ctl_server *signal_ctl;

_printf_(2, 3) static void dlog(int prio, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (log_to_stderr) {
		fprintf(stderr, "piworkfs: ");
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	} else {
		vsyslog(prio, fmt, ap);
	}
	va_end(ap);
}

/* The one-line report to `mount`, waiting on FD; in the foreground (no FD) an error goes to
 * the log instead, so that a view that fails to mount always says why. */
static void report(int fd, const char *msg)
{
	if (fd < 0) {
		if (strncmp(msg, "error: ", 7) == 0)
			dlog(LOG_ERR, "%s", msg + 7);
		return;
	}
	char line[1024];
	int len = snprintf(line, sizeof(line), "%s\n", msg);
	if (len > (int)sizeof(line) - 1)
		len = (int)sizeof(line) - 1;
	(void)!write(fd, line, (size_t)len);
}

static void on_exit_signal(int sig)
{
	pw_fs_exit(signal_fs);
}

static void on_hup(int sig)
{
	if (signal_ctl)
		pw_ctl_server_request_reload(signal_ctl);
}

static void install_signals(void)
{
	struct sigaction sa = {0};
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_exit_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = on_hup;
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
}

/* Threads started before the loop must not take the exit signals: block them there. */
static void block_signals(bool block)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(block ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

/* ---- the control plane's way into the FUSE layer (ctl/view.h) -------------------------- */

static uint64_t fs_set_policy(void *fs, pw_policy *p)
{
	return pw_fs_set_policy(fs, p);
}

static pw_policy *fs_get_policy(void *fs, uint64_t *ret_generation)
{
	return pw_fs_policy(fs, ret_generation);
}

static void fs_get_stats(void *fs, pw_fs_stats *ret)
{
	pw_fs_get_stats(fs, ret);
	pw_fs_transport_stats(fs, ret);
}

static void fs_policy_installed(void *fs, const pw_policy *p, const char *reason, bool new_set)
{
	pw_keep_policy_changed(pw_fs_keep(fs), p, reason, new_set);
}

static void fs_wait_invalidated(void *fs, uint64_t gen)
{
	pw_fs_wait_invalidated(fs, gen);
}

static const pw_view_fs_ops fs_ops = {
	.set_policy = fs_set_policy,
	.get_policy = fs_get_policy,
	.get_stats = fs_get_stats,
	.policy_installed = fs_policy_installed,
	.wait_invalidated = fs_wait_invalidated,
};

/* PATH made absolute against the working directory, as open(2) would resolve it
 * (malloc'd; NULL for NULL or on failure). Status reports where the database really is. */
/*
 * PIWORKFS_ORIG_DEFER_MS: how long the rows of created names and kept originals may wait in
 * the journal before their commit (default 100 ms, at most an hour). A knob for tests and
 * debugging, like PIWORKFS_SPLICE: a long wait makes "a kill finds rows in the journal"
 * certain instead of likely. Anything else is ignored with a warning.
 */
static int64_t orig_defer_ns(void)
{
	const char *env = getenv("PIWORKFS_ORIG_DEFER_MS");
	if (!env || !*env)
		return 0;
	char *end;
	errno = 0;
	long long ms = strtoll(env, &end, 10);
	if (errno || *end || ms < 1 || ms > 3600000) {
		dlog(LOG_WARNING, "PIWORKFS_ORIG_DEFER_MS=%s ignored: wants 1 to 3600000", env);
		return 0;
	}
	return (int64_t)ms * 1000000;
}

static char *absolute_path(char *path)
{
	_cleanup_free_ char *own = path, *cwd = NULL;
	char *abs = NULL;

	if (!path || path[0] == '/')
		return TAKE_PTR(own);
	cwd = getcwd(NULL, 0);
	if (!cwd || asprintf(&abs, "%s/%s", streq(cwd, "/") ? "" : cwd, path) < 0)
		return NULL;
	return abs;
}

int pw_daemon_check_socket(const pw_daemon_opts *o, char **ret_msg)
{
	_cleanup_free_ char *ddir = NULL, *sock = NULL;
	const char *dir = o->socket_dir;
	int r = 0;

	*ret_msg = NULL;
	if (!dir) {
		r = pw_ctl_default_dir(&ddir);
		if (r < 0)
			return r;
		dir = ddir;
	}
	r = pw_ctl_private_dir(dir);
	if (r == -EPERM || r == -ENOTDIR || r == -EEXIST) {
		r = asprintf(ret_msg, "the control socket directory %s is not a private directory "
				      "of yours (another user's, or not a directory): remove it, "
				      "or set XDG_RUNTIME_DIR, or mount with --socket-dir DIR",
			     dir) < 0 ? -ENOMEM : -EPERM;
		return r;
	}
	if (r < 0) {
		int e = r;
		r = asprintf(ret_msg, "cannot create the control socket directory %s: %s (set "
				      "XDG_RUNTIME_DIR, or mount with --socket-dir DIR)",
			     dir, strerror(-e)) < 0 ? -ENOMEM : e;
		return r;
	}
	r = pw_ctl_socket_path(dir, o->mountpoint, &sock);
	if (r == -ENAMETOOLONG) {
		r = asprintf(ret_msg, "a control socket in %s would have a path too long for a "
				      "UNIX socket: mount with a shorter --socket-dir DIR", dir) < 0
			? -ENOMEM : -ENAMETOOLONG;
		return r;
	}
	return r;
}

/*
 * A daemon whose socket is not in the default dir (--socket-dir) leaves a link to it at the
 * default place, so every command run inside the view, which finds the socket from the
 * mountpoint, reaches it. Returns the link (malloc'd) or NULL when none was needed or made.
 */
static char *advertise_socket(const pw_daemon_opts *o, const char *socket)
{
	_cleanup_free_ char *ddir = NULL;
	char *link = NULL;
	struct stat st;

	if (!o->socket_dir || pw_ctl_default_dir(&ddir) < 0 || pw_ctl_private_dir(ddir) < 0 ||
	    pw_ctl_socket_path(ddir, o->mountpoint, &link) < 0)
		return NULL;
	if (streq(link, socket)) {
		free(link);
		return NULL;
	}
	/* The mountpoint is ours now: whatever names it there is left from an earlier view. */
	if (lstat(link, &st) == 0 && (S_ISLNK(st.st_mode) || S_ISSOCK(st.st_mode)))
		(void)unlink(link);
	if (symlink(socket, link) < 0) {
		dlog(LOG_WARNING, "cannot link %s to the control socket %s: %s", link, socket,
		     strerror(errno));
		free(link);
		return NULL;
	}
	return link;
}

/* Removes LINK if it still points at SOCKET (a later view may have taken the name). */
static void withdraw_socket(char *link, const char *socket)
{
	char target[4096];
	ssize_t n;

	if (!link)
		return;
	n = readlink(link, target, sizeof(target) - 1);
	if (n > 0) {
		target[n] = '\0';
		if (streq(target, socket))
			(void)unlink(link);
	}
	free(link);
}

int pw_daemon_run(const pw_daemon_opts *o, int ready_fd)
{
	log_to_stderr = o->foreground;
	if (!o->foreground)
		openlog("piworkfs", LOG_PID, LOG_DAEMON);
	umask(0); /* the kernel already applied the caller's umask to every mode we get */
	block_signals(true);

	/* Before anything is mounted: a view whose control plane cannot start would be a mount
	 * nobody can switch or unmount by name, with a mode switch in the log. */
	_cleanup_free_ char *sock_err = NULL;
	int sr = pw_daemon_check_socket(o, &sock_err);
	if (sr < 0) {
		char msg[1200];
		snprintf(msg, sizeof(msg), "error: %s", sock_err ? sock_err : strerror(-sr));
		report(ready_fd, msg);
		return 1;
	}

	_cleanup_free_ char *state_path =
		absolute_path(o->state_db ? strdup(o->state_db) : pw_state_default_path());
	pw_state *state = NULL;
	_cleanup_free_ char *warn = NULL;
	if (state_path) {
		int r = pw_state_open(state_path, &state, &warn);
		if (r < 0)
			dlog(LOG_WARNING, "state database %s unusable (%s): the last mode will not be kept",
			     state_path, strerror(-r));
		if (warn)
			dlog(LOG_WARNING, "%s", warn);
	}

	pw_fs_opts fo = {
		.project = o->project,
		.mountpoint = o->mountpoint,
		.foreground = o->foreground,
		.debug = o->debug,
		.allow_other = o->allow_other,
		.cache_timeout = o->cache_timeout,
		.no_watch = o->no_watch,
		.fuse_opts = o->fuse_opts,
	};
	pw_fs *fs = NULL;
	_cleanup_free_ char *err = NULL;
	int r = pw_fs_new(&fo, &fs, &err);
	if (r < 0) {
		char msg[1200];
		snprintf(msg, sizeof(msg), "error: %s", err ? err : strerror(-r));
		report(ready_fd, msg);
		pw_state_close(state);
		return 1;
	}

	pw_audit *audit = NULL;
	if (state_path && !o->no_audit) {
		pw_audit_opts ao = {
			.db_path = state_path,
			.project = o->project,
			.mountpoint = o->mountpoint,
			.queue_capacity = o->audit_queue,
			.log_allowed = o->log_allowed,
		};
		_cleanup_free_ char *aw = NULL;
		r = pw_audit_start(&ao, &audit, &aw);
		if (r < 0)
			dlog(LOG_WARNING, "audit log disabled: %s", strerror(-r));
		if (aw)
			dlog(LOG_WARNING, "%s", aw);
		pw_fs_set_audit(fs, audit);
	}

	/* Originals beside the state database, before the view installs its first policy
	 * (which starts the first change set). */
	pw_keep *keep = NULL;
	if (state_path && !o->no_originals) {
		pw_keep_opts ko = {
			.db_path = state_path,
			.project = o->project,
			.mountpoint = o->mountpoint,
			.max_file = o->originals_max_file,
			.keep_ns = o->originals_keep_s * 1000000000ll,
			.max_total = o->originals_max_total,
			.min_free = o->originals_min_free,
			.defer_ns = orig_defer_ns(),
		};
		r = pw_keep_new(&ko, &keep);
		if (r < 0)
			dlog(LOG_WARNING, "originals will not be kept (undo unavailable): %s",
			     strerror(-r));
		pw_fs_set_keep(fs, keep);
	}

	pw_view_opts vo = {
		.project = o->project,
		.mountpoint = o->mountpoint,
		.fs_ops = &fs_ops,
		.fs_ctx = fs,
		.owner_uid = getuid(),
		.bundled_dir = o->bundled_dir,
		.global_dir = o->global_dir,
		.initial_mode = o->mode,
		.state = state,
		.audit = audit,
		.state_db = state_path,
		.run_id = o->run_id,
		.run_pid = o->run_pid,
	};
	pw_view *view = NULL;
	pw_ctl_server *ctl = NULL;
	/* The methods the control socket serves; the changes methods act on this pw_fs. */
	const pw_ctl_use modules[] = {
		{ &pw_ctl_methods_module, NULL },
		{ &pw_ctl_request_module, NULL },
		{ &pw_changes_module, fs },
		{ &pw_ctl_plan_module, NULL },
	};
	r = pw_view_new(&vo, &view);
	if (r == 0)
		r = pw_ctl_server_start(view, o->socket_dir, NULL, modules, ELEMENTSOF(modules),
					&ctl);
	if (r < 0) {
		char msg[256];
		snprintf(msg, sizeof(msg), "error: cannot start the control plane: %s", strerror(-r));
		report(ready_fd, msg);
		goto out;
	}

	signal_fs = fs;
	signal_ctl = ctl;
	install_signals();
	block_signals(false);
	pw_view_status vs = {0};
	char ready[128] = "ok";
	if (pw_view_get_status(view, &vs) == 0) {
		snprintf(ready, sizeof(ready), "ok %s", vs.mode ? vs.mode : "?");
		if (vs.fail_reason)
			dlog(LOG_WARNING, "failing closed: %s", vs.fail_reason);
		pw_view_status_done(&vs);
	}
	char *link = advertise_socket(o, pw_ctl_server_socket_path(ctl));
	report(ready_fd, ready);
	if (ready_fd >= 0)
		close(ready_fd);
	dlog(LOG_INFO, "serving %s on %s", o->project, o->mountpoint);
	r = pw_fs_loop(fs);
	block_signals(true);
	withdraw_socket(link, pw_ctl_server_socket_path(ctl));
	dlog(LOG_INFO, "unmounting %s", o->mountpoint);
out:
	signal_ctl = NULL;
	signal_fs = NULL;
	pw_ctl_server_stop(ctl);
	pw_view_free(view);
	pw_fs_set_audit(fs, NULL);
	pw_fs_free(fs); /* unmounts: no request can reach the audit writer after this */
	pw_keep_free(keep);
	pw_audit_stop(audit);
	pw_state_close(state);
	return r < 0 ? 1 : 0;
}
