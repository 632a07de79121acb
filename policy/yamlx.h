/* SPDX-License-Identifier: MIT */
/*
 * A small YAML reader on top of libyaml's event parser, for mode files and config.yaml.
 *
 * It builds a plain tree of scalars, sequences and mappings, each node carrying its 1-based
 * line and column in the file. It bounds what an input can make it do: nesting deeper than
 * PW_YAML_DEPTH_MAX and collections longer than PW_YX_ITEMS_MAX are errors, aliases are
 * rejected (no "billion laughs"), a second document is an error, and a scalar holding a NUL
 * byte is an error. Duplicate mapping keys are kept; the caller reports them with the key
 * path it knows (pw_yx_key_is_duplicate()). Internal to policy/.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "pw_limits.h"

typedef enum pw_yx_kind {
	PW_YX_SCALAR,
	PW_YX_SEQ,
	PW_YX_MAP,
} pw_yx_kind;

typedef struct pw_yx_node pw_yx_node;
struct pw_yx_node {
	pw_yx_kind kind;
	unsigned line, column; /* 1-based */
	char *text;	       /* scalar: its value, NUL-terminated (never holds a NUL) */
	bool plain;	       /* scalar: plain style, so it may mean null or a boolean */
	pw_yx_node **items;    /* SEQ: the items; MAP: key0, value0, key1, value1, ... */
	size_t n_items;	       /* number of pointers in items (twice the pairs for MAP) */
};

typedef struct pw_yx_error {
	unsigned line, column; /* 1-based; 0 when unknown */
	char message[256];
} pw_yx_error;

/*
 * Parses LEN bytes of YAML. LINE_OFFSET is added to every line number (the text's first
 * line is line LINE_OFFSET + 1 of the file). Returns 0 with *ret (NULL for an empty
 * stream), -EINVAL with *err filled on a syntax error or an exceeded bound, -ENOMEM.
 */
int pw_yx_parse(const char *buf, size_t len, unsigned line_offset, pw_yx_node **ret,
		pw_yx_error *err);
void pw_yx_free(pw_yx_node *n); /* accepts NULL */

/* Map helpers: the number of pairs, the I'th key (always a scalar) and value. */
static inline size_t pw_yx_map_count(const pw_yx_node *m)
{
	return m->n_items / 2;
}
static inline const pw_yx_node *pw_yx_map_key(const pw_yx_node *m, size_t i)
{
	return m->items[2 * i];
}
static inline const pw_yx_node *pw_yx_map_value(const pw_yx_node *m, size_t i)
{
	return m->items[2 * i + 1];
}
/* Is the I'th key equal to an earlier key of the same mapping? */
bool pw_yx_key_is_duplicate(const pw_yx_node *m, size_t i);

/* Null: an empty plain scalar, "~", "null", "Null" or "NULL". */
bool pw_yx_is_null(const pw_yx_node *n);
/* A plain true/True/TRUE/false/False/FALSE. Returns 0 with *ret, or -EINVAL. */
int pw_yx_bool(const pw_yx_node *n, bool *ret);
/* "a string", "a list", "a mapping", "null", "a boolean": for type error messages. */
const char *pw_yx_describe(const pw_yx_node *n);
