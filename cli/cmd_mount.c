/* SPDX-License-Identifier: MIT */
/*
 * `piworkfs mount` (umount is cmd_umount.c, -o's options mount_options.c). Mount validates
 * everything it can in the foreground, with one-line errors, then forks the daemon and returns only
 * once the view answers (or with the daemon's own reason for failing). A stale view left by a
 * killed daemon (ENOTCONN) is detached first.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <pwd.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cli.h"
#include "ctl/run_id.h"
#include "client/ctl_client.h"
#include "ctl/sockets.h"
#include "daemon.h"
#include "fs.h"
#include "modefile.h"
#include "mount.h"
#include "run/run.h"
#include "options.h"
#include "output.h"
#include "path.h"
#include "policy.h"
#include "project.h"

#define MOUNT_USAGE                                                                                \
	"Usage: piworkfs mount [OPTIONS] PROJECT MOUNTPOINT\n"                                     \
	"       piworkfs mount --fuse-fd N [OPTIONS] PROJECT MOUNTPOINT\n"                         \
	"\n"                                                                                       \
	"Mounts PROJECT at MOUNTPOINT as a view whose writes the active mode limits.\n"            \
	"Without --mode the project's last mode is restored; a project never seen starts in\n"     \
	"plan (read-only). Options may also follow the arguments.\n"                               \
	"\n"                                                                                       \
	"Options:\n"                                                                               \
	"  -m, --mode MODE        start in MODE\n"                                                 \
	"  -f, --foreground       stay in the foreground, log to stderr\n"                         \
	"  -o, --options OPTIONS  mount options: allow_other (needs root), nonempty,\n"            \
	"                         io_uring (require FUSE over io_uring, taken by default where\n"  \
	"                         the kernel allows it), no_io_uring (use /dev/fuse),\n"           \
	"                         FUSE options (ro, default_permissions, ...), and the view's\n"   \
	"                         own as in fstab (mode=M, socket_dir=DIR, no_originals, ...;\n"   \
	"                         fstab's noauto, user, x-systemd.* ... are ignored)\n"            \
	"  -d, --debug            log every FUSE request (implies -f)\n"                           \
	"      --timeout SEC      kernel cache timeout (default 86400; kept true by "              \
	"invalidation)\n"                                                                          \
	"      --no-watch         do not follow changes made outside the view (testing only)\n"    \
	"      --no-audit         record no audit events\n"                                        \
	"      --no-originals     keep no originals before changes (no undo)\n"                    \
	"      --originals-max-file SIZE\n"                                                        \
	"                         files over SIZE are recorded as changed, not kept\n"             \
	"                         (default 64M; suffixes K, M, G, T)\n"                            \
	"      --originals-keep AGE\n"                                                             \
	"                         drop change sets older than AGE, at mount and on\n"              \
	"                         `changes --prune` (default 14d; suffixes s, m, h, d, w)\n"       \
	"      --originals-max-total SIZE\n"                                                       \
	"                         then drop the oldest while the store exceeds SIZE (1G);\n"       \
	"                         held at every keep: what does not fit is not kept\n"             \
	"      --originals-min-free SIZE\n"                                                        \
	"                         keep nothing that would leave the store's filesystem\n"          \
	"                         less than SIZE free (default 5% of it, at most 1G)\n"            \
	"      --log-allowed      also record allowed mutations in the audit log\n"                \
	"      --audit-queue N    the audit queue's length (testing)\n"                            \
	"      --only GLOB        a lane: of what the mode allows, write only what GLOB "          \
	"matches,\n"                                                                               \
	"                         in every mode (repeatable; mode files' glob syntax)\n"           \
	"      --state-db PATH    the state database (default: "                                   \
	"$XDG_STATE_HOME/piworkfs/state.db,\n"                                                     \
	"                         for root /var/lib/piworkfs/state.db)\n"                          \
	"      --socket-dir DIR   where the control socket goes (default:\n"                       \
	"                         $XDG_RUNTIME_DIR/piworkfs, for root /run/piworkfs, without\n"    \
	"                         XDG_RUNTIME_DIR /tmp/piworkfs-UID)\n"                            \
	"      --agent-socket PATH\n"                                                              \
	"                         also an agent socket at PATH, outside the socket directory,\n"   \
	"                         for an agent in another container (a pod: docs/DEPLOY.md);\n"    \
	"                         its requests to loosen are allowed with the target typed\n"      \
	"      --fuse-fd N        serve descriptor N, a /dev/fuse that another process opened "    \
	"and\n"                                                                                    \
	"                         mounted at MOUNTPOINT (type fuse.piworkfs, source PROJECT);\n"   \
	"                         the view never mounts nor unmounts it (docs/DEPLOY.md)\n"        \
	"      --run ID           the view of its own of run ID, which `piworkfs run` mounts\n"    \
	"                         for each run (the calling process is the run): no mode it\n"     \
	"                         is in is remembered as the project's last mode\n"                \
	"      --json             print the result as JSON\n"                                      \
	"  -h, --help             show this help\n"                                                \
	"\n"                                                                                       \
	"Examples:\n"                                                                              \
	"  piworkfs mount ~/proj ~/proj.view\n"                                                    \
	"  piworkfs mount ~/proj ~/proj.view --mode design -o nonempty\n"                          \
	"  mount -t fuse.piworkfs ~/proj ~/proj.view -o mode=plan  # root, via mount(8)\n"         \
	"\n"                                                                                       \
	"Exit status: 0 mounted; 2 usage error; 3 bad project, mountpoint, mode, socket\n"         \
	"directory or --fuse-fd descriptor; 5 the mount failed (FUSE unusable, daemon error).\n"

/* Is PATH the mountpoint of a live piworkfs view? Returns its source (project) or NULL. */
char *pw_mount_live_view_at(const char *path)
{
	pw_ctl_mount *m = NULL;
	size_t n = 0;
	char *source = NULL;
	if (pw_ctl_list_mounts(&m, &n) < 0)
		return NULL;
	for (size_t i = 0; i < n && !source; i++)
		if (streq(m[i].mountpoint, path))
			source = strdup(m[i].source ? m[i].source : "?");
	pw_ctl_mounts_free(m, n);
	return source;
}

