/* SPDX-License-Identifier: MIT */
/*
 * piworkfs modes: every mode a project can use, where it was loaded from, and every warning
 * the loading produced.
 */
#include "cli.h"
#include "client/ctl_client.h"
#include "options.h"
#include "output.h"
#include "project.h"
#include "report.h"

static const char usage[] =
    "Usage: piworkfs modes [--project DIR] [--check] [--json]\n"
    "\n"
    "List the modes available for a project: name, layer (bundled, global, project),\n"
    "source file and description, then every warning about the mode files and\n"
    "configuration, as FILE:LINE:COLUMN: KEY: MESSAGE.\n"
    "\n"
    "Options:\n"
    "  -C, --project DIR  the project (default: the one enclosing the current directory)\n"
    "  -M, --mount PATH   the project of the view containing PATH\n"
    "      --check        check every mode file and config.yaml, like `nginx -t`: print\n"
    "                     only the problems and a summary, and exit 3 on any error or\n"
    "                     warning (for a project's CI); the project's files are read as\n"
    "                     if it were trusted, so its widening keys are checked too\n"
    "      --json         print JSON (docs/JSON.md)\n"
    "  -h, --help         show this help\n"
    "\n"
    "Examples:\n"
    "  piworkfs modes\n"
    "  piworkfs modes --check -C ~/proj\n"
    "\n"
    "Exit status: 0 ok; 2 usage error; 3 a mode file or config.yaml has errors (with\n"
    "--check: errors or warnings), the live view of the project fails closed, or the\n"
    "bundled modes could not be read at all; 4 no live view contains -M PATH; 5 system\n"
    "error.\n";

/* "1 error:", "2 warnings:", "1 error, 2 warnings:": the heading names what follows. */
static void print_problem_count(const pw_modeset *ms)
{
	size_t nw = pw_modeset_warning_count(ms), errors = 0;

	for (size_t i = 0; i < nw; i++)
		errors += pw_modeset_warning(ms, i)->severity == PW_ERROR;
	if (errors && errors < nw)
		printf("\n%zu error%s, %zu warning%s:\n", errors, errors == 1 ? "" : "s",
		       nw - errors, nw - errors == 1 ? "" : "s");
	else if (errors)
		printf("\n%zu error%s:\n", errors, errors == 1 ? "" : "s");
	else
		printf("\n%zu warning%s:\n", nw, nw == 1 ? "" : "s");
}

static int print_text(const pw_cli_project *p, const pw_modeset *ms)
{
	_cleanup_table_ pw_table *t = pw_table_new(4);
	size_t nw = pw_modeset_warning_count(ms);
	char buf[PW_PATH_MAX];

	if (!t || pw_table_add(t, (const char *[]){"MODE", "LAYER", "FILE", "DESCRIPTION"}) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < pw_modeset_count(ms); i++) {
		const pw_mode *m = pw_modeset_get(ms, i);
		const char *row[] = {m->name, pw_layer_name(m->layer),
				     pw_cli_display_file(p, m->file, buf, sizeof(buf)),
				     m->description};
		if (pw_table_add(t, row) < 0)
			return -ENOMEM;
	}
	printf("project %s (%s)\n\n", pw_cli_project_path(p),
	       p->trusted ? "trusted" : "not trusted");
	pw_table_print(t, stdout, 0);
	if (nw > 0)
		print_problem_count(ms);
	/* one line each, as compilers print them: FILE:LINE:COL: is what editors jump to */
	for (size_t i = 0; i < nw; i++) {
		_cleanup_free_ char *line = pw_warning_format(pw_modeset_warning(ms, i));
		if (!line)
			return -ENOMEM;
		printf("  %s\n", line);
	}
	return 0;
}

/* The problems of --check, one per line, and a summary. */
static int print_check(const pw_cli_project *p, const pw_modeset *ms, size_t errors)
{
	size_t nw = pw_modeset_warning_count(ms), warnings = nw - errors;

	for (size_t i = 0; i < nw; i++) {
		_cleanup_free_ char *line = pw_warning_format(pw_modeset_warning(ms, i));
		if (!line)
			return -ENOMEM;
		printf("%s\n", line);
	}
	if (nw == 0)
		printf("%s: %zu modes, no problems in the mode files and configuration\n",
		       pw_cli_project_path(p), pw_modeset_count(ms));
	else
		printf("%s: %zu error%s, %zu warning%s in the mode files and configuration\n",
		       pw_cli_project_path(p), errors, errors == 1 ? "" : "s", warnings,
		       warnings == 1 ? "" : "s");
	return 0;
}

