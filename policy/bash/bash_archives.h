/* SPDX-License-Identifier: MIT */
/* Archives and compressors (bash_archives.c): handlers of the table (bash_writers.c). */
#pragma once

#include "bash_cmd.h"

/* tar -x writes into -C DIR (or here); -c/-r/-u write the -f archive. */
void bw_h_tar(bw_cmd *k);
void bw_h_unzip(bw_cmd *k);
void bw_h_zip(bw_cmd *k);
/* gzip, bzip2, xz, zstd, lz4 and their un-: FILE becomes FILE.EXT, or back. */
void bw_h_compress(bw_cmd *k);
