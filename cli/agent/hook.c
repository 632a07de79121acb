/* SPDX-License-Identifier: MIT */
/*
 * `piworkfs hook claude`: Claude Code's hooks (its settings' "hooks", a command per event
 * that reads the event as JSON on stdin and answers JSON on stdout), so that Claude Code
 * is told what the Pi extension tells Pi:
 *
 *   SessionStart        the mode section and the announcement (additionalContext)
 *   UserPromptSubmit    the announcement, byte-stable while the mode holds; after a switch
 *                       the new mode's section too
 *   PreToolUse          Write, Edit, MultiEdit, NotebookEdit on a path the mode refuses:
 *                       denied with the refusal line before anything is written; Bash:
 *                       denied only when bash.check is certain (never on a heuristic)
 *   PostToolUse(Failure) a result that reports EACCES/EROFS gets the refusal lines; a switch
 *                       made since the last announcement is announced
 *
 * A hook never makes anything fail open or closed by itself: the view decides every write.
 * So outside a view, with a daemon that does not answer, or with input it does not
 * understand, the hook prints nothing and exits 0, and Claude Code goes on as without it.
 *
 * `piworkfs hook gemini`: Gemini CLI's hooks, the same protocol with its own names:
 *
 *   SessionStart        the mode section and the announcement (prepended to the prompt)
 *   BeforeAgent         the announcement, appended to every prompt (the section after a
 *                       switch)
 *   BeforeTool          write_file and replace on a refused path, run_shell_command when
 *                       bash.check is certain: {"decision": "deny", "reason": ...}
 *   AfterTool           a result that reports EACCES/EROFS gets the refusal lines
 *
 * Whether the mode changed since the model was last told is read from the session's
 * transcript (transcript_path): the last "# piworkfs mode: NAME" header in it is the mode
 * the model was last given in full. No state file of ours is needed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "agent.h"
#include "options.h"
#include "output.h"
#include "pw_limits.h"

#define HOOK_USAGE                                                                                 \
	"Usage: piworkfs hook claude|opencode|gemini\n"                                            \
	"\n"                                                                                       \
	"Answers one Claude Code hook event (JSON on stdin, JSON on stdout) for the view around\n" \
	"the session's directory: SessionStart and UserPromptSubmit add the mode, PreToolUse\n"    \
	"denies a file edit the mode refuses (and a shell command the pre-flight is certain\n"     \
	"would be refused) with the reason, PostToolUse and PostToolUseFailure explain a\n"        \
	"refused write. Outside a view it prints nothing. `piworkfs run -- claude` configures\n"   \
	"it; integrations/claude/README.md has the settings for a bare view. opencode's plugin\n"  \
	"(integrations/opencode) sends the same events as `hook opencode`; `hook gemini`\n"        \
	"answers Gemini CLI's SessionStart, BeforeAgent, BeforeTool and AfterTool alike\n"         \
	"(`piworkfs run -- gemini` configures it).\n"                                              \
	"\n"                                                                                       \
	"Options:\n"                                                                               \
	"  -h, --help          show this help\n"                                                   \
	"\n"                                                                                       \
	"Examples:\n"                                                                              \
	"  echo '{\"hook_event_name\":\"SessionStart\",\"cwd\":\".\"}' | piworkfs hook claude\n"   \
	"\n"                                                                                       \
	"Exit status: 0 (also when there is nothing to say), 2 usage error.\n"

#define TRANSCRIPT_TAIL (4 * 1024 * 1024) /* bytes of the transcript searched for the header */
#define HEADER "# piworkfs mode: "

