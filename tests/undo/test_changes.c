/* SPDX-License-Identifier: MIT */
/*
 * The changes methods (fs/undo/changes.c's table over history.c, diff.c and restore.c)
 * without a mount: changes.list, changes.diff (and its stat), changes.undo (redo, dry run,
 * force) and checkpoint, called as the control server calls them (the request line parsed,
 * the params checked against the module's own table, then the method's function) on a
 * history the keep hooks recorded over a real backing tree and a real store in a temp dir.
 * What they assert is what the mount tests (tests/mount/test_undo.py,
 * test_changes_record.py) show users rely on, through `piworkfs changes`, `diff`, `undo` and
 * `redo`. The tree and the harness are undo_harness.h's.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto.h"
#include "undo_harness.h"

static void setup(void)
{
	uh_setup("changes", "build");
}

TestSuite(changes, .init = setup, .fini = uh_teardown);

static int64_t checkpoint(const char *name)
{
	char params[128];
	snprintf(params, sizeof(params), "{\"name\":\"%s\"}", name);
	json_t *r = uh_ok("checkpoint", name ? params : NULL);
	int64_t id = json_integer_value(json_object_get(r, "changeset"));
	cr_assert_gt(id, 0);
	json_decref(r);
	return id;
}

/* PATH holds TEXT in the backing tree (a macro: a failure names the caller's line). */
#define assert_file(path, text)                                                                    \
	do {                                                                                       \
		char *got_ = uh_read(path);                                                        \
		cr_assert_not_null(got_, "%s is there", path);                                     \
		cr_assert_str_eq(got_, text, "%s: %s", path, got_);                                \
		free(got_);                                                                        \
	} while (0)

/* The summary of RES, as lines. */
static void assert_summary(json_t *res, const char *want)
{
	char *got = uh_summary(res);
	cr_assert_str_eq(got, want);
	free(got);
}

static void assert_error(uh_reply *r, int code, const char *part)
{
	cr_assert_eq(r->code, code, "code %d, not %d (%s)", code, r->code, r->message);
	cr_assert_null(r->result);
	if (part)
		cr_assert(strstr(r->message, part), "'%s' in '%s'", part, r->message);
	uh_reply_done(r);
}

/* The changes of the mount tests' test_changes_and_diff_show_exactly_the_change. */
static void edit_four_ways(void)
{
	uh_write("docs/arch.md", "one\nTWO\n");
	uh_create("new.txt", "fresh\n");
	uh_unlink("README.md");
	uh_rename("src/x.c", "src/u.c");
}

Test(changes, list_tells_each_change_by_kind_with_its_mode_and_process)
{
	int64_t cs = checkpoint("start");
	edit_four_ways();
	json_t *res = uh_ok("changes.list", "{\"since\":\"start\"}");
	char *kinds = uh_kinds(res);
	cr_assert_str_eq(kinds, "created new.txt\n"
				"deleted README.md\n"
				"modified docs/arch.md\n"
				"renamed src/x.c -> src/u.c\n");
	free(kinds);
	json_t *sets = json_object_get(res, "changesets");
	cr_assert_eq(json_array_size(sets), 1);
	json_t *s = json_array_get(sets, 0);
	cr_assert_eq(json_integer_value(json_object_get(s, "id")), cs);
	cr_assert_str_eq(json_string_value(json_object_get(s, "name")), "start");
	cr_assert(json_is_true(json_object_get(s, "current")));
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(s, "changes"), i, c)
	{
		cr_assert_str_eq(json_string_value(json_object_get(c, "mode")), "build");
		cr_assert_eq(json_integer_value(json_object_get(c, "pid")), getpid());
	}
	cr_assert_eq(json_integer_value(json_object_get(res, "current")), cs);
	cr_assert_str_eq(json_string_value(json_object_get(res, "mountpoint")), W.mountpoint);
	cr_assert_gt(json_integer_value(json_object_get(json_object_get(res, "store"), "bytes")), 0,
		     "the person sees the store's size");
	json_decref(res);
}

