/* SPDX-License-Identifier: MIT */
/*
 * piworkfs mode [NAME]: show or switch the live mode of the view containing the current
 * directory (or --mount PATH); piworkfs reload: re-read the view's mode files. Both talk
 * to the view's control socket (docs/PROTOCOL.md); the daemon decides, not this client.
 */
#include "cli.h"
#include "client/ctl_client.h"
#include "modefile.h"
#include "options.h"
#include "output.h"
#include "project.h"
#include "proto.h"
#include "ctl/run_id.h"

static const char mode_usage[] =
    "Usage: piworkfs mode [NAME] [--mount PATH | --run ID] [--json]\n"
    "       piworkfs mode --approve ID [MODE] | --approve MODE | --deny\n"
    "\n"
    "Without NAME, show the live mode of the view containing the current directory and\n"
    "what it allows, and the agent's pending request to switch if there is one. With NAME,\n"
    "switch the view to that mode; when this returns, every operation that starts\n"
    "afterwards obeys it. A mode file added after the view loaded its modes needs\n"
    "`piworkfs reload` first. Inside `piworkfs run`, a looser NAME is asked for: the\n"
    "person answers on run's terminal (or with --approve/--deny) and this waits.\n"
    "Each `piworkfs run` has a view and a mode of its own, named by the run's ID (on its\n"
    "first line and in `piworkfs status`): --run ID shows or switches that run's mode,\n"
    "and no other run's or view's.\n"
    "\n"
    "Options:\n"
    "      --approve ID|MODE  allow the agent's pending request, named by the id or the\n"
    "                     target mode that `piworkfs mode` shows (switches as `mode NAME`);\n"
    "                     a MODE after the ID is the target, typed: required for a request\n"
    "                     from `mount --agent-socket` (a pod), and a wrong one denies\n"
    "      --deny         refuse it\n"
    "      --reason TEXT  inside the agent: why it asks (shown to the person)\n"
    "      --run ID       the own view of the run ID (see 'piworkfs status')\n"
    "  -M, --mount PATH   the view containing PATH (default: the current directory)\n"
    "      --json         print the daemon's answer as JSON (docs/PROTOCOL.md)\n"
    "  -h, --help         show this help\n"
    "\n"
    "Examples:\n"
    "  piworkfs mode\n"
    "  piworkfs mode build --mount ~/proj.view\n"
    "  piworkfs mode build --run Xk3q9Z\n"
    "\n"
    "Exit status: 0 ok (errors in other mode files are a warning); 1 refused by the\n"
    "daemon; 2 usage error; 3 unknown or broken mode, or the view fails closed (see\n"
    "'piworkfs modes'); 4 not inside a live view, or no live run ID; 5 system error.\n";

static const char reload_usage[] =
    "Usage: piworkfs reload [--mount PATH] [--json]\n"
    "\n"
    "Re-read the mode files of the view containing the current directory (or PATH). If the\n"
    "active mode's file is now missing or broken, the view fails closed (nothing writable)\n"
    "until it is fixed and reloaded, or another mode is chosen.\n"
    "\n"
    "Options:\n"
    "  -M, --mount PATH   the view containing PATH (default: the current directory)\n"
    "      --json         print the daemon's answer as JSON\n"
    "  -h, --help         show this help\n"
    "\n"
    "Examples:\n"
    "  piworkfs reload\n"
    "  kill -HUP $(pgrep -f 'piworkfs mount')   # the same, by signal\n"
    "\n"
    "Exit status: 0 ok; 1 refused; 2 usage error; 3 the view fails closed, or a mode file\n"
    "or config.yaml has errors; 4 not inside a live view; 5 system error.\n";

typedef struct opts {
	const char *mount;
	const char *run; /* mode --run ID */
	char *run_mount; /* its view's mountpoint (malloc'd), which o->mount then points to */
	bool json;
	const char *name;    /* mode: the NAME operand */
	int answer;	     /* mode --approve (1) / --deny (0); -1: neither */
	const char *approve; /* --approve's ID|MODE */
	const char *reason;
} opts;

