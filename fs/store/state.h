/* SPDX-License-Identifier: MIT */
/*
 * The user's state database: $XDG_STATE_HOME/piworkfs/state.db (root without
 * XDG_STATE_HOME: /var/lib/piworkfs/state.db; others: ~/.local/state/piworkfs/state.db).
 * SQLite in WAL mode, schema versioned with migrations (PRAGMA user_version). Holds trusted
 * projects, the last mode per project (keyed by real path), the switch history and the audit
 * log (audit.h writes the latter through its own connection).
 *
 * A missing database is created; a corrupt one is moved aside (state.db.corrupt-TIMESTAMP)
 * and rebuilt, with a warning returned to the caller, never a failure to mount.
 * A state handle is used by one thread at a time.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct pw_state pw_state;

/* Path of the database for the current user (malloc'd), honouring $PIWORKFS_STATE_DB
 * (tests), then $XDG_STATE_HOME. */
char *pw_state_default_path(void);

/* Opens (creating, migrating or rebuilding) the database at PATH. On a rebuild, *ret_warning
 * (when not NULL) receives a malloc'd one-line message. Returns 0 or -errno. */
int pw_state_open(const char *path, pw_state **ret, char **ret_warning);
void pw_state_close(pw_state *s); /* accepts NULL */

/* Last mode of PROJECT (real path). Returns 0 with a malloc'd *ret_mode, -ENOENT if never
 * seen, or -errno. */
int pw_state_get_last_mode(pw_state *s, const char *project, char **ret_mode);
int pw_state_set_last_mode(pw_state *s, const char *project, const char *mode);

/*
 * Records an entry of the switch history: a switch in force, a plan approved or reopened
 * (the person's decisions, beside the switches: they change what the view lets write), or an
 * agent's request that ended without one (OUTCOME set: denied, expired, superseded, failed).
 */
typedef struct pw_switch_record {
	int64_t time_ns;
	const char *project, *mountpoint;
	const char *from_mode, *to_mode; /* a request that ended: the mode it asked for */
	uint64_t generation;
	pid_t pid; /* who decided: the requesting process, the answering one for a request */
	uid_t uid;
	const char *comm;   /* the requesting process's name */
	const char *origin; /* "socket", "agent-socket", "mount", "reload", "signal", "request",
			     * "plan-approve", "plan-reopen" */
	const char *reason; /* an agent's request: its reason; else NULL */
	const char *answered_by; /* an agent's request: who allowed or denied it; else NULL */
	const char *outcome;	 /* NULL: done; a request that ended without a switch: "denied",
				  * "expired", "superseded", "failed" */
	const char *plan;	 /* origin plan-*, or a request to approve one: its path */
	pid_t asked_pid;	 /* an agent's request: the process that asked (0: none) */
	const char *asked_comm;	 /* and its name */
	const char *how; /* a request that ended: how ("typed y", "no answer within 120 s") */
} pw_switch_record;
int pw_state_record_switch(pw_state *s, const pw_switch_record *r);

/* One recorded switch, as read back (strings malloc'd, NULL when not recorded). */
typedef struct pw_switch_row {
	int64_t id, time_ns, generation, pid, uid;
	char *project, *mountpoint, *from_mode, *to_mode, *comm, *origin;
	char *reason, *answered_by; /* a granted request's (schema 3); else NULL */
	/* schema 8; NULL or 0 in older rows and databases */
	char *outcome, *plan, *asked_comm, *how;
	int64_t asked_pid;
} pw_switch_row;

/*
 * The switches recorded in the database at PATH, read over a read-only connection (never
 * creating or migrating it): those of PROJECT (NULL: every project) at or after SINCE_NS,
 * with an id above AFTER_ID, the last LIMIT of them (0: all), oldest first. Returns 0 with
 * a malloc'd array (free with pw_switch_rows_free), -ENOENT when there is no database yet,
 * or -errno.
 */
