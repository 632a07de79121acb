/* SPDX-License-Identifier: MIT */
/*
 * piworkfs changes | diff | undo | checkpoint: what the view changed since a change set
 * began, the diff against the originals it kept, and putting them back. The daemon does
 * the work (fs/undo/changes.c): the store is in the state directory, which a sandboxed agent
 * cannot reach, and only the daemon may put originals back (docs/PROTOCOL.md).
 */
#include <getopt.h>
#include <stdlib.h>
#include <linux/limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "client/ctl_client.h"
#include "output.h"
#include "pager.h"
#include "proto.h"
#include "quote.h"
#include "util.h"

/* The scope options changes, diff and undo share. */
#define SCOPE_HELP                                                                                 \
	"  -s, --since X      change sets since checkpoint X, or changes since TIME (2h, 10m,\n"   \
	"                     2025-01-31T14:05)\n"                                                 \
	"      --change-set N change set N only\n"

static const char changes_usage[] =
    "Usage: piworkfs changes [--since X|--change-set N|--all] [--mode M] [PATH...] [--json]\n"
    "       piworkfs changes --prune [--json]\n"
    "       piworkfs changes --plan NAME [--json]\n"
    "\n"
    "What the view changed, newest change set first: each path with its kind (modified,\n"
    "created, deleted, renamed, metadata), the process that first changed it, when, and in\n"
    "which mode. A change set starts at mount, at each switch into a mode that writes, at a\n"
    "reload or trust that changes what the mode allows, and at `piworkfs checkpoint`. An\n"
    "old change set always reads the same: what it left is taken from the record, not from\n"
    "the files now. By default: every change set since the view was mounted, whichever\n"
    "view made it (each run's says so; as for diff). A path another view or run changed\n"
    "too meanwhile says \"also changed by run ID\". --prune applies the retention now\n"
    "(oldest change sets first).\n"
    "\n"
    "Options:\n" SCOPE_HELP "  -a, --all          every change set kept, earlier mounts too\n"
    "  -m, --mode M       only changes made in mode M\n"
    "      --prune        remove old change sets (by age and total size)\n"
    "      --plan NAME    what each task of plan NAME changed (its change sets, by the task\n"
    "                     in progress when each started)\n"
    "  -M, --mount PATH   the view containing PATH (default: the current directory)\n"
    "      --json         print JSON\n"
    "  -h, --help         show this help\n"
    "\n"
    "Examples:\n"
    "  piworkfs changes                    what changed since the view was mounted\n"
    "  piworkfs changes --since before-refactor src/\n"
    "  piworkfs changes --change-set 12 --json\n"
    "\n"
    "Exit status: 0 ok; 2 usage error; 4 no live view; 5 system error.\n";

static const char diff_usage[] =
    "Usage: piworkfs diff [--since X|--change-set N|--all] [--stat|--name-status]\n"
    "                     [--color[=WHEN]] [--no-pager] [PATH...] [--json]\n"
    "\n"
    "What the change sets chosen changed, in git's diff format, by path: each original the\n"
    "view kept against what the change sets left (the file now, for the latest), with\n"
    "/dev/null for a created or deleted file, old/new mode, renames, symbolic links'\n"
    "targets, git's binary patches for content that is not UTF-8 text. `git apply -R` of\n"
    "it gives the files back as they were. By default: the change sets since the view was\n"
    "mounted (as for changes). On a terminal, through $PAGER (less -FRX). A PATH with no\n"
    "recorded change is an error (exit 1).\n"
    "\n"
    "Options:\n" SCOPE_HELP "  -a, --all          every change set kept, earlier mounts too\n"
    "      --stat         lines added and removed per file, as git's diffstat\n"
    "      --name-status  one line per file: A, D, M or R and its path(s)\n"
    "      --color[=WHEN] colour the diff: always, never or auto (on a terminal)\n"
    "      --no-pager     never page\n"
    "  -M, --mount PATH   the view containing PATH (default: the current directory)\n"
    "      --json         print JSON\n"
    "  -h, --help         show this help\n"
    "\n"
    "Examples:\n"
    "  piworkfs diff                       everything changed since the mount\n"
    "  piworkfs diff --stat --since 1h\n"
    "  piworkfs diff --change-set 12 src/x.c\n"
    "\n"
    "Exit status: 0 ok; 1 a PATH with no recorded change; 2 usage error; 4 no live view;\n"
    "5 system error.\n";

