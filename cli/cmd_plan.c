/* SPDX-License-Identifier: MIT */
/*
 * piworkfs plan [list | show [NAME] | status | approve NAME | reopen NAME | done N]: the
 * plans of the live view containing the current directory (or --mount PATH), through its
 * control socket (the plan.* methods, docs/PROTOCOL.md). Inside an agent's sandbox the socket
 * is the agent's: it may list, show and mark tasks done; approving and reopening are refused
 * by the daemon, which says so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cli.h"
#include "client/ctl_client.h"
#include "options.h"
#include "output.h"
#include "proto.h"
#include "pw_limits.h"
#include "util.h"

static const char usage[] =
    "Usage: piworkfs plan [list] [--mount PATH] [--json]\n"
    "       piworkfs plan show [NAME] | status\n"
    "       piworkfs plan approve NAME | reopen NAME\n"
    "       piworkfs plan done N [--note TEXT] [--plan NAME]\n"
    "\n"
    "The plans of the live view: Markdown files in the plans folder (docs/plans/ unless\n"
    "config.yaml says `plans:`), written in plan mode. A plan's tasks are the unchecked\n"
    "top-level \"- [ ]\" items of its \"Tasks\" section (else of its last checklist).\n"
    "\n"
    "  list        every plan: name, status, progress, last update (the default)\n"
    "  show NAME   a plan's tasks with their ticks, and what is wrong with its file\n"
    "              (default: the active plan)\n"
    "  status      the active plan (the newest approved one not done) and its next task\n"
    "  approve     the person's: the plan becomes the spec, read-only to every process in\n"
    "              every mode but off; its content hash is recorded (inside the agent: asks\n"
    "              the person, like a request to switch)\n"
    "  reopen      the person's: the plan is a draft again, its progress kept\n"
    "  done N      mark task N of the active plan done (the agent may: it changes no file)\n"
    "\n"
    "Options:\n"
    "      --note TEXT    done: a note kept with the task\n"
    "      --plan NAME    done: the plan (default: the active one)\n"
    "  -M, --mount PATH   the view containing PATH (default: the current directory)\n"
    "      --json         print JSON\n"
    "  -h, --help         show this help\n"
    "\n"
    "Examples:\n"
    "  piworkfs plan show cache\n"
    "  piworkfs plan approve cache\n"
    "  piworkfs plan done 2 --note 'tests in test_cache.py'\n"
    "\n"
    "Exit status: 0 ok; 1 refused (an agent approving or reopening; done on a draft, or\n"
    "with no approved plan in progress); 2 usage error; 3 no such plan or task, or a plan\n"
    "that cannot be approved; 4 no live view; 5 system error (also: approve or reopen\n"
    "that a live view of the project did not confirm).\n";

#define ASK_WAIT_MS 125000 /* a request lives 120 s */

typedef struct opts {
	const char *mount, *note, *plan;
	bool json;
	char **args;
	int n_args;
} opts;

static int parse(int argc, char **argv, pw_opts *po, opts *o)
{
	const pw_opt_bind binds[] = {{'M', .arg = &o->mount},
				     {PW_OPT_NOTE, .arg = &o->note},
				     {PW_OPT_PLAN, .arg = &o->plan},
				     {PW_OPT_JSON, .flag = &o->json},
				     {0}};
	int r =
	    pw_opts_parse(po, argv[0], argc, argv, &(pw_opts_use){.usage = usage, .binds = binds});

	o->args = po->operands;
	o->n_args = po->n_operands;
	return r;
}

/* A failed call's message and exit status (output.h). */
static int call_failed(const char *cmd, const opts *o, int r, int code, const char *message)
{
	static const pw_rpc_exit map[] = {
	    {PW_RPC_REFUSED, PW_EXIT_DENIED},
	    {PW_RPC_INVALID_PARAMS, PW_EXIT_CONFIG},
	    {PW_RPC_METHOD_NOT_FOUND, PW_EXIT_NO_VIEW},
	};
	return pw_cli_call_failed(cmd, o->mount, r, code, message, map, ELEMENTSOF(map),
				  PW_EXIT_NO_VIEW);
}

static long long num(json_t *o, const char *key)
{
	return (long long)json_integer_value(json_object_get(o, key));
}

