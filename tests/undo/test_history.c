/* SPDX-License-Identifier: MIT */
/*
 * The history model of the changes methods (fs/undo/history.h), without a mount: rows and
 * change sets drawn by hand, as pw_undo_hist_load would read them from the store, and the
 * answers the methods build on (where an object is now, what a change set left at a path,
 * what a change amounts to, the listing of a change set, a path with no change). Every
 * row here has a later row at its path, so nothing reads the tree (the tree's side is the
 * mount tests': mount-undo, mount-changes_record, mount-diff_apply).
 *
 * The drawn history: change sets 1 and 2 of one view.
 *
 *   cs 1: keep a.txt (was "one", H1)      -- a.txt modified
 *         keep new.txt (absent)           -- new.txt created
 *         keep gone.txt (was H3)          -- gone.txt deleted
 *         keep tmp (absent)               -- tmp made ...
 *         move dir -> moved (a directory)
 *   cs 2: keep a.txt (was "two", H2)      -- what cs 1 left at a.txt
 *         keep new.txt (present, H4)      -- what cs 1 left at new.txt
 *         keep gone.txt (absent)          -- cs 1 left nothing at gone.txt
 *         keep tmp (absent)               -- ... and removed within cs 1: no change
 *         keep moved/f (present, H5)      -- cs 1's moved/f, was dir/f
 *         keep moved (a directory)        -- what cs 1's rename left
 */
#include <criterion/criterion.h>
#include <string.h>

#include "proto.h"
#include "undo/history.h"

#define H(c)                                                                                       \
	{                                                                                          \
		c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c,   \
		    c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c,  \
		    c, c, c, c, c, c, c, c, c, 0                                                   \
	}

static crow rows[16];
static cset sets[2];
static pw_undo_fail fail;
static ctx x;

static crow file_row(int64_t id, int64_t cs, const char *path, bool present, char hash,
		     uint64_t size)
{
	crow r = {.id = id, .cs = cs, .path = (char *)path, .selected = true};
	r.o.present = present;
	if (present) {
		r.o.mode = S_IFREG | 0644;
		r.o.size = size;
		r.o.mtime_ns = 1000;
		memcpy(r.o.blob, (char[PW_SHA256_HEX])H(hash), PW_SHA256_HEX);
	}
	return r;
}

static void draw(void)
{
	size_t n = 0;
	rows[n++] = file_row(1, 1, "a.txt", true, '1', 3);
	rows[n++] = file_row(2, 1, "new.txt", false, 0, 0);
	rows[n++] = file_row(3, 1, "gone.txt", true, '3', 4);
	rows[n++] = file_row(4, 1, "tmp", false, 0, 0);
	rows[n++] = (crow){
	    .id = 5, .cs = 1, .path = "dir", .path2 = "moved", .move = true, .selected = true};
	rows[n++] = file_row(6, 2, "a.txt", true, '2', 3);
	rows[n++] = file_row(7, 2, "new.txt", true, '4', 2);
	rows[n++] = file_row(8, 2, "gone.txt", false, 0, 0);
	rows[n++] = file_row(9, 2, "tmp", false, 0, 0);
	rows[n++] = file_row(10, 2, "moved/f", true, '5', 1);
	rows[n] = file_row(11, 2, "moved", true, 0, 0);
	rows[n].o.mode = S_IFDIR | 0755;
	rows[n++].o.blob[0] = '\0';
	sets[0] = (cset){.id = 1, .reason = "mount"};
	sets[1] = (cset){.id = 2, .reason = "switch"};
	fail = (pw_undo_fail){0};
	x = (ctx){.root = -1,
		  .rows = rows,
		  .n_rows = n,
		  .sets = sets,
		  .n_sets = 2,
		  .fail = &fail,
		  .min_cs = 1,
		  .end_cs = INT64_MAX};
}

static void forget(void)
{
	free(fail.message);
}

TestSuite(history, .init = draw, .fini = forget);

Test(history, current_path_follows_the_renames_after_the_row)
{
	char out[PW_PATH_MAX];
	pw_undo_hist_current_path(&x, 0, "dir/f", out);
	cr_assert_str_eq(out, "moved/f", "a path under a directory renamed later moves with it");
	pw_undo_hist_current_path(&x, 4, "dir/f", out);
	cr_assert_str_eq(out, "dir/f", "only the renames after the row count");
	pw_undo_hist_current_path(&x, 0, "dirx/f", out);
	cr_assert_str_eq(out, "dirx/f", "a name that only begins like the directory stays");
}

Test(history, an_exchange_moves_both_ways)
{
	rows[4].exchange = true;
	char out[PW_PATH_MAX];
	pw_undo_hist_current_path(&x, 0, "moved/g", out);
	cr_assert_str_eq(out, "dir/g");
	pw_undo_hist_current_path(&x, 0, "dir/g", out);
	cr_assert_str_eq(out, "moved/g");
}

