/* SPDX-License-Identifier: MIT */
/*
 * The texts every agent reads (policy/agent_text.h), byte for byte: Pi, the MCP server and
 * the hooks print exactly these, so the words here are the words in a model's context, and a
 * prompt cache relies on them not moving. Policies are the daemon's JSON (docs/JSON.md); the
 * last test builds them from the bundled modes, as a view does, to keep the per-request
 * budget.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_text.h"
#include "mode.h"
#include "policy.h"
#include "report.h"
#include "util.h"

#define TOKENS FIXTURES "/tokens-global"

#define PROT                                                                                       \
	"{\"kind\":\"protected\",\"pattern\":\".git/hooks\",\"file\":\"(built-in)\","              \
	"\"layer\":\"default\"},"                                                                  \
	"{\"kind\":\"protected\",\"pattern\":\".git/config\",\"file\":\"(built-in)\","             \
	"\"layer\":\"default\"},"                                                                  \
	"{\"kind\":\"protected\",\"pattern\":\".piworkfs\",\"file\":\"(built-in)\","               \
	"\"layer\":\"default\"}"

static json_t *policy(const char *mode, const char *rules, const char *extra)
{
	char *s = NULL;
	json_t *p;

	cr_assert(asprintf(&s,
			   "{\"mode\":\"%s\",\"writes_nothing\":false,\"fail_closed\":false,"
			   "\"fail_reason\":null,\"rules\":[%s]%s%s}",
			   mode, rules, extra ? "," : "", extra ? extra : "") > 0);
	p = json_loads(s, 0, NULL);
	cr_assert_not_null(p, "%s", s);
	free(s);
	return p;
}

static json_t *design(void)
{
	return policy("design",
		      PROT
		      ",{\"kind\":\"allow\",\"pattern\":\"docs/design/**\",\"file\":\"/m/"
		      "design.md\",\"line\":6,\"layer\":\"bundled\"},"
		      "{\"kind\":\"allow\",\"pattern\":\"docs/design/\",\"file\":\"/m/design.md\","
		      "\"line\":7,\"layer\":\"bundled\"},"
		      "{\"kind\":\"token\",\"pattern\":\"styles/tokens.css\",\"file\":\"/p/"
		      ".piworkfs/config.yaml\",\"line\":3,\"layer\":\"project\"}",
		      NULL);
}

static json_t *build(void)
{
	return policy("build", PROT ",{\"kind\":\"allow\",\"pattern\":\"**\"}", NULL);
}

static json_t *plan(void)
{
	return policy("plan",
		      PROT ",{\"kind\":\"allow\",\"pattern\":\"/docs/plans/**\",\"file\":\"(plans "
			   "folder)\",\"layer\":\"default\"}",
		      "\"plans_dir\":\"docs/plans\"");
}

/* Takes S (malloc'd) and compares it with WANT. */
static void expect_text(char *s, const char *want)
{
	cr_assert_not_null(s);
	cr_expect_str_eq(s, want);
	free(s);
}

static json_t *obj(const char *json)
{
	json_t *o = json_loads(json, 0, NULL);
	cr_assert_not_null(o, "%s", json);
	return o;
}

Test(agent_text, announcement_states_the_real_rules)
{
	json_t *d = design(), *b = build(), *p = plan();
	json_t *discuss = policy("discuss", PROT, NULL), *off;

	json_object_set_new(discuss, "writes_nothing", json_true());
	off = policy("off", "{\"kind\":\"allow\",\"pattern\":\"**\"}", NULL);
	const struct {
		json_t *policy;
		bool store_full; /* undo is incomplete while the originals store is full */
		const char *text;
	} cases[] = {
	    {d, false,
	     "[piworkfs] Active mode: design. Writable: docs/design/**, styles/tokens.css. "
	     "Read-only: everything else. Protected: .git/hooks, .git/config, .piworkfs."},
	    {discuss, false,
	     "[piworkfs] Active mode: discuss. Read-only: every write in the project fails "
	     "(EROFS)."},
	    {p, false,
	     "[piworkfs] Active mode: plan. Read-only: every write in the project fails "
	     "(EROFS), but the plan files in docs/plans/ that are not approved."},
	    {b, false,
	     "[piworkfs] Active mode: build. Writable: everything except protected paths "
	     "(.git/hooks, .git/config, .piworkfs)."},
	    {off, false,
	     "[piworkfs] Active mode: off. No restrictions: everything in the project is "
	     "writable."},
	    {b, true,
	     "[piworkfs] Active mode: build. Writable: everything except protected paths "
	     "(.git/hooks, .git/config, .piworkfs). Undo is incomplete: the originals store "
	     "is full, so some changes from now on are not kept and cannot be undone."},
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++)
		expect_text(pw_text_announcement(cases[i].policy, cases[i].store_full),
			    cases[i].text);
	json_decref(d), json_decref(b), json_decref(p), json_decref(discuss), json_decref(off);
}

