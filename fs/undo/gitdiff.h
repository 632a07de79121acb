/* SPDX-License-Identifier: MIT */
/*
 * git's diff format for changes.diff (fs/undo/changes.c): the extended header lines of one
 * file ("diff --git", new/deleted file mode, old/new mode, similarity and rename from/to),
 * a symbolic link's change as git shows it (the target as the content, without a final
 * newline). A binary file's patch is binpatch.h's. Names are quoted as git quotes them
 * (quote.h).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* git's mode of an object of mode M: 100644, 100755, 120000, 040000; 0 for what git
 * cannot show (a FIFO, a device). */
unsigned pw_git_mode(mode_t m);

/* One side of a file's diff: the path (NULL: none, /dev/null) and git's mode of it. */
typedef struct pw_git_side {
	const char *path;
	unsigned mode;
} pw_git_side;

/* The extended header of a file changed from A to B, SIMILARITY (0..100) used when the
 * paths differ (a rename). Malloc'd, NULL when out of memory. */
char *pw_git_header(const pw_git_side *a, const pw_git_side *b, unsigned similarity);

/* The ---/+++ labels: "a/PATH" or "b/PATH" quoted, or "/dev/null". Malloc'd. */
char *pw_git_label(const char *prefix, const char *path);

/* The hunk of a symbolic link whose target went from TA to TB (either NULL: none), with its
 * ---/+++ lines, as git shows it. Malloc'd. */
char *pw_git_symlink_hunk(const pw_git_side *a, const char *ta, const pw_git_side *b,
			  const char *tb);

/*
 * Is PATH (project-relative) one of git's caches: a file git rewrites when the person only
 * reads (`git status`, `git diff` refresh the index's cached stat data and write it back),
 * so that a rewrite outside the view says nothing of the person's work? Only the index:
 * .git/index, and a linked worktree's or a submodule's (.git/worktrees/NAME/index,
 * .git/modules/.../index). Objects are never rewritten, and refs, HEAD, logs and config
 * change when the person does something: those stay files like any other.
 */
bool pw_git_is_cache(const char *path);
