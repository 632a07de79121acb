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
 * piworkfs why PATH: the last denials of PATH from the log, and the decision the project's
 * mode makes about it now (the --mode given, else the live view's mode, else the last mode
 * recorded for the project). Inside a live view the project is the view's: paths map
 * through the mountpoint, and the log is searched under the project's real path.
 */
#include <pwd.h>
#include <signal.h>
#include <sys/param.h>
#include <time.h>

#include "cli.h"
#include "ctl/events.h"
#include "ctl/run_id.h"
#include "client/ctl_client.h"
#include "options.h"
#include "output.h"
#include "project.h"
#include "report.h"
#include "store/state.h"
#include "store/reader.h"
#include "quote.h"
#include "util.h"

#define LOG_DEFAULT_LIMIT 50
#define WHY_DEFAULT_LIMIT 5
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

static const char why_usage[] =
    "Usage: piworkfs why [--mode M] [--project DIR] [-n N] [--json] PATH\n"
    "\n"
    "Explain why writes to PATH are denied: its last denials in the audit log, and the\n"
    "decision the mode makes about it now with the rule that decides.\n"
    "\n"
    "Options:\n"
    "  -m, --mode M       judge under mode M (default: the live view's mode, else the\n"
    "                     project's last mode)\n"
    "  -C, --project DIR  the project (default: the one enclosing the current directory)\n"
    "  -M, --mount PATH   the view containing PATH: its project and its live mode\n"
    "  -n, --lines N      how many past denials to show (default 5)\n"
    "      --json         print one JSON object\n"
    "  -h, --help         show this help\n"
    "\n"
    "Examples:\n"
    "  piworkfs why src/main.c\n"
    "  piworkfs why --mode design docs/design/a.md\n"
    "\n"
    "Exit status: 0 ok; 2 usage error; 3 unknown mode, bad project or bad PATH; 4 no live\n"
    "view contains -M PATH; 5 system error.\n";

/* ---- One audit row. ---- */

typedef struct log_row {
	int64_t id, time_ns, generation, rule_line, pid, uid, count, first_ns, last_ns;
	int err;
	char *project, *mountpoint, *mode, *op, *path, *path2, *reason, *rule_kind, *rule_pattern,
	    *rule_file, *comm, *thread;
} log_row;

static void log_row_done(log_row *r)
{
	char **strs[] = {&r->project,	   &r->mountpoint, &r->mode,   &r->op,
			 &r->path,	   &r->path2,	   &r->reason, &r->rule_kind,
			 &r->rule_pattern, &r->rule_file,  &r->comm,   &r->thread};
	for (size_t i = 0; i < ELEMENTSOF(strs); i++)
		free(*strs[i]);
	*r = (log_row){0};
}

static int dup_str(const char *s, char **ret)
{
	*ret = NULL;
	if (!s)
		return 0;
	*ret = strdup(s);
	return *ret ? 0 : -ENOMEM;
}

/* A copy of the store's row A that outlives the query's callback. */
static int log_row_copy(const pw_audit_row *a, log_row *r)
{
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
	const struct {
		const char *src;
		char **dst;
	} strs[] = {
	    {a->project, &r->project},
	    {a->mountpoint, &r->mountpoint},
	    {a->mode, &r->mode},
	    {a->op, &r->op},
	    {a->path, &r->path},
	    {a->path2, &r->path2},
	    {a->reason, &r->reason},
	    {a->rule_kind, &r->rule_kind},
	    {a->rule_pattern, &r->rule_pattern},
	    {a->rule_file, &r->rule_file},
	    {a->comm, &r->comm},
	    {a->thread, &r->thread},
	};
	for (size_t i = 0; i < ELEMENTSOF(strs); i++) {
		if (dup_str(strs[i].src, strs[i].dst) < 0) {
			log_row_done(r);
			return -ENOMEM;
		}
	}
	return 0;
}

/* ---- Printing. ---- */

static void format_time(int64_t ns, bool utc, char *buf, size_t size)
{
	time_t secs = (time_t)(ns / 1000000000);
	struct tm tm;
	char base[32];

	if (utc)
		gmtime_r(&secs, &tm);
	else
		localtime_r(&secs, &tm);
	strftime(base, sizeof(base), utc ? "%Y-%m-%dT%H:%M:%S" : "%Y-%m-%d %H:%M:%S", &tm);
	snprintf(buf, size, "%s.%03d%s", base, (int)((ns % 1000000000) / 1000000), utc ? "Z" : "");
}

static const char *errno_text(int err, char *buf, size_t size)
{
	const char *name = pw_report_errno_name(err);

	if (err == 0)
		return "-";
	if (name)
		return name;
	snprintf(buf, size, "%d", err);
	return buf;
}

/* The rule column: the reason, and the rule's pattern and origin when there is one. */
static void format_rule(const log_row *r, char *buf, size_t size)
{
	const char *home = getenv("HOME");
	const char *file = r->rule_file;
	char shown[PW_PATH_MAX];

	if (file && home && *home && startswith(file, home) && file[strlen(home)] == '/') {
		snprintf(shown, sizeof(shown), "~%s", file + strlen(home));
		file = shown;
	}
	if (r->rule_pattern && file && r->rule_line > 0)
		snprintf(buf, size, "%s %s (%s:%lld)", r->reason ? r->reason : "rule",
			 r->rule_pattern, file, (long long)r->rule_line);
	else if (r->rule_pattern && file)
		snprintf(buf, size, file[0] == '(' ? "%s %s %s" : "%s %s (%s)",
			 r->reason ? r->reason : "rule", r->rule_pattern, file);
	else if (r->rule_pattern)
		snprintf(buf, size, "%s %s", r->reason ? r->reason : "rule", r->rule_pattern);
	else
		snprintf(buf, size, "%s", r->reason ? r->reason : "-");
}

/* ---- The table: columns sized to their content and, on a terminal, to its width. ---- */

enum {
	COL_TIME,
	COL_PROJECT,
	COL_MODE,
	COL_OP,
	COL_ERRNO,
	COL_PID,
	COL_COMM,
	COL_COUNT,
	COL_PATH,
	COL_RULE,
	N_COLS
};

