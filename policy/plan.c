/* SPDX-License-Identifier: MIT */
/*
 * Plan files (plan.h): frontmatter, tasks, the frontmatter rewrite of approval, plan names.
 *
 * The body is read line by line with a small state machine (in a fenced block or not, in the
 * Tasks section or not, in a checklist or not) rather than a Markdown parser: a plan's tasks
 * must be found the same way by the daemon, the CLI and the agent reading the file, and the
 * rule stated in plan.h is all there is to it.
 */
#include "plan.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "yamlx.h"

void pw_plan_free(pw_plan *p)
{
	if (!p)
		return;
	free(p->title);
	free(p->status);
	free(p->created);
	free(p->updated);
	free(p->approved);
	for (size_t i = 0; i < p->n_tasks; i++)
		free(p->tasks[i].text);
	free(p->tasks);
	for (size_t i = 0; i < p->n_problems; i++)
		free(p->problems[i]);
	free(p->problems);
	free(p);
}

static const char *const tasks_from_names[] = {
    [PW_PLAN_TASKS_NONE] = "none",
    [PW_PLAN_TASKS_SECTION] = "section",
    [PW_PLAN_TASKS_CHECKLIST] = "checklist",
};

const char *pw_plan_tasks_from_name(pw_plan_tasks_from f)
{
	return PW_NAME_OF(tasks_from_names, f, "none");
}

_printf_(2, 3) static int problem(pw_plan *p, const char *fmt, ...)
{
	char **v = realloc(p->problems, (p->n_problems + 1) * sizeof(*v));
	va_list ap;
	int r;

	if (!v)
		return -ENOMEM;
	p->problems = v;
	va_start(ap, fmt);
	r = vasprintf(&v[p->n_problems], fmt, ap);
	va_end(ap);
	if (r < 0)
		return -ENOMEM;
	p->n_problems++;
	return 0;
}

/* ---- lines ---------------------------------------------------------------------------- */

typedef struct line {
	const char *s;
	size_t len; /* without the '\n' and a '\r' before it */
	const char *next;
} line;

/* The line at AT (< END). */
static line line_at(const char *at, const char *end)
{
	const char *nl = memchr(at, '\n', (size_t)(end - at));
	line l = {.s = at, .len = (size_t)((nl ? nl : end) - at), .next = nl ? nl + 1 : end};

	if (l.len > 0 && l.s[l.len - 1] == '\r')
		l.len--;
	return l;
}

static bool is_marker(const line *l)
{
	size_t n = l->len;

	while (n > 3 && (l->s[n - 1] == ' ' || l->s[n - 1] == '\t'))
		n--;
	return n == 3 && memcmp(l->s, "---", 3) == 0;
}

/* The frontmatter of BUF: its YAML between the markers, and where the body starts. Returns 0,
 * -ENOMSG (no opening marker) or -EBADMSG (no closing one). */
static int split(const char *buf, size_t len, const char **ret_yaml, size_t *ret_yaml_len,
		 const char **ret_close, unsigned *ret_body_line)
{
	const char *end = buf + len, *at;
	line l;
	unsigned n = 1;

	if (len == 0)
		return -ENOMSG;
	l = line_at(buf, end);
	if (!is_marker(&l))
		return -ENOMSG;
	for (at = l.next; at < end; at = l.next) {
		n++;
		l = line_at(at, end);
		if (is_marker(&l)) {
			*ret_yaml = buf + (size_t)(line_at(buf, end).next - buf);
			*ret_yaml_len = (size_t)(at - *ret_yaml);
			*ret_close = at;
			*ret_body_line = n + 1;
			return 0;
		}
	}
	return -EBADMSG;
}

/* ---- frontmatter ---------------------------------------------------------------------- */

static const char *const known_statuses[] = {"draft", "approved", "in_progress", "done", NULL};

static int take_field(pw_plan *p, const pw_yx_node *k, const pw_yx_node *v, char **slot)
{
	if (v->kind != PW_YX_SCALAR)
		return problem(p, "line %u: %s: expected a string, not %s", v->line, k->text,
			       pw_yx_describe(v));
	if (pw_yx_is_null(v))
		return 0;
	free(*slot);
	*slot = strdup(v->text);
	return *slot ? 0 : -ENOMEM;
}

