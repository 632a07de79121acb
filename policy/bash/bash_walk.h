/* SPDX-License-Identifier: MIT */
/* The walk of the tree-sitter tree (bash_walk.c): lists, pipelines, bodies, functions,
 * redirections, word expansion, cd and variables. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "bash_internal.h"

/* Parses and walks TEXT (sh -c, eval) in a copy of the current state, one shell level
 * deeper. Others reach it through bw_ctx.analyze_string (bash_internal.h). */
void bw_analyze_string(bw_ctx *c, const char *text, size_t len, unsigned depth,
		       const char *command);
