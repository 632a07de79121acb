/* SPDX-License-Identifier: MIT */
/*
 * The texts an agent reads (agent_text.h), written once: the Pi extension asks the daemon
 * for them (fs/ctl/methods.c, text.*), `piworkfs mcp` and `piworkfs hook` call them here.
 * They began as integrations/pi/src/text.ts, ported byte for byte; that file now holds
 * only what the person reads in Pi.
 */
#include "agent_text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define TAG PW_TEXT_TAG

/* How to proceed after a refusal by the lane: no mode switch helps. */
#define LANE_HOW                                                                                   \
	"The lane holds in every mode: leave the path to the agent whose lane it is, or tell "     \
	"the person what you needed; don't work around the refusal."

/* Said when the view's originals store is full (status.store_full, issue 27). */
#define STORE_FULL                                                                                 \
	" Undo is incomplete: the originals store is full, so some changes from now on are not "   \
	"kept and cannot be undone."

/* ---- reading the JSON --------------------------------------------------------------- */

static const char *jstr(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* ---- the policy in short --------------------------------------------------------------- */

static bool has_string(json_t *arr, const char *s)
{
	size_t i;
	json_t *v;

	json_array_foreach(arr, i, v) if (streq_ptr(json_string_value(v), s)) return true;
	return false;
}

/* The patterns of the rules of POLICY whose kind is K1 or K2 (NULL), without repeats, in
 * order. */
static json_t *patterns(json_t *policy, const char *k1, const char *k2)
{
	json_t *out = json_array(), *r;
	size_t i;

	json_array_foreach(json_object_get(policy, "rules"), i, r)
	{
		const char *kind = jstr(r, "kind"), *pat = jstr(r, "pattern");
		if (!pat || !(streq_ptr(kind, k1) || (k2 && streq_ptr(kind, k2))))
			continue;
		if (!has_string(out, pat))
			json_array_append_new(out, json_string(pat));
	}
	return out;
}

/* Allow and token patterns; a "dir/" is dropped where the same dir with "**" is listed. */
static json_t *writable_patterns(json_t *policy)
{
	json_t *w = patterns(policy, "allow", "token"), *out = json_array(), *v;
	size_t i;

	json_array_foreach(w, i, v)
	{
		const char *p = json_string_value(v);
		size_t len = strlen(p);
		if (len && p[len - 1] == '/') {
			_cleanup_free_ char *star = NULL;
			if (asprintf(&star, "%s**", p) >= 0 && has_string(w, star))
				continue;
		}
		json_array_append(out, v);
	}
	json_decref(w);
	return out;
}

/* The strings of ARR joined by ", " (anything else in it is skipped). */
static void put_joined(FILE *f, json_t *arr)
{
	size_t i, n = 0;
	json_t *v;

	json_array_foreach(arr, i, v)
	{
		if (json_is_string(v))
			fprintf(f, "%s%s", n++ ? ", " : "", json_string_value(v));
	}
}

/* BEFORE, the strings of ARR joined, then AFTER, when ARR holds any; nothing otherwise. */
static void put_list(FILE *f, const char *before, json_t *arr, const char *after)
{
	if (!json_array_size(arr))
		return;
	fputs(before, f);
	put_joined(f, arr);
	fputs(after, f);
}

static bool policy_writes_nothing(json_t *policy)
{
	return json_is_true(json_object_get(policy, "fail_closed")) ||
	       json_is_true(json_object_get(policy, "writes_nothing"));
}

/* Does the mode write its plans folder and nothing else (plan)?
 * Its plans folder, or NULL. */
static const char *writes_only_plans(json_t *policy)
{
	const char *dir = jstr(policy, "plans_dir");
	_cleanup_free_ char *own = NULL;
	size_t i;
	json_t *v, *w;
	bool only = true;

	if (!dir || policy_writes_nothing(policy) || asprintf(&own, "/%s/**", dir) < 0)
		return NULL;
	w = writable_patterns(policy);
	json_array_foreach(w, i, v) only = only && streq_ptr(json_string_value(v), own);
	json_decref(w);
	return only ? dir : NULL;
}

/* The view's lane (policy "lane", `run --only`), or NULL when it has none. */
static json_t *lane_of(json_t *policy)
{
	json_t *lane = json_object_get(policy, "lane");

	return json_array_size(lane) ? lane : NULL;
}

/* The lane sentence of the announcement, where the mode writes anything. */
static void put_lane_sentence(FILE *f, json_t *policy)
{
	json_t *lane = lane_of(policy);

	if (!lane)
		return;
	fputs(" Lane of this run (--only): ", f);
	put_joined(f, lane);
	fputs("; writes outside it are refused in every mode, whatever the mode allows.", f);
}

/* What the mode writes, in words, written to F, lane aside. */
static void put_base_writable(FILE *f, json_t *policy)
{
	json_t *w, *prot, *deny;
	const char *plans;

	if (policy_writes_nothing(policy)) {
		fputs("nothing", f);
		return;
	}
	if ((plans = writes_only_plans(policy))) {
		fprintf(f, "only the plans in %s/ (not approved ones)", plans);
		return;
	}
	w = writable_patterns(policy);
	if (json_array_size(w) == 0) {
		fputs("nothing", f);
	} else if (!has_string(w, "**")) {
		put_joined(f, w);
	} else {
		prot = patterns(policy, "protected", NULL);
		deny = patterns(policy, "deny", NULL);
		if (!json_array_size(prot) && !json_array_size(deny)) {
			fputs("everything", f);
		} else {
			fputs("everything except ", f);
			put_list(f, "protected paths (", prot, ")");
			put_list(f,
				 json_array_size(prot) ? " and denied paths (" : "denied paths (",
				 deny, ")");
		}
		json_decref(prot);
		json_decref(deny);
	}
	json_decref(w);
}

/* What the mode writes, and the lane that narrows it. */
static void put_writable(FILE *f, json_t *policy)
{
	put_base_writable(f, policy);
	if (lane_of(policy) && !policy_writes_nothing(policy)) {
		fputs(", within this run's lane: ", f);
		put_joined(f, lane_of(policy));
	}
}

char *pw_text_writable(json_t *policy)
{
	pw_memtext b;

	if (!pw_memtext_open(&b))
		return NULL;
	put_writable(b.f, policy);
	return pw_memtext_take(&b);
}

static char *base_writable_text(json_t *policy)
{
	pw_memtext b;

	if (!pw_memtext_open(&b))
		return NULL;
	put_base_writable(b.f, policy);
	return pw_memtext_take(&b);
}

/* The announcement of POLICY's rules, written to F. */
static void put_rules(FILE *f, json_t *policy)
{
	json_t *hide = patterns(policy, "hide", NULL);
	const char *mode = jstr(policy, "mode");

	fprintf(f, "%s Active mode: %s.", TAG, mode ? mode : "?");
	if (json_is_true(json_object_get(policy, "fail_closed"))) {
		const char *why = jstr(policy, "fail_reason");
		fprintf(f, " Failing closed (%s): nothing is writable until the person fixes it.",
			why ? why : "the mode's file is broken");
	} else if (json_is_true(json_object_get(policy, "writes_nothing"))) {
		fputs(" Read-only: every write in the project fails (EROFS).", f);
	} else if (writes_only_plans(policy)) {
		fprintf(f,
			" Read-only: every write in the project fails (EROFS), but the plan files "
			"in %s/ that are not approved.",
			writes_only_plans(policy));
		put_lane_sentence(f, policy);
	} else {
		json_t *w = writable_patterns(policy);
		if (has_string(w, "**")) {
			_cleanup_free_ char *t = base_writable_text(policy);
			if (streq_ptr(t, "everything") && !lane_of(policy))
				fputs(" No restrictions: everything in the project is writable.",
				      f);
			else
				fprintf(f, " Writable: %s.", t ? t : "?");
		} else {
			json_t *deny = patterns(policy, "deny", NULL);
			json_t *prot = patterns(policy, "protected", NULL);
			fputs(" Writable: ", f);
			put_joined(f, w);
			fputs(". Read-only: everything else.", f);
			put_list(f, " Denied: ", deny, ".");
			put_list(f, " Protected: ", prot, ".");
			json_decref(deny);
			json_decref(prot);
		}
		json_decref(w);
		put_lane_sentence(f, policy);
	}
	put_list(f, " Hidden (absent from the view): ", hide, ".");
	json_decref(hide);
}

char *pw_text_announcement(json_t *policy, bool store_full)
{
	pw_memtext b;

	if (!pw_memtext_open(&b))
		return NULL;
	put_rules(b.f, policy);
	if (store_full)
		fputs(STORE_FULL, b.f);
	return pw_memtext_take(&b);
}

/* BODY without leading and trailing white space (JavaScript's trim, for ASCII). */
static void put_trimmed(FILE *f, const char *body)
{
	const char *s = body, *e;

	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\f' || *s == '\v')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r' ||
			 e[-1] == '\f' || e[-1] == '\v'))
		e--;
	fwrite(s, 1, (size_t)(e - s), f);
}

