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
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "glob.h"

typedef enum pw_layer {
	PW_LAYER_BUNDLED,
	PW_LAYER_GLOBAL,
	PW_LAYER_PROJECT,
	PW_LAYER_DEFAULT, /* built into the program (default protected paths) */
	PW_LAYER_LANE,    /* the view's lane: `mount --only` / `run --only` (policy.h) */
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
	char *key;             /* dotted key path, e.g. "writes.allow[2]"; NULL when none */
	char *message;
} pw_warning;

typedef struct pw_load_opts {
	const char *bundled_dir; /* directory of bundled NAME.md files; NULL to skip */
	const char *global_dir;  /* $XDG_CONFIG_HOME/piworkfs; NULL to skip */
	const char *project_dir; /* project root; NULL to skip the project layer */
	bool trusted;            /* project trusted: its layer may widen */
} pw_load_opts;

typedef struct pw_modeset pw_modeset;

/* Loads all layers. Returns 0 with *ret, or -ENOMEM. Bad files become warnings. */
int pw_modeset_load(const pw_load_opts *opts, pw_modeset **ret);
void pw_modeset_free(pw_modeset *ms); /* accepts NULL */
static inline void pw_modeset_freep(pw_modeset **ms)
{
	pw_modeset_free(*ms);
}
#define _cleanup_modeset_ __attribute__((cleanup(pw_modeset_freep)))

size_t pw_modeset_count(const pw_modeset *ms);
const pw_mode *pw_modeset_get(const pw_modeset *ms, size_t i); /* sorted by name */
const pw_mode *pw_modeset_find(const pw_modeset *ms, const char *name);
size_t pw_modeset_warning_count(const pw_modeset *ms);
const pw_warning *pw_modeset_warning(const pw_modeset *ms, size_t i);
/* The mode warning I is about (NULL: none; PW_ALL_MODES: every mode). */
const char *pw_modeset_warning_mode(const pw_modeset *ms, size_t i);
/* Is warning W one of a widening key ignored because the project is not trusted? */
bool pw_warning_is_untrusted(const pw_warning *w);
/* Is mode NAME broken: an error in its file (in any layer), or one that breaks every mode (a
 * config.yaml with errors)? *ret_w, when not NULL, gets the first such error. */
bool pw_modeset_mode_broken(const pw_modeset *ms, const char *name, const pw_warning **ret_w);

/* Protected and token rules, from defaults and configuration. */
size_t pw_modeset_protected_count(const pw_modeset *ms);
const pw_rule *pw_modeset_protected(const pw_modeset *ms, size_t i);
size_t pw_modeset_token_count(const pw_modeset *ms);
const pw_rule *pw_modeset_token(const pw_modeset *ms, size_t i);

/*
 * The plans folder (plan.h): "docs/plans" unless a config.yaml says `plans:`, and the allow
 * rule "/DIR/" "**" that modes with writes.plans get.
 */
const char *pw_modeset_plans_dir(const pw_modeset *ms);
const pw_rule *pw_modeset_plans_rule(const pw_modeset *ms);
/*
 * Makes PATH (normalized, project-relative: an approved plan) a protected path of MS, so that
 * every mode that enforces protected paths refuses to change it (the daemon adds the
 * approved plans after each load, fs/ctl/view.c). Returns 0, -EINVAL for a path that cannot
 * be written as a literal glob, -ENOMEM.
 */
int pw_modeset_freeze(pw_modeset *ms, const char *path);
/* Breaks every mode of MS with the error WHY (as a broken config.yaml does): a view then
 * fails closed. For what the loader's caller adds and cannot (pw_modeset_freeze). */
void pw_modeset_fail_closed(pw_modeset *ms, const char *why);

const char *pw_layer_name(pw_layer l);
const char *pw_rule_kind_name(pw_rule_kind k);

/*
 * Formats a warning as one line: "FILE:LINE:COL: error: KEY: MESSAGE" (parts that are
 * unknown are left out). Returns a malloc'd string or NULL.
 */
char *pw_warning_format(const pw_warning *w);
