/* SPDX-License-Identifier: MIT */
/* The table of known commands and what their arguments write (bash_writers.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "bash_internal.h"

/* Judges one simple command: ARGV[0] is the name (argv words are borrowed). Wrappers
 * (env, sudo, xargs, find -exec, sh -c, ...) recurse with DEPTH + 1. */
void bw_dispatch(bw_ctx *c, bw_word *argv, size_t argc, unsigned depth);
