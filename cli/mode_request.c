/* SPDX-License-Identifier: MIT */
/*
 * `piworkfs mode` and the agent's requests to switch (docs/PROTOCOL.md "mode.request").
 *
 * Inside `piworkfs run` the agent socket refuses a loosening; `piworkfs mode NAME` then asks
 * the person (mode.request) and waits for the answer, which comes from run's terminal or
 * from `piworkfs mode --approve ID|MODE` / `--deny` on any terminal of the person. The daemon
 * decides who may answer; this file only asks and reports.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "client/ctl_client.h"
#include "output.h"
#include "proto.h"

#define WAIT_MS 130000 /* a request lives 120 s at most; the reply comes before this */

static int connect_view(const char *cmd, const char *mount, unsigned timeout_ms, pw_ctl_conn **ret)
{
	_cleanup_free_ char *sock = NULL;
	int r = pw_ctl_find_view(mount, &sock, NULL);

	if (r == 0)
		r = pw_ctl_connect(sock, timeout_ms, ret);
	return r < 0 ? pw_cli_no_view(cmd, mount, r) : PW_EXIT_OK;
}

int pw_mode_wait_shown(pw_ctl_conn *c, const char *cmd, const char *why, int wait_ms, json_t **res,
		       int *ret_code, char **ret_message)
{
	if (!json_is_true(json_object_get(*res, "shown")))
		return 0;
	/* The person sees the question on run's terminal: wait for the answer. */
	json_t *id = json_incref(json_object_get(*res, "id"));
	fprintf(stderr,
		"piworkfs: %s: %s: asked them on the terminal of piworkfs run; waiting...\n", cmd,
		why);
	json_decref(*res);
	*res = NULL;
	return pw_ctl_call(c, "mode.request.wait",
			   json_pack("{s:o,s:i}", "id", id, "wait_ms", wait_ms), res, ret_code,
			   ret_message);
}

char *pw_mode_view_option(const char *mount, const char *run)
{
	_cleanup_free_ char *real = NULL, *word = NULL;
	char *ret = NULL;

	if (run)
		return asprintf(&ret, " --run %s", run) < 0 ? NULL : ret;
	if (!mount)
		return strdup("");
	real = realpath(mount, NULL);
	word = pw_shell_word(real ? real : mount);
	return word && asprintf(&ret, " --mount %s", word) >= 0 ? ret : NULL;
}

char *pw_mode_run_option(const char *mount)
{
	_cleanup_json_ json_t *res = NULL;
	const char *id;
	char *ret = NULL;

	if (pw_ctl_call_at(mount, "status", NULL, &res, NULL, NULL) == 0 &&
	    (id = json_string_value(json_object_get(json_object_get(res, "run"), "id"))) &&
	    asprintf(&ret, " --run %s", id) >= 0)
		return ret;
	return strdup("");
}

static int refused(const char *cmd, int r, int code, const char *message)
{
	if (r == -EREMOTE) {
		pw_err(cmd, "%s", message ? message : "the daemon refused");
		if (code == PW_RPC_UNKNOWN_MODE || code == PW_RPC_MODE_BROKEN ||
		    code == PW_RPC_INVALID_PARAMS)
			return PW_EXIT_CONFIG;
		return code == PW_RPC_REFUSED || code == PW_RPC_BUSY ? PW_EXIT_DENIED
								     : PW_EXIT_SYSTEM;
	}
	pw_err(cmd, "cannot talk to the view: %s", strerror(-r));
	return PW_EXIT_SYSTEM;
}

