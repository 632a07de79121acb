/* SPDX-License-Identifier: MIT */
/*
 * The modules the control server was started with (server_internal.h): their method tables
 * checked at start (no name in two), their hooks run in turn, a call dispatched to its
 * method (an agent refused what is the person's only, the params checked first), and the
 * failure a handler reports (server.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto.h"
#include "server.h"
#include "server_internal.h"
#include "util.h"

int pw_ctl_modules_init(pw_ctl_server *s, const pw_ctl_use *uses, size_t n)
{
	if (n > PW_CTL_MODULES_MAX)
		return -E2BIG;
	for (size_t i = 0; i < n; i++) {
		const pw_ctl_module *m = uses[i].module;
		if (!m)
			return -EINVAL;
		/* A name in two tables would make one of them unreachable: refuse it. */
		for (size_t k = 0; k < m->n_methods; k++)
			for (size_t j = 0; j <= i; j++)
				for (size_t l = 0; l < uses[j].module->n_methods; l++)
					if ((j < i || l < k) &&
					    streq(m->methods[k].name,
						  uses[j].module->methods[l].name))
						return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		const pw_ctl_module *m = uses[i].module;
		void *data = uses[i].arg;
		if (m->init) {
			int r = m->init(s, uses[i].arg, &data);
			if (r < 0)
				return r;
		}
		s->modules[i].m = m;
		s->modules[i].data = data;
		s->modules[i].inited = true;
		s->n_modules = i + 1;
	}
	return 0;
}

void pw_ctl_modules_fini(pw_ctl_server *s)
{
	for (size_t i = s->n_modules; i-- > 0;)
		if (s->modules[i].inited && s->modules[i].m->fini)
			s->modules[i].m->fini(s, s->modules[i].data);
	s->n_modules = 0;
}

int64_t pw_ctl_modules_tick(pw_ctl_server *s, int64_t now_ms)
{
	int64_t due = PW_CTL_NO_DEADLINE;
	for (size_t i = 0; i < s->n_modules; i++) {
		if (!s->modules[i].m->tick)
			continue;
		int64_t d = s->modules[i].m->tick(s, s->modules[i].data, now_ms);
		if (d >= 0 && (due == PW_CTL_NO_DEADLINE || d < due))
			due = d;
	}
	return due;
}

void pw_ctl_modules_mode_changed(pw_ctl_server *s, const char *to)
{
	for (size_t i = 0; i < s->n_modules; i++)
		if (s->modules[i].m->mode_changed)
			s->modules[i].m->mode_changed(s, s->modules[i].data, to);
}

void pw_ctl_modules_listener_gone(pw_ctl_server *s, uint64_t serial)
{
	for (size_t i = 0; i < s->n_modules; i++)
		if (s->modules[i].m->listener_gone)
			s->modules[i].m->listener_gone(s, s->modules[i].data, serial);
}

/*
 * Runs METHOD for client C: finds it in the modules' tables, refuses an agent what is the
 * person's only, checks the params, then calls the handler. Returns 0 with *ret_result,
 * PW_CTL_FAILED with *ret_fail filled, or PW_CTL_DEFERRED.
 */
int pw_ctl_modules_dispatch(pw_ctl_server *s, pw_ctl_client *c, const char *name, json_t *params,
			    json_t **ret_result, pw_ctl_fail *ret_fail)
{
	const pw_ctl_method *m = NULL;
	void *data = NULL;
	char *msg = NULL;

	for (size_t i = 0; !m && i < s->n_modules; i++)
		for (size_t k = 0; k < s->modules[i].m->n_methods; k++)
			if (streq(s->modules[i].m->methods[k].name, name)) {
				m = &s->modules[i].m->methods[k];
				data = s->modules[i].data;
				break;
			}
	if (!m) {
		char shown[65];
		size_t n;
		for (n = 0; name[n] && n + 1 < sizeof(shown); n++)
			shown[n] = name[n] >= 0x20 && name[n] < 0x7f ? name[n] : '?';
		shown[n] = 0;
		return pw_ctl_fail_set(ret_fail, PW_RPC_METHOD_NOT_FOUND, "method not found: %s",
				       shown);
	}
	if (m->agent_refusal && c->peer.restricted)
		return pw_ctl_fail_set(ret_fail, PW_RPC_REFUSED, "%s", m->agent_refusal);
	if (pw_rpc_params_check(params, m->params, m->n_params, &msg) < 0) {
		ret_fail->code = PW_RPC_INVALID_PARAMS;
		ret_fail->message = msg;
		return PW_CTL_FAILED;
	}
	pw_ctl_ctx x = {
	    .server = s,
	    .client = c,
	    .view = s->view,
	    .peer = &c->peer,
	    .params = params,
	    .fail = ret_fail,
	    .data = data,
	};
	return m->fn(&x, ret_result);
}

int pw_ctl_fail_setv(pw_ctl_fail *f, int code, const char *fmt, va_list ap)
{
	f->code = code;
	if (vasprintf(&f->message, fmt, ap) < 0)
		f->message = NULL;
	return PW_CTL_FAILED;
}

int pw_ctl_fail_set(pw_ctl_fail *f, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = pw_ctl_fail_setv(f, code, fmt, ap);
	va_end(ap);
	return r;
}
