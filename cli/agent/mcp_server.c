/* SPDX-License-Identifier: MIT */
/*
 * `piworkfs mcp`: a Model Context Protocol server on stdio, so that any agent with an MCP
 * client (Claude Code, Codex, opencode, Gemini CLI, ...) can learn its mode, check a path
 * or a shell command before it acts, ask the person for another mode, and read what the
 * view changed.
 *
 * Transport: JSON-RPC 2.0, one message per line on stdin and stdout (the MCP stdio
 * transport); stderr is for the person. The protocol revision is negotiated at
 * `initialize`: the client's when we speak it, else our latest.
 *
 * Authority: the server is one more client of the view's control socket, the way the Pi
 * extension is, and always through a restricted socket (agent/view.c): the agent socket
 * inside `piworkfs run`, the view's shared agent socket on a bare view. So no tool can
 * loosen the mode: piworkfs_request_mode only asks the person (mode.request).
 *
 * Live: a `mode.changed` subscription turns every switch into
 * notifications/tools/list_changed (piworkfs_status's description carries the active
 * mode, so a client that lists tools again shows the new mode in its next request) and,
 * for a client that subscribed to the piworkfs://mode resource,
 * notifications/resources/updated.
 *
 * Bad input never ends the server: a line that is not JSON, a batch, an unknown method or
 * tool, arguments of the wrong type or size, a view whose daemon is gone: each gets a
 * JSON-RPC error, and the next line is read. A line longer than PW_MCP_LINE_MAX is answered
 * with an error and skipped up to its newline.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "agent.h"
#include "mcp.h"
#include "options.h"
#include "output.h"
#include "proto.h"
#include "pw_limits.h"

#define MCP_USAGE                                                                                  \
	"Usage: piworkfs mcp [OPTIONS]\n"                                                          \
	"\n"                                                                                       \
	"A Model Context Protocol server on stdin and stdout for the agent working in the view\n"  \
	"around the current directory (inside `piworkfs run`, the run's agent socket). Its\n"      \
	"tools: piworkfs_status, piworkfs_check, piworkfs_check_bash, piworkfs_request_mode,\n"    \
	"piworkfs_changes, piworkfs_diff; its resource piworkfs://mode holds the mode's\n"         \
	"instructions. It talks to the view through a restricted socket only, so it can never\n"   \
	"loosen the mode: piworkfs_request_mode asks the person. Configure it in the agent as\n"   \
	"the command `piworkfs mcp` (integrations/README.md).\n"                                   \
	"\n"                                                                                       \
	"Options:\n"                                                                               \
	"  -h, --help          show this help\n"                                                   \
	"\n"                                                                                       \
	"Examples:\n"                                                                              \
	"  claude mcp add piworkfs -- piworkfs mcp\n"                                              \
	"  codex mcp add piworkfs -- piworkfs mcp\n"                                               \
	"\n"                                                                                       \
	"Exit status: 0 when the client closes stdin, 2 usage error, 5 system error.\n"

#define MCP_WAIT_DEFAULT_S 110 /* piworkfs_request_mode waits this long by default */
#define MCP_WAIT_MAX_S 115     /* a request lives 120 s */

static const char *const protocol_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26",
						"2024-11-05"};

#define MODE_URI "piworkfs://mode"

typedef struct mcp {
	pw_agent_view view;
	bool have_view;
	char *cwd;
	pw_ctl_conn *sub;    /* mode.changed subscription, or NULL */
	bool initialized;    /* initialize answered */
	bool resource_sub;   /* the client subscribed to piworkfs://mode */
	json_int_t asked_id; /* our last mode.request's id, 0: none */
	char *asked_mode;
} mcp;

/* ---- output ---------------------------------------------------------------------------- */

/* One message on stdout, one line (jansson escapes newlines inside strings). A client gone
 * (EPIPE) ends the server. */
static void send_msg(json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);

	json_decref(msg);
	if (!s)
		return;
	if (fputs(s, stdout) == EOF || fputc('\n', stdout) == EOF || fflush(stdout) == EOF) {
		free(s);
		exit(PW_EXIT_OK);
	}
	free(s);
}

static void send_result(json_t *id, json_t *result)
{
	send_msg(json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "result", result));
}

static void send_error(json_t *id, int code, const char *message)
{
	send_msg(json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
			   "error", "code", code, "message", message ? message : "error"));
}

static void send_notification(const char *method, json_t *params)
{
	json_t *m = json_pack("{s:s,s:s}", "jsonrpc", "2.0", "method", method);

	if (params)
		json_object_set_new(m, "params", params);
	send_msg(m);
}

/* A tool's answer: one text part; IS_ERROR when the call did not do what was asked. */
static json_t *tool_text(const char *text, bool is_error)
{
	return json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", text ? text : "",
			 "isError", is_error);
}

/* ---- the view ---------------------------------------------------------------------------- */

static void sub_close(mcp *m)
{
	pw_ctl_close(m->sub);
	m->sub = NULL;
}

/* Subscribes to mode.changed, so switches become notifications. */
static void sub_open(mcp *m)
{
	json_t *res = NULL;

	if (m->sub || !m->have_view)
		return;
	if (pw_ctl_connect(m->view.socket, 0, &m->sub) < 0) {
		m->sub = NULL;
		return;
	}
	if (pw_ctl_call(m->sub, "subscribe", json_pack("{s:[s]}", "events", "mode.changed"), &res,
			NULL, NULL) < 0)
		sub_close(m);
	json_decref(res);
}