static void format_ns(long long ns, char *buf, size_t size)
{
	time_t secs = (time_t)(ns / 1000000000);
	struct tm tm;

	localtime_r(&secs, &tm);
	strftime(buf, size, "%Y-%m-%d %H:%M", &tm);
}

static void print_problems(json_t *plan, const char *indent)
{
	size_t i;
	json_t *p;

	json_array_foreach(json_object_get(plan, "problems"), i, p)
	    printf("%sproblem: %s\n", indent, json_string_value(p));
}

static int print_list(json_t *res)
{
	_cleanup_(pw_table_freep) pw_table *t = pw_table_new(5);
	const char *active = pw_json_str(res, "active");
	json_t *plans = json_object_get(res, "plans"), *p;
	size_t i;

	if (json_array_size(plans) == 0) {
		printf("no plans in %s/ (plan mode writes them there)\n",
		       pw_json_str(res, "plans_dir"));
		return PW_EXIT_OK;
	}
	if (!t ||
	    pw_table_add(t, (const char *[]){"NAME", "STATUS", "DONE", "UPDATED", "TITLE"}) < 0)
		return PW_EXIT_SYSTEM;
	json_array_foreach(plans, i, p)
	{
		char name[128], done[32];
		const char *n = pw_json_str(p, "name");

		snprintf(name, sizeof(name), "%s%s", n, streq_ptr(n, active) ? " *" : "");
		snprintf(done, sizeof(done), "%lld/%lld", num(p, "done"), num(p, "total"));
		if (pw_table_add(t,
				 (const char *[]){
				     name, pw_json_str(p, "status"), done,
				     pw_json_str(p, "updated") ? pw_json_str(p, "updated") : "-",
				     pw_json_str(p, "title") ? pw_json_str(p, "title") : "-"}) < 0)
			return PW_EXIT_SYSTEM;
	}
	pw_table_print(t, stdout, 0);
	if (active)
		printf("* the active plan (piworkfs plan status)\n");
	json_array_foreach(plans, i, p) if (json_array_size(json_object_get(p, "problems")) > 0)
	{
		printf("%s:\n", pw_json_str(p, "path"));
		print_problems(p, "  ");
	}
	return PW_EXIT_OK;
}

static void print_show(json_t *p)
{
	json_t *tasks = json_object_get(p, "tasks"), *t;
	long long next = num(json_object_get(p, "next"), "task");
	const char *from = pw_json_str(p, "tasks_from");
	size_t i;

	printf("plan %s: %s\n", pw_json_str(p, "name"),
	       pw_json_str(p, "title") ? pw_json_str(p, "title") : "(no title)");
	printf("  file:     %s\n", pw_json_str(p, "path"));
	printf("  status:   %s, %lld/%lld done\n", pw_json_str(p, "status"), num(p, "done"),
	       num(p, "total"));
	if (pw_json_str(p, "approved_by"))
		printf("  approved: %s by %s\n  hash:     sha256:%s\n",
		       pw_json_str(p, "approved") ? pw_json_str(p, "approved") : "?",
		       pw_json_str(p, "approved_by"), pw_json_str(p, "hash"));
	printf("  tasks (%s):\n", streq_ptr(from, "section")	 ? "the Tasks section"
				  : streq_ptr(from, "checklist") ? "the last checklist"
								 : "none");
	json_array_foreach(tasks, i, t)
	{
		bool done = json_is_true(json_object_get(t, "done"));

		printf("    [%c] %lld. %s%s\n", done ? 'x' : ' ', num(t, "task"),
		       pw_json_str(t, "text"), num(t, "task") == next ? "   <- next" : "");
		if (done) {
			char when[32];

			format_ns(num(t, "done_ns"), when, sizeof(when));
			printf("        done %s by %s", when, pw_json_str(t, "done_by"));
			if (num(t, "changeset") > 0)
				printf(", change set %lld", num(t, "changeset"));
			printf("%s%s\n", pw_json_str(t, "note") ? ": " : "",
			       pw_json_str(t, "note") ? pw_json_str(t, "note") : "");
		}
	}
	print_problems(p, "  ");
}

