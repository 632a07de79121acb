/* SPDX-License-Identifier: MIT */
/*
 * piworkfs completion bash|zsh|fish: the shell completion scripts, generated from the option
 * tables the parser uses (options.c), so a new option is completed the day it is parsed.
 * `ninja install` installs the three (cli/meson.build).
 *
 * The scripts ask the program for what only it knows: `piworkfs __complete modes [-C DIR]`
 * prints the mode names of the live view around the current directory (else of the project,
 * offline), `piworkfs __complete views` the caller's live mountpoints, `piworkfs __complete
 * mount-options` what mount's -o takes (NAME= for those with a value), `plans` and
 * `checkpoints [-M PATH]` the plan and checkpoint names of the live view (the one -M names
 * on the command line being completed, else the current directory's). plan's operands are
 * a subcommand, then, for show, approve and reopen, one plan name: the scripts count them.
 */
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "client/ctl_client.h"
#include "options.h"
#include "output.h"
#include "project.h"

static const char usage[] =
    "Usage: piworkfs completion SHELL\n"
    "\n"
    "Print the completion script for SHELL (bash, zsh or fish): commands, options, mode\n"
    "names (from the live view, else the project), mountpoints, and the live view's plan\n"
    "names (after plan show, approve, reopen and --plan) and checkpoint names (after\n"
    "--since). `ninja install` installs all three where the shells look for them.\n"
    "\n"
    "Options:\n"
    "  -h, --help   show this help\n"
    "\n"
    "Examples:\n"
    "  source <(piworkfs completion bash)\n"
    "  piworkfs completion fish > ~/.config/fish/completions/piworkfs.fish\n"
    "\n"
    "Exit status: 0 ok; 2 usage error (an unknown SHELL).\n";

/* How each shell completes each kind of argument (options.h): the action bash runs, zsh's
 * _arguments action, fish's complete flags. */
static const struct shell_actions {
	const char *bash, *zsh, *fish;
} actions[] = {
    [PW_COMPLETE_NONE] = {"COMPREPLY=()", " ", ""},
    [PW_COMPLETE_FILE] = {"COMPREPLY=($(compgen -f -- \"$cur\"))", "_files", " -F"},
    [PW_COMPLETE_DIR] = {"COMPREPLY=($(compgen -d -- \"$cur\"))", "_files -/",
			 " -a '(__fish_complete_directories)'"},
    [PW_COMPLETE_MODE] = {"COMPREPLY=($(compgen -W \"$(piworkfs __complete modes ${project:+-C "
			  "\"$project\"} 2>/dev/null)\" -- \"$cur\"))",
			  "_piworkfs_modes", " -a '(piworkfs __complete modes 2>/dev/null)'"},
    [PW_COMPLETE_MOUNTPOINT] =
	{"COMPREPLY=($(compgen -W \"$(piworkfs __complete views 2>/dev/null)\" -- \"$cur\"))",
	 "_piworkfs_views", " -a '(piworkfs __complete views 2>/dev/null)'"},
    [PW_COMPLETE_COMMAND] = {"COMPREPLY=($(compgen -c -- \"$cur\"))", "_command_names -e",
			     " -a '(__fish_complete_command)'"},
    [PW_COMPLETE_SHELL] = {"COMPREPLY=($(compgen -W \"bash zsh fish\" -- \"$cur\"))",
			   "(bash zsh fish)", " -a 'bash zsh fish'"},
    [PW_COMPLETE_MOUNT_OPTIONS] = {"_piworkfs_mount_options", "_piworkfs_mount_options",
				   " -a '(piworkfs __complete mount-options 2>/dev/null)'"},
    [PW_COMPLETE_PLAN] =
	{"_piworkfs_plan", /* fish: the subcommands, then plan names (print_fish) */
	 "_piworkfs_plan", " -a '(piworkfs __complete plans 2>/dev/null)'"},
    [PW_COMPLETE_PLAN_NAME] = {"COMPREPLY=($(compgen -W \"$(piworkfs __complete plans ${mount:+-M "
			       "\"$mount\"} 2>/dev/null)\" -- \"$cur\"))",
			       "_piworkfs_plans", " -a '(piworkfs __complete plans 2>/dev/null)'"},
    [PW_COMPLETE_CHECKPOINT] = {"COMPREPLY=($(compgen -W \"$(piworkfs __complete checkpoints "
				"${mount:+-M \"$mount\"} 2>/dev/null)\" -- \"$cur\"))",
				"_piworkfs_checkpoints",
				" -a '(piworkfs __complete checkpoints 2>/dev/null)'"},
};

