/* SPDX-License-Identifier: MIT */
/*
 * Names used in records.  Every enum is mapped by a switch without a
 * default, so -Wswitch-enum flags a value libipt or ptd adds later.
 */
#include "record/record.h"

#include "record/jsonw.h"

#include <string.h>

const char *ptd_rec_type_name(enum ptd_rec_type t)
{
	switch (t) {
	case PTD_REC_INSN:
		return "insn";
	case PTD_REC_BLOCK:
		return "block";
	case PTD_REC_EVENT:
		return "event";
	case PTD_REC_ERROR:
		return "error";
	case PTD_REC_NTYPES:
		break;
	}
	return NULL;
}

int ptd_rec_type_parse(const char *name)
{
	if (!name)
		return -1;
	for (int t = 0; t < PTD_REC_NTYPES; t++) {
		if (strcmp(name, ptd_rec_type_name((enum ptd_rec_type)t)) == 0)
			return t;
	}
	return -1;
}

const char *ptd_flag_name(unsigned bit)
{
	/* Indexed by bit number; the order is that of enum ptd_insn_flag. */
	static const char *const names[PTD_F_NFLAGS] = {
		"speculative", "truncated", "enabled", "disabled", "resumed",
		"interrupted", "resynced", "stopped", "aborted", "committed",
	};

	return bit < PTD_F_NFLAGS ? names[bit] : NULL;
}

const char *ptd_event_name(enum pt_event_type t)
{
	switch (t) {
	case ptev_enabled:
		return "enabled";
	case ptev_disabled:
		return "disabled";
	case ptev_async_disabled:
		return "async_disabled";
	case ptev_async_branch:
		return "async_branch";
	case ptev_paging:
		return "paging";
	case ptev_async_paging:
		return "async_paging";
	case ptev_overflow:
		return "overflow";
	case ptev_exec_mode:
		return "exec_mode";
	case ptev_tsx:
		return "tsx";
	case ptev_stop:
		return "stop";
	case ptev_vmcs:
		return "vmcs";
	case ptev_async_vmcs:
		return "async_vmcs";
	case ptev_exstop:
		return "exstop";
	case ptev_mwait:
		return "mwait";
	case ptev_pwre:
		return "pwre";
	case ptev_pwrx:
		return "pwrx";
	case ptev_ptwrite:
		return "ptwrite";
	case ptev_tick:
		return "tick";
	case ptev_cbr:
		return "cbr";
	case ptev_mnt:
		return "mnt";
	}
	return "unknown";
}

const char *ptd_mode_name(enum pt_exec_mode m)
{
	switch (m) {
	case ptem_64bit:
		return "64bit";
	case ptem_32bit:
		return "32bit";
	case ptem_16bit:
		return "16bit";
	case ptem_unknown:
		break;
	}
	return "unknown";
}

static const char *pterr_name(enum pt_error_code e)
{
	switch (e) {
	case pte_ok:
		return "ok";
	case pte_internal:
		return "internal";
	case pte_invalid:
		return "invalid";
	case pte_nosync:
		return "nosync";
	case pte_bad_opc:
		return "bad_opc";
	case pte_bad_packet:
		return "bad_packet";
	case pte_bad_context:
		return "bad_context";
	case pte_eos:
		return "eos";
	case pte_bad_query:
		return "bad_query";
	case pte_nomem:
		return "nomem";
	case pte_bad_config:
		return "bad_config";
	case pte_noip:
		return "noip";
	case pte_ip_suppressed:
		return "ip_suppressed";
	case pte_nomap:
		return "nomap";
	case pte_bad_insn:
		return "bad_insn";
	case pte_no_time:
		return "no_time";
	case pte_no_cbr:
		return "no_cbr";
	case pte_bad_image:
		return "bad_image";
	case pte_bad_lock:
		return "bad_lock";
	case pte_not_supported:
		return "not_supported";
	case pte_retstack_empty:
		return "retstack_empty";
	case pte_bad_retcomp:
		return "bad_retcomp";
	case pte_bad_status_update:
		return "bad_status_update";
	case pte_no_enable:
		return "no_enable";
	case pte_event_ignored:
		return "event_ignored";
	case pte_overflow:
		return "overflow";
	case pte_bad_file:
		return "bad_file";
	case pte_bad_cpu:
		return "bad_cpu";
	}
	return "unknown";
}

const char *ptd_pterr_name(int code)
{
	/* Accept -pte_x (what libipt returns) as well as pte_x. */
	long c = code < 0 ? -(long)code : (long)code;

	if (c > (long)pte_bad_cpu)
		return "unknown";
	return pterr_name((enum pt_error_code)c);
}

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
		RC_FIELD(u.insn.ip);
		RC_FIELD(u.insn.modoff);
		if (!str_eq(a->u.insn.module, b->u.insn.module))
			return "u.insn.module";
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
		return NULL;
	case PTD_REC_NTYPES:
		break;
	}
	return "type (invalid)";
#undef RC_FIELD
}
