/* SPDX-License-Identifier: MIT */
/*
 * `piworkfs mount` and `piworkfs umount`. Mount validates everything it can in the
 * foreground, with one-line errors, then forks the daemon and returns only once the view
 * answers (or with the daemon's own reason for failing). A stale view left by a killed
 * daemon (ENOTCONN) is detached first.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include "cli.h"
#include "ctl_client.h"
#include "daemon.h"
#include "output.h"
#include "project.h"

#define MOUNT_USAGE                                                                                \
	"Usage: piworkfs mount [OPTIONS] PROJECT MOUNTPOINT\n"                                      \
	"\n"                                                                                       \
	"Mounts PROJECT at MOUNTPOINT as a view whose writes the active mode limits.\n"             \
	"Without --mode the project's last mode is restored; a project never seen starts in\n"     \
	"plan (read-only).\n"                                                                      \
	"\n"                                                                                       \
	"  -m, --mode MODE     start in MODE\n"                                                    \
	"  -f, --foreground    stay in the foreground, log to stderr\n"                            \
	"  -o OPTIONS          mount options: allow_other, nonempty, and FUSE options\n"           \
	"  -d, --debug         log every FUSE request (implies -f)\n"                              \
	"      --timeout SEC   kernel cache timeout (default 86400; kept true by invalidation)\n" \
	"      --no-watch      do not follow changes made outside the view (testing only)\n"       \
	"      --no-audit      record no audit events\n"                                         \
	"      --log-allowed   also record allowed mutations in the audit log\n"                 \
	"      --state-db PATH the state database (default: $XDG_STATE_HOME/piworkfs/state.db)\n" \
	"      --socket-dir DIR  where the control socket goes (default: $XDG_RUNTIME_DIR/piworkfs)\n" \
	"      --json          print the result as JSON\n"                                         \
	"  -h, --help          this help\n"

#define UMOUNT_USAGE                                                                               \
	"Usage: piworkfs umount [--lazy] MOUNTPOINT\n"                                              \
	"\n"                                                                                       \
	"Unmounts a view (plain `fusermount3 -u MOUNTPOINT` works too).\n"

/* Is PATH the mountpoint of a live piworkfs view? Returns its source (project) or NULL. */
static char *live_view_at(const char *path)
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
static int detach_stale(const char *mp)
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

static bool path_within(const char *inner, const char *outer)
{
	size_t n = strlen(outer);
	if (streq(outer, "/"))
		return true;
	return strncmp(inner, outer, n) == 0 && (inner[n] == '/' || inner[n] == '\0');
}

/* Removes "nonempty" from the -o list (the check is ours), noting whether it was there. */
static char *strip_nonempty(const char *opts, bool *ret_nonempty, bool *ret_allow_other)
{
	*ret_nonempty = false;
	*ret_allow_other = false;
	if (!opts)
		return strdup("");
	_cleanup_free_ char *copy = strdup(opts);
	char *out = calloc(1, strlen(opts) + 1);
	if (!copy || !out) {
		free(out);
		return NULL;
	}
	char *save = NULL;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (streq(tok, "nonempty")) {
			*ret_nonempty = true;
			continue;
		}
		if (streq(tok, "allow_other")) {
			*ret_allow_other = true;
			continue;
		}
		if (*out)
			strcat(out, ",");
		strcat(out, tok);
	}
	return out;
}

