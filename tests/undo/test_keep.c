/* SPDX-License-Identifier: MIT */
/*
 * The keep handle (fs/undo/keep.c, keep.h, undo.h) without a mount: change sets begun by a
 * mount, a checkpoint and a switch; what the hooks record, before each change through the
 * view, for a file and a directory made, written, renamed and removed, read back from the
 * real store (a SQLite file and its blobs in a temp dir); sets that end when the mode writes
 * nothing; and failures that answer -errno and lose nothing. The tree and the harness are
 * undo_harness.h's.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "req.h"
#include "undo_harness.h"

#define MAX_ROWS 64

static void setup(void)
{
	uh_setup("keep", "build");
}

TestSuite(keep, .init = setup, .fini = uh_teardown);

static void assert_blob(const uh_row *r, const char *text)
{
	cr_assert(r->present, "%s: recorded as present", r->path);
	cr_assert_neq(r->blob[0], '\0', "%s: its content is kept", r->path);
	char *got = uh_blob(r->blob);
	cr_assert_str_eq(got, text, "%s: the blob holds the bytes before the change", r->path);
	free(got);
}

/* The row of PATH in change set CS: a regular file OP changed, whose bytes before were BYTES. */
static void assert_kept_file(int64_t cs, const char *path, const char *op, const char *bytes)
{
	uh_row rows[MAX_ROWS];
	size_t n = uh_rows(rows, MAX_ROWS);
	const uh_row *r = uh_row_at(rows, n, cs, path);
	cr_assert_not_null(r, "%s: a row in change set %lld", path, (long long)cs);
	cr_assert_str_eq(r->op, op);
	cr_assert(S_ISREG(r->mode));
	assert_blob(r, bytes);
}

Test(keep, a_mount_begins_a_change_set_and_begin_starts_the_next)
{
	int64_t first = pw_undo_keep_current(W.k);
	cr_assert_gt(first, 0, "the mount began a change set");
	uh_write("README.md", "changed\n");
	int64_t id = 0;
	cr_assert_eq(pw_undo_keep_begin(W.k, "checkpoint", "start", &id), 0);
	cr_assert_gt(id, first);
	cr_assert_eq(pw_undo_keep_current(W.k), id, "the new set is the current one");
	cr_assert_str_eq(pw_undo_keep_project(W.k), W.project);
	cr_assert_str_eq(pw_undo_keep_mountpoint(W.k), W.mountpoint);
	uh_set sets[8];
	size_t n = uh_sets(sets, 8);
	cr_assert_eq(n, 2);
	cr_assert_eq(sets[0].id, first);
	cr_assert_str_eq(sets[0].reason, "mount");
	cr_assert_str_eq(sets[0].mode, "build");
	cr_assert_eq(sets[1].id, id);
	cr_assert_str_eq(sets[1].reason, "checkpoint");
	cr_assert_str_eq(sets[1].name, "start");
	cr_assert_str_eq(sets[1].mode, "build", "a set names the mode it began in");
}

/* issue 27: a storm of switches without changes leaves nothing behind, but a checkpoint the
 * person asked for stays, empty or not */
Test(keep, an_empty_unnamed_set_goes_when_the_next_begins_a_checkpoint_stays)
{
	for (int i = 0; i < 3; i++)
		uh_mode("build", "switch", true);
	int64_t id = 0;
	cr_assert_eq(pw_undo_keep_begin(W.k, "checkpoint", NULL, &id), 0);
	uh_mode("build", "switch", true);
	uh_set sets[8];
	size_t n = uh_sets(sets, 8);
	cr_assert_eq(n, 2, "the empty mount and switch sets went: %zu sets", n);
	cr_assert_eq(sets[0].id, id);
	cr_assert_str_eq(sets[0].reason, "checkpoint");
	cr_assert_str_eq(sets[1].reason, "switch", "the current set stays until the next");
}

