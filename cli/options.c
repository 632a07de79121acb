/* SPDX-License-Identifier: MIT */
/*
 * The option tables of every command and the parser that reads them (options.h has the
 * contract). The tables are the one source: the parser, the --help/man page test and the
 * shell completions (cmd_completion.c) all read them.
 */
#include "options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client/ctl_client.h"
#include "modefile.h"
#include "output.h"
#include "project.h"
#include "util.h"

#define OPT_HELP                                                                                   \
	{                                                                                          \
		"help", 'h', NULL, 'h', PW_COMPLETE_NONE, "show this help"                         \
	}
#define OPT_JSON                                                                                   \
	{                                                                                          \
		"json", 0, NULL, PW_OPT_JSON, PW_COMPLETE_NONE, "print JSON"                       \
	}
#define OPT_MODE(what)                                                                             \
	{                                                                                          \
		"mode", 'm', "MODE", 'm', PW_COMPLETE_MODE, what                                   \
	}
#define OPT_PROJECT                                                                                \
	{                                                                                          \
		"project", 'C', "DIR", 'C', PW_COMPLETE_DIR, "the project"                         \
	}
#define OPT_MOUNT                                                                                  \
	{                                                                                          \
		"mount", 'M', "PATH", 'M', PW_COMPLETE_MOUNTPOINT, "the view containing PATH"      \
	}
/* -M PATH in the commands that name their project with -C: the view containing PATH (or
 * whose project PATH lies in), that view's project and live mode. The parser finds the
 * view, names it to project.c (whose live mode and lane then come from it, not from the
 * view around the current directory) and hands the command -C with its mountpoint. */
#define OPT_VIEW                                                                                   \
	{                                                                                          \
		"mount", 'M', "PATH", PW_OPT_VIEW, PW_COMPLETE_MOUNTPOINT,                         \
		    "the view containing PATH"                                                     \
	}
#define OPT_END                                                                                    \
	{                                                                                          \
		NULL, 0, NULL, 0, PW_COMPLETE_NONE, NULL                                           \
	}

/* The groups of options that several tables share, in the order --help lists them: the
 * project named by -C DIR or by -M PATH (a view); --json and -h, which end most tables; -M
 * PATH, the view a command talks to, before them. */
#define OPT_PROJECT_OR_VIEW OPT_PROJECT, OPT_VIEW
#define OPT_TAIL OPT_JSON, OPT_HELP, OPT_END
#define OPT_ASK_VIEW OPT_MOUNT, OPT_TAIL

static const pw_option mount_opts[] = {
    OPT_MODE("start in MODE"),
    {"foreground", 'f', NULL, 'f', PW_COMPLETE_NONE, "stay in the foreground"},
    {"options", 'o', "OPTIONS", 'o', PW_COMPLETE_MOUNT_OPTIONS,
     "mode=M, allow_other, nonempty, FUSE options"},
    {"debug", 'd', NULL, 'd', PW_COMPLETE_NONE, "log every FUSE request (implies -f)"},
    {"timeout", 0, "SEC", PW_OPT_TIMEOUT, PW_COMPLETE_NONE, "kernel cache timeout"},
    {"no-watch", 0, NULL, PW_OPT_NO_WATCH, PW_COMPLETE_NONE, "do not follow outside changes"},
    {"no-audit", 0, NULL, PW_OPT_NO_AUDIT, PW_COMPLETE_NONE, "record no audit events"},
    {"no-originals", 0, NULL, PW_OPT_NO_ORIGINALS, PW_COMPLETE_NONE, "keep no originals (no undo)"},
    {"originals-max-file", 0, "SIZE", PW_OPT_ORIGINALS_MAX_FILE, PW_COMPLETE_NONE,
     "larger files are recorded, not kept"},
    {"originals-keep", 0, "AGE", PW_OPT_ORIGINALS_KEEP, PW_COMPLETE_NONE,
     "drop change sets older than AGE"},
    {"originals-max-total", 0, "SIZE", PW_OPT_ORIGINALS_MAX_TOTAL, PW_COMPLETE_NONE,
     "then the oldest while the store is larger"},
    {"originals-min-free", 0, "SIZE", PW_OPT_ORIGINALS_MIN_FREE, PW_COMPLETE_NONE,
     "the free space the store leaves its filesystem"},
    {"log-allowed", 0, NULL, PW_OPT_LOG_ALLOWED, PW_COMPLETE_NONE, "log allowed mutations too"},
    {"state-db", 0, "PATH", PW_OPT_STATE_DB, PW_COMPLETE_FILE, "the state database"},
    {"socket-dir", 0, "DIR", PW_OPT_SOCKET_DIR, PW_COMPLETE_DIR, "the control socket directory"},
    {"agent-socket", 0, "PATH", PW_OPT_AGENT_SOCKET, PW_COMPLETE_FILE,
     "an agent socket at PATH, for an agent in another container"},
    {"audit-queue", 0, "N", PW_OPT_AUDIT_QUEUE, PW_COMPLETE_NONE, "the audit queue's length"},
    {"fuse-fd", 0, "N", PW_OPT_FUSE_FD, PW_COMPLETE_NONE,
     "serve descriptor N, a /dev/fuse mounted by another process"},
    {"only", 0, "GLOB", PW_OPT_ONLY, PW_COMPLETE_NONE, "a lane: write only GLOB (repeatable)"},
    {"run", 0, "ID", PW_OPT_RUN, PW_COMPLETE_NONE, "the own view of run ID (piworkfs run)"},
    OPT_TAIL,
};