/* Resolves and checks the mountpoint. Returns an exit status; *ret is the real path. */
static int prepare_mountpoint(const char *arg, const char *project, bool nonempty, char **ret)
{
	struct stat st;
	if (stat(arg, &st) < 0 && errno == ENOTCONN) {
		char abs[PATH_MAX];
		if (!realpath(arg, abs) && errno != ENOTCONN)
			snprintf(abs, sizeof(abs), "%s", arg);
		int r = detach_stale(arg);
		if (r < 0) {
			pw_err("mount", "%s is a stale view (its daemon died) and could not be detached: %s",
			       arg, strerror(-r));
			return PW_EXIT_SYSTEM;
		}
		fprintf(stderr, "piworkfs: mount: detached a stale view at %s\n", arg);
	}
	char real[PATH_MAX];
	if (!realpath(arg, real)) {
		pw_err("mount", "mountpoint %s: %s", arg, strerror(errno));
		return PW_EXIT_CONFIG;
	}
	_cleanup_free_ char *live = live_view_at(real);
	if (live) {
		pw_err("mount", "%s already holds a live piworkfs view of %s (piworkfs umount %s first)",
		       real, live, real);
		return PW_EXIT_CONFIG;
	}
	if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
		pw_err("mount", "mountpoint %s is not a directory", real);
		return PW_EXIT_CONFIG;
	}
	if (path_within(real, project)) {
		pw_err("mount", "mountpoint %s is inside the project %s (the view would contain itself)",
		       real, project);
		return PW_EXIT_CONFIG;
	}
	if (path_within(project, real)) {
		pw_err("mount", "the project %s is inside the mountpoint %s (the view would hide it)",
		       project, real);
		return PW_EXIT_CONFIG;
	}
	if (!nonempty && !dir_is_empty(real)) {
		pw_err("mount", "mountpoint %s is not empty (use -o nonempty to mount over it)", real);
		return PW_EXIT_CONFIG;
	}
	*ret = strdup(real);
	return *ret ? PW_EXIT_OK : PW_EXIT_SYSTEM;
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
	char list[1024] = "";
	for (size_t i = 0; i < pw_modeset_count(ms); i++) {
		if (*list)
			strncat(list, ", ", sizeof(list) - strlen(list) - 1);
		strncat(list, pw_modeset_get(ms, i)->name, sizeof(list) - strlen(list) - 1);
	}
	pw_err("mount", "unknown mode '%s' (available: %s)", mode, list);
	return PW_EXIT_CONFIG;
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

int cmd_mount(int argc, char **argv)
{
	static const struct option opts[] = {
		{"mode", required_argument, NULL, 'm'}, {"foreground", no_argument, NULL, 'f'},
		{"debug", no_argument, NULL, 'd'},      {"timeout", required_argument, NULL, 'T'},
		{"no-watch", no_argument, NULL, 'W'},   {"json", no_argument, NULL, 'J'},
		{"help", no_argument, NULL, 'h'},       {"state-db", required_argument, NULL, 'S'},
		{"socket-dir", required_argument, NULL, 'D'}, {"audit-queue", required_argument, NULL, 'Q'},
		{"no-audit", no_argument, NULL, 'A'},   {"log-allowed", no_argument, NULL, 'L'},
		{0},
	};
	pw_daemon_opts o = {0};
	const char *fuse_opts = NULL;
	bool json = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+m:fdo:h", opts, NULL)) != -1) {
		switch (c) {
		case 'm': o.mode = optarg; break;
		case 'f': o.foreground = true; break;
		case 'd': o.debug = o.foreground = true; break;
		case 'o': fuse_opts = optarg; break;
		case 'T': o.cache_timeout = strtod(optarg, NULL); break;
		case 'W': o.no_watch = true; break;
		case 'J': json = true; break;
		case 'S': o.state_db = optarg; break;
		case 'D': o.socket_dir = optarg; break;
		case 'Q': o.audit_queue = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'A': o.no_audit = true; break;
		case 'L': o.log_allowed = true; break;
		case 'h': return pw_usage("mount", MOUNT_USAGE, false);
		default: return pw_err_option("mount", c, argv);
		}
	}
	if (argc - optind != 2) {
		pw_err("mount", "expected PROJECT and MOUNTPOINT (see piworkfs mount --help)");
		return PW_EXIT_USAGE;
	}
	/* The daemon leaves the working directory (chdir "/"): a relative --state-db means
	 * the caller's directory, and status reports it as an absolute path. */
	_cleanup_free_ char *state_abs = NULL;
	if (o.state_db && o.state_db[0] != '/') {
		_cleanup_free_ char *cwd = getcwd(NULL, 0);
		if (!cwd || asprintf(&state_abs, "%s/%s", cwd, o.state_db) < 0) {
			pw_err("mount", "--state-db %s: %s", o.state_db, strerror(errno));
			return PW_EXIT_SYSTEM;
		}
		o.state_db = state_abs;
	}
	_cleanup_project_ pw_cli_project p = {0};
	const char *perr = NULL;
	struct stat st;
	if (stat(argv[optind], &st) < 0 || !S_ISDIR(st.st_mode)) {
		pw_err("mount", "project %s is not a directory", argv[optind]);
		return PW_EXIT_CONFIG;
	}
	if (pw_cli_project_open(argv[optind], &p, &perr) < 0) {
		pw_err("mount", "project %s: %s", argv[optind], perr ? perr : "cannot open");
		return PW_EXIT_CONFIG;
	}
	if (o.mode) {
		int r = check_mode_exists(&p, o.mode);
		if (r)
			return r;
	}
	bool nonempty, allow_other;
	_cleanup_free_ char *fopts = strip_nonempty(fuse_opts, &nonempty, &allow_other);
	_cleanup_free_ char *mp = NULL;
	int r = prepare_mountpoint(argv[optind + 1], p.root, nonempty, &mp);
	if (r)
		return r;
	if (allow_other && geteuid() != 0) {
		/* A daemon that is not root cannot act with each caller's credentials: every user
		 * of the view would read and write with the owner's. */
		pw_err("mount", "-o allow_other needs the daemon to run as root (it acts with each "
				"caller's credentials); mount as root or without allow_other");
		return PW_EXIT_CONFIG;
	}
	o.project = p.root;
	o.mountpoint = mp;
	o.fuse_opts = fopts;
	o.allow_other = allow_other;
	o.bundled_dir = p.bundled_dir;
	o.global_dir = p.global_dir;

	if (o.foreground)
		return pw_daemon_run(&o, -1) == 0 ? PW_EXIT_OK : PW_EXIT_SYSTEM;

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
		_exit(pw_daemon_run(&o, pipefd[1]) == 0 ? 0 : PW_EXIT_SYSTEM);
	}
	close(pipefd[1]);
	char line[1200];
	r = wait_ready(pipefd[0], line, sizeof(line));
	close(pipefd[0]);
	if (r < 0 || !startswith(line, "ok")) {
		const char *why = r == -ETIMEDOUT ? "the daemon did not answer within 60 s"
			: r < 0 ? "the daemon exited before mounting"
			: startswith(line, "error: ") ? line + 7 : line;
		pw_err("mount", "%s", why);
		if (r == -ETIMEDOUT)
			kill(pid, SIGTERM);
		return PW_EXIT_SYSTEM;
	}
	const char *mode = line[2] == ' ' ? line + 3 : "?";
	/* The daemon answered; make sure the kernel routes requests to it. */
	if (stat(mp, &st) < 0) {
		pw_err("mount", "the view at %s does not answer: %s", mp, strerror(errno));
		return PW_EXIT_SYSTEM;
	}
	if (json) {
		json_t *j = json_pack("{s:s, s:s, s:s, s:i}", "project", p.root, "mountpoint", mp,
				      "mode", mode, "pid", (int)pid);
		return pw_print_json(j) == 0 ? PW_EXIT_OK : PW_EXIT_SYSTEM;
	}
	printf("Mounted %s on %s in mode %s.\n", p.root, mp, mode);
	return PW_EXIT_OK;
}

