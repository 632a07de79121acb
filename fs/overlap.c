/* SPDX-License-Identifier: MIT */
/*
 * Overlapping writes (overlap.h has the contract). Store functions used: what the other
 * views changed, read over a read-only connection of our own (store/changed.h), and
 * pw_audit_submit (store/audit.h) to report.
 */
#include "overlap.h"
#include "thread.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl/run_id.h"
#include "pidns.h"
#include "store/audit.h"
#include "pw_limits.h"
#include "store/changed.h"
#include "util.h"

#define BUCKETS 1024
/* A second look after the other views' batches had time to commit (PW_UNDO_ORIG_DEFER_MS). */
#define RECHECK_NS (300 * 1000000ll)
/* The shortest time between two refreshes from the database: a refresh reads mountinfo and
 * queries the store, and a `tar x` notes a path per file, so the paths noted meanwhile wait
 * for one refresh together (without this, one refresh per created file tripled the
 * daemon's CPU for a create). The notice is on the announcement channel, never in the
 * write's way, so 50 ms later is as good. */
#define REFRESH_GAP_NS (50 * 1000000ll)

typedef struct path_node {
	char *path;
	struct path_node *next;
} path_node;

/* Another live view of the project: its current change set and the paths it changed. */
typedef struct other {
	char *mountpoint;
	int64_t changeset, last_row;
	path_node *paths[BUCKETS];
	bool seen; /* in the last refresh */
	struct other *next;
} other;

typedef struct item {
	char *path;
	char mode[64];
	pid_t pid;
	int64_t due_ns; /* CLOCK_MONOTONIC */
	bool second;	/* the second look */
	struct item *next;
} item;

struct pw_overlap {
	char *project, *mountpoint;
	pw_audit *audit;
	pthread_t thread;
	/* The queue: what pw_overlap_note takes on a FUSE request's path, so it is held for a
	 * push only, never across a refresh. */
	pthread_mutex_t qlock;
	pthread_cond_t cond; /* with qlock: an item queued, or stop */
	bool stop;
	item *queue;
	size_t n_queue;
	int64_t refreshed_ns; /* the worker's last refresh (CLOCK_MONOTONIC); 0: none yet */
	/* The worker waits with no deadline (an empty queue): only then does a note wake it;
	 * with a deadline it comes back for the new item anyway, so a `tar x` costs no
	 * wake-up per file. */
	bool idle;
	/* The database and what it said of the other views (refresh, check, mark, lookup). */
	pthread_mutex_t lock;
	pw_store_changed *changed;
	other *others;
};

/* ---- the other views' paths -------------------------------------------------------------- */

static void other_clear(other *v)
{
	for (size_t b = 0; b < BUCKETS; b++)
		while (v->paths[b]) {
			path_node *n = v->paths[b];
			v->paths[b] = n->next;
			free(n->path);
			free(n);
		}
}

static void other_free(other *v)
{
	other_clear(v);
	free(v->mountpoint);
	free(v);
}

static bool other_has(const other *v, const char *path)
{
	for (path_node *n = v->paths[pw_fnv1a64_str(PW_FNV1A64_INIT, path) % BUCKETS]; n;
	     n = n->next)
		if (streq(n->path, path))
			return true;
	return false;
}

static void other_add(other *v, const char *path)
{
	size_t b = pw_fnv1a64_str(PW_FNV1A64_INIT, path) % BUCKETS;
	path_node *n;

	if (other_has(v, path) || !(n = calloc(1, sizeof(*n))))
		return;
	if (!(n->path = strdup(path))) {
		free(n);
		return;
	}
	n->next = v->paths[b];
	v->paths[b] = n;
}

/* ---- which views are live ---------------------------------------------------------------- */

/* mountinfo's octal escapes (\040 for a space) undone in place. */
static void unescape(char *s)
{
	char *o = s;
	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] && s[3]) {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

/* The mountpoints of the piworkfs views mounted now, as one malloc'd string of
 * NUL-terminated names ended by an empty one ("" when none), or NULL when unknown. */
static char *live_views(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "re"), *out;
	char *line = NULL, *list = NULL;
	size_t cap = 0, len = 0;

	if (!f)
		return NULL;
	out = open_memstream(&list, &len);
	while (out && getline(&line, &cap, f) > 0) {
		char *save = NULL, *tok = strtok_r(line, " ", &save), *at;
		for (int i = 0; tok && i < 4; i++) /* id, parent, dev, root: then the mountpoint */
			tok = strtok_r(NULL, " ", &save);
		at = tok;
		while ((tok = strtok_r(NULL, " ", &save)) && !streq(tok, "-"))
			;
		tok = tok ? strtok_r(NULL, " ", &save) : NULL; /* the type */
		if (at && tok && streq(tok, "fuse.piworkfs")) {
			unescape(at);
			fwrite(at, 1, strlen(at) + 1, out);
		}
	}
	free(line);
	fclose(f);
	if (!out || fputc('\0', out) == EOF || fclose(out) != 0) {
		free(list);
		return NULL;
	}
	return list;
}

