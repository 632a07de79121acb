/* SPDX-License-Identifier: MIT */
/*
 * piworkfs log: the audit log, read straight from the state database over a read-only
 * connection (no daemon needed), newest last:
 *
 *   TIME                     MODE    OP          ERRNO   PID     COMM      COUNT  PATH  RULE
 *   2025-01-02 10:11:12.345  plan    create      EROFS   4242    bash      1      a.md  read-only
 *
 * --json prints one JSON object per line instead (docs/AUDIT.md). Run inside a live view, the
 * log shows that view's project only (--project and --all choose otherwise).
 *
 * --follow prints rows added since, as they are committed. The database stays the one
 * source of what is printed (ids, counts, rules); the control socket only says when to look.
 * Inside a live view the follower subscribes to the view's `denied` notifications, which the
 * audit writer sends after COMMIT, and reads the database as soon as one arrives; it also
 * reads every 200 ms, which is all it does outside a view or once the daemon is gone
 * (rows of other views, and merged repeats, never notify).
 *
 * piworkfs why is cmd_why.c; the rows and the table, log.h.
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

#define LOG_DEFAULT_LIMIT 50
#define FOLLOW_POLL_NS (200 * 1000000L)
#define FOLLOW_POLL_MS 200
#define FOLLOW_CALL_TIMEOUT_MS 5000

static const char log_usage[] =
    "Usage: piworkfs log [-n N] [--denied] [--mode M] [--path GLOB] [--pid P]\n"
    "                    [--since TIME] [--project DIR | --all] [--switches] [--follow]\n"
    "                    [--jsonl]\n"
    "\n"
    "Show the audit log of the views: the operations they denied (and allowed ones when a\n"
    "view logs them) and the mode switches with who asked, oldest first, newest last.\n"
    "Reads the state database directly. Inside a live view, only that view's project is\n"
    "shown unless --project or --all says otherwise; outside one, a PROJECT column says\n"
    "whose each event is. On a terminal the columns fit its width (the time of day\n"
    "only, long paths shortened in the middle) and denials are coloured (not with\n"
    "NO_COLOR set); in a file or a pipe the rows fit 80 columns, nothing cut (--jsonl:\n"
    "one line per event). A reload that keeps the mode is not listed as a switch.\n"
    "\n"
    "Options:\n"
    "  -n, --lines N      show the last N events (default 50; 0: all, with --follow:\n"
    "                     none, as tail -f -n 0)\n"
    "      --denied       only denied operations (leave out allowed ones and switches)\n"
    "  -m, --mode M       only events in mode M (switches to M)\n"
    "      --path GLOB    only events whose path (or second path) matches GLOB\n"
    "      --pid P        only events of process P\n"
    "  -s, --since TIME   only events at or after TIME: 2025-01-31, 2025-01-31T14:05[:09],\n"
    "                     with Z or +HH:MM for a zone (default local time), or 30s, 10m,\n"
    "                     2h, 3d, 1w ago\n"
    "  -C, --project DIR  only events of the project DIR\n"
    "  -M, --mount PATH   only events of the project of the view containing PATH\n"
    "  -a, --all          events of every project (the default outside a live view)\n"
    "      --switches     only the switch history: switches and who asked\n"
    "                     (pid, command, uid, socket), an agent's requests\n"
    "                     denied, expired or superseded (by whom, how), plans\n"
    "                     approved and reopened\n"
    "      --follow       keep printing new events as they are written (Ctrl-C to stop)\n"
    "      --jsonl        JSON Lines: one JSON object per event and line, no table\n"
    "                     (docs/AUDIT.md); switches only with --switches\n"
    "      --json         the same as --jsonl (the log is a stream)\n"
    "  -h, --help         show this help\n"
    "\n"
    "Examples:\n"
    "  piworkfs log -n 20 --since 1h\n"
    "  piworkfs log --switches --all\n"
    "  piworkfs log --follow --jsonl --denied\n"
    "\n"
    "The database is $PIWORKFS_STATE_DB, $XDG_STATE_HOME/piworkfs/state.db,\n"
    "/var/lib/piworkfs/state.db for root, else ~/.local/state/piworkfs/state.db.\n"
    "Exit status: 0 ok; 2 usage error; 3 bad project; 4 no live view has -M PATH;\n"
    "5 the database cannot be read.\n";

/* ---- The log command. ---- */

