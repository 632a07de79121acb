/* SPDX-License-Identifier: MIT */
/*
 * piworkfs check-bash: the pre-flight of a shell command (policy/bash.h), offline, with the
 * policy of a mode. Written for an agent: one line per target that would be refused or that
 * cannot be judged, then one per write that would go through, then the verdict, then
 * what to do about it.
 *
 *   denied   src/a.c  (sed -i)  EACCES: no allow rule matches in mode design; mode design
 *            allows writes only under docs/design/..., docs/design/
 *   outside  /etc/hosts  (redirect >>)  outside the project
 *   allowed  docs/design/out.md  (redirect >)
 *   verdict: denied (2 denied, 1 outside, 0 unknown; 1 allowed) in mode design
 *   hint: ask the person to switch mode (piworkfs mode build)
 */
#include <fcntl.h>

#include "bash.h"
#include "cli.h"
#include "pw_limits.h"
#include "options.h"
#include "output.h"
#include "project.h"
#include "report.h"

static const char usage[] =
    "Usage: piworkfs check-bash [--mode M] [--project DIR] [--cwd DIR] [--json] [--] "
    "COMMAND\n"
    "\n"
    "Pre-flight of a shell command: parse COMMAND (a bash command line; '-' reads it from\n"
    "standard input) and list every path it would write, with mode M's decision for each,\n"
    "plus 'outside' for paths leaving the project and 'unknown' for what the analysis\n"
    "cannot judge. This explains; the filesystem enforces. Options go before COMMAND:\n"
    "everything from its first word on is the command.\n"
    "\n"
    "Options:\n"
    "  -m, --mode M       the mode to ask (default: the live view's mode)\n"
    "  -C, --project DIR  the project (default: the one enclosing the current directory)\n"
    "  -M, --mount PATH   the view containing PATH: its project and its live mode\n"
    "      --cwd DIR      the directory the command runs in (default: the current one\n"
    "                     when inside the project, else the project root)\n"
    "      --json         print the analysis as JSON (docs/BASH.md)\n"
    "  -h, --help         show this help\n"
    "\n"
    "Examples:\n"
    "  piworkfs check-bash 'sed -i s/a/b/ src/*.c'\n"
    "  piworkfs check-bash --mode design -- make docs\n"
    "\n"
    "Exit status: 0 every target allowed; 1 some target denied, outside or unknown;\n"
    "2 usage error (also: no --mode outside a live view); 3 unknown mode, bad project,\n"
    "unreadable or oversized COMMAND; 4 the live view does not answer; 5 system error.\n";

/* Reads standard input, at most PW_BASH_INPUT_MAX bytes. Returns the length, -E2BIG, or
 * -errno. */
static ssize_t read_stdin(char **ret)
{
	size_t cap = 4096, n = 0;
	_cleanup_free_ char *buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (n == cap) {
			if (cap > PW_BASH_INPUT_MAX)
				return -E2BIG;
			char *b = realloc(buf, cap * 2);
			if (!b)
				return -ENOMEM;
			buf = b;
			cap *= 2;
		}
		ssize_t k = read(STDIN_FILENO, buf + n, cap - n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (k == 0)
			break;
		n += (size_t)k;
	}
	if (n > PW_BASH_INPUT_MAX)
		return -E2BIG;
	*ret = TAKE_PTR(buf);
	return (ssize_t)n;
}

/* The command: one argument, or several joined by spaces (as `sh -c "$*"` would). */
static char *join_args(int argc, char **argv)
{
	size_t len = 1;
	for (int i = 0; i < argc; i++)
		len += strlen(argv[i]) + 1;
	char *s = malloc(len), *p = s;
	if (!s)
		return NULL;
	*p = '\0';
	for (int i = 0; i < argc; i++)
		p = stpcpy(stpcpy(p, argv[i]), i + 1 < argc ? " " : "");
	return s;
}

/*
 * Everything from the first word of the command on is the command (as with `sh -c`), so
 * `check-bash 'touch a' --mode build` judges "touch a --mode build" in the live mode. When
 * a later word is one of our own options, the person most likely meant it for us: say so.
 */
static void warn_options_in_command(const pw_opts *po)
{
	for (int i = 1; i < po->n_operands; i++) {
		const char *w = po->operands[i];
		for (const pw_option *o = po->spec->options; w[0] == '-' && o->name; o++) {
			size_t n = strlen(o->name);
			bool is_long = startswith(w, "--") && strncmp(w + 2, o->name, n) == 0 &&
				       (w[2 + n] == '\0' || w[2 + n] == '=');
			bool is_short = o->letter && w[1] == o->letter && w[2] == '\0';
			if (!is_long && !is_short)
				continue;
			pw_err(po->spec->name,
			       "warning: '%s' comes after the command, so it is "
			       "judged as part of it; put options first "
			       "(piworkfs check-bash %s ... -- COMMAND)",
			       w, w);
			return;
		}
	}
}