/* The view, found now if it was not yet (a view mounted after the agent started). */
static int need_view(mcp *m, mcp_error *e)
{
	int r;

	if (m->have_view)
		return 0;
	r = pw_agent_view_open(m->cwd, &m->view);
	if (r == -ENOENT)
		return pw_mcp_fail(
		    e, MCP_NO_VIEW,
		    "not in a piworkfs view: %s is inside no live view (piworkfs status lists "
		    "them)",
		    m->cwd);
	if (r < 0)
		return pw_mcp_fail(e, MCP_NO_VIEW, "the piworkfs view's daemon does not answer: %s",
				   r == -EREMOTE ? "it refused the connection" : strerror(-r));
	m->have_view = true;
	if (m->initialized)
		sub_open(m);
	return 0;
}

/* A daemon call for a tool; a dead daemon is MCP_NO_VIEW, a refusal the daemon's message
 * (code in *ret_code). Returns 0, or -EPROTO with E set, or 1 with *ret_message for the model. */
static int call(mcp *m, unsigned timeout_ms, const char *method, json_t *params,
		json_t **ret_result, mcp_error *e, int *ret_code, char **ret_message)
{
	int code = 0, r;
	char *message = NULL;

	r = need_view(m, e);
	if (r < 0) {
		json_decref(params);
		return r;
	}
	r = pw_agent_call(&m->view, timeout_ms, method, params, ret_result, &code, &message);
	if (r == -EREMOTE) {
		if (ret_code)
			*ret_code = code;
		if (ret_message)
			*ret_message = message;
		else
			free(message);
		return 1;
	}
	if (r < 0) {
		/* Maybe the view was remounted: find it again at the next call. */
		pw_agent_view_done(&m->view);
		m->have_view = false;
		sub_close(m);
		return pw_mcp_fail(e, MCP_NO_VIEW, "the piworkfs view's daemon does not answer: %s",
				   strerror(-r));
	}
	return 0;
}

/* ---- the tools ------------------------------------------------------------------------- */

typedef int (*tool_fn)(mcp *m, json_t *args, json_t **ret, mcp_error *e);

/* The answer whose text T holds (pw_memtext_open'ed). */
static json_t *text_answer(pw_memtext *t, bool is_error)
{
	_cleanup_free_ char *s = pw_memtext_take(t);

	return tool_text(s, is_error);
}

static size_t count_rules(json_t *policy, const char *kind)
{
	size_t i, n = 0;
	json_t *r;

	json_array_foreach(json_object_get(policy, "rules"), i, r) n +=
	    streq_ptr(pw_json_str(r, "kind"), kind);
	return n;
}

static void put_patterns(FILE *f, json_t *policy, const char *kind)
{
	size_t i, n = 0;
	json_t *r;

	json_array_foreach(json_object_get(policy, "rules"), i,
			   r) if (streq_ptr(pw_json_str(r, "kind"), kind))
	    fprintf(f, "%s%s", n++ ? ", " : "", pw_json_str(r, "pattern"));
	if (!n)
		fputs("none", f);
}

/* METHOD on the view for a tool, PARAMS taken: 0 with *ret_result; 1 when the daemon refused,
 * with *ret the refusal as the tool's answer (the model reads it); or -EPROTO with E set. */
static int tool_call(mcp *m, unsigned timeout_ms, const char *method, json_t *params,
		     json_t **ret_result, json_t **ret, mcp_error *e)
{
	_cleanup_free_ char *message = NULL;
	int r = call(m, timeout_ms, method, params, ret_result, e, NULL, &message);

	if (r > 0)
		*ret = tool_text(message, true);
	return r;
}

/* tool_call, then the answer's text opened in T: 0 with the result in *RET_RESULT; 1 when
 * the daemon refused (its message in *RET); -errno in E. */
static int tool_call_text(mcp *m, unsigned timeout_ms, const char *method, json_t *params,
			  json_t **ret_result, pw_memtext *t, json_t **ret, mcp_error *e)
{
	int r = tool_call(m, timeout_ms, method, params, ret_result, ret, e);

	if (r)
		return r < 0 ? r : 1;
	if (!pw_memtext_open(t)) {
		json_decref(*ret_result);
		return pw_mcp_fail(e, PW_RPC_INTERNAL_ERROR, "out of memory");
	}
	return 0;
}

static int tool_status(mcp *m, json_t *args, json_t **ret, mcp_error *e)
{
	json_t *st = NULL, *pol;
	_cleanup_free_ char *ann = NULL, *w = NULL;
	pw_memtext t;
	int r;

	r = call(m, 0, "mode.get", NULL, &st, e, NULL, NULL);
	if (r)
		return r < 0 ? r
			     : pw_mcp_fail(e, PW_RPC_INTERNAL_ERROR, "the view refused mode.get");
	pol = json_object_get(st, "policy");
	ann = pw_text_announcement(pol, false);
	w = pw_text_writable(pol);
	if (!pw_memtext_open(&t)) {
		json_decref(st);
		return pw_mcp_fail(e, PW_RPC_INTERNAL_ERROR, "out of memory");
	}
	fprintf(t.f, "%s\n\nMode: %s (generation %lld)%s\nWritable: %s\nRead-only: everything else",
		ann ? ann : "", pw_json_str(st, "mode"),
		(long long)json_integer_value(json_object_get(st, "generation")),
		json_is_true(json_object_get(st, "fail_closed")) ? ", failing closed" : "", w);
	fputs("\nProtected: ", t.f);
	put_patterns(t.f, pol, "protected");
	fprintf(t.f, "\nHidden: %zu rule%s (", count_rules(pol, "hide"),
		count_rules(pol, "hide") == 1 ? "" : "s");
	put_patterns(t.f, pol, "hide");
	fputs(")", t.f);
	if (m->view.project)
		fprintf(t.f, "\nProject: %s", m->view.project);
	if (m->asked_id)
		fprintf(t.f, "\nYour last request to switch: to %s (id %lld)", m->asked_mode,
			(long long)m->asked_id);
	else
		fputs("\nPending request: none made by you", t.f);
	fprintf(t.f, "\nThe filesystem enforces the mode for every process; %s",
		m->view.run ? "to switch to a looser mode, call piworkfs_request_mode (the person "
			      "answers on the terminal of piworkfs run)."
			    : "to switch to a looser mode, call piworkfs_request_mode (the person "
			      "answers with `piworkfs mode --approve`).");
	json_decref(st);
	*ret = text_answer(&t, false);
	return 0;
}