Test(changes, diff_is_gits_unified_diff_of_exactly_the_change)
{
	checkpoint("start");
	edit_four_ways();
	json_t *res = uh_ok("changes.diff", "{\"paths\":[\"docs/arch.md\"]}");
	json_t *files = json_object_get(res, "files");
	cr_assert_eq(json_array_size(files), 1);
	json_t *f = json_array_get(files, 0);
	cr_assert_str_eq(json_string_value(json_object_get(f, "path")), "docs/arch.md");
	cr_assert_str_eq(json_string_value(json_object_get(f, "kind")), "modified");
	cr_assert_str_eq(json_string_value(json_object_get(f, "diff")),
			 "diff --git a/docs/arch.md b/docs/arch.md\n"
			 "--- a/docs/arch.md\n+++ b/docs/arch.md\n"
			 "@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n");
	cr_assert_not(json_is_true(json_object_get(res, "truncated")));
	json_decref(res);
	/* an absolute path in the view names the same file */
	char params[600];
	snprintf(params, sizeof(params), "{\"paths\":[\"%s/docs/arch.md\"]}", W.mountpoint);
	res = uh_ok("changes.diff", params);
	cr_assert_eq(json_array_size(json_object_get(res, "files")), 1);
	json_decref(res);
}

Test(changes, diff_stat_counts_lines_per_file_and_sends_no_patch)
{
	checkpoint("start");
	edit_four_ways();
	json_t *res = uh_ok("changes.diff", "{\"stat\":true}");
	json_t *files = json_object_get(res, "files"), *f;
	size_t i;
	char got[512] = "";
	json_array_foreach(files, i, f)
	{
		size_t len = strlen(got);
		snprintf(got + len, sizeof(got) - len, "%s %s +%lld -%lld\n",
			 json_string_value(json_object_get(f, "kind")),
			 json_string_value(json_object_get(f, "path")),
			 (long long)json_integer_value(json_object_get(f, "added")),
			 (long long)json_integer_value(json_object_get(f, "removed")));
		cr_assert_null(json_object_get(f, "diff"), "--stat sends no patch");
	}
	/* sorted by path, as git lists them */
	cr_assert_str_eq(got, "deleted README.md +0 -1\n"
			      "modified docs/arch.md +1 -1\n"
			      "created new.txt +1 -0\n"
			      "renamed src/u.c +0 -0\n");
	json_decref(res);
}

Test(changes, undo_puts_the_bytes_back_and_redo_puts_the_change_back)
{
	checkpoint("c");
	uh_write("README.md", "changed\n");
	json_t *res = uh_ok("changes.undo", "{\"all\":true}");
	assert_file("README.md", "# demo\n");
	cr_assert_eq(json_array_size(json_object_get(res, "failed")), 0);
	cr_assert_not(json_is_true(json_object_get(res, "dry_run")));
	assert_summary(res, "restore README.md\n");
	int64_t undo_cs = json_integer_value(json_object_get(res, "changeset"));
	cr_assert_gt(undo_cs, 0, "the undo is a change set of its own");
	json_decref(res);
	/* a second undo never re-applies the change (issue 29): nothing to undo (asked as the
	 * CLI asks first, with a dry run, which then says "nothing to undo" and stops) */
	res = uh_ok("changes.undo", "{\"all\":true,\"dry_run\":true}");
	cr_assert_eq(json_array_size(json_object_get(res, "actions")), 0);
	cr_assert_eq(json_array_size(json_object_get(res, "summary")), 0);
	assert_file("README.md", "# demo\n");
	json_decref(res);
	res = uh_ok("changes.undo", "{\"redo\":true}");
	assert_file("README.md", "changed\n");
	cr_assert_eq(json_integer_value(json_object_get(res, "redo_of")), undo_cs);
	json_decref(res);
	uh_reply r = uh_rpc("changes.undo", "{\"redo\":true}");
	assert_error(&r, PW_RPC_NO_CHANGE, "nothing to redo");
	assert_file("README.md", "changed\n");
}

/* An undo asked for real (no dry run first, as `undo --all --json` or a client may) that
 * finds nothing starts no change set: the next redo puts the last undo's change back at once,
 * not an empty "undo" set of nothing. */
Test(changes, an_undo_that_finds_nothing_leaves_redo_as_it_was)
{
	checkpoint("c");
	uh_write("README.md", "changed\n");
	json_t *res = uh_ok("changes.undo", "{\"all\":true}");
	int64_t undo_cs = json_integer_value(json_object_get(res, "changeset"));
	json_decref(res);
	assert_file("README.md", "# demo\n");

	res = uh_ok("changes.undo", "{\"all\":true}");
	cr_assert_eq(json_array_size(json_object_get(res, "actions")), 0);
	cr_assert_eq(json_integer_value(json_object_get(res, "changeset")), 0,
		     "nothing undone, no change set started");
	json_decref(res);

	res = uh_ok("changes.undo", "{\"redo\":true}");
	assert_file("README.md", "changed\n");
	cr_assert_eq(json_integer_value(json_object_get(res, "redo_of")), undo_cs,
		     "the redo reverses the undo that did something");
	json_decref(res);
}

