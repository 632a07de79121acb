/* SPDX-License-Identifier: MIT */
/*
 * The options of every command, as data, and the one parser that reads them.
 *
 * Each command's options are a table (cli/options.c): long name, short letter, argument,
 * and how a shell completes the argument. The parser (pw_opts_next), `piworkfs completion`
 * (bash, zsh and fish scripts) and the tests that compare --help with piworkfs(1) all read
 * the same tables, so they cannot drift apart.
 *
 * Parsing is what users of sshfs, git and mount(8) expect: options may come anywhere, before
 * or after the operands (`mount PROJECT MP --mode design`); `--` ends them; `--name=value`
 * and `-mVALUE` work; short flags bundle (`-fd`); a long option may be abbreviated to a
 * unique prefix. Commands marked PW_SPEC_STOP_AT_OPERAND (run, check-bash) take everything
 * from their first operand on as the command to run or judge (`run make -j2`). A bad option
 * is one line on stderr naming it, with a "did you mean" for a near miss.
 *
 * Short letters mean one thing in every command: -m mode, -C project, -M mount (the view
 * containing PATH), -f foreground, -o mount options, -d debug, -n lines, -s since,
 * -a all, -w write, -r read, -l list, -z lazy, -h help.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Option ids of long-only options (options with a letter use the letter as id). */
enum {
	PW_OPT_JSON = 0x100,
	PW_OPT_TIMEOUT,
	PW_OPT_NO_WATCH,
	PW_OPT_STATE_DB,
	PW_OPT_SOCKET_DIR,
	PW_OPT_AUDIT_QUEUE,
	PW_OPT_NO_AUDIT,
	PW_OPT_LOG_ALLOWED,
	PW_OPT_CHECK,
	PW_OPT_FILES,
	PW_OPT_TREE,
	PW_OPT_WHY,
	PW_OPT_CWD,
	PW_OPT_DENIED,
	PW_OPT_PID,
	PW_OPT_PATH,
	PW_OPT_FOLLOW,
	PW_OPT_SWITCHES,
	PW_OPT_JSONL,
	PW_OPT_REVOKE,
	PW_OPT_RO_HOST,
	PW_OPT_SHARE,
	PW_OPT_APPROVE,
	PW_OPT_DENY,
	PW_OPT_REASON,
	PW_OPT_ALL,
	PW_OPT_PRUNE,
	PW_OPT_STAT,
	PW_OPT_FORCE,
	PW_OPT_CHANGE_SET,
	PW_OPT_NAME_STATUS,
	PW_OPT_COLOR,
	PW_OPT_NO_PAGER,
	PW_OPT_NO_ORIGINALS,
	PW_OPT_ORIGINALS_MAX_FILE,
	PW_OPT_ORIGINALS_KEEP,
	PW_OPT_ORIGINALS_MAX_TOTAL,
	PW_OPT_NOTE,
	PW_OPT_PLAN,
	PW_OPT_ORIGINALS_MIN_FREE,
	PW_OPT_FUSE_FD,
	PW_OPT_ONLY,
	PW_OPT_RUN,
	PW_OPT_PODMAN,
	PW_OPT_PODMAN_ARG,
	PW_OPT_VIEW, /* -M where the command names its project with -C (options.c, OPT_VIEW) */
	PW_OPT_AGENT_SOCKET,
};

/* How a shell completes an option's argument or a command's operands. */
typedef enum pw_complete {
	PW_COMPLETE_NONE = 0,
	PW_COMPLETE_FILE,	   /* any path */
	PW_COMPLETE_DIR,	   /* a directory */
	PW_COMPLETE_MODE,	   /* a mode name (from the live view, else the project) */
	PW_COMPLETE_MOUNTPOINT,	   /* a live view's mountpoint */
	PW_COMPLETE_COMMAND,	   /* a command to run, then its own arguments */
	PW_COMPLETE_SHELL,	   /* bash, zsh, fish */
	PW_COMPLETE_MOUNT_OPTIONS, /* mount's -o list: after each comma, mode= a mode name */
	PW_COMPLETE_PLAN,	   /* plan's operands: a subcommand, then (show, approve,
				      reopen) a plan name of the live view */
	PW_COMPLETE_PLAN_NAME,	   /* a plan name of the live view */
	PW_COMPLETE_CHECKPOINT,	   /* a checkpoint name of the live view (--since) */
} pw_complete;

typedef struct pw_option {
	const char *name;     /* long name without "--" */
	char letter;	      /* short letter, or 0 */
	const char *arg;      /* the argument's name in help ("MODE"), NULL for a flag */
	int id;		      /* what pw_opts_next() returns: LETTER, or a PW_OPT_* */
	pw_complete complete; /* the argument's completion */
	const char *help;     /* one line, for the shells' completion menus */
} pw_option;

