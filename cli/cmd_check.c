/* SPDX-License-Identifier: MIT */
/*
 * piworkfs check: the decision for each path under a mode, and the rule that decided it.
 * One line per path, in the order given:
 *
 *   allowed  tokens.json  (design token file tokens.json — .piworkfs/config.yaml:3)
 *   denied   src/main.c  EACCES  no allow rule matches in mode design
 *   outside  /etc/passwd  EXDEV  the path leaves the project /home/u/proj
 */
#include "cli.h"
#include "options.h"
#include "output.h"
#include "project.h"
#include "report.h"

static const char usage[] =
    "Usage: piworkfs check [--mode M] [--project DIR] [--write|--read] [--json] PATH...\n"
    "\n"
    "For each PATH, tell whether mode M allows the operation on it, and which rule\n"
    "decided. PATH is relative to the current directory when that is inside the project,\n"
    "else to the project root; absolute paths must lie inside the project (under its\n"
    "view or its backing directory). Under a denial, the mode's keys that were ignored\n"
    "because the project is not trusted are listed.\n"
    "\n"
    "Options:\n"
    "  -m, --mode M       the mode to ask (default: the mode of the live view around the\n"
    "                     current directory, or of the project's live view)\n"
    "  -C, --project DIR  the project (default: the one enclosing the current directory)\n"
    "  -M, --mount PATH   the view containing PATH: its project and its live mode\n"
    "  -w, --write        ask about writing (the default)\n"
    "  -r, --read         ask about reading (denied only for hidden paths)\n"
    "      --json         print a JSON array of decisions (docs/JSON.md)\n"
    "  -h, --help         show this help\n"
    "\n"
    "Examples:\n"
    "  piworkfs check src/main.c docs/design/a.md\n"
    "  piworkfs check --mode design --json tokens.json\n"
    "\n"
    "Exit status: 0 every path allowed; 1 some path denied or outside the project;\n"
    "2 usage error (also: no --mode outside a live view); 3 unknown mode, bad project or\n"
    "bad PATH; 4 the live view does not answer; 5 system error.\n";

typedef struct check_ctx {
	const pw_cli_project *p;
	const pw_policy *policy;
	pw_op op;
	bool json;
	json_t *out; /* the array of decisions with --json */
	const pw_modeset *ms;
	bool *ignored_shown; /* the untrusted project's ignored keys were listed */
} check_ctx;

/*
 * Under a denial: the widening keys of the mode that were ignored because the project is
 * not trusted, once per run, where the person sees why (`check --mode design
 * styles/tokens.css` says no allow rule matches, but the token file was declared).
 */
static void print_ignored(const check_ctx *x)
{
	const char *mode = pw_policy_mode_name(x->policy);
	const pw_mode *m = x->ms ? pw_modeset_find(x->ms, mode) : NULL;

	if (*x->ignored_shown || !m)
		return;
	*x->ignored_shown = true;
	for (size_t i = 0; i < pw_modeset_warning_count(x->ms); i++) {
		const char *about = pw_modeset_warning_mode(x->ms, i);
		const pw_warning *w = pw_modeset_warning(x->ms, i);
		char buf[PW_PATH_MAX];

		if (!pw_warning_is_untrusted(w) || !pw_cli_ignored_applies(about, mode, m->tokens))
			continue;
		printf("         %s (%s:%u) %s\n", w->key ? w->key : "?",
		       pw_cli_display_file(x->p, w->file, buf, sizeof(buf)), w->line, w->message);
	}
}

