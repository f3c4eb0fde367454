/* SPDX-License-Identifier: MIT */
#include "common/diag.h"

#include <stdio.h>
#include <string.h>

static const char *ptd_errstr(enum ptd_errno e)
{
	/* No default: -Wswitch-enum flags a code without a message. */
	switch (e) {
	case PTD_EFORMAT:
		return "malformed input";
	case PTD_ETRUNC:
		return "input ends early";
	case PTD_ELIMIT:
		return "limit exceeded";
	case PTD_ENOPT:
		return "no Intel PT on this machine";
	case PTD_EVERSION:
		return "unsupported format version";
	case PTD_ECHECKSUM:
		return "checksum or size mismatch";
	case PTD_ENOIMAGE:
		return "code not available in the image";
	case PTD_EDECODE:
		return "trace could not be decoded";
	case PTD_EUNSUPPORTED:
		return "unsupported feature";
	case PTD_ENOTREG:
		return "not a regular file";
	case PTD_EIDENTITY:
		return "not the file the process mapped";
	case PTD_ERR_MAX:
		break;
	}
	return NULL;
}

const char *ptd_strerror(int err)
{
	int e = err < 0 ? -err : err;

	if (e >= PTD_ERR_BASE && e < PTD_ERR_MAX) {
		const char *s = ptd_errstr((enum ptd_errno)e);
		if (s)
			return s;
	}
	if (e == 0)
		return "success";
	return strerror(e);
}

int ptd_vdiagf(struct ptd_diag *diag, int err, const char *fmt, va_list ap)
{
	if (diag)
		(void)vsnprintf(diag->msg, sizeof(diag->msg), fmt, ap);
	return err;
}

int ptd_diagf(struct ptd_diag *diag, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)ptd_vdiagf(diag, err, fmt, ap);
	va_end(ap);
	return err;
}