static const arg_spec check_spec[] = {
    {"paths", ARG_STRINGS, true}, {"op", ARG_STRING, false}, {"mode", ARG_STRING, false}};

static int tool_check(mcp *m, json_t *args, json_t **ret, mcp_error *e)
{
	const char *op = pw_json_str(args, "op"), *mode = pw_json_str(args, "mode");
	json_t *rel = NULL, *res = NULL, *d, *p, *denied = NULL, *lines = NULL;
	pw_memtext t;
	size_t i;
	int r;

	if (!op)
		op = "write";
	rel = json_array();
	json_array_foreach(json_object_get(args, "paths"), i, p)
	{
		char *x = pw_agent_project_path(&m->view, m->cwd, json_string_value(p));
		/* Outside the project: the daemon says "outside" for the path as given. */
		json_array_append_new(rel,
				      json_string(x ? (x[0] ? x : ".") : json_string_value(p)));
		free(x);
	}
	r = tool_call_text(m, 0, "check",
			   json_pack("{s:O,s:s,s:s*}", "paths", rel, "op", op, "mode", mode), &res,
			   &t, ret, e);
	if (r) {
		json_decref(rel);
		return r < 0 ? r : 0;
	}
	denied = json_array();
	json_array_foreach(json_object_get(res, "decisions"), i, d)
	{
		json_t *rule = json_object_get(d, "rule");
		if (streq_ptr(pw_json_str(d, "decision"), "denied")) {
			json_array_append(denied,
					  json_array_get(json_object_get(args, "paths"), i));
			continue;
		}
		fprintf(t.f, "%s: %s %s", pw_json_str(d, "path"), op, pw_json_str(d, "decision"));
		if (json_is_object(rule)) {
			fprintf(t.f, " by rule %s \"%s\"", pw_json_str(rule, "kind"),
				pw_json_str(rule, "pattern"));
			if (pw_json_str(rule, "file") &&
			    json_integer_value(json_object_get(rule, "line")))
				fprintf(
				    t.f, " (%s:%lld)", pw_json_str(rule, "file"),
				    (long long)json_integer_value(json_object_get(rule, "line")));
		}
		fputc('\n', t.f);
	}
	lines = pw_agent_explain(&m->view, m->cwd, denied, op,
				 mode ? mode : pw_json_str(res, "mode"), "the agent", true);
	json_array_foreach(lines, i, d) fprintf(t.f, "%s\n", json_string_value(d));
	fprintf(t.f, "(mode %s)", mode ? mode : pw_json_str(res, "mode"));
	json_decref(lines);
	json_decref(denied);
	json_decref(rel);
	json_decref(res);
	*ret = text_answer(&t, false);
	return 0;
}

static const arg_spec bash_spec[] = {{"command", ARG_STRING, true}, {"cwd", ARG_STRING, false}};

static int tool_check_bash(mcp *m, json_t *args, json_t **ret, mcp_error *e)
{
	_cleanup_free_ char *block = NULL, *rcwd = NULL;
	const char *cwd = pw_json_str(args, "cwd");
	json_t *res = NULL, *tg;
	pw_memtext t;
	size_t i;
	int r;

	rcwd = pw_agent_project_path(&m->view, m->cwd, cwd ? cwd : ".");
	if (!rcwd)
		return pw_mcp_fail(e, PW_RPC_INVALID_PARAMS, "cwd %s is outside the project",
				   cwd ? cwd : m->cwd);
	block = pw_agent_bash_refusal(&m->view, m->cwd, cwd ? cwd : ".",
				      pw_json_str(args, "command"), "the agent", true);
	r = tool_call_text(
	    m, 0, "bash.check",
	    json_pack("{s:s,s:s}", "command", pw_json_str(args, "command"), "cwd", rcwd), &res, &t,
	    ret, e);
	if (r)
		return r < 0 ? r : 0;
	fprintf(t.f, "Pre-flight in mode %s: verdict %s%s%s.\n", pw_json_str(res, "mode"),
		pw_json_str(res, "verdict"),
		json_is_true(json_object_get(res, "heuristic")) ? " (heuristic: not certain)" : "",
		json_is_true(json_object_get(res, "truncated")) ? ", analysis truncated" : "");
	json_array_foreach(json_object_get(res, "targets"), i, tg)
	{
		if (i == 64) {
			fputs("...\n", t.f);
			break;
		}
		fprintf(t.f, "- %s %s: %s%s%s%s\n",
			pw_json_str(tg, "access") ? pw_json_str(tg, "access") : "?",
			pw_json_str(tg, "path")	     ? pw_json_str(tg, "path")
			: pw_json_str(tg, "command") ? pw_json_str(tg, "command")
						     : "?",
			pw_json_str(tg, "status") ? pw_json_str(tg, "status") : "?",
			pw_json_str(tg, "reason") ? " (" : "",
			pw_json_str(tg, "reason") ? pw_json_str(tg, "reason") : "",
			pw_json_str(tg, "reason") ? ")" : "");
	}
	if (block)
		fprintf(t.f, "%s\n", block);
	else
		fputs("Nothing is certain to be refused: the command may run; the filesystem still "
		      "decides every write.\n",
		      t.f);
	json_decref(res);
	*ret = text_answer(&t, false);
	return 0;
}

static const arg_spec request_spec[] = {
    {"mode", ARG_STRING, true}, {"reason", ARG_STRING, false}, {"wait_s", ARG_INT, false}};

