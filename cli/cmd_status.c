/* SPDX-License-Identifier: MIT */
/*
 * piworkfs status: every live view (fuse.piworkfs mounts in /proc/self/mountinfo, or the
 * one $PIWORKFS_SOCKET names) with what its daemon says about it.
 */
#include <sys/stat.h>

#include "cli.h"
#include "client/ctl_client.h"
#include "options.h"
#include "output.h"

static const char usage[] =
    "Usage: piworkfs status [--all | --mount PATH] [--json]\n"
    "\n"
    "List your live views, the one containing the current directory first: project, mountpoint, "
    "active mode and generation, control\n"
    "socket, state database, uptime, trust, warnings (including why a view fails\n"
    "closed), denied operations, the audit writer's events: submitted, written to the\n"
    "log, dropped (the queue was full) and coalesced (merged into an existing row), and\n"
    "the FUSE requests the kernel sent, by kind: each one is a round trip to the daemon,\n"
    "which is what a workload costs in the view beyond the disk, and the transport they\n"
    "come through (FUSE over io_uring or /dev/fuse). The own view of a `piworkfs run`\n"
    "says its run: the run's ID (for `piworkfs mode --run ID`) and pid; a view the person\n"
    "mounted lists the runs of its project with their modes and pids.\n"
    "\n"
    "Options:\n"
    "  -a, --all          also other users' views (their daemons answer only them and\n"
    "                     root)\n"
    "  -M, --mount PATH   only the view containing PATH\n"
    "      --json         print a JSON array of the daemons' status objects\n"
    "                     (docs/PROTOCOL.md); a view whose daemon does not answer has\n"
    "                     {\"mountpoint\", \"error\"} (and \"hint\": what to do when the\n"
    "                     daemon is gone)\n"
    "  -h, --help         show this help\n"
    "\n"
    "Examples:\n"
    "  piworkfs status\n"
    "  piworkfs status --all --json\n"
    "  piworkfs status -M ~/proj.view\n"
    "\n"
    "Exit status: 0 ok (also when there is no view); 2 usage error; 4 the daemon of one of\n"
    "your views does not answer, or no live view contains -M PATH; 5 system error.\n";

static void format_uptime(json_int_t s, char *buf, size_t size)
{
	if (s >= 86400)
		snprintf(buf, size, "%lldd%02lldh", (long long)s / 86400,
			 (long long)s % 86400 / 3600);
	else if (s >= 3600)
		snprintf(buf, size, "%lldh%02lldm", (long long)s / 3600, (long long)s % 3600 / 60);
	else
		snprintf(buf, size, "%lldm%02llds", (long long)s / 60, (long long)s % 60);
}

