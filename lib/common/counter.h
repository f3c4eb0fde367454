/* SPDX-License-Identifier: MIT */
/*
 * A counter that one thread adds to and others only read (a session's
 * records, a fan-out's renders): a relaxed load and store, not a locked
 * read-modify-write, on a path taken for every record.  A reader sees
 * some recent value; no add is lost, since no other thread writes it.
 */
#ifndef PTD_COMMON_COUNTER_H
#define PTD_COMMON_COUNTER_H

#include <stdatomic.h>
#include <stdint.h>

static inline void ptd_counter_add(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) +
				      n, memory_order_relaxed);
}

#endif