static const pw_option umount_opts[] = {
    {"lazy", 'z', NULL, 'z', PW_COMPLETE_NONE, "detach now, clean up when no longer busy"},
    OPT_TAIL,
};

static const pw_option mode_opts[] = {
    {"approve", 0, "ID|MODE", PW_OPT_APPROVE, PW_COMPLETE_MODE,
     "allow the pending request with this id or target"},
    {"deny", 0, NULL, PW_OPT_DENY, PW_COMPLETE_NONE, "refuse the agent's pending request"},
    {"reason", 0, "TEXT", PW_OPT_REASON, PW_COMPLETE_NONE, "inside the agent: why it asks"},
    {"run", 0, "ID", PW_OPT_RUN, PW_COMPLETE_NONE, "the view of run ID (piworkfs status)"},
    OPT_ASK_VIEW,
};

static const pw_option status_opts[] = {
    {"all", 'a', NULL, 'a', PW_COMPLETE_NONE, "also other users' views"},
    OPT_ASK_VIEW,
};

static const pw_option modes_opts[] = {
    OPT_PROJECT_OR_VIEW,
    {"check", 0, NULL, PW_OPT_CHECK, PW_COMPLETE_NONE, "check every mode file, like nginx -t"},
    OPT_TAIL,
};

static const pw_option allowed_opts[] = {
    OPT_MODE("the mode to show"),
    OPT_PROJECT_OR_VIEW,
    {"files", 0, NULL, PW_OPT_FILES, PW_COMPLETE_NONE, "list the writable files"},
    {"tree", 0, NULL, PW_OPT_TREE, PW_COMPLETE_NONE, "the project's tree with each verdict"},
    {"why", 0, NULL, PW_OPT_WHY, PW_COMPLETE_NONE, "with --tree: the deciding rule"},
    OPT_TAIL,
};

static const pw_option check_opts[] = {
    OPT_MODE("the mode to ask"),
    OPT_PROJECT_OR_VIEW,
    {"write", 'w', NULL, 'w', PW_COMPLETE_NONE, "ask about writing (the default)"},
    {"read", 'r', NULL, 'r', PW_COMPLETE_NONE, "ask about reading"},
    OPT_TAIL,
};

static const pw_option why_opts[] = {
    OPT_MODE("judge under MODE"),
    OPT_PROJECT_OR_VIEW,
    {"lines", 'n', "N", 'n', PW_COMPLETE_NONE, "how many past denials"},
    OPT_TAIL,
};

