/* SPDX-License-Identifier: MIT */
/*
 * The wire shapes of an audit event and of a switch, built in one place each (events.c).
 *
 * An audit event leaves piworkfs two ways: live, as the control socket's `denied` and
 * `overlap` notifications (server.c, docs/PROTOCOL.md), and stored, as a row of `piworkfs
 * log --jsonl` and `why --json` (cli/cmd_log.c, docs/AUDIT.md). A switch likewise: the
 * `mode.changed` notification and the log's switch object. The stored shape is the live one
 * with the row's own keys around it, so both are built by one function, which a reader of
 * either can rely on: a field added to one is in the other.
 *
 * Pure: builds jansson values, prints and sends nothing. Keys come in a fixed order, so a
 * dump with JSON_PRESERVE_ORDER is stable.
 */
#pragma once

#include <jansson.h>
#include <stdint.h>

/* What every shape of an audit event says. Strings may be NULL (null in the JSON). */
typedef struct pw_ctl_event {
	int64_t time_ns;
	const char *mode;
	int64_t generation;
	const char *op, *path, *path2;
	int err; /* 0 (an overlap: allowed, told), else the errno the operation got */
	const char *reason;
	json_t *rule; /* the rule that decided, or NULL; taken by pw_ctl_event_json */
	int64_t pid, uid;
	const char *comm;
} pw_ctl_event;

/* What a stored row adds: its id and place in the log. */
typedef struct pw_ctl_event_row {
	int64_t id;
	const char *time; /* time_ns as ISO 8601 UTC text */
	const char *project, *mountpoint;
	const char *thread; /* the asking thread, when not the main one; NULL: key left out */
	int64_t count, first_ns, last_ns;
} pw_ctl_event_row;

/* The event E as JSON. ROW NULL: the notification,
 *   {"time_ns","mode","generation","op","path","path2","errno","reason","rule","pid","uid",
 *    "comm"};
 * else the log's row,
 *   {"id","time","time_ns","project","mountpoint","run","mode","generation","op","path",
 *    "path2","denied","errno","errno_num","reason","rule","pid","uid","comm"[,"thread"],
 *    "count","first_ns","last_ns"}.
 * "errno" is the errno's name, null for 0; "run" the run whose own view MOUNTPOINT is, else
 * null. A thread name that is not UTF-8 leaves "thread" out (a row is never lost over it).
 * Takes E->rule in every case. Returns a new reference, or NULL (no memory, or a string
 * that is not UTF-8). */
json_t *pw_ctl_event_json(const pw_ctl_event *e, const pw_ctl_event_row *row);

/* What every shape of a switch says. Strings may be NULL (null in the JSON). */
typedef struct pw_ctl_switch {
	const char *from, *to;
	int64_t generation;
	int64_t pid, uid; /* the process that asked for it */
	const char *comm, *origin;
} pw_ctl_switch;

/* What the switch history's row adds. */
typedef struct pw_ctl_switch_row {
	int64_t id;
	const char *time; /* time_ns as ISO 8601 UTC text */
	int64_t time_ns;
	const char *project, *mountpoint, *reason, *answered_by, *outcome;
	int64_t asked_pid;	/* an agent's request: the process that asked; 0 none */
	const char *asked_comm; /* its comm */
	const char *how, *plan; /* NULL: key left out */
} pw_ctl_switch_row;

/* The switch S as JSON. ROW NULL: the notification,
 *   {"from","to","generation","pid","uid","comm","origin"};
 * else the log's switch object,
 *   {"kind":"switch","id","time","time_ns","project","mountpoint","run","from","to",
 *    "generation","pid","uid","comm","origin","reason","answered_by","outcome"
 *    [,"asked_by":{"pid","comm"}][,"how"][,"plan"]}.
 * Returns a new reference, or NULL. */
json_t *pw_ctl_switch_json(const pw_ctl_switch *s, const pw_ctl_switch_row *row);