static void print_status(json_t *res)
{
	const char *line = pw_json_str(res, "line");

	if (line)
		printf("%s\n", line);
	else
		printf("no approved plan in progress (piworkfs plan list)\n");
}

/* The subcommand's method and params; NULL method for a usage error (printed). */
static int request(const char *cmd, const opts *o, const char **ret_method, json_t **ret_params)
{
	const char *sub = o->n_args > 0 ? o->args[0] : "list";
	const char *arg = o->n_args > 1 ? o->args[1] : NULL;
	int want = 1;

	*ret_params = NULL;
	if (streq(sub, "list") || streq(sub, "status")) {
		*ret_method = streq(sub, "list") ? "plan.list" : "plan.status";
	} else if (streq(sub, "show")) {
		*ret_method = "plan.show";
		want = arg ? 2 : 1;
		*ret_params = arg ? json_pack("{s:s}", "name", arg) : NULL;
	} else if (streq(sub, "approve") || streq(sub, "reopen")) {
		*ret_method = streq(sub, "approve") ? "plan.approve" : "plan.reopen";
		want = 2;
		if (!arg) {
			pw_err(cmd, "plan %s: which plan? (piworkfs plan list)", sub);
			return PW_EXIT_USAGE;
		}
		*ret_params = json_pack("{s:s}", "name", arg);
	} else if (streq(sub, "done")) {
		char *end = NULL;
		long long n = arg ? strtoll(arg, &end, 10) : 0;

		*ret_method = "plan.done";
		want = 2;
		if (!arg || !*arg || *end || n < 1) {
			pw_err(cmd, "plan done: expected a task number (1, 2, ...), not '%s'",
			       arg ? arg : "");
			return PW_EXIT_USAGE;
		}
		*ret_params = json_pack("{s:I}", "task", (json_int_t)n);
		if (*ret_params && o->note)
			json_object_set_new(*ret_params, "note", json_string(o->note));
		if (*ret_params && o->plan)
			json_object_set_new(*ret_params, "name", json_string(o->plan));
	} else {
		pw_err(cmd, "unknown subcommand '%s' (list, show, status, approve, reopen, done)",
		       sub);
		return PW_EXIT_USAGE;
	}
	if (o->n_args > want) {
		json_decref(*ret_params);
		pw_err(cmd, "unexpected argument '%s' (see 'piworkfs plan --help')", o->args[want]);
		return PW_EXIT_USAGE;
	}
	if ((o->note || o->plan) && !streq(sub, "done")) {
		json_decref(*ret_params);
		pw_err(cmd, "--note and --plan go with 'plan done'");
		return PW_EXIT_USAGE;
	}
	return PW_EXIT_GO_ON;
}

/*
 * Inside the agent, `plan approve` is refused: ask the person instead (plan.request_approval,
 * the consent bar of asking to switch), and wait for the answer while run's terminal shows
 * the question. Returns an exit status.
 */
static int ask_approval(const char *cmd, const opts *o, const char *name, const char *refusal)
{
	_cleanup_(pw_json_decrefp) json_t *res = NULL;
	_cleanup_free_ char *message = NULL, *sock = NULL, *reason = NULL;
	pw_ctl_conn *c = NULL;
	const char *outcome;
	long long id = 0;
	bool typed = false;
	int code = 0, r;

	r = pw_ctl_find_view(o->mount, &sock, NULL);
	if (r == 0)
		r = pw_ctl_connect(sock, ASK_WAIT_MS + 10000, &c);
	if (r < 0)
		return call_failed(cmd, o, r, 0, NULL);
	if (asprintf(&reason, "piworkfs plan approve %s", name) < 0)
		reason = NULL;
	r = pw_ctl_call(c, "plan.request_approval",
			json_pack("{s:s,s:s?}", "name", name, "reason", reason), &res, &code,
			&message);
	if (r == 0) {
		id = json_integer_value(json_object_get(res, "id"));
		typed = json_is_true(json_object_get(res, "needs_target"));
	}
	if (r == 0)
		r = pw_mode_wait_shown(c, cmd, "approving a plan is the person's", ASK_WAIT_MS,
				       &res, &code, &message);
	pw_ctl_close(c);
	if (r < 0)
		return call_failed(cmd, o, r, code, message);
	outcome = pw_json_str(res, "outcome");
	if (o->json)
		return pw_print_json(TAKE_PTR(res)) < 0 ? PW_EXIT_SYSTEM
		       : streq_ptr(outcome, "approved") ? PW_EXIT_OK
							: PW_EXIT_DENIED;
	if (streq_ptr(outcome, "approved")) {
		printf("plan %s approved by the person\n", name);
		return PW_EXIT_OK;
	}
	pw_err(cmd, "%s", refusal ? refusal : "refused");
	if (streq_ptr(outcome, "pending")) {
		/* The answer as the person types it on their own terminal: the request's id,
		 * the plan's name where the daemon wants it typed, and the run's view. */
		_cleanup_free_ char *where = pw_mode_run_option(o->mount);

		pw_err(cmd,
		       "asked the person: they can read it with 'piworkfs plan show %s' and "
		       "allow it with 'piworkfs mode --approve %lld%s%s%s' outside the agent "
		       "(within 2 minutes)",
		       name, id, typed ? " " : "", typed ? name : "", where ? where : "");
	} else
		pw_err(cmd, "not approved: the request was %s", outcome ? outcome : "not answered");
	return PW_EXIT_DENIED;
}

