/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>

#include "store/sha256.h"

/* Copies SRC (SIZE bytes, as far as known) into DST from offset 0 to the end of SRC, and adds
 * exactly the bytes written to C. Large files are hashed in a second thread while the copy
 * goes on (copyhash.c). 0 or -errno (then DST and C hold a part). */
int pw_undo_copy_hash(int src, int dst, uint64_t size, pw_sha256 *c);
