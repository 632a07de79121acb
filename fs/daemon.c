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

#include "undo/changes.h"
#include "ctl/agent.h"
#include "ctl/methods.h"
#include "ctl/plan_methods.h"
#include "ctl/request.h"
#include "ctl/server.h"
#include "ctl/view.h"
#include "daemon.h"
#include "fs.h"
#include "undo/undo.h"
#include "overlap.h"
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
	pw_fs_dircache_stats(fs, ret);
	pw_fs_watch_stats(fs, ret);
}

static void fs_policy_installed(void *fs, const pw_policy *p, const char *reason, bool new_set)
{
	pw_undo_policy_changed(pw_fs_undo(fs), p, reason, new_set);
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

/*
 * PIWORKFS_CTL_IDLE_MS: how long a control client may stay silent before it is dropped
 * (default 30 s, 100 ms to an hour). A knob for tests, like PIWORKFS_ORIG_DEFER_MS: a short
 * one shows in a moment who the timeout spares. Anything else is ignored with a warning.
 */
static unsigned ctl_idle_ms(void)
{
	const char *env = getenv("PIWORKFS_CTL_IDLE_MS");
	if (!env || !*env)
		return 0;
	char *end;
	errno = 0;
	long long ms = strtoll(env, &end, 10);
	if (errno || *end || ms < 100 || ms > 3600000) {
		dlog(LOG_WARNING, "PIWORKFS_CTL_IDLE_MS=%s ignored: wants 100 to 3600000", env);
		return 0;
	}
	return (unsigned)ms;
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
	_cleanup_free_ char *dir = NULL, *sock = NULL;
	int r;

	*ret_msg = NULL;
	r = pw_ctl_dir_or_default(o->socket_dir, &dir);
	if (r < 0)
		return r;
	r = pw_ctl_private_dir(dir);
	if (r == -EPERM || r == -ENOTDIR || r == -EEXIST) {
		r = asprintf(ret_msg,
			     "the control socket directory %s is not a private directory "
			     "of yours (another user's, or not a directory): remove it, "
			     "or set XDG_RUNTIME_DIR, or mount with --socket-dir DIR",
			     dir) < 0
			? -ENOMEM
			: -EPERM;
		return r;
	}
	if (r < 0) {
		int e = r;
		r = asprintf(ret_msg,
			     "cannot create the control socket directory %s: %s (set "
			     "XDG_RUNTIME_DIR, or mount with --socket-dir DIR)",
			     dir, strerror(-e)) < 0
			? -ENOMEM
			: e;
		return r;
	}
	r = pw_ctl_socket_path(dir, o->mountpoint, &sock);
	if (r == -ENAMETOOLONG) {
		r = asprintf(ret_msg,
			     "a control socket in %s would have a path too long for a "
			     "UNIX socket: mount with a shorter --socket-dir DIR",
			     dir) < 0
			? -ENOMEM
			: -ENAMETOOLONG;
		return r;
	}
	if (r == 0 && o->agent_socket)
		r = pw_ctl_agent_socket_check(o->agent_socket, dir, ret_msg);
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

/* Everything one view's daemon runs, torn down in the reverse order of its start. */
typedef struct daemon_parts {
	char *state_path;
	pw_state *state;
	pw_fs *fs;
	pw_audit *audit;
	pw_undo *undo;
	pw_overlap *overlap;
	pw_view *view;
	pw_ctl_server *ctl;
} daemon_parts;

/* Reports "error: WHAT: WHY" (or "error: WHY") on READY_FD. */
static void report_error(int ready_fd, const char *what, const char *why)
{
	char msg[1200];

	snprintf(msg, sizeof(msg), "error: %s%s%s", what ? what : "", what ? ": " : "", why);
	report(ready_fd, msg);
}

/* Logging, umask and signals as the daemon needs them before it starts anything. */
static void daemon_setup_process(const pw_daemon_opts *o)
{
	log_to_stderr = o->foreground;
	if (!o->foreground)
		openlog("piworkfs", LOG_PID, LOG_DAEMON);
	umask(0); /* the kernel already applied the caller's umask to every mode we get */
	block_signals(true);
}

/* Before anything is mounted: a view whose control plane cannot start would be a mount
 * nobody can switch or unmount by name, with a mode switch in the log. */
static int daemon_check_socket(const pw_daemon_opts *o, int ready_fd)
{
	_cleanup_free_ char *sock_err = NULL;
	int r = pw_daemon_check_socket(o, &sock_err);

	if (r < 0)
		report_error(ready_fd, NULL, sock_err ? sock_err : strerror(-r));
	return r;
}

/* The state database: the last mode, trust, audit and originals. A view without it still
 * serves (it keeps nothing), so a failure is a warning. */
static void daemon_open_state(const pw_daemon_opts *o, daemon_parts *d)
{
	_cleanup_free_ char *warn = NULL;

	d->state_path = absolute_path(o->state_db ? strdup(o->state_db) : pw_state_default_path());
	if (!d->state_path)
		return;
	int r = pw_state_open(d->state_path, &d->state, &warn);
	if (r < 0)
		dlog(LOG_WARNING, "state database %s unusable (%s): the last mode will not be kept",
		     d->state_path, strerror(-r));
	if (warn)
		dlog(LOG_WARNING, "%s", warn);
}

/* The FUSE session, mounted. Returns 0 or -errno, reported on READY_FD. */
static int daemon_start_fs(const pw_daemon_opts *o, daemon_parts *d, int ready_fd)
{
	pw_fs_opts fo = {
	    .project = o->project,
	    .mountpoint = o->mountpoint,
	    .foreground = o->foreground,
	    .debug = o->debug,
	    .allow_other = o->allow_other,
	    .cache_timeout = o->cache_timeout,
	    .no_watch = o->no_watch,
	    .fuse_opts = o->fuse_opts,
	    .use_fuse_fd = o->use_fuse_fd,
	    .fuse_fd = o->fuse_fd,
	};
	_cleanup_free_ char *err = NULL;
	int r = pw_fs_new(&fo, &d->fs, &err);

	if (r < 0)
		report_error(ready_fd, NULL, err ? err : strerror(-r));
	return r;
}

/* The audit writer, unless --no-audit or there is no database; a failure is a warning. */
static void daemon_start_audit(const pw_daemon_opts *o, daemon_parts *d)
{
	if (!d->state_path || o->no_audit)
		return;
	pw_audit_opts ao = {
	    .db_path = d->state_path,
	    .project = o->project,
	    .mountpoint = o->mountpoint,
	    .queue_capacity = o->audit_queue,
	    .log_allowed = o->log_allowed,
	};
	_cleanup_free_ char *aw = NULL;
	int r = pw_audit_start(&ao, &d->audit, &aw);
	if (r < 0)
		dlog(LOG_WARNING, "audit log disabled: %s", strerror(-r));
	if (aw)
		dlog(LOG_WARNING, "%s", aw);
	pw_fs_set_audit(d->fs, d->audit);
}

/* Originals beside the state database, before the view installs its first policy (which
 * starts the first change set). A failure is a warning: the view serves without undo. */
static void daemon_start_undo(const pw_daemon_opts *o, daemon_parts *d)
{
	if (!d->state_path || o->no_originals)
		return;
	pw_undo_opts ko = {
	    .db_path = d->state_path,
	    .project = o->project,
	    .mountpoint = o->mountpoint,
	    .max_file = o->originals_max_file,
	    .keep_ns = o->originals_keep_s * 1000000000ll,
	    .max_total = o->originals_max_total,
	    .min_free = o->originals_min_free,
	    .defer_ns = orig_defer_ns(),
	};
	int r = pw_undo_new(&ko, &d->undo);
	if (r < 0)
		dlog(LOG_WARNING, "originals will not be kept (undo unavailable): %s",
		     strerror(-r));
	pw_fs_set_undo(d->fs, d->undo);
}

/*
 * Overlapping writes (overlap.h): only where originals are kept, since what another view
 * changed is known from its change sets. A view that cannot tell serves all the same.
 */
static void daemon_start_overlap(const pw_daemon_opts *o, daemon_parts *d)
{
	pw_overlap_opts oo = {
	    .db_path = d->state_path,
	    .project = o->project,
	    .mountpoint = o->mountpoint,
	    .audit = d->audit,
	};
	int r;

	if (!d->undo)
		return;
	r = pw_overlap_new(&oo, &d->overlap);
	if (r < 0) {
		dlog(LOG_WARNING, "overlapping writes will not be told: %s", strerror(-r));
		d->overlap = NULL;
		return;
	}
	pw_undo_set_overlap(d->undo, d->overlap);
}

/* The view (policy, modes, trust) and its control socket. Returns 0 or -errno, reported
 * on READY_FD. */
static int daemon_start_control(const pw_daemon_opts *o, daemon_parts *d, int ready_fd)
{
	pw_view_opts vo = {
	    .project = o->project,
	    .mountpoint = o->mountpoint,
	    .fs_ops = &fs_ops,
	    .fs_ctx = d->fs,
	    .owner_uid = getuid(),
	    .bundled_dir = o->bundled_dir,
	    .global_dir = o->global_dir,
	    .initial_mode = o->mode,
	    .state = d->state,
	    .audit = d->audit,
	    .state_db = d->state_path,
	    .lane = o->lane,
	    .n_lane = o->n_lane,
	    .run_id = o->run_id,
	    .run_pid = o->run_pid,
	};
	/* The methods the control socket serves; the changes methods act on this pw_fs. */
	const pw_ctl_use modules[] = {
	    {&pw_ctl_methods_module, NULL},
	    {&pw_ctl_request_module, NULL},
	    {&pw_undo_changes_module, d->fs},
	    {&pw_ctl_plan_module, NULL},
	};
	const pw_ctl_tuning tun = {.idle_timeout_ms = ctl_idle_ms()}; /* 0: the defaults */
	int r = pw_view_new(&vo, &d->view);
	if (r == 0)
		r = pw_ctl_server_start(d->view, o->socket_dir, &tun, modules, ELEMENTSOF(modules),
					&d->ctl);
	/* The approved plans once more, now that the socket listens: an approval recorded
	 * after the view loaded them and before the approving view could reach this socket
	 * skipped this view as not serving (ctl/peers.h). */
	if (r == 0)
		r = pw_view_sync_plans(d->view, NULL, NULL, NULL);
	if (r < 0) {
		report_error(ready_fd, "cannot start the control plane", strerror(-r));
		return r;
	}
	/* After the mount and the control socket: an agent that waits for this socket to
	 * answer finds the view serving. */
	r = o->agent_socket ? pw_ctl_agent_open_at(d->ctl, o->agent_socket) : 0;
	if (r < 0) {
		_cleanup_free_ char *what = NULL;
		if (asprintf(&what, "cannot create the agent socket %s", o->agent_socket) < 0)
			what = NULL;
		report_error(ready_fd, what ? what : "cannot create the agent socket",
			     r == -EADDRINUSE ? "a live socket is there (another view's?)"
					      : strerror(-r));
	}
	return r;
}

/* "ok MODE" on READY_FD, which is then closed: `mount` returns. */
static void report_ready(const daemon_parts *d, int ready_fd)
{
	pw_view_status vs = {0};
	char ready[128] = "ok";

	if (pw_view_get_status(d->view, &vs) == 0) {
		snprintf(ready, sizeof(ready), "ok %s", vs.mode ? vs.mode : "?");
		if (vs.fail_reason)
			dlog(LOG_WARNING, "failing closed: %s", vs.fail_reason);
		pw_view_status_done(&vs);
	}
	report(ready_fd, ready);
	if (ready_fd >= 0)
		close(ready_fd);
}

/* Serves until unmounted or signalled. Returns pw_fs_loop's result. */
static int daemon_serve(const pw_daemon_opts *o, daemon_parts *d, int ready_fd)
{
	signal_fs = d->fs;
	signal_ctl = d->ctl;
	install_signals();
	block_signals(false);
	char *link = advertise_socket(o, pw_ctl_server_socket_path(d->ctl));
	report_ready(d, ready_fd);
	dlog(LOG_INFO, "serving %s on %s", o->project, o->mountpoint);
	int r = pw_fs_loop(d->fs);
	block_signals(true);
	withdraw_socket(link, pw_ctl_server_socket_path(d->ctl));
	if (o->use_fuse_fd)
		dlog(LOG_INFO, "stopped serving %s (its mount is left to the process that made it)",
		     o->mountpoint);
	else
		dlog(LOG_INFO, "unmounting %s", o->mountpoint);
	return r;
}

/* Stops what was started, control plane first, so that no request reaches a part that is
 * gone. */
static void daemon_stop(daemon_parts *d)
{
	signal_ctl = NULL;
	signal_fs = NULL;
	pw_ctl_server_stop(d->ctl);
	pw_view_free(d->view);
	if (d->fs)
		pw_fs_set_audit(d->fs, NULL);
	pw_fs_free(d->fs); /* unmounts: no request can reach the audit writer after this */
	pw_undo_free(d->undo);
	pw_overlap_free(d->overlap); /* after the FUSE layer: nothing notes a path any more */
	pw_audit_stop(d->audit);
	pw_state_close(d->state);
	free(d->state_path);
}

int pw_daemon_run(const pw_daemon_opts *o, int ready_fd)
{
	daemon_parts d = {0};

	daemon_setup_process(o);
	if (daemon_check_socket(o, ready_fd) < 0)
		return 1;
	daemon_open_state(o, &d);
	int r = daemon_start_fs(o, &d, ready_fd);
	if (r == 0) {
		daemon_start_audit(o, &d);
		daemon_start_undo(o, &d);
		daemon_start_overlap(o, &d);
		r = daemon_start_control(o, &d, ready_fd);
	}
	if (r == 0)
		r = daemon_serve(o, &d, ready_fd);
	daemon_stop(&d);
	return r < 0 ? 1 : 0;
}
