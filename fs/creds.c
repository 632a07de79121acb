/* SPDX-License-Identifier: MIT */
/*
 * Acting with the caller's credentials. When the daemon runs as root (the only way
 * allow_other views serve several users), each operation switches the worker thread's
 * filesystem uid and gid and supplementary groups to the caller's, so new files belong to
 * the caller (with setgid-directory inheritance done by the backing filesystem) and every
 * permission check, sticky-bit rule and errno is the backing filesystem's own.
 * setfsuid/setfsgid and the raw setgroups syscall are per thread (glibc's setgroups()
 * would change every thread of the process).
 */
#include <errno.h>
#include <grp.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "creds.h"
#include "pw_limits.h"

/* Whether this thread acts as a caller now (between pw_creds_enter and pw_creds_leave). */
static _Thread_local bool switched;

bool pw_creds_switched(void)
{
	return switched;
}

int pw_creds_enter(pw_fs *fs, fuse_req_t req, pw_creds_saved *saved)
{
	saved->changed = false;
	if (!fs->is_root_daemon)
		return 0;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	if (ctx->uid == 0 && ctx->gid == 0)
		return 0;
	gid_t groups[PW_GROUPS_MAX];
	int n = fuse_req_getgroups(req, PW_GROUPS_MAX, groups);
	if (n < 0)
		n = 0;
	if (n > PW_GROUPS_MAX)
		n = PW_GROUPS_MAX;
	if (syscall(SYS_setgroups, (size_t)n, groups) < 0)
		return -EPERM;
	saved->fsgid = (gid_t)setfsgid(ctx->gid);
	saved->fsuid = (uid_t)setfsuid(ctx->uid);
	saved->changed = true;
	switched = true;
	return 0;
}

void pw_creds_leave(pw_creds_saved *saved)
{
	if (!saved->changed)
		return;
	setfsuid(saved->fsuid);
	setfsgid(saved->fsgid);
	syscall(SYS_setgroups, (size_t)0, NULL);
	saved->changed = false;
	switched = false;
}