static bool blank(const char *s)
{
	for (; s && *s; s++)
		if (!strchr(" \t\n\r\f\v", *s))
			return false;
	return true;
}

/* "\n\nBODY" trimmed, or nothing for a blank body. */
static void put_body(FILE *f, const char *body)
{
	if (blank(body))
		return;
	fputs("\n\n", f);
	put_trimmed(f, body);
}

char *pw_text_switch_announcement(json_t *policy, const char *body, const char *from,
				  bool store_full)
{
	const char *mode = jstr(policy, "mode");
	pw_memtext b;

	if (!pw_memtext_open(&b))
		return NULL;
	fprintf(b.f,
		"%s The person switched the mode from %s to %s during this task. This message "
		"supersedes the mode section of the system prompt.\n",
		TAG, from ? from : "?", mode ? mode : "?");
	put_rules(b.f, policy);
	if (store_full)
		fputs(STORE_FULL, b.f);
	put_body(b.f, body);
	return pw_memtext_take(&b);
}

char *pw_text_session_switch(const char *from, const char *mode)
{
	char *s = NULL;

	if (asprintf(&s,
		     "%s The person switched the mode from %s to %s during this session. This "
		     "message supersedes every earlier piworkfs mode section.",
		     TAG, from ? from : "?", mode ? mode : "?") < 0)
		return NULL;
	return s;
}