static int print_decision(const check_ctx *x, const char *shown, bool is_dir, const pw_decision *d)
{
	char buf[PW_PATH_MAX];
	const char *file =
	    d->rule ? pw_cli_display_file(x->p, d->rule->file, buf, sizeof(buf)) : NULL;
	_cleanup_free_ char *text = NULL;

	if (x->json)
		return json_array_append_new(
			   x->out, pw_report_decision_in(shown, x->op, is_dir, d, x->policy)) < 0
			   ? -ENOMEM
			   : 0;
	text = pw_report_decision_text_in(d, x->policy, file);
	if (!text)
		return -ENOMEM;
	if (d->allowed)
		printf("allowed  %s  (%s)\n", shown, text);
	else if (d->reason == PW_REASON_OUTSIDE)
		printf("outside  %s  %s  %s %s\n", shown, pw_report_errno_name(d->err), text,
		       pw_cli_project_path(x->p));
	else {
		printf("denied   %s  %s  %s\n", shown, pw_report_errno_name(d->err), text);
		print_ignored(x);
	}
	return 0;
}

/* Decides one user path. Returns 1 when allowed, 0 when denied or outside, -errno on a
 * failure that was reported (e.g. a path too long), -ENOMEM. */
static int check_one(const check_ctx *x, const char *arg)
{
	char rel[PW_PATH_MAX];
	const char *err = NULL;
	bool slash = false, is_dir;
	pw_decision d;
	int r;

	r = pw_cli_map_path(x->p, arg, rel, &slash, &err);
	if (r == -EXDEV) {
		d = (pw_decision){.allowed = false, .err = EXDEV, .reason = PW_REASON_OUTSIDE};
		r = print_decision(x, arg, slash, &d);
		return r < 0 ? r : 0;
	}
	if (r < 0) {
		pw_err("check", "%s: %s", arg, err ? err : strerror(-r));
		return r;
	}
	is_dir = pw_cli_path_is_dir(x->p, rel, slash || rel[0] == '\0');
	pw_policy_decide(x->policy, x->op, rel, is_dir, &d);
	r = print_decision(x, rel[0] ? rel : ".", is_dir, &d);
	if (r < 0)
		return r;
	return d.allowed ? 1 : 0;
}

/* -w, -r: what to ask about (the last one given). */
static int op_option(const pw_opts *po, int c, void *data)
{
	*(pw_op *)data = c == 'r' ? PW_OP_READ : PW_OP_WRITE;
	return PW_EXIT_OK;
}

int cmd_check(int argc, char **argv)
{
	_cleanup_opts_ pw_opts po = {0};
	_cleanup_judge_ pw_cli_judge j = {0};
	_cleanup_json_ json_t *out = NULL;
	pw_op op = PW_OP_WRITE;
	bool any_denied = false, any_failed = false, ignored_shown = false;
	pw_common_opts cm = {0};
	int r = pw_opts_parse(
	    &po, argv[0], argc, argv,
	    &(pw_opts_use){.usage = usage, .common = &cm, .fn = op_option, .data = &op});

	if (r != PW_EXIT_GO_ON)
		return r;
	if (po.n_operands == 0) {
		pw_err(argv[0], "no PATH given (see 'piworkfs check --help')");
		return PW_EXIT_USAGE;
	}
	r = pw_cli_judge_open(argv[0], cm.project, cm.mode, &j);
	if (r != PW_EXIT_OK)
		return r;
	if (cm.json) {
		out = json_array();
		if (!out)
			return PW_EXIT_SYSTEM;
	}
	check_ctx x = {.p = &j.p,
		       .policy = j.policy,
		       .op = op,
		       .json = cm.json,
		       .out = out,
		       .ms = j.ms,
		       .ignored_shown = &ignored_shown};
	for (int i = 0; i < po.n_operands; i++) {
		r = check_one(&x, po.operands[i]);
		if (r == -ENOMEM) {
			pw_err(argv[0], "out of memory");
			return PW_EXIT_SYSTEM;
		}
		if (r < 0)
			any_failed = true;
		else if (r == 0)
			any_denied = true;
	}
	if (cm.json && pw_print_json(TAKE_PTR(out)) < 0) {
		pw_err(argv[0], "cannot print: %s", strerror(errno));
		return PW_EXIT_SYSTEM;
	}
	if (any_failed)
		return PW_EXIT_CONFIG;
	return any_denied ? PW_EXIT_DENIED : PW_EXIT_OK;
}
