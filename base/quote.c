/* SPDX-License-Identifier: MIT */
/* Quoting of agent-chosen names for the terminal (quote.h). */
#include "quote.h"

#include <stdlib.h>
#include <string.h>

/* The escape git uses for byte C, 0 for octal, -1 for none needed. */
static int escape_of(unsigned char c)
{
	switch (c) {
	case '\a':
		return 'a';
	case '\b':
		return 'b';
	case '\t':
		return 't';
	case '\n':
		return 'n';
	case '\v':
		return 'v';
	case '\f':
		return 'f';
	case '\r':
		return 'r';
	case '"':
		return '"';
	case '\\':
		return '\\';
	default:
		return c < 0x20 || c >= 0x7f ? 0 : -1;
	}
}

bool pw_quote_needed(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; p && *p; p++)
		if (escape_of(*p) >= 0)
			return true;
	return false;
}

char *pw_quote(const char *s)
{
	if (!s)
		return NULL;
	if (!pw_quote_needed(s))
		return strdup(s);
	char *out = malloc(strlen(s) * 4 + 3), *w = out;
	if (!out)
		return NULL;
	*w++ = '"';
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		int e = escape_of(*p);
		if (e < 0) {
			*w++ = (char)*p;
		} else if (e > 0) {
			*w++ = '\\';
			*w++ = (char)e;
		} else {
			*w++ = '\\';
			*w++ = (char)('0' + (*p >> 6));
			*w++ = (char)('0' + ((*p >> 3) & 7));
			*w++ = (char)('0' + (*p & 7));
		}
	}
	*w++ = '"';
	*w = '\0';
	return out;
}

void pw_quote_fputs(const char *s, FILE *f)
{
	if (!s)
		return;
	char *q = pw_quote(s);
	fputs(q ? q : "?", f);
	free(q);
}

const char *pw_q(unsigned slot, const char *s)
{
	static char *slots[8];
	slot &= 7;
	free(slots[slot]);
	slots[slot] = pw_quote(s);
	return s && !slots[slot] ? "?" : slots[slot];
}