/* ---- bash ------------------------------------------------------------------------------ */

/* The subcommands of plan, and those whose operand is a plan name. */
static const char plan_subcommands[] = "list show status approve reopen done";
static const char plan_named[] = "show|approve|reopen";

/* bash's case pattern of COMMAND's options that take an argument ("-M|--mount|--note"). */
static void print_arg_options(const char *command)
{
	const pw_command_spec *s = pw_command_spec_find(command);
	bool first = true;

	for (const pw_option *o = s ? s->options : NULL; o && o->name; o++) {
		if (!o->arg)
			continue;
		if (o->letter)
			printf("%s-%c", first ? "" : "|", o->letter);
		printf("%s--%s", first && !o->letter ? "" : "|", o->name);
		first = false;
	}
}

/* _piworkfs_plan: plan's first operand is a subcommand; the operand after show, approve or
 * reopen a plan name; nothing after that (the operands before the word completed are
 * counted, the options and their arguments skipped). */
static void print_bash_plan(void)
{
	printf("_piworkfs_plan() {\n"
	       "    local sub=\"\" after=0 seen=0 i\n"
	       "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
	       "        case \"${COMP_WORDS[i]}\" in\n"
	       "        ");
	print_arg_options("plan");
	printf(") ((i++)) ;;\n"
	       "        -*) ;;\n"
	       "        *) if ((!seen)); then seen=1\n" /* the command's own name */
	       "           elif [[ -z $sub ]]; then sub=\"${COMP_WORDS[i]}\"\n"
	       "           else after=1; fi ;;\n"
	       "        esac\n"
	       "    done\n"
	       "    COMPREPLY=()\n"
	       "    if [[ -z $sub ]]; then\n"
	       "        COMPREPLY=($(compgen -W \"%s\" -- \"$cur\"))\n"
	       "    elif [[ $after == 0 ]]; then\n"
	       "        case \"$sub\" in\n"
	       "        %s) %s ;;\n"
	       "        esac\n"
	       "    fi\n"
	       "}\n",
	       plan_subcommands, plan_named, actions[PW_COMPLETE_PLAN_NAME].bash);
}

/* The first command a user sees (not PW_SPEC_HIDDEN) at or after index *I in --help's order,
 * *I then its index; NULL after the last. */
static const pw_command_spec *next_visible(size_t *i)
{
	size_t n;
	const pw_command_spec *specs = pw_command_specs(&n);

	for (; *i < n; ++*i)
		if (!(specs[*i].flags & PW_SPEC_HIDDEN))
			return &specs[*i];
	return NULL;
}

/* The names of the commands a user sees, separated by spaces. */
static void print_command_names(void)
{
	const pw_command_spec *s;
	const char *sep = "";

	for (size_t i = 0; (s = next_visible(&i)); i++, sep = " ")
		printf("%s%s", sep, s->name);
}

