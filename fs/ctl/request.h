/* SPDX-License-Identifier: MIT */
/*
 * Asking to switch: the agent asks for a mode that only the person can grant
 * (docs/PROTOCOL.md "mode.request", docs/SECURITY.md "Asking to switch").
 *
 * A restricted client (an agent socket) calls `mode.request {mode, reason}`. A tightening is
 * done at once, as mode.set would. A loosening becomes the view's one pending request (a new
 * one supersedes the old) and is shown to the operator side only: the operator client that
 * owns the agent socket it came through (the `piworkfs run` of that sandbox, which asks the
 * person on its terminal), or `piworkfs mode --approve/--deny` from any terminal of the
 * person. The agent side can neither see other sandboxes' requests nor answer any.
 *
 * Outcomes: approved (the switch is in force, recorded with origin "request", the reason
 * and who answered), denied, expired (after expires_s, default 120 s), superseded (a newer
 * request, or the mode changed meanwhile). The requester gets `mode.request.done`; a
 * blocking caller (`wait_ms`) gets it as the reply.
 *
 * Everything here runs on the control server's thread (no lock of its own).
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server.h"

#define PW_REQUEST_REASON_MAX 200    /* bytes of a cleaned reason (longer: cut, with "...") */
#define PW_REQUEST_EXPIRES_S 120     /* default and longest life of a request */
#define PW_REQUEST_WAIT_MS_MAX 600000 /* longest blocking wait */
#define PW_REQUEST_PER_SEC 20        /* new requests per view per second; more: PW_RPC_BUSY */
#define PW_REQUEST_WAITERS_MAX 16    /* blocking callers of one request */

typedef struct pw_ctl_requests pw_ctl_requests;

pw_ctl_requests *pw_ctl_requests_new(void);
/* Answers every blocked caller "expired"; accepts NULL. */
void pw_ctl_requests_free(pw_ctl_server *s, pw_ctl_requests *rq);

/*
 * REASON as the person will see it: control characters (C0, DEL, C1), and the bidi and
 * zero-width format characters that could reorder or hide the question's text, are
 * dropped; runs of spaces fold into one; at most PW_REQUEST_REASON_MAX bytes, cut on a
 * character boundary with "...". IN must be valid UTF-8 (jansson strings are). OUT has
 * PW_REQUEST_REASON_MAX + 1 bytes.
 */
void pw_ctl_request_clean_reason(const char *in, char *out);

/* The methods (ctl/methods.c's table). Returns 0 with *ret_result, -1 with *ret_fail, or
 * PW_CTL_DEFERRED (the reply is sent later through pw_ctl_client_defer's handle). */
int pw_ctl_request_mode(pw_ctl_server *s, pw_ctl_client *c, json_t *params, json_t **ret_result,
			pw_ctl_fail *ret_fail);
int pw_ctl_request_wait(pw_ctl_server *s, pw_ctl_client *c, json_t *params, json_t **ret_result,
			pw_ctl_fail *ret_fail);
int pw_ctl_request_list(pw_ctl_server *s, pw_ctl_client *c, json_t *params, json_t **ret_result,
			pw_ctl_fail *ret_fail);
int pw_ctl_request_answer(pw_ctl_server *s, pw_ctl_client *c, json_t *params,
			  json_t **ret_result, pw_ctl_fail *ret_fail);

/* Server loop: expires requests and blocked waits due by NOW_MS (CLOCK_MONOTONIC). Returns
 * the milliseconds until the next deadline, or -1 when there is none. */
int64_t pw_ctl_requests_tick(pw_ctl_server *s, int64_t now_ms);

/* The active mode changed (any origin): a pending request from another mode is stale. */
void pw_ctl_requests_mode_changed(pw_ctl_server *s, const char *to);

/* The agent socket LISTENER closed (its run ended): a request made through it expires. */
void pw_ctl_requests_listener_gone(pw_ctl_server *s, uint64_t listener);
