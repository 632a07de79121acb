/* SPDX-License-Identifier: MIT */
/* A token scan for commands that do not parse (bash_heuristic.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "bash_internal.h"

/* Scans TEXT as tokens and dispatches every command it can make out. */
void bw_heuristic_scan(bw_ctx *c, const char *text, size_t len);