static const char *const col_names[N_COLS] = {"TIME", "PROJECT", "MODE",  "OP",	  "ERRNO",
					      "PID",  "COMM",	 "COUNT", "PATH", "RULE"};

/* A project as the PROJECT column shows it: under $HOME as ~/..., else as is. */
static char *project_cell(const char *project)
{
	const char *home = getenv("HOME");
	char *s = NULL;

	if (!project)
		return strdup("-");
	if (home && home[0] == '/' && !streq(home, "/") && startswith(project, home) &&
	    project[strlen(home)] == '/')
		return asprintf(&s, "~%s", project + strlen(home)) < 0 ? NULL : s;
	return strdup(project);
}

/* One line of the table: an audit event or a mode switch. */
typedef struct log_line {
	int64_t time_ns, id;
	bool is_switch, denied;
	char *cells[N_COLS];
} log_line;

static void log_line_done(log_line *l)
{
	for (size_t i = 0; i < N_COLS; i++)
		free(l->cells[i]);
}

typedef struct log_printer {
	size_t width[N_COLS];	   /* 0: not sized yet */
	size_t path_max, rule_max; /* 0: no limit (not a terminal) */
	bool color;
	bool all_projects; /* rows of every project: the PROJECT column */
	bool hide[N_COLS];
	bool fit;	 /* laid out for a width: on a terminal every cell cut to its column's */
	bool whole;	 /* not a terminal: laid out for 80 columns, nothing cut, RULE wrapped */
	size_t term;	 /* the width laid out for */
	bool rule_below; /* too narrow for PATH and RULE side by side: RULE on a line below */
	bool path_below; /* not a terminal, no room for PATH on the row: PATH below, then RULE */
	size_t time_from, time_len; /* the part of "YYYY-MM-DD HH:MM:SS.mmm" shown */
} log_printer;

static char *xstrdup(const char *s)
{
	return strdup(s ? s : "-");
}

/* The MODE cell: a run's own view's rows say which run, "MODE@ID" (ctl/run_id.h). */
static char *mode_cell(const char *mode, const char *mountpoint)
{
	_cleanup_free_ char *run = pw_ctl_run_of_mountpoint(mountpoint);
	char *out;

	if (!run)
		return strdup(mode ? mode : "-");
	return asprintf(&out, "%s@%s", mode ? mode : "-", run) < 0 ? NULL : out;
}

static int line_from_row(const log_row *r, log_line *l)
{
	char when[48], errbuf[16], count[24], pid[24], rule[PW_PATH_MAX + PW_GLOB_LEN_MAX + 64];
	_cleanup_free_ char *path = NULL;

	format_time(r->time_ns, false, when, sizeof(when));
	format_rule(r, rule, sizeof(rule));
	/* An overlap's path2 is the other view's mountpoint (fs/overlap.h), not a rename's
	 * destination: named in the rule's column, a run by its id. */
	bool overlap = streq_ptr(r->reason, "overlap") && r->path2;
	if (overlap) {
		_cleanup_free_ char *run = pw_ctl_run_of_mountpoint(r->path2);
		if (run)
			snprintf(rule, sizeof(rule), "overlap: also changed by run %s",
				 pw_q(0, run));
		else
			snprintf(rule, sizeof(rule), "overlap: also changed by the view at %s",
				 pw_q(0, r->path2));
	}
	snprintf(count, sizeof(count), "%lld", (long long)r->count);
	snprintf(pid, sizeof(pid), "%lld", (long long)r->pid);
	/* Names the agent chose: quoted as git quotes paths (quote.h). */
	_cleanup_free_ char *qpath = pw_quote(r->path ? r->path : "");
	_cleanup_free_ char *qpath2 = r->path2 ? pw_quote(r->path2) : NULL;
	_cleanup_free_ char *qcomm = r->comm ? pw_quote(r->comm) : NULL;
	bool to = r->path2 && !overlap;
	if (!qpath || (r->path2 && !qpath2) || (r->comm && !qcomm) ||
	    asprintf(&path, "%s%s%s", qpath, to ? " -> " : "", to ? qpath2 : "") < 0)
		return -ENOMEM;
	*l = (log_line){.time_ns = r->time_ns, .id = r->id, .denied = r->err != 0};
	_cleanup_free_ char *project = project_cell(r->project);
	_cleanup_free_ char *mode = mode_cell(r->mode, r->mountpoint);
	if (!mode)
		return -ENOMEM;
	const char *cells[N_COLS] = {
	    when, project, mode,  r->op, errno_text(r->err, errbuf, sizeof(errbuf)),
	    pid,  qcomm,   count, path,	 rule};
	for (size_t i = 0; i < N_COLS; i++)
		if (!(l->cells[i] = xstrdup(cells[i]))) {
			log_line_done(l);
			return -ENOMEM;
		}
	return 0;
}

/* Who asked for a switch: its command, or for the mount's own first mode (the daemon
 * records it with no command) the mount. */
static const char *asker_name(const pw_switch_row *w)
{
	if (w->comm && w->comm[0])
		return w->comm;
	return streq_ptr(w->origin, "mount") ? "piworkfs mount" : "an unknown process";
}

/* "user alice", or "uid 1234" when the name is unknown. */
static const char *user_text(int64_t uid, char *buf, size_t size)
{
	struct passwd *pw = uid >= 0 ? getpwuid((uid_t)uid) : NULL;

	if (pw)
		snprintf(buf, size, "user %s", pw->pw_name);
	else
		snprintf(buf, size, "uid %lld", (long long)uid);
	return buf;
}

/* A reload that kept the mode is no switch: the log leaves it out (every reload recorded
 * "design -> design"). */
static bool noop_switch(const pw_switch_row *w)
{
	return w->from_mode && streq_ptr(w->from_mode, w->to_mode) &&
	       (streq_ptr(w->origin, "reload") || streq_ptr(w->origin, "signal"));
}

/* "the agent (claude, pid 12) asked ("REASON")": an agent's request (origin request). */
static void asked_text(const pw_switch_row *w, char *buf, size_t size)
{
	/* the reason in double quotes either way: quote.h adds them when it escapes */
	const char *reason = w->reason ? w->reason : "";
	bool q = pw_quote_needed(reason);
	char agent[96] = "";

	if (w->asked_pid > 0)
		snprintf(agent, sizeof(agent), " (%s, pid %lld)",
			 w->asked_comm ? pw_q(3, w->asked_comm) : "?", (long long)w->asked_pid);
	snprintf(buf, size, "the agent%s asked (%s%s%s)", agent, q ? "" : "\"", pw_q(0, reason),
		 q ? "" : "\"");
}