char *pw_text_system_section(const char *mode, const char *body)
{
	pw_memtext b;

	if (!pw_memtext_open(&b))
		return NULL;
	fprintf(
	    b.f,
	    "# piworkfs mode: %s\n\n"
	    "The project is a piworkfs view: the filesystem enforces the active mode for every "
	    "process and tool. This section supersedes every earlier statement about the mode in "
	    "this conversation, your own included; only a later \"%s\" message supersedes it.",
	    mode ? mode : "?", TAG);
	put_body(b.f, body);
	return pw_memtext_take(&b);
}

char *pw_text_with_plan(const char *text, json_t *plan)
{
	json_t *a = json_object_get(plan, "active"), *next = json_object_get(a, "next");
	const char *name = jstr(a, "name");
	pw_memtext b;

	if (!pw_memtext_open(&b))
		return NULL;
	fputs(text ? text : "", b.f);
	if (json_is_object(a)) {
		fprintf(b.f, "\n%s Active plan %s: %lld/%lld done", TAG, name ? name : "?",
			(long long)json_integer_value(json_object_get(a, "done")),
			(long long)json_integer_value(json_object_get(a, "total")));
		if (json_is_object(next))
			fprintf(
			    b.f,
			    "; next: task %lld, \"%s\". Mark it with the plan_done tool when it "
			    "is done.",
			    (long long)json_integer_value(json_object_get(next, "task")),
			    jstr(next, "text") ? jstr(next, "text") : "");
		else
			fputs(".", b.f);
	}
	return pw_memtext_take(&b);
}

/* ---- refusals ------------------------------------------------------------------------ */

static const char *const op_words[][2] = {
    {"create", "create"},
    {"mknod", "create"},
    {"mkdir", "create the directory"},
    {"symlink", "create the symlink"},
    {"link", "link"},
    {"unlink", "delete"},
    {"rmdir", "remove the directory"},
    {"rename", "rename"},
    {"open-write", "write"},
    {"write", "write"},
    {"truncate", "truncate"},
    {"chmod", "chmod"},
    {"chown", "chown"},
    {"utimens", "set the times of"},
    {"setxattr", "set an xattr of"},
    {"removexattr", "remove an xattr of"},
    {"fallocate", "allocate space in"},
    {"copy-range", "write"},
    {"access-write", "write"},
    {"lookup", "look up"},
    {"read", "read"},
};

