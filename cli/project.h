/* SPDX-License-Identifier: MIT */
/*
 * The project a command works on, and the mapping of user paths into it.
 *
 * The project is `--project DIR`, or else the nearest directory at or above the current
 * directory that holds .piworkfs/ or .git/, or else the current directory; its root is
 * always a real path (realpath). A directory inside a live view (the current one, or DIR)
 * means that view: its root is the mountpoint and `backing` the project behind it, which
 * is what every command prints and keys trust, last modes and the log by, so a command
 * names the same project from inside the view, from the backing directory and from any
 * subdirectory of either. User PATH arguments are absolute or relative: a relative
 * path is taken from the current directory when that lies inside the project, and from the
 * project root otherwise (so `--project DIR docs/a.md` works from anywhere). Each maps to
 * a normalized project-relative path (policy/path.h), or is reported as outside.
 *
 * Mode directories: bundled = $PIWORKFS_MODES_DIR, else PW_BUNDLED_MODES_DIR when it
 * exists, else PW_SOURCE_MODES_DIR (running from the build directory); global =
 * $XDG_CONFIG_HOME/piworkfs, else ~/.config/piworkfs. Trust comes from the state
 * database (fs/store/state.h).
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "pw_limits.h"
#include "mode.h"
#include "policy.h"
#include "util.h"

typedef struct pw_cli_project {
	char *root;	   /* real path of the project root */
	char *cwd;	   /* real path of the current directory */
	char *bundled_dir; /* bundled modes directory */
	char *global_dir;  /* global configuration directory (may not exist) */
	/* When ROOT is the mountpoint of a live view: the project behind it. Modes and trust
	 * are the backing project's (trust is recorded for its real path); user paths are
	 * still mapped relative to ROOT. NULL otherwise. */
	char *backing;
	bool trusted;
	bool marked; /* found by .git/ or .piworkfs/, given as DIR, or a view: not a fallback */
} pw_cli_project;

/* The project's real path as commands print it: the backing project of a view. */
static inline const char *pw_cli_project_path(const pw_cli_project *p)
{
	return p->backing ? p->backing : p->root;
}

/*
 * Finds the project (PROJECT_OPT: the --project argument or NULL). Returns 0, or -errno
 * with a static one-line description in *ret_err (the directory is missing, not a
 * directory, ...).
 */
int pw_cli_project_open(const char *project_opt, pw_cli_project *ret, const char **ret_err);
void pw_cli_project_done(pw_cli_project *p);

/* pw_cli_project_open() for command CMD, which says why it failed on stderr ("CMD: PROJECT:
 * WHY", PROJECT "." for the current directory's). Returns PW_EXIT_OK or PW_EXIT_CONFIG. */
int pw_cli_project_open_or_say(const char *cmd, const char *project_opt, pw_cli_project *ret);

/*
 * Maps the user path ARG to a project-relative path in OUT (PW_PATH_MAX bytes; "" is the
 * root). *ret_trailing_slash tells whether ARG ended in '/' (it names a directory).
 * Returns 0, -EXDEV when ARG lies outside the project, or another -errno with a message
 * in *ret_err (-ENAMETOOLONG, -EINVAL).
 */
int pw_cli_map_path(const pw_cli_project *p, const char *arg, char *out, bool *ret_trailing_slash,
		    const char **ret_err);

/* Does project-relative PATH name an existing directory (lstat, no symlink followed)? When
 * it does not exist, DEFAULT_DIR is returned. */
bool pw_cli_path_is_dir(const pw_cli_project *p, const char *path, bool default_dir);

/* FILE for display: project-relative when inside the project, "~/..." under $HOME,
 * "modes/NAME" for the bundled directory, else as is. Writes into BUF (SIZE bytes) and
 * returns BUF, or FILE itself when it needs no change. */
const char *pw_cli_display_file(const pw_cli_project *p, const char *file, char *buf, size_t size);

/* Is ROOT trusted? Reads the state database without creating it: a missing or unreadable
 * database means untrusted. */
bool pw_cli_project_trusted(const char *root);

/* Loads the modes of P's layers. Returns 0 with *ret, or -errno. *ret_bundled_ok is false
 * when the bundled directory could not be read at all. */
