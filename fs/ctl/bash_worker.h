/* SPDX-License-Identifier: MIT */
/*
 * The bash pre-flight out of the daemon's process (least privilege).
 *
 * Under -o allow_other the daemon runs as root, and bash.check hands it shell text from an
 * agent: a tree-sitter parse and a walk of the backing tree to expand globs. That work runs
 * in a short-lived worker instead, one per request, forked by the control thread:
 *
 *   - its inputs (the command, the working directory, the compiled policy) are the ones the
 *     daemon already holds, inherited by the fork: the worker reads nothing from any socket;
 *   - it keeps two descriptors, the project root (O_PATH, opened by the daemon) and the
 *     write end of a pipe; every other descriptor is closed;
 *   - when the daemon is root, it chroots into the project root and drops to the project
 *     owner's uid (nobody when root owns the project) with no supplementary groups, so it
 *     holds no capability and reads the tree with an ordinary user's permissions;
 *   - no_new_privs, not dumpable, and a seccomp filter that allows only what the analysis
 *     needs: memory, reading directories and stat below its descriptors, writing its pipe,
 *     exiting. Anything else kills it;
 *   - it answers one JSON object on the pipe and exits; the daemon parses it with the same
 *     size-capped JSON parser as the control socket, and kills a worker that overruns its
 *     deadline.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "policy.h"

typedef struct pw_bash_job {
	const char *command; /* the shell text (need not be NUL-terminated) */
	size_t len;
	const char *cwd;       /* project-relative working directory ("" the root) */
	int root_fd;	       /* the project root (O_PATH or O_RDONLY directory); not closed */
	const char *root_path; /* absolute paths under it map into the project (the mountpoint) */
	const pw_policy *policy;
	/* The view's active policy when the asker is an agent: the names it hides are absent
	 * to the analysis (pw_bash_hidden_path). NULL: the person asks, nothing is hidden. */
	const pw_policy *hide;
} pw_bash_job;

/*
 * Is PATH (normalized, project-relative; IS_DIR its type), or a directory above it, hidden
 * by HIDE's hide rules? That is what the view shows as absent: a lookup never gets past a
 * hidden directory. False for the root and for HIDE NULL; true for a path too long to
 * check (fails closed).
 */
bool pw_bash_hidden_path(const pw_policy *hide, const char *path, bool is_dir);

/*
 * Runs the analysis of JOB in a worker and decides it with JOB->policy. Returns 0 with
 * *ret_result (the object of pw_bash_result_json), or:
 *   -E2BIG, -EINVAL, -ENOTSUP  the analysis refused the input (pw_bash_analyze)
 *   -ENOMEM
 *   -ETIMEDOUT                 the worker overran its deadline and was killed
 *   -ECHILD                    the worker died or answered something that is not a verdict
 *   -EPERM                     the worker could not drop its privileges (it never ran)
 */
int pw_bash_worker_run(const pw_bash_job *job, json_t **ret_result);
/* The same, but the worker is killed and -ECANCELED returned once CANCEL_FD (-1: none)
 * becomes readable (the control server stops). Blocks the calling thread until then: the
 * control server runs it as a job (server.h), never on its own thread. */
int pw_bash_worker_run_cancellable(const pw_bash_job *job, int cancel_fd, json_t **ret_result);
