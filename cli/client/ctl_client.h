/* SPDX-License-Identifier: MIT */
/*
 * The control socket client used by the CLI (docs/PROTOCOL.md).
 *
 * Finding a live view: the mounts of type fuse.piworkfs in /proc/self/mountinfo; the view
 * containing a path is the one with the longest mountpoint that is a prefix of the path's
 * real path. Its socket is pw_ctl_view_socket(mountpoint, uid). $PIWORKFS_SOCKET, when
 * set and non-empty, overrides discovery (the sandboxed launcher uses it).
 */
#pragma once

#include <limits.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* A live view as listed in mountinfo. */
typedef struct pw_ctl_mount {
	char *mountpoint; /* unescaped absolute path */
	char *source;	  /* the mount's source field (the daemon sets it to the project) */
	long uid;	  /* who mounted it (the user_id= super option), -1 when unknown */
} pw_ctl_mount;

/* Every fuse.piworkfs mount. Returns 0 with a malloc'd array (free with
 * pw_ctl_mounts_free), -errno when mountinfo cannot be read. */
int pw_ctl_list_mounts(pw_ctl_mount **ret, size_t *ret_n);
void pw_ctl_mounts_free(pw_ctl_mount *m, size_t n);

/* The innermost of the N mounts M that contains PATH (a real path), leaving out, with
 * PROJECT_KNOWN, those whose source names no project (not an absolute path): its index, or
 * SIZE_MAX when none does. */
size_t pw_ctl_mount_around(const pw_ctl_mount *m, size_t n, const char *path, bool project_known);

/*
 * Finds the live view containing PATH (NULL: the current directory), else the live view of
 * the project PATH lies in (from the backing directory), or the one named by
 * $PIWORKFS_SOCKET. On success writes the socket path to *ret_socket and, when ret_project
 * is not NULL, the project's real path (asked from the daemon with `status`; NULL if the
 * daemon does not answer it) and returns 0. Returns -ENOENT when PATH is not inside a view
 * (or the override's socket does not exist), -errno otherwise. Both strings are malloc'd.
 *
 * For check, allowed and modes: when this returns 0, answer for the live view through
 * pw_ctl_call(); otherwise fall back to the offline path.
 */
int pw_ctl_find_view(const char *path, char **ret_socket, char **ret_project);

/* Same, also returning the mountpoint (NULL when found through $PIWORKFS_SOCKET). */
int pw_ctl_find_view_full(const char *path, char **ret_socket, char **ret_mountpoint);

/*
 * The mode of the live view containing CWD (NULL: the current directory), else, when
 * PROJECT is given and $PIWORKFS_SOCKET is not set, of a live view of PROJECT (the backing
 * directory's path). Returns 0 with a malloc'd *ret_mode, -ENOENT when there is none (or
 * its daemon is gone), -EIO, -EBADMSG or -errno. project.c's pw_cli_live_mode over it.
 */
int pw_ctl_live_mode(const char *cwd, const char *project, char **ret_mode);
/* Calls METHOD(PARAMS, stolen) on the live view pw_ctl_live_mode asks. Returns as
 * pw_ctl_call_at_data, and -ENOENT when there is none (or its daemon is gone). */
int pw_ctl_live_call(const char *cwd, const char *project, const char *method, json_t *params,
		     json_t **ret_result, int *ret_code, char **ret_message, json_t **ret_data);
/* The lane (`mount --only` globs) of the live view around CWD (NULL: the current
 * directory), as a new JSON array; [] when no view answers. 0, or -EIO/-ENOMEM/-errno.
 * project.c's pw_cli_live_lane over it. */
int pw_ctl_live_lane(const char *cwd, json_t **ret);

/*
 * The control socket of the view mounted at MOUNTPOINT by UID (-1: unknown): the first of
 * the places a daemon puts it (this environment's default dir, where a daemon mounted with
 * --socket-dir leaves a link to its socket, then /tmp/piworkfs-UID, /run/user/UID/piworkfs,
 * /run/piworkfs for root) that holds a socket, else the default one. Returns 0 with a
 * malloc'd *ret, -errno.
 */