static const pw_option check_bash_opts[] = {
    OPT_MODE("the mode to ask"),
    OPT_PROJECT_OR_VIEW,
    {"cwd", 0, "DIR", PW_OPT_CWD, PW_COMPLETE_DIR, "the directory the command runs in"},
    OPT_TAIL,
};

static const pw_option log_opts[] = {
    {"lines", 'n', "N", 'n', PW_COMPLETE_NONE, "show the last N events"},
    {"denied", 0, NULL, PW_OPT_DENIED, PW_COMPLETE_NONE, "only denied operations"},
    OPT_MODE("only events in MODE"),
    {"path", 0, "GLOB", PW_OPT_PATH, PW_COMPLETE_FILE, "only events on paths matching GLOB"},
    {"pid", 0, "PID", PW_OPT_PID, PW_COMPLETE_NONE, "only events of process PID"},
    {"since", 's', "TIME", 's', PW_COMPLETE_NONE, "only events at or after TIME"},
    OPT_PROJECT_OR_VIEW,
    {"all", 'a', NULL, 'a', PW_COMPLETE_NONE, "events of every project"},
    {"follow", 0, NULL, PW_OPT_FOLLOW, PW_COMPLETE_NONE, "keep printing new events"},
    {"switches", 0, NULL, PW_OPT_SWITCHES, PW_COMPLETE_NONE, "only mode switches"},
    OPT_JSON,
    {"jsonl", 0, NULL, PW_OPT_JSONL, PW_COMPLETE_NONE, "one JSON object per line"},
    OPT_HELP,
    OPT_END,
};

static const pw_option trust_opts[] = {
    {"revoke", 0, NULL, PW_OPT_REVOKE, PW_COMPLETE_NONE, "withdraw trust"},
    {"list", 'l', NULL, 'l', PW_COMPLETE_NONE, "list the trusted projects"},
    OPT_VIEW,
    OPT_TAIL,
};

static const pw_option run_opts[] = {
    OPT_MODE("the mode for this run"),
    OPT_PROJECT,
    {"ro-host", 0, NULL, PW_OPT_RO_HOST, PW_COMPLETE_NONE, "the rest of the host read-only"},
    {"share", 0, "PATH", PW_OPT_SHARE, PW_COMPLETE_FILE, "keep PATH writable with --ro-host"},
    {"only", 0, "GLOB", PW_OPT_ONLY, PW_COMPLETE_NONE, "a lane: write only GLOB (repeatable)"},
    {"podman", 0, "IMAGE", PW_OPT_PODMAN, PW_COMPLETE_NONE, "run in a Podman container of IMAGE"},
    {"podman-arg", 0, "ARG", PW_OPT_PODMAN_ARG, PW_COMPLETE_NONE, "pass ARG to podman run"},
    OPT_HELP,
    OPT_END,
};

/* The commands that take no option but --help: completion, mcp, hook. */
static const pw_option help_only_opts[] = {
    OPT_HELP,
    OPT_END,
};

static const pw_option complete_opts[] = {
    OPT_PROJECT,
    OPT_MOUNT,
    OPT_END,
};

static const pw_option plan_opts[] = {
    {"note", 0, "TEXT", PW_OPT_NOTE, PW_COMPLETE_NONE, "done: a note kept with the task"},
    {"plan", 0, "NAME", PW_OPT_PLAN, PW_COMPLETE_PLAN_NAME,
     "done: the plan (default: the active one)"},
    OPT_ASK_VIEW,
};

/* changes, diff, undo, checkpoint parse their own options (cli/cmd_changes.c); these
 * tables serve --help's list and the shells' completions. */
#define OPT_CHANGE_SET_OPT                                                                         \
	{                                                                                          \
		"change-set", 0, "N", PW_OPT_CHANGE_SET, PW_COMPLETE_NONE, "change set N only"     \
	}
#define OPT_EVERY_SET                                                                              \
	{                                                                                          \
		"all", 'a', NULL, 'a', PW_COMPLETE_NONE, "every change set kept"                   \
	}

