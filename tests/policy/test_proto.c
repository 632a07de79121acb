/* SPDX-License-Identifier: MIT */
/* The JSON-RPC 2.0 codec (policy/proto.c): requests, ids, batches, limits, replies. */
#include <criterion/criterion.h>
#include <string.h>

#include "pw_limits.h"
#include "proto.h"
#include "util.h"

static int parse(const char *line, pw_rpc_request *r, pw_rpc_error *e)
{
	return pw_rpc_parse_request(line, strlen(line), r, e);
}

/* Parses LINE expecting failure with CODE; returns whether the error carried an id. */
static bool expect_error(const char *line, int code)
{
	pw_rpc_request r;
	pw_rpc_error e;
	int ret = parse(line, &r, &e);
	cr_assert_eq(ret, -EINVAL, "line %s: ret %d", line, ret);
	cr_assert_eq(e.code, code, "line %s: code %d, want %d (%s)", line, e.code, code, e.message);
	cr_assert_not_null(e.message);
	bool had_id = e.id != NULL;
	pw_rpc_request_done(&r);
	return had_id;
}

Test(proto, valid_request_with_params)
{
	pw_rpc_request r;
	pw_rpc_error e;
	cr_assert_eq(parse("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"mode.set\","
			   "\"params\":{\"mode\":\"build\"}}",
			   &r, &e),
		     0);
	cr_assert_str_eq(r.method, "mode.set");
	cr_assert(json_is_integer(r.id));
	cr_assert_eq(json_integer_value(r.id), 7);
	cr_assert_str_eq(json_string_value(json_object_get(r.params, "mode")), "build");
	pw_rpc_request_done(&r);
	cr_assert_null(r.root);
}

Test(proto, absent_params_become_empty_object)
{
	pw_rpc_request r;
	pw_rpc_error e;
	cr_assert_eq(parse("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"status\"}", &r, &e), 0);
	cr_assert(json_is_object(r.params));
	cr_assert_eq(json_object_size(r.params), 0);
	pw_rpc_request_done(&r);
}

Test(proto, ids_of_every_type)
{
	static const char *ok[] = {
	    "\"abc\"", "\"\"", "0", "-1", "9223372036854775807", "-9223372036854775808", "null"};
	static const char *bad[] = {"1.5", "true", "false", "{}", "[]", "[1]"};
	char line[256];

	for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
		pw_rpc_request r;
		pw_rpc_error e;
		snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"x\"}",
			 ok[i]);
		cr_assert_eq(parse(line, &r, &e), 0, "id %s", ok[i]);
		cr_assert_not_null(r.id, "id %s kept", ok[i]);
		json_t *reply = pw_rpc_result_reply(r.id, json_true());
		cr_assert(json_equal(json_object_get(reply, "id"), r.id), "id %s echoed", ok[i]);
		json_decref(reply);
		pw_rpc_request_done(&r);
	}
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"x\"}",
			 bad[i]);
		cr_assert_not(expect_error(line, PW_RPC_INVALID_REQUEST), "bad id %s not echoed",
			      bad[i]);
	}
}

Test(proto, huge_numbers_are_parse_errors)
{
	expect_error("{\"jsonrpc\":\"2.0\",\"id\":9223372036854775808,\"method\":\"x\"}",
		     PW_RPC_PARSE_ERROR);
	expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"n\":1e999}}",
		     PW_RPC_PARSE_ERROR);
	char big[512];
	memset(big, '9', sizeof(big));
	big[sizeof(big) - 1] = 0;
	char line[700];
	snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"x\"}", big);
	expect_error(line, PW_RPC_PARSE_ERROR);
}

Test(proto, notification_has_no_id)
{
	pw_rpc_request r;
	pw_rpc_error e;
	cr_assert_eq(parse("{\"jsonrpc\":\"2.0\",\"method\":\"reload\"}", &r, &e), 0);
	cr_assert_null(r.id);
	pw_rpc_request_done(&r);
}

Test(proto, malformed_json)
{
	expect_error("", PW_RPC_PARSE_ERROR);
	expect_error("{", PW_RPC_PARSE_ERROR);
	expect_error("{\"jsonrpc\":\"2.0\",}", PW_RPC_PARSE_ERROR);
	expect_error("{\"jsonrpc\":\"2.0\"} {}", PW_RPC_PARSE_ERROR);
	expect_error("\xff\xfe", PW_RPC_PARSE_ERROR);
	/* Duplicate keys are ambiguous: rejected. */
	expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\",\"method\":\"b\"}",
		     PW_RPC_PARSE_ERROR);
	/* A NUL escaped in a string. */
	expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\\u0000b\"}", PW_RPC_PARSE_ERROR);
}

