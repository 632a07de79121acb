/* SPDX-License-Identifier: MIT */
#include "client/ctl_client.h"
#include "project.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include "cli.h"
#include "output.h"
#include "modefile.h"
#include "path.h"
#include "store/state.h"
#include "store/reader.h"
#include "proto.h"
#include "report.h"

static bool is_dir_at(const char *dir, const char *name)
{
	_cleanup_free_ char *p = NULL;
	struct stat st;

	if (asprintf(&p, "%s/%s", dir, name) < 0)
		return false;
	return lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The nearest directory at or above CWD holding .piworkfs/ or .git/, or CWD. */
static char *find_enclosing_project(const char *cwd)
{
	_cleanup_free_ char *dir = strdup(cwd);

	if (!dir)
		return NULL;
	for (;;) {
		if (is_dir_at(dir, ".piworkfs") || is_dir_at(dir, ".git"))
			return TAKE_PTR(dir);
		char *slash = strrchr(dir, '/');
		if (!slash || slash == dir) {
			/* "/" itself: checked last, then give up. */
			if (dir[1] == '\0')
				break;
			dir[1] = '\0';
			continue;
		}
		*slash = '\0';
	}
	return strdup(cwd);
}

static char *bundled_modes_dir(void)
{
	const char *env = getenv("PIWORKFS_MODES_DIR");
	struct stat st;

	if (env && *env)
		return strdup(env);
	if (stat(PW_BUNDLED_MODES_DIR, &st) == 0 && S_ISDIR(st.st_mode))
		return strdup(PW_BUNDLED_MODES_DIR);
	return strdup(PW_SOURCE_MODES_DIR);
}

static char *global_config_dir(void)
{
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	char *s = NULL;

	/* The XDG spec says a relative XDG_CONFIG_HOME is invalid and must be ignored. */
	if (xdg && xdg[0] == '/')
		return asprintf(&s, "%s/piworkfs", xdg) < 0 ? NULL : s;
	if (home && home[0] == '/')
		return asprintf(&s, "%s/.config/piworkfs", home) < 0 ? NULL : s;
	return NULL;
}

/* The live view containing DIR (a real path): its mountpoint in *ret_mp and its project
 * (mountinfo's source field, the project's real path) in *ret_backing. 0 when DIR lies in
 * none, 1 when it does, -ENOMEM. */
static int view_around(const char *dir, char **ret_mp, char **ret_backing)
{
	pw_ctl_mount *m = NULL;
	size_t n = 0, best;
	int r = 0;

	if (pw_ctl_list_mounts(&m, &n) < 0)
		return 0;
	best = pw_ctl_mount_around(m, n, dir, true);
	if (best != SIZE_MAX) {
		*ret_mp = strdup(m[best].mountpoint);
		*ret_backing = strdup(m[best].source);
		r = *ret_mp && *ret_backing ? 1 : -ENOMEM;
		if (r < 0) {
			free(*ret_mp);
			free(*ret_backing);
		}
	}
	pw_ctl_mounts_free(m, n);
	return r;
}

int pw_cli_project_open(const char *project_opt, pw_cli_project *ret, const char **ret_err)
{
	_cleanup_free_ char *cwd = NULL, *found = NULL, *root = NULL, *bundled = NULL;
	_cleanup_free_ char *start = NULL, *view_mp = NULL, *backing = NULL;
	bool marked = project_opt != NULL;
	struct stat st;
	int r;

	cwd = getcwd(NULL, 0);
	if (!cwd) {
		r = negative_errno();
		*ret_err = "cannot read the current directory";
		return r;
	}
	start = realpath(project_opt ? project_opt : cwd, NULL);
	if (!start) {
		r = negative_errno();
		*ret_err = r == -ENOENT ? "project directory does not exist"
					: "cannot resolve the project directory";
		return r;
	}
	if (stat(start, &st) < 0 || !S_ISDIR(st.st_mode)) {
		*ret_err = "project is not a directory";
		return -ENOTDIR;
	}
	r = view_around(start, &view_mp, &backing);
	if (r < 0)
		return r;
	if (r > 0) {
		/* Inside a view the view is the project, wherever in it we start. */
		root = TAKE_PTR(view_mp);
		marked = true;
	} else if (project_opt) {
		root = TAKE_PTR(start);
	} else {
		found = find_enclosing_project(cwd);
		if (!found)
			return -ENOMEM;
		root = realpath(found, NULL);
		if (!root) {
			r = negative_errno();
			*ret_err = "cannot resolve the project directory";
			return r;
		}
		marked = is_dir_at(root, ".piworkfs") || is_dir_at(root, ".git");
	}
	bundled = bundled_modes_dir();
	if (!bundled)
		return -ENOMEM;
	*ret = (pw_cli_project){
	    .root = TAKE_PTR(root),
	    .cwd = TAKE_PTR(cwd),
	    .bundled_dir = TAKE_PTR(bundled),
	    .global_dir = global_config_dir(),
	    .backing = TAKE_PTR(backing),
	    .marked = marked,
	};
	ret->trusted = pw_cli_project_trusted(pw_cli_project_path(ret));
	return 0;
}

void pw_cli_project_done(pw_cli_project *p)
{
	free(p->root);
	free(p->backing);
	free(p->cwd);
	free(p->bundled_dir);
	free(p->global_dir);
	*p = (pw_cli_project){0};
}

int pw_cli_project_open_or_say(const char *cmd, const char *project_opt, pw_cli_project *ret)
{
	const char *err = NULL;
	int r = pw_cli_project_open(project_opt, ret, &err);

	if (r < 0) {
		pw_err(cmd, "%s: %s", project_opt ? project_opt : ".", err ? err : strerror(-r));
		return PW_EXIT_CONFIG;
	}
	return PW_EXIT_OK;
}

/* Normalizes the absolute path ABS lexically into OUT ("/a/b"), without touching the
 * filesystem: the path may not exist yet. */
static int normalize_absolute(const char *abs, char *out, const char **ret_err)
{
	char tmp[PW_PATH_MAX];
	int r;

	r = pw_path_normalize(abs, strlen(abs), tmp, ret_err);
	if (r == -EXDEV)
		/* ".." above "/" stays at "/" for the kernel; for us such a path is simply
		 * outside any project that is not "/" itself. */
		r = pw_path_normalize("/", 1, tmp, ret_err);
	if (r < 0)
		return r;
	if (strlen(tmp) + 2 > PW_PATH_MAX) {
		*ret_err = "path too long";
		return -ENAMETOOLONG;
	}
	out[0] = '/';
	strcpy(out + 1, tmp);
	return 0;
}

/*
 * Realpath of the deepest existing ancestor of ABS (normalized absolute) joined with the
 * rest: catches a user path that reaches the project through a symlink (e.g. /tmp being a
 * link). Symlinks inside the project are left as named: the policy decides on names.
 */
static char *resolve_existing_prefix(const char *abs)
{
	_cleanup_free_ char *head = strdup(abs);
	char *out = NULL;

	if (!head)
		return NULL;
	for (;;) {
		_cleanup_free_ char *real = realpath(head, NULL);
		if (real) {
			const char *rest = abs + strlen(head);
			if (asprintf(&out, "%s%s", real, rest) < 0)
				return NULL;
			return out;
		}
		char *slash = strrchr(head, '/');
		if (!slash || slash == head)
			return NULL;
		*slash = '\0';
	}
}

/*
 * The project has two names: inside a view, its root is the mountpoint and BACKING the
 * directory behind it; from the backing directory, every live view of it is the project
 * too. An absolute path under the other name names the same file (`check ~/proj/src/x.c`
 * inside ~/proj.view). Returns the offset of its project-relative rest in ABS; -1 when it is
 * beneath neither name (as pw_path_beneath), or -errno when the views cannot be listed.
 */
static ssize_t beneath_other_name(const pw_cli_project *p, const char *abs)
{
	pw_ctl_mount *m = NULL;
	size_t n = 0;
	ssize_t off = -1;
	int r;

	if (p->backing)
		return pw_path_beneath(abs, p->backing);
	r = pw_ctl_list_mounts(&m, &n);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n && off < 0; i++)
		if (streq_ptr(m[i].source, p->root))
			off = pw_path_beneath(abs, m[i].mountpoint);
	pw_ctl_mounts_free(m, n);
	return off;
}

