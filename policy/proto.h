/* SPDX-License-Identifier: MIT */
/*
 * The control protocol's codec: JSON-RPC 2.0, one message per line (docs/PROTOCOL.md).
 * Pure: no sockets, no I/O. The server parses each received line into a pw_rpc_request,
 * validates params against a small schema, and builds result, error and notification
 * objects; the client parses what comes back with pw_rpc_parse_reply.
 *
 * Decisions fixed here (and documented in PROTOCOL.md):
 *   - a line holds exactly one JSON object; a batch (array) is rejected with -32600;
 *   - "id" is a string, an integer that fits int64, or null; a real number, a boolean, an
 *     object or an array is -32600; a number beyond int64 anywhere is a parse error -32700;
 *   - "params" is an object or absent (by-name only); an array is -32602;
 *   - duplicate keys and NUL characters in strings are parse errors (-32700);
 *   - a request without "id" is a notification: it is executed but gets no reply.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "pw_limits.h"

/* JSON-RPC 2.0 standard codes and ours (-32000 .. -32099 are implementation defined). */
enum {
	PW_RPC_PARSE_ERROR = -32700,
	PW_RPC_INVALID_REQUEST = -32600,
	PW_RPC_METHOD_NOT_FOUND = -32601,
	PW_RPC_INVALID_PARAMS = -32602,
	PW_RPC_INTERNAL_ERROR = -32603,
	PW_RPC_UNKNOWN_MODE = -32001, /* no such mode */
	PW_RPC_REFUSED = -32002,      /* authority: wrong uid, or an agent loosening */
	PW_RPC_MODE_BROKEN = -32003,  /* the mode's file is broken */
	PW_RPC_TOO_LARGE = -32004,    /* a line longer than PW_MSG_MAX (connection closed) */
	PW_RPC_BUSY = -32005,	      /* too many connections (connection closed) */
	PW_RPC_INVALID_PATH = -32006, /* a path that cannot be normalized */
	PW_RPC_UNAVAILABLE = -32007,  /* a feature this daemon was built or started without */
	PW_RPC_NO_CHANGE = -32008,    /* diff or undo of a path with no recorded change */
};

/* A parsed request. ROOT owns everything; id/params are borrowed from it. */
typedef struct pw_rpc_request {
	json_t *root;
	json_t *id; /* NULL for a notification (no "id" member); json null is kept */
	const char *method;
	json_t *params; /* an object; an empty object when absent */
} pw_rpc_request;

/* Why a line was not a valid request: the error to answer with. MESSAGE is static. */
typedef struct pw_rpc_error {
	int code;
	const char *message;
	json_t *id; /* the request's id when it could be read (borrowed from root), else NULL */
} pw_rpc_error;

/*
 * Parses one line (LEN bytes, without the newline; need not be NUL-terminated).
 * Returns 0 with *ret filled (release with pw_rpc_request_done), or -EINVAL with *ret_err
 * filled: the caller answers pw_rpc_error_reply(err.id, err.code, err.message, NULL)
 * and then calls pw_rpc_request_done(ret) which also releases err.id's owner. Returns
 * -ENOMEM on allocation failure (neither filled).
 */
int pw_rpc_parse_request(const char *line, size_t len, pw_rpc_request *ret, pw_rpc_error *ret_err);
void pw_rpc_request_done(pw_rpc_request *r); /* accepts a zeroed request */

/* Builders. Each returns a new object or NULL on ENOMEM. ID is borrowed (copied with a new
 * reference; NULL means json null). RESULT, DATA and PARAMS are stolen (may be NULL). */
json_t *pw_rpc_result_reply(json_t *id, json_t *result);
json_t *pw_rpc_error_reply(json_t *id, int code, const char *message, json_t *data);
json_t *pw_rpc_notification(const char *method, json_t *params);
json_t *pw_rpc_request_new(json_t *id, const char *method, json_t *params); /* client side */

/*
 * Serializes MSG as one compact line ending in '\n' (strings escape control characters, so
 * the line has no other newline; *ret is also NUL-terminated after it). Returns 0 with
 * malloc'd *ret and *ret_len (newline included, NUL not), -E2BIG when the line would exceed
 * MAX bytes (newline included), -ENOMEM.
 */
int pw_rpc_serialize(const json_t *msg, size_t max, char **ret, size_t *ret_len);

/* A message the client reads: a reply to a request, or a notification. */
typedef enum pw_rpc_reply_kind {
	PW_RPC_REPLY_RESULT,
	PW_RPC_REPLY_ERROR,
	PW_RPC_REPLY_NOTIFICATION,
} pw_rpc_reply_kind;

typedef struct pw_rpc_reply {
	json_t *root;
	pw_rpc_reply_kind kind;
	json_t *id;		   /* result/error: the id (json null possible); borrowed */
	json_t *result;		   /* RESULT: borrowed */
	int error_code;		   /* ERROR */
	const char *error_message; /* ERROR: borrowed */
	json_t *error_data;	   /* ERROR: borrowed, may be NULL */
	const char *method;	   /* NOTIFICATION */
	json_t *params;		   /* NOTIFICATION: borrowed, object (empty when absent) */
} pw_rpc_reply;

/* Parses one received line. Returns 0 with *ret (release with pw_rpc_reply_done), -EBADMSG
 * for anything that is not a well-formed JSON-RPC 2.0 response or notification (or is longer
 * than PW_RPC_REPLY_MAX), -ENOMEM. */
int pw_rpc_parse_reply(const char *line, size_t len, pw_rpc_reply *ret);
void pw_rpc_reply_done(pw_rpc_reply *r);

/* Schema of one param, for pw_rpc_params_check. */
typedef enum pw_rpc_type {
	PW_RPC_T_STRING,
	PW_RPC_T_BOOL,
	PW_RPC_T_INT,	       /* integer that fits int64 */
	PW_RPC_T_STRING_ARRAY, /* array of strings */
	PW_RPC_T_OBJECT,       /* an object, whatever it holds (the method reads it) */
	PW_RPC_T_OBJECT_ARRAY, /* array of objects */
} pw_rpc_type;

typedef struct pw_rpc_param {
	const char *name;
	pw_rpc_type type;
	bool required;
	size_t max; /* STRING: max bytes (0: PW_PATH_MAX); *_ARRAY: max items (0: 1024) */
} pw_rpc_param;

/*
 * Checks PARAMS (an object) against SPEC: every required key present, every key known,
 * every value of its type and within its bound. Returns 0, or -EINVAL with a malloc'd
 * message in *ret_msg naming the key ("params.paths[3]: expected a string"); the caller
 * answers -32602 with it.
 */
int pw_rpc_params_check(const json_t *params, const pw_rpc_param *spec, size_t n_spec,
			char **ret_msg);