int pw_state_read_switches(const char *path, const char *project, int64_t since_ns,
			   int64_t after_id, size_t limit, pw_switch_row **ret, size_t *ret_n);
void pw_switch_rows_free(pw_switch_row *rows, size_t n);

/*
 * Deletes the switches recorded before BEFORE_NS over DB, a read-write connection to the
 * database (the audit writer's, which runs retention for the whole history), in chunks that
 * are each their own implicit transaction. Returns the number deleted or -errno.
 */
struct sqlite3;
int64_t pw_state_prune_switches(struct sqlite3 *db, int64_t before_ns);

/* pw_state_get_last_mode and pw_state_is_trusted over DB, any connection to the database
 * (the store's read-only reader asks the same questions, reader.h). */
int pw_state_db_last_mode(struct sqlite3 *db, const char *project, char **ret_mode);
int pw_state_db_is_trusted(struct sqlite3 *db, const char *project);

/* Trust: 1 trusted, 0 not, -errno on failure. */
int pw_state_is_trusted(pw_state *s, const char *project);
int pw_state_set_trusted(pw_state *s, const char *project, bool trusted);

/*
 * Plans (policy/plan.h, README "Plans"). The file is the plan's text; what the person decided
 * (approval, and the content hash of the file approved) and how far the work is (the tasks
 * done: when, by whom, in which change set of originals) live here, keyed by PROJECT and
 * the plan's project-relative PATH. Reopening a plan makes it a draft again and keeps its
 * progress.
 */
typedef struct pw_plan_record {
	char *path, *status; /* status: "draft" or "approved" */
	char *hash;	     /* sha256 (hex) of the file as approved; NULL for a draft */
	int64_t approved_ns; /* 0 for a draft */
	char *approved_by;
	int64_t updated_ns;
} pw_plan_record;

typedef struct pw_task_record {
	int64_t task; /* 1-based */
	char *text, *done_by, *note;
	int64_t done_ns;
	int64_t changeset; /* 0: none was open */
} pw_task_record;

/* Every plan of PROJECT the database knows, by path. 0 with a malloc'd array (may be empty),
 * or -errno. */
int pw_state_plans(pw_state *s, const char *project, pw_plan_record **ret, size_t *ret_n);
void pw_plan_records_free(pw_plan_record *v, size_t n);
/* Records PATH as approved with HASH by BY (now). */
int pw_state_plan_approve(pw_state *s, const char *project, const char *path, const char *hash,
			  const char *by);
/* Makes PATH a draft again (its progress stays). -ENOENT when it was not approved. */
int pw_state_plan_reopen(pw_state *s, const char *project, const char *path);
/* The tasks of PATH marked done, by task number. */
int pw_state_plan_tasks(pw_state *s, const char *project, const char *path, pw_task_record **ret,
			size_t *ret_n);
void pw_task_records_free(pw_task_record *v, size_t n);
/* Marks task TASK of PATH done. -EEXIST when it already is. */
int pw_state_plan_task_done(pw_state *s, const char *project, const char *path, int64_t task,
			    const char *text, const char *by, int64_t changeset, const char *note);
/* The newest change set of originals of PROJECT (0: none), for the task records. */
int64_t pw_state_current_changeset(pw_state *s, const char *project);
/* Records that the newest change set of PROJECT was started while task TASK of plan PATH
 * was in progress, when it started at or after SINCE_NS (the plan's approval: a change set
 * begun before belongs to no task); a change set keeps the first task recorded for it (the
 * one in progress when it started). 0 (also when there is nothing to record), or -errno. */
int pw_state_plan_note_changeset(pw_state *s, const char *project, const char *path, int64_t task,
				 int64_t since_ns);
/* The change sets recorded for plan PATH, oldest first: (*ret)[2i] the change set, [2i+1]
 * its task. 0 with a malloc'd array of 2 * *ret_n, or -errno. */
int pw_state_plan_changesets(pw_state *s, const char *project, const char *path, int64_t **ret,
			     size_t *ret_n);
