/* SPDX-License-Identifier: MIT */
/* switch.c: the attribute pass after a switch (the swap itself: fs.h). */
#pragma once

#include "fs_internal.h"

int pw_inval_start(pw_fs *fs);
void pw_inval_stop(pw_fs *fs);
