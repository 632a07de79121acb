/* SPDX-License-Identifier: MIT */
/*
 * The node table (fs/inode.c), built from its own source: what the kernel's FORGETs free.
 *
 *   root/
 *     d/          a directory the view looked up once
 *       a, b      two names of one file (a hard link within d)
 */
#include <criterion/criterion.h>
#include <sys/stat.h>

#include "fs_internal.h"
#include "inode.h"

static pw_object obj(ino_t ino, mode_t mode, nlink_t nlink)
{
	return (pw_object){.st = {.st_dev = 7, .st_ino = ino, .st_mode = mode, .st_nlink = nlink}};
}

/* issue 44 (found by tests/mount/test_undo_property.py): freeing a file's node freed its
 * directory twice over, once per name, when both names were in that directory: the loop
 * went on with the directory its second name's recursion had freed (ASan: use after free) */
Test(inode, forgetting_a_file_with_two_names_in_one_directory_frees_each_node_once)
{
	pw_fs fs = {0};
	cr_assert_eq(pw_inode_table_init(&fs), 0);
	pw_inode_set_root(&fs, 7, 1);
	pw_object dir = obj(10, S_IFDIR | 0755, 2), file = obj(11, S_IFREG | 0644, 2);
	pw_inode *d = pw_inode_learn(&fs, pw_inode_root(&fs), "d", &dir, false, NULL);
	pw_inode *a = pw_inode_learn(&fs, d, "a", &file, false, NULL);
	pw_inode *b = pw_inode_learn(&fs, d, "b", &file, false, NULL);
	cr_assert(d && a && b);
	cr_assert_eq(a, b, "one node for both names");
	size_t known = pw_inode_count(&fs);
	pw_inode_forget(&fs, d, 1); /* d still has children: it stays */
	cr_assert_eq(pw_inode_count(&fs), known);
	pw_inode_forget(&fs, a, 2); /* the file goes, then d with it */
	cr_assert_eq(pw_inode_count(&fs), known - 2);
	pw_inode_table_free(&fs);
}
