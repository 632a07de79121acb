/* SPDX-License-Identifier: MIT */
/*
 * Asking to switch (ctl/request.h). One pending request per view, held by the control
 * server; blocked callers are remembered by client serial and JSON-RPC id, so a caller that
 * went away is simply not answered.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "request.h"
#include "plan.h"
#include "store/state.h"
#include "plan_methods.h"
#include "pw_limits.h"
#include "policy.h"
#include "proto.h"
#include "util.h"

#define HISTORY 16 /* outcomes remembered for mode.request.wait on a request already done */

typedef struct waiter {
	uint64_t client;
	json_t *id;
	int64_t deadline_ms;
} waiter;

typedef struct request {
	uint64_t id;
	char from[PW_MODE_NAME_MAX + 1], to[PW_MODE_NAME_MAX + 1];
	char reason[PW_REQUEST_REASON_MAX + 1];
	char plan[PW_PLAN_NAME_MAX + 1]; /* plan.request_approval: the plan; "" for a switch */
	uint64_t client, listener; /* the requester's connection and the socket it came through */
	bool needs_target;	   /* allowed only with the target typed (mount --agent-socket) */
	pid_t pid;
	uid_t uid;
	char comm[32];
	int64_t created_ns, expires_ns, expires_ms;
	waiter waiters[PW_REQUEST_WAITERS_MAX];
	size_t n_waiters;
} request;

typedef struct outcome {
	uint64_t id, listener;
	char outcome[16];
	char mode[PW_MODE_NAME_MAX + 1];
} outcome;

typedef struct pw_ctl_requests pw_ctl_requests;

struct pw_ctl_requests {
	request *pending;
	uint64_t next_id;
	int64_t window_ms; /* rate limit: the second being counted, and how many in it */
	unsigned in_window;
	outcome history[HISTORY];
	size_t n_history, history_next;
	/* Blocked waits on requests already decided are answered at once, so only the
	 * pending request has waiters. */
};

static int requests_init(pw_ctl_server *s, void *arg, void **ret_data)
{
	pw_ctl_requests *rq = calloc(1, sizeof(*rq));
	if (!rq)
		return -ENOMEM;
	rq->next_id = 1;
	*ret_data = rq;
	return 0;
}

/* ---- the reason ------------------------------------------------------------------------ */

/* Unicode format characters that reorder or hide text: LRM/RLM, zero-width ones, the bidi
 * embeddings, overrides and isolates, the word joiner family, the BOM. */
static bool hidden_format(uint32_t cp)
{
	return (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x202a && cp <= 0x202e) ||
	       (cp >= 0x2060 && cp <= 0x206f) || cp == 0xfeff || cp == 0x061c || cp == 0x00ad;
}

/* Length of the UTF-8 sequence at S (valid UTF-8) and its code point. */
static size_t utf8_next(const unsigned char *s, uint32_t *cp)
{
	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if ((s[0] & 0xe0) == 0xc0 && s[1]) {
		*cp = (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f);
		return 2;
	}
	if ((s[0] & 0xf0) == 0xe0 && s[1] && s[2]) {
		*cp = (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
		return 3;
	}
	if ((s[0] & 0xf8) == 0xf0 && s[1] && s[2] && s[3]) {
		*cp = (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 |
		      (uint32_t)(s[2] & 0x3f) << 6 | (s[3] & 0x3f);
		return 4;
	}
	*cp = 0xfffd; /* not valid UTF-8: dropped below */
	return 1;
}

void pw_ctl_request_clean_reason(const char *in, char *out)
{
	const unsigned char *s = (const unsigned char *)(in ? in : "");
	size_t n = 0;
	bool space = true; /* drops leading spaces too */

	while (*s) {
		uint32_t cp;
		size_t len = utf8_next(s, &cp);

		if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0) || cp == 0xfffd ||
		    hidden_format(cp)) {
			/* A line break or tab would have separated words: keep one space. */
			if ((cp == '\n' || cp == '\t' || cp == '\r') && !space &&
			    n < PW_REQUEST_REASON_MAX) {
				out[n++] = ' ';
				space = true;
			}
			s += len;
			continue;
		}
		if (cp == ' ' && space) {
			s += len;
			continue;
		}
		if (n + len > PW_REQUEST_REASON_MAX) {
			/* Cut on a character boundary, leaving room for the ellipsis. */
			while (n > PW_REQUEST_REASON_MAX - 3)
				do
					n--;
				while (n > 0 && (out[n] & 0xc0) == 0x80);
			memcpy(out + n, "...", 3);
			n += 3;
			break;
		}
		memcpy(out + n, s, len);
		n += len;
		space = cp == ' ';
		s += len;
	}
	while (n > 0 && out[n - 1] == ' ')
		n--;
	out[n] = '\0';
}

