/* SPDX-License-Identifier: MIT */
#include "output.h"

#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/param.h>
#include <unistd.h>

#include "cli.h"
#include "proto.h"

static struct {
	bool on;       /* --json was given */
	bool printed;  /* a JSON document went to stdout */
	char *command; /* the first error */
	char *message;
} json_err;

void pw_err_json(bool on)
{
	json_err.on = on;
}

void pw_err_json_flush(int status)
{
	if (json_err.on && !json_err.printed && json_err.message && status != PW_EXIT_OK) {
		json_t *j = json_pack("{s:{s:s?,s:s,s:i}}", "error", "command", json_err.command,
				      "message", json_err.message, "status", status);
		pw_print_json(j);
	}
	free(json_err.command);
	free(json_err.message);
	json_err.command = json_err.message = NULL;
}

void pw_err(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("piworkfs: ", stderr);
	if (cmd)
		fprintf(stderr, "%s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (!json_err.message) {
		va_start(ap, fmt);
		if (vasprintf(&json_err.message, fmt, ap) < 0)
			json_err.message = NULL;
		va_end(ap);
		json_err.command = cmd ? strdup(cmd) : NULL;
	}
}

bool pw_use_color(FILE *f)
{
	const char *nc = getenv("NO_COLOR"), *term = getenv("TERM");

	if (nc && nc[0])
		return false;
	if (term && streq(term, "dumb"))
		return false;
	return isatty(fileno(f));
}

unsigned pw_terminal_width(void)
{
	const char *cols = getenv("COLUMNS");
	struct winsize ws;

	if (!isatty(STDOUT_FILENO))
		return 0;
	if (cols && atoi(cols) > 0)
		return (unsigned)atoi(cols);
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	return 80;
}

void pw_notice(const char *cmd, const char *text)
{
	struct winsize ws;
	size_t at;

	fflush(stdout);
	at = (size_t)fprintf(stderr, "piworkfs: %s: ", cmd);
	if (isatty(STDERR_FILENO) && ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20)
		pw_print_wrapped(stderr, text, at, 2, MIN((size_t)ws.ws_col, PW_HELP_WIDTH));
	else
		fprintf(stderr, "%s\n", text);
}

size_t pw_output_width(void)
{
	unsigned w = pw_terminal_width();

	return w ? w : PW_HELP_WIDTH;
}

const char *pw_ellipsize_middle(const char *s, size_t width, char *buf, size_t size)
{
	size_t len = strlen(s), head, tail;

	if (len <= width || width < 5 || width + 1 > size)
		return s;
	head = (width - 3) / 2;
	tail = width - 3 - head;
	snprintf(buf, size, "%.*s...%s", (int)head, s, s + len - tail);
	return buf;
}

int pw_usage(const char *cmd, const char *usage, bool to_stderr)
{
	if (to_stderr) {
		pw_err(cmd, "see 'piworkfs %s --help'", cmd);
		return PW_EXIT_USAGE;
	}
	if (pw_print_filled(stdout, usage, PW_HELP_WIDTH) < 0)
		fputs(usage, stdout);
	return PW_EXIT_OK;
}

char *pw_shell_word(const char *s)
{
	if (s[0] && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
			      "/._+-=:,@%") == strlen(s))
		return strdup(s);
	return pw_shell_quote(s);
}