static volatile sig_atomic_t stop_following;

static void on_stop(int sig)
{
	stop_following = 1;
}

typedef struct row_printer {
	const log_printer *pr;
	bool json;
	int64_t *last_id;
} row_printer;

static int print_one(const pw_audit_row *a, void *userdata)
{
	row_printer *p = userdata;
	log_row row;
	int r = pw_log_row_copy(a, &row);

	if (r < 0)
		return r;
	*p->last_id = row.id;
	r = p->json ? pw_log_print_row_json(&row) : pw_log_print_row_text(p->pr, &row);
	pw_log_row_done(&row);
	return r < 0 ? r : 0;
}

/* Prints the rows added after *LAST_ID that pass F, and moves *LAST_ID. */
static int print_new_rows(pw_store_reader *db, const log_filter *f, const log_printer *pr,
			  bool json, int64_t *last_id)
{
	pw_audit_filter af = pw_log_audit_filter(f, *last_id);
	row_printer p = {.pr = pr, .json = json, .last_id = last_id};
	int r = pw_store_audit_query(db, &af, print_one, &p);

	fflush(stdout);
	return r;
}

/* ---- --follow ---- */

/* Subscribes to the `denied` notifications of the view behind SOCKET. Returns the
 * connection, or NULL when there is none to be had (no daemon, or one without an audit
 * writer): the follower then only polls. */
static pw_ctl_conn *subscribe_denied(const char *socket)
{
	pw_ctl_conn *c = NULL;
	_cleanup_json_ json_t *res = NULL;

	if (!socket || pw_ctl_connect(socket, FOLLOW_CALL_TIMEOUT_MS, &c) < 0)
		return NULL;
	json_t *params = json_pack("{s:[s]}", "events", "denied");
	int r = params ? pw_ctl_call(c, "subscribe", params, &res, NULL, NULL) : -ENOMEM;
	if (r < 0 || !json_is_true(json_object_get(res, "audit"))) {
		pw_ctl_close(c);
		return NULL;
	}
	return c;
}

/* Waits up to FOLLOW_POLL_MS for a notification on *SUB. A connection that fails (the
 * daemon went away) is closed and *SUB set to NULL: polling goes on without it. */
static void wait_for_news(pw_ctl_conn **sub)
{
	if (!*sub) {
		struct timespec ts = {.tv_sec = 0, .tv_nsec = FOLLOW_POLL_NS};
		nanosleep(&ts, NULL);
		return;
	}
	char *method = NULL;
	json_t *params = NULL;
	int r = pw_ctl_read_notification(*sub, FOLLOW_POLL_MS, &method, &params);
	if (r == 0) {
		free(method);
		json_decref(params);
	} else if (r != -ETIMEDOUT) {
		pw_ctl_close(*sub);
		*sub = NULL;
	}
}

/* What --follow prints: F's audit rows and/or switches, as text (PR) or JSON Lines. */
typedef struct follow_spec {
	const log_filter *f;
	const log_printer *pr;
	bool json, audit, switches;
	int64_t last_id, last_switch_id;
} follow_spec;

/* Prints the switches recorded after fs->last_switch_id. */
static int print_new_switches(const char *path, follow_spec *fs)
{
	pw_switch_row *w = NULL;
	size_t n = 0;
	int r = pw_state_read_switches(path, fs->f->project, fs->f->has_since ? fs->f->since_ns : 0,
				       fs->last_switch_id, 0, &w, &n);

	if (r == -ENOENT || r == -EBUSY)
		return 0;
	if (r < 0)
		return r;
	for (size_t i = 0; i < n && r >= 0; i++) {
		fs->last_switch_id = w[i].id;
		if (pw_log_noop_switch(&w[i]))
			continue;
		if (fs->json) {
			r = pw_log_print_json_line(pw_log_switch_json(&w[i]));
		} else {
			log_line l;
			r = pw_log_line_from_switch(&w[i], &l);
			if (r >= 0) {
				pw_log_print_line(fs->pr, &l);
				pw_log_line_done(&l);
			}
		}
	}
	pw_switch_rows_free(w, n);
	fflush(stdout);
	return r;
}

