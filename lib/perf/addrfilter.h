/* SPDX-License-Identifier: MIT */
/*
 * Intel PT address filters: perf's --filter text, the string the kernel
 * takes through PERF_EVENT_IOC_SET_FILTER, and the same ranges for libipt's
 * decoder (struct pt_conf_addr_filter; erratum SKL014 makes the decoder
 * need them).
 *
 * Grammar (perf-record(1) --filter; the text is untrusted):
 *   filters := filter { (',' | ' ')+ filter }
 *   filter  := action ' '+ start [ ' '* '/' ' '* size ] [ ' '* '@' ' '* file ]
 *   action  := "filter" | "start" | "stop" | "tracestop"
 *   start, size := a number, decimal or 0x-hex
 *   file    := any bytes up to the next ',' or whitespace
 * With a file, start is an offset in that file (user space); without one it
 * is a kernel address, which the kernel accepts only for events that trace
 * the kernel.  Symbol names are not supported (give an address/offset).
 *
 * Intel PT's driver supports address *ranges* only (pt_event_addr_filters_
 * validate: no size or "start" is -EOPNOTSUPP), so "filter" and "tracestop"
 * need a non-zero size and "start" and a size-less "stop" are refused here
 * with that reason.  "tracestop" is written to the kernel as "stop" with a
 * size, as perf does.  Decoder config: filter = 1, tracestop = 2.
 */
#ifndef PTD_PERF_ADDRFILTER_H
#define PTD_PERF_ADDRFILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <intel-pt.h>

#include "aspace/maps.h"
#include "common/diag.h"

/* The most filters we parse: libipt's decoder config has 4 slots, the
 * kernel's intel_pt at most num_address_ranges (<= 4 on all known CPUs). */
#define PTD_ADDRFILTER_MAX 4
#define PTD_ADDRFILTER_TEXT_MAX 16384	/* longest --filter text */
#define PTD_ADDRFILTER_FILE_MAX 4096	/* longest file name (PATH_MAX) */

enum ptd_addrfilter_action {
	PTD_ADDRFILTER_FILTER,		/* trace only inside the range */
	PTD_ADDRFILTER_TRACESTOP,	/* stop tracing on entering it */
};

struct ptd_addrfilter_entry {
	enum ptd_addrfilter_action action;
	uint64_t start;		/* file offset (with a file) or address */
	uint64_t size;		/* > 0 */
	char *file;		/* NULL: kernel address; owned */
	size_t column;		/* 1-based column of the action in the text */
};

struct ptd_addrfilter {
	struct ptd_addrfilter_entry v[PTD_ADDRFILTER_MAX];
	size_t n;
};

/* Parse @text (NUL-terminated).  @nr_addr_filters is the PMU's capacity
 * (struct ptd_pt_pmu.nr_addr_filters).
 * Returns 0 and fills *ret (free with ptd_addrfilter_fini) on success.
 * Returns -EINVAL if an argument is NULL.
 * Returns -PTD_EFORMAT with "column N: what" for bad syntax (unknown
 *   action, bad number, missing size, size 0, start+size overflowing,
 *   empty file name, "start"/size-less "stop", empty text).
 * Returns -PTD_ELIMIT ("3 filters but this CPU supports 2") if there are
 *   more filters than @nr_addr_filters (or PTD_ADDRFILTER_MAX), or the text
 *   or a file name is longer than the limits above.
 * Returns -ENOMEM. */
int ptd_addrfilter_parse(const char *text, uint32_t nr_addr_filters,
			 struct ptd_addrfilter *ret, struct ptd_diag *diag);

void ptd_addrfilter_fini(struct ptd_addrfilter *f);

/* Write the kernel's filter string ("filter 0x1000/0x200@/bin/ls,...")
 * into @buf of @cap bytes.
 * Returns 0, or -ENAMETOOLONG if it does not fit (buf then holds ""). */
int ptd_addrfilter_kernel_string(const struct ptd_addrfilter *f, char *buf,
				 size_t cap);

/* Fill the decoder's filter config: range i becomes addri_cfg (1 filter,
 * 2 stop), addri_a = first byte, addri_b = last byte (inclusive, as the
 * IA32_RTIT_ADDRn_B MSR).  A file range is resolved through @maps (may be
 * NULL when there are no file ranges): the executable mapping of that file
 * (same path) whose file offsets contain the whole range gives its address.
 * *ret is zeroed first; on failure it is left untouched.
 * Returns 0.
 * Returns -EINVAL if an argument is NULL, or a file range needs @maps.
 * Returns -PTD_ENOIMAGE if no executable mapping of the file contains the
 *   range's start, or -PTD_EFORMAT if the range crosses the end of the
 *   mapping that holds its start (the kernel may not configure it: split
 *   it, or narrow it to one mapping); the message names the filter's column
 *   and the file. */
int ptd_addrfilter_to_config(const struct ptd_addrfilter *f,
			     const struct ptd_maps *maps,
			     struct pt_conf_addr_filter *ret,
			     struct ptd_diag *diag);

/* As ptd_addrfilter_to_config, but a file range of a file that @maps does
 * not map executable at all is not an error (when @ret_pending is not
 * NULL): it is pending, as the kernel keeps a filter on a file the process
 * has not mapped yet.  Its cfg is set with a = b = 0, so a filter range
 * holds tracing off and a TraceStop range never fires until it resolves;
 * bit i of *ret_pending is set for range i.  Resolve again when the
 * process maps more (a dlopen) or execs.  With @root (e.g. "/proc/PID/root"),
 * a pending range's file must exist there, as the kernel requires of a
 * filter's file.
 * Returns 0, or the errors of ptd_addrfilter_to_config; -PTD_ENOIMAGE
 *   also for a pending range's file that does not exist ("column N:
 *   'FILE': No such file or directory"). */
int ptd_addrfilter_resolve(const struct ptd_addrfilter *f,
			   const struct ptd_maps *maps, const char *root,
			   struct pt_conf_addr_filter *ret,
			   unsigned *ret_pending, struct ptd_diag *diag);

/* Hand @kernel_string to the event @fd with PERF_EVENT_IOC_SET_FILTER.
 * Returns 0.
 * Returns -EINVAL if @kernel_string is NULL.
 * Returns -errno from the ioctl with a message: EINVAL (the kernel refused
 *   the string: a user-space range needs a regular file (mapped or
 *   not: the kernel resolves it when the process maps it) and a
 *   per-thread event, a kernel range needs kernel tracing, too many
 *   filters), ENOENT (no such file),
 *   EOPNOTSUPP (this PMU cannot filter, or a range without size), others
 *   named by strerror. */
int ptd_addrfilter_apply(int fd, const char *kernel_string,
			 struct ptd_diag *diag);

#endif