static json_int_t iget(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

/* "N since mount: LOOKUP a, OPEN b, ..." with the four most frequent opcodes. */
static void format_requests(json_t *rq, char *buf, size_t size)
{
	json_t *ops = json_object_get(rq, "ops");
	const char *top[4] = {0};
	json_int_t cnt[4] = {0};
	const char *k;
	json_t *v;
	json_object_foreach(ops, k, v)
	{
		json_int_t n = json_integer_value(v);
		for (size_t i = 0; i < ELEMENTSOF(top); i++) {
			if (top[i] && n <= cnt[i])
				continue;
			for (size_t j = ELEMENTSOF(top) - 1; j > i; j--) {
				top[j] = top[j - 1];
				cnt[j] = cnt[j - 1];
			}
			top[i] = k;
			cnt[i] = n;
			break;
		}
	}
	int w = snprintf(buf, size, "%lld since mount", (long long)iget(rq, "total"));
	for (size_t i = 0; i < ELEMENTSOF(top) && top[i] && w > 0 && (size_t)w < size; i++)
		w += snprintf(buf + w, size - (size_t)w, "%s%s %lld", i ? ", " : ": ", top[i],
			      (long long)cnt[i]);
	if (w > 0 && (size_t)w < size && json_object_size(ops) > ELEMENTSOF(top))
		snprintf(buf + w, size - (size_t)w, ", ...");
}

/* "io_uring (N requests through the rings)", "/dev/fuse", or n/a from an older daemon. */
static void format_transport(json_t *tr, char *buf, size_t size)
{
	const char *name = pw_json_str(tr, "name");
	if (!name)
		snprintf(buf, size, "n/a (the daemon does not say)");
	else if (streq(name, "io_uring"))
		snprintf(buf, size, "io_uring (%lld requests through the rings)",
			 (long long)iget(tr, "ring_requests"));
	else
		snprintf(buf, size, "%s", name);
}

/* The view's lane (`mount --only`) as "GLOB, GLOB (writes outside are refused in every
 * mode)", or NULL without one. */
static char *lane_text(json_t *lane)
{
	char *s = NULL;
	size_t n = 0, i;
	json_t *g;
	FILE *f;

	if (!json_array_size(lane) || !(f = open_memstream(&s, &n)))
		return NULL;
	json_array_foreach(lane, i, g) fprintf(f, "%s%s", i ? ", " : "", json_string_value(g));
	fputs(" (writes outside it are refused in every mode)", f);
	if (fclose(f) != 0) {
		free(s);
		return NULL;
	}
	return s;
}

/* A run's own view: "ID, piworkfs run pid N, daemon pid M"; "" for a bare view. */
static void format_run(json_t *st, char *buf, size_t size)
{
	json_t *run = json_object_get(st, "run");

	buf[0] = '\0';
	if (json_is_object(run))
		snprintf(buf, size, "%s, piworkfs run pid %lld, daemon pid %lld",
			 pw_json_str(run, "id"), (long long)iget(run, "pid"),
			 (long long)iget(st, "pid"));
}

/* A bare view: the runs of its project in ALL, "ID in MODE (pid N), ..."; "" for none. */
static void format_runs(json_t *st, json_t *all, char *buf, size_t size)
{
	json_t *o;
	size_t i, w = 0;

	buf[0] = '\0';
	if (json_is_object(json_object_get(st, "run")))
		return;
	json_array_foreach(all, i, o)
	{
		json_t *run = json_object_get(o, "run");
		if (!json_is_object(run) ||
		    !streq_ptr(pw_json_str(o, "project"), pw_json_str(st, "project")) || w >= size)
			continue;
		int k = snprintf(buf + w, size - w, "%s%s in %s (pid %lld)", w ? ", " : "",
				 pw_json_str(run, "id"), pw_json_str(o, "mode"),
				 (long long)iget(run, "pid"));
		w = k < 0 ? size : w + (size_t)k;
	}
}

static void print_view(json_t *st, json_t *all)
{
	char mode[128], up[32], denied[32], counters[160], requests[192], transport[96];
	char run[128], runs[512];
	json_t *audit = json_object_get(st, "audit"), *w;
	size_t i;
	_cleanup_table_ pw_table *t = pw_table_new(2);

	printf("%s\n", pw_json_str(st, "mountpoint"));
	snprintf(mode, sizeof(mode), "%s (generation %lld)%s", pw_json_str(st, "mode"),
		 (long long)iget(st, "generation"),
		 json_is_true(json_object_get(st, "fail_closed")) ? ", FAILING CLOSED" : "");
	format_uptime(iget(st, "uptime_s"), up, sizeof(up));
	snprintf(denied, sizeof(denied), "%lld", (long long)iget(st, "denied"));
	/* submitted = written + dropped + still queued; coalesced of the written merged into
	 * an existing row (docs/AUDIT.md). */
	if (json_is_object(audit))
		snprintf(counters, sizeof(counters),
			 "%lld submitted, %lld written, %lld dropped, %lld coalesced",
			 (long long)iget(audit, "submitted"), (long long)iget(audit, "written"),
			 (long long)iget(audit, "dropped"), (long long)iget(audit, "coalesced"));
	else
		snprintf(counters, sizeof(counters), "off (no audit log)");
	if (json_is_object(json_object_get(st, "requests")))
		format_requests(json_object_get(st, "requests"), requests, sizeof(requests));
	else
		snprintf(requests, sizeof(requests), "n/a (the daemon does not count them)");
	format_transport(json_object_get(st, "transport"), transport, sizeof(transport));
	format_run(st, run, sizeof(run));
	format_runs(st, all, runs, sizeof(runs));
	const char *rows[][2] = {
	    {"project", pw_json_str(st, "project")},
	    {run[0] ? "run" : NULL, run},
	    {runs[0] ? "runs" : NULL, runs},
	    {"mode", mode},
	    {"socket", pw_json_str(st, "socket")},
	    {"state db", pw_json_str(st, "state_db") ? pw_json_str(st, "state_db") : "none"},
	    {"uptime", up},
	    {"trust", json_is_true(json_object_get(st, "trusted")) ? "trusted" : "untrusted"},
	    {"denied", denied},
	    {"audit", counters},
	    {"requests", requests},
	    {"transport", transport},
	};
	for (size_t k = 0; t && k < ELEMENTSOF(rows); k++)
		if (rows[k][0])
			pw_table_add(t, rows[k]);
	_cleanup_free_ char *lane = lane_text(json_object_get(st, "lane"));
	if (lane && t) {
		const char *row[] = {"lane", lane};
		pw_table_add(t, row);
	}
	if (json_is_true(json_object_get(st, "fail_closed"))) {
		const char *row[] = {"error", pw_json_str(st, "fail_reason")};
		if (t)
			pw_table_add(t, row);
	}
	const char *reason = pw_json_str(st, "fail_reason");
	json_array_foreach(json_object_get(st, "warnings"), i, w)
	{
		const char *text = json_string_value(w);
		/* The problem that makes the view fail closed is shown once, as the reason. */
		if (!text || (reason && json_is_true(json_object_get(st, "fail_closed")) &&
			      strstr(reason, text)))
			continue;
		const char *row[] = {pw_problem_word(text), text};
		if (t)
			pw_table_add(t, row);
	}
	if (t)
		pw_table_print(t, stdout, 2);
}

/* A view whose daemon does not answer: the error, and what to do about it. */
static void print_unanswered(json_t *st)
{
	_cleanup_free_ char *error = NULL;
	_cleanup_table_ pw_table *t = pw_table_new(2);

	printf("%s\n",
	       pw_json_str(st, "mountpoint") ? pw_json_str(st, "mountpoint") : "(PIWORKFS_SOCKET)");
	if (asprintf(&error, "the daemon does not answer on %s: %s",
		     pw_json_str(st, "socket") ? pw_json_str(st, "socket") : "?",
		     pw_json_str(st, "error")) < 0)
		error = NULL;
	const char *rows[][2] = {{"error", error ? error : pw_json_str(st, "error")},
				 {"hint", pw_json_str(st, "hint")}};
	for (size_t k = 0; t && k < ELEMENTSOF(rows); k++)
		if (rows[k][1])
			pw_table_add(t, rows[k]);
	if (t)
		pw_table_print(t, stdout, 2);
}

/* What to do about a view whose daemon does not answer (NULL: nothing to say). Nobody
 * listening (refused, no socket) means the daemon is gone: the mount is left over. */
static char *dead_daemon_hint(const char *mountpoint, int r)
{
	struct stat st;
	char *hint = NULL;
	int k;

	if (!mountpoint)
		return NULL;
	/* A FUSE mount whose daemon died answers every access with ENOTCONN, once the kernel
	 * has aborted the connection: over io_uring that waits for the ring's teardown, and
	 * the root's cached attributes may answer a stat meanwhile. A socket nobody listens
	 * on says the same sooner. */
	if (r == -ECONNREFUSED || (stat(mountpoint, &st) < 0 && errno == ENOTCONN))
		k = asprintf(&hint,
			     "its daemon is gone (killed or crashed): run 'piworkfs umount "
			     "%s' to detach the view, then mount it again",
			     mountpoint);
	else if (r == -ENOENT)
		k = asprintf(&hint, "no socket where this environment looks: the view was "
				    "mounted with another XDG_RUNTIME_DIR or --socket-dir");
	else
		return NULL;
	return k < 0 ? NULL : hint;
}

/* Asks the daemon behind SOCKET; on failure returns {"mountpoint","socket","error"}. */
static json_t *ask(const char *mountpoint, const char *socket, bool *ret_failed)
{
	json_t *res = NULL;
	_cleanup_free_ char *message = NULL;
	int r = pw_ctl_call_socket(socket, "status", NULL, &res, NULL, &message);

	if (r == 0)
		return res;
	*ret_failed = true;
	json_t *j = json_pack("{s:s?,s:s,s:s}", "mountpoint", mountpoint, "socket", socket, "error",
			      r == -EREMOTE && message ? message : strerror(-r));
	_cleanup_free_ char *hint = dead_daemon_hint(mountpoint, r);
	if (j && hint)
		json_object_set_new(j, "hint", json_string(hint));
	return j;
}

/* Appends the status of mount M to ALL; *RET_FAILED when a view of ours does not answer. */
static void add_view(json_t *all, const pw_ctl_mount *m, bool *ret_failed)
{
	_cleanup_free_ char *sock = NULL;
	/* Another user's view: its daemon (which serves only its owner and root) not
	 * answering is no failure of ours. */
	bool mine = m->uid < 0 || m->uid == (long)getuid(), theirs_failed = false;
	bool *fail = mine ? ret_failed : &theirs_failed;
	int r = pw_ctl_view_socket(m->mountpoint, m->uid, &sock);

	if (r < 0) {
		*fail = true;
		json_array_append_new(all, json_pack("{s:s,s:s}", "mountpoint", m->mountpoint,
						     "error", strerror(-r)));
		return;
	}
	json_t *one = ask(m->mountpoint, sock, fail);
	if (!mine)
		json_object_set_new(one, "owner_uid", json_integer(m->uid));
	json_array_append_new(all, one);
}

/*
 * The views to show: only the one containing ONLY (-M), else the one containing the
 * current directory first (the view the person is in is the one they ask about), then
 * their other views (and with ALL_USERS other users'). Returns an exit status.
 */
static int add_views(const char *cmd, json_t *all, const char *only, bool all_users,
		     bool *ret_failed)
{
	_cleanup_free_ char *sock = NULL, *here = NULL;
	pw_ctl_mount *m = NULL;
	size_t n = 0;
	int r = pw_ctl_find_view_full(only, &sock, &here);

	if (only && r < 0) {
		pw_err(cmd, "%s is not inside a live piworkfs view (see 'piworkfs status')", only);
		return PW_EXIT_NO_VIEW;
	}
	r = pw_ctl_list_mounts(&m, &n);
	if (r < 0) {
		pw_err(cmd, "cannot read /proc/self/mountinfo: %s", strerror(-r));
		return PW_EXIT_SYSTEM;
	}
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < n; i++) {
			bool mine = m[i].uid < 0 || m[i].uid == (long)getuid();
			bool is_here = here && streq(m[i].mountpoint, here);
			if ((pass == 0) != is_here || (!is_here && (only || (!mine && !all_users))))
				continue;
			add_view(all, &m[i], ret_failed);
		}
	pw_ctl_mounts_free(m, n);
	return PW_EXIT_OK;
}

