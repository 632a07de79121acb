/* SPDX-License-Identifier: MIT */
/*
 * JSON-RPC 2.0 codec for the control socket. See proto.h for the decisions it fixes.
 *
 * Everything here works on one line that the transport already bounded to PW_MSG_MAX; the
 * parser itself adds its own guards (nesting depth, id types) so that it can be fuzzed on
 * arbitrary bytes.
 */
#include "proto.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pw_limits.h"
#include "util.h"

static int max_depth(const char *s, size_t len)
{
	int depth = 0, max = 0;
	bool in_string = false, escaped = false;

	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (in_string) {
			if (escaped)
				escaped = false;
			else if (c == '\\')
				escaped = true;
			else if (c == '"')
				in_string = false;
			continue;
		}
		if (c == '"')
			in_string = true;
		else if (c == '{' || c == '[') {
			if (++depth > max)
				max = depth;
		} else if (c == '}' || c == ']')
			depth--;
	}
	return max;
}

static void set_err(pw_rpc_error *e, int code, const char *message, json_t *id)
{
	e->code = code;
	e->message = message;
	e->id = id;
}

static bool id_valid(const json_t *id)
{
	return json_is_string(id) || json_is_integer(id) || json_is_null(id);
}

int pw_rpc_parse_request(const char *line, size_t len, pw_rpc_request *ret, pw_rpc_error *ret_err)
{
	json_error_t jerr;
	json_t *root, *v;

	memset(ret, 0, sizeof(*ret));
	memset(ret_err, 0, sizeof(*ret_err));

	if (len > PW_MSG_MAX) {
		set_err(ret_err, PW_RPC_TOO_LARGE, "message exceeds PW_MSG_MAX bytes", NULL);
		return -EINVAL;
	}
	if (max_depth(line, len) > PW_RPC_DEPTH_MAX) {
		set_err(ret_err, PW_RPC_PARSE_ERROR, "parse error: nesting too deep", NULL);
		return -EINVAL;
	}
	root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (!root) {
		if (json_error_code(&jerr) == json_error_out_of_memory)
			return -ENOMEM;
		set_err(ret_err, PW_RPC_PARSE_ERROR,
			json_error_code(&jerr) == json_error_numeric_overflow
			    ? "parse error: number out of range"
			    : "parse error: not a JSON text",
			NULL);
		return -EINVAL;
	}
	ret->root = root;

	if (json_is_array(root)) {
		set_err(ret_err, PW_RPC_INVALID_REQUEST, "batch requests are not supported", NULL);
		return -EINVAL;
	}
	if (!json_is_object(root)) {
		set_err(ret_err, PW_RPC_INVALID_REQUEST, "a request must be a JSON object", NULL);
		return -EINVAL;
	}

	/* The id first, so that later errors can answer with it. */
	v = json_object_get(root, "id");
	if (v && !id_valid(v)) {
		set_err(ret_err, PW_RPC_INVALID_REQUEST,
			"\"id\" must be a string, an integer or null", NULL);
		return -EINVAL;
	}
	ret->id = v;

	v = json_object_get(root, "jsonrpc");
	if (!json_is_string(v) || !streq(json_string_value(v), "2.0")) {
		set_err(ret_err, PW_RPC_INVALID_REQUEST, "\"jsonrpc\" must be \"2.0\"", ret->id);
		return -EINVAL;
	}

	v = json_object_get(root, "method");
	if (!json_is_string(v) || json_string_length(v) == 0) {
		set_err(ret_err, PW_RPC_INVALID_REQUEST, "\"method\" must be a non-empty string",
			ret->id);
		return -EINVAL;
	}
	ret->method = json_string_value(v);

	const char *key;
	json_t *val;
	json_object_foreach(root, key, val)
	{
		if (!streq(key, "jsonrpc") && !streq(key, "id") && !streq(key, "method") &&
		    !streq(key, "params")) {
			set_err(ret_err, PW_RPC_INVALID_REQUEST, "unknown member in request",
				ret->id);
			return -EINVAL;
		}
	}

	v = json_object_get(root, "params");
	if (v && !json_is_object(v)) {
		set_err(ret_err, PW_RPC_INVALID_PARAMS, "\"params\" must be an object", ret->id);
		return -EINVAL;
	}
	if (!v) {
		v = json_object();
		if (!v || json_object_set_new(root, "params", v) < 0)
			return -ENOMEM;
	}
	ret->params = v;
	return 0;
}

void pw_rpc_request_done(pw_rpc_request *r)
{
	if (!r)
		return;
	json_decref(r->root);
	memset(r, 0, sizeof(*r));
}