int pw_cli_load_modes(const pw_cli_project *p, pw_modeset **ret, bool *ret_bundled_ok);

/* Prints the one line about an unknown MODE: "did you mean" for a near miss of a mode of MS,
 * else the modes there are. */
void pw_cli_unknown_mode(const char *cmd, const pw_modeset *ms, const char *mode);

/*
 * The one place where a command gets its policy. MODE is the --mode argument or NULL.
 * Without a mode, the live view's mode is asked through pw_cli_live_mode() (over the
 * socket client, cli/client/ctl_client.c); offline that is an error. On success *ret_policy holds
 * the compiled policy and *ret_ms the modeset it came from (for display). Returns a PW_EXIT_*
 * status after printing a one-line error on failure (CMD names the command in the message): unknown
 * mode (listing the modes) -> PW_EXIT_CONFIG, no mode offline -> PW_EXIT_USAGE.
 */
int pw_cli_get_policy(const char *cmd, const pw_cli_project *p, const char *mode,
		      pw_modeset **ret_ms, pw_policy **ret_policy);

/*
 * Names the view a command talks to (its mountpoint; -M PATH, options.c): the live mode and
 * lane then come from it, wherever the current directory is. Returns 0 or -ENOMEM.
 */
int pw_cli_name_view(const char *mountpoint);
/* The view named, or NULL; valid until the next pw_cli_name_view. */
const char *pw_cli_named_view(void);

/*
 * The live view's mode (the socket client's pw_ctl_live_mode): the mode of the view named
 * by pw_cli_name_view, else of the live view containing the current directory, else of a
 * live view of project P (from the backing directory). Returns 0 with a malloc'd
 * *ret_mode, -ENOENT when there is none, or -errno.
 */
int pw_cli_live_mode(const pw_cli_project *p, char **ret_mode);

/*
 * The lane (`mount --only`, `run --only`) of the live view containing P's directory, as
 * its status says: 0 with *ret (a JSON array of globs, a new reference; [] without a lane
 * or outside a view), or -errno when the view does not answer.
 */
int pw_cli_live_lane(const pw_cli_project *p, json_t **ret);

/*
 * Does an ignored-because-untrusted warning about mode ABOUT (NULL: the project's
 * configuration, whose design token files serve the modes with writes.tokens) bear on
 * MODE, whose writes.tokens is TOKENS? The commands that show a mode's rules list these
 * keys under it, where the person sees that something they declared does not apply.
 */
static inline bool pw_cli_ignored_applies(const char *about, const char *mode, bool tokens)
{
	return about ? streq(about, mode) || streq(about, "*") : tokens;
}

/*
 * A built-in rule's pattern as the text listings spell it: every built-in names a path at
 * the project's root, so all are written alike, without the leading '/' that only
 * "/.piworkfs" needs as a glob (".git/hooks" is anchored by its inner '/'). Other rules are
 * shown as written; JSON always gives the glob itself.
 */
static inline const char *pw_cli_builtin_pattern(const char *pattern)
{
	return pattern && pattern[0] == '/' && pattern[1] ? pattern + 1 : pattern;
}

static inline void pw_cli_project_donep(pw_cli_project *p)
{
	pw_cli_project_done(p);
}
#define _cleanup_project_ _cleanup_(pw_cli_project_donep)

/* What the commands that judge paths under a mode (allowed, check, check-bash) judge with:
 * the project, its modes as the files say, and the policy of the mode asked. */
typedef struct pw_cli_judge {
	pw_cli_project p;
	pw_modeset *ms;
	pw_policy *policy;
} pw_cli_judge;

/* Opens the project (PROJECT_OPT) and the policy of MODE into J, for command CMD, saying
 * why not on stderr (pw_cli_project_open_or_say, pw_cli_get_policy). Returns an exit status;
 * J is released by pw_cli_judge_done whatever it returns. */
int pw_cli_judge_open(const char *cmd, const char *project_opt, const char *mode, pw_cli_judge *j);
void pw_cli_judge_done(pw_cli_judge *j);

static inline void pw_cli_judge_donep(pw_cli_judge *j)
{
	pw_cli_judge_done(j);
}
#define _cleanup_judge_ _cleanup_(pw_cli_judge_donep)
