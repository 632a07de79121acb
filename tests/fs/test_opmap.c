/* SPDX-License-Identifier: MIT */
/*
 * The FUSE opcode -> policy op table (fs/opmap.c), without libfuse: every opcode the kernel
 * can send has a row, and every one that can change the tree is checked as a write, or is
 * not served at all (libfuse answers ENOSYS, so nothing changes). A row added, dropped or
 * loosened in fs/opmap.c fails here until this list agrees.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>

#include "fs.h"
#include "opmap.h"

/* Opcodes that change the project when served: name, create, remove, rename, content, size,
 * metadata, xattrs. OPEN with write flags, SETATTR and ACCESS(W_OK) by their helpers. */
static const unsigned mutating[] = {
    FUSE_SETATTR,     FUSE_SYMLINK,   FUSE_MKNOD,	    FUSE_MKDIR,
    FUSE_UNLINK,      FUSE_RMDIR,     FUSE_RENAME,	    FUSE_RENAME2,
    FUSE_LINK,	      FUSE_CREATE,    FUSE_WRITE,	    FUSE_SETXATTR,
    FUSE_REMOVEXATTR, FUSE_FALLOCATE, FUSE_COPY_FILE_RANGE, PW_FUSE_COPY_FILE_RANGE_64,
    FUSE_TMPFILE,     FUSE_OPEN,      FUSE_IOCTL,	    FUSE_ACCESS,
};
/* Served only when the request asks to change something. */
static const unsigned conditional[] = {FUSE_SETATTR, FUSE_OPEN, FUSE_ACCESS};
/* Deliberately not served: a handler added for one must move it to CHECK. */
static const unsigned unserved_mutating[] = {PW_FUSE_COPY_FILE_RANGE_64, FUSE_TMPFILE, FUSE_IOCTL};

/* The numbering's gaps (opcodes 7 and 19 were never used), and 0. */
static bool gap(unsigned op)
{
	return op == 0 || op == 7 || op == 19;
}

static bool in(const unsigned *set, size_t n, unsigned op)
{
	for (size_t i = 0; i < n; i++)
		if (set[i] == op)
			return true;
	return false;
}
#define IN(set, op) in(set, sizeof(set) / sizeof(set[0]), op)

_Static_assert(FUSE_TMPFILE == 51, "opcodes after TMPFILE are named in opmap.h");
#ifdef FUSE_STATX
_Static_assert(FUSE_STATX == PW_FUSE_STATX, "STATX");
#endif
_Static_assert(PW_FUSE_COPY_FILE_RANGE_64 + 1 == PW_OPMAP_SIZE,
	       "a newer kernel's opcodes need rows (and a place in this test's lists)");
_Static_assert(PW_OPMAP_SIZE <= PW_FS_OPCODES, "status counts every opcode one by one");

Test(opmap, every_opcode_has_a_row)
{
	for (unsigned op = 0; op < PW_OPMAP_SIZE; op++) {
		const pw_opmap_entry *e = pw_opmap_get(op);
		if (gap(op)) {
			cr_assert_null(e, "opcode %u is a gap", op);
			continue;
		}
		cr_assert_not_null(e, "opcode %u has no row", op);
		cr_assert_neq(e->kind, PW_OPMAP_NONE, "%s", e->name);
		cr_assert_str_eq(pw_fs_opcode_name(op), e->name);
		if (e->kind != PW_OPMAP_CHECK)
			cr_assert(e->why && *e->why, "%s says why it needs no plain check",
				  e->name);
	}
	cr_assert_null(pw_opmap_get(PW_OPMAP_SIZE));
	cr_assert_null(pw_opmap_get(CUSE_INIT), "CUSE_INIT is no filesystem's");
	cr_assert_str_eq(pw_opmap_get(FUSE_LOOKUP)->name, "LOOKUP");
	cr_assert_str_eq(pw_opmap_get(PW_FUSE_COPY_FILE_RANGE_64)->name, "COPY_FILE_RANGE_64");
}

Test(opmap, every_mutating_opcode_is_a_checked_write)
{
	for (size_t i = 0; i < sizeof(mutating) / sizeof(mutating[0]); i++) {
		const pw_opmap_entry *e = pw_opmap_get(mutating[i]);
		cr_assert_not_null(e, "opcode %u", mutating[i]);
		cr_assert(pw_op_is_write(e->op), "%s is checked as %s, not a write", e->name,
			  pw_op_name(e->op));
		pw_opmap_kind want = IN(unserved_mutating, mutating[i]) ? PW_OPMAP_UNSERVED
				     : IN(conditional, mutating[i])	? PW_OPMAP_CHECK_IF
									: PW_OPMAP_CHECK;
		cr_assert_eq(e->kind, want, "%s: kind %d, expected %d", e->name, e->kind, want);
	}
}

Test(opmap, nothing_else_is_checked_or_a_write)
{
	for (unsigned op = 1; op < PW_OPMAP_SIZE; op++) {
		const pw_opmap_entry *e = pw_opmap_get(op);
		if (!e || IN(mutating, op))
			continue;
		cr_assert(e->kind == PW_OPMAP_NO_CHECK || e->kind == PW_OPMAP_UNSERVED,
			  "%s is checked: add it to this test's list of changes", e->name);
		cr_assert_not(pw_op_is_write(e->op), "%s", e->name);
	}
}

Test(opmap, open_with_write_flags_is_checked)
{
	cr_assert_eq(pw_opmap_open(O_RDONLY), PW_OP_READ, "a read-only open is not checked");
	cr_assert_eq(pw_opmap_open(O_RDONLY | O_CLOEXEC | O_NOFOLLOW), PW_OP_READ);
	const int writes[] = {O_WRONLY,		  O_RDWR,
			      O_RDONLY | O_TRUNC, O_WRONLY | O_APPEND,
			      O_RDWR | O_TRUNC,	  O_WRONLY | O_CREAT | O_EXCL};
	for (size_t i = 0; i < sizeof(writes) / sizeof(writes[0]); i++) {
		cr_assert(pw_op_is_write(pw_opmap_open(writes[i])), "flags %#x", writes[i]);
	}
	cr_assert_eq(pw_opmap_open(O_RDONLY | O_TRUNC), PW_OP_TRUNCATE);
	cr_assert_eq(pw_opmap_open(O_WRONLY), PW_OP_OPEN_WRITE);
}

Test(opmap, every_setattr_is_a_write)
{
	const unsigned bits[] = {FATTR_MODE,	  FATTR_UID,	   FATTR_GID,
				 FATTR_SIZE,	  FATTR_ATIME,	   FATTR_MTIME,
				 FATTR_ATIME_NOW, FATTR_MTIME_NOW, FATTR_CTIME};
	const size_t n = sizeof(bits) / sizeof(bits[0]);
	for (unsigned set = 0; set < (1u << n); set++) {
		unsigned valid = 0;
		for (size_t b = 0; b < n; b++)
			if (set & (1u << b))
				valid |= bits[b];
		cr_assert(pw_op_is_write(pw_opmap_setattr(valid)), "valid %#x", valid);
	}
	cr_assert_eq(pw_opmap_setattr(FATTR_SIZE | FATTR_MODE), PW_OP_TRUNCATE);
	cr_assert_eq(pw_opmap_setattr(FATTR_MODE), PW_OP_CHMOD);
	cr_assert_eq(pw_opmap_setattr(FATTR_GID), PW_OP_CHOWN);
	cr_assert_eq(pw_opmap_setattr(FATTR_MTIME_NOW), PW_OP_UTIMENS);
}