/* Is MP one of LIVE (live_views; NULL, unknown: yes, report rather than stay silent)? */
static bool view_live(const char *live, const char *mp)
{
	if (!live)
		return true;
	for (const char *p = live; *p; p += strlen(p) + 1)
		if (streq(p, mp))
			return true;
	return false;
}

/* ---- refreshing from the database ---------------------------------------------------------- */

static other *find_other(pw_overlap *o, const char *mp)
{
	for (other *v = o->others; v; v = v->next)
		if (streq(v->mountpoint, mp))
			return v;
	return NULL;
}

/* The rows of V's current change set after the last one read. */
static void row_read(int64_t id, const char *p, const char *p2, void *u)
{
	other *v = u;
	v->last_row = id;
	if (p)
		other_add(v, p);
	if (p2)
		other_add(v, p2);
}

static void read_rows(pw_overlap *o, other *v)
{
	pw_store_changed_rows(o->changed, v->changeset, v->last_row, row_read, v);
}

typedef struct refresh_ctx {
	pw_overlap *o;
	const char *live;
} refresh_ctx;

/* The other view at MP has CS as its latest change set. */
static void set_read(const char *mp, int64_t cs, void *u)
{
	refresh_ctx *rc = u;
	other *v;
	if (!mp || !view_live(rc->live, mp))
		return;
	v = find_other(rc->o, mp);
	if (!v) {
		v = calloc(1, sizeof(*v));
		if (!v || !(v->mountpoint = strdup(mp))) {
			free(v);
			return;
		}
		v->next = rc->o->others;
		rc->o->others = v;
	}
	if (v->changeset != cs) {
		other_clear(v);
		v->changeset = cs;
		v->last_row = 0;
	}
	v->seen = true;
}

/* Follows the other views' current change sets: new views, new change sets, new rows; a
 * view no longer mounted is forgotten. Lock held. */
static void refresh(pw_overlap *o)
{
	_cleanup_free_ char *live = live_views();

	for (other *v = o->others; v; v = v->next)
		v->seen = false;
	refresh_ctx rc = {.o = o, .live = live};
	pw_store_changed_sets(o->changed, set_read, &rc);
	for (other **pv = &o->others; *pv;) {
		other *v = *pv;
		if (!v->seen) {
			*pv = v->next;
			other_free(v);
			continue;
		}
		read_rows(o, v);
		pv = &v->next;
	}
}

/* ---- reporting ------------------------------------------------------------------------------ */

static void report(pw_overlap *o, const item *it, const other *v)
{
	char pidns[PW_PIDNS_DESC_MAX];
	bool known = it->pid > 0 && pw_pidns_describe(it->pid, pidns, sizeof(pidns)) == 0;
	pw_audit_event ev = {
	    .mode = it->mode[0] ? it->mode : NULL,
	    .op = PW_OP_WRITE,
	    .path = it->path,
	    .path2 = v->mountpoint,
	    .err = 0,
	    .reason = PW_REASON_OVERLAP,
	    .pid = it->pid,
	    .uid = getuid(),
	    .pidns = known ? pidns : NULL,
	};

	pw_audit_submit(o->audit, &ev);
}

/* Checks IT against the other views; true when it is done with (reported, or looked at
 * twice). Lock held. */
static bool check_item(pw_overlap *o, item *it)
{
	bool hit = false;

	for (other *v = o->others; v; v = v->next)
		if (other_has(v, it->path)) {
			report(o, it, v);
			hit = true;
		}
	if (hit || it->second)
		return true;
	it->second = true;
	it->due_ns = pw_clock_ns(CLOCK_MONOTONIC) + RECHECK_NS;
	return false;
}

static void item_free(item *it)
{
	free(it->path);
	free(it);
}

/* When the worker should look at the queue next: the earliest due item, but not before
 * REFRESH_GAP_NS after the last refresh; 0 when the queue is empty. qlock held. */
static int64_t next_wake(const pw_overlap *o)
{
	int64_t due = 0;

	for (const item *it = o->queue; it; it = it->next)
		if (!due || it->due_ns < due)
			due = it->due_ns;
	if (due && o->refreshed_ns && due < o->refreshed_ns + REFRESH_GAP_NS)
		due = o->refreshed_ns + REFRESH_GAP_NS;
	return due;
}

