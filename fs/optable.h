/* SPDX-License-Identifier: MIT */
/* optable.c: the handlers the session calls, one per FUSE opcode served. */
#pragma once

#include "fs_internal.h"

/*
 * The handlers, one line each: what they check (the policy op comes from opmap.h), what they
 * keep (undo/undo.h), and their replies. Every change runs with the caller's credentials
 * (pw_req_begin), is checked before its syscall and kept right before it; a hidden name is absent
 * (ENOENT). New names are decided by the write rules first, then a hidden existing name is ENOENT.
 * Errors are the backing filesystem's errno unless said otherwise. ops.c's own (ops.h):
 *   INIT: negotiates the kernel's features; never the writeback cache (writes are checked).
 *   LOOKUP: no check; an entry, or ENOENT for a hidden name (negative entries cached).
 *   FORGET(_MULTI): drops the kernel's references; frees a node at zero.
 *   GETATTR: no check; ENOENT if hidden; attributes with the write bits the mode allows.
 *   SETATTR: checked as the op of pw_opmap_setattr and kept; the new attributes.
 *   READLINK: no check; the target as stored (never followed by the daemon).
 *   ACCESS: W_OK decided by the mode (EROFS/EACCES), the rest by the backing filesystem.
 *   STATFS: no check; the backing filesystem's.
 */
extern const struct fuse_lowlevel_ops pw_fs_ops;
