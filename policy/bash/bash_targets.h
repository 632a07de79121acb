/* SPDX-License-Identifier: MIT */
/* The analysis's result (bash_targets.c): its targets, added once each, and the step budget. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "bash_internal.h"

/* Adds a target. Copies strings; dedupes identical targets; past PW_BASH_TARGETS_MAX marks
 * the result truncated and drops further targets. Never fails (OOM is recorded). */
void bw_add(bw_ctx *c, const char *command, pw_bash_access access, pw_op op, pw_bash_kind kind,
	    const char *path, pw_bash_status status, bool is_dir, bool subtree, const char *note);
void bw_add_unknown_cmd(bw_ctx *c, const char *command, const char *note);
/* Spends N steps; false (and the result marked truncated, once) when the budget is gone. */
bool bw_spend(bw_ctx *c, unsigned long n);
/* Frees what target T holds (pw_bash_result_free). */
void bw_target_done(pw_bash_target *t);