static const char undo_usage[] =
    "Usage: piworkfs undo [--since X|--change-set N] [--dry-run] [--force] PATH...|--all\n"
    "\n"
    "Puts the originals back: contents and metadata restored, deleted files and directories\n"
    "made again, created ones removed, renames reversed. It says what it is about to do, in\n"
    "the order it does it, then does it. By default: the latest change set with a change\n"
    "(to PATH) not undone yet, so a second `undo PATH` goes further back through PATH's\n"
    "history; an undo never re-applies what an undo put back (`piworkfs redo` does).\n"
    "Refused, naming them, where a file was changed outside the view since (--force undoes\n"
    "anyway; git's index, which `git status` rewrites, is put back with a note). The undo is\n"
    "itself a change set. A PATH with nothing left to undo is an error (exit 1).\n"
    "\n"
    "Options:\n"
    "  -a, --all          every change in the change sets chosen\n" SCOPE_HELP
    "      --dry-run      say what would be done, do nothing\n"
    "      --force        undo also what was changed outside the view since\n"
    "  -M, --mount PATH   the view containing PATH (default: the current directory)\n"
    "      --json         print JSON\n"
    "  -h, --help         show this help\n"
    "\n"
    "Examples:\n"
    "  piworkfs undo src/x.c               the last change to src/x.c; again: the one before\n"
    "  piworkfs undo --all                 the latest change set\n"
    "  piworkfs undo --all --since before-refactor --dry-run\n"
    "\n"
    "Exit status: 0 ok; 1 refused (changed outside the view, or asked from inside `run`), or\n"
    "nothing left to undo for a PATH; 2 usage error; 4 no live view; 5 system error or some\n"
    "path could not be put back.\n";

static const char redo_usage[] =
    "Usage: piworkfs redo [--dry-run] [--force] [--json]\n"
    "\n"
    "Reverses the last undo that no redo has reversed yet: what it put back goes back to what\n"
    "the agent had made. It says what it is about to do, then does it. Again: the undo\n"
    "before that one. The redo is itself a change set.\n"
    "\n"
    "Options:\n"
    "      --dry-run      say what would be done, do nothing\n"
    "      --force        redo also what was changed outside the view since\n"
    "  -M, --mount PATH   the view containing PATH (default: the current directory)\n"
    "      --json         print JSON\n"
    "  -h, --help         show this help\n"
    "\n"
    "Examples:\n"
    "  piworkfs undo src/x.c && piworkfs redo    back where it was\n"
    "  piworkfs redo --dry-run\n"
    "\n"
    "Exit status: 0 ok; 1 refused (changed outside the view, or inside `run`), or no undo\n"
    "to reverse; 2 usage error; 4 no live view; 5 system error.\n";

static const char checkpoint_usage[] =
    "Usage: piworkfs checkpoint [NAME] [--json]\n"
    "\n"
    "Starts a new change set, named NAME (for --since NAME).\n"
    "\n"
    "Options:\n"
    "  -M, --mount PATH   the view containing PATH (default: the current directory)\n"
    "      --json         print JSON\n"
    "  -h, --help         show this help\n"
    "\n"
    "Examples:\n"
    "  piworkfs checkpoint before-refactor\n"
    "  piworkfs diff --since before-refactor\n"
    "\n"
    "Exit status: 0 ok; 1 refused (inside `run`); 2 usage error; 4 no live view.\n";

enum {
	OPT_JSON = 0x100,
	OPT_PRUNE,
	OPT_STAT,
	OPT_FORCE,
	OPT_CHANGE_SET,
	OPT_NAME_STATUS,
	OPT_COLOR,
	OPT_NO_PAGER,
	OPT_PLAN
};

typedef struct opts {
	const char *mount, *since, *mode, *change_set, *color, *plan;
	bool json, prune, stat, all, dry, force, name_status, no_pager;
	char **paths;
	int n_paths;
} opts;

/* Parses "10m", "2h", "3d" ago, or an ISO date[-time] (local time). Returns 0 or -EINVAL. */
static int parse_time(const char *s, int64_t *ret_ns)
{
	char *end = NULL;
	long long v = strtoll(s, &end, 10);
	if (end != s && end[0] && !end[1] && v >= 0) {
		int64_t unit = end[0] == 's'   ? 1
			       : end[0] == 'm' ? 60
			       : end[0] == 'h' ? 3600
			       : end[0] == 'd' ? 86400
			       : end[0] == 'w' ? 604800
					       : 0;
		if (unit) {
			*ret_ns = ((int64_t)time(NULL) - v * unit) * 1000000000;
			return 0;
		}
	}
	struct tm tm = {0};
	const char *p = strptime(s, "%Y-%m-%d", &tm);
	if (!p)
		return -EINVAL;
	if (*p == 'T' || *p == ' ') {
		p = strptime(p + 1, "%H:%M", &tm);
		if (p && *p == ':')
			p = strptime(p + 1, "%S", &tm);
	}
	if (!p || *p)
		return -EINVAL;
	tm.tm_isdst = -1;
	time_t t = mktime(&tm);
	if (t == (time_t)-1)
		return -EINVAL;
	*ret_ns = (int64_t)t * 1000000000;
	return 0;
}

