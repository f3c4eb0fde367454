/* SPDX-License-Identifier: MIT */
/*
 * The perf.data container, as perf 6.1 writes and reads it (the kernel's
 * tools/perf/Documentation/perf.data-file-format.txt, util/header.[ch],
 * util/event.h, util/auxtrace.h, util/intel-pt.h).  Nothing in the uapi
 * headers describes it, so these are plain C definitions of the on-disk
 * layouts, all in host (little-endian x86) byte order, all naturally
 * aligned with no hidden padding (each size is static_assert'ed).
 *
 * File mode:
 *
 *   struct ptd_perfdata_file_header          at offset 0
 *   attrs section: attr_size-byte entries, each a perf_event_attr of
 *     attr.size bytes followed by a ptd_perfdata_section naming that
 *     event's u64 sample ids (somewhere in the file)
 *   data section: the records (struct perf_event_header + body), each
 *     header.size bytes (a multiple of 8); a PERF_RECORD_AUXTRACE record is
 *     followed by its `size` bytes of trace data, NOT counted in
 *     header.size
 *   feature sections: right after the data section (data.offset +
 *     data.size), one ptd_perfdata_section per bit set in the header's
 *     feature bitmap, in increasing bit order, each naming that feature's
 *     body somewhere in the file
 *
 * Pipe mode: struct ptd_perfdata_pipe_header, then records only; the attrs
 * come as PERF_RECORD_HEADER_ATTR records and features as
 * PERF_RECORD_HEADER_FEATURE records.
 */
#ifndef PTD_PERFDATA_FORMAT_H
#define PTD_PERFDATA_FORMAT_H

#include <assert.h>
#include <linux/perf_event.h>
#include <stdint.h>

/* "PERFILE2" read as a little-endian u64 (the swapped value means the file
 * was written on a big-endian host: ptd refuses it). */
#define PTD_PERFDATA_MAGIC 0x32454c4946524550ull
#define PTD_PERFDATA_MAGIC_SWAPPED 0x50455246494c4532ull

/* The perf_event_attr size perf 6.1 writes and reads (PERF_ATTR_SIZE_VER7:
 * up to sig_data).  perf refuses an attr.size larger than its own; an
 * older, smaller one is accepted (the missing tail is zero). */
#define PTD_PERFDATA_ATTR_SIZE 128u
#define PTD_PERFDATA_ATTR_SIZE_VER0 64u

/* Feature bitmap: 256 bits. */
#define PTD_PERFDATA_FEAT_BITS 256u

struct ptd_perfdata_section {
	uint64_t offset;	/* from the start of the file */
	uint64_t size;		/* bytes */
};
static_assert(sizeof(struct ptd_perfdata_section) == 16, "section");

struct ptd_perfdata_file_header {
	uint64_t magic;		/* PTD_PERFDATA_MAGIC */
	uint64_t size;		/* sizeof(this) = 104 */
	uint64_t attr_size;	/* one attrs entry: attr.size + 16 */
	struct ptd_perfdata_section attrs;
	struct ptd_perfdata_section data;
	struct ptd_perfdata_section event_types;	/* unused, 0 */
	uint64_t features[PTD_PERFDATA_FEAT_BITS / 64];	/* bit N of word
							 * N / 64 */
};
static_assert(sizeof(struct ptd_perfdata_file_header) == 104, "header");

struct ptd_perfdata_pipe_header {
	uint64_t magic;		/* PTD_PERFDATA_MAGIC */
	uint64_t size;		/* sizeof(this) = 16 */
};
static_assert(sizeof(struct ptd_perfdata_pipe_header) == 16, "pipe header");

/* One attrs entry as perf 6.1 writes it: a 128-byte attr (attr.size says
 * how much of it the file holds: a reader must honour attr.size, and
 * header.attr_size, not this struct's size, strides the entries). */
struct ptd_perfdata_file_attr {
	uint8_t attr[PTD_PERFDATA_ATTR_SIZE];	/* struct perf_event_attr */
	struct ptd_perfdata_section ids;	/* u64 ids of this event */
};
static_assert(sizeof(struct ptd_perfdata_file_attr) == 144, "file attr");
static_assert(sizeof(struct perf_event_attr) >= PTD_PERFDATA_ATTR_SIZE,
	      "uapi perf_event_attr older than perf 6.1's");

