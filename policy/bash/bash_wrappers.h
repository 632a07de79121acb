/* SPDX-License-Identifier: MIT */
/* Commands that run other commands (bash_wrappers.c): handlers of the table (bash_writers.c).
 * They judge the command they run one level deeper, through bw_cmd.dispatch or, for a shell
 * on a string (sh -c, flock -c), bw_ctx.analyze_string. */
#pragma once

#include "bash_cmd.h"

/* env, sudo, nice, nohup, timeout, stdbuf, ionice, time, command, exec, watch, ... */
void bw_h_wrap(bw_cmd *k);
void bw_h_flock(bw_cmd *k);
void bw_h_xargs(bw_cmd *k);
void bw_h_find(bw_cmd *k);   /* -delete, -exec CMD {} ;, -fprint FILE */
void bw_h_shell(bw_cmd *k);  /* sh/bash -c STRING */
void bw_h_source(bw_cmd *k); /* source FILE, . FILE */