static const pw_option changes_opts[] = {
    {"since", 's', "X", 's', PW_COMPLETE_CHECKPOINT, "since checkpoint X or TIME"},
    OPT_CHANGE_SET_OPT,
    OPT_EVERY_SET,
    OPT_MODE("only changes made in MODE"),
    {"prune", 0, NULL, PW_OPT_PRUNE, PW_COMPLETE_NONE, "apply the retention now"},
    {"plan", 0, "NAME", PW_OPT_PLAN, PW_COMPLETE_PLAN_NAME, "what each task of plan NAME changed"},
    OPT_ASK_VIEW,
};

static const pw_option diff_opts[] = {
    {"since", 's', "X", 's', PW_COMPLETE_CHECKPOINT, "since checkpoint X or TIME"},
    OPT_CHANGE_SET_OPT,
    OPT_EVERY_SET,
    {"stat", 0, NULL, PW_OPT_STAT, PW_COMPLETE_NONE, "lines added and removed per file"},
    {"name-status", 0, NULL, PW_OPT_NAME_STATUS, PW_COMPLETE_NONE, "A, D, M or R per file"},
    {"color", 0, "WHEN", PW_OPT_COLOR, PW_COMPLETE_NONE, "always, never or auto"},
    {"no-pager", 0, NULL, PW_OPT_NO_PAGER, PW_COMPLETE_NONE, "never page"},
    OPT_ASK_VIEW,
};

static const pw_option undo_opts[] = {
    {"all", 'a', NULL, 'a', PW_COMPLETE_NONE, "every change in the change sets chosen"},
    {"since", 's', "X", 's', PW_COMPLETE_CHECKPOINT, "since checkpoint X or TIME"},
    OPT_CHANGE_SET_OPT,
    /* No -n: it is log's --lines, and a letter means one thing everywhere. */
    {"dry-run", 0, NULL, 'n', PW_COMPLETE_NONE, "say what would be done"},
    {"force", 0, NULL, PW_OPT_FORCE, PW_COMPLETE_NONE, "also what changed outside the view"},
    OPT_ASK_VIEW,
};

static const pw_option redo_opts[] = {
    {"dry-run", 0, NULL, 'n', PW_COMPLETE_NONE, "say what would be done"},
    {"force", 0, NULL, PW_OPT_FORCE, PW_COMPLETE_NONE, "also what changed outside the view"},
    OPT_ASK_VIEW,
};

static const pw_option checkpoint_opts[] = {
    OPT_ASK_VIEW,
};

static const pw_command_spec specs[] = {
    {"mount", "mount a project as a view limited by a mode", mount_opts, 0, PW_COMPLETE_DIR},
    {"umount", "unmount a view", umount_opts, 0, PW_COMPLETE_MOUNTPOINT},
    {"mode", "show or switch the live mode of a view", mode_opts, 0, PW_COMPLETE_MODE},
    {"status", "your mounted views: projects, modes, trust and warnings", status_opts, 0,
     PW_COMPLETE_NONE},
    {"reload", "reload a view's mode files", mode_opts, 0, PW_COMPLETE_NONE},
    {"modes", "the modes available for a project and where each comes from", modes_opts, 0,
     PW_COMPLETE_NONE},
    {"allowed", "what a mode may write (its rules, --files, --tree)", allowed_opts, 0,
     PW_COMPLETE_FILE},
    {"check", "the decision for each path and the rule that decided it", check_opts, 0,
     PW_COMPLETE_FILE},
    {"why", "why a path is denied: its last denials and the rule now", why_opts, 0,
     PW_COMPLETE_FILE},
    {"check-bash", "pre-flight of a shell command: what it would write", check_bash_opts,
     PW_SPEC_STOP_AT_OPERAND, PW_COMPLETE_NONE},
    {"log", "the audit log: denied operations and mode switches", log_opts, 0, PW_COMPLETE_NONE},
    {"trust", "trust a project's own modes (or --revoke)", trust_opts, 0, PW_COMPLETE_DIR},
    {"run", "run a command in a sandbox that can only write through the view", run_opts,
     PW_SPEC_STOP_AT_OPERAND, PW_COMPLETE_COMMAND},
    {"completion", "print the shell completion script for bash, zsh or fish", help_only_opts, 0,
     PW_COMPLETE_SHELL},
    {"__complete", "(for the completion scripts) list modes or views", complete_opts,
     PW_SPEC_HIDDEN, PW_COMPLETE_NONE},
    {"changes", "what the view changed, newest change set first", changes_opts, 0,
     PW_COMPLETE_FILE},
    {"diff", "the diff between the originals kept and the files now", diff_opts, 0,
     PW_COMPLETE_FILE},
    {"undo", "put the originals back (PATH... or --all)", undo_opts, 0, PW_COMPLETE_FILE},
    {"redo", "reverse the last undo", redo_opts, 0, PW_COMPLETE_NONE},
    {"checkpoint", "start a new change set, optionally named", checkpoint_opts, 0,
     PW_COMPLETE_NONE},
    {"plan", "plans: list, show, approve, reopen, mark tasks done", plan_opts, 0, PW_COMPLETE_PLAN},
    {"mcp", "an MCP server on stdio: the agent's mode, checks and requests", help_only_opts, 0,
     PW_COMPLETE_NONE},
    {"hook", "answer an agent's hook event (claude) on stdin", help_only_opts, 0, PW_COMPLETE_NONE},
};

