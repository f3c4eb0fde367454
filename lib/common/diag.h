/* SPDX-License-Identifier: MIT */
/*
 * Errors and diagnostics shared by every ptd module.
 *
 * Conventions (written down once, used everywhere):
 *  - Functions return 0 (or a non-negative count/id) on success and a
 *    negative error code on failure: -errno for system errors, or -PTD_E*
 *    for ptd's own domain errors, which live in a disjoint range (>= 4000).
 *  - A failed call never writes its ret_* outputs.
 *  - The library never logs and never exits.  Where a caller needs to know
 *    *what* was wrong with an input (which line, which field, which offset),
 *    the function takes a `struct ptd_diag *` (may be NULL) and fills it with
 *    one human-readable message naming the input and the place.
 *  - Public names are ptd_<object>_<verb>, as libipt's pt_<object>_<verb>.
 */
#ifndef PTD_COMMON_DIAG_H
#define PTD_COMMON_DIAG_H

#include <stdarg.h>
#include <stddef.h>

enum ptd_errno {
	PTD_ERR_BASE = 4000,
	PTD_EFORMAT = 4000,	/* malformed input (syntax, bad field) */
	PTD_ETRUNC = 4001,	/* input ends early */
	PTD_ELIMIT = 4002,	/* a configured or hard limit was exceeded */
	PTD_ENOPT = 4003,	/* no Intel PT on this machine */
	PTD_EVERSION = 4004,	/* unsupported format version */
	PTD_ECHECKSUM = 4005,	/* checksum or size mismatch */
	PTD_ENOIMAGE = 4006,	/* code the trace needs is not available */
	PTD_EDECODE = 4007,	/* the trace could not be decoded */
	PTD_EUNSUPPORTED = 4008,/* input uses a feature ptd does not handle */
	PTD_ENOTREG = 4009,	/* a file was expected: a FIFO, device... */
	PTD_EIDENTITY = 4010,	/* the file at a path is not the one mapped */
	PTD_ERR_MAX = 4011,
};

/* A string for a negative error code from any ptd function: ptd's own
 * range or errno. Never NULL. */
const char *ptd_strerror(int err);

#define PTD_DIAG_MAX 512

/* One message describing why an input was refused. */
struct ptd_diag {
	char msg[PTD_DIAG_MAX];
};

/* Format a message into @diag (if not NULL) and return @err unchanged, so a
 * parser can write `return ptd_diagf(diag, -PTD_EFORMAT, "%s:%u: ...")`. */
int ptd_diagf(struct ptd_diag *diag, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int ptd_vdiagf(struct ptd_diag *diag, int err, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

#endif
