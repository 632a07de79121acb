/* SPDX-License-Identifier: MIT */
/*
 * piworkfs why PATH: the last denials of PATH from the log, and the decision the project's
 * mode makes about it now (the --mode given, else the live view's mode, else the last mode
 * recorded for the project). Inside a live view the project is the view's: paths map
 * through the mountpoint, and the log is searched under the project's real path.
 */
#include <pwd.h>
#include <signal.h>
#include <sys/param.h>
#include <time.h>

#include "cli.h"
#include "ctl/events.h"
#include "ctl/run_id.h"
#include "client/ctl_client.h"
#include "log.h"
#include "options.h"
#include "output.h"
#include "project.h"
#include "report.h"
#include "store/state.h"
#include "store/reader.h"
#include "quote.h"
#include "util.h"

#define WHY_DEFAULT_LIMIT 5

static const char why_usage[] =
    "Usage: piworkfs why [--mode M] [--project DIR] [-n N] [--json] PATH\n"
    "\n"
    "Explain why writes to PATH are denied: its last denials in the audit log, and the\n"
    "decision the mode makes about it now with the rule that decides.\n"
    "\n"
    "Options:\n"
    "  -m, --mode M       judge under mode M (default: the live view's mode, else the\n"
    "                     project's last mode)\n"
    "  -C, --project DIR  the project (default: the one enclosing the current directory)\n"
    "  -M, --mount PATH   the view containing PATH: its project and its live mode\n"
    "  -n, --lines N      how many past denials to show (default 5)\n"
    "      --json         print one JSON object\n"
    "  -h, --help         show this help\n"
    "\n"
    "Examples:\n"
    "  piworkfs why src/main.c\n"
    "  piworkfs why --mode design docs/design/a.md\n"
    "\n"
    "Exit status: 0 ok; 2 usage error; 3 unknown mode, bad project or bad PATH; 4 no live\n"
    "view contains -M PATH; 5 system error.\n";

/* ---- The why command. ---- */

typedef struct why_mode {
	char *mode;
	const char *source; /* "option", "live", "last", "default" */
} why_mode;

/* The project's last mode as recorded in the database, read over a read-only connection (a
 * query never creates, migrates or repairs the file). Returns 0 with a malloc'd *ret, or
 * -errno (-ENOENT: none recorded). */
static int last_mode_readonly(const char *dbpath, const char *project, char **ret)
{
	_cleanup_(pw_store_reader_closep) pw_store_reader *db = NULL;
	int r = pw_store_open_readonly(dbpath, &db);

	if (r < 0)
		return r;
	return pw_store_last_mode(db, project, ret);
}

/* The mode to judge under: --mode, the live view's, the last recorded for PROJECT (a real
 * path), else plan (what a project never seen starts in). */
static int why_pick_mode(const pw_cli_project *p, const char *project, const char *opt,
			 const char *dbpath, why_mode *ret)
{
	char *m = NULL;

	if (opt) {
		m = strdup(opt);
		*ret = (why_mode){m, "option"};
		return m ? 0 : -ENOMEM;
	}
	if (pw_cli_live_mode(p, &m) == 0) {
		*ret = (why_mode){m, "live"};
		return 0;
	}
	if (dbpath && last_mode_readonly(dbpath, project, &m) == 0) {
		*ret = (why_mode){m, "last"};
		return 0;
	}
	m = strdup("plan");
	*ret = (why_mode){m, "default"};
	return m ? 0 : -ENOMEM;
}

static const char *why_source_text(const char *source)
{
	if (streq(source, "option"))
		return "as asked";
	if (streq(source, "live"))
		return "the live view's mode";
	if (streq(source, "last"))
		return "the project's last mode; no live view answered";
	return "the project was never mounted: a new project starts in plan";
}

typedef struct why_opts {
	pw_common_opts cm; /* -m, -C, --json */
	size_t limit;
	const char *path;
} why_opts;

/* -n N: how many past denials, into the why_opts DATA. */
static int why_option(const pw_opts *po, int c, void *data)
{
	int64_t v;

	if (pw_log_parse_count(po->spec->name, po->arg, "-n", &v) < 0)
		return PW_EXIT_USAGE;
	((why_opts *)data)->limit = (size_t)v;
	return PW_EXIT_OK;
}

/* The options into O. Returns PW_EXIT_GO_ON, or the exit status (--help: 0). */
static int why_parse(int argc, char **argv, why_opts *o)
{
	_cleanup_opts_ pw_opts po = {0};
	int r = pw_opts_parse(
	    &po, argv[0], argc, argv,
	    &(pw_opts_use){.usage = why_usage, .common = &o->cm, .fn = why_option, .data = o});

	if (r != PW_EXIT_GO_ON)
		return r;
	if (po.n_operands != 1) {
		if (po.n_operands == 0)
			pw_err(argv[0], "no PATH given (see 'piworkfs why --help')");
		else
			pw_err(argv[0], "one PATH at a time (see 'piworkfs why --help')");
		return PW_EXIT_USAGE;
	}
	o->path = po.operands[0];
	return PW_EXIT_GO_ON;
}

/* The op to judge now: the one last denied, else a plain write. */
static pw_op why_op(const log_row *rows, size_t n)
{
	if (n > 0 && rows[n - 1].op) {
		int op = pw_op_from_name(rows[n - 1].op);
		if (op >= 0 && pw_op_is_write((pw_op)op))
			return (pw_op)op;
	}
	return PW_OP_WRITE;
}

