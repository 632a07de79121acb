/* SPDX-License-Identifier: MIT */
/* Plan files (policy/plan.h) and the plans folder's configuration (config.yaml `plans:`). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <sys/stat.h>

#include "mode.h"
#include "plan.h"
#include "policy.h"
#include "util.h"

static pw_plan *parse(const char *text)
{
	pw_plan *p = NULL;

	cr_assert_eq(pw_plan_parse(text, strlen(text), strlen(text), &p), 0);
	return p;
}

Test(plan, frontmatter_and_tasks_section)
{
	pw_plan *p = parse("---\ntitle: Cache\nstatus: draft\ncreated: 2026-12-01\n---\n"
			   "# Cache\n\n- [ ] not a task: before the section\n\n"
			   "## Tasks\n- [ ] Add the cache\n- [x] already done\n  - [ ] nested\n"
			   "* [ ] Invalidate it   \n\n```\n- [ ] in a fence\n```\n"
			   "## Risks\n- [ ] not a task either\n");

	cr_expect_str_eq(p->title, "Cache");
	cr_expect_str_eq(p->status, "draft");
	cr_expect_str_eq(p->created, "2026-12-01");
	cr_expect_null(p->approved);
	cr_expect_eq(p->tasks_from, PW_PLAN_TASKS_SECTION);
	cr_assert_eq(p->n_tasks, 2);
	cr_expect_str_eq(p->tasks[0].text, "Add the cache");
	cr_expect_eq(p->tasks[0].line, 11);
	cr_expect_str_eq(p->tasks[1].text, "Invalidate it");
	cr_expect_eq(p->n_problems, 0);
	pw_plan_free(p);
}

Test(plan, last_checklist_without_a_section)
{
	pw_plan *p = parse("---\ntitle: T\n---\n- [ ] first list\n\nSome text.\n\n"
			   "- [ ] one\n- [ ] two\n\n- [ ] three\n");

	cr_expect_eq(p->tasks_from, PW_PLAN_TASKS_CHECKLIST);
	cr_assert_eq(p->n_tasks, 3);
	cr_expect_str_eq(p->tasks[0].text, "one");
	cr_expect_str_eq(p->tasks[2].text, "three");
	pw_plan_free(p);
}

Test(plan, problems_are_listed_not_fatal)
{
	pw_plan *p = parse("no frontmatter\n- [ ] a\n");

	cr_expect_eq(p->n_tasks, 1);
	cr_assert_geq(p->n_problems, 1);
	cr_expect(strstr(p->problems[0], "missing frontmatter") != NULL, "%s", p->problems[0]);
	pw_plan_free(p);

	p = parse("---\ntitle: [broken\n---\n");
	cr_expect_geq(p->n_problems, 2); /* the YAML, and no tasks */
	pw_plan_free(p);

	p = parse("---\ntitle: T\nstatus: finished\n---\nnothing\n");
	cr_assert_eq(p->n_problems, 2);
	cr_expect(strstr(p->problems[0], "unknown status") != NULL, "%s", p->problems[0]);
	cr_expect(strstr(p->problems[1], "no tasks") != NULL, "%s", p->problems[1]);
	pw_plan_free(p);

	const char *big = "---\ntitle: T\n---\n- [ ] a\n";
	cr_assert_eq(pw_plan_parse(big, strlen(big), PW_PLAN_FILE_MAX + 1, &p), 0);
	cr_assert_eq(p->n_problems, 1);
	cr_expect(strstr(p->problems[0], "too large") != NULL);
	pw_plan_free(p);
}

Test(plan, set_fields_keeps_the_rest)
{
	const char *in = "---\ntitle: T\nstatus: draft\nowner: me\n---\nbody: x\n- [ ] a\n";
	char *out = NULL;

	cr_assert_eq(pw_plan_set_fields(in, strlen(in), "approved", "2026-12-02T19:00:00Z",
					"2026-12-02", &out),
		     0);
	cr_expect_str_eq(out, "---\ntitle: T\nstatus: approved\nowner: me\n"
			      "approved: 2026-12-02T19:00:00Z\nupdated: 2026-12-02\n---\n"
			      "body: x\n- [ ] a\n");
	in = out;
	cr_assert_eq(pw_plan_set_fields(in, strlen(in), "draft", NULL, NULL, &out), 0);
	cr_expect_str_eq(out, "---\ntitle: T\nstatus: draft\nowner: me\nupdated: 2026-12-02\n"
			      "---\nbody: x\n- [ ] a\n");
	free((char *)in);
	free(out);
	cr_expect_eq(pw_plan_set_fields("x\n", 2, "draft", NULL, NULL, &out), -EBADMSG);
}

Test(plan, names_and_paths)
{
	char *path = NULL, *name = NULL;

	cr_expect(pw_plan_name_is_valid("cache-v2.1"));
	cr_expect_not(pw_plan_name_is_valid(".hidden"));
	cr_expect_not(pw_plan_name_is_valid("a/b"));
	cr_expect_not(pw_plan_name_is_valid("a..b"));
	cr_expect_not(pw_plan_name_is_valid("a*"));
	for (size_t i = 0; i < 3; i++) {
		const char *in[] = {"cache", "cache.md", "docs/plans/cache.md"};
		cr_assert_eq(pw_plan_path("docs/plans", in[i], &path, &name), 0);
		cr_expect_str_eq(path, "docs/plans/cache.md");
		cr_expect_str_eq(name, "cache");
		free(path);
		free(name);
	}
	cr_expect_eq(pw_plan_path("docs/plans", "../x", &path, NULL), -EINVAL);
	cr_expect(pw_plan_is_plan_path("docs/plans", "docs/plans/x.md"));
	cr_expect_not(pw_plan_is_plan_path("docs/plans", "docs/plans/sub/x.md"));
	cr_expect_not(pw_plan_is_plan_path("docs/plans", "docs/plans/x.txt"));
}

/* config.yaml `plans:` moves the folder; an untrusted project's is ignored (it would widen
 * plan mode), a trusted one's and the global one's apply. */
static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

Test(plan, plans_folder_config_and_trust)
{
	char dir[] = "/tmp/pw-test-plan-XXXXXX", sub[128], cfg[300];
	pw_modeset *ms = NULL;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(sub, sizeof(sub), "%s/.piworkfs", dir);
	cr_assert_eq(mkdir(sub, 0700), 0);
	snprintf(cfg, sizeof(cfg), "%s/config.yaml", sub);
	write_file(cfg, "plans: /design/plans\n");
	for (int trusted = 0; trusted < 2; trusted++) {
		pw_load_opts o = {
		    .bundled_dir = SOURCE_MODES, .project_dir = dir, .trusted = trusted};
		cr_assert_eq(pw_modeset_load(&o, &ms), 0);
		cr_expect_str_eq(pw_modeset_plans_dir(ms), trusted ? "design/plans" : "docs/plans");
		cr_expect_eq(pw_modeset_warning_count(ms), trusted ? 0 : 1);
		pw_modeset_free(ms);
	}
	write_file(cfg, "plans: 'src/*'\n");
	pw_load_opts o = {.bundled_dir = SOURCE_MODES, .project_dir = dir, .trusted = true};
	cr_assert_eq(pw_modeset_load(&o, &ms), 0);
	cr_expect(pw_modeset_mode_broken(ms, "plan", NULL)); /* a broken config fails closed */
	pw_modeset_free(ms);
	unlink(cfg);
	rmdir(sub);
	rmdir(dir);
}
