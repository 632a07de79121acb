/* SPDX-License-Identifier: MIT */
/*
 * config.yaml (config.c): the protected paths, the design token files and the plans folder
 * a global or project configuration adds (mode.h describes the keys).
 */
#pragma once

#include <stddef.h>

#include "mode.h"

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
int pw_config_parse(const char *file, const char *buf, size_t len, pw_layer layer, pw_warnings *w,
		    pw_config *ret);
/* Reads and parses FILE; a missing file is 0 with an empty config. */
int pw_config_load(const char *file, pw_layer layer, pw_warnings *w, pw_config *ret);
void pw_config_done(pw_config *c);
