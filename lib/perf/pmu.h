/* SPDX-License-Identifier: MIT */
/*
 * The intel_pt PMU as the kernel describes it in sysfs, the CPU identity
 * libipt needs for its errata, and the memory-lock limits perf buffers are
 * charged against.
 *
 * sysfs layout (arch/x86/events/intel/pt.c, kernel/events/core.c):
 *   DIR/type                dynamic PMU type for perf_event_attr.type ("%d")
 *   DIR/format/NAME         "config:N", "config:N-M" (also config1/config2):
 *                           where option NAME lives in attr.config*
 *   DIR/caps/NAME           capability value, printed by the kernel as hex
 *                           without "0x" ("%x"); *_periods and
 *                           cycle_thresholds are bitmasks of valid values
 *   DIR/nr_addr_filters     number of address ranges ("%d"; optional)
 *   DIR/max_nonturbo_ratio  MSR_PLATFORM_INFO[15:8] ("%u"; optional)
 *   DIR/tsc_art_ratio       CPUID 0x15 "EBX:EAX" ("%u:%u"; optional)
 * Every file must hold exactly one value followed by one newline (a missing
 * final newline is accepted); anything else is refused.
 */
#ifndef PTD_PERF_PMU_H
#define PTD_PERF_PMU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <intel-pt.h>

#include "common/diag.h"

#define PTD_PT_PMU_DEFAULT_DIR "/sys/bus/event_source/devices/intel_pt"

/* Limits on what a (possibly fake) sysfs tree can make us hold; more
 * entries than this are refused with -PTD_ELIMIT. */
#define PTD_PT_PMU_MAX_FORMATS 64
#define PTD_PT_PMU_MAX_CAPS 64
#define PTD_PT_PMU_NAME_MAX 48	/* longest file name + NUL */

/* Which perf_event_attr word a format field lives in. */
enum ptd_pt_config_word {
	PTD_PT_CONFIG,		/* attr.config */
	PTD_PT_CONFIG1,		/* attr.config1 */
	PTD_PT_CONFIG2,		/* attr.config2 */
};

/* One format/NAME file: bits lo..hi (inclusive, lo <= hi <= 63) of @word. */
struct ptd_pt_format {
	char name[PTD_PT_PMU_NAME_MAX];
	enum ptd_pt_config_word word;
	uint8_t lo;
	uint8_t hi;
};

/* One caps/NAME file; unknown capabilities are kept by name too. */
struct ptd_pt_cap {
	char name[PTD_PT_PMU_NAME_MAX];
	uint64_t value;
};

/* Everything probed from the PMU directory.  Plain data: copy it freely,
 * nothing to free.  formats[] and caps[] are sorted by name. */
struct ptd_pt_pmu {
	uint32_t type;
	struct ptd_pt_format formats[PTD_PT_PMU_MAX_FORMATS];
	size_t nformats;
	struct ptd_pt_cap caps[PTD_PT_PMU_MAX_CAPS];
	size_t ncaps;
	uint32_t nr_addr_filters;	/* 0 if the file is absent */
	bool has_max_nonturbo_ratio;
	uint32_t max_nonturbo_ratio;
	/* tsc_art_ratio "num:den" = CPUID 0x15 EBX:EAX; has_ is false when
	 * the file is absent; the kernel prints "0:0" when unknown. */
	bool has_tsc_art_ratio;
	uint32_t tsc_art_num;
	uint32_t tsc_art_den;
};

/* Probe the intel_pt PMU at @dir (PTD_PT_PMU_DEFAULT_DIR in production).
 * type and format/ are required; caps/, nr_addr_filters,
 * max_nonturbo_ratio and tsc_art_ratio are optional (older kernels).
 * Returns 0 and fills *ret on success.
 * Returns -EINVAL if @dir or @ret is NULL.
 * Returns -PTD_ENOPT if @dir does not exist (the message names @dir and how
 *   to get Intel PT: BIOS, VM pass-through, or the software source).
 * Returns -PTD_EFORMAT naming the file and its content when a file is
 *   malformed or a required one is missing.
 * Returns -PTD_ELIMIT if format/ or caps/ holds more than the limits above
 *   or a name longer than PTD_PT_PMU_NAME_MAX - 1.
 * Returns -errno from opening/reading a file that exists. */
int ptd_pt_pmu_probe(const char *dir, struct ptd_pt_pmu *ret,
		     struct ptd_diag *diag);

/* The format field @name ("mtc_period"), or NULL if the PMU has none. */
const struct ptd_pt_format *ptd_pt_pmu_format(const struct ptd_pt_pmu *pmu,
					      const char *name);

/* The value of caps/@name.
 * Returns 0 and sets *ret, or -ENOENT (nothing written) if there is no such
 * cap. */
int ptd_pt_pmu_cap(const struct ptd_pt_pmu *pmu, const char *name,
		   uint64_t *ret);

/* Width in bits of a format field (hi - lo + 1). */
unsigned ptd_pt_format_width(const struct ptd_pt_format *f);

/* Read the CPU identity (vendor, family, model, stepping of the first
 * processor) from @cpuinfo_path ("/proc/cpuinfo"), as libipt's
 * pt_cpu_errata() wants it.  "GenuineIntel" is pcv_intel, any other vendor
 * pcv_unknown.  Fields are decimal; a field given twice with different
 * values within the first processor block is refused.
 * Returns 0 and fills *ret.
 * Returns -EINVAL if an argument is NULL.
 * Returns -PTD_EFORMAT (path:line, field) for a malformed or out-of-range
 *   field, or when one of the four fields is missing.
 * Returns -PTD_ELIMIT for a file over 16 MiB; -errno from reading. */
int ptd_pt_cpu_read(const char *cpuinfo_path, struct pt_cpu *ret,
		    struct ptd_diag *diag);

/* Check that @nbuffers buffers of @bytes_per_buffer each can be locked by
 * perf: the kernel charges them first to the per-user perf_event_mlock_kb
 * allowance (read from @procroot/sys/kernel/perf_event_mlock_kb; the
 * kernel scales it by the number of online CPUs and perf documents one page
 * per CPU as used by the data ring, so we count mlock_kb minus one page),
 * then to RLIMIT_MEMLOCK.  CAP_IPC_LOCK (capget, effective set) bypasses
 * both.  @procroot is "/proc" in production.
 * Returns 0 if it fits (or CAP_IPC_LOCK is held).
 * Returns -PTD_ELIMIT with a message naming the limit, the sizes and how to
 *   raise it (sysctl kernel.perf_event_mlock_kb=..., ulimit -l /
 *   LimitMEMLOCK=, or CAP_IPC_LOCK).
 * Returns -PTD_EFORMAT if perf_event_mlock_kb is malformed.
 * Returns -EOVERFLOW if the request overflows; -errno from reading. */
int ptd_perf_mlock_check(size_t bytes_per_buffer, unsigned nbuffers,
			 const char *procroot, struct ptd_diag *diag);

#endif
