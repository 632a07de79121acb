/* SPDX-License-Identifier: MIT */
/*
 * piworkfs trust [PROJECT] [--revoke]: records in the state database that a project's own
 * layer (PROJECT/.piworkfs) may widen what modes allow (writes.allow, writes.tokens,
 * protect: false, design token files). Trust is keyed by the project's real path. A running
 * view reads trust when it loads its modes: a change reloads the caller's live views of the
 * project, so it takes effect at once. `piworkfs trust --list` shows the trusted projects.
 */
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "client/ctl_client.h"
#include "options.h"
#include "output.h"
#include "procfs.h"
#include "project.h"
#include "store/state.h"
#include "store/reader.h"

static const char usage[] =
    "Usage: piworkfs trust [PROJECT | --mount PATH] [--revoke] [--json]\n"
    "       piworkfs trust --list [--json]\n"
    "\n"
    "Trust PROJECT (default: the project enclosing the current directory; inside a view,\n"
    "the project behind it): its own modes and configuration in PROJECT/.piworkfs may then\n"
    "widen what a mode allows (writes.allow, writes.tokens, protect: false, design token\n"
    "files). An untrusted project may only tighten. Your live views of the project are\n"
    "reloaded at once (one whose daemon uses another state database needs `piworkfs\n"
    "reload`).\n"
    "\n"
    "Options:\n"
    "      --revoke       withdraw trust instead\n"
    "  -l, --list         list the trusted projects\n"
    "  -M, --mount PATH   the project of the view containing PATH\n"
    "      --json         print JSON\n"
    "  -h, --help         show this help\n"
    "\n"
    "Examples:\n"
    "  piworkfs trust ~/proj\n"
    "  piworkfs trust --revoke\n"
    "\n"
    "Exit status: 0 ok; 1 refused inside `piworkfs run` (the run hides the state database:\n"
    "trust from your own terminal); 2 usage error; 3 the project does not exist; 4 no\n"
    "live view contains -M PATH; 5 the state database cannot be written.\n";

/* Is the directory DIR a tmpfs mounted right there (as run/sandbox.c hides a state
 * directory)? */
static bool tmpfs_at(const char *dir)
{
	pw_mountinfo *m = NULL;
	size_t n = 0;
	bool found = false;

	if (pw_mountinfo_read(SIZE_MAX, &m, &n) < 0)
		return false;
	for (size_t i = 0; i < n; i++)
		found = found || (streq(m[i].mountpoint, dir) && streq(m[i].fstype, "tmpfs"));
	pw_mountinfo_free(m, n);
	return found;
}

/*
 * Are we inside the sandbox of `piworkfs run`? It hides the state database from the agent
 * (docs/SECURITY.md: a tmpfs over its directory, or /dev/null over the file), so trust
 * would be recorded in a throwaway copy, and said done, and --list would say nothing is
 * trusted. Told by the run's agent socket in the environment, or, should the agent have
 * unset it, by the database being hidden so.
 */
static bool inside_run(const char *dbpath)
{
	const char *env = getenv("PIWORKFS_SOCKET");
	_cleanup_free_ char *dir = strdup(dbpath);
	char *slash = dir ? strrchr(dir, '/') : NULL;
	struct stat st;

	if (env && env[0])
		return true;
	if (stat(dbpath, &st) == 0 && S_ISCHR(st.st_mode))
		return true;
	if (slash && slash != dir)
		*slash = '\0';
	return slash && slash != dir && tmpfs_at(dir);
}

static void format_since(int64_t ns, char *buf, size_t size)
{
	time_t secs = (time_t)(ns / 1000000000);
	struct tm tm;

	localtime_r(&secs, &tm);
	strftime(buf, size, "%Y-%m-%d %H:%M", &tm);
}

typedef struct trust_lister {
	bool json;
	json_t *arr;
	unsigned n;
} trust_lister;