int cmd_umount(int argc, char **argv)
{
	static const struct option opts[] = {
		{"lazy", no_argument, NULL, 'z'}, {"help", no_argument, NULL, 'h'}, {0}};
	bool lazy = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+zh", opts, NULL)) != -1) {
		switch (c) {
		case 'z': lazy = true; break;
		case 'h': return pw_usage("umount", UMOUNT_USAGE, false);
		default: return pw_err_option("umount", c, argv);
		}
	}
	if (argc - optind != 1) {
		pw_err("umount", "expected MOUNTPOINT");
		return PW_EXIT_USAGE;
	}
	const char *arg = argv[optind];
	struct stat st;
	if (stat(arg, &st) < 0 && errno == ENOTCONN) {
		int r = detach_stale(arg);
		if (r < 0) {
			pw_err("umount", "%s: %s", arg, strerror(-r));
			return PW_EXIT_SYSTEM;
		}
		return PW_EXIT_OK;
	}
	char real[PATH_MAX];
	if (!realpath(arg, real)) {
		pw_err("umount", "%s: %s", arg, strerror(errno));
		return PW_EXIT_CONFIG;
	}
	_cleanup_free_ char *live = live_view_at(real);
	if (!live) {
		pw_err("umount", "%s is not a piworkfs view", real);
		return PW_EXIT_NO_VIEW;
	}
	pid_t pid = fork();
	if (pid < 0)
		return PW_EXIT_SYSTEM;
	if (pid == 0) {
		if (lazy)
			execlp("fusermount3", "fusermount3", "-u", "-z", real, (char *)NULL);
		else
			execlp("fusermount3", "fusermount3", "-u", real, (char *)NULL);
		_exit(127);
	}
	int status;
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		pw_err("umount", "fusermount3 -u %s failed (busy? try --lazy)", real);
		return PW_EXIT_SYSTEM;
	}
	return PW_EXIT_OK;
}
