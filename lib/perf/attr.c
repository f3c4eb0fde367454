/* SPDX-License-Identifier: MIT */
/*
 * perf_event_attr for intel_pt, placed through the PMU's format fields and
 * checked against its caps the way the kernel's pt_event_valid() does.
 */
#include "perf/attr.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/strutil.h"

struct ptd_pt_options ptd_pt_options_default(void)
{
	struct ptd_pt_options o;

	memset(&o, 0, sizeof(o));
	o.user = true;
	o.tsc = true;
	o.mtc_period = 3;	/* perf's default when mtc is switched on */
	o.psb_period = -1;
	o.branch = true;
	return o;
}

static __u64 *config_word(struct perf_event_attr *a,
			     enum ptd_pt_config_word w)
{
	switch (w) {
	case PTD_PT_CONFIG:
		return &a->config;
	case PTD_PT_CONFIG1:
		return &a->config1;
	case PTD_PT_CONFIG2:
		return &a->config2;
	}
	return &a->config;
}

/* Put @value into format field @name.  A field the PMU does not describe
 * or a value wider than the field is refused. */
static int set_field(const struct ptd_pt_pmu *pmu, struct perf_event_attr *a,
		     const char *name, uint64_t value, struct ptd_diag *diag)
{
	const struct ptd_pt_format *f = ptd_pt_pmu_format(pmu, name);
	unsigned width;
	uint64_t mask;

	if (!f)
		return ptd_diagf(diag, -PTD_EUNSUPPORTED,
				 "this kernel's intel_pt PMU has no '%s' format "
				 "field (no format/%s in sysfs)", name, name);
	width = ptd_pt_format_width(f);
	mask = width == 64 ? UINT64_MAX : (UINT64_C(1) << width) - 1;
	if (value > mask)
		return ptd_diagf(diag, -ERANGE,
				 "%s=%" PRIu64 " does not fit its %u-bit field "
				 "(at most %" PRIu64 ")", name, value, width,
				 mask);
	*config_word(a, f->word) |= value << f->lo;
	return 0;
}

/* The cap @name must be present and non-zero. */
static int need_cap(const struct ptd_pt_pmu *pmu, const char *option,
		    const char *cap, struct ptd_diag *diag)
{
	uint64_t v = 0;

	if (ptd_pt_pmu_cap(pmu, cap, &v) < 0 || v == 0)
		return ptd_diagf(diag, -PTD_EUNSUPPORTED,
				 "%s is not supported by this CPU: caps/%s is "
				 "%s", option, cap,
				 v == 0 && ptd_pt_pmu_cap(pmu, cap, NULL) == 0
					 ? "0" : "missing");
	return 0;
}

/* List the set bits of @mask into @buf as "0, 3, 6". */
static void list_bits(uint64_t mask, char *buf, size_t cap)
{
	size_t len = 0;
	unsigned b;

	buf[0] = '\0';
	for (b = 0; b < 64 && len < cap; b++) {
		int n;

		if (!(mask & (UINT64_C(1) << b)))
			continue;
		n = snprintf(buf + len, cap - len, "%s%u", len ? ", " : "", b);
		if (n < 0)
			break;
		len += (size_t)n;
	}
	if (!buf[0])
		(void)snprintf(buf, cap, "none");
}

/* @value must be a bit set in caps/@cap.  The kernel always allows 0 for
 * cyc_thresh and psb_period (@zero_ok), not for mtc_period. */
static int check_in_mask(const struct ptd_pt_pmu *pmu, const char *option,
			 uint64_t value, const char *cap, bool zero_ok,
			 struct ptd_diag *diag)
{
	uint64_t mask = 0;
	char valid[256];

	if (zero_ok && value == 0)
		return 0;
	if (ptd_pt_pmu_cap(pmu, cap, &mask) < 0)
		return ptd_diagf(diag, -PTD_EUNSUPPORTED,
				 "%s=%" PRIu64 " cannot be checked: caps/%s "
				 "is missing", option, value, cap);
	if (value < 64 && (mask & (UINT64_C(1) << value)))
		return 0;
	list_bits(mask, valid, sizeof(valid));
	return ptd_diagf(diag, -ERANGE,
			 "%s=%" PRIu64 " is not supported by this CPU "
			 "(caps/%s = %" PRIx64 ": valid values are %s)",
			 option, value, cap, mask, valid);
}

static int build_timing(const struct ptd_pt_pmu *pmu,
			const struct ptd_pt_options *o,
			struct perf_event_attr *a, struct ptd_diag *diag)
{
	int err;