Test(agent_text, deny_hide_and_fail_closed)
{
	json_t *p =
	    policy("build",
		   PROT ",{\"kind\":\"allow\",\"pattern\":\"**\"},{\"kind\":\"deny\","
			"\"pattern\":\"*.pem\"},{\"kind\":\"hide\",\"pattern\":\"secrets/\"}",
		   NULL);
	json_t *broken = design();

	expect_text(pw_text_announcement(p, false),
		    "[piworkfs] Active mode: build. Writable: everything except protected paths "
		    "(.git/hooks, .git/config, .piworkfs) and denied paths (*.pem). Hidden (absent "
		    "from the view): secrets/.");
	json_object_set_new(broken, "fail_closed", json_true());
	json_object_set_new(broken, "fail_reason", json_string("design.md:3:1: bad"));
	expect_text(
	    pw_text_announcement(broken, false),
	    "[piworkfs] Active mode: design. Failing closed (design.md:3:1: bad): nothing is "
	    "writable until the person fixes it.");
	expect_text(pw_text_writable(broken), "nothing");
	json_decref(p), json_decref(broken);
}

Test(agent_text, system_section_and_switch)
{
	json_t *b = build();
	char *ann = pw_text_announcement(b, false);

	expect_text(
	    pw_text_system_section("design", "\n# Mode: design\n\nDo design.\n"),
	    "# piworkfs mode: design\n\nThe project is a piworkfs view: the filesystem "
	    "enforces the active mode for every process and tool. This section supersedes "
	    "every earlier statement about the mode in this conversation, your own included; "
	    "only a later \"[piworkfs]\" message supersedes it.\n\n# Mode: design\n\nDo "
	    "design.");
	expect_text(
	    pw_text_system_section("off", " \n"),
	    "# piworkfs mode: off\n\nThe project is a piworkfs view: the filesystem "
	    "enforces the active mode for every process and tool. This section supersedes "
	    "every earlier statement about the mode in this conversation, your own included; "
	    "only a later \"[piworkfs]\" message supersedes it.");
	char *want = NULL;
	cr_assert(
	    asprintf(&want,
		     "[piworkfs] The person switched the mode from design to build during this "
		     "task. This message supersedes the mode section of the system prompt.\n%s"
		     "\n\n# Mode: build\nBuild.",
		     ann) > 0);
	expect_text(pw_text_switch_announcement(b, "# Mode: build\nBuild.\n", "design", false),
		    want);
	free(want);
	/* The hooks' lead after a switch: a session has no system prompt of ours to supersede. */
	expect_text(pw_text_session_switch("design", "build"),
		    "[piworkfs] The person switched the mode from design to build during this "
		    "session. This message supersedes every earlier piworkfs mode section.");
	free(ann);
	json_decref(b);
}

Test(agent_text, plan_line)
{
	json_t *st = obj("{\"active\":{\"name\":\"cache\",\"done\":1,\"total\":3,\"next\":{"
			 "\"task\":2,\"text\":\"Invalidate it\"}},\"line\":\"x\"}");
	json_t *done =
	    obj("{\"active\":{\"name\":\"cache\",\"done\":3,\"total\":3,\"next\":null}}");
	json_t *none = obj("{\"active\":null,\"line\":null}");

	expect_text(pw_text_with_plan("A", st),
		    "A\n[piworkfs] Active plan cache: 1/3 done; next: task 2, \"Invalidate it\". "
		    "Mark it with the plan_done tool when it is done.");
	expect_text(pw_text_with_plan("A", done), "A\n[piworkfs] Active plan cache: 3/3 done.");
	expect_text(pw_text_with_plan("A", none), "A");
	expect_text(pw_text_with_plan("A", NULL), "A");
	json_decref(st), json_decref(done), json_decref(none);
}

