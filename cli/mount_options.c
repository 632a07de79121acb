/* SPDX-License-Identifier: MIT */
/*
 * mount's -o (mount.h): each option is FUSE's (passed to libfuse, checked first), the
 * view's (read into the daemon's options: sizes, ages, flags), or fstab's only (taken by
 * mount(8), ignored here); the tables below say which, and `piworkfs completion` lists them.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <pwd.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cli.h"
#include "ctl/run_id.h"
#include "client/ctl_client.h"
#include "ctl/sockets.h"
#include "daemon.h"
#include "fs.h"
#include "modefile.h"
#include "mount.h"
#include "run/run.h"
#include "options.h"
#include "output.h"
#include "path.h"
#include "policy.h"
#include "project.h"

/* Removes "nonempty" from the -o list (the check is ours), noting whether it was there. */
char *pw_mount_strip_nonempty(const char *opts, bool *ret_nonempty, bool *ret_allow_other)
{
	*ret_nonempty = false;
	*ret_allow_other = false;
	if (!opts)
		return strdup("");
	_cleanup_free_ char *copy = strdup(opts);
	char *out = calloc(1, strlen(opts) + 1);
	if (!copy || !out) {
		free(out);
		return NULL;
	}
	char *save = NULL;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (streq(tok, "nonempty")) {
			*ret_nonempty = true;
			continue;
		}
		if (streq(tok, "allow_other")) {
			*ret_allow_other = true;
			continue;
		}
		if (*out)
			strcat(out, ",");
		strcat(out, tok);
	}
	return out;
}