/* "; mode design allows writes only under A, B" for a refusal by lack of an allow rule. */
static void print_allowed_list(const pw_policy *policy)
{
	const char *mode = pw_policy_mode_name(policy);
	bool first = true;
	for (size_t i = 0; i < pw_policy_rule_count(policy); i++) {
		const pw_rule *r = pw_policy_rule(policy, i);
		if (r->kind != PW_RULE_ALLOW && r->kind != PW_RULE_TOKEN)
			continue;
		if (first)
			printf("; mode %s allows writes only under %s", mode, r->pattern);
		else
			printf(", %s", r->pattern);
		first = false;
	}
}

static void print_target(const pw_cli_project *p, const pw_policy *policy, const pw_bash_target *t)
{
	const char *path = t->kind == PW_BASH_KIND_COMMAND ? t->command
			   : t->path && t->path[0]	   ? t->path
							   : ".";
	const char *tail = t->subtree && t->kind != PW_BASH_KIND_COMMAND ? "/**" : "";
	if (t->subtree && t->path && !t->path[0])
		path = "", tail = "(the whole project)";

	printf("%-8s %s%s", pw_bash_status_name(t->status), path, tail);
	if (t->kind != PW_BASH_KIND_COMMAND)
		printf("  (%s%s)", t->access == PW_BASH_READ ? "read by " : "", t->command);
	if ((t->status == PW_BASH_DENIED && t->decided) || t->note)
		fputs("  ", stdout);
	if (t->status == PW_BASH_DENIED && t->decided) {
		char buf[PW_PATH_MAX];
		const pw_decision *d = &t->decision;
		const char *file =
		    d->rule ? pw_cli_display_file(p, d->rule->file, buf, sizeof(buf)) : NULL;
		_cleanup_free_ char *text = pw_report_decision_text_in(d, policy, file);
		printf("%s: %s", pw_report_errno_name(d->err), text ? text : "denied");
		if (d->reason == PW_REASON_NO_ALLOW)
			print_allowed_list(policy);
	} else if (t->note) {
		printf("%s", t->note);
	}
	if (t->kind == PW_BASH_KIND_PATTERN && t->status != PW_BASH_DENIED)
		printf(" (a pattern that matches nothing)");
	if (t->heuristic)
		printf(" [heuristic]");
	putchar('\n');
}

/* A mode other than the current one under which nothing is denied: design, then build.
 * NULL when neither would do (a protected path, say). */
static const char *suggest_mode(const pw_modeset *ms, const pw_policy *current, pw_bash_result *r)
{
	static const char *const candidates[] = {"design", "build"};
	const char *found = NULL;
	for (size_t i = 0; i < ELEMENTSOF(candidates) && !found; i++) {
		if (streq(candidates[i], pw_policy_mode_name(current)) ||
		    !pw_modeset_find(ms, candidates[i]))
			continue;
		_cleanup_policy_ pw_policy *other = NULL;
		if (pw_policy_compile(ms, candidates[i], &other) < 0)
			continue;
		pw_bash_decide(r, other);
		if (pw_bash_verdict(r) != PW_BASH_DENIED)
			found = candidates[i];
	}
	pw_bash_decide(r, current); /* restore the answers for the asked mode */
	return found;
}

static bool any_protected(const pw_bash_result *r)
{
	for (size_t i = 0; i < pw_bash_target_count(r); i++) {
		const pw_bash_target *t = pw_bash_target_get(r, i);
		if (t->status == PW_BASH_DENIED && t->decided &&
		    t->decision.reason == PW_REASON_PROTECTED)
			return true;
	}
	return false;
}

static int print_text(const pw_cli_project *p, const pw_modeset *ms, const pw_policy *policy,
		      pw_bash_result *r)
{
	size_t n[4] = {0};
	pw_bash_status v = pw_bash_verdict(r);

	/* Problems first, then the writes that would go through (what the command may do). */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < pw_bash_target_count(r); i++) {
			const pw_bash_target *t = pw_bash_target_get(r, i);
			bool counts = t->access != PW_BASH_READ || t->status == PW_BASH_DENIED;
			if (!counts || (t->status == PW_BASH_ALLOWED) != (pass == 1))
				continue;
			n[t->status]++;
			print_target(p, policy, t);
		}
	}
	if (pw_bash_result_heuristic(r))
		printf("note: the command does not parse cleanly; these answers come from a "
		       "conservative token scan and are never 'allowed'\n");
	printf("verdict: %s (%zu denied, %zu outside, %zu unknown; %zu allowed) in mode %s\n",
	       pw_bash_status_name(v), n[PW_BASH_DENIED], n[PW_BASH_OUTSIDE], n[PW_BASH_UNKNOWN],
	       n[PW_BASH_ALLOWED], pw_policy_mode_name(policy));
	const char *better = v == PW_BASH_DENIED ? suggest_mode(ms, policy, r) : NULL;
	if (better)
		printf("hint: ask the person to switch mode (piworkfs mode %s)\n", better);
	else if (v == PW_BASH_DENIED && any_protected(r))
		printf("hint: the command writes protected paths, which no working mode allows; "
		       "don't work around it, ask the person\n");
	else if (v == PW_BASH_DENIED)
		printf("hint: no other mode allows all of it; ask the person (piworkfs mode "
		       "build allows the most)\n");
	else if (v == PW_BASH_OUTSIDE)
		printf("hint: the view cannot judge writes outside the project; make sure the "
		       "person expects them\n");
	else if (v == PW_BASH_UNKNOWN)
		printf("hint: the analysis cannot judge everything; the filesystem still "
		       "enforces mode %s when the command runs\n",
		       pw_policy_mode_name(policy));
	return 0;
}