/* What the model reads once the person decided (or did not). */
static void put_outcome(mcp *m, FILE *f, const char *outcome, const char *to, const char *from)
{
	if (streq_ptr(outcome, "approved")) {
		json_t *st = NULL;
		if (pw_agent_mode(&m->view, &st) == 0) {
			_cleanup_free_ char *sec = pw_text_system_section(pw_json_str(st, "mode"),
									  pw_json_str(st, "body"));
			_cleanup_free_ char *ann =
			    pw_text_announcement(json_object_get(st, "policy"), false);
			fprintf(f, "Approved: the mode is now %s.\n%s\n\n%s",
				pw_json_str(st, "mode"), ann ? ann : "", sec ? sec : "");
			json_decref(st);
		} else {
			fprintf(f, "Approved: the mode is now %s.", to);
		}
	} else if (streq_ptr(outcome, "denied")) {
		fprintf(f,
			"Denied: the person refused the switch to %s. The mode is still %s; do not "
			"work around it, tell the person what you needed.",
			to, from);
	} else if (streq_ptr(outcome, "expired")) {
		fprintf(f,
			"Expired: nobody answered the request to switch to %s in time. The mode is "
			"still %s.",
			to, from);
	} else if (streq_ptr(outcome, "superseded")) {
		fprintf(
		    f,
		    "Superseded: a newer request, or a switch made meanwhile, replaced the request "
		    "for %s. Call piworkfs_status for the mode now.",
		    to);
	} else {
		fprintf(f,
			"Still pending: the person has not answered the request to switch to %s "
			"yet (%s). The mode is still %s. The request stays open for 2 minutes "
			"from when it was made.",
			to,
			m->view.run
			    ? "it is shown on the terminal of piworkfs run"
			    : "they can allow it with `piworkfs mode --approve` outside the agent",
			from);
	}
}

static int tool_request_mode(mcp *m, json_t *args, json_t **ret, mcp_error *e)
{
	const char *to = pw_json_str(args, "mode"), *reason = pw_json_str(args, "reason");
	json_int_t wait_s = json_object_get(args, "wait_s")
				? json_integer_value(json_object_get(args, "wait_s"))
				: MCP_WAIT_DEFAULT_S;
	_cleanup_free_ char *message = NULL, *from = NULL;
	json_t *res = NULL, *st = NULL;
	pw_ctl_conn *c = NULL;
	int code = 0, r;
	pw_memtext t;

	if (wait_s < 0 || wait_s > MCP_WAIT_MAX_S)
		return pw_mcp_fail(e, PW_RPC_INVALID_PARAMS, "'wait_s' must be 0 to %d",
				   MCP_WAIT_MAX_S);
	if (strlen(to) > PW_MODE_NAME_MAX)
		return pw_mcp_fail(e, PW_RPC_INVALID_PARAMS, "'mode' is longer than %d bytes",
				   PW_MODE_NAME_MAX);
	r = call(m, 0, "mode.get", NULL, &st, e, NULL, NULL);
	if (r)
		return r < 0 ? r
			     : pw_mcp_fail(e, PW_RPC_INTERNAL_ERROR, "the view refused mode.get");
	from = pw_json_str(st, "mode") ? strdup(pw_json_str(st, "mode")) : strdup("?");
	json_decref(st);
	/* One connection for the request and its wait: the daemon tells the requester. */
	r = pw_ctl_connect(m->view.socket, (unsigned)(wait_s + 15) * 1000, &c);
	if (r < 0)
		return pw_mcp_fail(e, MCP_NO_VIEW, "the piworkfs view's daemon does not answer: %s",
				   strerror(-r));
	r = pw_ctl_call(c, "mode.request",
			json_pack("{s:s,s:s}", "mode", to, "reason",
				  reason && reason[0] ? reason : "asked through piworkfs mcp"),
			&res, &code, &message);
	if (r == 0 && streq_ptr(pw_json_str(res, "outcome"), "pending")) {
		json_int_t id = json_integer_value(json_object_get(res, "id"));
		free(m->asked_mode);
		m->asked_mode = strdup(to);
		m->asked_id = id;
		if (wait_s > 0) {
			json_decref(res);
			res = NULL;
			r = pw_ctl_call(c, "mode.request.wait",
					json_pack("{s:I,s:I}", "id", id, "wait_ms", wait_s * 1000),
					&res, &code, &message);
		}
	}
	pw_ctl_close(c);
	if (r == -EREMOTE) {
		*ret = tool_text(message, true); /* unknown mode, broken, too many requests */
		return 0;
	}
	if (r < 0)
		return pw_mcp_fail(e, MCP_NO_VIEW, "the piworkfs view's daemon does not answer: %s",
				   strerror(-r));
	if (!streq_ptr(pw_json_str(res, "outcome"), "pending"))
		m->asked_id = 0;
	if (!pw_memtext_open(&t)) {
		json_decref(res);
		return pw_mcp_fail(e, PW_RPC_INTERNAL_ERROR, "out of memory");
	}
	if (streq_ptr(pw_json_str(res, "outcome"), "approved") &&
	    json_is_null(json_object_get(res, "id")))
		fprintf(t.f, "No consent needed: %s is no looser than %s. ", to, from);
	put_outcome(m, t.f, pw_json_str(res, "outcome"), to, from);
	bool approved = streq_ptr(pw_json_str(res, "outcome"), "approved");
	json_decref(res);
	*ret = text_answer(&t, !approved);
	return 0;
}

static const arg_spec changes_spec[] = {{"since", ARG_STRING, false},
					{"paths", ARG_STRINGS, false}};

