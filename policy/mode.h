/* SPDX-License-Identifier: MIT */
/*
 * The mode model and its layered loading.
 *
 * A mode is a Markdown file NAME.md with YAML frontmatter:
 *
 *   ---
 *   name: design                     # must equal the file stem
 *   description: Tokens and design specs
 *   writes:
 *     allow: ["docs/design"]         # globs (glob.h); none means the mode writes nothing
 *     deny: []                       # deny beats allow
 *     tokens: true                   # add the project's declared design token files
 *   hide: []                         # globs invisible in the view (ENOENT, not listed)
 *   protect: true                    # protected paths stay read-only (only `off` says false)
 *   (writes.plans: true              # the plans folder is writable, approved plans aside)
 *   ---
 *   Body: instructions for an agent working in this mode.
 *
 * Layers, lowest first: bundled < global ($XDG_CONFIG_HOME/piworkfs/modes) < project
 * (PROJECT/.piworkfs/modes). A global mode replaces a bundled one of the same name. A
 * project layer may only tighten unless the project is trusted: for an untrusted project,
 * its modes' writes.allow, writes.tokens and protect:false are ignored with a warning, and
 * its deny and hide rules are added to the mode of the same name (or form a new mode
 * that writes nothing).
 *
 * Configuration (config.yaml in the global dir and in PROJECT/.piworkfs/):
 *   protected: [globs]      # added to the default protected paths; none can be removed
 *   design:
 *     tokens: [paths]       # design token files; from a project, honoured only if trusted
 *   plans: docs/plans       # the plans folder (a path in the project, not a glob); from a
 *                           # project honoured only if trusted, since it moves what plan
 *                           # mode may write
 *
 * Loading never fails on bad input: a bad file is skipped with a warning naming
 * file:line:column and the key; other files still load. A skipped mode file breaks its mode;
 * a skipped config.yaml (or an unreadable modes directory) breaks every mode, since the
 * protections it holds are unknown: pw_modeset_mode_broken() is then true for every name,
 * and a view fails closed in whatever mode it is in.
 *
 * This header is mode.c's: the model, one mode file parsed, and the rule and warning
 * helpers every loader shares. The layers are modeset.h's, config.yaml is config.h's.
 */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "glob.h"

typedef enum pw_layer {
	PW_LAYER_BUNDLED,
	PW_LAYER_GLOBAL,
	PW_LAYER_PROJECT,
	PW_LAYER_DEFAULT, /* built into the program (default protected paths) */
	PW_LAYER_LANE,	  /* the view's lane: `mount --only` / `run --only` (policy.h) */
} pw_layer;

typedef enum pw_rule_kind {
	PW_RULE_ALLOW,
	PW_RULE_DENY,
	PW_RULE_HIDE,
	PW_RULE_PROTECTED,
	PW_RULE_TOKEN, /* a declared design token file, writable in modes with writes.tokens */
	PW_RULE_LANE,  /* a glob of the view's lane: writes outside every lane glob are refused */
} pw_rule_kind;

/* One rule: a compiled glob and where it came from. */
typedef struct pw_rule {
	pw_rule_kind kind;
	char *pattern;
	pw_glob *glob;
	char *file; /* the file that declared it; "(built-in)" for defaults */
	unsigned line, column;
	pw_layer layer;
} pw_rule;

typedef struct pw_mode {
	char *name;
	char *description;
	char *body;
	char *file; /* the file that defined it last (highest layer) */
	pw_layer layer;
	pw_rule *rules; /* ALLOW, DENY and HIDE rules of this mode */
	size_t n_rules;
	bool tokens;  /* writes.tokens */
	bool plans;   /* writes.plans: the plans folder is writable (plan mode) */
	bool protect; /* protected paths enforced (false only where a trusted layer says so) */
	bool keep_originals; /* keep_originals: the view keeps what it changes (default true) */
} pw_mode;

typedef enum pw_severity {
	PW_WARNING, /* something ignored; the file still loaded */
	PW_ERROR,   /* the file (or mode) was skipped */
} pw_severity;

typedef struct pw_warning {
	pw_severity severity;
	char *file;
	unsigned line, column; /* 1-based; 0 when unknown */
	char *key;	       /* dotted key path, e.g. "writes.allow[2]"; NULL when none */
	char *message;
} pw_warning;