/* ---- outcomes -------------------------------------------------------------------------- */

static json_t *request_json(const request *r)
{
	json_t *o =
	    json_pack("{s:I,s:s,s:s,s:s,s:i,s:s,s:I,s:I,s:s?}", "id", (json_int_t)r->id, "from",
		      r->from, "to", r->to, "reason", r->reason, "pid", (int)r->pid, "comm",
		      r->comm, "requested_ns", (json_int_t)r->created_ns, "expires_ns",
		      (json_int_t)r->expires_ns, "plan", r->plan[0] ? r->plan : NULL);

	if (o && r->needs_target)
		json_object_set_new(o, "needs_target", json_true());
	return o;
}

static json_t *outcome_json(uint64_t id, const char *what, const char *mode)
{
	return json_pack("{s:I,s:s,s:s?}", "id", (json_int_t)id, "outcome", what, "mode", mode);
}

static void remember(pw_ctl_requests *rq, const request *r, const char *what, const char *mode)
{
	outcome *o = &rq->history[rq->history_next];

	*o = (outcome){.id = r->id, .listener = r->listener};
	snprintf(o->outcome, sizeof(o->outcome), "%s", what);
	snprintf(o->mode, sizeof(o->mode), "%s", mode ? mode : "");
	rq->history_next = (rq->history_next + 1) % HISTORY;
	if (rq->n_history < HISTORY)
		rq->n_history++;
}

static const outcome *recall(const pw_ctl_requests *rq, uint64_t id)
{
	for (size_t i = 0; i < rq->n_history; i++)
		if (rq->history[i].id == id)
			return &rq->history[i];
	return NULL;
}

static char *active_mode(pw_view *v)
{
	pw_policy *p = pw_view_policy(v, NULL);
	char *m = p ? strdup(pw_policy_mode_name(p)) : NULL;

	pw_policy_unref(p);
	return m;
}

/* How a request ended without a switch, for the switch history. */
typedef struct ending {
	const char *outcome;	 /* denied, expired, superseded, failed */
	const pw_peer *answerer; /* the connection that answered, or NULL */
	const char *by;		 /* who answered, as they said ("piworkfs mode --deny ...") */
	const char *how;	 /* "typed y", "no answer within 120 s", ... */
} ending;

/*
 * Records R's end E in the switch history, beside the switches: who asked and why, who
 * ended it and how (a granted request is recorded as its switch, by the view). Best effort,
 * as the view's records are: the request has ended either way.
 */
static void record_end(pw_ctl_server *s, const request *r, const ending *e)
{
	pw_view *v = pw_ctl_server_view(s);
	uint64_t gen = 0;
	pw_policy *p = pw_view_policy(v, &gen);
	const pw_peer *a = e->answerer;
	pw_switch_record rec = {
	    .time_ns = pw_clock_ns(CLOCK_REALTIME),
	    .project = pw_view_info_of(v)->project,
	    .mountpoint = pw_view_info_of(v)->mountpoint,
	    .from_mode = r->from,
	    .to_mode = r->to,
	    .generation = gen,
	    .pid = a ? a->pid : r->pid,
	    .uid = a ? a->uid : r->uid,
	    .comm = a ? (a->comm[0] ? a->comm : NULL) : (r->comm[0] ? r->comm : NULL),
	    .origin = "request",
	    .reason = r->reason,
	    .answered_by = e->by && e->by[0] ? e->by : NULL,
	    .outcome = e->outcome,
	    .plan = r->plan[0] ? r->plan : NULL,
	    .asked_pid = r->pid,
	    .asked_comm = r->comm[0] ? r->comm : NULL,
	    .how = e->how && e->how[0] ? e->how : NULL,
	};
	pw_state *st;

	pw_policy_unref(p);
	st = pw_view_lock_state(v);
	if (st)
		(void)pw_state_record_switch(st, &rec);
	pw_view_unlock_state(v);
}