/* Waits on the queue until WAKE (CLOCK_MONOTONIC; 0: until signalled). qlock held. */
static void wait_until(pw_overlap *o, int64_t wake)
{
	if (!wake) {
		o->idle = true;
		pthread_cond_wait(&o->cond, &o->qlock);
		o->idle = false;
		return;
	}
	struct timespec ts = {.tv_sec = wake / 1000000000ll, .tv_nsec = wake % 1000000000ll};
	pthread_cond_timedwait(&o->cond, &o->qlock, &ts);
}

/* Takes the items due at NOW off the queue, as a list. qlock held. */
static item *take_due(pw_overlap *o, int64_t now)
{
	item *due = NULL;

	for (item **pi = &o->queue; *pi;) {
		item *it = *pi;
		if (it->due_ns > now) {
			pi = &it->next;
			continue;
		}
		*pi = it->next;
		o->n_queue--;
		it->next = due;
		due = it;
	}
	return due;
}

/* One refresh, then each of DUE checked; returns those that want a second look. */
static item *check_due(pw_overlap *o, item *due)
{
	item *again = NULL;

	pthread_mutex_lock(&o->lock);
	refresh(o);
	while (due) {
		item *it = due;
		due = it->next;
		if (check_item(o, it)) {
			item_free(it);
		} else {
			it->next = again;
			again = it;
		}
	}
	pthread_mutex_unlock(&o->lock);
	return again;
}

static void *worker(void *arg)
{
	pw_overlap *o = arg;

	pthread_mutex_lock(&o->qlock);
	while (!o->stop) {
		int64_t now = pw_clock_ns(CLOCK_MONOTONIC), wake = next_wake(o);
		if (!wake || wake > now) {
			wait_until(o, wake);
			continue;
		}
		item *due = take_due(o, now);
		o->refreshed_ns = now;
		pthread_mutex_unlock(&o->qlock);
		item *again = check_due(o, due);
		pthread_mutex_lock(&o->qlock);
		while (again) { /* back for the second look */
			item *it = again;
			again = it->next;
			it->next = o->queue;
			o->queue = it;
			o->n_queue++;
		}
	}
	pthread_mutex_unlock(&o->qlock);
	return NULL;
}

/* ---- the interface -------------------------------------------------------------------------- */

void pw_overlap_note(pw_overlap *o, const char *path, pid_t pid, const char *mode)
{
	item *it;

	if (!o || !path || !path[0])
		return;
	it = calloc(1, sizeof(*it));
	if (!it || !(it->path = strdup(path))) {
		free(it);
		return;
	}
	it->pid = pid;
	snprintf(it->mode, sizeof(it->mode), "%s", mode ? mode : "");
	it->due_ns = pw_clock_ns(CLOCK_MONOTONIC);
	pthread_mutex_lock(&o->qlock);
	if (o->n_queue >= PW_OVERLAP_QUEUE_MAX) {
		pthread_mutex_unlock(&o->qlock);
		item_free(it);
		return;
	}
	it->next = o->queue;
	o->queue = it;
	o->n_queue++;
	if (o->idle)
		pthread_cond_signal(&o->cond);
	pthread_mutex_unlock(&o->qlock);
}

json_t *pw_overlap_lookup(pw_overlap *o, const char *path)
{
	json_t *a = json_array();

	if (!o || !a)
		return a;
	pthread_mutex_lock(&o->lock);
	refresh(o);
	for (other *v = o->others; v; v = v->next)
		if (other_has(v, path))
			json_array_append_new(a, json_pack("{s:s,s:I}", "mountpoint", v->mountpoint,
							   "changeset", (json_int_t)v->changeset));
	pthread_mutex_unlock(&o->lock);
	return a;
}

/* Adds {"mountpoint": MP, "changeset": CS, "run": its run id if a run's} to the array BY,
 * unless MP is in it already. */
static void add_changer(json_t *by, const char *mp, int64_t cs)
{
	size_t i;
	json_t *e;
	json_array_foreach(
	    by, i,
	    e) if (streq_ptr(json_string_value(json_object_get(e, "mountpoint")), mp)) return;
	_cleanup_free_ char *run = pw_ctl_run_of_mountpoint(mp);
	json_array_append_new(by, json_pack("{s:s,s:I,s:s?}", "mountpoint", mp, "changeset",
					    (json_int_t)cs, "run", run));
}

/* Adds the other views that changed PATH to the array BY (without repeats). Lock held. */
static void add_changers(pw_overlap *o, const char *path, json_t *by)
{
	for (other *v = o->others; path && v; v = v->next)
		if (other_has(v, path))
			add_changer(by, v->mountpoint, v->changeset);
}