/* The changes.* params from the tool's: project-relative paths. */
static json_t *changes_params(mcp *m, json_t *args)
{
	json_t *p = json_object(), *paths = json_object_get(args, "paths"), *v;
	size_t i;

	if (pw_json_str(args, "since"))
		json_object_set_new(p, "since", json_string(pw_json_str(args, "since")));
	if (paths) {
		json_t *rel = json_array();
		json_array_foreach(paths, i, v)
		{
			char *x = pw_agent_project_path(&m->view, m->cwd, json_string_value(v));
			json_array_append_new(
			    rel, json_string(x ? (x[0] ? x : ".") : json_string_value(v)));
			free(x);
		}
		json_object_set_new(p, "paths", rel);
	}
	return p;
}

static int tool_changes(mcp *m, json_t *args, json_t **ret, mcp_error *e)
{
	json_t *res = NULL, *cs, *ch;
	size_t i, j, shown = 0;
	pw_memtext t;
	int r;

	r = tool_call_text(m, 30000, "changes.list", changes_params(m, args), &res, &t, ret, e);
	if (r)
		return r < 0 ? r : 0;
	json_array_foreach(json_object_get(res, "changesets"), i, cs)
	{
		fprintf(t.f, "Change set %lld (%s%s%s, mode %s%s):\n",
			(long long)json_integer_value(json_object_get(cs, "id")),
			pw_json_str(cs, "reason"), pw_json_str(cs, "name") ? " " : "",
			pw_json_str(cs, "name") ? pw_json_str(cs, "name") : "",
			pw_json_str(cs, "mode") ? pw_json_str(cs, "mode") : "?",
			json_is_true(json_object_get(cs, "current")) ? ", current" : "");
		json_array_foreach(json_object_get(cs, "changes"), j, ch)
		{
			if (shown++ >= PW_MCP_CHANGES_MAX)
				break;
			fprintf(t.f, "  %s %s%s%s%s%s\n", pw_json_str(ch, "kind"),
				pw_json_str(ch, "path"), pw_json_str(ch, "to") ? " -> " : "",
				pw_json_str(ch, "to") ? pw_json_str(ch, "to") : "",
				pw_json_str(ch, "comm") ? " by " : "",
				pw_json_str(ch, "comm") ? pw_json_str(ch, "comm") : "");
		}
	}
	if (!shown)
		fputs("No changes recorded.\n", t.f);
	if (shown > PW_MCP_CHANGES_MAX || json_is_true(json_object_get(res, "truncated")))
		fputs("(more changes than shown: narrow with paths or since)\n", t.f);
	fputs("Undo is the person's: `piworkfs undo` outside the agent.", t.f);
	json_decref(res);
	*ret = text_answer(&t, false);
	return 0;
}

static const arg_spec diff_spec[] = {
    {"since", ARG_STRING, false}, {"paths", ARG_STRINGS, false}, {"stat", ARG_BOOL, false}};

static int tool_diff(mcp *m, json_t *args, json_t **ret, mcp_error *e)
{
	json_t *res = NULL, *f, *p;
	size_t i;
	pw_memtext t;
	int r;

	p = changes_params(m, args);
	if (json_is_true(json_object_get(args, "stat")))
		json_object_set_new(p, "stat", json_true());
	r = tool_call_text(m, 30000, "changes.diff", p, &res, &t, ret, e);
	if (r)
		return r < 0 ? r : 0;
	json_array_foreach(json_object_get(res, "files"), i, f)
	{
		long pos = ftell(t.f);
		if (pos > PW_MCP_TEXT_MAX) {
			fprintf(t.f, "(cut at %d bytes: %zu more files; ask for fewer paths)\n",
				PW_MCP_TEXT_MAX,
				json_array_size(json_object_get(res, "files")) - i);
			break;
		}
		fprintf(t.f, "%s %s%s%s (+%lld -%lld)%s%s\n", pw_json_str(f, "kind"),
			pw_json_str(f, "path"), pw_json_str(f, "was") ? " was " : "",
			pw_json_str(f, "was") ? pw_json_str(f, "was") : "",
			(long long)json_integer_value(json_object_get(f, "added")),
			(long long)json_integer_value(json_object_get(f, "removed")),
			json_is_true(json_object_get(f, "binary")) ? " binary" : "",
			pw_json_str(f, "not_kept") ? " (original not kept)" : "");
		if (pw_json_str(f, "diff")) {
			const char *d = pw_json_str(f, "diff");
			size_t left = PW_MCP_TEXT_MAX - (size_t)pos, n = strlen(d);
			fwrite(d, 1, n < left ? n : left, t.f);
			if (n >= left)
				fputs("\n(diff cut)\n", t.f);
		}
	}
	if (!json_array_size(json_object_get(res, "files")))
		fputs("No differences recorded.", t.f);
	json_decref(res);
	*ret = text_answer(&t, false);
	return 0;
}

typedef struct tool {
	const char *name;
	const char *title;
	const char *description;
	const char *schema; /* JSON */
	tool_fn fn;
	bool read_only;
	const arg_spec *args; /* the arguments it takes, checked before FN runs */
	size_t n_args;
	bool needs_view; /* it calls the view: FN runs only inside one */
} tool;

#define PATHS_SCHEMA                                                                               \
	"{\"type\":\"array\",\"items\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096},"  \
	"\"minItems\":1,\"maxItems\":256"