Test(changes, undo_steps_back_a_change_set_at_a_time_and_redo_steps_forward)
{
	checkpoint("a");
	uh_write("src/x.c", "v1\n");
	int64_t b = checkpoint("b");
	uh_write("src/x.c", "v2\n");
	json_t *res = uh_ok("changes.undo", "{\"paths\":[\"src/x.c\"]}");
	assert_file("src/x.c", "v1\n");
	assert_summary(res, "restore src/x.c\n");
	json_t *undoes = json_object_get(res, "undoes");
	cr_assert_eq(json_array_size(undoes), 1);
	cr_assert_eq(json_integer_value(json_array_get(undoes, 0)), b, "names the set it undoes");
	json_decref(res);
	json_decref(uh_ok("changes.undo", "{\"paths\":[\"src/x.c\"]}"));
	assert_file("src/x.c", "int x;\n");
	uh_reply r = uh_rpc("changes.undo", "{\"paths\":[\"src/x.c\"]}");
	assert_error(&r, PW_RPC_NO_CHANGE, "src/x.c: no recorded change left to undo");
	assert_file("src/x.c", "int x;\n");
	json_decref(uh_ok("changes.undo", "{\"redo\":true}"));
	assert_file("src/x.c", "v1\n");
	json_decref(uh_ok("changes.undo", "{\"redo\":true}"));
	assert_file("src/x.c", "v2\n");
	r = uh_rpc("changes.undo", "{\"redo\":true}");
	assert_error(&r, PW_RPC_NO_CHANGE, NULL);
	assert_file("src/x.c", "v2\n");
}

Test(changes, dry_run_lists_in_the_order_undo_acts_and_changes_nothing)
{
	checkpoint("c");
	uh_mkdir("n1");
	uh_mkdir("n1/n2");
	uh_create("n1/n2/f.txt", "f\n");
	uh_write("src/x.c", "int y;\n");
	json_t *dry = uh_ok("changes.undo", "{\"all\":true,\"dry_run\":true}");
	cr_assert(json_is_true(json_object_get(dry, "dry_run")));
	cr_assert_eq(json_integer_value(json_object_get(dry, "changeset")), 0, "no set begun");
	const char *order = "restore src/x.c\nremove n1/n2/f.txt\nremove n1/n2\nremove n1\n";
	assert_summary(dry, order);
	assert_file("src/x.c", "int y;\n");
	assert_file("n1/n2/f.txt", "f\n");
	json_t *done = uh_ok("changes.undo", "{\"all\":true}");
	assert_summary(done, order);
	cr_assert_eq(json_array_size(json_object_get(done, "failed")), 0);
	assert_file("src/x.c", "int x;\n");
	cr_assert_not(uh_exists("n1"), "the directories the set made are gone");
	json_t *redo = uh_ok("changes.undo", "{\"redo\":true,\"dry_run\":true}");
	assert_summary(redo, "recreate n1\nrecreate n1/n2\nrecreate n1/n2/f.txt\n"
			     "restore src/x.c\n");
	cr_assert_not(uh_exists("n1"), "a dry run does nothing");
	json_decref(uh_ok("changes.undo", "{\"redo\":true}"));
	assert_file("n1/n2/f.txt", "f\n");
	assert_file("src/x.c", "int y;\n");
	json_decref(dry);
	json_decref(done);
	json_decref(redo);
}

Test(changes, undo_of_an_edit_then_a_rename_is_one_line_per_path)
{
	checkpoint("c");
	uh_write("src/x.c", "int y;\n");
	uh_rename("src/x.c", "src/app.c");
	json_t *res = uh_ok("changes.undo", "{\"paths\":[\"src/app.c\"]}");
	assert_summary(res, "rename back src/app.c -> src/x.c\n");
	assert_file("src/x.c", "int x;\n");
	cr_assert_not(uh_exists("src/app.c"));
	json_decref(res);
	res = uh_ok("changes.undo", "{\"redo\":true}");
	assert_file("src/app.c", "int y;\n");
	cr_assert_not(uh_exists("src/x.c"));
	json_decref(res);
}

