/* SPDX-License-Identifier: MIT */
/*
 * `piworkfs run`: runs a command (a coding agent, a shell) where the mode holds against it
 * too. A view guards only the path it is mounted on; in the sandbox the project's own path
 * shows the view, the backing directory has no other path, and the only control socket is
 * the agent socket, which may only tighten the mode (run.h, docs/SECURITY.md).
 *
 * The sequence: find the project; reuse its live view or mount one (run_view.c); build the
 * bubblewrap command line (run_sandbox.c); run it, passing signals on (run_exec.c);
 * unmount the view if we mounted it; exit with the command's status.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "output.h"
#include "project.h"
#include "run.h"

#define SHARES_MAX 64

#define RUN_USAGE                                                                                  \
	"Usage: piworkfs run [OPTIONS] -- COMMAND [ARGS...]\n"                                     \
	"\n"                                                                                       \
	"Runs COMMAND in a sandbox where the project's own path shows a view of it, so the\n"      \
	"active mode limits every write to the project, whatever path the command uses. The\n"     \
	"live view of the project is reused; otherwise a private one is mounted for the run.\n"    \
	"Inside, `piworkfs mode` may only tighten the mode; loosen it from outside.\n"             \
	"\n"                                                                                       \
	"  -m, --mode MODE     switch the view to MODE first (default: keep its mode; a new\n"     \
	"                      view restores the project's last mode, plan for a new project)\n"   \
	"  -p, --project DIR   the project (default: found from the current directory)\n"          \
	"      --ro-host       the rest of the host is read-only inside\n"                         \
	"      --share PATH    PATH stays writable with --ro-host (repeatable)\n"                  \
	"  -h, --help          this help\n"                                                        \
	"\n"                                                                                       \
	"The exit status is COMMAND's (128+N when a signal N killed it); 2-5 are piworkfs's\n"     \
	"own errors when COMMAND did not run (see piworkfs(1)). Requires bubblewrap (bwrap).\n"

typedef struct run_args {
	const char *mode;
	const char *project;
	bool ro_host;
	char *shares[SHARES_MAX];
	size_t n_shares;
	char **command;
} run_args;

static int parse(int argc, char **argv, run_args *a)
{
	static const struct option opts[] = {
		{ "mode", required_argument, NULL, 'm' },
		{ "project", required_argument, NULL, 'p' },
		{ "ro-host", no_argument, NULL, 'R' },
		{ "share", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:m:p:h", opts, NULL)) != -1) {
		switch (c) {
		case 'm': a->mode = optarg; break;
		case 'p': a->project = optarg; break;
		case 'R': a->ro_host = true; break;
		case 'S':
			if (a->n_shares == SHARES_MAX) {
				pw_err("run", "at most %d --share paths", SHARES_MAX);
				return PW_EXIT_USAGE;
			}
			a->shares[a->n_shares++] = optarg;
			break;
		case 'h': return -1;
		default: return pw_err_option("run", c, argv);
		}
	}
	if (optind >= argc) {
		pw_err("run", "expected a COMMAND after the options (piworkfs run -- COMMAND)");
		return PW_EXIT_USAGE;
	}
	a->command = argv + optind;
	return PW_EXIT_OK;
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

/* The project's backing directory: --project or the one around the current directory,
 * taken out of a view when it lies in one (the sandbox needs the real directory). */
static int find_project(const char *opt, char **ret, char **ret_global, char **ret_bundled)
{
	_cleanup_project_ pw_cli_project p = { 0 };
	_cleanup_free_ char *start = NULL, *unviewed = NULL, *view_root = NULL;
	const char *err = NULL;

	start = realpath(opt ? opt : ".", NULL);
	if (!start) {
		pw_err("run", "%s: %s", opt ? opt : "the current directory", strerror(errno));
		return PW_EXIT_CONFIG;
	}
	unviewed = pw_run_unview_path(start, &view_root);
	if (opt || unviewed) {
		/* --project DIR as given; in a view without --project: the view's project. */
		const char *dir = opt ? (unviewed ? unviewed : start) : view_root;
		if (pw_cli_project_open(dir, &p, &err) < 0) {
			pw_err("run", "project %s: %s", dir, err ? err : "cannot open");
			return PW_EXIT_CONFIG;
		}
	} else if (pw_cli_project_open(NULL, &p, &err) < 0) {
		pw_err("run", "project: %s", err ? err : "cannot open");
		return PW_EXIT_CONFIG;
	}
	if (streq(p.root, "/")) {
		pw_err("run", "the project cannot be / (the sandbox shows the host around it)");
		return PW_EXIT_CONFIG;
	}
	*ret = TAKE_PTR(p.root);
	*ret_global = TAKE_PTR(p.global_dir);
	*ret_bundled = TAKE_PTR(p.bundled_dir);
	return PW_EXIT_OK;
}

int cmd_run(int argc, char **argv)
{
	run_args a = { 0 };
	_cleanup_free_ char *project = NULL, *cwd = NULL, *global_dir = NULL, *bundled_dir = NULL;
	_cleanup_free_ char **pi_command = NULL;
	pw_run_view view = { .daemon_fd = -1 };
	pw_run_argv bw = { 0 };
	int pipefd[2], r;

	r = parse(argc, argv, &a);
	if (r < 0)
		return pw_usage("run", RUN_USAGE, false);
	if (r != PW_EXIT_OK)
		return r;
	r = find_project(a.project, &project, &global_dir, &bundled_dir);
	if (r != PW_EXIT_OK)
		return r;
	cwd = realpath(".", NULL);
	if (!cwd)
		cwd = strdup(project);
	if (!cwd)
		return PW_EXIT_SYSTEM;

	pi_command = with_pi_extension(a.command);
	if (pi_command)
		a.command = pi_command;

	r = pw_run_view_open(project, a.mode, &view);
	if (r != PW_EXIT_OK)
		return r;
	pw_run_sandbox_opts so = {
		.view = &view,
		.cwd = cwd,
		.ro_host = a.ro_host,
		.shares = a.shares,
		.n_shares = a.n_shares,
		.info_fd = 3, /* run_exec.c moves the pipe there */
		.command = a.command,
		.mode_dirs = { global_dir, bundled_dir },
	};
	if (pw_run_sandbox_argv(&so, &bw) < 0) {
		r = PW_EXIT_CONFIG;
	} else if (pipe2(pipefd, O_CLOEXEC) < 0) {
		pw_err("run", "pipe: %s", strerror(errno));
		r = PW_EXIT_SYSTEM;
	} else {
		r = pw_run_exec(bw.v, pipefd[0], pipefd[1]);
	}
	pw_run_argv_done(&bw);
	if (pw_run_view_close(&view) < 0 && r == PW_EXIT_OK)
		r = PW_EXIT_SYSTEM;
	pw_run_view_done(&view);
	return r;
}
