/* SPDX-License-Identifier: MIT */
/* `piworkfs allowed --tree` (allowed_tree.c), called by cmd_allowed.c. */
#pragma once

#include "project.h"

/*
 * Prints the tree under START (project-relative, "" for the root) with the verdict of POLICY
 * for each entry (text, or JSON when JSON), the deciding rule when WHY, and on top the
 * widening an untrusted project's own layer declares and the mode ignores. Returns 0 or
 * -errno (START cannot be opened, no memory).
 */
int pw_allowed_tree(const pw_cli_project *p, const pw_policy *policy, const char *start, bool why,
		    bool json);
