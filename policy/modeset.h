/* SPDX-License-Identifier: MIT */
/*
 * The layers (modeset.c): every mode file and config.yaml of the bundled, global and project
 * layers loaded into one set, with trust, tighten-only and the protected paths applied
 * (mode.h describes the layering). A modeset is immutable once loaded.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "mode.h"

typedef struct pw_load_opts {
	const char *bundled_dir; /* directory of bundled NAME.md files; NULL to skip */
	const char *global_dir;	 /* $XDG_CONFIG_HOME/piworkfs; NULL to skip */
	const char *project_dir; /* project root; NULL to skip the project layer */
	bool trusted;		 /* project trusted: its layer may widen */
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
 * The protected rule that freezes the approved plan at PATH (normalized, project-relative):
 * the literal glob "/PATH", file PW_FROZEN_RULE_FILE. A view compiles these into every policy
 * it installs (pw_policy_extras, policy.h), so that every mode that enforces protected paths
 * refuses to change the plan (fs/ctl/view.c reads the approved plans from the state
 * database). Returns 0 with *RET (pw_rule_done), -EINVAL for a path that cannot be written
 * as a literal glob, -ENOMEM.
 */
int pw_modeset_freeze_rule(const char *path, pw_rule *ret);
#define PW_FROZEN_RULE_FILE "(approved plan)"

/* The message of every widening key an untrusted project writes. */
#define PW_UNTRUSTED_MSG "ignored: the project is not trusted (piworkfs trust)"