static int print_json(const pw_policy *policy, pw_bash_result *r)
{
	json_t *j = pw_bash_result_json(r);
	if (!j || json_object_set_new(j, "mode", json_string(pw_policy_mode_name(policy))) < 0) {
		json_decref(j);
		return -ENOMEM;
	}
	return pw_print_json(j);
}

int cmd_check_bash(int argc, char **argv)
{
	_cleanup_opts_ pw_opts po = {0};
	_cleanup_judge_ pw_cli_judge j = {0};
	_cleanup_free_ char *cmd = NULL;
	_cleanup_close_ int root_fd = -1;
	const char *cwd_opt = NULL, *err = NULL;
	char cwd[PW_PATH_MAX];
	bool slash;
	size_t len;
	pw_common_opts cm = {0};
	const pw_opt_bind binds[] = {{PW_OPT_CWD, .arg = &cwd_opt}, {0}};
	int r = pw_opts_parse(&po, argv[0], argc, argv,
			      &(pw_opts_use){.usage = usage, .common = &cm, .binds = binds});

	if (r != PW_EXIT_GO_ON)
		return r;
	if (po.n_operands == 0) {
		pw_err(argv[0], "no COMMAND given (see 'piworkfs check-bash --help')");
		return PW_EXIT_USAGE;
	}
	if (!po.saw_dashdash)
		warn_options_in_command(&po);
	if (po.n_operands == 1 && streq(po.operands[0], "-")) {
		ssize_t n = read_stdin(&cmd);
		if (n < 0) {
			pw_err(argv[0], "standard input: %s",
			       n == -E2BIG ? "the command is longer than 1 MiB"
					   : strerror((int)-n));
			return PW_EXIT_CONFIG;
		}
		len = (size_t)n;
	} else {
		cmd = join_args(po.n_operands, po.operands);
		if (!cmd) {
			pw_err(argv[0], "out of memory");
			return PW_EXIT_SYSTEM;
		}
		len = strlen(cmd);
	}
	if (len > PW_BASH_INPUT_MAX) {
		pw_err(argv[0], "the command is longer than 1 MiB");
		return PW_EXIT_CONFIG;
	}

	r = pw_cli_project_open_or_say(argv[0], cm.project, &j.p);
	if (r != PW_EXIT_OK)
		return r;
	r = pw_cli_map_path(&j.p, cwd_opt ? cwd_opt : ".", cwd, &slash, &err);
	if (r == -EXDEV && !cwd_opt) {
		cwd[0] = '\0'; /* not inside the project: run from its root */
	} else if (r < 0) {
		pw_err(argv[0], "--cwd %s: %s", cwd_opt ? cwd_opt : ".",
		       r == -EXDEV ? "outside the project"
		       : err	   ? err
				   : strerror(-r));
		return PW_EXIT_CONFIG;
	}
	r = pw_cli_get_policy(argv[0], &j.p, cm.mode, &j.ms, &j.policy);
	if (r != PW_EXIT_OK)
		return r;

	root_fd = open(j.p.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0) {
		pw_err(argv[0], "%s: %s", j.p.root, strerror(errno));
		return PW_EXIT_CONFIG;
	}
	pw_bash_opts o = {.root_fd = root_fd, .root_path = j.p.root, .cwd = cwd};
	pw_bash_result *res = NULL;
	r = pw_bash_analyze(cmd, len, &o, &res);
	if (r < 0) {
		const char *why = NULL;
		if (r == -ENOTSUP)
			pw_bash_check_runtime(&why);
		pw_err(argv[0], "%s",
		       r == -E2BIG    ? "the command is longer than 1 MiB"
		       : r == -EINVAL ? "the command contains a NUL byte"
		       : why	      ? why
				      : strerror(-r));
		return r == -ENOMEM ? PW_EXIT_SYSTEM : PW_EXIT_CONFIG;
	}
	pw_bash_decide(res, j.policy);
	pw_bash_status v = pw_bash_verdict(res);
	r = cm.json ? print_json(j.policy, res) : print_text(&j.p, j.ms, j.policy, res);
	pw_bash_result_free(res);
	if (r < 0) {
		pw_err(argv[0], "cannot print: %s", strerror(-r));
		return PW_EXIT_SYSTEM;
	}
	return v == PW_BASH_ALLOWED ? PW_EXIT_OK : PW_EXIT_DENIED;
}