/* Feature numbers (bits of the header's feature bitmap). */
enum ptd_perfdata_feature {
	PTD_PERFDATA_HEADER_RESERVED = 0,
	PTD_PERFDATA_HEADER_TRACING_DATA = 1,
	PTD_PERFDATA_HEADER_BUILD_ID = 2,
	PTD_PERFDATA_HEADER_HOSTNAME = 3,
	PTD_PERFDATA_HEADER_OSRELEASE = 4,
	PTD_PERFDATA_HEADER_VERSION = 5,
	PTD_PERFDATA_HEADER_ARCH = 6,
	PTD_PERFDATA_HEADER_NRCPUS = 7,
	PTD_PERFDATA_HEADER_CPUDESC = 8,
	PTD_PERFDATA_HEADER_CPUID = 9,
	PTD_PERFDATA_HEADER_TOTAL_MEM = 10,
	PTD_PERFDATA_HEADER_CMDLINE = 11,
	PTD_PERFDATA_HEADER_EVENT_DESC = 12,
	PTD_PERFDATA_HEADER_CPU_TOPOLOGY = 13,
	PTD_PERFDATA_HEADER_NUMA_TOPOLOGY = 14,
	PTD_PERFDATA_HEADER_BRANCH_STACK = 15,
	PTD_PERFDATA_HEADER_PMU_MAPPINGS = 16,
	PTD_PERFDATA_HEADER_GROUP_DESC = 17,
	PTD_PERFDATA_HEADER_AUXTRACE = 18,
	PTD_PERFDATA_HEADER_STAT = 19,
	PTD_PERFDATA_HEADER_CACHE = 20,
	PTD_PERFDATA_HEADER_SAMPLE_TIME = 21,
	PTD_PERFDATA_HEADER_MEM_TOPOLOGY = 22,
	PTD_PERFDATA_HEADER_CLOCKID = 23,
	PTD_PERFDATA_HEADER_DIR_FORMAT = 24,
	PTD_PERFDATA_HEADER_BPF_PROG_INFO = 25,
	PTD_PERFDATA_HEADER_BPF_BTF = 26,
	PTD_PERFDATA_HEADER_COMPRESSED = 27,
	PTD_PERFDATA_HEADER_CPU_PMU_CAPS = 28,
	PTD_PERFDATA_HEADER_CLOCK_DATA = 29,
	PTD_PERFDATA_HEADER_HYBRID_TOPOLOGY = 30,
	PTD_PERFDATA_HEADER_PMU_CAPS = 31,
	PTD_PERFDATA_HEADER_LAST_FEATURE = 32,
};

/*
 * Feature bodies.
 *
 * String features (HOSTNAME, OSRELEASE, VERSION, ARCH, CPUDESC, CPUID):
 *   u32 len; char str[len];   len counts the NUL and zero padding; perf
 *   pads to a multiple of PTD_PERFDATA_NAME_ALIGN.  CPUID on x86 is
 *   "GenuineIntel,FAMILY,MODEL,STEPPING" (decimal).
 * CMDLINE: u32 nr; then nr strings as above.
 * NRCPUS: struct ptd_perfdata_nrcpus.
 * CLOCKID: u64 clockid.
 * CLOCK_DATA: struct ptd_perfdata_clock_data.
 * AUXTRACE: the auxtrace index: struct ptd_perfdata_auxtrace_index, one u64
 *   count of all entries followed by that many entries (perf keeps them in
 *   groups of 256 in memory, but writes one count and all entries).
 * BUILD_ID: a sequence of struct ptd_perfdata_build_id entries, each
 *   header.size bytes, to the section end.
 */
#define PTD_PERFDATA_NAME_ALIGN 64u

struct ptd_perfdata_nrcpus {
	uint32_t nr_cpus_available;
	uint32_t nr_cpus_online;
};
static_assert(sizeof(struct ptd_perfdata_nrcpus) == 8, "nrcpus");

struct ptd_perfdata_clock_data {
	uint32_t version;	/* 1 */
	uint32_t clockid;
	uint64_t wall_clock_ns;
	uint64_t clockid_time_ns;
};
static_assert(sizeof(struct ptd_perfdata_clock_data) == 24, "clock data");

/* perf's in-memory group size (a file holds one count for all entries). */
#define PTD_PERFDATA_AUXTRACE_INDEX_GROUP 256u

struct ptd_perfdata_auxtrace_index_entry {
	uint64_t file_offset;	/* of the PERF_RECORD_AUXTRACE record */
	uint64_t sz;		/* that record's header.size (48), not
				 * including its trace data */
};
static_assert(sizeof(struct ptd_perfdata_auxtrace_index_entry) == 16,
	      "auxtrace index entry");

struct ptd_perfdata_auxtrace_index {
	uint64_t nr;		/* entries that follow */
	struct ptd_perfdata_auxtrace_index_entry entries[];
};
static_assert(sizeof(struct ptd_perfdata_auxtrace_index) == 8,
	      "auxtrace index");

