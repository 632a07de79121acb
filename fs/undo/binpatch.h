/* SPDX-License-Identifier: MIT */
/*
 * git's binary patch (binpatch.c), for changes.diff: what `git diff --binary` writes for a
 * file whose content is not text, so that `git apply` and `git apply -R` of the diff put it
 * back byte for byte (a "Binary files ... differ" line, git's default, makes git apply
 * refuse the whole patch).
 *
 *   index <old>..<new>[ <mode>]      git's blob ids of both sides, in full (git apply
 *   GIT binary patch                 refuses a binary patch without them)
 *   literal <size>                   the new content: zlib-deflated, in git's base85, in
 *   <lines>                          lines of at most 52 bytes
 *
 *   literal <size>                   the old content, the same way (what -R applies)
 *   <lines>
 *
 * A side that does not exist (a created or deleted file) has the null id and an empty
 * literal. Only "literal" hunks: git's "delta" is optional, and a literal is always right.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* git's object id of a blob (SHA-1 of "blob <size>\0" and the content): 40 hex digits. */
#define PW_GIT_OID_HEX 41

/*
 * The binary patch from the content read from AFD to that of BFD (either -1: none, a
 * created or deleted file; read from offset 0), MODE the file's git mode when both sides
 * have the same (0: leave it out of the index line). At most ROOM bytes: larger, NULL with
 * *RET_TOO_BIG. Malloc'd; NULL also when out of memory or a read fails.
 */
char *pw_git_binary_patch(int afd, int bfd, unsigned mode, size_t room, bool *ret_too_big);

/* Does the content of FD need a binary patch: a NUL byte, or bytes that are not UTF-8? git
 * itself looks for a NUL in the first 8000 bytes only, but the diff travels as a JSON
 * string (UTF-8, no NUL): a text hunk of such bytes could not arrive whole, and a binary
 * patch applies the same. Reads FD from offset 0. */
bool pw_git_needs_binary(int fd);
