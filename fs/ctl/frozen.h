/* SPDX-License-Identifier: MIT */
/*
 * The approved plans of a project, as the protected rules a view compiles into every policy
 * it installs (frozen.c). The state database is where approval lives (README "Plans"); a view
 * reads it when it loads (mount, reload) and when a plan is approved or reopened in any view
 * of the project (plan.sync, docs/PROTOCOL.md), so that every live view freezes the same
 * plans. A set that could not be read or built is no set: its error makes every mode of the
 * view fail closed until a later read succeeds, since an approved plan that silently stopped
 * being read-only would break the person's spec.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "mode.h"

struct pw_state;

typedef struct pw_frozen {
	pw_rule *rules; /* PW_RULE_PROTECTED, file PW_FROZEN_RULE_FILE, one per approved plan */
	size_t n;
	char *error; /* non-NULL: the approved plans are unknown, and the view fails closed */
} pw_frozen;

/*
 * Reads the approved plans of PROJECT from STATE (NULL: no database, so no plan can have
 * been approved: an empty set) into *RET. A database that cannot be read, or a recorded path
 * that no literal glob can name, gives a set with its error (and returns 0). Returns 0, or
 * -ENOMEM (nothing filled).
 */
int pw_frozen_load(struct pw_state *state, const char *project, pw_frozen *ret);
/* Do A and B freeze the same paths in the same order, with the same error state? */
bool pw_frozen_equal(const pw_frozen *a, const pw_frozen *b);
/* Frees what F holds and zeroes it; accepts a zeroed set. */
void pw_frozen_done(pw_frozen *f);
