/* SPDX-License-Identifier: MIT */
/*
 * The MCP server's own (mcp_server.c, mcp_args.c): its error codes, the error a reply
 * carries, and the checking of a tool's arguments against what the tool takes. Not the
 * room's face (agent.h): only the server's files include it.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "proto.h"
#include "util.h"

/* JSON-RPC error codes of this server: the standard ones, which the MCP specification uses,
 * are proto.h's (PW_RPC_PARSE_ERROR ... PW_RPC_INTERNAL_ERROR); these are its own. */
enum {
	MCP_NO_VIEW = -32001,		 /* not in a live view, or its daemon does not answer */
	MCP_RESOURCE_NOT_FOUND = -32002, /* as the specification has it */
};

/* An error for the reply: CODE and a malloc'd message. */
typedef struct mcp_error {
	int code;
	char *message;
} mcp_error;

/* Every failing step of a call ends here: E holds the error the reply carries, and the
 * step returns -EPROTO (the call fails at the protocol's level), which its callers pass up. */
int pw_mcp_fail(mcp_error *e, int code, const char *fmt, ...) _printf_(3, 4);

typedef enum { ARG_STRING, ARG_STRINGS, ARG_BOOL, ARG_INT } arg_type;

typedef struct arg_spec {
	const char *name;
	arg_type type;
	bool required;
} arg_spec;

/* ARGS against SPEC: an object, no unknown names, the right types, bounded sizes. */
int pw_mcp_check_args(json_t *args, const arg_spec *spec, size_t n, mcp_error *e);