static char *line(const char *refusal, json_t *pol, const char *hint, const char *project,
		  const char *agent, pw_text_ask ask)
{
	json_t *r = obj(refusal);
	char *w = pw_text_writable(pol), *l;

	l = pw_text_refusal_line(r, w, hint, project, agent, ask);
	free(w);
	json_decref(r);
	return l;
}

Test(agent_text, refusal_lines)
{
	json_t *d = design(), *b = build(), *p = plan();
	const char *hack = "{\"path\":\"src/hack.c\",\"op\":\"create\",\"errno\":\"EACCES\","
			   "\"reason\":\"no-allow\",\"mode\":\"design\",\"rule\":null}";

	expect_text(
	    line(hack, d, "build", NULL, "Pi", PW_TEXT_ASK_WORDS),
	    "[piworkfs] Refused: create src/hack.c (EACCES) in design mode, because no allow "
	    "rule of design matches it. Writable in design: docs/design/**, "
	    "styles/tokens.css. To create it, ask the person to run `piworkfs mode build` "
	    "outside Pi; don't work around the refusal.");
	/* Inside `piworkfs run` the agent asks itself; an MCP client has a tool for it. */
	expect_text(
	    line(hack, d, "build", NULL, "Pi", PW_TEXT_ASK_COMMAND),
	    "[piworkfs] Refused: create src/hack.c (EACCES) in design mode, because no allow "
	    "rule of design matches it. Writable in design: docs/design/**, "
	    "styles/tokens.css. To create it, ask the person for mode build: run `piworkfs "
	    "mode build --reason \"why you need it\"`, which asks them and waits for their "
	    "answer; don't work around the refusal.");
	expect_text(
	    line(hack, d, "build", NULL, "Claude Code", PW_TEXT_ASK_TOOL),
	    "[piworkfs] Refused: create src/hack.c (EACCES) in design mode, because no allow "
	    "rule of design matches it. Writable in design: docs/design/**, "
	    "styles/tokens.css. To create it, call piworkfs_request_mode with mode build "
	    "(the person decides), or ask the person to run `piworkfs mode build` outside "
	    "Claude Code; don't work around the refusal.");
	expect_text(
	    line("{\"path\":\".git/config\",\"op\":\"open-write\",\"errno\":\"EACCES\",\"reason\":"
		 "\"protected\",\"mode\":\"build\",\"rule\":{\"kind\":\"protected\",\"pattern\":\"."
		 "git/"
		 "config\",\"file\":\"(built-in)\",\"layer\":\"default\"}}",
		 b, "off", NULL, "Pi", PW_TEXT_ASK_WORDS),
	    "[piworkfs] Refused: write .git/config (EACCES) in build mode, because it is protected "
	    "(rule \".git/config\", built-in). Writable in build: everything except protected "
	    "paths "
	    "(.git/hooks, .git/config, .piworkfs). Only mode off allows it: if it truly has to "
	    "change, ask the person to change it themselves.");
	expect_text(
	    line(
		"{\"path\":\"keys/a.pem\",\"op\":\"unlink\",\"errno\":\"EACCES\",\"reason\":\"deny-"
		"rule\",\"mode\":\"build\",\"rule\":{\"kind\":\"deny\",\"pattern\":\"*.pem\","
		"\"file\":"
		"\"/p/.piworkfs/modes/build.md\",\"line\":9}}",
		b, NULL, "/p", "Pi", PW_TEXT_ASK_WORDS),
	    "[piworkfs] Refused: delete keys/a.pem (EACCES) in build mode, because the deny rule "
	    "\"*.pem\" (.piworkfs/modes/build.md:9) matches it. Writable in build: everything "
	    "except "
	    "protected paths (.git/hooks, .git/config, .piworkfs). No mode allows it; tell the "
	    "person what you needed instead of working around it.");
	expect_text(
	    line("{\"path\":\"secrets/x\",\"op\":\"read\",\"errno\":\"ENOENT\",\"reason\":"
		 "\"hidden\",\"mode\":\"plan\",\"rule\":{\"kind\":\"hide\",\"pattern\":"
		 "\"secrets/\"}}",
		 p, NULL, NULL, "Pi", PW_TEXT_ASK_WORDS),
	    "[piworkfs] secrets/x was hidden in plan mode (ENOENT): it is hidden (rule "
	    "\"secrets/\", built-in). It does not exist in the view; don't look for another "
	    "way to it.");
	expect_text(
	    line("{\"path\":\"a\",\"op\":\"write\",\"errno\":\"EROFS\",\"reason\":\"read-"
		 "only\",\"mode\":\"plan\",\"rule\":null}",
		 p, "build", NULL, "Pi", PW_TEXT_ASK_WORDS),
	    "[piworkfs] Refused: write a (EROFS) in plan mode, because plan keeps the project "
	    "read-only. Writable in plan: only the plans in docs/plans/ (not approved ones). "
	    "To write it, ask the person to run `piworkfs mode build` outside Pi; don't work "
	    "around the refusal.");
	expect_text(
	    line("{\"path\":\"docs/plans/"
		 "cache.md\",\"op\":\"write\",\"errno\":\"EACCES\",\"reason\":"
		 "\"protected\",\"mode\":\"build\",\"rule\":{\"kind\":\"protected\",\"pattern\":\"/"
		 "docs/plans/cache.md\",\"file\":\"(approved plan)\",\"layer\":\"default\"}}",
		 b, "off", NULL, "Gemini CLI", PW_TEXT_ASK_TOOL),
	    "[piworkfs] Refused: write docs/plans/cache.md (EACCES) in build mode, because it is "
	    "an "
	    "approved plan, read-only until the person reopens it. Writable in build: everything "
	    "except protected paths (.git/hooks, .git/config, .piworkfs). Work to it, don't change "
	    "it: if it must change, ask the person to run `piworkfs plan reopen cache` outside "
	    "Gemini CLI.");
	expect_text(
	    pw_text_more_line(1, "Pi"),
	    "[piworkfs] ... and 1 more refused path (run `piworkfs log --denied` outside Pi to "
	    "see them).");
	expect_text(
	    pw_text_more_line(3, "Pi"),
	    "[piworkfs] ... and 3 more refused paths (run `piworkfs log --denied` outside Pi "
	    "to see them).");
	json_decref(d), json_decref(b), json_decref(p);
}