/* --approve ID|MODE, --deny: the answer to the agent's request, into the opts DATA. */
static int answer_option(const pw_opts *po, int c, void *data)
{
	opts *o = data;

	o->answer = c == PW_OPT_APPROVE;
	if (c == PW_OPT_APPROVE)
		o->approve = po->arg;
	return PW_EXIT_OK;
}

/* Parses the options shared by mode and reload, and at most MAX_OPERANDS operands (into
 * o->name). Returns PW_EXIT_GO_ON, else an exit status. */
static int parse_opts(int argc, char **argv, const char *usage, int max_operands, opts *o)
{
	_cleanup_opts_ pw_opts po = {0};
	const pw_opt_bind binds[] = {{'M', .arg = &o->mount},
				     {PW_OPT_JSON, .flag = &o->json},
				     {PW_OPT_REASON, .arg = &o->reason},
				     {PW_OPT_RUN, .arg = &o->run},
				     {0}};
	int r = pw_opts_parse(
	    &po, argv[0], argc, argv,
	    &(pw_opts_use){.usage = usage, .binds = binds, .fn = answer_option, .data = o});

	if (r == PW_EXIT_GO_ON)
		r = pw_opts_operands_at_most(&po, max_operands);
	if (r != PW_EXIT_GO_ON)
		return r;
	if (po.n_operands > 0)
		o->name = po.operands[0];
	return PW_EXIT_GO_ON;
}

/* Is a piworkfs view mounted at MOUNTPOINT now? */
static bool is_live_view(const char *mountpoint)
{
	pw_ctl_mount *m = NULL;
	size_t n = 0;
	bool found = false;

	if (pw_ctl_list_mounts(&m, &n) < 0)
		return false;
	for (size_t i = 0; i < n && !found; i++)
		found = streq(m[i].mountpoint, mountpoint);
	pw_ctl_mounts_free(m, n);
	return found;
}

/* --run ID: o->mount becomes the run's own view. Returns PW_EXIT_GO_ON, else an exit status. */
static int find_run(const char *cmd, opts *o)
{
	if (!o->run)
		return PW_EXIT_GO_ON;
	if (o->mount) {
		pw_err(cmd, "--run and --mount both name a view: give one");
		return PW_EXIT_USAGE;
	}
	if (!pw_ctl_run_id_valid(o->run)) {
		pw_err(cmd,
		       "bad run id '%s': a run's id is letters and digits (see 'piworkfs "
		       "status')",
		       o->run);
		return PW_EXIT_USAGE;
	}
	if (pw_ctl_run_mountpoint(o->run, &o->run_mount) < 0)
		return PW_EXIT_SYSTEM;
	if (!is_live_view(o->run_mount)) {
		pw_err(cmd, "no live run %s (see 'piworkfs status')", o->run);
		return PW_EXIT_NO_VIEW;
	}
	o->mount = o->run_mount;
	return PW_EXIT_GO_ON;
}

/* A failed call's message and exit status (output.h). */
static int call_failed(const char *cmd, const opts *o, int r, int code, const char *message)
{
	static const pw_rpc_exit map[] = {
	    {PW_RPC_UNKNOWN_MODE, PW_EXIT_CONFIG},
	    {PW_RPC_MODE_BROKEN, PW_EXIT_CONFIG},
	    {PW_RPC_INVALID_PARAMS, PW_EXIT_CONFIG},
	    {PW_RPC_REFUSED, PW_EXIT_DENIED},
	};
	return pw_cli_call_failed(cmd, o->mount, r, code, message, map, ELEMENTSOF(map),
				  PW_EXIT_SYSTEM);
}

/*
 * The number of errors (not warnings) the view's modeset holds: bad mode files and
 * config.yaml files, which a command that succeeded still reports in its exit status. 0
 * when the view cannot say (the answer the command printed stands).
 */
static size_t file_errors(const opts *o)
{
	_cleanup_json_ json_t *res = NULL;
	json_t *w;
	size_t i, n = 0;

	if (pw_ctl_call_at(o->mount, "modes.list", NULL, &res, NULL, NULL) < 0)
		return 0;
	json_array_foreach(json_object_get(res, "warnings"), i, w) n +=
	    streq_ptr(json_string_value(json_object_get(w, "severity")), "error");
	return n;
}