/* Prints new rows until interrupted. The database may not exist yet when following starts.
 * SOCKET (or NULL) is the live view whose notifications wake the follower. */
static int follow(const char *path, pw_store_reader *db, follow_spec *fs, const char *socket)
{
	_cleanup_(pw_store_reader_closep) pw_store_reader *own = db;
	struct sigaction sa = {.sa_handler = on_stop};
	pw_ctl_conn *sub = subscribe_denied(socket);
	int r = 0;

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	while (!stop_following) {
		if (!own && pw_store_open_readonly(path, &own) < 0)
			own = NULL;
		if (own && fs->audit) {
			r = print_new_rows(own, fs->f, fs->pr, fs->json, &fs->last_id);
			if (r == -EBUSY)
				r = 0;
			if (r < 0)
				break;
		}
		if (own && fs->switches) {
			r = print_new_switches(path, fs);
			if (r < 0)
				break;
		}
		if (ferror(stdout)) {
			r = -EPIPE;
			break;
		}
		wait_for_news(&sub);
	}
	pw_ctl_close(sub);
	return r;
}

/* -n, --pid, --since: the options log reads as a count or a time, into the log_opts DATA. */
static int log_option(const pw_opts *po, int c, void *data)
{
	log_opts *o = data;
	int64_t v;

	if (c == 's') {
		if (pw_log_parse_since(po->arg, &o->f.since_ns) < 0) {
			pw_err(
			    po->spec->name,
			    "--since: not a time: '%s' (use 2025-01-31, 2025-01-31T14:05:09, 10m, "
			    "2h, 3d)",
			    po->arg);
			return PW_EXIT_USAGE;
		}
		o->f.has_since = true;
		return PW_EXIT_OK;
	}
	if (pw_log_parse_count(po->spec->name, po->arg, c == 'n' ? "-n" : "--pid", &v) < 0)
		return PW_EXIT_USAGE;
	if (c == 'n') {
		o->limit = (size_t)v;
		o->limit_given = true;
	} else {
		o->f.has_pid = true;
		o->f.pid = v;
	}
	return PW_EXIT_OK;
}

/* The options into O. Returns PW_EXIT_GO_ON, or the exit status (--help: 0). */
static int log_parse(int argc, char **argv, log_opts *o)
{
	_cleanup_opts_ pw_opts po = {0};
	const pw_opt_bind binds[] = {{PW_OPT_DENIED, .flag = &o->f.denied},
				     {'m', .arg = &o->f.mode},
				     {PW_OPT_PATH, .arg = &o->glob},
				     {'C', .arg = &o->project_opt},
				     {'a', .flag = &o->all},
				     {PW_OPT_FOLLOW, .flag = &o->follow},
				     {PW_OPT_SWITCHES, .flag = &o->switches},
				     {PW_OPT_JSON, .flag = &o->json},
				     {PW_OPT_JSONL, .flag = &o->jsonl},
				     {0}};
	int r = pw_opts_parse(&po, argv[0], argc, argv,
			      &(pw_opts_use){.usage = log_usage,
					     .binds = binds,
					     .fn = log_option,
					     .data = o,
					     .no_operands = true});

	if (r != PW_EXIT_GO_ON)
		return r;
	if (o->all && o->project_opt) {
		pw_err(argv[0], "--all and --project exclude each other");
		return PW_EXIT_USAGE;
	}
	return PW_EXIT_GO_ON;
}

