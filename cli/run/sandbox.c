/* SPDX-License-Identifier: MIT */
/*
 * The bubblewrap command line of `piworkfs run` (run.h, docs/SECURITY.md).
 *
 * Why these options, in this order (bwrap applies them in order, later mounts on top):
 *
 *   --unshare-user --cap-drop ALL
 *       the command has no capability in the sandbox's namespaces, even when the caller is
 *       root, so it can neither unmount the view from over the project nor mount anything
 *       there. It may make user namespaces of its own (an agent's own sandbox, bwrap in
 *       bwrap, does): every mount it inherits into one is locked by the kernel, so no
 *       unmount, move, remount or non-recursive bind there reveals what a mount below
 *       covers, and a fresh /proc or /sys is refused while ours have covered entries
 *       (docs/SECURITY.md, "Namespaces inside the sandbox").
 *   --cap-add CAP_SETFCAP, for root only
 *       the kernel lets a new user namespace map its parent's uid 0 only when its creator
 *       held CAP_SETFCAP, and a nested bwrap run by root maps uid 0 (another user maps
 *       their own uid, which needs nothing). What it adds is setting file capabilities on
 *       the files uid 0 owns, which that uid can already make set-user-ID; no_new_privs
 *       (bwrap's) keeps either from granting anything inside.
 *   --unshare-pid, a fresh --proc /proc
 *       no process outside is visible, so /proc/PID/cwd and /proc/PID/root of the daemon
 *       or of the caller's shell cannot lead to the backing directory.
 *   --new-session
 *       the command cannot push input into the caller's terminal (TIOCSTI); run/exec.c
 *       forwards the terminal's signals instead. When the caller's stdin is a terminal,
 *       the command's terminal is a pty of the sandbox's own devpts (--dev): the launcher
 *       `piworkfs __run-tty` (run/tty.c) opens it inside, hands its master to us (run/pty.c)
 *       and makes it the controlling terminal of a session of its own: /dev/tty, job
 *       control and TIOCSTI inside all reach that pty, never the caller's terminal, and no
 *       other terminal of the host is reachable (the host's devpts is not mounted inside).
 *   --ro-bind over /sys and over /proc's kernel-wide entries (/proc/sys, sysrq-trigger, ...)
 *       run as root, the command is uid 0 of the host without capabilities, and the kernel
 *       lets that uid write most sysctls (core_pattern: a program run as real root outside
 *       every namespace) and sysfs attributes by file mode alone. bwrap's own --proc
 *       covers /proc/sys only when access(W_OK) on the directory succeeds, which procfs
 *       never grants, so it stays writable. Only the per-process entries stay writable.
 *   --bind / / (--ro-bind / / with --ro-host), --dev /dev, --share binds
 *       the host as it is; the project becomes reachable only through what follows.
 *   --tmpfs over the control socket directories and the state database directory
 *       the operator sockets (full authority), the private mountpoint of our view, the
 *       audit log, the trust and last-mode records and the originals kept for undo are
 *       not there. The database is the one the view's daemon reports (`status`), wherever
 *       `mount --state-db` put it: its directory when it holds nothing else (but the
 *       originals store), else /dev/null over each of its files and a tmpfs over the
 *       originals store beside it.
 *   --ro-bind over the global and bundled mode directories
 *       the agent cannot plant a looser mode that a later reload or mount would load (the
 *       global directory is created first when missing, so it cannot be created inside).
 *   --bind VIEW PROJECT, VIEW over every other live view of the project outside it
 *       (a run's mode is its own: a bare view in another mode is no way around it),
 *   and VIEW over every other path of the backing directory
 *       the project's own absolute path shows the view; so does every other mount of the
 *       same filesystem that reaches the backing directory (found in mountinfo and
 *       confirmed by device and inode), so walking / finds no way around the view.
 *   --ro-bind AGENT AGENT, PIWORKFS_SOCKET=AGENT
 *       the only control socket inside is the restricted one.
 */
#include <dirent.h>
#include <errno.h>
#include <linux/limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "ctl/sockets.h"
#include "client/ctl_client.h"
#include "output.h"
#include "path.h"
#include "procfs.h"
#include "run.h"
#include "ctl/run_id.h"
#include "store/state.h"
#include "pw_limits.h"
#include "util.h"

/* ---- argument vector ------------------------------------------------------------------- */

void pw_run_argv_done(pw_run_argv *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
	*a = (pw_run_argv){0};
}

