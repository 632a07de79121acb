/* SPDX-License-Identifier: MIT */
/*
 * `piworkfs run`: runs a command (a coding agent, a shell) where the mode holds against it
 * too. A view guards only the path it is mounted on; in the sandbox the project's own path
 * shows the view, the backing directory has no other path, and the only control socket is
 * the agent socket, which may only tighten the mode (run.h, docs/SECURITY.md).
 *
 * The sequence: find the project; mount the run's own view (run/view.c); build the
 * bubblewrap command line (run/sandbox.c); run it, passing signals on (run/exec.c);
 * unmount the view; exit with the command's status.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "agent/agent.h"
#include "options.h"
#include "output.h"
#include "path.h"
#include "project.h"
#include "run/run.h"
#include "pw_limits.h"

#define RUN_USAGE                                                                                  \
	"Usage: piworkfs run [OPTIONS] [--] COMMAND [ARGS...]\n"                                   \
	"\n"                                                                                       \
	"Runs COMMAND in a sandbox where the project's own path shows a view of it, so the\n"      \
	"active mode limits every write to the project, whatever path the command uses. Each\n"    \
	"run has a view and a mode of its own: switching it never changes another run's or\n"      \
	"the person's view, and the mode is not remembered as the project's last. Inside,\n"       \
	"`piworkfs mode` may only tighten the mode; loosen it from outside with `piworkfs\n"       \
	"mode --run ID`. One line on stderr says the project, the run's ID, its view and its\n"    \
	"mode. Options go before COMMAND: everything from its first word on is\n"                  \
	"the command. Without .git/ or .piworkfs/ around, a project that would be $HOME or\n"      \
	"above must be named with -C.\n"                                                           \
	"\n"                                                                                       \
	"Options:\n"                                                                               \
	"  -m, --mode MODE     the run's mode (default: that of the project's live view around\n"  \
	"                      the current directory, else of any, else the last mode)\n"          \
	"  -C, --project DIR   the project (default: found from the current directory)\n"          \
	"      --ro-host       the rest of the host is read-only inside\n"                         \
	"      --share PATH    PATH stays writable with --ro-host (repeatable)\n"                  \
	"      --only GLOB     a lane: of what the mode allows, the run writes only what GLOB\n"   \
	"                      matches, in every mode (repeatable; the run's own view is\n"        \
	"                      mounted with it: mount --only)\n"                                   \
	"      --podman IMAGE  run COMMAND in a Podman container of IMAGE instead: only the\n"     \
	"                      view (at the project's path) and the agent socket reach it;\n"      \
	"                      no network unless a --podman-arg names one\n"                       \
	"      --podman-arg ARG  pass ARG to podman run, after piworkfs's own (repeatable)\n"      \
	"  -h, --help          show this help\n"                                                   \
	"\n"                                                                                       \
	"Examples:\n"                                                                              \
	"  piworkfs run -- pi\n"                                                                   \
	"  piworkfs run --mode design -C ~/proj make -j2\n"                                        \
	"  piworkfs run --podman localhost/agent -- sh\n"                                          \
	"\n"                                                                                       \
	"Exit status: COMMAND's (128+N when a signal N killed it; 127 not found, 126 not\n"        \
	"executable); 2, 3, 4, 5 are piworkfs's own errors when COMMAND did not run (see\n"        \
	"piworkfs(1)). Requires bubblewrap (bwrap), or podman with --podman (then 125 is\n"        \
	"podman's own error).\n"

typedef struct run_args {
	const char *mode;
	const char *project;
	bool ro_host;
	char *shares[PW_RUN_SHARES_MAX];
	size_t n_shares;
	const char *only[PW_LANE_MAX]; /* --only: the run's lane */
	size_t n_only;
	const char *podman; /* --podman IMAGE, or NULL: bubblewrap */
	char *podman_args[PW_RUN_PODMAN_ARGS_MAX];
	size_t n_podman_args;
	char **command;
} run_args;

/* --share, --only, --podman-arg: the repeatable options, into the run_args DATA. */
static int list_option(const pw_opts *po, int c, void *data)
{
	run_args *a = data;

	if (c == PW_OPT_SHARE)
		return pw_opts_push(po, (const char **)a->shares, &a->n_shares, PW_RUN_SHARES_MAX,
				    "--share paths");
	if (c == PW_OPT_ONLY)
		return pw_opts_push(po, a->only, &a->n_only, PW_LANE_MAX, "--only globs");
	return pw_opts_push(po, (const char **)a->podman_args, &a->n_podman_args,
			    PW_RUN_PODMAN_ARGS_MAX, "--podman-arg");
}

