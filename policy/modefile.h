/* SPDX-License-Identifier: MIT */
/*
 * Internals of the mode loader shared by mode.c (one mode file), config.c (config.yaml),
 * modeset.c (layers) and policy.c (rule copies). Not part of the public contract; the fuzz
 * target uses pw_mode_parse() and pw_config_parse() directly.
 */
#pragma once

#include <stdarg.h>

#include <stdbool.h>
#include <stddef.h>

#include "mode.h"

/* A growing list of warnings. Each records the mode it concerns (the file's stem for a mode
 * file, NULL for config files) so pw_modeset_mode_broken() can find them; an error recorded
 * for PW_ALL_MODES breaks every mode (a config.yaml whose rules could not be read). */
#define PW_ALL_MODES "*" /* never a valid mode name */
typedef struct pw_warnings {
	pw_warning *v;
	char **mode; /* parallel to v */
	size_t n, cap;
} pw_warnings;

/* Appends a warning. FILE and KEY are copied; KEY may be NULL. Returns 0 or -ENOMEM. */
/* The same with a va_list, for callers that format their own messages. */
int pw_warnings_addv(pw_warnings *w, const char *mode, pw_severity sev, const char *file,
		     unsigned line, unsigned column, const char *key, const char *fmt, va_list ap)
	__attribute__((format(printf, 8, 0)));
int pw_warnings_add(pw_warnings *w, const char *mode, pw_severity sev, const char *file,
		    unsigned line, unsigned column, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 8, 9)));
void pw_warnings_done(pw_warnings *w);
void pw_warning_done(pw_warning *w);

/* Position in a file, 1-based; line 0 means "absent". */
typedef struct pw_mark {
	unsigned line, column;
} pw_mark;

/* A parsed mode file, with where its widening keys were written (for trust warnings). */
typedef struct pw_mode_file {
	pw_mode mode;
	pw_mark allow_key;   /* writes.allow with at least one rule */
	pw_mark tokens_key;  /* writes.tokens: true */
	pw_mark plans_key;   /* writes.plans: true */
	pw_mark protect_key; /* protect: false */
} pw_mode_file;

/*
 * Parses BUF (LEN bytes) as the mode file FILE (a path; its basename's stem must equal the
 * mode's name) of layer LAYER. Problems are appended to W. Returns 0 with *ret, -EINVAL when
 * the file has an error (it must be skipped; the errors are in W), or -ENOMEM.
 */
int pw_mode_parse(const char *file, const char *buf, size_t len, pw_layer layer,
		  pw_warnings *w, pw_mode_file **ret);
/* Reads FILE (bounded by PW_MODE_FILE_MAX) and parses it as above; an unreadable file is an
 * error in W too (-EINVAL). */
int pw_mode_load(const char *file, pw_layer layer, pw_warnings *w, pw_mode_file **ret);
void pw_mode_file_free(pw_mode_file *mf); /* accepts NULL */
void pw_mode_done(pw_mode *m);              /* frees what M holds, not M */

/* Reads a whole regular file of at most PW_MODE_FILE_MAX bytes (NUL-terminated). Returns 0,
 * -EFBIG when larger, or -errno. */
int pw_read_small_file(const char *file, char **ret, size_t *ret_len);

/* Rules. */
int pw_rule_init(pw_rule *r, pw_rule_kind kind, const char *pattern, const char *file,
		 unsigned line, unsigned column, pw_layer layer, const char **ret_err);
int pw_rule_copy(pw_rule *dst, const pw_rule *src);
void pw_rule_done(pw_rule *r);
/* Rule arrays have an implied capacity: 8, doubled each time the length reaches a power of
 * two >= 8. Makes room for entry N of *V (which holds N entries). Returns 0 or -ENOMEM. */
int pw_rules_reserve(pw_rule **v, size_t n);
/* Appends a copy of SRC to *V (of *N entries). */
int pw_rules_append_copy(pw_rule **v, size_t *n, const pw_rule *src);

/*
 * The key of KNOWN (NULL-terminated) that KEY most likely misspells: within an edit
 * distance of 2 (1 for keys of up to 4 bytes), else NULL. An unknown key that is a near miss
 * of a known one is an error, not a warning: a misspelt "deny" or "hide" would drop the
 * rules it holds without a word.
 */
const char *pw_key_near_miss(const char *key, const char *const *known);

/* [a-z0-9][a-z0-9-]*, at most PW_MODE_NAME_MAX bytes. */
bool pw_mode_name_is_valid(const char *s);

/* A parsed config.yaml. */
typedef struct pw_config {
	pw_rule *protected_rules;
	size_t n_protected;
	pw_rule *token_rules;
	size_t n_tokens;
	pw_mark tokens_key; /* design.tokens with at least one entry */
	char *plans_dir;    /* plans: the plans folder (normalized, relative), NULL when unset */
	pw_mark plans_key;
} pw_config;

/* Parses BUF as config file FILE of LAYER. Returns 0 with *ret, -EINVAL when the file has
 * an error (skip it), -ENOMEM. */
int pw_config_parse(const char *file, const char *buf, size_t len, pw_layer layer,
		    pw_warnings *w, pw_config *ret);
/* Reads and parses FILE; a missing file is 0 with an empty config. */
int pw_config_load(const char *file, pw_layer layer, pw_warnings *w, pw_config *ret);
void pw_config_done(pw_config *c);

/* The message of every widening key an untrusted project writes. */
#define PW_UNTRUSTED_MSG "ignored: the project is not trusted (piworkfs trust)"