static int parse_frontmatter(pw_plan *p, const char *yaml, size_t len)
{
	pw_yx_node *root = NULL;
	pw_yx_error err = {0};
	int r = pw_yx_parse(yaml, len, 1, &root, &err);

	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return problem(p, "line %u: frontmatter: %s", err.line, err.message);
	if (!root || root->kind != PW_YX_MAP) {
		r = problem(p, "line 2: the frontmatter must be a mapping of keys");
		pw_yx_free(root);
		return r;
	}
	for (size_t i = 0; i < pw_yx_map_count(root) && r >= 0; i++) {
		const pw_yx_node *k = pw_yx_map_key(root, i), *v = pw_yx_map_value(root, i);

		if (streq(k->text, "title"))
			r = take_field(p, k, v, &p->title);
		else if (streq(k->text, "status"))
			r = take_field(p, k, v, &p->status);
		else if (streq(k->text, "created"))
			r = take_field(p, k, v, &p->created);
		else if (streq(k->text, "updated"))
			r = take_field(p, k, v, &p->updated);
		else if (streq(k->text, "approved"))
			r = take_field(p, k, v, &p->approved);
		/* Other keys (tags, owner, ...) are the author's business. */
	}
	pw_yx_free(root);
	if (r < 0)
		return r;
	if (!p->title)
		r = problem(p, "line 2: frontmatter: no title");
	if (r >= 0 && p->status) {
		bool known = false;
		for (size_t i = 0; known_statuses[i]; i++)
			known = known || streq(p->status, known_statuses[i]);
		if (!known)
			r = problem(p,
				    "frontmatter: unknown status \"%.40s\" (draft, approved, "
				    "in_progress or done)",
				    p->status);
	}
	return r;
}

/* ---- the body ------------------------------------------------------------------------- */

/* A heading "#..# text": its level (1 to 6), else 0; *ret_text/len is its text, trimmed. */
static int heading(const line *l, const char **ret_text, size_t *ret_len)
{
	size_t i = 0, e = l->len;

	while (i < l->len && i < 7 && l->s[i] == '#')
		i++;
	if (i == 0 || i > 6 || (i < l->len && l->s[i] != ' ' && l->s[i] != '\t'))
		return 0;
	while (i < e && (l->s[i] == ' ' || l->s[i] == '\t'))
		i++;
	while (e > i && (l->s[e - 1] == ' ' || l->s[e - 1] == '\t' || l->s[e - 1] == '#'))
		e--;
	*ret_text = l->s + i;
	*ret_len = e - i;
	for (i = 0; i < l->len && l->s[i] == '#'; i++)
		;
	return (int)i;
}

static bool is_fence(const line *l)
{
	size_t i = 0;

	while (i < l->len && i < 3 && l->s[i] == ' ')
		i++;
	return l->len - i >= 3 &&
	       (memcmp(l->s + i, "```", 3) == 0 || memcmp(l->s + i, "~~~", 3) == 0);
}

/* An unindented list item "- ", "* " or "+ ". */
static bool is_item(const line *l)
{
	return l->len >= 2 && (l->s[0] == '-' || l->s[0] == '*' || l->s[0] == '+') &&
	       (l->s[1] == ' ' || l->s[1] == '\t');
}

/* An unindented unchecked item "- [ ] text": the text, trimmed, else NULL. */
static const char *unchecked_item(const line *l, size_t *ret_len)
{
	size_t i = 2, e = l->len;

	if (!is_item(l))
		return NULL;
	while (i < l->len && l->s[i] == ' ')
		i++;
	if (l->len - i < 3 || memcmp(l->s + i, "[ ]", 3) != 0)
		return NULL;
	i += 3;
	if (i < l->len && l->s[i] != ' ' && l->s[i] != '\t')
		return NULL;
	while (i < e && (l->s[i] == ' ' || l->s[i] == '\t'))
		i++;
	while (e > i && (l->s[e - 1] == ' ' || l->s[e - 1] == '\t'))
		e--;
	*ret_len = e - i;
	return l->s + i;
}

static bool is_blank_line(const line *l)
{
	for (size_t i = 0; i < l->len; i++)
		if (l->s[i] != ' ' && l->s[i] != '\t')
			return false;
	return true;
}

typedef struct task_list {
	pw_plan_task *v;
	size_t n;
} task_list;

static void task_list_clear(task_list *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].text);
	free(t->v);
	*t = (task_list){0};
}

