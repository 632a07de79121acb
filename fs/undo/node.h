/* SPDX-License-Identifier: MIT */
/*
 * Undo's state of one inode, embedded in pw_inode (fs_internal.h) but the undo room's own:
 * only keep.c and changes.c read or write it. Zero (calloc) is the state of a node no
 * change set covers yet.
 */
#pragma once

#include <stdatomic.h>
#include <stdint.h>

typedef struct pw_undo_node {
	/* The change set whose records cover this inode's original (keep.c: a later change in
	 * the same set tests this one atomic and keeps nothing more). */
	_Atomic uint64_t kept_cs;
	/* When the view last changed it (CLOCK_REALTIME ns): undo tells changes made outside
	 * the view by comparing ctime with it (changes.c). */
	_Atomic int64_t changed_ns;
} pw_undo_node;
