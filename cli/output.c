/* SPDX-License-Identifier: MIT */
#include "output.h"

#include <getopt.h>
#include <stdarg.h>

#include "cli.h"

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
}

int pw_err_option(const char *cmd, int c, char **argv)
{
	/* getopt_long leaves the offending word at argv[optind - 1]. */
	const char *word = optind > 0 ? argv[optind - 1] : "?";

	if (c == ':')
		pw_err(cmd, "option '%s' needs an argument (see 'piworkfs %s --help')", word, cmd);
	else if (optopt)
		pw_err(cmd, "unknown option '-%c' (see 'piworkfs %s --help')", optopt, cmd);
	else
		pw_err(cmd, "unknown option '%s' (see 'piworkfs %s --help')", word, cmd);
	return PW_EXIT_USAGE;
}

int pw_usage(const char *cmd, const char *usage, bool to_stderr)
{
	if (to_stderr) {
		pw_err(cmd, "see 'piworkfs %s --help'", cmd);
		return PW_EXIT_USAGE;
	}
	fputs(usage, stdout);
	return PW_EXIT_OK;
}

int pw_print_json(json_t *j)
{
	int r = 0;

	if (!j)
		return -ENOMEM;
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
	size_t width[16] = { 0 };
	size_t n = t->n_cols < ELEMENTSOF(width) ? t->n_cols : ELEMENTSOF(width);

	for (size_t r = 0; r < t->n_rows; r++)
		for (size_t c = 0; c < n; c++) {
			size_t l = strlen(t->cells[r * t->n_cols + c]);
			if (l > width[c])
				width[c] = l;
		}
	for (size_t r = 0; r < t->n_rows; r++) {
		char *const *row = t->cells + r * t->n_cols;
		size_t last = t->n_cols;

		/* Trailing empty cells print nothing, so lines never end in spaces. */
		while (last > 1 && !row[last - 1][0])
			last--;
		fprintf(f, "%*s", (int)indent, "");
		for (size_t c = 0; c < last; c++) {
			if (c + 1 < last && c < n)
				fprintf(f, "%-*s  ", (int)width[c], row[c]);
			else
				fprintf(f, "%s", row[c]);
		}
		fputc('\n', f);
	}
}
