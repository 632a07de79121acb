/* SPDX-License-Identifier: MIT */
/*
 * piworkfs changes | diff | undo | checkpoint: what the view changed since a change set
 * began, the diff against the originals it kept, and putting them back. The daemon does
 * the work (fs/ctl/changes.c): the store is in the state directory, which a sandboxed agent
 * cannot reach, and only the daemon may put originals back (docs/PROTOCOL.md).
 */
#include <getopt.h>
#include <linux/limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "ctl_client.h"
#include "output.h"
#include "proto.h"
#include "util.h"

static const char changes_usage[] =
	"Usage: piworkfs changes [--since CHECKPOINT|TIME] [--mode M] [PATH...] [--json]\n"
	"       piworkfs changes --prune [--json]\n"
	"       piworkfs changes --plan NAME [--json]\n"
	"\n"
	"What the view changed, newest change set first: each path with its kind (modified,\n"
	"created, deleted, renamed, metadata), the process that first changed it, when, and in\n"
	"which mode. A change set starts at mount, at each switch into a mode that writes, and at\n"
	"`piworkfs checkpoint`. --prune applies the retention now (oldest change sets first).\n"
	"\n"
	"Options:\n"
	"  -s, --since X      only changes since checkpoint X, or since TIME (2h, 2025-01-31T14:05)\n"
	"  -m, --mode M       only changes made in mode M\n"
	"      --prune        remove old change sets (by age and total size)\n"
	"      --plan NAME    what each task of plan NAME changed (its change sets, by the task\n"
	"                     in progress when each started)\n"
	"  -M, --mount PATH   the view containing PATH (default: the current directory)\n"
	"      --json         print JSON\n"
	"  -h, --help         show this help\n"
	"\n"
	"Exit status: 0 ok; 2 usage error; 4 no live view; 5 system error.\n";

static const char diff_usage[] =
	"Usage: piworkfs diff [--since CHECKPOINT|TIME] [--stat] [PATH...] [--json]\n"
	"\n"
	"A unified diff between each original the view kept and the file now (binary files\n"
	"summarised). Without --since: the latest change set with changes.\n"
	"\n"
	"Options:\n"
	"  -s, --since X      since checkpoint X, or since TIME\n"
	"      --stat         lines added and removed per file, no diff\n"
	"  -M, --mount PATH   the view containing PATH (default: the current directory)\n"
	"      --json         print JSON\n"
	"  -h, --help         show this help\n"
	"\n"
	"Exit status: 0 ok; 2 usage error; 4 no live view; 5 system error.\n";

static const char undo_usage[] =
	"Usage: piworkfs undo [--since CHECKPOINT|TIME] [--dry-run] [--force] PATH...|--all\n"
	"\n"
	"Puts the originals back: contents and metadata restored, deleted files and directories\n"
	"made again, created ones removed, renames reversed. Without --since: the latest change\n"
	"set with changes. Refused, naming them, where a file was changed outside the view since\n"
	"(--force undoes anyway). The undo is itself a change set, so `piworkfs undo --all` again\n"
	"puts back what the undo changed.\n"
	"\n"
	"Options:\n"
	"  -a, --all          every change in the change sets chosen\n"
	"  -s, --since X      since checkpoint X, or since TIME\n"
	"  -n, --dry-run      say what would be done, do nothing\n"
	"      --force        undo also what was changed outside the view since\n"
	"  -M, --mount PATH   the view containing PATH (default: the current directory)\n"
	"      --json         print JSON\n"
	"  -h, --help         show this help\n"
	"\n"
	"Exit status: 0 ok; 1 refused (changed outside the view, or asked from inside `run`);\n"
	"2 usage error; 4 no live view; 5 system error or some path could not be put back.\n";

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
	"Exit status: 0 ok; 1 refused (inside `run`); 2 usage error; 4 no live view.\n";

enum { OPT_JSON = 0x100, OPT_PRUNE, OPT_STAT, OPT_FORCE, OPT_PLAN };

typedef struct opts {
	const char *mount, *since, *mode, *plan;
	bool json, prune, stat, all, dry, force;
	char **paths;
	int n_paths;
} opts;