/* A build-id entry (also the body of PERF_RECORD_HEADER_BUILD_ID).
 * header.type 0 in the feature section; header.misc PERF_RECORD_MISC_USER
 * (or _KERNEL...), | PTD_PERFDATA_MISC_BUILD_ID_SIZE when build_id_size is
 * valid; header.size = sizeof(this) + filename space, the filename
 * NUL-terminated and zero-padded to PTD_PERFDATA_NAME_ALIGN.  pid is -1 for
 * the host (perf's HOST_KERNEL_ID). */
#define PTD_PERFDATA_BUILD_ID_MAX 20u
#define PTD_PERFDATA_MISC_BUILD_ID_SIZE (1u << 15)

struct ptd_perfdata_build_id {
	struct perf_event_header header;
	int32_t pid;
	uint8_t build_id[PTD_PERFDATA_BUILD_ID_MAX];
	uint8_t build_id_size;	/* with PTD_PERFDATA_MISC_BUILD_ID_SIZE */
	uint8_t reserved1;
	uint16_t reserved2;
	char filename[];
};
static_assert(sizeof(struct ptd_perfdata_build_id) == 36, "build id");

/*
 * perf-tool record types (PERF_RECORD_USER_TYPE_START and up): written by
 * the perf tool into the data section, never by the kernel.
 */
enum ptd_perfdata_user_type {
	PTD_PERFDATA_RECORD_USER_TYPE_START = 64,
	PTD_PERFDATA_RECORD_HEADER_ATTR = 64,
	PTD_PERFDATA_RECORD_HEADER_EVENT_TYPE = 65,	/* deprecated */
	PTD_PERFDATA_RECORD_HEADER_TRACING_DATA = 66,
	PTD_PERFDATA_RECORD_HEADER_BUILD_ID = 67,
	PTD_PERFDATA_RECORD_FINISHED_ROUND = 68,
	PTD_PERFDATA_RECORD_ID_INDEX = 69,
	PTD_PERFDATA_RECORD_AUXTRACE_INFO = 70,
	PTD_PERFDATA_RECORD_AUXTRACE = 71,
	PTD_PERFDATA_RECORD_AUXTRACE_ERROR = 72,
	PTD_PERFDATA_RECORD_THREAD_MAP = 73,
	PTD_PERFDATA_RECORD_CPU_MAP = 74,
	PTD_PERFDATA_RECORD_STAT_CONFIG = 75,
	PTD_PERFDATA_RECORD_STAT = 76,
	PTD_PERFDATA_RECORD_STAT_ROUND = 77,
	PTD_PERFDATA_RECORD_EVENT_UPDATE = 78,
	PTD_PERFDATA_RECORD_TIME_CONV = 79,
	PTD_PERFDATA_RECORD_HEADER_FEATURE = 80,
	PTD_PERFDATA_RECORD_COMPRESSED = 81,
	PTD_PERFDATA_RECORD_FINISHED_INIT = 82,
	PTD_PERFDATA_RECORD_USER_TYPE_END = 83,
};

/* PERF_RECORD_HEADER_ATTR (pipe mode): header, a perf_event_attr of
 * attr.size bytes, then u64 ids to header.size. */

/* PERF_RECORD_HEADER_FEATURE (pipe mode): header, u64 feat_id, then the
 * feature body to header.size. */
struct ptd_perfdata_header_feature {
	struct perf_event_header header;
	uint64_t feat_id;
};
static_assert(sizeof(struct ptd_perfdata_header_feature) == 16,
	      "header feature");

/* PERF_RECORD_ID_INDEX: which cpu/thread each sample id belongs to. */
struct ptd_perfdata_id_index_entry {
	uint64_t id, idx, cpu, tid;
};
static_assert(sizeof(struct ptd_perfdata_id_index_entry) == 32,
	      "id index entry");

struct ptd_perfdata_id_index {
	struct perf_event_header header;
	uint64_t nr;
	struct ptd_perfdata_id_index_entry entries[];
};
static_assert(sizeof(struct ptd_perfdata_id_index) == 16, "id index");

/* PERF_RECORD_AUXTRACE_INFO: header.size = 16 + 8 * number of priv words. */
#define PTD_PERFDATA_AUXTRACE_INTEL_PT 1u
#define PTD_PERFDATA_AUXTRACE_INTEL_BTS 2u

struct ptd_perfdata_auxtrace_info {
	struct perf_event_header header;
	uint32_t type;		/* PTD_PERFDATA_AUXTRACE_* */
	uint32_t reserved;
	uint64_t priv[];
};
static_assert(sizeof(struct ptd_perfdata_auxtrace_info) == 16,
	      "auxtrace info");