int pw_mode_ask(const char *cmd, const char *mount, const char *name, const char *reason,
		const char *refusal, bool json)
{
	_cleanup_free_ char *message = NULL, *why = NULL;
	pw_ctl_conn *c = NULL;
	json_t *res = NULL;
	const char *outcome;
	int code = 0, r;

	r = connect_view(cmd, mount, WAIT_MS + 10000, &c);
	if (r != PW_EXIT_OK)
		return r;
	if (!reason && asprintf(&why, "piworkfs mode %s", name) >= 0)
		reason = why;
	r = pw_ctl_call(c, "mode.request", json_pack("{s:s,s:s?}", "mode", name, "reason", reason),
			&res, &code, &message);
	if (r == 0)
		r = pw_mode_wait_shown(c, cmd, "a looser mode needs the person's consent", WAIT_MS,
				       &res, &code, &message);
	pw_ctl_close(c);
	if (r < 0) {
		pw_err(cmd, "%s", refusal ? refusal : "refused");
		return refused(cmd, r, code, message);
	}
	if (json) {
		int st = streq_ptr(json_string_value(json_object_get(res, "outcome")), "approved")
			     ? PW_EXIT_OK
			     : PW_EXIT_DENIED;
		return pw_print_json(res) < 0 ? PW_EXIT_SYSTEM : st;
	}
	outcome = json_string_value(json_object_get(res, "outcome"));
	if (streq_ptr(outcome, "approved")) {
		printf("mode: %s (the person allowed it)\n", name);
		json_decref(res);
		return PW_EXIT_OK;
	}
	/* One message per outcome (issue 36): the request was made, so the refusal that
	 * led to it ("ask the person to run ...") is no longer what to do. Nobody sees it at
	 * once: the person may still allow it, for as long as the request lives. */
	if (streq_ptr(outcome, "pending")) {
		_cleanup_free_ char *where = pw_mode_run_option(mount);
		bool typed = json_is_true(json_object_get(res, "needs_target"));
		long long id = json_integer_value(json_object_get(res, "id"));

		if (typed)
			pw_err(cmd,
			       "refused for now: 'piworkfs mode %s' loosens the mode, which needs "
			       "the person's consent; asked them: they can allow it with 'piworkfs "
			       "mode --approve %lld %s%s' where the view's daemon runs (within 2 "
			       "minutes)",
			       name, id, name, where ? where : "");
		else
			pw_err(
			    cmd,
			    "refused for now: 'piworkfs mode %s' loosens the mode, which needs the "
			    "person's consent; asked them: they can allow it with 'piworkfs mode "
			    "--approve %lld%s' (or --approve %s) on their own terminal (within 2 "
			    "minutes)",
			    name, id, where ? where : "", name);
	} else
		pw_err(
		    cmd, "not switched: the request was %s%s", outcome ? outcome : "not answered",
		    streq_ptr(outcome, "denied")       ? " by the person"
		    : streq_ptr(outcome, "superseded") ? " (a newer request, or the mode changed)"
		    : streq_ptr(outcome, "expired")    ? " (nobody answered in time)"
						       : "");
	json_decref(res);
	return PW_EXIT_DENIED;
}

/* Is S a request id as `piworkfs mode` shows it (digits only; a mode named so is approved
 * by its id)? Sets *RET. */
static bool parse_id(const char *s, long long *ret)
{
	char *end;

	if (!s || !*s || strspn(s, "0123456789") != strlen(s))
		return false;
	errno = 0;
	*ret = strtoll(s, &end, 10);
	return errno == 0;
}

/*
 * Is P (the pending request, or NULL) the one WHICH names: its id, or its target mode? Says
 * why not. The person approves what they saw or named, never whatever is pending by then:
 * `piworkfs mode` showed request 3 (plan -> design), the agent asked again for off (4), and
 * an answer that took the pending one would have allowed off.
 */
static bool names_pending(const char *cmd, json_t *p, const char *which)
{
	long long id;

	if (!json_is_object(p)) {
		pw_err(cmd, "no request is pending");
		return false;
	}
	/* a plan's approval (plan.request_approval) is named by the plan, a switch by its mode */
	const char *plan = json_string_value(json_object_get(p, "plan"));
	const char *to = plan ? plan : json_string_value(json_object_get(p, "to"));
	long long pid = json_integer_value(json_object_get(p, "id"));
	if (parse_id(which, &id)) {
		if (id == pid)
			return true;
		pw_err(cmd,
		       "request %s is no longer pending: the agent asks for %s now (request "
		       "%lld); see 'piworkfs mode', then approve that by its id if you mean it",
		       which, to ? to : "?", pid);
		return false;
	}
	if (streq_ptr(to, which))
		return true;
	pw_err(cmd, "the pending request asks for %s, not %s; see 'piworkfs mode'", to ? to : "?",
	       which);
	return false;
}

