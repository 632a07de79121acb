/* SPDX-License-Identifier: MIT */
/*
 * The consent bar's words (bar.c), for run/ask.c only: what the question says, its text
 * cleaned for the terminal and laid out in rows at the bottom of the screen.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define PW_BAR_ROWS_MAX 8    /* the most rows the question takes, the reason included */
#define PW_BAR_TEXT_MAX 1200 /* bytes of its words: two modes, a plan, a reason, the rest */

/* A question as the bar shows it: every string cleaned (pw_bar_clean). */
typedef struct pw_bar_question {
	const char *from, *to; /* a switch: the modes */
	const char *plan;      /* plan.request_approval: the plan; "" for a switch */
	const char *reason;    /* the agent's, "" for none */
	size_t typed;	       /* how much of the answer word the person typed */
} pw_bar_question;

/* The question's rows: N spans of TEXT, each at most the width laid out for. */
typedef struct pw_bar {
	char text[PW_BAR_TEXT_MAX];
	size_t n;
	size_t start[PW_BAR_ROWS_MAX], len[PW_BAR_ROWS_MAX];
} pw_bar;

/*
 * Copies S (NULL: "") into OUT for the terminal, at most N bytes (OUT has N + 1): valid
 * UTF-8 of printable characters only. Control characters (C0, DEL, C1), the invisible ones
 * that change how text reads (bidi overrides and isolates, zero-width characters, the line
 * and paragraph separators) and bytes that are not UTF-8 are left out; tabs and newlines
 * become spaces. Nothing the agent sends can move the cursor, colour, retitle or reorder.
 */
void pw_bar_clean(char *out, size_t n, const char *s);

/* The columns S[0..N) takes at most: one for ASCII, two for any other character (wide
 * ones take two; a row counted so is never wider than counted). */
size_t pw_bar_columns(const char *s, size_t n);

/*
 * Lays Q out in rows of at most WIDTH columns (at least 20), at most MAX_ROWS rows (at most
 * PW_BAR_ROWS_MAX), words kept whole where they fit: the question, the agent's reason, and
 * how to answer (the target's name, then Enter; any other answer denies). The reason is
 * cut ("...") only where the rows cannot hold it whole. Returns the rows written in RET
 * (at least 1).
 */
size_t pw_bar_layout(const pw_bar_question *q, size_t width, size_t max_rows, pw_bar *ret);