/*
 * Ends the pending request with WHAT: records how when it did not switch (E), tells the
 * requester (mode.request.done), answers its blocked callers, tells the operator side (the
 * bar goes away), remembers the outcome.
 */
static void finish(pw_ctl_server *s, pw_ctl_requests *rq, const char *what, const ending *e)
{
	request *r = TAKE_PTR(rq->pending);
	_cleanup_free_ char *mode = NULL;

	if (!r)
		return;
	if (e)
		record_end(s, r, e);
	mode = active_mode(pw_ctl_server_view(s));
	remember(rq, r, what, mode);
	pw_ctl_server_notify(s, r->client, "mode.request.done", outcome_json(r->id, what, mode));
	for (size_t i = 0; i < r->n_waiters; i++)
		pw_ctl_server_reply(s, r->waiters[i].client, r->waiters[i].id,
				    outcome_json(r->id, what, mode));
	pw_ctl_server_notify_operators(s, r->listener, "mode.request.done",
				       outcome_json(r->id, what, mode));
	free(r);
}

static void requests_fini(pw_ctl_server *s, void *data)
{
	pw_ctl_requests *rq = data;

	if (!rq)
		return;
	if (rq->pending) {
		for (size_t i = 0; i < rq->pending->n_waiters; i++)
			json_decref(rq->pending->waiters[i].id);
		free(rq->pending);
	}
	free(rq);
}

/* ---- methods --------------------------------------------------------------------------- */

/* Adds C's call as a waiter on R until WAIT_MS from now. Returns PW_CTL_DEFERRED, or -1. */
static int block(request *r, pw_ctl_client *c, json_int_t wait_ms, pw_ctl_fail *f)
{
	json_t *id;

	if (r->n_waiters == PW_REQUEST_WAITERS_MAX)
		return pw_ctl_fail_set(f, PW_RPC_BUSY, "too many callers waiting on this request");
	id = pw_ctl_client_defer(c);
	if (!id)
		return pw_ctl_fail_set(
		    f, PW_RPC_INVALID_REQUEST,
		    "a blocking wait must be a call with an id, not a notification");
	r->waiters[r->n_waiters++] =
	    (waiter){.client = pw_ctl_client_serial(c),
		     .id = id,
		     .deadline_ms = pw_clock_ms(CLOCK_MONOTONIC) + wait_ms};
	return PW_CTL_DEFERRED;
}

static bool rate_ok(pw_ctl_requests *rq, int64_t now)
{
	if (now - rq->window_ms >= 1000) {
		rq->window_ms = now;
		rq->in_window = 0;
	}
	return rq->in_window++ < PW_REQUEST_PER_SEC;
}

static int ask(pw_ctl_ctx *x, json_t **ret_result, const char *plan);

static int m_mode(pw_ctl_ctx *x, json_t **ret_result)
{
	return ask(x, ret_result, NULL);
}

/* plan.request_approval: the agent asks the person to approve plan NAME, through the same
 * pending request and consent bar as a switch (the request carries "plan"; from and to are
 * the active mode, which the approval does not change). */
