/* SPDX-License-Identifier: MIT */
/*
 * Path normalization. The policy only ever sees clean project-relative paths: no leading
 * or trailing '/', no empty, '.' or '..' segments. The project root itself is "".
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/*
 * Normalizes IN (LEN bytes, relative to the project root; a leading '/' is taken as the
 * project root too) into OUT, which has room for PW_PATH_MAX bytes.
 * Returns 0, or:
 *   -EINVAL        a NUL byte inside LEN bytes
 *   -EXDEV         '..' climbs above the project root ("outside")
 *   -ENAMETOOLONG  the result exceeds PW_PATH_MAX, or a component exceeds PW_NAME_MAX
 * This is for paths given as input (a command line, the control socket), which are at most
 * PATH_MAX bytes anyway; the view's own paths come from names (fs/) and may be longer.
 * ret_err, when not NULL, receives a static one-line message on failure.
 */
int pw_path_normalize(const char *in, size_t len, char *out, const char **ret_err);

/* Returns true when P (NUL-terminated, shorter than PW_TREE_PATH_MAX) is already in
 * normalized form. */
int pw_path_is_normal(const char *p);

/*
 * Is PATH (absolute) ROOT itself or beneath it? The one "path under root" check: ROOT's
 * trailing slashes are ignored, and /a/bc is not beneath /a/b. Returns the offset in PATH
 * of the part relative to ROOT (after the separating '/'; strlen(PATH) when PATH is ROOT),
 * -EXDEV when it is not beneath, -EINVAL when either is not absolute. No file is looked at:
 * both are compared as written.
 */
long pw_path_beneath(const char *path, const char *root);

/*
 * The same check for project-relative paths, as the store and the originals keep them: is
 * PATH TOP itself or beneath it? TOP "" is the project root, above every path; a NULL PATH is
 * beneath nothing. Both are compared as written (normal paths: no "//", no trailing '/').
 */
bool pw_relpath_beneath(const char *path, const char *top);