Test(keep, a_created_file_is_recorded_as_absent_with_its_parent_for_its_times)
{
	int64_t cs = pw_undo_keep_current(W.k);
	uh_create("src/new.c", "new\n");
	uh_write("src/new.c", "newer\n"); /* a file the set made: nothing more to keep */
	uh_row rows[MAX_ROWS];
	size_t n = uh_rows(rows, MAX_ROWS);
	const uh_row *r = uh_row_at(rows, n, cs, "src/new.c");
	cr_assert_not_null(r, "the create was recorded");
	cr_assert_not(r->present, "nothing was there: undo removes it");
	cr_assert_str_eq(r->op, "create");
	bool parent = false;
	for (size_t i = 0; i < n; i++)
		parent = parent || (rows[i].implicit && !strcmp(rows[i].path, "src") &&
				    rows[i].present && S_ISDIR(rows[i].mode));
	cr_assert(parent, "the parent directory is kept for its times");
	cr_assert_eq(n, 2, "one row for the name, one for its parent, nothing for the write");
}

Test(keep, a_write_keeps_the_original_bytes_once_per_change_set)
{
	int64_t cs = pw_undo_keep_current(W.k);
	uh_write("README.md", "changed\n");
	uh_write("README.md", "changed again\n");
	uh_row rows[MAX_ROWS];
	cr_assert_eq(uh_rows(rows, MAX_ROWS), 1, "one row per path per change set");
	assert_kept_file(cs, "README.md", "open-write", "# demo\n");
}

Test(keep, a_rename_over_a_file_is_a_move_that_keeps_what_the_destination_lost)
{
	int64_t cs = pw_undo_keep_current(W.k);
	struct stat st;
	char p[512];
	snprintf(p, sizeof(p), "%s/src/x.c", W.project);
	cr_assert_eq(stat(p, &st), 0);
	uh_rename("src/x.c", "README.md");
	uh_row rows[MAX_ROWS];
	size_t n = uh_rows(rows, MAX_ROWS);
	const uh_row *m = uh_row_at(rows, n, cs, "src/x.c");
	cr_assert_not_null(m);
	cr_assert(m->move, "a rename is recorded as the move itself");
	cr_assert_not(m->exchange);
	cr_assert_str_eq(m->path2, "README.md");
	cr_assert_eq(m->src_ino, (uint64_t)st.st_ino, "the object moved");
	assert_blob(m, "# demo\n");
	cr_assert_null(uh_row_at(rows, n, cs, "README.md"), "no second row for the destination");
}

Test(keep, an_unlinked_file_is_kept_whole)
{
	int64_t cs = pw_undo_keep_current(W.k);
	uh_unlink("docs/arch.md");
	cr_assert_not(uh_exists("docs/arch.md"));
	assert_kept_file(cs, "docs/arch.md", "unlink", "one\ntwo\n");
}

Test(keep, a_directory_made_is_absent_and_one_removed_comes_after_its_contents)
{
	int64_t cs = pw_undo_keep_current(W.k);
	uh_mkdir("made");
	uh_unlink("old/f.txt");
	uh_rmdir("old");
	uh_row rows[MAX_ROWS];
	size_t n = uh_rows(rows, MAX_ROWS);
	const uh_row *made = uh_row_at(rows, n, cs, "made");
	cr_assert_not_null(made);
	cr_assert_not(made->present);
	cr_assert_str_eq(made->op, "mkdir");
	const uh_row *f = uh_row_at(rows, n, cs, "old/f.txt");
	const uh_row *old = uh_row_at(rows, n, cs, "old");
	cr_assert(f && old);
	assert_blob(f, "f\n");
	cr_assert(old->present && S_ISDIR(old->mode), "the directory as it was");
	cr_assert_str_eq(old->op, "rmdir");
	/* undo replays backwards: the directory must be back before what goes back into it */
	cr_assert_gt(old->id, f->id, "the removal's row comes after the rows beneath it");
}