static int m_plan(pw_ctl_ctx *x, json_t **ret_result)
{
	const char *name = json_string_value(json_object_get(x->params, "name"));
	/* "cache", "cache.md" or "docs/plans/cache.md": the stem names it. */
	const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
	char stem[PW_PLAN_NAME_MAX + 1];
	size_t n = strlen(base);

	if (n > 3 && streq(base + n - 3, ".md"))
		n -= 3;
	if (n > PW_PLAN_NAME_MAX)
		n = 0;
	memcpy(stem, base, n);
	stem[n] = '\0';
	if (!pw_plan_name_is_valid(stem))
		return pw_ctl_fail_set(x->fail, PW_RPC_INVALID_PARAMS, "'%s' names no plan", name);
	return ask(x, ret_result, stem);
}

static int ask(pw_ctl_ctx *x, json_t **ret_result, const char *plan)
{
	pw_ctl_server *s = x->server;
	pw_ctl_client *c = x->client;
	json_t *params = x->params;
	pw_ctl_fail *ret_fail = x->fail;
	pw_ctl_requests *rq = x->data;
	const pw_peer *peer = pw_ctl_client_peer(c);
	pw_view *v = pw_ctl_server_view(s);
	const char *to = json_string_value(json_object_get(params, "mode"));
	_cleanup_free_ char *now_mode = plan ? active_mode(v) : NULL;
	json_t *jexp = json_object_get(params, "expires_s"),
	       *jwait = json_object_get(params, "wait_ms");
	json_int_t expires_s = jexp ? json_integer_value(jexp) : PW_REQUEST_EXPIRES_S;
	json_int_t wait_ms = jwait ? json_integer_value(jwait) : 0;
	pw_policy *active = NULL, *target = NULL;
	_cleanup_free_ char *why = NULL;
	int64_t now = pw_clock_ms(CLOCK_MONOTONIC);
	size_t shown;
	request *r;
	int rr;

	if (expires_s < 1 || expires_s > PW_REQUEST_EXPIRES_S)
		return pw_ctl_fail_set(ret_fail, PW_RPC_INVALID_PARAMS,
				       "params.expires_s: from 1 to 120 seconds");
	if (wait_ms < 0 || wait_ms > PW_REQUEST_WAIT_MS_MAX)
		return pw_ctl_fail_set(ret_fail, PW_RPC_INVALID_PARAMS,
				       "params.wait_ms: from 0 to 600000 milliseconds");
	if (plan && !now_mode)
		return pw_ctl_fail_set(ret_fail, PW_RPC_INTERNAL_ERROR, "out of memory");
	if (plan)
		to = now_mode; /* approving changes no mode: from = to = the active one */
	rr = pw_view_compile(v, to, &target);
	if (rr == -ENOENT)
		return pw_ctl_fail_set(ret_fail, PW_RPC_UNKNOWN_MODE, "unknown mode '%s'", to);
	if (rr == -EBADMSG)
		return pw_ctl_fail_set(ret_fail, PW_RPC_MODE_BROKEN,
				       "mode '%s' is broken (see status warnings)", to);
	if (rr < 0)
		return pw_ctl_fail_set(ret_fail, PW_RPC_INTERNAL_ERROR, "out of memory");
	active = pw_view_policy(v, NULL);
	if (!active) {
		pw_policy_unref(target);
		return pw_ctl_fail_set(ret_fail, PW_RPC_INTERNAL_ERROR, "out of memory");
	}

	/* The same mode, or a tightening: no consent needed, done now with the caller's own
	 * authority (exactly what mode.set would do). A plan's approval always needs it. */
	if (!plan &&
	    (streq(pw_policy_mode_name(active), to) || pw_policy_is_tightening(active, target))) {
		bool same = streq(pw_policy_mode_name(active), to);
		pw_policy_unref(active);
		pw_policy_unref(target);
		if (!same) {
			rr = pw_view_set_mode(v, to, peer, NULL, &why);
			if (rr < 0)
				return pw_ctl_fail_set(
				    ret_fail, rr == -EPERM ? PW_RPC_REFUSED : PW_RPC_INTERNAL_ERROR,
				    "%s", why ? why : strerror(-rr));
		}
		*ret_result = json_pack("{s:n,s:s,s:s}", "id", "outcome", "approved", "mode", to);
		return *ret_result
			   ? 0
			   : pw_ctl_fail_set(ret_fail, PW_RPC_INTERNAL_ERROR, "out of memory");
	}
	pw_policy_unref(target);

	if (!rate_ok(rq, now)) {
		pw_policy_unref(active);
		return pw_ctl_fail_set(
		    ret_fail, PW_RPC_BUSY,
		    "too many requests: at most %d per second; the person has not answered "
		    "the last one yet",
		    PW_REQUEST_PER_SEC);
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		pw_policy_unref(active);
		return pw_ctl_fail_set(ret_fail, PW_RPC_INTERNAL_ERROR, "out of memory");
	}
	r->id = rq->next_id++;
	snprintf(r->from, sizeof(r->from), "%s", pw_policy_mode_name(active));
	snprintf(r->to, sizeof(r->to), "%s", to);
	snprintf(r->plan, sizeof(r->plan), "%s", plan ? plan : "");
	pw_policy_unref(active);
	pw_ctl_request_clean_reason(json_string_value(json_object_get(params, "reason")),
				    r->reason);
	r->client = pw_ctl_client_serial(c);
	r->listener = pw_ctl_client_listener_serial(c);
	r->needs_target = pw_ctl_client_needs_target(c);
	r->pid = peer->pid;
	r->uid = peer->uid;
	snprintf(r->comm, sizeof(r->comm), "%s", peer->comm);
	r->created_ns = pw_clock_ns(CLOCK_REALTIME);
	r->expires_ns = r->created_ns + (int64_t)expires_s * 1000000000;
	r->expires_ms = now + (int64_t)expires_s * 1000;

	if (rq->pending) { /* one pending request per view */
		char how[64];
		snprintf(how, sizeof(how), "replaced by a newer request (%llu)",
			 (unsigned long long)r->id);
		finish(s, rq, "superseded", &(ending){"superseded", NULL, NULL, how});
	}
	rq->pending = r;
	/* Shown: a run's terminal has it now; else the person must look (piworkfs mode). */
	shown = pw_ctl_server_notify_operators(s, r->listener, "mode.request", request_json(r));
	if (wait_ms > 0)
		return block(r, c, wait_ms, ret_fail);
	*ret_result = json_pack("{s:I,s:s,s:I,s:b,s:b}", "id", (json_int_t)r->id, "outcome",
				"pending", "expires_ns", (json_int_t)r->expires_ns, "shown",
				shown > 0, "needs_target", r->needs_target);
	return *ret_result ? 0 : pw_ctl_fail_set(ret_fail, PW_RPC_INTERNAL_ERROR, "out of memory");
}