/* Parses "10m", "2h", "3d" ago, or an ISO date[-time] (local time). Returns 0 or -EINVAL. */
static int parse_time(const char *s, int64_t *ret_ns)
{
	char *end = NULL;
	long long v = strtoll(s, &end, 10);
	if (end != s && end[0] && !end[1] && v >= 0) {
		int64_t unit = end[0] == 's' ? 1 : end[0] == 'm' ? 60 : end[0] == 'h' ? 3600
			     : end[0] == 'd' ? 86400 : end[0] == 'w' ? 604800 : 0;
		if (unit) {
			*ret_ns = ((int64_t)time(NULL) - v * unit) * 1000000000;
			return 0;
		}
	}
	struct tm tm = { 0 };
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
		{ "since", required_argument, NULL, 's' },
		{ "mode", required_argument, NULL, 'm' },
		{ "mount", required_argument, NULL, 'M' },
		{ "all", no_argument, NULL, 'a' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "force", no_argument, NULL, OPT_FORCE },
		{ "prune", no_argument, NULL, OPT_PRUNE },
		{ "stat", no_argument, NULL, OPT_STAT },
		{ "plan", required_argument, NULL, OPT_PLAN },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *cmd = argv[0];
	bool is_changes = streq(cmd, "changes"), is_undo = streq(cmd, "undo");
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "s:m:M:anh", longs, NULL)) != -1) {
		bool ok = true;
		switch (c) {
		case 's': o->since = optarg; ok = !streq(cmd, "checkpoint"); break;
		case 'm': o->mode = optarg; ok = is_changes; break;
		case 'M': o->mount = optarg; break;
		case 'a': o->all = true; ok = is_undo; break;
		case 'n': o->dry = true; ok = is_undo; break;
		case OPT_FORCE: o->force = true; ok = is_undo; break;
		case OPT_PRUNE: o->prune = true; ok = is_changes; break;
		case OPT_STAT: o->stat = true; ok = streq(cmd, "diff"); break;
		case OPT_PLAN: o->plan = optarg; ok = is_changes; break;
		case OPT_JSON: o->json = true; pw_err_json(true); break;
		case 'h': return pw_usage(cmd, usage, false);
		default: ok = false;
		}
		if (!ok) {
			pw_err(cmd, "unknown or misplaced option '%s' (see 'piworkfs %s --help')",
			       argv[optind - 1], cmd);
			return PW_EXIT_USAGE;
		}
	}
	o->paths = argv + optind;
	o->n_paths = argc - optind;
	return -1;
}

static int call_failed(const char *cmd, const opts *o, int r, int code, const char *message)
{
	if (r == -ENOENT) {
		pw_err(cmd, "%s is not inside a live piworkfs view (see 'piworkfs status', or use "
			    "--mount PATH)",
		       o->mount ? o->mount : "the current directory");
		return PW_EXIT_NO_VIEW;
	}
	if (r == -EREMOTE) {
		pw_err(cmd, "%s", message ? message : "the daemon refused");
		if (code == PW_RPC_INVALID_PARAMS || code == PW_RPC_INVALID_PATH)
			return PW_EXIT_USAGE;
		if (code == PW_RPC_REFUSED)
			return PW_EXIT_DENIED;
		if (code == PW_RPC_UNAVAILABLE)
			return PW_EXIT_NO_VIEW;
		return PW_EXIT_SYSTEM;
	}
	pw_err(cmd, "cannot talk to the view: %s", strerror(-r));
	return PW_EXIT_NO_VIEW;
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

static int call(const char *cmd, const opts *o, const char *method, json_t *params,
		json_t **ret)
{
	int code = 0;
	_cleanup_free_ char *message = NULL;
	int r = pw_ctl_call_at(o->mount, method, params, ret, &code, &message);
	return r < 0 ? call_failed(cmd, o, r, code, message) : -1;
}

static void when(int64_t ns, char *buf, size_t size)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm);
}

