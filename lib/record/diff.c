/* SPDX-License-Identifier: MIT */
/*
 * Two records compared field for field: the oracle of the differential
 * tests (block path vs insn path, stream vs whole-trace decode).  Event
 * variants are compared through their JSON lines, so this sits above both
 * record.c and jsonw.c.
 */
#include "record/diff.h"

#include <string.h>

#include "record/jsonw.h"

static bool str_eq(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

const char *ptd_record_diff(const struct ptd_record *a,
			    const struct ptd_record *b, unsigned flags)
{
	bool time = !(flags & PTD_DIFF_IGNORE_TIME);

#define RC_FIELD(f)                                                           \
	do {                                                                  \
		if (a->f != b->f)                                             \
			return #f;                                            \
	} while (0)
	RC_FIELD(type);
	RC_FIELD(pid);
	RC_FIELD(tid);
	if (time) {
		RC_FIELD(has_tsc);
		if (a->has_tsc)
			RC_FIELD(tsc);
		RC_FIELD(has_time);
		if (a->has_time)
			RC_FIELD(time);
		RC_FIELD(has_wall);
		if (a->has_wall)
			RC_FIELD(wall);
	}
	switch (a->type) {
	case PTD_REC_INSN:
	case PTD_REC_FIRST_EXEC:
		RC_FIELD(u.insn.ip);
		RC_FIELD(u.insn.modoff);
		if (!str_eq(a->u.insn.module, b->u.insn.module))
			return "u.insn.module";
		if (!str_eq(a->u.insn.sym, b->u.insn.sym))
			return "u.insn.sym";
		if (a->u.insn.sym)
			RC_FIELD(u.insn.symoff);
		RC_FIELD(u.insn.isid);
		RC_FIELD(u.insn.mode);
		RC_FIELD(u.insn.iclass);
		RC_FIELD(u.insn.flags);
		RC_FIELD(u.insn.size);
		if (memcmp(a->u.insn.raw, b->u.insn.raw,
			   a->u.insn.size <= sizeof(a->u.insn.raw)
				   ? a->u.insn.size
				   : sizeof(a->u.insn.raw)))
			return "u.insn.raw";
		return NULL;
	case PTD_REC_BLOCK:
		RC_FIELD(u.block.ip);
		RC_FIELD(u.block.end_ip);
		RC_FIELD(u.block.modoff);
		if (!str_eq(a->u.block.module, b->u.block.module))
			return "u.block.module";
		if (!str_eq(a->u.block.sym, b->u.block.sym))
			return "u.block.sym";
		if (a->u.block.sym)
			RC_FIELD(u.block.symoff);
		RC_FIELD(u.block.isid);
		RC_FIELD(u.block.mode);
		RC_FIELD(u.block.iclass);
		RC_FIELD(u.block.ninsn);
		RC_FIELD(u.block.flags);
		if (a->u.block.flags & PTD_F_TRUNCATED) {
			RC_FIELD(u.block.size);
			if (memcmp(a->u.block.raw, b->u.block.raw,
				   a->u.block.size <= sizeof(a->u.block.raw)
					   ? a->u.block.size
					   : sizeof(a->u.block.raw)))
				return "u.block.raw";
		}
		return NULL;
	case PTD_REC_EVENT: {
		/* Every variant field is in the JSON line; compare that
		 * (without the time when it is ignored). */
		char la[PTD_JSON_MAX_RECORD], lb[PTD_JSON_MAX_RECORD];
		struct ptd_record ca = *a, cb = *b;
		size_t na, nb;

		RC_FIELD(u.event.offset);
		RC_FIELD(u.event.ev.type);
		RC_FIELD(u.event.ev.ip_suppressed);
		RC_FIELD(u.event.ev.status_update);
		if (time) {
			RC_FIELD(u.event.ev.has_tsc);
			if (a->u.event.ev.has_tsc)
				RC_FIELD(u.event.ev.tsc);
		}
		RC_FIELD(u.event.ev.lost_mtc);
		RC_FIELD(u.event.ev.lost_cyc);
		if (!time) {
			ca.has_tsc = cb.has_tsc = false;
			ca.has_time = cb.has_time = false;
			ca.has_wall = cb.has_wall = false;
			ca.u.event.ev.has_tsc = cb.u.event.ev.has_tsc = 0;
		}
		na = ptd_json_record(la, sizeof(la), &ca);
		nb = ptd_json_record(lb, sizeof(lb), &cb);
		if (na != nb || memcmp(la, lb, na))
			return "u.event.ev.variant";
		return NULL;
	}
	case PTD_REC_CALL:
		RC_FIELD(u.call.kind);
		RC_FIELD(u.call.depth);
		RC_FIELD(u.call.frames);
		RC_FIELD(u.call.flags);
		RC_FIELD(u.call.from);
		RC_FIELD(u.call.to);
		if (!str_eq(a->u.call.sym, b->u.call.sym))
			return "u.call.sym";
		if (a->u.call.sym)
			RC_FIELD(u.call.symoff);
		if (!str_eq(a->u.call.reason, b->u.call.reason))
			return "u.call.reason";
		return NULL;
	case PTD_REC_COUNTERS:
		RC_FIELD(u.counters.of);
		RC_FIELD(u.counters.rank);
		RC_FIELD(u.counters.count);
		RC_FIELD(u.counters.ninsn);
		RC_FIELD(u.counters.uncounted);
		RC_FIELD(u.counters.end_ip);
		RC_FIELD(u.counters.insn.ip);
		RC_FIELD(u.counters.insn.isid);
		RC_FIELD(u.counters.insn.mode);
		RC_FIELD(u.counters.insn.size);
		if (a->u.counters.insn.size > pt_max_insn_size ||
		    memcmp(a->u.counters.insn.raw, b->u.counters.insn.raw,
			   a->u.counters.insn.size))
			return "u.counters.insn.raw";
		if (!str_eq(a->u.counters.insn.module,
			    b->u.counters.insn.module))
			return "u.counters.insn.module";
		if (!str_eq(a->u.counters.insn.sym, b->u.counters.insn.sym))
			return "u.counters.insn.sym";
		return NULL;
	case PTD_REC_TRACE:
	case PTD_REC_TRACE_WITHDRAWN:
		RC_FIELD(u.trace.id);
		RC_FIELD(u.trace.head);
		RC_FIELD(u.trace.nblocks);
		RC_FIELD(u.trace.ninsn);
		RC_FIELD(u.trace.modoff);
		RC_FIELD(u.trace.isid);
		RC_FIELD(u.trace.mode);
		RC_FIELD(u.trace.at);
		for (uint32_t i = 0; i < a->u.trace.nblocks; i++) {
			if (a->u.trace.blocks[i] != b->u.trace.blocks[i])
				return "u.trace.blocks";
		}
		if (!str_eq(a->u.trace.module, b->u.trace.module))
			return "u.trace.module";
		if (!str_eq(a->u.trace.sym, b->u.trace.sym))
			return "u.trace.sym";
		if (!str_eq(a->u.trace.end, b->u.trace.end))
			return "u.trace.end";
		if (!str_eq(a->u.trace.reason, b->u.trace.reason))
			return "u.trace.reason";
		return NULL;
	case PTD_REC_ERROR:
		RC_FIELD(u.error.code);
		RC_FIELD(u.error.ptd_code);
		RC_FIELD(u.error.offset);
		RC_FIELD(u.error.ip_valid);
		if (a->u.error.ip_valid)
			RC_FIELD(u.error.ip);
		if (!str_eq(a->u.error.context, b->u.error.context))
			return "u.error.context";
		RC_FIELD(u.error.skipped);
		if (!str_eq(a->u.error.detail, b->u.error.detail))
			return "u.error.detail";
		return NULL;
	case PTD_REC_IMAGE:
		RC_FIELD(u.image.start);
		RC_FIELD(u.image.end);
		RC_FIELD(u.image.exec);
		return NULL;
	case PTD_REC_NTYPES:
		break;
	}
	return "type (invalid)";
#undef RC_FIELD
}
