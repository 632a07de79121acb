/* SPDX-License-Identifier: MIT */
/*
 * The view's control methods (fs/ctl/methods.c): status, modes.list, mode.get, mode.set,
 * check, allowed, reload, subscribe, agent.open and bash.check (docs/PROTOCOL.md). A module
 * of the control server (server.h); its argument is unused.
 */
#pragma once

#include "server.h"

extern const pw_ctl_module pw_ctl_methods_module;