static int m_wait(pw_ctl_ctx *x, json_t **ret_result)
{
	pw_ctl_client *c = x->client;
	json_t *params = x->params;
	pw_ctl_fail *ret_fail = x->fail;
	pw_ctl_requests *rq = x->data;
	json_int_t id = json_integer_value(json_object_get(params, "id"));
	json_t *jwait = json_object_get(params, "wait_ms");
	json_int_t wait_ms = jwait ? json_integer_value(jwait) : 0;
	uint64_t listener = pw_ctl_client_listener_serial(c);
	const outcome *o;

	if (wait_ms < 0 || wait_ms > PW_REQUEST_WAIT_MS_MAX)
		return pw_ctl_fail_set(ret_fail, PW_RPC_INVALID_PARAMS,
				       "params.wait_ms: from 0 to 600000 milliseconds");
	/* An agent sees only the requests made through its own socket. */
	if (rq->pending && rq->pending->id == (uint64_t)id &&
	    (!pw_ctl_client_peer(c)->restricted || rq->pending->listener == listener)) {
		if (wait_ms > 0)
			return block(rq->pending, c, wait_ms, ret_fail);
		*ret_result = json_pack("{s:I,s:s}", "id", id, "outcome", "pending");
		return *ret_result
			   ? 0
			   : pw_ctl_fail_set(ret_fail, PW_RPC_INTERNAL_ERROR, "out of memory");
	}
	o = recall(rq, (uint64_t)id);
	if (!o || (pw_ctl_client_peer(c)->restricted && o->listener != listener))
		return pw_ctl_fail_set(ret_fail, PW_RPC_INVALID_PARAMS, "no such request");
	*ret_result = outcome_json(o->id, o->outcome, o->mode[0] ? o->mode : NULL);
	return *ret_result ? 0 : pw_ctl_fail_set(ret_fail, PW_RPC_INTERNAL_ERROR, "out of memory");
}