static void print_bash(void)
{
	const pw_command_spec *s;

	printf("# bash completion for piworkfs (generated by `piworkfs completion bash`)\n"
	       "# mount -o: the option after the last comma; mode= takes a mode name.\n"
	       "_piworkfs_mount_options() {\n"
	       "    local last=\"${cur##*,}\"\n"
	       "    local pre=\"${cur:0:${#cur}-${#last}}\"\n"
	       "    if [[ $last == mode=* ]]; then\n"
	       "        COMPREPLY=($(compgen -P \"${pre}mode=\" -W \"$(piworkfs __complete modes "
	       "2>/dev/null)\" -- \"${last#mode=}\"))\n"
	       "    else\n"
	       "        COMPREPLY=($(compgen -P \"$pre\" -W \"$(piworkfs __complete mount-options "
	       "2>/dev/null)\" -- \"$last\"))\n"
	       "        compopt -o nospace 2>/dev/null\n"
	       "    fi\n"
	       "}\n");
	print_bash_plan();
	printf("_piworkfs() {\n"
	       "    local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
	       "    local cmd=\"\" project=\"\" mount=\"\" i\n"
	       "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
	       "        case \"${COMP_WORDS[i]}\" in\n"
	       "        -C|--project) project=\"${COMP_WORDS[i+1]}\" ;;\n"
	       "        -M|--mount) mount=\"${COMP_WORDS[i+1]}\" ;;\n"
	       "        -*) ;;\n"
	       "        *) [[ -z $cmd ]] && cmd=\"${COMP_WORDS[i]}\" ;;\n"
	       "        esac\n"
	       "    done\n"
	       "    if [[ -z $cmd ]]; then\n"
	       "        COMPREPLY=($(compgen -W \"");
	print_command_names();
	printf(" help\" -- \"$cur\"))\n"
	       "        return\n"
	       "    fi\n"
	       "    case \"$cmd\" in\n");
	for (size_t i = 0; (s = next_visible(&i)); i++) {
		printf("    %s)\n        case \"$prev\" in\n", s->name);
		for (const pw_option *o = s->options; o->name; o++) {
			if (!o->arg)
				continue;
			if (o->letter)
				printf("        -%c|--%s) %s; return ;;\n", o->letter, o->name,
				       actions[o->complete].bash);
			else
				printf("        --%s) %s; return ;;\n", o->name,
				       actions[o->complete].bash);
		}
		printf("        esac\n"
		       "        if [[ $cur == -* ]]; then\n"
		       "            COMPREPLY=($(compgen -W \"");
		for (const pw_option *o = s->options; o->name; o++)
			printf("%s--%s", o == s->options ? "" : " ", o->name);
		for (const pw_option *o = s->options; o->name; o++)
			if (o->letter)
				printf(" -%c", o->letter);
		printf("\" -- \"$cur\"))\n"
		       "        else\n"
		       "            %s\n"
		       "        fi\n"
		       "        ;;\n",
		       actions[s->operands].bash);
	}
	printf("    help) COMPREPLY=($(compgen -W \"");
	print_command_names();
	printf("\" -- \"$cur\")) ;;\n"
	       "    esac\n"
	       "}\n"
	       "complete -F _piworkfs piworkfs\n");
}

/* ---- zsh ------------------------------------------------------------------------------- */

/* Prints S for a single-quoted zsh word inside _arguments' [help] (no ' [ ] :). */
static void zsh_text(const char *s)
{
	for (; s && *s; s++) {
		if (*s == '\'')
			fputs("'\\''", stdout);
		else if (*s == '[' || *s == ']' || *s == ':')
			putchar(' ');
		else
			putchar(*s);
	}
}