/*
 * The exit status of a mode or reload call that succeeded: 3 (configuration) when the view
 * fails closed. Errors in other mode files are the reload's business (3: what it read is
 * broken); for `mode` they are a warning and the switch that worked exits 0, as systemctl
 * does, so `piworkfs mode build && make` runs make. QUIET: the output already showed them.
 */
static int config_status(const char *cmd, const opts *o, json_t *res, bool quiet, bool errors_fail)
{
	size_t errors;

	if (json_is_true(json_object_get(res, "fail_closed")))
		return PW_EXIT_CONFIG;
	errors = file_errors(o);
	if (errors == 0)
		return PW_EXIT_OK;
	if (!quiet)
		fprintf(stderr,
			"piworkfs: %s: warning: %zu error%s in other mode files or "
			"config.yaml (see 'piworkfs modes')\n",
			cmd, errors, errors == 1 ? "" : "s");
	return errors_fail ? PW_EXIT_CONFIG : PW_EXIT_OK;
}

/* Under the mode's rules: its widening keys that were ignored because the project is not
 * trusted (`mode docs` said only "writes nothing" when its writes.allow was ignored). */
static void print_ignored(const opts *o, const char *mode)
{
	_cleanup_json_ json_t *res = NULL;
	json_t *w, *m;
	bool tokens = false;
	size_t i;

	_cleanup_project_ pw_cli_project p = {0};
	const char *perr = NULL;

	if (!mode || pw_ctl_call_at(o->mount, "modes.list", NULL, &res, NULL, NULL) < 0)
		return;
	bool have_project = pw_cli_project_open(o->mount, &p, &perr) == 0;
	json_array_foreach(json_object_get(res, "modes"), i,
			   m) if (streq_ptr(json_string_value(json_object_get(m, "name")), mode))
	    tokens = json_is_true(json_object_get(m, "tokens"));
	json_array_foreach(json_object_get(res, "warnings"), i, w)
	{
		const char *about = json_string_value(json_object_get(w, "mode"));
		const char *msg = json_string_value(json_object_get(w, "message"));
		const char *key = json_string_value(json_object_get(w, "key"));
		char buf[PW_PATH_MAX];
		if (!streq_ptr(msg, PW_UNTRUSTED_MSG) ||
		    !pw_cli_ignored_applies(about, mode, tokens))
			continue;
		printf("  %s (%s:%lld) %s\n", key ? key : "?",
		       have_project
			   ? pw_cli_display_file(&p, json_string_value(json_object_get(w, "file")),
						 buf, sizeof(buf))
			   : json_string_value(json_object_get(w, "file")),
		       (long long)json_integer_value(json_object_get(w, "line")), msg);
	}
}

/* Is rule R "DIR/" where RULES also has the subtree "DIR/" + "**" of the same kind? One
 * line says both. */
static bool dir_of_listed_subtree(json_t *rules, json_t *r)
{
	const char *pat = json_string_value(json_object_get(r, "pattern"));
	const char *kind = json_string_value(json_object_get(r, "kind"));
	size_t len = pat ? strlen(pat) : 0, i;
	json_t *o;

	if (len < 2 || pat[len - 1] != '/')
		return false;
	json_array_foreach(rules, i, o)
	{
		const char *op = json_string_value(json_object_get(o, "pattern"));
		if (op && streq_ptr(json_string_value(json_object_get(o, "kind")), kind) &&
		    strlen(op) == len + 2 && strncmp(op, pat, len) == 0 && streq(op + len, "**"))
			return true;
	}
	return false;
}

