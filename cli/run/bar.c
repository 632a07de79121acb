/* SPDX-License-Identifier: MIT */
/*
 * The consent bar's words (bar.h): the question, the agent's reason and how to answer, as
 * the bottom rows of the person's terminal show them.
 *
 * The reason used to share the one row with the question, cut to what was left of it
 * ("implement th..." on 100 columns, nothing on 80): the person was asked to allow
 * something whose reason they could not read. Now the words wrap onto as many rows as they
 * need, up to PW_BAR_ROWS_MAX and half the screen, so a reason (at most
 * PW_ASK_REASON_SHOWN_MAX bytes) is shown whole on any terminal of 40 columns or more; only
 * on a smaller one is it cut, never the question or how to answer it.
 */
#include "bar.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

/* The length of the UTF-8 sequence at S (of at most N bytes), or 0 when it is not valid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len = s[0] < 0x80		   ? 1
		     : s[0] >= 0xc2 && s[0] < 0xe0 ? 2
		     : s[0] >= 0xe0 && s[0] < 0xf0 ? 3
		     : s[0] >= 0xf0 && s[0] < 0xf5 ? 4
						   : 0;

	if (len == 0 || len > n)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) ||
	    (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
		return 0; /* overlong, a surrogate, past U+10FFFF */
	return len;
}

static unsigned code_point(const unsigned char *s, size_t len)
{
	if (len == 1)
		return s[0];
	unsigned c = s[0] & (0xff >> (len + 1));
	for (size_t i = 1; i < len; i++)
		c = c << 6 | (s[i] & 0x3f);
	return c;
}

/* Characters that show nothing but change how the rest reads or where it goes. */
static bool invisible(unsigned c)
{
	return (c >= 0x80 && c < 0xa0) ||      /* C1 controls */
	       c == 0xad ||		       /* soft hyphen */
	       (c >= 0x200b && c <= 0x200f) || /* zero-width, LRM, RLM */
	       (c >= 0x2028 && c <= 0x202e) || /* line/paragraph separators, bidi embeddings */
	       (c >= 0x2060 && c <= 0x206f) || /* word joiner, bidi isolates, deprecated */
	       c == 0xfeff || (c >= 0xfff9 && c <= 0xfffb); /* BOM, interlinear annotations */
}

void pw_bar_clean(char *out, size_t n, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t k = 0, left = strlen((const char *)p);

	while (left > 0) {
		size_t len = utf8_len(p, left);
		unsigned c = len ? code_point(p, len) : 0;
		if (len == 0) {
			len = 1; /* not UTF-8: left out */
		} else if (c == '\t' || c == '\n' || c == '\r') {
			if (k < n && k > 0 && out[k - 1] != ' ')
				out[k++] = ' ';
		} else if (c >= 0x20 && c != 0x7f && !invisible(c)) {
			if (k + len > n)
				break;
			memcpy(out + k, p, len);
			k += len;
		}
		p += len;
		left -= len;
	}
	out[k] = '\0';
}

size_t pw_bar_columns(const char *s, size_t n)
{
	size_t c = 0;

	for (size_t i = 0; i < n; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80)
			c += (unsigned char)s[i] < 0x80 ? 1 : 2;
	return c;
}

/* The bytes of S[0..N) that fit in COLS columns, at a character's start. */
static size_t fitting(const char *s, size_t n, size_t cols)
{
	size_t i = 0, used = 0;

	while (i < n) {
		size_t next = i + 1;
		while (next < n && ((unsigned char)s[next] & 0xc0) == 0x80)
			next++;
		used += pw_bar_columns(s + i, next - i);
		if (used > cols)
			break;
		i = next;
	}
	return i;
}

/* Splits B->text into rows of WIDTH columns, words whole where they fit (a word wider than
 * a row is broken). Returns the rows it needs; fills at most PW_BAR_ROWS_MAX. */