/*
 * A row of the switch history as OP, ERRNO, PATH and RULE: a switch ("switch", "-",
 * "FROM -> TO", who asked: process, uid, through what), a plan approved or reopened
 * ("approve"/"reopen", "plan NAME"), or an agent's request that ended without a switch (its
 * outcome in ERRNO: denied, expired, superseded, failed; who ended it and how).
 */
static void describe_switch(const pw_switch_row *w, const char **ret_op, char *change,
			    size_t change_size, char *who, size_t who_size)
{
	bool reopen = streq_ptr(w->origin, "plan-reopen"),
	     request = streq_ptr(w->origin, "request");
	char asked[400], user[96];

	*ret_op = w->plan ? (reopen ? "reopen" : "approve") : "switch";
	if (w->plan)
		snprintf(change, change_size, "plan %s", pw_q(4, w->plan));
	else
		snprintf(change, change_size, "%s -> %s", w->from_mode ? w->from_mode : "(none)",
			 w->to_mode ? w->to_mode : "?");
	if (request)
		asked_text(w, asked, sizeof(asked));
	if (request && w->outcome)
		snprintf(who, who_size, "%s; %s%s%s%s%s", asked, w->outcome,
			 w->answered_by ? " by " : "",
			 w->answered_by ? pw_q(1, w->answered_by) : "", w->how ? ": " : "",
			 w->how ? pw_q(5, w->how) : "");
	else if (request)
		snprintf(who, who_size, "%s; allowed by %s", asked,
			 w->answered_by ? pw_q(1, w->answered_by) : "?");
	else if (w->plan)
		snprintf(who, who_size, "%s by %s (pid %lld, %s)", reopen ? "reopened" : "approved",
			 pw_q(0, asker_name(w)), (long long)w->pid,
			 user_text(w->uid, user, sizeof(user)));
	else
		snprintf(who, who_size, "asked by %s (pid %lld, %s) through the %s",
			 pw_q(0, asker_name(w)), (long long)w->pid,
			 user_text(w->uid, user, sizeof(user)), w->origin ? w->origin : "?");
}

static int line_from_switch(const pw_switch_row *w, log_line *l)
{
	char when[48], pid[24], change[PW_PATH_MAX + 8], who[1400];
	const char *op;

	format_time(w->time_ns, false, when, sizeof(when));
	snprintf(pid, sizeof(pid), "%lld", (long long)w->pid);
	describe_switch(w, &op, change, sizeof(change), who, sizeof(who));
	*l = (log_line){.time_ns = w->time_ns, .id = w->id, .is_switch = true};
	_cleanup_free_ char *project = project_cell(w->project);
	/* the mode in force after it: a request that ended left the one it came from */
	_cleanup_free_ char *mode =
	    mode_cell(w->outcome ? w->from_mode : w->to_mode, w->mountpoint);
	if (!mode)
		return -ENOMEM;
	const char *cells[N_COLS] = {when,
				     project,
				     mode,
				     op,
				     w->outcome ? w->outcome : "-",
				     pid,
				     w->comm ? pw_q(2, w->comm) : NULL,
				     "",
				     change,
				     who};
	for (size_t i = 0; i < N_COLS; i++)
		if (!(l->cells[i] = xstrdup(cells[i]))) {
			log_line_done(l);
			return -ENOMEM;
		}
	return 0;
}

/* The natural width of column C over LINES (at least its name's). */
static size_t natural_width(size_t c, const log_line *lines, size_t n)
{
	size_t w = strlen(col_names[c]);

	for (size_t i = 0; i < n; i++)
		w = MAX(w, strlen(lines[i].cells[c]));
	return w;
}

/* Do LINES come from more than one project? Only then does PROJECT tell them apart. */
static bool several_projects(const log_line *lines, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (!streq(lines[i].cells[COL_PROJECT], lines[0].cells[COL_PROJECT]))
			return true;
	return false;
}

/* Do all LINES fall on today (local time)? Then the table shows only the time of day. */
static bool all_today(const log_line *lines, size_t n)
{
	char today[48];

	format_time(pw_clock_ns(CLOCK_REALTIME), false, today, sizeof(today));
	for (size_t i = 0; i < n; i++)
		if (strncmp(lines[i].cells[COL_TIME], today, 10) != 0)
			return false;
	return true;
}

/* The width of the visible columns before PATH, with their separators. */
static size_t fixed_width(const log_printer *p)
{
	size_t fixed = 0;

	for (size_t c = 0; c < COL_PATH; c++)
		if (!p->hide[c])
			fixed += p->width[c] + 2;
	return fixed;
}

/*
 * A table wider than the terminal gets narrower columns before PATH and RULE are cut
 * (on 80 columns the rows were 97 to 100 wide and wrapped): the time of day only (or no
 * year and milliseconds when the rows span days), no room kept for rows --follow may
 * bring, no COUNT column when nothing repeated, a shorter PROJECT and COMM.
 */
static void narrow_columns(log_printer *p, const log_line *lines, size_t n)
{
	bool repeats = false;

	/* a file keeps the date (not the year: the room goes to the path) */
	p->time_from = p->whole ? 5 : all_today(lines, n) ? 11 : 5;
	p->time_len = p->whole ? 14 : p->time_from == 11 ? 12 : 14;
	p->width[COL_TIME] = p->time_len;
	for (size_t c = COL_MODE; c <= COL_COMM; c++)
		p->width[c] = natural_width(c, lines, n);
	for (size_t i = 0; i < n; i++)
		repeats = repeats ||
			  (lines[i].cells[COL_COUNT][0] && !streq(lines[i].cells[COL_COUNT], "1"));
	p->hide[COL_COUNT] = !repeats;
	if (p->whole)
		return; /* nothing is cut: the columns keep their natural widths */
	p->width[COL_PROJECT] = MIN(p->width[COL_PROJECT], (size_t)16);
	p->width[COL_COMM] = MIN(p->width[COL_COMM], (size_t)10);
}