/* Prints the mode and a short list of what it allows, from a mode.get/mode.set result. */
static void print_mode(const opts *o, json_t *res, bool switched)
{
	json_t *pol = json_object_get(res, "policy"), *rules = json_object_get(pol, "rules"), *r;
	const char *mode = json_string_value(json_object_get(res, "mode"));
	const char *desc = json_string_value(json_object_get(res, "description"));
	const char *prev = json_string_value(json_object_get(res, "previous"));
	size_t i;

	if (switched && prev && !streq(prev, mode))
		printf("mode %s (was %s)\n", mode, prev);
	else
		printf("mode %s\n", mode);
	if (desc && desc[0])
		printf("  %s\n", desc);
	if (json_is_true(json_object_get(res, "fail_closed"))) {
		printf("  FAILING CLOSED: nothing is writable: %s\n",
		       json_string_value(json_object_get(res, "fail_reason")));
		return;
	}
	if (json_is_true(json_object_get(pol, "writes_nothing"))) {
		printf("  writes nothing\n");
	}
	_cleanup_table_ pw_table *t = pw_table_new(2);
	json_array_foreach(rules, i, r)
	{
		const char *kind = json_string_value(json_object_get(r, "kind"));
		const char *pat = json_string_value(json_object_get(r, "pattern"));
		if (streq_ptr(json_string_value(json_object_get(r, "layer")), "default"))
			pat = pw_cli_builtin_pattern(pat);
		if (json_is_true(json_object_get(pol, "writes_nothing")) && kind &&
		    !streq(kind, "hide"))
			continue; /* nothing is writable: only what is hidden still matters */
		if (dir_of_listed_subtree(rules, r))
			continue;
		const char *cells[] = {kind, pat};
		if (t)
			pw_table_add(t, cells);
	}
	if (t)
		pw_table_print(t, stdout, 2);
	print_ignored(o, mode);
}

/* Does a mode file for NAME exist in the view's project layer or the global layer? Returns
 * its path (malloc'd) or NULL. */
static char *mode_file_on_disk(const char *project, const char *name)
{
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	char *dirs[2] = {NULL, NULL}, *found = NULL;

	if (project && asprintf(&dirs[0], "%s/.piworkfs/modes", project) < 0)
		dirs[0] = NULL;
	if (xdg && xdg[0] == '/') {
		if (asprintf(&dirs[1], "%s/piworkfs/modes", xdg) < 0)
			dirs[1] = NULL;
	} else if (home && home[0] == '/' &&
		   asprintf(&dirs[1], "%s/.config/piworkfs/modes", home) < 0)
		dirs[1] = NULL;
	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		_cleanup_free_ char *f = NULL;
		if (!found && dirs[i] && asprintf(&f, "%s/%s.md", dirs[i], name) >= 0 &&
		    access(f, F_OK) == 0)
			found = TAKE_PTR(f);
		free(dirs[i]);
	}
	return found;
}

/*
 * The view does not know mode NAME. One line that says what to do: a file added since the
 * view loaded its modes needs `piworkfs reload` (as systemctl wants daemon-reload), a near
 * miss gets "did you mean", and otherwise the modes there are. DATA is the error's data,
 * which lists the view's modes: no second call.
 */
static int unknown_mode(const char *cmd, const char *name, json_t *data)
{
	_cleanup_free_ char *file =
	    mode_file_on_disk(json_string_value(json_object_get(data, "project")), name);
	const char *names[64];
	char list[1024] = "";
	size_t n = 0, i;
	json_t *m;

	if (file) {
		pw_err(cmd,
		       "unknown mode '%s': %s was added after the view loaded its modes; "
		       "run 'piworkfs reload' first",
		       name, file);
		return PW_EXIT_CONFIG;
	}
	json_array_foreach(json_object_get(data, "modes"), i, m)
	{
		const char *s = json_string_value(m);
		if (!s || n + 1 >= ELEMENTSOF(names))
			continue;
		names[n++] = s;
		if (*list)
			strncat(list, ", ", sizeof(list) - strlen(list) - 1);
		strncat(list, s, sizeof(list) - strlen(list) - 1);
	}
	names[n] = NULL;
	const char *hint = pw_key_near_miss(name, names);
	if (hint)
		pw_err(cmd, "unknown mode '%s' (did you mean '%s'?)", name, hint);
	else
		pw_err(cmd, "unknown mode '%s' (available: %s)", name, *list ? list : "none");
	return PW_EXIT_CONFIG;
}

