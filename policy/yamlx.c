/* SPDX-License-Identifier: MIT */
/*
 * YAML to a small tree, through libyaml's event API rather than its document loader: the
 * event loop lets us refuse aliases and excessive nesting before anything is built, and
 * keeps every node's position. See yamlx.h for the bounds.
 */
#include <errno.h>
#include <stdarg.h>
#include <yaml.h>

#include "pw_limits.h"
#include "util.h"
#include "yamlx.h"

typedef struct yx_frame {
	pw_yx_node *node;
	size_t cap;
} yx_frame;

typedef struct yx_ctx {
	unsigned line_offset;
	pw_yx_error *err;
	yx_frame stack[PW_YAML_DEPTH_MAX];
	size_t depth;
	pw_yx_node *root;
} yx_ctx;

void pw_yx_free(pw_yx_node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->n_items; i++)
		pw_yx_free(n->items[i]);
	free(n->items);
	free(n->text);
	free(n);
}

static void yx_freep(pw_yx_node **n)
{
	pw_yx_free(*n);
}

_printf_(4, 5) static int yx_fail(yx_ctx *c, unsigned line, unsigned column, const char *fmt, ...)
{
	va_list ap;

	c->err->line = line;
	c->err->column = column;
	va_start(ap, fmt);
	vsnprintf(c->err->message, sizeof(c->err->message), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* Position of a byte offset, for reader errors that carry an offset instead of a mark. */
static void yx_offset_position(const char *buf, size_t len, size_t offset, unsigned *ret_line,
			       unsigned *ret_column)
{
	unsigned line = 0, column = 0;

	for (size_t i = 0; i < offset && i < len; i++) {
		if (buf[i] == '\n') {
			line++;
			column = 0;
		} else
			column++;
	}
	*ret_line = line;
	*ret_column = column;
}

static int yx_syntax_error(yx_ctx *c, const yaml_parser_t *p, const char *buf, size_t len)
{
	unsigned line, column;

	if (p->error == YAML_MEMORY_ERROR)
		return -ENOMEM;
	if (p->error == YAML_READER_ERROR)
		yx_offset_position(buf, len, p->problem_offset, &line, &column);
	else {
		line = (unsigned)p->problem_mark.line;
		column = (unsigned)p->problem_mark.column;
	}
	line += 1 + c->line_offset;
	column += 1;
	if (p->context)
		return yx_fail(c, line, column, "invalid YAML: %s: %s", p->context,
			       p->problem ? p->problem : "syntax error");
	return yx_fail(c, line, column, "invalid YAML: %s",
		       p->problem ? p->problem : "syntax error");
}

static int yx_node_new(yx_ctx *c, pw_yx_kind kind, yaml_mark_t mark, pw_yx_node **ret)
{
	pw_yx_node *n = calloc(1, sizeof(*n));

	if (!n)
		return -ENOMEM;
	n->kind = kind;
	n->line = (unsigned)mark.line + 1 + c->line_offset;
	n->column = (unsigned)mark.column + 1;
	*ret = n;
	return 0;
}

/* Hangs N under the innermost open collection (or makes it the root). Takes N on success. */
static int yx_attach(yx_ctx *c, pw_yx_node *n)
{
	yx_frame *f;
	pw_yx_node *parent;

	if (c->depth == 0) {
		if (c->root)
			return yx_fail(c, n->line, n->column, "more than one YAML document");
		c->root = n;
		return 0;
	}
	f = &c->stack[c->depth - 1];
	parent = f->node;
	if (parent->kind == PW_YX_MAP && parent->n_items % 2 == 0 && n->kind != PW_YX_SCALAR)
		return yx_fail(c, n->line, n->column, "mapping keys must be strings");
	if (parent->n_items >= (parent->kind == PW_YX_MAP ? 2 : 1) * (size_t)PW_YX_ITEMS_MAX)
		return yx_fail(c, n->line, n->column,
			       "too many entries in one list or mapping (limit %d)",
			       PW_YX_ITEMS_MAX);
	if (PW_GROW(parent->items, f->cap, parent->n_items, 8) < 0)
		return -ENOMEM;
	parent->items[parent->n_items++] = n;
	return 0;
}

static int yx_on_scalar(yx_ctx *c, const yaml_event_t *ev)
{
	_cleanup_(yx_freep) pw_yx_node *n = NULL;
	const char *value = (const char *)ev->data.scalar.value;
	size_t len = ev->data.scalar.length;
	int r;

	r = yx_node_new(c, PW_YX_SCALAR, ev->start_mark, &n);
	if (r < 0)
		return r;
	if (memchr(value, '\0', len))
		return yx_fail(c, n->line, n->column, "a string holds a NUL byte");
	n->text = strndup(value, len);
	if (!n->text)
		return -ENOMEM;
	n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
	r = yx_attach(c, n);
	if (r < 0)
		return r;
	TAKE_PTR(n);
	return 0;
}

static int yx_on_start(yx_ctx *c, const yaml_event_t *ev, pw_yx_kind kind)
{
	_cleanup_(yx_freep) pw_yx_node *n = NULL;
	int r;

	r = yx_node_new(c, kind, ev->start_mark, &n);
	if (r < 0)
		return r;
	if (c->depth >= PW_YAML_DEPTH_MAX)
		return yx_fail(c, n->line, n->column, "nesting deeper than %d levels",
			       PW_YAML_DEPTH_MAX);
	r = yx_attach(c, n);
	if (r < 0)
		return r;
	c->stack[c->depth++] = (yx_frame){.node = TAKE_PTR(n), .cap = 0};
	return 0;
}

/* Handles one event. Returns 1 at the end of the stream, 0 to go on, -errno on failure. */
static int yx_on_event(yx_ctx *c, const yaml_event_t *ev, unsigned *documents)
{
	unsigned line = (unsigned)ev->start_mark.line + 1 + c->line_offset;
	unsigned column = (unsigned)ev->start_mark.column + 1;

	switch (ev->type) {
	case YAML_STREAM_END_EVENT:
		return 1;
	case YAML_DOCUMENT_START_EVENT:
		if (++*documents > 1)
			return yx_fail(c, line, column, "more than one YAML document");
		return 0;
	case YAML_ALIAS_EVENT:
		return yx_fail(c, line, column, "aliases are not supported");
	case YAML_SCALAR_EVENT:
		return yx_on_scalar(c, ev);
	case YAML_SEQUENCE_START_EVENT:
		return yx_on_start(c, ev, PW_YX_SEQ);
	case YAML_MAPPING_START_EVENT:
		return yx_on_start(c, ev, PW_YX_MAP);
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		if (c->depth > 0)
			c->depth--;
		return 0;
	default:
		return 0;
	}
}

int pw_yx_parse(const char *buf, size_t len, unsigned line_offset, pw_yx_node **ret,
		pw_yx_error *err)
{
	yaml_parser_t parser;
	yx_ctx c = {.line_offset = line_offset, .err = err};
	unsigned documents = 0;
	int r = 0;

	if (!yaml_parser_initialize(&parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	for (;;) {
		yaml_event_t ev;

		if (!yaml_parser_parse(&parser, &ev)) {
			r = yx_syntax_error(&c, &parser, buf, len);
			break;
		}
		r = yx_on_event(&c, &ev, &documents);
		yaml_event_delete(&ev);
		if (r != 0)
			break;
	}
	yaml_parser_delete(&parser);
	if (r < 0) {
		pw_yx_free(c.root);
		return r;
	}
	*ret = c.root;
	return 0;
}

bool pw_yx_key_is_duplicate(const pw_yx_node *m, size_t i)
{
	const char *key = pw_yx_map_key(m, i)->text;

	for (size_t j = 0; j < i; j++)
		if (streq(pw_yx_map_key(m, j)->text, key))
			return true;
	return false;
}

bool pw_yx_is_null(const pw_yx_node *n)
{
	static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};

	if (n->kind != PW_YX_SCALAR || !n->plain)
		return false;
	for (size_t i = 0; i < ELEMENTSOF(nulls); i++)
		if (streq(n->text, nulls[i]))
			return true;
	return false;
}

int pw_yx_bool(const pw_yx_node *n, bool *ret)
{
	if (n->kind != PW_YX_SCALAR || !n->plain)
		return -EINVAL;
	if (streq(n->text, "true") || streq(n->text, "True") || streq(n->text, "TRUE")) {
		*ret = true;
		return 0;
	}
	if (streq(n->text, "false") || streq(n->text, "False") || streq(n->text, "FALSE")) {
		*ret = false;
		return 0;
	}
	return -EINVAL;
}

const char *pw_yx_describe(const pw_yx_node *n)
{
	bool b;

	switch (n->kind) {
	case PW_YX_SEQ:
		return "a list";
	case PW_YX_MAP:
		return "a mapping";
	case PW_YX_SCALAR:
	default:
		if (pw_yx_is_null(n))
			return "null";
		if (pw_yx_bool(n, &b) == 0)
			return "a boolean";
		return "a string";
	}
}
