/* SPDX-License-Identifier: MIT */
/*
 * The bash pre-flight's worker process (fs/ctl/bash_worker.h): it answers what the analysis in
 * the daemon's own process answered, errors come back as errors, and it is unprivileged:
 * run by root, it cannot read a directory only root may read, so a glob there stays a
 * pattern while the same glob in a public directory expands.
 *
 * Fixture tree (per test, under a fresh pw-bw-XXXXXX: tests/lib/testdir.h says where):
 *   proj/           0755
 *     src/a.c
 *     pub/  0755    x.c
 *     priv/ 0700    y.c   (owned by whoever runs the test)
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/fixture_tree.h"
#include "ctl/bash_worker.h"
#include "mode.h"
#include "policy.h"
#include "util.h"
#include "../lib/testdir.h"

static char tmp[64], proj[128];
static int root_fd = -1;
static pw_modeset *modes;

static void setup(void)
{
	testdir_make(tmp, sizeof(tmp), "pw-bw");
	snprintf(proj, sizeof(proj), "%s/proj", tmp);
	cr_assert_eq(mkdir(proj, 0755), 0);
	cr_assert_eq(chmod(proj, 0755), 0);
	fixture_dir(proj, "src", 0755);
	fixture_put(proj, "src/a.c", "int a;\n");
	fixture_dir(proj, "pub", 0755);
	fixture_put(proj, "pub/x.c", "int x;\n");
	fixture_dir(proj, "priv", 0700);
	fixture_put(proj, "priv/y.c", "int y;\n");
	root_fd = open(proj, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(root_fd, 0);
	pw_load_opts o = {.bundled_dir = SOURCE_MODES};
	cr_assert_eq(pw_modeset_load(&o, &modes), 0);
}

static void teardown(void)
{
	pw_modeset_free(modes);
	close(root_fd);
	testdir_remove(tmp);
}

TestSuite(bash_worker, .init = setup, .fini = teardown);

static int run(const char *mode, const char *cmd, size_t len, json_t **ret)
{
	pw_policy *p = NULL;
	cr_assert_eq(pw_policy_compile(modes, mode, &p), 0, "%s", mode);
	pw_bash_job job = {.command = cmd,
			   .len = len,
			   .cwd = "",
			   .root_fd = root_fd,
			   .root_path = proj,
			   .policy = p};
	int r = pw_bash_worker_run(&job, ret);
	pw_policy_unref(p);
	return r;
}

static const char *verdict(const json_t *o)
{
	return json_string_value(json_object_get(o, "verdict"));
}

/* The target whose path is PATH, or NULL. */
static json_t *target(const json_t *o, const char *path)
{
	size_t i;
	json_t *t;
	json_array_foreach(
	    json_object_get(o, "targets"), i,
	    t) if (streq_ptr(json_string_value(json_object_get(t, "path")), path)) return t;
	return NULL;
}

Test(bash_worker, decides_with_the_policy)
{
	json_t *o = NULL;
	const char *cmd = "echo hi > src/x.c; cat src/a.c";
	cr_assert_eq(run("plan", cmd, strlen(cmd), &o), 0);
	cr_assert_str_eq(verdict(o), "denied");
	json_t *t = target(o, "src/x.c");
	cr_assert_not_null(t);
	cr_assert_str_eq(json_string_value(json_object_get(t, "status")), "denied");
	json_decref(o);

	cr_assert_eq(run("build", cmd, strlen(cmd), &o), 0);
	cr_assert_str_eq(verdict(o), "allowed");
	json_decref(o);
}

Test(bash_worker, analysis_errors_come_back)
{
	json_t *o = NULL;
	cr_assert_eq(run("build", "echo a\0b", 8, &o), -EINVAL);
	cr_assert_null(o);
}

Test(bash_worker, reads_the_tree_unprivileged)
{
	json_t *o = NULL;
	const char *cmd = "rm pub/*.c priv/*.c";
	cr_assert_eq(run("build", cmd, strlen(cmd), &o), 0);
	json_t *pub = target(o, "pub/x.c");
	cr_assert_not_null(pub, "a glob in a public directory expands");
	cr_assert_str_eq(json_string_value(json_object_get(pub, "kind")), "path");
	if (geteuid() == 0) {
		/* root made priv/ 0700: the worker, dropped to nobody, may not list it. */
		cr_assert_null(target(o, "priv/y.c"), "the worker read a root-only directory");
		json_t *priv = target(o, "priv/*.c");
		cr_assert_not_null(priv);
		cr_assert_str_eq(json_string_value(json_object_get(priv, "kind")), "pattern");
	} else {
		/* The worker of an unprivileged daemon is that user, who owns priv/. */
		cr_assert_not_null(target(o, "priv/y.c"));
	}
	json_decref(o);
}

Test(bash_worker, runs_as_the_project_owner)
{
	if (geteuid() != 0)
		return; /* only root changes identity */
	/* A project owned by an ordinary user: the worker reads as that user, so the user's
	 * private directory is listed. */
	cr_assert_eq(chown(proj, 65533, 65533), 0);
	cr_assert_eq(chown(tmp, 0, 0), 0);
	char p[256];
	snprintf(p, sizeof(p), "%s/priv", proj);
	cr_assert_eq(chown(p, 65533, 65533), 0);
	json_t *o = NULL;
	const char *cmd = "rm priv/*.c";
	cr_assert_eq(run("build", cmd, strlen(cmd), &o), 0);
	cr_assert_not_null(target(o, "priv/y.c"));
	json_decref(o);
}