static int m_list(pw_ctl_ctx *x, json_t **ret_result)
{
	pw_ctl_fail *ret_fail = x->fail;
	pw_ctl_requests *rq = x->data;

	*ret_result =
	    json_pack("{s:o}", "pending", rq->pending ? request_json(rq->pending) : json_null());
	return *ret_result ? 0 : pw_ctl_fail_set(ret_fail, PW_RPC_INTERNAL_ERROR, "out of memory");
}

/* The person granted plan.request_approval: the plan is approved with their authority. */
static int answer_plan(pw_ctl_ctx *x, pw_ctl_requests *rq, request *r, const pw_peer *peer,
		       json_t **ret_result)
{
	_cleanup_free_ char *why = NULL;
	int code;

	/* On the server thread: the views of the project this waits for answer plan.sync on
	 * their own server threads (peers.h). */
	code = pw_ctl_plan_approve(x->server, peer, r->plan, -1, &why, NULL);
	if (code != 0) {
		finish(x->server, rq, "denied",
		       &(ending){"failed", peer, peer->answered_by, why ? why : "unknown"});
		return pw_ctl_fail_set(x->fail, code, "the approval failed: %s",
				       why ? why : "unknown");
	}
	*ret_result = json_pack("{s:I,s:s}", "id", (json_int_t)r->id, "outcome", "approved");
	finish(x->server, rq, "approved", NULL);
	return *ret_result ? 0 : pw_ctl_fail_set(x->fail, PW_RPC_INTERNAL_ERROR, "out of memory");
}

/*
 * The consent bar's rule for an answer that allows R: the target typed ("target", the mode
 * or the plan's name) must be R's, or R is denied, as a key that does not continue the name
 * denies on run's bar; and a request that no run's terminal shows (mount --agent-socket)
 * is allowed only with its target typed, since an id alone may be copied from the agent's
 * own output. Returns true to go on; false with x->fail filled.
 */
static bool typed_target_ok(pw_ctl_ctx *x, pw_ctl_requests *rq, request *r)
{
	const char *target = json_string_value(json_object_get(x->params, "target"));
	char want[PW_PLAN_NAME_MAX + 1]; /* R's, copied: finish() frees R */
	uint64_t id = r->id;

	snprintf(want, sizeof(want), "%s", r->plan[0] ? r->plan : r->to);
	if (target && !streq(target, want)) {
		/* Recorded without the typed word: it is the answerer's, unchecked text. */
		finish(x->server, rq, "denied",
		       &(ending){"denied", pw_ctl_client_peer(x->client), "piworkfs mode --approve",
				 "typed a target that is not the request's"});
		pw_ctl_fail_set(x->fail, PW_RPC_REFUSED,
				"request %llu asks for %s, not %s: denied, nothing switched",
				(unsigned long long)id, want, target);
		return false;
	}
	if (!target && r->needs_target) {
		pw_ctl_fail_set(x->fail, PW_RPC_REFUSED,
				"refused: request %llu came through an agent socket that no "
				"terminal of a run shows; allow it by typing what it asks for "
				"after its id (piworkfs mode --approve %llu NAME; 'piworkfs mode' "
				"shows it)",
				(unsigned long long)id, (unsigned long long)id);
		return false;
	}
	return true;
}