int pw_run_argv_push(pw_run_argv *a, const char *s)
{
	if (PW_GROW(a->v, a->cap, a->n + 1, 64) < 0) /* and room for the closing NULL */
		return -ENOMEM;
	a->v[a->n] = strdup(s);
	if (!a->v[a->n])
		return -ENOMEM;
	a->v[++a->n] = NULL;
	return 0;
}

int pw_run_argv_push_all(pw_run_argv *a, const char *const *words)
{
	int r = 0;

	for (; r == 0 && *words; words++)
		r = pw_run_argv_push(a, *words);
	return r;
}

int pw_run_argv_finish(pw_run_argv *a, int r, pw_run_argv *ret)
{
	if (r < 0) {
		if (r == -ENOMEM)
			pw_err("run", "out of memory");
		pw_run_argv_done(a);
		return r;
	}
	*ret = *a;
	*a = (pw_run_argv){0};
	return 0;
}

static int push2(pw_run_argv *a, const char *opt, const char *x)
{
	int r = pw_run_argv_push(a, opt);
	return r < 0 ? r : pw_run_argv_push(a, x);
}

static int push3(pw_run_argv *a, const char *opt, const char *x, const char *y)
{
	int r = push2(a, opt, x);
	return r < 0 ? r : pw_run_argv_push(a, y);
}

/* ---- paths ----------------------------------------------------------------------------- */

/* ROOT joined with REST, where REST is "" or starts with '/'. */
static char *join(const char *root, const char *rest)
{
	char *out;

	if (streq(root, "/") && rest[0])
		root = "";
	if (asprintf(&out, "%s%s", root, rest) < 0)
		return NULL;
	return out;
}

/*
 * Other paths of the backing directory PROJECT: for every mount of the same device whose
 * root contains PROJECT's place in that filesystem, the same place under its mountpoint,
 * kept when stat() confirms it is the very directory. Paths inside PROJECT are left out
 * (the view already covers them). Pushes "--bind VIEW ALIAS" for each.
 */
static int bind_aliases(pw_run_argv *a, const char *project, const char *view)
{
	pw_mountinfo *m = NULL;
	size_t n = 0, home = SIZE_MAX, home_len = 0;
	_cleanup_free_ char *fsrel = NULL;
	struct stat pst;
	int r;

	if (stat(project, &pst) < 0)
		return negative_errno();
	r = pw_mountinfo_read(PW_MOUNTINFO_LINES_MAX, &m, &n);
	if (r < 0)
		return r;
	/* The mount PROJECT lies on: the longest mountpoint above it, the latest on a tie. */
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(m[i].mountpoint);
		if (pw_path_beneath(project, m[i].mountpoint) >= 0 &&
		    (home == SIZE_MAX || len >= home_len)) {
			home = i;
			home_len = len;
		}
	}
	if (home == SIZE_MAX)
		goto out;
	fsrel = join(m[home].root, streq(m[home].mountpoint, "/") ? project : project + home_len);
	if (!fsrel) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n && r == 0; i++) {
		_cleanup_free_ char *alias = NULL;
		size_t rlen = strlen(m[i].root);
		struct stat st;

		if (m[i].maj != m[home].maj || m[i].min != m[home].min ||
		    pw_path_beneath(fsrel, m[i].root) < 0)
			continue;
		alias = join(m[i].mountpoint, streq(m[i].root, "/") ? fsrel : fsrel + rlen);
		if (!alias) {
			r = -ENOMEM;
			break;
		}
		if (pw_path_beneath(alias, project) >= 0 || stat(alias, &st) < 0 ||
		    st.st_dev != pst.st_dev || st.st_ino != pst.st_ino)
			continue;
		r = push3(a, "--bind", view, alias);
	}
out:
	pw_mountinfo_free(m, n);
	return r;
}

/* ---- covered directories ------------------------------------------------------------- */

