/* SPDX-License-Identifier: MIT */
/* The names of FUSE request opcodes, as the protocol spells them, for status output. Kept
 * apart from devio.c so the control plane's tests can link it without libfuse. */
#include <linux/fuse.h>

#include "fs.h"

static const char *const opcode_names[] = {
	[FUSE_LOOKUP] = "LOOKUP", [FUSE_FORGET] = "FORGET", [FUSE_GETATTR] = "GETATTR",
	[FUSE_SETATTR] = "SETATTR", [FUSE_READLINK] = "READLINK", [FUSE_SYMLINK] = "SYMLINK",
	[FUSE_MKNOD] = "MKNOD", [FUSE_MKDIR] = "MKDIR", [FUSE_UNLINK] = "UNLINK",
	[FUSE_RMDIR] = "RMDIR", [FUSE_RENAME] = "RENAME", [FUSE_LINK] = "LINK",
	[FUSE_OPEN] = "OPEN", [FUSE_READ] = "READ", [FUSE_WRITE] = "WRITE",
	[FUSE_STATFS] = "STATFS", [FUSE_RELEASE] = "RELEASE", [FUSE_FSYNC] = "FSYNC",
	[FUSE_SETXATTR] = "SETXATTR", [FUSE_GETXATTR] = "GETXATTR",
	[FUSE_LISTXATTR] = "LISTXATTR", [FUSE_REMOVEXATTR] = "REMOVEXATTR",
	[FUSE_FLUSH] = "FLUSH", [FUSE_INIT] = "INIT", [FUSE_OPENDIR] = "OPENDIR",
	[FUSE_READDIR] = "READDIR", [FUSE_RELEASEDIR] = "RELEASEDIR",
	[FUSE_FSYNCDIR] = "FSYNCDIR", [FUSE_GETLK] = "GETLK", [FUSE_SETLK] = "SETLK",
	[FUSE_SETLKW] = "SETLKW", [FUSE_ACCESS] = "ACCESS", [FUSE_CREATE] = "CREATE",
	[FUSE_INTERRUPT] = "INTERRUPT", [FUSE_BMAP] = "BMAP", [FUSE_DESTROY] = "DESTROY",
	[FUSE_IOCTL] = "IOCTL", [FUSE_POLL] = "POLL", [FUSE_NOTIFY_REPLY] = "NOTIFY_REPLY",
	[FUSE_BATCH_FORGET] = "BATCH_FORGET", [FUSE_FALLOCATE] = "FALLOCATE",
	[FUSE_READDIRPLUS] = "READDIRPLUS", [FUSE_RENAME2] = "RENAME2", [FUSE_LSEEK] = "LSEEK",
	[FUSE_COPY_FILE_RANGE] = "COPY_FILE_RANGE", [FUSE_SETUPMAPPING] = "SETUPMAPPING",
	[FUSE_REMOVEMAPPING] = "REMOVEMAPPING", [FUSE_SYNCFS] = "SYNCFS",
	[FUSE_TMPFILE] = "TMPFILE", [52] = "STATX", [53] = "COPY_FILE_RANGE_64",
};

const char *pw_fs_opcode_name(unsigned op)
{
	return op < sizeof(opcode_names) / sizeof(opcode_names[0]) ? opcode_names[op] : NULL;
}
