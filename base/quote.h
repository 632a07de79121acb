/* SPDX-License-Identifier: MIT */
/*
 * Quoting of names for the person's terminal, as git quotes paths (quote_c_style with
 * core.quotePath on): a name holding a control character, a byte over 0x7e, a double quote
 * or a backslash is printed in double quotes with C escapes (\a \b \t \n \v \f \r \" \\)
 * and octal (\033) for the other bytes; any other name is printed as it is. File names and
 * process names are chosen by the agent: raw, they could forge lines, erase them or set the
 * terminal's title (docs/SECURITY.md). JSON output is never quoted: it is exact already.
 */
#pragma once

#include <stdbool.h>
#include <stdio.h>

/* Does S need quoting? (NULL does not.) */
bool pw_quote_needed(const char *s);

/* S quoted as git would (malloc'd; S itself copied when it needs none), or NULL when out of
 * memory. NULL gives NULL. */
char *pw_quote(const char *s);

/* Writes S to F quoted (nothing for NULL). */
void pw_quote_fputs(const char *s, FILE *f);

/*
 * A quoted copy that lives until the next call with the same SLOT (0..7): for printf
 * arguments, e.g. printf("%s -> %s", pw_q(0, a), pw_q(1, b)). NULL gives NULL; out of
 * memory gives "?". Not thread-safe (the CLI is single-threaded).
 */
const char *pw_q(unsigned slot, const char *s);
