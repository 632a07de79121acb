/* SPDX-License-Identifier: MIT */
/*
 * The wire shapes of an audit event and of a switch (ctl/events.c): the live notification
 * and the stored row of each come from one builder, so they cannot drift apart; and both
 * are the shapes the documents promise (docs/PROTOCOL.md's `denied` and `mode.changed`,
 * docs/AUDIT.md's `log --json` example). A key added to the builder and not to the docs,
 * or to one shape and not the other, fails here.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/events.h"
#include "util.h"

/* The keys of O in order, comma-separated ("a,b,c"), into BUF. */
static const char *keys_of(json_t *o, char *buf, size_t size)
{
	const char *k;
	json_t *v;
	size_t n = 0;

	buf[0] = '\0';
	json_object_foreach(o, k, v)
	{
		n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? "," : "", k);
		cr_assert_lt(n, size);
	}
	return buf;
}

/* The file at SOURCE_ROOT/REL, malloc'd. */
static char *read_doc(const char *rel)
{
	char path[4096];
	FILE *f;
	char *text;
	long n;

	snprintf(path, sizeof(path), "%s/%s", SOURCE_ROOT, rel);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	text = calloc(1, (size_t)n + 1);
	cr_assert_eq(fread(text, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return text;
}

/* The quoted names of the list that follows MARK in TEXT up to the closing '}' ("a,b"). */
static const char *doc_list(const char *text, const char *mark, char *buf, size_t size)
{
	const char *p = strstr(text, mark), *end;
	size_t n = 0;

	cr_assert_not_null(p, "no %s in the document", mark);
	p += strlen(mark);
	end = strchr(p, '}');
	cr_assert_not_null(end);
	buf[0] = '\0';
	while ((p = strchr(p, '"')) && p < end) {
		const char *q = strchr(p + 1, '"');
		n += (size_t)snprintf(buf + n, size - n, "%s%.*s", n ? "," : "", (int)(q - p - 1),
				      p + 1);
		p = q + 1;
	}
	return buf;
}

static pw_ctl_event denial(void)
{
	return (pw_ctl_event){.time_ns = 1738332311870000000,
			      .mode = "build",
			      .generation = 3,
			      .op = "unlink",
			      .path = ".git/hooks/pre-commit",
			      .err = 13,
			      .reason = "protected",
			      .rule = json_pack("{s:s,s:s,s:s,s:i}", "kind", "protected", "pattern",
						".git/hooks/**", "file", "(built-in)", "line", 0),
			      .pid = 4250,
			      .uid = 1000,
			      .comm = "rm"};
}

static const pw_ctl_event_row row = {.id = 7,
				     .time = "2025-01-31T14:05:11.870Z",
				     .project = "/home/u/proj",
				     .mountpoint = "/home/u/view",
				     .count = 42,
				     .first_ns = 1738332311870000000,
				     .last_ns = 1738332312410000000};

Test(events, the_row_carries_the_notification_with_the_same_values)
{
	pw_ctl_event e1 = denial(), e2 = denial();
	json_t *live = pw_ctl_event_json(&e1, NULL);
	json_t *stored = pw_ctl_event_json(&e2, &row);
	const char *k;
	json_t *v;

	cr_assert_not_null(live);
	cr_assert_not_null(stored);
	json_object_foreach(live, k, v)
	{
		cr_assert(json_equal(v, json_object_get(stored, k)), "%s differs", k);
	}
	cr_assert_str_eq(json_string_value(json_object_get(live, "errno")), "EACCES");
	cr_assert(json_is_true(json_object_get(stored, "denied")));
	json_decref(live);
	json_decref(stored);
}

Test(events, the_notification_is_what_the_protocol_promises)
{
	char doc[512], got[512];
	_cleanup_free_ char *text = read_doc("docs/PROTOCOL.md");
	pw_ctl_event e = denial();
	json_t *live = pw_ctl_event_json(&e, NULL);

	/* "suppressed" is the fan-out's, per subscriber (server.c), after the event's own */
	doc_list(text, "- `denied`: `{", doc, sizeof(doc));
	cr_assert_not_null(live);
	keys_of(live, got, sizeof(got));
	strcat(got, ",suppressed");
	cr_assert_str_eq(got, doc);
	json_decref(live);
}

Test(events, the_row_is_what_the_audit_document_shows)
{
	char want[1024], got[1024];
	_cleanup_free_ char *text = read_doc("docs/AUDIT.md");
	const char *p = strstr(text, "```json\n{\"id\":7");
	pw_ctl_event e = denial();
	json_t *doc, *stored = pw_ctl_event_json(&e, &row);
	json_error_t err;

	cr_assert_not_null(p, "no log --json example in docs/AUDIT.md");
	p += strlen("```json\n");
	doc = json_loadb(p, (size_t)(strstr(p, "```") - p), 0, &err);
	cr_assert_not_null(doc, "the example: %s", err.text);
	cr_assert_str_eq(keys_of(stored, got, sizeof(got)), keys_of(doc, want, sizeof(want)));
	cr_assert(json_equal(stored, doc), "the example is not what the row builds");
	json_decref(doc);
	json_decref(stored);
}

Test(events, an_overlap_says_errno_null_and_a_thread_follows_comm)
{
	pw_ctl_event e = denial();
	pw_ctl_event_row r = row;
	json_t *o;

	e.err = 0;
	e.reason = "overlap";
	r.thread = "libuv-worker";
	o = pw_ctl_event_json(&e, &r);
	cr_assert_not_null(o);
	cr_assert(json_is_null(json_object_get(o, "errno")));
	cr_assert(json_is_false(json_object_get(o, "denied")));
	char got[1024];
	cr_assert_not_null(strstr(keys_of(o, got, sizeof(got)), ",comm,thread,count,"), "%s", got);
	json_decref(o);
	/* a thread name that is not UTF-8 leaves the key out, not the row */
	r.thread = "\xe2\x86";
	e = denial();
	o = pw_ctl_event_json(&e, &r);
	cr_assert_not_null(o);
	cr_assert_null(json_object_get(o, "thread"));
	json_decref(o);
}

Test(events, a_switch_notification_is_what_the_protocol_promises_and_the_row_carries_it)
{
	char doc[512], got[512];
	_cleanup_free_ char *text = read_doc("docs/PROTOCOL.md");
	pw_ctl_switch s = {.from = "plan",
			   .to = "build",
			   .generation = 4,
			   .pid = 812,
			   .uid = 1000,
			   .comm = "piworkfs",
			   .origin = "request"};
	json_t *live = pw_ctl_switch_json(&s, NULL);
	json_t *stored =
	    pw_ctl_switch_json(&s, &(pw_ctl_switch_row){.id = 2,
							.time = "2025-01-31T14:05:11.870Z",
							.outcome = "switched",
							.asked_pid = 900,
							.how = "y"});
	const char *k;
	json_t *v;

	cr_assert_not_null(live);
	cr_assert_not_null(stored);
	cr_assert_str_eq(keys_of(live, got, sizeof(got)),
			 doc_list(text, "- `mode.changed`: `{", doc, sizeof(doc)));
	json_object_foreach(live, k, v)
	{
		cr_assert(json_equal(v, json_object_get(stored, k)), "%s differs", k);
	}
	cr_assert_str_eq(json_string_value(json_object_get(stored, "kind")), "switch");
	cr_assert_eq(
	    json_integer_value(json_object_get(json_object_get(stored, "asked_by"), "pid")), 900);
	cr_assert_null(json_object_get(stored, "plan"));
	json_decref(live);
	json_decref(stored);
}