Test(agent_text, lane)
{
	json_t *laned = build(), *d = design(), *p = plan();
	json_t *lane = obj("[\"src/a/**\",\"docs/design\"]");

	json_object_set(laned, "lane", lane);
	char *a = pw_text_announcement(laned, false);
	cr_assert_not_null(a);
	cr_expect(strstr(a, " Lane of this run (--only): src/a/**, docs/design; writes outside it "
			    "are refused in every mode, whatever the mode allows."),
		  "%s", a);
	cr_expect_null(strstr(a, "No restrictions"), "%s", a);
	free(a);
	json_object_set_new(d, "lane", obj("[\"docs/design/a/**\"]"));
	expect_text(pw_text_writable(d),
		    "docs/design/**, styles/tokens.css, within this run's lane: docs/design/a/**");
	/* A mode that writes nothing says so, lane or not. */
	json_object_set_new(p, "writes_nothing", json_true());
	json_object_set_new(p, "lane", obj("[\"x\"]"));
	expect_text(pw_text_writable(p), "nothing");
	expect_text(
	    line("{\"path\":\"src/b.c\",\"op\":\"create\",\"errno\":\"EACCES\",\"reason\":"
		 "\"outside-lane\",\"mode\":\"build\",\"rule\":null}",
		 laned, NULL, NULL, "Pi", PW_TEXT_ASK_WORDS),
	    "[piworkfs] Refused: create src/b.c (EACCES) in build mode, because it is outside "
	    "this run's lane. Writable in build: everything except protected paths "
	    "(.git/hooks, .git/config, .piworkfs), within this run's lane: src/a/**, "
	    "docs/design. The lane holds in every mode: leave the path to the agent whose lane "
	    "it is, or tell the person what you needed; don't work around the refusal.");
	json_decref(laned), json_decref(d), json_decref(p), json_decref(lane);
}