static const char *op_word(const char *op)
{
	for (size_t i = 0; i < ELEMENTSOF(op_words); i++)
		if (streq_ptr(op, op_words[i][0]))
			return op_words[i][1];
	return op ? op : "write";
}

/* Where RULE comes from: "built-in", or FILE:LINE, FILE relative to PROJECT inside it. */
static void put_origin(FILE *f, json_t *rule, const char *project)
{
	const char *file = jstr(rule, "file");
	json_int_t line = json_integer_value(json_object_get(rule, "line"));
	size_t plen = project ? strlen(project) : 0;

	if (!file || streq(file, "(built-in)") || streq_ptr(jstr(rule, "layer"), "default")) {
		fputs("built-in", f);
		return;
	}
	if (plen && strncmp(file, project, plen) == 0 && file[plen] == '/')
		file += plen + 1;
	if (line)
		fprintf(f, "%s:%lld", file, (long long)line);
	else
		fputs(file, f);
}

/* Why it was refused, as a clause: "no allow rule of design matches it". */
static void put_because(FILE *f, json_t *r, const char *project)
{
	const char *mode = jstr(r, "mode"), *reason = jstr(r, "reason");
	json_t *rule = json_object_get(r, "rule");
	const char *pat = json_is_object(rule) ? jstr(rule, "pattern") : NULL;

	if (!mode)
		mode = "the active mode";
	if (streq_ptr(reason, "no-allow")) {
		fprintf(f, "no allow rule of %s matches it", mode);
	} else if (streq_ptr(reason, "read-only")) {
		fprintf(f, "%s keeps the project read-only", mode);
	} else if (streq_ptr(reason, "protected") && json_is_object(rule) &&
		   streq_ptr(jstr(rule, "file"), "(approved plan)")) {
		fputs("it is an approved plan, read-only until the person reopens it", f);
	} else if (streq_ptr(reason, "protected") || streq_ptr(reason, "hidden")) {
		const char *what = streq(reason, "protected") ? "protected" : "hidden";
		if (pat) {
			fprintf(f, "it is %s (rule \"%s\", ", what, pat);
			put_origin(f, rule, project);
			fputs(")", f);
		} else {
			fputs(streq(what, "protected") ? "it is a protected path" : "it is hidden",
			      f);
		}
	} else if (streq_ptr(reason, "deny-rule")) {
		if (pat) {
			fprintf(f, "the deny rule \"%s\" (", pat);
			put_origin(f, rule, project);
			fputs(") matches it", f);
		} else {
			fputs("a deny rule matches it", f);
		}
	} else if (streq_ptr(reason, "fail-closed")) {
		fprintf(f, "the file of mode %s is broken, so nothing is writable", mode);
	} else if (streq_ptr(reason, "outside")) {
		fputs("it is outside the project", f);
	} else if (streq_ptr(reason, "outside-lane")) {
		fputs("it is outside this run's lane", f);
	} else if (jstr(r, "message")) {
		fputs(jstr(r, "message"), f);
	} else {
		fprintf(f, "the mode refused it (%s)", reason ? reason : "?");
	}
}

int pw_text_ask_from_name(const char *name, pw_text_ask *ret)
{
	static const char *const names[] = {
	    [PW_TEXT_ASK_WORDS] = "words",
	    [PW_TEXT_ASK_COMMAND] = "command",
	    [PW_TEXT_ASK_TOOL] = "tool",
	};

	for (size_t i = 0; i < ELEMENTSOF(names); i++) {
		if (streq_ptr(name, names[i])) {
			*ret = (pw_text_ask)i;
			return 0;
		}
	}
	return -EINVAL;
}

/* How to get a looser mode, HINT_MODE, that would allow OP: the sentence ASK asks for. */
static void put_ask(FILE *f, const char *op, const char *hint_mode, const char *agent,
		    pw_text_ask ask)
{
	switch (ask) {
	case PW_TEXT_ASK_COMMAND:
		fprintf(
		    f,
		    "To %s it, ask the person for mode %s: run `piworkfs mode %s --reason \"why "
		    "you need it\"`, which asks them and waits for their answer; don't work "
		    "around the refusal.",
		    op, hint_mode, hint_mode);
		return;
	case PW_TEXT_ASK_TOOL:
		fprintf(
		    f,
		    "To %s it, call piworkfs_request_mode with mode %s (the person decides), or "
		    "ask the person to run `piworkfs mode %s` outside %s; don't work around the "
		    "refusal.",
		    op, hint_mode, hint_mode, agent);
		return;
	case PW_TEXT_ASK_WORDS:
		break;
	}
	fprintf(f,
		"To %s it, ask the person to run `piworkfs mode %s` outside %s; don't work around "
		"the refusal.",
		op, hint_mode, agent);
}