int cmd_log(int argc, char **argv)
{
	_cleanup_free_ char *dbpath = pw_state_default_path();
	_cleanup_(pw_store_reader_closep) pw_store_reader *db = NULL;
	_cleanup_(pw_glob_freep) pw_glob *glob = NULL;
	_cleanup_project_ pw_cli_project p = {0};
	_cleanup_(pw_log_live_view_done) live_view lv = {0};
	log_opts o = {.limit = LOG_DEFAULT_LIMIT};
	log_row *rows = NULL;
	size_t n = 0;
	const char *err = NULL;
	int r;

	r = log_parse(argc, argv, &o);
	if (r != PW_EXIT_GO_ON)
		return r; /* --help, or a usage error */
	if (o.glob) {
		char norm[PW_GLOB_LEN_MAX + 2];
		/* A pattern given as "./x" or "/x" means the same as "x". */
		snprintf(norm, sizeof(norm), "%s", startswith(o.glob, "./") ? o.glob + 2 : o.glob);
		r = pw_glob_compile(norm, &glob, &err);
		if (r < 0) {
			pw_err(argv[0], "--path: bad glob '%s': %s", o.glob,
			       err ? err : strerror(-r));
			return PW_EXIT_USAGE;
		}
		o.f.path_glob = glob;
	}
	if (o.project_opt) {
		r = pw_cli_project_open_or_say(argv[0], o.project_opt, &p);
		if (r != PW_EXIT_OK)
			return r;
		o.f.project = pw_cli_project_path(&p);
	}
	/* Inside a live view: that view's project, and its notifications for --follow. */
	if (!o.all && pw_log_live_view_find(&lv) == 0 && !o.project_opt)
		o.f.project = lv.project;
	if (!dbpath) {
		pw_err(argv[0], "cannot tell where the state database is (no $HOME)");
		return PW_EXIT_SYSTEM;
	}

	bool json = o.json || o.jsonl;
	log_printer pr = {.color = !json && pw_use_color(stdout), .all_projects = !o.f.project};
	/* Switches: with --switches only them; in the table, interleaved with the events unless
	 * a filter that only events have (--denied, --path, --pid) is given. JSON Lines keep
	 * their one shape of object unless --switches asks for switches. */
	follow_spec fs = {
	    .f = &o.f,
	    .pr = &pr,
	    .json = json,
	    .audit = !o.switches,
	    .switches = o.switches || (!json && !o.f.denied && !o.glob && !o.f.has_pid),
	};

	r = pw_store_open_readonly(dbpath, &db);
	if (r == -ENOENT || r == -EPROTO) {
		/* Nothing logged yet: an empty log, not an error. */
		if (o.follow) {
			pw_log_printer_size(&pr, NULL, 0);
			if (!json)
				pw_log_print_header(&pr);
			return follow(dbpath, NULL, &fs, lv.socket) < 0 ? PW_EXIT_SYSTEM
									: PW_EXIT_OK;
		}
		if (!json)
			printf("no events (no state database at %s yet)\n", dbpath);
		return PW_EXIT_OK;
	}
	if (r < 0) {
		pw_err(argv[0], "cannot read %s: %s", dbpath, strerror(-r));
		return PW_EXIT_SYSTEM;
	}

	pw_switch_row *sw = NULL;
	size_t n_sw = 0;
	/* --follow -n 0 prints nothing old, as tail -f -n 0 does (without --follow, 0 is all). */
	bool history = !(o.follow && o.limit_given && o.limit == 0);
	r = pw_store_audit_max_id(db, &fs.last_id);
	if (r >= 0 && fs.audit && history)
		r = pw_log_collect(db, &o.f, o.limit, &rows, &n);
	if (r >= 0 && fs.switches) {
		r = pw_state_read_switches(dbpath, o.f.project, o.f.has_since ? o.f.since_ns : 0, 0,
					   0, &sw, &n_sw);
		if (r == -ENOENT)
			r = 0;
	}
	if (r < 0) {
		pw_log_rows_free(rows, n);
		pw_err(argv[0], "cannot read the audit log in %s: %s", dbpath, strerror(-r));
		return PW_EXIT_SYSTEM;
	}
	if (n_sw > 0)
		fs.last_switch_id = sw[n_sw - 1].id;
	r = pw_log_print(&o, &pr, json, rows, n, sw, history ? n_sw : 0);
	pw_log_rows_free(rows, n);
	pw_switch_rows_free(sw, n_sw);
	fflush(stdout);
	if (r >= 0 && o.follow)
		r = follow(dbpath, TAKE_PTR(db), &fs, lv.socket);
	if (r < 0 || ferror(stdout)) {
		if (r != -EPIPE)
			pw_err(argv[0], "cannot print: %s", strerror(r < 0 ? -r : EIO));
		return PW_EXIT_SYSTEM;
	}
	return PW_EXIT_OK;
}
