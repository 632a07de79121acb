/* SPDX-License-Identifier: MIT */
/*
 * The bash pre-flight's result object: decisions, the verdict and its JSON form, and the
 * entry point that sets up one analysis (bash.h explains the model). The targets
 * themselves are added by bash_targets.c.
 */
#include <errno.h>
#include <string.h>
#include <tree_sitter/api.h>

#include "bash.h"
#include "bash_internal.h"
#include "bash_path.h"
#include "bash_targets.h"
#include "bash_walk.h"
#include "pw_limits.h"
#include "path.h"
#include "report.h"
#include "util.h"

static const char *const status_names[] = {
    [PW_BASH_ALLOWED] = "allowed",
    [PW_BASH_DENIED] = "denied",
    [PW_BASH_OUTSIDE] = "outside",
    [PW_BASH_UNKNOWN] = "unknown",
};

const char *pw_bash_status_name(pw_bash_status s)
{
	return PW_NAME_OF(status_names, s, "unknown");
}

static const char *const access_names[] = {
    [PW_BASH_WRITE] = "write",
    [PW_BASH_READ] = "read",
    [PW_BASH_EXEC] = "exec",
};

const char *pw_bash_access_name(pw_bash_access a)
{
	return PW_NAME_OF(access_names, a, "write");
}

static const char *const kind_names[] = {
    [PW_BASH_KIND_PATH] = "path",
    [PW_BASH_KIND_PATTERN] = "pattern",
    [PW_BASH_KIND_RAW] = "raw",
    [PW_BASH_KIND_COMMAND] = "command",
};

const char *pw_bash_kind_name(pw_bash_kind k)
{
	return PW_NAME_OF(kind_names, k, "raw");
}

void pw_bash_result_free(pw_bash_result *r)
{
	if (!r)
		return;
	PW_FREE_ARRAY(r->targets, r->n_targets, bw_target_done);
	free(r->index);
	free(r);
}

size_t pw_bash_target_count(const pw_bash_result *r)
{
	return r ? r->n_targets : 0;
}

const pw_bash_target *pw_bash_target_get(const pw_bash_result *r, size_t i)
{
	return r && i < r->n_targets ? &r->targets[i] : NULL;
}

bool pw_bash_result_heuristic(const pw_bash_result *r)
{
	return r && r->heuristic;
}

bool pw_bash_result_truncated(const pw_bash_result *r)
{
	return r && r->truncated;
}

void pw_bash_decide(pw_bash_result *r, const pw_policy *policy)
{
	if (!r || !policy)
		return;
	for (size_t i = 0; i < r->n_targets; i++) {
		pw_bash_target *t = &r->targets[i];
		if (t->kind != PW_BASH_KIND_PATH && t->kind != PW_BASH_KIND_PATTERN)
			continue;
		if (t->status == PW_BASH_OUTSIDE)
			continue;
		pw_op op = t->access == PW_BASH_READ ? PW_OP_READ : t->op;
		pw_policy_decide(policy, op, t->path, t->is_dir, &t->decision);
		t->decided = true;
		t->status = t->decision.allowed ? PW_BASH_ALLOWED : PW_BASH_DENIED;
	}
}

static int status_rank(pw_bash_status s)
{
	switch (s) {
	case PW_BASH_DENIED:
		return 3;
	case PW_BASH_OUTSIDE:
		return 2;
	case PW_BASH_UNKNOWN:
		return 1;
	case PW_BASH_ALLOWED:
		return 0;
	}
	return 1;
}

pw_bash_status pw_bash_verdict(const pw_bash_result *r)
{
	pw_bash_status v = PW_BASH_ALLOWED;

	if (!r || r->oom)
		return PW_BASH_UNKNOWN;
	for (size_t i = 0; i < r->n_targets; i++) {
		const pw_bash_target *t = &r->targets[i];
		pw_bash_status s = t->status;
		/* The view does not govern reads outside the project or of unknown paths; only a
		 * read it would refuse (a hidden path) counts. */
		if (t->access == PW_BASH_READ && s != PW_BASH_DENIED)
			continue;
		if (status_rank(s) > status_rank(v))
			v = s;
	}
	if (v == PW_BASH_ALLOWED && (r->heuristic || r->truncated))
		v = PW_BASH_UNKNOWN;
	return v;
}

static int json_set_str(json_t *o, const char *key, const char *val)
{
	return json_object_set_new(o, key, pw_report_str_or_null(val));
}