int pw_cli_map_path(const pw_cli_project *p, const char *arg, char *out, bool *ret_trailing_slash,
		    const char **ret_err)
{
	_cleanup_free_ char *joined = NULL, *resolved = NULL;
	char abs[PW_PATH_MAX];
	const char *base;
	size_t len = strlen(arg);
	ssize_t off;
	int r;

	if (len == 0) {
		*ret_err = "empty path";
		return -EINVAL;
	}
	if (arg[0] == '/')
		joined = strdup(arg);
	else {
		base = pw_path_beneath(p->cwd, p->root) >= 0 ? p->cwd : p->root;
		if (asprintf(&joined, "%s/%s", base, arg) < 0)
			joined = NULL;
	}
	if (!joined)
		return -ENOMEM;
	r = normalize_absolute(joined, abs, ret_err);
	if (r < 0)
		return r;

	off = pw_path_beneath(abs, p->root);
	if (off < 0)
		off = beneath_other_name(p, abs);
	if (off < 0) {
		resolved = resolve_existing_prefix(abs);
		if (resolved)
			off = pw_path_beneath(resolved, p->root);
		if (resolved && off < 0)
			off = beneath_other_name(p, resolved);
		if (off < 0) {
			*ret_err = "the path leaves the project";
			return -EXDEV;
		}
	}
	const char *rel = (resolved ? resolved : abs) + off;
	r = pw_path_normalize(rel, strlen(rel), out, ret_err);
	if (r < 0)
		return r;
	if (ret_trailing_slash)
		*ret_trailing_slash = arg[len - 1] == '/';
	return 0;
}

