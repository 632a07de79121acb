/* SPDX-License-Identifier: MIT */
/*
 * The FUSE opcode -> policy op table (opmap.h). Each row says what the daemon does with a
 * request before it acts: CHECK and CHECK_IF rows go through check.c with the op given here;
 * the others say why nothing can change. docs/internals/fs.md ("One decision point") has the
 * same table in prose; change both together.
 */
#include "opmap.h"

#include <fcntl.h>

#include "fs.h"

#define CHECK(code, nm, o) [code] = {nm, PW_OPMAP_CHECK, o, NULL}
#define CHECK_IF(code, nm, o, w) [code] = {nm, PW_OPMAP_CHECK_IF, o, w}
#define NO_CHECK(code, nm, o, w) [code] = {nm, PW_OPMAP_NO_CHECK, o, w}
#define UNSERVED(code, nm, o, w) [code] = {nm, PW_OPMAP_UNSERVED, o, w}

#define SESSION "the session's own bookkeeping, answered by libfuse or the loop"
#define READS "reads: hidden names are absent (hide rules), nothing is written"
#define SYNC "makes durable what was already checked when written; changes nothing new"

const pw_opmap_entry pw_opmap_table[PW_OPMAP_SIZE] = {
    /* Changes: every one checked before its syscall, and its original kept (undo/undo.h). */
    CHECK_IF(FUSE_SETATTR, "SETATTR", PW_OP_UTIMENS,
	     "when it changes size, mode, owner or times; the op by pw_opmap_setattr"),
    CHECK(FUSE_SYMLINK, "SYMLINK", PW_OP_SYMLINK),
    CHECK(FUSE_MKNOD, "MKNOD", PW_OP_MKNOD),
    CHECK(FUSE_MKDIR, "MKDIR", PW_OP_MKDIR),
    CHECK(FUSE_UNLINK, "UNLINK", PW_OP_UNLINK),
    CHECK(FUSE_RMDIR, "RMDIR", PW_OP_RMDIR),
    CHECK(FUSE_RENAME, "RENAME", PW_OP_RENAME),
    CHECK(FUSE_RENAME2, "RENAME2", PW_OP_RENAME),
    CHECK(FUSE_LINK, "LINK", PW_OP_LINK),
    CHECK(FUSE_CREATE, "CREATE", PW_OP_CREATE),
    CHECK(FUSE_WRITE, "WRITE", PW_OP_WRITE),
    CHECK(FUSE_SETXATTR, "SETXATTR", PW_OP_SETXATTR),
    CHECK(FUSE_REMOVEXATTR, "REMOVEXATTR", PW_OP_REMOVEXATTR),
    CHECK(FUSE_FALLOCATE, "FALLOCATE", PW_OP_FALLOCATE),
    CHECK(FUSE_COPY_FILE_RANGE, "COPY_FILE_RANGE", PW_OP_COPY_RANGE),
    CHECK_IF(FUSE_OPEN, "OPEN", PW_OP_OPEN_WRITE,
	     "with write access or O_TRUNC (pw_opmap_open); a later WRITE is checked again"),
    CHECK_IF(FUSE_ACCESS, "ACCESS", PW_OP_ACCESS_WRITE,
	     "with W_OK, so that access(2) agrees with the mode; R_OK/X_OK: the backing "
	     "filesystem's answer"),

    /* Reads. */
    NO_CHECK(FUSE_LOOKUP, "LOOKUP", PW_OP_LOOKUP,
	     "visibility only: a hidden name answers ENOENT (hide rules)"),
    NO_CHECK(FUSE_GETATTR, "GETATTR", PW_OP_READ, READS),
    NO_CHECK(FUSE_READLINK, "READLINK", PW_OP_READ, READS),
    NO_CHECK(FUSE_READ, "READ", PW_OP_READ, READS),
    NO_CHECK(FUSE_STATFS, "STATFS", PW_OP_READ, READS),
    NO_CHECK(FUSE_GETXATTR, "GETXATTR", PW_OP_READ, READS),
    NO_CHECK(FUSE_LISTXATTR, "LISTXATTR", PW_OP_READ, READS),
    NO_CHECK(FUSE_OPENDIR, "OPENDIR", PW_OP_READ, READS),
    NO_CHECK(FUSE_READDIR, "READDIR", PW_OP_READ, READS),
    NO_CHECK(FUSE_READDIRPLUS, "READDIRPLUS", PW_OP_READ, READS),
    NO_CHECK(FUSE_LSEEK, "LSEEK", PW_OP_READ, "finds data or holes; reads"),
    NO_CHECK(FUSE_RELEASE, "RELEASE", PW_OP_READ, "closes a descriptor the view opened"),
    NO_CHECK(FUSE_RELEASEDIR, "RELEASEDIR", PW_OP_READ, "closes a descriptor the view opened"),
    NO_CHECK(FUSE_FLUSH, "FLUSH", PW_OP_READ, "close(2) of a descriptor; writes nothing"),
    NO_CHECK(FUSE_FSYNC, "FSYNC", PW_OP_READ, SYNC),
    NO_CHECK(FUSE_FSYNCDIR, "FSYNCDIR", PW_OP_READ, SYNC),

    /* The session itself. */
    NO_CHECK(FUSE_FORGET, "FORGET", PW_OP_READ, SESSION),
    NO_CHECK(FUSE_BATCH_FORGET, "BATCH_FORGET", PW_OP_READ, SESSION),
    NO_CHECK(FUSE_INIT, "INIT", PW_OP_READ, SESSION),
    NO_CHECK(FUSE_DESTROY, "DESTROY", PW_OP_READ, SESSION),
    NO_CHECK(FUSE_INTERRUPT, "INTERRUPT", PW_OP_READ, SESSION),
    NO_CHECK(FUSE_NOTIFY_REPLY, "NOTIFY_REPLY", PW_OP_READ, SESSION),

    /* Never served. */
    UNSERVED(FUSE_TMPFILE, "TMPFILE", PW_OP_CREATE,
	     "no handler (libfuse 3.14 answers ENOSYS): O_TMPFILE fails with EOPNOTSUPP"),
    UNSERVED(PW_FUSE_COPY_FILE_RANGE_64, "COPY_FILE_RANGE_64", PW_OP_COPY_RANGE,
	     "unknown to libfuse 3.14 (ENOSYS): the kernel falls back to COPY_FILE_RANGE"),
    UNSERVED(FUSE_IOCTL, "IOCTL", PW_OP_WRITE,
	     "no handler (libfuse answers ENOSYS): FS_IOC_SETFLAGS and the like cannot "
	     "change a file through the view"),
    UNSERVED(FUSE_GETLK, "GETLK", PW_OP_READ,
	     "no lock handler, so locks are never negotiated: the kernel keeps them local "
	     "(docs/internals/fs.md, Locks)"),
    UNSERVED(FUSE_SETLK, "SETLK", PW_OP_READ,
	     "advisory locks are not a change of the tree; kept by the kernel locally"),
    UNSERVED(FUSE_SETLKW, "SETLKW", PW_OP_READ,
	     "advisory locks are not a change of the tree; kept by the kernel locally"),
    UNSERVED(FUSE_BMAP, "BMAP", PW_OP_READ, "block devices only (fuseblk); no handler"),
    UNSERVED(FUSE_POLL, "POLL", PW_OP_READ, "no handler: files poll as always ready"),
    UNSERVED(FUSE_SETUPMAPPING, "SETUPMAPPING", PW_OP_READ, "DAX (virtiofs) only"),
    UNSERVED(FUSE_REMOVEMAPPING, "REMOVEMAPPING", PW_OP_READ, "DAX (virtiofs) only"),
    UNSERVED(FUSE_SYNCFS, "SYNCFS", PW_OP_READ,
	     "unknown to libfuse 3.14 (ENOSYS); a sync changes nothing new"),
    UNSERVED(PW_FUSE_STATX, "STATX", PW_OP_READ,
	     "unknown to libfuse 3.14 (ENOSYS): the kernel falls back to GETATTR"),
};

const pw_opmap_entry *pw_opmap_get(unsigned opcode)
{
	if (opcode >= PW_OPMAP_SIZE || !pw_opmap_table[opcode].name)
		return NULL;
	return &pw_opmap_table[opcode];
}

const char *pw_fs_opcode_name(unsigned op)
{
	const pw_opmap_entry *e = pw_opmap_get(op);
	return e ? e->name : NULL;
}

pw_op pw_opmap_open(int flags)
{
	if (flags & O_TRUNC)
		return PW_OP_TRUNCATE;
	if ((flags & O_ACCMODE) != O_RDONLY)
		return PW_OP_OPEN_WRITE;
	return PW_OP_READ;
}

pw_op pw_opmap_setattr(unsigned valid)
{
	if (valid & FATTR_SIZE)
		return PW_OP_TRUNCATE;
	if (valid & FATTR_MODE)
		return PW_OP_CHMOD;
	if (valid & (FATTR_UID | FATTR_GID))
		return PW_OP_CHOWN;
	return PW_OP_UTIMENS;
}