Test(keep, a_directory_renamed_is_one_move_for_its_whole_tree)
{
	int64_t cs = pw_undo_keep_current(W.k);
	uh_rename("old", "new");
	uh_row rows[MAX_ROWS];
	size_t n = uh_rows(rows, MAX_ROWS);
	const uh_row *m = uh_row_at(rows, n, cs, "old");
	cr_assert_not_null(m);
	cr_assert(m->move);
	cr_assert_str_eq(m->path2, "new");
	cr_assert_not(m->present, "the destination held nothing");
	for (size_t i = 0; i < n; i++)
		cr_assert(rows[i].implicit || rows[i].move, "%s: nothing copied beneath it",
			  rows[i].path);
	char *moved = uh_read("new/f.txt");
	cr_assert_str_eq(moved, "f\n", "its contents moved with it");
	free(moved);
}

Test(keep, a_new_change_set_records_a_path_again_as_the_last_one_left_it)
{
	int64_t a = pw_undo_keep_current(W.k);
	uh_write("README.md", "v1\n");
	int64_t b = 0;
	cr_assert_eq(pw_undo_keep_begin(W.k, "checkpoint", NULL, &b), 0);
	uh_write("README.md", "v2\n");
	uh_row rows[MAX_ROWS];
	size_t n = uh_rows(rows, MAX_ROWS);
	const uh_row *ra = uh_row_at(rows, n, a, "README.md");
	const uh_row *rb = uh_row_at(rows, n, b, "README.md");
	cr_assert(ra && rb, "one row in each set");
	assert_blob(ra, "# demo\n");
	assert_blob(rb, "v1\n");
}

Test(keep, a_mode_that_writes_nothing_ends_keeping_and_a_switch_back_begins_a_set)
{
	int64_t a = pw_undo_keep_current(W.k);
	uh_write("src/x.c", "int y;\n"); /* the mount's set holds a change: it stays */
	uh_mode("review", "switch", true);
	cr_assert_eq(pw_undo_keep_current(W.k), a, "no set begins in a mode that writes nothing");
	/* the policy would refuse the write; the hook itself keeps nothing either */
	uh_write("README.md", "in review\n");
	uh_row rows[MAX_ROWS];
	cr_assert_eq(uh_rows(rows, MAX_ROWS), 1, "nothing kept while the mode writes nothing");
	uh_mode("off", "switch", true);
	uh_write("README.md", "in off\n");
	cr_assert_eq(uh_rows(rows, MAX_ROWS), 1, "off keeps no originals");
	uh_mode("build", "switch", true);
	int64_t b = pw_undo_keep_current(W.k);
	cr_assert_gt(b, a, "a switch into a mode that writes begins a set");
	uh_write("README.md", "in build\n");
	size_t n = uh_rows(rows, MAX_ROWS);
	const uh_row *r = uh_row_at(rows, n, b, "README.md");
	cr_assert_not_null(r);
	assert_blob(r, "in off\n");
	uh_set sets[8];
	n = uh_sets(sets, 8);
	cr_assert_str_eq(sets[n - 1].reason, "switch");
	cr_assert_str_eq(sets[n - 1].mode, "build");
}

Test(keep, a_change_that_failed_leaves_no_row_and_is_kept_when_tried_again)
{
	int64_t cs = pw_undo_keep_current(W.k);
	pw_inode *root = uh_lookup("");
	{
		PW_REQ(r);
		r.fs = &W.fs;
		pw_req_name(&r, root, "late.txt");
		int64_t kept = pw_undo_keep_name(&r, W.fs.root_fd, PW_OP_CREATE);
		cr_assert_gt(kept, 0, "a token for the row");
		pw_undo_keep_failed(&W.fs, kept); /* the create failed: nothing to undo */
	}
	uh_row rows[MAX_ROWS];
	size_t n = uh_rows(rows, MAX_ROWS);
	cr_assert_null(uh_row_at(rows, n, cs, "late.txt"), "the row of a failed change goes");
	uh_create("late.txt", "late\n");
	n = uh_rows(rows, MAX_ROWS);
	const uh_row *r = uh_row_at(rows, n, cs, "late.txt");
	cr_assert_not_null(r, "the set forgot the failed row: the real create is recorded");
	cr_assert_not(r->present);
}