static int parse(int argc, char **argv, const char *usage, opts *o)
{
	static const struct option longs[] = {
	    {"since", required_argument, NULL, 's'},
	    {"mode", required_argument, NULL, 'm'},
	    {"mount", required_argument, NULL, 'M'},
	    {"all", no_argument, NULL, 'a'},
	    {"dry-run", no_argument, NULL, 'n'},
	    {"force", no_argument, NULL, OPT_FORCE},
	    {"prune", no_argument, NULL, OPT_PRUNE},
	    {"stat", no_argument, NULL, OPT_STAT},
	    {"change-set", required_argument, NULL, OPT_CHANGE_SET},
	    {"name-status", no_argument, NULL, OPT_NAME_STATUS},
	    {"color", optional_argument, NULL, OPT_COLOR},
	    {"no-pager", no_argument, NULL, OPT_NO_PAGER},
	    {"plan", required_argument, NULL, OPT_PLAN},
	    {"json", no_argument, NULL, OPT_JSON},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	const char *cmd = argv[0];
	bool is_changes = streq(cmd, "changes"), is_undo = streq(cmd, "undo") || streq(cmd, "redo");
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "s:m:M:ah", longs, NULL)) != -1) {
		bool ok = true;
		switch (c) {
		case 's':
			o->since = optarg;
			ok = !streq(cmd, "checkpoint");
			break;
		case 'm':
			o->mode = optarg;
			ok = is_changes;
			break;
		case 'M':
			o->mount = optarg;
			break;
		case 'a':
			o->all = true;
			ok = !streq(cmd, "checkpoint");
			break;
		case OPT_CHANGE_SET:
			o->change_set = optarg;
			ok = !streq(cmd, "checkpoint");
			break;
		case 'n':
			o->dry = true;
			ok = is_undo;
			break;
		case OPT_FORCE:
			o->force = true;
			ok = is_undo;
			break;
		case OPT_PRUNE:
			o->prune = true;
			ok = is_changes;
			break;
		case OPT_STAT:
			o->stat = true;
			ok = streq(cmd, "diff");
			break;
		case OPT_NAME_STATUS:
			o->name_status = true;
			ok = streq(cmd, "diff");
			break;
		case OPT_COLOR:
			o->color = optarg ? optarg : "always";
			ok = streq(cmd, "diff") &&
			     (streq(o->color, "always") || streq(o->color, "never") ||
			      streq(o->color, "auto"));
			break;
		case OPT_NO_PAGER:
			o->no_pager = true;
			ok = streq(cmd, "diff");
			break;
		case OPT_PLAN:
			o->plan = optarg;
			ok = is_changes;
			break;
		case OPT_JSON:
			o->json = true;
			pw_err_json(true);
			break;
		case 'h':
			return pw_usage(cmd, usage, false);
		default:
			ok = false;
		}
		if (!ok) {
			pw_err(cmd, "unknown or misplaced option '%s' (see 'piworkfs %s --help')",
			       argv[optind - 1], cmd);
			return PW_EXIT_USAGE;
		}
	}
	o->paths = argv + optind;
	o->n_paths = argc - optind;
	if (o->change_set) {
		char *end = NULL;
		long long n = strtoll(o->change_set, &end, 10);
		if (end == o->change_set || *end || n <= 0) {
			pw_err(cmd, "--change-set takes a change set's number, not '%s'",
			       o->change_set);
			return PW_EXIT_USAGE;
		}
		if (o->since) {
			pw_err(cmd, "--change-set and --since choose the change sets two ways: "
				    "give one");
			return PW_EXIT_USAGE;
		}
	}
	return PW_EXIT_GO_ON;
}

/* A failed call's message and exit status (output.h). */
static int call_failed(const char *cmd, const opts *o, int r, int code, const char *message)
{
	static const pw_rpc_exit map[] = {
	    {PW_RPC_INVALID_PARAMS, PW_EXIT_USAGE}, {PW_RPC_INVALID_PATH, PW_EXIT_USAGE},
	    {PW_RPC_REFUSED, PW_EXIT_DENIED},	    {PW_RPC_NO_CHANGE, PW_EXIT_DENIED},
	    {PW_RPC_UNAVAILABLE, PW_EXIT_NO_VIEW},
	};
	return pw_cli_call_failed(cmd, o->mount, r, code, message, map, ELEMENTSOF(map),
				  PW_EXIT_NO_VIEW);
}

/* The params shared by changes, diff and undo. Paths are made absolute, so the daemon
 * maps them from the mountpoint whatever our working directory. */
static json_t *scope_params(const opts *o)
{
	json_t *p = json_object();
	if (!p)
		return NULL;
	if (o->since) {
		int64_t ns;
		if (parse_time(o->since, &ns) == 0)
			json_object_set_new(p, "since_ns", json_integer(ns));
		else
			json_object_set_new(p, "since", json_string(o->since));
	}
	if (o->mode)
		json_object_set_new(p, "mode", json_string(o->mode));
	if (o->change_set)
		json_object_set_new(p, "change_set",
				    json_integer(strtoll(o->change_set, NULL, 10)));
	if (o->n_paths) {
		json_t *a = json_array();
		for (int i = 0; a && i < o->n_paths; i++) {
			char *abs = NULL;
			if (o->paths[i][0] != '/') {
				_cleanup_free_ char *cwd = getcwd(NULL, 0);
				if (cwd && asprintf(&abs, "%s/%s", cwd, o->paths[i]) < 0)
					abs = NULL;
			}
			json_array_append_new(a, json_string(abs ? abs : o->paths[i]));
			free(abs);
		}
		json_object_set_new(p, "paths", a);
	}
	return p;
}

