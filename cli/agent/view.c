/* SPDX-License-Identifier: MIT */
/*
 * The view as an agent sees it (mcp.h). Every call goes through a restricted socket: the
 * daemon itself then refuses a loosening, whatever a model asks a tool to do. Each call
 * opens its own connection: the daemon drops a connection idle for 30 s, and an MCP server
 * or a hook may sit idle far longer between two calls.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "path.h"
#include "pw_limits.h"
#include "output.h"
#include "util.h"

void pw_agent_view_done(pw_agent_view *v)
{
	free(v->socket);
	free(v->mountpoint);
	free(v->project);
	*v = (pw_agent_view){0};
}

int pw_agent_view_open(const char *cwd, pw_agent_view *ret)
{
	_cleanup_free_ char *sock = NULL, *mp = NULL;
	const char *env = getenv("PIWORKFS_SOCKET");
	pw_agent_view v = {0};
	json_t *res = NULL;
	int r;

	r = pw_ctl_find_view_full(cwd, &sock, &mp);
	if (r < 0)
		return r;
	v.run = env && env[0];
	if (!v.run) {
		/* A bare view: its shared agent socket, never the operator's authority. */
		r = pw_ctl_call_socket(sock, "agent.open", NULL, &res, NULL, NULL);
		if (r < 0)
			return r;
		v.socket = pw_json_str(res, "socket") ? strdup(pw_json_str(res, "socket")) : NULL;
		json_decref(res);
		res = NULL;
	} else {
		v.socket = TAKE_PTR(sock);
	}
	if (!v.socket)
		return -EBADMSG;
	r = pw_agent_call(&v, 0, "status", NULL, &res, NULL, NULL);
	if (r < 0) {
		pw_agent_view_done(&v);
		return r;
	}
	if (pw_json_str(res, "project"))
		v.project = strdup(pw_json_str(res, "project"));
	if (pw_json_str(res, "mountpoint"))
		v.mountpoint = strdup(pw_json_str(res, "mountpoint"));
	json_decref(res);
	*ret = v;
	return 0;
}

int pw_agent_call(const pw_agent_view *v, unsigned timeout_ms, const char *method, json_t *params,
		  json_t **ret_result, int *ret_code, char **ret_message)
{
	return pw_ctl_call_socket_timed(v->socket, timeout_ms, method, params, ret_result, ret_code,
					ret_message);
}

int pw_agent_mode(const pw_agent_view *v, json_t **ret_state)
{
	return pw_agent_call(v, 0, "mode.get", json_pack("{s:b}", "body", 1), ret_state, NULL,
			     NULL);
}

/* The part of ABS (normal, absolute) beneath ROOT, or NULL. */
static const char *beneath(const char *abs, const char *root)
{
	long off = root ? pw_path_beneath(abs, root) : -1;

	return off < 0 ? NULL : abs + off;
}

char *pw_agent_project_path(const pw_agent_view *v, const char *cwd, const char *path)
{
	_cleanup_free_ char *joined = NULL;
	char norm[PW_PATH_MAX + 2];
	const char *a, *b;

	if (!path || !path[0])
		return NULL;
	if (path[0] == '/')
		joined = strdup(path);
	else if (asprintf(&joined, "%s/%s", cwd ? cwd : ".", path) < 0)
		joined = NULL;
	if (!joined || joined[0] != '/')
		return NULL;
	/* Lexically, as the daemon would: "/" is taken as the root of the normalization. */
	norm[0] = '/';
	if (pw_path_normalize(joined, strlen(joined), norm + 1, NULL) < 0)
		return NULL;
	a = beneath(norm, v->project);
	b = beneath(norm, v->mountpoint);
	if (a && b) /* the longer root wins: one may lie inside the other */
		a = strlen(v->project) >= strlen(v->mountpoint) ? a : b;
	return a ? strdup(a) : b ? strdup(b) : NULL;
}

/* The lines text.refusals words for REFUSALS (decision-like objects with their mode),
 * appended to OUT: the daemon adds what is writable and the narrowest mode that would
 * allow each. */
static void refusal_lines(const pw_agent_view *v, json_t *refusals, const char *agent,
			  bool with_tool, json_t *out)
{
	json_t *res = NULL, *l;
	size_t i;

	if (!json_array_size(refusals))
		return;
	if (pw_agent_call(v, 0, "text.refusals",
			  json_pack("{s:O,s:s,s:s}", "refusals", refusals, "agent", agent, "ask",
				    with_tool ? "tool" : "words"),
			  &res, NULL, NULL) < 0)
		return; /* no explanation rather than a wrong one */
	json_array_foreach(json_object_get(res, "lines"), i, l)
	{
		if (json_is_string(l))
			json_array_append(out, l);
	}
	json_decref(res);
}