static bool is_dir(const char *path)
{
	struct stat st;
	return path && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int cover(pw_run_argv *a, const char *dir)
{
	if (!is_dir(dir))
		return 0; /* nothing there to hide (and no mountpoint to create on the host) */
	return push2(a, "--tmpfs", dir);
}

static char *dir_of(const char *path)
{
	char *d = strdup(path), *slash;

	if (!d)
		return NULL;
	slash = strrchr(d, '/');
	if (!slash || slash == d) {
		free(d);
		return NULL; /* in "/": refuse to cover the whole host */
	}
	*slash = '\0';
	return d;
}

/* A database's companion files, beside it: SQLite names them by suffix. */
static const char *const db_suffixes[] = {"", "-wal", "-shm", "-journal"};

/* The originals store (fs/undo/originals.h) lives beside the database, in this directory. */
#define ORIGINALS_DIR "originals"

/* Does DIR hold nothing but the database BASE, its companions and the originals store (a
 * directory of its own, as the default one is)? False when it cannot be listed. */
static bool holds_only_db(const char *dir, const char *base)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	bool only = d != NULL;
	size_t blen = strlen(base);

	while (only && (de = readdir(d))) {
		bool ours = streq(de->d_name, ".") || streq(de->d_name, "..") ||
			    streq(de->d_name, ORIGINALS_DIR);
		for (size_t i = 0; !ours && i < ELEMENTSOF(db_suffixes); i++)
			ours = strncmp(de->d_name, base, blen) == 0 &&
			       streq(de->d_name + blen, db_suffixes[i]);
		only = ours;
	}
	if (d)
		closedir(d);
	return only;
}

/*
 * Hides the view's state database DB (its real path), unless one of COVERED (directories
 * already under a tmpfs) holds it: a directory of its own goes under a tmpfs, so files
 * SQLite makes later are hidden too; in a directory shared with other files, each of its
 * files that exists is covered by /dev/null (read-only), and the originals store beside it
 * by a tmpfs: the agent must neither read the contents kept nor erase them. A database
 * inside the project would show through the view: refused.
 */
static int cover_state_db(pw_run_argv *a, const pw_run_view *v, const char *const *covered,
			  size_t n_covered)
{
	_cleanup_free_ char *real = NULL, *dir = NULL;
	int r = 0;

	if (!v->state_db)
		return 0;
	real = realpath(v->state_db, NULL);
	if (!real && errno == ENOENT)
		return 0; /* the daemon has no database there: nothing to hide */
	if (!real) {
		r = negative_errno();
		pw_err("run", "the view's state database %s: %s", v->state_db, strerror(-r));
		return r;
	}
	if (pw_path_beneath(real, v->project) >= 0 || pw_path_beneath(real, v->mountpoint) >= 0) {
		pw_err("run",
		       "the view's state database %s lies inside the project, where the "
		       "sandbox cannot hide it; mount the view with --state-db elsewhere",
		       real);
		return -EINVAL;
	}
	for (size_t i = 0; i < n_covered; i++)
		if (covered[i] && is_dir(covered[i]) && pw_path_beneath(real, covered[i]) >= 0)
			return 0;
	dir = dir_of(real);
	if (dir && holds_only_db(dir, real + strlen(dir) + 1))
		return cover(a, dir);
	for (size_t i = 0; i < ELEMENTSOF(db_suffixes) && r == 0; i++) {
		_cleanup_free_ char *f = NULL;
		struct stat st;

		if (asprintf(&f, "%s%s", real, db_suffixes[i]) < 0)
			return -ENOMEM;
		if (lstat(f, &st) == 0 && S_ISREG(st.st_mode))
			r = push3(a, "--ro-bind", "/dev/null", f);
	}
	if (r == 0 && dir) {
		_cleanup_free_ char *orig = NULL;

		if (asprintf(&orig, "%s/" ORIGINALS_DIR, dir) < 0)
			return -ENOMEM;
		r = cover(a, orig);
	}
	return r;
}

/* The directories that hold control sockets and state: tmpfs over each existing one; then
 * the view's own database wherever it is. */
static int cover_daemon_dirs(pw_run_argv *a, const pw_run_view *v)
{
	_cleanup_free_ char *sockdir = dir_of(v->socket), *agentdir = dir_of(v->agent_socket);
	_cleanup_free_ char *defdir = NULL, *rt = NULL, *state = NULL, *statedir = NULL;
	_cleanup_free_ char *xdg_state = NULL, *home_state = NULL;
	const char *env;
	int r = 0;

	if (!sockdir || !agentdir) {
		pw_err("run", "the view's control socket %s lies in /", v->socket);
		return -EINVAL;
	}
	(void)pw_ctl_default_dir(&defdir);
	env = getenv("XDG_RUNTIME_DIR");
	if (env && env[0] == '/' && asprintf(&rt, "%s/piworkfs", env) < 0)
		return -ENOMEM;
	state = pw_state_default_path();
	if (state) {
		statedir = dir_of(state);
		if (!statedir) {
			pw_err("run",
			       "the state database %s lies directly in /; the sandbox could "
			       "not hide it (set PIWORKFS_STATE_DB or XDG_STATE_HOME)",
			       state);
			return -EINVAL;
		}
	}
	env = getenv("XDG_STATE_HOME");
	if (env && env[0] == '/' && asprintf(&xdg_state, "%s/piworkfs", env) < 0)
		return -ENOMEM;
	env = getenv("HOME");
	if (env && env[0] == '/' && asprintf(&home_state, "%s/.local/state/piworkfs", env) < 0)
		return -ENOMEM;

	const char *dirs[] = {sockdir,	 agentdir,	  defdir,
			      rt,	 "/run/piworkfs", statedir,
			      xdg_state, home_state,	  "/var/lib/piworkfs"};
	for (size_t i = 0; i < ELEMENTSOF(dirs) && r == 0; i++) {
		bool dup = false;
		for (size_t j = 0; j < i; j++)
			dup = dup || streq_ptr(dirs[i], dirs[j]);
		if (dirs[i] && !dup)
			r = cover(a, dirs[i]);
	}
	if (r == 0)
		r = cover_state_db(a, v, dirs, ELEMENTSOF(dirs));
	return r;
}

