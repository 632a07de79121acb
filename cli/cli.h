/* SPDX-License-Identifier: MIT */
/*
 * The piworkfs command line. main.c holds the dispatch table; each command lives in its own
 * cmd_*.c file and has the signature below: ARGV[0] is the command's name, options follow
 * (read by pw_opts_parse against the command's table in options.c; changes, diff, undo,
 * redo and checkpoint still use getopt_long in cmd_changes.c). Commands print their own
 * output and return the process exit status.
 *
 * Exit statuses (documented in piworkfs(1)):
 *   0  success (check: every path allowed)
 *   1  a decision was "denied" (check, check-bash) or a request was refused by the daemon
 *   2  usage error (unknown option, missing argument)
 *   3  configuration or input error (unknown mode, unreadable project, bad file)
 *   4  no live view (not inside a view, daemon unreachable)
 *   5  system error (mount failed, I/O error)
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

enum {
	PW_EXIT_OK = 0,
	PW_EXIT_DENIED = 1,
	PW_EXIT_USAGE = 2,
	PW_EXIT_CONFIG = 3,
	PW_EXIT_NO_VIEW = 4,
	PW_EXIT_SYSTEM = 5,
	/* Not an exit status: what a step of a command (its parse, --run's lookup) returns
	 * when the command goes on; any other value is the status to exit with. */
	PW_EXIT_GO_ON = -1,
};

typedef int (*pw_cmd_fn)(int argc, char **argv);

/* Each command (main.c's dispatch table). The rooms' own commands are declared by their
 * faces: run/run.h (the launcher's internal ones), agent/agent.h (mcp, hook). */
#define PW_CMD(name) int name(int argc, char **argv)
PW_CMD(cmd_modes);
PW_CMD(cmd_allowed);
PW_CMD(cmd_check);
PW_CMD(cmd_mount);
PW_CMD(cmd_umount);
PW_CMD(cmd_mode);
PW_CMD(cmd_status);
PW_CMD(cmd_reload);
PW_CMD(cmd_trust);
PW_CMD(cmd_log);
PW_CMD(cmd_why);
PW_CMD(cmd_check_bash);
PW_CMD(cmd_run);
PW_CMD(cmd_completion);
PW_CMD(cmd_complete);
PW_CMD(cmd_changes);
PW_CMD(cmd_diff);
PW_CMD(cmd_undo);
PW_CMD(cmd_redo);
PW_CMD(cmd_checkpoint);
PW_CMD(cmd_plan);
#undef PW_CMD

/* Should a notice about the machine (NAME, saying TEXT) be said now? True once per boot and
 * user for the same TEXT, and whenever that cannot be known (notice.c). */
bool pw_cli_notice_once(const char *name, const char *text);

/* What mount's -o takes, one per line, NAME= for those with a value (for completion). */
int pw_print_mount_options(void);

/* mount(8)'s helper (mount_helper.c): is the program called as mount.fuse.piworkfs or
 * mount.piworkfs? Then run it as one: `piworkfs mount` from mount(8)'s arguments. */
bool pw_mount_helper_called(const char *argv0);
int pw_mount_helper(int argc, char **argv);

/* Asking to switch (mode_request.c, for cmd_mode.c): inside the agent, after REFUSAL (the
 * daemon's message for mode.set), ask the person for mode NAME, and wait for the answer
 * when run's terminal shows the question; answer the pending request; show it (nothing
 * when there is none or it cannot be seen). The first two return an exit status. */
int pw_mode_ask(const char *cmd, const char *mount, const char *name, const char *reason,
		const char *refusal, bool json);
/* WHICH: the request's id or target mode (approve only); TYPED: the target typed after an
 * id (NULL: none; a WHICH that is a mode is typed too), which the daemon requires for a
 * request no run's terminal shows and which must be the request's or denies it. */
int pw_mode_answer(const char *cmd, const char *mount, bool approve, const char *which,
		   const char *typed, bool json);
/* The second half of asking the person through C (mode.request, plan.request_approval): when
 * *RES, the request's answer, says run's terminal shows the question, says on stderr that CMD
 * waits (WHY: what needs the person) and waits up to WAIT_MS for the answer, which replaces
 * *RES. Returns pw_ctl_call's (0 when there was nothing to wait for). */
typedef struct pw_ctl_conn pw_ctl_conn;
int pw_mode_wait_shown(pw_ctl_conn *c, const char *cmd, const char *why, int wait_ms, json_t **res,
		       int *ret_code, char **ret_message);
/* VIEW_OPTION ends each command it prints, so that each works as printed from anywhere:
 * pw_mode_view_option's. */
void pw_mode_show_pending(const char *mount, const char *view_option);
/* How a command names the view the person named: " --run ID" (RUN given), " --mount PATH"
 * (PATH absolute, a shell word), "" (the current directory's). Malloc'd, NULL if no memory. */
char *pw_mode_view_option(const char *mount, const char *run);
/* Inside a run: " --run ID", how the person's terminal names the run's view (its own view,
 * which the bare view's directory is not); "" elsewhere. Malloc'd, NULL if no memory. */
char *pw_mode_run_option(const char *mount);

/* After a switch (cmd_mode.c): when the mode RES describes writes something and an approved
 * plan is in progress, prints its line with the next task (cmd_plan.c); else nothing. */
void pw_plan_print_next(const char *mount, json_t *res);
/* changes --plan NAME (cmd_changes.c): the change sets of plan NAME grouped by the task in
 * progress when each started (cmd_plan.c). Returns an exit status. */
int pw_plan_changes(const char *cmd, const char *mount, const char *name, bool json);

/* The daemon entry point used by `piworkfs mount` (fs/daemon.c). */
