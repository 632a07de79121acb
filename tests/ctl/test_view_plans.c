/* SPDX-License-Identifier: MIT */
/*
 * The approved plans in a view (ctl/view.c, ctl/frozen.c), without FUSE: pw_view_sync_plans
 * installs what the state database holds, and nothing else; a freeze that cannot be applied
 * fails every mode closed, a switch included, and says why (issue 44, item 2; issue 48).
 *
 * Fixture (per test, under a fresh pwvp-XXXXXX: tests/lib/testdir.h says where):
 *   proj/src/a.c, proj/docs/plans/     the project (untrusted)
 *   state.db                           the state database
 */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/fixture_tree.h"
#include "ctl/view.h"
#include "store/state.h"
#include "util.h"
#include "../lib/testdir.h"

/* ---- TEST DOUBLE of the FUSE layer: the active policy and its generation ---------------- */
static pw_policy *active;
static uint64_t generation;
static unsigned installs;

static uint64_t fake_set_policy(void *ctx, pw_policy *p)
{
	pw_policy_unref(active);
	active = pw_policy_ref(p);
	installs++;
	return ++generation;
}

static pw_policy *fake_get_policy(void *ctx, uint64_t *ret_generation)
{
	if (ret_generation)
		*ret_generation = generation;
	return pw_policy_ref(active);
}

static void fake_get_stats(void *ctx, pw_fs_stats *ret)
{
	*ret = (pw_fs_stats){0};
}

static const pw_view_fs_ops fake_ops = {
    .set_policy = fake_set_policy,
    .get_policy = fake_get_policy,
    .get_stats = fake_get_stats,
};
/* ---- end of the test double ------------------------------------------------------------ */

static char tmp[64], proj[128], dbpath[128];
static pw_state *state;
static pw_view *view;

static void setup(void)
{
	testdir_make(tmp, sizeof(tmp), "pwvp");
	snprintf(proj, sizeof(proj), "%s/proj", tmp);
	snprintf(dbpath, sizeof(dbpath), "%s/state.db", tmp);
	fixture_dir(tmp, "proj", 0755);
	fixture_files(proj, (const char *const[]){"src/a.c", "int a;\n", NULL});
	cr_assert_eq(pw_state_open(dbpath, &state, NULL), 0);
	pw_view_opts vo = {
	    .project = proj,
	    .mountpoint = "/nonexistent/mnt",
	    .fs_ops = &fake_ops,
	    .owner_uid = getuid(),
	    .bundled_dir = SOURCE_MODES,
	    .initial_mode = "build",
	    .state = state,
	    .state_db = dbpath,
	};
	cr_assert_eq(pw_view_new(&vo, &view), 0);
}

static void teardown(void)
{
	pw_view_free(view);
	pw_state_close(state);
	pw_policy_unref(active);
	active = NULL;
	testdir_remove(tmp);
}

TestSuite(view_plans, .init = setup, .fini = teardown, .timeout = 60);

static bool may_write(const char *path)
{
	return pw_policy_may_write(active, path, false);
}

static void approve(const char *path)
{
	pw_state *st = pw_view_lock_state(view);
	cr_assert_eq(pw_state_plan_approve(st, proj, path, "0", "test"), 0);
	pw_view_unlock_state(view);
}

static void reopen(const char *path)
{
	pw_state *st = pw_view_lock_state(view);
	cr_assert_eq(pw_state_plan_reopen(st, proj, path), 0);
	pw_view_unlock_state(view);
}

/* SQL on the database through a connection of the test's own. */
static void sql(const char *stmt)
{
	sqlite3 *db = NULL;

	cr_assert_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 60000);
	cr_assert_eq(sqlite3_exec(db, stmt, NULL, NULL, NULL), SQLITE_OK, "%s: %s", stmt,
		     sqlite3_errmsg(db));
	sqlite3_close(db);
}

static pw_view_status status(void)
{
	pw_view_status st;

	cr_assert_eq(pw_view_get_status(view, &st), 0);
	return st;
}