/* Hides the control socket directory and the state database of the live view at
 * MOUNTPOINT (another view of the project than the run's): the agent must reach neither
 * its operator socket nor its audit log and originals, wherever `mount --socket-dir` or
 * `--state-db` put them. A daemon that does not answer has no socket to reach. */
static int cover_view_of(pw_run_argv *a, const pw_run_view *run, const pw_ctl_mount *m)
{
	_cleanup_free_ char *sock = NULL, *sockdir = NULL;
	json_t *res = NULL;
	int r;

	if (pw_ctl_view_socket(m->mountpoint, m->uid, &sock) < 0)
		return 0;
	sockdir = dir_of(sock);
	r = sockdir ? cover(a, sockdir) : 0;
	if (r == 0 && pw_ctl_call_socket(sock, "status", NULL, &res, NULL, NULL) == 0) {
		json_t *j = json_object_get(res, "state_db");
		const char *db = json_string_value(j);
		pw_run_view other = {
		    .project = run->project, .mountpoint = m->mountpoint, .state_db = (char *)db};
		if (!j) {
			/* It could keep one anywhere: fail closed, as for the run's own. */
			pw_err("run",
			       "the daemon of the view at %s does not say where its state "
			       "database is (an older piworkfs?); unmount it first",
			       m->mountpoint);
			r = -EPROTO;
		} else if (db && !streq_ptr(db, run->state_db)) {
			r = cover_state_db(a, &other, NULL, 0);
		}
	}
	json_decref(res);
	return r;
}

/*
 * The project's other live views outside it (the person's bare views; other runs' own
 * views lie in the covered socket directory): each shows the run's view inside, so that
 * the run's mode holds at every path of the project there, however another view's mode
 * is; their control sockets and databases are covered. Pushes "--bind VIEW MOUNTPOINT"
 * for each.
 */
static int cover_other_views(pw_run_argv *a, const pw_run_view *v)
{
	pw_ctl_mount *m = NULL;
	size_t n = 0;
	int r = pw_ctl_list_mounts(&m, &n);

	if (r < 0) {
		pw_err("run", "cannot list the other views of %s: %s", v->project, strerror(-r));
		return r;
	}
	for (size_t i = 0; i < n && r == 0; i++) {
		_cleanup_free_ char *run = pw_ctl_run_of_mountpoint(m[i].mountpoint);

		if (run || !streq_ptr(m[i].source, v->project) ||
		    streq(m[i].mountpoint, v->mountpoint) ||
		    pw_path_beneath(m[i].mountpoint, v->project) >= 0)
			continue;
		r = cover_view_of(a, v, &m[i]);
		if (r == 0)
			r = push3(a, "--bind", v->mountpoint, m[i].mountpoint);
	}
	pw_ctl_mounts_free(m, n);
	return r;
}

/* The mode directories, read-only. A missing global directory is created (0700, like
 * `mkdir -p`) so that the agent cannot create it with modes of its own. */