/* Detaches a dead FUSE mount (its daemon was killed: every access answers ENOTCONN). */
int pw_mount_detach_stale(const char *mp)
{
	if (geteuid() == 0)
		return umount2(mp, MNT_DETACH) < 0 ? negative_errno() : 0;
	pid_t pid = fork();
	if (pid < 0)
		return negative_errno();
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", "-z", mp, (char *)NULL);
		_exit(127);
	}
	int status;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

static bool dir_is_empty(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return false;
	struct dirent *e;
	bool empty = true;
	while ((e = readdir(d)))
		if (!streq(e->d_name, ".") && !streq(e->d_name, "..")) {
			empty = false;
			break;
		}
	closedir(d);
	return empty;
}

/*
 * A user who cannot open /dev/fuse cannot mount: libfuse and fusermount3 then say "failed
 * to open /dev/fuse: Permission denied" on a stderr the detached daemon no longer has. Say
 * it here, with why and what to do, in one line.
 */
static int check_fuse_device(void)
{
	struct stat st;
	int fd;

	if (geteuid() == 0)
		return PW_EXIT_OK;
	fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		return PW_EXIT_OK;
	}
	int e = errno;
	struct passwd *pw = getpwuid(geteuid());
	char perms[16] = "?";
	if (stat("/dev/fuse", &st) == 0)
		snprintf(perms, sizeof(perms), "%04o", (unsigned)(st.st_mode & 07777));
	if (e == ENOENT) {
		pw_err("mount", "/dev/fuse does not exist: load the fuse module (modprobe fuse, as "
				"root) or install FUSE 3");
		return PW_EXIT_SYSTEM;
	}
	pw_err("mount",
	       "user %s cannot use FUSE: failed to open /dev/fuse: %s (it is mode %s, "
	       "open to root only); ask an administrator to make it usable by users "
	       "(chmod 0666 /dev/fuse, the default on most distributions) or mount as root",
	       pw ? pw->pw_name : "?", strerror(e), perms);
	return PW_EXIT_SYSTEM;
}