/* Appends a task, its text cut at PW_PLAN_TASK_TEXT_MAX bytes on a character boundary. */
static int task_add(task_list *t, const char *text, size_t len, unsigned lineno)
{
	pw_plan_task *v;

	if (t->n == PW_PLAN_TASKS_MAX)
		return -E2BIG;
	if (len > PW_PLAN_TASK_TEXT_MAX) {
		len = PW_PLAN_TASK_TEXT_MAX;
		while (len > 0 && ((unsigned char)text[len] & 0xc0) == 0x80)
			len--;
	}
	v = realloc(t->v, (t->n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	t->v = v;
	v[t->n].line = lineno;
	v[t->n].text = strndup(text, len);
	if (!v[t->n].text)
		return -ENOMEM;
	t->n++;
	return 0;
}

typedef struct body_scan {
	task_list section;   /* the Tasks section's */
	task_list checklist; /* the last checklist's (the one being read, or the last read) */
	task_list current;   /* the checklist being read */
	int section_level;   /* > 0: inside the Tasks section */
	bool section_seen;   /* a Tasks section was read (only the first counts) */
	bool in_list;
	bool too_many;
} body_scan;

/* The checklist being read ends: it becomes the last one if it has a task. */
static void end_checklist(body_scan *b)
{
	if (b->current.n > 0) {
		task_list_clear(&b->checklist);
		b->checklist = b->current;
		b->current = (task_list){0};
	}
	task_list_clear(&b->current);
	b->in_list = false;
}

static int scan_line(body_scan *b, const line *l, unsigned lineno)
{
	const char *text;
	size_t len;
	int level = heading(l, &text, &len), r = 0;

	if (level > 0) {
		end_checklist(b);
		if (b->section_level > 0 && level <= b->section_level) {
			b->section_level = 0;
			b->section_seen = true;
		}
		if (!b->section_seen && b->section_level == 0 && len == 5 &&
		    strncasecmp(text, "tasks", 5) == 0)
			b->section_level = level;
		return 0;
	}
	if (is_item(l)) {
		b->in_list = true;
		text = unchecked_item(l, &len);
		if (!text)
			return 0;
		r = task_add(&b->current, text, len, lineno);
		if (r == 0 && b->section_level > 0)
			r = task_add(&b->section, text, len, lineno);
	} else if (!is_blank_line(l) && l->s[0] != ' ' && l->s[0] != '\t')
		end_checklist(b); /* an unindented paragraph ends the list */
	if (r == -E2BIG) {
		b->too_many = true;
		r = 0;
	}
	return r;
}

static int parse_body(pw_plan *p, const char *s, const char *end, unsigned first_line)
{
	body_scan b = {0};
	bool fenced = false;
	unsigned n = first_line;
	int r = 0;

	for (const char *at = s; at < end && r >= 0; n++) {
		line l = line_at(at, end);

		at = l.next;
		if (is_fence(&l)) {
			fenced = !fenced;
			continue;
		}
		if (!fenced)
			r = scan_line(&b, &l, n);
	}
	end_checklist(&b);
	if (r >= 0 && b.section.n > 0) {
		p->tasks = TAKE_PTR(b.section.v);
		p->n_tasks = b.section.n;
		b.section.n = 0;
		p->tasks_from = PW_PLAN_TASKS_SECTION;
	} else if (r >= 0 && b.checklist.n > 0) {
		p->tasks = TAKE_PTR(b.checklist.v);
		p->n_tasks = b.checklist.n;
		b.checklist.n = 0;
		p->tasks_from = PW_PLAN_TASKS_CHECKLIST;
	}
	task_list_clear(&b.section);
	task_list_clear(&b.checklist);
	task_list_clear(&b.current);
	if (r >= 0 && b.too_many)
		r = problem(p, "more than %d tasks: the rest are left out", PW_PLAN_TASKS_MAX);
	if (r >= 0 && p->n_tasks == 0)
		r = problem(p, "no tasks: no unchecked top-level \"- [ ]\" item in a \"Tasks\" "
			       "section or a checklist");
	return r;
}

int pw_plan_parse(const char *buf, size_t len, size_t total, pw_plan **ret)
{
	_cleanup_plan_ pw_plan *p = calloc(1, sizeof(*p));
	const char *yaml = NULL, *close = NULL, *body = buf;
	size_t yaml_len = 0;
	unsigned body_line = 1;
	int r;

	if (!p)
		return -ENOMEM;
	if (total > PW_PLAN_FILE_MAX) {
		r = problem(p, "file too large: %zu bytes (limit %d); only the start was read",
			    total, PW_PLAN_FILE_MAX);
		if (r < 0)
			return r;
	}
	if (memchr(buf, '\0', len)) {
		r = problem(p, "the file holds a NUL byte");
		if (r < 0)
			return r;
		len = strlen(buf);
	}
	if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0) {
		buf += 3;
		len -= 3;
		body = buf;
	}
	r = split(buf, len, &yaml, &yaml_len, &close, &body_line);
	if (r == -ENOMSG)
		r = problem(p,
			    "line 1: missing frontmatter: the file must start with a '---' line");
	else if (r == -EBADMSG)
		r = problem(p, "line 1: unterminated frontmatter: no closing '---' line");
	else {
		r = parse_frontmatter(p, yaml, yaml_len);
		body = line_at(close, buf + len).next;
	}
	if (r < 0)
		return r;
	if (!yaml)
		body_line = 1;
	r = parse_body(p, body, buf + len, body_line);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(p);
	return 0;
}

/* ---- the frontmatter rewrite ---------------------------------------------------------- */

/* Does line L set KEY (an unindented "KEY:")? */
static bool sets_key(const line *l, const char *key)
{
	size_t n = strlen(key);

	return l->len > n && memcmp(l->s, key, n) == 0 && l->s[n] == ':';
}

static int out_field(pw_bytes *o, const char *key, const char *value)
{
	_cleanup_free_ char *l = NULL;
	int n = asprintf(&l, "%s: %s\n", key, value);

	return n < 0 ? -ENOMEM : pw_bytes_append(o, l, (size_t)n);
}

int pw_plan_set_fields(const char *buf, size_t len, const char *status, const char *approved,
		       const char *updated, char **ret)
{
	const char *keys[] = {"status", "approved", "updated"};
	const char *values[] = {status, approved, updated};
	bool drop[3] = {false, !approved, false}, done[3] = {false, false, false};
	const char *yaml, *close, *end = buf + len, *at;
	size_t yaml_len;
	unsigned body_line;
	pw_bytes o = {0};
	int r;

	if (split(buf, len, &yaml, &yaml_len, &close, &body_line) < 0)
		return -EBADMSG;
	r = pw_bytes_append(&o, buf, (size_t)(yaml - buf));
	for (at = yaml; at < close && r >= 0;) {
		line l = line_at(at, end);
		bool replaced = false;

		for (size_t k = 0; k < 3 && !replaced; k++) {
			if (!sets_key(&l, keys[k]) || (!values[k] && !drop[k]))
				continue;
			replaced = true;
			if (!drop[k] && !done[k])
				r = out_field(&o, keys[k], values[k]);
			done[k] = true;
		}
		if (!replaced)
			r = pw_bytes_append(&o, at, (size_t)(l.next - at));
		at = l.next;
	}
	for (size_t k = 0; k < 3 && r >= 0; k++)
		if (values[k] && !done[k])
			r = out_field(&o, keys[k], values[k]);
	if (r >= 0)
		r = pw_bytes_append(&o, close, (size_t)(end - close));
	if (r < 0) {
		free(o.p);
		return r;
	}
	*ret = o.p;
	return 0;
}

/* ---- names ---------------------------------------------------------------------------- */

bool pw_plan_name_is_valid(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > PW_PLAN_NAME_MAX || !isalnum((unsigned char)name[0]) ||
	    strstr(name, ".."))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && !strchr("._-", name[i]))
			return false;
	return true;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && streq(s + a - b, suffix);
}

