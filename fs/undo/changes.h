/* SPDX-License-Identifier: MIT */
/*
 * The control methods over the originals (fs/undo/changes.c): changes.list, changes.diff,
 * changes.undo, changes.prune and checkpoint (docs/PROTOCOL.md).
 *
 * A module of the control server (server.h), registered by the daemon (daemon.c) with the
 * FUSE layer's pw_fs as its argument: undo acts on the backing tree under the originals
 * store's lock, beside the inode table (keep.h), so it needs the FUSE layer itself, not the
 * view's narrow pw_view_fs_ops. A view without originals (--no-originals, no state
 * database) answers them PW_RPC_UNAVAILABLE; builds of the control plane without the FUSE
 * layer (tests/ctl) do not register the module, and the methods are then unknown.
 * The person's only: changes.undo, changes.prune and checkpoint (agents may list and diff).
 */
#pragma once

#include "ctl/server.h"

extern const pw_ctl_module pw_undo_changes_module;