int cmd_status(int argc, char **argv)
{
	_cleanup_opts_ pw_opts po = {0};
	_cleanup_json_ json_t *all = json_array();
	const char *env = getenv("PIWORKFS_SOCKET"), *only = NULL;
	bool json = false, failed = false, all_users = false;
	size_t i;
	json_t *st;
	const pw_opt_bind binds[] = {
	    {PW_OPT_JSON, .flag = &json}, {'a', .flag = &all_users}, {'M', .arg = &only}, {0}};
	int r = pw_opts_parse(&po, argv[0], argc, argv,
			      &(pw_opts_use){.usage = usage, .binds = binds, .no_operands = true});

	if (r != PW_EXIT_GO_ON)
		return r;
	if (only && all_users) {
		pw_err(argv[0], "--mount names one view, --all every user's: give one");
		return PW_EXIT_USAGE;
	}
	if (!all)
		return PW_EXIT_SYSTEM;

	if (env && env[0]) {
		json_array_append_new(all, ask(NULL, env, &failed));
	} else {
		r = add_views(argv[0], all, only, all_users, &failed);
		if (r != PW_EXIT_OK)
			return r;
	}

	if (json) {
		if (pw_print_json(TAKE_PTR(all)) < 0)
			return PW_EXIT_SYSTEM;
		return failed ? PW_EXIT_NO_VIEW : PW_EXIT_OK;
	}
	if (json_array_size(all) == 0)
		printf("no live views\n");
	json_array_foreach(all, i, st)
	{
		if (i > 0)
			printf("\n");
		if (pw_json_str(st, "error")) {
			print_unanswered(st);
			continue;
		}
		print_view(st, all);
	}
	return failed ? PW_EXIT_NO_VIEW : PW_EXIT_OK;
}