/* Sizes the columns for LINES; on a terminal, PATH and RULE share what the others leave of
 * its width (PATH shortened in the middle, RULE at its end), and no line is wider. Not on a
 * terminal (a file, a pipe) the rows are laid out for 80 columns too, but nothing is cut:
 * RULE goes below the row, wrapped, when it has no room beside PATH. */
static void printer_size(log_printer *p, const log_line *lines, size_t n)
{
	unsigned term = pw_terminal_width();

	p->hide[COL_PROJECT] = !p->all_projects || !several_projects(lines, n);
	p->time_from = 0;
	p->time_len = 23;
	for (size_t c = 0; c < N_COLS; c++)
		p->width[c] = natural_width(c, lines, n);
	/* --follow prints rows not seen yet: room for the usual ones. */
	p->width[COL_MODE] = MAX(p->width[COL_MODE], (size_t)8);
	p->width[COL_OP] = MAX(p->width[COL_OP], (size_t)10);
	p->width[COL_ERRNO] = MAX(p->width[COL_ERRNO], (size_t)6);
	p->width[COL_PID] = MAX(p->width[COL_PID], (size_t)7);
	p->width[COL_COMM] = MAX(p->width[COL_COMM], (size_t)8);
	p->whole = term == 0;
	term = p->whole ? PW_HELP_WIDTH : term;
	p->term = term;
	p->fit = true;
	size_t path = p->width[COL_PATH], rule = p->width[COL_RULE];
	if (fixed_width(p) + 2 + path + rule <= term)
		return;
	narrow_columns(p, lines, n);
	size_t fixed = fixed_width(p);
	size_t avail = term > fixed + 2 ? term - fixed - 2 : 0;
	if (path + rule <= avail) {
		p->rule_max = avail - path;
		return;
	}
	if (p->whole) {
		p->rule_below = true;
		p->hide[COL_RULE] = true;
		p->path_below = fixed + path > term;
		p->hide[COL_PATH] = p->path_below;
		return;
	}
	if (avail < 48) {
		/* No room for both: the path takes the line, the rule the line below. */
		p->rule_below = true;
		p->hide[COL_RULE] = true;
		p->path_max = MAX(term > fixed ? term - fixed : 0, (size_t)5);
		p->width[COL_PATH] = p->path_max;
		p->rule_max = MAX(term > p->width[COL_TIME] + 2 ? term - p->width[COL_TIME] - 2 : 0,
				  (size_t)4);
		return;
	}
	/* The path matters most: it gets up to 60% of the room, at least 16 columns, and the
	 * rule at least 16. */
	size_t path_w = MIN(path, MAX((size_t)16, avail * 3 / 5));
	if (avail < path_w + 16)
		path_w = avail - 16;
	p->path_max = path_w;
	p->width[COL_PATH] = p->path_max;
	p->rule_max = avail - p->path_max;
}

#define COLOR_RED "\033[31m"
#define COLOR_GREEN "\033[32m"
#define COLOR_CYAN "\033[36m"
#define COLOR_BOLD "\033[1m"
#define COLOR_OFF "\033[0m"

/* CELL of column C as the printer shows it: the time's part, and on a terminal no wider
 * than the column (paths and projects shortened in the middle, the rest at the end). */
static const char *shown_cell(const log_printer *p, size_t c, const char *cell, char *buf,
			      size_t size)
{
	if (c == COL_TIME && strlen(cell) >= p->time_from + p->time_len &&
	    (p->time_from || strlen(cell) > p->time_len)) {
		snprintf(buf, size, "%.*s", (int)p->time_len, cell + p->time_from);
		return buf;
	}
	if (!p->fit || p->whole || c == COL_RULE || strlen(cell) <= p->width[c])
		return cell;
	if (c == COL_PATH || c == COL_PROJECT)
		return pw_ellipsize_middle(cell, p->width[c], buf, size);
	snprintf(buf, size, "%.*s", (int)p->width[c], cell);
	return buf;
}

/* The last column shown on the main line. */
static size_t last_column(const log_printer *p)
{
	size_t last = N_COLS - 1;

	while (last > 0 && p->hide[last])
		last--;
	return last;
}

/* Under a row when the rule has no room beside the path: the rule, indented, cut; not on
 * a terminal, whole and wrapped, after the path when that had no room either. */
static void print_rule_below(const log_printer *p, const char *const *cells)
{
	size_t indent = p->width[COL_TIME] + 2;
	const char *rule = cells[COL_RULE];

	if (p->whole) {
		/* the path whole, two spaces, then the rule's words, wrapped under the path */
		size_t at = indent;
		printf("%*s", (int)indent, "");
		if (p->path_below)
			at += (size_t)printf("%s  ", cells[COL_PATH]);
		if (at > indent && at + 16 > p->term) /* a long path: the rule under it */
			at = (size_t)printf("\n%*s", (int)indent, "") - 1;
		pw_print_wrapped(stdout, rule, at, indent, p->term);
	} else if (strlen(rule) > p->rule_max)
		printf("%*s%.*s...\n", (int)indent, "",
		       (int)(p->rule_max > 3 ? p->rule_max - 3 : 0), rule);
	else
		printf("%*s%s\n", (int)indent, "", rule);
}

static void print_cells(const log_printer *p, const char *const *cells, const char *color)
{
	size_t last_c = last_column(p);

	for (size_t c = 0; c < N_COLS; c++) {
		char buf[PW_PATH_MAX * 2 + 16];
		bool last = c == last_c;

		if (p->hide[c])
			continue;
		const char *s = shown_cell(p, c, cells[c], buf, sizeof(buf));
		if (color && (c == COL_ERRNO || c == COL_OP))
			fputs(color, stdout);
		if (last && c != COL_RULE)
			fputs(s, stdout);
		else if (last && p->rule_max && strlen(s) > p->rule_max)
			printf("%.*s...", (int)(p->rule_max > 3 ? p->rule_max - 3 : 0), s);
		else if (last)
			fputs(s, stdout);
		else if (c == COL_PID || c == COL_COUNT)
			printf("%*s", (int)p->width[c], s);
		else
			printf("%-*s", (int)p->width[c], s);
		if (color && (c == COL_ERRNO || c == COL_OP))
			fputs(COLOR_OFF, stdout);
		if (!last)
			fputs("  ", stdout);
		else
			break;
	}
	putchar('\n');
	if (p->rule_below && cells != col_names)
		print_rule_below(p, cells);
}

