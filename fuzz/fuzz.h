/* SPDX-License-Identifier: MIT */
/*
 * The entry point every fuzz/fuzz-<parser>.c exports. libFuzzer calls it under
 * -Dfuzz=true; fuzz/replay.c calls it for each committed input under meson test.
 * A target must not leak, must accept any bytes, and aborts only on a real bug.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
