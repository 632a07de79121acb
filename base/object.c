/* SPDX-License-Identifier: MIT */
#include "object.h"

#include <fcntl.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "util.h"

static struct timespec ts_of(struct statx_timestamp t)
{
	return (struct timespec){.tv_sec = t.tv_sec, .tv_nsec = t.tv_nsec};
}

/* The struct stat fstatat would have given (glibc builds it from statx the same way). */
static void stat_of(const struct statx *x, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_dev = makedev(x->stx_dev_major, x->stx_dev_minor);
	st->st_ino = x->stx_ino;
	st->st_mode = x->stx_mode;
	st->st_nlink = x->stx_nlink;
	st->st_uid = x->stx_uid;
	st->st_gid = x->stx_gid;
	st->st_rdev = makedev(x->stx_rdev_major, x->stx_rdev_minor);
	st->st_size = (off_t)x->stx_size;
	st->st_blksize = (blksize_t)x->stx_blksize;
	st->st_blocks = (blkcnt_t)x->stx_blocks;
	st->st_atim = ts_of(x->stx_atime);
	st->st_mtim = ts_of(x->stx_mtime);
	st->st_ctim = ts_of(x->stx_ctime);
}

int pw_object_at(int dirfd, const char *name, int flags, pw_object *ret)
{
	struct statx x;
	if (statx(dirfd, name, flags | AT_STATX_SYNC_AS_STAT, STATX_BASIC_STATS | STATX_BTIME, &x) <
	    0)
		return negative_errno();
	stat_of(&x, &ret->st);
	ret->birth_ns = (x.stx_mask & STATX_BTIME)
			    ? (int64_t)x.stx_btime.tv_sec * 1000000000 + x.stx_btime.tv_nsec
			    : 0;
	return 0;
}