static int why_print_text(const pw_cli_project *p, const char *project, const char *rel,
			  const why_mode *wm, const pw_policy *pol, const pw_decision *d,
			  const log_row *rows, size_t n)
{
	char buf[PW_PATH_MAX];
	const char *file = d->rule ? pw_cli_display_file(p, d->rule->file, buf, sizeof(buf)) : NULL;
	_cleanup_free_ char *text = pw_report_decision_text_in(d, pol, file);

	if (!text)
		return -ENOMEM;
	printf("%s in %s\n", rel[0] ? pw_q(0, rel) : ".", pw_q(1, project));
	printf("now (mode %s, %s): %s%s%s\n", wm->mode, why_source_text(wm->source),
	       d->allowed ? "allowed" : "denied", d->allowed ? "" : " ",
	       d->allowed ? "" : pw_report_errno_name(d->err));
	printf("  %s\n", text);
	if (n == 0) {
		printf("no denials of this path in the audit log\n");
		return 0;
	}
	printf("last %zu denial%s:\n", n, n == 1 ? "" : "s");
	log_opts lo = {.limit = 0};
	log_printer pr = {.color = pw_use_color(stdout)};
	return pw_log_print(&lo, &pr, false, rows, n, NULL, 0);
}

static int why_print_json(const char *project, const char *rel, pw_op op, bool is_dir,
			  const why_mode *wm, const pw_policy *pol, const pw_decision *d,
			  const log_row *rows, size_t n)
{
	json_t *o = json_object(), *arr = json_array();
	json_t *dec = pw_report_decision_in(rel, op, is_dir, d, pol);

	if (!o || !arr || !dec || json_object_set_new(o, "path", json_string(rel)) < 0 ||
	    json_object_set_new(o, "project", json_string(project)) < 0 ||
	    json_object_set_new(o, "mode", json_string(wm->mode)) < 0 ||
	    json_object_set_new(o, "mode_source", json_string(wm->source)) < 0 ||
	    json_object_set_new(o, "now", dec) < 0) {
		json_decref(o);
		json_decref(arr);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		if (json_array_append_new(arr, pw_log_row_json(&rows[i])) < 0) {
			json_decref(o);
			json_decref(arr);
			return -ENOMEM;
		}
	if (json_object_set_new(o, "denials", arr) < 0) {
		json_decref(o);
		return -ENOMEM;
	}
	return pw_print_json(o);
}

int cmd_why(int argc, char **argv)
{
	_cleanup_free_ char *dbpath = pw_state_default_path();
	_cleanup_project_ pw_cli_project p = {0};
	_cleanup_(pw_log_live_view_done) live_view lv = {0};
	_cleanup_modeset_ pw_modeset *ms = NULL;
	_cleanup_policy_ pw_policy *pol = NULL;
	why_opts o = {.limit = WHY_DEFAULT_LIMIT};
	why_mode wm = {0};
	log_row *rows = NULL;
	size_t n = 0;
	char rel[PW_PATH_MAX];
	const char *err = NULL;
	bool slash = false;
	int r;

	r = why_parse(argc, argv, &o);
	if (r != PW_EXIT_GO_ON)
		return r; /* --help, or a usage error */
	/* Inside a live view the view is the project: paths map through its mountpoint, and
	 * the log is searched under the real project's path. */
	const char *project_opt = o.cm.project;
	if (!o.cm.project && pw_log_live_view_find(&lv) == 0)
		project_opt = lv.mountpoint; /* NULL through $PIWORKFS_SOCKET: the cwd's project */
	r = pw_cli_project_open_or_say(argv[0], project_opt, &p);
	if (r != PW_EXIT_OK)
		return r;
	const char *project = lv.project ? lv.project : pw_cli_project_path(&p);
	if (!streq(project, pw_cli_project_path(&p)))
		p.trusted = pw_cli_project_trusted(project);
	r = pw_cli_map_path(&p, o.path, rel, &slash, &err);
	if (r == -EXDEV) {
		pw_err(argv[0], "%s: outside the project %s", o.path, pw_cli_project_path(&p));
		return PW_EXIT_CONFIG;
	}
	if (r < 0) {
		pw_err(argv[0], "%s: %s", o.path, err ? err : strerror(-r));
		return PW_EXIT_CONFIG;
	}

	/* Past denials: from the log, when there is one. */
	_cleanup_(pw_store_reader_closep) pw_store_reader *db = NULL;
	if (dbpath && pw_store_open_readonly(dbpath, &db) == 0) {
		log_filter f = {.denied = true, .path_eq = rel, .project = project};
		r = pw_log_collect(db, &f, o.limit, &rows, &n);
		if (r < 0) {
			pw_err(argv[0], "cannot read the audit log in %s: %s", dbpath,
			       strerror(-r));
			return PW_EXIT_SYSTEM;
		}
	}

	if (why_pick_mode(&p, project, o.cm.mode, dbpath, &wm) < 0) {
		pw_log_rows_free(rows, n);
		return PW_EXIT_SYSTEM;
	}
	r = pw_cli_get_policy(argv[0], &p, wm.mode, &ms, &pol);
	if (r != PW_EXIT_OK) {
		free(wm.mode);
		pw_log_rows_free(rows, n);
		return r;
	}
	pw_op op = why_op(rows, n);
	bool is_dir = pw_cli_path_is_dir(&p, rel, slash || rel[0] == '\0');
	pw_decision d;
	pw_policy_decide(pol, op, rel, is_dir, &d);
	r = o.cm.json
		? why_print_json(project, rel[0] ? rel : ".", op, is_dir, &wm, pol, &d, rows, n)
		: why_print_text(&p, project, rel, &wm, pol, &d, rows, n);
	free(wm.mode);
	pw_log_rows_free(rows, n);
	if (r < 0) {
		pw_err(argv[0], "cannot print: %s", strerror(-r));
		return PW_EXIT_SYSTEM;
	}
	return PW_EXIT_OK;
}