	if (o->tsc && (err = set_field(pmu, a, "tsc", 1, diag)) < 0)
		return err;
	if (o->mtc) {
		if ((err = need_cap(pmu, "mtc", "mtc", diag)) < 0 ||
		    (err = check_in_mask(pmu, "mtc_period", o->mtc_period,
					 "mtc_periods", false, diag)) < 0 ||
		    (err = set_field(pmu, a, "mtc", 1, diag)) < 0 ||
		    (err = set_field(pmu, a, "mtc_period", o->mtc_period,
				     diag)) < 0)
			return err;
	}
	if (o->cyc) {
		if ((err = need_cap(pmu, "cyc", "psb_cyc", diag)) < 0 ||
		    (err = check_in_mask(pmu, "cyc_thresh", o->cyc_thresh,
					 "cycle_thresholds", true, diag)) < 0 ||
		    (err = set_field(pmu, a, "cyc", 1, diag)) < 0 ||
		    (err = set_field(pmu, a, "cyc_thresh", o->cyc_thresh,
				     diag)) < 0)
			return err;
	}
	if (o->psb_period >= 0) {
		if ((err = need_cap(pmu, "psb_period", "psb_cyc", diag)) < 0 ||
		    (err = check_in_mask(pmu, "psb_period",
					 (uint64_t)o->psb_period,
					 "psb_periods", true, diag)) < 0 ||
		    (err = set_field(pmu, a, "psb_period",
				     (uint64_t)o->psb_period, diag)) < 0)
			return err;
	} else if (o->psb_period != -1) {
		return ptd_diagf(diag, -ERANGE,
				 "psb_period=%d: must be >= 0, or -1 for the "
				 "default", o->psb_period);
	}
	return 0;
}

/* Branch tracing: kernels with a "pt" format take BranchEn from "branch"
 * only when "pt" is set too (pt_event_valid(): BRANCH_EN without the
 * passthrough bit is refused), as perf sets both.  Older kernels have no
 * "pt" and always trace branches. */
static int build_branch(const struct ptd_pt_pmu *pmu,
			const struct ptd_pt_options *o,
			struct perf_event_attr *a, struct ptd_diag *diag)
{
	int err;

	if (!ptd_pt_pmu_format(pmu, "pt")) {
		if (!o->branch)
			return ptd_diagf(diag, -PTD_EUNSUPPORTED,
					 "branch=0 needs the 'pt' format "
					 "field, which this kernel's intel_pt "
					 "PMU does not have");
		return 0;
	}
	if ((err = set_field(pmu, a, "pt", 1, diag)) < 0)
		return err;
	if (o->branch)
		return set_field(pmu, a, "branch", 1, diag);
	return 0;
}

static int build_config(const struct ptd_pt_pmu *pmu,
			const struct ptd_pt_options *o,
			struct perf_event_attr *a, struct ptd_diag *diag)
{
	int err;

	if ((err = build_branch(pmu, o, a, diag)) < 0 ||
	    (err = build_timing(pmu, o, a, diag)) < 0)
		return err;
	if (o->noretcomp && (err = set_field(pmu, a, "noretcomp", 1, diag)) < 0)
		return err;
	if (o->pwr_evt) {
		if ((err = need_cap(pmu, "pwr_evt", "power_event_trace",
				    diag)) < 0 ||
		    (err = set_field(pmu, a, "pwr_evt", 1, diag)) < 0)
			return err;
	}
	if (o->ptw) {
		if ((err = need_cap(pmu, "ptw", "ptwrite", diag)) < 0 ||
		    (err = set_field(pmu, a, "ptw", 1, diag)) < 0)
			return err;
	}
	return 0;
}

int ptd_pt_attr_build(const struct ptd_pt_pmu *pmu,
		      const struct ptd_pt_options *o, size_t aux_size,
		      bool snapshot, struct perf_event_attr *ret,
		      struct ptd_diag *diag)
{
	struct perf_event_attr a;
	int err;

	if (!pmu || !o || !ret)
		return ptd_diagf(diag, -EINVAL, "missing argument");
	if (!o->user && !o->kernel)
		return ptd_diagf(diag, -EINVAL,
				 "nothing to trace: neither user nor kernel");
	if (!snapshot && aux_size / 4 > UINT32_MAX)
		return ptd_diagf(diag, -EINVAL,
				 "AUX size %zu too large for aux_watermark",
				 aux_size);
	memset(&a, 0, sizeof(a));
	a.type = pmu->type;
	a.size = sizeof(a);
	err = build_config(pmu, o, &a, diag);
	if (err < 0)
		return err;
	a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
			PERF_SAMPLE_IDENTIFIER;
	a.disabled = 1;
	a.inherit = o->inherit;
	a.exclude_user = !o->user;
	/* Kernel tracing needs root or CAP_PERFMON; perf_event_open says
	 * so with EACCES/EPERM. */
	a.exclude_kernel = !o->kernel;
	a.exclude_hv = 1;
	a.enable_on_exec = 0;
	a.sample_id_all = 1;
	/* Full-trace mode: wake the reader at a quarter of the AUX area, or
	 * the second AUX record of every trace comes TRUNCATED (perf commit
	 * 874fc35cdd55).  Snapshot mode is read on demand. */
	a.aux_watermark = snapshot ? 0 : (uint32_t)(aux_size / 4);
	*ret = a;
	return 0;
}