const pw_command_spec *pw_command_specs(size_t *ret_n)
{
	*ret_n = ELEMENTSOF(specs);
	return specs;
}

const pw_command_spec *pw_command_spec_find(const char *name)
{
	for (size_t i = 0; i < ELEMENTSOF(specs); i++)
		if (streq(specs[i].name, name))
			return &specs[i];
	return NULL;
}

const char *pw_command_near_miss(const char *name)
{
	const char *names[ELEMENTSOF(specs) + 1];
	size_t n = 0;

	for (size_t i = 0; i < ELEMENTSOF(specs); i++)
		if (!(specs[i].flags & PW_SPEC_HIDDEN))
			names[n++] = specs[i].name;
	names[n] = NULL;
	return pw_key_near_miss(name, names);
}

/* ---- the parser ------------------------------------------------------------------------ */

int pw_opts_init(pw_opts *o, const char *cmd, int argc, char **argv)
{
	*o = (pw_opts){.spec = pw_command_spec_find(cmd), .argc = argc, .argv = argv, .next = 1};
	if (!o->spec)
		return -EINVAL;
	o->operands = calloc((size_t)argc + 1, sizeof(char *));
	return o->operands ? 0 : -ENOMEM;
}

void pw_opts_done(pw_opts *o)
{
	free(o->operands);
	o->operands = NULL;
}

typedef enum bad_kind { BAD_UNKNOWN, BAD_AMBIGUOUS, BAD_NEEDS_ARG, BAD_NO_ARG } bad_kind;

/* The one line about a bad option WORD, with HINT, a near miss, when there is one. */
static int bad_option(const pw_opts *o, bad_kind kind, const char *word, const char *hint)
{
	char msg[512];

	/* The failure is answered in JSON when the rest of the line asks for it. */
	for (int i = o->next; i < o->argc && !streq(o->argv[i], "--"); i++)
		if (streq(o->argv[i], "--json") || streq(o->argv[i], "--jsonl"))
			pw_err_json(true);
	switch (kind) {
	case BAD_UNKNOWN:
		snprintf(msg, sizeof(msg), "unknown option '%s'", word);
		break;
	case BAD_AMBIGUOUS:
		snprintf(msg, sizeof(msg), "ambiguous option '%s'", word);
		break;
	case BAD_NEEDS_ARG:
		snprintf(msg, sizeof(msg), "option '%s' needs an argument", word);
		break;
	case BAD_NO_ARG:
		snprintf(msg, sizeof(msg), "option '%s' takes no argument", word);
		break;
	}
	if (hint)
		pw_err(o->spec->name, "%s (did you mean '--%s'?)", msg, hint);
	else
		pw_err(o->spec->name, "%s (see 'piworkfs %s --help')", msg, o->spec->name);
	return -EINVAL;
}