static int trust_list_one(const char *path, int64_t since, void *userdata)
{
	trust_lister *l = userdata;
	char when[32];

	format_since(since, when, sizeof(when));
	l->n++;
	if (!l->json) {
		printf("%s  (since %s)\n", path, when);
		return 0;
	}
	json_t *o = json_object();
	if (!o || json_object_set_new(o, "project", json_string(path)) < 0 ||
	    json_object_set_new(o, "since_ns", json_integer(since)) < 0 ||
	    json_array_append_new(l->arr, o) < 0) {
		json_decref(o);
		return -ENOMEM;
	}
	return 0;
}

/* Lists trusted projects from a read-only connection (a missing database: none). */
static int trust_list(const char *cmd, const char *dbpath, bool json)
{
	_cleanup_(pw_store_reader_closep) pw_store_reader *db = NULL;
	_cleanup_json_ json_t *arr = json ? json_array() : NULL;
	trust_lister l = {.json = json, .arr = arr};
	int r;

	if (json && !arr)
		return PW_EXIT_SYSTEM;
	r = pw_store_open_readonly(dbpath, &db);
	if (r < 0 && r != -ENOENT && r != -EPROTO) {
		pw_err(cmd, "cannot read %s: %s", dbpath, strerror(-r));
		return PW_EXIT_SYSTEM;
	}
	if (db) {
		r = pw_store_list_trusted(db, trust_list_one, &l);
		if (r == -ENOMEM)
			return PW_EXIT_SYSTEM;
		if (r < 0) {
			pw_err(cmd, "cannot read %s: %s", dbpath, pw_store_reader_error(db));
			return PW_EXIT_SYSTEM;
		}
	}
	if (json) {
		json_t *o = json_object();
		if (!o || json_object_set_new(o, "trusted", TAKE_PTR(arr)) < 0) {
			json_decref(o);
			return PW_EXIT_SYSTEM;
		}
		return pw_print_json(o) < 0 ? PW_EXIT_SYSTEM : PW_EXIT_OK;
	}
	if (l.n == 0)
		printf("no trusted projects\n");
	return PW_EXIT_OK;
}

/*
 * Reloads the caller's live views of ROOT, so that trust takes effect where it was given
 * (`trust` inside a view said "at the next reload or mount"). Returns the mountpoints
 * reloaded (a JSON array; NULL on allocation failure).
 */
static json_t *reload_views(const char *root)
{
	pw_ctl_mount *m = NULL;
	size_t n = 0;
	json_t *done = json_array();

	if (!done || pw_ctl_list_mounts(&m, &n) < 0)
		return done;
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *sock = NULL;
		_cleanup_json_ json_t *res = NULL;
		bool mine = m[i].uid < 0 || m[i].uid == (long)getuid();

		if (!mine || !streq_ptr(m[i].source, root) ||
		    pw_ctl_view_socket(m[i].mountpoint, m[i].uid, &sock) < 0 ||
		    pw_ctl_call_socket(sock, "reload", NULL, &res, NULL, NULL) < 0)
			continue;
		json_array_append_new(done, json_string(m[i].mountpoint));
	}
	pw_ctl_mounts_free(m, n);
	return done;
}