const char *pw_layer_name(pw_layer l);	       /* "bundled", ...; "unknown" for none */
const char *pw_rule_kind_name(pw_rule_kind k); /* "allow", ...; "unknown" for none */
/* The layer or rule kind those names name (a pw_layer, a pw_rule_kind), or -EINVAL. */
int pw_layer_from_name(const char *name);
int pw_rule_kind_from_name(const char *name);

/*
 * Formats a warning as one line: "FILE:LINE:COL: error: KEY: MESSAGE" (parts that are
 * unknown are left out). Returns a malloc'd string or NULL.
 */
char *pw_warning_format(const pw_warning *w);

/* ---- one mode file (mode.c), and the helpers config.c and modeset.c share ---- */

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
int pw_mode_parse(const char *file, const char *buf, size_t len, pw_layer layer, pw_warnings *w,
		  pw_mode_file **ret);
/* Reads FILE (bounded by PW_MODE_FILE_MAX) and parses it as above; an unreadable file is an
 * error in W too (-EINVAL). */
int pw_mode_load(const char *file, pw_layer layer, pw_warnings *w, pw_mode_file **ret);
void pw_mode_file_free(pw_mode_file *mf); /* accepts NULL */
void pw_mode_done(pw_mode *m);		  /* frees what M holds, not M */

/* Reads a whole regular file of at most PW_MODE_FILE_MAX bytes (NUL-terminated). Returns 0,
 * -EFBIG when larger, or -errno. */
int pw_read_small_file(const char *file, char **ret, size_t *ret_len);

/* Rules. */
int pw_rule_init(pw_rule *r, pw_rule_kind kind, const char *pattern, const char *file,
		 unsigned line, unsigned column, pw_layer layer, const char **ret_err);
int pw_rule_copy(pw_rule *dst, const pw_rule *src);
void pw_rule_done(pw_rule *r);
/* Ends the N rules of V and frees V (NULL is fine). */
void pw_rules_free(pw_rule *v, size_t n);
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

/*
 * What the parsers of YAML files (mode files, config.yaml) share: where they report (FILE, the
 * mode's STEM or NULL for a config, LAYER, the warnings W) and whether an error was found
 * (FAILED). Each function returns what pw_warnings_add returns (>= 0, or -ENOMEM) unless it
 * says otherwise.
 */
struct pw_yx_node;
typedef struct pw_yaml_parse {
	const char *file;
	const char *stem;
	pw_layer layer;
	pw_warnings *w;
	bool failed;
} pw_yaml_parse;
/* Reads FILE (pw_read_small_file) into *RET (*RET_LEN bytes): 0; -ENOENT when it is missing
 * and MISSING_OK; -ENOMEM; else -EINVAL after an error in W (under the mode STEM, or NULL). */
int pw_yaml_read(const char *file, const char *stem, bool missing_ok, pw_warnings *w, char **ret,
		 size_t *ret_len);
/* V, a mapping under PREFIX (NULL: a file's top level): none when V is NULL or null; another
 * kind is an error ("expected WHAT, not ..."). Each key K goes to FN(K, its VALUE, its dotted
 * path KEY (K's text at the top level), U); a duplicate key is an error instead. Returns 0, or
 * the first negative answer. The one walk of a mapping: config.c's and the modes' alike. */
int pw_yaml_map(pw_yaml_parse *p, const struct pw_yx_node *v, const char *prefix, const char *what,
		int (*fn)(const struct pw_yx_node *k, const struct pw_yx_node *value,
			  const char *key, void *u),
		void *u);
/* An error at AT (may be NULL) about KEY (a dotted path); sets FAILED. */
__attribute__((format(printf, 4, 5))) int
pw_yaml_error(pw_yaml_parse *p, const struct pw_yx_node *at, const char *key, const char *fmt, ...);
/* An unknown key K (KEY its dotted path) among KNOWN: an error with a hint when it is a near
 * miss of one of them (pw_key_near_miss), else a warning. */
int pw_yaml_unknown(pw_yaml_parse *p, const struct pw_yx_node *k, const char *key,
		    const char *const *known);
/* V, a list of globs under KEY, as rules of KIND appended to *RULES (*N of them); a bad item
 * is an error and skipped. Returns the number of rules added, or -ENOMEM. */
int pw_yaml_rules(pw_yaml_parse *p, const struct pw_yx_node *v, const char *key, pw_rule_kind kind,
		  pw_rule **rules, size_t *n);

/* [a-z0-9][a-z0-9-]*, at most PW_MODE_NAME_MAX bytes. */
bool pw_mode_name_is_valid(const char *s);
