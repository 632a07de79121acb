/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the control protocol codec: every line a client can send goes through
 * pw_rpc_parse_request, every line a client reads through pw_rpc_parse_reply. Also checks
 * the codec's own invariants: a parsed request's error reply and a result reply serialize to
 * exactly one line that parses back as a reply with the same id.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void roundtrip(json_t *msg, json_t *id)
{
	char *buf;
	size_t len;
	pw_rpc_reply rep;

	if (!msg)
		return;
	if (pw_rpc_serialize(msg, PW_RPC_REPLY_MAX, &buf, &len) == 0) {
		if (len == 0 || buf[len - 1] != '\n' || memchr(buf, '\n', len - 1))
			abort();
		if (pw_rpc_parse_reply(buf, len - 1, &rep) != 0)
			abort();
		if (id && !json_equal(rep.id, id))
			abort();
		pw_rpc_reply_done(&rep);
		free(buf);
	}
	json_decref(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pw_rpc_request req;
	pw_rpc_error err;
	pw_rpc_reply rep;
	int r;

	r = pw_rpc_parse_request((const char *)data, size, &req, &err);
	if (r == 0) {
		static const pw_rpc_param spec[] = {
		    {"mode", PW_RPC_T_STRING, false, 64},
		    {"paths", PW_RPC_T_STRING_ARRAY, false, 0},
		    {"dir", PW_RPC_T_BOOL, false, 0},
		    {"n", PW_RPC_T_INT, false, 0},
		};
		char *msg = NULL;
		if (pw_rpc_params_check(req.params, spec, 4, &msg) < 0)
			roundtrip(pw_rpc_error_reply(req.id, PW_RPC_INVALID_PARAMS, msg, NULL),
				  req.id);
		free(msg);
		roundtrip(pw_rpc_result_reply(req.id, json_incref(req.params)), req.id);
	} else if (r == -EINVAL) {
		if (err.code >= 0 || !err.message)
			abort();
		roundtrip(pw_rpc_error_reply(err.id, err.code, err.message, NULL), err.id);
	}
	pw_rpc_request_done(&req);

	if (pw_rpc_parse_reply((const char *)data, size, &rep) == 0)
		pw_rpc_reply_done(&rep);
	return 0;
}