Test(proto, raw_nul_byte_inside_length)
{
	pw_rpc_request r;
	pw_rpc_error e;
	static const char line[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\0\"}";
	cr_assert_eq(pw_rpc_parse_request(line, sizeof(line) - 1, &r, &e), -EINVAL);
	cr_assert_eq(e.code, PW_RPC_PARSE_ERROR);
	pw_rpc_request_done(&r);
}

Test(proto, deep_nesting_refused_before_parsing)
{
	size_t n = 20000; /* 40,000 bytes: under PW_MSG_MAX, far over the depth cap */
	char *line = malloc(2 * n + 1);
	memset(line, '[', n);
	memset(line + n, ']', n);
	line[2 * n] = 0;
	expect_error(line, PW_RPC_PARSE_ERROR);
	free(line);
}

Test(proto, batches_rejected)
{
	expect_error("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"status\"}]",
		     PW_RPC_INVALID_REQUEST);
	expect_error("[]", PW_RPC_INVALID_REQUEST);
}

Test(proto, invalid_requests)
{
	expect_error("42", PW_RPC_INVALID_REQUEST);
	expect_error("\"status\"", PW_RPC_INVALID_REQUEST);
	cr_assert(expect_error("{\"id\":1,\"method\":\"status\"}", PW_RPC_INVALID_REQUEST),
		  "a readable id is echoed");
	expect_error("{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"status\"}",
		     PW_RPC_INVALID_REQUEST);
	expect_error("{\"jsonrpc\":2,\"id\":1,\"method\":\"status\"}", PW_RPC_INVALID_REQUEST);
	expect_error("{\"jsonrpc\":\"2.0\",\"id\":1}", PW_RPC_INVALID_REQUEST);
	expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}", PW_RPC_INVALID_REQUEST);
	expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}", PW_RPC_INVALID_REQUEST);
	expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"s\",\"extra\":1}",
		     PW_RPC_INVALID_REQUEST);
	cr_assert(expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"s\",\"params\":[1]}",
			       PW_RPC_INVALID_PARAMS));
	expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"s\",\"params\":\"x\"}",
		     PW_RPC_INVALID_PARAMS);
}

Test(proto, oversized_line)
{
	size_t n = PW_MSG_MAX + 1;
	char *line = malloc(n);
	memset(line, ' ', n);
	pw_rpc_request r;
	pw_rpc_error e;
	cr_assert_eq(pw_rpc_parse_request(line, n, &r, &e), -EINVAL);
	cr_assert_eq(e.code, PW_RPC_TOO_LARGE);
	pw_rpc_request_done(&r);
	free(line);
}

static char *serialize(json_t *msg)
{
	char *buf;
	size_t len;
	cr_assert_eq(pw_rpc_serialize(msg, PW_MSG_MAX, &buf, &len), 0);
	cr_assert_eq(strlen(buf), len, "NUL-terminated after the newline");
	cr_assert_eq(buf[len - 1], '\n');
	cr_assert_null(memchr(buf, '\n', len - 1), "exactly one newline, at the end");
	buf[len - 1] = 0;
	json_decref(msg);
	return buf;
}

Test(proto, replies_roundtrip)
{
	json_t *id = json_string("x\ny");
	char *s = serialize(pw_rpc_result_reply(id, json_pack("{s:s}", "mode", "build\n")));
	pw_rpc_reply rep;
	cr_assert_eq(pw_rpc_parse_reply(s, strlen(s), &rep), 0);
	cr_assert_eq(rep.kind, PW_RPC_REPLY_RESULT);
	cr_assert(json_equal(rep.id, id));
	cr_assert_str_eq(json_string_value(json_object_get(rep.result, "mode")), "build\n");
	pw_rpc_reply_done(&rep);
	free(s);

	s = serialize(pw_rpc_error_reply(NULL, PW_RPC_UNKNOWN_MODE, "unknown mode",
					 json_pack("{s:[s]}", "modes", "plan")));
	cr_assert_eq(pw_rpc_parse_reply(s, strlen(s), &rep), 0);
	cr_assert_eq(rep.kind, PW_RPC_REPLY_ERROR);
	cr_assert(json_is_null(rep.id));
	cr_assert_eq(rep.error_code, PW_RPC_UNKNOWN_MODE);
	cr_assert_str_eq(rep.error_message, "unknown mode");
	cr_assert(json_is_object(rep.error_data));
	pw_rpc_reply_done(&rep);
	free(s);

	s = serialize(pw_rpc_notification("mode.changed", json_pack("{s:s}", "to", "plan")));
	cr_assert_eq(pw_rpc_parse_reply(s, strlen(s), &rep), 0);
	cr_assert_eq(rep.kind, PW_RPC_REPLY_NOTIFICATION);
	cr_assert_str_eq(rep.method, "mode.changed");
	pw_rpc_reply_done(&rep);
	free(s);
	json_decref(id);
}

