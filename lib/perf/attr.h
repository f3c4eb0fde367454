/* SPDX-License-Identifier: MIT */
/*
 * The perf_event_attr for an intel_pt event, built from the PMU's own sysfs
 * description (perf/pmu.h) and checked against its caps, and the libipt
 * decoder configuration that matches it.
 *
 * Bit positions always come from the PMU's format/ files: nothing here
 * hard-codes where "tsc" or "mtc_period" live.
 */
#ifndef PTD_PERF_ATTR_H
#define PTD_PERF_ATTR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/perf_event.h>

#include <intel-pt.h>

#include "common/diag.h"
#include "perf/pmu.h"

/* What to trace and which packets to ask for.  Fields map to the format
 * names in parentheses. */
struct ptd_pt_options {
	bool user;		/* trace ring 3 (clears exclude_user) */
	bool kernel;		/* trace ring 0: needs root or CAP_PERFMON
				 * when the event is opened (the kernel
				 * checks; ptd does not) */
	bool tsc;		/* TSC packets (tsc) */
	bool mtc;		/* MTC packets (mtc), period below */
	unsigned mtc_period;	/* (mtc_period) MTC every 2^n CTC ticks;
				 * must be in caps/mtc_periods */
	bool cyc;		/* CYC packets (cyc), threshold below */
	unsigned cyc_thresh;	/* (cyc_thresh) must be in
				 * caps/cycle_thresholds */
	bool noretcomp;		/* no return compression (noretcomp) */
	int psb_period;		/* (psb_period) PSB every 2^(n+11) bytes;
				 * -1 = the hardware default (field left 0);
				 * must be in caps/psb_periods */
	bool branch;		/* branch tracing (branch); on by default */
	bool pwr_evt;		/* power event trace (pwr_evt) */
	bool ptw;		/* PTWRITE packets (ptw) */
	bool inherit;		/* follow children/threads (attr.inherit; the
				 * kernel refuses to mmap inherited per-task
				 * events: use per-CPU events for this) */
};

/* perf's defaults for intel_pt//u: user only, tsc=1, noretcomp=0, branch=1,
 * mtc off (mtc_period 3 if switched on), cyc off, psb_period default,
 * no pwr_evt/ptw, no inherit. */
struct ptd_pt_options ptd_pt_options_default(void);

/* Build the attr for an intel_pt event with @o on @pmu.
 * @aux_size is the AUX area size in bytes (for aux_watermark: a quarter of
 * it in full-trace mode, 0 in @snapshot mode).  The attr is disabled=1
 * (the caller enables it after mapping the buffers), enable_on_exec=0,
 * exclude_hv=1, sample_id_all=1 with sample_type TID|TIME|CPU|IDENTIFIER.
 * Returns 0 and fills *ret (fully; zeroed first) on success.
 * Returns -EINVAL if an argument is NULL, or @o traces neither user nor
 *   kernel, or the watermark does not fit its u32 field.
 * Returns -PTD_EUNSUPPORTED if an option needs a format field the PMU does
 *   not have ("this kernel's intel_pt has no 'cyc' format"), or a cap the
 *   CPU lacks or reports as 0 (mtc needs caps/mtc, cyc caps/psb_cyc,
 *   psb_period caps/psb_cyc, ptw caps/ptwrite, pwr_evt
 *   caps/power_event_trace); the message names the cap.
 * Returns -ERANGE if a value does not fit its format field's width, or is
 *   not in the cap's bitmask of valid values (caps/mtc_periods,
 *   caps/cycle_thresholds, caps/psb_periods); the message lists the valid
 *   values. */
int ptd_pt_attr_build(const struct ptd_pt_pmu *pmu,
		      const struct ptd_pt_options *o, size_t aux_size,
		      bool snapshot, struct perf_event_attr *ret,
		      struct ptd_diag *diag);

/* Write every field of @a, one "name value" per line (numbers in hex for
 * bit masks and config words, decimal otherwise), in declaration order,
 * into @buf of @cap bytes (NUL-terminated if @cap > 0).
 * Returns the length the full text needs (without NUL), as snprintf: a
 * return >= @cap means it was truncated. */
size_t ptd_perf_attr_format(const struct perf_event_attr *a, char *buf,
			    size_t cap);

/* Fill the timing and errata parts of libipt's config from the PMU:
 * cpu = *@cpu and errata from pt_cpu_errata() (none for an unknown CPU),
 * nom_freq = max_nonturbo_ratio, cpuid_0x15_eax/ebx = tsc_art_ratio den/num,
 * mtc_freq = the mtc_period field of @config_word (the attr.config the
 * event was opened with; 0 if MTC is off or the PMU has no such field).
 * Other fields of @ret are left as they are (call pt_config_init first).
 * Returns 0.
 * Returns -EINVAL if an argument is NULL.
 * Returns -ERANGE if max_nonturbo_ratio does not fit libipt's u8 nom_freq.
 */
int ptd_pt_config_from_pmu(const struct ptd_pt_pmu *pmu,
			   const struct pt_cpu *cpu, uint64_t config_word,
			   struct pt_config *ret);

#endif
