/* SPDX-License-Identifier: MIT */
/*
 * The control methods over the originals (fs/ctl/changes.c): changes.list, changes.diff,
 * changes.undo, changes.prune and checkpoint (docs/PROTOCOL.md). Declared weak: builds of
 * the control plane without the FUSE layer (tests/ctl) answer them as unavailable.
 */
#pragma once

#include <jansson.h>

#include "server.h"
#include "view.h"

#define PW_CHANGES_METHOD(name)                                                                    \
	__attribute__((weak)) int name(pw_view *v, const pw_peer *peer, json_t *params,            \
				       json_t **ret, pw_ctl_fail *fail)
PW_CHANGES_METHOD(pw_changes_list);
PW_CHANGES_METHOD(pw_changes_diff);
PW_CHANGES_METHOD(pw_changes_undo);
PW_CHANGES_METHOD(pw_changes_prune);
PW_CHANGES_METHOD(pw_changes_checkpoint);
#undef PW_CHANGES_METHOD

/* Defined beside them: keep.c refers to it, so that a link with the FUSE layer pulls the
 * methods in from the static library (weak references alone would not). */
extern const int pw_changes_linked;