Test(proto, request_builder_parses_back)
{
	json_t *id = json_integer(3);
	char *s = serialize(pw_rpc_request_new(id, "check", json_pack("{s:[s]}", "paths", "a")));
	pw_rpc_request r;
	pw_rpc_error e;
	cr_assert_eq(parse(s, &r, &e), 0);
	cr_assert_str_eq(r.method, "check");
	cr_assert_eq(json_integer_value(r.id), 3);
	pw_rpc_request_done(&r);
	free(s);
	json_decref(id);
}

Test(proto, error_message_with_bad_utf8_still_replies)
{
	json_t *rep = pw_rpc_error_reply(NULL, PW_RPC_INVALID_PARAMS, "bad \xc3", NULL);
	cr_assert_not_null(rep);
	json_decref(rep);
}

Test(proto, serialize_refuses_oversized)
{
	char *big = malloc(PW_MSG_MAX + 10);
	memset(big, 'a', PW_MSG_MAX + 9);
	big[PW_MSG_MAX + 9] = 0;
	json_t *msg = pw_rpc_result_reply(NULL, json_string(big));
	char *buf;
	size_t len;
	cr_assert_eq(pw_rpc_serialize(msg, PW_MSG_MAX, &buf, &len), -E2BIG);
	json_decref(msg);
	free(big);
}

Test(proto, bad_replies)
{
	static const char *bad[] = {
	    "{}",
	    "[]",
	    "{\"jsonrpc\":\"2.0\",\"id\":1}",
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1,\"error\":{}}",
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":\"x\",\"message\":\"m\"}}",
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":1}}",
	    "{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":1}",
	    "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":1}",
	    "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":3}",
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":99999999999,\"message\":\"m\"}}",
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		pw_rpc_reply rep;
		cr_assert_eq(pw_rpc_parse_reply(bad[i], strlen(bad[i]), &rep), -EBADMSG, "%s",
			     bad[i]);
	}
}

static const pw_rpc_param check_spec[] = {
    {"paths", PW_RPC_T_STRING_ARRAY, true, 3}, {"op", PW_RPC_T_STRING, false, 16},
    {"dir", PW_RPC_T_BOOL, false, 0},	       {"n", PW_RPC_T_INT, false, 0},
    {"o", PW_RPC_T_OBJECT, false, 0},	       {"os", PW_RPC_T_OBJECT_ARRAY, false, 2},
};

static void expect_params(const char *json, int want, const char *msg_part)
{
	json_t *p = json_loads(json, 0, NULL);
	cr_assert_not_null(p, "%s", json);
	char *msg = NULL;
	int r = pw_rpc_params_check(p, check_spec, ELEMENTSOF(check_spec), &msg);
	cr_assert_eq(r, want, "%s: %d (%s)", json, r, msg ? msg : "");
	if (msg_part) {
		cr_assert_not_null(msg);
		cr_assert(strstr(msg, msg_part), "%s: message '%s' lacks '%s'", json, msg,
			  msg_part);
	}
	free(msg);
	json_decref(p);
}

Test(proto, params_schema)
{
	expect_params("{\"paths\":[\"a\",\"b\"]}", 0, NULL);
	expect_params("{\"paths\":[],\"op\":\"write\",\"dir\":true,\"n\":3}", 0, NULL);
	expect_params("{}", -EINVAL, "params.paths: missing");
	expect_params("{\"paths\":\"a\"}", -EINVAL, "params.paths: expected an array of strings");
	expect_params("{\"paths\":[\"a\",1]}", -EINVAL, "params.paths[1]: expected a string");
	expect_params("{\"paths\":[\"a\",\"b\",\"c\",\"d\"]}", -EINVAL, "more than 3 items");
	expect_params("{\"paths\":[],\"op\":\"abcdefghijklmnopq\"}", -EINVAL, "longer than 16");
	expect_params("{\"paths\":[],\"op\":1}", -EINVAL, "params.op: expected a string");
	expect_params("{\"paths\":[],\"dir\":1}", -EINVAL, "expected a boolean");
	expect_params("{\"paths\":[],\"n\":1.5}", -EINVAL, "expected an integer");
	expect_params("{\"paths\":[],\"zzz\\n\\u00e9\":1}", -EINVAL, "params.zzz???: unknown");

	/* Objects, and arrays of them (the text.* methods' refusals and results). */
	expect_params("{\"paths\":[],\"o\":{\"a\":[1]},\"os\":[{},{\"b\":2}]}", 0, NULL);
	expect_params("{\"paths\":[],\"o\":[]}", -EINVAL, "params.o: expected an object");
	expect_params("{\"paths\":[],\"os\":{}}", -EINVAL, "expected an array of objects");
	expect_params("{\"paths\":[],\"os\":[{},1]}", -EINVAL, "params.os[1]: expected an object");
	expect_params("{\"paths\":[],\"os\":[{},{},{}]}", -EINVAL, "more than 2 items");
}