void pw_plan_print_next(const char *mount, json_t *res)
{
	_cleanup_(pw_json_decrefp) json_t *st = NULL;
	json_t *pol = json_object_get(res, "policy");

	/* A mode that writes no code (plan writes only plans) has no task to start. */
	if (json_is_true(json_object_get(pol, "writes_nothing")) ||
	    json_is_true(json_object_get(pol, "fail_closed")) ||
	    json_is_string(json_object_get(pol, "plans_dir")))
		return;
	if (pw_ctl_call_at(mount, "plan.status", NULL, &st, NULL, NULL) < 0)
		return; /* a daemon without plans, or none in progress: nothing to add */
	if (pw_json_str(st, "line"))
		printf("%s\n", pw_json_str(st, "line"));
}

/* The change set ID of LIST (changes.list's result), or NULL. */
static json_t *changeset_of(json_t *list, long long id)
{
	json_t *cs;
	size_t i;

	json_array_foreach(json_object_get(list, "changesets"), i,
			   cs) if (num(cs, "id") == id) return cs;
	return NULL;
}

/* For each task of PLAN (plan.show), the change sets of LIST recorded for it, oldest first. */
static json_t *tasks_with_changes(json_t *plan, json_t *list)
{
	json_t *out = json_array(), *t, *rec;
	size_t i, j;

	json_array_foreach(json_object_get(plan, "tasks"), i, t)
	{
		json_t *sets = json_array(), *o;

		json_array_foreach(json_object_get(plan, "changesets"), j, rec)
		{
			json_t *cs = num(rec, "task") == num(t, "task")
					 ? changeset_of(list, num(rec, "changeset"))
					 : NULL;
			if (cs)
				json_array_append(sets, cs);
		}
		o = json_pack("{s:I,s:s,s:b,s:o}", "task", (json_int_t)num(t, "task"), "text",
			      pw_json_str(t, "text"), "done",
			      json_is_true(json_object_get(t, "done")), "changesets", sets);
		if (!out || !o || json_array_append_new(out, o) < 0) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}

static void print_plan_changes(json_t *plan, json_t *tasks)
{
	json_t *t, *cs, *c;
	size_t i, j, k;

	printf("plan %s: what each task changed (a change set counts for the task in progress "
	       "when it started)\n",
	       pw_json_str(plan, "name"));
	json_array_foreach(tasks, i, t)
	{
		printf("%lld. [%c] %s\n", num(t, "task"),
		       json_is_true(json_object_get(t, "done")) ? 'x' : ' ',
		       pw_json_str(t, "text"));
		if (json_array_size(json_object_get(t, "changesets")) == 0)
			printf("   no change set\n");
		json_array_foreach(json_object_get(t, "changesets"), j, cs)
		{
			char when[32];

			format_ns(num(cs, "started_ns"), when, sizeof(when));
			printf("   change set %lld (%s, %s%s%s)\n", num(cs, "id"),
			       pw_json_str(cs, "reason"), when,
			       pw_json_str(cs, "mode") ? ", mode " : "",
			       pw_json_str(cs, "mode") ? pw_json_str(cs, "mode") : "");
			if (json_array_size(json_object_get(cs, "changes")) == 0)
				printf("     no changes\n");
			json_array_foreach(json_object_get(cs, "changes"), k, c)
			    printf("     %-9s %s%s%s\n", pw_json_str(c, "kind"),
				   pw_json_str(c, "path"), pw_json_str(c, "to") ? " -> " : "",
				   pw_json_str(c, "to") ? pw_json_str(c, "to") : "");
		}
	}
}

int pw_plan_changes(const char *cmd, const char *mount, const char *name, bool json)
{
	_cleanup_(pw_json_decrefp) json_t *plan = NULL, *list = NULL, *tasks = NULL;
	_cleanup_free_ char *message = NULL;
	opts o = {.mount = mount};
	int code = 0, r;

	r = pw_ctl_call_at(mount, "plan.show", json_pack("{s:s}", "name", name), &plan, &code,
			   &message);
	if (r == 0)
		r = pw_ctl_call_at(mount, "changes.list", NULL, &list, &code, &message);
	if (r < 0)
		return call_failed(cmd, &o, r, code, message);
	tasks = tasks_with_changes(plan, list);
	if (!tasks)
		return PW_EXIT_SYSTEM;
	if (json)
		return pw_print_json(json_pack("{s:s,s:s,s:O}", "plan", pw_json_str(plan, "name"),
					       "path", pw_json_str(plan, "path"), "tasks", tasks)) <
			       0
			   ? PW_EXIT_SYSTEM
			   : PW_EXIT_OK;
	print_plan_changes(plan, tasks);
	return PW_EXIT_OK;
}

/*
 * Calls METHOD on the view of O. Approving and reopening wait for every live view of the
 * project to install the change, each given PW_PLAN_SYNC_WAIT_MS by the daemon: the answer
 * may take that long and more, where other calls get the client's usual 10 s.
 */
static int call_view(const opts *o, const char *method, json_t *params, json_t **ret, int *ret_code,
		     char **ret_message)
{
	_cleanup_free_ char *sock = NULL;
	int r;

	if (!streq(method, "plan.approve") && !streq(method, "plan.reopen"))
		return pw_ctl_call_at(o->mount, method, params, ret, ret_code, ret_message);
	r = pw_ctl_find_view(o->mount, &sock, NULL);
	if (r < 0) {
		json_decref(params);
		return r;
	}
	return pw_ctl_call_socket_timed(sock, PW_PLAN_SYNC_WAIT_MS + 30000, method, params, ret,
					ret_code, ret_message);
}

/* Did a view not confirm the change ("no-answer", peers.h)? */
static bool report_views_unconfirmed(json_t *res)
{
	json_t *v;
	size_t i;

	json_array_foreach(json_object_get(res, "views"), i,
			   v) if (streq_ptr(pw_json_str(v, "outcome"), "no-answer")) return true;
	return false;
}

/* "this view", "run ID" or the mountpoint, for the lines of report_views. */
static void view_name(json_t *v, char *buf, size_t size)
{
	if (json_is_true(json_object_get(v, "self")))
		snprintf(buf, size, "this view");
	else if (!pw_json_str(v, "mountpoint"))
		snprintf(buf, size, "the other views of the project");
	else if (pw_json_str(v, "run"))
		snprintf(buf, size, "run %s", pw_json_str(v, "run"));
	else
		snprintf(buf, size, "the view at %s", pw_json_str(v, "mountpoint"));
}

/*
 * After approve or reopen: where the change holds (every live view of the project installs it
 * before the answer: "views", docs/PROTOCOL.md), and each view where it may not. Returns
 * PW_EXIT_SYSTEM when a view did not confirm (it may still write an approved plan), else
 * PW_EXIT_OK. A view that fails closed protects the plan with everything else: said, not an
 * error.
 */
static int report_views(const char *cmd, json_t *res, bool approve)
{
	json_t *views = json_object_get(res, "views"), *v;
	char line[4096] = "", name[512];
	size_t i, n = 0;
	int rc = PW_EXIT_OK;

	json_array_foreach(views, i, v)
	{
		if (!streq_ptr(pw_json_str(v, "outcome"), "frozen") &&
		    !streq_ptr(pw_json_str(v, "outcome"), "fails-closed") &&
		    !streq_ptr(pw_json_str(v, "outcome"), "unprotected"))
			continue;
		view_name(v, name, sizeof(name));
		snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s%s", n ? ", " : "",
			 name);
		n++;
	}
	if (n > 1)
		printf("%s in %zu views of the project: %s\n",
		       approve ? "protected" : "writable again", n, line);
	json_array_foreach(views, i, v)
	{
		const char *outcome = pw_json_str(v, "outcome"), *why = pw_json_str(v, "reason");

		view_name(v, name, sizeof(name));
		if (streq_ptr(outcome, "fails-closed"))
			pw_err(cmd, "warning: %s fails closed, nothing is writable there: %s", name,
			       why ? why : "?");
		else if (streq_ptr(outcome, "unprotected"))
			printf("note: %s is in a mode that protects nothing (%s): every process "
			       "there may write the plan until it switches mode\n",
			       name, why ? why : "off");
		else if (streq_ptr(outcome, "other-database"))
			printf("note: %s keeps another state database (%s); plans approved here "
			       "are not approved there\n",
			       name, why ? why : "none");
		else if (streq_ptr(outcome, "no-answer")) {
			pw_err(cmd,
			       "%s did not confirm (%s): it may still %s the plan until it is "
			       "reloaded (piworkfs reload --mount %s)",
			       name, why ? why : "no answer", approve ? "write" : "refuse to write",
			       pw_json_str(v, "mountpoint") ? pw_json_str(v, "mountpoint")
							    : "PATH");
			rc = PW_EXIT_SYSTEM;
		}
	}
	return rc;
}

