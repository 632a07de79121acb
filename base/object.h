/* SPDX-License-Identifier: MIT */
/*
 * A file found on disk: its status and its birth time. A deleted file's inode number may be
 * handed out again (ext4 gives it to the very next file made), so (device, inode number)
 * alone can name two files one after the other; the birth time tells them apart where the
 * filesystem keeps one (ext4, xfs, btrfs, tmpfs do; 0 where it does not).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

typedef struct pw_object {
	struct stat st;
	int64_t birth_ns; /* nanoseconds since the epoch, 0 if unknown */
} pw_object;

/* fstatat(DIRFD, NAME, &ret->st, FLAGS) with the birth time, in one statx. FLAGS as
 * fstatat's (AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH). Returns 0, or -errno. */
int pw_object_at(int dirfd, const char *name, int flags, pw_object *ret);

/* Whether the births A and B (pw_object.birth_ns) can be of one file: unknown matches any. */
static inline bool pw_birth_matches(int64_t a, int64_t b)
{
	return !a || !b || a == b;
}