/* ---- text form, for golden files ---- */

struct out {
	char *buf;
	size_t cap;
	size_t len;
};

static void outf(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void outf(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(o->len < o->cap ? o->buf + o->len : NULL,
		      o->len < o->cap ? o->cap - o->len : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->len += (size_t)n;
}

#define DEC(name) outf(&o, #name " %" PRIu64 "\n", (uint64_t)a->name)
#define HEX(name) outf(&o, #name " 0x%" PRIx64 "\n", (uint64_t)a->name)

size_t ptd_perf_attr_format(const struct perf_event_attr *a, char *buf,
			    size_t cap)
{
	struct out o = { buf, cap, 0 };

	if (cap > 0)
		buf[0] = '\0';
	DEC(type); DEC(size); HEX(config); DEC(sample_period);
	HEX(sample_type); HEX(read_format);
	DEC(disabled); DEC(inherit); DEC(pinned); DEC(exclusive);
	DEC(exclude_user); DEC(exclude_kernel); DEC(exclude_hv);
	DEC(exclude_idle); DEC(mmap); DEC(comm); DEC(freq);
	DEC(inherit_stat); DEC(enable_on_exec); DEC(task); DEC(watermark);
	DEC(precise_ip); DEC(mmap_data); DEC(sample_id_all);
	DEC(exclude_host); DEC(exclude_guest); DEC(exclude_callchain_kernel);
	DEC(exclude_callchain_user); DEC(mmap2); DEC(comm_exec);
	DEC(use_clockid); DEC(context_switch); DEC(write_backward);
	DEC(namespaces); DEC(ksymbol); DEC(bpf_event); DEC(aux_output);
	DEC(cgroup); DEC(text_poke); DEC(build_id); DEC(inherit_thread);
	DEC(remove_on_exec); DEC(sigtrap); DEC(__reserved_1);
	DEC(wakeup_events); DEC(bp_type); HEX(config1); HEX(config2);
	HEX(branch_sample_type); HEX(sample_regs_user); DEC(sample_stack_user);
	DEC(clockid); HEX(sample_regs_intr); DEC(aux_watermark);
	DEC(sample_max_stack); DEC(__reserved_2); DEC(aux_sample_size);
	DEC(__reserved_3); HEX(sig_data);
	return o.len;
}

/* ---- libipt decoder config ---- */

int ptd_pt_config_from_pmu(const struct ptd_pt_pmu *pmu,
			   const struct pt_cpu *cpu, uint64_t config_word_val,
			   struct pt_config *ret)
{
	const struct ptd_pt_format *mtc, *period;
	struct pt_errata errata;
	uint8_t mtc_freq = 0;

	if (!pmu || !cpu || !ret)
		return -EINVAL;
	if (pmu->has_max_nonturbo_ratio && pmu->max_nonturbo_ratio > UINT8_MAX)
		return -ERANGE;
	/* An unknown CPU (another vendor, a model libipt does not list) has
	 * no known errata: leave them all clear. */
	memset(&errata, 0, sizeof(errata));
	if (pt_cpu_errata(&errata, cpu) < 0)
		memset(&errata, 0, sizeof(errata));
	mtc = ptd_pt_pmu_format(pmu, "mtc");
	period = ptd_pt_pmu_format(pmu, "mtc_period");
	if (mtc && period && mtc->word == PTD_PT_CONFIG &&
	    period->word == PTD_PT_CONFIG &&
	    (config_word_val >> mtc->lo) & 1) {
		unsigned w = ptd_pt_format_width(period);

		mtc_freq = (uint8_t)((config_word_val >> period->lo) &
				     ((UINT64_C(1) << (w > 8 ? 8 : w)) - 1));
	}
	ret->cpu = *cpu;
	ret->errata = errata;
	ret->nom_freq = pmu->has_max_nonturbo_ratio
				? (uint8_t)pmu->max_nonturbo_ratio : 0;
	/* tsc_art_ratio is CPUID.15H EBX:EAX (numerator:denominator). */
	if (pmu->has_tsc_art_ratio) {
		ret->cpuid_0x15_eax = pmu->tsc_art_den;
		ret->cpuid_0x15_ebx = pmu->tsc_art_num;
	}
	ret->mtc_freq = mtc_freq;
	return 0;
}
