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
#include "util.h"

static const char *jstr(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

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
		v.socket = jstr(res, "socket") ? strdup(jstr(res, "socket")) : NULL;
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
	if (jstr(res, "project"))
		v.project = strdup(jstr(res, "project"));
	if (jstr(res, "mountpoint"))
		v.mountpoint = strdup(jstr(res, "mountpoint"));
	json_decref(res);
	*ret = v;
	return 0;
}

int pw_agent_call(const pw_agent_view *v, unsigned timeout_ms, const char *method, json_t *params,
		  json_t **ret_result, int *ret_code, char **ret_message)
{
	pw_ctl_conn *c = NULL;
	int r = pw_ctl_connect(v->socket, timeout_ms, &c);

	if (r < 0) {
		json_decref(params);
		return r;
	}
	r = pw_ctl_call(c, method, params, ret_result, ret_code, ret_message);
	pw_ctl_close(c);
	return r;
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

/* The narrowest mode other than CURRENT allowing OP on the project-relative PATH, or
 * NULL. RANKED: pw_agent_rank_modes of modes.list. */
static char *hint_for(const pw_agent_view *v, json_t *ranked, const char *path, const char *op,
		      const char *current)
{
	size_t i;
	json_t *m;

	json_array_foreach(ranked, i, m)
	{
		const char *name = json_string_value(m);
		json_t *res = NULL;
		if (streq_ptr(name, current))
			continue;
		if (pw_agent_call(
			v, 0, "check",
			json_pack("{s:[s],s:s,s:s}", "paths", path, "op", op, "mode", name), &res,
			NULL, NULL) < 0)
			continue; /* that mode cannot be compiled: skip it */
		json_t *d = json_array_get(json_object_get(res, "decisions"), 0);
		bool ok = streq_ptr(jstr(d, "decision"), "allowed");
		json_decref(res);
		if (ok)
			return strdup(name);
	}
	return NULL;
}

static json_t *ranked_modes(const pw_agent_view *v)
{
	json_t *ml = NULL, *ranked;

	if (pw_agent_call(v, 0, "modes.list", NULL, &ml, NULL, NULL) < 0)
		return json_array();
	ranked = pw_agent_rank_modes(json_object_get(ml, "modes"));
	json_decref(ml);
	return ranked ? ranked : json_array();
}

/* What MODE may write, in words ("?" when the daemon does not say). */
static char *writable_of(const pw_agent_view *v, const char *mode)
{
	json_t *pol = NULL;
	char *w;

	if (pw_agent_call(v, 0, "allowed", mode ? json_pack("{s:s}", "mode", mode) : NULL, &pol,
			  NULL, NULL) < 0)
		return strdup("?");
	w = pw_agent_writable_text(pol);
	json_decref(pol);
	return w;
}

/* Lines for the refusals R (decision-like objects of MODE), appended to OUT. */
static void refusal_lines(const pw_agent_view *v, json_t *refusals, const char *mode,
			  const char *agent, bool with_tool, json_t *out)
{
	_cleanup_free_ char *writable = NULL;
	json_t *ranked, *r;
	size_t i;

	if (!json_array_size(refusals))
		return;
	writable = writable_of(v, mode);
	ranked = ranked_modes(v);
	json_array_foreach(refusals, i, r)
	{
		_cleanup_free_ char *hint = NULL, *line = NULL;
		if (!streq_ptr(jstr(r, "reason"), "hidden"))
			hint = hint_for(v, ranked, jstr(r, "path"),
					jstr(r, "op") ? jstr(r, "op") : "write", mode);
		line = pw_agent_refusal_line(r, writable, hint, v->project, agent, with_tool);
		if (line)
			json_array_append_new(out, json_string(line));
	}
	json_decref(ranked);
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
	active = mode ? mode : jstr(res, "mode");
	json_array_foreach(json_object_get(res, "decisions"), i, d)
	{
		if (!streq_ptr(jstr(d, "decision"), "denied"))
			continue;
		if (streq(op, "read") && !streq_ptr(jstr(d, "reason"), "hidden"))
			continue;
		json_t *c = json_deep_copy(d);
		json_object_set_new(c, "mode", json_string(active ? active : "?"));
		if (streq(op, "read"))
			json_object_set_new(c, "op", json_string("read"));
		json_array_append_new(refused, c);
	}
	refusal_lines(v, refused, active, agent, with_tool, out);
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
	json_t *res = NULL, *certain = NULL, *refusals = NULL, *lines = NULL, *t;
	const char *mode;
	char *head = NULL, *out = NULL;
	size_t i;

	if (!rcwd)
		return NULL; /* the command runs outside the project: nothing to say */
	if (pw_agent_call(v, 0, "bash.check",
			  json_pack("{s:s,s:s}", "command", command, "cwd", rcwd), &res, NULL,
			  NULL) < 0)
		return NULL; /* no verdict: the command runs and the filesystem decides */
	certain = pw_agent_certain_refusals(res);
	mode = jstr(res, "mode");
	if (!json_array_size(certain) || !mode)
		goto done;
	refusals = json_array();
	lines = json_array();
	json_array_foreach(certain, i, t)
	{
		json_array_append_new(
		    refusals, json_pack("{s:s,s:s,s:O?,s:s,s:s,s:O?}", "path", jstr(t, "path"),
					"op", jstr(t, "op") ? jstr(t, "op") : "write", "errno",
					json_object_get(t, "errno"), "reason",
					jstr(t, "reason") ? jstr(t, "reason") : "no-allow", "mode",
					mode, "rule", json_object_get(t, "rule")));
	}
	refusal_lines(v, refusals, mode, agent, with_tool, lines);
	head = pw_agent_bash_block_head(mode);
	if (head) {
		size_t len = strlen(head) + 1;
		json_t *l;
		json_array_foreach(lines, i, l) len += strlen(json_string_value(l)) + 1;
		out = malloc(len);
		if (out) {
			strcpy(out, head);
			json_array_foreach(lines, i, l)
			{
				strcat(out, "\n");
				strcat(out, json_string_value(l));
			}
		}
	}
done:
	free(head);
	json_decref(res);
	json_decref(certain);
	json_decref(refusals);
	json_decref(lines);
	return out;
}

/* The views in BY ({"mountpoint", "changeset"}...), as "the view at MP (its change set N)". */
static void put_changers(FILE *f, json_t *by)
{
	size_t i;
	json_t *o;

	json_array_foreach(by, i, o)
	    fprintf(f, "%sthe view at %s (its change set %lld)", i ? " and " : "",
		    jstr(o, "mountpoint") ? jstr(o, "mountpoint") : "?",
		    (long long)json_integer_value(json_object_get(o, "changeset")));
}

char *pw_agent_overlap_note(const pw_agent_view *v, const char *cwd, const char *path)
{
	_cleanup_free_ char *rel = pw_agent_project_path(v, cwd, path), *abs = NULL;
	json_t *res = NULL, *set, *c;
	char *out = NULL;
	size_t n = 0, i, j;

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
			FILE *f;
			if (out || !json_array_size(by) || !(f = open_memstream(&out, &n)))
				continue;
			fprintf(
			    f, "%s Note: %s was also changed by another live view of the project, ",
			    PW_AGENT_TAG, rel);
			put_changers(f, by);
			fputs(
			    ", in its current work: your write went through, but check that it did "
			    "not overwrite another agent's work (`piworkfs changes` shows both).",
			    f);
			if (fclose(f) != 0) {
				free(out);
				out = NULL;
			}
		}
	}
	json_decref(res);
	return out;
}