/* The long option NAME (LEN bytes) exactly, else its unique prefix. *ret_ambiguous tells
 * that several options start with it. */
static const pw_option *find_long(const pw_option *t, const char *name, size_t len,
				  bool *ret_ambiguous)
{
	const pw_option *found = NULL;
	size_t n = 0;

	*ret_ambiguous = false;
	for (const pw_option *p = t; p->name; p++) {
		if (strlen(p->name) == len && strncmp(p->name, name, len) == 0)
			return p;
		if (strncmp(p->name, name, len) == 0) {
			found = p;
			n++;
		}
	}
	if (n > 1) {
		*ret_ambiguous = true;
		return NULL;
	}
	return found;
}

static const char *long_near_miss(const pw_option *t, const char *name)
{
	const char *names[64];
	size_t n = 0;

	for (const pw_option *p = t; p->name && n + 1 < ELEMENTSOF(names); p++)
		names[n++] = p->name;
	names[n] = NULL;
	return pw_key_near_miss(name, names);
}

static int next_long(pw_opts *o, const char *word)
{
	const char *name = word + 2, *eq = strchr(name, '=');
	size_t len = eq ? (size_t)(eq - name) : strlen(name);
	bool ambiguous;
	const pw_option *p = find_long(o->spec->options, name, len, &ambiguous);
	char shown[128];

	snprintf(shown, sizeof(shown), "--%.*s", (int)(len < 100 ? len : 100), name);
	if (!p) {
		if (ambiguous)
			return bad_option(o, BAD_AMBIGUOUS, shown, NULL);
		char bare[128];
		snprintf(bare, sizeof(bare), "%.*s", (int)(len < 100 ? len : 100), name);
		return bad_option(o, BAD_UNKNOWN, shown, long_near_miss(o->spec->options, bare));
	}
	snprintf(shown, sizeof(shown), "--%s", p->name);
	o->opt = p;
	o->arg = NULL;
	if (!p->arg) {
		if (eq)
			return bad_option(o, BAD_NO_ARG, shown, NULL);
		return p->id;
	}
	if (eq)
		o->arg = eq + 1;
	else if (o->next < o->argc)
		o->arg = o->argv[o->next++];
	else
		return bad_option(o, BAD_NEEDS_ARG, shown, NULL);
	return p->id;
}

static int next_short(pw_opts *o)
{
	char letter = *o->bundle++, shown[3] = {'-', letter, '\0'};
	const pw_option *p = NULL;

	for (const pw_option *q = o->spec->options; q->name && !p; q++)
		if (q->letter && q->letter == letter)
			p = q;
	if (!p) {
		o->bundle = NULL;
		return bad_option(o, BAD_UNKNOWN, shown, NULL);
	}
	o->opt = p;
	o->arg = NULL;
	if (!p->arg) {
		if (!*o->bundle)
			o->bundle = NULL;
		return p->id;
	}
	if (*o->bundle)
		o->arg = o->bundle;
	else if (o->next < o->argc)
		o->arg = o->argv[o->next++];
	else {
		o->bundle = NULL;
		return bad_option(o, BAD_NEEDS_ARG, shown, NULL);
	}
	o->bundle = NULL;
	return p->id;
}

/*
 * -M PATH standing for -C (OPT_VIEW): finds the view containing PATH and names it, then
 * returns 'C' with its mountpoint as the argument. A PATH in no live view ends the program
 * with 4 (no live view), as every command's -M does; -M with -C is a usage error.
 */