static int protect_mode_dirs(pw_run_argv *a, const char *const dirs[2])
{
	int r = 0;

	for (size_t i = 0; i < 2 && r == 0; i++) {
		if (!dirs[i] || dirs[i][0] != '/')
			continue;
		if (i == 0 && !is_dir(dirs[i])) {
			_cleanup_free_ char *copy = strdup(dirs[i]);
			if (!copy)
				return -ENOMEM;
			for (char *p = copy + 1; *p; p++) {
				if (*p != '/')
					continue;
				*p = '\0';
				(void)mkdir(copy, 0700);
				*p = '/';
			}
			if (mkdir(copy, 0700) < 0 && errno != EEXIST) {
				r = negative_errno();
				pw_err("run", "cannot create %s: %s", dirs[i], strerror(-r));
				return r;
			}
		}
		if (is_dir(dirs[i]))
			r = push3(a, "--ro-bind", dirs[i], dirs[i]);
	}
	return r;
}

/* ---- kernel interfaces ------------------------------------------------------------ */

/* Always read-only when present (the OCI runtime spec's readonlyPaths, and /sys). */
static const char *const kernel_ro_paths[] = {
    "/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs", "/sys",
};

static bool is_pid_entry(const char *name)
{
	if (streq(name, "self") || streq(name, "thread-self"))
		return true;
	for (const char *c = name; *c; c++)
		if (*c < '0' || *c > '9')
			return false;
	return name[0] != '\0';
}

/*
 * Makes every kernel-wide interface under /proc and /sys read-only inside: the fixed list
 * above, then every other entry of /proc that is not a process's (numbers, self,
 * thread-self) and could be written: a directory, or a file with a write bit. The kernel
 * has the same entries in every procfs instance, so the host's /proc (bwrap binds from
 * the host) names the entries of the sandbox's fresh /proc. The per-process entries stay
 * as bwrap mounts them: programs write /proc/self/oom_score_adj, comm, uid_map. A /proc
 * that cannot be listed is an error: fail closed.
 */
static int protect_kernel_interfaces(pw_run_argv *a)
{
	DIR *d;
	struct dirent *de;
	int r = 0;

	for (size_t i = 0; i < ELEMENTSOF(kernel_ro_paths) && r == 0; i++) {
		struct stat st;
		if (lstat(kernel_ro_paths[i], &st) == 0 && !S_ISLNK(st.st_mode))
			r = push3(a, "--ro-bind", kernel_ro_paths[i], kernel_ro_paths[i]);
	}
	d = opendir("/proc");
	if (!d) {
		r = negative_errno();
		pw_err("run", "cannot list /proc to make its kernel settings read-only: %s",
		       strerror(-r));
		return r;
	}
	while (r == 0 && (de = readdir(d))) {
		_cleanup_free_ char *p = NULL;
		bool listed = false;
		struct stat st;

		if (streq(de->d_name, ".") || streq(de->d_name, "..") || is_pid_entry(de->d_name))
			continue;
		if (asprintf(&p, "/proc/%s", de->d_name) < 0) {
			r = -ENOMEM;
			break;
		}
		for (size_t i = 0; i < ELEMENTSOF(kernel_ro_paths); i++)
			listed = listed || streq(p, kernel_ro_paths[i]);
		if (listed || lstat(p, &st) < 0 || S_ISLNK(st.st_mode))
			continue;
		if (S_ISDIR(st.st_mode) || (st.st_mode & 0222))
			r = push3(a, "--ro-bind", p, p);
	}
	closedir(d);
	return r;
}

/* ---- the command line ---------------------------------------------------------------- */

/* Where the sandbox starts: the caller's place in the project, else the project's root. */
static char *sandbox_cwd(const pw_run_view *v, const char *cwd)
{
	_cleanup_free_ char *unviewed = pw_run_unview_path(cwd, NULL);
	const char *c = unviewed ? unviewed : cwd;

	if (pw_path_beneath(c, v->project) >= 0)
		return strdup(c);
	return strdup(v->project);
}

static int share_args(pw_run_argv *a, const pw_run_sandbox_opts *o)
{
	int r = 0;

	for (size_t i = 0; i < o->n_shares && r == 0; i++) {
		_cleanup_free_ char *real = realpath(o->shares[i], NULL);
		if (!real) {
			r = negative_errno();
			pw_err("run", "--share %s: %s", o->shares[i], strerror(-r));
			return r;
		}
		if (pw_path_beneath(real, o->view->project) >= 0) {
			pw_err("run", "--share %s lies inside the project: there the view decides",
			       o->shares[i]);
			return -EINVAL;
		}
		r = push3(a, "--bind", real, real);
	}
	return r;
}

