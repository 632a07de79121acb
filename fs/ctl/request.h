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
#include "pw_limits.h"

#define PW_REQUEST_EXPIRES_S 120 /* default and longest life of a request */
#define PW_REQUEST_PER_SEC 20	 /* new requests per view per second; more: PW_RPC_BUSY */

/*
 * REASON as the person will see it: control characters (C0, DEL, C1), and the bidi and
 * zero-width format characters that could reorder or hide the question's text, are
 * dropped; runs of spaces fold into one; at most PW_REQUEST_REASON_MAX bytes, cut on a
 * character boundary with "...". IN must be valid UTF-8 (jansson strings are). OUT has
 * PW_REQUEST_REASON_MAX + 1 bytes.
 */
void pw_ctl_request_clean_reason(const char *in, char *out);

/*
 * mode.request, mode.request.wait, mode.request.list and mode.request.answer, with the
 * state of the view's one pending request (init), its expiry (tick), and what ends it: a
 * switch to another mode (mode_changed) or the close of its agent socket (listener_gone).
 * mode.request and mode.request.wait may defer their reply (PW_CTL_DEFERRED).
 */
extern const pw_ctl_module pw_ctl_request_module;
