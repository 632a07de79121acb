/* SPDX-License-Identifier: MIT */
/*
 * The MCP server's errors and its check of a tool's arguments (mcp.h): every tool call
 * passes its arguments through pw_mcp_check_args before anything reaches the view, and
 * every failing step fills the reply's error through pw_mcp_fail.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"
#include "pw_limits.h"

int pw_mcp_fail(mcp_error *e, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	free(e->message);
	if (vasprintf(&e->message, fmt, ap) < 0)
		e->message = NULL;
	va_end(ap);
	e->code = code;
	return -EPROTO;
}

int pw_mcp_check_args(json_t *args, const arg_spec *spec, size_t n, mcp_error *e)
{
	const char *key;
	json_t *v;

	if (!json_is_object(args))
		return pw_mcp_fail(e, PW_RPC_INVALID_PARAMS, "arguments must be an object");
	json_object_foreach(args, key, v)
	{
		size_t i;
		for (i = 0; i < n && !streq(spec[i].name, key); i++)
			;
		if (i == n)
			return pw_mcp_fail(e, PW_RPC_INVALID_PARAMS, "unknown argument '%.64s'",
					   key);
		switch (spec[i].type) {
		case ARG_STRING:
			if (!json_is_string(v))
				return pw_mcp_fail(e, PW_RPC_INVALID_PARAMS,
						   "'%s' must be a string", key);
			if (json_string_length(v) > PW_MCP_COMMAND_MAX)
				return pw_mcp_fail(e, PW_RPC_INVALID_PARAMS,
						   "'%s' is longer than %d bytes", key,
						   PW_MCP_COMMAND_MAX);
			if (strlen(json_string_value(v)) != json_string_length(v))
				return pw_mcp_fail(e, PW_RPC_INVALID_PARAMS,
						   "'%s' holds a NUL byte", key);
			break;
		case ARG_BOOL:
			if (!json_is_boolean(v))
				return pw_mcp_fail(e, PW_RPC_INVALID_PARAMS,
						   "'%s' must be a boolean", key);
			break;
		case ARG_INT:
			if (!json_is_integer(v))
				return pw_mcp_fail(e, PW_RPC_INVALID_PARAMS,
						   "'%s' must be an integer", key);
			break;
		case ARG_STRINGS: {
			size_t j;
			json_t *s;
			if (!json_is_array(v) || json_array_size(v) == 0 ||
			    json_array_size(v) > 256)
				return pw_mcp_fail(e, PW_RPC_INVALID_PARAMS,
						   "'%s' must be an array of 1 to 256 strings",
						   key);
			json_array_foreach(
			    v, j, s) if (!json_is_string(s) || json_string_length(s) == 0 ||
					 json_string_length(s) > PW_PATH_MAX ||
					 strlen(json_string_value(s)) !=
					     json_string_length(
						 s)) return pw_mcp_fail(e, PW_RPC_INVALID_PARAMS,
									"'%s'[%zu] must be a "
									"path of 1 to %d bytes",
									key, j, PW_PATH_MAX);
			break;
		}
		}
	}
	for (size_t i = 0; i < n; i++)
		if (spec[i].required && !json_object_get(args, spec[i].name))
			return pw_mcp_fail(e, PW_RPC_INVALID_PARAMS, "missing argument '%s'",
					   spec[i].name);
	return 0;
}