Test(history, after_of_reads_what_a_set_left_from_the_next_sets_row)
{
	after a;
	pw_undo_hist_after_of(&x, 0, "a.txt", 1, &a);
	cr_assert_eq(a.meta, &rows[5].o, "the first later row at the path holds what cs 1 left");
	cr_assert_eq(a.content, &rows[5].o);
	cr_assert_str_eq(a.path, "a.txt");
}

Test(history, after_of_takes_content_from_the_row_that_kept_it)
{
	/* cs 2 only changed a.txt's mode (no content kept): its content is the next row's */
	rows[5].o.blob[0] = '\0';
	rows[6] = file_row(7, 2, "a.txt", true, '7', 3);
	after a;
	pw_undo_hist_after_of(&x, 0, "a.txt", 1, &a);
	cr_assert_eq(a.meta, &rows[5].o, "the metadata: the first later row");
	cr_assert_eq(a.content, &rows[6].o, "the content: the first later row that kept it");
}

Test(history, after_of_follows_a_later_rename_to_the_row_at_the_new_name)
{
	/* dir/f recorded in cs 1 before the rename: cs 2 recorded it as moved/f */
	rows[0] = file_row(1, 1, "dir/f", true, '1', 1);
	after a;
	pw_undo_hist_after_of(&x, 0, "dir/f", 1, &a);
	cr_assert_str_eq(a.path, "moved/f", "where cs 1 left it");
	cr_assert_eq(a.meta, &rows[9].o);
}

Test(history, classify_tells_each_kind_from_the_record)
{
	static const struct {
		size_t row;
		const char *kind;
	} want[] = {{0, "modified"}, {1, "created"}, {2, "deleted"}, {3, NULL}};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		after a;
		pw_undo_hist_after_of(&x, want[i].row, rows[want[i].row].path, 1, &a);
		const char *k = pw_undo_hist_classify(&x, &rows[want[i].row], &a);
		if (want[i].kind)
			cr_assert(k && !strcmp(k, want[i].kind), "%s: %s, not %s",
				  rows[want[i].row].path, want[i].kind, k ? k : "no change");
		else
			cr_assert_null(k, "%s: made and removed within the set: no change, not %s",
				       rows[want[i].row].path, k);
	}
}

Test(history, classify_a_mode_change_alone_as_metadata)
{
	rows[5] = file_row(6, 2, "a.txt", true, '1', 3);
	rows[5].o.mode = S_IFREG | 0755;
	after a;
	pw_undo_hist_after_of(&x, 0, "a.txt", 1, &a);
	cr_assert_str_eq(pw_undo_hist_classify(&x, &rows[0], &a), "metadata");
	rows[5].o.mode = S_IFREG | 0644;
	cr_assert_null(pw_undo_hist_classify(&x, &rows[0], &a), "the same object: no change");
}

Test(history, the_listing_of_a_set_is_its_net_effect_newest_first)
{
	json_t *changes = json_array();
	size_t shown = 0;
	bool truncated = false;
	x.end_cs = 1;
	for (size_t i = 5; i < x.n_rows; i++)
		rows[i].selected = false; /* cs 1 only, as --change-set 1 selects */
	pw_undo_hist_set_listing(&x, &sets[0], changes, &shown, &truncated, false);
	char *got = json_dumps(changes, JSON_COMPACT);
	/* tmp: made and removed, no line; the rename's line after (newest first) the others' */
	const char *paths[] = {"moved", "gone.txt", "new.txt", "a.txt"};
	const char *kinds[] = {"renamed", "deleted", "created", "modified"};
	cr_assert_eq(json_array_size(changes), 4, "%s", got);
	for (size_t i = 0; i < 4; i++) {
		json_t *c = json_array_get(changes, i);
		const char *p = json_string_value(json_object_get(c, "path"));
		const char *k = json_string_value(json_object_get(c, "kind"));
		if (i == 0)
			p = json_string_value(json_object_get(c, "to"));
		cr_assert(p && !strcmp(p, paths[i]), "%zu: %s in %s", i, paths[i], got);
		cr_assert(k && !strcmp(k, kinds[i]), "%zu: %s in %s", i, kinds[i], got);
	}
	cr_assert_eq(shown, 4);
	cr_assert_not(truncated);
	free(got);
	json_decref(changes);
}

Test(history, a_path_without_a_change_in_scope_fails_naming_it)
{
	char *paths[] = {"src"};
	x.paths = paths;
	x.n_paths = 1;
	int r = pw_undo_hist_check_paths_changed(&x, true);
	cr_assert_eq(r, -ENOENT);
	cr_assert_eq(fail.code, PW_RPC_NO_CHANGE);
	cr_assert_str_eq(fail.message, "src: no recorded change left to undo");
	paths[0] = "a.txt";
	free(fail.message);
	fail = (pw_undo_fail){0};
	cr_assert_eq(pw_undo_hist_check_paths_changed(&x, false), 0);
	x.paths = NULL;
	x.n_paths = 0;
}