static size_t wrap(pw_bar *b, size_t width)
{
	const char *t = b->text;
	size_t len = strlen(t), i = 0, rows = 0;

	while (i < len) {
		while (i < len && t[i] == ' ')
			i++;
		if (i == len)
			break;
		size_t start = i, end = i, at = 0; /* END: after the last word that fits */
		while (end < len) {
			size_t w = end;
			while (w < len && t[w] == ' ')
				w++;
			size_t we = w;
			while (we < len && t[we] != ' ')
				we++;
			size_t need = pw_bar_columns(t + end, we - end);
			if (at + need > width)
				break;
			at += need;
			end = we;
		}
		if (end == start) /* one word wider than the row: as much of it as fits */
			end = start + fitting(t + start, len - start, width);
		if (end == start)
			end = start + 1; /* a row narrower than one character: never loop */
		if (rows < PW_BAR_ROWS_MAX) {
			b->start[rows] = start;
			b->len[rows] = end - start;
		}
		rows++;
		i = end;
	}
	return rows ? rows : 1;
}

/*
 * A space no row breaks at: the phrases a person reads as one (and tests look for) stay on
 * one row: "the agent asks to switch plan -> build", "Press Enter to allow", "any other
 * answer denies". A control character, so never in a cleaned text; pw_bar_layout makes it
 * a space again once the rows are laid out.
 */
#define NBSP '\x1f'

/* Appends to B->text at *AT, a phrase kept on one row when GLUE. */
static _printf_(4, 5) void put(pw_bar *b, size_t *at, bool glue, const char *fmt, ...)
{
	va_list ap;
	size_t from = *at;
	int n;

	if (*at >= sizeof(b->text) - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->text + *at, sizeof(b->text) - *at, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	*at += (size_t)n < sizeof(b->text) - *at ? (size_t)n : sizeof(b->text) - *at - 1;
	for (size_t i = from; glue && i < *at; i++)
		if (b->text[i] == ' ')
			b->text[i] = NBSP;
}

/* Writes the question's words into B->text with the reason cut to KEEP bytes. */
static void compose(const pw_bar_question *q, size_t keep, pw_bar *b)
{
	const char *word = q->plan[0] ? q->plan : q->to;
	const char *verb = q->plan[0] ? "approve" : "allow";
	size_t rlen = strlen(q->reason), wlen = strlen(word), at = 0;

	put(b, &at, false, "piworkfs: ");
	if (q->plan[0]) {
		put(b, &at, true, "the agent asks you to approve plan %s", q->plan);
		put(b, &at, false, " (read it: ");
		put(b, &at, true, "piworkfs plan show %s)", q->plan);
	} else {
		put(b, &at, true, "the agent asks to switch %s \xe2\x86\x92 %s", q->from, q->to);
	}
	while (keep < rlen && keep > 0 && ((unsigned char)q->reason[keep] & 0xc0) == 0x80)
		keep--; /* never half a character */
	if (rlen > 0 && keep > 0)
		put(b, &at, false, " (\"%.*s%s\")", (int)keep, q->reason, keep < rlen ? "..." : "");
	put(b, &at, false, ". ");
	if (q->typed == wlen && wlen > 0) {
		put(b, &at, true, "Press Enter to %s;", verb);
		put(b, &at, false, " ");
		put(b, &at, true, "any other key denies.");
	} else if (q->typed > 0) {
		put(b, &at, true, "Typed: %.*s;", (int)q->typed, word);
		put(b, &at, false, " type the rest of %s, then Enter; ", word);
		put(b, &at, true, "any other key denies.");
	} else {
		put(b, &at, true, "Type %s, then Enter, to %s;", word, verb);
		put(b, &at, false, " ");
		put(b, &at, true, "any other answer denies.");
	}
}

size_t pw_bar_layout(const pw_bar_question *q, size_t width, size_t max_rows, pw_bar *ret)
{
	size_t keep = strlen(q->reason), rows;

	if (width < 20)
		width = 20;
	if (max_rows < 1)
		max_rows = 1;
	if (max_rows > PW_BAR_ROWS_MAX)
		max_rows = PW_BAR_ROWS_MAX;
	/* The reason whole if the rows allow, else shorter until they do (or it is gone). */
	for (;;) {
		compose(q, keep, ret);
		rows = wrap(ret, width);
		if (rows <= max_rows || keep == 0)
			break;
		keep = keep > 8 ? keep - 8 : 0;
	}
	for (char *c = ret->text; (c = strchr(c, NBSP));)
		*c = ' ';
	ret->n = rows < max_rows ? rows : max_rows;
	return ret->n;
}
