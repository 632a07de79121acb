/* SPDX-License-Identifier: MIT */
/*
 * Reading a tool's output for refusals (agent.h): does it report EACCES or EROFS, and which
 * paths does it name? The daemon then decides each candidate with `check` and words the
 * refusal (text.refusals), so the extraction may be generous: a string that is not a
 * refused path in the view comes back allowed or outside and is dropped. The Pi extension
 * reads its tools' output the same way (integrations/pi/src/refusals.ts).
 */
#include <stdbool.h>
#include <string.h>

#include "agent.h"
#include "util.h"

static bool has_string(json_t *arr, const char *s)
{
	size_t i;
	json_t *v;

	json_array_foreach(arr, i, v) if (streq_ptr(json_string_value(v), s)) return true;
	return false;
}

static bool line_reports(const char *s, size_t n)
{
	static const char *const words[] = {"EACCES", "EROFS", "ermission denied",
					    "ead-only file system"};

	for (size_t w = 0; w < ELEMENTSOF(words); w++) {
		size_t wl = strlen(words[w]);
		for (size_t i = 0; i + wl <= n; i++)
			if (memcmp(s + i, words[w], wl) == 0)
				return true;
	}
	return false;
}

bool pw_agent_reports_refusal(const char *text)
{
	return text && line_reports(text, strlen(text));
}

/* A candidate must look like a path: check calls any path the mode cannot write
 * "denied", so a word taken for a path would be explained as a refusal it was not. */
static bool plausible(const char *s, size_t n)
{
	if (n == 0 || n > 4096 || memchr(s, '\n', n) || memchr(s, '\0', n))
		return false;
	if (n == 1 && s[0] == '.')
		return false;
	if (strspn(s, "0123456789") >= n)
		return false;
	if (s[0] == 'E' && n > 1) {
		size_t k = 1;
		while (k < n && ((s[k] >= 'A' && s[k] <= 'Z') || (s[k] >= '0' && s[k] <= '9')))
			k++;
		if (k == n)
			return false; /* an error code */
	}
	for (size_t i = 0; i + 1 < n; i++)
		if ((s[i] == '.' || s[i] == ',' || s[i] == ';') && s[i + 1] == ' ')
			return false; /* prose */
	if (n > 5 && strncmp(s, "line ", 5) == 0 && strspn(s + 5, "0123456789") == n - 5)
		return false;
	return true;
}

static void add_candidate(json_t *out, const char *s, size_t n)
{
	while (n && (*s == ' ' || *s == '\t')) {
		s++;
		n--;
	}
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		n--;
	if (!plausible(s, n))
		return;
	json_t *v = json_stringn(s, n);
	if (v && !has_string(out, json_string_value(v)))
		json_array_append(out, v);
	json_decref(v);
}

/* In one line: quoted strings ('x', "x", `x`) and the segment before ": Permission
 * denied" / ": Read-only file system". */
static void line_candidates(const char *s, size_t n, json_t *out)
{
	for (size_t i = 0; i < n; i++) {
		char q = s[i];
		if (q != '\'' && q != '"' && q != '`')
			continue;
		const char *e = memchr(s + i + 1, q, n - i - 1);
		if (!e)
			break;
		add_candidate(out, s + i + 1, (size_t)(e - s - i - 1));
		i = (size_t)(e - s);
	}
	static const char *const phrases[] = {": Permission denied", ": permission denied",
					      ": Read-only file system", ": read-only file system"};
	for (size_t p = 0; p < ELEMENTSOF(phrases); p++) {
		size_t pl = strlen(phrases[p]);
		for (size_t i = 0; i + pl <= n; i++) {
			if (memcmp(s + i, phrases[p], pl) != 0)
				continue;
			size_t start = i;
			while (start > 0 &&
			       !(start >= 2 && s[start - 2] == ':' && s[start - 1] == ' '))
				start--;
			if (!memchr(s + start, '\'', i - start) &&
			    !memchr(s + start, '"', i - start) &&
			    !memchr(s + start, '`', i - start))
				add_candidate(out, s + start, i - start);
		}
	}
}

void pw_agent_candidate_paths(const char *text, json_t *out)
{
	const char *s = text;

	while (s && *s) {
		const char *e = strchr(s, '\n');
		size_t n = e ? (size_t)(e - s) : strlen(s);
		if (line_reports(s, n))
			line_candidates(s, n, out);
		s = e ? e + 1 : NULL;
	}
}
