/* SPDX-License-Identifier: MIT */
/*
 * piworkfs check: the decision for each path under a mode, and the rule that decided it.
 * One line per path, in the order given:
 *
 *   allowed  tokens.json  (design token file tokens.json — .piworkfs/config.yaml:3)
 *   denied   src/main.c  EACCES  no allow rule matches in mode design
 *   outside  /etc/passwd  EXDEV  the path leaves the project /home/u/proj
 */
#include <getopt.h>

#include "cli.h"
#include "output.h"
#include "project.h"
#include "report.h"

static const char usage[] =
	"Usage: piworkfs check [--mode M] [--project DIR] [--write|--read] [--json] PATH...\n"
	"\n"
	"For each PATH, tell whether mode M allows the operation on it, and which rule\n"
	"decided. PATH is relative to the current directory when that is inside the project,\n"
	"else to the project root; absolute paths must lie inside the project.\n"
	"\n"
	"Options:\n"
	"  -m, --mode M       the mode to ask (default: the live view's mode)\n"
	"  -C, --project DIR  the project (default: the one enclosing the current directory)\n"
	"  -w, --write        ask about writing (the default)\n"
	"  -r, --read         ask about reading (denied only for hidden paths)\n"
	"      --json         print a JSON array of decisions (docs/JSON.md)\n"
	"  -h, --help         show this help\n"
	"\n"
	"Exit status: 0 every path allowed; 1 some path denied or outside the project;\n"
	"2 usage error; 3 unknown mode, bad project or bad PATH; 4 no live view;\n"
	"5 system error.\n";

typedef struct check_ctx {
	const pw_cli_project *p;
	const pw_policy *policy;
	pw_op op;
	bool json;
	json_t *out; /* the array of decisions with --json */
} check_ctx;

static int print_decision(const check_ctx *x, const char *shown, bool is_dir,
			  const pw_decision *d)
{
	const char *mode = pw_policy_mode_name(x->policy);
	char buf[PW_PATH_MAX];
	const char *file = d->rule ? pw_cli_display_file(x->p, d->rule->file, buf, sizeof(buf))
				   : NULL;
	_cleanup_free_ char *text = NULL;

	if (x->json)
		return json_array_append_new(x->out,
					     pw_report_decision(shown, x->op, is_dir, d, mode)) < 0
			       ? -ENOMEM
			       : 0;
	text = pw_report_decision_text(d, mode, file);
	if (!text)
		return -ENOMEM;
	if (d->allowed)
		printf("allowed  %s  (%s)\n", shown, text);
	else if (d->reason == PW_REASON_OUTSIDE)
		printf("outside  %s  %s  %s %s\n", shown, pw_report_errno_name(d->err), text,
		       x->p->root);
	else
		printf("denied   %s  %s  %s\n", shown, pw_report_errno_name(d->err), text);
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
		d = (pw_decision){ .allowed = false, .err = EXDEV, .reason = PW_REASON_OUTSIDE };
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

int cmd_check(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "mode", required_argument, NULL, 'm' },
		{ "project", required_argument, NULL, 'C' },
		{ "write", no_argument, NULL, 'w' },
		{ "read", no_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	_cleanup_project_ pw_cli_project p = { 0 };
	_cleanup_modeset_ pw_modeset *ms = NULL;
	_cleanup_policy_ pw_policy *policy = NULL;
	_cleanup_json_ json_t *out = NULL;
	const char *project = NULL, *mode = NULL, *err = NULL;
	pw_op op = PW_OP_WRITE;
	bool json = false, any_denied = false, any_failed = false;
	int c, r;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":m:C:wrh", opts, NULL)) >= 0) {
		switch (c) {
		case 'm': mode = optarg; break;
		case 'C': project = optarg; break;
		case 'w': op = PW_OP_WRITE; break;
		case 'r': op = PW_OP_READ; break;
		case 'j': json = true; break;
		case 'h': return pw_usage(argv[0], usage, false);
		default: return pw_err_option(argv[0], c, argv);
		}
	}
	if (optind >= argc) {
		pw_err(argv[0], "no PATH given (see 'piworkfs check --help')");
		return PW_EXIT_USAGE;
	}
	r = pw_cli_project_open(project, &p, &err);
	if (r < 0) {
		pw_err(argv[0], "%s: %s", project ? project : ".", err ? err : strerror(-r));
		return PW_EXIT_CONFIG;
	}
	r = pw_cli_get_policy(argv[0], &p, mode, &ms, &policy);
	if (r != PW_EXIT_OK)
		return r;
	if (json) {
		out = json_array();
		if (!out)
			return PW_EXIT_SYSTEM;
	}
	check_ctx x = { .p = &p, .policy = policy, .op = op, .json = json, .out = out };
	for (int i = optind; i < argc; i++) {
		r = check_one(&x, argv[i]);
		if (r == -ENOMEM) {
			pw_err(argv[0], "out of memory");
			return PW_EXIT_SYSTEM;
		}
		if (r < 0)
			any_failed = true;
		else if (r == 0)
			any_denied = true;
	}
	if (json && pw_print_json(TAKE_PTR(out)) < 0) {
		pw_err(argv[0], "cannot print: %s", strerror(errno));
		return PW_EXIT_SYSTEM;
	}
	if (any_failed)
		return PW_EXIT_CONFIG;
	return any_denied ? PW_EXIT_DENIED : PW_EXIT_OK;
}