static json_t *target_json(const pw_bash_target *t)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	int k = 0;
	k |= json_set_str(o, "command", t->command);
	k |= json_set_str(o, "path", t->path);
	k |= json_set_str(o, "kind", pw_bash_kind_name(t->kind));
	k |= json_set_str(o, "access", pw_bash_access_name(t->access));
	k |= json_set_str(o, "op",
			  t->access == PW_BASH_EXEC
			      ? NULL
			      : pw_op_name(t->access == PW_BASH_READ ? PW_OP_READ : t->op));
	k |= json_set_str(o, "status", pw_bash_status_name(t->status));
	k |= json_object_set_new(o, "is_dir", json_boolean(t->is_dir));
	k |= json_object_set_new(o, "subtree", json_boolean(t->subtree));
	k |= json_object_set_new(o, "heuristic", json_boolean(t->heuristic));
	k |= json_set_str(o, "note", t->note);
	if (t->decided) {
		k |= json_set_str(o, "errno", pw_report_errno_name(t->decision.err));
		k |= json_set_str(o, "reason", pw_reason_name(t->decision.reason));
		json_t *rule = t->decision.rule ? pw_report_rule(t->decision.rule) : json_null();
		k |= json_object_set_new(o, "rule", rule);
	}
	if (k < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *pw_bash_result_json(const pw_bash_result *r)
{
	json_t *o = json_object(), *arr = json_array();
	if (!o || !arr)
		goto fail;
	for (size_t i = 0; i < r->n_targets; i++)
		if (json_array_append_new(arr, target_json(&r->targets[i])) < 0)
			goto fail;
	if (json_set_str(o, "verdict", pw_bash_status_name(pw_bash_verdict(r))) < 0 ||
	    json_object_set_new(o, "heuristic", json_boolean(r->heuristic)) < 0 ||
	    json_object_set_new(o, "truncated", json_boolean(r->truncated)) < 0 ||
	    json_object_set_new(o, "targets", arr) < 0) {
		arr = NULL;
		goto fail;
	}
	return o;
fail:
	json_decref(arr);
	json_decref(o);
	return NULL;
}

const TSLanguage *tree_sitter_bash(void);

int pw_bash_check_runtime(const char **ret_err)
{
	uint32_t v = ts_language_version(tree_sitter_bash());
	if (v < TREE_SITTER_MIN_COMPATIBLE_LANGUAGE_VERSION || v > TREE_SITTER_LANGUAGE_VERSION) {
		if (ret_err)
			*ret_err = "the tree-sitter runtime does not support the bash grammar's "
				   "ABI version";
		return -ENOTSUP;
	}
	return 0;
}

int pw_bash_analyze(const char *cmd, size_t len, const pw_bash_opts *opts, pw_bash_result **ret)
{
	char cwd[PW_PATH_MAX];
	const char *why;
	int r;

	if (len > PW_BASH_INPUT_MAX)
		return -E2BIG;
	if (len > 0 && memchr(cmd, '\0', len))
		return -EINVAL;
	r = pw_bash_check_runtime(&why);
	if (r < 0)
		return r;
	const char *c0 = opts && opts->cwd ? opts->cwd : "";
	r = pw_path_normalize(c0, strlen(c0), cwd, NULL);
	if (r < 0)
		return -EINVAL;

	pw_bash_opts o = opts ? *opts : (pw_bash_opts){.root_fd = -1};
	pw_bash_result *res = calloc(1, sizeof(*res));
	if (!res)
		return -ENOMEM;
	bw_state st = {0};
	bw_set_cwd(&st, BW_CWD_KNOWN, cwd);
	bw_ctx c = {
	    .res = res,
	    .opts = &o,
	    .st = &st,
	    .steps = BW_STEPS_BASE + BW_STEPS_PER_BYTE * (unsigned long)len,
	    .analyze_string = bw_analyze_string,
	};
	bw_analyze_string(&c, cmd, len, 0, NULL);

	for (size_t i = 0; i < c.n_funcs; i++)
		free(c.funcs[i].name);
	free(c.funcs);
	free(c.git_memo_cwd);
	free(c.git_memo_root);
	for (size_t i = 0; c.stat_memo && i < BW_STAT_MEMO_SLOTS; i++)
		free(c.stat_memo[i].path);
	free(c.stat_memo);
	free(st.cwd);
	for (size_t i = 0; i < st.n_vars; i++) {
		free(st.vars[i].name);
		free(st.vars[i].value);
	}
	free(st.vars);
	if (res->oom) {
		pw_bash_result_free(res);
		return -ENOMEM;
	}
	*ret = res;
	return 0;
}