static int m_answer(pw_ctl_ctx *x, json_t **ret_result)
{
	pw_ctl_server *s = x->server;
	pw_ctl_client *c = x->client;
	json_t *params = x->params;
	pw_ctl_fail *ret_fail = x->fail;
	pw_ctl_requests *rq = x->data;
	const pw_peer *who = pw_ctl_client_peer(c);
	json_t *jid = json_object_get(params, "id");
	bool approve = json_is_true(json_object_get(params, "approve"));
	const char *by = json_string_value(json_object_get(params, "by"));
	const char *how = json_string_value(json_object_get(params, "how"));
	_cleanup_free_ char *why = NULL, *mode = NULL, *changed = NULL;
	char by_clean[PW_REQUEST_REASON_MAX + 1], how_clean[PW_REQUEST_REASON_MAX + 1];
	request *r = rq->pending;
	pw_peer peer = *who;
	int rr;

	if (!r)
		return pw_ctl_fail_set(ret_fail, PW_RPC_INVALID_PARAMS, "no request is pending");
	if (jid && (uint64_t)json_integer_value(jid) != r->id)
		return pw_ctl_fail_set(
		    ret_fail, PW_RPC_INVALID_PARAMS,
		    "that request is no longer pending (a newer one replaced it, or it "
		    "ended)");
	/* Who answered, as they say (their process is the connection's peer), and how. */
	pw_ctl_request_clean_reason(by ? by : "", by_clean);
	pw_ctl_request_clean_reason(how ? how : "", how_clean);
	if (approve && !typed_target_ok(x, rq, r))
		return PW_CTL_FAILED;
	if (!approve) {
		*ret_result = json_pack("{s:I,s:s}", "id", (json_int_t)r->id, "outcome", "denied");
		finish(s, rq, "denied",
		       &(ending){"denied", who, by_clean[0] ? by_clean : "piworkfs mode --deny",
				 how_clean});
		return *ret_result
			   ? 0
			   : pw_ctl_fail_set(ret_fail, PW_RPC_INTERNAL_ERROR, "out of memory");
	}
	peer.origin = "request";
	peer.reason = r->reason;
	peer.answered_by = by_clean[0] ? by_clean : "piworkfs mode --approve";
	peer.asked_pid = r->pid;
	peer.asked_comm = r->comm[0] ? r->comm : NULL;
	if (r->plan[0])
		return answer_plan(x, rq, r, &peer, ret_result);
	mode = active_mode(pw_ctl_server_view(s));
	if (!streq_ptr(mode, r->from)) {
		if (asprintf(&changed,
			     "approved after the mode had changed to %s; nothing switched",
			     mode ? mode : "?") < 0)
			changed = NULL;
		finish(s, rq, "superseded",
		       &(ending){"superseded", who, peer.answered_by, changed});
		return pw_ctl_fail_set(
		    ret_fail, PW_RPC_REFUSED,
		    "the mode changed since the request was made; nothing switched");
	}
	rr = pw_view_set_mode(pw_ctl_server_view(s), r->to, &peer, NULL, &why);
	if (rr < 0) {
		finish(s, rq, "denied",
		       &(ending){"failed", who, peer.answered_by, why ? why : strerror(-rr)});
		return pw_ctl_fail_set(ret_fail, PW_RPC_INTERNAL_ERROR, "the switch failed: %s",
				       why ? why : strerror(-rr));
	}
	*ret_result = json_pack("{s:I,s:s}", "id", (json_int_t)r->id, "outcome", "approved");
	finish(s, rq, "approved", NULL);
	return *ret_result ? 0 : pw_ctl_fail_set(ret_fail, PW_RPC_INTERNAL_ERROR, "out of memory");
}

/* ---- time ------------------------------------------------------------------------------ */

