/* SPDX-License-Identifier: MIT */
/*
 * The mode loader's three headers at once, for the CLI and the tests that use all of them:
 * mode.h (one mode file), config.h (config.yaml), modeset.h (the layers). policy/ itself
 * includes the one it uses, so no two of its files include each other.
 */
#pragma once

#include "config.h"
#include "mode.h"
#include "modeset.h"