/* The options into A. Returns PW_EXIT_GO_ON, or the exit status (--help: 0). */
static int parse(int argc, char **argv, run_args *a, pw_opts *po)
{
	const pw_opt_bind binds[] = {{'m', .arg = &a->mode},
				     {'C', .arg = &a->project},
				     {PW_OPT_RO_HOST, .flag = &a->ro_host},
				     {PW_OPT_PODMAN, .arg = &a->podman},
				     {0}};
	int r = pw_opts_parse(
	    po, "run", argc, argv,
	    &(pw_opts_use){.usage = RUN_USAGE, .binds = binds, .fn = list_option, .data = a});

	if (r != PW_EXIT_GO_ON)
		return r;
	if (!a->podman && a->n_podman_args) {
		pw_err("run", "--podman-arg needs --podman IMAGE");
		return PW_EXIT_USAGE;
	}
	/* The container shows its image, not the host: there is no host to make read-only. */
	if (a->podman && (a->ro_host || a->n_shares)) {
		pw_err("run",
		       "--ro-host and --share are for the bubblewrap sandbox; a --podman "
		       "container shows its image, not the host (bind paths with --podman-arg)");
		return PW_EXIT_USAGE;
	}
	if (po->n_operands == 0) {
		pw_err("run", "expected a COMMAND after the options (piworkfs run -- COMMAND)");
		return PW_EXIT_USAGE;
	}
	a->command = po->operands;
	return PW_EXIT_GO_ON;
}

/*
 * `piworkfs run -- pi` loads the Pi extension (integrations/pi, README "Pi") with nothing
 * for the person to configure: when COMMAND's name is `pi`, `-e DIR` goes right after it.
 * DIR is $PIWORKFS_PI_EXTENSION (set and empty: add nothing), else the installed copy, else
 * the source tree's (running from the build directory). Loading it twice is harmless: when
 * the person installed it too, the first copy Pi loads claims the process.
 */
static const char *pi_extension_dir(void)
{
	const char *env = getenv("PIWORKFS_PI_EXTENSION");
	struct stat st;

	if (env)
		return env[0] ? env : NULL;
	if (stat(PW_PI_EXTENSION_DIR "/index.ts", &st) == 0)
		return PW_PI_EXTENSION_DIR;
	if (stat(PW_SOURCE_PI_EXTENSION_DIR "/index.ts", &st) == 0)
		return PW_SOURCE_PI_EXTENSION_DIR;
	return NULL;
}

/* COMMAND with `-e DIR` after argv[0] when it is Pi; NULL when it stays as it is (the
 * caller keeps COMMAND). The vector is malloc'd; its strings are borrowed. */
static char **with_pi_extension(char **command)
{
	const char *name = strrchr(command[0], '/');
	const char *dir = pi_extension_dir();
	size_t n = 0;
	char **v;

	name = name ? name + 1 : command[0];
	if (!streq(name, "pi") || !dir)
		return NULL;
	while (command[n])
		n++;
	v = calloc(n + 3, sizeof(*v));
	if (!v)
		return NULL;
	v[0] = command[0];
	v[1] = (char *)"-e";
	v[2] = (char *)dir;
	memcpy(v + 3, command + 1, n * sizeof(*v)); /* with the terminating NULL */
	return v;
}

/* Is DIR equal to or above $HOME? */
static bool home_or_above(const char *dir)
{
	const char *home = getenv("HOME");
	_cleanup_free_ char *real = home && home[0] == '/' ? realpath(home, NULL) : NULL;

	return real && pw_path_beneath(real, dir) >= 0;
}

/* The project's backing directory: --project, or the one around the current directory
 * (taken out of a view when it lies in one: the sandbox needs the real directory). MODE,
 * when given, must be one of its modes: said here, as `run`, before anything is mounted. */
static int find_project(const char *opt, const char *mode, char **ret, char **ret_global,
			char **ret_bundled)
{
	_cleanup_project_ pw_cli_project p = {0};
	_cleanup_modeset_ pw_modeset *ms = NULL;
	const char *err = NULL;

	if (pw_cli_project_open(opt, &p, &err) < 0) {
		pw_err("run", "project %s: %s", opt ? opt : "here", err ? err : "cannot open");
		return PW_EXIT_CONFIG;
	}
	/* Without .git/ or .piworkfs/ the project would be the current directory: when that is
	 * $HOME or above, the agent would get a view of everything the person owns. */
	if (!p.marked && home_or_above(p.root)) {
		pw_err("run",
		       "no .git/ or .piworkfs/ marks a project at or above %s, and %s is %s; "
		       "name the project (piworkfs run -C DIR -- COMMAND)",
		       p.root, p.root,
		       streq(p.root, "/") ? "the root directory"
					  : "your home directory or above it");
		return PW_EXIT_CONFIG;
	}
	const char *project = pw_cli_project_path(&p);
	if (streq(project, "/")) {
		pw_err("run", "the project cannot be / (the sandbox shows the host around it)");
		return PW_EXIT_CONFIG;
	}
	if (mode) {
		if (pw_cli_load_modes(&p, &ms, NULL) < 0) {
			pw_err("run", "cannot load the modes of %s", project);
			return PW_EXIT_CONFIG;
		}
		if (!pw_modeset_find(ms, mode)) {
			pw_cli_unknown_mode("run", ms, mode);
			return PW_EXIT_CONFIG;
		}
	}
	*ret = strdup(project);
	if (!*ret)
		return PW_EXIT_SYSTEM;
	*ret_global = TAKE_PTR(p.global_dir);
	*ret_bundled = TAKE_PTR(p.bundled_dir);
	return PW_EXIT_OK;
}

