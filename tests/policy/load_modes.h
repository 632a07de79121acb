/* SPDX-License-Identifier: MIT */
/*
 * The one way the policy tests load modes: the BUNDLED, GLOBAL and PROJECT layers (NULL
 * skips one), as a view would, and the load must succeed.
 */
#pragma once

#include <criterion/criterion.h>
#include <stdbool.h>

#include "modeset.h"

static inline pw_modeset *load_modes(const char *bundled, const char *global, const char *project,
				     bool trusted)
{
	pw_load_opts o = {.bundled_dir = bundled,
			  .global_dir = global,
			  .project_dir = project,
			  .trusted = trusted};
	pw_modeset *ms = NULL;

	cr_assert_eq(pw_modeset_load(&o, &ms), 0);
	cr_assert_not_null(ms);
	return ms;
}