/* Intel PT's priv[] words in perf 6.1's order.  perf 6.1 requires at least
 * the words before PER_CPU_MMAPS and reads a later word only if
 * header.size covers it.  After FILTER_STR_LEN come that many bytes of
 * address-filter string, NUL-padded to a multiple of 8. */
enum ptd_perfdata_intel_pt_priv {
	PTD_PERFDATA_INTEL_PT_PMU_TYPE = 0,
	PTD_PERFDATA_INTEL_PT_TIME_SHIFT,
	PTD_PERFDATA_INTEL_PT_TIME_MULT,
	PTD_PERFDATA_INTEL_PT_TIME_ZERO,
	PTD_PERFDATA_INTEL_PT_CAP_USER_TIME_ZERO,
	PTD_PERFDATA_INTEL_PT_TSC_BIT,
	PTD_PERFDATA_INTEL_PT_NORETCOMP_BIT,
	PTD_PERFDATA_INTEL_PT_HAVE_SCHED_SWITCH,
	PTD_PERFDATA_INTEL_PT_SNAPSHOT_MODE,
	PTD_PERFDATA_INTEL_PT_PER_CPU_MMAPS,
	PTD_PERFDATA_INTEL_PT_MTC_BIT,
	PTD_PERFDATA_INTEL_PT_MTC_FREQ_BITS,
	PTD_PERFDATA_INTEL_PT_TSC_CTC_N,
	PTD_PERFDATA_INTEL_PT_TSC_CTC_D,
	PTD_PERFDATA_INTEL_PT_CYC_BIT,
	PTD_PERFDATA_INTEL_PT_MAX_NONTURBO_RATIO,
	PTD_PERFDATA_INTEL_PT_FILTER_STR_LEN,
	PTD_PERFDATA_INTEL_PT_PRIV_MAX,		/* 17 words */
};
static_assert(PTD_PERFDATA_INTEL_PT_PRIV_MAX == 17, "intel_pt priv");

/* PERF_RECORD_AUXTRACE: header.size = 48; then `size` bytes of trace data
 * (a multiple of 8, zero-padded by the writer if need be) that header.size
 * does not count.  offset: where the data sits in the AUX area's stream;
 * idx: the AUX buffer (mmap) index; tid/cpu: whose (per-thread recording:
 * the thread, cpu (u32)-1). */
struct ptd_perfdata_auxtrace {
	struct perf_event_header header;
	uint64_t size;
	uint64_t offset;
	uint64_t reference;
	uint32_t idx;
	uint32_t tid;
	uint32_t cpu;
	uint32_t reserved;
};
static_assert(sizeof(struct ptd_perfdata_auxtrace) == 48, "auxtrace");

/* PERF_RECORD_AUXTRACE_ERROR (perf 6.1: fmt 2 adds machine_pid/vcpu). */
#define PTD_PERFDATA_AUXTRACE_ERROR_MSG 64u
struct ptd_perfdata_auxtrace_error {
	struct perf_event_header header;
	uint32_t type;
	uint32_t code;
	uint32_t cpu;
	uint32_t pid;
	uint32_t tid;
	uint32_t fmt;
	uint64_t ip;
	uint64_t time;
	char msg[PTD_PERFDATA_AUXTRACE_ERROR_MSG];
	uint32_t machine_pid;
	uint32_t vcpu;
};
static_assert(sizeof(struct ptd_perfdata_auxtrace_error) == 120,
	      "auxtrace error");

/* PERF_RECORD_TIME_CONV: TSC <-> perf time (perf_event_mmap_page's
 * time_* fields).  perf 6.1 writes all of it (56 bytes); older files stop
 * after time_zero (32 bytes). */
struct ptd_perfdata_time_conv {
	struct perf_event_header header;
	uint64_t time_shift;
	uint64_t time_mult;
	uint64_t time_zero;
	uint64_t time_cycles;
	uint64_t time_mask;
	uint8_t cap_user_time_zero;
	uint8_t cap_user_time_short;
	uint8_t reserved[6];
};
static_assert(sizeof(struct ptd_perfdata_time_conv) == 56, "time conv");
#define PTD_PERFDATA_TIME_CONV_MIN_SIZE 32u

/* A bit of the feature bitmap. */
static inline int ptd_perfdata_feat_test(const uint64_t *features,
					 unsigned int feat)
{
	return feat < PTD_PERFDATA_FEAT_BITS &&
	       ((features[feat / 64] >> (feat % 64)) & 1u);
}

static inline void ptd_perfdata_feat_set(uint64_t *features, unsigned int feat)
{
	if (feat < PTD_PERFDATA_FEAT_BITS)
		features[feat / 64] |= 1ull << (feat % 64);
}

#endif
