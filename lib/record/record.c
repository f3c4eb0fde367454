/* SPDX-License-Identifier: MIT */
/*
 * Names used in records.  Every enum is mapped by a switch without a
 * default, so -Wswitch-enum flags a value libipt or ptd adds later.
 */
#include "record/record.h"

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
	case PTD_REC_CALL:
		return "call";
	case PTD_REC_FIRST_EXEC:
		return "first_exec";
	case PTD_REC_COUNTERS:
		return "counters";
	case PTD_REC_TRACE:
		return "trace";
	case PTD_REC_TRACE_WITHDRAWN:
		return "trace_withdrawn";
	case PTD_REC_NTYPES:
	case PTD_REC_IMAGE:
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

const char *ptd_field_name(enum ptd_field f)
{
	switch (f) {
	case PTD_FIELD_TYPE:
		return "type";
	case PTD_FIELD_PID:
		return "pid";
	case PTD_FIELD_TID:
		return "tid";
	case PTD_FIELD_IP:
		return "ip";
	case PTD_FIELD_END_IP:
		return "end_ip";
	case PTD_FIELD_NINSN:
		return "ninsn";
	case PTD_FIELD_SIZE:
		return "size";
	case PTD_FIELD_RAW:
		return "raw";
	case PTD_FIELD_ICLASS:
		return "iclass";
	case PTD_FIELD_MODE:
		return "mode";
	case PTD_FIELD_ISID:
		return "isid";
	case PTD_FIELD_MODULE:
		return "module";
	case PTD_FIELD_OFFSET:
		return "offset";
	case PTD_FIELD_SYM:
		return "sym";
	case PTD_FIELD_FLAGS:
		return "flags";
	case PTD_FIELD_TSC:
		return "tsc";
	case PTD_FIELD_TIME:
		return "time";
	case PTD_FIELD_WALL:
		return "wall";
	case PTD_FIELD_N:
		break;
	}
	return NULL;
}

int ptd_field_parse(const char *name)
{
	if (!name)
		return -1;
	for (int f = 0; f < PTD_FIELD_N; f++) {
		if (strcmp(name, ptd_field_name((enum ptd_field)f)) == 0)
			return f;
	}
	return -1;
}

const char *ptd_field_list(void)
{
	return "type, pid, tid, ip, end_ip, ninsn, size, raw, iclass, mode, "
	       "isid, module, offset, sym, flags, tsc, time, wall";
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
