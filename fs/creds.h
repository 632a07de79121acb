/* SPDX-License-Identifier: MIT */
/* creds.c: act with the caller's credentials when the daemon runs as root. */
#pragma once

#include "fs_internal.h"

typedef struct pw_creds_saved {
	bool changed;
	uid_t fsuid;
	gid_t fsgid;
} pw_creds_saved;
int pw_creds_enter(pw_fs *fs, fuse_req_t req, pw_creds_saved *saved);
void pw_creds_leave(pw_creds_saved *saved);
/* Whether this thread acts with a caller's credentials now; when not, it has the daemon's. */
bool pw_creds_switched(void);