enum {
	PW_SPEC_STOP_AT_OPERAND = 1 << 0, /* run, check-bash: the first operand ends options */
	PW_SPEC_HIDDEN = 1 << 1,	  /* not listed in `piworkfs --help` */
};

typedef struct pw_command_spec {
	const char *name;
	const char *summary;
	const pw_option *options; /* terminated by an entry with name NULL */
	unsigned flags;
	pw_complete operands; /* completion of the operands */
} pw_command_spec;

/* Every command, in the order `piworkfs --help` lists them. */
const pw_command_spec *pw_command_specs(size_t *ret_n);
const pw_command_spec *pw_command_spec_find(const char *name);

/* The command of SPECS that NAME most likely misspells, or NULL. */
const char *pw_command_near_miss(const char *name);

/* A parse of one command line. */
typedef struct pw_opts {
	const pw_command_spec *spec;
	int argc;
	char **argv;
	int next;	      /* index of the next word */
	const char *bundle;   /* the rest of a bundle of short flags ("-fd") */
	bool only_operands;   /* after "--", or the first operand of a STOP_AT_OPERAND command */
	bool saw_dashdash;    /* "--" was given */
	const char *arg;      /* the current option's argument */
	const pw_option *opt; /* the current option */
	char **operands;      /* the operands, in order (borrowed strings) */
	int n_operands;
	bool view_given;    /* -M PATH where it stands for -C (OPT_VIEW) */
	bool project_given; /* -C (or -M standing for it) was given */
} pw_opts;

/* Starts parsing ARGV (ARGV[0] is the command's name) against the table of command CMD.
 * Returns 0 or -ENOMEM. */
int pw_opts_init(pw_opts *o, const char *cmd, int argc, char **argv);
void pw_opts_done(pw_opts *o);

/* The next option's id (its argument in o->arg), 0 once every word is read (the operands
 * are then in o->operands), or -errno after printing a one-line error: -EINVAL for a bad
 * option, -ENOMEM.
 * Seeing --json (also among the words after a bad option) turns on pw_err_json(): the
 * failure is then answered on stdout as {"error": ...} too. */
int pw_opts_next(pw_opts *o);

/* One of a command's options that pw_opts_parse() stores itself: a flag sets *FLAG, an
 * option with an argument stores it in *ARG (the last one given wins). */
typedef struct pw_opt_bind {
	int id; /* the option's id, as pw_opts_next() returns it */
	bool *flag;
	const char **arg;
} pw_opt_bind;

/* A command's handler of its other options: option C, its argument in PO->arg, DATA the
 * command's. Returns PW_EXIT_OK to go on, else the exit status that ends the parse (after
 * saying why on stderr). */
typedef int pw_opt_fn(const pw_opts *po, int c, void *data);

/* The options several commands read alike: -m MODE, -C DIR (and -M PATH, which the parser
 * hands on as -C), --json. */
typedef struct pw_common_opts {
	const char *mode, *project;
	bool json;
} pw_common_opts;

/* How pw_opts_parse() reads a command's options. */
typedef struct pw_opts_use {
	const char *usage;	  /* what -h prints (NULL: the command has no -h) */
	pw_common_opts *common;	  /* where -m, -C and --json go (NULL: bound, or not taken) */
	const pw_opt_bind *binds; /* the options stored as they are, ended by id 0; NULL: none */
	pw_opt_fn *fn;		  /* the others (NULL: none) */
	void *data;		  /* FN's */
	bool no_operands;	  /* the command takes none: one is a usage error */
} pw_opts_use;

/*
 * The one loop over a command line: pw_opts_init(PO, CMD, ARGC, ARGV), then every option:
 * -h prints USE->usage and ends the parse with 0, an option USE->common or USE->binds takes
 * is stored, any other goes to USE->fn; then, with USE->no_operands, an operand is an error.
 * Returns PW_EXIT_GO_ON (the operands are then in PO->operands), or the exit status to end with:
 * PW_EXIT_USAGE after a bad option (said on stderr), PW_EXIT_SYSTEM when out of memory, or
 * USE->fn's.
 */
int pw_opts_parse(pw_opts *po, const char *cmd, int argc, char **argv, const pw_opts_use *use);

/* A repeatable option's argument (pw_opts_next's last, in PO->arg) appended to the *N strings
 * of V, which holds at most MAX: PW_EXIT_OK; one too many says "at most MAX WHAT" (WHAT:
 * "--only globs") on stderr and returns PW_EXIT_USAGE. */
int pw_opts_push(const pw_opts *po, const char **v, size_t *n, size_t max, const char *what);

/* At most MAX operands: PW_EXIT_GO_ON; else says "unexpected argument" about the first one
 * too many, on stderr, and returns PW_EXIT_USAGE. */
int pw_opts_operands_at_most(const pw_opts *po, int max);

static inline void pw_opts_donep(pw_opts *o)
{
	pw_opts_done(o);
}
#define _cleanup_opts_ __attribute__((cleanup(pw_opts_donep)))
