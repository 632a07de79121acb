/* SPDX-License-Identifier: MIT */
/*
 * Help texts filled to the width of a terminal (output.h, pw_print_filled).
 *
 * Each command's --help is written as paragraphs and two-column lists; this prints it with
 * no line wider than the width (80 columns), whatever width its source was written at, so a
 * help text added or grown later still fits a terminal of 80 columns. A line that fits, and
 * every line of a block none of whose lines is too wide, prints as written: the layout the
 * author chose stays where it fits. A block with a line too wide is filled again, its words
 * in order, each line as full as the width allows:
 *
 *   Usage: piworkfs CMD ...     an alternative of the usage (a line that starts with
 *                               "Usage:" or "piworkfs", with the lines indented under it):
 *                               continued under the first word after "piworkfs CMD"
 *   Prose at the left margin    a paragraph: consecutive lines that start at column 0
 *     -x, --opt ARG  text       an item: an indented line, and the lines under it that are
 *     name           text       indented deeper (but new options): the text after the
 *                               first gap of two spaces or more is continued under itself,
 *                               or under the item's own continuation lines where it has some
 *
 * Columns are characters (UTF-8 continuation bytes take none): our texts hold no wide
 * characters. A word wider than the room left stands on a line of its own.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "output.h"

/* Columns of the N bytes at S. */
static size_t cols(const char *s, size_t n)
{
	size_t c = 0;

	for (size_t i = 0; i < n; i++)
		c += ((unsigned char)s[i] & 0xc0) != 0x80;
	return c;
}

typedef struct line {
	const char *s;
	size_t len;
} line;

static size_t indent_of(const line *l)
{
	size_t i = 0;

	while (i < l->len && l->s[i] == ' ')
		i++;
	return i;
}

static bool starts_with(const line *l, size_t at, const char *word)
{
	size_t n = strlen(word);

	return l->len >= at + n && memcmp(l->s + at, word, n) == 0;
}

/* Where an item's second column starts: after the first gap of two spaces or more that
 * follows text; 0 when there is none. */
static size_t second_column(const line *l)
{
	size_t i = indent_of(l);

	for (; i + 2 < l->len; i++)
		if (l->s[i] == ' ' && l->s[i + 1] == ' ') {
			while (i < l->len && l->s[i] == ' ')
				i++;
			return i < l->len ? i : 0;
		}
	return 0;
}

/* One output line being filled. */
typedef struct filler {
	FILE *f;
	size_t width, hang, at; /* hang: the indent of each line after the first; at: column */
	bool has_word;		/* the current line holds a word after its prefix */
} filler;

/* Starts a new line unless C more columns fit on this one. */
static void make_room(filler *w, size_t c)
{
	if (w->has_word && w->at + 1 + c > w->width) {
		fprintf(w->f, "\n%*s", (int)w->hang, "");
		w->at = w->hang;
		w->has_word = false;
	}
}

static void put_word(filler *w, const char *s, size_t n)
{
	if (w->has_word) {
		fputc(' ', w->f);
		w->at++;
	}
	fwrite(s, 1, n, w->f);
	w->at += cols(s, n);
	w->has_word = true;
}

/* Where the quote that opens at S[I] (' or `) closes, at the end of a word of S[..N); N
 * when it does not. */
static size_t quote_end(const char *s, size_t n, size_t i)
{
	for (size_t k = i + 1; k < n; k++)
		if (s[k] == s[i] && (k + 1 == n || strchr(" ,.;:)", s[k + 1])))
			return k;
	return n;
}

/* The next word of S[*I..N): its start, and its length in *RET_LEN (0: none left). A
 * quoted command ('piworkfs umount X', `mode --run ID`) is one word: it is never cut
 * where a person would copy it from. */
static const char *next_word(const char *s, size_t n, size_t *i, size_t *ret_len)
{
	while (*i < n && s[*i] == ' ')
		(*i)++;
	size_t start = *i;
	if (*i < n && (s[*i] == '\'' || s[*i] == '`')) {
		size_t end = quote_end(s, n, *i);
		if (end < n)
			*i = end;
	}
	while (*i < n && s[*i] != ' ')
		(*i)++;
	*ret_len = *i - start;
	return s + start;
}

/* The words of the N bytes at S, filled in. A number stays on the line of the word after
 * it ("5 system error", never a "5" at the end of a line). */
static void fill_text(filler *w, const char *s, size_t n)
{
	size_t i = 0, len, next_len;
	const char *word = next_word(s, n, &i, &len);

	while (len > 0) {
		size_t j = i;
		const char *next = next_word(s, n, &j, &next_len);
		bool number = strspn(word, "0123456789") == len;

		make_room(w, cols(word, len) + (number && next_len ? 1 + cols(next, next_len) : 0));
		put_word(w, word, len);
		word = next, len = next_len, i = j;
	}
}

