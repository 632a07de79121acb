/* SPDX-License-Identifier: MIT */
/* fh.c: the open files and directories of the view, and the registry of them. */
#pragma once

#include <pthread.h>

#include "fs_internal.h"

/* An open file or directory of the view. */
typedef struct pw_fh {
	struct pw_fh *prev, *next; /* fs->handles: freed at unmount if never released */
	int fd;
	pw_inode *node;	  /* the node opened (the kernel keeps it while the handle lives) */
	pw_inode *writer; /* files open for writing: the node whose writers this counts */
	bool direct;	  /* the backing descriptor has O_DIRECT (writes need aligned memory) */
	/* directories: getdents64 buffer state */
	off_t dir_pos;
	size_t buf_len, buf_off;
	char *buf;
} pw_fh;

static inline pw_fh *pw_fh_of(struct fuse_file_info *fi)
{
	return (pw_fh *)(uintptr_t)fi->fh;
}

/* The registry of open handles, fs->fh: fh.c's. In stripes chosen by node, so that the OPEN
 * of one file and the RELEASE of another never wait for each other. A daemon stopped with
 * files still open (SIGTERM) gets no RELEASE for them; pw_fh_close_all frees what is left at
 * unmount. */
#define PW_FH_STRIPES 32
struct pw_fh_table {
	struct pw_fh_stripe {
		pthread_mutex_t lock;
		struct pw_fh *head;
	} __attribute__((aligned(64))) stripes[PW_FH_STRIPES];
};

/* Makes the registry (at start: 0 or -ENOMEM), and closes and frees every handle never
 * released and the registry (after the session ended; accepts none made). */
int pw_fh_table_init(pw_fs *fs);
void pw_fh_close_all(pw_fs *fs);

/* Links H into, or out of, the list of open handles. */
void pw_fh_register(pw_fs *fs, pw_fh *h);
void pw_fh_unregister(pw_fs *fs, pw_fh *h);
/* A duplicate of a descriptor open on N (close it), or -ENOENT: what a process's open
 * handle still reaches when no name does, e.g. a file unlinked or replaced while open. */
int pw_fh_dup_for(pw_fs *fs, pw_inode *n);