static json_t *mode_params(const char *name)
{
	return name ? json_pack("{s:s}", "mode", name) : NULL;
}

/* `mode` once the view is known (o->mount; NULL: the current directory's). */
static int mode_with_view(const char *cmd, const opts *o)
{
	_cleanup_json_ json_t *res = NULL, *data = NULL;
	_cleanup_free_ char *message = NULL;
	const char *name = o->name;
	int code = 0, status, r;

	if (o->answer == 0 && name) {
		pw_err(cmd, "--deny takes no mode: it answers the pending request");
		return PW_EXIT_USAGE;
	}
	if (o->answer >= 0) /* --approve ID NAME: NAME is the target, typed */
		return pw_mode_answer(cmd, o->mount, o->answer == 1, o->approve, name, o->json);
	if (name)
		r = pw_ctl_call_at_data(o->mount, "mode.set", mode_params(name), &res, &code,
					&message, &data);
	else
		r = pw_ctl_call_at(o->mount, "mode.get", NULL, &res, &code, &message);
	if (r == -EREMOTE && code == PW_RPC_UNKNOWN_MODE && name)
		return unknown_mode(cmd, name, data);
	/* Inside the agent a loosening is refused: ask the person instead (mode_request.c). */
	if (r == -EREMOTE && code == PW_RPC_REFUSED && name && getenv("PIWORKFS_SOCKET"))
		return pw_mode_ask(cmd, o->mount, name, o->reason, message, o->json);
	if (r < 0)
		return call_failed(cmd, o, r, code, message);
	status = config_status(cmd, o, res, false, false);
	if (o->json)
		return pw_print_json(TAKE_PTR(res)) < 0 ? PW_EXIT_SYSTEM : status;
	print_mode(o, res, name != NULL);
	if (name)
		pw_plan_print_next(o->mount, res); /* cmd_plan.c: the task to start with */
	if (!name) {
		/* the view as the person named it: `answer:` then works as printed */
		_cleanup_free_ char *view = pw_mode_view_option(o->run ? NULL : o->mount, o->run);
		pw_mode_show_pending(o->mount, view);
	}
	return status;
}

int cmd_mode(int argc, char **argv)
{
	opts o = {.answer = -1};
	int r;

	r = parse_opts(argc, argv, mode_usage, 1, &o);
	if (r < 0)
		r = find_run(argv[0], &o);
	if (r < 0)
		r = mode_with_view(argv[0], &o);
	free(o.run_mount);
	return r;
}

int cmd_reload(int argc, char **argv)
{
	opts o = {};
	_cleanup_json_ json_t *res = NULL;
	_cleanup_free_ char *message = NULL;
	json_t *w;
	size_t i;
	int code = 0, status, r;

	r = parse_opts(argc, argv, reload_usage, 0, &o);
	if (r >= 0)
		return r;
	r = pw_ctl_call_at(o.mount, "reload", NULL, &res, &code, &message);
	if (r < 0)
		return call_failed(argv[0], &o, r, code, message);
	/* The text lists every warning, errors included; --json carries them too. */
	status = config_status(argv[0], &o, res, true, true);
	if (o.json)
		return pw_print_json(TAKE_PTR(res)) < 0 ? PW_EXIT_SYSTEM : status;
	printf("reloaded: mode %s (generation %lld)\n",
	       json_string_value(json_object_get(res, "mode")),
	       (long long)json_integer_value(json_object_get(res, "generation")));
	if (json_is_true(json_object_get(res, "fail_closed")))
		printf("  FAILING CLOSED: nothing is writable: %s\n",
		       json_string_value(json_object_get(res, "fail_reason")));
	const char *reason = json_string_value(json_object_get(res, "fail_reason"));
	json_array_foreach(json_object_get(res, "warnings"), i, w)
	{
		const char *text = json_string_value(w);
		/* Each problem once: the one the view fails closed for is the line above. */
		if (!text || (reason && json_is_true(json_object_get(res, "fail_closed")) &&
			      strstr(reason, text)))
			continue;
		printf("  %s: %s\n", pw_problem_word(text), text);
	}
	return status;
}