static void print_header(const log_printer *p)
{
	if (p->color)
		fputs(COLOR_BOLD, stdout);
	print_cells(p, col_names, NULL);
	if (p->whole && p->rule_below) /* what the lines under each row hold */
		printf("%*s%s\n", (int)p->width[COL_TIME] + 2, "",
		       p->path_below ? "PATH  RULE" : "RULE");
	if (p->color)
		fputs(COLOR_OFF, stdout);
}

static void print_line(const log_printer *p, const log_line *l)
{
	const char *color = !p->color	   ? NULL
			    : l->is_switch ? COLOR_CYAN
			    : l->denied	   ? COLOR_RED
					   : COLOR_GREEN;
	print_cells(p, (const char *const *)l->cells, color);
}

static int print_row_text(const log_printer *p, const log_row *r)
{
	log_line l;
	int ret = line_from_row(r, &l);

	if (ret < 0)
		return ret;
	print_line(p, &l);
	log_line_done(&l);
	return 0;
}

/* The row as `log --jsonl` prints it: ctl/events.h, the shape of the live notification. */
static json_t *row_json(const log_row *r)
{
	char when[48];
	json_t *rule = NULL;

	format_time(r->time_ns, true, when, sizeof(when));
	if (r->rule_pattern) {
		rule = json_pack("{s:s?,s:s,s:s?,s:I}", "kind", r->rule_kind, "pattern",
				 r->rule_pattern, "file", r->rule_file, "line",
				 (json_int_t)r->rule_line);
		if (!rule)
			return NULL;
	}
	return pw_ctl_event_json(&(pw_ctl_event){.time_ns = r->time_ns,
						 .mode = r->mode,
						 .generation = r->generation,
						 .op = r->op,
						 .path = r->path,
						 .path2 = r->path2,
						 .err = r->err,
						 .reason = r->reason,
						 .rule = rule,
						 .pid = r->pid,
						 .uid = r->uid,
						 .comm = r->comm},
				 &(pw_ctl_event_row){.id = r->id,
						     .time = when,
						     .project = r->project,
						     .mountpoint = r->mountpoint,
						     .thread = r->thread,
						     .count = r->count,
						     .first_ns = r->first_ns,
						     .last_ns = r->last_ns});
}

static int print_row_json(const log_row *r)
{
	_cleanup_json_ json_t *o = row_json(r);
	if (!o)
		return -ENOMEM;
	if (json_dumpf(o, stdout, JSON_PRESERVE_ORDER | JSON_COMPACT) < 0)
		return -EIO;
	putchar('\n');
	pw_err_json(false); /* the output is a stream of objects already */
	return 0;
}

/* ---- Filters and the query. ---- */

typedef struct log_filter {
	bool denied;
	const char *mode;
	pw_glob *path_glob;  /* matched in C: SQL has no gitignore globs */
	const char *path_eq; /* exact path (why) */
	bool has_pid;
	int64_t pid;
	bool has_since;
	int64_t since_ns;
	const char *project;
} log_filter;

/* The store's filter for F. AFTER_ID >= 0 asks for rows with a larger id, oldest first (for
 * --follow); otherwise rows come newest first. */
static pw_audit_filter audit_filter(const log_filter *f, int64_t after_id)
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
	int r = log_row_copy(a, &c->rows[c->n]);
	if (r < 0)
		return r;
	c->n++;
	return c->limit && c->n >= c->limit ? 1 : 0;
}