static int print_changes(json_t *res)
{
	json_t *sets = json_object_get(res, "changesets"), *set;
	size_t i, shown = 0;
	json_array_foreach(sets, i, set) {
		json_t *changes = json_object_get(set, "changes"), *c;
		char t[32];
		when(json_integer_value(json_object_get(set, "started_ns")), t, sizeof(t));
		const char *name = json_string_value(json_object_get(set, "name"));
		const char *mode = json_string_value(json_object_get(set, "mode"));
		printf("change set %lld%s%s%s, %s at %s%s%s%s\n",
		       (long long)json_integer_value(json_object_get(set, "id")), name ? " \"" : "",
		       name ? name : "", name ? "\"" : "",
		       json_string_value(json_object_get(set, "reason")), t, mode ? " in " : "",
		       mode ? mode : "",
		       json_is_true(json_object_get(set, "current")) ? " (current)" : "");
		size_t j;
		json_array_foreach(changes, j, c) {
			const char *kind = json_string_value(json_object_get(c, "kind"));
			const char *path = json_string_value(json_object_get(c, "path"));
			const char *to = json_string_value(json_object_get(c, "to"));
			const char *now = json_string_value(json_object_get(c, "now"));
			const char *comm = json_string_value(json_object_get(c, "comm"));
			const char *nk = json_string_value(json_object_get(c, "not_kept"));
			char nowbuf[PATH_MAX + 16] = "";
			if (now)
				snprintf(nowbuf, sizeof(nowbuf), " (now %s)", now);
			when(json_integer_value(json_object_get(c, "time_ns")), t, sizeof(t));
			printf("  %-9s %s%s%s%s  %s[%lld] %s%s%s\n", kind, path, to ? " -> " : "",
			       to ? to : "", nowbuf, comm ? comm : "?",
			       (long long)json_integer_value(json_object_get(c, "pid")), t + 11,
			       nk ? "  original not kept: " : "", nk ? nk : "");
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
	opts o = { 0 };
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
	r = call(argv[0], &o, "changes.list", scope_params(&o), &res);
	if (r >= 0)
		return r;
	if (o.json)
		return pw_print_json(TAKE_PTR(res)) < 0 ? PW_EXIT_SYSTEM : PW_EXIT_OK;
	return print_changes(res);
}

int cmd_diff(int argc, char **argv)
{
	opts o = { 0 };
	int r = parse(argc, argv, diff_usage, &o);
	if (r >= 0)
		return r;
	_cleanup_(pw_json_decrefp) json_t *res = NULL;
	json_t *p = scope_params(&o);
	if (p && o.stat)
		json_object_set_new(p, "stat", json_true());
	r = call(argv[0], &o, "changes.diff", p, &res);
	if (r >= 0)
		return r;
	if (o.json)
		return pw_print_json(TAKE_PTR(res)) < 0 ? PW_EXIT_SYSTEM : PW_EXIT_OK;
	json_t *files = json_object_get(res, "files"), *f;
	size_t i;
	json_array_foreach(files, i, f) {
		const char *path = json_string_value(json_object_get(f, "path"));
		const char *kind = json_string_value(json_object_get(f, "kind"));
		const char *d = json_string_value(json_object_get(f, "diff"));
		const char *nk = json_string_value(json_object_get(f, "not_kept"));
		if (o.stat) {
			printf(" %-40s | %s +%lld -%lld\n", path, kind,
			       (long long)json_integer_value(json_object_get(f, "added")),
			       (long long)json_integer_value(json_object_get(f, "removed")));
		} else if (nk) {
			printf("%s %s: the original was not kept (%s)\n", kind, path, nk);
		} else if (d) {
			fputs(d, stdout);
		} else {
			printf("%s %s\n", kind, path);
		}
	}
	if (json_is_true(json_object_get(res, "truncated")))
		printf("(diff truncated; narrow with PATH)\n");
	return PW_EXIT_OK;
}

int cmd_undo(int argc, char **argv)
{
	opts o = { 0 };
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
	_cleanup_(pw_json_decrefp) json_t *res = NULL;
	r = call(argv[0], &o, "changes.undo", p, &res);
	if (r >= 0)
		return r;
	json_t *failed = json_object_get(res, "failed");
	int status = json_array_size(failed) ? PW_EXIT_SYSTEM : PW_EXIT_OK;
	if (o.json)
		return pw_print_json(TAKE_PTR(res)) < 0 ? PW_EXIT_SYSTEM : status;
	json_t *a;
	size_t i;
	json_array_foreach(json_object_get(res, "actions"), i, a) {
		const char *what = json_string_value(json_object_get(a, "action"));
		const char *path = json_string_value(json_object_get(a, "path"));
		const char *to = json_string_value(json_object_get(a, "to"));
		printf("%s%s %s%s%s\n", o.dry ? "would " : "", what, path, to ? " -> " : "",
		       to ? to : "");
	}
	json_array_foreach(failed, i, a)
		pw_err(argv[0], "%s %s: %s", json_string_value(json_object_get(a, "action")),
		       json_string_value(json_object_get(a, "path")),
		       json_string_value(json_object_get(a, "error")));
	if (!json_array_size(json_object_get(res, "actions")))
		printf("nothing to undo\n");
	return status;
}

int cmd_checkpoint(int argc, char **argv)
{
	opts o = { 0 };
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
	       o.n_paths ? ": checkpoint " : "", o.n_paths ? o.paths[0] : "");
	return PW_EXIT_OK;
}