Test(view_plans, sync_installs_what_the_database_holds_and_nothing_else)
{
	cr_assert(may_write("docs/plans/x.md"));
	/* A mode file broken since the mount: a sync does not read the modes again (that is a
	 * reload's), so the active mode is not broken by it. */
	fixture_files(proj,
		      (const char *const[]){".piworkfs/modes/build.md",
					    "---\nname: build\nwrites: [unclosed\n---\n", NULL});

	approve("docs/plans/x.md");
	unsigned before = installs;
	pw_view_installed in;
	cr_assert_eq(pw_view_sync_plans(view, NULL, &in, NULL), 0);
	cr_assert_eq(installs, before + 1);
	cr_assert_eq(in.generation, generation);
	cr_assert_eq(in.policy, active);
	pw_view_installed_done(&in);
	cr_assert_not(pw_policy_is_fail_closed(active));
	cr_assert_not(may_write("docs/plans/x.md"));
	cr_assert(may_write("docs/plans/y.md"));
	cr_assert(may_write("src/a.c"));

	/* Nothing changed: nothing installed, the policy in force answered. */
	cr_assert_eq(pw_view_sync_plans(view, NULL, &in, NULL), 0);
	cr_assert_eq(installs, before + 1);
	cr_assert_eq(in.policy, active);
	pw_view_installed_done(&in);

	/* Every other mode the view compiles protects it too; the active one is the policy in
	 * force itself. */
	pw_policy *plan = NULL, *build = NULL;
	cr_assert_eq(pw_view_compile(view, "plan", &plan), 0);
	cr_assert_not(pw_policy_may_write(plan, "docs/plans/x.md", false));
	cr_assert(pw_policy_may_write(plan, "docs/plans/y.md", false));
	cr_assert_eq(pw_view_compile(view, "build", &build), 0);
	cr_assert_eq(build, active);
	pw_policy_unref(plan);
	pw_policy_unref(build);

	reopen("docs/plans/x.md");
	cr_assert_eq(pw_view_sync_plans(view, NULL, NULL, NULL), 0);
	cr_assert(may_write("docs/plans/x.md"));
}

Test(view_plans, a_freeze_that_cannot_be_applied_fails_every_mode_closed)
{
	/* A recorded path no literal glob can name: the view cannot protect it. */
	approve("docs/plans/ok.md");
	approve("docs/plans/[x].md");
	cr_assert_eq(pw_view_sync_plans(view, NULL, NULL, NULL), 0);
	cr_assert(pw_policy_is_fail_closed(active));
	cr_assert_not(may_write("src/a.c"));
	pw_view_status st = status();
	cr_assert_not_null(st.fail_reason);
	cr_assert(strstr(st.fail_reason, "docs/plans/[x].md"), "%s", st.fail_reason);
	pw_view_status_done(&st);

	/* A switch happens, into the mode failing closed; so does a reload. */
	pw_peer person = {.pid = getpid(), .uid = getuid(), .gid = getgid()};
	cr_assert_eq(pw_view_set_mode(view, "plan", &person, NULL, NULL), 0);
	cr_assert(pw_policy_is_fail_closed(active));
	cr_assert_str_eq(pw_policy_mode_name(active), "plan");
	cr_assert_not(pw_policy_may_write(active, "docs/plans/new.md", false));
	cr_assert_eq(pw_view_reload(view, NULL, NULL, NULL), 0);
	cr_assert(pw_policy_is_fail_closed(active));
	pw_policy *design = NULL;
	cr_assert_eq(pw_view_compile(view, "design", &design), 0);
	cr_assert(pw_policy_is_fail_closed(design));
	pw_policy_unref(design);

	/* Repaired (the record reopened), the next sync recovers, the good plan still frozen. */
	reopen("docs/plans/[x].md");
	cr_assert_eq(pw_view_sync_plans(view, NULL, NULL, NULL), 0);
	cr_assert_not(pw_policy_is_fail_closed(active));
	cr_assert_not(pw_policy_may_write(active, "docs/plans/ok.md", false));
	cr_assert(pw_policy_may_write(active, "docs/plans/new.md", false));
	st = status();
	cr_assert_null(st.fail_reason);
	pw_view_status_done(&st);
}

Test(view_plans, a_database_that_cannot_be_read_fails_closed)
{
	approve("docs/plans/ok.md");
	sql("ALTER TABLE plans RENAME TO plans_gone");
	cr_assert_eq(pw_view_reload(view, NULL, NULL, NULL), 0);
	cr_assert(pw_policy_is_fail_closed(active));
	pw_view_status vs = status();
	cr_assert(strstr(vs.fail_reason, "could not be read"), "%s", vs.fail_reason);
	pw_view_status_done(&vs);
	sql("ALTER TABLE plans_gone RENAME TO plans");
	cr_assert_eq(pw_view_sync_plans(view, NULL, NULL, NULL), 0);
	cr_assert_not(pw_policy_is_fail_closed(active));
	cr_assert_not(may_write("docs/plans/ok.md"));
}