/* METHOD on the view: PW_EXIT_GO_ON with *ret, or the exit status of its failure. */
static int call(const char *cmd, const opts *o, const char *method, json_t *params, json_t **ret)
{
	int code = 0;
	_cleanup_free_ char *message = NULL;
	/* As long as the work takes: a 10 s limit made a slow undo say the daemon did not
	 * answer while the daemon went on and finished it. */
	int r = pw_ctl_call_at_timed(o->mount, PW_CTL_WAIT_ALL, method, params, ret, &code,
				     &message, NULL);
	return r < 0 ? call_failed(cmd, o, r, code, message) : PW_EXIT_GO_ON;
}

static void when(int64_t ns, char *buf, size_t size)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm);
}

/* ---- .git/ as one line -------------------------------------------------------------- */

static bool in_git_dir(const char *p)
{
	return p && (streq(p, ".git") || startswith(p, ".git/"));
}

/* Did the person ask for a path under .git? Then its changes are shown one by one. */
static bool asked_git(const opts *o)
{
	for (int i = 0; i < o->n_paths; i++)
		if (strstr(o->paths[i], ".git"))
			return true;
	return false;
}

/*
 * ".git/: 19 objects, index, refs/heads/main" for the entries of ARR under .git (their
 * "path"), or NULL when there are none: one git command touches dozens of names there, and
 * the person reads their project's changes, not git's bookkeeping.
 */
static char *git_summary(json_t *arr)
{
	json_t *e;
	size_t i, objects = 0, names = 0, more = 0;
	char list[512] = "";
	size_t used = 0;
	json_array_foreach(arr, i, e)
	{
		const char *p = pw_json_str(e, "path");
		const char *obj =
		    p && startswith(p, ".git/objects/") ? p + strlen(".git/objects/") : NULL;
		if (!in_git_dir(p) || streq(p, ".git") || streq(p, ".git/objects") ||
		    (obj && obj[strcspn(obj, "/")] == '\0'))
			continue; /* .git itself, objects' fan-out directories */
		if (startswith(p, ".git/objects/")) {
			objects++;
			continue;
		}
		if (names++ >= 4) {
			more++;
			continue;
		}
		int n = snprintf(list + used, sizeof(list) - used, ", %s", pw_q(0, p + 5));
		if (n > 0 && (size_t)n < sizeof(list) - used)
			used += (size_t)n;
	}
	if (!objects && !names)
		return NULL;
	char *out = NULL;
	char objs[48] = "";
	if (objects)
		snprintf(objs, sizeof(objs), ", %zu object%s", objects, objects == 1 ? "" : "s");
	char tail[48] = "";
	if (more)
		snprintf(tail, sizeof(tail), ", %zu more", more);
	if (asprintf(&out, ".git/: %s%s%s", objs[0] ? objs + 2 : list + 2, objs[0] ? list : "",
		     tail) < 0)
		return NULL;
	return out;
}

/* Does git's diff format show the entry E of a diff (a file's content or mode, a link's
 * target; not a directory, nor owner, times or xattrs alone)? */
static bool git_shows(json_t *e)
{
	json_t *patch = json_object_get(e, "patch");
	return !patch || json_is_true(patch) || json_object_get(e, "not_kept");
}

/* The entries of ARR that are not under .git (FOLD_GIT) and, for STATS_ONLY, those git's
 * --stat and --name-status list (git_shows): a new reference. */
static json_t *diff_entries(json_t *arr, bool fold_git, bool stats_only)
{
	json_t *out = json_array(), *e;
	size_t i;
	if (!out)
		return json_incref(arr);
	json_array_foreach(arr, i, e)
	{
		if (fold_git && in_git_dir(pw_json_str(e, "path")))
			continue;
		if (!stats_only || git_shows(e))
			json_array_append(out, e);
	}
	return out;
}

/* Another view of the project (a run) changed the path too while this change set was open
 * (fs/overlap.h): a line under the change for each. */
static void print_also_changed_by(json_t *by)
{
	size_t i;
	json_t *o;

	json_array_foreach(by, i, o)
	{
		const char *run = pw_json_str(o, "run");
		if (run)
			printf("            also changed by run %s", pw_q(0, run));
		else
			printf("            also changed by the view at %s",
			       pw_q(0, pw_json_str(o, "mountpoint")));
		long long cs = (long long)json_integer_value(json_object_get(o, "changeset"));
		printf(cs ? " (its change set %lld)\n" : "\n", cs);
	}
}