static int view_option(pw_opts *o, int id)
{
	_cleanup_free_ char *sock = NULL, *mp = NULL;
	int r;

	if ((id == 'C' && o->view_given) || (id == PW_OPT_VIEW && o->project_given)) {
		pw_err(o->spec->name, "-M and -C both name the project: give one");
		return -EINVAL;
	}
	o->project_given = true;
	if (id == 'C')
		return id;
	r = pw_ctl_find_view_full(o->arg, &sock, &mp);
	if (r < 0) {
		if (r == -ENOENT)
			pw_err(o->spec->name,
			       "%s is not inside a live piworkfs view (see 'piworkfs status')",
			       o->arg);
		else
			pw_err(o->spec->name, "-M %s: %s", o->arg, strerror(-r));
		pw_err_json_flush(PW_EXIT_NO_VIEW);
		exit(PW_EXIT_NO_VIEW);
	}
	/* inside a run the view is its agent socket's, and PATH names it; the name lives as
	 * long as the program (commands keep the argument after their parse) */
	if (pw_cli_name_view(mp ? mp : o->arg) < 0) {
		pw_err(o->spec->name, "out of memory");
		return -ENOMEM;
	}
	o->view_given = true;
	o->arg = pw_cli_named_view();
	return 'C';
}

int pw_opts_next(pw_opts *o)
{
	if (o->bundle) {
		int id = next_short(o);
		return id == PW_OPT_VIEW || id == 'C' ? view_option(o, id) : id;
	}
	while (o->next < o->argc) {
		char *word = o->argv[o->next++];

		if (o->only_operands || word[0] != '-' || word[1] == '\0') {
			o->operands[o->n_operands++] = word;
			if (o->spec->flags & PW_SPEC_STOP_AT_OPERAND)
				o->only_operands = true;
			continue;
		}
		if (streq(word, "--")) {
			o->only_operands = true;
			o->saw_dashdash = true;
			continue;
		}
		if (word[1] == '-') {
			int id = next_long(o, word);
			if (id == PW_OPT_JSON || id == PW_OPT_JSONL)
				pw_err_json(true);
			return id == PW_OPT_VIEW || id == 'C' ? view_option(o, id) : id;
		}
		o->bundle = word + 1;
		int id = next_short(o);
		return id == PW_OPT_VIEW || id == 'C' ? view_option(o, id) : id;
	}
	return 0;
}

/* Stores option C when CM or BINDS take it. Returns whether they do. */
static bool store_bound(const pw_opts *po, int c, pw_common_opts *cm, const pw_opt_bind *binds)
{
	const pw_opt_bind common[] = {{'m', .arg = cm ? &cm->mode : NULL},
				      {'C', .arg = cm ? &cm->project : NULL},
				      {PW_OPT_JSON, .flag = cm ? &cm->json : NULL},
				      {0}};

	if (cm && store_bound(po, c, NULL, common))
		return true;
	for (const pw_opt_bind *b = binds; b && b->id; b++) {
		if (b->id != c)
			continue;
		if (b->flag)
			*b->flag = true;
		if (b->arg)
			*b->arg = po->arg;
		return true;
	}
	return false;
}

int pw_opts_parse(pw_opts *po, const char *cmd, int argc, char **argv, const pw_opts_use *use)
{
	int c, r;

	if (pw_opts_init(po, cmd, argc, argv) < 0)
		return PW_EXIT_SYSTEM;
	while ((c = pw_opts_next(po)) > 0) {
		if (c == 'h' && use->usage)
			return pw_usage(cmd, use->usage, false);
		if (store_bound(po, c, use->common, use->binds) || !use->fn)
			continue;
		r = use->fn(po, c, use->data);
		if (r != PW_EXIT_OK)
			return r;
	}
	if (c < 0)
		return PW_EXIT_USAGE;
	return use->no_operands ? pw_opts_operands_at_most(po, 0) : PW_EXIT_GO_ON;
}

int pw_opts_operands_at_most(const pw_opts *po, int max)
{
	if (po->n_operands <= max)
		return PW_EXIT_GO_ON;
	pw_err(po->spec->name, "unexpected argument '%s' (see 'piworkfs %s --help')",
	       po->operands[max], po->spec->name);
	return PW_EXIT_USAGE;
}

int pw_opts_push(const pw_opts *po, const char **v, size_t *n, size_t max, const char *what)
{
	if (*n == max) {
		pw_err(po->spec->name, "at most %zu %s", max, what);
		return PW_EXIT_USAGE;
	}
	v[(*n)++] = po->arg;
	return PW_EXIT_OK;
}