/* The last LIMIT rows passing F (0: all), oldest first, in *ret_rows. */
static int collect_rows(pw_store_reader *db, const log_filter *f, size_t limit, log_row **ret_rows,
			size_t *ret_n)
{
	pw_audit_filter af = audit_filter(f, -1);
	row_collector c = {.limit = limit};
	int r = pw_store_audit_query(db, &af, collect_one, &c);

	if (r < 0) {
		for (size_t i = 0; i < c.n; i++)
			log_row_done(&c.rows[i]);
		free(c.rows);
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

static void free_rows(log_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++)
		log_row_done(&rows[i]);
	free(rows);
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

static int parse_since(const char *s, int64_t *ret_ns)
{
	int64_t secs;

	if (parse_relative(s, &secs) == 0) {
		*ret_ns = pw_clock_ns(CLOCK_REALTIME) - secs * 1000000000;
		return 0;
	}
	return parse_iso(s, ret_ns);
}

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
	int r = log_row_copy(a, &row);

	if (r < 0)
		return r;
	*p->last_id = row.id;
	r = p->json ? print_row_json(&row) : print_row_text(p->pr, &row);
	log_row_done(&row);
	return r < 0 ? r : 0;
}

/* Prints the rows added after *LAST_ID that pass F, and moves *LAST_ID. */
static int print_new_rows(pw_store_reader *db, const log_filter *f, const log_printer *pr,
			  bool json, int64_t *last_id)
{
	pw_audit_filter af = audit_filter(f, *last_id);
	row_printer p = {.pr = pr, .json = json, .last_id = last_id};
	int r = pw_store_audit_query(db, &af, print_one, &p);

	fflush(stdout);
	return r;
}

/* ---- The live view. ---- */

typedef struct live_view {
	char *socket;
	char *mountpoint; /* NULL when found through $PIWORKFS_SOCKET */
	char *project;	  /* the project's real path, as the daemon reports it */
} live_view;

static void live_view_done(live_view *v)
{
	free(v->socket);
	free(v->mountpoint);
	free(v->project);
	*v = (live_view){0};
}

/* The live view containing the current directory (or named by $PIWORKFS_SOCKET), with the
 * project its daemon serves. Returns 0, -ENOENT when not inside a view, another -errno when
 * its daemon does not answer (a stale mount): callers then behave as outside a view. */
static int live_view_find(live_view *ret)
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

/* What became of a row of the switch history: "switched", a plan "approved" or "reopened",
 * or how an agent's request ended without a switch (denied, expired, superseded, failed). */
static const char *switch_outcome(const pw_switch_row *w)
{
	if (w->outcome)
		return w->outcome;
	if (w->plan)
		return streq_ptr(w->origin, "plan-reopen") ? "reopened" : "approved";
	return "switched";
}

/* A switch as one JSON object (with "kind": "switch"): ctl/events.h. */
static json_t *switch_json(const pw_switch_row *w)
{
	char when[48];

	format_time(w->time_ns, true, when, sizeof(when));
	return pw_ctl_switch_json(&(pw_ctl_switch){.from = w->from_mode,
						   .to = w->to_mode,
						   .generation = w->generation,
						   .pid = w->pid,
						   .uid = w->uid,
						   .comm = w->comm,
						   .origin = w->origin},
				  &(pw_ctl_switch_row){.id = w->id,
						       .time = when,
						       .time_ns = w->time_ns,
						       .project = w->project,
						       .mountpoint = w->mountpoint,
						       .reason = w->reason,
						       .answered_by = w->answered_by,
						       .outcome = switch_outcome(w),
						       .asked_pid = w->asked_pid,
						       .asked_comm = w->asked_comm,
						       .how = w->how,
						       .plan = w->plan});
}

static int print_json_line(json_t *o)
{
	if (!o)
		return -ENOMEM;
	int r = json_dumpf(o, stdout, JSON_PRESERVE_ORDER | JSON_COMPACT) < 0 ? -EIO : 0;
	json_decref(o);
	putchar('\n');
	pw_err_json(false); /* the output is a stream of objects already */
	return r;
}

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
		if (noop_switch(&w[i]))
			continue;
		if (fs->json) {
			r = print_json_line(switch_json(&w[i]));
		} else {
			log_line l;
			r = line_from_switch(&w[i], &l);
			if (r >= 0) {
				print_line(fs->pr, &l);
				log_line_done(&l);
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

typedef struct log_opts {
	log_filter f;
	size_t limit;
	bool limit_given;
	bool json, jsonl, follow, all, switches;
	const char *project_opt, *glob;
} log_opts;

static int parse_count(const char *cmd, const char *s, const char *what, int64_t *ret)
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

static int log_parse(int argc, char **argv, log_opts *o)
{
	_cleanup_opts_ pw_opts po = {0};
	int64_t v;
	int c;

	if (pw_opts_init(&po, argv[0], argc, argv) < 0)
		return PW_EXIT_SYSTEM;
	while ((c = pw_opts_next(&po)) > 0) {
		switch (c) {
		case 'n':
			if (parse_count(argv[0], po.arg, "-n", &v) < 0)
				return PW_EXIT_USAGE;
			o->limit = (size_t)v;
			o->limit_given = true;
			break;
		case PW_OPT_DENIED:
			o->f.denied = true;
			break;
		case 'm':
			o->f.mode = po.arg;
			break;
		case PW_OPT_PATH:
			o->glob = po.arg;
			break;
		case PW_OPT_PID:
			if (parse_count(argv[0], po.arg, "--pid", &v) < 0)
				return PW_EXIT_USAGE;
			o->f.has_pid = true;
			o->f.pid = v;
			break;
		case 's':
			if (parse_since(po.arg, &o->f.since_ns) < 0) {
				pw_err(argv[0],
				       "--since: not a time: '%s' (use 2025-01-31, "
				       "2025-01-31T14:05:09, 10m, 2h, 3d)",
				       po.arg);
				return PW_EXIT_USAGE;
			}
			o->f.has_since = true;
			break;
		case 'C':
			o->project_opt = po.arg;
			break;
		case 'a':
			o->all = true;
			break;
		case PW_OPT_FOLLOW:
			o->follow = true;
			break;
		case PW_OPT_SWITCHES:
			o->switches = true;
			break;
		case PW_OPT_JSON:
			o->json = true;
			break;
		case PW_OPT_JSONL:
			o->jsonl = true;
			break;
		case 'h':
			return pw_usage(argv[0], log_usage, false) == 0 ? -1 : PW_EXIT_USAGE;
		}
	}
	if (c < 0)
		return PW_EXIT_USAGE;
	if (po.n_operands > 0) {
		pw_err(argv[0], "unexpected argument '%s' (see 'piworkfs log --help')",
		       po.operands[0]);
		return PW_EXIT_USAGE;
	}
	if (o->all && o->project_opt) {
		pw_err(argv[0], "--all and --project exclude each other");
		return PW_EXIT_USAGE;
	}
	return PW_EXIT_OK;
}

static int cmp_lines(const void *a, const void *b)
{
	const log_line *x = a, *y = b;

	if (x->time_ns != y->time_ns)
		return x->time_ns < y->time_ns ? -1 : 1;
	if (x->is_switch != y->is_switch)
		return x->is_switch ? -1 : 1; /* a switch before what happened in the new mode */
	return x->id < y->id ? -1 : x->id > y->id;
}

/* Prints the audit ROWS and switches SW (each oldest first) merged by time, the last
 * o->limit of them, as a table or JSON Lines. */
static int print_log(const log_opts *o, log_printer *pr, bool json, const log_row *rows, size_t n,
		     const pw_switch_row *sw, size_t n_sw)
{
	log_line *lines = NULL;
	size_t n_lines = 0, first;
	int r = 0;

	if (json) {
		for (size_t i = 0; i < n && r >= 0; i++)
			r = print_row_json(&rows[i]);
		first = o->limit && n_sw > o->limit ? n_sw - o->limit : 0;
		for (size_t i = first; i < n_sw && r >= 0; i++)
			if (!noop_switch(&sw[i]))
				r = print_json_line(switch_json(&sw[i]));
		return r;
	}
	lines = calloc(n + n_sw + 1, sizeof(*lines));
	if (!lines)
		return -ENOMEM;
	for (size_t i = 0; i < n && r >= 0; i++)
		if ((r = line_from_row(&rows[i], &lines[n_lines])) >= 0)
			n_lines++;
	for (size_t i = 0; i < n_sw && r >= 0; i++) {
		/* in mode M: a switch to M, or a request that ended while M stayed */
		const char *in = sw[i].outcome ? sw[i].from_mode : sw[i].to_mode;
		if ((o->f.mode && !streq_ptr(in, o->f.mode)) || noop_switch(&sw[i]))
			continue;
		if ((r = line_from_switch(&sw[i], &lines[n_lines])) >= 0)
			n_lines++;
	}
	if (r >= 0) {
		qsort(lines, n_lines, sizeof(*lines), cmp_lines);
		first = o->limit && n_lines > o->limit ? n_lines - o->limit : 0;
		printer_size(pr, lines + first, n_lines - first);
		if (n_lines > first || o->follow)
			print_header(pr);
		for (size_t i = first; i < n_lines; i++)
			print_line(pr, &lines[i]);
		if (n_lines == first && !o->follow)
			printf("no matching events\n");
	}
	for (size_t i = 0; i < n_lines; i++)
		log_line_done(&lines[i]);
	free(lines);
	return r;
}

int cmd_log(int argc, char **argv)
{
	_cleanup_free_ char *dbpath = pw_state_default_path();
	_cleanup_(pw_store_reader_closep) pw_store_reader *db = NULL;
	_cleanup_(pw_glob_freep) pw_glob *glob = NULL;
	_cleanup_project_ pw_cli_project p = {0};
	_cleanup_(live_view_done) live_view lv = {0};
	log_opts o = {.limit = LOG_DEFAULT_LIMIT};
	log_row *rows = NULL;
	size_t n = 0;
	const char *err = NULL;
	int r;

	r = log_parse(argc, argv, &o);
	if (r < 0)
		return PW_EXIT_OK; /* --help */
	if (r != PW_EXIT_OK)
		return r;
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
		r = pw_cli_project_open(o.project_opt, &p, &err);
		if (r < 0) {
			pw_err(argv[0], "%s: %s", o.project_opt, err ? err : strerror(-r));
			return PW_EXIT_CONFIG;
		}
		o.f.project = pw_cli_project_path(&p);
	}
	/* Inside a live view: that view's project, and its notifications for --follow. */
	if (!o.all && live_view_find(&lv) == 0 && !o.project_opt)
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
			printer_size(&pr, NULL, 0);
			if (!json)
				print_header(&pr);
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
		r = collect_rows(db, &o.f, o.limit, &rows, &n);
	if (r >= 0 && fs.switches) {
		r = pw_state_read_switches(dbpath, o.f.project, o.f.has_since ? o.f.since_ns : 0, 0,
					   0, &sw, &n_sw);
		if (r == -ENOENT)
			r = 0;
	}
	if (r < 0) {
		free_rows(rows, n);
		pw_err(argv[0], "cannot read the audit log in %s: %s", dbpath, strerror(-r));
		return PW_EXIT_SYSTEM;
	}
	if (n_sw > 0)
		fs.last_switch_id = sw[n_sw - 1].id;
	r = print_log(&o, &pr, json, rows, n, sw, history ? n_sw : 0);
	free_rows(rows, n);
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

/* ---- The why command. ---- */

typedef struct why_mode {
	char *mode;
	const char *source; /* "option", "live", "last", "default" */
} why_mode;

/* The project's last mode as recorded in the database, read over a read-only connection (a
 * query never creates, migrates or repairs the file). Returns 0 with a malloc'd *ret, or
 * -errno (-ENOENT: none recorded). */
static int last_mode_readonly(const char *dbpath, const char *project, char **ret)
{
	_cleanup_(pw_store_reader_closep) pw_store_reader *db = NULL;
	int r = pw_store_open_readonly(dbpath, &db);

	if (r < 0)
		return r;
	return pw_store_last_mode(db, project, ret);
}

/* The mode to judge under: --mode, the live view's, the last recorded for PROJECT (a real
 * path), else plan (what a project never seen starts in). */
static int why_pick_mode(const pw_cli_project *p, const char *project, const char *opt,
			 const char *dbpath, why_mode *ret)
{
	char *m = NULL;

	if (opt) {
		m = strdup(opt);
		*ret = (why_mode){m, "option"};
		return m ? 0 : -ENOMEM;
	}
	if (pw_cli_live_mode(p, &m) == 0) {
		*ret = (why_mode){m, "live"};
		return 0;
	}
	if (dbpath && last_mode_readonly(dbpath, project, &m) == 0) {
		*ret = (why_mode){m, "last"};
		return 0;
	}
	m = strdup("plan");
	*ret = (why_mode){m, "default"};
	return m ? 0 : -ENOMEM;
}

static const char *why_source_text(const char *source)
{
	if (streq(source, "option"))
		return "as asked";
	if (streq(source, "live"))
		return "the live view's mode";
	if (streq(source, "last"))
		return "the project's last mode; no live view answered";
	return "the project was never mounted: a new project starts in plan";
}

typedef struct why_opts {
	const char *mode, *project;
	size_t limit;
	bool json;
	const char *path;
} why_opts;

static int why_parse(int argc, char **argv, why_opts *o)
{
	_cleanup_opts_ pw_opts po = {0};
	int64_t v;
	int c;

	if (pw_opts_init(&po, argv[0], argc, argv) < 0)
		return PW_EXIT_SYSTEM;
	while ((c = pw_opts_next(&po)) > 0) {
		switch (c) {
		case 'm':
			o->mode = po.arg;
			break;
		case 'C':
			o->project = po.arg;
			break;
		case 'n':
			if (parse_count(argv[0], po.arg, "-n", &v) < 0)
				return PW_EXIT_USAGE;
			o->limit = (size_t)v;
			break;
		case PW_OPT_JSON:
			o->json = true;
			break;
		case 'h':
			return pw_usage(argv[0], why_usage, false) == 0 ? -1 : PW_EXIT_USAGE;
		}
	}
	if (c < 0)
		return PW_EXIT_USAGE;
	if (po.n_operands != 1) {
		if (po.n_operands == 0)
			pw_err(argv[0], "no PATH given (see 'piworkfs why --help')");
		else
			pw_err(argv[0], "one PATH at a time (see 'piworkfs why --help')");
		return PW_EXIT_USAGE;
	}
	o->path = po.operands[0];
	return PW_EXIT_OK;
}

/* The op to judge now: the one last denied, else a plain write. */
static pw_op why_op(const log_row *rows, size_t n)
{
	if (n > 0 && rows[n - 1].op) {
		int op = pw_op_from_name(rows[n - 1].op);
		if (op >= 0 && pw_op_is_write((pw_op)op))
			return (pw_op)op;
	}
	return PW_OP_WRITE;
}

static int why_print_text(const pw_cli_project *p, const char *project, const char *rel,
			  const why_mode *wm, const pw_policy *pol, const pw_decision *d,
			  const log_row *rows, size_t n)
{
	char buf[PW_PATH_MAX];
	const char *file = d->rule ? pw_cli_display_file(p, d->rule->file, buf, sizeof(buf)) : NULL;
	_cleanup_free_ char *text = pw_report_decision_text_in(d, pol, file);

	if (!text)
		return -ENOMEM;
	printf("%s in %s\n", rel[0] ? pw_q(0, rel) : ".", pw_q(1, project));
	printf("now (mode %s, %s): %s%s%s\n", wm->mode, why_source_text(wm->source),
	       d->allowed ? "allowed" : "denied", d->allowed ? "" : " ",
	       d->allowed ? "" : pw_report_errno_name(d->err));
	printf("  %s\n", text);
	if (n == 0) {
		printf("no denials of this path in the audit log\n");
		return 0;
	}
	printf("last %zu denial%s:\n", n, n == 1 ? "" : "s");
	log_opts lo = {.limit = 0};
	log_printer pr = {.color = pw_use_color(stdout)};
	return print_log(&lo, &pr, false, rows, n, NULL, 0);
}

static int why_print_json(const char *project, const char *rel, pw_op op, bool is_dir,
			  const why_mode *wm, const pw_policy *pol, const pw_decision *d,
			  const log_row *rows, size_t n)
{
	json_t *o = json_object(), *arr = json_array();
	json_t *dec = pw_report_decision_in(rel, op, is_dir, d, pol);

	if (!o || !arr || !dec || json_object_set_new(o, "path", json_string(rel)) < 0 ||
	    json_object_set_new(o, "project", json_string(project)) < 0 ||
	    json_object_set_new(o, "mode", json_string(wm->mode)) < 0 ||
	    json_object_set_new(o, "mode_source", json_string(wm->source)) < 0 ||
	    json_object_set_new(o, "now", dec) < 0) {
		json_decref(o);
		json_decref(arr);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		if (json_array_append_new(arr, row_json(&rows[i])) < 0) {
			json_decref(o);
			json_decref(arr);
			return -ENOMEM;
		}
	if (json_object_set_new(o, "denials", arr) < 0) {
		json_decref(o);
		return -ENOMEM;
	}
	return pw_print_json(o);
}

int cmd_why(int argc, char **argv)
{
	_cleanup_free_ char *dbpath = pw_state_default_path();
	_cleanup_project_ pw_cli_project p = {0};
	_cleanup_(live_view_done) live_view lv = {0};
	_cleanup_modeset_ pw_modeset *ms = NULL;
	_cleanup_policy_ pw_policy *pol = NULL;
	why_opts o = {.limit = WHY_DEFAULT_LIMIT};
	why_mode wm = {0};
	log_row *rows = NULL;
	size_t n = 0;
	char rel[PW_PATH_MAX];
	const char *err = NULL;
	bool slash = false;
	int r;

	r = why_parse(argc, argv, &o);
	if (r < 0)
		return PW_EXIT_OK;
	if (r != PW_EXIT_OK)
		return r;
	/* Inside a live view the view is the project: paths map through its mountpoint, and
	 * the log is searched under the real project's path. */
	const char *project_opt = o.project;
	if (!o.project && live_view_find(&lv) == 0)
		project_opt = lv.mountpoint; /* NULL through $PIWORKFS_SOCKET: the cwd's project */
	r = pw_cli_project_open(project_opt, &p, &err);
	if (r < 0) {
		pw_err(argv[0], "%s: %s", project_opt ? project_opt : ".",
		       err ? err : strerror(-r));
		return PW_EXIT_CONFIG;
	}
	const char *project = lv.project ? lv.project : pw_cli_project_path(&p);
	if (!streq(project, pw_cli_project_path(&p)))
		p.trusted = pw_cli_project_trusted(project);
	r = pw_cli_map_path(&p, o.path, rel, &slash, &err);
	if (r == -EXDEV) {
		pw_err(argv[0], "%s: outside the project %s", o.path, pw_cli_project_path(&p));
		return PW_EXIT_CONFIG;
	}
	if (r < 0) {
		pw_err(argv[0], "%s: %s", o.path, err ? err : strerror(-r));
		return PW_EXIT_CONFIG;
	}

	/* Past denials: from the log, when there is one. */
	_cleanup_(pw_store_reader_closep) pw_store_reader *db = NULL;
	if (dbpath && pw_store_open_readonly(dbpath, &db) == 0) {
		log_filter f = {.denied = true, .path_eq = rel, .project = project};
		r = collect_rows(db, &f, o.limit, &rows, &n);
		if (r < 0) {
			pw_err(argv[0], "cannot read the audit log in %s: %s", dbpath,
			       strerror(-r));
			return PW_EXIT_SYSTEM;
		}
	}

	if (why_pick_mode(&p, project, o.mode, dbpath, &wm) < 0) {
		free_rows(rows, n);
		return PW_EXIT_SYSTEM;
	}
	r = pw_cli_get_policy(argv[0], &p, wm.mode, &ms, &pol);
	if (r != PW_EXIT_OK) {
		free(wm.mode);
		free_rows(rows, n);
		return r;
	}
	pw_op op = why_op(rows, n);
	bool is_dir = pw_cli_path_is_dir(&p, rel, slash || rel[0] == '\0');
	pw_decision d;
	pw_policy_decide(pol, op, rel, is_dir, &d);
	r = o.json ? why_print_json(project, rel[0] ? rel : ".", op, is_dir, &wm, pol, &d, rows, n)
		   : why_print_text(&p, project, rel, &wm, pol, &d, rows, n);
	free(wm.mode);
	free_rows(rows, n);
	if (r < 0) {
		pw_err(argv[0], "cannot print: %s", strerror(-r));
		return PW_EXIT_SYSTEM;
	}
	return PW_EXIT_OK;
}
