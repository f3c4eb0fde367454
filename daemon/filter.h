/* SPDX-License-Identifier: MIT */
/*
 * What one subscriber wants to see: record kinds and a filter on them.
 *
 * A filter spec is what the client asked for (parsed by proto.c); a
 * compiled filter is the same thing prepared at subscribe time so that
 * ptd_filter_match costs a few compares per record on the decode thread.
 *
 * Semantics (doc/protocol.md, "subscribe"): every condition given must
 * hold; a list matches when any of its entries does.
 *  - kinds   the record's type is one of them;
 *  - tid     the record's thread is one of them (every kind);
 *  - ranges  [start, end) address ranges: an insn's ip lies in one, a
 *            block's [ip, end_ip] overlaps one;
 *  - iclass  an insn's class (a block's last instruction's class) is one
 *            of them;
 *  - module  the record's module name contains this substring.
 * ranges, iclass and module describe code: they select insn and block
 * records and let event and error records through (those are filtered by
 * kind and tid only).
 */
#ifndef PTD_DAEMON_FILTER_H
#define PTD_DAEMON_FILTER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "record/record.h"

#define PTD_FILTER_MAX_TIDS 64
#define PTD_FILTER_MAX_RANGES 64
#define PTD_FILTER_MAX_MODULE 256	/* bytes, with the NUL */

struct ptd_addr_range {
	uint64_t start;		/* first address */
	uint64_t end;		/* one past the last; start < end */
};

/* What the client asked for.  Zero-initialised means "everything" except
 * for kinds (0 there means none: set kinds). */
struct ptd_filter_spec {
	unsigned kinds;		/* PTD_REC_BIT()s */
	unsigned ntids;
	pid_t tids[PTD_FILTER_MAX_TIDS];
	unsigned nranges;
	struct ptd_addr_range ranges[PTD_FILTER_MAX_RANGES];
	uint32_t iclasses;	/* 1u << pt_insn_class; 0: any */
	char module[PTD_FILTER_MAX_MODULE];	/* "" : any */
	/* Not conditions: the fields its insn and block records carry
	 * (PTD_FIELD_BIT()s, record/record.h); 0: every field but sym.
	 * symbols: sym too (every field, or these and sym), from a session
	 * that has symbols (subscribe's "symbols"). */
	uint32_t fields;
	bool symbols;
	/* Not a condition either: the stream is binary frames
	 * (record/binframe.h; subscribe's "format": "binary"), not JSON
	 * lines; packed ("format": "packed"): binary, with runs of
	 * addresses as address frames. */
	bool binary;
	bool packed;
	/* Not conditions: counters snapshots (subscribe's "counters":
	 * {"every_ms", "top"}): the @counters_top most executed of each
	 * kind, every @counters_every_ms (0: the last one only). */
	uint32_t counters_top;
	uint32_t counters_every_ms;
};

/* The default kinds of a subscription: insn, event, error. */
#define PTD_FILTER_DEFAULT_KINDS                                              \
	(PTD_REC_BIT(PTD_REC_INSN) | PTD_REC_BIT(PTD_REC_EVENT) |             \
	 PTD_REC_BIT(PTD_REC_ERROR))

/* A compiled filter: tids and ranges sorted and merged, the module match
 * of the last module name remembered.  Used by one thread at a time. */
struct ptd_filter {
	struct ptd_filter_spec spec;	/* tids sorted, ranges sorted and
					 * merged */
	bool code_filter;		/* any of ranges, iclass, module */
	/* The module match of the last name seen: consecutive records
	 * mostly share a module.  A hit needs the same pointer and the same
	 * bytes (a pointer alone could be reused for another name). */
	const char *mod_ptr;		/* NULL: empty cache */
	size_t mod_len;
	char mod_name[PTD_FILTER_MAX_MODULE];
	bool mod_match;
	/* Decode thread: this subscriber takes the counters snapshot being
	 * fanned out (daemon/fanout.h ptd_fanout_counters_due), and when its
	 * next periodic one is due (CLOCK_MONOTONIC ms; 0: not yet set). */
	bool counters_due;
	uint64_t counters_next_ms;
};

/* Compile @spec into @ret.  Returns 0, or -EINVAL if @spec has more tids
 * or ranges than the limits, an empty range (start >= end), or no kinds. */
int ptd_filter_compile(const struct ptd_filter_spec *spec,
		       struct ptd_filter *ret);

/* Does @r pass @f?  Cheap: no allocation, no locks. */
bool ptd_filter_match(struct ptd_filter *f, const struct ptd_record *r);

/* Name of an instruction class as records print it ("call", ...), and its
 * inverse (-1 if @name is not one). */
int ptd_iclass_parse(const char *name);

#endif