/* The "also_changed_by" array of the change C, made empty if it has none. */
static json_t *changers_of(json_t *c)
{
	json_t *by = json_object_get(c, "also_changed_by");
	if (!by && json_object_set_new(c, "also_changed_by", json_array()) == 0)
		by = json_object_get(c, "also_changed_by");
	return by;
}

void pw_overlap_mark(pw_overlap *o, json_t *changes)
{
	size_t i;
	json_t *c;

	if (!o)
		return;
	pthread_mutex_lock(&o->lock);
	refresh(o);
	json_array_foreach(changes, i, c)
	{
		json_t *by = changers_of(c);
		add_changers(o, json_string_value(json_object_get(c, "path")), by);
		add_changers(o, json_string_value(json_object_get(c, "to")), by);
	}
	pthread_mutex_unlock(&o->lock);
}

/* The change set MP had at T (its latest begun by then), 0 when unknown. Lock held. */
static int64_t set_at(pw_overlap *o, const char *mp, int64_t t)
{
	return pw_store_changed_set_at(o->changed, mp, t);
}

/* Adds to the changes of CHANGES at PATH (their "path" or "to") the view at MP, whose
 * change set at T was the other side of an overlap. */
static void mark_path(pw_overlap *o, json_t *changes, const char *path, const char *mp, int64_t t)
{
	size_t i;
	json_t *c;
	json_array_foreach(changes, i, c)
	{
		if (!streq_ptr(json_string_value(json_object_get(c, "path")), path) &&
		    !streq_ptr(json_string_value(json_object_get(c, "to")), path))
			continue;
		json_t *by = changers_of(c);
		if (by)
			add_changer(by, mp, set_at(o, mp, t));
	}
}

typedef struct recorded_ctx {
	pw_overlap *o;
	json_t *changes;
	const char *mountpoint;
} recorded_ctx;

/* WRITER changed PATH at T while FIRST's change set had changed it: each is the other's
 * "also changed by" */
static void overlap_read(int64_t t, const char *writer, const char *path, const char *first,
			 void *u)
{
	recorded_ctx *rc = u;
	if (streq_ptr(writer, rc->mountpoint) && first)
		mark_path(rc->o, rc->changes, path, first, t);
	else if (streq_ptr(first, rc->mountpoint) && writer)
		mark_path(rc->o, rc->changes, path, writer, t);
}

void pw_overlap_mark_recorded(pw_overlap *o, json_t *changes, const char *mountpoint,
			      int64_t from_ns, int64_t to_ns)
{
	size_t i;
	json_t *c;
	if (!o)
		return;
	json_array_foreach(changes, i, c)(void) changers_of(c);
	if (!mountpoint)
		return;
	pthread_mutex_lock(&o->lock);
	recorded_ctx rc = {.o = o, .changes = changes, .mountpoint = mountpoint};
	pw_store_changed_overlaps(o->changed, from_ns, to_ns, overlap_read, &rc);
	pthread_mutex_unlock(&o->lock);
}

static void overlap_free(pw_overlap *o)
{
	while (o->others) {
		other *v = o->others;
		o->others = v->next;
		other_free(v);
	}
	while (o->queue) {
		item *it = o->queue;
		o->queue = it->next;
		item_free(it);
	}
	pw_store_changed_free(o->changed);
	pthread_cond_destroy(&o->cond);
	pthread_mutex_destroy(&o->qlock);
	pthread_mutex_destroy(&o->lock);
	free(o->project);
	free(o->mountpoint);
	free(o);
}

int pw_overlap_new(const pw_overlap_opts *opts, pw_overlap **ret)
{
	pw_overlap *o;
	int r;

	if (!opts || !opts->db_path || !opts->project || !opts->mountpoint)
		return -EINVAL;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	pthread_mutex_init(&o->lock, NULL);
	pthread_mutex_init(&o->qlock, NULL);
	pw_cond_init_monotonic(&o->cond);
	o->audit = opts->audit;
	o->project = strdup(opts->project);
	o->mountpoint = strdup(opts->mountpoint);
	if (!o->project || !o->mountpoint) {
		overlap_free(o);
		return -ENOMEM;
	}
	r = pw_store_changed_open(opts->db_path, o->project, o->mountpoint, &o->changed);
	if (r == 0)
		r = -pthread_create(&o->thread, NULL, worker, o);
	if (r < 0) {
		overlap_free(o);
		return r;
	}
	*ret = o;
	return 0;
}

void pw_overlap_free(pw_overlap *o)
{
	if (!o)
		return;
	pw_thread_stop(o->thread, &o->qlock, &o->cond, &o->stop);
	overlap_free(o);
}