static json_t *envelope(json_t *id)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	if (json_object_set_new(o, "jsonrpc", json_string("2.0")) < 0 ||
	    json_object_set_new(o, "id", id ? json_deep_copy(id) : json_null()) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *pw_rpc_result_reply(json_t *id, json_t *result)
{
	json_t *o = envelope(id);
	if (!o) {
		json_decref(result);
		return NULL;
	}
	if (json_object_set_new(o, "result", result ? result : json_null()) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* Messages can quote client input; never let a bad UTF-8 byte lose the whole reply. */
static json_t *message_string(const char *message)
{
	json_t *s = json_string(message ? message : "error");
	return s ? s : json_string("error (message not valid UTF-8)");
}

json_t *pw_rpc_error_reply(json_t *id, int code, const char *message, json_t *data)
{
	json_t *o = envelope(id), *e = json_object();

	if (!o || !e)
		goto fail;
	if (json_object_set_new(e, "code", json_integer(code)) < 0 ||
	    json_object_set_new(e, "message", message_string(message)) < 0)
		goto fail;
	if (data && json_object_set_new(e, "data", TAKE_PTR(data)) < 0)
		goto fail;
	if (json_object_set_new(o, "error", TAKE_PTR(e)) < 0)
		goto fail;
	return o;
fail:
	json_decref(data);
	json_decref(e);
	json_decref(o);
	return NULL;
}

json_t *pw_rpc_notification(const char *method, json_t *params)
{
	json_t *o = json_object();

	if (!o || json_object_set_new(o, "jsonrpc", json_string("2.0")) < 0 ||
	    json_object_set_new(o, "method", json_string(method)) < 0 ||
	    json_object_set_new(o, "params", params ? TAKE_PTR(params) : json_object()) < 0) {
		json_decref(params);
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *pw_rpc_request_new(json_t *id, const char *method, json_t *params)
{
	json_t *o = pw_rpc_notification(method, params);

	if (o && id && json_object_set_new(o, "id", json_deep_copy(id)) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int pw_rpc_serialize(const json_t *msg, size_t max, char **ret, size_t *ret_len)
{
	size_t n = json_dumpb(msg, NULL, 0, JSON_COMPACT);
	char *buf;

	if (n == 0)
		return -ENOMEM;
	if (n + 1 > max)
		return -E2BIG;
	buf = malloc(n + 2);
	if (!buf)
		return -ENOMEM;
	if (json_dumpb(msg, buf, n, JSON_COMPACT) != n) {
		free(buf);
		return -ENOMEM;
	}
	buf[n] = '\n';
	buf[n + 1] = 0;
	*ret = buf;
	*ret_len = n + 1;
	return 0;
}

int pw_rpc_parse_reply(const char *line, size_t len, pw_rpc_reply *ret)
{
	json_error_t jerr;
	json_t *root, *v;
	pw_rpc_reply r = {};

	if (len > PW_RPC_REPLY_MAX || max_depth(line, len) > PW_RPC_DEPTH_MAX)
		return -EBADMSG;
	root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (!root)
		return json_error_code(&jerr) == json_error_out_of_memory ? -ENOMEM : -EBADMSG;
	r.root = root;

	v = json_object_get(root, "jsonrpc");
	if (!json_is_object(root) || !json_is_string(v) || !streq(json_string_value(v), "2.0"))
		goto bad;

	v = json_object_get(root, "method");
	if (v) {
		if (!json_is_string(v) || json_object_get(root, "id"))
			goto bad;
		r.kind = PW_RPC_REPLY_NOTIFICATION;
		r.method = json_string_value(v);
		r.params = json_object_get(root, "params");
		if (r.params && !json_is_object(r.params))
			goto bad;
		if (!r.params) {
			r.params = json_object();
			if (!r.params || json_object_set_new(root, "params", r.params) < 0) {
				json_decref(root);
				return -ENOMEM;
			}
		}
		*ret = r;
		return 0;
	}

	r.id = json_object_get(root, "id");
	if (!r.id || !id_valid(r.id))
		goto bad;
	r.result = json_object_get(root, "result");
	v = json_object_get(root, "error");
	if ((r.result != NULL) == (v != NULL))
		goto bad;
	if (r.result) {
		r.kind = PW_RPC_REPLY_RESULT;
	} else {
		json_t *code = json_object_get(v, "code"), *msg = json_object_get(v, "message");
		if (!json_is_object(v) || !json_is_integer(code) || !json_is_string(msg))
			goto bad;
		if (json_integer_value(code) < INT32_MIN || json_integer_value(code) > INT32_MAX)
			goto bad;
		r.kind = PW_RPC_REPLY_ERROR;
		r.error_code = (int)json_integer_value(code);
		r.error_message = json_string_value(msg);
		r.error_data = json_object_get(v, "data");
	}
	*ret = r;
	return 0;
bad:
	json_decref(root);
	return -EBADMSG;
}

void pw_rpc_reply_done(pw_rpc_reply *r)
{
	if (!r)
		return;
	json_decref(r->root);
	memset(r, 0, sizeof(*r));
}

static const char *const type_names[] = {
    [PW_RPC_T_STRING] = "a string",  [PW_RPC_T_BOOL] = "a boolean",
    [PW_RPC_T_INT] = "an integer",   [PW_RPC_T_STRING_ARRAY] = "an array of strings",
    [PW_RPC_T_OBJECT] = "an object", [PW_RPC_T_OBJECT_ARRAY] = "an array of objects",
};

static const char *type_name(pw_rpc_type t)
{
	return PW_NAME_OF(type_names, t, "?");
}

/* Item I of an array param P: 0, or -EINVAL (-ENOMEM) with *RET_MSG naming it. */
static int check_item(const json_t *item, const pw_rpc_param *p, size_t i, char **ret_msg)
{
	int r;

	if (p->type == PW_RPC_T_OBJECT_ARRAY) {
		if (json_is_object(item))
			return 0;
		r = asprintf(ret_msg, "params.%s[%zu]: expected an object", p->name, i);
	} else if (!json_is_string(item)) {
		r = asprintf(ret_msg, "params.%s[%zu]: expected a string", p->name, i);
	} else if (json_string_length(item) > PW_PATH_MAX) {
		r = asprintf(ret_msg, "params.%s[%zu]: longer than %d bytes", p->name, i,
			     PW_PATH_MAX);
	} else {
		return 0;
	}
	return r < 0 ? -ENOMEM : -EINVAL;
}

/* An array param (a *_ARRAY type): at most P->max items (0: 1024), each of its type. */
static int check_array(const json_t *v, const pw_rpc_param *p, char **ret_msg)
{
	size_t max = p->max ? p->max : 1024, i;
	json_t *item;
	int r;

	if (json_array_size(v) > max) {
		r = asprintf(ret_msg, "params.%s: more than %zu items", p->name, max);
		return r < 0 ? -ENOMEM : -EINVAL;
	}
	json_array_foreach((json_t *)v, i, item)
	{
		r = check_item(item, p, i, ret_msg);
		if (r < 0)
			return r;
	}
	return 0;
}

static int check_one(const json_t *v, const pw_rpc_param *p, char **ret_msg)
{
	size_t max;
	int r;

	switch (p->type) {
	case PW_RPC_T_STRING:
		max = p->max ? p->max : PW_PATH_MAX;
		if (!json_is_string(v))
			break;
		if (json_string_length(v) > max)
			r = asprintf(ret_msg, "params.%s: longer than %zu bytes", p->name, max);
		else
			return 0;
		return r < 0 ? -ENOMEM : -EINVAL;
	case PW_RPC_T_BOOL:
		if (json_is_boolean(v))
			return 0;
		break;
	case PW_RPC_T_INT:
		if (json_is_integer(v))
			return 0;
		break;
	case PW_RPC_T_STRING_ARRAY:
	case PW_RPC_T_OBJECT_ARRAY:
		if (!json_is_array(v))
			break;
		return check_array(v, p, ret_msg);
	case PW_RPC_T_OBJECT:
		if (json_is_object(v))
			return 0;
		break;
	}
	r = asprintf(ret_msg, "params.%s: expected %s", p->name, type_name(p->type));
	return r < 0 ? -ENOMEM : -EINVAL;
}

/* Keys can be long and hold anything (also bytes that would cut a UTF-8 sequence): name at
 * most SIZE-1 bytes of printable ASCII, '?' for the rest. */
static void printable_prefix(const char *s, char *out, size_t size)
{
	size_t i;
	for (i = 0; s[i] && i + 1 < size; i++)
		out[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	out[i] = 0;
}

int pw_rpc_params_check(const json_t *params, const pw_rpc_param *spec, size_t n_spec,
			char **ret_msg)
{
	const char *key;
	json_t *v;
	int r;

	if (!json_is_object(params)) {
		*ret_msg = strdup("params: expected an object");
		return -EINVAL;
	}
	json_object_foreach((json_t *)params, key, v)
	{
		const pw_rpc_param *p = NULL;
		for (size_t i = 0; i < n_spec; i++)
			if (streq(spec[i].name, key))
				p = &spec[i];
		if (!p) {
			char shown[65];
			printable_prefix(key, shown, sizeof(shown));
			r = asprintf(ret_msg, "params.%s: unknown parameter", shown);
			return r < 0 ? -ENOMEM : -EINVAL;
		}
		r = check_one(v, p, ret_msg);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < n_spec; i++) {
		if (spec[i].required && !json_object_get(params, spec[i].name)) {
			r = asprintf(ret_msg, "params.%s: missing", spec[i].name);
			return r < 0 ? -ENOMEM : -EINVAL;
		}
	}
	return 0;
}
