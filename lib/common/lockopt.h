/* SPDX-License-Identifier: MIT */
/*
 * A mutex a caller may go without: NULL where the code runs on one thread
 * only (a serial decode), the shared lock where it runs beside others (the
 * section cache of decoders working at once, decode/parallel.h,
 * decode/threadpar.h).
 */
#ifndef PTD_COMMON_LOCKOPT_H
#define PTD_COMMON_LOCKOPT_H

#include <pthread.h>

static inline void ptd_lock_opt(pthread_mutex_t *m)
{
	if (m)
		(void)pthread_mutex_lock(m);
}

static inline void ptd_unlock_opt(pthread_mutex_t *m)
{
	if (m)
		(void)pthread_mutex_unlock(m);
}

#endif
