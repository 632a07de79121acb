/* SPDX-License-Identifier: MIT */
/* uring.c: FUSE over io_uring. pw_uring_prepare makes the rings, buffers and threads for
 * payloads of PAYLOAD_SZ (before the INIT reply accepts); pw_uring_start lets them register
 * (after it); pw_uring_free stops and frees (accepts NULL). pw_uring_reply and
 * pw_uring_reply_pipe take a reply meant for a ring entry (from writev, or from the pipe
 * of a spliced reply): they return its length, or -ENOENT for a /dev/fuse request's. Called
 * by devio.c only; uring.c calls back into nothing of devio.c (what both do with a request
 * is transport.c's). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "fs_internal.h"

typedef struct pw_uring pw_uring;
int pw_uring_prepare(pw_fs *fs, size_t payload_sz, pw_uring **ret);
void pw_uring_start(pw_uring *u);
void pw_uring_free(pw_uring *u);
ssize_t pw_uring_reply(pw_fs *fs, const struct iovec *iov, int count);
ssize_t pw_uring_reply_pipe(pw_fs *fs, int pipe_fd, size_t len);
bool pw_uring_available(void);	   /* built with liburing */
uint64_t pw_uring_init_flag(void); /* FUSE_OVER_IO_URING */