Test(agent_text, the_narrowest_mode_first_off_last)
{
	json_t *modes = obj(
	    "[{\"name\":\"build\",\"protect\":true,\"rules\":[{\"kind\":\"allow\",\"pattern\":\"**"
	    "\"}]},"
	    "{\"name\":\"design\",\"protect\":true,\"tokens\":true,\"rules\":[{\"kind\":\"allow\","
	    "\"pattern\":\"docs/design/**\"},{\"kind\":\"allow\",\"pattern\":\"docs/design/\"}]},"
	    "{\"name\":\"off\",\"protect\":false,\"rules\":[{\"kind\":\"allow\",\"pattern\":\"**\"}"
	    "]},"
	    "{\"name\":\"plan\",\"protect\":true,\"rules\":[]},"
	    "{\"name\":\"docs\",\"protect\":true,\"rules\":[{\"kind\":\"allow\",\"pattern\":\"docs/"
	    "**\"}]}]");
	json_t *ranked = pw_text_rank_modes(modes);
	char *s = json_dumps(ranked, JSON_COMPACT);

	cr_expect_str_eq(s, "[\"plan\",\"docs\",\"design\",\"build\",\"off\"]");
	free(s);
	json_decref(ranked), json_decref(modes);
}

Test(agent_text, a_blocked_command)
{
	json_t *denied =
	    obj("{\"status\":\"denied\",\"access\":\"write\",\"kind\":\"path\",\"path\":"
		"\"src/a\",\"heuristic\":false,\"errno\":\"EACCES\",\"reason\":\"no-"
		"allow\",\"op\":\"open-write\"}");
	json_t *res =
	    json_pack("{s:s,s:b,s:[O]}", "verdict", "denied", "heuristic", 0, "targets", denied);
	json_t *certain = pw_text_certain_refusals(res), *d = design();

	cr_assert_eq(json_array_size(certain), 1);
	/* Never on the heuristic, a read, a command or an unresolved target. */
	static const char *const not_certain[] = {
	    "{\"verdict\":\"denied\",\"heuristic\":true,\"targets\":[{\"status\":\"denied\","
	    "\"access\":\"write\",\"kind\":\"path\",\"path\":\"src/a\",\"heuristic\":true}]}",
	    "{\"verdict\":\"unknown\",\"heuristic\":false,\"targets\":[{\"status\":\"unknown\","
	    "\"kind\":\"command\"}]}",
	    "{\"verdict\":\"denied\",\"heuristic\":false,\"targets\":[{\"status\":\"denied\","
	    "\"access\":\"read\",\"kind\":\"path\",\"path\":\"s\",\"reason\":\"hidden\"}]}",
	    "{\"verdict\":\"denied\",\"heuristic\":false,\"targets\":[{\"status\":\"denied\","
	    "\"access\":\"write\",\"kind\":\"raw\",\"path\":\"s\"}]}",
	    "{\"verdict\":\"denied\",\"heuristic\":false,\"targets\":\"nonsense\"}",
	};
	for (size_t i = 0; i < ELEMENTSOF(not_certain); i++) {
		json_t *r = obj(not_certain[i]), *c = pw_text_certain_refusals(r);
		cr_expect_eq(json_array_size(c), 0, "%s", not_certain[i]);
		json_decref(c), json_decref(r);
	}
	json_t *refusal = pw_text_target_refusal(json_array_get(certain, 0), "design");
	char *w = pw_text_writable(d);
	char *l = pw_text_refusal_line(refusal, w, "build", NULL, "Pi", PW_TEXT_ASK_WORDS);
	json_t *lines = json_pack("[s]", l);
	expect_text(
	    pw_text_bash_block("design", lines),
	    "[piworkfs] The command was not run: piworkfs checked it first and it would "
	    "write where design mode refuses. Nothing ran and nothing changed. Rewrite the "
	    "command to write only where design allows.\n[piworkfs] Refused: write src/a "
	    "(EACCES) in design mode, because no allow rule of design matches it. Writable in "
	    "design: docs/design/**, styles/tokens.css. To write it, ask the person to run "
	    "`piworkfs mode build` outside Pi; don't work around the refusal.");
	expect_text(pw_text_bash_warn(certain, "plan"),
		    "[piworkfs] Before it ran, piworkfs found that this command writes where plan "
		    "mode refuses: src/a.");
	free(w), free(l);
	json_decref(lines), json_decref(refusal), json_decref(certain), json_decref(res);
	json_decref(denied), json_decref(d);
}

