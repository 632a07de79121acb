/* SPDX-License-Identifier: MIT */
/* switch.c: the attribute pass after a switch (the swap itself: fs.h). */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fs_internal.h"

/* How long a switch waits for its attribute pass before answering (switch.c). */
#define PW_SWITCH_ATTR_WAIT_MS 2000

/* Invalidation of attributes after a switch, on a thread of its own: fs->inval, switch.c's. */
struct pw_inval_pass {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;	  /* a job is queued, or stop */
	pthread_cond_t done_cond; /* a pass ended (done_gen moved) */
	/* The pending job: every policy the kernel may have cached attributes under since the
	 * last pass began (a switch queued while another is pending adds its old one), and the
	 * new one; references held. every: too many to compare, visit every node. */
	pw_policy *olds[PW_INVAL_OLDS_MAX], *new_policy;
	size_t n_olds;
	bool every;
	bool stop, started;
	atomic_uint_fast64_t pending;
	uint64_t gen;		   /* generation of new_policy (lock) */
	_Atomic uint64_t done_gen; /* last generation fully invalidated */
};

/* Makes fs->inval (0 or -ENOMEM), before any policy is set; pw_inval_free frees it once the
 * session is gone (accepts none made). pw_inval_start starts its thread, pw_inval_stop
 * stops it (a switch then invalidates nothing more). */
int pw_inval_init(pw_fs *fs);
void pw_inval_free(pw_fs *fs);
int pw_inval_start(pw_fs *fs);
void pw_inval_stop(pw_fs *fs);