static json_t *read_event(void)
{
	size_t cap = 65536, len = 0;
	char *buf = malloc(cap);
	json_t *ev;

	while (buf) {
		if (len == cap) {
			char *nb = cap < PW_HOOK_INPUT_MAX ? realloc(buf, cap * 2) : NULL;
			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
		ssize_t n = read(STDIN_FILENO, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	if (!buf)
		return NULL;
	ev = json_loadb(buf, len, 0, NULL);
	free(buf);
	return json_is_object(ev) ? ev : (json_decref(ev), NULL);
}

static void answer(json_t *out)
{
	char *s = json_dumps(out, JSON_COMPACT);

	if (s)
		printf("%s\n", s);
	free(s);
	json_decref(out);
}

static void add_context(const char *event, const char *text)
{
	answer(json_pack("{s:{s:s,s:s}}", "hookSpecificOutput", "hookEventName", event,
			 "additionalContext", text));
}

/* Which agent's hook protocol: Claude Code's (opencode's plugin speaks it too) or Gemini
 * CLI's (its own event and tool names, a top-level decision). */
static bool gemini;

static void deny(const char *reason)
{
	if (gemini)
		answer(json_pack("{s:s,s:s}", "decision", "deny", "reason", reason));
	else
		answer(json_pack("{s:{s:s,s:s,s:s}}", "hookSpecificOutput", "hookEventName",
				 "PreToolUse", "permissionDecision", "deny",
				 "permissionDecisionReason", reason));
}

/* The mode the model was last given in full: the last header in the transcript, or NULL. */
static char *announced_mode(const char *transcript)
{
	_cleanup_close_ int fd = transcript ? open(transcript, O_RDONLY | O_CLOEXEC) : -1;
	struct stat st;
	char *buf, *hit = NULL, *p, *name = NULL;
	off_t from;
	ssize_t n;

	if (fd < 0 || fstat(fd, &st) < 0)
		return NULL;
	from = st.st_size > TRANSCRIPT_TAIL ? st.st_size - TRANSCRIPT_TAIL : 0;
	buf = malloc(TRANSCRIPT_TAIL + 1);
	if (!buf)
		return NULL;
	n = pread(fd, buf, TRANSCRIPT_TAIL, from);
	if (n <= 0) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	for (p = buf; (p = memmem(p, (size_t)(buf + n - p), HEADER, strlen(HEADER))); p++)
		hit = p;
	if (hit) {
		/* The name ends where the JSON string's escaped newline or quote starts. */
		hit += strlen(HEADER);
		name = strndup(hit, strcspn(hit, "\\\"\n "));
	}
	free(buf);
	return name;
}

/* The full text: the section of the mode now and its announcement; FROM, when the model was
 * told another mode before, leads with the switch. */
static char *full_text(json_t *st, const char *from)
{
	_cleanup_free_ char *sec =
	    pw_text_system_section(pw_json_str(st, "mode"), pw_json_str(st, "body"));
	_cleanup_free_ char *ann = pw_text_announcement(json_object_get(st, "policy"), false);
	_cleanup_free_ char *lead =
	    from ? pw_text_session_switch(from, pw_json_str(st, "mode")) : NULL;
	char *s = NULL;

	if (!sec || !ann || (from && !lead))
		return NULL;
	if (from && asprintf(&s, "%s\n%s\n\n%s", lead, sec, ann) < 0)
		return NULL;
	if (!from && asprintf(&s, "%s\n\n%s", sec, ann) < 0)
		return NULL;
	return s;
}

/* The mode text for EVENT: in full at the start and after a switch, else the short
 * announcement (PER_TURN) or nothing. */
static char *mode_text(const pw_agent_view *v, json_t *ev, bool start, bool per_turn)
{
	_cleanup_free_ char *told = NULL;
	json_t *st = NULL;
	char *s = NULL;

	if (pw_agent_mode(v, &st) < 0)
		return NULL;
	if (start) {
		s = full_text(st, NULL);
	} else {
		/* No header yet: SessionStart's text is not in the transcript before the first
		 * prompt, and it carries the section already. */
		told = announced_mode(pw_json_str(ev, "transcript_path"));
		if (!told)
			s = per_turn ? pw_text_announcement(json_object_get(st, "policy"), false)
				     : NULL;
		else if (!streq_ptr(told, pw_json_str(st, "mode")))
			s = full_text(st, told);
		else if (per_turn)
			s = pw_text_announcement(json_object_get(st, "policy"), false);
	}
	json_decref(st);
	return s;
}

static bool is_file_tool(const char *tool)
{
	if (gemini)
		return streq_ptr(tool, "write_file") || streq_ptr(tool, "replace");
	return streq_ptr(tool, "Write") || streq_ptr(tool, "Edit") ||
	       streq_ptr(tool, "MultiEdit") || streq_ptr(tool, "NotebookEdit");
}

static bool is_shell_tool(const char *tool)
{
	return streq_ptr(tool, gemini ? "run_shell_command" : "Bash");
}

static const char *tool_path(json_t *input)
{
	const char *p = pw_json_str(input, "file_path");

	return p ? p : pw_json_str(input, "notebook_path");
}

static char *joined(json_t *lines)
{
	size_t i, len = 1;
	json_t *l;
	char *s;

	json_array_foreach(lines, i, l) len += strlen(json_string_value(l)) + 1;
	s = calloc(1, len);
	if (!s)
		return NULL;
	json_array_foreach(lines, i, l)
	{
		if (i)
			strcat(s, "\n");
		strcat(s, json_string_value(l));
	}
	return s;
}

/* Who reads the lines ("outside Claude Code"): the agent named on the command line. */
static const char *agent = "Claude Code";

static void pre_tool_use(const pw_agent_view *v, json_t *ev, const char *cwd)
{
	const char *tool = pw_json_str(ev, "tool_name");
	json_t *input = json_object_get(ev, "tool_input");

	if (is_file_tool(tool) && tool_path(input)) {
		json_t *paths = json_pack("[s]", tool_path(input));
		json_t *lines = pw_agent_explain(v, cwd, paths, "write", NULL, agent, true);
		_cleanup_free_ char *why = json_array_size(lines) ? joined(lines) : NULL;
		if (why)
			deny(why);
		json_decref(paths);
		json_decref(lines);
	} else if (is_shell_tool(tool) && pw_json_str(input, "command")) {
		_cleanup_free_ char *why =
		    pw_agent_bash_refusal(v, "/", cwd, pw_json_str(input, "command"), agent, true);
		if (why)
			deny(why);
	}
}

/* Gemini CLI's tool_response: {llmContent (a string or parts), returnDisplay, error}. The
 * text the model reads and the error's message; not the JSON around them, whose keys
 * would be taken for paths. */
static char *gemini_result_text(json_t *resp)
{
	json_t *content = json_object_get(resp, "llmContent"), *parts = json_array(), *p;
	const char *err =
	    json_string_value(json_object_get(json_object_get(resp, "error"), "message"));
	size_t i;
	char *s;

	if (!parts)
		return NULL;
	if (json_is_string(content))
		json_array_append(parts, content);
	json_array_foreach(json_is_array(content) ? content : NULL, i, p)
	{
		if (json_is_string(json_object_get(p, "text")))
			json_array_append(parts, json_object_get(p, "text"));
	}
	if (err)
		json_array_append_new(parts, json_string(err));
	s = joined(parts);
	json_decref(parts);
	return s;
}

static void post_tool_use(const pw_agent_view *v, json_t *ev, const char *cwd, const char *event)
{
	json_t *input = json_object_get(ev, "tool_input");
	json_t *resp = json_object_get(ev, "tool_response");
	_cleanup_free_ char *text = NULL, *lines_text = NULL, *mode = NULL, *all = NULL;
	json_t *paths = json_array(), *lines = NULL;

	if (pw_json_str(ev, "error"))
		text = strdup(pw_json_str(ev, "error"));
	else if (gemini)
		text = gemini_result_text(resp);
	else if (json_is_string(resp))
		text = strdup(json_string_value(resp));
	else if (resp)
		text = json_dumps(resp, JSON_COMPACT);
	if (text && pw_agent_reports_refusal(text)) {
		if (tool_path(input))
			json_array_append_new(paths, json_string(tool_path(input)));
		pw_agent_candidate_paths(text, paths);
		lines = pw_agent_explain(v, cwd, paths, "write", NULL, agent, true);
		if (json_array_size(lines))
			lines_text = joined(lines);
	}
	mode = mode_text(v, ev, false, false); /* only after a switch */
	if (!lines_text && is_file_tool(pw_json_str(ev, "tool_name")) && tool_path(input))
		lines_text = pw_agent_overlap_note(v, cwd, tool_path(input));
	if (mode && lines_text && asprintf(&all, "%s\n%s", mode, lines_text) < 0)
		all = NULL;
	if (all || mode || lines_text)
		add_context(event, all ? all : mode ? mode : lines_text);
	json_decref(paths);
	json_decref(lines);
}

static int hook_claude(void)
{
	json_t *ev = read_event();
	const char *event = pw_json_str(ev, "hook_event_name");
	_cleanup_free_ char *cwd = NULL, *text = NULL;
	pw_agent_view v = {0};

	if (!event) {
		json_decref(ev);
		return PW_EXIT_OK; /* not an event we understand: say nothing */
	}
	cwd = pw_json_str(ev, "cwd") ? realpath(pw_json_str(ev, "cwd"), NULL) : NULL;
	if (!cwd)
		cwd = realpath(".", NULL);
	if (!cwd || pw_agent_view_open(cwd, &v) < 0) {
		json_decref(ev);
		return PW_EXIT_OK; /* outside a view, or it does not answer: Claude as without us */
	}
	if (streq(event, "SessionStart") || streq(event, "UserPromptSubmit") ||
	    streq(event, "BeforeAgent")) {
		text = mode_text(&v, ev, streq(event, "SessionStart"), true);
		if (text)
			add_context(event, text);
	} else if (streq(event, "PreToolUse") || streq(event, "BeforeTool")) {
		pre_tool_use(&v, ev, cwd);
	} else if (streq(event, "PostToolUse") || streq(event, "PostToolUseFailure") ||
		   streq(event, "AfterTool")) {
		post_tool_use(&v, ev, cwd, event);
	}
	pw_agent_view_done(&v);
	json_decref(ev);
	return PW_EXIT_OK;
}

int cmd_hook(int argc, char **argv)
{
	_cleanup_opts_ pw_opts po = {0};
	int r = pw_opts_parse(&po, "hook", argc, argv, &(pw_opts_use){.usage = HOOK_USAGE});

	if (r != PW_EXIT_GO_ON)
		return r;
	if (po.n_operands != 1 ||
	    !(streq(po.operands[0], "claude") || streq(po.operands[0], "opencode") ||
	      streq(po.operands[0], "gemini"))) {
		pw_err("hook", "expected the agent: piworkfs hook claude (or opencode, gemini)");
		return PW_EXIT_USAGE;
	}
	/* opencode's plugin (integrations/opencode) sends Claude Code's events too. */
	if (streq(po.operands[0], "opencode"))
		agent = "opencode";
	if (streq(po.operands[0], "gemini")) {
		agent = "Gemini CLI";
		gemini = true;
	}
	return hook_claude();
}
