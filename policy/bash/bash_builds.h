/* SPDX-License-Identifier: MIT */
/* Build tools and package managers (bash_builds.c): handlers of the table (bash_writers.c). */
#pragma once

#include "bash_cmd.h"

void bw_h_make(bw_cmd *k); /* make, gmake, ninja */
void bw_h_cmake(bw_cmd *k);
void bw_h_cargo(bw_cmd *k);
void bw_h_go(bw_cmd *k);
void bw_h_pip(bw_cmd *k);      /* pip, pip3 */
void bw_h_python(bw_cmd *k);   /* python -m pip, -m venv; anything else runs code */
void bw_h_node_pkg(bw_cmd *k); /* npm, pnpm, yarn, bun */