/*
 * FUSE over io_uring: -o io_uring and -o no_io_uring cannot both hold. Where neither is
 * given and the kernel does not allow it, the view serves through /dev/fuse, and the first
 * mount of the boot says so, with what it costs and how to turn it on for good (the
 * daemon says it in its own log; a detached daemon has no stderr): a fact about the
 * machine, said once (notice.c), not at every mount. With --json the sentence goes into
 * the result instead (*RET_WHY, "io_uring_off"), every time: a script reads it there, and
 * `piworkfs run`, which mounts with --json, does not repeat it at every run. Returns an
 * exit status.
 */
static int check_uring(const char *fuse_opts, bool foreground, bool json, char **ret_why)
{
	if (pw_opts_has(fuse_opts, "io_uring") && pw_opts_has(fuse_opts, "no_io_uring")) {
		pw_err("mount",
		       "-o io_uring requires FUSE over io_uring and -o no_io_uring refuses "
		       "it: give one of them");
		return PW_EXIT_USAGE;
	}
	char why[600];
	if (foreground || pw_fs_uring_choice(fuse_opts) != PW_URING_AUTO ||
	    pw_fs_uring_probe(why, sizeof(why)) == 0)
		return PW_EXIT_OK;
	if (!json) {
		_cleanup_free_ char *text = NULL;
		if (pw_cli_notice_once("io_uring-off", why) &&
		    asprintf(&text, "serving through /dev/fuse: %s", why) >= 0)
			pw_notice("mount", text);
	} else if (!(*ret_why = strdup(why)))
		return PW_EXIT_SYSTEM;
	return PW_EXIT_OK;
}

/* Waits up to TIMEOUT_MS for the process of pidfd FD to end. Returns 0 when it has,
 * -ETIMEDOUT, or -errno. */