static size_t count_errors(const pw_modeset *ms)
{
	size_t n = 0;

	for (size_t i = 0; i < pw_modeset_warning_count(ms); i++)
		n += pw_modeset_warning(ms, i)->severity == PW_ERROR;
	return n;
}

/*
 * When the project is a live view (P->backing): does the view fail closed? Its daemon
 * answers, since its modes are those of its last load. Returns the reason (malloc'd) or
 * NULL when it does not, or cannot say.
 */
static char *live_fail_reason(const pw_cli_project *p)
{
	_cleanup_json_ json_t *res = NULL;
	const char *why;

	if (!p->backing || pw_ctl_call_at(p->root, "mode.get", NULL, &res, NULL, NULL) < 0 ||
	    !json_is_true(json_object_get(res, "fail_closed")))
		return NULL;
	why = json_string_value(json_object_get(res, "fail_reason"));
	return strdup(why ? why : "unknown reason");
}

/* Is the view's fail-closed REASON one of the errors MS lists? */
static bool reason_listed(const pw_modeset *ms, const char *reason)
{
	for (size_t i = 0; i < pw_modeset_warning_count(ms); i++) {
		_cleanup_free_ char *line = pw_warning_format(pw_modeset_warning(ms, i));
		if (line && pw_modeset_warning(ms, i)->severity == PW_ERROR && strstr(reason, line))
			return true;
	}
	return false;
}

static json_t *modes_json(const pw_cli_project *p, const pw_modeset *ms)
{
	json_t *o = json_object(), *set = pw_report_modeset(ms);

	if (!o || !set ||
	    json_object_set_new(o, "project", json_string(pw_cli_project_path(p))) < 0 ||
	    json_object_set_new(o, "trusted", json_boolean(p->trusted)) < 0 ||
	    json_object_update(o, set) < 0) {
		json_decref(o);
		json_decref(set);
		return NULL;
	}
	json_decref(set);
	return o;
}

int cmd_modes(int argc, char **argv)
{
	_cleanup_opts_ pw_opts po = {0};
	_cleanup_project_ pw_cli_project p = {0};
	_cleanup_modeset_ pw_modeset *ms = NULL;
	_cleanup_free_ char *fail = NULL;
	bool check = false, bundled_ok = false;
	size_t errors;
	pw_common_opts cm = {0};
	const pw_opt_bind binds[] = {{PW_OPT_CHECK, .flag = &check}, {0}};
	int r = pw_opts_parse(
	    &po, argv[0], argc, argv,
	    &(pw_opts_use){.usage = usage, .common = &cm, .binds = binds, .no_operands = true});

	if (r != PW_EXIT_GO_ON)
		return r;
	r = pw_cli_project_open_or_say(argv[0], cm.project, &p);
	if (r != PW_EXIT_OK)
		return r;
	/* Trust is a fact about this machine, not a problem of the files: --check reads the
	 * project's layer as if trusted, so its widening keys are checked, not warned about. */
	if (check)
		p.trusted = true;
	r = pw_cli_load_modes(&p, &ms, &bundled_ok);
	if (r < 0) {
		pw_err(argv[0], "cannot load modes: %s", strerror(-r));
		return PW_EXIT_SYSTEM;
	}
	errors = count_errors(ms);
	if (cm.json)
		r = pw_print_json(modes_json(&p, ms));
	else
		r = check ? print_check(&p, ms, errors) : print_text(&p, ms);
	if (r < 0) {
		pw_err(argv[0], "cannot print: %s", strerror(-r));
		return PW_EXIT_SYSTEM;
	}
	if (!bundled_ok) {
		pw_err(argv[0], "%s: cannot read the bundled modes (set PIWORKFS_MODES_DIR?)",
		       p.bundled_dir);
		return PW_EXIT_CONFIG;
	}
	fail = live_fail_reason(&p);
	if (fail) {
		/* Each problem once: when the reason is an error listed above, point at it. */
		if (!cm.json && reason_listed(ms, fail))
			pw_err(argv[0], "the live view of %s fails closed for the error above",
			       pw_cli_project_path(&p));
		else
			pw_err(argv[0], "the live view of %s fails closed: %s",
			       pw_cli_project_path(&p), fail);
		return PW_EXIT_CONFIG;
	}
	if (errors > 0 || (check && pw_modeset_warning_count(ms) > 0))
		return PW_EXIT_CONFIG;
	return PW_EXIT_OK;
}