int cmd_plan(int argc, char **argv)
{
	_cleanup_opts_ pw_opts po = {0};
	_cleanup_(pw_json_decrefp) json_t *res = NULL;
	_cleanup_free_ char *message = NULL;
	opts o = {0};
	const char *method = NULL;
	json_t *params = NULL;
	int code = 0, r;

	r = parse(argc, argv, &po, &o);
	if (r >= 0)
		return r;
	r = request(argv[0], &o, &method, &params);
	if (r >= 0)
		return r;
	r = call_view(&o, method, params, &res, &code, &message);
	if (r == -EREMOTE && code == PW_RPC_REFUSED && streq(method, "plan.approve") &&
	    getenv("PIWORKFS_SOCKET"))
		return ask_approval(argv[0], &o, o.args[1], message);
	if (r < 0)
		return call_failed(argv[0], &o, r, code, message);
	if (o.json) {
		bool views = streq(method, "plan.approve") || streq(method, "plan.reopen");
		bool unconfirmed = views && report_views_unconfirmed(res);
		return pw_print_json(TAKE_PTR(res)) < 0 ? PW_EXIT_SYSTEM
		       : unconfirmed			? PW_EXIT_SYSTEM
							: PW_EXIT_OK;
	}
	if (streq(method, "plan.list"))
		return print_list(res);
	if (streq(method, "plan.show"))
		print_show(res);
	else if (streq(method, "plan.status") || streq(method, "plan.done"))
		print_status(res);
	else if (streq(method, "plan.approve")) {
		printf("plan %s approved: %s is read-only in every mode but off until `piworkfs "
		       "plan reopen %s`\n",
		       pw_json_str(res, "name"), pw_json_str(res, "path"),
		       pw_json_str(res, "name"));
		if (pw_json_str(json_object_get(res, "next"), "text"))
			printf("next: %lld. %s\n", num(json_object_get(res, "next"), "task"),
			       pw_json_str(json_object_get(res, "next"), "text"));
		return report_views(argv[0], res, true);
	} else {
		printf("plan %s reopened: a draft again, writable in plan mode (progress kept: "
		       "%lld/%lld)\n",
		       pw_json_str(res, "name"), num(res, "done"), num(res, "total"));
		return report_views(argv[0], res, false);
	}
	return PW_EXIT_OK;
}