Test(keep, a_store_that_cannot_be_opened_answers_errno_and_leaves_the_file_as_it_was)
{
	char file[300], db[400];
	snprintf(file, sizeof(file), "%s/not-a-dir", W.tmp);
	FILE *f = fopen(file, "w");
	cr_assert_not_null(f);
	fclose(f);
	snprintf(db, sizeof(db), "%s/state.db", file);
	pw_undo *k = NULL;
	pw_undo_opts o = {.db_path = db, .project = W.project, .mountpoint = W.mountpoint};
	int r = pw_undo_new(&o, &k);
	cr_assert_eq(r, -ENOTDIR, "the store's directory under a file: %s", strerror(-r));
	cr_assert_null(k, "nothing returned on failure");
}

/* The state database holds conveniences: a file that is no database is moved aside (kept
 * for inspection, db.c) and a new store begins, rather than the view refusing to start. */
Test(keep, a_state_database_that_is_not_one_is_kept_aside_and_a_new_store_begins)
{
	char bad[300], db[400];
	snprintf(bad, sizeof(bad), "%s/junk", W.tmp);
	cr_assert_eq(mkdir(bad, 0700), 0);
	snprintf(db, sizeof(db), "%s/state.db", bad);
	const char junk[] = "this is not an SQLite database, and it is someone's data\n";
	FILE *f = fopen(db, "w");
	cr_assert_not_null(f);
	fputs(junk, f);
	fclose(f);
	pw_undo *k = NULL;
	pw_undo_opts o = {.db_path = db, .project = W.project, .mountpoint = W.mountpoint};
	int r = pw_undo_new(&o, &k);
	cr_assert_eq(r, 0, "%s", strerror(-r));
	int64_t id = 0;
	cr_assert_eq(pw_undo_keep_begin(k, "checkpoint", "fresh", &id), 0);
	cr_assert_gt(id, 0, "the new store records");
	pw_undo_free(k);
	char cmd[600], back[sizeof(junk) + 8] = "";
	snprintf(cmd, sizeof(cmd), "cat '%s'/state.db.corrupt-*", bad);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	size_t got = fread(back, 1, sizeof(back) - 1, f);
	cr_assert_eq(pclose(f), 0, "the old file is kept aside as state.db.corrupt-*");
	cr_assert_eq(got, sizeof(junk) - 1);
	cr_assert_str_eq(back, junk, "its bytes as they were");
}

Test(keep, a_keep_that_cannot_open_the_object_refuses_the_change_and_loses_nothing)
{
	int64_t cs = pw_undo_keep_current(W.k);
	uh_write("README.md", "through the view\n");
	pw_inode *n = uh_lookup("src/x.c"); /* known before the descriptors run out */
	/* No descriptor left: the keep cannot open the object, so the change must not go on. */
	struct rlimit old, low;
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = 256;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
	int fds[256], nfds = 0;
	while (nfds < 256 && (fds[nfds] = dup(0)) >= 0)
		nfds++;
	cr_assert_eq(errno, EMFILE);
	PW_REQ(r);
	r.fs = &W.fs;
	int e = pw_undo_keep_node(&r, n, PW_OP_OPEN_WRITE);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
	cr_assert_eq(e, -EMFILE, "a clear -errno, not %d (%s)", e, strerror(-e));
	/* what was kept before is intact, and the next try keeps the original */
	uh_write("src/x.c", "int y;\n");
	uh_row rows[MAX_ROWS];
	size_t nr = uh_rows(rows, MAX_ROWS);
	assert_blob(uh_row_at(rows, nr, cs, "README.md"), "# demo\n");
	assert_blob(uh_row_at(rows, nr, cs, "src/x.c"), "int x;\n");
}