Test(changes, a_path_changed_outside_the_view_since_is_refused_unless_forced)
{
	checkpoint("c");
	uh_write("README.md", "through the view\n");
	uh_outside_write("README.md", "outside\n");
	uh_reply r = uh_rpc("changes.undo", "{\"all\":true}");
	cr_assert_eq(r.code, PW_RPC_REFUSED, "%d %s", r.code, r.message);
	cr_assert_str_eq(r.message, "refused: changed outside the view since the view changed "
				    "it: README.md (--force to undo anyway)");
	json_t *conflicts = json_object_get(r.data, "conflicts");
	cr_assert_eq(json_array_size(conflicts), 1);
	cr_assert_str_eq(json_string_value(json_array_get(conflicts, 0)), "README.md");
	uh_reply_done(&r);
	assert_file("README.md", "outside\n");
	json_t *res = uh_ok("changes.undo", "{\"all\":true,\"force\":true}");
	assert_file("README.md", "# demo\n");
	json_decref(res);
}

Test(changes, a_change_the_view_made_last_is_no_conflict)
{
	/* the control of the test above: without the write outside, no refusal */
	checkpoint("c");
	uh_write("README.md", "outside\n");
	uh_write("README.md", "through the view\n");
	json_t *res = uh_ok("changes.undo", "{\"all\":true}");
	cr_assert_eq(json_array_size(json_object_get(res, "conflicts")), 0);
	assert_file("README.md", "# demo\n");
	json_decref(res);
}

Test(changes, bad_arguments_get_the_right_error_and_change_nothing)
{
	checkpoint("c");
	uh_write("src/x.c", "v1\n");
	/* Each call, its error code, and a part of its message (NULL: any). */
	static const struct {
		const char *method, *params;
		int code;
		const char *part;
	} bad[] = {
	    {"changes.diff", "{\"change_set\":999}", PW_RPC_INVALID_PARAMS, "no change set 999"},
	    {"changes.undo", "{\"change_set\":999,\"all\":true}", PW_RPC_INVALID_PARAMS,
	     "no change set 999"},
	    {"changes.list", "{\"since\":\"nosuch\"}", PW_RPC_INVALID_PARAMS,
	     "no checkpoint named 'nosuch'"},
	    {"changes.undo", "{}", PW_RPC_INVALID_PARAMS, "name the paths to undo, or all"},
	    /* the module's table: types, unknown keys, bounds */
	    {"changes.undo", "{\"change_set\":\"1\"}", PW_RPC_INVALID_PARAMS, "change_set"},
	    {"changes.diff", "{\"paths\":[1]}", PW_RPC_INVALID_PARAMS, "paths[0]"},
	    {"changes.list", "{\"bogus\":true}", PW_RPC_INVALID_PARAMS, "bogus"},
	    {"changes.undo", "{\"all\":\"yes\"}", PW_RPC_INVALID_PARAMS, "all"},
	    {"changes.list", "[1]", PW_RPC_INVALID_PARAMS, NULL},
	    {"changes.nosuch", NULL, PW_RPC_METHOD_NOT_FOUND, NULL},
	    /* paths outside the project, or that cannot be normalized */
	    {"changes.diff", "{\"paths\":[\"/etc/passwd\"]}", PW_RPC_INVALID_PATH,
	     "outside the project"},
	    {"changes.undo", "{\"paths\":[\"../x\"]}", PW_RPC_INVALID_PATH, "params.paths[0]"},
	    /* a path with no change, for diff and undo alike, named */
	    {"changes.diff", "{\"paths\":[\"README.md\"]}", PW_RPC_NO_CHANGE,
	     "README.md: no recorded change"},
	    {"changes.undo", "{\"paths\":[\"nosuch.c\"]}", PW_RPC_NO_CHANGE,
	     "nosuch.c: no recorded change left to undo"},
	};
	uh_reply r;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r = uh_rpc(bad[i].method, bad[i].params);
		assert_error(&r, bad[i].code, bad[i].part);
	}
	r = uh_rpc_line("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"changes.undo\",\"params\":{",
			false);
	assert_error(&r, PW_RPC_PARSE_ERROR, NULL);
	assert_file("src/x.c", "v1\n");
	assert_file("README.md", "# demo\n");
}