int cmd_run(int argc, char **argv)
{
	run_args a = {0};
	_cleanup_free_ char *project = NULL, *cwd = NULL, *global_dir = NULL, *bundled_dir = NULL;
	_cleanup_free_ char *node_hint = NULL;
	_cleanup_free_ char **pi_command = NULL, **agent_command = NULL;
	pw_run_view view = {.daemon_fd = -1};
	pw_run_argv bw = {0};
	int pipefd[2], r;

	_cleanup_opts_ pw_opts po = {0};

	r = parse(argc, argv, &a, &po);
	if (r != PW_EXIT_GO_ON)
		return r; /* --help, or a usage error */
	r = find_project(a.project, a.mode, &project, &global_dir, &bundled_dir);
	if (r != PW_EXIT_OK)
		return r;
	cwd = realpath(".", NULL);
	if (!cwd)
		cwd = strdup(project);
	if (!cwd)
		return PW_EXIT_SYSTEM;

	/* A Node program older than its Node (Pi 1.6.0 on Node 20): said after it fails, so a
	 * full-screen program does not wipe it (run/node.c). A container has its own node. */
	node_hint = a.podman ? NULL : pw_run_node_too_old(a.command);
	/* The wiring names this host's files (the extension, this program): a container has
	 * its image's, so the image brings its own. */
	pi_command = a.podman ? NULL : with_pi_extension(a.command);
	if (pi_command)
		a.command = pi_command;

	r = pw_run_view_open(project, cwd, a.mode, a.only, a.n_only, &view);
	if (r != PW_EXIT_OK)
		return r;
	/* claude, codex, opencode, gemini: piworkfs mcp and the hooks (agent/wire.c). */
	agent_command = a.podman ? NULL : pw_agent_wire(a.command);
	if (agent_command)
		a.command = agent_command;
	/* One line, so the person knows which view the agent works through and in what mode
	 * (stderr: stdout belongs to the command). */
	fprintf(stderr,
		"piworkfs: run: project %s, run %s, view %s (its own), mode %s "
		"(switch it with: piworkfs mode --run %s MODE)\n",
		view.project, view.run_id, view.mountpoint, view.mode ? view.mode : "?",
		view.run_id);
	for (size_t i = 0; i < a.n_only; i++) /* the lane, on the same terms as the mode */
		fprintf(stderr, "%s%s%s", i ? ", " : "piworkfs: run: lane (--only) ", a.only[i],
			i + 1 == a.n_only ? ": writes outside it are refused in every mode\n" : "");
	pw_run_sandbox_opts so = {
	    .view = &view,
	    .cwd = cwd,
	    .ro_host = a.ro_host,
	    .shares = a.shares,
	    .n_shares = a.n_shares,
	    .info_fd = 3, /* run/exec.c moves the pipe there */
	    .command = a.command,
	    .mode_dirs = {global_dir, bundled_dir},
	};
	pw_run_podman_opts pso = {
	    .view = &view,
	    .cwd = cwd,
	    .image = a.podman,
	    .args = a.podman_args,
	    .n_args = a.n_podman_args,
	    .command = a.command,
	};
	if ((a.podman ? pw_run_podman_argv(&pso, &bw) : pw_run_sandbox_argv(&so, &bw)) < 0) {
		r = PW_EXIT_CONFIG;
	} else if (pipe2(pipefd, O_CLOEXEC) < 0) {
		pw_err("run", "pipe: %s", strerror(errno));
		r = PW_EXIT_SYSTEM;
	} else {
		r = pw_run_exec(bw.v, pipefd[0], pipefd[1]);
		if (r != PW_EXIT_OK && node_hint)
			pw_err("run", "%s exited %d: %s", a.command[0], r, node_hint);
	}
	pw_run_argv_done(&bw);
	pw_agent_wire_done();
	if (pw_run_view_close(&view) < 0 && r == PW_EXIT_OK)
		r = PW_EXIT_SYSTEM;
	pw_run_view_done(&view);
	return r;
}