static int print_changes(json_t *res, bool fold_git)
{
	json_t *sets = json_object_get(res, "changesets"), *set;
	size_t i, shown = 0;
	json_array_foreach(sets, i, set)
	{
		json_t *changes = json_object_get(set, "changes"), *c;
		char t[32];
		when(json_integer_value(json_object_get(set, "started_ns")), t, sizeof(t));
		const char *name = pw_json_str(set, "name");
		const char *mode = pw_json_str(set, "mode");
		const char *run = pw_json_str(set, "run");
		/* whose: a run's, another view's (the person's view lists every view's since it
		 * was mounted), or, unsaid, the view asked */
		const char *mp = pw_json_str(set, "mountpoint");
		const char *ours = pw_json_str(res, "mountpoint");
		char by[PATH_MAX + 32] = "";
		if (run)
			snprintf(by, sizeof(by), " by run %s", pw_q(4, run));
		else if (mp && ours && !streq(mp, ours))
			snprintf(by, sizeof(by), " by the view at %s", pw_q(4, mp));
		printf("change set %lld%s%s%s, %s at %s%s%s%s%s\n",
		       (long long)json_integer_value(json_object_get(set, "id")), name ? " \"" : "",
		       name ? pw_q(0, name) : "", name ? "\"" : "", pw_json_str(set, "reason"), t,
		       mode ? " in " : "", mode ? mode : "", by,
		       json_is_true(json_object_get(set, "current")) ? " (current)" : "");
		size_t j;
		_cleanup_free_ char *gits = fold_git ? git_summary(changes) : NULL;
		json_array_foreach(changes, j, c)
		{
			if (gits && in_git_dir(pw_json_str(c, "path")))
				continue;
			const char *kind = pw_json_str(c, "kind");
			const char *path = pw_json_str(c, "path");
			const char *to = pw_json_str(c, "to");
			const char *now = pw_json_str(c, "now");
			const char *comm = pw_json_str(c, "comm");
			const char *nk = pw_json_str(c, "not_kept");
			char nowbuf[PATH_MAX + 16] = "";
			if (now)
				snprintf(nowbuf, sizeof(nowbuf), " (now %s)", pw_q(3, now));
			when(json_integer_value(json_object_get(c, "time_ns")), t, sizeof(t));
			printf("  %-9s %s%s%s%s  %s[%lld] %s%s%s\n", kind, pw_q(0, path),
			       to ? " -> " : "", to ? pw_q(1, to) : "", nowbuf,
			       comm ? pw_q(2, comm) : "?",
			       (long long)json_integer_value(json_object_get(c, "pid")), t + 11,
			       nk ? "  original not kept: " : "", nk ? nk : "");
			print_also_changed_by(json_object_get(c, "also_changed_by"));
			shown++;
		}
		if (gits) {
			printf("  %s\n", gits);
			shown++;
		}
	}
	if (!shown)
		printf("no changes\n");
	if (json_is_true(json_object_get(res, "truncated")))
		printf("(more changes than shown; narrow with --since or PATH)\n");
	return PW_EXIT_OK;
}

int cmd_changes(int argc, char **argv)
{
	opts o = {0};
	int r = parse(argc, argv, changes_usage, &o);
	if (r >= 0)
		return r;
	_cleanup_(pw_json_decrefp) json_t *res = NULL;
	if (o.plan) {
		if (o.since || o.mode || o.n_paths || o.prune) {
			pw_err(argv[0], "--plan takes no --since, --mode, --prune or PATH");
			return PW_EXIT_USAGE;
		}
		return pw_plan_changes(argv[0], o.mount, o.plan, o.json); /* cmd_plan.c */
	}
	if (o.prune) {
		if (o.since || o.mode || o.n_paths) {
			pw_err(argv[0], "--prune takes no --since, --mode or PATH");
			return PW_EXIT_USAGE;
		}
		r = call(argv[0], &o, "changes.prune", NULL, &res);
		if (r >= 0)
			return r;
		if (o.json)
			return pw_print_json(TAKE_PTR(res)) < 0 ? PW_EXIT_SYSTEM : PW_EXIT_OK;
		printf("pruned %lld change sets, freed %lld bytes; the store holds %lld bytes in "
		       "%lld blobs\n",
		       (long long)json_integer_value(json_object_get(res, "removed")),
		       (long long)json_integer_value(json_object_get(res, "freed")),
		       (long long)json_integer_value(json_object_get(res, "bytes")),
		       (long long)json_integer_value(json_object_get(res, "blobs")));
		return PW_EXIT_OK;
	}
	json_t *lp = scope_params(&o);
	if (lp && o.all)
		json_object_set_new(lp, "every", json_true());
	r = call(argv[0], &o, "changes.list", lp, &res);
	if (r >= 0)
		return r;
	if (o.json)
		return pw_print_json(TAKE_PTR(res)) < 0 ? PW_EXIT_SYSTEM : PW_EXIT_OK;
	return print_changes(res, !asked_git(&o));
}

/* git's colours of a diff's lines (color.diff's defaults). */
#define C_META "\033[1m"
#define C_FRAG "\033[36m"
#define C_OLD "\033[31m"
#define C_NEW "\033[32m"
#define C_RESET "\033[m"

/* Prints the diff text D, coloured as git colours it when COLOR. */
static void print_diff_text(const char *d, bool color)
{
	if (!color) {
		fputs(d, stdout);
		return;
	}
	for (const char *p = d; *p;) {
		size_t n = strcspn(p, "\n");
		const char *c = !strncmp(p, "@@", 2)				   ? C_FRAG
				: !strncmp(p, "--- ", 4) || !strncmp(p, "+++ ", 4) ? C_META
				: p[0] == '-'					   ? C_OLD
				: p[0] == '+'					   ? C_NEW
				: p[0] == ' ' || p[0] == '\\'			   ? NULL
										   : C_META;
		printf("%s%.*s%s\n", c ? c : "", (int)n, p, c ? C_RESET : "");
		p += n + (p[n] == '\n');
	}
}

