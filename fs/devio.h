/* SPDX-License-Identifier: MIT */
/* devio.c: our own /dev/fuse read/writev, for what libfuse 3.14 cannot negotiate, and
 * requests spliced through a pipe so that write data never passes through our memory. */
#pragma once

#include <stdbool.h>

#include "fs_internal.h"

/* Puts the hooks on FS's session (after it is mounted); URING_WANTED: the INIT reply accepts
 * FUSE over io_uring when the kernel offers it (fsmain.c decided it may). */
int pw_devio_attach(pw_fs *fs, bool uring_wanted);
/* After the unmount, before the session is destroyed: stops and frees the rings, if INIT
 * accepted them (their threads handle requests with the session). */
void pw_devio_detach(pw_fs *fs);
/* The most data one WRITE can carry: the kernel's default max_pages limit (256 pages) and
 * libfuse's request buffer (256 pages and a header page); a 1 MiB write(2) is one WRITE. */
#define PW_FS_MAX_WRITE (1024 * 1024)
#define PW_FS_MAX_WRITE_SMALL_PIPE (PW_DEVIO_PIPE_MAX - 4096)
/* At INIT (ops.c): the max_write to offer, PW_FS_MAX_WRITE when this process may make a pipe
 * that holds such a request (root with CAP_SYS_RESOURCE, or pipe-max-size of 2 MiB or more),
 * else PW_FS_MAX_WRITE_SMALL_PIPE. Remembers the pipe size for devio.c's splicing. */
unsigned pw_devio_choose_max_write(pw_fs *fs);
/* The data of the WRITE this thread is handling when it waits in devio.c's pipe rather than
 * in IN_BUF (a large one): fills RET with a buffer that reads it from the pipe, and returns
 * true. What the handler leaves in the pipe is dropped before the next request. */
bool pw_devio_write_data(const struct fuse_bufvec *in_buf, struct fuse_bufvec *ret);