int pw_plan_path(const char *plans_dir, const char *name, char **ret_path, char **ret_name)
{
	size_t dl = strlen(plans_dir);
	_cleanup_free_ char *stem = NULL, *path = NULL;

	/* Its project path: the folder's own prefix dropped. */
	if (strncmp(name, plans_dir, dl) == 0 && name[dl] == '/')
		name += dl + 1;
	stem = strdup(name);
	if (!stem)
		return -ENOMEM;
	if (ends_with(stem, ".md"))
		stem[strlen(stem) - 3] = '\0';
	if (!pw_plan_name_is_valid(stem))
		return -EINVAL;
	if (asprintf(&path, "%s/%s.md", plans_dir, stem) < 0)
		return -ENOMEM;
	*ret_path = TAKE_PTR(path);
	if (ret_name)
		*ret_name = TAKE_PTR(stem);
	return 0;
}

bool pw_plan_is_plan_path(const char *plans_dir, const char *path)
{
	size_t dl = strlen(plans_dir);
	_cleanup_free_ char *stem = NULL;

	if (strncmp(path, plans_dir, dl) != 0 || path[dl] != '/' || strchr(path + dl + 1, '/') ||
	    !ends_with(path, ".md"))
		return false;
	stem = strndup(path + dl + 1, strlen(path + dl + 1) - 3);
	return stem && pw_plan_name_is_valid(stem);
}