static const tool tools[] = {
    {"piworkfs_status", "piworkfs mode",
     "The active piworkfs mode of this project: what you may write, what is read-only, "
     "protected and hidden, and your pending request to switch. The filesystem enforces the "
     "mode for every tool and process: a refused write fails with EACCES or EROFS.",
     "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}", tool_status, true,
     NULL, 0, false},
    {"piworkfs_check", "Check paths",
     "Would the active mode (or MODE) allow OP on each path? One line per path: the decision, "
     "the rule that decided it (file:line), and for a refusal what is writable and which mode "
     "would allow it. Check before writing where you are unsure.",
     "{\"type\":\"object\",\"properties\":{\"paths\":" PATHS_SCHEMA
     ",\"description\":\"paths, relative to the working directory or absolute\"},"
     "\"op\":{\"type\":\"string\",\"description\":\"write (default), create, unlink, rename, "
     "read, ...\"},\"mode\":{\"type\":\"string\",\"description\":\"ask another mode without "
     "switching\"}},\"required\":[\"paths\"],\"additionalProperties\":false}",
     tool_check, true, check_spec, ELEMENTSOF(check_spec), true},
    {"piworkfs_check_bash", "Check a shell command",
     "The pre-flight of a shell command: what it would write and whether the active mode "
     "refuses it, without running it. A refusal is certain only when the verdict is not "
     "heuristic.",
     "{\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"string\",\"maxLength\":61440},"
     "\"cwd\":{\"type\":\"string\",\"description\":\"its working directory (default: yours)\"}},"
     "\"required\":[\"command\"],\"additionalProperties\":false}",
     tool_check_bash, true, bash_spec, ELEMENTSOF(bash_spec), true},
    {"piworkfs_request_mode", "Ask the person for another mode",
     "Ask the person to switch the project to MODE (a looser mode needs their consent; a "
     "stricter one is done at once). Waits up to wait_s seconds (default 110) for their "
     "answer and says honestly what happened: approved, denied, expired or still pending. "
     "Give a short reason: the person reads it.",
     "{\"type\":\"object\",\"properties\":{\"mode\":{\"type\":\"string\",\"maxLength\":64},"
     "\"reason\":{\"type\":\"string\",\"maxLength\":200},\"wait_s\":{\"type\":\"integer\","
     "\"minimum\":0,\"maximum\":115}},\"required\":[\"mode\"],\"additionalProperties\":false}",
     tool_request_mode, false, request_spec, ELEMENTSOF(request_spec), false},
    {"piworkfs_changes", "What the view changed",
     "The files the view changed (and kept originals of), newest change set first: kind, "
     "path and the process. Read-only; undo is the person's.",
     "{\"type\":\"object\",\"properties\":{\"since\":{\"type\":\"string\",\"description\":\"a "
     "checkpoint's name\"},\"paths\":" PATHS_SCHEMA "}},\"additionalProperties\":false}",
     tool_changes, true, changes_spec, ELEMENTSOF(changes_spec), true},
    {"piworkfs_diff", "Diff against the originals",
     "The unified diff between the originals the view kept and the files now (the latest "
     "change set unless since is given); stat: counts only. Read-only.",
     "{\"type\":\"object\",\"properties\":{\"since\":{\"type\":\"string\"},\"paths\":" PATHS_SCHEMA
     "},\"stat\":{\"type\":\"boolean\"}},\"additionalProperties\":false}",
     tool_diff, true, diff_spec, ELEMENTSOF(diff_spec), true},
};

/* piworkfs_status's description with the active mode's announcement: clients that
 * show tool descriptions in every model request then carry the mode per turn, and a
 * switch (tools/list_changed) updates it. */
static json_t *tool_list(mcp *m)
{
	json_t *list = json_array(), *st = NULL;
	_cleanup_free_ char *ann = NULL;

	if (m->have_view && pw_agent_mode(&m->view, &st) == 0)
		ann = pw_text_announcement(json_object_get(st, "policy"), false);
	json_decref(st);
	for (size_t i = 0; i < ELEMENTSOF(tools); i++) {
		json_t *schema = json_loads(tools[i].schema, 0, NULL);
		_cleanup_free_ char *desc = NULL;
		if (i == 0 && ann && asprintf(&desc, "%s Now: %s", tools[i].description, ann) < 0)
			desc = NULL;
		json_array_append_new(
		    list,
		    json_pack("{s:s,s:s,s:s,s:o,s:{s:b,s:b}}", "name", tools[i].name, "title",
			      tools[i].title, "description", desc ? desc : tools[i].description,
			      "inputSchema", schema ? schema : json_object(), "annotations",
			      "readOnlyHint", tools[i].read_only, "openWorldHint", 0));
	}
	return list;
}

/* ---- methods ------------------------------------------------------------------------------ */

typedef int (*method_fn)(mcp *m, json_t *params, json_t **ret, mcp_error *e);

static const char *negotiate(const char *asked)
{
	for (size_t i = 0; i < ELEMENTSOF(protocol_versions); i++)
		if (streq_ptr(asked, protocol_versions[i]))
			return protocol_versions[i];
	return protocol_versions[0];
}

static char *instructions(mcp *m)
{
	json_t *st = NULL;
	char *s = NULL;
	_cleanup_free_ char *ann = NULL;

	if (m->have_view && pw_agent_mode(&m->view, &st) == 0)
		ann = pw_text_announcement(json_object_get(st, "policy"), false);
	json_decref(st);
	if (asprintf(
		&s,
		"This project is a piworkfs view: the filesystem enforces a mode that limits "
		"where every tool and process may write.%s%s Call piworkfs_status for the mode "
		"now (the person may switch it during the session), piworkfs_check or "
		"piworkfs_check_bash before a write you are unsure of, and "
		"piworkfs_request_mode to ask the person for a looser mode; never work around "
		"a refusal.",
		ann ? " At start: " : "", ann ? ann : "") < 0)
		return NULL;
	return s;
}

