/* SPDX-License-Identifier: MIT */
/*
 * The piworkfs program: global options and a fixed dispatch table over the commands of
 * cli.h. Each command parses its own options; `piworkfs help CMD` is `piworkfs CMD --help`.
 */
#include <stdio.h>

#include "cli.h"
#include "output.h"

typedef struct pw_command {
	const char *name;
	pw_cmd_fn fn; /* NULL when the command's file is not linked yet (weak symbol) */
	const char *summary;
} pw_command;

static const pw_command *commands(size_t *ret_n)
{
	/* Built at run time: the address of an undefined weak function is only known then. */
	static pw_command table[] = {
		{ "mount", NULL, "mount a project as a view limited by a mode" },
		{ "umount", NULL, "unmount a view" },
		{ "mode", NULL, "show or switch the live mode of a view" },
		{ "status", NULL, "mounted views, their projects, modes, trust and warnings" },
		{ "reload", NULL, "reload a view's mode files" },
		{ "modes", NULL, "the modes available for a project and where each comes from" },
		{ "allowed", NULL, "what a mode may write (its rules; --files: matching files)" },
		{ "check", NULL, "the decision for each path and the rule that decided it" },
		{ "why", NULL, "why recent operations were denied" },
		{ "check-bash", NULL, "pre-flight of a shell command: what it would write" },
		{ "log", NULL, "the audit log of denied operations" },
		{ "trust", NULL, "trust a project's own modes (or --revoke)" },
		{ "run", NULL, "run a command in a sandbox that can only write through the view" },
	};
	pw_cmd_fn fns[] = {
		cmd_mount, cmd_umount, cmd_mode,  cmd_status,	  cmd_reload, cmd_modes, cmd_allowed,
		cmd_check, cmd_why,    cmd_check_bash, cmd_log, cmd_trust,  cmd_run,
	};
	_Static_assert(ELEMENTSOF(table) == ELEMENTSOF(fns), "one function per command");

	for (size_t i = 0; i < ELEMENTSOF(table); i++)
		table[i].fn = fns[i];
	*ret_n = ELEMENTSOF(table);
	return table;
}

static const pw_command *find_command(const char *name)
{
	size_t n;
	const pw_command *t = commands(&n);

	for (size_t i = 0; i < n; i++)
		if (streq(t[i].name, name))
			return &t[i];
	return NULL;
}

static void usage(FILE *f)
{
	size_t n;
	const pw_command *t = commands(&n);

	fputs("Usage: piworkfs COMMAND [OPTIONS] [ARGS]\n"
	      "       piworkfs help COMMAND | --help | --version\n"
	      "\n"
	      "A FUSE view of a project whose writes are limited by the active mode.\n"
	      "\n"
	      "Commands:\n",
	      f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "  %-11s %s%s\n", t[i].name, t[i].summary,
			t[i].fn ? "" : " (not available in this build)");
	fputs("\n"
	      "Every command takes --help and --json. Exit status: 0 ok, 1 denied, 2 usage error,\n"
	      "3 configuration error, 4 no live view, 5 system error. See piworkfs(1).\n",
	      f);
}

static int run_command(const char *name, int argc, char **argv)
{
	const pw_command *c = find_command(name);

	if (!c) {
		pw_err(NULL, "unknown command '%s' (see 'piworkfs --help')", name);
		return PW_EXIT_USAGE;
	}
	if (!c->fn) {
		pw_err(name, "command not available in this build");
		return PW_EXIT_SYSTEM;
	}
	return c->fn(argc, argv);
}

int main(int argc, char **argv)
{
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
		char *help_argv[] = { argv[2], (char *)"--help", NULL };
		return run_command(argv[2], 2, help_argv);
	}
	if (first[0] == '-') {
		pw_err(NULL, "unknown option '%s' (see 'piworkfs --help')", first);
		return PW_EXIT_USAGE;
	}
	return run_command(first, argc - 1, argv + 1);
}
