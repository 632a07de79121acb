/* SPDX-License-Identifier: MIT */
/*
 * git's diff format as changes.diff writes it (fs/undo/gitdiff.h): the bytes `git apply`
 * reads, so `git apply -R` of a diff puts a change back. Each expected text is what git
 * itself prints for the same change (git diff --cached -M of a repository's index).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "undo/gitdiff.h"

Test(gitdiff, modes_as_git_names_them)
{
	cr_assert_eq(pw_git_mode(S_IFREG | 0644), 0100644);
	cr_assert_eq(pw_git_mode(S_IFREG | 0700), 0100755, "any user x bit: executable");
	cr_assert_eq(pw_git_mode(S_IFLNK | 0777), 0120000);
	cr_assert_eq(pw_git_mode(S_IFDIR | 0755), 0040000);
	cr_assert_eq(pw_git_mode(S_IFIFO | 0644), 0, "nothing git can show");
}

static void header_is(const pw_git_side *a, const pw_git_side *b, unsigned sim, const char *want)
{
	char *h = pw_git_header(a, b, sim);
	cr_assert_not_null(h);
	cr_assert_str_eq(h, want);
	free(h);
}

Test(gitdiff, a_new_file_a_deleted_one_and_a_mode_change)
{
	header_is(&(pw_git_side){NULL, 0}, &(pw_git_side){"src/a.c", 0100644}, 100,
		  "diff --git a/src/a.c b/src/a.c\nnew file mode 100644\n");
	header_is(&(pw_git_side){"src/a.c", 0100755}, &(pw_git_side){NULL, 0}, 100,
		  "diff --git a/src/a.c b/src/a.c\ndeleted file mode 100755\n");
	header_is(&(pw_git_side){"run.sh", 0100644}, &(pw_git_side){"run.sh", 0100755}, 100,
		  "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n");
	header_is(&(pw_git_side){"same", 0100644}, &(pw_git_side){"same", 0100644}, 100,
		  "diff --git a/same b/same\n");
}

Test(gitdiff, a_rename_with_its_similarity)
{
	header_is(&(pw_git_side){"old name.txt", 0100644}, &(pw_git_side){"new.txt", 0100644}, 87,
		  "diff --git a/old name.txt b/new.txt\nsimilarity index 87%\n"
		  "rename from old name.txt\nrename to new.txt\n");
	/* a name git quotes: a control character, escaped C-style */
	header_is(&(pw_git_side){"old name.txt", 0100644}, &(pw_git_side){"tab\tname", 0100644}, 87,
		  "diff --git a/old name.txt \"b/tab\\tname\"\nsimilarity index 87%\n"
		  "rename from old name.txt\nrename to \"tab\\tname\"\n");
}

Test(gitdiff, labels_and_a_symlinks_hunk)
{
	char *l = pw_git_label("a/", NULL);
	cr_assert_str_eq(l, "/dev/null");
	free(l);
	char *h = pw_git_symlink_hunk(&(pw_git_side){"ln", 0120000}, "target1",
				      &(pw_git_side){"ln", 0120000}, "target2");
	cr_assert_str_eq(h, "--- a/ln\n+++ b/ln\n@@ -1 +1 @@\n-target1\n"
			    "\\ No newline at end of file\n+target2\n"
			    "\\ No newline at end of file\n");
	free(h);
	h = pw_git_symlink_hunk(&(pw_git_side){NULL, 0}, NULL, &(pw_git_side){"ln", 0120000}, "t");
	cr_assert_str_eq(h, "--- /dev/null\n+++ b/ln\n@@ -0,0 +1 @@\n+t\n"
			    "\\ No newline at end of file\n");
	free(h);
}

Test(gitdiff, only_the_index_is_a_cache)
{
	cr_assert(pw_git_is_cache(".git/index"));
	cr_assert(pw_git_is_cache("sub/.git/index"), "a nested repository's own");
	cr_assert(pw_git_is_cache(".git/worktrees/w/index"));
	cr_assert_not(pw_git_is_cache(".git/HEAD"));
	cr_assert_not(pw_git_is_cache(".git/refs/heads/main"));
	cr_assert_not(pw_git_is_cache("index"));
	cr_assert_not(pw_git_is_cache("src/.git-index"));
}