char *pw_shell_quote(const char *s)
{
	size_t n = 3;
	char *q, *o;

	for (const char *p = s; *p; p++)
		n += *p == '\'' ? 4 : 1;
	q = o = malloc(n);
	if (!q)
		return NULL;
	*o++ = '\'';
	for (const char *p = s; *p; p++) {
		if (*p == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else {
			*o++ = *p;
		}
	}
	*o++ = '\'';
	*o = '\0';
	return q;
}

int pw_print_json(json_t *j)
{
	int r = 0;

	if (!j)
		return -ENOMEM;
	json_err.printed = true;
	if (json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
		r = -EIO;
	else if (fputc('\n', stdout) == EOF)
		r = -EIO;
	json_decref(j);
	return r;
}

struct pw_table {
	size_t n_cols, n_rows, cap;
	char **cells; /* n_rows * n_cols, row-major */
};

pw_table *pw_table_new(size_t n_cols)
{
	pw_table *t;

	if (n_cols == 0)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (t)
		t->n_cols = n_cols;
	return t;
}

void pw_table_free(pw_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n_rows * t->n_cols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t);
}

int pw_table_add(pw_table *t, const char *const *cells)
{
	if (t->n_rows == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		char **n = reallocarray(t->cells, cap * t->n_cols, sizeof(*n));

		if (!n)
			return -ENOMEM;
		t->cells = n;
		t->cap = cap;
	}
	char **row = t->cells + t->n_rows * t->n_cols;
	for (size_t c = 0; c < t->n_cols; c++) {
		row[c] = strdup(cells[c] ? cells[c] : "");
		if (!row[c]) {
			while (c > 0)
				free(row[--c]);
			return -ENOMEM;
		}
	}
	t->n_rows++;
	return 0;
}

void pw_table_print(const pw_table *t, FILE *f, unsigned indent)
{
	size_t width[16] = {0};
	size_t n = t->n_cols < ELEMENTSOF(width) ? t->n_cols : ELEMENTSOF(width);

	for (size_t r = 0; r < t->n_rows; r++)
		for (size_t c = 0; c < n; c++) {
			size_t l = strlen(t->cells[r * t->n_cols + c]);
			if (l > width[c])
				width[c] = l;
		}
	size_t max = pw_output_width();
	for (size_t r = 0; r < t->n_rows; r++) {
		char *const *row = t->cells + r * t->n_cols;
		size_t last = t->n_cols, at = indent;

		/* Trailing empty cells print nothing, so lines never end in spaces. */
		while (last > 1 && !row[last - 1][0])
			last--;
		fprintf(f, "%*s", (int)indent, "");
		for (size_t c = 0; c + 1 < last; c++) {
			fprintf(f, "%-*s  ", (int)width[MIN(c, n - 1)], row[c]);
			at += MAX(width[MIN(c, n - 1)], strlen(row[c])) + 2;
		}
		const char *cell = row[last - 1];
		if (at + strlen(cell) <= max) {
			fprintf(f, "%s\n", cell);
		} else if (max > at + 24) {
			pw_print_wrapped(f, cell, at, at, max);
		} else { /* too little room beside: below the row, indented */
			fprintf(f, "\n%*s", (int)indent + 4, "");
			pw_print_wrapped(f, cell, indent + 4, indent + 4, max);
		}
	}
}

const char *pw_problem_word(const char *formatted)
{
	return formatted && strstr(formatted, ": error: ") ? "error" : "warning";
}

int pw_cli_no_view(const char *cmd, const char *mount, int r)
{
	if (r == -ENOENT)
		pw_err(cmd,
		       "%s is not inside a live piworkfs view (see 'piworkfs status', or use "
		       "--mount PATH)",
		       mount ? mount : "the current directory");
	else
		pw_err(cmd, "the view's daemon does not answer: %s", strerror(-r));
	return PW_EXIT_NO_VIEW;
}

int pw_cli_call_failed(const char *cmd, const char *mount, int r, int code, const char *message,
		       const pw_rpc_exit *map, size_t n, int other)
{
	if (r == -ENOENT || r == -ECONNREFUSED || r == -ECONNRESET || r == -ETIMEDOUT)
		return pw_cli_no_view(cmd, mount, r);
	if (r == -EREMOTE) {
		pw_err(cmd, "%s", message ? message : "the daemon refused");
		for (size_t i = 0; i < n; i++)
			if (map[i].code == code)
				return map[i].exit;
		return PW_EXIT_SYSTEM;
	}
	pw_err(cmd, "cannot talk to the view: %s", strerror(-r));
	return other;
}