char *pw_text_refusal_line(json_t *r, const char *writable, const char *hint_mode,
			   const char *project, const char *agent, pw_text_ask ask)
{
	const char *mode = jstr(r, "mode"), *err = jstr(r, "errno"), *path = jstr(r, "path");
	const char *op = op_word(jstr(r, "op")), *reason = jstr(r, "reason");
	pw_memtext b;

	if (!mode)
		mode = "the active";
	if (!path || !path[0])
		path = ".";
	if (!agent)
		agent = "the agent";
	if (!pw_memtext_open(&b))
		return NULL;
	if (streq_ptr(reason, "hidden")) {
		fprintf(b.f, "%s %s was hidden in %s mode", TAG, path, mode);
		if (err)
			fprintf(b.f, " (%s)", err);
		fputs(": ", b.f);
		put_because(b.f, r, project);
		fputs(". It does not exist in the view; don't look for another way to it.", b.f);
		return pw_memtext_take(&b);
	}
	fprintf(b.f, "%s Refused: %s %s", TAG, op, path);
	if (err)
		fprintf(b.f, " (%s)", err);
	fprintf(b.f, " in %s mode, because ", mode);
	put_because(b.f, r, project);
	fprintf(b.f, ". Writable in %s: %s. ", mode, writable ? writable : "?");
	json_t *rule = json_object_get(r, "rule");
	if (streq_ptr(reason, "protected") && json_is_object(rule) &&
	    streq_ptr(jstr(rule, "file"), "(approved plan)")) {
		/* the plan's name: the file's, without its directory and .md */
		const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
		size_t n = strlen(base);
		if (n > 3 && streq(base + n - 3, ".md"))
			n -= 3;
		fprintf(b.f,
			"Work to it, don't change it: if it must change, ask the person to run "
			"`piworkfs plan reopen %.*s` outside %s.",
			(int)n, base, agent);
	} else if (streq_ptr(reason, "outside-lane"))
		fputs(LANE_HOW, b.f);
	else if (streq_ptr(hint_mode, "off") && streq_ptr(reason, "protected"))
		fputs(
		    "Only mode off allows it: if it truly has to change, ask the person to change "
		    "it themselves.",
		    b.f);
	else if (hint_mode)
		put_ask(b.f, op, hint_mode, agent, ask);
	else
		fputs(
		    "No mode allows it; tell the person what you needed instead of working around "
		    "it.",
		    b.f);
	return pw_memtext_take(&b);
}

char *pw_text_more_line(size_t n, const char *agent)
{
	char *s = NULL;

	if (asprintf(
		&s,
		"%s ... and %zu more refused path%s (run `piworkfs log --denied` outside %s to "
		"see them).",
		TAG, n, n == 1 ? "" : "s", agent ? agent : "the agent") < 0)
		return NULL;
	return s;
}

/* ---- shell commands ------------------------------------------------------------------- */

json_t *pw_text_certain_refusals(json_t *res)
{
	json_t *out = json_array(), *t;
	size_t i;

	if (!out || !streq_ptr(jstr(res, "verdict"), "denied") ||
	    json_is_true(json_object_get(res, "heuristic")))
		return out;
	json_array_foreach(json_object_get(res, "targets"), i, t)
	{
		if (streq_ptr(jstr(t, "status"), "denied") &&
		    streq_ptr(jstr(t, "access"), "write") &&
		    !json_is_true(json_object_get(t, "heuristic")) &&
		    streq_ptr(jstr(t, "kind"), "path") && jstr(t, "path"))
			json_array_append(out, t);
	}
	return out;
}