static int m_initialize(mcp *m, json_t *params, json_t **ret, mcp_error *e)
{
	const char *asked = pw_json_str(params, "protocolVersion");
	_cleanup_free_ char *ins = NULL;

	if (!json_is_object(params) || !asked)
		return pw_mcp_fail(e, PW_RPC_INVALID_PARAMS,
				   "initialize needs params.protocolVersion");
	if (!m->have_view) {
		mcp_error ignore = {0};
		(void)need_view(m, &ignore); /* outside a view the tools say so when called */
		free(ignore.message);
	}
	ins = instructions(m);
	*ret = json_pack("{s:s,s:{s:{s:b},s:{s:b,s:b}},s:{s:s,s:s,s:s},s:s*}", "protocolVersion",
			 negotiate(asked), "capabilities", "tools", "listChanged", 1, "resources",
			 "subscribe", 1, "listChanged", 0, "serverInfo", "name", "piworkfs",
			 "title", "piworkfs", "version", PW_VERSION, "instructions", ins);
	m->initialized = true;
	sub_open(m);
	return 0;
}

static int m_ping(mcp *m, json_t *params, json_t **ret, mcp_error *e)
{
	(void)m, (void)params, (void)e;
	*ret = json_object();
	return 0;
}

static int m_tools_list(mcp *m, json_t *params, json_t **ret, mcp_error *e)
{
	(void)params, (void)e;
	*ret = json_pack("{s:o}", "tools", tool_list(m));
	return 0;
}

static int m_tools_call(mcp *m, json_t *params, json_t **ret, mcp_error *e)
{
	const char *name = pw_json_str(params, "name");
	json_t *args = json_object_get(params, "arguments");
	json_t *empty = NULL;
	int r;

	if (!json_is_object(params) || !name)
		return pw_mcp_fail(e, PW_RPC_INVALID_PARAMS, "tools/call needs params.name");
	if (!args)
		args = empty = json_object();
	for (size_t i = 0; i < ELEMENTSOF(tools); i++) {
		if (!streq(tools[i].name, name))
			continue;
		r = pw_mcp_check_args(args, tools[i].args, tools[i].n_args, e);
		if (r >= 0 && tools[i].needs_view)
			r = need_view(m, e);
		if (r >= 0)
			r = tools[i].fn(m, args, ret, e);
		json_decref(empty);
		return r;
	}
	json_decref(empty);
	return pw_mcp_fail(e, PW_RPC_INVALID_PARAMS, "unknown tool '%.64s' (tools/list lists them)",
			   name);
}

static int m_resources_list(mcp *m, json_t *params, json_t **ret, mcp_error *e)
{
	(void)m, (void)params, (void)e;
	*ret = json_pack("{s:[{s:s,s:s,s:s,s:s,s:s}]}", "resources", "uri", MODE_URI, "name",
			 "mode", "title", "piworkfs mode", "description",
			 "The active mode's instructions and rules; updated when the mode changes.",
			 "mimeType", "text/markdown");
	return 0;
}

static int m_templates_list(mcp *m, json_t *params, json_t **ret, mcp_error *e)
{
	(void)m, (void)params, (void)e;
	*ret = json_pack("{s:[]}", "resourceTemplates");
	return 0;
}

static int m_resources_read(mcp *m, json_t *params, json_t **ret, mcp_error *e)
{
	json_t *st = NULL;
	_cleanup_free_ char *sec = NULL, *ann = NULL, *all = NULL;
	int r;

	if (!streq_ptr(pw_json_str(params, "uri"), MODE_URI))
		return pw_mcp_fail(e, MCP_RESOURCE_NOT_FOUND,
				   "resource not found (the one resource is %s)", MODE_URI);
	r = call(m, 0, "mode.get", json_pack("{s:b}", "body", 1), &st, e, NULL, NULL);
	if (r)
		return r < 0 ? r
			     : pw_mcp_fail(e, PW_RPC_INTERNAL_ERROR, "the view refused mode.get");
	sec = pw_text_system_section(pw_json_str(st, "mode"), pw_json_str(st, "body"));
	ann = pw_text_announcement(json_object_get(st, "policy"), false);
	json_decref(st);
	if (!sec || !ann || asprintf(&all, "%s\n\n%s", sec, ann) < 0)
		return pw_mcp_fail(e, PW_RPC_INTERNAL_ERROR, "out of memory");
	*ret = json_pack("{s:[{s:s,s:s,s:s}]}", "contents", "uri", MODE_URI, "mimeType",
			 "text/markdown", "text", all);
	return 0;
}

static int m_resources_subscribe(mcp *m, json_t *params, json_t **ret, mcp_error *e)
{
	if (!streq_ptr(pw_json_str(params, "uri"), MODE_URI))
		return pw_mcp_fail(e, MCP_RESOURCE_NOT_FOUND,
				   "resource not found (the one resource is %s)", MODE_URI);
	m->resource_sub = true;
	*ret = json_object();
	return 0;
}

static int m_resources_unsubscribe(mcp *m, json_t *params, json_t **ret, mcp_error *e)
{
	if (!streq_ptr(pw_json_str(params, "uri"), MODE_URI))
		return pw_mcp_fail(e, MCP_RESOURCE_NOT_FOUND, "resource not found");
	m->resource_sub = false;
	*ret = json_object();
	return 0;
}

static const struct {
	const char *name;
	method_fn fn;
} methods[] = {
    {"initialize", m_initialize},
    {"ping", m_ping},
    {"tools/list", m_tools_list},
    {"tools/call", m_tools_call},
    {"resources/list", m_resources_list},
    {"resources/templates/list", m_templates_list},
    {"resources/read", m_resources_read},
    {"resources/subscribe", m_resources_subscribe},
    {"resources/unsubscribe", m_resources_unsubscribe},
};

/* ---- the loop ------------------------------------------------------------------------------ */