static int64_t requests_tick(pw_ctl_server *s, void *data, int64_t now_ms)
{
	pw_ctl_requests *rq = data;
	request *r = rq ? rq->pending : NULL;
	int64_t next = PW_CTL_NO_DEADLINE;

	if (!r)
		return PW_CTL_NO_DEADLINE;
	if (now_ms >= r->expires_ms) {
		char how[64];
		snprintf(how, sizeof(how), "no answer within %lld s",
			 (long long)((r->expires_ns - r->created_ns) / 1000000000));
		finish(s, rq, "expired", &(ending){"expired", NULL, NULL, how});
		return PW_CTL_NO_DEADLINE;
	}
	/* Blocked callers whose wait is over learn that it is still pending. */
	for (size_t i = 0; i < r->n_waiters;) {
		if (now_ms >= r->waiters[i].deadline_ms) {
			pw_ctl_server_reply(
			    s, r->waiters[i].client, r->waiters[i].id,
			    json_pack("{s:I,s:s}", "id", (json_int_t)r->id, "outcome", "pending"));
			r->waiters[i] = r->waiters[--r->n_waiters];
			continue;
		}
		if (next == PW_CTL_NO_DEADLINE || r->waiters[i].deadline_ms - now_ms < next)
			next = r->waiters[i].deadline_ms - now_ms;
		i++;
	}
	if (next == PW_CTL_NO_DEADLINE || r->expires_ms - now_ms < next)
		next = r->expires_ms - now_ms;
	return next;
}

static void requests_mode_changed(pw_ctl_server *s, void *data, const char *to)
{
	pw_ctl_requests *rq = data;

	/* A plan's approval does not depend on the mode. */
	if (rq && rq->pending && !rq->pending->plan[0] && !streq(rq->pending->from, to)) {
		char how[PW_MODE_NAME_MAX + 64];
		snprintf(how, sizeof(how), "the mode changed to %s before an answer", to);
		finish(s, rq, "superseded", &(ending){"superseded", NULL, NULL, how});
	}
}

static void requests_listener_gone(pw_ctl_server *s, void *data, uint64_t listener)
{
	pw_ctl_requests *rq = data;

	if (rq && rq->pending && rq->pending->listener == listener)
		finish(s, rq, "expired",
		       &(ending){"expired", NULL, NULL,
				 "its sandbox's socket closed before an answer"});
}

/* ---- the table ------------------------------------------------------------------------- */

static const pw_rpc_param request_params[] = {
    {"mode", PW_RPC_T_STRING, true, PW_MODE_NAME_MAX},
    {"reason", PW_RPC_T_STRING, false, 4096},
    {"expires_s", PW_RPC_T_INT, false, 0},
    {"wait_ms", PW_RPC_T_INT, false, 0},
};

static const pw_rpc_param plan_request_params[] = {
    {"name", PW_RPC_T_STRING, true, PW_PATH_MAX},
    {"reason", PW_RPC_T_STRING, false, 4096},
    {"expires_s", PW_RPC_T_INT, false, 0},
    {"wait_ms", PW_RPC_T_INT, false, 0},
};

static const pw_rpc_param request_wait_params[] = {
    {"id", PW_RPC_T_INT, true, 0},
    {"wait_ms", PW_RPC_T_INT, false, 0},
};

static const pw_rpc_param request_answer_params[] = {
    {"id", PW_RPC_T_INT, false, 0},
    {"approve", PW_RPC_T_BOOL, true, 0},
    {"by", PW_RPC_T_STRING, false, 256},
    {"how", PW_RPC_T_STRING, false, 256},
    {"target", PW_RPC_T_STRING, false, PW_PLAN_NAME_MAX},
};

static const pw_ctl_method methods[] = {
    {"mode.request", m_mode, request_params, ELEMENTSOF(request_params), NULL},
    {"plan.request_approval", m_plan, plan_request_params, ELEMENTSOF(plan_request_params), NULL},
    {"mode.request.wait", m_wait, request_wait_params, ELEMENTSOF(request_wait_params), NULL},
    {"mode.request.list", m_list, NULL, 0, "refused: the agent cannot see the person's questions"},
    {"mode.request.answer", m_answer, request_answer_params, ELEMENTSOF(request_answer_params),
     "refused: only the person answers a request, from outside the agent"},
};

const pw_ctl_module pw_ctl_request_module = {
    .name = "request",
    .methods = methods,
    .n_methods = ELEMENTSOF(methods),
    .init = requests_init,
    .fini = requests_fini,
    .tick = requests_tick,
    .mode_changed = requests_mode_changed,
    .listener_gone = requests_listener_gone,
};