json_t *pw_text_target_refusal(json_t *t, const char *mode)
{
	const char *path = jstr(t, "path"), *op = jstr(t, "op"), *reason = jstr(t, "reason");
	json_t *err = json_object_get(t, "errno"), *rule = json_object_get(t, "rule");

	return json_pack("{s:s,s:s,s:O,s:s,s:s,s:O}", "path", path && path[0] ? path : ".", "op",
			 op && op[0] ? op : "write", "errno",
			 json_is_string(err) ? err : json_null(), "reason",
			 reason && reason[0] ? reason : "no-allow", "mode", mode ? mode : "?",
			 "rule", json_is_object(rule) ? rule : json_null());
}

char *pw_text_bash_block(const char *mode, json_t *lines)
{
	size_t i;
	json_t *l;
	pw_memtext b;

	if (!mode)
		mode = "?";
	if (!pw_memtext_open(&b))
		return NULL;
	fprintf(b.f,
		"%s The command was not run: piworkfs checked it first and it would write where "
		"%s mode refuses. Nothing ran and nothing changed. Rewrite the command to write "
		"only where %s allows.",
		TAG, mode, mode);
	json_array_foreach(lines, i, l)
	{
		if (json_is_string(l))
			fprintf(b.f, "\n%s", json_string_value(l));
	}
	return pw_memtext_take(&b);
}

char *pw_text_bash_warn(json_t *targets, const char *mode)
{
	size_t i, n = 0;
	json_t *t;
	pw_memtext b;

	if (!pw_memtext_open(&b))
		return NULL;
	fprintf(b.f,
		"%s Before it ran, piworkfs found that this command writes where %s mode "
		"refuses: ",
		TAG, mode ? mode : "?");
	json_array_foreach(targets, i, t)
	{
		if (jstr(t, "path"))
			fprintf(b.f, "%s%s", n++ ? ", " : "", jstr(t, "path"));
	}
	fputs(".", b.f);
	return pw_memtext_take(&b);
}

/* ---- overlapping writes --------------------------------------------------------------- */

char *pw_text_overlap_line(const char *path, json_t *views)
{
	size_t i, n = 0;
	json_t *o;
	pw_memtext b;

	if (!pw_memtext_open(&b))
		return NULL;
	fprintf(b.f, "%s Note: %s was also changed by another live view of the project, ", TAG,
		path ? path : "?");
	json_array_foreach(views, i, o)
	{
		json_t *set = json_object_get(o, "changeset");
		fprintf(b.f, "%sthe view at %s", n++ ? " and " : "",
			jstr(o, "mountpoint") ? jstr(o, "mountpoint") : "?");
		if (json_is_integer(set))
			fprintf(b.f, " (its change set %lld)", (long long)json_integer_value(set));
	}
	if (!n)
		fputs("the view at ?", b.f);
	fputs(", in its current work: your write went through, but check that it did not "
	      "overwrite another agent's work (`piworkfs changes` shows both).",
	      b.f);
	return pw_memtext_take(&b);
}

/* ---- choosing the mode to suggest ----------------------------------------------------- */

typedef struct ranked {
	const char *name;
	int tier, count;
} ranked;

static int ranked_cmp(const void *a, const void *b)
{
	const ranked *x = a, *y = b;

	if (x->tier != y->tier)
		return x->tier - y->tier;
	if (x->count != y->count)
		return x->count - y->count;
	return strcmp(x->name, y->name);
}

json_t *pw_text_rank_modes(json_t *modes)
{
	size_t n = json_array_size(modes), i, j;
	ranked *v = calloc(n ? n : 1, sizeof(*v));
	json_t *out = json_array(), *m, *r;

	if (!v || !out) {
		free(v);
		json_decref(out);
		return NULL;
	}
	json_array_foreach(modes, i, m)
	{
		int allows = 0;
		bool all = false;
		json_array_foreach(json_object_get(m, "rules"), j, r)
		{
			if (!streq_ptr(jstr(r, "kind"), "allow"))
				continue;
			allows++;
			all |= streq_ptr(jstr(r, "pattern"), "**");
		}
		v[i].name = jstr(m, "name") ? jstr(m, "name") : "";
		v[i].tier = json_is_false(json_object_get(m, "protect")) ? 2 : all ? 1 : 0;
		v[i].count =
		    all ? 0 : allows + (json_is_true(json_object_get(m, "tokens")) ? 1 : 0);
	}
	qsort(v, n, sizeof(*v), ranked_cmp);
	for (i = 0; i < n; i++)
		json_array_append_new(out, json_string(v[i].name));
	free(v);
	return out;
}