/* The shell between bwrap and the command: $1 is the command, found as a shell finds it. */
#define RUN_SCRIPT                                                                                 \
	"case $1 in\n"                                                                             \
	"*/*) [ -e \"$1\" ] || { echo \"piworkfs: run: $1: no such file\" >&2; exit 127; }\n"      \
	"     [ -d \"$1\" ] && { echo \"piworkfs: run: $1: is a directory\" >&2; exit 126; }\n"    \
	"     [ -x \"$1\" ] || { echo \"piworkfs: run: $1: not executable\" >&2; exit 126; } ;;\n" \
	"*) command -v -- \"$1\" >/dev/null 2>&1 || {\n"                                           \
	"     echo \"piworkfs: run: $1: command not found (in the sandbox's PATH)\" >&2; exit "    \
	"127; }"                                                                                   \
	" ;;\n"                                                                                    \
	"esac\n"                                                                                   \
	"exec \"$@\""

/* `piworkfs __run-tty FD STDFDS`: this very program, by the path the sandbox sees too (the
 * host is bound at /; inside the project, the view shows the same file). */
static int push_tty_launcher(pw_run_argv *a)
{
	char exe[PATH_MAX], fd[16], std_fds[4];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	int r;

	if (len <= 0) {
		pw_err("run", "cannot find this program (/proc/self/exe): %s", strerror(errno));
		return -errno;
	}
	exe[len] = '\0';
	snprintf(fd, sizeof(fd), "%d", PW_RUN_TTY_FD);
	pw_run_pty_std_fds(std_fds);
	r = push3(a, exe, PW_RUN_TTY_COMMAND, fd);
	return r < 0 ? r : pw_run_argv_push(a, std_fds);
}

int pw_run_sandbox_argv(const pw_run_sandbox_opts *o, pw_run_argv *ret)
{
	_cleanup_free_ char *cwd = sandbox_cwd(o->view, o->cwd);
	pw_run_argv a = {0};
	char fd[16];
	int r;

	if (!cwd)
		return -ENOMEM;
	snprintf(fd, sizeof(fd), "%d", o->info_fd);
	r = pw_run_argv_push_all(&a,
				 (const char *const[]){"bwrap", "--unshare-user", "--unshare-pid",
						       "--die-with-parent", "--new-session",
						       "--cap-drop", "ALL", NULL});
	if (r == 0 && geteuid() == 0)
		r = push2(&a, "--cap-add", "CAP_SETFCAP");
	if (r == 0)
		r = push3(&a, o->ro_host ? "--ro-bind" : "--bind", "/", "/");
	if (r == 0)
		r = push2(&a, "--dev", "/dev");
	if (r == 0)
		r = push2(&a, "--proc", "/proc");
	if (r == 0)
		r = protect_kernel_interfaces(&a);
	if (r == 0)
		r = share_args(&a, o);
	if (r == 0)
		r = protect_mode_dirs(&a, o->mode_dirs);
	if (r == 0)
		r = cover_daemon_dirs(&a, o->view);
	if (r == 0)
		r = push3(&a, "--bind", o->view->mountpoint, o->view->project);
	if (r == 0) {
		r = bind_aliases(&a, o->view->project, o->view->mountpoint);
		if (r < 0 && r != -ENOMEM)
			pw_err("run",
			       "cannot find the other paths of %s in /proc/self/mountinfo: %s",
			       o->view->project, strerror(-r));
	}
	if (r == 0)
		r = cover_other_views(&a, o->view);
	if (r == 0)
		r = push3(&a, "--ro-bind", o->view->agent_socket, o->view->agent_socket);
	if (r == 0)
		r = push3(&a, "--setenv", "PIWORKFS_SOCKET", o->view->agent_socket);
	if (r == 0)
		r = push3(&a, "--setenv", "PWD", cwd);
	if (r == 0)
		r = push2(&a, "--chdir", cwd);
	if (r == 0)
		r = push2(&a, "--info-fd", fd);
	if (r == 0)
		r = pw_run_argv_push(&a, "--");
	/* bwrap exits 1 when it cannot execute the command; through `exec "$@"` the shell
	 * gives the statuses scripts test for, 127 (not found) and 126 (not executable), and
	 * then is replaced by the command (same pid, argv and signals). The checks before it
	 * say so in piworkfs's words rather than the shell's. */
	if (r == 0 && pw_run_pty_wanted())
		r = push_tty_launcher(&a);
	if (r == 0)
		r = push3(&a, "/bin/sh", "-c", RUN_SCRIPT);
	if (r == 0)
		r = pw_run_argv_push(&a, "piworkfs-run");
	if (r == 0)
		r = pw_run_argv_push_all(&a, (const char *const *)o->command);
	return pw_run_argv_finish(&a, r, ret);
}