Test(changes, an_agent_may_list_and_diff_but_never_undo_checkpoint_or_prune)
{
	checkpoint("c");
	uh_write("README.md", "changed\n");
	const char *refused[] = {
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"changes.undo\",\"params\":{\"all\":true}}",
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"checkpoint\"}",
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"changes.prune\"}"};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		uh_reply r = uh_rpc_line(refused[i], true);
		assert_error(&r, PW_RPC_REFUSED, "refused");
	}
	/* and the functions refuse on their own, should a table ever lose its refusal */
	pw_undo_call call = uh_call(true);
	pw_undo_fail fail = {0};
	json_t *params = json_pack("{s:b}", "all", 1), *res = NULL;
	cr_assert_eq(pw_undo_changes_undo(&call, params, &res, &fail), -EPERM);
	cr_assert_eq(fail.code, PW_RPC_REFUSED);
	cr_assert_str_eq(fail.message, PW_UNDO_REFUSED_UNDO);
	cr_assert_null(res);
	free(fail.message);
	json_decref(params);
	assert_file("README.md", "changed\n");
	uh_reply r =
	    uh_rpc_line("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"changes.list\"}", true);
	cr_assert_eq(r.code, 0, "%s", r.message);
	char *kinds = uh_kinds(r.result);
	cr_assert_str_eq(kinds, "modified README.md\n");
	free(kinds);
	cr_assert_null(json_object_get(json_object_get(r.result, "store"), "bytes"),
		       "the store's totals are the person's only");
	uh_reply_done(&r);
	r = uh_rpc_line("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"changes.diff\"}", true);
	cr_assert_eq(r.code, 0, "%s", r.message);
	cr_assert_eq(json_array_size(json_object_get(r.result, "files")), 1);
	uh_reply_done(&r);
}

Test(changes, a_view_without_originals_answers_unavailable)
{
	pw_fs_set_undo(&W.fs, NULL);
	uh_reply r = uh_rpc("changes.list", NULL);
	pw_fs_set_undo(&W.fs, W.k);
	assert_error(&r, PW_RPC_UNAVAILABLE, "this view keeps no originals");
}

Test(changes, a_project_that_is_gone_fails_clearly_and_its_history_stays)
{
	checkpoint("c");
	uh_write("README.md", "changed\n");
	char aside[300];
	snprintf(aside, sizeof(aside), "%s/aside", W.tmp);
	cr_assert_eq(rename(W.project, aside), 0);
	uh_reply r = uh_rpc("changes.list", NULL);
	assert_error(&r, PW_RPC_INTERNAL_ERROR,
		     "cannot open the project: No such file or directory");
	r = uh_rpc("changes.undo", "{\"all\":true}");
	assert_error(&r, PW_RPC_INTERNAL_ERROR, "cannot open the project");
	cr_assert_eq(rename(aside, W.project), 0);
	json_t *res = uh_ok("changes.list", NULL);
	char *kinds = uh_kinds(res);
	cr_assert_str_eq(kinds, "modified README.md\n", "nothing of the history was lost");
	free(kinds);
	json_decref(res);
	json_decref(uh_ok("changes.undo", "{\"all\":true}"));
	assert_file("README.md", "# demo\n");
}

Test(changes, an_old_change_set_reads_the_same_after_later_ones)
{
	int64_t a = checkpoint("a");
	uh_write("docs/arch.md", "one\ntwo\nthree\n");
	uh_write("src/x.c", "int y;\n");
	char params[64];
	snprintf(params, sizeof(params), "{\"change_set\":%lld}", (long long)a);
	json_t *list = uh_ok("changes.list", params), *diff = uh_ok("changes.diff", params);
	/* later sets remove, rewrite and rename what set A changed */
	checkpoint("b");
	uh_unlink("docs/arch.md");
	uh_rename("src/x.c", "src/z.c");
	checkpoint("c");
	uh_write("src/z.c", "rewritten\n");
	json_t *list2 = uh_ok("changes.list", params), *diff2 = uh_ok("changes.diff", params);
	char *k1 = uh_kinds(list), *k2 = uh_kinds(list2);
	cr_assert_str_eq(k2, k1);
	cr_assert_str_eq(k1, "modified docs/arch.md\nmodified src/x.c\n");
	cr_assert(json_equal(diff, diff2), "the diff of set A is the same after later sets");
	free(k1);
	free(k2);
	json_decref(list);
	json_decref(list2);
	json_decref(diff);
	json_decref(diff2);
}