static void handle_request(mcp *m, json_t *id, const char *method, json_t *params)
{
	mcp_error e = {0};
	json_t *result = NULL;

	for (size_t i = 0; i < ELEMENTSOF(methods); i++) {
		if (!streq(methods[i].name, method))
			continue;
		if (!m->initialized && !streq(method, "initialize") && !streq(method, "ping")) {
			send_error(id, PW_RPC_INVALID_REQUEST, "the session is not initialized");
			return;
		}
		if (methods[i].fn(m, params, &result, &e) < 0 || !result) {
			send_error(id, e.code ? e.code : PW_RPC_INTERNAL_ERROR,
				   e.message ? e.message : "out of memory");
			free(e.message);
			return;
		}
		send_result(id, result);
		free(e.message);
		return;
	}
	pw_mcp_fail(&e, PW_RPC_METHOD_NOT_FOUND, "method not found: %.64s", method);
	send_error(id, e.code, e.message);
	free(e.message);
}

static void handle_line(mcp *m, const char *line, size_t len)
{
	json_error_t err;
	json_t *msg, *id, *params;
	const char *method;

	while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
		len--;
	if (len == 0)
		return;
	msg = json_loadb(line, len, JSON_REJECT_DUPLICATES, &err);
	if (!msg) {
		send_error(NULL, PW_RPC_PARSE_ERROR, "parse error: not one JSON value");
		return;
	}
	if (!json_is_object(msg)) {
		send_error(NULL, PW_RPC_INVALID_REQUEST,
			   json_is_array(msg) ? "batches are not supported"
					      : "not a JSON-RPC object");
		json_decref(msg);
		return;
	}
	id = json_object_get(msg, "id");
	method = pw_json_str(msg, "method");
	params = json_object_get(msg, "params");
	if (id && !json_is_string(id) && !json_is_integer(id)) {
		send_error(NULL, PW_RPC_INVALID_REQUEST, "id must be a string or an integer");
	} else if (!streq_ptr(pw_json_str(msg, "jsonrpc"), "2.0")) {
		send_error(id, PW_RPC_INVALID_REQUEST, "jsonrpc must be \"2.0\"");
	} else if (!json_object_get(msg, "method")) {
		/* A response to a request of ours: we send none, so nothing to match. */
	} else if (!method) {
		send_error(id, PW_RPC_INVALID_REQUEST, "method must be a string");
	} else if (params && !json_is_object(params)) {
		send_error(id, PW_RPC_INVALID_PARAMS, "params must be an object");
	} else if (id) {
		handle_request(m, id, method, params ? params : json_object_get(msg, "params"));
	}
	/* Notifications (initialized, cancelled, ...) need no answer. */
	json_decref(msg);
}

static void on_mode_changed(mcp *m)
{
	send_notification("notifications/tools/list_changed", NULL);
	if (m->resource_sub)
		send_notification("notifications/resources/updated",
				  json_pack("{s:s}", "uri", MODE_URI));
}

/* Everything the subscription brought. */
static void sub_events(mcp *m)
{
	for (;;) {
		char *method = NULL;
		json_t *params = NULL;
		int r = pw_ctl_read_notification(m->sub, 1, &method, &params);
		if (r == -ETIMEDOUT)
			return;
		if (r < 0) {
			sub_close(m); /* the daemon is gone: tools will say so */
			return;
		}
		if (streq(method, "mode.changed"))
			on_mode_changed(m);
		free(method);
		json_decref(params);
	}
}

static int serve(mcp *m)
{
	size_t cap = 65536, len = 0;
	char *buf = malloc(cap);
	bool skipping = false; /* inside a line longer than PW_MCP_LINE_MAX */

	if (!buf)
		return PW_EXIT_SYSTEM;
	for (;;) {
		struct pollfd pfd[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
					{.fd = pw_ctl_fd(m->sub), .events = POLLIN}};
		int r = poll(pfd, m->sub ? 2 : 1, -1);
		if (r < 0 && errno != EINTR)
			break;
		if (r <= 0)
			continue;
		if (m->sub && pfd[1].revents)
			sub_events(m);
		if (!pfd[0].revents)
			continue;
		if (cap - len < 4096) {
			size_t ncap = cap * 2;
			char *nb = ncap <= 2 * PW_MCP_LINE_MAX ? realloc(buf, ncap) : NULL;
			if (nb) {
				buf = nb;
				cap = ncap;
			}
		}
		ssize_t n = read(STDIN_FILENO, buf + len, cap - len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break; /* the client closed stdin: the session is over */
		len += (size_t)n;
		char *start = buf, *nl;
		while ((nl = memchr(start, '\n', len - (size_t)(start - buf)))) {
			if (!skipping)
				handle_line(m, start, (size_t)(nl - start));
			skipping = false;
			start = nl + 1;
		}
		len -= (size_t)(start - buf);
		memmove(buf, start, len);
		/* and the buffer, at least PW_MCP_LINE_MAX, has room */
		if (len >= PW_MCP_LINE_MAX) {
			if (!skipping)
				send_error(NULL, PW_RPC_INVALID_REQUEST,
					   "message longer than 1 MiB: skipped up to its end");
			skipping = true;
			len = 0;
		}
	}
	free(buf);
	return PW_EXIT_OK;
}

int cmd_mcp(int argc, char **argv)
{
	_cleanup_opts_ pw_opts po = {0};
	mcp m = {0};
	int r = pw_opts_parse(&po, "mcp", argc, argv, &(pw_opts_use){.usage = MCP_USAGE});

	if (r != PW_EXIT_GO_ON)
		return r;
	if (po.n_operands) {
		pw_err("mcp", "takes no arguments (the agent starts it as `piworkfs mcp`)");
		return PW_EXIT_USAGE;
	}
	signal(SIGPIPE, SIG_IGN);
	m.cwd = realpath(".", NULL);
	if (!m.cwd)
		m.cwd = strdup("/");
	r = serve(&m);
	sub_close(&m);
	if (m.have_view)
		pw_agent_view_done(&m.view);
	free(m.asked_mode);
	free(m.cwd);
	return r;
}
