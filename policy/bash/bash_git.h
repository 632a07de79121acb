/* SPDX-License-Identifier: MIT */
/* git and its subcommands (bash_git.c): the table's git row (bash_writers.c). */
#pragma once

#include "bash_cmd.h"

/* git [-C DIR] [-c K=V] SUBCOMMAND ...: what the subcommand writes (the repository, the
 * work tree, or the paths it names); a subcommand git_subs[] does not know is unknown. */
void bw_h_git(bw_cmd *k);