static int trust_set(const char *cmd, const char *dbpath, const char *root, bool trust, bool json)
{
	pw_state *s = NULL;
	_cleanup_free_ char *warning = NULL;
	int r = pw_state_open(dbpath, &s, &warning);

	if (r < 0) {
		pw_err(cmd, "cannot open the state database %s: %s", dbpath, strerror(-r));
		return PW_EXIT_SYSTEM;
	}
	if (warning)
		pw_err(cmd, "warning: %s", warning);
	int before = pw_state_is_trusted(s, root);
	r = before < 0 ? before : pw_state_set_trusted(s, root, trust);
	pw_state_close(s);
	if (r < 0) {
		pw_err(cmd, "cannot record trust in %s: %s", dbpath, strerror(-r));
		return PW_EXIT_SYSTEM;
	}
	bool changed = (before == 1) != trust;
	/* The live views of the project take it at once (inside `run`, refused before). */
	_cleanup_json_ json_t *reloaded = changed ? reload_views(root) : json_array();
	size_t n_reloaded = json_array_size(reloaded);

	if (json) {
		json_t *o = json_object();
		if (!o || json_object_set_new(o, "project", json_string(root)) < 0 ||
		    json_object_set_new(o, "trusted", json_boolean(trust)) < 0 ||
		    json_object_set_new(o, "changed", json_boolean(changed)) < 0 ||
		    json_object_set(o, "reloaded", reloaded ? reloaded : json_array()) < 0 ||
		    json_object_set_new(o, "takes_effect",
					json_string(n_reloaded ? "now" : "next mount")) < 0) {
			json_decref(o);
			return PW_EXIT_SYSTEM;
		}
		return pw_print_json(o) < 0 ? PW_EXIT_SYSTEM : PW_EXIT_OK;
	}
	if (!changed) {
		printf("%s is already %s\n", root, trust ? "trusted" : "not trusted");
		return PW_EXIT_OK;
	}
	if (trust)
		printf("trusted %s: its .piworkfs modes and configuration may now widen what modes "
		       "allow\n",
		       root);
	else
		printf("revoked trust in %s: its .piworkfs layer may now only tighten\n", root);
	size_t i;
	json_t *mp;
	json_array_foreach(reloaded, i, mp)
	    printf("reloaded the view at %s\n", json_string_value(mp));
	if (n_reloaded == 0)
		printf("no live view of it: this takes effect when it is mounted\n");
	return PW_EXIT_OK;
}

int cmd_trust(int argc, char **argv)
{
	_cleanup_opts_ pw_opts po = {0};
	_cleanup_free_ char *dbpath = pw_state_default_path();
	_cleanup_project_ pw_cli_project p = {0};
	bool revoke = false, list = false, json = false;
	const char *view = NULL; /* -M PATH: the view's mountpoint (options.c) */
	const pw_opt_bind binds[] = {{PW_OPT_REVOKE, .flag = &revoke},
				     {'l', .flag = &list},
				     {'C', .arg = &view},
				     {PW_OPT_JSON, .flag = &json},
				     {0}};
	int r =
	    pw_opts_parse(&po, argv[0], argc, argv, &(pw_opts_use){.usage = usage, .binds = binds});

	if (r != PW_EXIT_GO_ON)
		return r;
	if (po.n_operands > 1) {
		pw_err(argv[0], "one PROJECT at a time (see 'piworkfs trust --help')");
		return PW_EXIT_USAGE;
	}
	if (list && (revoke || po.n_operands > 0 || view)) {
		pw_err(argv[0], "--list takes no PROJECT, no -M and no --revoke");
		return PW_EXIT_USAGE;
	}
	if (view && po.n_operands > 0) {
		pw_err(argv[0], "-M and PROJECT both name the project: give one");
		return PW_EXIT_USAGE;
	}
	if (!dbpath) {
		pw_err(argv[0], "cannot tell where the state database is (no $HOME)");
		return PW_EXIT_SYSTEM;
	}
	if (inside_run(dbpath)) {
		pw_err(argv[0],
		       "refused inside `piworkfs run`: the run hides your state database from the "
		       "agent, so trust would be recorded nowhere; run 'piworkfs trust%s' on your "
		       "own terminal, outside the run",
		       list	? " --list"
		       : revoke ? " --revoke"
				: "");
		return PW_EXIT_DENIED;
	}
	if (list)
		return trust_list(argv[0], dbpath, json);

	const char *project = po.n_operands > 0 ? po.operands[0] : view;
	r = pw_cli_project_open_or_say(argv[0], project, &p);
	if (r != PW_EXIT_OK)
		return r;
	return trust_set(argv[0], dbpath, pw_cli_project_path(&p), !revoke, json);
}