int pw_mount_wait_pidfd(int fd, int timeout_ms)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	int r;

	while ((r = poll(&pfd, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	return r > 0 ? 0 : r == 0 ? -ETIMEDOUT : negative_errno();
}

/* Waits up to TIMEOUT_MS for process PID to end. Returns 0 when it has (or never was),
 * -ETIMEDOUT, or -errno when it cannot be watched. */
static int wait_pid_gone(pid_t pid, int timeout_ms)
{
	_cleanup_close_ int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (fd < 0)
		return errno == ESRCH ? 0 : negative_errno();
	return pw_mount_wait_pidfd(fd, timeout_ms);
}

/* The pid of the daemon answering on SOCKET, or 0. */
pid_t pw_mount_daemon_pid(const char *socket)
{
	_cleanup_json_ json_t *res = NULL;

	if (pw_ctl_call_socket(socket, "status", NULL, &res, NULL, NULL) < 0)
		return 0;
	return (pid_t)json_integer_value(json_object_get(res, "pid"));
}

/*
 * A daemon that was just unmounted from MP may still hold its control socket for a moment
 * (a `fusermount3 -u` returns before the daemon exits): wait for it, so the new daemon's
 * socket does not meet "Address already in use". A socket nobody answers is stale; the
 * daemon removes it itself.
 */
static void wait_for_old_daemon(const char *socket_dir, const char *mp)
{
	_cleanup_free_ char *sock = NULL;
	pid_t pid;

	int r = socket_dir ? pw_ctl_socket_path(socket_dir, mp, &sock)
			   : pw_ctl_view_socket(mp, -1, &sock);
	if (r < 0 || access(sock, F_OK) < 0)
		return;
	pid = pw_mount_daemon_pid(sock);
	if (pid > 0)
		(void)wait_pid_gone(pid, DAEMON_EXIT_MS);
}

/* A mountpoint ARG that does not exist: the one line, with the command that makes it. */
static int missing_mountpoint(const char *arg)
{
	_cleanup_free_ char *cwd = arg[0] == '/' ? NULL : getcwd(NULL, 0), *abs = NULL, *q = NULL;

	if (asprintf(&abs, "%s%s%s", cwd ? cwd : "", cwd ? "/" : "", arg) < 0 ||
	    !(q = pw_shell_word(abs)))
		return PW_EXIT_SYSTEM;
	pw_err("mount", "mountpoint %s: %s; make it first (mkdir -p %s), as for sshfs", arg,
	       strerror(ENOENT), q);
	return PW_EXIT_CONFIG;
}

/* Resolves and checks the mountpoint. Returns an exit status; *ret is the real path. */
static int prepare_mountpoint(const char *arg, const char *project, bool nonempty, char **ret)
{
	struct stat st;
	if (stat(arg, &st) < 0 && errno == ENOTCONN) {
		char abs[PATH_MAX];
		if (!realpath(arg, abs) && errno != ENOTCONN)
			snprintf(abs, sizeof(abs), "%s", arg);
		int r = pw_mount_detach_stale(arg);
		if (r < 0) {
			pw_err("mount",
			       "%s is a stale view (its daemon died) and could not be detached: %s",
			       arg, strerror(-r));
			return PW_EXIT_SYSTEM;
		}
		fprintf(stderr, "piworkfs: mount: detached a stale view at %s\n", arg);
	}
	char real[PATH_MAX];
	if (!realpath(arg, real)) {
		/* As sshfs and mount(8), never made on the fly (a typo would mount elsewhere):
		 * the error says how to make it. */
		if (errno == ENOENT)
			return missing_mountpoint(arg);
		pw_err("mount", "mountpoint %s: %s", arg, strerror(errno));
		return PW_EXIT_CONFIG;
	}
	_cleanup_free_ char *live = pw_mount_live_view_at(real);
	if (live) {
		pw_err("mount",
		       "%s already holds a live piworkfs view of %s (piworkfs umount %s first)",
		       real, live, real);
		return PW_EXIT_CONFIG;
	}
	if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
		pw_err("mount", "mountpoint %s is not a directory", real);
		return PW_EXIT_CONFIG;
	}
	if (pw_path_beneath(real, project) >= 0) {
		pw_err("mount",
		       "mountpoint %s is inside the project %s (the view would contain itself)",
		       real, project);
		return PW_EXIT_CONFIG;
	}
	if (pw_path_beneath(project, real) >= 0) {
		pw_err("mount",
		       "the project %s is inside the mountpoint %s (the view would hide it)",
		       project, real);
		return PW_EXIT_CONFIG;
	}
	if (!nonempty && !dir_is_empty(real)) {
		pw_err("mount", "mountpoint %s is not empty (use -o nonempty to mount over it)",
		       real);
		return PW_EXIT_CONFIG;
	}
	*ret = strdup(real);
	return *ret ? PW_EXIT_OK : PW_EXIT_SYSTEM;
}

/* The --only globs compile (the daemon compiles them again, for itself). */
static int check_lane(const pw_daemon_opts *o)
{
	pw_rule *lane = NULL;
	const char *err = NULL;
	size_t bad = 0;
	int r = pw_lane_parse(o->lane, o->n_lane, &lane, &bad, &err);

	if (r == 0) {
		pw_lane_free(lane, o->n_lane);
		return PW_EXIT_OK;
	}
	if (r == -ENOMEM)
		return PW_EXIT_SYSTEM;
	pw_err("mount", "--only '%s': %s", o->lane[bad], err ? err : "invalid glob");
	return PW_EXIT_USAGE;
}

static int check_mode_exists(const pw_cli_project *p, const char *mode)
{
	_cleanup_modeset_ pw_modeset *ms = NULL;
	bool bundled_ok = false;
	if (pw_cli_load_modes(p, &ms, &bundled_ok) < 0) {
		pw_err("mount", "cannot load modes");
		return PW_EXIT_CONFIG;
	}
	if (pw_modeset_find(ms, mode))
		return PW_EXIT_OK;
	pw_cli_unknown_mode("mount", ms, mode);
	return PW_EXIT_CONFIG;
}

/* The control socket's place, checked here so that its error is one line before anything
 * is mounted (the daemon checks again, for itself). */
static int check_socket(const pw_daemon_opts *o)
{
	_cleanup_free_ char *msg = NULL;
	int r = pw_daemon_check_socket(o, &msg);

	if (r == 0)
		return PW_EXIT_OK;
	pw_err("mount", "%s", msg ? msg : strerror(-r));
	return r == -ENOMEM ? PW_EXIT_SYSTEM : PW_EXIT_CONFIG;
}

/* Waits for the daemon's one-line report. Returns 0 and *ret_mode on "ok MODE". */
static int wait_ready(int fd, char *buf, size_t size)
{
	size_t len = 0;
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	while (len + 1 < size) {
		int r = poll(&pfd, 1, 60000);
		if (r <= 0)
			return -ETIMEDOUT;
		ssize_t n = read(fd, buf + len, size - len - 1);
		if (n <= 0)
			break;
		len += (size_t)n;
		if (memchr(buf, '\n', len))
			break;
	}
	buf[len] = '\0';
	char *nl = strchr(buf, '\n');
	if (nl)
		*nl = '\0';
	return len ? 0 : -EPIPE;
}

static void detach_stdio(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
}

/* One `piworkfs mount` command line, as parsed: the daemon's options and what they point
 * into (O keeps pointers into the copies owned here). */
typedef struct mount_cli {
	pw_daemon_opts o;
	const char *fuse_opts; /* -o as given, then its FUSE options only */
	bool json;
	const char *project_arg, *mp_arg;
	char *opts_copy, *fuse_only, *state_abs, *sockdir_abs, *agent_abs;
	int fuse_fd;		       /* --fuse-fd N as given (o.fuse_fd is the daemon's copy) */
	const char *lane[PW_LANE_MAX]; /* --only GLOB, each (o.lane points here) */
} mount_cli;

static void mount_cli_done(mount_cli *m)
{
	free(m->opts_copy);
	free(m->fuse_only);
	free(m->state_abs);
	free(m->sockdir_abs);
	free(m->agent_abs);
}

/* Applies option C (its argument in PO) to the mount_cli DATA: the options that are read
 * as numbers, sizes and ages, or checked, rather than stored as they are (mount_binds).
 * Returns an exit status. */
static int apply_mount_option(const pw_opts *po, int c, void *data)
{
	mount_cli *m = data;
	pw_daemon_opts *o = &m->o;
	double q;
	int r = pw_mount_number_option(o, c, po->arg);

	if (r != PW_EXIT_GO_ON)
		return r;
	switch (c) {
	case 'd':
		o->debug = o->foreground = true;
		break;
	case PW_OPT_AUDIT_QUEUE:
		if (pw_mount_parse_number("--audit-queue", po->arg, &q) < 0)
			return PW_EXIT_USAGE;
		o->audit_queue = (unsigned)q;
		break;
	case PW_OPT_FUSE_FD:
		o->use_fuse_fd = true;
		return pw_mount_fd_parse(po->arg, &m->fuse_fd);
	case PW_OPT_RUN:
		if (!pw_ctl_run_id_valid(po->arg)) {
			pw_err("mount", "bad run id '%s' for --run: 1 to %d letters and digits",
			       po->arg, PW_RUN_ID_MAX);
			return PW_EXIT_USAGE;
		}
		o->run_id = po->arg;
		o->run_pid = getppid(); /* `piworkfs run` runs us (cli/run/view.c) */
		break;
	case PW_OPT_ONLY:
		r = pw_opts_push(po, m->lane, &o->n_lane, PW_LANE_MAX, "--only globs");
		o->lane = m->lane;
		return r;
	}
	return PW_EXIT_OK;
}

/* Reads the options and the two operands into M. Returns PW_EXIT_GO_ON, or the exit status
 * (--help: 0). */
static int parse_mount_args(int argc, char **argv, pw_opts *po, mount_cli *m)
{
	pw_daemon_opts *o = &m->o;
	const pw_opt_bind binds[] = {{'m', .arg = &o->mode},
				     {'f', .flag = &o->foreground},
				     {'o', .arg = &m->fuse_opts},
				     {PW_OPT_NO_WATCH, .flag = &o->no_watch},
				     {PW_OPT_JSON, .flag = &m->json},
				     {PW_OPT_STATE_DB, .arg = &o->state_db},
				     {PW_OPT_SOCKET_DIR, .arg = &o->socket_dir},
				     {PW_OPT_AGENT_SOCKET, .arg = &o->agent_socket},
				     {PW_OPT_NO_AUDIT, .flag = &o->no_audit},
				     {PW_OPT_NO_ORIGINALS, .flag = &o->no_originals},
				     {PW_OPT_LOG_ALLOWED, .flag = &o->log_allowed},
				     {0}};
	int r = pw_opts_parse(
	    po, "mount", argc, argv,
	    &(pw_opts_use){
		.usage = MOUNT_USAGE, .binds = binds, .fn = apply_mount_option, .data = m});

	if (r != PW_EXIT_GO_ON)
		return r;
	if (po->n_operands != 2) {
		pw_err("mount",
		       po->n_operands < 2 ? "expected PROJECT and MOUNTPOINT, got %d argument%s "
					    "(see 'piworkfs mount --help')"
					  : "expected PROJECT and MOUNTPOINT, got %d arguments "
					    "(see 'piworkfs mount --help')",
		       po->n_operands, po->n_operands == 1 ? "" : "s");
		return PW_EXIT_USAGE;
	}
	m->project_arg = po->operands[0];
	m->mp_arg = po->operands[1];
	return PW_EXIT_GO_ON;
}

/* Splits -o into the view's options (applied to M->o) and the FUSE ones, then checks
 * those. Returns an exit status. */
static int take_mount_options(mount_cli *m)
{
	if (!m->fuse_opts)
		return PW_EXIT_OK;
	m->opts_copy = strdup(m->fuse_opts);
	int r = m->opts_copy ? pw_mount_split_options(m->opts_copy, &m->o, &m->fuse_only)
			     : PW_EXIT_SYSTEM;
	if (!r)
		r = pw_mount_check_fuse_options(m->fuse_only);
	if (!r)
		m->fuse_opts = m->fuse_only;
	return r;
}

/* *PATH made absolute against the working directory (into *OWN) when it is relative:
 * the daemon leaves the working directory (chdir "/"), and status reports the path.
 * WHAT names the option in an error. Returns an exit status. */
static int absolute_option(const char *what, const char **path, char **own)
{
	if (!*path || (*path)[0] == '/')
		return PW_EXIT_OK;
	_cleanup_free_ char *cwd = getcwd(NULL, 0);
	if (!cwd || asprintf(own, "%s/%s", cwd, *path) < 0) {
		*own = NULL;
		pw_err("mount", "%s %s: %s", what, *path, strerror(errno));
		return PW_EXIT_SYSTEM;
	}
	*path = *own;
	return PW_EXIT_OK;
}

/* Opens the project of ARG into P: an existing directory, not itself a view. Returns an
 * exit status. */
static int open_mount_project(const char *arg, pw_cli_project *p)
{
	const char *perr = NULL;
	struct stat st;

	if (stat(arg, &st) < 0) {
		pw_err("mount", "project %s %s", arg,
		       errno == ENOENT ? "does not exist" : strerror(errno));
		return PW_EXIT_CONFIG;
	}
	if (!S_ISDIR(st.st_mode)) {
		pw_err("mount", "project %s is not a directory", arg);
		return PW_EXIT_CONFIG;
	}
	if (pw_cli_project_open(arg, p, &perr) < 0) {
		pw_err("mount", "project %s: %s", arg, perr ? perr : "cannot open");
		return PW_EXIT_CONFIG;
	}
	if (p->backing) {
		/* A view of a view would stack two daemons and two policies, and its trust and
		 * last mode would be keyed by the view's path: mount the project itself. */
		pw_err("mount",
		       "%s is a piworkfs view of %s; mount the project itself "
		       "(piworkfs mount %s MOUNTPOINT)",
		       arg, p->backing, p->backing);
		return PW_EXIT_CONFIG;
	}
	return PW_EXIT_OK;
}

/* A daemon that is not root cannot act with each caller's credentials: every user of an
 * allow_other view would read and write with the owner's. Returns an exit status. */
static int check_allow_other(bool allow_other)
{
	if (!allow_other || geteuid() == 0)
		return PW_EXIT_OK;
	pw_err("mount", "-o allow_other needs the daemon to run as root (it acts with each "
			"caller's credentials); mount as root or without allow_other");
	return PW_EXIT_CONFIG;
}

/* Forks the daemon and waits for its one-line report into LINE: "ok MODE" or why not.
 * Returns an exit status; *RET_PID is the daemon. */
static int start_daemon(const pw_daemon_opts *o, pid_t *ret_pid, char *line, size_t size)
{
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		pw_err("mount", "pipe: %s", strerror(errno));
		return PW_EXIT_SYSTEM;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		pw_err("mount", "fork: %s", strerror(errno));
		return PW_EXIT_SYSTEM;
	}
	if (pid == 0) {
		close(pipefd[0]);
		setsid();
		if (chdir("/") < 0)
			_exit(PW_EXIT_SYSTEM);
		detach_stdio();
		_exit(pw_daemon_run(o, pipefd[1]) == 0 ? 0 : PW_EXIT_SYSTEM);
	}
	close(pipefd[1]);
	if (o->use_fuse_fd)
		close(o->fuse_fd); /* the daemon's now: the connection ends with it */
	int r = wait_ready(pipefd[0], line, size);
	close(pipefd[0]);
	*ret_pid = pid;
	if (r == 0 && startswith(line, "ok"))
		return PW_EXIT_OK;
	const char *why = r == -ETIMEDOUT		? "the daemon did not answer within 60 s"
			  : r < 0			? "the daemon exited before mounting"
			  : startswith(line, "error: ") ? line + 7
							: line;
	pw_err("mount", "%s", why);
	if (r == -ETIMEDOUT)
		kill(pid, SIGTERM);
	return PW_EXIT_SYSTEM;
}