int pw_ctl_view_socket(const char *mountpoint, long uid, char **ret);

typedef struct pw_ctl_conn pw_ctl_conn;

/* Connects to SOCKET (with a timeout of TIMEOUT_MS for every later read; 0: 10 s;
 * PW_CTL_WAIT_ALL: none). Returns 0, -ENOENT/-ECONNREFUSED (no daemon), -errno. */
int pw_ctl_connect(const char *socket, unsigned timeout_ms, pw_ctl_conn **ret);
/* A call's timeout that waits as long as the daemon works: for the person's calls whose
 * work grows with the project (undo, redo, diff, changes), which the daemon runs on a
 * thread of its own. A daemon that dies closes the socket: the call ends with an error. */
#define PW_CTL_WAIT_ALL UINT_MAX
void pw_ctl_close(pw_ctl_conn *c); /* accepts NULL */
/* The connection's socket, to poll for notifications (then read them with
 * pw_ctl_read_notification until it times out: lines may wait in its buffer). */
int pw_ctl_fd(const pw_ctl_conn *c);

/*
 * Calls METHOD with PARAMS (stolen; NULL: none) and waits for its reply, skipping
 * notifications. Returns 0 with *ret_result (a new reference) when the daemon answered a
 * result; -EREMOTE when it answered an error: then *ret_code and *ret_message (malloc'd)
 * hold it (each may be NULL); -ETIMEDOUT, -ECONNRESET, -EBADMSG, -errno otherwise.
 */
int pw_ctl_call(pw_ctl_conn *c, const char *method, json_t *params, json_t **ret_result,
		int *ret_code, char **ret_message);
/* pw_ctl_call, and for an error also its data in *RET_DATA (a new reference, NULL when the
 * error has none; RET_DATA may be NULL): an unknown mode's error lists the view's modes, so
 * the client needs no second call to say which there are. */
int pw_ctl_call_data(pw_ctl_conn *c, const char *method, json_t *params, json_t **ret_result,
		     int *ret_code, char **ret_message, json_t **ret_data);

/* Reads the next notification (after `subscribe`). Returns 0 with *ret_method (malloc'd) and
 * *ret_params (new reference), -ETIMEDOUT after TIMEOUT_MS (-1: wait forever), -errno. */
int pw_ctl_read_notification(pw_ctl_conn *c, int timeout_ms, char **ret_method,
			     json_t **ret_params);

/* One-shot helper: connect to SOCKET, call, close. Errors as pw_ctl_connect/pw_ctl_call. */
int pw_ctl_call_socket(const char *socket, const char *method, json_t *params, json_t **ret_result,
		       int *ret_code, char **ret_message);
int pw_ctl_call_socket_data(const char *socket, const char *method, json_t *params,
			    json_t **ret_result, int *ret_code, char **ret_message,
			    json_t **ret_data);

/* pw_ctl_call_socket waiting up to TIMEOUT_MS (pw_ctl_connect's; 0: the usual 10 s). */
int pw_ctl_call_socket_timed(const char *socket, unsigned timeout_ms, const char *method,
			     json_t *params, json_t **ret_result, int *ret_code,
			     char **ret_message);

/* One-shot helper: find the view for PATH, connect, call, close. Errors as above, plus
 * -ENOENT when PATH is not inside a view. */
int pw_ctl_call_at(const char *path, const char *method, json_t *params, json_t **ret_result,
		   int *ret_code, char **ret_message);
int pw_ctl_call_at_data(const char *path, const char *method, json_t *params, json_t **ret_result,
			int *ret_code, char **ret_message, json_t **ret_data);
/* pw_ctl_call_at_data waiting for the answer up to TIMEOUT_MS (0: 10 s; PW_CTL_WAIT_ALL). */
int pw_ctl_call_at_timed(const char *path, unsigned timeout_ms, const char *method, json_t *params,
			 json_t **ret_result, int *ret_code, char **ret_message, json_t **ret_data);
