/* SPDX-License-Identifier: MIT */
/*
 * The audit log printed (log.h): the table, its columns sized to their content and, on a
 * terminal, to its width, switches among the rows; or one JSON object per line
 * (ctl/events.h builds them).
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

/* ---- Printing. ---- */

void pw_log_format_time(int64_t ns, bool utc, char *buf, size_t size)
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

void pw_log_line_done(log_line *l)
{
	for (size_t i = 0; i < N_COLS; i++)
		free(l->cells[i]);
}

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

	pw_log_format_time(r->time_ns, false, when, sizeof(when));
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
			pw_log_line_done(l);
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
bool pw_log_noop_switch(const pw_switch_row *w)
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

int pw_log_line_from_switch(const pw_switch_row *w, log_line *l)
{
	char when[48], pid[24], change[PW_PATH_MAX + 8], who[1400];
	const char *op;

	pw_log_format_time(w->time_ns, false, when, sizeof(when));
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
			pw_log_line_done(l);
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

	pw_log_format_time(pw_clock_ns(CLOCK_REALTIME), false, today, sizeof(today));
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
void pw_log_printer_size(log_printer *p, const log_line *lines, size_t n)
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

void pw_log_print_header(const log_printer *p)
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

void pw_log_print_line(const log_printer *p, const log_line *l)
{
	const char *color = !p->color	   ? NULL
			    : l->is_switch ? COLOR_CYAN
			    : l->denied	   ? COLOR_RED
					   : COLOR_GREEN;
	print_cells(p, (const char *const *)l->cells, color);
}

int pw_log_print_row_text(const log_printer *p, const log_row *r)
{
	log_line l;
	int ret = line_from_row(r, &l);

	if (ret < 0)
		return ret;
	pw_log_print_line(p, &l);
	pw_log_line_done(&l);
	return 0;
}

/* The row as `log --jsonl` prints it: ctl/events.h, the shape of the live notification. */
json_t *pw_log_row_json(const log_row *r)
{
	char when[48];
	json_t *rule = NULL;

	pw_log_format_time(r->time_ns, true, when, sizeof(when));
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

int pw_log_print_row_json(const log_row *r)
{
	_cleanup_json_ json_t *o = pw_log_row_json(r);
	if (!o)
		return -ENOMEM;
	if (json_dumpf(o, stdout, JSON_PRESERVE_ORDER | JSON_COMPACT) < 0)
		return -EIO;
	putchar('\n');
	pw_err_json(false); /* the output is a stream of objects already */
	return 0;
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
json_t *pw_log_switch_json(const pw_switch_row *w)
{
	char when[48];

	pw_log_format_time(w->time_ns, true, when, sizeof(when));
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

int pw_log_print_json_line(json_t *o)
{
	if (!o)
		return -ENOMEM;
	int r = json_dumpf(o, stdout, JSON_PRESERVE_ORDER | JSON_COMPACT) < 0 ? -EIO : 0;
	json_decref(o);
	putchar('\n');
	pw_err_json(false); /* the output is a stream of objects already */
	return r;
}

int pw_log_print(const log_opts *o, log_printer *pr, bool json, const log_row *rows, size_t n,
		 const pw_switch_row *sw, size_t n_sw)
{
	log_line *lines = NULL;
	size_t n_lines = 0, first;
	int r = 0;

	if (json) {
		for (size_t i = 0; i < n && r >= 0; i++)
			r = pw_log_print_row_json(&rows[i]);
		first = o->limit && n_sw > o->limit ? n_sw - o->limit : 0;
		for (size_t i = first; i < n_sw && r >= 0; i++)
			if (!pw_log_noop_switch(&sw[i]))
				r = pw_log_print_json_line(pw_log_switch_json(&sw[i]));
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
		if ((o->f.mode && !streq_ptr(in, o->f.mode)) || pw_log_noop_switch(&sw[i]))
			continue;
		if ((r = pw_log_line_from_switch(&sw[i], &lines[n_lines])) >= 0)
			n_lines++;
	}
	if (r >= 0) {
		qsort(lines, n_lines, sizeof(*lines), cmp_lines);
		first = o->limit && n_lines > o->limit ? n_lines - o->limit : 0;
		pw_log_printer_size(pr, lines + first, n_lines - first);
		if (n_lines > first || o->follow)
			pw_log_print_header(pr);
		for (size_t i = first; i < n_lines; i++)
			pw_log_print_line(pr, &lines[i]);
		if (n_lines == first && !o->follow)
			printf("no matching events\n");
	}
	PW_FREE_ARRAY(lines, n_lines, pw_log_line_done);
	return r;
}