/* Says that the view is mounted, once the kernel routes its requests to the daemon. */
static int report_mounted(const mount_cli *m, pid_t pid, const char *mode, const char *uring_off)
{
	struct stat st;

	if (stat(m->o.mountpoint, &st) < 0) {
		pw_err("mount", "the view at %s does not answer: %s", m->o.mountpoint,
		       strerror(errno));
		return PW_EXIT_SYSTEM;
	}
	if (m->json) {
		/* s*: io_uring_off only when there is a notice to give, absent (not null) else. */
		json_t *j = json_pack("{s:s, s:s, s:s, s:i, s:s*}", "project", m->o.project,
				      "mountpoint", m->o.mountpoint, "mode", mode, "pid", (int)pid,
				      "io_uring_off", uring_off);
		return pw_print_json(j) == 0 ? PW_EXIT_OK : PW_EXIT_SYSTEM;
	}
	printf("Mounted %s on %s in mode %s.\n", m->o.project, m->o.mountpoint, mode);
	return PW_EXIT_OK;
}

/* The mountpoint of a view this daemon mounts: an empty directory (unless nonempty), no
 * live view, stale views detached, /dev/fuse usable, an old daemon there gone. */
static int prepare_own_mount(mount_cli *m, const char *project, bool nonempty, char **mp)
{
	int r = prepare_mountpoint(m->mp_arg, project, nonempty, mp);

	if (!r)
		r = check_allow_other(m->o.allow_other);
	if (!r)
		r = check_fuse_device();
	if (!r)
		wait_for_old_daemon(m->o.socket_dir, *mp);
	return r;
}

