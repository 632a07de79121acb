/* SPDX-License-Identifier: MIT */
/*
 * The audit log's rows for `log` and `why` (log.h): a row's copy, the filter and the query
 * over a read-only connection, --since's times, and the live view whose project the log
 * shows by default.
 */
#include <pwd.h>
#include <signal.h>
#include <sys/param.h>
#include <time.h>

#include "cli.h"
#include "ctl/events.h"
#include "ctl/run_id.h"
#include "client/ctl_client.h"
#include "log.h"
#include "options.h"
#include "output.h"
#include "project.h"
#include "report.h"
#include "store/state.h"
#include "store/reader.h"
#include "quote.h"
#include "util.h"

/* ---- One audit row. ---- */

/* The string fields of a row, named alike in the store's row (pw_audit_row) and ours: the
 * one list that a copy duplicates and pw_log_row_done frees. */
#define LOG_ROW_STRINGS(X)                                                                         \
	X(project)                                                                                 \
	X(mountpoint)                                                                              \
	X(mode)                                                                                    \
	X(op) X(path) X(path2) X(reason) X(rule_kind) X(rule_pattern) X(rule_file) X(comm) X(thread)

void pw_log_row_done(log_row *r)
{
#define FREE_FIELD(f) free(r->f);
	LOG_ROW_STRINGS(FREE_FIELD)
#undef FREE_FIELD
	*r = (log_row){0};
}

/* A copy of the store's row A that outlives the query's callback. */
int pw_log_row_copy(const pw_audit_row *a, log_row *r)
{
	bool short_of_memory = false;

	*r = (log_row){
	    .id = a->id,
	    .time_ns = a->time_ns,
	    .generation = a->generation,
	    .err = a->err,
	    .rule_line = a->rule_line,
	    .pid = a->pid,
	    .uid = a->uid,
	    .count = a->count,
	    .first_ns = a->first_ns,
	    .last_ns = a->last_ns,
	};
#define COPY_FIELD(f)                                                                              \
	r->f = pw_dup_or_null(a->f);                                                               \
	short_of_memory |= a->f && !r->f;
	LOG_ROW_STRINGS(COPY_FIELD)
#undef COPY_FIELD
	if (short_of_memory) {
		pw_log_row_done(r);
		return -ENOMEM;
	}
	return 0;
}

/* ---- Filters and the query. ---- */

/* The store's filter for F. AFTER_ID >= 0 asks for rows with a larger id, oldest first (for
 * --follow); otherwise rows come newest first. */
pw_audit_filter pw_log_audit_filter(const log_filter *f, int64_t after_id)
{
	return (pw_audit_filter){
	    .denied = f->denied,
	    .mode = f->mode,
	    .path_glob = f->path_glob,
	    .path_eq = f->path_eq,
	    .has_pid = f->has_pid,
	    .pid = f->pid,
	    .has_since = f->has_since,
	    .since_ns = f->since_ns,
	    .project = f->project,
	    .after_id = after_id,
	};
}

typedef struct row_collector {
	log_row *rows;
	size_t n, cap, limit;
} row_collector;

static int collect_one(const pw_audit_row *a, void *userdata)
{
	row_collector *c = userdata;

	if (c->limit && c->n >= c->limit)
		return 1;
	if (PW_GROW(c->rows, c->cap, c->n, 64) < 0)
		return -ENOMEM;
	int r = pw_log_row_copy(a, &c->rows[c->n]);
	if (r < 0)
		return r;
	c->n++;
	return c->limit && c->n >= c->limit ? 1 : 0;
}

/* The last LIMIT rows passing F (0: all), oldest first, in *ret_rows. */
int pw_log_collect(pw_store_reader *db, const log_filter *f, size_t limit, log_row **ret_rows,
		   size_t *ret_n)
{
	pw_audit_filter af = pw_log_audit_filter(f, -1);
	row_collector c = {.limit = limit};
	int r = pw_store_audit_query(db, &af, collect_one, &c);

	if (r < 0) {
		PW_FREE_ARRAY(c.rows, c.n, pw_log_row_done);
		return r;
	}
	for (size_t i = 0; i < c.n / 2; i++) { /* newest first -> oldest first */
		log_row t = c.rows[i];
		c.rows[i] = c.rows[c.n - 1 - i];
		c.rows[c.n - 1 - i] = t;
	}
	*ret_rows = c.rows;
	*ret_n = c.n;
	return 0;
}

void pw_log_rows_free(log_row *rows, size_t n)
{
	PW_FREE_ARRAY(rows, n, pw_log_row_done);
}