static void print_zsh(void)
{
	const pw_command_spec *s;

	printf("#compdef piworkfs\n"
	       "# zsh completion for piworkfs (generated by `piworkfs completion zsh`)\n"
	       "_piworkfs_modes() {\n"
	       "    local -a m\n"
	       "    m=(${(f)\"$(piworkfs __complete modes 2>/dev/null)\"})\n"
	       "    compadd -a m\n"
	       "}\n"
	       "_piworkfs_mount_options() {\n"
	       "    local -a o\n"
	       "    o=(${(f)\"$(piworkfs __complete mount-options 2>/dev/null)\"})\n"
	       "    _sequence compadd -S '' -a o\n"
	       "}\n"
	       "_piworkfs_views() {\n"
	       "    local -a v\n"
	       "    v=(${(f)\"$(piworkfs __complete views 2>/dev/null)\"})\n"
	       "    compadd -a v\n"
	       "}\n"
	       "_piworkfs_plans() {\n"
	       "    local -a p\n"
	       "    p=(${(f)\"$(piworkfs __complete plans 2>/dev/null)\"})\n"
	       "    compadd -a p\n"
	       "}\n"
	       "_piworkfs_checkpoints() {\n"
	       "    local -a c\n"
	       "    c=(${(f)\"$(piworkfs __complete checkpoints 2>/dev/null)\"})\n"
	       "    compadd -a c\n"
	       "}\n"
	       "_piworkfs_plan() {\n" /* the operands of plan, counted without the options */
	       "    local -a ops\n"
	       "    ops=(${words[2,CURRENT-1]:#-*})\n"
	       "    if (( ${#ops} == 0 )); then\n"
	       "        compadd %s\n"
	       "    elif (( ${#ops} == 1 )) && [[ $ops[1] == (%s) ]]; then\n"
	       "        _piworkfs_plans\n"
	       "    fi\n"
	       "}\n",
	       plan_subcommands, plan_named);
	printf("_piworkfs() {\n"
	       "    local -a commands\n"
	       "    commands=(\n");
	for (size_t i = 0; (s = next_visible(&i)); i++) {
		printf("        '%s:", s->name);
		zsh_text(s->summary);
		printf("'\n");
	}
	printf("    )\n"
	       "    if (( CURRENT == 2 )); then\n"
	       "        _describe 'command' commands\n"
	       "        return\n"
	       "    fi\n"
	       "    local cmd=$words[2]\n"
	       "    shift words\n"
	       "    (( CURRENT-- ))\n"
	       "    case $cmd in\n");
	for (size_t i = 0; (s = next_visible(&i)); i++) {
		printf("    %s)\n        _arguments -s", s->name);
		if (s->flags & PW_SPEC_STOP_AT_OPERAND)
			printf(" -S");
		for (const pw_option *o = s->options; o->name; o++) {
			printf(" \\\n            ");
			if (o->letter)
				printf("'(-%c --%s)'{-%c,--%s}'[", o->letter, o->name, o->letter,
				       o->name);
			else
				printf("'--%s[", o->name);
			zsh_text(o->help);
			printf("]");
			if (o->arg)
				printf(":%s:%s", o->arg, actions[o->complete].zsh);
			printf("'");
		}
		if (s->operands != PW_COMPLETE_NONE)
			printf(" \\\n            '*:argument:%s'", actions[s->operands].zsh);
		printf("\n        ;;\n");
	}
	printf("    esac\n"
	       "}\n"
	       "_piworkfs \"$@\"\n");
}

/* ---- fish ------------------------------------------------------------------------------ */

static void fish_text(const char *s)
{
	for (; s && *s; s++) {
		if (*s == '\'' || *s == '\\')
			putchar('\\');
		putchar(*s);
	}
}

static void print_fish(void)
{
	const pw_command_spec *s;

	printf("# fish completion for piworkfs (generated by `piworkfs completion fish`)\n"
	       "complete -c piworkfs -f\n");
	for (size_t i = 0; (s = next_visible(&i)); i++) {
		printf("complete -c piworkfs -n __fish_use_subcommand -a %s -d '", s->name);
		fish_text(s->summary);
		printf("'\n");
		for (const pw_option *o = s->options; o->name; o++) {
			printf("complete -c piworkfs -n '__fish_seen_subcommand_from %s'", s->name);
			if (o->letter)
				printf(" -s %c", o->letter);
			printf(" -l %s", o->name);
			if (o->arg)
				printf(" -r%s", actions[o->complete].fish);
			printf(" -d '");
			fish_text(o->help);
			printf("'\n");
		}
		if (s->operands == PW_COMPLETE_PLAN) {
			/* a subcommand first; a plan name after show, approve or reopen */
			printf("complete -c piworkfs -n '__fish_seen_subcommand_from %s; and not "
			       "__fish_seen_subcommand_from %s' -a '%s'\n",
			       s->name, plan_subcommands, plan_subcommands);
			printf("complete -c piworkfs -n '__fish_seen_subcommand_from %s; and "
			       "__fish_seen_subcommand_from %s'%s\n",
			       s->name, "show approve reopen", actions[PW_COMPLETE_PLAN_NAME].fish);
		} else if (s->operands != PW_COMPLETE_NONE) {
			printf("complete -c piworkfs -n '__fish_seen_subcommand_from %s'%s\n",
			       s->name, actions[s->operands].fish);
		}
	}
}

