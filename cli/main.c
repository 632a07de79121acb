/* SPDX-License-Identifier: MIT */
/*
 * The piworkfs program: global options and a fixed dispatch table over the commands of
 * cli.h. Each command parses its own options (the tables of options.c); `piworkfs help CMD`
 * is `piworkfs CMD --help`.
 */
#include <stdio.h>

#include "cli.h"
#include "options.h"
#include "output.h"
#include "agent/agent.h"
#include "run/run.h"

typedef struct pw_command {
	const char *name;
	pw_cmd_fn fn;
} pw_command;

/* The names, summaries and options of the commands are the tables of options.c. */
static const pw_command commands[] = {
    {"mount", cmd_mount},
    {"umount", cmd_umount},
    {"mode", cmd_mode},
    {"status", cmd_status},
    {"reload", cmd_reload},
    {"modes", cmd_modes},
    {"allowed", cmd_allowed},
    {"check", cmd_check},
    {"why", cmd_why},
    {"check-bash", cmd_check_bash},
    {"log", cmd_log},
    {"trust", cmd_trust},
    {"run", cmd_run},
    {"completion", cmd_completion},
    {"__complete", cmd_complete},
    {PW_RUN_TTY_COMMAND, cmd_run_tty},
    {"changes", cmd_changes},
    {"diff", cmd_diff},
    {"undo", cmd_undo},
    {"redo", cmd_redo},
    {"checkpoint", cmd_checkpoint},
    {PW_RUN_PODMAN_SIGNALS_COMMAND, cmd_run_podman_signals},
    {"plan", cmd_plan},
    {"mcp", cmd_mcp},
    {"hook", cmd_hook},
};

static pw_cmd_fn find_command(const char *name)
{
	for (size_t i = 0; i < ELEMENTSOF(commands); i++)
		if (streq(commands[i].name, name))
			return commands[i].fn;
	return NULL;
}

static void usage_text(FILE *f)
{
	size_t n;
	const pw_command_spec *t = pw_command_specs(&n);

	fputs("Usage: piworkfs COMMAND [OPTIONS] [ARGS]\n"
	      "       piworkfs help COMMAND | --help | --version\n"
	      "\n"
	      "A FUSE view of a project whose writes are limited by the active mode.\n"
	      "\n"
	      "Commands:\n",
	      f);
	for (size_t i = 0; i < n; i++) {
		if (t[i].flags & PW_SPEC_HIDDEN)
			continue;
		fprintf(f, "  %-11s %s\n", t[i].name, t[i].summary);
	}
	fputs("\n"
	      "Options go before or after the arguments; every command takes --help, and all but\n"
	      "run and completion take --json. Exit status: 0 ok, 1 denied, 2 usage error,\n"
	      "3 configuration error, 4 no live view, 5 system error. See piworkfs(1).\n"
	      "\n"
	      "Examples:\n"
	      "  piworkfs mount ~/proj ~/proj.view --mode design\n"
	      "  cd ~/proj.view && piworkfs mode build\n"
	      "  piworkfs allowed --tree\n",
	      f);
}

/* The text above, filled to 80 columns as every command's --help (output.h). */
static void usage(FILE *f)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);

	if (!m) {
		usage_text(f);
		return;
	}
	usage_text(m);
	if (fclose(m) != 0 || pw_print_filled(f, text, PW_HELP_WIDTH) < 0)
		usage_text(f);
}

static int run_command(const char *name, int argc, char **argv)
{
	pw_cmd_fn fn = find_command(name);

	if (!fn) {
		const char *hint = pw_command_near_miss(name);
		for (int i = 1; i < argc; i++) /* `bogus --json`: the error as JSON too */
			if (streq(argv[i], "--json") || streq(argv[i], "--jsonl"))
				pw_err_json(true);
		if (hint)
			pw_err(NULL, "unknown command '%s' (did you mean '%s'?)", name, hint);
		else
			pw_err(NULL, "unknown command '%s' (see 'piworkfs --help')", name);
		return PW_EXIT_USAGE;
	}
	return fn(argc, argv);
}

int main(int argc, char **argv)
{
	if (pw_mount_helper_called(argv[0]))
		return pw_mount_helper(argc, argv);
	if (argc < 2) {
		usage(stderr);
		return PW_EXIT_USAGE;
	}
	const char *first = argv[1];

	if (streq(first, "--help") || streq(first, "-h")) {
		usage(stdout);
		return PW_EXIT_OK;
	}
	if (streq(first, "--version") || streq(first, "-V")) {
		puts("piworkfs " PW_VERSION);
		return PW_EXIT_OK;
	}
	if (streq(first, "help")) {
		if (argc < 3) {
			usage(stdout);
			return PW_EXIT_OK;
		}
		char *help_argv[] = {argv[2], (char *)"--help", NULL};
		return run_command(argv[2], 2, help_argv);
	}
	if (first[0] == '-') {
		pw_err(NULL, "unknown option '%s' (see 'piworkfs --help')", first);
		return PW_EXIT_USAGE;
	}
	int status = run_command(first, argc - 1, argv + 1);
	pw_err_json_flush(status);
	return status;
}