/* Prints lines L[0..N): their first line's first PREFIX bytes as they are (they end where a
 * word starts), then the rest of its words and the words of the others, filled, each line
 * after the first indented by HANG. */
static void fill_block(FILE *f, size_t width, const line *l, size_t n, size_t prefix, size_t hang)
{
	filler w = {.f = f, .width = width, .hang = hang, .at = cols(l[0].s, prefix)};

	fwrite(l[0].s, 1, prefix, f);
	fill_text(&w, l[0].s + prefix, l[0].len - prefix);
	for (size_t i = 1; i < n; i++)
		fill_text(&w, l[i].s, l[i].len);
	fputc('\n', f);
}

static bool any_too_wide(const line *l, size_t n, size_t width)
{
	for (size_t i = 0; i < n; i++)
		if (cols(l[i].s, l[i].len) > width)
			return true;
	return false;
}

/* The lines of the block that starts at L[0] (of N): how many belong to it. */
static size_t block_len(const line *l, size_t n, bool usage)
{
	size_t k = 1, ind = indent_of(&l[0]);

	for (; k < n && l[k].len > 0; k++) {
		size_t in = indent_of(&l[k]);
		if (usage) { /* the lines indented under it, but the next alternative */
			if (in == 0 || starts_with(&l[k], in, "piworkfs "))
				break;
		} else if (ind == 0) { /* a paragraph: the lines at the margin, up to the next
					* that starts one of its own (exit statuses, a usage) */
			if (in > 0 || starts_with(&l[k], 0, "Usage:") ||
			    starts_with(&l[k], 0, "Exit status:"))
				break;
		} else if (in <= ind || (l[k].s[in] == '-' && in <= 8)) {
			break; /* an item: the lines indented deeper, but a new option */
		}
	}
	return k;
}

/* Prints the block L[0..N) filled (it has a line too wide). */
static void print_block(FILE *f, size_t width, const line *l, size_t n, bool usage)
{
	size_t ind = indent_of(&l[0]), prefix = ind, hang = ind;

	if (usage) {
		/* continued under the first word after "piworkfs CMD " */
		const char *p = memmem(l[0].s, l[0].len, "piworkfs ", 9);
		const char *sp = p ? memchr(p + 9, ' ', l[0].len - (size_t)(p + 9 - l[0].s)) : NULL;
		prefix = sp ? (size_t)(sp + 1 - l[0].s) : ind;
		hang = cols(l[0].s, prefix);
	} else if (ind > 0) {
		size_t second = second_column(&l[0]);
		prefix = second ? second : ind;
		hang = n > 1 ? indent_of(&l[1]) : second ? cols(l[0].s, second) : ind + 2;
	}
	if (hang > width / 2)
		hang = ind + 4;
	fill_block(f, width, l, n, prefix, hang);
}

/* Splits TEXT into lines (pointing into it). Returns their number, or -ENOMEM. */
static ssize_t split_lines(const char *text, line **ret)
{
	size_t n = 0, cap = 0;
	line *l = NULL;

	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		if (n == cap) {
			line *m = reallocarray(l, cap ? cap * 2 : 64, sizeof(*l));
			if (!m) {
				free(l);
				return -ENOMEM;
			}
			l = m;
			cap = cap ? cap * 2 : 64;
		}
		l[n++] = (line){p, len};
		p += len + (nl != NULL);
	}
	*ret = l;
	return (ssize_t)n;
}

int pw_print_filled(FILE *f, const char *text, size_t width)
{
	_cleanup_free_ line *l = NULL;
	ssize_t n = split_lines(text, &l);
	bool in_usage = false; /* from a line "Usage:" to the next blank line */

	if (n < 0)
		return (int)n;
	for (size_t i = 0; i < (size_t)n;) {
		if (l[i].len == 0) {
			fputc('\n', f);
			in_usage = false;
			i++;
			continue;
		}
		size_t in = indent_of(&l[i]);
		in_usage = in_usage || starts_with(&l[i], 0, "Usage:");
		bool usage = in_usage && (in == 0 || starts_with(&l[i], in, "piworkfs "));
		size_t k = block_len(l + i, (size_t)n - i, usage);
		if (any_too_wide(l + i, k, width))
			print_block(f, width, l + i, k, usage);
		else
			for (size_t j = i; j < i + k; j++)
				fprintf(f, "%.*s\n", (int)l[j].len, l[j].s);
		i += k;
	}
	return 0;
}

void pw_print_wrapped(FILE *f, const char *s, size_t at, size_t hang, size_t width)
{
	filler w = {.f = f, .width = width, .hang = hang, .at = at};

	fill_text(&w, s, strlen(s));
	fputc('\n', f);
}