int pw_mount_parse_number(const char *what, const char *s, double *ret)
{
	char *end = NULL;

	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || v < 0) {
		pw_err("mount", "%s: not a non-negative number: '%s'", what, s);
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

/* A size: bytes, or with a binary suffix K, M, G, T (64M). Greater than zero. */
int pw_mount_parse_size(const char *what, const char *s, unsigned long long *ret)
{
	char *end = NULL;

	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	unsigned shift = 0;
	if (end != s && *end && !end[1]) {
		const char *units = "KMGT", *u = strchr(units, *end == 'k' ? 'K' : *end);
		if (u) {
			shift = 10 * (unsigned)(u - units + 1);
			end++;
		}
	}
	if (errno || end == s || *end || s[0] == '-' || v == 0 || v > (~0ull >> shift)) {
		pw_err("mount", "%s: not a size greater than zero (bytes, or 512K, 64M, 1G): '%s'",
		       what, s);
		return -EINVAL;
	}
	*ret = v << shift;
	return 0;
}

/* An age: seconds, or with a suffix s, m, h, d, w (14d). Greater than zero. */
int pw_mount_parse_age(const char *what, const char *s, long long *ret)
{
	char *end = NULL;

	errno = 0;
	long long v = strtoll(s, &end, 10);
	long long unit = 1;
	if (end != s && *end && !end[1]) {
		unit = *end == 's'   ? 1
		       : *end == 'm' ? 60
		       : *end == 'h' ? 3600
		       : *end == 'd' ? 86400
		       : *end == 'w' ? 604800
				     : 0;
		if (unit)
			end++;
	}
	if (errno || end == s || *end || !unit || v <= 0 || v > INT64_MAX / 1000000000 / unit) {
		pw_err("mount",
		       "%s: not an age greater than zero (seconds, or 30m, 12h, 14d, 2w): "
		       "'%s'",
		       what, s);
		return -EINVAL;
	}
	*ret = v * unit;
	return 0;
}

/* The options -o accepts: ours (nonempty, allow_other, io_uring, no_io_uring: the daemon takes
 * the last two out) and
 * the FUSE mount options libfuse knows. A misspelt one gets its own message here instead of
 * a failed mount later. */
static const char *const fuse_flags[] = {
    "allow_other",
    "nonempty",
    "allow_root",
    "auto_unmount",
    "default_permissions",
    "ro",
    "rw",
    "suid",
    "nosuid",
    "dev",
    "nodev",
    "exec",
    "noexec",
    "async",
    "sync",
    "dirsync",
    "atime",
    "noatime",
    "relatime",
    "norelatime",
    "strictatime",
    "nostrictatime",
    "blkdev",
    "io_uring",
    "no_io_uring",
    NULL,
};

static const char *const fuse_valued[] = {
    "fsname",	 "subtype",    "max_read",    "blksize", "context",
    "fscontext", "defcontext", "rootcontext", NULL,
};

/* The view's own options in -o, as sshfs takes its own there (an fstab line has only -o):
 * the long options of `piworkfs mount` with '_' (or '-') between words. */
static const char *const view_flags[] = {
    "no_watch", "no_audit", "no_originals", "log_allowed", NULL,
};

static const char *const view_valued[] = {
    "mode",	      "socket_dir",	    "agent_socket",	   "state_db", "timeout",
    "originals_keep", "originals_max_file", "originals_max_total", NULL,
};

/* What fstab and mount(8) pass that is for them, not for the filesystem. */
static const char *const fstab_only[] = {
    "defaults", "auto",	 "noauto",  "user",   "users", "nouser",
    "owner",	"group", "_netdev", "nofail", NULL,
};

static bool in_table(const char *const *table, const char *name)
{
	for (size_t i = 0; table[i]; i++)
		if (streq(table[i], name))
			return true;
	return false;
}

/* The view's options whose value is a number, a size or an age, as the command line
 * (--originals-max-file) and -o (originals_max_file; NULL: not taken there) name them, and
 * the field of pw_daemon_opts each sets. */
typedef enum { VALUE_NUMBER, VALUE_SIZE, VALUE_AGE } value_kind;

static const struct number_option {
	int id; /* options.h */
	const char *flag, *name;
	value_kind kind;
	size_t off;
} number_options[] = {
    {PW_OPT_TIMEOUT, "--timeout", "timeout", VALUE_NUMBER, offsetof(pw_daemon_opts, cache_timeout)},
    {PW_OPT_ORIGINALS_KEEP, "--originals-keep", "originals_keep", VALUE_AGE,
     offsetof(pw_daemon_opts, originals_keep_s)},
    {PW_OPT_ORIGINALS_MAX_FILE, "--originals-max-file", "originals_max_file", VALUE_SIZE,
     offsetof(pw_daemon_opts, originals_max_file)},
    {PW_OPT_ORIGINALS_MAX_TOTAL, "--originals-max-total", "originals_max_total", VALUE_SIZE,
     offsetof(pw_daemon_opts, originals_max_total)},
    {PW_OPT_ORIGINALS_MIN_FREE, "--originals-min-free", NULL, VALUE_SIZE,
     offsetof(pw_daemon_opts, originals_min_free)},
};

/* Reads VALUE of V into its field of O, WHAT naming it in an error; with KEEP, a value set
 * already stays. Returns an exit status. */
static int read_number(const struct number_option *v, pw_daemon_opts *o, const char *what,
		       const char *value, bool keep)
{
	void *field = (char *)o + v->off;
	int r;

	switch (v->kind) {
	case VALUE_NUMBER:
		if (keep && *(double *)field)
			return PW_EXIT_OK;
		r = pw_mount_parse_number(what, value, field);
		break;
	case VALUE_SIZE:
		if (keep && *(unsigned long long *)field)
			return PW_EXIT_OK;
		r = pw_mount_parse_size(what, value, field);
		break;
	default:
		if (keep && *(long long *)field)
			return PW_EXIT_OK;
		r = pw_mount_parse_age(what, value, field);
	}
	return r < 0 ? PW_EXIT_USAGE : PW_EXIT_OK;
}

int pw_mount_number_option(pw_daemon_opts *o, int id, const char *value)
{
	for (size_t i = 0; i < ELEMENTSOF(number_options); i++)
		if (number_options[i].id == id)
			return read_number(&number_options[i], o, number_options[i].flag, value,
					   false);
	return PW_EXIT_GO_ON;
}

/* Applies one view option NAME[=VALUE] (NAME with '_') to O, unless the command line set
 * it already (an explicit option wins over -o). Returns an exit status. */
static int apply_view_option(const char *name, const char *value, pw_daemon_opts *o)
{
	char what[80];

	snprintf(what, sizeof(what), "-o %s", name);
	for (size_t i = 0; i < ELEMENTSOF(number_options); i++)
		if (number_options[i].name && streq(name, number_options[i].name))
			return read_number(&number_options[i], o, what, value, true);
	if (streq(name, "mode"))
		o->mode = o->mode ? o->mode : value;
	else if (streq(name, "socket_dir"))
		o->socket_dir = o->socket_dir ? o->socket_dir : value;
	else if (streq(name, "agent_socket"))
		o->agent_socket = o->agent_socket ? o->agent_socket : value;
	else if (streq(name, "state_db"))
		o->state_db = o->state_db ? o->state_db : value;
	else if (streq(name, "no_watch"))
		o->no_watch = true;
	else if (streq(name, "no_audit"))
		o->no_audit = true;
	else if (streq(name, "no_originals"))
		o->no_originals = true;
	else if (streq(name, "log_allowed"))
		o->log_allowed = true;
	return PW_EXIT_OK;
}

/*
 * Splits -o OPTS (modified in place: O keeps pointers into it) into the view's own options,
 * applied to O, fstab's, dropped, and the FUSE options, left in *RET_FUSE (malloc'd,
 * comma-separated). Returns an exit status.
 */
int pw_mount_split_options(char *opts, pw_daemon_opts *o, char **ret_fuse)
{
	char *out = calloc(1, strlen(opts) + 1), *save = NULL;

	if (!out)
		return PW_EXIT_SYSTEM;
	for (char *tok = strtok_r(opts, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		if (eq)
			*eq = '\0';
		if ((!eq && in_table(fstab_only, tok)) || startswith(tok, "x-") ||
		    streq(tok, "comment"))
			continue;
		char name[64];
		snprintf(name, sizeof(name), "%s", tok);
		for (char *c = name; *c; c++)
			if (*c == '-')
				*c = '_';
		if (in_table(eq ? view_valued : view_flags, name)) {
			int r = apply_view_option(name, eq ? eq + 1 : NULL, o);
			if (r) {
				free(out);
				return r;
			}
			continue;
		}
		if (in_table(eq ? view_flags : view_valued, name)) {
			pw_err("mount", "mount option '%s' %s", tok,
			       eq ? "takes no value" : "needs a value (NAME=VALUE)");
			free(out);
			return PW_EXIT_USAGE;
		}
		if (eq)
			*eq = '=';
		if (*out)
			strcat(out, ",");
		strcat(out, tok);
	}
	*ret_fuse = out;
	return PW_EXIT_OK;
}

int pw_print_mount_options(void)
{
	const char *const *flags[] = {view_flags, fuse_flags}, *const * valued[] = {view_valued,
										    fuse_valued};
	for (size_t t = 0; t < ELEMENTSOF(flags); t++) {
		for (size_t i = 0; valued[t][i]; i++)
			printf("%s=\n", valued[t][i]);
		for (size_t i = 0; flags[t][i]; i++)
			printf("%s\n", flags[t][i]);
	}
	return PW_EXIT_OK;
}

int pw_mount_check_fuse_options(const char *opts)
{
	_cleanup_free_ char *copy = strdup(opts);
	char *save = NULL;

	if (!copy)
		return PW_EXIT_SYSTEM;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		const char *const *table = eq ? fuse_valued : fuse_flags;
		bool known = false;

		if (eq)
			*eq = '\0';
		for (size_t i = 0; table[i] && !known; i++)
			known = streq(table[i], tok);
		if (known)
			continue;
		const char *hint = pw_key_near_miss(tok, fuse_flags);
		if (!hint)
			hint = pw_key_near_miss(tok, fuse_valued);
		if (!hint)
			hint = pw_key_near_miss(tok, view_valued);
		if (!hint)
			hint = pw_key_near_miss(tok, view_flags);
		if (hint)
			pw_err("mount", "unknown mount option '%s' in -o (did you mean '%s'?)", tok,
			       hint);
		else
			pw_err("mount",
			       "unknown mount option '%s' in -o (mode=M, allow_other, nonempty, "
			       "ro, default_permissions, ... see piworkfs(1))",
			       tok);
		return PW_EXIT_USAGE;
	}
	return PW_EXIT_OK;
}
