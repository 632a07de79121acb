/* SPDX-License-Identifier: MIT */
/*
 * Small pthread helpers every room may use (libc only, like the rest of base/).
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

/*
 * Initializes C as a condition variable whose timed waits count CLOCK_MONOTONIC: every
 * deadline in the daemon is monotonic, so a clock step (NTP, a person setting the date)
 * never makes a wait return early or hang. Returns 0 or -errno.
 */
static inline int pw_cond_init_monotonic(pthread_cond_t *c)
{
	pthread_condattr_t attr;
	int r = pthread_condattr_init(&attr);
	if (r)
		return -r;
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	r = pthread_cond_init(c, &attr);
	pthread_condattr_destroy(&attr);
	return -r;
}

/* Starts FN(ARG) as the thread *T and sets *STARTED, so the stop knows there is one to join.
 * Returns 0 or -errno (nothing started, *STARTED untouched). */
static inline int pw_thread_start(pthread_t *t, void *(*fn)(void *), void *arg, bool *started)
{
	int r = pthread_create(t, NULL, fn, arg);
	if (r)
		return -r;
	*started = true;
	return 0;
}

/* Stops the thread T that waits on COND under LOCK until *STOP: sets *STOP under LOCK, wakes
 * T and joins it. */
static inline void pw_thread_stop(pthread_t t, pthread_mutex_t *lock, pthread_cond_t *cond,
				  bool *stop)
{
	pthread_mutex_lock(lock);
	*stop = true;
	pthread_cond_signal(cond);
	pthread_mutex_unlock(lock);
	pthread_join(t, NULL);
}