int pw_log_parse_count(const char *cmd, const char *s, const char *what, int64_t *ret)
{
	char *end = NULL;

	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < 0) {
		pw_err(cmd, "%s: not a non-negative number: '%s'", what, s);
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

/* ---- --since ---- */

/* Parses "10m", "2h", ... (seconds ago). Returns 0 or -EINVAL. */
static int parse_relative(const char *s, int64_t *ret_secs)
{
	char *end = NULL;

	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || v < 0 || !end[0] || end[1])
		return -EINVAL;
	int64_t unit;
	switch (end[0]) {
	case 's':
		unit = 1;
		break;
	case 'm':
		unit = 60;
		break;
	case 'h':
		unit = 3600;
		break;
	case 'd':
		unit = 86400;
		break;
	case 'w':
		unit = 7 * 86400;
		break;
	default:
		return -EINVAL;
	}
	if (v > INT64_MAX / unit / 1000000000)
		return -ERANGE;
	*ret_secs = v * unit;
	return 0;
}

/* Parses an ISO 8601 date or date-time: YYYY-MM-DD[(T| )HH:MM[:SS[.fff]]][Z|(+|-)HH[:]MM].
 * Without a zone the time is local. */
static int parse_iso(const char *s, int64_t *ret_ns)
{
	struct tm tm = {0};
	const char *p = strptime(s, "%Y-%m-%d", &tm);
	long nsec = 0;

	if (!p)
		return -EINVAL;
	if (*p == 'T' || *p == 't' || *p == ' ') {
		const char *q = strptime(p + 1, "%H:%M", &tm);
		if (!q)
			return -EINVAL;
		p = q;
		if (*p == ':') {
			q = strptime(p + 1, "%S", &tm);
			if (!q)
				return -EINVAL;
			p = q;
			if (*p == '.' || *p == ',') {
				long scale = 100000000;
				for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10)
					nsec += (*p - '0') * scale;
			}
		}
	}
	bool utc = false;
	long offset = 0;
	if (*p == 'Z' || *p == 'z') {
		utc = true;
		p++;
	} else if (*p == '+' || *p == '-') {
		int sign = *p == '-' ? -1 : 1, hh, mm;
		int used = 0;
		if (sscanf(p + 1, "%2d:%2d%n", &hh, &mm, &used) != 2 &&
		    sscanf(p + 1, "%2d%2d%n", &hh, &mm, &used) != 2)
			return -EINVAL;
		if (hh > 23 || mm > 59)
			return -EINVAL;
		utc = true;
		offset = sign * (hh * 3600L + mm * 60L);
		p += 1 + used;
	}
	if (*p)
		return -EINVAL;
	time_t t;
	if (utc) {
		t = timegm(&tm) - offset;
	} else {
		tm.tm_isdst = -1;
		t = mktime(&tm);
	}
	if (t == (time_t)-1)
		return -EINVAL;
	*ret_ns = (int64_t)t * 1000000000 + nsec;
	return 0;
}

int pw_log_parse_since(const char *s, int64_t *ret_ns)
{
	int64_t secs;

	if (parse_relative(s, &secs) == 0) {
		*ret_ns = pw_clock_ns(CLOCK_REALTIME) - secs * 1000000000;
		return 0;
	}
	return parse_iso(s, ret_ns);
}

/* ---- The live view. ---- */

void pw_log_live_view_done(live_view *v)
{
	free(v->socket);
	free(v->mountpoint);
	free(v->project);
	*v = (live_view){0};
}

/* The live view containing the current directory (or named by $PIWORKFS_SOCKET), with the
 * project its daemon serves. Returns 0, -ENOENT when not inside a view, another -errno when
 * its daemon does not answer (a stale mount): callers then behave as outside a view. */
int pw_log_live_view_find(live_view *ret)
{
	_cleanup_free_ char *sock = NULL, *mp = NULL;
	_cleanup_json_ json_t *res = NULL;
	int r = pw_ctl_find_view_full(NULL, &sock, &mp);

	if (r < 0)
		return r;
	r = pw_ctl_call_socket(sock, "status", NULL, &res, NULL, NULL);
	if (r < 0)
		return r;
	const char *project = json_string_value(json_object_get(res, "project"));
	if (!project || project[0] != '/')
		return -EBADMSG;
	char *copy = strdup(project);
	if (!copy)
		return -ENOMEM;
	*ret = (live_view){TAKE_PTR(sock), TAKE_PTR(mp), copy};
	return 0;
}