/* The name a --stat line shows: PATH, or "WAS => PATH" for a rename (quoted). */
static char *stat_name(json_t *f)
{
	const char *path = pw_json_str(f, "path");
	const char *was = pw_json_str(f, "was");
	char *out = NULL;
	if (was && asprintf(&out, "%s => %s", pw_q(0, was), pw_q(1, path)) >= 0)
		return out;
	return strdup(pw_q(0, path));
}

/* git's diffstat: names, counts, +/- bars scaled to the terminal's width (80 off one),
 * and the totals line. */
static void print_stat(json_t *files, bool color)
{
	size_t n = json_array_size(files), name_w = 0, count_w = 1;
	long long most = 0, ins = 0, del = 0;
	char **names = calloc(n + 1, sizeof(*names));
	if (!names)
		return;
	for (size_t i = 0; i < n; i++) {
		json_t *f = json_array_get(files, i);
		long long a = json_integer_value(json_object_get(f, "added"));
		long long r = json_integer_value(json_object_get(f, "removed"));
		names[i] = stat_name(f);
		size_t w = names[i] ? strlen(names[i]) : 1;
		name_w = w > name_w ? w : name_w;
		most = a + r > most ? a + r : most;
		ins += a;
		del += r;
	}
	char digits[32];
	count_w = (size_t)snprintf(digits, sizeof(digits), "%lld", most);
	unsigned width = pw_terminal_width();
	if (!width)
		width = 80;
	/* " NAME | COUNT BARS": git gives the name up to 5/8 of the line, the bars at least 6 */
	size_t room = width > count_w + 6 ? width - count_w - 6 : 10;
	size_t name_max = room * 5 / 8 > 10 ? room * 5 / 8 : 10;
	if (name_w > name_max)
		name_w = name_max;
	size_t bar_w = room > name_w + 6 ? room - name_w : 6;
	for (size_t i = 0; i < n; i++) {
		json_t *f = json_array_get(files, i);
		long long a = json_integer_value(json_object_get(f, "added"));
		long long r = json_integer_value(json_object_get(f, "removed"));
		const char *name = names[i] ? names[i] : "?";
		size_t len = strlen(name);
		if (len > name_w) /* git cuts a long name from the left: "...ng/name" */
			printf(" ...%s", name + len - (name_w - 3));
		else
			printf(" %-*s", (int)name_w, name);
		if (json_is_true(json_object_get(f, "binary"))) {
			printf(" | %*s\n", (int)count_w, "Bin");
			continue;
		}
		long long pa = a, pr = r;
		if (most > (long long)bar_w) { /* scaled, each side at least one when nonzero */
			pa = a ? (a * (long long)bar_w + most - 1) / most : 0;
			pr = r ? (r * (long long)bar_w) / most : 0;
			if (r && !pr)
				pr = 1;
			if (pa + pr > (long long)bar_w)
				pa = (long long)bar_w - pr;
		}
		printf(" | %*lld%s", (int)count_w, a + r, a + r ? " " : "");
		if (color && pa)
			fputs(C_NEW, stdout);
		for (long long k = 0; k < pa; k++)
			putchar('+');
		if (color && pa)
			fputs(C_RESET, stdout);
		if (color && pr)
			fputs(C_OLD, stdout);
		for (long long k = 0; k < pr; k++)
			putchar('-');
		if (color && pr)
			fputs(C_RESET, stdout);
		putchar('\n');
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	/* git's summary: insertions unless only deletions, deletions unless only insertions */
	printf(" %zu file%s changed", n, n == 1 ? "" : "s");
	if (ins || !del)
		printf(", %lld insertion%s(+)", ins, ins == 1 ? "" : "s");
	if (del || !ins)
		printf(", %lld deletion%s(-)", del, del == 1 ? "" : "s");
	putchar('\n');
}

/* git's --name-status letters: A, D, M, R<similarity>. */
static void print_name_status(json_t *files)
{
	json_t *f;
	size_t i;
	json_array_foreach(files, i, f)
	{
		const char *kind = pw_json_str(f, "kind");
		const char *path = pw_json_str(f, "path");
		const char *was = pw_json_str(f, "was");
		const char *d = pw_json_str(f, "diff");
		const char *sim = d ? strstr(d, "\nsimilarity index ") : NULL;
		if (was) {
			printf("R%03d\t%s\t%s\n", sim ? atoi(sim + 18) : 100, pw_q(0, was),
			       pw_q(1, path));
			continue;
		}
		char letter = streq_ptr(kind, "created")   ? 'A'
			      : streq_ptr(kind, "deleted") ? 'D'
							   : 'M';
		printf("%c\t%s\n", letter, pw_q(0, path));
	}
}

static bool want_color(const opts *o)
{
	if (o->color && streq(o->color, "always"))
		return true;
	if (o->color && streq(o->color, "never"))
		return false;
	return pw_use_color(stdout);
}

int cmd_diff(int argc, char **argv)
{
	opts o = {0};
	int r = parse(argc, argv, diff_usage, &o);
	if (r >= 0)
		return r;
	if (o.stat + o.name_status > 1) {
		pw_err(argv[0], "--stat and --name-status: give one");
		return PW_EXIT_USAGE;
	}
	_cleanup_(pw_json_decrefp) json_t *res = NULL;
	json_t *p = scope_params(&o);
	if (p && (o.stat || o.name_status))
		json_object_set_new(p, "stat", json_true());
	if (p && o.all)
		json_object_set_new(p, "every", json_true());
	r = call(argv[0], &o, "changes.diff", p, &res);
	if (r >= 0)
		return r;
	if (o.json)
		return pw_print_json(TAKE_PTR(res)) < 0 ? PW_EXIT_SYSTEM : PW_EXIT_OK;
	bool color = want_color(&o); /* decided on the terminal, before the pager takes it */
	if (!o.no_pager)
		pw_pager_start();
	json_t *all_files = json_object_get(res, "files"), *f;
	_cleanup_free_ char *gits = asked_git(&o) ? NULL : git_summary(all_files);
	_cleanup_(pw_json_decrefp) json_t *files =
	    diff_entries(all_files, gits != NULL, o.stat || o.name_status);
	size_t i;
	if (o.stat && json_array_size(files))
		print_stat(files, color);
	else if (o.name_status)
		print_name_status(files);
	else
		json_array_foreach(files, i, f)
		{
			const char *path = pw_json_str(f, "path");
			const char *kind = pw_json_str(f, "kind");
			const char *d = pw_json_str(f, "diff");
			const char *nk = pw_json_str(f, "not_kept");
			if (nk)
				printf("%s %s: the original was not kept (%s)\n", kind,
				       pw_q(0, path), nk);
			else if (d)
				print_diff_text(d, color);
			else /* what git cannot show: a directory, owner, times, xattrs */
				printf("# %s %s\n", kind, pw_q(0, path));
		}
	if (gits && (o.stat || o.name_status))
		printf(" and .git/, git's own files (not counted above): %s; piworkfs diff %s "
		       ".git lists each\n",
		       gits + strlen(".git/: "), o.stat ? "--stat" : "--name-status");
	else if (gits) /* a line git apply skips */
		printf("# and .git/, git's own files (not shown): %s; piworkfs diff .git shows "
		       "each\n",
		       gits + strlen(".git/: "));
	if (json_is_true(json_object_get(res, "truncated")))
		printf("(diff truncated; narrow with PATH)\n");
	pw_pager_end();
	return PW_EXIT_OK;
}

/* The change sets an undo takes, "change set 4" or "change sets 3, 4". */
static void print_sets(json_t *ids)
{
	json_t *id;
	size_t i;
	printf("change set%s ", json_array_size(ids) == 1 ? "" : "s");
	json_array_foreach(ids, i, id)
	    printf("%s%lld", i ? ", " : "", (long long)json_integer_value(id));
}

/* What the undo does, one line per path (the daemon's summary), .git/ folded. */
static void print_summary(json_t *res, const char *prefix, bool fold_git)
{
	json_t *sum = json_object_get(res, "summary"), *a;
	size_t i;
	_cleanup_free_ char *gits = fold_git ? git_summary(sum) : NULL;
	json_array_foreach(sum, i, a)
	{
		const char *what = pw_json_str(a, "action");
		const char *path = pw_json_str(a, "path");
		const char *from = pw_json_str(a, "from");
		if (gits && in_git_dir(path))
			continue;
		if (from)
			printf("%s%s %s -> %s\n", prefix, what, pw_q(0, from), pw_q(1, path));
		else
			printf("%s%s %s\n", prefix, what, pw_q(0, path));
	}
	if (gits)
		printf("%sput back %s\n", prefix, gits);
}

/* Git's index, rewritten outside the view since (by `git status`): no conflict, said. */
static void print_refreshed(json_t *res, const char *verb)
{
	size_t i;
	json_t *a;
	json_array_foreach(json_object_get(res, "refreshed"), i, a)
	    printf("note: %s was rewritten outside the view since (git refreshes its index on "
		   "`git status`): %s back as recorded\n",
		   pw_q(0, json_string_value(a)), verb);
}

/*
 * undo and redo: first a dry run, printed as what is about to be done; then the same
 * change sets for real (the dry run's choice, pinned, so a change in between cannot make
 * the undo take another). --json makes one call, --dry-run the first only.
 */
static int undo_or_redo(const char *cmd, const opts *o, json_t *p, bool redo)
{
	_cleanup_(pw_json_decrefp) json_t *res = NULL, *plan = NULL;
	bool by_default = !o->since && !o->change_set && !redo;
	int r;
	if (!o->json) {
		json_t *dp = json_deep_copy(p);
		if (dp)
			json_object_set_new(dp, "dry_run", json_true());
		r = call(cmd, o, "changes.undo", dp, &plan);
		if (r >= 0) {
			json_decref(p);
			return r;
		}
		json_t *sets = json_object_get(plan, "undoes");
		if (!json_array_size(json_object_get(plan, "actions")) &&
		    !json_array_size(json_object_get(plan, "summary"))) {
			json_decref(p);
			printf(redo ? "nothing to redo\n" : "nothing to undo\n");
			return PW_EXIT_OK;
		}
		const char *verb = o->dry ? "would put" : "putting";
		if (redo)
			printf("redo%s: %s back what the undo in change set %lld took away%s:\n",
			       o->dry ? " --dry-run" : "", verb,
			       (long long)json_integer_value(json_array_get(sets, 0)),
			       o->dry ? " (nothing is done)" : "");
		else {
			printf("undo%s: %s back the originals of ", o->dry ? " --dry-run" : "",
			       verb);
			print_sets(sets);
			printf("%s:\n", o->dry ? " (nothing is done)" : "");
		}
		print_summary(plan, "  ", !asked_git(o));
		if (o->dry) {
			print_refreshed(plan, "would be put");
			json_decref(p);
			return PW_EXIT_OK;
		}
		fflush(stdout);
		if (by_default && json_array_size(sets) == 1 && p) {
			json_object_set_new(p, "change_set", json_copy(json_array_get(sets, 0)));
			json_object_set_new(p, "pinned", json_true());
		}
	}
	r = call(cmd, o, "changes.undo", p, &res);
	if (r >= 0)
		return r;
	json_t *failed = json_object_get(res, "failed"), *a;
	int status = json_array_size(failed) ? PW_EXIT_SYSTEM : PW_EXIT_OK;
	if (o->json)
		return pw_print_json(TAKE_PTR(res)) < 0 ? PW_EXIT_SYSTEM : status;
	size_t i;
	json_array_foreach(failed, i, a)
	    pw_err(cmd, "%s %s: %s", pw_json_str(a, "action"), pw_q(0, pw_json_str(a, "path")),
		   pw_json_str(a, "error"));
	print_refreshed(res, "put");
	long long cs = (long long)json_integer_value(json_object_get(res, "changeset"));
	/* 0: the daemon found nothing left to act on (another undo came first). */
	if (!o->dry && cs == 0)
		printf("nothing to %s\n", redo ? "redo" : "undo");
	else if (!o->dry)
		printf("done: change set %lld holds the %s (%s)\n", cs, redo ? "redo" : "undo",
		       redo ? "piworkfs undo --all undoes it again" : "piworkfs redo reverses it");
	return status;
}

int cmd_undo(int argc, char **argv)
{
	opts o = {0};
	int r = parse(argc, argv, undo_usage, &o);
	if (r >= 0)
		return r;
	if (!o.all && !o.n_paths) {
		pw_err(argv[0], "name the paths to undo, or --all (see 'piworkfs undo --help')");
		return PW_EXIT_USAGE;
	}
	if (o.all && o.n_paths) {
		pw_err(argv[0], "--all takes no PATH");
		return PW_EXIT_USAGE;
	}
	json_t *p = scope_params(&o);
	if (p) {
		json_object_set_new(p, "all", json_boolean(o.all));
		json_object_set_new(p, "dry_run", json_boolean(o.dry));
		json_object_set_new(p, "force", json_boolean(o.force));
	}
	return undo_or_redo(argv[0], &o, p, false);
}

int cmd_redo(int argc, char **argv)
{
	opts o = {0};
	int r = parse(argc, argv, redo_usage, &o);
	if (r >= 0)
		return r;
	if (o.n_paths || o.all || o.since || o.change_set) {
		pw_err(argv[0], "redo takes no PATH, --all, --since or --change-set: it reverses "
				"the last undo");
		return PW_EXIT_USAGE;
	}
	json_t *p = json_pack("{s:b,s:b,s:b}", "redo", true, "dry_run", o.dry, "force", o.force);
	return undo_or_redo(argv[0], &o, p, true);
}

int cmd_checkpoint(int argc, char **argv)
{
	opts o = {0};
	int r = parse(argc, argv, checkpoint_usage, &o);
	if (r >= 0)
		return r;
	if (o.n_paths > 1) {
		pw_err(argv[0], "one NAME at most");
		return PW_EXIT_USAGE;
	}
	json_t *p = json_object();
	if (p && o.n_paths)
		json_object_set_new(p, "name", json_string(o.paths[0]));
	_cleanup_(pw_json_decrefp) json_t *res = NULL;
	r = call(argv[0], &o, "checkpoint", p, &res);
	if (r >= 0)
		return r;
	if (o.json)
		return pw_print_json(TAKE_PTR(res)) < 0 ? PW_EXIT_SYSTEM : PW_EXIT_OK;
	printf("change set %lld started%s%s\n",
	       (long long)json_integer_value(json_object_get(res, "changeset")),
	       o.n_paths ? ": checkpoint " : "", o.n_paths ? pw_q(0, o.paths[0]) : "");
	return PW_EXIT_OK;
}
