/* SPDX-License-Identifier: MIT */
/*
 * The audit event and the switch as JSON, live and stored: the one builder of each
 * (events.h says why). Keys are added in the order the shapes document.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "events.h"
#include "run_id.h"
#include "report.h"
#include "util.h"

/* Adds KEY: V to O; false when V is NULL (no memory, or text that is not UTF-8) or the
 * object cannot take it. Takes V in every case. */
static bool put(json_t *o, const char *key, json_t *v)
{
	return v && json_object_set_new(o, key, v) == 0;
}

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

/* The run whose own view MOUNTPOINT is (DIR/run-ID/view), else null. */
static json_t *run_json(const char *mountpoint)
{
	char *run = pw_ctl_run_of_mountpoint(mountpoint);
	json_t *j = run ? json_string(run) : json_null();

	free(run);
	return j;
}

/* The row's keys before the event's own. */
static bool put_row_head(json_t *o, const pw_ctl_event_row *row, int64_t time_ns)
{
	return put(o, "id", json_integer(row->id)) && put(o, "time", json_string(row->time)) &&
	       put(o, "time_ns", json_integer(time_ns)) &&
	       put(o, "project", str_or_null(row->project)) &&
	       put(o, "mountpoint", str_or_null(row->mountpoint)) &&
	       put(o, "run", run_json(row->mountpoint));
}

/* "thread": absent for the main thread and for a name that is not UTF-8 (the kernel cuts
 * names at 15 bytes, which can split a character). */
static bool put_row_tail(json_t *o, const pw_ctl_event_row *row)
{
	json_t *t = row->thread ? json_string(row->thread) : NULL;

	return (!t || put(o, "thread", t)) && put(o, "count", json_integer(row->count)) &&
	       put(o, "first_ns", json_integer(row->first_ns)) &&
	       put(o, "last_ns", json_integer(row->last_ns));
}

json_t *pw_ctl_event_json(const pw_ctl_event *e, const pw_ctl_event_row *row)
{
	json_t *rule = e->rule, *o = json_object();
	bool ok;

	if (!o) {
		json_decref(rule);
		return NULL;
	}
	ok = row ? put_row_head(o, row, e->time_ns) : put(o, "time_ns", json_integer(e->time_ns));
	ok = ok && put(o, "mode", str_or_null(e->mode)) &&
	     put(o, "generation", json_integer(e->generation)) &&
	     put(o, "op", str_or_null(e->op)) && put(o, "path", str_or_null(e->path)) &&
	     put(o, "path2", str_or_null(e->path2)) &&
	     (!row || put(o, "denied", json_boolean(e->err != 0))) &&
	     put(o, "errno", str_or_null(pw_report_errno_name(e->err))) &&
	     (!row || put(o, "errno_num", json_integer(e->err))) &&
	     put(o, "reason", str_or_null(e->reason)) &&
	     put(o, "rule", rule ? TAKE_PTR(rule) : json_null()) &&
	     put(o, "pid", json_integer(e->pid)) && put(o, "uid", json_integer(e->uid)) &&
	     put(o, "comm", str_or_null(e->comm)) && (!row || put_row_tail(o, row));
	json_decref(rule); /* NULL once the object took it */
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* The switch history row's keys after the switch's own. */
static bool put_switch_tail(json_t *o, const pw_ctl_switch_row *row)
{
	if (!put(o, "reason", str_or_null(row->reason)) ||
	    !put(o, "answered_by", str_or_null(row->answered_by)) ||
	    !put(o, "outcome", str_or_null(row->outcome)))
		return false;
	/* an agent's request: which process asked, and how it ended; a plan's name */
	if (row->asked_pid > 0 && !put(o, "asked_by",
				       json_pack("{s:I,s:s?}", "pid", (json_int_t)row->asked_pid,
						 "comm", row->asked_comm)))
		return false;
	return (!row->how || put(o, "how", json_string(row->how))) &&
	       (!row->plan || put(o, "plan", json_string(row->plan)));
}

json_t *pw_ctl_switch_json(const pw_ctl_switch *s, const pw_ctl_switch_row *row)
{
	json_t *o = json_object();
	bool ok;

	if (!o)
		return NULL;
	ok =
	    !row || (put(o, "kind", json_string("switch")) && put(o, "id", json_integer(row->id)) &&
		     put(o, "time", json_string(row->time)) &&
		     put(o, "time_ns", json_integer(row->time_ns)) &&
		     put(o, "project", str_or_null(row->project)) &&
		     put(o, "mountpoint", str_or_null(row->mountpoint)) &&
		     put(o, "run", run_json(row->mountpoint)));
	ok = ok && put(o, "from", str_or_null(s->from)) && put(o, "to", str_or_null(s->to)) &&
	     put(o, "generation", json_integer(s->generation)) &&
	     put(o, "pid", json_integer(s->pid)) && put(o, "uid", json_integer(s->uid)) &&
	     put(o, "comm", str_or_null(s->comm)) && put(o, "origin", str_or_null(s->origin)) &&
	     (!row || put_switch_tail(o, row));
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}
