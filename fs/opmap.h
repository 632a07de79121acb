/* SPDX-License-Identifier: MIT */
/*
 * One table from FUSE operation to policy operation (opmap.c): for every opcode the kernel
 * can send, what the daemon checks it as before it acts, or why it needs no check. The
 * handlers in ops*.c take their policy op from here (pw_opmap_op, pw_opmap_open,
 * pw_opmap_setattr), never from a literal of their own, and tests/fs/test_opmap.c holds the
 * table to its promise: every opcode that can change the tree is checked as a write.
 *
 * Plain data keyed by <linux/fuse.h> opcodes: no libfuse, so the test builds without it.
 */
#pragma once

#include <linux/fuse.h>
#include <stdbool.h>

#include "policy.h"

/* Opcodes newer than this header names (the kernel may still send them). */
#define PW_FUSE_STATX 52
#define PW_FUSE_COPY_FILE_RANGE_64 53
#define PW_OPMAP_SIZE                                                                              \
	54 /* opcodes 0..53: every FUSE opcode of kernel 6.18 (CUSE_INIT, for                      \
	    * character devices, is no filesystem's) */

typedef enum pw_opmap_kind {
	PW_OPMAP_NONE = 0, /* no such opcode (a gap in the numbering) */
	PW_OPMAP_CHECK,	   /* a change: always checked as .op */
	PW_OPMAP_CHECK_IF, /* checked as .op (or the op its helper picks) when it asks to change
			    * something; .why says when */
	PW_OPMAP_NO_CHECK, /* changes nothing in the tree: a read, a sync, the session's own
			    * bookkeeping (.op is PW_OP_READ or PW_OP_LOOKUP); .why says why */
	PW_OPMAP_UNSERVED, /* no handler: never negotiated, or libfuse answers ENOSYS, so it
			    * changes nothing; .op is what it would be checked as if served */
} pw_opmap_kind;

typedef struct pw_opmap_entry {
	const char *name; /* as the protocol spells it ("LOOKUP"); NULL for a gap */
	pw_opmap_kind kind;
	pw_op op;
	const char *why; /* for every kind but CHECK */
} pw_opmap_entry;

extern const pw_opmap_entry pw_opmap_table[PW_OPMAP_SIZE];

/* The table's entry for OPCODE, or NULL beyond it or for a gap. */
const pw_opmap_entry *pw_opmap_get(unsigned opcode);

/* The policy op OPCODE is checked as (a constant opcode: one load). */
static inline pw_op pw_opmap_op(unsigned opcode)
{
	return pw_opmap_table[opcode].op;
}

/* OPEN (and what CREATE opens): PW_OP_TRUNCATE with O_TRUNC, PW_OP_OPEN_WRITE with write
 * access, or PW_OP_READ for a read-only open, which is not checked. */
pw_op pw_opmap_open(int flags);

/* SETATTR with VALID (the kernel's FATTR_* bits, which libfuse passes on as
 * FUSE_SET_ATTR_* of the same values): one write op, named by the most telling change
 * (size, then mode, then owner, then times). The policy decides writes by path alone, so
 * which one only names the audit event. */
pw_op pw_opmap_setattr(unsigned valid);

#ifdef FUSE_SET_ATTR_MODE /* with libfuse: its bits are the kernel's */
_Static_assert(FUSE_SET_ATTR_MODE == FATTR_MODE && FUSE_SET_ATTR_UID == FATTR_UID &&
		   FUSE_SET_ATTR_GID == FATTR_GID && FUSE_SET_ATTR_SIZE == FATTR_SIZE &&
		   FUSE_SET_ATTR_ATIME == FATTR_ATIME && FUSE_SET_ATTR_MTIME == FATTR_MTIME,
	       "libfuse's setattr bits are the kernel's");
#endif