bool pw_cli_path_is_dir(const pw_cli_project *p, const char *path, bool default_dir)
{
	_cleanup_close_ int fd = open(p->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct stat st;

	if (fd < 0)
		return default_dir;
	if (fstatat(fd, path, &st, AT_SYMLINK_NOFOLLOW | (path[0] ? 0 : AT_EMPTY_PATH)) < 0)
		return default_dir;
	return S_ISDIR(st.st_mode);
}

const char *pw_cli_display_file(const pw_cli_project *p, const char *file, char *buf, size_t size)
{
	const char *home = getenv("HOME");
	ssize_t off;
	int n = -1;

	if (!file || file[0] != '/')
		return file;
	off = pw_path_beneath(file, p->root);
	if (off <= 0 && p->backing)
		off = pw_path_beneath(file, p->backing); /* inside a view: the same project */
	if (off > 0 && file[off - 1] == '/')
		n = snprintf(buf, size, "%s", file + off);
	else if ((off = pw_path_beneath(file, p->bundled_dir)) > 0 && file[off - 1] == '/')
		n = snprintf(buf, size, "modes/%s", file + off);
	else if (home && home[0] == '/' && !streq(home, "/") &&
		 (off = pw_path_beneath(file, home)) > 0 && file[off - 1] == '/')
		n = snprintf(buf, size, "~/%s", file + off);
	if (n < 0 || (size_t)n >= size)
		return file;
	return buf;
}

bool pw_cli_project_trusted(const char *root)
{
	_cleanup_free_ char *db = pw_state_default_path();
	_cleanup_(pw_store_reader_closep) pw_store_reader *conn = NULL;

	/* Read-only: an offline query never creates, migrates or repairs the database (a
	 * corrupt file is the daemon's to move aside, with a warning). Any failure: untrusted. */
	if (!db || access(db, R_OK) < 0 || pw_store_open_readonly(db, &conn) < 0)
		return false;
	return pw_store_is_trusted(conn, root) > 0;
}

int pw_cli_load_modes(const pw_cli_project *p, pw_modeset **ret, bool *ret_bundled_ok)
{
	struct stat st;
	bool global_ok = p->global_dir && stat(p->global_dir, &st) == 0 && S_ISDIR(st.st_mode);
	_cleanup_close_ int bfd = open(p->bundled_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	pw_load_opts opts = {
	    .bundled_dir = p->bundled_dir,
	    /* A missing global directory is normal, not worth a warning. */
	    .global_dir = global_ok ? p->global_dir : NULL,
	    .project_dir = p->backing ? p->backing : p->root,
	    .trusted = p->trusted,
	};

	if (ret_bundled_ok)
		*ret_bundled_ok = bfd >= 0;
	return pw_modeset_load(&opts, ret);
}

/* "build, design, discuss, ..." for the unknown-mode message. */
static char *mode_list(const pw_modeset *ms)
{
	size_t n = pw_modeset_count(ms), len = 1;
	char *s;

	for (size_t i = 0; i < n; i++)
		len += strlen(pw_modeset_get(ms, i)->name) + 2;
	s = malloc(len);
	if (!s)
		return NULL;
	s[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (i)
			strcat(s, ", ");
		strcat(s, pw_modeset_get(ms, i)->name);
	}
	return s;
}

void pw_cli_unknown_mode(const char *cmd, const pw_modeset *ms, const char *mode)
{
	_cleanup_free_ char *list = mode_list(ms);
	const char *names[3 * PW_MODES_MAX + 1];
	size_t n = 0;
	const char *hint;

	for (size_t i = 0; i < pw_modeset_count(ms) && n < 3 * PW_MODES_MAX; i++)
		names[n++] = pw_modeset_get(ms, i)->name;
	names[n] = NULL;
	hint = pw_key_near_miss(mode, names);
	if (hint)
		pw_err(cmd, "unknown mode '%s' (did you mean '%s'?)", mode, hint);
	else
		pw_err(cmd, "unknown mode '%s' (available: %s)", mode,
		       list && *list ? list : "none");
}

/* The view -M named (pw_cli_name_view), for the program's one command; NULL: none. */
static char *named_view;

int pw_cli_name_view(const char *mountpoint)
{
	free(named_view);
	named_view = strdup(mountpoint);
	return named_view ? 0 : -ENOMEM;
}

const char *pw_cli_named_view(void)
{
	return named_view;
}

/* Where the live view is asked: the view named, else the current directory's. */
static const char *live_at(const pw_cli_project *p)
{
	return named_view ? named_view : p ? p->cwd : NULL;
}

/*
 * The policy the live view of P decides with, read back from its `allowed` answer
 * (report.h): without MODE the very policy in force (its freezes and lane included), else
 * MODE as the view would install it. So `check`, `why`, `check-bash` and `allowed` answer
 * with the rules the filesystem enforces, never a recomputation from the mode files that
 * would miss an approved plan. Returns PW_EXIT_OK with *ret, -ENOENT when no live view
 * answers, or another PW_EXIT_* status (said).
 */
static int live_policy(const char *cmd, const pw_cli_project *p, const pw_modeset *ms,
		       const char *mode, pw_policy **ret)
{
	_cleanup_json_ json_t *res = NULL;
	_cleanup_free_ char *msg = NULL;
	const char *err = NULL;
	int code = 0;
	int r = pw_ctl_live_call(live_at(p), pw_cli_project_path(p), "allowed",
				 mode ? json_pack("{s:s}", "mode", mode) : NULL, &res, &code, &msg,
				 NULL);

	if (r == -ENOENT)
		return r;
	if (r == -EREMOTE && code == PW_RPC_UNKNOWN_MODE) {
		pw_cli_unknown_mode(cmd, ms, mode);
		return PW_EXIT_CONFIG;
	}
	if (r == -EREMOTE && code == PW_RPC_MODE_BROKEN && mode) {
		/* As the view does: a broken mode fails closed, never falls back. */
		pw_err(cmd, "mode %s is broken (%s); nothing is writable in it until it is fixed",
		       mode, msg ? msg : "see piworkfs status");
		*ret = pw_policy_new_fail_closed(mode, msg ? msg : "mode file is broken");
		return *ret ? PW_EXIT_OK : PW_EXIT_SYSTEM;
	}
	if (r < 0) {
		pw_err(cmd, "cannot ask the live view for its policy: %s",
		       r == -EREMOTE && msg ? msg : strerror(-r));
		return PW_EXIT_NO_VIEW;
	}
	r = pw_report_policy_parse(res, ret, &err);
	if (r == -ENOMEM)
		return PW_EXIT_SYSTEM;
	if (r < 0) {
		pw_err(cmd, "the live view's policy cannot be read here: %s", err);
		return PW_EXIT_NO_VIEW;
	}
	return PW_EXIT_OK;
}

/* The approved plans of P's project, from the state database, as freeze rules (modeset.h). */
typedef struct frozen_rules {
	pw_rule *v;
	size_t n, cap;
} frozen_rules;

static void frozen_rules_done(frozen_rules *f)
{
	pw_rules_free(f->v, f->n);
}

static int add_frozen(const char *path, void *userdata)
{
	frozen_rules *f = userdata;
	int r;

	if (PW_GROW(f->v, f->cap, f->n, 8) < 0)
		return -ENOMEM;
	r = pw_modeset_freeze_rule(path, &f->v[f->n]);
	if (r == 0)
		f->n++;
	return r;
}

/*
 * Offline (no live view): MODE compiled from MS with the approved plans the state database
 * holds, as a view would compile it. Approved plans that cannot be read fail closed, as in a
 * view. Returns 0 with *ret, -ENOENT (unknown mode), -ENOMEM.
 */
static int offline_policy(const char *cmd, const pw_cli_project *p, const pw_modeset *ms,
			  const char *mode, pw_policy **ret)
{
	_cleanup_free_ char *db = pw_state_default_path();
	_cleanup_(pw_store_reader_closep) pw_store_reader *conn = NULL;
	_cleanup_(frozen_rules_done) frozen_rules f = {0};
	int r = db ? pw_store_open_readonly(db, &conn) : -ENOENT;

	/* No database (or none with a schema): no plan can have been approved. */
	if (r == -ENOENT || r == -EPROTO)
		r = 0;
	else if (r == 0)
		r = pw_store_approved_plans(conn, pw_cli_project_path(p), add_frozen, &f);
	if (r == -ENOMEM)
		return r;
	if (!pw_modeset_find(ms, mode))
		return -ENOENT;
	if (r < 0) {
		pw_err(cmd,
		       "the approved plans could not be read from %s (%s): nothing is writable", db,
		       strerror(-r));
		*ret = pw_policy_new_fail_closed(mode, "the approved plans could not be read");
		return *ret ? 0 : -ENOMEM;
	}
	pw_policy_extras x = {.frozen = f.v, .n_frozen = f.n};
	return pw_policy_compile_extras(ms, mode, &x, ret);
}

int pw_cli_get_policy(const char *cmd, const pw_cli_project *p, const char *mode,
		      pw_modeset **ret_ms, pw_policy **ret_policy)
{
	_cleanup_modeset_ pw_modeset *ms = NULL;
	const pw_warning *w = NULL;
	pw_policy *pol = NULL;
	int r;

	/* The modes as the files say, for what the commands show beside a decision (the keys
	 * an untrusted project's layer declares, the modes to suggest). */
	r = pw_cli_load_modes(p, &ms, NULL);
	if (r < 0) {
		pw_err(cmd, "cannot load modes: %s", strerror(-r));
		return PW_EXIT_SYSTEM;
	}
	r = live_policy(cmd, p, ms, mode, &pol);
	if (r != -ENOENT && r != PW_EXIT_OK)
		return r;
	if (r == -ENOENT && !mode) {
		pw_err(cmd, "no --mode given and not inside a live view");
		return PW_EXIT_USAGE;
	}
	if (r == -ENOENT && pw_modeset_mode_broken(ms, mode, &w)) {
		/* As the view does: a broken mode fails closed, never falls back. */
		_cleanup_free_ char *why = w ? pw_warning_format(w) : NULL;
		pw_err(cmd, "mode %s is broken (%s); nothing is writable in it until it is fixed",
		       mode, why ? why : "unknown error");
		pol = pw_policy_new_fail_closed(mode, why ? why : "mode file is broken");
		if (!pol)
			return PW_EXIT_SYSTEM;
	} else if (r == -ENOENT) {
		r = offline_policy(cmd, p, ms, mode, &pol);
		if (r == -ENOENT) {
			pw_cli_unknown_mode(cmd, ms, mode);
			return PW_EXIT_CONFIG;
		}
		if (r < 0) {
			pw_err(cmd, "cannot compile mode %s: %s", mode, strerror(-r));
			return PW_EXIT_SYSTEM;
		}
	}
	*ret_policy = pol;
	*ret_ms = TAKE_PTR(ms);
	return PW_EXIT_OK;
}

int pw_cli_judge_open(const char *cmd, const char *project_opt, const char *mode, pw_cli_judge *j)
{
	int r = pw_cli_project_open_or_say(cmd, project_opt, &j->p);

	return r == PW_EXIT_OK ? pw_cli_get_policy(cmd, &j->p, mode, &j->ms, &j->policy) : r;
}

void pw_cli_judge_done(pw_cli_judge *j)
{
	pw_policy_unref(j->policy);
	pw_modeset_free(j->ms);
	pw_cli_project_done(&j->p);
	*j = (pw_cli_judge){0};
}

/* The live view's mode for the offline commands: the socket client asked with P's paths
 * (ctl_client.h), so the client needs nothing of the project. */
int pw_cli_live_mode(const pw_cli_project *p, char **ret_mode)
{
	return pw_ctl_live_mode(live_at(p), p ? pw_cli_project_path(p) : NULL, ret_mode);
}

int pw_cli_live_lane(const pw_cli_project *p, json_t **ret)
{
	return pw_ctl_live_lane(live_at(p), ret);
}