/* A daemon that still answers for MP (a live view below the new mount, or one that will
 * not exit): the control socket's name is taken. Returns an exit status. */
static int check_no_daemon(const char *socket_dir, const char *mp)
{
	_cleanup_free_ char *sock = NULL;
	int r = socket_dir ? pw_ctl_socket_path(socket_dir, mp, &sock)
			   : pw_ctl_view_socket(mp, -1, &sock);
	pid_t pid = r == 0 ? pw_mount_daemon_pid(sock) : 0;

	if (pid <= 0)
		return PW_EXIT_OK;
	pw_err("mount", "a piworkfs daemon (pid %d) still serves a view at %s", (int)pid, mp);
	return PW_EXIT_CONFIG;
}

/*
 * The mount of --fuse-fd, made by another process (mount_fd.c): found in mountinfo, never
 * entered. The kernel's checks are the mount's own options: allow_other and
 * default_permissions come from there (the daemon's answers depend on them), and *FOPTS
 * gets default_permissions when the mount has it. Returns an exit status.
 */
static int prepare_passed_mount(mount_cli *m, const char *project, char **fopts, char **mp)
{
	pw_mount_fd_facts f = {0};
	int r = pw_mount_fd_mountpoint(m->mp_arg, project, &f);

	*mp = f.mountpoint;
	m->o.allow_other = f.allow_other;
	if (!r)
		r = check_allow_other(f.allow_other);
	if (r)
		return r;
	wait_for_old_daemon(m->o.socket_dir, *mp);
	r = check_no_daemon(m->o.socket_dir, *mp);
	if (r || !f.default_permissions)
		return r;
	char *with = NULL;
	if (asprintf(&with, "%s%sdefault_permissions", *fopts, **fopts ? "," : "") < 0)
		return PW_EXIT_SYSTEM;
	free(*fopts);
	*fopts = with;
	return PW_EXIT_OK;
}

