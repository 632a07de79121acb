/* SPDX-License-Identifier: MIT */
/*
 * The reference count of an immutable object that threads share (a compiled policy, a
 * compiled glob): the one place that says which memory orders make the last drop safe.
 * Header-only, libc only.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>

/* Initialize with atomic_init(&count, 1): its maker holds the first reference. */
typedef atomic_uint pw_refcount;

/* One more holder. Relaxed: a reference is taken only from one already held, which keeps
 * the object alive meanwhile; nothing else is ordered by it. */
static inline void pw_ref_take(pw_refcount *r)
{
	atomic_fetch_add_explicit(r, 1, memory_order_relaxed);
}

/* One holder fewer: true for the last one, who frees the object. acq_rel: that thread sees
 * every other holder's last use of it before the free. */
static inline bool pw_ref_drop(pw_refcount *r)
{
	return atomic_fetch_sub_explicit(r, 1, memory_order_acq_rel) == 1;
}
