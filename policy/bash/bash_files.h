/* SPDX-License-Identifier: MIT */
/* File utilities (bash_files.c): the handlers of the table's file commands (bash_writers.c). */
#pragma once

#include "bash_cmd.h"

/* Every file argument is written with the row's op (rm, touch, mkdir, tee, truncate, ...). */
void bw_h_all(bw_cmd *k);
/* chmod, chown, chgrp, setfacl: the first argument is the mode or owner. */
void bw_h_mode_first(bw_cmd *k);
/* cp, mv, install, ln: -t DIR or the last argument is the destination. */
void bw_h_copy(bw_cmd *k);
void bw_h_rsync(bw_cmd *k);
void bw_h_dd(bw_cmd *k);
/* Editors in place: sed -i, perl -i, awk -i inplace, formatters (clang-format -i, ...). */
void bw_h_sed(bw_cmd *k);
void bw_h_perl(bw_cmd *k);
void bw_h_awk(bw_cmd *k);
void bw_h_inplace(bw_cmd *k);
/* An output file given by an option or an argument. */
void bw_h_sort(bw_cmd *k);
void bw_h_split(bw_cmd *k);
void bw_h_curl(bw_cmd *k);
void bw_h_wget(bw_cmd *k);
void bw_h_patch(bw_cmd *k);