int cmd_completion(int argc, char **argv)
{
	_cleanup_opts_ pw_opts po = {0};
	int r = pw_opts_parse(&po, argv[0], argc, argv, &(pw_opts_use){.usage = usage});

	if (r != PW_EXIT_GO_ON)
		return r;
	if (po.n_operands != 1) {
		pw_err(argv[0], "expected one SHELL: bash, zsh or fish");
		return PW_EXIT_USAGE;
	}
	const char *shell = po.operands[0];
	if (streq(shell, "bash"))
		print_bash();
	else if (streq(shell, "zsh"))
		print_zsh();
	else if (streq(shell, "fish"))
		print_fish();
	else {
		pw_err(argv[0], "unknown shell '%s' (bash, zsh or fish)", shell);
		return PW_EXIT_USAGE;
	}
	return fflush(stdout) == 0 ? PW_EXIT_OK : PW_EXIT_SYSTEM;
}

/* ---- what the scripts ask ---------------------------------------------------------------- */

/* The mode names: the live view's around the current directory, else the project's. */
static int complete_modes(const char *project)
{
	_cleanup_json_ json_t *res = NULL;
	json_t *m;
	size_t i;

	if (!project && pw_ctl_call_at(NULL, "modes.list", NULL, &res, NULL, NULL) == 0) {
		json_array_foreach(json_object_get(res, "modes"), i, m)
		    printf("%s\n", json_string_value(json_object_get(m, "name")));
		return PW_EXIT_OK;
	}
	_cleanup_project_ pw_cli_project p = {0};
	_cleanup_modeset_ pw_modeset *ms = NULL;
	const char *err = NULL;
	if (pw_cli_project_open(project, &p, &err) < 0 || pw_cli_load_modes(&p, &ms, NULL) < 0)
		return PW_EXIT_CONFIG;
	for (i = 0; i < pw_modeset_count(ms); i++)
		printf("%s\n", pw_modeset_get(ms, i)->name);
	return PW_EXIT_OK;
}

static int complete_views(void)
{
	pw_ctl_mount *m = NULL;
	size_t n = 0;

	if (pw_ctl_list_mounts(&m, &n) < 0)
		return PW_EXIT_SYSTEM;
	for (size_t i = 0; i < n; i++)
		if (m[i].uid < 0 || m[i].uid == (long)getuid())
			printf("%s\n", m[i].mountpoint);
	pw_ctl_mounts_free(m, n);
	return PW_EXIT_OK;
}

/* The plans of the live view containing MOUNT (NULL: the current directory). */
static int complete_plans(const char *mount)
{
	_cleanup_(pw_json_decrefp) json_t *res = NULL;
	json_t *p;
	size_t i;

	if (pw_ctl_call_at(mount, "plan.list", NULL, &res, NULL, NULL) == 0)
		json_array_foreach(json_object_get(res, "plans"), i, p)
		    puts(json_string_value(json_object_get(p, "name")));
	return PW_EXIT_OK;
}

/* The checkpoints of the live view containing MOUNT (NULL: the current directory), newest
 * first: the names `--since` takes. */
static int complete_checkpoints(const char *mount)
{
	_cleanup_(pw_json_decrefp) json_t *res = NULL;
	json_t *set;
	size_t i;

	if (pw_ctl_call_at(mount, "changes.list", json_pack("{s:b}", "every", true), &res, NULL,
			   NULL) == 0)
		json_array_foreach(json_object_get(res, "changesets"), i, set)
		{
			const char *name = json_string_value(json_object_get(set, "name"));
			if (name)
				puts(name);
		}
	return PW_EXIT_OK;
}

int cmd_complete(int argc, char **argv)
{
	_cleanup_opts_ pw_opts po = {0};
	const char *project = NULL, *mount = NULL;
	const pw_opt_bind binds[] = {{'C', .arg = &project}, {'M', .arg = &mount}, {0}};
	int r = pw_opts_parse(&po, argv[0], argc, argv, &(pw_opts_use){.binds = binds});

	if (r == PW_EXIT_GO_ON && po.n_operands != 1)
		r = PW_EXIT_USAGE;
	if (r != PW_EXIT_GO_ON)
		return r;
	if (streq(po.operands[0], "modes"))
		return complete_modes(project);
	if (streq(po.operands[0], "views"))
		return complete_views();
	if (streq(po.operands[0], "mount-options"))
		return pw_print_mount_options();
	if (streq(po.operands[0], "plans"))
		return complete_plans(mount);
	if (streq(po.operands[0], "checkpoints"))
		return complete_checkpoints(mount);
	return PW_EXIT_USAGE;
}