/* The descriptor of --fuse-fd, before anything else is looked at: -o holds none of the
 * mount's options, and the descriptor is a mounted /dev/fuse nobody serves. */
static int check_passed_fd(const mount_cli *m)
{
	int r = pw_mount_fd_check_options(m->fuse_opts);

	return r ? r : pw_mount_fd_check(m->fuse_fd);
}

/* Everything checked before anything is mounted, in the order of the messages a user
 * meets: options, descriptor, project, mode, mountpoint, FUSE, control socket, transport.
 * Fills M->o; *MP and *FOPTS and *URING_OFF are owned by the caller. Returns an exit
 * status. */
static int prepare_mount(mount_cli *m, pw_cli_project *p, char **mp, char **fopts, char **uring_off)
{
	pw_daemon_opts *o = &m->o;
	bool nonempty, allow_other;
	int r = o->n_lane ? check_lane(o) : PW_EXIT_OK;

	if (!r)
		r = take_mount_options(m);

	if (!r && o->use_fuse_fd)
		r = check_passed_fd(m);
	if (!r)
		r = absolute_option("--state-db", &o->state_db, &m->state_abs);
	if (!r)
		r = absolute_option("--socket-dir", &o->socket_dir, &m->sockdir_abs);
	if (!r)
		r = absolute_option("--agent-socket", &o->agent_socket, &m->agent_abs);
	if (!r)
		r = open_mount_project(m->project_arg, p);
	if (!r && o->mode)
		r = check_mode_exists(p, o->mode);
	if (r)
		return r;
	*fopts = pw_mount_strip_nonempty(m->fuse_opts, &nonempty, &allow_other);
	if (!*fopts)
		return PW_EXIT_SYSTEM;
	o->allow_other = allow_other;
	r = o->use_fuse_fd ? prepare_passed_mount(m, p->root, fopts, mp)
			   : prepare_own_mount(m, p->root, nonempty, mp);
	if (r)
		return r;
	o->project = p->root;
	o->mountpoint = *mp;
	r = check_socket(o);
	if (!r) /* last: its line says the mount goes ahead */
		r = check_uring(*fopts, o->foreground, m->json, uring_off);
	o->fuse_opts = *fopts;
	o->bundled_dir = p->bundled_dir;
	o->global_dir = p->global_dir;
	if (!r && o->use_fuse_fd && (o->fuse_fd = pw_mount_fd_take(m->fuse_fd)) < 0)
		r = PW_EXIT_SYSTEM;
	return r;
}

/* The daemon forked off: returns once the view answers, saying so. */
static int mount_detached(const mount_cli *m, const char *uring_off)
{
	char line[1200];
	pid_t pid;
	int r = start_daemon(&m->o, &pid, line, sizeof(line));

	return r ? r : report_mounted(m, pid, line[2] == ' ' ? line + 3 : "?", uring_off);
}

int cmd_mount(int argc, char **argv)
{
	_cleanup_opts_ pw_opts po = {0};
	_cleanup_project_ pw_cli_project p = {0};
	_cleanup_free_ char *mp = NULL, *fopts = NULL, *uring_off = NULL;
	mount_cli m = {0};
	int r = parse_mount_args(argc, argv, &po, &m);
	bool done = r != PW_EXIT_GO_ON;

	if (!done)
		r = prepare_mount(&m, &p, &mp, &fopts, &uring_off);
	if (!done && !r)
		r = m.o.foreground ? (pw_daemon_run(&m.o, -1) == 0 ? PW_EXIT_OK : PW_EXIT_SYSTEM)
				   : mount_detached(&m, uring_off);
	mount_cli_done(&m);
	return r;
}