Test(agent_text, an_overlapping_write_is_told)
{
	json_t *one = obj("[{\"mountpoint\":\"/run/u/piworkfs/run-x/view\"}]");
	json_t *two = obj("[{\"mountpoint\":\"/a\",\"changeset\":4},{\"mountpoint\":\"/b\","
			  "\"changeset\":7}]");

	expect_text(
	    pw_text_overlap_line("src/a.c", one),
	    "[piworkfs] Note: src/a.c was also changed by another live view of the project, "
	    "the view at /run/u/piworkfs/run-x/view, in its current work: your write went "
	    "through, but check that it did not overwrite another agent's work (`piworkfs "
	    "changes` shows both).");
	expect_text(
	    pw_text_overlap_line("src/a.c", two),
	    "[piworkfs] Note: src/a.c was also changed by another live view of the project, "
	    "the view at /a (its change set 4) and the view at /b (its change set 7), in its "
	    "current work: your write went through, but check that it did not overwrite "
	    "another agent's work (`piworkfs changes` shows both).");
	json_decref(one), json_decref(two);
}

/* Objects from a client may hold anything: a text is still written, never a crash. */
Test(agent_text, hostile_objects)
{
	json_t *weird = obj("{\"mode\":7,\"rules\":[1,{\"kind\":\"allow\",\"pattern\":2},{\"kind\":"
			    "\"hide\",\"pattern\":\"h\"}],\"lane\":[3,\"l\"],\"plans_dir\":[]}");
	json_t *r = obj("{\"path\":[],\"op\":{},\"errno\":5,\"reason\":null,\"rule\":\"x\"}");
	json_t *plan = obj("{\"active\":{\"name\":1,\"next\":{\"text\":[]}}}");
	char *s;

	expect_text(
	    pw_text_announcement(weird, false),
	    "[piworkfs] Active mode: ?. Writable: . Read-only: everything else. Lane of this "
	    "run (--only): l; writes outside it are refused in every mode, whatever the mode "
	    "allows. Hidden (absent from the view): h.");
	s = pw_text_refusal_line(r, NULL, NULL, NULL, NULL, PW_TEXT_ASK_TOOL);
	cr_expect_str_eq(s,
			 "[piworkfs] Refused: write . in the active mode, because the mode "
			 "refused it (?). Writable in the active: ?. No mode allows it; tell the "
			 "person what you needed instead of working around it.");
	free(s);
	expect_text(pw_text_with_plan(NULL, plan),
		    "\n[piworkfs] Active plan ?: 0/0 done; next: task 0, \"\". Mark it with the "
		    "plan_done tool when it is done.");
	json_decref(weird), json_decref(r), json_decref(plan);
}

/* What the extension adds to every request in each bundled mode (the mode section and the
 * announcement, with an active plan's line), by Pi's own estimate of tokens (ceil(chars /
 * 4)): under 400, as the policies a view compiles from the bundled modes have them. */
Test(agent_text, every_bundled_mode_costs_under_400_tokens)
{
	pw_load_opts o = {.bundled_dir = SOURCE_MODES, .global_dir = TOKENS};
	pw_modeset *ms = NULL;
	json_t *plan =
	    obj("{\"active\":{\"name\":\"cache-config\",\"done\":3,\"total\":7,\"next\":{"
		"\"task\":4,\"text\":\"Invalidate the cache on reload and test it in "
		"test_reload.py\"}}}");

	cr_assert_eq(pw_modeset_load(&o, &ms), 0);
	cr_assert_geq(pw_modeset_count(ms), 6);
	for (size_t i = 0; i < pw_modeset_count(ms); i++) {
		const char *name = pw_modeset_get(ms, i)->name;
		pw_policy *p = NULL;
		cr_assert_eq(pw_policy_compile(ms, name, &p), 0, "%s", name);
		json_t *pol = pw_report_policy(p);
		char *sec = pw_text_system_section(name, pw_policy_body(p));
		char *ann = pw_text_announcement(pol, false);
		char *all = pw_text_with_plan(ann, plan);
		size_t tokens = (strlen(sec) + 3) / 4 + (strlen(all) + 3) / 4;
		if (getenv("PW_BUDGET_REPORT"))
			fprintf(stderr, "%s %zu\n", name, tokens);
		cr_expect_lt(tokens, 400, "%s: %zu tokens", name, tokens);
		free(sec), free(ann), free(all);
		json_decref(pol);
		pw_policy_unref(p);
	}
	json_decref(plan);
	pw_modeset_free(ms);
}
