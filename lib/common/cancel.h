/* SPDX-License-Identifier: MIT */
/*
 * Asking a long operation to stop: it calls fn(ctx) now and then (between
 * blocks of a file it reads, ...) and, once that returns true, stops and
 * returns -ECANCELED.  A zeroed struct ptd_cancel, or a NULL pointer to
 * one, never cancels.
 */
#ifndef PTD_COMMON_CANCEL_H
#define PTD_COMMON_CANCEL_H

#include <stdbool.h>
#include <stddef.h>

struct ptd_cancel {
	bool (*fn)(void *ctx);
	void *ctx;
};

static inline bool ptd_cancelled(const struct ptd_cancel *c)
{
	return c && c->fn && c->fn(c->ctx);
}

#endif
