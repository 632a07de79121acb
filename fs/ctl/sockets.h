/* SPDX-License-Identifier: MIT */
/*
 * Where a view's control sockets live: one of fs/'s public headers, what the CLI and
 * `piworkfs run` need to find or make a view's socket without the server (server.h).
 * Implemented in sockets.c.
 */
#pragma once

/*
 * The default socket directory (malloc'd): $XDG_RUNTIME_DIR/piworkfs, or /run/piworkfs for
 * root without XDG_RUNTIME_DIR, or pw_ctl_fallback_dir for other users without it.
 * Returns 0 or -ENOMEM.
 */
int pw_ctl_default_dir(char **ret);

/* DIR, or the default directory when DIR is NULL, as a malloc'd copy in *RET: the one place a
 * NULL socket directory is read as the default. Returns 0 or -ENOMEM. */
int pw_ctl_dir_or_default(const char *dir, char **ret);

/* /tmp/piworkfs-UID (malloc'd): where a user without XDG_RUNTIME_DIR keeps sockets. */
int pw_ctl_fallback_dir(char **ret);

/*
 * Makes DIR (and its missing parents) a private directory: created 0700, and refused with
 * -EPERM when it exists but is not a directory owned by us (it is then chmod'ed to 0700 if
 * anyone else had access). Returns 0 or -errno. Shared with `piworkfs run`.
 */
int pw_ctl_private_dir(const char *dir);

/*
 * The socket path for MOUNTPOINT (an absolute path) in DIR (NULL: the default dir):
 * DIR/<sanitized basename, at most 24 bytes>-<16 hex digits of a 64-bit FNV-1a hash of the
 * mountpoint>.sock. Returns 0 with a malloc'd *ret, -ENOENT (no default dir),
 * -ENAMETOOLONG (does not fit sun_path), -ENOMEM.
 */
int pw_ctl_socket_path(const char *dir, const char *mountpoint, char **ret);

/*
 * Whether PATH can be the agent socket of `mount --agent-socket PATH` for a view whose
 * operator socket lives in OPERATOR_DIR (docs/DEPLOY.md, "A pod"): an absolute path that fits
 * sun_path, nothing but a socket there now, and a directory other than OPERATOR_DIR (compared
 * by device and inode): the volume that shows the agent its socket must not show it the
 * operator socket, whatever the agent's uid. The directory may be missing (the daemon makes
 * it, 0700); an existing one is left as it is. Returns 0, or -errno with *ret_msg (malloc'd)
 * saying what is wrong: -EINVAL, -ENAMETOOLONG, -ENOTDIR, -EEXIST, -ENOMEM (no message).
 */
int pw_ctl_agent_socket_check(const char *path, const char *operator_dir, char **ret_msg);