json_t *pw_agent_explain(const pw_agent_view *v, const char *cwd, json_t *paths, const char *op,
			 const char *mode, const char *agent, bool with_tool)
{
	json_t *out = json_array(), *rel = json_array(), *res = NULL, *refused = json_array();
	json_t *p, *d;
	const char *active;
	size_t i;

	if (!out || !rel || !refused)
		goto done;
	json_array_foreach(paths, i, p)
	{
		char *r = pw_agent_project_path(v, cwd, json_string_value(p));
		if (r && r[0] && json_array_size(rel) < 64)
			json_array_append_new(rel, json_string(r));
		free(r);
	}
	if (!json_array_size(rel))
		goto done;
	if (pw_agent_call(v, 0, "check",
			  json_pack("{s:O,s:s,s:s*}", "paths", rel, "op", op, "mode", mode), &res,
			  NULL, NULL) < 0)
		goto done; /* no explanation rather than a wrong one */
	active = mode ? mode : pw_json_str(res, "mode");
	json_array_foreach(json_object_get(res, "decisions"), i, d)
	{
		if (!streq_ptr(pw_json_str(d, "decision"), "denied"))
			continue;
		if (streq(op, "read") && !streq_ptr(pw_json_str(d, "reason"), "hidden"))
			continue;
		json_t *c = json_deep_copy(d);
		json_object_set_new(c, "mode", json_string(active ? active : "?"));
		if (streq(op, "read"))
			json_object_set_new(c, "op", json_string("read"));
		json_array_append_new(refused, c);
	}
	refusal_lines(v, refused, agent, with_tool, out);
done:
	json_decref(res);
	json_decref(rel);
	json_decref(refused);
	return out;
}

char *pw_agent_bash_refusal(const pw_agent_view *v, const char *base, const char *cwd,
			    const char *command, const char *agent, bool with_tool)
{
	_cleanup_free_ char *rcwd = pw_agent_project_path(v, base, cwd);
	json_t *res = NULL, *texts = NULL, *denied, *t;
	char *out = NULL;
	size_t i;

	if (!rcwd)
		return NULL; /* the command runs outside the project: nothing to say */
	if (pw_agent_call(v, 0, "bash.check",
			  json_pack("{s:s,s:s}", "command", command, "cwd", rcwd), &res, NULL,
			  NULL) < 0)
		return NULL; /* no verdict: the command runs and the filesystem decides */
	if (!streq_ptr(pw_json_str(res, "verdict"), "denied")) {
		json_decref(res);
		return NULL;
	}
	/* Only denied targets can be certain refusals (text.bash decides which are): the
	 * others stay home, and at most as many as text.bash reads, so that a long analysis
	 * still fits one request line. */
	denied = json_array();
	json_array_foreach(json_object_get(res, "targets"), i, t)
	{
		if (streq_ptr(pw_json_str(t, "status"), "denied") &&
		    json_array_size(denied) < PW_TEXT_TARGETS_MAX)
			json_array_append(denied, t);
	}
	json_object_set_new(res, "targets", denied);
	if (pw_agent_call(v, 0, "text.bash",
			  json_pack("{s:O,s:s,s:s}", "check", res, "agent", agent, "ask",
				    with_tool ? "tool" : "words"),
			  &texts, NULL, NULL) == 0 &&
	    pw_json_str(texts, "block"))
		out = strdup(pw_json_str(texts, "block"));
	json_decref(res);
	json_decref(texts);
	return out;
}

char *pw_agent_overlap_note(const pw_agent_view *v, const char *cwd, const char *path)
{
	_cleanup_free_ char *rel = pw_agent_project_path(v, cwd, path), *abs = NULL;
	json_t *res = NULL, *set, *c;
	char *out = NULL;
	size_t i, j;

	if (!rel || !rel[0])
		return NULL;
	if (path[0] == '/')
		abs = strdup(path);
	else if (asprintf(&abs, "%s/%s", cwd, path) < 0)
		abs = NULL;
	if (!abs || pw_agent_call(v, 0, "changes.list", json_pack("{s:[s]}", "paths", abs), &res,
				  NULL, NULL) < 0)
		return NULL;
	json_array_foreach(json_object_get(res, "changesets"), i, set)
	{
		if (!json_is_true(json_object_get(set, "current")))
			continue;
		json_array_foreach(json_object_get(set, "changes"), j, c)
		{
			json_t *by = json_object_get(c, "also_changed_by");
			if (!out && json_array_size(by))
				out = pw_text_overlap_line(rel, by);
		}
	}
	json_decref(res);
	return out;
}