int pw_mode_answer(const char *cmd, const char *mount, bool approve, const char *which,
		   const char *typed, bool json)
{
	_cleanup_free_ char *message = NULL, *by = NULL;
	pw_ctl_conn *c = NULL;
	json_t *res = NULL, *list = NULL, *p;
	long long id;
	int code = 0, r;

	/* What the person typed as the target: after the id, or the target itself. */
	if (approve && !typed && !parse_id(which, &id))
		typed = which;

	r = connect_view(cmd, mount, 0, &c);
	if (r != PW_EXIT_OK)
		return r;
	r = pw_ctl_call(c, "mode.request.list", NULL, &list, &code, &message);
	if (r < 0) {
		pw_ctl_close(c);
		return refused(cmd, r, code, message);
	}
	p = json_object_get(list, "pending");
	/* An approval must name the request (WHICH); a denial may take the pending one, as a
	 * refusal can loosen nothing. The answer carries the id either way, so the daemon
	 * refuses it should a newer request have replaced this one since the list. */
	if ((approve && !names_pending(cmd, p, which)) || (!approve && !json_is_object(p))) {
		if (!approve)
			pw_err(cmd, "no request is pending");
		json_decref(list);
		pw_ctl_close(c);
		return PW_EXIT_DENIED;
	}
	if (asprintf(&by, "piworkfs mode --%s (pid %d)", approve ? "approve" : "deny",
		     (int)getpid()) < 0)
		by = NULL;
	r = pw_ctl_call(c, "mode.request.answer",
			json_pack("{s:O,s:b,s:s?,s:s*}", "id", json_object_get(p, "id"), "approve",
				  approve, "by", by, "target", approve ? typed : NULL),
			&res, &code, &message);
	pw_ctl_close(c);
	if (r < 0) {
		json_decref(list);
		return refused(cmd, r, code, message);
	}
	if (json) {
		json_decref(list);
		return pw_print_json(res) < 0 ? PW_EXIT_SYSTEM : PW_EXIT_OK;
	}
	if (json_string_value(json_object_get(p, "plan")))
		printf("%s: approve plan %s\n", approve ? "allowed" : "denied",
		       json_string_value(json_object_get(p, "plan")));
	else
		printf("%s: %s \xe2\x86\x92 %s\n", approve ? "allowed" : "denied",
		       json_string_value(json_object_get(p, "from")),
		       json_string_value(json_object_get(p, "to")));
	json_decref(res);
	json_decref(list);
	return PW_EXIT_OK;
}

void pw_mode_show_pending(const char *mount, const char *view_option)
{
	json_t *res = NULL, *p;
	const char *w = view_option ? view_option : "";
	/* `plan show` names a view by --mount only: a run's by its mountpoint */
	_cleanup_free_ char *m = w[0] ? pw_mode_view_option(mount, NULL) : NULL;

	if (pw_ctl_call_at(mount, "mode.request.list", NULL, &res, NULL, NULL) < 0)
		return; /* inside the agent, or an older daemon: nothing to show */
	p = json_object_get(res, "pending");
	if (!json_is_object(p)) {
		json_decref(res);
		return;
	}
	long long left =
	    (json_integer_value(json_object_get(p, "expires_ns")) - pw_clock_ns(CLOCK_REALTIME)) /
	    1000000000;
	long long id = json_integer_value(json_object_get(p, "id"));
	/* A request only `--approve ID TARGET` allows: the person types the target. */
	bool typed = json_is_true(json_object_get(p, "needs_target"));
	const char *plan = json_string_value(json_object_get(p, "plan"));
	const char *reason = json_string_value(json_object_get(p, "reason"));
	if (plan)
		printf(
		    "pending request %lld: the agent asks you to approve plan %s (\"%s\"), %llds "
		    "left\n  read it: piworkfs plan show %s%s\n  answer: piworkfs mode "
		    "--approve %lld%s%s   or   piworkfs mode --deny%s\n",
		    id, plan, reason, left > 0 ? left : 0, plan, m ? m : "", id, w,
		    typed ? " PLAN (the plan's name, typed)" : "", w);
	else
		printf(
		    "pending request %lld: the agent asks to switch %s \xe2\x86\x92 %s (\"%s\"), "
		    "%llds left\n  answer: piworkfs mode --approve %lld%s%s   or   piworkfs mode "
		    "--deny%s\n",
		    id, json_string_value(json_object_get(p, "from")),
		    json_string_value(json_object_get(p, "to")), reason, left > 0 ? left : 0, id, w,
		    typed ? " MODE (the mode it asks for, typed)" : "", w);
	json_decref(res);
}
